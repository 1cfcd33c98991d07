//! The push path: how an auction's changes reach its subscribers, off the bid's path.
//!
//! A bid is answered as soon as it is durable. Its push starts from the state table's stream
//! (in AWS; the lab's change feed), which shows this Region's own summaries and the ones that
//! replication brought alike: one push path for local and replicated bids. Three rules keep the
//! work bounded whatever the audience:
//!
//! - **Conflation** ([`Conflator`]): one auction is pushed at most once per *spacing*, its
//!   window (default 200 ms AWS) widened when the budget needs it. A change within the spacing
//!   is merged into one trailing push, which reads the auction's merged state when it starts:
//!   every subscriber gets the newest state of the window, and never an older one than it had
//!   (clients merge pushes element-wise by the `versions` they carry).
//! - **Shards and pages** ([`PushJob`]): an auction's subscriptions live in
//!   [`SUBSCRIBER_SHARDS`] shards (a stable hash of the connection id); a push is one job per
//!   shard, and a job posts to at most one page of subscribers, handing the rest on as a
//!   continuation. No job's work grows with the audience; a push's jobs run in parallel on the
//!   workers.
//! - **A budget** ([`PushSettings::budget_per_second`]): the Region's share of the account's
//!   API Gateway request quota. Every worker posts by one schedule ([`Pacer`]) that admits
//!   at most the budget in any second, so the pushes stay under it by construction; an auction whose
//!   audience needs longer than the window at that rate gets a wider spacing
//!   (`audience / budget`), and [`Conflator::widened`] says how often and how wide.

use crate::fanout::{broadcast, FanoutConfig, FanoutReport};
use crate::model::ConnectionId;
use crate::ports::{Clock, Connections, Notifier, Pause};
use crate::service::AuctionService;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinSet;
use wsdr_protocol::AuctionId;

/// Shards of one auction's subscriptions. A constant of the data model: a subscription's shard
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
    /// The shortest time between two pushes of one auction.
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
    /// The spacing an auction with `audience` subscribers needs: its window, or the time its
    /// audience takes at the budget, whichever is longer.
    pub fn spacing(&self, audience: usize) -> Duration {
        let at_budget = if self.budget_per_second > 0.0 {
            Duration::from_secs_f64(audience as f64 / self.budget_per_second)
        } else {
            Duration::ZERO
        };
        self.window.max(at_budget)
    }
}

/// Per auction: when its last push started, the spacing it needs, and whether a change waits.
#[derive(Debug, Clone, Default)]
struct AuctionPushes {
    last_start_ms: Option<u64>,
    spacing_ms: u64,
    pending: bool,
}

/// How often, and by how much, the budget widened an auction's window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Widening {
    /// Pushes that started at a spacing wider than the window.
    pub widened_pushes: u64,
    /// The widest spacing any auction needed (AWS ms, as the conflator's clock runs).
    pub widest_spacing_ms: u64,
}

/// Conflation of an auction's changes into pushes, on one clock (ms). Pure: the caller says
/// what changed and when, asks what is due, and says how large each push's audience was.
#[derive(Debug, Clone)]
pub struct Conflator {
    settings: PushSettings,
    auctions: BTreeMap<AuctionId, AuctionPushes>,
    widening: Widening,
}

impl Conflator {
    pub fn new(settings: PushSettings) -> Self {
        Self {
            settings,
            auctions: BTreeMap::new(),
            widening: Widening::default(),
        }
    }

    pub fn settings(&self) -> &PushSettings {
        &self.settings
    }

    /// `auction` changed: it will be pushed (now, or when its spacing has passed).
    pub fn changed(&mut self, auction: &AuctionId) {
        let window = self.settings.window.as_millis() as u64;
        self.auctions
            .entry(auction.clone())
            .or_insert_with(|| AuctionPushes {
                spacing_ms: window,
                ..AuctionPushes::default()
            })
            .pending = true;
    }

    /// The auctions whose push is due at `now_ms`, in id order; each is marked started.
    pub fn due(&mut self, now_ms: u64) -> Vec<AuctionId> {
        let window = self.settings.window.as_millis() as u64;
        let mut due = Vec::new();
        for (auction, state) in &mut self.auctions {
            let ready = state
                .last_start_ms
                .is_none_or(|last| now_ms >= last.saturating_add(state.spacing_ms));
            if state.pending && ready {
                state.pending = false;
                state.last_start_ms = Some(now_ms);
                if state.spacing_ms > window {
                    self.widening.widened_pushes += 1;
                }
                due.push(auction.clone());
            }
        }
        due
    }

    /// When the next waiting push is due, if any waits.
    pub fn next_due_ms(&self) -> Option<u64> {
        self.auctions
            .values()
            .filter(|s| s.pending)
            .map(|s| {
                s.last_start_ms
                    .map_or(0, |last| last.saturating_add(s.spacing_ms))
            })
            .min()
    }

    /// A push of `auction` reached `audience` subscribers: its next spacing follows.
    pub fn pushed(&mut self, auction: &AuctionId, audience: usize) {
        let spacing = self.settings.spacing(audience).as_millis() as u64;
        if let Some(state) = self.auctions.get_mut(auction) {
            state.spacing_ms = spacing;
        }
        self.widening.widest_spacing_ms = self.widening.widest_spacing_ms.max(spacing);
    }

    /// Forget auctions with nothing waiting whose spacing has long passed (bounded memory in
    /// a long-lived process).
    pub fn forget_idle(&mut self, now_ms: u64) {
        self.auctions.retain(|_, s| {
            s.pending
                || s.last_start_ms.is_some_and(|last| {
                    now_ms < last.saturating_add(s.spacing_ms.saturating_mul(10).max(60_000))
                })
        });
    }

    pub fn widened(&self) -> Widening {
        self.widening
    }
}

/// One shard's share of one push: post `frame` to the shard's subscribers after `after`, at
/// most a page of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushJob {
    pub auction: AuctionId,
    pub shard: u16,
    /// The page starts after this connection id (`None`: from the shard's first).
    pub after: Option<ConnectionId>,
    /// The `bidUpdate` frame, built once per push from the merged state when it started.
    pub frame: Arc<str>,
    /// When the push started (the pusher's clock, ms): no chunk of it posts a state read
    /// before then.
    pub started_ms: u64,
}

impl PushJob {
    /// A push's jobs: one per shard.
    pub fn for_push(auction: &AuctionId, frame: Arc<str>, started_ms: u64) -> Vec<PushJob> {
        (0..SUBSCRIBER_SHARDS)
            .map(|shard| PushJob {
                auction: auction.clone(),
                shard,
                after: None,
                frame: frame.clone(),
                started_ms,
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

/// The newest `bidUpdate` frame of each auction, read at most once per `max_age`: a chunk
/// posted late in a long push carries the state of its own moment, not its push's start.
pub struct FrameSource {
    service: AuctionService,
    clock: Arc<dyn Clock>,
    max_age_ms: u64,
    cache: Mutex<HashMap<AuctionId, (Arc<str>, u64)>>,
}

impl std::fmt::Debug for FrameSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameSource")
            .field("max_age_ms", &self.max_age_ms)
            .finish_non_exhaustive()
    }
}

impl FrameSource {
    pub fn new(service: AuctionService, clock: Arc<dyn Clock>, max_age: Duration) -> Self {
        Self {
            service,
            clock,
            max_age_ms: max_age.as_millis() as u64,
            cache: Mutex::default(),
        }
    }

    /// The auction's frame for a chunk of the push that started at `started_ms`: the cached
    /// one if it was read since the push started and is at most `max_age` old (a frame read
    /// before the push could miss the very change the push is for), else a fresh read;
    /// `fallback` (the push's own frame) if it cannot be read.
    pub async fn frame(
        &self,
        auction: &AuctionId,
        started_ms: u64,
        fallback: &Arc<str>,
    ) -> Arc<str> {
        let now = self.clock.now_ms();
        if let Some((frame, read_at)) = locked(&self.cache).get(auction) {
            if *read_at >= started_ms && now < read_at.saturating_add(self.max_age_ms) {
                return frame.clone();
            }
        }
        match self.service.push_frame(auction).await {
            Ok(frame) => {
                let frame: Arc<str> = Arc::from(frame);
                let mut cache = locked(&self.cache);
                // Bounded: only auctions being pushed are cached; drop the rest when large.
                if cache.len() > 10_000 {
                    cache.clear();
                }
                cache.insert(auction.clone(), (frame.clone(), now));
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
                &job.auction,
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
        for chunk in page.connections.chunks(self.pacer.chunk()) {
            self.pacer.admit(chunk.len()).await;
            let frame = match &self.frames {
                Some(source) => source.frame(&job.auction, job.started_ms, &job.frame).await,
                None => job.frame.clone(),
            };
            let report = broadcast(
                &self.notifier,
                &self.connections,
                chunk,
                frame.as_bytes(),
                &self.fanout,
            )
            .await;
            add(&mut outcome.report, &report);
        }
        Ok(outcome)
    }
}

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
    /// Pushes started (one per auction per spacing at most).
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
    pub widening: Widening,
}

/// A Region's pusher (one per Lambda instance that reads the stream; one per lab Region):
/// conflation, then each due push as [`SUBSCRIBER_SHARDS`] jobs on at most `workers` at once.
pub struct Pusher {
    service: AuctionService,
    worker: PushWorker,
    /// The conflator's time (AWS ms: the lab's scaled clock, the system's in Lambda).
    clock: Arc<dyn Clock>,
    conflator: Mutex<Conflator>,
    totals: Mutex<PushTotals>,
}

impl std::fmt::Debug for Pusher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pusher")
            .field("settings", &self.worker.settings)
            .finish_non_exhaustive()
    }
}

/// Rounds of one [`Pusher::drain`] at most.
pub const DRAIN_ROUNDS: usize = 20;

/// How long one [`Pusher::drain`] waits for spacings to pass, at most.
pub const DRAIN_WAIT_LIMIT: Duration = Duration::from_secs(10);

/// A failed page read is tried this many times more before the job is given up.
const JOB_RETRIES: u32 = 3;

fn locked<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Pusher {
    /// `pause` paces the workers (the lab's scaled sleep, or tokio's).
    pub fn new(
        service: AuctionService,
        settings: PushSettings,
        clock: Arc<dyn Clock>,
        pause: Arc<dyn Pause>,
    ) -> Self {
        let mut worker = service.push_worker(settings);
        worker.pacer = Arc::new(Pacer::new(
            settings.budget_per_second,
            clock.clone(),
            pause.clone(),
        ));
        // Each chunk posts the newest state of its moment (read at most once per window): a
        // bid committed during a long push reaches every watcher still ahead in it.
        worker.frames = Some(Arc::new(FrameSource::new(
            service.clone(),
            clock.clone(),
            settings.window,
        )));
        worker.pause = pause;
        Self {
            service,
            worker,
            clock,
            conflator: Mutex::new(Conflator::new(settings)),
            totals: Mutex::default(),
        }
    }

    pub fn settings(&self) -> PushSettings {
        self.worker.settings
    }

    /// These auctions changed (one stream batch's, or one replicated write's).
    pub fn changed<'a>(&self, auctions: impl IntoIterator<Item = &'a AuctionId>) {
        let mut conflator = locked(&self.conflator);
        let mut totals = locked(&self.totals);
        for auction in auctions {
            conflator.changed(auction);
            totals.changes += 1;
        }
    }

    /// When the next waiting push is due (the pusher's clock, ms), if any waits.
    pub fn next_due_ms(&self) -> Option<u64> {
        locked(&self.conflator).next_due_ms()
    }

    /// The pusher's clock now (ms).
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    pub fn totals(&self) -> PushTotals {
        let mut totals = locked(&self.totals).clone();
        totals.widening = locked(&self.conflator).widened();
        totals
    }

    /// Start every push due now and run its jobs to the end, continuations included, on at
    /// most `workers` at once. Returns the auctions pushed.
    pub async fn push_due(&self) -> Vec<AuctionId> {
        let now = self.clock.now_ms();
        let due = {
            let mut conflator = locked(&self.conflator);
            conflator.forget_idle(now);
            conflator.due(now)
        };
        let mut queue: VecDeque<(PushJob, u32)> = VecDeque::new();
        let mut pushed = Vec::new();
        for auction in due {
            // The frame is read when the push starts: it carries every change before it.
            match self.service.push_frame(&auction).await {
                Ok(frame) => {
                    let frame: Arc<str> = Arc::from(frame);
                    queue.extend(
                        PushJob::for_push(&auction, frame, now)
                            .into_iter()
                            .map(|j| (j, 0)),
                    );
                    pushed.push(auction);
                }
                Err(error) => {
                    // Nothing was posted: mark it changed again, so that the next round
                    // (after its spacing) tries once more.
                    tracing::warn!(%error, auction_id = %auction, "push not started: state unreadable");
                    locked(&self.conflator).changed(&auction);
                }
            }
        }
        locked(&self.totals).pushes += pushed.len() as u64;
        let mut audience: HashMap<AuctionId, usize> = HashMap::new();
        let workers = self.worker.settings.workers.max(1);
        let mut running = JoinSet::new();
        loop {
            while running.len() < workers {
                let Some((job, tries)) = queue.pop_front() else {
                    break;
                };
                let worker = self.worker.clone();
                let now = self.clock.now_ms();
                running.spawn(async move {
                    let outcome = worker.run(&job, now).await;
                    (job, tries, outcome)
                });
            }
            let Some(joined) = running.join_next().await else {
                break;
            };
            let Ok((job, tries, outcome)) = joined else {
                locked(&self.totals).failed_jobs += 1;
                continue;
            };
            match outcome {
                Ok(outcome) => {
                    let mut totals = locked(&self.totals);
                    totals.jobs += 1;
                    totals.subscriber_reads += outcome.read as u64;
                    totals.posts += outcome.report.targets as u64;
                    totals.delivered += outcome.report.delivered as u64;
                    totals.gone += outcome.report.gone as u64;
                    totals.failed += outcome.report.failed as u64;
                    *audience.entry(job.auction.clone()).or_default() += outcome.report.targets;
                    if let Some(next) = outcome.next {
                        queue.push_back((next, 0));
                    }
                }
                Err(error) if tries < JOB_RETRIES && error.is_retryable() => {
                    self.worker
                        .pause
                        .pause(Duration::from_millis(50 << tries))
                        .await;
                    queue.push_back((job, tries + 1));
                }
                Err(error) => {
                    tracing::warn!(%error, auction_id = %job.auction, shard = job.shard, "push job given up");
                    locked(&self.totals).failed_jobs += 1;
                }
            }
        }
        let mut conflator = locked(&self.conflator);
        for auction in &pushed {
            conflator.pushed(auction, audience.get(auction).copied().unwrap_or(0));
        }
        pushed
    }

    /// Push until nothing waits, pausing through each auction's spacing: what one stream
    /// batch does (a change within the spacing of the last push waits for it to pass).
    /// Bounded: a push whose state stays unreadable is given up after [`DRAIN_ROUNDS`]
    /// rounds, and a push due more than [`DRAIN_WAIT_LIMIT`] after the drain began is left
    /// waiting (this instance's next batch pushes it; subscribers resync by heartbeat anyway),
    /// so that a batch never runs into the function's timeout and is retried for a push.
    pub async fn drain(&self) -> Vec<AuctionId> {
        let mut pushed = Vec::new();
        let limit = self
            .clock
            .now_ms()
            .saturating_add(DRAIN_WAIT_LIMIT.as_millis() as u64);
        for _ in 0..DRAIN_ROUNDS {
            let Some(due) = self.next_due_ms().filter(|due| *due <= limit) else {
                break;
            };
            let now = self.clock.now_ms();
            if due > now {
                self.worker
                    .pause
                    .pause(Duration::from_millis(due - now))
                    .await;
            }
            pushed.extend(self.push_due().await);
        }
        pushed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(id: &str) -> AuctionId {
        AuctionId::new(id).unwrap()
    }

    #[test]
    fn a_quiet_auction_is_pushed_at_once_and_a_hot_one_once_per_window() {
        let mut c = Conflator::new(PushSettings::default());
        c.changed(&a("a1"));
        assert_eq!(c.due(1_000), vec![a("a1")]);
        c.pushed(&a("a1"), 10);
        // Ten changes within the window: one trailing push when it ends.
        for _ in 0..10 {
            c.changed(&a("a1"));
        }
        assert!(c.due(1_100).is_empty());
        assert_eq!(c.next_due_ms(), Some(1_200));
        assert_eq!(c.due(1_200), vec![a("a1")]);
        assert!(c.due(1_300).is_empty());
        assert_eq!(c.next_due_ms(), None);
    }

    #[test]
    fn an_audience_over_the_budget_widens_the_window_and_says_so() {
        let settings = PushSettings {
            budget_per_second: 5_000.0,
            ..PushSettings::default()
        };
        let mut c = Conflator::new(settings);
        c.changed(&a("hot"));
        assert_eq!(c.due(0), vec![a("hot")]);
        c.pushed(&a("hot"), 100_000);
        c.changed(&a("hot"));
        assert!(c.due(19_999).is_empty());
        assert_eq!(c.due(20_000), vec![a("hot")]);
        assert_eq!(
            c.widened(),
            Widening {
                widened_pushes: 1,
                widest_spacing_ms: 20_000
            }
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
    fn idle_auctions_are_forgotten_and_waiting_ones_kept() {
        let mut c = Conflator::new(PushSettings::default());
        c.changed(&a("idle"));
        c.due(0);
        c.changed(&a("waiting"));
        c.forget_idle(1_000_000);
        assert_eq!(c.due(1_000_000), vec![a("waiting")]);
    }
}
