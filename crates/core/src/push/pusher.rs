//! A Region's pusher: the stream's side (start pushes) and the workers' side (run jobs).
//!
//! In AWS the two sides are different functions: the stream's reader calls
//! [`Pusher::changed`] and [`Pusher::drain`], which only start pushes (a lease, a state read,
//! [`crate::push::SUBSCRIBER_SHARDS`] jobs on the queue) and so take the same time whatever
//! the audience; each worker invocation calls [`Pusher::run_job`] for the jobs SQS hands it.
//! A pusher built with [`Pusher::new`] holds its own queue and runs the jobs itself in
//! [`Pusher::drain`] (tests, the benchmark's baseline); the lab builds one with
//! [`Pusher::queued`] on a local queue and runs its workers as tasks.

use super::{
    locked, Begin, FrameSource, InProcessLeases, JobOutcome, LocalPushQueue, Pacer, PushJob,
    PushLeases, PushQueue, PushSettings, PushSource, PushTotals, PushWork, PushWorker, Widening,
    START_DELAY_LIMIT,
};
use crate::ports::{Clock, Pause};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinSet;
use wsdr_protocol::Topic;

/// Attempts of one start (each after waiting out a spacing) in one [`Pusher::drain`] at most.
pub const DRAIN_ROUNDS: usize = 20;

/// How long one start waits for a topic's spacing to pass, at most: a stream batch never
/// runs into the function's timeout and is retried for a push.
pub const DRAIN_WAIT_LIMIT: Duration = Duration::from_secs(10);

/// A failed page read is tried this many times more before the job is given up.
const JOB_RETRIES: u32 = 3;

/// What a queued pusher is built on: the Region's leases, its queue, and the rate at which
/// this instance's workers post (budget / workers for one worker of a queue whose maximum
/// concurrency is `workers`; the whole budget for a process that runs every worker).
#[derive(Clone)]
pub struct PushPorts {
    pub leases: Arc<dyn PushLeases>,
    pub queue: Arc<dyn PushQueue>,
    pub posts_per_second: f64,
}

impl std::fmt::Debug for PushPorts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushPorts")
            .field("posts_per_second", &self.posts_per_second)
            .finish_non_exhaustive()
    }
}

/// A Region's pusher (see the module's documentation).
pub struct Pusher {
    service: Arc<dyn PushSource>,
    worker: PushWorker,
    /// The pusher's time (AWS ms: the lab's scaled clock, the system's in Lambda).
    clock: Arc<dyn Clock>,
    leases: Arc<dyn PushLeases>,
    queue: Arc<dyn PushQueue>,
    /// The queue this pusher runs itself in [`Pusher::drain`], if it does.
    own_queue: Option<Arc<LocalPushQueue>>,
    changed: Mutex<BTreeSet<Topic>>,
    totals: Mutex<PushTotals>,
}

impl std::fmt::Debug for Pusher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pusher")
            .field("settings", &self.worker.settings)
            .field("runs_own_jobs", &self.own_queue.is_some())
            .finish_non_exhaustive()
    }
}

impl Pusher {
    /// A pusher that holds its leases and queue in memory and runs its jobs itself, on at
    /// most `workers` tasks sharing the whole budget. `pause` paces the posts (the lab's
    /// scaled sleep, or tokio's).
    pub fn new(
        service: impl PushSource,
        settings: PushSettings,
        clock: Arc<dyn Clock>,
        pause: Arc<dyn Pause>,
    ) -> Self {
        let queue = Arc::new(LocalPushQueue::new(clock.clone(), pause.clone()));
        let mut pusher = Self::queued(
            service,
            settings,
            clock,
            pause,
            PushPorts {
                leases: Arc::new(InProcessLeases::default()),
                queue: queue.clone(),
                posts_per_second: settings.budget_per_second,
            },
        );
        pusher.own_queue = Some(queue);
        pusher
    }

    /// A pusher on shared leases and a queue that other workers consume.
    pub fn queued(
        service: impl PushSource,
        settings: PushSettings,
        clock: Arc<dyn Clock>,
        pause: Arc<dyn Pause>,
        ports: PushPorts,
    ) -> Self {
        let service: Arc<dyn PushSource> = Arc::new(service);
        let mut worker = service.push_worker(settings);
        worker.pacer = Arc::new(Pacer::new(
            ports.posts_per_second,
            clock.clone(),
            pause.clone(),
        ));
        // Each chunk posts the newest state of its moment (read at most once per window): a
        // bid committed during a long push reaches every watcher still ahead in it.
        worker.frames = Some(Arc::new(FrameSource::shared(
            service.clone(),
            clock.clone(),
            settings.window,
        )));
        worker.pause = pause;
        Self {
            service,
            worker,
            clock,
            leases: ports.leases,
            queue: ports.queue,
            own_queue: None,
            changed: Mutex::default(),
            totals: Mutex::default(),
        }
    }

    pub fn settings(&self) -> PushSettings {
        self.worker.settings
    }

    /// These topics changed (one stream batch's, or one replicated write's).
    pub fn changed<'a>(&self, topics: impl IntoIterator<Item = &'a Topic>) {
        let mut changed = locked(&self.changed);
        let mut totals = locked(&self.totals);
        for topic in topics {
            changed.insert(topic.clone());
            totals.changes += 1;
        }
    }

    /// The pusher's clock now (ms).
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    pub fn totals(&self) -> PushTotals {
        locked(&self.totals).clone()
    }

    /// Start a push of every topic that changed (waiting out a spacing up to
    /// [`DRAIN_WAIT_LIMIT`]); a pusher built with [`Pusher::new`] then runs every job to the
    /// end, continuations and trailing pushes included. Returns the topics whose push
    /// started.
    pub async fn drain(&self) -> Vec<Topic> {
        let deadline = self
            .clock
            .now_ms()
            .saturating_add(DRAIN_WAIT_LIMIT.as_millis() as u64);
        let changed = std::mem::take(&mut *locked(&self.changed));
        let mut started = Vec::new();
        for topic in changed {
            if self.start_with_retries(&topic, deadline).await {
                started.push(topic);
            }
        }
        if let Some(queue) = self.own_queue.clone() {
            started.extend(self.run_own_jobs(&queue, deadline).await);
        }
        started
    }

    /// One piece of work from the queue, as a worker runs it: a page ([`Pusher::run_job`]) or
    /// a delayed start (put off again if the topic's spacing is still ahead). An error asks
    /// the queue to deliver the work again.
    pub async fn run(&self, work: &PushWork) -> crate::Result<()> {
        match work {
            PushWork::Page(job) => self.run_job(job).await,
            PushWork::Start(topic) => {
                let deadline = self
                    .clock
                    .now_ms()
                    .saturating_add(DRAIN_WAIT_LIMIT.as_millis() as u64);
                self.start(topic, deadline).await.map(|_| ())
            }
        }
    }

    /// One job, as a worker runs it: post its page (a failed read is retried, then the job is
    /// given up), queue its continuation, record it in the lease; the push's last job sets the
    /// spacing and starts the trailing push if a change waits. An error (the lease or queue
    /// unreachable) asks the queue to deliver the job again.
    pub async fn run_job(&self, job: &PushJob) -> crate::Result<()> {
        let outcome = run_page(&self.worker, &self.clock, job).await;
        let deadline = self
            .clock
            .now_ms()
            .saturating_add(DRAIN_WAIT_LIMIT.as_millis() as u64);
        self.after_job(job, outcome, deadline).await.map(|_| ())
    }

    async fn run_own_jobs(&self, queue: &LocalPushQueue, deadline: u64) -> Vec<Topic> {
        let mut started = Vec::new();
        let workers = self.worker.settings.workers.max(1);
        let mut running = JoinSet::new();
        loop {
            while running.len() < workers {
                match queue.try_next() {
                    Some(PushWork::Page(job)) => {
                        let (worker, clock) = (self.worker.clone(), self.clock.clone());
                        running.spawn(async move {
                            let outcome = run_page(&worker, &clock, &job).await;
                            (job, outcome)
                        });
                    }
                    Some(PushWork::Start(topic)) => {
                        if self.start_with_retries(&topic, deadline).await {
                            started.push(topic);
                        }
                    }
                    None => break,
                }
            }
            if running.is_empty() {
                // Nothing runs and nothing is ready: a start put off until before the deadline
                // is waited for; one due later stays queued for the next drain.
                let now = self.clock.now_ms();
                match queue.next_due_ms() {
                    Some(at) if at <= deadline => {
                        self.worker
                            .pause
                            .pause(Duration::from_millis(at.saturating_sub(now).max(1)))
                            .await;
                        continue;
                    }
                    _ => break,
                }
            }
            let Some(joined) = running.join_next().await else {
                break;
            };
            let Ok((job, outcome)) = joined else {
                locked(&self.totals).failed_jobs += 1;
                continue;
            };
            match self.after_job(&job, outcome, deadline).await {
                Ok(Some(topic)) => started.push(topic),
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(%error, topic = %job.topic, "push job not recorded");
                }
            }
        }
        started
    }

    /// Count a job's outcome, queue its continuation, record it; the last job of a push
    /// closes it and starts the trailing push if a change waits (returned).
    async fn after_job(
        &self,
        job: &PushJob,
        outcome: Result<JobOutcome, crate::Error>,
        deadline: u64,
    ) -> crate::Result<Option<Topic>> {
        let outcome = match outcome {
            Ok(outcome) => {
                let mut totals = locked(&self.totals);
                totals.jobs += 1;
                totals.subscriber_reads += outcome.read as u64;
                totals.posts += outcome.report.targets as u64;
                totals.delivered += outcome.report.delivered as u64;
                totals.gone += outcome.report.gone as u64;
                totals.failed += outcome.report.failed as u64;
                outcome
            }
            Err(error) => {
                // Its subscribers wait for the next push (or their own heartbeat's resync);
                // the job still ends, so that its push can.
                tracing::warn!(%error, topic = %job.topic, shard = job.shard, "push job given up");
                locked(&self.totals).failed_jobs += 1;
                JobOutcome::default()
            }
        };
        let targets = outcome.report.targets as u64;
        if let Some(next) = outcome.next {
            self.queue.send(vec![next]).await?;
            self.leases
                .record(&job.topic, job.generation, targets, false)
                .await?;
            return Ok(None);
        }
        let Some(finished) = self
            .leases
            .record(&job.topic, job.generation, targets, true)
            .await?
        else {
            return Ok(None);
        };
        let settings = self.worker.settings;
        let spacing = settings.spacing(usize::try_from(finished.audience).unwrap_or(usize::MAX));
        {
            let mut totals = locked(&self.totals);
            let widening: &mut Widening = &mut totals.widening;
            if spacing > settings.window {
                widening.widened_pushes += 1;
            }
            widening.widest_spacing_ms = widening.widest_spacing_ms.max(spacing.as_millis() as u64);
        }
        let next_ms = finished
            .started_ms
            .saturating_add(spacing.as_millis() as u64);
        if !self
            .leases
            .close(&job.topic, job.generation, next_ms)
            .await?
        {
            return Ok(None);
        }
        // The lease is closed now: a redelivered job could not start the trailing push again,
        // so its start is retried here (and counted `unqueued` if it still fails).
        Ok(self
            .start_with_retries(&job.topic, deadline)
            .await
            .then(|| job.topic.clone()))
    }

    /// [`Pusher::start`], its failures retried a few times; a start that still fails is
    /// counted (`unqueued`). Whether the push started.
    async fn start_with_retries(&self, topic: &Topic, deadline: u64) -> bool {
        let mut tries = 0;
        loop {
            match self.start(topic, deadline).await {
                Ok(started) => return started,
                Err(error) if tries < JOB_RETRIES && error.is_retryable() => {
                    self.worker
                        .pause
                        .pause(Duration::from_millis(50 << tries))
                        .await;
                    tries += 1;
                }
                Err(error) => {
                    tracing::warn!(%error, topic = %topic, "push not started");
                    locked(&self.totals).unqueued += 1;
                    return false;
                }
            }
        }
    }

    /// Start one push of `topic` if its lease allows: read the merged state (the push then
    /// carries every change before it), take the lease, queue one job per shard. A push in
    /// flight is marked instead (its last job starts the trailing one); a spacing not yet over
    /// is waited out up to `deadline`. Whether this call started the push.
    async fn start(&self, topic: &Topic, deadline: u64) -> crate::Result<bool> {
        let window_ms = self.worker.settings.window.as_millis() as u64;
        for _ in 0..DRAIN_ROUNDS {
            let frame: Arc<str> = Arc::from(self.service.push_frame(topic).await?);
            let now = self.clock.now_ms();
            match self.leases.begin(topic, now, window_ms).await? {
                Begin::Started { generation } => {
                    let jobs = PushJob::for_push(topic, frame, now, generation);
                    if let Err(error) = self.queue.send(jobs).await {
                        if let Err(release) = self.leases.release(topic, generation).await {
                            tracing::warn!(%release, topic = %topic, "push lease not released: it is taken over once stale");
                        }
                        return Err(error);
                    }
                    locked(&self.totals).pushes += 1;
                    return Ok(true);
                }
                Begin::Marked => {
                    locked(&self.totals).merged += 1;
                    return Ok(false);
                }
                Begin::NotBefore(at) if at > deadline => {
                    // Waiting longer would hold the stream (or a worker) up: the start goes on
                    // the queue, due when the spacing ends.
                    self.put_off(topic, at.saturating_sub(now)).await?;
                    return Ok(false);
                }
                Begin::NotBefore(at) => {
                    let now = self.clock.now_ms();
                    self.worker
                        .pause
                        .pause(Duration::from_millis(at.saturating_sub(now).max(1)))
                        .await;
                }
            }
        }
        self.put_off(topic, window_ms).await?;
        Ok(false)
    }

    /// Queue a start of `topic` in `wait_ms` (rounded up to whole seconds, as SQS delays).
    async fn put_off(&self, topic: &Topic, wait_ms: u64) -> crate::Result<()> {
        self.queue.send_start(topic, start_delay(wait_ms)).await?;
        locked(&self.totals).deferred += 1;
        Ok(())
    }
}

/// A queued start's delay: `wait_ms` rounded up to whole seconds (at least one, at most
/// [`START_DELAY_LIMIT`]).
pub fn start_delay(wait_ms: u64) -> Duration {
    Duration::from_secs(wait_ms.div_ceil(1_000).max(1)).min(START_DELAY_LIMIT)
}

/// One job's page, its read retried [`JOB_RETRIES`] times when the error may pass.
async fn run_page(
    worker: &PushWorker,
    clock: &Arc<dyn Clock>,
    job: &PushJob,
) -> crate::Result<JobOutcome> {
    let mut tries = 0;
    loop {
        match worker.run(job, clock.now_ms()).await {
            Err(error) if tries < JOB_RETRIES && error.is_retryable() => {
                worker.pause.pause(Duration::from_millis(50 << tries)).await;
                tries += 1;
            }
            outcome => return outcome,
        }
    }
}

#[cfg(test)]
#[path = "pusher_tests.rs"]
mod tests;
