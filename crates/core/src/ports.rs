//! The ports the domain needs, named by capability. Adapters: [`crate::memory`] here,
//! DynamoDB and API Gateway in `wsdr-aws`.

use crate::items::{StoredHead, StoredOp, StoredSummary, TopicKey};
use crate::model::{ConnectionId, UserId};
use crate::Result;
use async_trait::async_trait;
use serde_json::Value as Json;
use wsdr_protocol::{OpId, Topic};

/// One op to record, as [`OpStore::commit`] takes it: this Region's copy of the op and this
/// Region's next summary, written together or not at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpCommit {
    /// This Region's copy (`copy.region` is this Region; `copy.position` is
    /// `summary.accepted`).
    pub copy: StoredOp,
    /// Unique to this attempt: lets the store recognise its own earlier write when a retry
    /// (the SDK's, after a lost response) finds the copy already there.
    pub write_id: String,
    /// `accepted` of this Region's summary as read before the decision (0 = no summary yet):
    /// the commit fails with [`CommitOutcome::Conflict`] if another op moved it since.
    pub expected_accepted: u64,
    /// This Region's summary with the op counted in.
    pub summary: StoredSummary,
}

/// What a commit did ([`OpStore::commit`], and the auction's `commit_bid` with its copies
/// read as bids).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitOutcome<Copy = StoredOp> {
    /// The copy and the summary are written (now, or by an earlier try of this same commit).
    Committed,
    /// This Region already holds a copy under the same key (same author and op id), written
    /// by another request: here it is. Nothing was written.
    Exists(Copy),
    /// The Region's summary moved since it was read (a concurrent op here). Nothing was
    /// written: read again and decide again.
    Conflict,
}

/// What [`HeadStore::advance`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Advance {
    /// The head is now the one given (by this call, or by an earlier try of the same write:
    /// the store recognises it by the last op's write id).
    Advanced,
    /// The head was not what the caller read (another op got there first): nothing was
    /// written. Read again and decide again.
    Moved,
}

/// Replicated state of every app (Global Tables in AWS): each topic's seed, every Region's
/// copy of every op, and one summary per topic and Region. The kit writes every item, with
/// the keys and conditions that keep one writer Region per item; apps only supply values.
/// Every call costs a bounded number of item reads and writes, whatever the topic's history
/// (docs/DATA_MODEL.md).
#[async_trait]
pub trait OpStore: Send + Sync {
    /// Write the topic's seed unless it has one. Returns whether it was written.
    async fn put_meta_if_absent(&self, topic: &TopicKey, meta: &Json) -> Result<bool>;
    async fn meta(&self, topic: &TopicKey) -> Result<Option<Json>>;
    /// Every Region's copy of `author`'s op `op_id` that this store holds (at most one per
    /// Region): a point read.
    async fn copies(
        &self,
        topic: &TopicKey,
        author: &UserId,
        op_id: &OpId,
    ) -> Result<Vec<StoredOp>>;
    /// Every Region's summary of the topic that this store holds (in strong mode, the head's).
    async fn summaries(&self, topic: &TopicKey) -> Result<Vec<StoredSummary>>;
    /// Write the copy and the summary atomically: the copy only if its key is new, the
    /// summary only if it still has `expected_accepted`.
    async fn commit(&self, commit: &OpCommit) -> Result<CommitOutcome>;
    /// `author`'s newest op copies in the topic: ordered by the accepting Region's `at`,
    /// newest first (ties by op id, then Region, descending), at most `limit` items. Newest
    /// by time whatever the op ids, so a user with many ops still sees their latest.
    async fn newest_by_author(
        &self,
        topic: &TopicKey,
        author: &UserId,
        limit: usize,
    ) -> Result<Vec<StoredOp>>;
    /// One log of the topic from a position on: the copies this store holds whose `position`
    /// is past `after`, in position order, at most `limit`. A log is one count of accepted
    /// ops: a Region's (`log` is the Region: the copies it accepted, positioned by its
    /// summary) or, in strong mode, the head's ([`crate::model::LEDGER`]: every copy,
    /// positioned by the head). Replication delivers copies one by one in no order, so the
    /// answer can skip a position whose copy has not arrived (or never will): callers
    /// compare positions, never count items.
    async fn log_after(
        &self,
        topic: &TopicKey,
        log: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredOp>>;
}

/// An op store on a multi-Region strongly consistent table (DynamoDB MRSC): every read is
/// strongly consistent and every condition is checked against the latest version in every
/// Region, so it can keep one head per topic that orders its ops globally. Strong mode is
/// built on one; a store on an eventually consistent table cannot order ops globally and
/// does not implement it, so a strong service on such a store does not compile.
#[async_trait]
pub trait HeadStore: OpStore {
    /// The topic's head, if any op was ever accepted.
    async fn head(&self, topic: &TopicKey) -> Result<Option<StoredHead>>;
    /// Replace the topic's head with `next` if it still has `expected_accepted` accepted ops
    /// (0: no head yet). One conditional write: the single point where an op is decided.
    async fn advance(
        &self,
        topic: &TopicKey,
        expected_accepted: u64,
        next: &StoredHead,
    ) -> Result<Advance>;
    /// Write the copy of an accepted op unless it exists (idempotent: any request may write
    /// the copy of the head's last op, the same item every time).
    async fn settle(&self, copy: &StoredOp, write_id: &str) -> Result<()>;
}

/// The Region's own registry of live connections (not replicated).
#[async_trait]
pub trait Connections: Send + Sync {
    async fn register(&self, connection: &ConnectionId, user: &UserId, now_ms: u64) -> Result<()>;
    /// Deliver the topic's updates to this connection from now on.
    async fn subscribe(
        &self,
        connection: &ConnectionId,
        user: &UserId,
        topic: &Topic,
        now_ms: u64,
    ) -> Result<()>;
    /// Live subscribers of a topic. Records past their expiry are ignored even if the
    /// backend has not deleted them yet (DynamoDB TTL deletion is lazy).
    async fn subscribers(&self, topic: &Topic, now_ms: u64) -> Result<Vec<ConnectionId>>;
    /// One page of the live subscribers of one shard of a topic
    /// ([`crate::push::shard_of`]), in connection-id order, starting after `after`: at most
    /// `limit` of them, and whether the shard holds more.
    async fn subscribers_page(
        &self,
        topic: &Topic,
        shard: u16,
        after: Option<&ConnectionId>,
        limit: usize,
        now_ms: u64,
    ) -> Result<crate::push::SubscriberPage>;
    /// Forget a connection and its subscriptions. Removing an unknown one is not an error.
    async fn remove(&self, connection: &ConnectionId) -> Result<()>;
    /// Every live connection of this Region (an evacuation tells each one to move). Records
    /// past their expiry are ignored, as in [`Connections::subscribers`].
    async fn all(&self, now_ms: u64) -> Result<Vec<ConnectionId>>;
    /// The latest recorded count of this Region's live connections (one cheap read), or
    /// `None` if none was ever taken. The herd hint in `state` replies is computed from it.
    async fn census(&self) -> Result<Option<Census>>;
    /// Count this Region's live connections now and record the count for
    /// [`Connections::census`]. Costs a full read of the registry (a scan in DynamoDB): run it
    /// on a schedule, never per request.
    async fn take_census(&self, now_ms: u64) -> Result<Census>;
}

/// A count of a Region's live connections and when it was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Census {
    pub connections: u64,
    pub counted_at_ms: u64,
}

/// The fast verdicts' records (the state table in AWS). Each record is written by one
/// source in one Region ([`crate::VerdictSource`]: a Region's own canary in that Region, the
/// watcher in the judge) and read in that same Region, so the writer's and the reader's
/// clocks are one Region's. Timestamps are epoch ms by the writer's clock.
#[async_trait]
pub trait HealthLedger: Send + Sync {
    /// One probe round of `source`'s view of `api_id`'s Region (for diagnostics: no verdict
    /// is decided from another source's rounds).
    async fn put_round(
        &self,
        api_id: &str,
        source: crate::VerdictSource,
        ok: bool,
        at_ms: u64,
    ) -> Result<()>;
    /// `serve`: the API's Region should serve, in `source`'s view.
    async fn put_verdict(
        &self,
        api_id: &str,
        source: crate::VerdictSource,
        serve: bool,
        at_ms: u64,
    ) -> Result<()>;
    async fn verdict(
        &self,
        api_id: &str,
        source: crate::VerdictSource,
    ) -> Result<Option<(bool, u64)>>;
    /// Record that `source`'s verdict just changed (written on a change only, unlike the
    /// verdict itself, which is rewritten every round): the judge's change is the fail-over
    /// order the evacuation listens to.
    async fn put_change(
        &self,
        api_id: &str,
        source: crate::VerdictSource,
        serve: bool,
        at_ms: u64,
    ) -> Result<()>;
    /// The last change `source` recorded, if any.
    async fn last_change(
        &self,
        api_id: &str,
        source: crate::VerdictSource,
    ) -> Result<Option<(bool, u64)>>;
}

/// Where fail-over orders are recorded, so that each runs once however often it is
/// delivered (the connections table of the evacuator's Region in AWS).
#[async_trait]
pub trait OrderLog: Send + Sync {
    /// Claim order `id` at `now_ms`: `true` when the caller is to run it (never claimed, or
    /// claimed more than `stale_ms` ago and never finished: that run died).
    async fn claim(&self, id: &str, now_ms: u64, stale_ms: u64) -> Result<bool>;
    /// Record that order `id` ran to its end (whatever it decided).
    async fn finish(&self, id: &str, now_ms: u64) -> Result<()>;
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

/// The watcher's failover verdict on a Region for one minute (`App/FailoverVerdict`,
/// dimension `ApiId`): 1 = serve it, 0 = fail it over. See [`crate::verdict`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerdictDatapoint {
    pub api_id: String,
    pub serve: bool,
    pub timestamp_ms: u64,
}

/// Where health datapoints go (CloudWatch in AWS, the lab's metrics store locally), and
/// where the watcher reads its own recent ones back.
#[async_trait]
pub trait Metrics: Send + Sync {
    async fn put_health(&self, point: &HealthDatapoint) -> Result<()>;

    /// The health of `api_id` in each of the `minutes` metric periods before the one
    /// `now_ms` falls in, oldest first: `Some(healthy)` (the period's minimum) or `None`
    /// where the period holds no datapoint.
    async fn recent_health(
        &self,
        api_id: &str,
        minutes: u32,
        now_ms: u64,
    ) -> Result<Vec<Option<bool>>>;

    async fn put_verdict(&self, point: &VerdictDatapoint) -> Result<()>;
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

/// Where the domain's random choices come from: retry pauses after a lost race, fan-out
/// jitter. The default is the thread's RNG; a simulation passes a [`SeededEntropy`] so that a
/// run is a function of its seed.
pub trait Entropy: Send + Sync + std::fmt::Debug {
    /// A number drawn uniformly from `[0, bound)`; 0 when `bound` is 0.
    fn below(&self, bound: u64) -> u64;
}

/// The thread's RNG (the default everywhere outside a simulation).
#[derive(Debug, Clone, Copy, Default)]
pub struct ThreadEntropy;

impl Entropy for ThreadEntropy {
    fn below(&self, bound: u64) -> u64 {
        use rand::Rng;
        if bound == 0 {
            return 0;
        }
        rand::rng().random_range(0..bound)
    }
}

/// A seeded stream of draws, shared by everything that holds it. Its sequence is fixed by
/// the seed; which caller gets which draw is fixed by the order of calls, so it replays only
/// where that order does (one thread, a deterministic scheduler).
#[derive(Debug)]
pub struct SeededEntropy(std::sync::Mutex<rand::rngs::SmallRng>);

impl SeededEntropy {
    pub fn new(seed: u64) -> Self {
        use rand::SeedableRng;
        Self(std::sync::Mutex::new(rand::rngs::SmallRng::seed_from_u64(
            seed,
        )))
    }
}

impl Entropy for SeededEntropy {
    fn below(&self, bound: u64) -> u64 {
        use rand::Rng;
        if bound == 0 {
            return 0;
        }
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .random_range(0..bound)
    }
}

/// How the domain waits: retry pauses after a lost race, fan-out backoff. The durations are
/// the service's own (what they are in AWS); the default sleeps them on tokio's clock. The
/// lab's time-scaled real world divides them by its time scale, so that a pause lasts the
/// same AWS time as every other duration there.
#[async_trait::async_trait]
pub trait Pause: Send + Sync + std::fmt::Debug {
    async fn pause(&self, duration: std::time::Duration);
}

/// Sleep the duration on tokio's clock (the default everywhere outside the scaled lab).
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioPause;

#[async_trait::async_trait]
impl Pause for TokioPause {
    async fn pause(&self, duration: std::time::Duration) {
        tokio::time::sleep(duration).await;
    }
}

#[cfg(test)]
mod tests {
    //! The real clock, randomness and pause every deployed function runs on.
    use super::*;

    #[test]
    fn the_system_clock_reads_milliseconds_since_the_epoch() {
        let now = SystemClock.now_ms();
        // After 2026-01-01 and before 2100: milliseconds, not seconds or microseconds.
        assert!(
            (1_767_225_600_000..4_102_444_800_000).contains(&now),
            "{now}"
        );
        assert!(SystemClock.now_ms() >= now);
    }

    #[test]
    fn the_threads_randomness_draws_below_its_bound_and_more_than_one_value() {
        assert_eq!(ThreadEntropy.below(0), 0);
        assert_eq!(ThreadEntropy.below(1), 0);
        let draws: std::collections::BTreeSet<u64> =
            (0..200).map(|_| ThreadEntropy.below(10)).collect();
        assert!(draws.iter().all(|d| *d < 10));
        assert!(draws.len() > 1, "{draws:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn tokios_pause_waits_its_duration() {
        let started = tokio::time::Instant::now();
        TokioPause
            .pause(std::time::Duration::from_millis(1_500))
            .await;
        assert_eq!(started.elapsed(), std::time::Duration::from_millis(1_500));
    }
}
