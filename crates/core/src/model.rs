//! Domain values.

use crate::Error;
use std::cmp::Ordering;
use wsdr_protocol::{Amount, AuctionId, AuctionView, BidId, HighBidView, LastBidView};

/// The authenticated user: the JWT `sub`. All user state is keyed by this, never by a
/// connection id (which changes on every reconnect and means nothing in the other Region).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UserId(String);

impl UserId {
    /// Longest `sub` accepted. OIDC does not bound it; Cognito's are 36 characters.
    pub const MAX_LEN: usize = 255;

    pub fn new(value: impl Into<String>) -> Result<Self, Error> {
        let value = value.into();
        if value.is_empty() || value.len() > Self::MAX_LEN {
            return Err(Error::BadRequest(format!(
                "user id must be 1 to {} bytes",
                Self::MAX_LEN
            )));
        }
        if value.chars().any(char::is_control) {
            return Err(Error::BadRequest(
                "user id contains a control character".into(),
            ));
        }
        Ok(Self(value))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for UserId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// An API Gateway connection id. Regional: it means nothing in the other Region.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnectionId(String);

impl ConnectionId {
    pub fn new(value: impl Into<String>) -> Result<Self, Error> {
        let value = value.into();
        if value.is_empty() || value.len() > 128 || value.chars().any(char::is_control) {
            return Err(Error::BadRequest("connection id is malformed".into()));
        }
        Ok(Self(value))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ConnectionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

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

/// One accepted bid: its own item in the state store, keyed by (auction, bidId).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BidRecord {
    pub auction_id: AuctionId,
    pub bid_id: BidId,
    pub bidder: UserId,
    pub amount: Amount,
    /// Milliseconds since the epoch at which the accepting Region took it.
    pub at: u64,
    /// The Region that accepted it.
    pub region: String,
}

impl BidRecord {
    /// The total order that picks the high bid: higher amount first; on equal amounts the
    /// earlier bid; then the smaller bidId. It depends only on the bids themselves, so every
    /// Region holding the same set of bids picks the same high bid: this is what makes
    /// concurrent acceptance in two Regions converge.
    pub fn rank(&self, other: &BidRecord) -> Ordering {
        self.amount
            .cmp(&other.amount)
            .then_with(|| other.at.cmp(&self.at))
            .then_with(|| other.bid_id.cmp(&self.bid_id))
    }

    /// Whether `self` is the higher bid of the two (see [`BidRecord::rank`]).
    pub fn outranks(&self, other: &BidRecord) -> bool {
        self.rank(other) == Ordering::Greater
    }

    /// Whether `other` is a replay of this bid: same id, auction, bidder and amount.
    pub fn is_same_bid(&self, other: &BidRecord) -> bool {
        self.bid_id == other.bid_id
            && self.auction_id == other.auction_id
            && self.bidder == other.bidder
            && self.amount == other.amount
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

/// The derived state of an auction: the highest bid and how many distinct bids exist.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuctionSnapshot {
    pub high_bid: Option<BidRecord>,
    pub bid_count: u64,
}

impl AuctionSnapshot {
    pub fn view(&self, auction: &Auction) -> AuctionView {
        AuctionView {
            id: auction.id.clone(),
            item: auction.item.clone(),
            high_bid: self.high_bid.as_ref().map(BidRecord::view),
            bid_count: self.bid_count,
            version: self.bid_count,
        }
    }
}

/// A user's last bid in one auction (the `you.lastBid` of a `state` frame).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserBid {
    pub amount: Amount,
    pub bid_id: BidId,
    pub at: u64,
}

impl UserBid {
    pub fn view(&self) -> LastBidView {
        LastBidView {
            amount: self.amount,
            bid_id: self.bid_id.clone(),
            at: self.at,
        }
    }
}

impl From<&BidRecord> for UserBid {
    fn from(bid: &BidRecord) -> Self {
        UserBid {
            amount: bid.amount,
            bid_id: bid.bid_id.clone(),
            at: bid.at,
        }
    }
}
