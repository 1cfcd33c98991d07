//! The push jobs' SQS queue as a throttled worker meets it: a job whose invocation Lambda
//! throttles goes back to the queue and is received again after the visibility timeout; each
//! receive counts towards the redrive policy's `maxReceiveCount` (past it: the dead-letter
//! queue), and a message older than the queue's retention is deleted, wherever it is.
//!
//! What AWS states: Lambda, "Configuring scaling behavior for SQS event source mappings":
//! "ensure that your function's reserved concurrency is greater than or equal to the total
//! maximum concurrency of all Amazon SQS event sources on the function. Otherwise, Lambda may
//! throttle your messages"; "Creating and configuring an Amazon SQS event source mapping":
//! "set the source queue's visibility timeout to at least six times the configuration timeout
//! on your function. The extra time allows Lambda to retry if your function is throttled";
//! SQS, "Using dead-letter queues": a message moves to the dead-letter queue "when the
//! `ReceiveCount` for a message exceeds the `maxReceiveCount` for a queue"; SQS
//! `MessageRetentionPeriod`: "The length of time, in seconds, for which Amazon SQS retains a
//! message".
//!
//! What the lab throttles: `concurrency-exhausted` takes a Region's unreserved concurrency
//! (a herd's handlers and every other function of the account in that Region), so every
//! invocation of a function without a reservation is throttled while it lasts. Of the lab's
//! functions only the push workers are run through this queue model; the handler's own
//! throttle is the `throttle` fault.

use crate::world::scale::AwsDuration;
use std::sync::{Arc, Mutex};
use wsdr_core::push::{LocalPushQueue, PushWork};
use wsdr_core::{Clock, Pause};

/// template.yaml's `PushJobs` `VisibilityTimeout` (pinned by `the_lab_models_the_templates_settings`).
pub const PUSH_JOB_VISIBILITY: AwsDuration = AwsDuration::from_secs(60);
/// template.yaml's `PushJobs` `MessageRetentionPeriod`.
pub const PUSH_JOB_RETENTION: AwsDuration = AwsDuration::from_secs(1_200);
/// template.yaml's `PushJobs` redrive policy `maxReceiveCount`.
pub const PUSH_JOB_MAX_RECEIVES: u32 = 3;

/// Which push job queue and workers the lab deploys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum PushJobQueue {
    /// wsdr's: visibility 60 s, retention 1,200 s, three receives, workers reserved at the
    /// mapping's maximum concurrency (never throttled by the account's pool).
    #[default]
    Wsdr,
    /// The queue before: visibility 180 s, retention 300 s (shorter than three receives),
    /// workers without a reservation.
    Before,
}

impl std::fmt::Display for PushJobQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PushJobQueue::Wsdr => "wsdr",
            PushJobQueue::Before => "before",
        })
    }
}

/// The queue's settings and whether its workers hold a reservation (AWS time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueSettings {
    pub visibility: AwsDuration,
    pub retention: AwsDuration,
    pub max_receives: u32,
    /// `ReservedConcurrentExecutions` at least the mapping's maximum concurrency.
    pub workers_reserved: bool,
}

impl PushJobQueue {
    pub fn settings(self) -> QueueSettings {
        match self {
            PushJobQueue::Wsdr => QueueSettings {
                visibility: PUSH_JOB_VISIBILITY,
                retention: PUSH_JOB_RETENTION,
                max_receives: PUSH_JOB_MAX_RECEIVES,
                workers_reserved: true,
            },
            PushJobQueue::Before => QueueSettings {
                visibility: AwsDuration::from_secs(180),
                retention: AwsDuration::from_secs(300),
                max_receives: 3,
                workers_reserved: false,
            },
        }
    }
}

/// What the push job queues did (the drill report's `push_jobs`; AWS ms).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PushJobStats {
    /// Receives whose invocation Lambda throttled (the job back on the queue, invisible).
    pub throttled_receives: u64,
    /// Jobs a worker ran while the Region's unreserved concurrency was exhausted: the workers'
    /// reservation at work.
    pub ran_while_exhausted: u64,
    /// Throttled jobs that ran in the end, late.
    pub late_jobs: u64,
    /// The longest a throttled job waited from its first receive to its run or its loss.
    pub longest_wait_ms: u64,
    /// Jobs moved to the dead-letter queue (received more than `maxReceiveCount` times).
    pub dead_lettered: u64,
    /// Jobs deleted unseen: older than the queue's retention before a receive ran them.
    pub expired: u64,
}

impl PushJobStats {
    /// Both Regions' figures: counts summed, the longest wait the longer.
    pub fn add(&mut self, other: &PushJobStats) {
        self.throttled_receives += other.throttled_receives;
        self.ran_while_exhausted += other.ran_while_exhausted;
        self.late_jobs += other.late_jobs;
        self.longest_wait_ms = self.longest_wait_ms.max(other.longest_wait_ms);
        self.dead_lettered += other.dead_lettered;
        self.expired += other.expired;
    }

    /// Jobs that never ran: dead-lettered or expired.
    pub fn lost(&self) -> u64 {
        self.dead_lettered + self.expired
    }
}

/// One Region's job queue semantics around its [`LocalPushQueue`].
#[derive(Debug)]
pub struct JobQueue {
    pub settings: QueueSettings,
    /// AWS ms, unskewed (SQS's own clock).
    clock: Arc<dyn Clock>,
    pause: Arc<dyn Pause>,
    /// `concurrency-exhausted`: until this AWS ms (0: not exhausted; `u64::MAX`: until heal).
    exhausted_until_ms: std::sync::atomic::AtomicU64,
    stats: Mutex<PushJobStats>,
}

/// What a worker may do with the job it received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Receive {
    /// The invocation runs.
    Run,
    /// Lambda throttled it: the job waits out its visibility timeout ([`JobQueue::redeliver`]).
    Throttled,
}

impl JobQueue {
    pub fn new(settings: QueueSettings, clock: Arc<dyn Clock>, pause: Arc<dyn Pause>) -> Self {
        Self {
            settings,
            clock,
            pause,
            exhausted_until_ms: std::sync::atomic::AtomicU64::new(0),
            stats: Mutex::default(),
        }
    }

    /// The Region's unreserved concurrency taken for `lasting` (zero: until [`Self::heal`]).
    pub fn exhaust(&self, lasting: AwsDuration) {
        let until = if lasting == AwsDuration::ZERO {
            u64::MAX
        } else {
            self.clock
                .now_ms()
                .saturating_add(lasting.as_millis() as u64)
        };
        self.exhausted_until_ms
            .store(until, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn heal(&self) {
        self.exhausted_until_ms
            .store(0, std::sync::atomic::Ordering::SeqCst);
    }

    fn exhausted(&self) -> bool {
        self.clock.now_ms()
            < self
                .exhausted_until_ms
                .load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn stats(&self) -> PushJobStats {
        *lock(&self.stats)
    }

    /// A worker received a job: does Lambda run its invocation?
    pub fn receive(&self) -> Receive {
        if !self.exhausted() {
            return Receive::Run;
        }
        let mut stats = lock(&self.stats);
        if self.settings.workers_reserved {
            stats.ran_while_exhausted += 1;
            Receive::Run
        } else {
            stats.throttled_receives += 1;
            Receive::Throttled
        }
    }

    /// A throttled job, from its first receive: invisible for the visibility timeout, then
    /// received again (throttled again while the pool is exhausted) until a receive runs it
    /// (back on `queue` for the next worker), its receives pass `maxReceiveCount` (dead
    /// letter) or it outlives the retention (deleted). The caller spawns it: the worker that
    /// received the job is free at once, as a poller is.
    pub async fn redeliver(self: Arc<Self>, work: PushWork, queue: Arc<LocalPushQueue>) {
        let first_ms = self.clock.now_ms();
        let retention_ms = self.settings.retention.as_millis() as u64;
        let visibility =
            std::time::Duration::from_millis(self.settings.visibility.as_millis() as u64);
        let mut receives = 1u32;
        loop {
            self.pause.pause(visibility).await;
            let now = self.clock.now_ms();
            let waited = now.saturating_sub(first_ms);
            if waited >= retention_ms {
                let mut stats = lock(&self.stats);
                stats.expired += 1;
                // Deleted when it reached the retention, unseen since its last receive.
                stats.longest_wait_ms = stats.longest_wait_ms.max(retention_ms);
                return;
            }
            receives += 1;
            if receives > self.settings.max_receives {
                let mut stats = lock(&self.stats);
                stats.dead_lettered += 1;
                stats.longest_wait_ms = stats.longest_wait_ms.max(waited);
                return;
            }
            if self.receive() == Receive::Throttled {
                continue;
            }
            {
                let mut stats = lock(&self.stats);
                stats.late_jobs += 1;
                stats.longest_wait_ms = stats.longest_wait_ms.max(waited);
            }
            queue.hand_back(work);
            return;
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::scale::{ScaledClock, ScaledPause, TimeScale};

    fn queue(settings: QueueSettings) -> (Arc<JobQueue>, Arc<LocalPushQueue>) {
        let scale = TimeScale::new(1.0);
        let clock: Arc<dyn Clock> = Arc::new(ScaledClock::new(scale));
        let pause: Arc<dyn Pause> = Arc::new(ScaledPause(scale));
        (
            Arc::new(JobQueue::new(settings, clock.clone(), pause.clone())),
            Arc::new(LocalPushQueue::new(clock, pause)),
        )
    }

    fn job() -> PushWork {
        PushWork::Start(wsdr_protocol::Topic::parse("auction:lot-1").expect("a topic"))
    }

    /// Throttled for four minutes from the first receive: the queue before (visibility 180 s,
    /// retention 300 s) receives the job at 0 and 180 s, both throttled, and deletes it at
    /// 300 s, before the third receive and before any dead-letter queue sees it.
    #[tokio::test(start_paused = true)]
    async fn a_job_throttled_past_its_second_receive_expires_unseen_on_the_queue_before() {
        let (jobs, pushes) = queue(PushJobQueue::Before.settings());
        jobs.exhaust(AwsDuration::from_secs(240));
        assert_eq!(jobs.receive(), Receive::Throttled);
        jobs.clone().redeliver(job(), pushes.clone()).await;
        let stats = jobs.stats();
        assert_eq!(stats.expired, 1, "{stats:?}");
        assert_eq!(stats.dead_lettered, 0);
        assert_eq!(stats.throttled_receives, 2, "{stats:?}");
        assert_eq!(stats.longest_wait_ms, 300_000);
        assert!(pushes.try_next().is_none());
    }

    /// Throttled for 100 s: received again at 180 s and run then, three minutes late.
    #[tokio::test(start_paused = true)]
    async fn a_throttled_job_runs_after_its_visibility_timeout() {
        let (jobs, pushes) = queue(PushJobQueue::Before.settings());
        jobs.exhaust(AwsDuration::from_secs(100));
        assert_eq!(jobs.receive(), Receive::Throttled);
        jobs.clone().redeliver(job(), pushes.clone()).await;
        let stats = jobs.stats();
        assert_eq!((stats.late_jobs, stats.lost()), (1, 0), "{stats:?}");
        assert_eq!(stats.longest_wait_ms, 180_000);
        assert!(pushes.try_next().is_some());
    }

    /// A queue whose retention outlasts its receives dead-letters a job that stays throttled:
    /// the fourth receive passes `maxReceiveCount` (3) at 180 s.
    #[tokio::test(start_paused = true)]
    async fn a_job_throttled_past_max_receives_is_dead_lettered_when_retention_allows() {
        let (jobs, pushes) = queue(QueueSettings {
            workers_reserved: false,
            ..PushJobQueue::Wsdr.settings()
        });
        jobs.exhaust(AwsDuration::ZERO);
        assert_eq!(jobs.receive(), Receive::Throttled);
        jobs.clone().redeliver(job(), pushes.clone()).await;
        let stats = jobs.stats();
        assert_eq!((stats.dead_lettered, stats.expired), (1, 0), "{stats:?}");
        assert_eq!(stats.longest_wait_ms, 180_000);
    }

    /// Reserved workers run whatever the account's pool: nothing throttled, nothing late.
    #[tokio::test(start_paused = true)]
    async fn reserved_workers_run_while_the_pool_is_exhausted() {
        let (jobs, _) = queue(PushJobQueue::Wsdr.settings());
        jobs.exhaust(AwsDuration::ZERO);
        assert_eq!(jobs.receive(), Receive::Run);
        jobs.heal();
        assert_eq!(jobs.receive(), Receive::Run);
        let stats = jobs.stats();
        assert_eq!(
            (stats.ran_while_exhausted, stats.throttled_receives),
            (1, 0)
        );
    }
}
