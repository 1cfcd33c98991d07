//! One owner for everything a lab starts: every task and listener is spawned through an
//! [`Owner`], and cancelling it (when the [`crate::World`] is dropped) stops them all, so a
//! campaign of many labs in one process keeps its task and descriptor counts flat.

use std::future::Future;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Spawns tasks that end when the owner is cancelled. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Owner {
    token: CancellationToken,
    tracker: TaskTracker,
}

impl Owner {
    pub fn new() -> Self {
        Self::default()
    }

    /// Run `task` until it ends or the owner is cancelled, whichever comes first.
    pub fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let token = self.token.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                biased;
                () = token.cancelled() => {}
                () = task => {}
            }
        });
    }

    /// Stop every task (they end at their next await point).
    pub fn cancel(&self) {
        self.token.cancel();
        self.tracker.close();
    }

    /// Resolves when the owner is cancelled (for loops that select on it).
    pub fn cancelled(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.token.cancelled()
    }

    pub fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Tasks still running.
    pub fn live_tasks(&self) -> usize {
        self.tracker.len()
    }

    /// Wait until every task has ended (after [`Owner::cancel`]).
    pub async fn wait(&self) {
        self.tracker.wait().await;
    }
}

/// What the process holds right now: open descriptors (Linux `/proc/self/fd`; 0 elsewhere)
/// and tokio tasks alive. Printed per run and in the campaign summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Holdings {
    pub descriptors: usize,
    pub tasks: usize,
}

impl Holdings {
    pub fn now() -> Self {
        Self {
            descriptors: std::fs::read_dir("/proc/self/fd")
                .map(|d| d.count())
                .unwrap_or(0),
            tasks: tokio::runtime::Handle::try_current()
                .map(|h| h.metrics().num_alive_tasks())
                .unwrap_or(0),
        }
    }
}
