//! In-memory adapters for every port: for tests, and for the lab's default state store.
//!
//! [`MemoryStateStore`] models DynamoDB Global Tables closely enough to reason about
//! failover: every write is an item stamped with (its Region's clock, writer Region); a change
//! feed emits local writes; [`MemoryStateStore::apply_replicated`] applies a remote write with
//! per-item last-writer-wins and no condition, the MREC rule. The lab wires two of these with a
//! lagging, cuttable link between them.

pub use crate::items::{Change, Item, ItemKey};
use crate::items::{StoredHead, StoredOp, StoredSummary, TopicKey};
use crate::model::{ConnectionId, UserId};
use crate::ports::{
    Advance, Census, Clock, CommitOutcome, Connections, HeadStore, HealthDatapoint, Metrics,
    Notifier, OpCommit, OpStore, VerdictDatapoint,
};
use crate::{Error, Result};
use async_trait::async_trait;
use serde_json::Value as Json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::mpsc;
use wsdr_protocol::{OpId, Topic};

/// Lock a mutex, recovering the data if another thread panicked while holding it: every
/// critical section here leaves the maps consistent at each step.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// An in-memory [`OpStore`] with Global Tables (MREC) semantics: items by key, writes
/// stamped with this Region's clock, a change feed of local writes, and
/// [`MemoryStateStore::apply_replicated`] applying a remote write with per-item last writer
/// wins and no condition.
#[derive(Debug)]
pub struct MemoryStateStore {
    region: String,
    clock: Arc<dyn Clock>,
    items: Mutex<BTreeMap<ItemKey, Change>>,
    feeds: Mutex<Vec<mpsc::UnboundedSender<Change>>>,
    /// When set, every call fails with this error (the lab's "table unreachable" fault).
    outage: Mutex<Option<Error>>,
}

impl MemoryStateStore {
    pub fn new(region: impl Into<String>, clock: Arc<dyn Clock>) -> Self {
        Self {
            region: region.into(),
            clock,
            items: Mutex::default(),
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

    /// Apply a write replicated from another Region: last writer wins by the writers'
    /// stamps, per item, with no condition (as Global Tables applies replicated writes).
    /// Returns whether the incoming version replaced (or created) the local one.
    pub fn apply_replicated(&self, change: Change) -> bool {
        let mut items = lock(&self.items);
        let key = change.item.key();
        if items
            .get(&key)
            .is_none_or(|current| change.newer_than(current))
        {
            items.insert(key, change);
            return true;
        }
        false
    }

    /// Every op copy of a topic, in key order (for checkers and tests).
    pub fn all_ops(&self, topic: &TopicKey) -> Vec<StoredOp> {
        lock(&self.items)
            .values()
            .filter_map(|c| match &c.item {
                Item::Op { op, .. } if op.topic == *topic => Some(op.clone()),
                _ => None,
            })
            .collect()
    }

    /// Every item with its stamp, in key order: two stores hold the same data exactly when
    /// these are equal.
    pub fn dump(&self) -> Vec<Change> {
        lock(&self.items).values().cloned().collect()
    }

    /// Stamp a local write that replaces `current`: this Region's clock, but always later than
    /// the version it replaces, so a Region's successive writes of one item replicate in
    /// order even within one millisecond or after its clock stepped back (docs/LAB.md).
    fn stamp(&self, item: Item, current: Option<&Change>) -> Change {
        let now = self.clock.now_ms();
        Change {
            item,
            written_at: current.map_or(now, |c| now.max(c.written_at + 1)),
            writer: self.region.clone(),
        }
    }

    fn publish(&self, change: &Change) {
        lock(&self.feeds).retain(|tx| tx.send(change.clone()).is_ok());
    }

    fn select<T>(&self, pick: impl Fn(&Item) -> Option<T>) -> Vec<T> {
        lock(&self.items)
            .values()
            .filter_map(|c| pick(&c.item))
            .collect()
    }
}

#[async_trait]
impl OpStore for MemoryStateStore {
    async fn put_meta_if_absent(&self, topic: &TopicKey, meta: &Json) -> Result<bool> {
        self.check_outage()?;
        let change = {
            let mut items = lock(&self.items);
            let key = ItemKey::Meta(topic.clone());
            if items.contains_key(&key) {
                return Ok(false);
            }
            let item = Item::Meta {
                topic: topic.clone(),
                meta: meta.clone(),
            };
            let change = self.stamp(item, None);
            items.insert(key, change.clone());
            change
        };
        self.publish(&change);
        Ok(true)
    }

    async fn meta(&self, topic: &TopicKey) -> Result<Option<Json>> {
        self.check_outage()?;
        Ok(match lock(&self.items).get(&ItemKey::Meta(topic.clone())) {
            Some(Change {
                item: Item::Meta { meta, .. },
                ..
            }) => Some(meta.clone()),
            _ => None,
        })
    }

    async fn copies(
        &self,
        topic: &TopicKey,
        author: &UserId,
        op_id: &OpId,
    ) -> Result<Vec<StoredOp>> {
        self.check_outage()?;
        Ok(self.select(|item| match item {
            Item::Op { op, .. }
                if op.topic == *topic && op.author == *author && op.op_id == *op_id =>
            {
                Some(op.clone())
            }
            _ => None,
        }))
    }

    async fn summaries(&self, topic: &TopicKey) -> Result<Vec<StoredSummary>> {
        self.check_outage()?;
        Ok(self.select(|item| match item {
            Item::Summary { topic: t, summary } if t == topic => Some(summary.clone()),
            Item::Head { topic: t, head } if t == topic => Some(head.summary.clone()),
            _ => None,
        }))
    }

    async fn commit(&self, commit: &OpCommit) -> Result<CommitOutcome> {
        self.check_outage()?;
        let copy_item = Item::Op {
            op: commit.copy.clone(),
            write_id: commit.write_id.clone(),
        };
        let summary_item = Item::Summary {
            topic: commit.copy.topic.clone(),
            summary: commit.summary.clone(),
        };
        {
            let mut items = lock(&self.items);
            if let Some(Change {
                item: Item::Op { op, write_id },
                ..
            }) = items.get(&copy_item.key())
            {
                if *write_id == commit.write_id {
                    return Ok(CommitOutcome::Committed);
                }
                return Ok(CommitOutcome::Exists(op.clone()));
            }
            let summary_key = summary_item.key();
            let current = match items.get(&summary_key) {
                Some(Change {
                    item: Item::Summary { summary, .. },
                    ..
                }) => summary.accepted,
                _ => 0,
            };
            if current != commit.expected_accepted {
                return Ok(CommitOutcome::Conflict);
            }
            let copy = self.stamp(copy_item, None);
            let summary = self.stamp(summary_item, items.get(&summary_key));
            items.insert(copy.item.key(), copy.clone());
            items.insert(summary_key, summary.clone());
            // Published under the lock: the feed carries this Region's writes in the order
            // they were made.
            self.publish(&copy);
            self.publish(&summary);
        }
        Ok(CommitOutcome::Committed)
    }

    async fn newest_by_author(
        &self,
        topic: &TopicKey,
        author: &UserId,
        limit: usize,
    ) -> Result<Vec<StoredOp>> {
        self.check_outage()?;
        let mut ops = self.select(|item| match item {
            Item::Op { op, .. } if op.topic == *topic && op.author == *author => Some(op.clone()),
            _ => None,
        });
        ops.sort_by(|a, b| (b.at, &b.op_id, &b.region).cmp(&(a.at, &a.op_id, &a.region)));
        ops.truncate(limit);
        Ok(ops)
    }

    async fn log_after(
        &self,
        topic: &TopicKey,
        log: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredOp>> {
        self.check_outage()?;
        // Picked before they are cloned: a page is a few copies of a topic that may hold
        // thousands.
        let picked = self.select(|item| match item {
            Item::Op { op, .. } if op.topic == *topic && op.in_log(log) && op.position > after => {
                Some(op.clone())
            }
            _ => None,
        });
        Ok(crate::items::log_page(picked, log, after, limit))
    }
}

#[async_trait]
impl HeadStore for MemoryStateStore {
    async fn head(&self, topic: &TopicKey) -> Result<Option<StoredHead>> {
        self.check_outage()?;
        Ok(match lock(&self.items).get(&ItemKey::Head(topic.clone())) {
            Some(Change {
                item: Item::Head { head, .. },
                ..
            }) => Some(head.clone()),
            _ => None,
        })
    }

    async fn advance(
        &self,
        topic: &TopicKey,
        expected_accepted: u64,
        next: &StoredHead,
    ) -> Result<Advance> {
        self.check_outage()?;
        {
            let mut items = lock(&self.items);
            let key = ItemKey::Head(topic.clone());
            let current = match items.get(&key) {
                Some(Change {
                    item: Item::Head { head, .. },
                    ..
                }) => Some(head),
                _ => None,
            };
            if current.map_or(0, |h| h.summary.accepted) != expected_accepted {
                // This very write, tried again after its answer was lost?
                let mine = current.and_then(|h| h.last.as_ref()).map(|l| &l.write_id)
                    == next.last.as_ref().map(|l| &l.write_id);
                return Ok(if mine && next.last.is_some() {
                    Advance::Advanced
                } else {
                    Advance::Moved
                });
            }
            let change = self.stamp(
                Item::Head {
                    topic: topic.clone(),
                    head: next.clone(),
                },
                items.get(&key),
            );
            items.insert(key, change.clone());
            self.publish(&change);
        }
        Ok(Advance::Advanced)
    }

    async fn settle(&self, copy: &StoredOp, write_id: &str) -> Result<()> {
        self.check_outage()?;
        let item = Item::Op {
            op: copy.clone(),
            write_id: write_id.to_owned(),
        };
        let mut items = lock(&self.items);
        if items.contains_key(&item.key()) {
            return Ok(());
        }
        let change = self.stamp(item, None);
        items.insert(change.item.key(), change.clone());
        self.publish(&change);
        Ok(())
    }
}

#[derive(Debug)]
struct ConnectionEntry {
    #[allow(dead_code)]
    user: UserId,
    expires_at: u64,
    topics: BTreeSet<Topic>,
}

#[derive(Debug, Default)]
struct Registry {
    connections: BTreeMap<ConnectionId, ConnectionEntry>,
    /// By topic and shard, as DynamoDB's `by-auction-shard` index holds them.
    subscribers: BTreeMap<(Topic, u16), BTreeSet<ConnectionId>>,
    /// The last census taken, as DynamoDB's census item holds it.
    census: Option<Census>,
}

impl Registry {
    fn is_live(&self, connection: &ConnectionId, now_ms: u64) -> bool {
        self.connections
            .get(connection)
            .is_some_and(|e| e.expires_at > now_ms)
    }
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
                topics: BTreeSet::new(),
            });
        Ok(())
    }

    async fn subscribe(
        &self,
        connection: &ConnectionId,
        user: &UserId,
        topic: &Topic,
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
                topics: BTreeSet::new(),
            })
            .topics
            .insert(topic.clone());
        registry
            .subscribers
            .entry((topic.clone(), crate::push::shard_of(connection)))
            .or_default()
            .insert(connection.clone());
        Ok(())
    }

    async fn subscribers(&self, topic: &Topic, now_ms: u64) -> Result<Vec<ConnectionId>> {
        let registry = lock(&self.registry);
        Ok((0..crate::push::SUBSCRIBER_SHARDS)
            .filter_map(|shard| registry.subscribers.get(&(topic.clone(), shard)))
            .flatten()
            .filter(|c| registry.is_live(c, now_ms))
            .cloned()
            .collect())
    }

    async fn subscribers_page(
        &self,
        topic: &Topic,
        shard: u16,
        after: Option<&ConnectionId>,
        limit: usize,
        now_ms: u64,
    ) -> Result<crate::push::SubscriberPage> {
        use std::ops::Bound::{Excluded, Unbounded};
        let registry = lock(&self.registry);
        let Some(members) = registry.subscribers.get(&(topic.clone(), shard)) else {
            return Ok(crate::push::SubscriberPage::default());
        };
        let start = after.map_or(Unbounded, Excluded);
        // Like a DynamoDB query with a filter: `limit` items are read, the expired ones
        // among them dropped after the read.
        let mut read = members.range((start, Unbounded));
        let page: Vec<&ConnectionId> = read.by_ref().take(limit).collect();
        let resume_after = match read.next() {
            Some(_) => page.last().map(|c| (*c).clone()),
            None => None,
        };
        let connections = page
            .into_iter()
            .filter(|c| registry.is_live(c, now_ms))
            .cloned()
            .collect();
        Ok(crate::push::SubscriberPage {
            connections,
            resume_after,
        })
    }

    async fn remove(&self, connection: &ConnectionId) -> Result<()> {
        let mut registry = lock(&self.registry);
        if let Some(entry) = registry.connections.remove(connection) {
            for topic in entry.topics {
                let key = (topic, crate::push::shard_of(connection));
                if let Some(members) = registry.subscribers.get_mut(&key) {
                    members.remove(connection);
                }
            }
        }
        Ok(())
    }

    async fn all(&self, now_ms: u64) -> Result<Vec<ConnectionId>> {
        let registry = lock(&self.registry);
        let mut live: Vec<ConnectionId> = registry
            .connections
            .iter()
            .filter(|(_, entry)| entry.expires_at > now_ms)
            .map(|(id, _)| id.clone())
            .collect();
        live.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        Ok(live)
    }

    async fn census(&self) -> Result<Option<Census>> {
        Ok(lock(&self.registry).census)
    }

    async fn take_census(&self, now_ms: u64) -> Result<Census> {
        let mut registry = lock(&self.registry);
        let census = Census {
            connections: registry
                .connections
                .values()
                .filter(|entry| entry.expires_at > now_ms)
                .count() as u64,
            counted_at_ms: now_ms,
        };
        registry.census = Some(census);
        Ok(census)
    }
}

/// An in-memory [`crate::HealthLedger`].
#[derive(Debug, Default)]
pub struct MemoryHealthLedger {
    rounds: Mutex<BTreeMap<(String, crate::VerdictSource), (bool, u64)>>,
    verdicts: Mutex<BTreeMap<(String, crate::VerdictSource), (bool, u64)>>,
    changes: Mutex<BTreeMap<(String, crate::VerdictSource), (bool, u64)>>,
}

impl MemoryHealthLedger {
    /// The last round recorded for `api_id` by `source` (tests).
    pub fn round(&self, api_id: &str, source: crate::VerdictSource) -> Option<(bool, u64)> {
        lock(&self.rounds)
            .get(&(api_id.to_owned(), source))
            .copied()
    }
}

#[async_trait]
impl crate::HealthLedger for MemoryHealthLedger {
    async fn put_round(
        &self,
        api_id: &str,
        source: crate::VerdictSource,
        ok: bool,
        at_ms: u64,
    ) -> Result<()> {
        lock(&self.rounds).insert((api_id.to_owned(), source), (ok, at_ms));
        Ok(())
    }

    async fn put_verdict(
        &self,
        api_id: &str,
        source: crate::VerdictSource,
        serve: bool,
        at_ms: u64,
    ) -> Result<()> {
        lock(&self.verdicts).insert((api_id.to_owned(), source), (serve, at_ms));
        Ok(())
    }

    async fn verdict(
        &self,
        api_id: &str,
        source: crate::VerdictSource,
    ) -> Result<Option<(bool, u64)>> {
        Ok(lock(&self.verdicts)
            .get(&(api_id.to_owned(), source))
            .copied())
    }

    async fn put_change(
        &self,
        api_id: &str,
        source: crate::VerdictSource,
        serve: bool,
        at_ms: u64,
    ) -> Result<()> {
        lock(&self.changes).insert((api_id.to_owned(), source), (serve, at_ms));
        Ok(())
    }

    async fn last_change(
        &self,
        api_id: &str,
        source: crate::VerdictSource,
    ) -> Result<Option<(bool, u64)>> {
        Ok(lock(&self.changes)
            .get(&(api_id.to_owned(), source))
            .copied())
    }
}

/// An in-memory [`crate::OrderLog`]: each order's claim time and whether it finished.
#[derive(Debug, Default)]
pub struct MemoryOrderLog {
    orders: Mutex<BTreeMap<String, (u64, bool)>>,
}

#[async_trait]
impl crate::OrderLog for MemoryOrderLog {
    async fn claim(&self, id: &str, now_ms: u64, stale_ms: u64) -> Result<bool> {
        let mut orders = lock(&self.orders);
        match orders.get(id) {
            Some((_, true)) => Ok(false),
            Some((at, false)) if now_ms.saturating_sub(*at) <= stale_ms => Ok(false),
            _ => {
                orders.insert(id.to_owned(), (now_ms, false));
                Ok(true)
            }
        }
    }

    async fn finish(&self, id: &str, now_ms: u64) -> Result<()> {
        lock(&self.orders).insert(id.to_owned(), (now_ms, true));
        Ok(())
    }
}

/// A [`Notifier`] that records what it was asked to send, with scriptable failures.
#[derive(Debug, Default)]
pub struct RecordingNotifier {
    sent: Mutex<Vec<(ConnectionId, Vec<u8>)>>,
    gone: Mutex<BTreeSet<ConnectionId>>,
    throttle_first: Mutex<BTreeMap<ConnectionId, u32>>,
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
    verdicts: Mutex<Vec<VerdictDatapoint>>,
    failing: Mutex<bool>,
}

/// CloudWatch's standard resolution: periods are whole minutes of epoch time.
const MINUTE_MS: u64 = 60_000;

impl MemoryMetrics {
    pub fn points(&self) -> Vec<HealthDatapoint> {
        lock(&self.points).clone()
    }

    pub fn verdicts(&self) -> Vec<VerdictDatapoint> {
        lock(&self.verdicts).clone()
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

    async fn recent_health(
        &self,
        api_id: &str,
        minutes: u32,
        now_ms: u64,
    ) -> Result<Vec<Option<bool>>> {
        if *lock(&self.failing) {
            return Err(Error::Transient("metrics sink unavailable".into()));
        }
        let current = now_ms / MINUTE_MS;
        let points = lock(&self.points);
        Ok((1..=u64::from(minutes))
            .rev()
            .map(|back| {
                let minute = current.saturating_sub(back);
                points
                    .iter()
                    .filter(|p| p.api_id == api_id && p.timestamp_ms / MINUTE_MS == minute)
                    .map(|p| p.healthy)
                    .reduce(|a, b| a && b)
            })
            .collect())
    }

    async fn put_verdict(&self, point: &VerdictDatapoint) -> Result<()> {
        if *lock(&self.failing) {
            return Err(Error::Transient("metrics sink unavailable".into()));
        }
        lock(&self.verdicts).push(point.clone());
        Ok(())
    }
}

#[cfg(test)]
mod connection_tests {
    use super::*;

    #[tokio::test]
    async fn all_lists_live_connections_only() {
        let registry = MemoryConnections::new(1_000);
        let user = UserId::new("u").expect("user");
        for (id, at) in [("old", 0), ("a", 5_000), ("b", 5_000)] {
            registry
                .register(&ConnectionId::new(id).expect("id"), &user, at)
                .await
                .expect("register");
        }
        let all: Vec<String> = registry
            .all(5_500)
            .await
            .expect("all")
            .iter()
            .map(|c| c.to_string())
            .collect();
        assert_eq!(all, ["a", "b"]);
    }

    #[tokio::test]
    async fn a_topics_subscribers_are_its_live_connections_by_shard_and_page() {
        let registry = MemoryConnections::new(1_000);
        assert!(registry.is_empty());
        let user = UserId::new("u").expect("user");
        let topic = Topic::parse("chat:lobby").expect("topic");
        let other = Topic::parse("chat:other").expect("topic");
        let ids: Vec<ConnectionId> = (0..40)
            .map(|i| ConnectionId::new(format!("c{i:02}")).expect("id"))
            .collect();
        for (i, id) in ids.iter().enumerate() {
            // The first ten subscribed at 0 (expiring at 1,000), the rest at 500.
            let at = if i < 10 { 0 } else { 500 };
            registry.register(id, &user, at).await.expect("register");
            registry
                .subscribe(id, &user, &topic, at)
                .await
                .expect("subscribe");
        }
        registry
            .subscribe(&ids[0], &user, &other, 0)
            .await
            .expect("subscribe");
        assert_eq!(registry.len(), 40);
        assert!(!registry.is_empty());
        let live = |now: u64| {
            let registry = &registry;
            let topic = topic.clone();
            async move { registry.subscribers(&topic, now).await.expect("read").len() }
        };
        assert_eq!(live(999).await, 40);
        assert_eq!(live(1_000).await, 30, "expired at its expiry time");
        assert_eq!(live(1_500).await, 0);
        assert_eq!(
            registry.subscribers(&other, 0).await.expect("read"),
            vec![ids[0].clone()]
        );
        // Every live one once across the shards' pages of 3; a shard's page of expired
        // records still moves the reader on.
        let mut seen = Vec::new();
        for shard in 0..crate::push::SUBSCRIBER_SHARDS {
            let mut after = None;
            loop {
                let page = registry
                    .subscribers_page(&topic, shard, after.as_ref(), 3, 1_000)
                    .await
                    .expect("page");
                assert!(page
                    .connections
                    .iter()
                    .all(|c| crate::push::shard_of(c) == shard));
                seen.extend(page.connections);
                match page.resume_after {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
        }
        seen.sort();
        assert_eq!(seen, ids[10..].to_vec());
        registry.remove(&ids[12]).await.expect("remove");
        assert_eq!(live(999).await, 39);
    }
}

#[cfg(test)]
mod op_store_tests {
    //! Every read of the op store sees one topic (and one author, one op id) only, and the
    //! head's summary is read as the topic's one summary.
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::items::LastOp;
    use serde_json::json;
    use wsdr_protocol::{Digest, Namespace, TopicName};

    fn topic(name: &str) -> TopicKey {
        TopicKey::new(
            Namespace::new("chat").unwrap(),
            TopicName::new(name).unwrap(),
        )
    }

    fn copy(topic: &TopicKey, author: &str, op_id: &str, at: u64) -> StoredOp {
        let op = json!({ "text": op_id });
        StoredOp {
            topic: topic.clone(),
            author: UserId::new(author).unwrap(),
            op_id: OpId::new(op_id).unwrap(),
            region: "us-east-1".into(),
            at,
            position: 1,
            digest: Digest::of(&op).unwrap(),
            op,
        }
    }

    async fn commit(store: &MemoryStateStore, copy: StoredOp, expected: u64) {
        let outcome = store
            .commit(&OpCommit {
                summary: StoredSummary {
                    region: "us-east-1".into(),
                    accepted: expected + 1,
                    app: json!({}),
                },
                write_id: format!("w-{}-{}", copy.topic, copy.op_id),
                expected_accepted: expected,
                copy,
            })
            .await
            .unwrap();
        assert_eq!(outcome, CommitOutcome::Committed);
    }

    #[tokio::test]
    async fn a_topics_reads_see_that_topic_only() {
        let store =
            MemoryStateStore::new("us-east-1", Arc::new(crate::memory::ManualClock::new(1)));
        let (a, b) = (topic("a"), topic("b"));
        commit(&store, copy(&a, "ann", "op-0000001", 10), 0).await;
        commit(&store, copy(&b, "ann", "op-0000001", 20), 0).await;
        commit(&store, copy(&a, "bob", "op-0000002", 30), 1).await;
        assert_eq!(store.all_ops(&a).len(), 2);
        assert_eq!(store.all_ops(&b).len(), 1);
        // The dump: every item (three copies, two summaries) with its stamp, in key order; a
        // second store fed the dump holds the same.
        let dump = store.dump();
        assert_eq!(dump.len(), 5);
        assert!(dump
            .iter()
            .all(|c| c.writer == "us-east-1" && c.written_at >= 1));
        let replica =
            MemoryStateStore::new("us-west-2", Arc::new(crate::memory::ManualClock::new(1)));
        for change in dump.iter().rev() {
            assert!(replica.apply_replicated(change.clone()));
        }
        assert_eq!(replica.dump(), dump);
        let ann = UserId::new("ann").unwrap();
        let copies = store
            .copies(&a, &ann, &OpId::new("op-0000001").unwrap())
            .await
            .unwrap();
        assert_eq!(copies, vec![copy(&a, "ann", "op-0000001", 10)]);
        let newest = store.newest_by_author(&a, &ann, 10).await.unwrap();
        assert_eq!(newest, vec![copy(&a, "ann", "op-0000001", 10)]);
        let page = store.log_after(&a, "us-east-1", 0, 10).await.unwrap();
        assert_eq!(page.len(), 2, "a's log holds a's copies only: {page:?}");
        assert!(page.iter().all(|op| op.topic == a));
        let summaries = store.summaries(&a).await.unwrap();
        assert_eq!(summaries.len(), 1);
        assert_eq!(summaries[0].accepted, 2);
        assert!(store.summaries(&topic("c")).await.unwrap().is_empty());
        // A head is its topic's one summary, and only its topic's.
        let head = StoredHead {
            summary: StoredSummary {
                region: crate::model::LEDGER.into(),
                accepted: 1,
                app: json!({}),
            },
            last: Some(LastOp {
                op: copy(&topic("c"), "cat", "op-0000009", 40),
                write_id: "w-head".into(),
            }),
        };
        assert_eq!(
            store.advance(&topic("c"), 0, &head).await.unwrap(),
            Advance::Advanced
        );
        assert_eq!(
            store.summaries(&topic("c")).await.unwrap(),
            vec![head.summary.clone()]
        );
        assert_eq!(store.summaries(&a).await.unwrap().len(), 1);
        assert_eq!(store.head(&a).await.unwrap(), None);
        // The same write tried again after its answer was lost: advanced, not moved.
        assert_eq!(
            store.advance(&topic("c"), 0, &head).await.unwrap(),
            Advance::Advanced
        );
        let other = StoredHead {
            last: Some(LastOp {
                op: copy(&topic("c"), "cat", "op-0000010", 41),
                write_id: "w-other".into(),
            }),
            ..head.clone()
        };
        assert_eq!(
            store.advance(&topic("c"), 0, &other).await.unwrap(),
            Advance::Moved
        );
    }
}

#[cfg(test)]
mod fake_port_tests {
    //! The in-memory ports the lab and the Lambdas' tests run on keep the rules of what they
    //! stand for: an order claimed once unless its claim went stale, each source's verdicts
    //! apart, CloudWatch's minute periods, a registry's expiry at its boundary.
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::{HealthLedger, OrderLog, VerdictSource};

    #[tokio::test]
    async fn an_order_is_claimed_once_unless_its_claim_went_stale_and_never_once_finished() {
        let log = MemoryOrderLog::default();
        assert!(log.claim("o", 1_000, 300).await.unwrap());
        assert!(
            !log.claim("o", 1_300, 300).await.unwrap(),
            "300 ms old: still held"
        );
        assert!(
            log.claim("o", 1_301, 300).await.unwrap(),
            "stale: taken over"
        );
        log.finish("o", 1_400).await.unwrap();
        assert!(
            !log.claim("o", 100_000, 300).await.unwrap(),
            "finished: never again"
        );
        assert!(log.claim("other", 1_000, 300).await.unwrap());
    }

    #[tokio::test]
    async fn each_apis_and_sources_health_records_are_kept_apart() {
        let ledger = MemoryHealthLedger::default();
        assert_eq!(ledger.round("a", VerdictSource::Inside), None);
        ledger
            .put_round("a", VerdictSource::Inside, false, 5)
            .await
            .unwrap();
        ledger
            .put_round("a", VerdictSource::Judge, true, 6)
            .await
            .unwrap();
        assert_eq!(ledger.round("a", VerdictSource::Inside), Some((false, 5)));
        assert_eq!(ledger.round("a", VerdictSource::Judge), Some((true, 6)));
        ledger
            .put_verdict("a", VerdictSource::Judge, false, 7)
            .await
            .unwrap();
        assert_eq!(
            ledger.verdict("a", VerdictSource::Judge).await.unwrap(),
            Some((false, 7))
        );
        assert_eq!(
            ledger.verdict("a", VerdictSource::Inside).await.unwrap(),
            None
        );
        assert_eq!(
            ledger.verdict("b", VerdictSource::Judge).await.unwrap(),
            None
        );
        ledger
            .put_change("a", VerdictSource::Judge, true, 8)
            .await
            .unwrap();
        assert_eq!(
            ledger.last_change("a", VerdictSource::Judge).await.unwrap(),
            Some((true, 8))
        );
        assert_eq!(
            ledger
                .last_change("a", VerdictSource::Inside)
                .await
                .unwrap(),
            None
        );
    }

    #[tokio::test]
    async fn recent_health_is_each_whole_minute_before_now_folded_healthy_only_if_every_point_was()
    {
        let metrics = MemoryMetrics::default();
        let point = |api: &str, healthy: bool, at: u64| HealthDatapoint {
            api_id: api.into(),
            healthy,
            latency_ms: None,
            timestamp_ms: at,
        };
        // Minute 10 (600,000-659,999): healthy then not; minute 11: healthy; minute 12, the
        // current one: not yet a whole period.
        for p in [
            point("a", true, 600_000),
            point("a", false, 659_999),
            point("a", true, 660_000),
            point("b", false, 660_001),
            point("a", false, 720_000),
        ] {
            metrics.put_health(&p).await.unwrap();
        }
        assert_eq!(metrics.points().len(), 5);
        assert_eq!(
            metrics.recent_health("a", 3, 720_500).await.unwrap(),
            vec![None, Some(false), Some(true)]
        );
        metrics
            .put_verdict(&VerdictDatapoint {
                api_id: "a".into(),
                serve: true,
                timestamp_ms: 1,
            })
            .await
            .unwrap();
        assert_eq!(metrics.verdicts().len(), 1);
        metrics.set_failing(true);
        assert!(metrics.recent_health("a", 3, 720_500).await.is_err());
        assert!(metrics.put_health(&point("a", true, 1)).await.is_err());
        metrics.set_failing(false);
        assert!(metrics.put_health(&point("a", true, 1)).await.is_ok());
    }

    #[tokio::test]
    async fn a_connection_expires_at_its_expiry_time_for_every_read_and_the_census() {
        let registry = MemoryConnections::new(1_000);
        let user = UserId::new("u").unwrap();
        registry
            .register(&ConnectionId::new("c").unwrap(), &user, 0)
            .await
            .unwrap();
        assert_eq!(registry.all(999).await.unwrap().len(), 1);
        assert!(registry.all(1_000).await.unwrap().is_empty());
        assert_eq!(registry.take_census(999).await.unwrap().connections, 1);
        assert_eq!(registry.take_census(1_000).await.unwrap().connections, 0);
        assert_eq!(
            registry.census().await.unwrap(),
            Some(Census {
                connections: 0,
                counted_at_ms: 1_000
            })
        );
        let clock = ManualClock::new(5);
        clock.set(42);
        assert_eq!(clock.now_ms(), 42);
    }
}
