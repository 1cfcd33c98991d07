//! The global state table (replicated by Global Tables).
//!
//! | item | pk | sk | attributes |
//! |---|---|---|---|
//! | auction | `AUCTION#<id>` | `META` | item, startingPrice, minIncrement, closesAt? |
//! | bid | `AUCTION#<id>` | `BID#<bidId>` | bidId, bidder, amount, at, region |
//! | user's last bid | `USER#<sub>` | `AUCTION#<id>` | bidId, amount, at |
//!
//! Every bid is its own item written with `attribute_not_exists(pk)`: the idempotency key is
//! the item key, and two Regions only ever write the same item for the same bid (a replay),
//! so last-writer-wins replication can never drop an acknowledged bid.
//!
//! With [`DynamoStateStore::with_change_feed`] (the lab's `--dynamodb` mode) every write also
//! carries its last-writer-wins stamp (`writtenAt`, `writer`) and is published on a change
//! feed, and [`DynamoStateStore::apply_replicated`] applies another Region's write with
//! Global Tables' per-item rule: the later stamp wins. On AWS, Global Tables does this itself.

use crate::classify::classify;
use crate::schema::{PK, SK};
use async_trait::async_trait;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use aws_sdk_dynamodb::Client;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;
use wsdr_core::memory::{Change, Item as StateItem};
use wsdr_core::{
    Auction, AuctionSnapshot, BidRecord, Error, InsertOutcome, Result, StateStore, UserBid, UserId,
};
use wsdr_protocol::{Amount, AuctionId, BidId};

type Item = HashMap<String, AttributeValue>;

const META: &str = "META";
const BID_PREFIX: &str = "BID#";

/// [`StateStore`] on a DynamoDB (Global) table.
#[derive(Debug, Clone)]
pub struct DynamoStateStore {
    client: Client,
    table: String,
    replication: Option<Arc<Replication>>,
}

/// Stamps and the change feed of a store that replicates by itself (the lab).
#[derive(Debug)]
struct Replication {
    writer: String,
    feeds: Mutex<Vec<mpsc::UnboundedSender<Change>>>,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl DynamoStateStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
            replication: None,
        }
    }

    /// Stamp every write as written by `writer` and publish it on [`Self::change_feed`].
    pub fn with_change_feed(mut self, writer: impl Into<String>) -> Self {
        self.replication = Some(Arc::new(Replication {
            writer: writer.into(),
            feeds: Mutex::new(Vec::new()),
        }));
        self
    }

    /// This store's own writes from now on (empty and closed without a change feed).
    pub fn change_feed(&self) -> mpsc::UnboundedReceiver<Change> {
        let (tx, rx) = mpsc::unbounded_channel();
        if let Some(replication) = &self.replication {
            replication
                .feeds
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(tx);
        }
        rx
    }

    /// Add the stamp to an item about to be written; returns it.
    fn stamp(&self, item: &mut Item) -> Option<(u64, String)> {
        let replication = self.replication.as_ref()?;
        let written_at = now_ms();
        item.insert("writtenAt".into(), n(written_at));
        item.insert("writer".into(), s(replication.writer.clone()));
        Some((written_at, replication.writer.clone()))
    }

    fn publish(&self, item: StateItem, stamp: Option<(u64, String)>) {
        let (Some(replication), Some((written_at, writer))) = (&self.replication, stamp) else {
            return;
        };
        let change = Change {
            item,
            written_at,
            writer,
        };
        replication
            .feeds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|feed| feed.send(change.clone()).is_ok());
    }

    /// Apply a write replicated from another Region: per item, the later stamp
    /// (`writtenAt`, then `writer`) wins. Returns whether it was applied.
    pub async fn apply_replicated(&self, change: &Change) -> Result<bool> {
        let mut item = match &change.item {
            StateItem::Auction(auction) => auction_item(auction),
            StateItem::Bid(bid) => bid_item(bid),
            StateItem::LastBid { user, auction, bid } => last_bid_item(user, auction, bid),
        };
        item.insert("writtenAt".into(), n(change.written_at));
        item.insert("writer".into(), s(change.writer.clone()));
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(
                "attribute_not_exists(pk) OR attribute_not_exists(writtenAt) \
                 OR writtenAt < :w OR (writtenAt = :w AND writer < :writer)",
            )
            .expression_attribute_values(":w", n(change.written_at))
            .expression_attribute_values(":writer", s(change.writer.clone()))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(e) if is_conditional_check_failed(&e) => Ok(false),
            Err(e) => Err(classify(&e)),
        }
    }

    /// Every item of the table with its stamp, sorted by key (the lab's convergence check;
    /// a scan: never on a request path).
    pub async fn dump(&self) -> Result<Vec<(String, String, Change)>> {
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
            let item = item.map_err(|e| classify(&e))?;
            let pk = get_s(&item, PK)?.to_owned();
            let sk = get_s(&item, SK)?.to_owned();
            let state = parse_item(&pk, &sk, &item)?;
            let change = Change {
                item: state,
                written_at: item
                    .get("writtenAt")
                    .map(|_| get_n(&item, "writtenAt"))
                    .transpose()?
                    .unwrap_or(0),
                writer: item
                    .get("writer")
                    .map(|_| get_s(&item, "writer").map(str::to_owned))
                    .transpose()?
                    .unwrap_or_default(),
            };
            out.push((pk, sk, change));
        }
        out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        Ok(out)
    }

    /// Every bid of an auction (checkers and tests).
    pub async fn all_bids(&self, auction: &AuctionId) -> Result<Vec<BidRecord>> {
        self.query_bids(auction).await
    }

    /// One strongly consistent query over the auction's bid items, projected to what a
    /// [`BidRecord`] needs. Cost grows with the number of bids: see docs/DATA_MODEL.md.
    async fn query_bids(&self, auction: &AuctionId) -> Result<Vec<BidRecord>> {
        let mut pages = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND begins_with(sk, :bid)")
            .expression_attribute_values(":pk", s(auction_pk(auction)))
            .expression_attribute_values(":bid", s(BID_PREFIX))
            .projection_expression("bidId, bidder, amount, #at, #region")
            .expression_attribute_names("#at", "at")
            .expression_attribute_names("#region", "region")
            .consistent_read(true)
            .into_paginator()
            .items()
            .send();
        let mut bids = Vec::new();
        while let Some(item) = pages.next().await {
            let item = item.map_err(|e| classify(&e))?;
            bids.push(parse_bid(auction, &item)?);
        }
        Ok(bids)
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
            .map_err(|e| classify(&e))?;
        Ok(out.item)
    }
}

fn auction_pk(id: &AuctionId) -> String {
    format!("AUCTION#{id}")
}

fn bid_sk(id: &BidId) -> String {
    format!("{BID_PREFIX}{id}")
}

fn user_pk(user: &UserId) -> String {
    format!("USER#{user}")
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

fn bid_item(bid: &BidRecord) -> Item {
    Item::from([
        (PK.into(), s(auction_pk(&bid.auction_id))),
        (SK.into(), s(bid_sk(&bid.bid_id))),
        ("type".into(), s("bid")),
        ("bidId".into(), s(bid.bid_id.as_str())),
        ("bidder".into(), s(bid.bidder.as_str())),
        ("amount".into(), n(bid.amount.get())),
        ("at".into(), n(bid.at)),
        ("region".into(), s(bid.region.clone())),
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

fn last_bid_item(user: &UserId, auction: &AuctionId, bid: &UserBid) -> Item {
    Item::from([
        (PK.into(), s(user_pk(user))),
        (SK.into(), s(auction_pk(auction))),
        ("type".into(), s("lastBid")),
        ("bidId".into(), s(bid.bid_id.as_str())),
        ("amount".into(), n(bid.amount.get())),
        ("at".into(), n(bid.at)),
    ])
}

/// Any item of the table back into the domain, by its key shape.
fn parse_item(pk: &str, sk: &str, item: &Item) -> Result<StateItem> {
    let auction_id = |key: &str| {
        key.strip_prefix("AUCTION#")
            .and_then(|id| AuctionId::new(id).ok())
            .ok_or_else(|| malformed(PK))
    };
    if let Some(user) = pk.strip_prefix("USER#") {
        return Ok(StateItem::LastBid {
            user: UserId::new(user).map_err(|_| malformed(PK))?,
            auction: auction_id(sk)?,
            bid: UserBid {
                amount: Amount::new(get_n(item, "amount")?).map_err(|_| malformed("amount"))?,
                bid_id: BidId::new(get_s(item, "bidId")?).map_err(|_| malformed("bidId"))?,
                at: get_n(item, "at")?,
            },
        });
    }
    let id = auction_id(pk)?;
    if sk == META {
        Ok(StateItem::Auction(parse_auction(&id, item)?))
    } else {
        Ok(StateItem::Bid(parse_bid(&id, item)?))
    }
}

#[async_trait]
impl StateStore for DynamoStateStore {
    async fn put_auction_if_absent(&self, auction: &Auction) -> Result<bool> {
        let mut item = auction_item(auction);
        let stamp = self.stamp(&mut item);
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        match result {
            Ok(_) => {
                self.publish(StateItem::Auction(auction.clone()), stamp);
                Ok(true)
            }
            Err(e) if is_conditional_check_failed(&e) => Ok(false),
            Err(e) => Err(classify(&e)),
        }
    }

    async fn auction(&self, id: &AuctionId) -> Result<Option<Auction>> {
        self.get(auction_pk(id), META.into())
            .await?
            .map(|item| parse_auction(id, &item))
            .transpose()
    }

    async fn bid(&self, auction: &AuctionId, bid_id: &BidId) -> Result<Option<BidRecord>> {
        self.get(auction_pk(auction), bid_sk(bid_id))
            .await?
            .map(|item| parse_bid(auction, &item))
            .transpose()
    }

    async fn insert_bid(&self, bid: &BidRecord) -> Result<InsertOutcome> {
        let mut item = bid_item(bid);
        let stamp = self.stamp(&mut item);
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(_) => {
                self.publish(StateItem::Bid(bid.clone()), stamp);
                Ok(InsertOutcome::Inserted)
            }
            Err(e) if is_conditional_check_failed(&e) => {
                let existing = match e.as_service_error() {
                    Some(PutItemError::ConditionalCheckFailedException(ccf)) => ccf.item.clone(),
                    _ => None,
                };
                let existing = match existing {
                    Some(item) => parse_bid(&bid.auction_id, &item)?,
                    None => self
                        .bid(&bid.auction_id, &bid.bid_id)
                        .await?
                        .ok_or_else(|| Error::Transient("bid vanished after conflict".into()))?,
                };
                Ok(InsertOutcome::Exists(existing))
            }
            Err(e) => Err(classify(&e)),
        }
    }

    async fn snapshot(&self, auction: &AuctionId) -> Result<AuctionSnapshot> {
        let mut snapshot = AuctionSnapshot::default();
        for bid in self.query_bids(auction).await? {
            snapshot.bid_count += 1;
            if snapshot.high_bid.as_ref().is_none_or(|h| bid.outranks(h)) {
                snapshot.high_bid = Some(bid);
            }
        }
        Ok(snapshot)
    }

    async fn last_bid(&self, user: &UserId, auction: &AuctionId) -> Result<Option<UserBid>> {
        let Some(item) = self.get(user_pk(user), auction_pk(auction)).await? else {
            return Ok(None);
        };
        Ok(Some(UserBid {
            amount: Amount::new(get_n(&item, "amount")?).map_err(|_| malformed("amount"))?,
            bid_id: BidId::new(get_s(&item, "bidId")?).map_err(|_| malformed("bidId"))?,
            at: get_n(&item, "at")?,
        }))
    }

    async fn record_last_bid(
        &self,
        user: &UserId,
        auction: &AuctionId,
        bid: &UserBid,
    ) -> Result<()> {
        let mut item = last_bid_item(user, auction, bid);
        let stamp = self.stamp(&mut item);
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk) OR #at < :at")
            .expression_attribute_names("#at", "at")
            .expression_attribute_values(":at", n(bid.at))
            .send()
            .await;
        match result {
            Ok(_) => {
                self.publish(
                    StateItem::LastBid {
                        user: user.clone(),
                        auction: auction.clone(),
                        bid: bid.clone(),
                    },
                    stamp,
                );
                Ok(())
            }
            // A newer bid is already recorded: keeping it is the point.
            Err(e) if is_conditional_check_failed(&e) => Ok(()),
            Err(e) => Err(classify(&e)),
        }
    }
}
