//! The global state table (replicated by Global Tables). docs/DATA_MODEL.md has the design and
//! the argument for each guarantee.
//!
//! | item | pk | sk | attributes | writer |
//! |---|---|---|---|---|
//! | auction | `AUCTION#<id>` | `META` | item, startingPrice, minIncrement, closesAt? | any (identical seeds) |
//! | bid copy | `BIDS#<id>#<bidder>` | `<bidId>#<region>` | bidId, bidder, amount, at, region, writeId | its Region |
//!
//! GSI `by-time` (`pk`, `at`) lists one bidder's copies newest first, whatever their bidIds.
//! | summary | `SUMMARY#<id>` | `<region>` | region, accepted, high* | its Region |
//!
//! `<bidder>` is the `sub` with `%` and `#` percent-encoded, so a partition key names exactly one
//! bidder. Every item written in two Regions is either identical in both (auctions) or has
//! one writer Region (bid copies, summaries): Global Tables' per-item last writer wins can
//! then never replace one user's data with another's.
//!
//! A bid is one `TransactWriteItems`: the copy (`attribute_not_exists(pk)`) and this Region's
//! summary (`accepted = :expected`), with the attempt's `writeId` as `ClientRequestToken`, so
//! an SDK retry of a committed transaction is recognised (by DynamoDB's idempotency window,
//! and by the copy's `writeId` after it) and answered `Committed`.
//!
//! Replication is Global Tables' business, not this adapter's: the lab emulates it around the
//! adapter (`wsdr-lab`'s `store` module), with [`DynamoStateStore::put_as_replicated`] to apply
//! another Region's write as Global Tables does, unconditionally.

use crate::classify::classify;
use crate::keys::{
    auction_of_bids_key, auction_of_key, bidder_segment, summary_of_keys, AUCTION_PREFIX,
    BIDS_PREFIX, LEDGER_SK, SUMMARY_PREFIX,
};
use crate::schema::{BID_AT, BY_TIME_INDEX, PK, SK};
use async_trait::async_trait;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeValue, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
};
use aws_sdk_dynamodb::Client;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use wsdr_core::items::Item as StateItem;
use wsdr_core::{
    Advance, Auction, BidCommit, BidRecord, CommitOutcome, Error, LastBid, LedgerHead, LedgerStore,
    RegionSummary, Result, StateStore, UserId,
};
use wsdr_protocol::{Amount, AuctionId, BidId};

type Item = HashMap<String, AttributeValue>;

const META: &str = "META";

/// Item reads and writes of one store, counted as DynamoDB bills them by item (a query
/// returning 3 items reads 3; a transaction of 2 puts writes 2), for `make bench`.
#[derive(Debug, Default)]
pub struct IoCounts {
    pub requests: AtomicU64,
    pub items_read: AtomicU64,
    pub items_written: AtomicU64,
}

impl IoCounts {
    /// (requests, items read, items written) so far.
    pub fn get(&self) -> (u64, u64, u64) {
        (
            self.requests.load(Ordering::Relaxed),
            self.items_read.load(Ordering::Relaxed),
            self.items_written.load(Ordering::Relaxed),
        )
    }

    fn read(&self, items: u64) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.items_read.fetch_add(items, Ordering::Relaxed);
    }

    fn wrote(&self, items: u64) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.items_written.fetch_add(items, Ordering::Relaxed);
    }
}

/// [`StateStore`] on a DynamoDB (Global) table.
#[derive(Debug, Clone)]
pub struct DynamoStateStore {
    client: Client,
    table: String,
    io: Arc<IoCounts>,
    /// The table is a multi-Region strongly consistent (MRSC) global table: bids go through
    /// the ledger head (`head`/`advance`/`settle`).
    strong: bool,
}

impl DynamoStateStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
            io: Arc::default(),
            strong: false,
        }
    }

    /// The same store on an MRSC table. Every read here is already `ConsistentRead` (on MRSC
    /// that is the latest version in every Region). What changes is what a failure means: a
    /// read, or a write that decides nothing (a copy's settle), that failed for a reason
    /// other than its own (timeout, 5xx, no connection) is taken as this Region being unable
    /// to reach the quorum (`Error::NoQuorum`), so the request goes to another Region:
    /// DynamoDB does not name isolation apart from other server errors. The write that
    /// decides a bid (`advance`) is different: after such a failure it may have committed,
    /// so it stays `Transient` and the bid is answered `unknown` (see `advance`).
    pub fn strongly_consistent(mut self) -> DynamoLedgerStore {
        self.strong = true;
        DynamoLedgerStore(self)
    }

    fn fail<E>(
        &self,
        error: &aws_sdk_dynamodb::error::SdkError<
            E,
            aws_smithy_runtime_api::client::orchestrator::HttpResponse,
        >,
    ) -> Error
    where
        E: aws_smithy_types::error::metadata::ProvideErrorMetadata + std::error::Error + 'static,
    {
        match classify(error) {
            Error::Transient(cause) if self.strong => Error::NoQuorum(cause),
            other => other,
        }
    }

    pub fn io(&self) -> &IoCounts {
        &self.io
    }

    /// Write `item` exactly as given, with no condition: how Global Tables applies a write
    /// replicated from another Region (the lab's replicator uses it; the Lambdas never do).
    pub async fn put_as_replicated(&self, item: &StateItem) -> Result<()> {
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(to_item(item)))
            .send()
            .await
            .map_err(|e| self.fail(&e))?;
        self.io.wrote(1);
        Ok(())
    }

    /// Every item of the table in key order (the lab's convergence check and tests; a scan:
    /// never on a request path).
    pub async fn dump(&self) -> Result<Vec<StateItem>> {
        let mut pages = self
            .client
            .scan()
            .table_name(&self.table)
            .consistent_read(true)
            .into_paginator()
            .items()
            .send();
        let mut out = Vec::new();
        while let Some(item) = pages.next().await {
            let item = item.map_err(|e| self.fail(&e))?;
            let pk = get_s(&item, PK)?.to_owned();
            let sk = get_s(&item, SK)?.to_owned();
            out.push(((pk.clone(), sk.clone()), parse_item(&pk, &sk, &item)?));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out.into_iter().map(|(_, item)| item).collect())
    }

    /// Every bid copy of an auction, all bidders (checkers and tests: a scan of the table,
    /// never on a request path).
    pub async fn all_bids(&self, auction: &AuctionId) -> Result<Vec<BidRecord>> {
        let mut pages = self
            .client
            .scan()
            .table_name(&self.table)
            .filter_expression("begins_with(pk, :bids)")
            .expression_attribute_values(":bids", s(format!("{BIDS_PREFIX}{auction}#")))
            .consistent_read(true)
            .into_paginator()
            .items()
            .send();
        let mut bids = Vec::new();
        while let Some(item) = pages.next().await {
            bids.push(parse_bid(auction, &item.map_err(|e| self.fail(&e))?)?);
        }
        Ok(bids)
    }

    /// The items of partition `pk` whose sort key starts with `prefix` (strongly consistent),
    /// at most `limit` of them. Every partition it reads is small: one auction's summaries
    /// (one per Region) or one bidder's bids in one auction.
    async fn query_partition(
        &self,
        pk: String,
        prefix: &str,
        limit: Option<usize>,
    ) -> Result<Vec<Item>> {
        let mut query = self
            .client
            .query()
            .table_name(&self.table)
            .expression_attribute_values(":pk", s(pk));
        // A key condition cannot compare with an empty string: no prefix, no condition on sk.
        query = if prefix.is_empty() {
            query.key_condition_expression("pk = :pk")
        } else {
            query
                .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
                .expression_attribute_values(":prefix", s(prefix))
        };
        let mut pages = query
            .set_limit(limit.map(|l| l.min(1000) as i32))
            .consistent_read(true)
            .into_paginator()
            .send();
        let mut items = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| self.fail(&e))?;
            let got = page.items.unwrap_or_default();
            self.io.read(got.len() as u64);
            items.extend(got);
            if limit.is_some_and(|l| items.len() >= l) {
                items.truncate(limit.unwrap_or(usize::MAX));
                break;
            }
        }
        Ok(items)
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    async fn get(&self, pk: String, sk: String) -> Result<Option<Item>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, AttributeValue::S(pk))
            .key(SK, AttributeValue::S(sk))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.fail(&e))?;
        self.io.read(u64::from(out.item.is_some()));
        Ok(out.item)
    }
}

fn auction_pk(id: &AuctionId) -> String {
    format!("{AUCTION_PREFIX}{id}")
}

/// One bidder's bids in one auction: their own partition.
fn bids_pk(auction: &AuctionId, bidder: &UserId) -> String {
    format!("{BIDS_PREFIX}{auction}#{}", bidder_segment(bidder.as_str()))
}

/// Every copy of a bid in its bidder's partition: a bidId has no `#` (ids.rs).
fn bid_copies_prefix(bid_id: &BidId) -> String {
    format!("{bid_id}#")
}

fn bid_sk(bid: &BidRecord) -> String {
    format!("{}{}", bid_copies_prefix(&bid.bid_id), bid.region)
}

/// One auction's summaries: their own partition, one item per Region.
fn summaries_pk(auction: &AuctionId) -> String {
    format!("{SUMMARY_PREFIX}{auction}")
}

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn n(v: u64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

fn malformed(field: &str) -> Error {
    Error::Internal(format!("state item has a missing or malformed `{field}`"))
}

fn get_s<'a>(item: &'a Item, field: &str) -> Result<&'a str> {
    item.get(field)
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
        .ok_or_else(|| malformed(field))
}

fn get_n(item: &Item, field: &str) -> Result<u64> {
    item.get(field)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| malformed(field))
}

fn is_conditional_check_failed<R>(error: &SdkError<PutItemError, R>) -> bool {
    matches!(
        error.as_service_error(),
        Some(PutItemError::ConditionalCheckFailedException(_))
    )
}

fn auction_item(auction: &Auction) -> Item {
    let mut item = Item::from([
        (PK.into(), s(auction_pk(&auction.id))),
        (SK.into(), s(META)),
        ("type".into(), s("auction")),
        ("item".into(), s(auction.item.clone())),
        ("startingPrice".into(), n(auction.starting_price.get())),
        ("minIncrement".into(), n(auction.min_increment)),
    ]);
    if let Some(closes_at) = auction.closes_at {
        item.insert("closesAt".into(), n(closes_at));
    }
    item
}

fn parse_auction(id: &AuctionId, item: &Item) -> Result<Auction> {
    Ok(Auction {
        id: id.clone(),
        item: get_s(item, "item")?.to_owned(),
        starting_price: Amount::new(get_n(item, "startingPrice")?)
            .map_err(|_| malformed("startingPrice"))?,
        min_increment: get_n(item, "minIncrement")?,
        closes_at: item
            .get("closesAt")
            .map(|_| get_n(item, "closesAt"))
            .transpose()?,
    })
}

fn bid_item(bid: &BidRecord, write_id: &str) -> Item {
    Item::from([
        (PK.into(), s(bids_pk(&bid.auction_id, &bid.bidder))),
        (SK.into(), s(bid_sk(bid))),
        ("type".into(), s("bid")),
        ("bidId".into(), s(bid.bid_id.as_str())),
        ("bidder".into(), s(bid.bidder.as_str())),
        ("amount".into(), n(bid.amount.get())),
        (BID_AT.into(), n(bid.at)),
        ("region".into(), s(bid.region.clone())),
        ("writeId".into(), s(write_id)),
    ])
}

fn parse_bid(auction_id: &AuctionId, item: &Item) -> Result<BidRecord> {
    Ok(BidRecord {
        auction_id: auction_id.clone(),
        bid_id: BidId::new(get_s(item, "bidId")?).map_err(|_| malformed("bidId"))?,
        bidder: UserId::new(get_s(item, "bidder")?).map_err(|_| malformed("bidder"))?,
        amount: Amount::new(get_n(item, "amount")?).map_err(|_| malformed("amount"))?,
        at: get_n(item, "at")?,
        region: get_s(item, "region")?.to_owned(),
    })
}

fn summary_item(auction: &AuctionId, summary: &RegionSummary) -> Item {
    let mut item = Item::from([
        (PK.into(), s(summaries_pk(auction))),
        (SK.into(), s(summary.region.clone())),
        ("type".into(), s("summary")),
        ("region".into(), s(summary.region.clone())),
        ("accepted".into(), n(summary.accepted)),
    ]);
    if let Some(high) = &summary.high {
        item.insert("highBidId".into(), s(high.bid_id.as_str()));
        item.insert("highBidder".into(), s(high.bidder.as_str()));
        item.insert("highAmount".into(), n(high.amount.get()));
        item.insert("highAt".into(), n(high.at));
        item.insert("highRegion".into(), s(high.region.clone()));
    }
    item
}

fn parse_summary(auction_id: &AuctionId, item: &Item) -> Result<RegionSummary> {
    let high = match item.get("highBidId") {
        None => None,
        Some(_) => Some(BidRecord {
            auction_id: auction_id.clone(),
            bid_id: BidId::new(get_s(item, "highBidId")?).map_err(|_| malformed("highBidId"))?,
            bidder: UserId::new(get_s(item, "highBidder")?).map_err(|_| malformed("highBidder"))?,
            amount: Amount::new(get_n(item, "highAmount")?).map_err(|_| malformed("highAmount"))?,
            at: get_n(item, "highAt")?,
            region: get_s(item, "highRegion")?.to_owned(),
        }),
    };
    Ok(RegionSummary {
        region: get_s(item, "region")?.to_owned(),
        accepted: get_n(item, "accepted")?,
        high,
    })
}

/// A strong-mode ledger head: the summary's attributes (so a summaries query reads it as the
/// one summary, labelled `global`) plus the newest accepted bid and its write id.
fn head_item(auction: &AuctionId, head: &LedgerHead) -> Item {
    let mut item = summary_item(auction, &head.summary);
    item.insert(SK.into(), s(LEDGER_SK));
    item.insert("type".into(), s("ledger"));
    if let Some(last) = &head.last {
        item.insert("lastBidId".into(), s(last.bid.bid_id.as_str()));
        item.insert("lastBidder".into(), s(last.bid.bidder.as_str()));
        item.insert("lastAmount".into(), n(last.bid.amount.get()));
        item.insert("lastAt".into(), n(last.bid.at));
        item.insert("lastRegion".into(), s(last.bid.region.clone()));
        item.insert("lastWriteId".into(), s(last.write_id.clone()));
    }
    item
}

fn parse_head(auction_id: &AuctionId, item: &Item) -> Result<LedgerHead> {
    let last = match item.get("lastBidId") {
        None => None,
        Some(_) => Some(LastBid {
            bid: BidRecord {
                auction_id: auction_id.clone(),
                bid_id: BidId::new(get_s(item, "lastBidId")?)
                    .map_err(|_| malformed("lastBidId"))?,
                bidder: UserId::new(get_s(item, "lastBidder")?)
                    .map_err(|_| malformed("lastBidder"))?,
                amount: Amount::new(get_n(item, "lastAmount")?)
                    .map_err(|_| malformed("lastAmount"))?,
                at: get_n(item, "lastAt")?,
                region: get_s(item, "lastRegion")?.to_owned(),
            },
            write_id: get_s(item, "lastWriteId")?.to_owned(),
        }),
    };
    Ok(LedgerHead {
        summary: parse_summary(auction_id, item)?,
        last,
    })
}

/// A domain item as a table item (without the lab's stamp).
fn to_item(item: &StateItem) -> Item {
    match item {
        StateItem::Auction(auction) => auction_item(auction),
        StateItem::Bid { bid, write_id } => bid_item(bid, write_id),
        StateItem::Summary { auction, summary } => summary_item(auction, summary),
        StateItem::Head { auction, head } => head_item(auction, head),
    }
}

/// Any item of the table back into the domain, by its key shape.
fn parse_item(pk: &str, sk: &str, item: &Item) -> Result<StateItem> {
    if sk == LEDGER_SK {
        if let Some((id, _)) = summary_of_keys(pk, sk) {
            return Ok(StateItem::Head {
                head: parse_head(&id, item)?,
                auction: id,
            });
        }
    }
    if let Some((id, _region)) = summary_of_keys(pk, sk) {
        return Ok(StateItem::Summary {
            summary: parse_summary(&id, item)?,
            auction: id,
        });
    }
    if let Some(id) = auction_of_bids_key(pk) {
        return Ok(StateItem::Bid {
            bid: parse_bid(&id, item)?,
            write_id: get_s(item, "writeId")?.to_owned(),
        });
    }
    match auction_of_key(pk) {
        Some(id) if sk == META => Ok(StateItem::Auction(parse_auction(&id, item)?)),
        _ => Err(malformed(PK)),
    }
}

/// What a cancelled bid transaction means: `Some(outcome)` for a condition that failed,
/// `None` for anything else (classified by the caller).
fn cancelled_outcome(
    error: &TransactWriteItemsError,
    commit: &BidCommit,
) -> Option<Result<CommitOutcome>> {
    let TransactWriteItemsError::TransactionCanceledException(cancelled) = error else {
        return None;
    };
    let reasons = cancelled.cancellation_reasons();
    let code = |i: usize| reasons.get(i).and_then(|r| r.code()).unwrap_or("None");
    if code(0) == "ConditionalCheckFailed" {
        let Some(old) = reasons.first().and_then(|r| r.item()) else {
            return Some(Err(Error::Transient(
                "bid copy exists but was not returned".into(),
            )));
        };
        let old = old.clone();
        return Some(match get_s(&old, "writeId") {
            Ok(id) if id == commit.write_id => Ok(CommitOutcome::Committed),
            _ => parse_bid(&commit.bid.auction_id, &old).map(CommitOutcome::Exists),
        });
    }
    if code(1) == "ConditionalCheckFailed"
        || code(0) == "TransactionConflict"
        || code(1) == "TransactionConflict"
    {
        return Some(Ok(CommitOutcome::Conflict));
    }
    None
}

#[async_trait]
impl StateStore for DynamoStateStore {
    async fn put_auction_if_absent(&self, auction: &Auction) -> Result<bool> {
        let item = auction_item(auction);
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(e) if is_conditional_check_failed(&e) => Ok(false),
            Err(e) => Err(self.fail(&e)),
        }
    }

    async fn auction(&self, id: &AuctionId) -> Result<Option<Auction>> {
        self.get(auction_pk(id), META.into())
            .await?
            .map(|item| parse_auction(id, &item))
            .transpose()
    }

    async fn bid_copies(
        &self,
        auction: &AuctionId,
        bidder: &UserId,
        bid_id: &BidId,
    ) -> Result<Vec<BidRecord>> {
        self.query_partition(
            bids_pk(auction, bidder),
            &bid_copies_prefix(bid_id),
            Some(16),
        )
        .await?
        .iter()
        .map(|item| parse_bid(auction, item))
        .collect()
    }

    async fn summaries(&self, auction: &AuctionId) -> Result<Vec<RegionSummary>> {
        self.query_partition(summaries_pk(auction), "", Some(64))
            .await?
            .iter()
            .map(|item| parse_summary(auction, item))
            .collect()
    }

    async fn commit_bid(&self, commit: &BidCommit) -> Result<CommitOutcome> {
        let bid = bid_item(&commit.bid, &commit.write_id);
        let summary = summary_item(&commit.bid.auction_id, &commit.summary);
        let put_bid = Put::builder()
            .table_name(&self.table)
            .set_item(Some(bid))
            .condition_expression("attribute_not_exists(pk)")
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(|e| Error::Internal(e.to_string()))?;
        let summary_condition = if commit.expected_accepted == 0 {
            "attribute_not_exists(pk)"
        } else {
            "accepted = :expected"
        };
        let mut put_summary = Put::builder()
            .table_name(&self.table)
            .set_item(Some(summary))
            .condition_expression(summary_condition);
        if commit.expected_accepted != 0 {
            put_summary =
                put_summary.expression_attribute_values(":expected", n(commit.expected_accepted));
        }
        let put_summary = put_summary
            .build()
            .map_err(|e| Error::Internal(e.to_string()))?;
        let result = self
            .client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().put(put_bid).build())
            .transact_items(TransactWriteItem::builder().put(put_summary).build())
            // DynamoDB answers a retry with the same token (within 10 minutes) as the first
            // call: the SDK's retry after a lost response sees success, not a failed condition.
            .client_request_token(&commit.write_id)
            .send()
            .await;
        self.io.wrote(2);
        match result {
            Ok(_) => Ok(CommitOutcome::Committed),
            Err(e) => match e
                .as_service_error()
                .and_then(|se| cancelled_outcome(se, commit))
            {
                Some(outcome) => outcome,
                None => Err(self.fail(&e)),
            },
        }
    }

    async fn newest_user_bids(
        &self,
        auction: &AuctionId,
        bidder: &UserId,
        limit: usize,
    ) -> Result<Vec<BidRecord>> {
        // The GSI, newest first: the base table's sort key is bidId order, which says nothing
        // of time. GSI reads are eventually consistent (within the Region), like everything
        // replication brings; settlement uses point reads on the table instead.
        let mut pages = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(BY_TIME_INDEX)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", s(bids_pk(auction, bidder)))
            .scan_index_forward(false)
            .limit(limit.clamp(1, 1000) as i32)
            .into_paginator()
            .send();
        let mut bids = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| self.fail(&e))?;
            let got = page.items.unwrap_or_default();
            self.io.read(got.len() as u64);
            for item in &got {
                bids.push(parse_bid(auction, item)?);
            }
            if bids.len() >= limit {
                break;
            }
        }
        // Equal times come back in no documented order: the port's order breaks the tie.
        bids.sort_by(|a, b| (b.at, &b.bid_id, &b.region).cmp(&(a.at, &a.bid_id, &a.region)));
        bids.truncate(limit);
        Ok(bids)
    }
}

/// [`LedgerStore`] on a DynamoDB multi-Region strongly consistent (MRSC) global table:
/// [`DynamoStateStore::strongly_consistent`] makes one. Only this type keeps a ledger, so a
/// strong service cannot be built on an eventually consistent table.
#[derive(Debug, Clone)]
pub struct DynamoLedgerStore(DynamoStateStore);

impl DynamoLedgerStore {
    pub fn io(&self) -> &IoCounts {
        self.0.io()
    }

    /// Every item of the table (tests and the lab's convergence checks).
    pub async fn dump(&self) -> Result<Vec<StateItem>> {
        self.0.dump().await
    }

    /// Every bid copy of an auction.
    pub async fn all_bids(&self, auction: &AuctionId) -> Result<Vec<BidRecord>> {
        self.0.all_bids(auction).await
    }
}

#[async_trait]
impl StateStore for DynamoLedgerStore {
    async fn put_auction_if_absent(&self, auction: &Auction) -> Result<bool> {
        self.0.put_auction_if_absent(auction).await
    }

    async fn auction(&self, id: &AuctionId) -> Result<Option<Auction>> {
        self.0.auction(id).await
    }

    async fn bid_copies(
        &self,
        auction: &AuctionId,
        bidder: &UserId,
        bid_id: &BidId,
    ) -> Result<Vec<BidRecord>> {
        self.0.bid_copies(auction, bidder, bid_id).await
    }

    async fn summaries(&self, auction: &AuctionId) -> Result<Vec<RegionSummary>> {
        self.0.summaries(auction).await
    }

    async fn commit_bid(&self, commit: &BidCommit) -> Result<CommitOutcome> {
        self.0.commit_bid(commit).await
    }

    async fn newest_user_bids(
        &self,
        auction: &AuctionId,
        bidder: &UserId,
        limit: usize,
    ) -> Result<Vec<BidRecord>> {
        self.0.newest_user_bids(auction, bidder, limit).await
    }
}

#[async_trait]
impl LedgerStore for DynamoLedgerStore {
    async fn head(&self, auction: &AuctionId) -> Result<Option<LedgerHead>> {
        self.0
            .get(summaries_pk(auction), LEDGER_SK.into())
            .await?
            .map(|item| parse_head(auction, &item))
            .transpose()
    }

    async fn advance(
        &self,
        auction: &AuctionId,
        expected_accepted: u64,
        next: &LedgerHead,
    ) -> Result<Advance> {
        let mut put = self
            .0
            .client
            .put_item()
            .table_name(&self.0.table)
            .set_item(Some(head_item(auction, next)))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        put = if expected_accepted == 0 {
            put.condition_expression("attribute_not_exists(pk)")
        } else {
            put.condition_expression("accepted = :expected")
                .expression_attribute_values(":expected", n(expected_accepted))
        };
        let result = put.send().await;
        self.0.io.wrote(1);
        match result {
            Ok(_) => Ok(Advance::Advanced),
            Err(e) => match e.as_service_error() {
                Some(PutItemError::ConditionalCheckFailedException(failed)) => {
                    // The SDK's retry of this very write after a lost answer finds its own
                    // head: recognised by the write id.
                    let current = failed.item().and_then(|old| old.get("lastWriteId"));
                    let mine = next.last.as_ref().map(|l| s(l.write_id.clone()));
                    Ok(if mine.is_some() && current == mine.as_ref() {
                        Advance::Advanced
                    } else {
                        Advance::Moved
                    })
                }
                // A failed write that decides a bid: unlike a read, a write whose request
                // timed out, got a 5xx or lost its connection may still have committed
                // (DynamoDB documents `InternalServerError` as "the request may or may not
                // have succeeded"). Those stay `Transient`, which the service answers
                // `unknown`, never `NoQuorum` (`redirect`); only answers that say the request
                // was refused (conditional check, replicated write conflict, throttling,
                // validation) prove nothing was written.
                _ => Err(classify(&e)),
            },
        }
    }

    async fn settle(&self, bid: &BidRecord, write_id: &str) -> Result<()> {
        let result = self
            .0
            .client
            .put_item()
            .table_name(&self.0.table)
            .set_item(Some(bid_item(bid, write_id)))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        self.0.io.wrote(1);
        match result {
            Ok(_) => Ok(()),
            // Written before (by the accepting request or a later bid): the same item.
            Err(e) if is_conditional_check_failed(&e) => Ok(()),
            Err(e) => Err(self.0.fail(&e)),
        }
    }
}
