//! One clock for the whole lab. Everything reads time from tokio's clock (so a test can pause
//! or advance it), expressed as epoch milliseconds from a base taken at start. Each Region has
//! its own [`RegionClock`] on top: Global Tables stamp writes with the receiving Region's clock,
//! and Regions' clocks disagree, so the lab can skew and drift each one.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;
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

    /// The epoch ms it read at its start.
    pub fn start_ms(&self) -> u64 {
        self.base_ms
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

/// Poll `check` until it holds or `within` passes; its last answer. It polls every
/// thousandth of `within`, never more often than every 5 ms (a simulated run at time scale 1
/// waits many AWS minutes; polling at a fixed 5 ms would be most of its cost).
///
/// `within` counts only time the lab was given: when the process is starved of CPU (a loaded
/// CI machine, steal time), a lab second at a high time scale passes without the lab running,
/// and a liveness deadline would measure the machine, not the system. So each poll that wakes
/// late adds its lateness back to the deadline, up to ten times `within` in all.
pub async fn wait_for(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let poll = (within / 1000).max(Duration::from_millis(5));
    // Timer slack on a healthy machine; lateness beyond it is time the lab did not get.
    const SLACK: Duration = Duration::from_millis(2);
    let start = Instant::now();
    let hard_stop = start + within.saturating_mul(10);
    let mut deadline = start + within;
    loop {
        if check() {
            return true;
        }
        let polled = Instant::now();
        if polled >= deadline {
            return false;
        }
        tokio::time::sleep(poll).await;
        let late = Instant::now().saturating_duration_since(polled + poll);
        if late > SLACK {
            deadline = (deadline + late).min(hard_stop);
        }
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
