//! Global Tables in multi-Region strong consistency (MRSC), for strong mode: three members
//! (two serving Regions' replicas and a witness, or three replicas), and the rules the
//! handler must live with (docs/DATA_MODEL.md, "Strong mode", cites AWS for each):
//!
//! - a write succeeds only if its Region reaches a quorum (itself and one other member,
//!   a witness counts) at the start *and* at the end of its write; otherwise `NoQuorum` and
//!   nothing is written;
//! - a condition is checked against the latest version (one linearizable table);
//! - a write to an item another Region is writing at that moment fails with the retryable
//!   `ReplicatedWriteConflictException` (`Error::WriteConflict`), nothing written;
//! - every read is strongly consistent (the handler never reads otherwise in strong mode),
//!   so it too needs the quorum;
//! - each request pays a configurable cross-Region cost (AWS publishes no figure);
//! - a write to an item that another member wrote less than one replication window ago
//!   (twice the cross-Region cost after that write ended) also conflicts: AWS names
//!   concurrency by its own replication, not by our request's span;
//! - `ack-lost` in strong mode also loses the answer of that share of head writes *after*
//!   they committed (a timeout or a 5xx after the commit): the handler must answer `unknown`,
//!   never `redirect`.
//!
//! Kinder than AWS, on purpose and written in docs/LAB.md: one authoritative table stands
//! for the members' copies (nothing the handler does can observe a replica's own copy,
//! since it never reads eventually consistently), and a Region lost for good loses nothing
//! (an acknowledged write is on a quorum, and one lost member leaves a quorum).

use crate::world::fault::Fault;
use crate::world::region_id::RegionId;
use crate::world::scale::{AwsDuration, TimeScale};
use crate::world::store::ReplicaStore;
use async_trait::async_trait;
use serde_json::Value as Json;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use wsdr_auction::store::{bid_of, topic};
use wsdr_core::items::{Change, Item, ItemKey};
use wsdr_core::memory::MemoryStateStore;
use wsdr_core::{
    Advance, CommitOutcome, Error, HeadStore, OpCommit, OpStore, StoredHead, StoredOp,
    StoredSummary, TopicKey, UserId,
};
use wsdr_protocol::{Amount, AuctionId, BidId, OpId};

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// What a member of the table is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MemberKind {
    /// A full replica: a Region's application reads and writes it.
    Replica,
    /// Stores the replicated log for the quorum; serves no reads or writes.
    Witness,
}

/// One member's state, for status and tests.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MemberStatus {
    pub region: String,
    pub kind: MemberKind,
    pub down: bool,
    pub quorum: bool,
}

/// The MRSC table shared by the members.
pub struct Cluster {
    table: MemoryStateStore,
    /// The `ack-lost` share's coin flips.
    entropy: Arc<dyn wsdr_core::Entropy>,
    members: Vec<(String, MemberKind)>,
    down: Vec<AtomicBool>,
    /// Unordered pairs of members that cannot reach each other.
    cut: Mutex<BTreeSet<(usize, usize)>>,
    /// Items being written now, by which member, and how many of its writes.
    writing: Mutex<HashMap<ItemKey, (usize, u32)>>,
    /// The last member that finished writing each item, and when (lab instant): a write
    /// from another member within the replication window after it conflicts too.
    written: Mutex<HashMap<ItemKey, (usize, tokio::time::Instant)>>,
    /// Per member: the share (percent) of head writes whose answer is lost after the commit.
    lost_answers: Vec<std::sync::atomic::AtomicU8>,
    /// The cross-Region cost of one request, lab µs.
    cost_us: AtomicU64,
    /// What one request costs with no fault (AWS time), and the scale that makes it lab
    /// time.
    normal_cost: AwsDuration,
    scale: TimeScale,
    /// Writes and reads refused for want of a quorum, per member.
    refused: Vec<AtomicU64>,
    /// Writes refused as replicated write conflicts.
    conflicts: AtomicU64,
    /// Every head write that accepted an op, in the order the table took them. The drill's
    /// truth for "accepted below a bid another Region had already acknowledged".
    order: Mutex<Vec<Taken>>,
}

/// One head write the table took.
struct Taken {
    topic: TopicKey,
    /// The head's version after it.
    version: u64,
    /// The op it accepted (its Region is the accepting one).
    op: StoredOp,
    /// When the write committed (lab instant).
    at: tokio::time::Instant,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("members", &self.members)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// `members`: the serving Regions first (their indexes are [`RegionId::index`]), then
    /// the third member. `cost`: one request's cross-Region cost, AWS time.
    pub fn new(
        members: Vec<(String, MemberKind)>,
        cost: AwsDuration,
        scale: TimeScale,
        clock: Arc<dyn wsdr_core::Clock>,
        entropy: Arc<dyn wsdr_core::Entropy>,
    ) -> Arc<Self> {
        let n = members.len();
        Arc::new(Self {
            entropy,
            table: MemoryStateStore::new("mrsc", clock),
            down: (0..n).map(|_| AtomicBool::new(false)).collect(),
            refused: (0..n).map(|_| AtomicU64::new(0)).collect(),
            members,
            cut: Mutex::default(),
            writing: Mutex::default(),
            written: Mutex::default(),
            lost_answers: (0..n)
                .map(|_| std::sync::atomic::AtomicU8::new(0))
                .collect(),
            cost_us: AtomicU64::new(scale.lab(cost).as_micros() as u64),
            normal_cost: cost,
            scale,
            conflicts: AtomicU64::new(0),
            order: Mutex::default(),
        })
    }

    /// A serving Region's view of the table.
    pub fn member(self: &Arc<Self>, index: usize) -> Arc<MrscMember> {
        Arc::new(MrscMember {
            cluster: self.clone(),
            index,
            feeds: Mutex::default(),
        })
    }

    /// Apply what `fault` means for the table; `gone`: the Regions lost for good, with this
    /// fault applied.
    pub fn inject(&self, fault: &Fault, gone: &[RegionId]) {
        match *fault {
            Fault::Down(r) | Fault::NeverReturns(r) => self.set_down(r.index(), true),
            Fault::Partition | Fault::OneWay { .. } => {
                self.set_cut(RegionId::Primary.index(), RegionId::Secondary.index(), true);
            }
            Fault::Isolate(r) => self.set_isolated(r.index(), true),
            // The head write commits, then its answer is lost (a timeout or a 5xx after the
            // commit): the bid must be `unknown`, never `redirect`.
            Fault::AckLost { region, percent } => self.set_lost_answers(region.index(), percent),
            // Replication lag has no MRSC counterpart: a slower cross-Region path makes every
            // request slower instead.
            Fault::Lag(lag) => self.set_cost(self.scale.lab(lag.max(self.normal_cost))),
            Fault::Heal => {
                self.heal();
                self.set_cost(self.scale.lab(self.normal_cost));
                for region in gone {
                    self.set_down(region.index(), true);
                }
            }
            _ => {}
        }
    }

    pub fn set_down(&self, member: usize, down: bool) {
        if let Some(flag) = self.down.get(member) {
            flag.store(down, Ordering::SeqCst);
        }
    }

    /// Cut (or mend) the path between two members.
    pub fn set_cut(&self, a: usize, b: usize, cut: bool) {
        let pair = (a.min(b), a.max(b));
        let mut pairs = lock(&self.cut);
        if cut {
            pairs.insert(pair);
        } else {
            pairs.remove(&pair);
        }
    }

    /// Cut (or mend) a member from every other one.
    pub fn set_isolated(&self, member: usize, isolated: bool) {
        for other in 0..self.members.len() {
            if other != member {
                self.set_cut(member, other, isolated);
            }
        }
    }

    /// Lose the answer of `percent` of `member`'s head writes after they commit.
    pub fn set_lost_answers(&self, member: usize, percent: u8) {
        if let Some(share) = self.lost_answers.get(member) {
            share.store(percent.min(100), Ordering::SeqCst);
        }
    }

    /// Whether this committed head write's answer is lost (the `ack-lost` share).
    fn answer_lost(&self, member: usize) -> bool {
        let percent = self
            .lost_answers
            .get(member)
            .map_or(0, |p| p.load(Ordering::Relaxed));
        crate::world::env::chance(self.entropy.as_ref(), percent)
    }

    /// Every member up and every path mended (a member lost for good is set down again by
    /// the caller).
    pub fn heal(&self) {
        for share in &self.lost_answers {
            share.store(0, Ordering::SeqCst);
        }
        lock(&self.cut).clear();
        for flag in &self.down {
            flag.store(false, Ordering::SeqCst);
        }
    }

    fn set_cost(&self, cost: Duration) {
        self.cost_us
            .store(cost.as_micros() as u64, Ordering::SeqCst);
    }

    fn cost(&self) -> Duration {
        Duration::from_micros(self.cost_us.load(Ordering::SeqCst))
    }

    /// Whether `member` reaches a majority of the members (itself included).
    pub fn has_quorum(&self, member: usize) -> bool {
        if self
            .down
            .get(member)
            .is_none_or(|d| d.load(Ordering::SeqCst))
        {
            return false;
        }
        let cut = lock(&self.cut);
        let reachable = (0..self.members.len())
            .filter(|&other| {
                other == member
                    || (!self.down[other].load(Ordering::SeqCst)
                        && !cut.contains(&(member.min(other), member.max(other))))
            })
            .count();
        reachable * 2 > self.members.len()
    }

    pub fn status(&self) -> Vec<MemberStatus> {
        self.members
            .iter()
            .enumerate()
            .map(|(i, (region, kind))| MemberStatus {
                region: region.clone(),
                kind: *kind,
                down: self.down[i].load(Ordering::SeqCst),
                quorum: self.has_quorum(i),
            })
            .collect()
    }

    /// Requests refused for want of a quorum, per member.
    pub fn refused(&self) -> Vec<u64> {
        self.refused
            .iter()
            .map(|r| r.load(Ordering::Relaxed))
            .collect()
    }

    /// Bids accepted on `auction` in the order the table took them: (amount, Region name).
    /// (A copy that is no bid is left out: nothing but the auction writes its topic.)
    pub fn accepted_in_order(&self, auction: &AuctionId) -> Vec<(Amount, String)> {
        let topic = topic(auction);
        let mut taken: Vec<(u64, Amount, String)> = lock(&self.order)
            .iter()
            .filter(|t| t.topic == topic)
            .filter_map(|t| {
                let bid = bid_of(&t.op).ok()?;
                Some((t.version, bid.amount, bid.region))
            })
            .collect();
        // By the head's version: two writes through one member may log out of turn.
        taken.sort_by_key(|(seq, ..)| *seq);
        taken
            .into_iter()
            .map(|(_, amount, region)| (amount, region))
            .collect()
    }

    /// Every bid a head write accepted on `auction`: (bidder, bidId, accepting Region's
    /// name, when the write committed).
    pub fn accepted_by(
        &self,
        auction: &AuctionId,
    ) -> Vec<(UserId, BidId, String, tokio::time::Instant)> {
        let topic = topic(auction);
        lock(&self.order)
            .iter()
            .filter(|t| t.topic == topic)
            .filter_map(|t| {
                let bid = bid_of(&t.op).ok()?;
                Some((bid.bidder, bid.bid_id, bid.region, t.at))
            })
            .collect()
    }

    pub fn conflicts(&self) -> u64 {
        self.conflicts.load(Ordering::Relaxed)
    }

    fn quorum(&self, member: usize) -> wsdr_core::Result<()> {
        if self.has_quorum(member) {
            return Ok(());
        }
        if let Some(r) = self.refused.get(member) {
            r.fetch_add(1, Ordering::Relaxed);
        }
        Err(Error::NoQuorum(format!(
            "{} cannot reach a majority of the table's members (lab)",
            self.members
                .get(member)
                .map_or("?", |(name, _)| name.as_str())
        )))
    }

    /// A strongly consistent read: the quorum, then the cross-Region cost.
    async fn read(&self, member: usize) -> wsdr_core::Result<()> {
        self.quorum(member)?;
        tokio::time::sleep(self.cost()).await;
        self.quorum(member)
    }

    /// Run one write of `key` from `member`: refused without a quorum (before or after its
    /// cross-Region round), refused as a conflict while another member writes the item.
    async fn write<T>(
        &self,
        member: usize,
        key: ItemKey,
        apply: impl std::future::Future<Output = wsdr_core::Result<T>>,
    ) -> wsdr_core::Result<T> {
        self.quorum(member)?;
        let window = self.cost() * 2;
        let recent_other = lock(&self.written)
            .get(&key)
            .is_some_and(|(writer, at)| *writer != member && at.elapsed() < window);
        if recent_other {
            self.conflicts.fetch_add(1, Ordering::Relaxed);
            return Err(Error::WriteConflict(
                "the item was modified in another Region within the replication window (lab)"
                    .into(),
            ));
        }
        {
            let mut writing = lock(&self.writing);
            match writing.get_mut(&key) {
                Some((writer, _)) if *writer != member => {
                    self.conflicts.fetch_add(1, Ordering::Relaxed);
                    return Err(Error::WriteConflict(
                        "the item is being modified by a request in another Region (lab)".into(),
                    ));
                }
                Some((_, count)) => *count += 1,
                None => {
                    writing.insert(key.clone(), (member, 1));
                }
            }
        }
        tokio::time::sleep(self.cost()).await;
        let result = match self.quorum(member) {
            Ok(()) => apply.await,
            Err(error) => Err(error),
        };
        let mut writing = lock(&self.writing);
        if let Some((_, count)) = writing.get_mut(&key) {
            *count -= 1;
            if *count == 0 {
                writing.remove(&key);
            }
        }
        drop(writing);
        if result.is_ok() {
            lock(&self.written).insert(key, (member, tokio::time::Instant::now()));
        }
        result
    }
}

/// One serving Region's replica of the MRSC table, as its handler sees it.
pub struct MrscMember {
    cluster: Arc<Cluster>,
    index: usize,
    /// Ledger heads written through this member: the lab ships them to the other Region as
    /// its stream would show them (pushes), after the link's lag.
    feeds: Mutex<Vec<mpsc::UnboundedSender<Change>>>,
}

impl std::fmt::Debug for MrscMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MrscMember")
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

impl MrscMember {
    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }

    /// Ship a head this member wrote to the other Region's feed, as its stream would.
    fn push_head(&self, topic: &TopicKey, next: &StoredHead) {
        let change = Change {
            item: Item::Head {
                topic: topic.clone(),
                head: next.clone(),
            },
            written_at: 0,
            writer: self
                .cluster
                .members
                .get(self.index)
                .map(|m| m.0.clone())
                .unwrap_or_default(),
        };
        lock(&self.feeds).retain(|feed| feed.send(change.clone()).is_ok());
    }
}

#[async_trait]
impl OpStore for MrscMember {
    async fn put_meta_if_absent(&self, topic: &TopicKey, meta: &Json) -> wsdr_core::Result<bool> {
        let key = ItemKey::Meta(topic.clone());
        self.cluster
            .write(
                self.index,
                key,
                self.cluster.table.put_meta_if_absent(topic, meta),
            )
            .await
    }

    async fn meta(&self, topic: &TopicKey) -> wsdr_core::Result<Option<Json>> {
        self.cluster.read(self.index).await?;
        self.cluster.table.meta(topic).await
    }

    async fn copies(
        &self,
        topic: &TopicKey,
        author: &UserId,
        op_id: &OpId,
    ) -> wsdr_core::Result<Vec<StoredOp>> {
        self.cluster.read(self.index).await?;
        self.cluster.table.copies(topic, author, op_id).await
    }

    async fn summaries(&self, topic: &TopicKey) -> wsdr_core::Result<Vec<StoredSummary>> {
        self.cluster.read(self.index).await?;
        OpStore::summaries(&self.cluster.table, topic).await
    }

    async fn commit(&self, _commit: &OpCommit) -> wsdr_core::Result<CommitOutcome> {
        // MRSC tables have no transactions (docs/DATA_MODEL.md): the eventual-mode commit
        // cannot run here.
        Err(Error::Internal(
            "TransactWriteItems is not supported on an MRSC table (lab)".into(),
        ))
    }

    async fn newest_by_author(
        &self,
        topic: &TopicKey,
        author: &UserId,
        limit: usize,
    ) -> wsdr_core::Result<Vec<StoredOp>> {
        self.cluster.read(self.index).await?;
        self.cluster
            .table
            .newest_by_author(topic, author, limit)
            .await
    }

    /// Read from the table itself: an MRSC table's index is read eventually consistent in
    /// AWS, so this is kinder (docs/LAB.md).
    async fn log_after(
        &self,
        topic: &TopicKey,
        log: &str,
        after: u64,
        limit: usize,
    ) -> wsdr_core::Result<Vec<StoredOp>> {
        self.cluster.read(self.index).await?;
        self.cluster.table.log_after(topic, log, after, limit).await
    }
}

#[async_trait]
impl HeadStore for MrscMember {
    async fn head(&self, topic: &TopicKey) -> wsdr_core::Result<Option<StoredHead>> {
        self.cluster.read(self.index).await?;
        HeadStore::head(&self.cluster.table, topic).await
    }

    async fn advance(
        &self,
        topic: &TopicKey,
        expected_accepted: u64,
        next: &StoredHead,
    ) -> wsdr_core::Result<Advance> {
        let key = ItemKey::Head(topic.clone());
        let outcome = self
            .cluster
            .write(self.index, key, async {
                let outcome =
                    HeadStore::advance(&self.cluster.table, topic, expected_accepted, next).await?;
                if let (Advance::Advanced, Some(last)) = (&outcome, &next.last) {
                    if next.summary.accepted == expected_accepted + 1 {
                        lock(&self.cluster.order).push(Taken {
                            topic: topic.clone(),
                            version: next.summary.accepted,
                            op: last.op.clone(),
                            at: tokio::time::Instant::now(),
                        });
                    }
                }
                Ok(outcome)
            })
            .await?;
        if outcome == Advance::Advanced && self.cluster.answer_lost(self.index) {
            // Committed on the quorum; the answer never comes back. The push still goes out
            // (the stream shows the write).
            self.push_head(topic, next);
            return Err(Error::Transient(
                "the head write timed out after it committed (lab, ack-lost)".into(),
            ));
        }
        if outcome == Advance::Advanced {
            self.push_head(topic, next);
        }
        Ok(outcome)
    }

    async fn settle(&self, copy: &StoredOp, write_id: &str) -> wsdr_core::Result<()> {
        self.cluster
            .write(
                self.index,
                copy.key(),
                HeadStore::settle(&self.cluster.table, copy, write_id),
            )
            .await
    }
}

#[async_trait]
impl ReplicaStore for MrscMember {
    fn change_feed(&self) -> mpsc::UnboundedReceiver<Change> {
        let (tx, rx) = mpsc::unbounded_channel();
        lock(&self.feeds).push(tx);
        rx
    }

    /// The data is already everywhere (the quorum wrote it): a shipped head only tells this
    /// Region's stream that the auction moved, for the push.
    async fn apply_replicated(&self, change: &Change) -> wsdr_core::Result<bool> {
        Ok(matches!(change.item, Item::Head { .. }))
    }

    async fn dump(&self) -> wsdr_core::Result<Vec<Change>> {
        Ok(self.cluster.table.dump())
    }

    /// Every accepted op: the copies, and the head's last op (which may not have its copy
    /// yet: the head is what decided it).
    async fn all_ops(&self, topic: &TopicKey) -> wsdr_core::Result<Vec<StoredOp>> {
        let mut ops = self.cluster.table.all_ops(topic);
        if let Some(last) = HeadStore::head(&self.cluster.table, topic)
            .await?
            .and_then(|h| h.last)
        {
            if !ops
                .iter()
                .any(|o| o.author == last.op.author && o.op_id == last.op.op_id)
            {
                ops.push(last.op);
            }
        }
        Ok(ops)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use wsdr_core::memory::ManualClock;

    fn cluster() -> Arc<Cluster> {
        Cluster::new(
            vec![
                ("us-east-1".into(), MemberKind::Replica),
                ("us-west-2".into(), MemberKind::Replica),
                ("us-east-2".into(), MemberKind::Witness),
            ],
            AwsDuration::from_millis(20),
            TimeScale::new(1.0),
            Arc::new(ManualClock::new(1_000)),
            Arc::new(wsdr_core::SeededEntropy::new(1)),
        )
    }

    fn head(amount: u64, write_id: &str) -> StoredHead {
        let bid = wsdr_auction::BidRecord {
            auction_id: AuctionId::new("a1").unwrap(),
            bid_id: BidId::new("bid-00000001").unwrap(),
            bidder: UserId::new("alice").unwrap(),
            amount: wsdr_protocol::Amount::new(amount).unwrap(),
            at: 1,
            region: "us-east-1".into(),
            position: 1,
        };
        wsdr_auction::store::head_of(&wsdr_auction::LedgerHead::empty().with_bid(&bid, write_id))
    }

    #[tokio::test(start_paused = true)]
    async fn a_member_needs_a_majority_and_the_witness_counts() {
        let c = cluster();
        assert!(c.has_quorum(0) && c.has_quorum(1));
        // The two replicas split: each still reaches the witness.
        c.set_cut(0, 1, true);
        assert!(c.has_quorum(0) && c.has_quorum(1));
        // The witness lost too: nobody has a majority.
        c.set_down(2, true);
        assert!(!c.has_quorum(0) && !c.has_quorum(1));
        c.heal();
        c.set_isolated(0, true);
        assert!(!c.has_quorum(0) && c.has_quorum(1));
        let a1 = topic(&AuctionId::new("a1").unwrap());
        let east = c.member(0);
        assert!(matches!(
            east.advance(&a1, 0, &head(100, "w1")).await,
            Err(Error::NoQuorum(_))
        ));
        assert!(matches!(east.head(&a1).await, Err(Error::NoQuorum(_))));
        assert_eq!(
            c.member(1).advance(&a1, 0, &head(100, "w2")).await.unwrap(),
            Advance::Advanced
        );
        assert_eq!(c.refused()[0], 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_member_cut_off_during_its_write_writes_nothing() {
        let c = cluster();
        let a1 = topic(&AuctionId::new("a1").unwrap());
        let east = c.member(0);
        let write = tokio::spawn({
            let east = east.clone();
            let a1 = a1.clone();
            async move { east.advance(&a1, 0, &head(100, "w1")).await }
        });
        tokio::time::sleep(Duration::from_millis(5)).await;
        c.set_isolated(0, true);
        assert!(matches!(write.await.unwrap(), Err(Error::NoQuorum(_))));
        c.heal();
        assert_eq!(east.head(&a1).await.unwrap(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_writes_of_one_item_from_two_regions_conflict() {
        let c = cluster();
        let a1 = topic(&AuctionId::new("a1").unwrap());
        let (east, west) = (c.member(0), c.member(1));
        let first = tokio::spawn({
            let a1 = a1.clone();
            async move { east.advance(&a1, 0, &head(100, "w1")).await }
        });
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert!(matches!(
            west.advance(&a1, 0, &head(200, "w2")).await,
            Err(Error::WriteConflict(_))
        ));
        assert_eq!(first.await.unwrap().unwrap(), Advance::Advanced);
        // Within the replication window after that write, still a conflict.
        assert!(matches!(
            west.advance(&a1, 0, &head(200, "w2")).await,
            Err(Error::WriteConflict(_))
        ));
        // Afterwards the condition, checked against the latest version, refuses the stale one.
        tokio::time::sleep(c.cost() * 2).await;
        assert_eq!(
            west.advance(&a1, 0, &head(200, "w2")).await.unwrap(),
            Advance::Moved
        );
        assert_eq!(c.conflicts(), 2);
    }
}
