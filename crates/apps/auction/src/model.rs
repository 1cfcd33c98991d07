//! The auction's values: an auction and its rules, a bid copy, a Region's summary, the merged
//! snapshot and the strong-mode head, read and written as the kit's ops and summaries
//! (store.rs).

use std::cmp::Ordering;
use std::collections::BTreeMap;
use wsdr_core::{UserId, LEDGER};
use wsdr_protocol::{
    Amount, AuctionId, AuctionView, BidId, HighBidView, LastBidView, OwnBidView, Versions,
};

/// An auction and its rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Auction {
    pub id: AuctionId,
    pub item: String,
    /// The first bid must be at least this.
    pub starting_price: Amount,
    /// A bid must beat the high bid by at least this many minor units (at least 1).
    pub min_increment: u64,
    /// Milliseconds since the epoch after which bids are rejected; `None` = never closes.
    pub closes_at: Option<u64>,
}

impl Auction {
    pub fn is_open(&self, now_ms: u64) -> bool {
        self.closes_at.is_none_or(|t| now_ms < t)
    }

    /// The smallest amount that can be accepted given the current high bid.
    pub fn minimum_next_bid(&self, high: Option<&BidRecord>) -> u64 {
        match high {
            None => self.starting_price.get(),
            Some(h) => h.amount.get().saturating_add(self.min_increment.max(1)),
        }
    }
}

/// One Region's copy of an accepted bid. A copy is its own item in the state store, keyed by
/// (auction, bidder, bidId, Region), so no write in any Region can replace another user's bid
/// or another Region's copy (docs/DATA_MODEL.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BidRecord {
    pub auction_id: AuctionId,
    pub bid_id: BidId,
    pub bidder: UserId,
    pub amount: Amount,
    /// Milliseconds since the epoch at which the accepting Region took it (its own clock).
    pub at: u64,
    /// The Region that accepted this copy (and the only one that ever writes it).
    pub region: String,
    /// The accepting Region's accepted count for the auction with this bid counted in (in
    /// strong mode, the ledger's length): gapless per Region. Not part of the bid's rank.
    pub position: u64,
}

impl BidRecord {
    /// The total order that picks the high bid: higher amount first; on equal amounts the
    /// earlier copy; then bidder, bidId and Region. It depends only on the bid copies
    /// themselves, never on who saw what first, so every Region holding the same copies picks
    /// the same high bid: this is what makes concurrent acceptance in two Regions converge,
    /// and what keeps a converged tie stable.
    pub fn rank(&self, other: &BidRecord) -> Ordering {
        self.amount
            .cmp(&other.amount)
            .then_with(|| other.at.cmp(&self.at))
            .then_with(|| other.bidder.cmp(&self.bidder))
            .then_with(|| other.bid_id.cmp(&self.bid_id))
            .then_with(|| other.region.cmp(&self.region))
    }

    /// Whether `self` is the higher bid of the two (see [`BidRecord::rank`]).
    pub fn outranks(&self, other: &BidRecord) -> bool {
        self.rank(other) == Ordering::Greater
    }

    pub fn view(&self) -> HighBidView {
        HighBidView {
            amount: self.amount,
            bidder: self.bidder.as_str().to_owned(),
            bid_id: self.bid_id.clone(),
            at: self.at,
        }
    }
}

/// The higher of two optional bids by [`BidRecord::rank`].
pub fn higher<'a>(a: Option<&'a BidRecord>, b: Option<&'a BidRecord>) -> Option<&'a BidRecord> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b.outranks(a) { b } else { a }),
        (a, None) => a,
        (None, b) => b,
    }
}

/// One Region's summary of an auction: how many bids it accepted and the highest of them.
/// Only its own Region writes it (conditionally on `accepted`, in the same transaction as the
/// bid copy), so replication only ever delivers newer versions of it: a max register and a
/// counter that never move backwards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionSummary {
    pub region: String,
    /// Bids this Region accepted in the auction; also the summary's version.
    pub accepted: u64,
    /// The highest of those bids.
    pub high: Option<BidRecord>,
}

impl RegionSummary {
    pub fn empty(region: impl Into<String>) -> Self {
        Self {
            region: region.into(),
            accepted: 0,
            high: None,
        }
    }

    /// The summary after this Region accepts `bid`.
    pub fn with_bid(&self, bid: &BidRecord) -> Self {
        Self {
            region: self.region.clone(),
            accepted: self.accepted + 1,
            high: higher(self.high.as_ref(), Some(bid)).cloned(),
        }
    }
}

/// The derived state of an auction: every Region's summary merged. A pure function of the
/// summaries, so any Region that has seen the same versions shows the same state.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuctionSnapshot {
    pub high_bid: Option<BidRecord>,
    /// Bids accepted, summed over the Regions.
    pub bid_count: u64,
    /// Accepted bids per Region (a version vector).
    pub versions: Versions,
}

impl AuctionSnapshot {
    /// Merge the Regions' summaries (any order; duplicates of one Region keep the newest).
    pub fn merge<'a>(summaries: impl IntoIterator<Item = &'a RegionSummary>) -> Self {
        let mut newest: BTreeMap<&str, &RegionSummary> = BTreeMap::new();
        for summary in summaries {
            let slot = newest.entry(summary.region.as_str()).or_insert(summary);
            if summary.accepted > slot.accepted {
                *slot = summary;
            }
        }
        let mut snapshot = AuctionSnapshot::default();
        for summary in newest.values() {
            snapshot.high_bid = higher(snapshot.high_bid.as_ref(), summary.high.as_ref()).cloned();
            snapshot.bid_count += summary.accepted;
            snapshot
                .versions
                .insert(summary.region.clone(), summary.accepted);
        }
        snapshot
    }

    pub fn view(&self, auction: &Auction) -> AuctionView {
        AuctionView {
            id: auction.id.clone(),
            item: auction.item.clone(),
            high_bid: self.high_bid.as_ref().map(BidRecord::view),
            bid_count: self.bid_count,
            version: self.bid_count,
            versions: self.versions.clone(),
            starting_price: Some(auction.starting_price),
            min_increment: Some(auction.min_increment.max(1)),
            min_next_bid: Amount::new(auction.minimum_next_bid(self.high_bid.as_ref())).ok(),
        }
    }
}

/// The newest accepted bid of a strong-mode auction, as its ledger head records it, with the
/// id of the write that accepted it. Its copy may not be written yet (the head is the one
/// write that decides a bid); the next bid writes it before it may move the head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastBid {
    pub bid: BidRecord,
    pub write_id: String,
}

/// A strong-mode auction's single point of order: the summary of every accepted bid (its
/// `accepted` is the ledger's length and the head's version) and the newest bid. Every
/// accepted bid but the newest has its copy; every bid is decided by one conditional write
/// of this item (docs/DATA_MODEL.md, "Strong mode").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerHead {
    /// Region label [`LEDGER`].
    pub summary: RegionSummary,
    pub last: Option<LastBid>,
}

impl LedgerHead {
    pub fn empty() -> Self {
        Self {
            summary: RegionSummary::empty(LEDGER),
            last: None,
        }
    }

    /// The head after `bid` is accepted by the write `write_id`.
    pub fn with_bid(&self, bid: &BidRecord, write_id: &str) -> Self {
        Self {
            summary: self.summary.with_bid(bid),
            last: Some(LastBid {
                bid: bid.clone(),
                write_id: write_id.to_owned(),
            }),
        }
    }
}

/// Every bid a Region holds: its bid copies, and the bids that `carried` (each Region's
/// summary's high bid; in strong mode the ledger head's newest bid) hold whole although their
/// copy item has not arrived or been written. Global Tables replicates items one by one, so
/// a summary can arrive before the copy of the bid it names, and that copy may never arrive
/// (its Region lost for good); the summary carries the bid whole (bidder, bidId, amount,
/// time, Region), so the Region can read it all the same, and the winner it shows is always
/// a bid it holds: winner, `you.bids` and `you.settled` read the same set. One entry per
/// (bidder, bidId, Region), as the copies' own key.
pub fn held_bids<'a>(
    copies: impl IntoIterator<Item = BidRecord>,
    carried: impl IntoIterator<Item = &'a BidRecord>,
) -> Vec<BidRecord> {
    let mut held: Vec<BidRecord> = copies.into_iter().collect();
    for bid in carried {
        let known = held
            .iter()
            .any(|c| c.bidder == bid.bidder && c.bid_id == bid.bid_id && c.region == bid.region);
        if !known {
            held.push(bid.clone());
        }
    }
    held
}

/// The caller's own bids as `getState` shows them: copies of one bid (same bidId and amount,
/// several Regions) folded into one entry, newest first, at most `limit`.
pub fn own_bids(copies: &[BidRecord], limit: usize) -> Vec<OwnBidView> {
    let mut folded: BTreeMap<(&BidId, Amount), OwnBidView> = BTreeMap::new();
    for copy in copies {
        let entry = folded
            .entry((&copy.bid_id, copy.amount))
            .or_insert_with(|| OwnBidView {
                bid_id: copy.bid_id.clone(),
                amount: copy.amount,
                at: copy.at,
                regions: Vec::new(),
            });
        entry.at = entry.at.min(copy.at);
        if !entry.regions.contains(&copy.region) {
            entry.regions.push(copy.region.clone());
            entry.regions.sort();
        }
    }
    let mut bids: Vec<OwnBidView> = folded.into_values().collect();
    bids.sort_by(|a, b| b.at.cmp(&a.at).then_with(|| b.bid_id.cmp(&a.bid_id)));
    bids.truncate(limit);
    bids
}

/// The latest of the caller's bids (the `you.lastBid` of a `state` frame).
pub fn last_bid(bids: &[OwnBidView]) -> Option<LastBidView> {
    bids.first().map(|b| LastBidView {
        amount: b.amount,
        bid_id: b.bid_id.clone(),
        at: b.at,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn bid(bidder: &str, bid_id: &str, region: &str, amount: u64) -> BidRecord {
        BidRecord {
            auction_id: AuctionId::new("lot-1").unwrap(),
            bidder: UserId::new(bidder).unwrap(),
            bid_id: BidId::new(bid_id).unwrap(),
            amount: Amount::new(amount).unwrap(),
            at: 1_700_000_000_000 + amount,
            region: region.to_owned(),
            position: 1,
        }
    }

    fn summary(region: &str, accepted: u64, high: Option<BidRecord>) -> RegionSummary {
        RegionSummary {
            region: region.to_owned(),
            accepted,
            high,
        }
    }

    #[test]
    fn a_merge_keeps_each_regions_newest_summary_in_any_order() {
        let older = summary("r1", 1, Some(bid("ann", "bid-00001", "r1", 100)));
        let newer = summary("r1", 2, Some(bid("bob", "bid-00002", "r1", 150)));
        let other = summary("r2", 1, Some(bid("cy", "bid-00003", "r2", 120)));
        for order in [
            vec![&older, &newer, &other],
            vec![&newer, &older, &other],
            vec![&other, &older, &newer],
        ] {
            let snapshot = AuctionSnapshot::merge(order);
            assert_eq!(snapshot.bid_count, 3, "the newest of r1 (2) and r2 (1)");
            assert_eq!(snapshot.versions.get("r1"), Some(&2));
            assert_eq!(snapshot.versions.get("r2"), Some(&1));
            assert_eq!(snapshot.high_bid.unwrap().amount.get(), 150);
        }
    }

    #[test]
    fn a_region_holds_its_copies_and_the_bids_summaries_carry_once_each() {
        let copy = bid("ann", "bid-00001", "r1", 100);
        // Carried by a summary whose copy has not arrived: held.
        let carried = bid("bob", "bid-00002", "r2", 150);
        // The same bid as a copy held already: not twice.
        let same = copy.clone();
        // Another key's bid that differs from the copy in one part of the key each: held.
        let other_bidder = bid("cy", "bid-00001", "r1", 100);
        let other_id = bid("ann", "bid-00009", "r1", 100);
        let other_region = bid("ann", "bid-00001", "r2", 100);
        let held = held_bids(
            vec![copy.clone()],
            [&carried, &same, &other_bidder, &other_id, &other_region],
        );
        assert_eq!(
            held,
            vec![copy, carried, other_bidder, other_id, other_region]
        );
        assert!(held_bids(Vec::new(), std::iter::empty()).is_empty());
    }
}
