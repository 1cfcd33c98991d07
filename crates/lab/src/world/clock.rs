//! One clock for the whole lab. Everything reads time from tokio's clock (so a test can pause
//! or advance it), expressed as epoch milliseconds from a base taken at start. Each Region has
//! its own [`RegionClock`] on top: Global Tables stamp writes with the receiving Region's clock,
//! and Regions' clocks disagree, so the lab can skew and drift each one.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use tokio::time::Instant;
use wsdr_core::Clock;

/// The lab's wall clock: the epoch ms at start plus tokio's elapsed time since.
#[derive(Debug, Clone, Copy)]
pub struct LabClock {
    base_ms: u64,
    start: Instant,
}

impl LabClock {
    pub fn new() -> Self {
        Self::at(wsdr_core::SystemClock.now_ms())
    }

    /// A clock that reads `epoch_ms` now (a simulation's fixed start).
    pub fn at(epoch_ms: u64) -> Self {
        Self {
            base_ms: epoch_ms,
            start: Instant::now(),
        }
    }

    /// When the lab started, on tokio's clock.
    pub fn start(&self) -> Instant {
        self.start
    }
}

impl Default for LabClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for LabClock {
    fn now_ms(&self) -> u64 {
        self.base_ms + self.start.elapsed().as_millis() as u64
    }
}

/// One Region's clock: the lab clock plus a skew (ms, either sign) and a drift (parts per
/// million of the time since the drift was set). Both are lab milliseconds.
#[derive(Debug)]
pub struct RegionClock {
    lab: LabClock,
    skew_ms: AtomicI64,
    drift_ppm: AtomicI64,
    drift_since_ms: AtomicI64,
}

impl RegionClock {
    pub fn new(lab: LabClock) -> Arc<Self> {
        Arc::new(Self {
            lab,
            skew_ms: AtomicI64::new(0),
            drift_ppm: AtomicI64::new(0),
            drift_since_ms: AtomicI64::new(0),
        })
    }

    /// Set the offset from the lab clock (a Region whose clock runs ahead or behind).
    pub fn set_skew_ms(&self, skew: i64) {
        self.skew_ms.store(skew, Ordering::SeqCst);
    }

    pub fn skew_ms(&self) -> i64 {
        self.skew_ms.load(Ordering::SeqCst)
    }

    /// Let the clock run fast (positive) or slow from now on.
    pub fn set_drift_ppm(&self, ppm: i64) {
        self.drift_since_ms
            .store(self.lab.now_ms() as i64, Ordering::SeqCst);
        self.drift_ppm.store(ppm, Ordering::SeqCst);
    }

    /// Back to the lab clock.
    pub fn reset(&self) {
        self.set_skew_ms(0);
        self.set_drift_ppm(0);
    }
}

impl Clock for RegionClock {
    fn now_ms(&self) -> u64 {
        let now = self.lab.now_ms() as i64;
        let drift = (now - self.drift_since_ms.load(Ordering::SeqCst))
            .saturating_mul(self.drift_ppm.load(Ordering::SeqCst))
            / 1_000_000;
        (now + self.skew_ms.load(Ordering::SeqCst) + drift).max(0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn region_clocks_follow_the_paused_lab_clock_with_their_skew_and_drift() {
        let lab = LabClock::new();
        let east = RegionClock::new(lab);
        let west = RegionClock::new(lab);
        let t0 = lab.now_ms();
        west.set_skew_ms(-250);
        east.set_drift_ppm(10_000); // 1% fast
        tokio::time::advance(std::time::Duration::from_secs(10)).await;
        assert_eq!(lab.now_ms(), t0 + 10_000);
        assert_eq!(west.now_ms(), t0 + 10_000 - 250);
        assert_eq!(east.now_ms(), t0 + 10_000 + 100);
        east.reset();
        assert_eq!(east.now_ms(), lab.now_ms());
    }
}
