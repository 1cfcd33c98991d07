//! The ports the domain needs, named by capability. Adapters: [`crate::memory`] here,
//! DynamoDB and API Gateway in `wsdr-aws`.

use crate::model::{Auction, AuctionSnapshot, BidRecord, ConnectionId, UserBid, UserId};
use crate::Result;
use async_trait::async_trait;
use wsdr_protocol::{AuctionId, BidId};

/// What [`StateStore::insert_bid`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InsertOutcome {
    /// The bid is now recorded.
    Inserted,
    /// A bid with this id was already recorded (by this or another Region); here it is.
    Exists(BidRecord),
}

/// Replicated application state (Global Tables in AWS): auctions, bids, users' last bids.
#[async_trait]
pub trait StateStore: Send + Sync {
    /// Create the auction unless one with this id exists. Returns whether it was created.
    async fn put_auction_if_absent(&self, auction: &Auction) -> Result<bool>;
    async fn auction(&self, id: &AuctionId) -> Result<Option<Auction>>;
    async fn bid(&self, auction: &AuctionId, bid_id: &BidId) -> Result<Option<BidRecord>>;
    /// Record the bid unless a bid with the same (auction, bidId) exists: the idempotency
    /// guarantee. Must be atomic (a conditional write).
    async fn insert_bid(&self, bid: &BidRecord) -> Result<InsertOutcome>;
    /// The high bid (by [`BidRecord::rank`]) and the number of distinct bids.
    async fn snapshot(&self, auction: &AuctionId) -> Result<AuctionSnapshot>;
    async fn last_bid(&self, user: &UserId, auction: &AuctionId) -> Result<Option<UserBid>>;
    /// Remember the user's latest bid; an older one (by `at`) never replaces a newer one.
    async fn record_last_bid(
        &self,
        user: &UserId,
        auction: &AuctionId,
        bid: &UserBid,
    ) -> Result<()>;
}

/// The Region's own registry of live connections (not replicated).
#[async_trait]
pub trait Connections: Send + Sync {
    async fn register(&self, connection: &ConnectionId, user: &UserId, now_ms: u64) -> Result<()>;
    /// Deliver the auction's updates to this connection from now on.
    async fn subscribe(
        &self,
        connection: &ConnectionId,
        user: &UserId,
        auction: &AuctionId,
        now_ms: u64,
    ) -> Result<()>;
    /// Live subscribers of an auction. Records past their expiry are ignored even if the
    /// backend has not deleted them yet (DynamoDB TTL deletion is lazy).
    async fn subscribers(&self, auction: &AuctionId, now_ms: u64) -> Result<Vec<ConnectionId>>;
    /// Forget a connection and its subscriptions. Removing an unknown one is not an error.
    async fn remove(&self, connection: &ConnectionId) -> Result<()>;
}

/// Pushes a frame to one connection (`@connections` POST in AWS).
#[async_trait]
pub trait Notifier: Send + Sync {
    /// `Err(Error::Gone)` when the connection no longer exists, `Err(Error::Throttled)` when
    /// the backend asks to slow down.
    async fn send(&self, connection: &ConnectionId, payload: &[u8]) -> Result<()>;
}

/// One health datapoint of a Region's API, as the canary publishes it.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthDatapoint {
    /// The API the datapoint is about (the metric's `ApiId` dimension).
    pub api_id: String,
    pub healthy: bool,
    /// Round-trip time of the successful probes, if any succeeded.
    pub latency_ms: Option<f64>,
    /// Milliseconds since the epoch at which the probes ran.
    pub timestamp_ms: u64,
}

/// Where health datapoints go (CloudWatch in AWS, the lab's metrics store locally).
#[async_trait]
pub trait Metrics: Send + Sync {
    async fn put_health(&self, point: &HealthDatapoint) -> Result<()>;
}

/// Wall-clock time in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now_ms(&self) -> u64;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }
}
