//! The auction's values in the kit's items: an auction is a topic of namespace `auction`
//! whose seed is its rules, a bid is an op `{"amount": n}`, a Region's summary folds the
//! highest bid it accepted, and the strong-mode ledger head is the topic's head. The
//! auction's ports ([`StateStore`], [`LedgerStore`]) are written once, over any
//! [`OpStore`]/[`HeadStore`]: no backend knows what a bid is.

use crate::model::{
    higher, Auction, AuctionSnapshot, BidRecord, LastBid, LedgerHead, RegionSummary,
};
use crate::BidReason;
use async_trait::async_trait;
use serde_json::{json, Map, Value as Json};
use wsdr_core::items::{LastOp, StoredHead, StoredOp, StoredSummary, TopicKey};
use wsdr_core::ports::{Advance, CommitOutcome, HeadStore, OpCommit, OpStore};
use wsdr_core::write::App;
use wsdr_core::{Error, Result, UserId};
use wsdr_protocol::{bid_digest, Amount, AuctionId, BidId, Namespace, OpId, TopicName};

/// The topic of an auction.
pub fn topic(auction: &AuctionId) -> TopicKey {
    TopicKey::new(Namespace::auction(), TopicName::from(auction))
}

/// The auction of a topic, if it is one.
pub fn auction_of(topic: &TopicKey) -> Option<AuctionId> {
    (topic.namespace == Namespace::auction())
        .then(|| AuctionId::new(topic.name.as_str()).ok())
        .flatten()
}

fn malformed(what: &str) -> Error {
    Error::Internal(format!(
        "stored auction item has a missing or malformed `{what}`"
    ))
}

fn field_u64(value: &Json, field: &str) -> Result<u64> {
    value
        .get(field)
        .and_then(Json::as_u64)
        .ok_or_else(|| malformed(field))
}

fn field_str<'a>(value: &'a Json, field: &str) -> Result<&'a str> {
    value
        .get(field)
        .and_then(Json::as_str)
        .ok_or_else(|| malformed(field))
}

/// An auction's rules as its topic's seed.
pub fn meta_of(auction: &Auction) -> Json {
    let mut meta = Map::new();
    meta.insert("item".into(), json!(auction.item));
    meta.insert("startingPrice".into(), json!(auction.starting_price.get()));
    meta.insert("minIncrement".into(), json!(auction.min_increment));
    if let Some(closes_at) = auction.closes_at {
        meta.insert("closesAt".into(), json!(closes_at));
    }
    Json::Object(meta)
}

/// The auction a seed describes.
pub fn auction_from_meta(id: &AuctionId, meta: &Json) -> Result<Auction> {
    Ok(Auction {
        id: id.clone(),
        item: field_str(meta, "item")?.to_owned(),
        starting_price: Amount::new(field_u64(meta, "startingPrice")?)
            .map_err(|_| malformed("startingPrice"))?,
        min_increment: field_u64(meta, "minIncrement")?,
        closes_at: meta
            .get("closesAt")
            .map(|_| field_u64(meta, "closesAt"))
            .transpose()?,
    })
}

/// The amount a bid's op carries: `{"amount": n}` and nothing else, `n` a valid amount. Bad
/// input is a protocol error and touches nothing.
pub fn amount_of(op: &Json) -> std::result::Result<Amount, wsdr_protocol::ProtocolError> {
    use wsdr_protocol::{ErrorCode, ProtocolError};
    let invalid = |message: &str| ProtocolError::new(ErrorCode::InvalidField, message);
    let fields = op
        .as_object()
        .filter(|fields| fields.len() == 1)
        .ok_or_else(|| invalid("an auction's op is `{\"amount\": <minor units>}`"))?;
    match fields.get("amount").and_then(Json::as_u64) {
        Some(amount) => Amount::new(amount),
        None => Err(invalid(
            "`op.amount` must be an integer number of minor units",
        )),
    }
}

/// A bid copy as the kit stores an op.
pub fn op_of(bid: &BidRecord) -> StoredOp {
    StoredOp {
        topic: topic(&bid.auction_id),
        author: bid.bidder.clone(),
        op_id: OpId::from(&bid.bid_id),
        region: bid.region.clone(),
        at: bid.at,
        position: bid.position,
        digest: bid_digest(bid.amount),
        op: json!({ "amount": bid.amount.get() }),
    }
}

/// The bid an op copy is. Its digest must be the amount's: a copy whose payload and digest
/// disagree is corrupt, not a bid.
pub fn bid_of(copy: &StoredOp) -> Result<BidRecord> {
    let auction_id = auction_of(&copy.topic).ok_or_else(|| malformed("topic"))?;
    let amount = Amount::new(field_u64(&copy.op, "amount")?).map_err(|_| malformed("amount"))?;
    if bid_digest(amount) != copy.digest {
        return Err(malformed("digest"));
    }
    Ok(BidRecord {
        auction_id,
        bid_id: BidId::new(copy.op_id.as_str()).map_err(|_| malformed("opId"))?,
        bidder: copy.author.clone(),
        amount,
        at: copy.at,
        region: copy.region.clone(),
        position: copy.position,
    })
}

/// A bid inside a summary's JSON (the summary carries its high bid whole).
fn bid_json(bid: &BidRecord) -> Json {
    json!({
        "bidId": bid.bid_id.as_str(),
        "bidder": bid.bidder.as_str(),
        "amount": bid.amount.get(),
        "at": bid.at,
        "region": bid.region,
        "position": bid.position,
    })
}

fn bid_from_json(auction: &AuctionId, value: &Json) -> Result<BidRecord> {
    Ok(BidRecord {
        auction_id: auction.clone(),
        bid_id: BidId::new(field_str(value, "bidId")?).map_err(|_| malformed("bidId"))?,
        bidder: UserId::new(field_str(value, "bidder")?).map_err(|_| malformed("bidder"))?,
        amount: Amount::new(field_u64(value, "amount")?).map_err(|_| malformed("amount"))?,
        at: field_u64(value, "at")?,
        region: field_str(value, "region")?.to_owned(),
        position: field_u64(value, "position")?,
    })
}

/// A Region's summary as the kit stores it: the count is the kit's, the high bid the app's.
pub fn summary_of(summary: &RegionSummary) -> StoredSummary {
    StoredSummary {
        region: summary.region.clone(),
        accepted: summary.accepted,
        app: json!({ "high": summary.high.as_ref().map(bid_json) }),
    }
}

/// The auction's summary a stored summary is.
pub fn region_summary_of(auction: &AuctionId, stored: &StoredSummary) -> Result<RegionSummary> {
    let high = match stored.app.get("high") {
        None | Some(Json::Null) => None,
        Some(bid) => Some(bid_from_json(auction, bid)?),
    };
    Ok(RegionSummary {
        region: stored.region.clone(),
        accepted: stored.accepted,
        high,
    })
}

/// A ledger head as the kit's topic head.
pub fn head_of(head: &LedgerHead) -> StoredHead {
    StoredHead {
        summary: summary_of(&head.summary),
        last: head.last.as_ref().map(|last| LastOp {
            op: op_of(&last.bid),
            write_id: last.write_id.clone(),
        }),
    }
}

/// The ledger head a stored head is.
pub fn ledger_head_of(auction: &AuctionId, head: &StoredHead) -> Result<LedgerHead> {
    Ok(LedgerHead {
        summary: region_summary_of(auction, &head.summary)?,
        last: head
            .last
            .as_ref()
            .map(|last| {
                Ok::<_, Error>(LastBid {
                    bid: bid_of(&last.op)?,
                    write_id: last.write_id.clone(),
                })
            })
            .transpose()?,
    })
}

/// Why `amount` cannot be accepted against `high` (the rule both consistency modes apply).
pub fn too_low(auction: &Auction, amount: Amount, high: Option<&BidRecord>) -> Option<BidReason> {
    if amount.get() >= auction.minimum_next_bid(high) {
        return None;
    }
    Some(if high.is_none() {
        BidReason::BelowStartingPrice
    } else {
        BidReason::TooLow
    })
}

/// The auction as an app of the kit's write path ([`wsdr_core::write`]): a bid is an amount, a
/// Region's summary folds the highest bid it accepted, and a bid is refused when the auction
/// is closed or the amount is under the minimum next bid against every Region's high bid
/// this Region holds. The kit does the rest (replays, retries, the commit, strong mode).
#[derive(Debug, Clone, Copy, Default)]
pub struct AuctionApp;

impl App for AuctionApp {
    type Meta = Auction;
    type Op = Amount;
    type Summary = Option<BidRecord>;
    type Reject = BidReason;

    fn op_json(&self, amount: &Amount) -> Json {
        json!({ "amount": amount.get() })
    }

    fn summary(&self, topic: &TopicKey, stored: &StoredSummary) -> Result<Option<BidRecord>> {
        let auction = auction_of(topic).ok_or_else(|| malformed("topic"))?;
        Ok(region_summary_of(&auction, stored)?.high)
    }

    fn summary_json(&self, high: &Option<BidRecord>) -> Json {
        json!({ "high": high.as_ref().map(bid_json) })
    }

    fn empty_summary(&self) -> Option<BidRecord> {
        None
    }

    fn admit(&self, auction: &Auction, now_ms: u64) -> std::result::Result<(), BidReason> {
        if auction.is_open(now_ms) {
            Ok(())
        } else {
            Err(BidReason::AuctionClosed)
        }
    }

    fn decide(
        &self,
        auction: &Auction,
        seen: &[Option<BidRecord>],
        amount: &Amount,
    ) -> std::result::Result<(), BidReason> {
        let high = seen
            .iter()
            .fold(None, |high, region| higher(high, region.as_ref()));
        match too_low(auction, *amount, high) {
            Some(reason) => Err(reason),
            None => Ok(()),
        }
    }

    fn carried(&self, _topic: &TopicKey, high: &Option<BidRecord>) -> Vec<StoredOp> {
        high.iter().map(op_of).collect()
    }

    fn fold(
        &self,
        own: &Option<BidRecord>,
        copy: &StoredOp,
        _amount: &Amount,
    ) -> Result<Option<BidRecord>> {
        let bid = bid_of(copy)?;
        Ok(higher(own.as_ref(), Some(&bid)).cloned())
    }
}

/// The auction on the kit's envelope (`write` and `getState` naming `auction:<id>`): the same
/// bids, a view that is the `state` frame's `auction`.
impl wsdr_core::topics::TopicApp for AuctionApp {
    fn namespace(&self) -> Namespace {
        Namespace::auction()
    }

    fn parse_op(&self, op: &Json) -> std::result::Result<Amount, wsdr_protocol::ProtocolError> {
        amount_of(op)
    }

    fn meta(&self, topic: &TopicKey, stored: &Json) -> Result<Auction> {
        let auction = auction_of(topic).ok_or_else(|| malformed("topic"))?;
        auction_from_meta(&auction, stored)
    }

    fn reject_code(&self, reason: BidReason) -> &'static str {
        match reason {
            // The envelope's names for the kit's own refusals.
            BidReason::UnknownAuction => BidReason::UnknownTopic.as_str(),
            BidReason::BidIdReused => BidReason::OpIdReused.as_str(),
            reason => reason.as_str(),
        }
    }

    fn view(&self, auction: &Auction, seen: &[(StoredSummary, Option<BidRecord>)]) -> Json {
        let summaries: Vec<RegionSummary> = seen
            .iter()
            .map(|(stored, high)| RegionSummary {
                region: stored.region.clone(),
                accepted: stored.accepted,
                high: high.clone(),
            })
            .collect();
        serde_json::to_value(AuctionSnapshot::merge(&summaries).view(auction)).unwrap_or_default()
    }
}

/// Every copy among `copies` that is a bid, in their order (a copy that is no bid is left
/// out: nothing but the auction writes its topics).
pub fn bids_in(copies: &[StoredOp]) -> Vec<BidRecord> {
    copies.iter().filter_map(|copy| bid_of(copy).ok()).collect()
}

/// Every bid copy a memory store holds of an auction, in key order (tests and the lab).
#[cfg(feature = "memory")]
pub trait BidsHeld {
    fn all_bids(&self, auction: &AuctionId) -> Vec<BidRecord>;
}

#[cfg(feature = "memory")]
impl BidsHeld for wsdr_core::memory::MemoryStateStore {
    fn all_bids(&self, auction: &AuctionId) -> Vec<BidRecord> {
        bids_in(&self.all_ops(&topic(auction)))
    }
}

/// One bid to record, as [`StateStore::commit_bid`] takes it: this Region's copy of the bid
/// and this Region's next summary, written together or not at all ([`OpCommit`] in bids).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BidCommit {
    /// This Region's copy (`bid.region` is this Region; `bid.position` is
    /// `summary.accepted`).
    pub bid: BidRecord,
    /// Unique to this attempt (see [`OpCommit::write_id`]).
    pub write_id: String,
    /// `accepted` of this Region's summary as read before the decision (0 = no summary yet).
    pub expected_accepted: u64,
    /// This Region's summary with the bid counted in.
    pub summary: RegionSummary,
}

/// The auction's state store: the kit's [`OpStore`] read and written in bids. Implemented
/// once, for every op store.
#[async_trait]
pub trait StateStore: Send + Sync {
    /// Create the auction unless one with this id exists. Returns whether it was created.
    async fn put_auction_if_absent(&self, auction: &Auction) -> Result<bool>;
    async fn auction(&self, id: &AuctionId) -> Result<Option<Auction>>;
    /// Every Region's copy of `bidder`'s bid `bid_id` that this store holds (at most one per
    /// Region).
    async fn bid_copies(
        &self,
        auction: &AuctionId,
        bidder: &UserId,
        bid_id: &BidId,
    ) -> Result<Vec<BidRecord>>;
    /// Every Region's summary of the auction that this store holds.
    async fn summaries(&self, auction: &AuctionId) -> Result<Vec<RegionSummary>>;
    /// Write the bid copy and the summary atomically: the copy only if its key is new, the
    /// summary only if it still has `expected_accepted`.
    async fn commit_bid(&self, commit: &BidCommit) -> Result<CommitOutcome<BidRecord>>;
    /// The auction's state merged from every summary this store holds.
    async fn snapshot(&self, auction: &AuctionId) -> Result<AuctionSnapshot> {
        Ok(AuctionSnapshot::merge(&self.summaries(auction).await?))
    }
    /// `bidder`'s newest bid copies in the auction ([`OpStore::newest_by_author`]).
    async fn newest_user_bids(
        &self,
        auction: &AuctionId,
        bidder: &UserId,
        limit: usize,
    ) -> Result<Vec<BidRecord>>;
}

#[async_trait]
impl<S: OpStore + ?Sized> StateStore for S {
    async fn put_auction_if_absent(&self, auction: &Auction) -> Result<bool> {
        self.put_meta_if_absent(&topic(&auction.id), &meta_of(auction))
            .await
    }

    async fn auction(&self, id: &AuctionId) -> Result<Option<Auction>> {
        self.meta(&topic(id))
            .await?
            .map(|meta| auction_from_meta(id, &meta))
            .transpose()
    }

    async fn bid_copies(
        &self,
        auction: &AuctionId,
        bidder: &UserId,
        bid_id: &BidId,
    ) -> Result<Vec<BidRecord>> {
        self.copies(&topic(auction), bidder, &OpId::from(bid_id))
            .await?
            .iter()
            .map(bid_of)
            .collect()
    }

    async fn summaries(&self, auction: &AuctionId) -> Result<Vec<RegionSummary>> {
        OpStore::summaries(self, &topic(auction))
            .await?
            .iter()
            .map(|s| region_summary_of(auction, s))
            .collect()
    }

    async fn commit_bid(&self, commit: &BidCommit) -> Result<CommitOutcome<BidRecord>> {
        let outcome = self
            .commit(&OpCommit {
                copy: op_of(&commit.bid),
                write_id: commit.write_id.clone(),
                expected_accepted: commit.expected_accepted,
                summary: summary_of(&commit.summary),
            })
            .await?;
        Ok(match outcome {
            CommitOutcome::Committed => CommitOutcome::Committed,
            CommitOutcome::Exists(copy) => CommitOutcome::Exists(bid_of(&copy)?),
            CommitOutcome::Conflict => CommitOutcome::Conflict,
        })
    }

    async fn newest_user_bids(
        &self,
        auction: &AuctionId,
        bidder: &UserId,
        limit: usize,
    ) -> Result<Vec<BidRecord>> {
        self.newest_by_author(&topic(auction), bidder, limit)
            .await?
            .iter()
            .map(bid_of)
            .collect()
    }
}

/// The auction's strong-mode store: the kit's [`HeadStore`] read and written in bids. Strong
/// mode is built on one ([`crate::AuctionService::strong`]); only head stores implement it.
#[async_trait]
pub trait LedgerStore: StateStore {
    /// The auction's ledger head, if any bid was ever accepted.
    async fn head(&self, auction: &AuctionId) -> Result<Option<LedgerHead>>;
    /// Replace the auction's head with `next` if it still has `expected_accepted` accepted
    /// bids (0: no head yet).
    async fn advance(
        &self,
        auction: &AuctionId,
        expected_accepted: u64,
        next: &LedgerHead,
    ) -> Result<Advance>;
    /// Write the copy of an accepted bid unless it exists.
    async fn settle(&self, bid: &BidRecord, write_id: &str) -> Result<()>;
}

#[async_trait]
impl<S: HeadStore + ?Sized> LedgerStore for S {
    async fn head(&self, auction: &AuctionId) -> Result<Option<LedgerHead>> {
        HeadStore::head(self, &topic(auction))
            .await?
            .map(|head| ledger_head_of(auction, &head))
            .transpose()
    }

    async fn advance(
        &self,
        auction: &AuctionId,
        expected_accepted: u64,
        next: &LedgerHead,
    ) -> Result<Advance> {
        HeadStore::advance(self, &topic(auction), expected_accepted, &head_of(next)).await
    }

    async fn settle(&self, bid: &BidRecord, write_id: &str) -> Result<()> {
        HeadStore::settle(self, &op_of(bid), write_id).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_auction_keeps_the_kits_laws() {
        let auction = crate::model::Auction {
            id: wsdr_protocol::AuctionId::new("lot-9").unwrap(),
            item: "a lamp".into(),
            starting_price: wsdr_protocol::Amount::new(100).unwrap(),
            min_increment: 10,
            closes_at: None,
        };
        let topic = topic(&auction.id);
        let sample: Vec<(&str, Json)> = [100, 120, 110, 150, 200, 199]
            .iter()
            .enumerate()
            .map(|(i, amount)| {
                (
                    ["ann", "bo", "cy"][i % 3],
                    serde_json::json!({ "amount": amount }),
                )
            })
            .collect();
        let meta = meta_of(&auction);
        assert_eq!(
            wsdr_core::laws::check(&AuctionApp, &topic, &meta, &sample),
            Ok(())
        );
    }

    fn bid(amount: u64, position: u64) -> BidRecord {
        BidRecord {
            auction_id: AuctionId::new("lot-1").unwrap(),
            bid_id: BidId::new("bid-00001").unwrap(),
            bidder: UserId::new("alice").unwrap(),
            amount: Amount::new(amount).unwrap(),
            at: 1_700_000_000_000,
            region: "us-east-1".into(),
            position,
        }
    }

    #[test]
    fn every_auction_value_comes_back_from_its_item() {
        let auction = Auction {
            id: AuctionId::new("lot-1").unwrap(),
            item: "a lamp".into(),
            starting_price: Amount::new(100).unwrap(),
            min_increment: 5,
            closes_at: Some(1_700_000_100_000),
        };
        assert_eq!(
            auction_from_meta(&auction.id, &meta_of(&auction)).unwrap(),
            auction
        );
        let open = Auction {
            closes_at: None,
            ..auction.clone()
        };
        assert_eq!(auction_from_meta(&open.id, &meta_of(&open)).unwrap(), open);
        let high = bid(150, 3);
        assert_eq!(bid_of(&op_of(&high)).unwrap(), high);
        let summary = RegionSummary {
            region: "us-east-1".into(),
            accepted: 3,
            high: Some(high.clone()),
        };
        assert_eq!(
            region_summary_of(&auction.id, &summary_of(&summary)).unwrap(),
            summary
        );
        let empty = RegionSummary::empty("us-west-2");
        assert_eq!(
            region_summary_of(&auction.id, &summary_of(&empty)).unwrap(),
            empty
        );
        let head = LedgerHead::empty().with_bid(&high, "w-1");
        assert_eq!(ledger_head_of(&auction.id, &head_of(&head)).unwrap(), head);
    }

    #[test]
    fn a_copy_whose_payload_and_digest_disagree_is_no_bid() {
        let mut copy = op_of(&bid(150, 1));
        copy.op = json!({ "amount": 151 });
        assert!(bid_of(&copy).is_err());
        let mut other_app = op_of(&bid(150, 1));
        other_app.topic = TopicKey::new(
            Namespace::new("chat").unwrap(),
            TopicName::new("lot-1").unwrap(),
        );
        assert!(bid_of(&other_app).is_err());
        let mut no_amount = op_of(&bid(150, 1));
        no_amount.op = json!({ "text": "hi" });
        assert!(bid_of(&no_amount).is_err());
    }

    #[tokio::test]
    async fn an_accepted_bids_copy_is_settled_once_under_its_auctions_topic() {
        use wsdr_core::memory::{ManualClock, MemoryStateStore};
        let store = MemoryStateStore::new("mrsc", std::sync::Arc::new(ManualClock::new(1)));
        let high = bid(150, 1);
        assert_eq!(topic(&high.auction_id).to_string(), "auction:lot-1");
        LedgerStore::settle(&store, &high, "w-1").await.unwrap();
        LedgerStore::settle(&store, &high, "w-2").await.unwrap();
        assert_eq!(store.all_bids(&high.auction_id), vec![high.clone()]);
        assert_eq!(store.all_ops(&topic(&high.auction_id)), vec![op_of(&high)]);
    }

    #[tokio::test]
    async fn the_auctions_reads_are_the_kits_reads_in_bids() {
        use wsdr_core::memory::{ManualClock, MemoryStateStore};
        let store = MemoryStateStore::new("us-east-1", std::sync::Arc::new(ManualClock::new(1)));
        let auction = AuctionId::new("lot-1").unwrap();
        let mut summary = RegionSummary::empty("us-east-1");
        for (n, amount) in [(1u64, 150), (2, 170), (3, 160)] {
            let bid = BidRecord {
                bid_id: BidId::new(format!("bid-0000{n}")).unwrap(),
                at: 1_700_000_000_000 + n,
                ..bid(amount, n)
            };
            let next = summary.with_bid(&bid);
            let outcome = StateStore::commit_bid(
                &store,
                &BidCommit {
                    bid,
                    write_id: format!("w-{n}"),
                    expected_accepted: summary.accepted,
                    summary: next.clone(),
                },
            )
            .await
            .unwrap();
            assert_eq!(outcome, CommitOutcome::Committed);
            summary = next;
        }
        let alice = UserId::new("alice").unwrap();
        let newest = store.newest_user_bids(&auction, &alice, 2).await.unwrap();
        let amounts: Vec<u64> = newest.iter().map(|b| b.amount.get()).collect();
        assert_eq!(amounts, vec![160, 170], "newest first, at most the limit");
        let copies = store
            .bid_copies(&auction, &alice, &BidId::new("bid-00002").unwrap())
            .await
            .unwrap();
        assert_eq!(copies.len(), 1);
        assert_eq!(copies[0].amount.get(), 170);
        let snapshot = store.snapshot(&auction).await.unwrap();
        assert_eq!(snapshot.bid_count, 3);
        assert_eq!(snapshot.high_bid.map(|b| b.amount.get()), Some(170));
        assert_eq!(
            StateStore::summaries(&store, &auction).await.unwrap(),
            vec![summary]
        );
    }

    #[test]
    fn a_regions_high_bid_is_carried_whole_by_its_summary() {
        let high = bid(150, 2);
        let auction = topic(&high.auction_id);
        assert_eq!(
            AuctionApp.carried(&auction, &Some(high.clone())),
            vec![op_of(&high)]
        );
        assert!(AuctionApp.carried(&auction, &None).is_empty());
    }

    #[test]
    fn a_bid_digest_is_the_digest_of_its_op() {
        let copy = op_of(&bid(150, 1));
        assert_eq!(copy.digest, wsdr_protocol::Digest::of(&copy.op).unwrap());
    }
}
