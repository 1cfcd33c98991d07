//! The items of the replicated state store, as Global Tables sees them: each write is a
//! whole item under a key, stamped by the Region that wrote it. Adapters convert these to
//! their storage; the lab's replicator ships them.

use crate::model::{Auction, BidRecord, LedgerHead, RegionSummary, UserId};
use wsdr_protocol::{AuctionId, BidId};

/// One replicated item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Auction(Auction),
    /// One Region's copy of a bid, with the id of the write that created it.
    Bid {
        bid: BidRecord,
        write_id: String,
    },
    /// One Region's summary of an auction.
    Summary {
        auction: AuctionId,
        summary: RegionSummary,
    },
    /// Strong mode: the auction's ledger head (one per auction, written by every Region).
    Head {
        auction: AuctionId,
        head: LedgerHead,
    },
}

/// The key of an item: two writes with the same key are versions of one item.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ItemKey {
    Auction(AuctionId),
    Bid {
        auction: AuctionId,
        bidder: UserId,
        bid_id: BidId,
        region: String,
    },
    Summary {
        auction: AuctionId,
        region: String,
    },
    Head(AuctionId),
}

impl Item {
    pub fn key(&self) -> ItemKey {
        match self {
            Item::Auction(a) => ItemKey::Auction(a.id.clone()),
            Item::Bid { bid, .. } => ItemKey::Bid {
                auction: bid.auction_id.clone(),
                bidder: bid.bidder.clone(),
                bid_id: bid.bid_id.clone(),
                region: bid.region.clone(),
            },
            Item::Summary { auction, summary } => ItemKey::Summary {
                auction: auction.clone(),
                region: summary.region.clone(),
            },
            Item::Head { auction, .. } => ItemKey::Head(auction.clone()),
        }
    }

    /// The auction the item belongs to.
    pub fn auction_id(&self) -> &AuctionId {
        match self {
            Item::Auction(a) => &a.id,
            Item::Bid { bid, .. } => &bid.auction_id,
            Item::Summary { auction, .. } | Item::Head { auction, .. } => auction,
        }
    }
}

/// A write as Global Tables replicates it: the whole item with its last-writer-wins stamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub item: Item,
    /// Milliseconds since the epoch at which the writing Region wrote it, by that Region's
    /// clock (Global Tables' own timestamp; the Regions' clocks may disagree).
    pub written_at: u64,
    /// The Region that wrote it; breaks ties between equal timestamps deterministically.
    pub writer: String,
}

/// Global Tables' conflict rule between two versions of one item, by their stamps (the write
/// time by the writing Region's clock, then the writer, so that a tie still has one winner):
/// whether `candidate` replaces `current`. The one place the rule is written.
pub fn last_writer_wins(candidate: (u64, &str), current: (u64, &str)) -> bool {
    candidate > current
}

impl Change {
    /// The version's stamp: (write time, writer).
    pub fn stamp(&self) -> (u64, &str) {
        (self.written_at, &self.writer)
    }

    /// Whether this version replaces `other` ([`last_writer_wins`]).
    pub fn newer_than(&self, other: &Change) -> bool {
        last_writer_wins(self.stamp(), other.stamp())
    }
}
