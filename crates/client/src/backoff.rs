//! Exponential backoff with full jitter.
//!
//! `delay = uniform(floor, min(cap, base * 2^attempt))`, the reference design's
//! `Math.random() * Math.min(2000 * 2 ** attempt, 20000)` with an optional floor. Full jitter
//! spreads a fleet's reconnects over the whole window, which is what keeps a failover from
//! becoming a thundering herd against the secondary's 500 new connections/s quota.

use rand::Rng;
use std::time::Duration;

/// Backoff settings: exponential windows with full jitter, widened by the server's herd hint.
///
/// ```
/// use rand::{rngs::SmallRng, SeedableRng};
/// use std::time::Duration;
/// use wsdr_client::Backoff;
///
/// let backoff = Backoff::default();
/// let mut rng = SmallRng::seed_from_u64(7);
/// // Retry 0 draws from [0, 2 s], retry 3 from [0, 16 s], and never past the 20 s cap.
/// assert!(backoff.delay(0, &mut rng) <= Duration::from_secs(2));
/// assert_eq!(backoff.window(3, false, None), (Duration::ZERO, Duration::from_secs(16)));
/// assert_eq!(backoff.window(9, false, None).1, Duration::from_secs(20));
/// // A Region that advertised a 60 s herd window: the first retry spreads over all of it.
/// let herd = Some(Duration::from_secs(60));
/// assert_eq!(backoff.window(0, false, herd).1, Duration::from_secs(60));
/// ```
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
    /// Honour the herd window the server advertises in `state` (default): the first retry
    /// after an unplanned loss is spread over it, and it widens the window after a 429. The
    /// server knows the herd's size (its connection census) and the destination's quota;
    /// the fixed `herd_window` is only a guess at them. `false`: ignore it.
    pub herd_hint: bool,
}

/// The longest advertised herd window a client honours (an hour: 1.8 million connections at
/// 500 per second): a wrong hint cannot keep a user away for longer.
pub const MAX_HERD_HINT: Duration = Duration::from_secs(3_600);

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(2),
            cap: Duration::from_secs(20),
            floor: Duration::ZERO,
            herd_window: Some(Duration::from_secs(20)),
            jitter: true,
            herd_hint: true,
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
            herd_hint: false,
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
            herd_hint: self.herd_hint,
        }
    }

    /// A delay drawn uniformly from `[floor, ceiling(attempt)]`.
    pub fn delay(&self, attempt: u32, rng: &mut impl Rng) -> Duration {
        self.delay_after(attempt, false, rng)
    }

    /// Like [`Backoff::delay`]; `throttled` says the last attempt was refused with 429, which
    /// widens the window to at least `herd_window`.
    pub fn delay_after(&self, attempt: u32, throttled: bool, rng: &mut impl Rng) -> Duration {
        self.delay_for(attempt, throttled, None, rng)
    }

    /// The delay before retry `attempt`, given the herd window the server advertised (if the
    /// loss was unplanned and one was advertised): the first retry (`attempt` 0) is drawn
    /// from the whole advertised window, so a Region's population cut off at once arrives at
    /// the destination's quota instead of all in the first seconds; after a 429 the window is
    /// at least the advertised one too. Later retries double as usual. Without a hint (or
    /// with `herd_hint` off) this is [`Backoff::delay_after`].
    pub fn delay_for(
        &self,
        attempt: u32,
        throttled: bool,
        advertised: Option<Duration>,
        rng: &mut impl Rng,
    ) -> Duration {
        let (low, high) = self.window(attempt, throttled, advertised);
        if !self.jitter {
            return high;
        }
        let high = high.as_micros() as u64;
        let low = (low.as_micros() as u64).min(high);
        Duration::from_micros(rng.random_range(low..=high))
    }

    /// The window [`Backoff::delay_for`] draws retry `attempt`'s delay from, uniformly: the
    /// rule itself, without the draw (the conformance vectors check it in both clients).
    /// Without jitter the window is the ceiling alone.
    pub fn window(
        &self,
        attempt: u32,
        throttled: bool,
        advertised: Option<Duration>,
    ) -> (Duration, Duration) {
        let advertised = advertised
            .filter(|_| self.herd_hint)
            .map(|w| w.min(MAX_HERD_HINT));
        let mut ceiling = self.ceiling(attempt);
        if let (0, Some(herd)) = (attempt, advertised) {
            ceiling = ceiling.max(herd);
        }
        if throttled {
            for herd in [self.herd_window, advertised].into_iter().flatten() {
                ceiling = ceiling.max(herd);
            }
        }
        if !self.jitter {
            return (ceiling, ceiling);
        }
        (self.floor.min(ceiling), ceiling)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    fn draws(
        backoff: &Backoff,
        attempt: u32,
        throttled: bool,
        advertised: Option<Duration>,
    ) -> (Duration, Duration) {
        let mut rng = SmallRng::seed_from_u64(11);
        let mut low = Duration::MAX;
        let mut high = Duration::ZERO;
        for _ in 0..5_000 {
            let d = backoff.delay_for(attempt, throttled, advertised, &mut rng);
            low = low.min(d);
            high = high.max(d);
        }
        (low, high)
    }

    #[test]
    fn the_first_retry_spreads_over_the_advertised_herd_window() {
        let backoff = Backoff::default();
        let herd = Some(Duration::from_secs(60));
        let (low, high) = draws(&backoff, 0, false, herd);
        assert!(low < Duration::from_secs(1), "{low:?}");
        assert!(high > Duration::from_secs(58), "{high:?}");
        assert!(high <= Duration::from_secs(60), "{high:?}");
        // Later retries double as usual: the hint is about the herd's first arrival.
        let (_, high) = draws(&backoff, 1, false, herd);
        assert!(high <= Duration::from_secs(4), "{high:?}");
        // A 429 is evidence of the herd: the advertised window is the floor of the window.
        let (_, high) = draws(&backoff, 3, true, herd);
        assert!(high > Duration::from_secs(58), "{high:?}");
    }

    #[test]
    fn a_small_hint_changes_nothing_and_a_huge_one_is_capped() {
        let backoff = Backoff::default();
        let (_, high) = draws(&backoff, 0, false, Some(Duration::from_millis(300)));
        assert!(
            high > Duration::from_millis(1_900),
            "the 2 s base still applies: {high:?}"
        );
        let (_, high) = draws(&backoff, 0, false, Some(Duration::from_secs(86_400)));
        assert!(high <= MAX_HERD_HINT, "{high:?}");
    }

    #[test]
    fn without_herd_hint_the_advertised_window_is_ignored() {
        let backoff = Backoff {
            herd_hint: false,
            ..Backoff::default()
        };
        let (_, high) = draws(&backoff, 0, false, Some(Duration::from_secs(60)));
        assert!(high <= Duration::from_secs(2), "{high:?}");
        let (_, high) = draws(
            &Backoff::reference(),
            0,
            false,
            Some(Duration::from_secs(60)),
        );
        assert!(high <= Duration::from_secs(2), "{high:?}");
    }
}
