//! The failover decision as one rule over a Region's recent health, computed by the watcher
//! canary itself and published as a verdict (`App/FailoverVerdict`), so that what moves DNS
//! is certain: a Route 53 `CLOUDWATCH_METRIC` health check evaluates the alarm's *data
//! stream* with the alarm configuration it stored at creation (no `DatapointsToAlarm`, no
//! `TreatMissingData`), so an M-of-N rule in the alarm itself is not what Route 53 applies.
//! A one-period alarm on the verdict is the same whether Route 53 reads its state or its data.

/// Fail the Region over when at least `failover_after` (M) of the last `window` (N) minutes
/// were unhealthy; serve it again once fewer than M of the last N were, that is N - M + 1
/// healthy minutes in a row after the last bad one at the earliest. With M = 2 and N = 6:
/// two bad minutes fail over, five good ones in a row fail back, a Region bad every third
/// minute stays failed over.
///
/// A minute without a datapoint is no evidence either way: only the watcher itself writes
/// these datapoints, so a missing one means the watcher did not run or could not publish,
/// which says nothing about the Region it watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailoverRule {
    pub failover_after: u32,
    pub window: u32,
}

impl FailoverRule {
    /// A rule with 1 <= M <= N, or why not.
    pub fn new(failover_after: u32, window: u32) -> Result<Self, String> {
        if failover_after == 0 || window == 0 {
            return Err("M and N must be at least 1".into());
        }
        if failover_after > window {
            return Err(format!(
                "M = {failover_after} unhealthy minutes cannot fit in a window of N = {window}"
            ));
        }
        Ok(Self {
            failover_after,
            window,
        })
    }

    /// Whether the Region should serve, from its minutes oldest first (the last is the
    /// current one); only the last `window` count.
    pub fn serves(&self, minutes: &[Option<bool>]) -> bool {
        let recent = &minutes[minutes.len().saturating_sub(self.window as usize)..];
        let unhealthy = recent.iter().filter(|m| **m == Some(false)).count();
        unhealthy < self.failover_after as usize
    }
}

/// The fast verdict, for Route 53 endpoint health checks (which poll every 10 s) instead of
/// a one-minute alarm: probe rounds every few seconds from several vantage points (in AWS,
/// the watcher in the other Region and the Region's own canary; a vantage point that sent no
/// result in a round counts as failed there).
///
/// Fail over only when **every** vantage point has failed `fail_after` rounds in a row, so a
/// fault between one vantage point and the Region (a broken watcher, a network path only it
/// uses) can never fail a healthy Region over. Not a partition between the two Regions: the
/// watcher's probe and the Region's own rounds (which reach the judge by replication) both
/// cross it, so both fail and a healthy primary is failed over (docs/DEPLOY.md, the
/// dependency table, drilled by `inter-region-partition`). Serve again only when every vantage point has succeeded
/// `recover_after` rounds in a row (slow failback, as with the minute rule). With rounds every
/// 5 s, 3 and 12: a Region is failed over 15 s after it stops answering, and taken back after
/// a healthy minute.
///
/// **Flap damping.** A Region failed over again within [`FLAP_WINDOW_ROUNDS`] rounds of being
/// taken back is flapping: each such failover doubles the healthy rounds the next failback
/// needs (up to x[`MAX_DAMPING_FACTOR`]), and a failover outside the window resets it. A
/// primary that breaks again as soon as it looks fine is followed once, not back and forth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FastVerdict {
    fail_after: u32,
    recover_after: u32,
    serving: bool,
    failed_in_a_row: Vec<u32>,
    ok_in_a_row: Vec<u32>,
    rounds: u64,
    last_failback_round: Option<u64>,
    damping: u32,
}

/// A failover this many rounds after a failback (5 minutes at 5 s) counts as a flap.
pub const FLAP_WINDOW_ROUNDS: u64 = 60;

/// Flap damping multiplies the healthy rounds a failback needs by at most this.
pub const MAX_DAMPING_FACTOR: u32 = 16;

impl FastVerdict {
    /// A verdict that starts serving, over `vantage_points` (at least one).
    pub fn new(fail_after: u32, recover_after: u32, vantage_points: usize) -> Self {
        let n = vantage_points.max(1);
        Self {
            fail_after: fail_after.max(1),
            recover_after: recover_after.max(1),
            serving: true,
            failed_in_a_row: vec![0; n],
            ok_in_a_row: vec![0; n],
            rounds: 0,
            last_failback_round: None,
            damping: 0,
        }
    }

    /// Healthy rounds in a row the next failback needs (flap damping applied).
    pub fn rounds_to_fail_back(&self) -> u32 {
        self.recover_after
            .saturating_mul((1u32 << self.damping).min(MAX_DAMPING_FACTOR))
    }

    /// Start from a verdict already recorded (a watcher's cold start must not write "serve"
    /// over a failover its previous instance decided).
    pub fn resuming(mut self, serving: bool) -> Self {
        self.serving = serving;
        self
    }

    /// Whether the Region serves.
    pub fn serves(&self) -> bool {
        self.serving
    }

    /// One round: each vantage point's probe (`None`: no result, a failure there). Returns
    /// the new verdict when this round changed it.
    pub fn round(&mut self, results: &[Option<bool>]) -> Option<bool> {
        for (i, (failed, ok)) in self
            .failed_in_a_row
            .iter_mut()
            .zip(self.ok_in_a_row.iter_mut())
            .enumerate()
        {
            if results.get(i).copied().flatten() == Some(true) {
                *ok = ok.saturating_add(1);
                *failed = 0;
            } else {
                *failed = failed.saturating_add(1);
                *ok = 0;
            }
        }
        self.rounds += 1;
        let before = self.serving;
        if self.serving && self.failed_in_a_row.iter().all(|f| *f >= self.fail_after) {
            self.serving = false;
            let flapping = self
                .last_failback_round
                .is_some_and(|at| self.rounds - at <= FLAP_WINDOW_ROUNDS);
            self.damping = if flapping {
                (self.damping + 1).min(MAX_DAMPING_FACTOR.trailing_zeros())
            } else {
                0
            };
        } else if !self.serving {
            let needed = self.rounds_to_fail_back();
            if self.ok_in_a_row.iter().all(|o| *o >= needed) {
                self.serving = true;
                self.last_failback_round = Some(self.rounds);
            }
        }
        (self.serving != before).then_some(self.serving)
    }
}

/// How long a recorded verdict is evidence. Younger than `stale_after`: fresh. Older but
/// younger than `hold`: stale, and still what the endpoint answers (last known status, as
/// Route 53's own `LastKnownStatus`): a watcher that falls silent after a failover (a failed
/// secret read at cold start, an EventBridge delay, a deploy) must not send everyone back to
/// the dead Region it failed over from. Older than `hold`, or none ever: no evidence, serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerdictAge {
    pub stale_after_ms: u64,
    pub hold_ms: u64,
}

impl VerdictAge {
    /// The defaults: stale after 60 s, held for 6 hours (a Regional outage's usual length;
    /// the stale answer is alarmed from its first minute).
    pub const DEFAULT: VerdictAge = VerdictAge {
        stale_after_ms: 60_000,
        hold_ms: 6 * 3_600_000,
    };
}

/// What a Region's health endpoint answers, and whether the verdict it rests on is stale
/// (an alarm: the watcher is silent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointAnswer {
    pub serves: bool,
    pub stale: bool,
}

/// What a Region's health endpoint answers from the latest fast verdict on it, recorded at
/// `at_ms`: the verdict while it is younger than `age.hold_ms` (fresh, or stale and held),
/// serve otherwise. A Region itself gone is what Route 53's checkers see as no answer at all.
pub fn endpoint_answer(
    verdict: Option<(bool, u64)>,
    now_ms: u64,
    age: VerdictAge,
) -> EndpointAnswer {
    match verdict {
        Some((serve, at_ms)) => {
            let old = now_ms.saturating_sub(at_ms);
            EndpointAnswer {
                serves: if old <= age.hold_ms { serve } else { true },
                stale: old > age.stale_after_ms,
            }
        }
        None => EndpointAnswer {
            serves: true,
            stale: false,
        },
    }
}

/// Whether the secondary's failover record is healthy, from both verdicts: its own, or the
/// primary failed over. "When the secondary resource record set is unhealthy, Route 53
/// responds to DNS queries with the applicable value from the primary resource record set
/// regardless of the health of the primary" (Route 53 API Reference, `ResourceRecordSet`,
/// `Failover`), so marking the secondary unhealthy while the primary is failed over can only send new
/// connections to the Region already judged failing. The usual way the secondary fails then
/// is the failover itself: the whole audience's reconnect herd, or a survivor whose requests
/// are slow, makes its own probes time out (docs/DEPLOY.md, case 7 of "What follows").
pub fn secondary_holds(secondary_serves: bool, primary_serves: bool) -> bool {
    secondary_serves || !primary_serves
}

/// [`endpoint_answer`]'s verdict alone.
pub fn endpoint_serves(verdict: Option<(bool, u64)>, now_ms: u64, age: VerdictAge) -> bool {
    endpoint_answer(verdict, now_ms, age).serves
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_region_that_flaps_needs_twice_the_healthy_rounds_each_time_and_is_forgiven_later() {
        let mut verdict = FastVerdict::new(3, 12, 1);
        let run = |v: &mut FastVerdict, ok: bool, rounds: u32| {
            (0..rounds).filter_map(|_| v.round(&[Some(ok)])).last()
        };
        assert_eq!(run(&mut verdict, false, 3), Some(false));
        assert_eq!(run(&mut verdict, true, 12), Some(true), "12 healthy rounds");
        // Broken again within the window: a flap, the next failback needs 24.
        assert_eq!(run(&mut verdict, false, 3), Some(false));
        assert_eq!(verdict.rounds_to_fail_back(), 24);
        assert_eq!(run(&mut verdict, true, 23), None);
        assert_eq!(run(&mut verdict, true, 1), Some(true));
        assert_eq!(run(&mut verdict, false, 3), Some(false));
        assert_eq!(verdict.rounds_to_fail_back(), 48);
        for _ in 0..6 {
            let needed = verdict.rounds_to_fail_back();
            assert_eq!(run(&mut verdict, true, needed), Some(true));
            assert_eq!(run(&mut verdict, false, 3), Some(false));
        }
        assert_eq!(
            verdict.rounds_to_fail_back(),
            12 * MAX_DAMPING_FACTOR,
            "bounded"
        );
        // Healthy long past the window: the next failover is not a flap.
        assert_eq!(run(&mut verdict, true, 12 * MAX_DAMPING_FACTOR), Some(true));
        let _ = run(&mut verdict, true, FLAP_WINDOW_ROUNDS as u32 + 1);
        assert_eq!(run(&mut verdict, false, 3), Some(false));
        assert_eq!(verdict.rounds_to_fail_back(), 12);
    }

    fn minutes(s: &str) -> Vec<Option<bool>> {
        s.chars()
            .map(|c| match c {
                '1' => Some(true),
                '0' => Some(false),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn the_secondary_is_failed_only_while_the_primary_serves() {
        assert!(secondary_holds(true, true));
        assert!(secondary_holds(true, false));
        assert!(
            secondary_holds(false, false),
            "both failing: the name stays on the secondary, not on the failed primary"
        );
        assert!(!secondary_holds(false, true));
    }

    #[test]
    fn two_bad_minutes_fail_over_five_good_ones_fail_back() {
        let rule = FailoverRule::new(2, 6).unwrap_or_else(|e| panic!("{e}"));
        assert!(rule.serves(&minutes("111111")));
        assert!(
            rule.serves(&minutes("111110")),
            "one bad minute is not enough"
        );
        assert!(!rule.serves(&minutes("111100")));
        assert!(!rule.serves(&minutes("100111")), "still failed over");
        assert!(!rule.serves(&minutes("001111")));
        assert!(
            rule.serves(&minutes("011111")),
            "five good minutes in a row after the last bad"
        );
    }

    #[test]
    fn a_region_bad_every_third_minute_never_fails_back() {
        let rule = FailoverRule::new(2, 6).unwrap_or_else(|e| panic!("{e}"));
        let flapping = minutes("110110110110110");
        for end in 6..=flapping.len() {
            assert!(!rule.serves(&flapping[..end]), "minute {end}");
        }
    }

    #[test]
    fn missing_minutes_are_no_evidence_either_way() {
        let rule = FailoverRule::new(2, 6).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            rule.serves(&minutes("......")),
            "a silent watcher fails nobody over"
        );
        assert!(rule.serves(&minutes("...0..")));
        assert!(!rule.serves(&minutes("0....0")));
        assert!(rule.serves(&minutes("")));
    }

    #[test]
    fn only_the_window_counts() {
        let rule = FailoverRule::new(2, 3).unwrap_or_else(|e| panic!("{e}"));
        assert!(rule.serves(&minutes("0000111")));
        assert!(!rule.serves(&minutes("1111001")));
    }

    #[test]
    fn impossible_rules_are_refused() {
        assert!(FailoverRule::new(0, 6).is_err());
        assert!(FailoverRule::new(5, 4).is_err());
        assert!(FailoverRule::new(1, 1).is_ok());
    }

    fn rounds(verdict: &mut FastVerdict, pattern: &[[Option<bool>; 2]]) -> Vec<Option<bool>> {
        pattern.iter().map(|r| verdict.round(r)).collect()
    }

    const OK: [Option<bool>; 2] = [Some(true), Some(true)];
    const DOWN: [Option<bool>; 2] = [Some(false), Some(false)];
    const ONE_VIEW_BAD: [Option<bool>; 2] = [Some(false), Some(true)];
    const INSIDE_SILENT: [Option<bool>; 2] = [Some(false), None];

    #[test]
    fn fast_verdict_fails_over_after_every_vantage_point_failed_three_rounds() {
        let mut v = FastVerdict::new(3, 12, 2);
        assert_eq!(rounds(&mut v, &[OK, DOWN, DOWN]), [None, None, None]);
        assert_eq!(v.round(&DOWN), Some(false));
        assert!(!v.serves());
        // A Region gone entirely: its own canary is silent too.
        let mut v = FastVerdict::new(3, 12, 2);
        assert_eq!(
            rounds(&mut v, &[INSIDE_SILENT, INSIDE_SILENT, INSIDE_SILENT]),
            [None, None, Some(false)]
        );
    }

    #[test]
    fn one_vantage_point_alone_never_fails_a_region_over() {
        let mut v = FastVerdict::new(3, 12, 2);
        for _ in 0..100 {
            assert_eq!(v.round(&ONE_VIEW_BAD), None);
        }
        assert!(v.serves());
        // A success anywhere breaks the streak: alternating views never add up.
        let mut v = FastVerdict::new(3, 12, 2);
        for _ in 0..50 {
            assert_eq!(v.round(&[Some(false), Some(true)]), None);
            assert_eq!(v.round(&[Some(true), Some(false)]), None);
        }
        assert!(v.serves());
    }

    #[test]
    fn fast_verdict_fails_back_only_after_a_clean_streak_everywhere() {
        let mut v = FastVerdict::new(3, 12, 2);
        rounds(&mut v, &[DOWN, DOWN, DOWN]);
        assert!(!v.serves());
        // Eleven good rounds and a bad one: still failed over, and the count starts again.
        for _ in 0..11 {
            assert_eq!(v.round(&OK), None);
        }
        assert_eq!(v.round(&ONE_VIEW_BAD), None);
        for _ in 0..11 {
            assert_eq!(v.round(&OK), None);
        }
        assert_eq!(v.round(&OK), Some(true));
    }

    #[test]
    fn the_endpoint_follows_a_fresh_verdict_holds_a_stale_one_and_serves_without_one() {
        let age = VerdictAge {
            stale_after_ms: 60_000,
            hold_ms: 600_000,
        };
        assert!(
            endpoint_serves(None, 100_000, age),
            "no verdict ever: serve"
        );
        assert!(!endpoint_serves(Some((false, 90_000)), 100_000, age));
        assert!(endpoint_serves(Some((true, 90_000)), 100_000, age));
        let held = endpoint_answer(Some((false, 30_000)), 200_000, age);
        assert!(
            !held.serves && held.stale,
            "a stale failover verdict holds (last known status) and is flagged: {held:?}"
        );
        let fresh = endpoint_answer(Some((false, 190_000)), 200_000, age);
        assert!(!fresh.serves && !fresh.stale);
        assert!(
            endpoint_serves(Some((false, 30_000)), 700_000, age),
            "past the hold: no evidence, serve"
        );
    }

    #[test]
    fn a_resumed_verdict_keeps_its_failover_until_the_region_recovers() {
        let mut v = FastVerdict::new(3, 2, 2).resuming(false);
        assert!(!v.serves());
        assert_eq!(v.round(&OK), None);
        assert_eq!(v.round(&OK), Some(true));
    }
}
