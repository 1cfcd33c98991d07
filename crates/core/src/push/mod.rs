//! The push path: how a topic's changes reach its subscribers, off the bid's path.
//!
//! A bid is answered as soon as it is durable. Its push starts from the state table's stream
//! (in AWS; the lab's change feed), which shows this Region's own summaries and the ones that
//! replication brought alike: one push path for local and replicated bids. The stream's
//! reader only *starts* pushes; the posting is done by workers fed from a queue (SQS in AWS),
//! so no invocation's work grows with the audience. Three rules keep the work bounded:
//!
//! - **One push in flight per topic, spaced** ([`PushLeases`]): a lease per topic says
//!   whether a push is in flight, when the next may start, and whether a change waits. A
//!   change while a push is in flight is merged into one trailing push, started by the push's
//!   last job; each push reads the topic's merged state when it starts: every subscriber
//!   gets the newest state, and never an older one than it had (clients merge pushes
//!   element-wise by the `versions` they carry). Pushes of a topic start at most once per
//!   *spacing*: its window (default 200 ms AWS), widened to `audience / budget` when the
//!   audience needs it ([`Widening`]).
//! - **Shards and pages** ([`PushJob`]): a topic's subscriptions live in
//!   [`SUBSCRIBER_SHARDS`] shards (a stable hash of the connection id); a push is one job per
//!   shard, and a job posts to at most one page of subscribers, handing the rest on as a
//!   continuation through the queue.
//! - **A budget** ([`PushSettings::budget_per_second`]): the Region's share of the account's
//!   API Gateway request quota. At most `workers` run at once (the queue's maximum
//!   concurrency), each posting by its own schedule ([`Pacer`]) at budget / workers: the
//!   Region's pushes stay under the budget by construction.

use crate::fanout::{broadcast, FanoutConfig, FanoutReport};
use crate::model::ConnectionId;
use crate::ports::{Clock, Connections, Notifier, Pause};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinSet;
use wsdr_protocol::Topic;

mod lease;
mod pusher;
mod queue;

pub use lease::{
    check_contract as check_lease_contract, Begin, Finished, InProcessLeases, LeaseBook,
    PushLeases, LEASE_STALE,
};
pub use pusher::{start_delay, PushPorts, Pusher, DRAIN_ROUNDS, DRAIN_WAIT_LIMIT};
pub use queue::{LocalPushQueue, PushQueue, PushWork, START_DELAY_LIMIT};

/// What the push path needs from the service it pushes for: the newest frame of a topic,
/// and the registry, notifier and fan-out settings its posts go through. The service
/// implements it; the push path never names the service, so the two build in one direction
/// (the service may build a push worker; the push path asks only this).
#[async_trait::async_trait]
pub trait PushSource: Send + Sync + 'static {
    /// The frame a push posts for `topic`: its newest merged state.
    async fn push_frame(&self, topic: &Topic) -> crate::Result<String>;
    /// A worker posting through the service's registry and notifier.
    fn push_worker(&self, settings: PushSettings) -> PushWorker;
}

/// Shards of one topic's subscriptions. A constant of the data model: a subscription's shard
/// is written with it, and readers must agree on the count.
pub const SUBSCRIBER_SHARDS: u16 = 16;

/// The shard of a connection's subscriptions: FNV-1a of its id (stable across builds and
/// processes, unlike the standard library's hasher).
pub fn shard_of(connection: &ConnectionId) -> u16 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in connection.as_str().bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    (hash % u32::from(SUBSCRIBER_SHARDS)) as u16
}

/// How a Region pushes (template parameters `PushWindowMs`, `PushBudgetPerSecond`,
/// `PushWorkers`, `PushPageSize`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PushSettings {
    /// The shortest time between two pushes of one topic.
    pub window: Duration,
    /// `@connections` posts per second this Region's pushes may use: a share of the account's
    /// 10,000 requests per second, which every API of the account (the canary's probes,
    /// `$connect`) shares.
    pub budget_per_second: f64,
    /// Jobs posting at once (the workers' maximum concurrency).
    pub workers: usize,
    /// Subscribers one job posts to at most.
    pub page: usize,
}

impl Default for PushSettings {
    fn default() -> Self {
        Self {
            window: Duration::from_millis(200),
            budget_per_second: 5_000.0,
            workers: 16,
            page: 500,
        }
    }
}

impl PushSettings {
    /// The spacing a topic with `audience` subscribers needs: its window, or the time its
    /// audience takes at the budget, whichever is longer.
    pub fn spacing(&self, audience: usize) -> Duration {
        let at_budget = if self.budget_per_second > 0.0 {
            Duration::from_secs_f64(audience as f64 / self.budget_per_second)
        } else {
            Duration::ZERO
        };
        self.window.max(at_budget)
    }

    /// Each worker's share of the budget, when `workers` post at once (at least one).
    pub fn budget_per_worker(&self) -> f64 {
        self.budget_per_second / self.workers.max(1) as f64
    }
}

/// How often, and by how much, the budget widened a topic's window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Widening {
    /// Pushes that started at a spacing wider than the window.
    pub widened_pushes: u64,
    /// The widest spacing any topic needed (AWS ms, as the conflator's clock runs).
    pub widest_spacing_ms: u64,
}

/// One shard's share of one push: post `frame` to the shard's subscribers after `after`, at
/// most a page of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushJob {
    pub topic: Topic,
    pub shard: u16,
    /// The page starts after this connection id (`None`: from the shard's first).
    pub after: Option<ConnectionId>,
    /// The push frame (`bidUpdate`, `update`), built once per push from the merged state when it started.
    pub frame: Arc<str>,
    /// When the push started (the pusher's clock, ms): no chunk of it posts a state read
    /// before then.
    pub started_ms: u64,
    /// The push's lease generation: a job of a push the lease has moved past (a stale one,
    /// taken over) is still posted, but no longer counted.
    pub generation: u64,
}

impl PushJob {
    /// A push's jobs: one per shard.
    pub fn for_push(
        topic: &Topic,
        frame: Arc<str>,
        started_ms: u64,
        generation: u64,
    ) -> Vec<PushJob> {
        (0..SUBSCRIBER_SHARDS)
            .map(|shard| PushJob {
                topic: topic.clone(),
                shard,
                after: None,
                frame: frame.clone(),
                started_ms,
                generation,
            })
            .collect()
    }
}

/// What one job did, and the job that carries on where its page ended.
#[derive(Debug, Clone, Default)]
pub struct JobOutcome {
    pub report: FanoutReport,
    /// Subscriber items the job read.
    pub read: usize,
    pub next: Option<PushJob>,
}

/// The work of one worker: post one job's page, paced to the worker's share of the budget.
#[derive(Clone)]
pub struct PushWorker {
    pub connections: Arc<dyn Connections>,
    pub notifier: Arc<dyn Notifier>,
    pub fanout: FanoutConfig,
    pub settings: PushSettings,
    pub pause: Arc<dyn Pause>,
    /// The schedule every worker of the Region's pusher posts by.
    pub pacer: Arc<Pacer>,
    /// Where each chunk's frame comes from: the newest state, re-read at most once per
    /// window (`None`: the job's own frame throughout).
    pub frames: Option<Arc<FrameSource>>,
}

/// The newest push frame of each topic, read at most once per `max_age`: a chunk
/// posted late in a long push carries the state of its own moment, not its push's start.
pub struct FrameSource {
    service: Arc<dyn PushSource>,
    clock: Arc<dyn Clock>,
    max_age_ms: u64,
    cache: Mutex<HashMap<Topic, (Arc<str>, u64)>>,
}

impl std::fmt::Debug for FrameSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameSource")
            .field("max_age_ms", &self.max_age_ms)
            .finish_non_exhaustive()
    }
}

impl FrameSource {
    pub fn new(service: impl PushSource, clock: Arc<dyn Clock>, max_age: Duration) -> Self {
        Self::shared(Arc::new(service), clock, max_age)
    }

    /// [`FrameSource::new`] on a source the caller shares.
    pub fn shared(service: Arc<dyn PushSource>, clock: Arc<dyn Clock>, max_age: Duration) -> Self {
        Self {
            service,
            clock,
            max_age_ms: max_age.as_millis() as u64,
            cache: Mutex::default(),
        }
    }

    /// The topic's frame for a chunk of the push that started at `started_ms`: the cached
    /// one if it was read since the push started and is at most `max_age` old (a frame read
    /// before the push could miss the very change the push is for), else a fresh read;
    /// `fallback` (the push's own frame) if it cannot be read.
    pub async fn frame(&self, topic: &Topic, started_ms: u64, fallback: &Arc<str>) -> Arc<str> {
        let now = self.clock.now_ms();
        if let Some((frame, read_at)) = locked(&self.cache).get(topic) {
            if *read_at >= started_ms && now < read_at.saturating_add(self.max_age_ms) {
                return frame.clone();
            }
        }
        match self.service.push_frame(topic).await {
            Ok(frame) => {
                let frame: Arc<str> = Arc::from(frame);
                let mut cache = locked(&self.cache);
                // Bounded: only topics being pushed are cached; drop the rest when large.
                if cache.len() > 10_000 {
                    cache.clear();
                }
                cache.insert(topic.clone(), (frame.clone(), now));
                frame
            }
            Err(_) => fallback.clone(),
        }
    }
}

/// One schedule for a pusher's posts at its budget: each chunk of posts reserves its share
/// of time (`posts / rate`) after the chunks before it, and starts when its reservation
/// does. Chunks starting within any one second then hold at most `rate` posts plus one
/// chunk, and one more for the clock's millisecond steps (a chunk may start up to a
/// millisecond after its reservation); the rate is the budget less two chunks: never over it.
#[derive(Debug)]
pub struct Pacer {
    /// Posts per second the schedule admits.
    rate: f64,
    /// Posts of one chunk (a hundredth of the budget).
    chunk: usize,
    next_free_ms: Mutex<f64>,
    clock: Arc<dyn Clock>,
    pause: Arc<dyn Pause>,
}

impl Pacer {
    pub fn new(budget_per_second: f64, clock: Arc<dyn Clock>, pause: Arc<dyn Pause>) -> Self {
        let budget = if budget_per_second.is_finite() && budget_per_second >= 1.0 {
            budget_per_second
        } else {
            1.0
        };
        let chunk = ((budget / 100.0).floor() as usize).max(1);
        Self {
            rate: (budget - 2.0 * chunk as f64).max(budget / 2.0),
            chunk,
            next_free_ms: Mutex::new(0.0),
            clock,
            pause,
        }
    }

    /// Posts one chunk may hold.
    pub fn chunk(&self) -> usize {
        self.chunk
    }

    /// Wait until `posts` may start.
    pub async fn admit(&self, posts: usize) {
        let wait_ms = {
            let mut next_free = locked(&self.next_free_ms);
            let now = self.clock.now_ms() as f64;
            let start = next_free.max(now);
            *next_free = start + posts as f64 * 1000.0 / self.rate;
            start - now
        };
        if wait_ms > 0.0 {
            self.pause
                .pause(Duration::from_secs_f64(wait_ms / 1000.0))
                .await;
        }
    }
}

impl std::fmt::Debug for PushWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushWorker")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl PushWorker {
    /// Read the job's page and post to it, chunk by chunk on the pusher's schedule. A failed
    /// read is an error (the job is to be run again); failed posts are counted.
    pub async fn run(&self, job: &PushJob, now_ms: u64) -> crate::Result<JobOutcome> {
        let page = self
            .connections
            .subscribers_page(
                &job.topic,
                job.shard,
                job.after.as_ref(),
                self.settings.page.max(1),
                now_ms,
            )
            .await?;
        let mut outcome = JobOutcome {
            read: page.connections.len(),
            next: page.resume_after.clone().map(|after| PushJob {
                after: Some(after),
                ..job.clone()
            }),
            ..JobOutcome::default()
        };
        // Chunks start by the schedule, not by the previous chunk's end: a chunk's posts take
        // a round trip each, and a small share of the budget (a worker's) in chunks of a few
        // posts would otherwise be held to a few posts per round trip. Each chunk is its own
        // task, so that its posts start at their admitted instant.
        let mut in_flight = JoinSet::new();
        for chunk in page.connections.chunks(self.pacer.chunk()) {
            while in_flight.len() >= CHUNKS_IN_FLIGHT {
                if let Some(Ok(report)) = in_flight.join_next().await {
                    add(&mut outcome.report, &report);
                }
            }
            // The frame first, then the schedule: the posts start at their admitted instant,
            // not a state read later (which would bunch them past the budget's second).
            let frame = match &self.frames {
                Some(source) => source.frame(&job.topic, job.started_ms, &job.frame).await,
                None => job.frame.clone(),
            };
            self.pacer.admit(chunk.len()).await;
            let (notifier, connections, fanout, chunk) = (
                self.notifier.clone(),
                self.connections.clone(),
                self.fanout.clone(),
                chunk.to_vec(),
            );
            in_flight.spawn(async move {
                broadcast(&notifier, &connections, &chunk, frame.as_bytes(), &fanout).await
            });
        }
        while let Some(joined) = in_flight.join_next().await {
            if let Ok(report) = joined {
                add(&mut outcome.report, &report);
            }
        }
        Ok(outcome)
    }
}

/// Chunks of one job posting at once at most.
const CHUNKS_IN_FLIGHT: usize = 8;

/// Sum of two reports.
pub fn add(total: &mut FanoutReport, part: &FanoutReport) {
    total.targets += part.targets;
    total.delivered += part.delivered;
    total.gone += part.gone;
    total.retries += part.retries;
    total.failed += part.failed;
}

/// One page of a shard's live subscribers, in connection-id order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubscriberPage {
    pub connections: Vec<ConnectionId>,
    /// Where the next page starts (the last item read, live or not), if the shard may hold
    /// more: a page of expired records still moves the reader on.
    pub resume_after: Option<ConnectionId>,
}

/// What a pusher has done since it started.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PushTotals {
    /// Pushes started (one per topic per spacing at most).
    pub pushes: u64,
    /// Changes seen (stream records of a summary, local or replicated).
    pub changes: u64,
    /// Jobs run (a shard's page each).
    pub jobs: u64,
    /// Subscriber items read.
    pub subscriber_reads: u64,
    /// Posts made, delivered, to connections found gone, failed after retries.
    pub posts: u64,
    pub delivered: u64,
    pub gone: u64,
    pub failed: u64,
    /// Jobs whose page could not be read (their subscribers wait for the next push, or their
    /// own heartbeat's resync).
    pub failed_jobs: u64,
    /// Changes merged into a push already in flight (its last job starts a trailing one).
    pub merged: u64,
    /// Starts put off to the queue, due when the topic's spacing ends (it ended past the
    /// wait limit: a worker starts the push then).
    pub deferred: u64,
    /// Pushes whose jobs could not be queued (the stream batch is retried for them).
    pub unqueued: u64,
    pub widening: Widening,
}

impl PushTotals {
    /// Another pusher's totals added to these (pushers of several instances or Regions; the
    /// widest spacing is the wider of the two).
    pub fn add(&mut self, other: &PushTotals) {
        self.pushes += other.pushes;
        self.changes += other.changes;
        self.jobs += other.jobs;
        self.subscriber_reads += other.subscriber_reads;
        self.posts += other.posts;
        self.delivered += other.delivered;
        self.gone += other.gone;
        self.failed += other.failed;
        self.failed_jobs += other.failed_jobs;
        self.merged += other.merged;
        self.deferred += other.deferred;
        self.unqueued += other.unqueued;
        self.widening.widened_pushes += other.widening.widened_pushes;
        self.widening.widest_spacing_ms = self
            .widening
            .widest_spacing_ms
            .max(other.widening.widest_spacing_ms);
    }
}

/// A mutex's guard, poisoned or not (a panicking holder leaves plain data behind).
pub(crate) fn locked<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_worker_posts_at_its_share_of_the_budget() {
        let settings = |workers| PushSettings {
            budget_per_second: 5_000.0,
            workers,
            ..PushSettings::default()
        };
        assert_eq!(settings(16).budget_per_worker(), 312.5);
        assert_eq!(settings(1).budget_per_worker(), 5_000.0);
        assert_eq!(
            settings(0).budget_per_worker(),
            5_000.0,
            "at least one worker"
        );
    }

    #[test]
    fn shards_are_stable_and_spread() {
        let mut counts = [0usize; SUBSCRIBER_SHARDS as usize];
        for i in 0..16_000 {
            let id = ConnectionId::new(format!("conn-{i:06}")).unwrap();
            counts[shard_of(&id) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&n| (700..1_300).contains(&n)),
            "{counts:?}"
        );
        let id = ConnectionId::new("abc=").unwrap();
        assert_eq!(shard_of(&id), shard_of(&id.clone()));
    }

    #[test]
    fn totals_add_every_counter_and_keep_the_wider_spacing() {
        // Every counter a distinct value, so that one left out of `add` shows.
        let one = PushTotals {
            pushes: 1,
            // Not 2: doubled, 2 is also 2 times 2.
            changes: 20,
            jobs: 3,
            subscriber_reads: 4,
            posts: 5,
            delivered: 6,
            gone: 7,
            failed: 8,
            failed_jobs: 9,
            merged: 10,
            deferred: 11,
            unqueued: 12,
            widening: Widening {
                widened_pushes: 13,
                widest_spacing_ms: 400,
            },
        };
        let mut sum = one.clone();
        sum.add(&PushTotals {
            widening: Widening {
                widened_pushes: 13,
                widest_spacing_ms: 200,
            },
            ..one.clone()
        });
        let doubled = serde_json::to_value(&sum).unwrap();
        let single = serde_json::to_value(&one).unwrap();
        for (field, value) in single.as_object().unwrap() {
            if field == "widening" {
                continue;
            }
            assert_eq!(doubled[field], value.as_u64().unwrap() * 2, "{field}");
        }
        assert_eq!(sum.widening.widened_pushes, 26);
        assert_eq!(sum.widening.widest_spacing_ms, 400);
    }

    #[test]
    fn a_topics_spacing_is_its_window_or_its_audience_at_the_budget_whichever_is_longer() {
        let settings = PushSettings::default();
        assert_eq!(settings.spacing(10), Duration::from_millis(200));
        // 1,000 at 5,000 a second is exactly the window; 10,000 is two seconds.
        assert_eq!(settings.spacing(1_000), Duration::from_millis(200));
        assert_eq!(settings.spacing(10_000), Duration::from_secs(2));
        let no_budget = PushSettings {
            budget_per_second: 0.0,
            ..settings
        };
        assert_eq!(no_budget.spacing(1_000_000), Duration::from_millis(200));
    }

    #[test]
    fn a_push_is_one_job_per_shard_from_its_first_subscriber() {
        let topic = Topic::parse("chat:lobby").unwrap();
        let frame: Arc<str> = Arc::from("frame");
        let jobs = PushJob::for_push(&topic, frame.clone(), 7, 3);
        assert_eq!(jobs.len(), usize::from(SUBSCRIBER_SHARDS));
        for (shard, job) in (0..SUBSCRIBER_SHARDS).zip(&jobs) {
            assert_eq!(job.shard, shard);
            assert_eq!(job.after, None);
            assert_eq!((job.started_ms, job.generation), (7, 3));
            assert_eq!(job.topic, topic);
            assert_eq!(&*job.frame, "frame");
        }
    }

    /// A push source that counts its reads and fails on demand.
    struct Counting {
        reads: std::sync::atomic::AtomicUsize,
        fail: std::sync::atomic::AtomicBool,
    }

    #[async_trait::async_trait]
    impl PushSource for Arc<Counting> {
        async fn push_frame(&self, topic: &Topic) -> crate::Result<String> {
            use std::sync::atomic::Ordering::SeqCst;
            let n = self.reads.fetch_add(1, SeqCst) + 1;
            if self.fail.load(SeqCst) {
                return Err(crate::Error::Transient("down".into()));
            }
            Ok(format!("{topic} #{n}"))
        }
        fn push_worker(&self, _: PushSettings) -> PushWorker {
            unreachable!("not asked in these tests")
        }
    }

    #[tokio::test]
    async fn a_chunks_frame_is_read_again_once_older_than_its_age_or_read_before_its_push() {
        use std::sync::atomic::Ordering::SeqCst;
        let clock = Arc::new(crate::memory::ManualClock::new(1_000));
        let counting = Arc::new(Counting {
            reads: Default::default(),
            fail: Default::default(),
        });
        let source = FrameSource::new(counting.clone(), clock.clone(), Duration::from_millis(200));
        assert!(format!("{source:?}").contains("max_age_ms: 200"));
        let topic = Topic::parse("chat:lobby").unwrap();
        let fallback: Arc<str> = Arc::from("fallback");
        assert_eq!(
            &*source.frame(&topic, 1_000, &fallback).await,
            "chat:lobby #1"
        );
        clock.advance(199);
        assert_eq!(
            &*source.frame(&topic, 1_000, &fallback).await,
            "chat:lobby #1",
            "cached"
        );
        clock.advance(1);
        assert_eq!(
            &*source.frame(&topic, 1_000, &fallback).await,
            "chat:lobby #2",
            "200 ms old: read again"
        );
        // A push that started after the cached read needs a read of its own moment.
        assert_eq!(
            &*source.frame(&topic, 1_201, &fallback).await,
            "chat:lobby #3"
        );
        assert_eq!(
            &*source.frame(&topic, 1_200, &fallback).await,
            "chat:lobby #3",
            "read at its start: cached"
        );
        counting.fail.store(true, SeqCst);
        clock.advance(500);
        assert_eq!(&*source.frame(&topic, 1_200, &fallback).await, "fallback");
        assert_eq!(counting.reads.load(SeqCst), 4);
    }

    /// A pause that records what it was asked to wait and waits nothing.
    #[derive(Debug, Default)]
    struct Recorded(Mutex<Vec<Duration>>);

    #[async_trait::async_trait]
    impl Pause for Recorded {
        async fn pause(&self, duration: Duration) {
            self.0.lock().unwrap().push(duration);
        }
    }

    #[tokio::test]
    async fn the_pacer_admits_chunks_of_a_hundredth_of_the_budget_back_to_back_at_its_rate() {
        let clock = Arc::new(crate::memory::ManualClock::new(0));
        let pause = Arc::new(Recorded::default());
        // 500 a second: chunks of 5, a rate of 490 (two chunks under the budget).
        let pacer = Pacer::new(500.0, clock.clone(), pause.clone());
        assert_eq!(pacer.chunk(), 5);
        for _ in 0..3 {
            pacer.admit(49).await;
        }
        // The first goes at once; each next one 100 ms after the one before.
        assert_eq!(
            *pause.0.lock().unwrap(),
            vec![Duration::from_millis(100), Duration::from_millis(200)]
        );
        // Time that passed counts: a minute later, at once again.
        clock.advance(60_000);
        pacer.admit(49).await;
        assert_eq!(pause.0.lock().unwrap().len(), 2);
        assert_eq!(Pacer::new(50.0, clock.clone(), pause.clone()).chunk(), 1);
        assert_eq!(
            Pacer::new(f64::NAN, clock, pause).chunk(),
            1,
            "no budget: one at a time"
        );
    }

    #[tokio::test]
    async fn the_frame_cache_holds_every_topic_being_pushed_up_to_ten_thousand() {
        let clock = Arc::new(crate::memory::ManualClock::new(1_000));
        let counting = Arc::new(Counting {
            reads: Default::default(),
            fail: Default::default(),
        });
        let source = FrameSource::new(counting.clone(), clock, Duration::from_millis(200));
        let fallback: Arc<str> = Arc::from("fallback");
        let topic = |i: usize| Topic::parse(&format!("chat:t{i}")).unwrap();
        let reads = || counting.reads.load(std::sync::atomic::Ordering::SeqCst);
        // Two topics: each keeps its own frame.
        source.frame(&topic(0), 1_000, &fallback).await;
        source.frame(&topic(1), 1_000, &fallback).await;
        source.frame(&topic(0), 1_000, &fallback).await;
        assert_eq!(reads(), 2);
        // Up to 10,000 held (and one more goes in): the first is still cached.
        for i in 2..=10_000 {
            source.frame(&topic(i), 1_000, &fallback).await;
        }
        source.frame(&topic(0), 1_000, &fallback).await;
        assert_eq!(reads(), 10_001);
        // Past that the cache starts over: the first is read again.
        source.frame(&topic(10_001), 1_000, &fallback).await;
        source.frame(&topic(0), 1_000, &fallback).await;
        assert_eq!(reads(), 10_003);
    }

    #[test]
    fn a_jobs_report_adds_every_count_of_each_chunk() {
        let chunk = FanoutReport {
            targets: 3,
            delivered: 2,
            gone: 1,
            retries: 4,
            failed: 1,
        };
        let mut total = chunk.clone();
        add(&mut total, &chunk);
        add(&mut total, &chunk);
        assert_eq!(
            (
                total.targets,
                total.delivered,
                total.gone,
                total.retries,
                total.failed
            ),
            (9, 6, 3, 12, 3)
        );
    }
}
