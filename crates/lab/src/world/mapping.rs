//! Lambda's SQS event source mapping as the push workers meet it: how many invocations run at
//! once, and which of them start a new execution environment (a cold start).
//!
//! What AWS states ("Configuring scaling behavior for SQS event source mappings", Lambda
//! developer guide): for a standard queue, "when messages are available, Lambda starts
//! processing five batches at a time with five concurrent invocations of your function. If
//! messages are still available, Lambda increases the number of processes that are reading
//! batches by up to 300 more instances per minute"; "when traffic is low, Lambda scales back
//! the processing to five concurrent batches"; the mapping's maximum concurrency bounds it
//! (template.yaml's `PushWorkers`). So a burst of push jobs after a quiet spell gets 5 workers,
//! then one more every 200 ms while jobs wait, up to the maximum.
//!
//! Assumptions, where AWS publishes no figure (docs/LAB.md): the mapping scales back to five
//! after [`MappingSettings::scale_back_after`] without a job running or waiting; a new
//! execution environment's init takes [`MappingSettings::cold_start`]; an environment unused
//! for [`MappingSettings::environment_lifetime`] is gone (the next invocation starts cold).
//! The bench's hot auction (`wsdr-bench hot-auction`) and every lab Region use this one model.

use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use wsdr_core::{Clock, Pause};

/// How the mapping scales (AWS time).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MappingSettings {
    /// The mapping's maximum concurrency (`ScalingConfig.MaximumConcurrency`).
    pub maximum_concurrency: usize,
    /// Invocations at once when messages first become available (AWS: five).
    pub initial_concurrency: usize,
    /// One more invocation at once per this while messages wait (AWS: up to 300 a minute).
    pub raise_every: Duration,
    /// Back to the initial concurrency after this long with nothing running or waiting
    /// (assumption).
    pub scale_back_after: Duration,
    /// A new execution environment's init before its first job (assumption, as the lab's
    /// authorizer sandboxes: 250 ms).
    pub cold_start: Duration,
    /// An environment idle this long is gone (assumption).
    pub environment_lifetime: Duration,
}

impl MappingSettings {
    /// AWS's published scaling with wsdr's maximum concurrency, and the lab's assumptions.
    pub fn aws(maximum_concurrency: usize) -> Self {
        Self {
            maximum_concurrency: maximum_concurrency.max(1),
            initial_concurrency: 5,
            raise_every: Duration::from_millis(200),
            scale_back_after: Duration::from_secs(10),
            cold_start: Duration::from_millis(250),
            environment_lifetime: Duration::from_secs(300),
        }
    }

    fn initial(&self) -> usize {
        self.initial_concurrency.clamp(1, self.maximum_concurrency)
    }
}

/// What the mapping did (the drill report's `pushWorkers`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MappingStats {
    /// Invocations (one job each).
    pub invocations: u64,
    /// Invocations that started a new execution environment.
    pub cold_starts: u64,
    /// The most invocations that ran at once.
    pub peak_concurrency: usize,
    /// The highest concurrency the mapping had reached.
    pub peak_allowed: usize,
}

#[derive(Debug)]
struct State {
    /// Invocations the mapping runs at once now.
    allowed: usize,
    running: usize,
    waiting: usize,
    /// When something last ran or waited (AWS ms).
    last_active_ms: u64,
    /// Idle environments: when each was last used (AWS ms), the most recent last.
    idle: Vec<u64>,
    /// When the concurrency first reached the maximum (the mapping's clock, ms).
    reached_maximum_ms: Option<u64>,
    stats: MappingStats,
}

/// One queue's event source mapping.
#[derive(Debug)]
pub struct QueueMapping {
    settings: MappingSettings,
    clock: Arc<dyn Clock>,
    pause: Arc<dyn Pause>,
    state: Mutex<State>,
    /// A slot freed, or the concurrency raised.
    changed: Notify,
    /// A job began to wait (wakes the scaler).
    demand: Notify,
}

/// One running invocation: its slot goes back to the mapping when dropped.
#[derive(Debug)]
pub struct Invocation {
    mapping: Arc<QueueMapping>,
    /// Its environment was new: the invocation began with a cold start.
    pub cold: bool,
}

impl Drop for Invocation {
    fn drop(&mut self) {
        let now = self.mapping.clock.now_ms();
        {
            let mut state = lock(&self.mapping.state);
            state.running = state.running.saturating_sub(1);
            state.last_active_ms = now;
            state.idle.push(now);
        }
        self.mapping.changed.notify_waiters();
    }
}

impl QueueMapping {
    pub fn new(
        settings: MappingSettings,
        clock: Arc<dyn Clock>,
        pause: Arc<dyn Pause>,
    ) -> Arc<Self> {
        let now = clock.now_ms();
        Arc::new(Self {
            state: Mutex::new(State {
                allowed: settings.initial(),
                running: 0,
                waiting: 0,
                last_active_ms: now,
                idle: Vec::new(),
                reached_maximum_ms: (settings.initial() == settings.maximum_concurrency)
                    .then_some(now),
                stats: MappingStats {
                    peak_allowed: settings.initial(),
                    ..MappingStats::default()
                },
            }),
            settings,
            clock,
            pause,
            changed: Notify::new(),
            demand: Notify::new(),
        })
    }

    pub fn settings(&self) -> &MappingSettings {
        &self.settings
    }

    pub fn stats(&self) -> MappingStats {
        lock(&self.state).stats
    }

    /// When the concurrency first reached the maximum (the mapping's clock, ms), if it has.
    pub fn reached_maximum_ms(&self) -> Option<u64> {
        lock(&self.state).reached_maximum_ms
    }

    /// An invocation for a job that is ready: waits while the mapping's concurrency is taken,
    /// then pays a cold start if no warm environment is left.
    pub async fn invoke(self: &Arc<Self>) -> Invocation {
        let cold = self.admit().await;
        if cold {
            self.pause.pause(self.settings.cold_start).await;
        }
        Invocation {
            mapping: self.clone(),
            cold,
        }
    }

    /// Takes a slot; true when it needs a new environment.
    async fn admit(&self) -> bool {
        // Counted among the waiting while it waits, also if the caller gives up waiting.
        let mut waiter = Waiter {
            mapping: self,
            counted: false,
        };
        loop {
            let mut changed = pin!(self.changed.notified());
            changed.as_mut().enable();
            {
                let now = self.clock.now_ms();
                let mut state = lock(&self.state);
                if waiter.counted {
                    state.waiting -= 1;
                    waiter.counted = false;
                }
                let quiet = now.saturating_sub(state.last_active_ms);
                if state.running == 0
                    && state.waiting == 0
                    && quiet >= self.settings.scale_back_after.as_millis() as u64
                {
                    state.allowed = state.allowed.min(self.settings.initial());
                }
                state.last_active_ms = now;
                if state.running < state.allowed {
                    state.running += 1;
                    state.stats.invocations += 1;
                    state.stats.peak_concurrency = state.stats.peak_concurrency.max(state.running);
                    let lifetime = self.settings.environment_lifetime.as_millis() as u64;
                    state
                        .idle
                        .retain(|used| now.saturating_sub(*used) < lifetime);
                    let warm = state.idle.pop().is_some();
                    if !warm {
                        state.stats.cold_starts += 1;
                    }
                    return !warm;
                }
                state.waiting += 1;
                waiter.counted = true;
            }
            self.demand.notify_one();
            changed.await;
        }
    }

    /// The mapping's scaler: while jobs wait, one more invocation at once per
    /// [`MappingSettings::raise_every`], up to the maximum. Runs for as long as the Region.
    pub async fn scale(self: Arc<Self>) {
        loop {
            // Asleep until a job waits for a slot.
            loop {
                let mut demand = pin!(self.demand.notified());
                demand.as_mut().enable();
                if lock(&self.state).waiting > 0 {
                    break;
                }
                demand.await;
            }
            self.pause.pause(self.settings.raise_every).await;
            let raised = {
                let mut state = lock(&self.state);
                if state.waiting > 0 && state.allowed < self.settings.maximum_concurrency {
                    state.allowed += 1;
                    state.stats.peak_allowed = state.stats.peak_allowed.max(state.allowed);
                    if state.allowed == self.settings.maximum_concurrency
                        && state.reached_maximum_ms.is_none()
                    {
                        state.reached_maximum_ms = Some(self.clock.now_ms());
                    }
                    true
                } else {
                    false
                }
            };
            if raised {
                self.changed.notify_waiters();
            }
        }
    }
}

/// A caller waiting for a slot: uncounted when it stops waiting, however it stops.
struct Waiter<'a> {
    mapping: &'a QueueMapping,
    counted: bool,
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        if self.counted {
            let mut state = lock(&self.mapping.state);
            state.waiting = state.waiting.saturating_sub(1);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Debug)]
    struct TokioMs(tokio::time::Instant);
    impl Clock for TokioMs {
        fn now_ms(&self) -> u64 {
            self.0.elapsed().as_millis() as u64
        }
    }

    fn mapping(maximum: usize) -> Arc<QueueMapping> {
        QueueMapping::new(
            MappingSettings::aws(maximum),
            Arc::new(TokioMs(tokio::time::Instant::now())),
            Arc::new(wsdr_core::TokioPause),
        )
    }

    /// `jobs` jobs of `each` at once; returns the most that ran at once at each 100 ms.
    async fn burst(mapping: &Arc<QueueMapping>, jobs: usize, each: Duration) -> Vec<usize> {
        let running = Arc::new(AtomicUsize::new(0));
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..jobs {
            let (mapping, running) = (mapping.clone(), running.clone());
            tasks.spawn(async move {
                let _invocation = mapping.invoke().await;
                running.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(each).await;
                running.fetch_sub(1, Ordering::SeqCst);
            });
        }
        let mut samples = Vec::new();
        while !tasks.is_empty() {
            tokio::select! {
                _ = tasks.join_next() => {}
                _ = tokio::time::sleep(Duration::from_millis(100)) => {
                    samples.push(running.load(Ordering::SeqCst));
                }
            }
        }
        samples
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_starts_at_five_and_gains_one_every_200_ms_up_to_the_maximum() {
        let mapping = mapping(16);
        tokio::spawn(mapping.clone().scale());
        let samples = burst(&mapping, 400, Duration::from_millis(500)).await;
        // Five at first (their cold starts, then their jobs), sixteen after 11 raises.
        assert_eq!(samples[2], 5, "{samples:?}");
        assert!(samples[5] > 5 && samples[5] < 16, "{samples:?}");
        assert_eq!(samples[30], 16, "{samples:?}");
        assert!(samples.iter().all(|n| *n <= 16), "{samples:?}");
        let stats = mapping.stats();
        assert_eq!(stats.invocations, 400);
        assert_eq!(stats.cold_starts, 16, "one environment per slot, then warm");
        assert_eq!((stats.peak_concurrency, stats.peak_allowed), (16, 16));
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_mapping_scales_back_to_five_and_keeps_its_environments_warm() {
        let mapping = mapping(16);
        tokio::spawn(mapping.clone().scale());
        burst(&mapping, 400, Duration::from_millis(500)).await;
        tokio::time::sleep(Duration::from_secs(11)).await;
        let samples = burst(&mapping, 100, Duration::from_millis(500)).await;
        assert_eq!(samples[0], 5, "{samples:?}");
        assert_eq!(
            mapping.stats().cold_starts,
            16,
            "warm environments are reused"
        );
        // Past their lifetime they are gone.
        tokio::time::sleep(Duration::from_secs(301)).await;
        burst(&mapping, 1, Duration::from_millis(1)).await;
        assert_eq!(mapping.stats().cold_starts, 17);
    }

    #[tokio::test(start_paused = true)]
    async fn without_its_scaler_a_mapping_never_passes_five() {
        let mapping = mapping(16);
        let samples = burst(&mapping, 60, Duration::from_millis(300)).await;
        assert!(samples.iter().all(|n| *n <= 5), "{samples:?}");
    }
}
