//! Where a Region's push work waits for a worker: SQS in AWS (`wsdr-aws`), a queue in memory
//! for a process that runs its own workers (the lab's Regions, tests, the benchmark).

use super::{locked, PushJob};
use crate::ports::{Clock, Pause};
use crate::Result;
use async_trait::async_trait;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use wsdr_protocol::Topic;

/// The longest a queued start may be put off (SQS's `DelaySeconds` ends at 900). A start that
/// runs while its spacing is still ahead is put off again.
pub const START_DELAY_LIMIT: Duration = Duration::from_secs(900);

/// What a worker takes from the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushWork {
    /// One shard's page of a push.
    Page(PushJob),
    /// Start a push of this topic (a change whose spacing ended after its reader could wait:
    /// queued with a delay, so that no change is left without its push).
    Start(Topic),
}

/// A queue of push work. Delivery is at least once; work may run twice.
#[async_trait]
pub trait PushQueue: Send + Sync {
    async fn send(&self, jobs: Vec<PushJob>) -> Result<()>;

    /// Start a push of `topic` after `delay` (whole seconds, at most
    /// [`START_DELAY_LIMIT`]: the callers round it so, as SQS takes it).
    async fn send_start(&self, topic: &Topic, delay: Duration) -> Result<()>;
}

/// Work in memory, in order, for workers of the same process; a delayed start waits on the
/// queue's clock (the lab's scaled one, a test's) until it is due.
#[derive(Debug)]
pub struct LocalPushQueue {
    clock: Arc<dyn Clock>,
    pause: Arc<dyn Pause>,
    work: Mutex<Queued>,
    ready: Notify,
}

#[derive(Debug, Default)]
struct Queued {
    ready: VecDeque<PushWork>,
    /// Starts not yet due: (due at, ms on the queue's clock; topic).
    delayed: Vec<(u64, Topic)>,
}

impl LocalPushQueue {
    pub fn new(clock: Arc<dyn Clock>, pause: Arc<dyn Pause>) -> Self {
        Self {
            clock,
            pause,
            work: Mutex::default(),
            ready: Notify::new(),
        }
    }

    /// The next work that is due, if any.
    pub fn try_next(&self) -> Option<PushWork> {
        let now = self.clock.now_ms();
        let mut work = locked(&self.work);
        let mut i = 0;
        while i < work.delayed.len() {
            if work.delayed[i].0 <= now {
                let (_, topic) = work.delayed.remove(i);
                work.ready.push_back(PushWork::Start(topic));
            } else {
                i += 1;
            }
        }
        work.ready.pop_front()
    }

    /// When the earliest delayed start is due (ms on the queue's clock).
    pub fn next_due_ms(&self) -> Option<u64> {
        locked(&self.work).delayed.iter().map(|(at, _)| *at).min()
    }

    /// The next work, waiting for some to be sent or fall due.
    pub async fn next(&self) -> PushWork {
        loop {
            let notified = self.ready.notified();
            if let Some(work) = self.try_next() {
                return work;
            }
            match self.next_due_ms() {
                Some(at) => {
                    let wait = at.saturating_sub(self.clock.now_ms()).max(1);
                    tokio::select! {
                        () = notified => {}
                        () = self.pause.pause(Duration::from_millis(wait)) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Work ready now (delayed starts not counted).
    pub fn len(&self) -> usize {
        locked(&self.work).ready.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Starts waiting for their delay.
    pub fn delayed(&self) -> usize {
        locked(&self.work).delayed.len()
    }

    /// Work a worker took and could not run, back on the queue for the next worker (as SQS
    /// makes a message visible again).
    pub fn hand_back(&self, work: PushWork) {
        self.push([work]);
    }

    fn push(&self, work: impl IntoIterator<Item = PushWork>) {
        let mut count = 0;
        {
            let mut queued = locked(&self.work);
            for item in work {
                queued.ready.push_back(item);
                count += 1;
            }
        }
        for _ in 0..count {
            self.ready.notify_one();
        }
    }
}

#[async_trait]
impl PushQueue for LocalPushQueue {
    async fn send(&self, jobs: Vec<PushJob>) -> Result<()> {
        self.push(jobs.into_iter().map(PushWork::Page));
        Ok(())
    }

    async fn send_start(&self, topic: &Topic, delay: Duration) -> Result<()> {
        if delay.is_zero() {
            self.push([PushWork::Start(topic.clone())]);
            return Ok(());
        }
        let due = self
            .clock
            .now_ms()
            .saturating_add(delay.min(START_DELAY_LIMIT).as_millis() as u64);
        locked(&self.work).delayed.push((due, topic.clone()));
        // A worker waiting with nothing due learns of the new earliest instant.
        self.ready.notify_one();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::ports::{SystemClock, TokioPause};

    fn lot(name: &str) -> Topic {
        Topic::parse(&format!("auction:{name}")).expect("a topic")
    }

    /// A clock on tokio's time (paused in these tests), from 1 s.
    #[derive(Debug)]
    struct TokioClock(tokio::time::Instant);

    impl Clock for TokioClock {
        fn now_ms(&self) -> u64 {
            1_000 + self.0.elapsed().as_millis() as u64
        }
    }

    #[tokio::test]
    async fn a_delayed_start_is_due_at_its_instant_not_before() {
        let clock = Arc::new(crate::memory::ManualClock::new(10_000));
        let queue = LocalPushQueue::new(clock.clone(), Arc::new(TokioPause));
        queue
            .send_start(&lot("later"), Duration::from_secs(5))
            .await
            .unwrap();
        queue
            .send_start(&lot("sooner"), Duration::from_secs(2))
            .await
            .unwrap();
        assert_eq!((queue.len(), queue.delayed()), (0, 2));
        assert!(queue.is_empty(), "a delayed start is not ready work");
        assert_eq!(queue.next_due_ms(), Some(12_000));
        clock.set(11_999);
        assert_eq!(queue.try_next(), None);
        clock.set(12_000);
        assert_eq!(queue.try_next(), Some(PushWork::Start(lot("sooner"))));
        assert_eq!((queue.delayed(), queue.next_due_ms()), (1, Some(15_000)));
        clock.set(15_000);
        assert_eq!(queue.try_next(), Some(PushWork::Start(lot("later"))));
        assert_eq!((queue.delayed(), queue.next_due_ms()), (0, None));
        queue.send(vec![]).await.unwrap();
        assert!(queue.is_empty());
        queue.send_start(&lot("now"), Duration::ZERO).await.unwrap();
        assert!(!queue.is_empty(), "a start without delay is ready at once");
        assert_eq!((queue.len(), queue.delayed()), (1, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_worker_takes_a_delayed_start_when_it_falls_due() {
        let queue = Arc::new(LocalPushQueue::new(
            Arc::new(TokioClock(tokio::time::Instant::now())),
            Arc::new(TokioPause),
        ));
        let began = tokio::time::Instant::now();
        let worker = tokio::spawn({
            let queue = queue.clone();
            async move { queue.next().await }
        });
        tokio::task::yield_now().await;
        queue
            .send_start(&lot("lot-1"), Duration::from_secs(3))
            .await
            .unwrap();
        let work = tokio::time::timeout(Duration::from_secs(60), worker)
            .await
            .expect("the start falls due within a minute")
            .unwrap();
        assert_eq!(work, PushWork::Start(lot("lot-1")));
        let waited = began.elapsed();
        assert!(
            waited >= Duration::from_secs(3) && waited < Duration::from_millis(3_100),
            "{waited:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn every_waiting_worker_wakes_for_work_sent() {
        let queue = Arc::new(LocalPushQueue::new(
            Arc::new(TokioClock(tokio::time::Instant::now())),
            Arc::new(TokioPause),
        ));
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let queue = queue.clone();
                tokio::spawn(async move { queue.next().await })
            })
            .collect();
        tokio::task::yield_now().await;
        queue.push([PushWork::Start(lot("a")), PushWork::Start(lot("b"))]);
        let mut taken = Vec::new();
        for worker in workers {
            let work = tokio::time::timeout(Duration::from_secs(60), worker)
                .await
                .expect("each worker is woken")
                .unwrap();
            taken.push(work);
        }
        taken.sort_by_key(|w| format!("{w:?}"));
        assert_eq!(
            taken,
            [PushWork::Start(lot("a")), PushWork::Start(lot("b"))]
        );
    }

    /// Work a worker could not run goes back behind what is already ready, and is taken again.
    #[test]
    fn work_handed_back_is_taken_again_after_what_was_ready() {
        let queue = LocalPushQueue::new(Arc::new(SystemClock), Arc::new(TokioPause));
        queue.push([PushWork::Start(lot("lot-1"))]);
        let taken = queue.try_next().expect("the ready start");
        queue.push([PushWork::Start(lot("lot-2"))]);
        queue.hand_back(taken);
        assert_eq!(queue.len(), 2);
        assert!(matches!(queue.try_next(), Some(PushWork::Start(a)) if a == lot("lot-2")));
        assert!(matches!(queue.try_next(), Some(PushWork::Start(a)) if a == lot("lot-1")));
        assert!(queue.try_next().is_none());
    }
}
