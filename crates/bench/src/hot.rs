//! A hot auction in virtual time: the real bid path and the real pusher (`wsdr_core::push`:
//! conflation, shards, pages, the budget) against models of the AWS services they call, on
//! tokio's paused clock (a run is a function of its seed; no wall time is measured).
//!
//! Modelled (each figure is an assumption, stated in BENCHMARKS.md beside the results):
//! - the state table: every request of the bid path waits 4-12 ms (uniform);
//! - the connections table: one page query of a shard waits 5-15 ms;
//! - the table's stream: polled 4 times a second (Lambda's rate for a DynamoDB stream shard),
//!   one invocation per shard at a time (`ParallelizationFactor` 1), which only starts pushes
//!   (`App::on_summaries`: the lease, one state read, the jobs on the queue);
//! - the push lease item: each conditional update waits 4-12 ms;
//! - SQS and the workers' event source mapping: a job is handed to a worker 10-40 ms after it
//!   was sent, one job per invocation (template.yaml's `BatchSize: 1`), each its own instance
//!   posting at budget / workers (`run_job`); as many invocations at once as the mapping has
//!   scaled to (`wsdr_lab::world::mapping`, as AWS states it for a standard queue: five when
//!   messages appear, then up to 300 more a minute while they wait, at most `workers`, the
//!   mapping's maximum concurrency; back to five after 10 s with nothing to do), each new
//!   execution environment after a 250 ms cold start (an assumption: AWS publishes none);
//! - `@connections`: each post takes 8-20 ms, and every post draws a token from the account's
//!   bucket (10,000 requests per second, burst 5,000, API Gateway's account quota); an empty
//!   bucket answers 429, which the fan-out retries with backoff as it does against AWS.
//!
//! Not modelled: other APIs of the account (the budget leaves them the rest of the bucket),
//! Lambda's per-function scaling rate (1,000 execution environments per 10 s: far above the
//! mapping's 16), environments reclaimed within a run.

use async_trait::async_trait;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use wsdr_auction::{Auction, AuctionService};
use wsdr_core::memory::{MemoryConnections, MemoryStateStore};
use wsdr_core::push::{
    Begin, Finished, InProcessLeases, LocalPushQueue, PushJob, PushLeases, PushPorts, PushQueue,
    PushSettings, Pusher,
};
use wsdr_core::{
    Census, Clock, ConnectionId, Connections, Entropy, Notifier, SeededEntropy, SubscriberPage,
    UserId,
};
use wsdr_lab::world::mapping::{MappingSettings, QueueMapping};
use wsdr_lab::world::store::{FaultyStore, ReplicaStore};
use wsdr_lab::RegionId;
use wsdr_protocol::{Amount, AuctionId, BidId, BidStatus, ServerMessage, Topic};

/// One run's load and settings.
#[derive(Debug, Clone)]
pub struct HotParams {
    pub watchers: usize,
    pub bids_per_s: f64,
    /// AWS seconds of bidding.
    pub seconds: f64,
    pub seed: u64,
    pub push: PushSettings,
}

/// What one run measured (virtual time, ms).
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HotResult {
    pub watchers: usize,
    pub bids_per_s: f64,
    pub bids_accepted: usize,
    pub bid_handler_p99_ms: f64,
    /// Per accepted bid: from its answer to the last watcher shown a high bid at least as
    /// high (every watcher, not a percentile of them). p99 and max over bids.
    pub every_watcher_p99_ms: f64,
    pub every_watcher_max_ms: f64,
    /// The same p99 over the bids answered after the first [`WARM_AFTER`]: the workers'
    /// event source mapping scaled up, its environments warm.
    pub every_watcher_warm_p99_ms: f64,
    /// The run's first bid (its push met five cold workers).
    pub first_bid_shown_ms: f64,
    /// Bids no push covered for every watcher before the run ended.
    pub bids_never_shown: usize,
    /// `@connections` calls in the busiest second (sliding), 429s included.
    pub max_posts_per_s: usize,
    pub budget_per_s: f64,
    pub posts: u64,
    pub throttled: u64,
    pub pushes: u64,
    pub widened_pushes: u64,
    pub widest_spacing_ms: u64,
    pub subscriber_reads_per_bid: f64,
    /// Stream invocations and their total duration (s), for the Lambda cost.
    pub stream_invocations: u64,
    pub stream_seconds: f64,
    /// The stream invocation's p99 (ms): it starts pushes only, whatever the audience.
    pub stream_p99_ms: f64,
    /// Worker invocations (one job each) and their total duration (s).
    pub worker_invocations: u64,
    pub worker_seconds: f64,
    /// The longest worker invocation (ms): one batch of pages, whatever the audience.
    pub worker_max_ms: f64,
    /// Worker invocations that started a new execution environment.
    pub worker_cold_starts: u64,
    /// The most worker invocations that ran at once.
    pub peak_workers: usize,
    /// When the mapping first ran `workers` invocations at once (ms from the start).
    pub full_concurrency_at_ms: Option<f64>,
    /// SQS requests: sends (10 jobs each at most), and a receive and a delete per batch.
    pub sqs_requests: u64,
    /// Conditional updates of the push leases (a write unit each).
    pub lease_writes: u64,
    pub bid_handler_seconds: f64,
}

/// Epoch ms on tokio's (paused) clock.
#[derive(Debug)]
pub(crate) struct VirtualClock {
    pub(crate) start: Instant,
    pub(crate) base_ms: u64,
}

impl Clock for VirtualClock {
    fn now_ms(&self) -> u64 {
        self.base_ms + self.start.elapsed().as_millis() as u64
    }
}

/// The account's API Gateway bucket and each post's service time.
#[derive(Debug)]
struct ModelNotifier {
    entropy: Arc<dyn Entropy>,
    start: Instant,
    state: Mutex<NotifierState>,
}

#[derive(Debug, Default)]
struct NotifierState {
    tokens: f64,
    refilled_at: f64,
    /// Every call's time (s since start), 429s included.
    calls: Vec<f64>,
    throttled: u64,
    /// (delivered at, watcher, high amount of the frame).
    deliveries: Vec<(f64, u32, u64)>,
}

pub(crate) const ACCOUNT_RPS: f64 = 10_000.0;
pub(crate) const ACCOUNT_BURST: f64 = 5_000.0;

#[async_trait]
impl Notifier for ModelNotifier {
    async fn send(&self, connection: &ConnectionId, payload: &[u8]) -> wsdr_core::Result<()> {
        let now = self.start.elapsed().as_secs_f64();
        let admitted = {
            let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
            s.tokens = (s.tokens + (now - s.refilled_at) * ACCOUNT_RPS).min(ACCOUNT_BURST);
            s.refilled_at = now;
            s.calls.push(now);
            if s.tokens >= 1.0 {
                s.tokens -= 1.0;
                true
            } else {
                s.throttled += 1;
                false
            }
        };
        if !admitted {
            return Err(wsdr_core::Error::Throttled(
                "429 from the account bucket".into(),
            ));
        }
        let latency = 8_000 + self.entropy.below(12_001);
        tokio::time::sleep(Duration::from_micros(latency)).await;
        let amount = serde_json::from_slice::<serde_json::Value>(payload)
            .ok()
            .and_then(|f| f["highBid"]["amount"].as_u64())
            .unwrap_or(0);
        let at = self.start.elapsed().as_secs_f64();
        let watcher = connection.as_str()[1..].parse::<u32>().unwrap_or(u32::MAX);
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .deliveries
            .push((at, watcher, amount));
        Ok(())
    }
}

/// The connections table with a page query's service time.
#[derive(Debug)]
pub(crate) struct ModelConnections {
    pub(crate) inner: MemoryConnections,
    pub(crate) entropy: Arc<dyn Entropy>,
}

#[async_trait]
impl Connections for ModelConnections {
    async fn register(
        &self,
        connection: &ConnectionId,
        user: &UserId,
        now_ms: u64,
    ) -> wsdr_core::Result<()> {
        self.inner.register(connection, user, now_ms).await
    }
    async fn subscribe(
        &self,
        connection: &ConnectionId,
        user: &UserId,
        topic: &Topic,
        now_ms: u64,
    ) -> wsdr_core::Result<()> {
        self.inner.subscribe(connection, user, topic, now_ms).await
    }
    async fn subscribers(
        &self,
        topic: &Topic,
        now_ms: u64,
    ) -> wsdr_core::Result<Vec<ConnectionId>> {
        self.inner.subscribers(topic, now_ms).await
    }
    async fn subscribers_page(
        &self,
        topic: &Topic,
        shard: u16,
        after: Option<&ConnectionId>,
        limit: usize,
        now_ms: u64,
    ) -> wsdr_core::Result<SubscriberPage> {
        let wait = 5_000 + self.entropy.below(10_001);
        tokio::time::sleep(Duration::from_micros(wait)).await;
        self.inner
            .subscribers_page(topic, shard, after, limit, now_ms)
            .await
    }
    async fn remove(&self, connection: &ConnectionId) -> wsdr_core::Result<()> {
        self.inner.remove(connection).await
    }
    async fn all(&self, now_ms: u64) -> wsdr_core::Result<Vec<ConnectionId>> {
        self.inner.all(now_ms).await
    }
    async fn census(&self) -> wsdr_core::Result<Option<Census>> {
        self.inner.census().await
    }
    async fn take_census(&self, now_ms: u64) -> wsdr_core::Result<Census> {
        self.inner.take_census(now_ms).await
    }
}

/// The push lease item: each conditional update's service time, counted.
#[derive(Debug)]
pub(crate) struct ModelLeases {
    pub(crate) inner: InProcessLeases,
    pub(crate) entropy: Arc<dyn Entropy>,
    pub(crate) writes: std::sync::atomic::AtomicU64,
}

impl ModelLeases {
    async fn wait(&self) {
        self.writes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let wait = 4_000 + self.entropy.below(8_001);
        tokio::time::sleep(Duration::from_micros(wait)).await;
    }
}

#[async_trait]
impl PushLeases for ModelLeases {
    async fn begin(&self, topic: &Topic, now_ms: u64, window_ms: u64) -> wsdr_core::Result<Begin> {
        self.wait().await;
        self.inner.begin(topic, now_ms, window_ms).await
    }
    async fn record(
        &self,
        topic: &Topic,
        generation: u64,
        targets: u64,
        job_done: bool,
    ) -> wsdr_core::Result<Option<Finished>> {
        self.wait().await;
        self.inner
            .record(topic, generation, targets, job_done)
            .await
    }
    async fn close(&self, topic: &Topic, generation: u64, next_ms: u64) -> wsdr_core::Result<bool> {
        self.wait().await;
        self.inner.close(topic, generation, next_ms).await
    }
    async fn release(&self, topic: &Topic, generation: u64) -> wsdr_core::Result<()> {
        self.wait().await;
        self.inner.release(topic, generation).await
    }
}

/// SQS: a send takes 5-15 ms per request of up to 10 jobs; the jobs wait in memory for the
/// workers.
#[derive(Debug)]
pub(crate) struct ModelQueue {
    pub(crate) jobs: LocalPushQueue,
    pub(crate) entropy: Arc<dyn Entropy>,
    pub(crate) requests: std::sync::atomic::AtomicU64,
}

#[async_trait]
impl PushQueue for ModelQueue {
    async fn send(&self, jobs: Vec<PushJob>) -> wsdr_core::Result<()> {
        let requests = jobs.len().div_ceil(10) as u64;
        self.requests
            .fetch_add(requests, std::sync::atomic::Ordering::Relaxed);
        let wait = 5_000 + self.entropy.below(10_001);
        tokio::time::sleep(Duration::from_micros(wait)).await;
        self.jobs.send(jobs).await
    }

    async fn send_start(&self, topic: &Topic, delay: Duration) -> wsdr_core::Result<()> {
        self.requests
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let wait = 5_000 + self.entropy.below(10_001);
        tokio::time::sleep(Duration::from_micros(wait)).await;
        self.jobs.send_start(topic, delay).await
    }
}

/// For each accepted bid (answered at, amount): when it was answered (s) and from then to the
/// moment the last watcher had been sent a high bid at least as high (ms), and how many bids
/// some watcher
/// never got. Each delivery raises its watcher's shown high over a range of bid amounts; a
/// bid's time is the latest such raise over its amount among all watchers, found by painting
/// the ranges latest first.
fn every_watcher_latencies(
    deliveries: &[(f64, u32, u64)],
    accepted: &[(f64, u64)],
    watchers: usize,
) -> (Vec<(f64, f64)>, usize) {
    let mut amounts: Vec<u64> = accepted.iter().map(|(_, a)| *a).collect();
    amounts.sort_unstable();
    amounts.dedup();
    let mut by_watcher = deliveries.to_vec();
    by_watcher.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.total_cmp(&b.0)));
    // (time, first amount rank, last amount rank): a watcher's shown high rose over them.
    let mut raises: Vec<(f64, usize, usize)> = Vec::new();
    let mut lowest_final = if watchers == 0 { 0 } else { u64::MAX };
    let mut seen = 0;
    let mut i = 0;
    while i < by_watcher.len() {
        let watcher = by_watcher[i].1;
        let mut shown = 0u64;
        while i < by_watcher.len() && by_watcher[i].1 == watcher {
            let (at, _, amount) = by_watcher[i];
            if amount > shown {
                let from = amounts.partition_point(|a| *a <= shown);
                let to = amounts.partition_point(|a| *a <= amount);
                if from < to {
                    raises.push((at, from, to));
                }
                shown = amount;
            }
            i += 1;
        }
        seen += 1;
        lowest_final = lowest_final.min(shown);
    }
    if seen < watchers {
        lowest_final = 0;
    }
    raises.sort_by(|a, b| b.0.total_cmp(&a.0));
    // Paint each amount with the latest raise covering it (next-unpainted pointers).
    let mut time = vec![f64::NAN; amounts.len()];
    let mut next: Vec<usize> = (0..=amounts.len()).collect();
    fn find(next: &mut [usize], x: usize) -> usize {
        let mut root = x;
        while next[root] != root {
            root = next[root];
        }
        let mut y = x;
        while next[y] != root {
            let up = next[y];
            next[y] = root;
            y = up;
        }
        root
    }
    for (at, from, to) in raises {
        let mut k = find(&mut next, from);
        while k < to {
            time[k] = at;
            next[k] = k + 1;
            k = find(&mut next, k + 1);
        }
    }
    let mut latencies = Vec::new();
    let mut never = 0;
    for (answered, amount) in accepted {
        let rank = amounts.partition_point(|a| a < amount);
        match time.get(rank) {
            Some(t) if *amount <= lowest_final && t.is_finite() => {
                latencies.push((*answered, ((t - answered) * 1000.0).max(0.0)));
            }
            _ => never += 1,
        }
    }
    (latencies, never)
}

/// Jobs per worker invocation: template.yaml's `BatchSize` on the push queue. One: a batch of
/// several would run its pages one after another at one worker's share of the budget while
/// other workers wait idle (measured: 10 to a batch put 1,000 watchers' p99 at 893 ms against
/// 1 s, one to a batch brings it back under the window's reach).
pub(crate) const WORKER_BATCH: usize = 1;

/// Bids answered before this are the cold part of a run: the push workers' mapping starts at
/// five cold invocations and needs about 2.2 s to reach 16.
const WARM_AFTER: Duration = Duration::from_secs(10);

/// Lambda polls a DynamoDB stream shard 4 times a second.
const STREAM_POLL: Duration = Duration::from_millis(250);

/// The table's stream as Lambda reads it: polled every [`STREAM_POLL`], each poll that finds
/// summaries one invocation that starts their pushes (its duration, s, into `stats`).
pub(crate) fn spawn_stream(
    mut feed: tokio::sync::mpsc::UnboundedReceiver<wsdr_core::items::Change>,
    pusher: Arc<Pusher>,
    stats: Arc<Mutex<Vec<f64>>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut open = true;
        while open {
            tokio::time::sleep(STREAM_POLL).await;
            let mut batch = Vec::new();
            loop {
                match feed.try_recv() {
                    Ok(change) => {
                        if let wsdr_core::items::Item::Summary { topic, .. } = &change.item {
                            batch.push(topic.clone());
                        }
                    }
                    Err(tokio::sync::mpsc::error::TryRecvError::Empty) => break,
                    Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => {
                        open = false;
                        break;
                    }
                }
            }
            if batch.is_empty() {
                continue;
            }
            let began = Instant::now();
            pusher.changed(&batch);
            pusher.drain().await;
            stats
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(began.elapsed().as_secs_f64());
        }
    })
}

/// One run, on a fresh paused runtime of its own.
pub fn run(params: &HotParams) -> anyhow::Result<HotResult> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()?;
    runtime.block_on(run_paused(params.clone()))
}

async fn run_paused(params: HotParams) -> anyhow::Result<HotResult> {
    let start = Instant::now();
    let clock = Arc::new(VirtualClock {
        start,
        base_ms: 1_767_225_600_000,
    });
    let entropy: Arc<dyn Entropy> = Arc::new(SeededEntropy::new(params.seed));
    let memory = Arc::new(MemoryStateStore::new("us-east-1", clock.clone()));
    let feed = memory.change_feed();
    let replica: Arc<dyn ReplicaStore> = memory.clone();
    let store = Arc::new(FaultyStore::new(
        RegionId::Primary,
        replica,
        entropy.clone(),
        Some((Duration::from_millis(4), Duration::from_millis(12))),
    ));
    let connections = Arc::new(ModelConnections {
        inner: MemoryConnections::default(),
        entropy: entropy.clone(),
    });
    let notifier = Arc::new(ModelNotifier {
        entropy: entropy.clone(),
        start,
        state: Mutex::new(NotifierState {
            tokens: ACCOUNT_BURST,
            ..NotifierState::default()
        }),
    });
    let service = AuctionService::new(
        store,
        connections.clone(),
        notifier.clone(),
        clock.clone(),
        "us-east-1",
    )
    .with_entropy(entropy.clone());
    let lot = AuctionId::new("hot-lot")?;
    service
        .ensure_auction(&Auction {
            id: lot.clone(),
            item: "a hot lot".into(),
            starting_price: Amount::new(1)?,
            min_increment: 1,
            closes_at: None,
        })
        .await?;
    let now = clock.now_ms();
    let watcher = UserId::new("watcher")?;
    for i in 0..params.watchers {
        connections
            .inner
            .subscribe(
                &ConnectionId::new(format!("w{i:07}"))?,
                &watcher,
                &wsdr_auction::store::topic(&lot),
                now,
            )
            .await?;
    }
    let leases = Arc::new(ModelLeases {
        inner: InProcessLeases::default(),
        entropy: entropy.clone(),
        writes: Default::default(),
    });
    let queue = Arc::new(ModelQueue {
        jobs: LocalPushQueue::new(clock.clone(), Arc::new(wsdr_core::TokioPause)),
        entropy: entropy.clone(),
        requests: Default::default(),
    });
    let workers = params.push.workers.max(1);
    // One instance per invocation that may run at once: the stream's reader, and each worker
    // (its own schedule at budget / workers).
    let instance = |posts_per_second: f64| {
        Arc::new(Pusher::queued(
            service.clone(),
            params.push,
            clock.clone(),
            Arc::new(wsdr_core::TokioPause),
            PushPorts {
                leases: leases.clone(),
                queue: queue.clone(),
                posts_per_second,
            },
        ))
    };
    let pusher = instance(params.push.budget_per_second);

    // The stream: every poll that finds records is one invocation starting pushes.
    let stream_stats = Arc::new(Mutex::new(Vec::<f64>::new()));
    let stream = spawn_stream(feed, pusher.clone(), stream_stats.clone());

    // The workers: at most `workers` invocations at once, each handed one job (a batch of
    // `WORKER_BATCH`) 10-40 ms after it was sent.
    // As many run at once as the event source mapping has scaled to (five, then one more every
    // 200 ms while jobs wait), each new execution environment after its cold start: the lab's
    // own model of the mapping (`wsdr_lab::world::mapping`).
    let mapping = QueueMapping::new(
        MappingSettings::aws(workers),
        clock.clone(),
        Arc::new(wsdr_core::TokioPause),
    );
    let mut worker_tasks = vec![tokio::spawn(mapping.clone().scale())];
    let worker_stats = Arc::new(Mutex::new(Vec::<f64>::new()));
    let mut worker_instances = Vec::new();
    for _ in 0..workers {
        let worker = instance(params.push.budget_per_worker());
        worker_instances.push(worker.clone());
        let (queue, stats, entropy) = (queue.clone(), worker_stats.clone(), entropy.clone());
        let mapping = mapping.clone();
        worker_tasks.push(tokio::spawn(async move {
            loop {
                let mut batch = vec![queue.jobs.next().await];
                let handoff = 10_000 + entropy.below(30_001);
                tokio::time::sleep(Duration::from_micros(handoff)).await;
                while batch.len() < WORKER_BATCH {
                    match queue.jobs.try_next() {
                        Some(job) => batch.push(job),
                        None => break,
                    }
                }
                let invocation = mapping.invoke().await;
                // Billed from its init (Lambda bills the init phase of every runtime).
                let init = if invocation.cold {
                    mapping.settings().cold_start.as_secs_f64()
                } else {
                    0.0
                };
                let began = Instant::now();
                for job in &batch {
                    // A failed job would go back to the queue; the models never fail one.
                    let _ = worker.run(job).await;
                }
                drop(invocation);
                stats
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(init + began.elapsed().as_secs_f64());
            }
        }));
    }

    // The bids: one every 1/rate s, each its own invocation; amounts rise with time.
    let total = (params.bids_per_s * params.seconds).round() as usize;
    let mut bids = tokio::task::JoinSet::new();
    for k in 0..total {
        tokio::time::sleep_until(start + Duration::from_secs_f64(k as f64 / params.bids_per_s))
            .await;
        let service = service.clone();
        let lot = lot.clone();
        bids.spawn(async move {
            let began = Instant::now();
            let reply = service
                .bid(
                    &UserId::new(format!("bidder{}", k % 50)).ok()?,
                    &lot,
                    Amount::new(1_000 + k as u64).ok()?,
                    &BidId::new(format!("hot-bid-{k:08}")).ok()?,
                )
                .await
                .ok()?;
            let took = began.elapsed().as_secs_f64();
            let answered = Instant::now().duration_since(start).as_secs_f64();
            let accepted = matches!(
                reply.message,
                ServerMessage::BidResult {
                    status: BidStatus::Accepted,
                    ..
                }
            );
            Some((took, accepted.then_some((answered, 1_000 + k as u64))))
        });
    }
    let mut handler = Vec::new();
    let mut accepted = Vec::new();
    while let Some(joined) = bids.join_next().await {
        if let Ok(Some((took, outcome))) = joined {
            handler.push(took);
            accepted.extend(outcome);
        }
    }
    // Let the last pushes finish: a minute past the widest spacing, then stop the stream.
    let settle = Duration::from_secs(60) + params.push.spacing(params.watchers);
    tokio::time::sleep(settle).await;
    stream.abort();
    for task in &worker_tasks {
        task.abort();
    }

    let notifier_state =
        std::mem::take(&mut *notifier.state.lock().unwrap_or_else(|p| p.into_inner()));
    let mut totals = pusher.totals();
    for worker in &worker_instances {
        totals.add(&worker.totals());
    }
    let (shown, never) =
        every_watcher_latencies(&notifier_state.deliveries, &accepted, params.watchers);
    let sorted = |warm_only: bool| {
        let mut v: Vec<f64> = shown
            .iter()
            .filter(|(answered, _)| !warm_only || *answered >= WARM_AFTER.as_secs_f64())
            .map(|(_, ms)| *ms)
            .collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let (latencies, warm) = (sorted(false), sorted(true));
    handler.sort_by(f64::total_cmp);
    let mut calls = notifier_state.calls;
    calls.sort_by(f64::total_cmp);
    let mut max_in_second = 0;
    let mut first = 0;
    for (i, t) in calls.iter().enumerate() {
        while calls[first] <= t - 1.0 {
            first += 1;
        }
        max_in_second = max_in_second.max(i + 1 - first);
    }
    let mut stream_times = stream_stats
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    stream_times.sort_by(f64::total_cmp);
    let mut worker_times = worker_stats
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    worker_times.sort_by(f64::total_cmp);
    let worker_invocations = worker_times.len() as u64;
    let sqs_requests =
        queue.requests.load(std::sync::atomic::Ordering::Relaxed) + 2 * worker_invocations;
    Ok(HotResult {
        watchers: params.watchers,
        bids_per_s: params.bids_per_s,
        bids_accepted: accepted.len(),
        bid_handler_p99_ms: crate::common::percentile(&handler, 0.99) * 1000.0,
        every_watcher_p99_ms: crate::common::percentile(&latencies, 0.99),
        every_watcher_max_ms: latencies.last().copied().unwrap_or(f64::NAN),
        every_watcher_warm_p99_ms: crate::common::percentile(&warm, 0.99),
        first_bid_shown_ms: shown.first().map(|(_, ms)| *ms).unwrap_or(f64::NAN),
        bids_never_shown: never,
        max_posts_per_s: max_in_second,
        budget_per_s: params.push.budget_per_second,
        posts: calls.len() as u64,
        throttled: notifier_state.throttled,
        pushes: totals.pushes,
        widened_pushes: totals.widening.widened_pushes,
        widest_spacing_ms: totals.widening.widest_spacing_ms,
        subscriber_reads_per_bid: totals.subscriber_reads as f64 / accepted.len().max(1) as f64,
        stream_invocations: stream_times.len() as u64,
        stream_seconds: stream_times.iter().sum(),
        stream_p99_ms: crate::common::percentile(&stream_times, 0.99) * 1000.0,
        worker_invocations,
        worker_seconds: worker_times.iter().sum(),
        worker_max_ms: worker_times.last().copied().unwrap_or(0.0) * 1000.0,
        worker_cold_starts: mapping.stats().cold_starts,
        peak_workers: mapping.stats().peak_concurrency,
        full_concurrency_at_ms: mapping
            .reached_maximum_ms()
            .map(|ms| ms.saturating_sub(clock.base_ms) as f64),
        sqs_requests,
        lease_writes: leases.writes.load(std::sync::atomic::Ordering::Relaxed),
        bid_handler_seconds: handler.iter().sum(),
    })
}

/// Published prices (us-east-1, on-demand), USD: what the cost columns multiply by.
mod price {
    /// Lambda, arm64, per GB-second and per request.
    pub const LAMBDA_GB_S: f64 = 0.000_013_333_4;
    pub const LAMBDA_REQUEST: f64 = 0.20 / 1e6;
    /// DynamoDB on-demand: per write request unit (replicated writes alike) and read unit.
    pub const WRITE_UNIT: f64 = 0.625 / 1e6;
    pub const READ_UNIT: f64 = 0.125 / 1e6;
    /// API Gateway WebSocket: per message (32 KB increments; every post here is one).
    pub const MESSAGE: f64 = 1.00 / 1e6;
    /// SQS standard queue: per request (64 KB chunks; every request here is one).
    pub const SQS_REQUEST: f64 = 0.40 / 1e6;
}

/// The functions' memory (template.yaml's Globals).
const LAMBDA_GB: f64 = 0.125;
/// A subscription as the shard index projects it (keys and `expiresAt`), bytes.
const INDEX_ITEM_BYTES: f64 = 80.0;
/// A bid's writes: a transaction of two items (2 units each), replicated to one Region (one
/// unit each); its reads: the auction, the summaries, the replay check (one unit each).
const BID_WRITE_UNITS: f64 = 4.0 + 2.0;
const BID_READ_UNITS: f64 = 1.5;

/// Cost per hour at a run's load, USD: (wsdr, the inline design).
fn cost_per_hour(r: &HotResult, seconds: f64) -> (f64, f64) {
    let hour = 3_600.0 / seconds;
    let bids = r.bids_accepted as f64;
    let bid_lambda =
        bids * price::LAMBDA_REQUEST + r.bid_handler_seconds * LAMBDA_GB * price::LAMBDA_GB_S;
    let bid_table =
        bids * (BID_WRITE_UNITS * price::WRITE_UNIT + BID_READ_UNITS * price::READ_UNIT);
    // wsdr: the stream and worker invocations, the lease writes, the SQS requests, the shard
    // pages (one read unit per 4 KB, half for an
    // eventually consistent query, at least half a unit each), the posts made.
    let pages = (r.subscriber_reads_per_bid * bids) / 500.0 + r.pushes as f64 * 16.0;
    let page_units =
        ((r.subscriber_reads_per_bid * bids * INDEX_ITEM_BYTES) / 4096.0 * 0.5).max(pages * 0.5);
    let wsdr = bid_lambda
        + bid_table
        + (r.stream_invocations + r.worker_invocations) as f64 * price::LAMBDA_REQUEST
        + (r.stream_seconds + r.worker_seconds) * LAMBDA_GB * price::LAMBDA_GB_S
        + page_units * price::READ_UNIT
        + r.lease_writes as f64 * price::WRITE_UNIT
        + r.sqs_requests as f64 * price::SQS_REQUEST
        + r.posts as f64 * price::MESSAGE;
    // Inline: every bid reads every subscriber and posts to each (if the account's quota let
    // it: above 10,000 posts a second it cannot, and the cost is what it would be billed),
    // its invocation lasting the posts at 64 in flight and 14 ms each.
    let n = r.watchers as f64;
    let inline_seconds = bids * (0.016 + n / (64.0 / 0.014));
    let inline = bids * price::LAMBDA_REQUEST
        + inline_seconds * LAMBDA_GB * price::LAMBDA_GB_S
        + bid_table
        + bids * ((n * INDEX_ITEM_BYTES / 4096.0) * 0.5).max(0.5) * price::READ_UNIT
        + bids * n * price::MESSAGE;
    (wsdr * hour, inline * hour)
}

/// The BENCHMARKS.md section: every (watchers, rate) run, then the targets' verdicts.
pub fn section(
    watchers: &[usize],
    rates: &[f64],
    seconds: f64,
    seed: u64,
) -> anyhow::Result<String> {
    use std::fmt::Write as _;
    let push = PushSettings::default();
    let mut md = String::new();
    let mut results = Vec::new();
    for &n in watchers {
        for &rate in rates {
            let r = run(&HotParams {
                watchers: n,
                bids_per_s: rate,
                seconds,
                seed,
                push,
            })?;
            eprintln!("{}", serde_json::to_string(&r)?);
            results.push(r);
        }
    }
    writeln!(
        md,
        "| watchers | bids/s | bid handler p99 | stream invocation p99 | longest worker invocation | every watcher shown: p99 / max, all bids | p99 once warm (after 10 s) | first bid | pushes (widened) | widest spacing | busiest second of posts (budget {:.0}) | 429s | subscriber items read per bid | SQS requests / lease writes per s | cost per hour: wsdr | inline design |",
        push.budget_per_second
    )?;
    writeln!(
        md,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    )?;
    for r in &results {
        let (wsdr, inline) = cost_per_hour(r, seconds);
        let inline_demand = r.watchers as f64 * r.bids_per_s;
        writeln!(
            md,
            "| {} | {} | {:.0} ms | {:.0} ms | {:.0} ms | {:.0} / {:.0} ms{} | {:.0} ms | {:.0} ms | {} ({}) | {} ms | {} | {} | {:.1} | {:.1} / {:.1} | ${:.3} | ${:.2}{} |",
            r.watchers,
            r.bids_per_s,
            r.bid_handler_p99_ms,
            r.stream_p99_ms,
            r.worker_max_ms,
            r.every_watcher_p99_ms,
            r.every_watcher_max_ms,
            if r.bids_never_shown > 0 {
                format!(" ({} never)", r.bids_never_shown)
            } else {
                String::new()
            },
            r.every_watcher_warm_p99_ms,
            r.first_bid_shown_ms,
            r.pushes,
            r.widened_pushes,
            r.widest_spacing_ms,
            r.max_posts_per_s,
            r.throttled,
            r.subscriber_reads_per_bid,
            r.sqs_requests as f64 / seconds,
            r.lease_writes as f64 / seconds,
            wsdr,
            inline,
            if inline_demand > 10_000.0 {
                format!(" ({inline_demand:.0} posts/s demanded: over the account's 10,000)")
            } else {
                String::new()
            }
        )?;
    }
    let p99 = |n: usize| {
        let v: Vec<f64> = results
            .iter()
            .filter(|r| r.watchers == n)
            .map(|r| r.bid_handler_p99_ms)
            .collect();
        v.iter().copied().fold(f64::NAN, f64::max)
    };
    let (small, large) = (
        watchers.iter().min().copied().unwrap_or(0),
        watchers.iter().max().copied().unwrap_or(0),
    );
    let ratio = p99(large) / p99(small);
    let stream_p99 = |n: usize| {
        results
            .iter()
            .filter(|r| r.watchers == n)
            .map(|r| r.stream_p99_ms)
            .fold(f64::NAN, f64::max)
    };
    let stream_ratio = stream_p99(large) / stream_p99(small);
    let longest_worker = results.iter().map(|r| r.worker_max_ms).fold(0.0, f64::max);
    let over_budget = results
        .iter()
        .filter(|r| r.max_posts_per_s as f64 > r.budget_per_s)
        .count();
    let loads = |pass: &dyn Fn(&HotResult) -> bool| {
        results
            .iter()
            .filter(|r| pass(r) && r.bids_never_shown == 0)
            .map(|r| format!("{}x{}", r.watchers, r.bids_per_s))
            .collect::<Vec<_>>()
    };
    let within_second = loads(&|r| r.every_watcher_p99_ms <= 1_000.0);
    let within_second_warm = loads(&|r| r.every_watcher_warm_p99_ms <= 1_000.0);
    let widened = loads(&|r| r.widened_pushes > 0);
    writeln!(md)?;
    writeln!(
        md,
        "- Bid handler p99 at {large} watchers over {small}: **{ratio:.2}x** (target <= 1.2: {}).",
        crate::verdict(ratio <= 1.2)
    )?;
    writeln!(
        md,
        "- Stream invocation p99 at {large} watchers over {small}: **{stream_ratio:.2}x** (it starts pushes only); the longest worker invocation of any run: **{longest_worker:.0} ms** (one batch of pages, whatever the audience).",
    )?;
    writeln!(
        md,
        "- `@connections` posts above the budget in any second: **{over_budget} runs** of {} (target 0: {}).",
        results.len(),
        crate::verdict(over_budget == 0)
    )?;
    writeln!(
        md,
        "- Every watcher shown each bid within 1 s (p99), all bids: {} of {} loads ({}); once warm (bids after the first 10 s): {} of {} ({}). The budget widened the spacing (audience / budget) of {}.",
        within_second.len(),
        results.len(),
        within_second.join(", "),
        within_second_warm.len(),
        results.len(),
        within_second_warm.join(", "),
        widened.join(", ")
    )?;
    Ok(md)
}
