//! The heartbeat rule, as a pure state machine: the session loop feeds it what arrived and
//! when the heartbeat is due, and it says when the connection is broken. One lost pong on a
//! healthy socket costs nothing; two failed rounds in a row break the session; a failed round
//! brings the next heartbeat forward (the confirmation probe) so the second is judged quickly.
//!
//! A round fails when its heartbeat goes unanswered, or when an error frame arrives (API
//! Gateway's internal-error frame, our `internal` error). API Gateway's error frame does not
//! say which request it answers, so a round counts at most one failure: a bid and a heartbeat
//! failing together in one blip are one failure.

use std::time::Duration;

/// Why the rule judged the connection broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Broken {
    /// `threshold` consecutive rounds failed.
    Failures(u32),
    /// Nothing at all arrived for the heartbeat timeout (or the machine slept through it).
    Silent,
}

/// The rule's state for one session: "2 consecutive non-pong replies = broken", free of
/// timers and sockets.
///
/// ```
/// use std::time::Duration;
/// use wsdr_client::heartbeat::{Broken, Heartbeat};
///
/// let s = Duration::from_secs;
/// let mut rule = Heartbeat::new(s(30), s(35), 2);
/// // Round 1: a heartbeat goes out; the next is due after the interval.
/// assert_eq!(rule.on_due(s(30), s(30)), Ok(s(30)));
/// rule.on_pong();
/// // Round 2 is answered by API Gateway's error frame: one failure; confirm sooner.
/// assert_eq!(rule.on_due(s(30), s(30)), Ok(s(30)));
/// assert_eq!(rule.on_error_frame(), Some(s(5)));
/// // Round 3 gets no answer at all: the second failure in a row breaks the session.
/// assert_eq!(rule.on_due(s(5), s(5)), Ok(s(5)));
/// assert_eq!(rule.on_due(s(10), s(10)), Err(Broken::Failures(2)));
/// ```
#[derive(Debug, Clone)]
pub struct Heartbeat {
    interval: Duration,
    timeout: Duration,
    threshold: u32,
    confirm_after: Duration,
    failures: u32,
    /// A heartbeat was sent and nothing has answered it yet.
    outstanding: bool,
    /// This round already counted a failure (an error frame arrived).
    round_failed: bool,
}

impl Heartbeat {
    /// A session's rule: a heartbeat every `interval`, `timeout` of silence is too long,
    /// `threshold` failed rounds break the connection.
    pub fn new(interval: Duration, timeout: Duration, threshold: u32) -> Self {
        // After a failure the next heartbeat goes out when the timeout would expire, but no
        // later than a normal interval and no sooner than a tenth of it.
        let confirm_after = timeout
            .saturating_sub(interval)
            .max(interval / 10)
            .min(interval);
        Self {
            interval,
            timeout,
            threshold: threshold.max(1),
            confirm_after,
            failures: 0,
            outstanding: false,
            round_failed: false,
        }
    }

    /// The first heartbeat's delay.
    pub fn first_due(&self) -> Duration {
        self.interval
    }

    /// Failed rounds in a row so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// A pong arrived: the connection works.
    pub fn on_pong(&mut self) {
        self.outstanding = false;
        self.round_failed = false;
        self.failures = 0;
    }

    /// An error frame arrived. `Some(delay)`: the round just failed, send the next heartbeat
    /// after `delay` (the confirmation probe). Then ask [`Heartbeat::broken`].
    pub fn on_error_frame(&mut self) -> Option<Duration> {
        self.outstanding = false;
        if self.round_failed {
            return None;
        }
        self.round_failed = true;
        self.failures += 1;
        Some(self.confirm_after)
    }

    /// Whether the failures so far break the connection.
    pub fn broken(&self) -> Option<Broken> {
        (self.failures >= self.threshold).then_some(Broken::Failures(self.failures))
    }

    /// The heartbeat is due. `silence`: time since anything arrived by the monotonic clock;
    /// `wall_silence` the same by the wall clock (far ahead of it: the machine slept, and
    /// the socket is presumed dead at once). `Ok(next)`: send a heartbeat now and come back
    /// after `next`; `Err`: the connection is broken.
    pub fn on_due(
        &mut self,
        silence: Duration,
        wall_silence: Duration,
    ) -> Result<Duration, Broken> {
        // Further ahead of the monotonic silence than a timeout (so past a timeout too).
        if wall_silence > silence.saturating_add(self.timeout) {
            return Err(Broken::Silent);
        }
        if self.outstanding && !self.round_failed {
            self.failures += 1;
        }
        if self.failures >= self.threshold {
            return Err(if silence > self.timeout {
                Broken::Silent
            } else {
                Broken::Failures(self.failures)
            });
        }
        self.outstanding = true;
        self.round_failed = false;
        Ok(if self.failures > 0 {
            self.confirm_after
        } else {
            self.interval
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn rule() -> Heartbeat {
        // The defaults: a heartbeat every 30 s, 35 s of silence is too long, 2 failures.
        Heartbeat::new(30 * S, 35 * S, 2)
    }

    #[test]
    fn answered_heartbeats_keep_the_connection() {
        let mut hb = rule();
        for _ in 0..10 {
            assert_eq!(hb.on_due(S, S), Ok(30 * S));
            hb.on_pong();
        }
        assert_eq!(hb.broken(), None);
    }

    #[test]
    fn one_lost_pong_costs_nothing_but_brings_the_next_heartbeat_forward() {
        let mut hb = rule();
        assert_eq!(hb.on_due(S, S), Ok(30 * S));
        // No answer: the next round counts one failure and confirms after 5 s.
        assert_eq!(hb.on_due(30 * S, 30 * S), Ok(5 * S));
        assert_eq!(hb.failures(), 1);
        hb.on_pong();
        assert_eq!(hb.on_due(S, S), Ok(30 * S));
    }

    #[test]
    fn two_unanswered_rounds_break_it() {
        let mut hb = rule();
        hb.on_due(S, S).expect("first heartbeat");
        hb.on_due(30 * S, 30 * S).expect("one failure");
        assert_eq!(hb.on_due(20 * S, 20 * S), Err(Broken::Failures(2)));
        let mut silent = rule();
        silent.on_due(S, S).expect("first heartbeat");
        silent.on_due(30 * S, 30 * S).expect("one failure");
        assert_eq!(silent.on_due(36 * S, 36 * S), Err(Broken::Silent));
    }

    #[test]
    fn error_frames_count_once_per_round() {
        let mut hb = rule();
        hb.on_due(S, S).expect("first heartbeat");
        assert_eq!(hb.on_error_frame(), Some(5 * S));
        // The bid's error frame in the same round: no second failure.
        assert_eq!(hb.on_error_frame(), None);
        assert_eq!(hb.broken(), None);
        // The confirmation heartbeat fails too: broken.
        assert_eq!(hb.on_due(5 * S, 5 * S), Ok(5 * S));
        assert_eq!(hb.on_error_frame(), Some(5 * S));
        assert_eq!(hb.broken(), Some(Broken::Failures(2)));
    }

    #[test]
    fn an_error_round_is_not_counted_again_when_the_heartbeat_is_due() {
        let mut hb = rule();
        hb.on_due(S, S).expect("first heartbeat");
        hb.on_error_frame();
        // The error answered the heartbeat: not outstanding, so no second count.
        assert_eq!(hb.on_due(5 * S, 5 * S), Ok(5 * S));
        assert_eq!(hb.failures(), 1);
        hb.on_pong();
        assert_eq!(hb.failures(), 0);
    }

    #[test]
    fn a_wall_clock_far_ahead_means_the_machine_slept() {
        let mut hb = rule();
        hb.on_due(S, S).expect("first heartbeat");
        hb.on_pong();
        assert_eq!(hb.on_due(30 * S, 3600 * S), Err(Broken::Silent));
        // Both clocks agreeing on a long silence is ordinary silence, judged by the rounds.
        let mut hb = rule();
        assert_eq!(hb.on_due(40 * S, 40 * S), Ok(30 * S));
    }

    #[test]
    fn the_confirmation_delay_stays_between_a_tenth_and_one_interval() {
        assert_eq!(
            Heartbeat::new(30 * S, 31 * S, 2).on_error_frame(),
            Some(3 * S)
        );
        assert_eq!(
            Heartbeat::new(30 * S, 90 * S, 2).on_error_frame(),
            Some(30 * S)
        );
        assert_eq!(
            Heartbeat::new(30 * S, 35 * S, 0).broken(),
            None,
            "a threshold of 0 acts as 1, never as already broken"
        );
    }

    #[test]
    fn the_first_heartbeat_waits_one_interval() {
        assert_eq!(rule().first_due(), 30 * S);
    }

    #[test]
    fn the_wall_clock_means_a_sleep_only_past_the_timeout_and_past_the_monotonic_silence() {
        // Exactly the timeout by the wall clock: not yet a sleep.
        assert_eq!(rule().on_due(Duration::ZERO, 35 * S), Ok(30 * S));
        // Past the timeout, but only as far ahead of the monotonic silence as the timeout:
        // the clocks agree within it, no sleep.
        assert_eq!(rule().on_due(S, 36 * S), Ok(30 * S));
        // Past both: the machine slept.
        assert_eq!(
            rule().on_due(Duration::ZERO, 35 * S + Duration::from_millis(1)),
            Err(Broken::Silent)
        );
    }

    #[test]
    fn broken_rounds_are_silence_only_past_the_timeout() {
        let broken_after = |silence: Duration| {
            let mut rule = rule();
            assert!(rule.on_due(Duration::ZERO, Duration::ZERO).is_ok());
            assert!(rule.on_due(Duration::ZERO, Duration::ZERO).is_ok());
            rule.on_due(silence, silence)
        };
        assert_eq!(broken_after(35 * S), Err(Broken::Failures(2)));
        assert_eq!(
            broken_after(35 * S + Duration::from_millis(1)),
            Err(Broken::Silent)
        );
    }
}
