//! Where a Region's push jobs wait for a worker: SQS in AWS (`wsdr-aws`), a queue in memory
//! for a process that runs its own workers (the lab's Regions, tests, the benchmark).

use super::{locked, PushJob};
use crate::Result;
use async_trait::async_trait;
use std::collections::VecDeque;
use std::sync::Mutex;
use tokio::sync::Notify;

/// A queue of push jobs. Delivery is at least once; a job may run twice.
#[async_trait]
pub trait PushQueue: Send + Sync {
    async fn send(&self, jobs: Vec<PushJob>) -> Result<()>;
}

/// Jobs in memory, in order, for workers of the same process.
#[derive(Debug, Default)]
pub struct LocalPushQueue {
    jobs: Mutex<VecDeque<PushJob>>,
    ready: Notify,
}

impl LocalPushQueue {
    /// The next job, if one waits.
    pub fn try_next(&self) -> Option<PushJob> {
        locked(&self.jobs).pop_front()
    }

    /// The next job, waiting for one.
    pub async fn next(&self) -> PushJob {
        loop {
            let notified = self.ready.notified();
            if let Some(job) = self.try_next() {
                return job;
            }
            notified.await;
        }
    }

    pub fn len(&self) -> usize {
        locked(&self.jobs).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[async_trait]
impl PushQueue for LocalPushQueue {
    async fn send(&self, jobs: Vec<PushJob>) -> Result<()> {
        let count = jobs.len();
        locked(&self.jobs).extend(jobs);
        for _ in 0..count {
            self.ready.notify_one();
        }
        Ok(())
    }
}
