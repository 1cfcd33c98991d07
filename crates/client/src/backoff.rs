//! Exponential backoff with full jitter.
//!
//! `delay = uniform(floor, min(cap, base * 2^attempt))`, the reference design's
//! `Math.random() * Math.min(2000 * 2 ** attempt, 20000)` with an optional floor. Full jitter
//! spreads a fleet's reconnects over the whole window, which is what keeps a failover from
//! becoming a thundering herd against the secondary's 500 new connections/s quota.

use rand::Rng;
use std::time::Duration;

/// Backoff settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// Ceiling of the first retry's window (default 2 s).
    pub base: Duration,
    /// Largest window (default 20 s).
    pub cap: Duration,
    /// Smallest delay (default 0).
    pub floor: Duration,
    /// After a handshake refused with 429 (API Gateway's new-connection quota), the window is
    /// at least this wide (default 20 s). A 429 is evidence of a herd: spreading the retries
    /// over fleet size / quota (10,000 clients / 500 per s = 20 s) lets nearly every retry in
    /// at once, where doubling from 2 s would send most of the herd back into the quota
    /// several times. `None` is the reference design's plain policy.
    pub herd_window: Option<Duration>,
    /// Full jitter (default). `false` waits exactly the window's ceiling: the naive policy
    /// benchmarks compare against.
    pub jitter: bool,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(2),
            cap: Duration::from_secs(20),
            floor: Duration::ZERO,
            herd_window: Some(Duration::from_secs(20)),
            jitter: true,
        }
    }
}

impl Backoff {
    /// The window's upper bound for `attempt` (0 for the first retry).
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.min(30));
        self.base
            .saturating_mul(factor)
            .min(self.cap)
            .max(self.floor)
    }

    /// The reference design's policy: full jitter, base 2 s, cap 20 s, no herd window.
    pub fn reference() -> Self {
        Self {
            herd_window: None,
            ..Self::default()
        }
    }

    /// Every duration divided by `divisor` (the lab's time scale).
    pub fn scaled(self, divisor: f64) -> Self {
        let d = |x: Duration| Duration::from_secs_f64(x.as_secs_f64() / divisor.max(1.0));
        Self {
            base: d(self.base),
            cap: d(self.cap),
            floor: d(self.floor),
            herd_window: self.herd_window.map(d),
            jitter: self.jitter,
        }
    }

    /// A delay drawn uniformly from `[floor, ceiling(attempt)]`.
    pub fn delay(&self, attempt: u32, rng: &mut impl Rng) -> Duration {
        self.delay_after(attempt, false, rng)
    }

    /// Like [`Backoff::delay`]; `throttled` says the last attempt was refused with 429, which
    /// widens the window to at least `herd_window`.
    pub fn delay_after(&self, attempt: u32, throttled: bool, rng: &mut impl Rng) -> Duration {
        let mut ceiling = self.ceiling(attempt);
        if let (true, Some(herd)) = (throttled, self.herd_window) {
            ceiling = ceiling.max(herd);
        }
        if !self.jitter {
            return ceiling;
        }
        let high = ceiling.as_micros() as u64;
        let low = (self.floor.as_micros() as u64).min(high);
        Duration::from_micros(rng.random_range(low..=high))
    }
}
