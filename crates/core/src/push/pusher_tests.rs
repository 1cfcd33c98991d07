//! The push path with an app of the kit's own (a tally) behind the kit's gateway: the
//! stream's reader starts pushes, workers post pages of subscribers on the budget's
//! schedule, a change during a push is merged into it and its last job starts the
//! trailing push, whose frame carries the newest state; failed lease, queue and page calls
//! are retried a bounded number of times, and a start waits for a topic's spacing up to its
//! deadline, no longer.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use super::*;
use crate::memory::{ManualClock, MemoryConnections, MemoryStateStore, RecordingNotifier};
use crate::ports::Connections;
use crate::push::{InProcessLeases, LocalPushQueue, PushPorts, PushSettings, SubscriberPage};
use crate::test_apps::Tally;
use crate::topics::{AppService, Apps};
use crate::{ConnectionId, Error, Gateway, UserId};
use serde_json::{json, Value as Json};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use wsdr_protocol::TopicName;

/// What a faulty call does instead of its work.
#[derive(Debug, Clone)]
enum Fault {
    Fail(Error),
    Panic,
}

/// The Region's registry, whose subscriber page reads take a moment of tokio's time (so that
/// jobs' reads overlap), count how many are under way at once, and fail as told.
#[derive(Default)]
struct Flaky {
    inner: MemoryConnections,
    page_faults: Mutex<VecDeque<Fault>>,
    reading: AtomicUsize,
    most_reading: AtomicUsize,
}

impl Flaky {
    fn fail_pages(&self, faults: impl IntoIterator<Item = Fault>) {
        locked(&self.page_faults).extend(faults);
    }
}

#[async_trait::async_trait]
impl Connections for Flaky {
    async fn register(&self, c: &ConnectionId, u: &UserId, now_ms: u64) -> crate::Result<()> {
        self.inner.register(c, u, now_ms).await
    }
    async fn subscribe(
        &self,
        c: &ConnectionId,
        u: &UserId,
        topic: &Topic,
        now_ms: u64,
    ) -> crate::Result<()> {
        self.inner.subscribe(c, u, topic, now_ms).await
    }
    async fn subscribers(&self, topic: &Topic, now_ms: u64) -> crate::Result<Vec<ConnectionId>> {
        self.inner.subscribers(topic, now_ms).await
    }
    async fn subscribers_page(
        &self,
        topic: &Topic,
        shard: u16,
        after: Option<&ConnectionId>,
        limit: usize,
        now_ms: u64,
    ) -> crate::Result<SubscriberPage> {
        let fault = locked(&self.page_faults).pop_front();
        match fault {
            Some(Fault::Fail(error)) => return Err(error),
            Some(Fault::Panic) => panic!("a worker's page read panicked"),
            None => {}
        }
        let reading = self.reading.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_reading.fetch_max(reading, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(1)).await;
        self.reading.fetch_sub(1, Ordering::SeqCst);
        self.inner
            .subscribers_page(topic, shard, after, limit, now_ms)
            .await
    }
    async fn remove(&self, c: &ConnectionId) -> crate::Result<()> {
        self.inner.remove(c).await
    }
    async fn all(&self, now_ms: u64) -> crate::Result<Vec<ConnectionId>> {
        self.inner.all(now_ms).await
    }
    async fn census(&self) -> crate::Result<Option<crate::Census>> {
        self.inner.census().await
    }
    async fn take_census(&self, now_ms: u64) -> crate::Result<crate::Census> {
        self.inner.take_census(now_ms).await
    }
}

/// Leases whose `begin` fails as told, counting its calls.
#[derive(Default)]
struct FlakyLeases {
    inner: InProcessLeases,
    begin_faults: Mutex<VecDeque<Error>>,
    begins: AtomicUsize,
}

#[async_trait::async_trait]
impl PushLeases for FlakyLeases {
    async fn begin(&self, topic: &Topic, now_ms: u64, window_ms: u64) -> crate::Result<Begin> {
        self.begins.fetch_add(1, Ordering::SeqCst);
        if let Some(error) = locked(&self.begin_faults).pop_front() {
            return Err(error);
        }
        self.inner.begin(topic, now_ms, window_ms).await
    }
    async fn record(
        &self,
        topic: &Topic,
        generation: u64,
        targets: u64,
        job_done: bool,
    ) -> crate::Result<Option<super::super::Finished>> {
        self.inner
            .record(topic, generation, targets, job_done)
            .await
    }
    async fn close(&self, topic: &Topic, generation: u64, next_ms: u64) -> crate::Result<bool> {
        self.inner.close(topic, generation, next_ms).await
    }
    async fn release(&self, topic: &Topic, generation: u64) -> crate::Result<()> {
        self.inner.release(topic, generation).await
    }
}

/// A queue whose `send` fails as told.
struct FlakyQueue {
    inner: LocalPushQueue,
    send_faults: Mutex<VecDeque<Error>>,
}

#[async_trait::async_trait]
impl PushQueue for FlakyQueue {
    async fn send(&self, jobs: Vec<PushJob>) -> crate::Result<()> {
        if let Some(error) = locked(&self.send_faults).pop_front() {
            return Err(error);
        }
        self.inner.send(jobs).await
    }
    async fn send_start(&self, topic: &Topic, delay: Duration) -> crate::Result<()> {
        self.inner.send_start(topic, delay).await
    }
}

/// Time that passes only when the code under test waits: each pause moves the manual clock
/// by its duration and is recorded. Bounded: a drain that pauses ten thousand times never ends
/// (the widest of these tests pauses a few hundred times).
#[derive(Debug)]
struct ClockPause {
    clock: Arc<ManualClock>,
    waited_ms: Mutex<Vec<u64>>,
}

impl ClockPause {
    fn new(clock: Arc<ManualClock>) -> Arc<Self> {
        Arc::new(Self {
            clock,
            waited_ms: Mutex::default(),
        })
    }

    fn waited_ms(&self) -> Vec<u64> {
        locked(&self.waited_ms).clone()
    }
}

#[async_trait::async_trait]
impl Pause for ClockPause {
    async fn pause(&self, duration: Duration) {
        let ms = duration.as_millis() as u64;
        {
            let mut waited = locked(&self.waited_ms);
            assert!(waited.len() < 10_000, "a drain that never ends");
            waited.push(ms);
        }
        self.clock.advance(ms);
        tokio::task::yield_now().await;
    }
}

struct Region {
    gateway: Gateway,
    notifier: Arc<RecordingNotifier>,
    clock: Arc<ManualClock>,
    connections: Arc<Flaky>,
}

async fn region(watchers: usize) -> Region {
    let clock = Arc::new(ManualClock::new(1_000_000));
    let store = Arc::new(MemoryStateStore::new("r1", clock.clone()));
    let connections = Arc::new(Flaky::default());
    let notifier = Arc::new(RecordingNotifier::default());
    let tally = AppService::new(Tally, store, connections.clone(), clock.clone(), "r1")
        .with_seeds([(TopicName::new("t").unwrap(), json!({}))]);
    let gateway = Gateway::new(connections.clone(), notifier.clone(), clock.clone(), "r1")
        .with_apps(Apps::default().with(Arc::new(tally)));
    for i in 0..watchers {
        let (id, user) = (
            ConnectionId::new(format!("w{i:03}")).unwrap(),
            UserId::new(format!("u{i:03}")).unwrap(),
        );
        gateway.connect(&id, &user).await.unwrap();
        gateway
            .handle_frame(&id, user, br#"{"action":"getState","topic":"tally:t"}"#)
            .await;
    }
    Region {
        gateway,
        notifier,
        clock,
        connections,
    }
}

async fn add(region: &Region, n: u64, op_id: &str) {
    let frame =
        format!(r#"{{"action":"write","topic":"tally:t","opId":"{op_id}","op":{{"n":{n}}}}}"#);
    let reply = region
        .gateway
        .handle_frame(
            &ConnectionId::new("w000").unwrap(),
            UserId::new("u000").unwrap(),
            frame.as_bytes(),
        )
        .await;
    assert!(
        matches!(
            reply.message,
            wsdr_protocol::ServerMessage::WriteResult {
                status: wsdr_protocol::BidStatus::Accepted,
                ..
            }
        ),
        "{reply:?}"
    );
}

/// A drain on tokio's paused time, bounded: one that runs a minute of it never ends (these
/// take milliseconds).
async fn bounded<T>(drain: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), drain)
        .await
        .expect("a drain that never ends")
}

fn topic() -> Topic {
    Topic::parse("tally:t").unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_push_reaches_every_subscriber_once_one_page_per_job() {
    let region = region(200).await;
    add(&region, 5, "op-000001").await;
    let pusher = Pusher::new(
        region.gateway.clone(),
        PushSettings {
            page: 4,
            workers: 3,
            ..PushSettings::default()
        },
        region.clock.clone(),
        Arc::new(crate::TokioPause),
    );
    assert!(format!("{pusher:?}").contains("runs_own_jobs: true"));
    pusher.changed([&topic()]);
    bounded(pusher.drain()).await;
    let totals = pusher.totals();
    assert_eq!((totals.pushes, totals.delivered), (1, 200), "{totals:?}");
    assert_eq!(totals.subscriber_reads, 200);
    // 16 shards of about 12 at 4 a page: about 3 or 4 jobs a shard.
    assert!(totals.jobs >= 50, "{totals:?}");
    let mut told: Vec<String> = region
        .notifier
        .sent()
        .iter()
        .map(|(c, _)| c.to_string())
        .collect();
    told.sort();
    told.dedup();
    assert_eq!(told.len(), 200, "each once");
    let frame: Json = serde_json::from_slice(&region.notifier.sent()[0].1).unwrap();
    assert_eq!(frame["type"], "topicUpdate");
    assert_eq!(frame["view"]["sum"], 5);
}

#[tokio::test(start_paused = true)]
async fn a_change_during_a_push_is_merged_and_its_last_job_starts_the_trailing_push() {
    let region = region(40).await;
    let queue = Arc::new(LocalPushQueue::new(
        region.clock.clone(),
        Arc::new(crate::TokioPause),
    ));
    let leases = Arc::new(InProcessLeases::default());
    let instance = || {
        Pusher::queued(
            region.gateway.clone(),
            PushSettings::default(),
            region.clock.clone(),
            Arc::new(crate::TokioPause),
            PushPorts {
                leases: leases.clone(),
                queue: queue.clone(),
                posts_per_second: 5_000.0 / 16.0,
            },
        )
    };
    let (stream, worker) = (instance(), instance());
    add(&region, 5, "op-000001").await;
    stream.changed([&topic()]);
    assert_eq!(stream.drain().await, vec![topic()]);
    assert_eq!(queue.len(), usize::from(crate::SUBSCRIBER_SHARDS));
    assert!(
        region.notifier.sent().is_empty(),
        "the stream's reader posts nothing"
    );
    add(&region, 7, "op-000002").await;
    stream.changed([&topic()]);
    assert!(stream.drain().await.is_empty());
    assert_eq!(stream.totals().merged, 1);
    region.clock.advance(250);
    let mut ran = 0;
    while let Some(job) = queue.try_next() {
        worker.run(&job).await.unwrap();
        ran += 1;
        assert!(ran < 1_000, "a push that never ends");
    }
    assert_eq!(ran, 2 * usize::from(crate::SUBSCRIBER_SHARDS));
    let totals = worker.totals();
    assert_eq!((totals.pushes, totals.delivered), (1, 80), "{totals:?}");
    // Every subscriber's last frame carries the newest sum.
    let mut last: std::collections::BTreeMap<String, Json> = Default::default();
    for (to, frame) in region.notifier.sent() {
        last.insert(to.to_string(), serde_json::from_slice(&frame).unwrap());
    }
    assert_eq!(last.len(), 40);
    assert!(last.values().all(|f| f["view"]["sum"] == 12), "{last:?}");
    assert!(queue.is_empty());
    region.clock.advance(250);
    stream.changed([&topic()]);
    assert_eq!(stream.drain().await, vec![topic()]);
}

/// A pusher on leases and a queue of the test's own, its time passing only when it waits.
struct Queued {
    pusher: Pusher,
    leases: Arc<FlakyLeases>,
    queue: Arc<FlakyQueue>,
    pause: Arc<ClockPause>,
}

fn queued(region: &Region, settings: PushSettings, posts_per_second: f64) -> Queued {
    let pause = ClockPause::new(region.clock.clone());
    let leases = Arc::new(FlakyLeases::default());
    let queue = Arc::new(FlakyQueue {
        inner: LocalPushQueue::new(region.clock.clone(), pause.clone()),
        send_faults: Mutex::default(),
    });
    let pusher = Pusher::queued(
        region.gateway.clone(),
        settings,
        region.clock.clone(),
        pause.clone(),
        PushPorts {
            leases: leases.clone(),
            queue: queue.clone(),
            posts_per_second,
        },
    );
    Queued {
        pusher,
        leases,
        queue,
        pause,
    }
}

impl Queued {
    /// Run every job on the queue (the workers' side) until it is empty.
    async fn run_all(&self) -> usize {
        let mut ran = 0;
        while let Some(work) = self.queue.inner.try_next() {
            self.pusher.run(&work).await.unwrap();
            ran += 1;
            assert!(ran < 10_000, "a push that never ends");
        }
        ran
    }
}

/// A pusher that runs its own jobs, its time passing only when it waits.
fn own(region: &Region, settings: PushSettings) -> (Pusher, Arc<ClockPause>) {
    let pause = ClockPause::new(region.clock.clone());
    let pusher = Pusher::new(
        region.gateway.clone(),
        settings,
        region.clock.clone(),
        pause.clone(),
    );
    (pusher, pause)
}

/// [`own`] with one worker: its jobs run one after another, so a fault injected first hits the
/// first job.
fn one_worker(region: &Region) -> (Pusher, Arc<ClockPause>) {
    own(
        region,
        PushSettings {
            workers: 1,
            ..PushSettings::default()
        },
    )
}

#[tokio::test(start_paused = true)]
async fn a_pusher_shows_its_settings_clock_and_the_changes_it_saw() {
    let region = region(0).await;
    let settings = PushSettings {
        page: 7,
        workers: 2,
        ..PushSettings::default()
    };
    let q = queued(&region, settings, 123.0);
    assert_eq!(q.pusher.settings(), settings);
    assert_eq!(q.pusher.now_ms(), 1_000_000);
    region.clock.advance(5);
    assert_eq!(q.pusher.now_ms(), 1_000_005);
    let other = Topic::parse("tally:u").unwrap();
    q.pusher.changed([&topic(), &other]);
    q.pusher.changed([&topic()]);
    assert_eq!(q.pusher.totals().changes, 3);
    let ports = PushPorts {
        leases: q.leases.clone(),
        queue: q.queue.clone(),
        posts_per_second: 123.0,
    };
    assert!(format!("{ports:?}").contains("posts_per_second: 123.0"));
}

#[tokio::test(start_paused = true)]
async fn a_throttled_start_is_retried_three_times_after_50_100_and_200_ms() {
    let region = region(4).await;
    let q = queued(&region, PushSettings::default(), 5_000.0);
    locked(&q.leases.begin_faults).extend((0..3).map(|_| Error::Throttled("slow".into())));
    q.pusher.changed([&topic()]);
    assert_eq!(q.pusher.drain().await, vec![topic()]);
    assert_eq!(q.leases.begins.load(Ordering::SeqCst), 4);
    assert_eq!(q.pause.waited_ms(), [50, 100, 200]);
    let totals = q.pusher.totals();
    assert_eq!((totals.pushes, totals.unqueued), (1, 0), "{totals:?}");
}

#[tokio::test(start_paused = true)]
async fn a_start_throttled_four_times_is_given_up_and_counted() {
    let region = region(4).await;
    let q = queued(&region, PushSettings::default(), 5_000.0);
    locked(&q.leases.begin_faults).extend((0..4).map(|_| Error::Transient("reset".into())));
    q.pusher.changed([&topic()]);
    assert!(q.pusher.drain().await.is_empty());
    assert_eq!(q.leases.begins.load(Ordering::SeqCst), 4, "no fifth try");
    let totals = q.pusher.totals();
    assert_eq!((totals.pushes, totals.unqueued), (0, 1), "{totals:?}");
    // The next change starts its push: nothing was left holding the lease.
    q.pusher.changed([&topic()]);
    assert_eq!(q.pusher.drain().await, vec![topic()]);
}

#[tokio::test(start_paused = true)]
async fn a_start_that_cannot_succeed_is_not_retried() {
    let region = region(4).await;
    let q = queued(&region, PushSettings::default(), 5_000.0);
    locked(&q.leases.begin_faults).push_back(Error::Internal("no such table".into()));
    q.pusher.changed([&topic()]);
    assert!(q.pusher.drain().await.is_empty());
    assert_eq!(q.leases.begins.load(Ordering::SeqCst), 1);
    assert!(q.pause.waited_ms().is_empty());
    assert_eq!(q.pusher.totals().unqueued, 1);
}

#[tokio::test(start_paused = true)]
async fn jobs_that_cannot_be_queued_free_the_lease_for_the_retry() {
    let region = region(4).await;
    let q = queued(&region, PushSettings::default(), 5_000.0);
    locked(&q.queue.send_faults).push_back(Error::Throttled("queue".into()));
    q.pusher.changed([&topic()]);
    assert_eq!(q.pusher.drain().await, vec![topic()]);
    assert_eq!(q.leases.inner.lease(&topic()).unwrap().generation, 2);
    assert_eq!(q.queue.inner.len(), usize::from(crate::SUBSCRIBER_SHARDS));
}

#[tokio::test(start_paused = true)]
async fn a_page_read_failing_three_times_is_retried_and_its_subscribers_reached() {
    let region = region(40).await;
    let (pusher, pause) = one_worker(&region);
    region
        .connections
        .fail_pages((0..3).map(|_| Fault::Fail(Error::Transient("reset".into()))));
    pusher.changed([&topic()]);
    assert_eq!(pusher.drain().await, vec![topic()]);
    assert_eq!(pause.waited_ms()[..3], [50, 100, 200]);
    let totals = pusher.totals();
    assert_eq!(
        (totals.delivered, totals.failed_jobs),
        (40, 0),
        "{totals:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_page_read_failing_four_times_gives_its_job_up_and_the_push_still_ends() {
    let region = region(40).await;
    let (pusher, _) = one_worker(&region);
    region
        .connections
        .fail_pages((0..4).map(|_| Fault::Fail(Error::Throttled("slow".into()))));
    pusher.changed([&topic()]);
    pusher.drain().await;
    let totals = pusher.totals();
    assert_eq!((totals.jobs, totals.failed_jobs), (15, 1), "{totals:?}");
    assert!(
        totals.delivered < 40,
        "one shard's subscribers wait: {totals:?}"
    );
    // The push ended (its lease closed): the next change, after its spacing, starts one.
    region.clock.advance(1_000);
    pusher.changed([&topic()]);
    assert_eq!(pusher.drain().await, vec![topic()]);
    assert_eq!(pusher.totals().delivered, totals.delivered + 40);
}

#[tokio::test(start_paused = true)]
async fn a_page_read_that_cannot_succeed_is_not_retried() {
    let region = region(40).await;
    let (pusher, pause) = one_worker(&region);
    region
        .connections
        .fail_pages([Fault::Fail(Error::Internal("bad index".into()))]);
    pusher.changed([&topic()]);
    pusher.drain().await;
    assert_eq!(pusher.totals().failed_jobs, 1);
    assert!(!pause.waited_ms().contains(&50), "{:?}", pause.waited_ms());
}

#[tokio::test(start_paused = true)]
async fn a_job_whose_worker_panics_is_counted_and_the_drain_goes_on() {
    let region = region(40).await;
    let (pusher, _) = one_worker(&region);
    region.connections.fail_pages([Fault::Panic]);
    pusher.changed([&topic()]);
    pusher.drain().await;
    let totals = pusher.totals();
    assert_eq!((totals.jobs, totals.failed_jobs), (15, 1), "{totals:?}");
}

#[tokio::test(start_paused = true)]
async fn no_more_jobs_read_at_once_than_there_are_workers() {
    let region = region(200).await;
    let pusher = Pusher::new(
        region.gateway.clone(),
        PushSettings {
            workers: 3,
            page: 4,
            ..PushSettings::default()
        },
        region.clock.clone(),
        Arc::new(crate::TokioPause),
    );
    pusher.changed([&topic()]);
    bounded(pusher.drain()).await;
    assert_eq!(pusher.totals().delivered, 200);
    assert_eq!(region.connections.most_reading.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn a_push_is_counted_widened_only_when_its_audience_needs_more_than_its_window() {
    // 200 watchers at 1,000 posts a second take 200 ms: the window, not wider.
    let region = region(200).await;
    let (at_window, _) = own(
        &region,
        PushSettings {
            budget_per_second: 1_000.0,
            ..PushSettings::default()
        },
    );
    at_window.changed([&topic()]);
    at_window.drain().await;
    let widening = at_window.totals().widening;
    assert_eq!(
        (widening.widened_pushes, widening.widest_spacing_ms),
        (0, 200)
    );
    // At 100 a second they take 2 s.
    let (wider, _) = own(
        &region,
        PushSettings {
            budget_per_second: 100.0,
            ..PushSettings::default()
        },
    );
    wider.changed([&topic()]);
    wider.drain().await;
    let widening = wider.totals().widening;
    assert_eq!(
        (widening.widened_pushes, widening.widest_spacing_ms),
        (1, 2_000)
    );
}

#[tokio::test(start_paused = true)]
async fn a_start_waits_for_a_spacing_that_ends_at_its_deadline_and_queues_one_that_ends_after() {
    let region = region(200).await;
    // A spacing of 20 s (200 watchers at 10 a second), posted at once.
    let settings = PushSettings {
        budget_per_second: 10.0,
        ..PushSettings::default()
    };
    let q = queued(&region, settings, 1_000_000.0);
    q.pusher.changed([&topic()]);
    assert_eq!(q.pusher.drain().await, vec![topic()]);
    q.run_all().await;
    let next_ms = q.leases.inner.lease(&topic()).unwrap().next_ms;
    let wait_limit = DRAIN_WAIT_LIMIT.as_millis() as u64;
    // The spacing ends at the start's deadline: it waits, and starts.
    region.clock.set(next_ms - wait_limit);
    q.pusher.changed([&topic()]);
    assert_eq!(q.pusher.drain().await, vec![topic()]);
    assert_eq!(region.clock.now_ms(), next_ms);
    assert_eq!(q.pusher.totals().deferred, 0);
    q.run_all().await;
    // A millisecond after it: the start goes on the queue, due when the spacing ends
    // (rounded up to whole seconds).
    let next_ms = q.leases.inner.lease(&topic()).unwrap().next_ms;
    let now = next_ms - wait_limit - 1;
    region.clock.set(now);
    q.pusher.changed([&topic()]);
    assert!(q.pusher.drain().await.is_empty());
    assert_eq!(region.clock.now_ms(), now, "no wait");
    assert_eq!(q.pusher.totals().deferred, 1);
    assert_eq!(q.queue.inner.delayed(), 1);
    assert_eq!(q.queue.inner.next_due_ms(), Some(now + 11_000));
}

#[tokio::test(start_paused = true)]
async fn a_pusher_running_its_own_jobs_waits_for_a_start_due_before_its_deadline_only() {
    let region = region(10).await;
    // A window of 20 s: every start after the first is put off past the drain's deadline.
    let settings = PushSettings {
        window: Duration::from_secs(20),
        ..PushSettings::default()
    };
    let (pusher, _) = own(&region, settings);
    pusher.changed([&topic()]);
    assert_eq!(pusher.drain().await, vec![topic()]);
    let began = region.clock.now_ms();
    pusher.changed([&topic()]);
    assert!(pusher.drain().await.is_empty(), "due after the deadline");
    assert_eq!(region.clock.now_ms(), began, "not waited for");
    assert_eq!(pusher.totals().deferred, 1);
    let due = pusher.own_queue.as_ref().unwrap().next_due_ms().unwrap();
    // Due before the next drain's deadline: that drain waits for it and starts its push.
    region.clock.set(due - DRAIN_WAIT_LIMIT.as_millis() as u64);
    assert_eq!(pusher.drain().await, vec![topic()]);
    assert!(region.clock.now_ms() >= due);
    assert_eq!(pusher.totals().pushes, 2);
}

#[tokio::test(start_paused = true)]
async fn a_push_worker_shows_its_settings() {
    let region = region(0).await;
    let settings = PushSettings {
        page: 9,
        ..PushSettings::default()
    };
    let shown = format!("{:?}", region.gateway.push_worker(settings));
    assert!(
        shown.starts_with("PushWorker") && shown.contains("page: 9"),
        "{shown}"
    );
}
