//! In-memory adapters for every port: for tests, and for the lab's default state store.
//!
//! [`MemoryStateStore`] models DynamoDB Global Tables closely enough to reason about
//! failover: every write is an item stamped with (time, writer Region); a change feed emits
//! local writes; [`MemoryStateStore::apply_replicated`] applies a remote write with per-item
//! last-writer-wins, exactly the MREC rule. The lab wires two of these with a lagging,
//! cuttable link between them.

use crate::model::{Auction, AuctionSnapshot, BidRecord, ConnectionId, UserBid, UserId};
use crate::ports::{
    Clock, Connections, HealthDatapoint, InsertOutcome, Metrics, Notifier, StateStore,
};
use crate::{Error, Result};
use async_trait::async_trait;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::mpsc;
use wsdr_protocol::{AuctionId, BidId};

/// Lock a mutex, recovering the data if another thread panicked while holding it: every
/// critical section here leaves the maps consistent at each step.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One replicated item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Auction(Auction),
    Bid(BidRecord),
    LastBid {
        user: UserId,
        auction: AuctionId,
        bid: UserBid,
    },
}

/// A write as Global Tables replicates it: the whole item with its last-writer-wins stamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub item: Item,
    /// Milliseconds since the epoch at which the writing Region wrote it.
    pub written_at: u64,
    /// The Region that wrote it; breaks ties between equal timestamps deterministically.
    pub writer: String,
}

#[derive(Debug, Clone)]
struct Versioned<T> {
    value: T,
    written_at: u64,
    writer: String,
}

impl<T> Versioned<T> {
    fn newer_than<U>(&self, other: &Versioned<U>) -> bool {
        (self.written_at, &self.writer) > (other.written_at, &other.writer)
    }
}

#[derive(Debug, Default)]
struct AuctionBids {
    by_id: HashMap<BidId, Versioned<BidRecord>>,
    best: Option<BidRecord>,
}

impl AuctionBids {
    fn put(&mut self, bid: Versioned<BidRecord>) {
        let replaced = self.by_id.insert(bid.value.bid_id.clone(), bid.clone());
        let replaced_best = replaced.is_some_and(|old| {
            self.best
                .as_ref()
                .is_some_and(|best| best.bid_id == old.value.bid_id)
        });
        if replaced_best {
            self.best = self
                .by_id
                .values()
                .map(|v| &v.value)
                .max_by(|a, b| a.rank(b))
                .cloned();
        } else if self
            .best
            .as_ref()
            .is_none_or(|best| bid.value.outranks(best))
        {
            self.best = Some(bid.value);
        }
    }
}

#[derive(Debug, Default)]
struct Tables {
    auctions: HashMap<AuctionId, Versioned<Auction>>,
    bids: HashMap<AuctionId, AuctionBids>,
    last_bids: HashMap<(UserId, AuctionId), Versioned<UserBid>>,
}

/// An in-memory [`StateStore`] with Global Tables (MREC) replication semantics.
#[derive(Debug)]
pub struct MemoryStateStore {
    region: String,
    clock: Arc<dyn Clock>,
    tables: Mutex<Tables>,
    feeds: Mutex<Vec<mpsc::UnboundedSender<Change>>>,
    /// When set, every call fails with this error (the lab's "table unreachable" fault).
    outage: Mutex<Option<Error>>,
}

impl MemoryStateStore {
    pub fn new(region: impl Into<String>, clock: Arc<dyn Clock>) -> Self {
        Self {
            region: region.into(),
            clock,
            tables: Mutex::default(),
            feeds: Mutex::default(),
            outage: Mutex::default(),
        }
    }

    /// A stream of this store's own writes, for a replicator.
    pub fn change_feed(&self) -> mpsc::UnboundedReceiver<Change> {
        let (tx, rx) = mpsc::unbounded_channel();
        lock(&self.feeds).push(tx);
        rx
    }

    /// Make every call fail with `error` (or heal with `None`).
    pub fn set_outage(&self, error: Option<Error>) {
        *lock(&self.outage) = error;
    }

    fn check_outage(&self) -> Result<()> {
        match lock(&self.outage).as_ref() {
            Some(error) => Err(error.clone()),
            None => Ok(()),
        }
    }

    /// Apply a write replicated from another Region: last writer wins, per item.
    /// Returns whether the incoming version replaced (or created) the local one.
    pub fn apply_replicated(&self, change: Change) -> bool {
        let Change {
            item,
            written_at,
            writer,
        } = change;
        let mut tables = lock(&self.tables);
        match item {
            Item::Auction(auction) => {
                let incoming = Versioned {
                    value: auction,
                    written_at,
                    writer,
                };
                let slot = tables.auctions.get(&incoming.value.id);
                if slot.is_none_or(|current| incoming.newer_than(current)) {
                    tables.auctions.insert(incoming.value.id.clone(), incoming);
                    return true;
                }
                false
            }
            Item::Bid(bid) => {
                let incoming = Versioned {
                    value: bid,
                    written_at,
                    writer,
                };
                let bids = tables
                    .bids
                    .entry(incoming.value.auction_id.clone())
                    .or_default();
                let current = bids.by_id.get(&incoming.value.bid_id);
                if current.is_none_or(|current| incoming.newer_than(current)) {
                    bids.put(incoming);
                    return true;
                }
                false
            }
            Item::LastBid { user, auction, bid } => {
                let incoming = Versioned {
                    value: bid,
                    written_at,
                    writer,
                };
                let key = (user, auction);
                let current = tables.last_bids.get(&key);
                if current.is_none_or(|current| incoming.newer_than(current)) {
                    tables.last_bids.insert(key, incoming);
                    return true;
                }
                false
            }
        }
    }

    /// Every bid of an auction, in no particular order (for checkers and tests).
    pub fn all_bids(&self, auction: &AuctionId) -> Vec<BidRecord> {
        lock(&self.tables)
            .bids
            .get(auction)
            .map(|b| b.by_id.values().map(|v| v.value.clone()).collect())
            .unwrap_or_default()
    }

    /// Every item with its stamp, for convergence checks: two stores hold the same data
    /// exactly when these are equal.
    pub fn dump(&self) -> Vec<Change> {
        let tables = lock(&self.tables);
        let mut out: Vec<Change> = Vec::new();
        for v in tables.auctions.values() {
            out.push(Change {
                item: Item::Auction(v.value.clone()),
                written_at: v.written_at,
                writer: v.writer.clone(),
            });
        }
        for bids in tables.bids.values() {
            for v in bids.by_id.values() {
                out.push(Change {
                    item: Item::Bid(v.value.clone()),
                    written_at: v.written_at,
                    writer: v.writer.clone(),
                });
            }
        }
        for ((user, auction), v) in &tables.last_bids {
            out.push(Change {
                item: Item::LastBid {
                    user: user.clone(),
                    auction: auction.clone(),
                    bid: v.value.clone(),
                },
                written_at: v.written_at,
                writer: v.writer.clone(),
            });
        }
        out.sort_by_key(|c| format!("{:?}", c.item));
        out
    }

    fn stamp<T>(&self, value: T) -> Versioned<T> {
        Versioned {
            value,
            written_at: self.clock.now_ms(),
            writer: self.region.clone(),
        }
    }

    fn publish(&self, item: Item, written_at: u64) {
        let change = Change {
            item,
            written_at,
            writer: self.region.clone(),
        };
        lock(&self.feeds).retain(|tx| tx.send(change.clone()).is_ok());
    }
}

#[async_trait]
impl StateStore for MemoryStateStore {
    async fn put_auction_if_absent(&self, auction: &Auction) -> Result<bool> {
        self.check_outage()?;
        let versioned = self.stamp(auction.clone());
        let at = versioned.written_at;
        {
            let mut tables = lock(&self.tables);
            if tables.auctions.contains_key(&auction.id) {
                return Ok(false);
            }
            tables.auctions.insert(auction.id.clone(), versioned);
        }
        self.publish(Item::Auction(auction.clone()), at);
        Ok(true)
    }

    async fn auction(&self, id: &AuctionId) -> Result<Option<Auction>> {
        self.check_outage()?;
        Ok(lock(&self.tables).auctions.get(id).map(|v| v.value.clone()))
    }

    async fn bid(&self, auction: &AuctionId, bid_id: &BidId) -> Result<Option<BidRecord>> {
        self.check_outage()?;
        Ok(lock(&self.tables)
            .bids
            .get(auction)
            .and_then(|b| b.by_id.get(bid_id))
            .map(|v| v.value.clone()))
    }

    async fn insert_bid(&self, bid: &BidRecord) -> Result<InsertOutcome> {
        self.check_outage()?;
        let versioned = self.stamp(bid.clone());
        let at = versioned.written_at;
        {
            let mut tables = lock(&self.tables);
            let bids = tables.bids.entry(bid.auction_id.clone()).or_default();
            if let Some(existing) = bids.by_id.get(&bid.bid_id) {
                return Ok(InsertOutcome::Exists(existing.value.clone()));
            }
            bids.put(versioned);
        }
        self.publish(Item::Bid(bid.clone()), at);
        Ok(InsertOutcome::Inserted)
    }

    async fn snapshot(&self, auction: &AuctionId) -> Result<AuctionSnapshot> {
        self.check_outage()?;
        Ok(lock(&self.tables)
            .bids
            .get(auction)
            .map(|b| AuctionSnapshot {
                high_bid: b.best.clone(),
                bid_count: b.by_id.len() as u64,
            })
            .unwrap_or_default())
    }

    async fn last_bid(&self, user: &UserId, auction: &AuctionId) -> Result<Option<UserBid>> {
        self.check_outage()?;
        Ok(lock(&self.tables)
            .last_bids
            .get(&(user.clone(), auction.clone()))
            .map(|v| v.value.clone()))
    }

    async fn record_last_bid(
        &self,
        user: &UserId,
        auction: &AuctionId,
        bid: &UserBid,
    ) -> Result<()> {
        self.check_outage()?;
        let versioned = self.stamp(bid.clone());
        let at = versioned.written_at;
        {
            let mut tables = lock(&self.tables);
            let key = (user.clone(), auction.clone());
            if tables
                .last_bids
                .get(&key)
                .is_some_and(|v| v.value.at >= bid.at)
            {
                return Ok(());
            }
            tables.last_bids.insert(key, versioned);
        }
        self.publish(
            Item::LastBid {
                user: user.clone(),
                auction: auction.clone(),
                bid: bid.clone(),
            },
            at,
        );
        Ok(())
    }
}

#[derive(Debug)]
struct ConnectionEntry {
    #[allow(dead_code)]
    user: UserId,
    expires_at: u64,
    auctions: HashSet<AuctionId>,
}

#[derive(Debug, Default)]
struct Registry {
    connections: HashMap<ConnectionId, ConnectionEntry>,
    subscribers: HashMap<AuctionId, HashSet<ConnectionId>>,
}

/// An in-memory [`Connections`] registry with the same expiry rule as the DynamoDB one.
#[derive(Debug)]
pub struct MemoryConnections {
    ttl_ms: u64,
    registry: Mutex<Registry>,
}

impl Default for MemoryConnections {
    fn default() -> Self {
        Self::new(crate::DEFAULT_CONNECTION_TTL_MS)
    }
}

impl MemoryConnections {
    pub fn new(ttl_ms: u64) -> Self {
        Self {
            ttl_ms,
            registry: Mutex::default(),
        }
    }

    /// Number of registered connections (expired or not).
    pub fn len(&self) -> usize {
        lock(&self.registry).connections.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains(&self, connection: &ConnectionId) -> bool {
        lock(&self.registry).connections.contains_key(connection)
    }
}

#[async_trait]
impl Connections for MemoryConnections {
    async fn register(&self, connection: &ConnectionId, user: &UserId, now_ms: u64) -> Result<()> {
        let mut registry = lock(&self.registry);
        let expires_at = now_ms.saturating_add(self.ttl_ms);
        registry
            .connections
            .entry(connection.clone())
            .and_modify(|e| e.expires_at = expires_at)
            .or_insert_with(|| ConnectionEntry {
                user: user.clone(),
                expires_at,
                auctions: HashSet::new(),
            });
        Ok(())
    }

    async fn subscribe(
        &self,
        connection: &ConnectionId,
        user: &UserId,
        auction: &AuctionId,
        now_ms: u64,
    ) -> Result<()> {
        let mut registry = lock(&self.registry);
        let ttl = self.ttl_ms;
        registry
            .connections
            .entry(connection.clone())
            .or_insert_with(|| ConnectionEntry {
                user: user.clone(),
                expires_at: now_ms.saturating_add(ttl),
                auctions: HashSet::new(),
            })
            .auctions
            .insert(auction.clone());
        registry
            .subscribers
            .entry(auction.clone())
            .or_default()
            .insert(connection.clone());
        Ok(())
    }

    async fn subscribers(&self, auction: &AuctionId, now_ms: u64) -> Result<Vec<ConnectionId>> {
        let registry = lock(&self.registry);
        let Some(members) = registry.subscribers.get(auction) else {
            return Ok(Vec::new());
        };
        Ok(members
            .iter()
            .filter(|c| {
                registry
                    .connections
                    .get(*c)
                    .is_some_and(|e| e.expires_at > now_ms)
            })
            .cloned()
            .collect())
    }

    async fn remove(&self, connection: &ConnectionId) -> Result<()> {
        let mut registry = lock(&self.registry);
        if let Some(entry) = registry.connections.remove(connection) {
            for auction in entry.auctions {
                if let Some(members) = registry.subscribers.get_mut(&auction) {
                    members.remove(connection);
                }
            }
        }
        Ok(())
    }
}

/// A [`Notifier`] that records what it was asked to send, with scriptable failures.
#[derive(Debug, Default)]
pub struct RecordingNotifier {
    sent: Mutex<Vec<(ConnectionId, Vec<u8>)>>,
    gone: Mutex<HashSet<ConnectionId>>,
    throttle_first: Mutex<HashMap<ConnectionId, u32>>,
}

impl RecordingNotifier {
    /// Sends to this connection answer 410 Gone from now on.
    pub fn mark_gone(&self, connection: &ConnectionId) {
        lock(&self.gone).insert(connection.clone());
    }

    /// The next `times` sends to this connection are throttled.
    pub fn throttle(&self, connection: &ConnectionId, times: u32) {
        lock(&self.throttle_first).insert(connection.clone(), times);
    }

    /// What was delivered, in order.
    pub fn sent(&self) -> Vec<(ConnectionId, Vec<u8>)> {
        lock(&self.sent).clone()
    }
}

#[async_trait]
impl Notifier for RecordingNotifier {
    async fn send(&self, connection: &ConnectionId, payload: &[u8]) -> Result<()> {
        if lock(&self.gone).contains(connection) {
            return Err(Error::Gone);
        }
        if let Some(left) = lock(&self.throttle_first).get_mut(connection) {
            if *left > 0 {
                *left -= 1;
                return Err(Error::Throttled("scripted".into()));
            }
        }
        lock(&self.sent).push((connection.clone(), payload.to_vec()));
        Ok(())
    }
}

/// A clock that moves only when told to.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    pub fn new(start_ms: u64) -> Self {
        Self(AtomicU64::new(start_ms))
    }

    pub fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }

    pub fn set(&self, ms: u64) {
        self.0.store(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// A [`Metrics`] sink that keeps every datapoint; can be told to fail (a canary that cannot
/// publish must fail its invocation).
#[derive(Debug, Default)]
pub struct MemoryMetrics {
    points: Mutex<Vec<HealthDatapoint>>,
    failing: Mutex<bool>,
}

impl MemoryMetrics {
    pub fn points(&self) -> Vec<HealthDatapoint> {
        lock(&self.points).clone()
    }

    pub fn set_failing(&self, failing: bool) {
        *lock(&self.failing) = failing;
    }
}

#[async_trait]
impl Metrics for MemoryMetrics {
    async fn put_health(&self, point: &HealthDatapoint) -> Result<()> {
        if *lock(&self.failing) {
            return Err(Error::Transient("metrics sink unavailable".into()));
        }
        lock(&self.points).push(point.clone());
        Ok(())
    }
}
