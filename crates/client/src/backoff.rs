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
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(2),
            cap: Duration::from_secs(20),
            floor: Duration::ZERO,
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

    /// A delay drawn uniformly from `[floor, ceiling(attempt)]`.
    pub fn delay(&self, attempt: u32, rng: &mut impl Rng) -> Duration {
        let high = self.ceiling(attempt).as_micros() as u64;
        let low = (self.floor.as_micros() as u64).min(high);
        Duration::from_micros(rng.random_range(low..=high))
    }
}
