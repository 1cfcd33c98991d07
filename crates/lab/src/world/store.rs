//! The state store behind each emulated Region: the embedded in-memory adapter (default) or
//! DynamoDB Local through the real `wsdr-aws` adapter (`--dynamodb`, wrapped in
//! [`DynamoReplica`]). Either way each write is stamped by its Region's own clock and the lab's
//! replicator ships it to the other Region, which applies it with Global Tables' per-item
//! last-writer-wins rule and no condition.

use crate::world::clock::RegionClock;
use crate::world::fault::Fault;
use crate::world::region_id::{PerRegion, RegionId};
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use wsdr_auction::BidRecord;
#[cfg(feature = "dynamodb")]
use wsdr_aws::DynamoStateStore;
use wsdr_core::items::Change;
#[cfg(feature = "dynamodb")]
use wsdr_core::items::{Item, ItemKey};
use wsdr_core::memory::MemoryStateStore;
use wsdr_core::{HeadStore, OpStore, StoredOp, TopicKey};
use wsdr_protocol::AuctionId;

/// A Region's store as the lab sees it: the port the handler uses, plus replication hooks.
/// Only a replica that keeps a head is a [`LedgerReplica`] (the MRSC table's members): the
/// mode is the table's type, as in the production crates (`wsdr_aws::DynamoLedgerStore`).
/// Written once for every app: a replica stores the kit's items, whatever they carry.
#[async_trait]
pub trait ReplicaStore: OpStore {
    /// This Region's own writes, as replication ships them.
    fn change_feed(&self) -> mpsc::UnboundedReceiver<Change>;
    /// Apply the other Region's write (per-item last writer wins). Errors are for retrying.
    async fn apply_replicated(&self, change: &Change) -> wsdr_core::Result<bool>;
    /// Every item with its stamp, in a deterministic order (the convergence check).
    async fn dump(&self) -> wsdr_core::Result<Vec<Change>>;
    /// Every op copy of a topic (the checkers).
    async fn all_ops(&self, topic: &TopicKey) -> wsdr_core::Result<Vec<StoredOp>>;
    /// Every bid of an auction: its topic's copies, read as bids.
    async fn all_bids(&self, auction: &AuctionId) -> wsdr_core::Result<Vec<BidRecord>> {
        self.all_ops(&wsdr_auction::store::topic(auction))
            .await?
            .iter()
            .map(wsdr_auction::store::bid_of)
            .collect()
    }
}

/// A replica that also keeps the strong mode's head.
pub trait LedgerReplica: ReplicaStore + HeadStore {}

impl<T: ReplicaStore + HeadStore + ?Sized> LedgerReplica for T {}

/// A Region's table as its handler uses it, with the lab's injectable failures: the mode is
/// the variant, so an eventual table cannot be handed to a strong service.
#[derive(Clone, Debug)]
pub enum RegionTable {
    Eventual(Arc<FaultyStore<dyn ReplicaStore>>),
    Strong(Arc<FaultyStore<dyn LedgerReplica>>),
}

impl RegionTable {
    /// The table as replication and the checkers see it.
    pub fn replica(&self) -> Arc<dyn ReplicaStore> {
        match self {
            RegionTable::Eventual(store) => store.clone(),
            RegionTable::Strong(store) => store.clone(),
        }
    }

    /// Apply what `fault` means for this Region's table as its handler sees it.
    pub fn inject(&self, fault: &Fault) {
        match self {
            RegionTable::Eventual(store) => store.inject(fault),
            RegionTable::Strong(store) => store.inject(fault),
        }
    }
}

#[async_trait]
impl ReplicaStore for MemoryStateStore {
    fn change_feed(&self) -> mpsc::UnboundedReceiver<Change> {
        MemoryStateStore::change_feed(self)
    }

    async fn apply_replicated(&self, change: &Change) -> wsdr_core::Result<bool> {
        Ok(MemoryStateStore::apply_replicated(self, change.clone()))
    }

    async fn dump(&self) -> wsdr_core::Result<Vec<Change>> {
        Ok(MemoryStateStore::dump(self))
    }

    async fn all_ops(&self, topic: &TopicKey) -> wsdr_core::Result<Vec<StoredOp>> {
        Ok(MemoryStateStore::all_ops(self, topic))
    }
}

/// A Region's table on DynamoDB Local, replicated the way Global Tables does it: the real
/// adapter writes exactly what it writes on AWS (no extra attributes); this wrapper keeps each
/// item's replication timestamp by this Region's clock on the side (Global Tables keeps its
/// own, invisibly), publishes every committed write on a change feed, and applies another
/// Region's write unconditionally when its stamp is later (last writer wins).
#[cfg(feature = "dynamodb")]
#[derive(Debug)]
pub struct DynamoReplica {
    store: DynamoStateStore,
    region: String,
    clock: Arc<RegionClock>,
    stamps: std::sync::Mutex<std::collections::HashMap<ItemKey, (u64, String)>>,
    feeds: std::sync::Mutex<Vec<mpsc::UnboundedSender<Change>>>,
    /// One item's writes, local and replicated, happen one at a time, as on the storage node
    /// that owns the item: without this, a replicated put could land between a local write
    /// and its stamp (or a local write between a replicated check and its put), and the
    /// stamp would then describe an item the table no longer holds. Striped by key.
    item_locks: Vec<tokio::sync::Mutex<()>>,
}

#[cfg(feature = "dynamodb")]
const ITEM_LOCK_STRIPES: usize = 64;

#[cfg(feature = "dynamodb")]
impl DynamoReplica {
    pub fn new(
        store: DynamoStateStore,
        region: impl Into<String>,
        clock: Arc<RegionClock>,
    ) -> Self {
        Self {
            store,
            region: region.into(),
            clock,
            stamps: Default::default(),
            feeds: Default::default(),
            item_locks: (0..ITEM_LOCK_STRIPES)
                .map(|_| tokio::sync::Mutex::new(()))
                .collect(),
        }
    }

    /// Lock the stripes of `keys`, in stripe order (a bid writes two items).
    async fn lock_items(&self, keys: &[ItemKey]) -> Vec<tokio::sync::MutexGuard<'_, ()>> {
        use std::hash::{Hash, Hasher};
        let mut stripes: Vec<usize> = keys
            .iter()
            .map(|key| {
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                key.hash(&mut hasher);
                (hasher.finish() % ITEM_LOCK_STRIPES as u64) as usize
            })
            .collect();
        stripes.sort_unstable();
        stripes.dedup();
        let mut guards = Vec::with_capacity(stripes.len());
        for stripe in stripes {
            guards.push(self.item_locks[stripe].lock().await);
        }
        guards
    }

    pub fn adapter(&self) -> &DynamoStateStore {
        &self.store
    }

    /// A local write committed: stamp it with this Region's clock (always later than the
    /// version it replaced) and ship it.
    fn committed(&self, item: Item) {
        use wsdr_core::Clock;
        let now = self.clock.now_ms();
        let mut stamps = lock(&self.stamps);
        let key = item.key();
        let written_at = stamps.get(&key).map_or(now, |(at, _)| now.max(at + 1));
        let change = Change {
            item,
            written_at,
            writer: self.region.clone(),
        };
        stamps.insert(key, (written_at, change.writer.clone()));
        lock(&self.feeds).retain(|feed| feed.send(change.clone()).is_ok());
    }
}

#[cfg(feature = "dynamodb")]
fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(feature = "dynamodb")]
#[async_trait]
impl OpStore for DynamoReplica {
    async fn put_meta_if_absent(
        &self,
        topic: &TopicKey,
        meta: &serde_json::Value,
    ) -> wsdr_core::Result<bool> {
        let item = Item::Meta {
            topic: topic.clone(),
            meta: meta.clone(),
        };
        let _items = self.lock_items(&[item.key()]).await;
        let created = self.store.put_meta_if_absent(topic, meta).await?;
        if created {
            self.committed(item);
        }
        Ok(created)
    }

    async fn meta(&self, topic: &TopicKey) -> wsdr_core::Result<Option<serde_json::Value>> {
        self.store.meta(topic).await
    }

    async fn copies(
        &self,
        topic: &TopicKey,
        author: &wsdr_core::UserId,
        op_id: &wsdr_protocol::OpId,
    ) -> wsdr_core::Result<Vec<StoredOp>> {
        self.store.copies(topic, author, op_id).await
    }

    async fn summaries(
        &self,
        topic: &TopicKey,
    ) -> wsdr_core::Result<Vec<wsdr_core::StoredSummary>> {
        OpStore::summaries(&self.store, topic).await
    }

    async fn commit(
        &self,
        commit: &wsdr_core::OpCommit,
    ) -> wsdr_core::Result<wsdr_core::CommitOutcome> {
        let copy = Item::Op {
            op: commit.copy.clone(),
            write_id: commit.write_id.clone(),
        };
        let summary = Item::Summary {
            topic: commit.copy.topic.clone(),
            summary: commit.summary.clone(),
        };
        let _items = self.lock_items(&[copy.key(), summary.key()]).await;
        let outcome = self.store.commit(commit).await?;
        if outcome == wsdr_core::CommitOutcome::Committed {
            self.committed(copy);
            self.committed(summary);
        }
        Ok(outcome)
    }

    async fn newest_by_author(
        &self,
        topic: &TopicKey,
        author: &wsdr_core::UserId,
        limit: usize,
    ) -> wsdr_core::Result<Vec<StoredOp>> {
        self.store.newest_by_author(topic, author, limit).await
    }

    async fn log_after(
        &self,
        topic: &TopicKey,
        log: &str,
        after: u64,
        limit: usize,
    ) -> wsdr_core::Result<Vec<StoredOp>> {
        self.store.log_after(topic, log, after, limit).await
    }
}

#[cfg(feature = "dynamodb")]
#[async_trait]
impl ReplicaStore for DynamoReplica {
    fn change_feed(&self) -> mpsc::UnboundedReceiver<Change> {
        let (tx, rx) = mpsc::unbounded_channel();
        lock(&self.feeds).push(tx);
        rx
    }

    async fn apply_replicated(&self, change: &Change) -> wsdr_core::Result<bool> {
        let key = change.item.key();
        let _items = self.lock_items(std::slice::from_ref(&key)).await;
        let newer = lock(&self.stamps).get(&key).is_none_or(|(at, writer)| {
            wsdr_core::items::last_writer_wins(change.stamp(), (*at, writer.as_str()))
        });
        if !newer {
            return Ok(false);
        }
        self.store.put_as_replicated(&change.item).await?;
        lock(&self.stamps).insert(key, (change.written_at, change.writer.clone()));
        Ok(true)
    }

    async fn dump(&self) -> wsdr_core::Result<Vec<Change>> {
        let items = self.store.dump().await?;
        let stamps = lock(&self.stamps);
        Ok(items
            .into_iter()
            .map(|item| {
                let (written_at, writer) = stamps.get(&item.key()).cloned().unwrap_or_default();
                Change {
                    item,
                    written_at,
                    writer,
                }
            })
            .collect())
    }

    async fn all_ops(&self, topic: &TopicKey) -> wsdr_core::Result<Vec<StoredOp>> {
        self.store.all_ops(topic).await
    }
}

/// Where the lab keeps state.
#[derive(Debug, Clone, Default)]
pub enum StoreKind {
    #[default]
    Memory,
    /// DynamoDB Local at this endpoint: one table per Region, created by the lab.
    Dynamo { endpoint: String },
}

/// The two Regions' stores.
pub async fn open(
    kind: &StoreKind,
    regions: &PerRegion<String>,
    clocks: &PerRegion<Arc<RegionClock>>,
    #[cfg_attr(not(feature = "dynamodb"), allow(unused_variables))]
    entropy: &dyn wsdr_core::Entropy,
) -> anyhow::Result<PerRegion<Arc<dyn ReplicaStore>>> {
    match kind {
        StoreKind::Memory => Ok(PerRegion::from_fn(|region| {
            Arc::new(MemoryStateStore::new(
                &regions[region],
                clocks[region].clone(),
            )) as _
        })),
        #[cfg(not(feature = "dynamodb"))]
        StoreKind::Dynamo { endpoint } => Err(anyhow::anyhow!(
            "DynamoDB Local at {endpoint} asked for, but this build has no DynamoDB support: \
             build the lab with its `dynamodb` feature (the default; `make demo` turns it off)"
        )),
        #[cfg(feature = "dynamodb")]
        StoreKind::Dynamo { endpoint } => {
            // One lab, one set of tables: several labs may share a DynamoDB Local.
            let lab_id = crate::world::env::hex(entropy, 8);
            let mut stores: Vec<Arc<dyn ReplicaStore>> = Vec::new();
            for ((_, region), clock) in regions.iter().zip(clocks.values()) {
                let client = wsdr_aws::local::dynamo_client(endpoint, region);
                let table = format!("wsdr-lab-{lab_id}-{region}");
                wsdr_aws::schema::create_state_table(&client, &table).await?;
                stores.push(Arc::new(DynamoReplica::new(
                    DynamoStateStore::new(client, table),
                    region.clone(),
                    clock.clone(),
                )));
            }
            let [a, b]: [Arc<dyn ReplicaStore>; 2] = stores
                .try_into()
                .map_err(|_| anyhow::anyhow!("two Regions expected"))?;
            Ok(PerRegion::new(a, b))
        }
    }
}

/// A failure mode of a Region's table as its handler sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StoreFailure {
    /// `store-throttle`: this percentage of requests answer ProvisionedThroughputExceeded.
    Throttle { percent: u8 },
    /// `store-outage`: every request fails (the table unreachable from this Region).
    Outage,
}

/// A Region's store with injectable failures on the request path (the handler's calls).
/// Replication in and out is not affected: Global Tables replicates on its own.
pub struct FaultyStore<T: ?Sized> {
    /// The Region whose handler it serves.
    region: RegionId,
    inner: Arc<T>,
    failure: std::sync::Mutex<Option<StoreFailure>>,
    /// `ack-lost`: the share (percent) of commits whose answer is lost on its way back to
    /// the handler after the table applied them (a timeout or a dropped connection between
    /// Lambda and DynamoDB): the write stands, the handler sees an error and answers
    /// `unknown`.
    commit_answers_lost: std::sync::atomic::AtomicU8,
    /// The throttle's coin flips, and each request's service time.
    entropy: Arc<dyn wsdr_core::Entropy>,
    /// Each request of the handler waits a time drawn uniformly from this range (lab time)
    /// before it reaches the table, so that two invocations' requests interleave as they do
    /// on DynamoDB (a simulation has no CPU time to interleave them). `None`: no wait (the
    /// real-time lab, whose own CPU time interleaves them).
    service_time: Option<(Duration, Duration)>,
}

impl<T: ?Sized> std::fmt::Debug for FaultyStore<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultyStore")
            .field("failure", &self.failure)
            .finish_non_exhaustive()
    }
}

impl<T: ?Sized> FaultyStore<T> {
    pub fn new(
        region: RegionId,
        inner: Arc<T>,
        entropy: Arc<dyn wsdr_core::Entropy>,
        service_time: Option<(Duration, Duration)>,
    ) -> Self {
        Self {
            region,
            inner,
            failure: std::sync::Mutex::new(None),
            commit_answers_lost: std::sync::atomic::AtomicU8::new(0),
            entropy,
            service_time,
        }
    }

    /// Apply what `fault` means for this Region's table as its handler sees it.
    pub fn inject(&self, fault: &Fault) {
        match *fault {
            Fault::StoreThrottle { region, percent } if region == self.region => {
                self.set_failure(Some(StoreFailure::Throttle {
                    percent: percent.min(100),
                }));
            }
            Fault::StoreOutage(region) if region == self.region => {
                self.set_failure(Some(StoreFailure::Outage));
            }
            Fault::AckLost { region, percent } if region == self.region => {
                self.commit_answers_lost
                    .store(percent.min(100), std::sync::atomic::Ordering::SeqCst);
            }
            Fault::Heal => {
                self.set_failure(None);
                self.commit_answers_lost
                    .store(0, std::sync::atomic::Ordering::SeqCst);
            }
            _ => {}
        }
    }

    fn set_failure(&self, failure: Option<StoreFailure>) {
        *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = failure;
    }

    /// One request's way to the table: its service time, then the injected failure if any.
    async fn check(&self) -> wsdr_core::Result<()> {
        if let Some((low, high)) = self.service_time {
            let span = high.saturating_sub(low).as_micros() as u64;
            let wait = low + Duration::from_micros(self.entropy.below(span + 1));
            tokio::time::sleep(wait).await;
        }
        let failure = *self.failure.lock().unwrap_or_else(|p| p.into_inner());
        match failure {
            None => Ok(()),
            Some(StoreFailure::Outage) => Err(wsdr_core::Error::Transient(
                "the table is unreachable (lab store-outage)".into(),
            )),
            Some(StoreFailure::Throttle { percent }) => {
                if crate::world::env::chance(self.entropy.as_ref(), percent) {
                    Err(wsdr_core::Error::Throttled(
                        "ProvisionedThroughputExceededException (lab store-throttle)".into(),
                    ))
                } else {
                    Ok(())
                }
            }
        }
    }
}

#[async_trait]
impl<T: ReplicaStore + ?Sized> OpStore for FaultyStore<T> {
    async fn put_meta_if_absent(
        &self,
        topic: &TopicKey,
        meta: &serde_json::Value,
    ) -> wsdr_core::Result<bool> {
        self.check().await?;
        self.inner.put_meta_if_absent(topic, meta).await
    }

    async fn meta(&self, topic: &TopicKey) -> wsdr_core::Result<Option<serde_json::Value>> {
        self.check().await?;
        self.inner.meta(topic).await
    }

    async fn copies(
        &self,
        topic: &TopicKey,
        author: &wsdr_core::UserId,
        op_id: &wsdr_protocol::OpId,
    ) -> wsdr_core::Result<Vec<StoredOp>> {
        self.check().await?;
        self.inner.copies(topic, author, op_id).await
    }

    async fn summaries(
        &self,
        topic: &TopicKey,
    ) -> wsdr_core::Result<Vec<wsdr_core::StoredSummary>> {
        self.check().await?;
        OpStore::summaries(self.inner.as_ref(), topic).await
    }

    async fn commit(
        &self,
        commit: &wsdr_core::OpCommit,
    ) -> wsdr_core::Result<wsdr_core::CommitOutcome> {
        self.check().await?;
        let outcome = self.inner.commit(commit).await?;
        let lost = self
            .commit_answers_lost
            .load(std::sync::atomic::Ordering::SeqCst);
        if outcome == wsdr_core::CommitOutcome::Committed
            && crate::world::env::chance(self.entropy.as_ref(), lost)
        {
            return Err(wsdr_core::Error::Transient(
                "the commit's answer was lost after the table applied it (lab ack-lost)".into(),
            ));
        }
        Ok(outcome)
    }

    async fn newest_by_author(
        &self,
        topic: &TopicKey,
        author: &wsdr_core::UserId,
        limit: usize,
    ) -> wsdr_core::Result<Vec<StoredOp>> {
        self.check().await?;
        self.inner.newest_by_author(topic, author, limit).await
    }

    async fn log_after(
        &self,
        topic: &TopicKey,
        log: &str,
        after: u64,
        limit: usize,
    ) -> wsdr_core::Result<Vec<StoredOp>> {
        self.check().await?;
        self.inner.log_after(topic, log, after, limit).await
    }
}

#[async_trait]
impl<T: LedgerReplica + ?Sized> HeadStore for FaultyStore<T> {
    async fn head(&self, topic: &TopicKey) -> wsdr_core::Result<Option<wsdr_core::StoredHead>> {
        self.check().await?;
        HeadStore::head(self.inner.as_ref(), topic).await
    }

    async fn advance(
        &self,
        topic: &TopicKey,
        expected_accepted: u64,
        next: &wsdr_core::StoredHead,
    ) -> wsdr_core::Result<wsdr_core::Advance> {
        self.check().await?;
        HeadStore::advance(self.inner.as_ref(), topic, expected_accepted, next).await
    }

    async fn settle(&self, copy: &StoredOp, write_id: &str) -> wsdr_core::Result<()> {
        self.check().await?;
        HeadStore::settle(self.inner.as_ref(), copy, write_id).await
    }
}

#[async_trait]
impl<T: ReplicaStore + ?Sized> ReplicaStore for FaultyStore<T> {
    fn change_feed(&self) -> mpsc::UnboundedReceiver<Change> {
        self.inner.change_feed()
    }

    async fn apply_replicated(&self, change: &Change) -> wsdr_core::Result<bool> {
        self.inner.apply_replicated(change).await
    }

    async fn dump(&self) -> wsdr_core::Result<Vec<Change>> {
        self.inner.dump().await
    }

    async fn all_ops(&self, topic: &TopicKey) -> wsdr_core::Result<Vec<StoredOp>> {
        self.inner.all_ops(topic).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use wsdr_core::memory::ManualClock;
    use wsdr_core::{CommitOutcome, OpCommit, StoredSummary, UserId};
    use wsdr_protocol::{Digest, OpId, Topic};

    fn commit(accepted: u64) -> OpCommit {
        let op = serde_json::json!({ "text": accepted });
        OpCommit {
            copy: StoredOp {
                topic: Topic::parse("chat:lobby").unwrap(),
                author: UserId::new("ann").unwrap(),
                op_id: OpId::new(format!("op-{accepted:07}")).unwrap(),
                region: "primary".into(),
                at: 1,
                position: accepted,
                digest: Digest::of(&op).unwrap(),
                op,
            },
            write_id: format!("w-{accepted}"),
            expected_accepted: accepted - 1,
            summary: StoredSummary {
                region: "primary".into(),
                accepted,
                app: serde_json::json!({}),
            },
        }
    }

    /// `ack-lost` on a Region's table: the commit stands, its answer is an error (the
    /// handler cannot tell it from a failure, and answers `unknown`); another Region's fault
    /// changes nothing, and the heal ends it.
    #[tokio::test]
    async fn a_commit_whose_answer_is_lost_stands() {
        let table = Arc::new(MemoryStateStore::new(
            "primary",
            Arc::new(ManualClock::new(1)),
        ));
        let store = FaultyStore::new(
            RegionId::Primary,
            table.clone(),
            Arc::new(wsdr_core::SeededEntropy::new(1)),
            None,
        );
        store.inject(&Fault::AckLost {
            region: RegionId::Secondary,
            percent: 100,
        });
        assert_eq!(
            store.commit(&commit(1)).await.unwrap(),
            CommitOutcome::Committed
        );
        store.inject(&Fault::AckLost {
            region: RegionId::Primary,
            percent: 100,
        });
        let lost = store.commit(&commit(2)).await;
        assert!(
            matches!(lost, Err(wsdr_core::Error::Transient(_))),
            "{lost:?}"
        );
        let topic = Topic::parse("chat:lobby").unwrap();
        assert_eq!(table.all_ops(&topic).len(), 2, "the commit stands");
        // A commit the table refuses (another attempt's copy is there) is answered as it is:
        // nothing was applied, no answer to lose.
        let another_attempt = OpCommit {
            write_id: "w-another".into(),
            ..commit(2)
        };
        assert_eq!(
            store.commit(&another_attempt).await.unwrap(),
            CommitOutcome::Exists(commit(2).copy)
        );
        store.inject(&Fault::Heal);
        assert_eq!(
            store.commit(&commit(3)).await.unwrap(),
            CommitOutcome::Committed
        );
    }
}
