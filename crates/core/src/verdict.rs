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
/// a one-minute alarm: probe rounds every few seconds from one vantage point (a Region's own
/// canary probing it from inside, or the watcher in the judge probing the primary from
/// outside; a round without a result counts as failed). Each vantage point decides its own
/// verdict, written in its own Region only; Route 53 combines them (docs/DEPLOY.md, "Who
/// decides"), so that no view has to cross the path between the Regions to be counted.
///
/// Fail over when every vantage point given to [`FastVerdict::new`] (one, as deployed) has
/// failed `fail_after` rounds in a row. Serve again only when each has succeeded
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

/// Who wrote a fast verdict, and so where it lives: every verdict item has exactly one writer
/// Region (the rule every item written in two Regions must keep, docs/DATA_MODEL.md), and is
/// read in that Region only, so no clock but the writer Region's ever judges its age.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictSource {
    /// The Region's own canary, probing it from inside: written in that Region
    /// (`HEALTH#<apiId>`), served there as `/self`.
    Inside,
    /// The watcher in the judge (the secondary), probing the primary from outside it:
    /// written in the judge (`JUDGE#<apiId>`), served there as `/primary`.
    Judge,
    /// A rehearsal's forced stand-in for [`VerdictSource::Inside`] (`wsdr rehearse`): written
    /// in the judged Region, served there as `/rehearsal/self`.
    RehearsalInside,
    /// A rehearsal's forced stand-in for [`VerdictSource::Judge`]: written in the judge,
    /// served there as `/rehearsal/primary`.
    RehearsalJudge,
}

impl VerdictSource {
    /// The partition-key prefix of this source's records (`dynamodb:LeadingKeys` scopes each
    /// writer's role to its own prefix: template.yaml).
    pub fn key_prefix(self) -> &'static str {
        match self {
            VerdictSource::Inside => "HEALTH#",
            VerdictSource::Judge => "JUDGE#",
            VerdictSource::RehearsalInside => "REHEARSAL-SELF#",
            VerdictSource::RehearsalJudge => "REHEARSAL-JUDGE#",
        }
    }
}

/// The string Route 53's `HTTPS_STR_MATCH` checks search for (`SearchString`): only a fresh
/// "serve" answer contains it.
pub const SEARCH_STRING: &str = "verdict=serve";

/// A verdict older than this (the writer silent: the canary's minute has a 10 s gap between
/// two invocations' rounds, and EventBridge may start one late) is no evidence that the
/// Region serves.
pub const STALE_AFTER_MS: u64 = 60_000;

/// What a health function answers about one verdict. Every answer is HTTP 200 with a body
/// that says which (no cache, retry or "last known" rule anywhere between the function and
/// Route 53 can turn one into another: docs/DEPLOY.md, "Who decides"); only [`Serve`]'s
/// body contains [`SEARCH_STRING`].
///
/// [`Serve`]: VerdictAnswer::Serve
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum VerdictAnswer {
    /// A verdict younger than [`STALE_AFTER_MS`] that says serve.
    Serve,
    /// A verdict younger than [`STALE_AFTER_MS`] that says fail over.
    FailOver,
    /// The latest verdict is older than [`STALE_AFTER_MS`]: its writer is silent. Not
    /// evidence for the Region, whatever it said (the other view decides: docs/DEPLOY.md).
    Stale,
    /// No verdict was ever written here.
    Missing,
    /// The table could not be read.
    Unreadable,
}

impl VerdictAnswer {
    /// The body the function sends (HTTP 200 in every case).
    pub fn body(self) -> &'static str {
        match self {
            VerdictAnswer::Serve => "verdict=serve\n",
            VerdictAnswer::FailOver => "verdict=fail-over\n",
            VerdictAnswer::Stale => "verdict=stale (its writer is silent)\n",
            VerdictAnswer::Missing => "verdict=none (never written here)\n",
            VerdictAnswer::Unreadable => "verdict=unreadable (the table failed)\n",
        }
    }

    /// Whether a Route 53 string-match check finds [`SEARCH_STRING`] in the body.
    pub fn serves(self) -> bool {
        self.body().contains(SEARCH_STRING)
    }

    /// The answer from the latest verdict read (`Err(())`: unreadable), recorded at its
    /// `at_ms` and judged at `now_ms` by the same Region's clock.
    pub fn of(verdict: Result<Option<(bool, u64)>, ()>, now_ms: u64, stale_after_ms: u64) -> Self {
        match verdict {
            Err(()) => VerdictAnswer::Unreadable,
            Ok(None) => VerdictAnswer::Missing,
            Ok(Some((_, at_ms))) if now_ms.saturating_sub(at_ms) > stale_after_ms => {
                VerdictAnswer::Stale
            }
            Ok(Some((true, _))) => VerdictAnswer::Serve,
            Ok(Some((false, _))) => VerdictAnswer::FailOver,
        }
    }
}

/// Whose verdict a health function path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judged {
    /// The function's own Region (its `API_ID`).
    ThisRegion,
    /// The primary (`PRIMARY_API_ID`: the judge only).
    Primary,
}

/// What a request to a health function asks for: one verdict, or nothing it serves. The
/// function's one routing table, shared by the Lambda and the lab (docs/DEPLOY.md, "Who
/// decides").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthRoute {
    /// Read `source`'s verdict on `judged`'s Region and answer it.
    Verdict {
        judged: Judged,
        source: VerdictSource,
    },
    /// 404: not a path of the function (or `/primary` on a function that judges no primary).
    NotFound,
    /// 405: `GET` and `HEAD` only.
    MethodNotAllowed,
}

impl HealthRoute {
    /// | path | answers |
    /// |---|---|
    /// | `/self` | this Region's own canary's verdict on it (the inside view) |
    /// | `/primary` | the judge's verdict on the primary (the outside view; the judge only) |
    /// | `/rehearsal/self`, `/rehearsal/primary` | the same two, forced by `wsdr rehearse` |
    pub fn of(method: &str, path: &str, judges_primary: bool) -> Self {
        if method != "GET" && method != "HEAD" {
            return HealthRoute::MethodNotAllowed;
        }
        let (judged, source) = match path {
            "/self" => (Judged::ThisRegion, VerdictSource::Inside),
            "/primary" => (Judged::Primary, VerdictSource::Judge),
            "/rehearsal/self" => (Judged::ThisRegion, VerdictSource::RehearsalInside),
            "/rehearsal/primary" => (Judged::Primary, VerdictSource::RehearsalJudge),
            _ => return HealthRoute::NotFound,
        };
        if judged == Judged::Primary && !judges_primary {
            return HealthRoute::NotFound;
        }
        HealthRoute::Verdict { judged, source }
    }
}

/// The verdict a restarted writer starts from: the one it recorded last, whatever its age
/// (a cold start must not write "serve" over a failover its previous instance decided; the
/// next rounds decide again within a minute), serve when it never wrote one.
pub fn resumed_verdict(recorded: Option<(bool, u64)>) -> bool {
    recorded.is_none_or(|(serve, _)| serve)
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
    fn only_a_fresh_serve_verdict_answers_serve() {
        let now = 200_000;
        let answer = |v| VerdictAnswer::of(v, now, STALE_AFTER_MS);
        assert_eq!(answer(Ok(Some((true, 190_000)))), VerdictAnswer::Serve);
        assert_eq!(answer(Ok(Some((false, 190_000)))), VerdictAnswer::FailOver);
        assert_eq!(
            answer(Ok(Some((true, 140_000)))),
            VerdictAnswer::Serve,
            "60 s old"
        );
        assert_eq!(
            answer(Ok(Some((true, 139_999)))),
            VerdictAnswer::Stale,
            "a silent writer's serve is no evidence"
        );
        assert_eq!(answer(Ok(Some((false, 1)))), VerdictAnswer::Stale);
        assert_eq!(answer(Ok(None)), VerdictAnswer::Missing);
        assert_eq!(answer(Err(())), VerdictAnswer::Unreadable);
        // A writer whose clock runs ahead of the reader's (the same Region's, by design):
        // never stale, never negative.
        assert_eq!(answer(Ok(Some((true, 260_000)))), VerdictAnswer::Serve);
    }

    #[test]
    fn the_search_string_is_in_the_serve_body_alone() {
        let all = [
            VerdictAnswer::Serve,
            VerdictAnswer::FailOver,
            VerdictAnswer::Stale,
            VerdictAnswer::Missing,
            VerdictAnswer::Unreadable,
        ];
        for answer in all {
            assert_eq!(
                answer.body().contains(SEARCH_STRING),
                answer == VerdictAnswer::Serve,
                "{answer:?}"
            );
            // Route 53 searches the first 5,120 bytes of the body.
            assert!(answer.body().len() < 5_120);
        }
    }

    #[test]
    fn each_path_names_one_verdict_and_the_primary_only_on_the_judge() {
        use HealthRoute::*;
        assert_eq!(
            HealthRoute::of("GET", "/self", false),
            Verdict {
                judged: Judged::ThisRegion,
                source: VerdictSource::Inside
            }
        );
        assert_eq!(
            HealthRoute::of("HEAD", "/primary", true),
            Verdict {
                judged: Judged::Primary,
                source: VerdictSource::Judge
            }
        );
        assert_eq!(HealthRoute::of("GET", "/primary", false), NotFound);
        assert_eq!(
            HealthRoute::of("GET", "/rehearsal/primary", true),
            Verdict {
                judged: Judged::Primary,
                source: VerdictSource::RehearsalJudge
            }
        );
        for path in ["/", "/secondary", "/self/", "/x1", "/primary?x=1", ""] {
            assert_eq!(HealthRoute::of("GET", path, true), NotFound, "{path:?}");
        }
        assert_eq!(HealthRoute::of("POST", "/self", true), MethodNotAllowed);
    }

    #[test]
    fn a_restart_resumes_the_recorded_verdict_of_any_age() {
        assert!(resumed_verdict(None));
        assert!(!resumed_verdict(Some((false, 0))));
        assert!(resumed_verdict(Some((true, 0))));
    }

    #[test]
    fn a_resumed_verdict_keeps_its_failover_until_the_region_recovers() {
        let mut v = FastVerdict::new(3, 2, 2).resuming(false);
        assert!(!v.serves());
        assert_eq!(v.round(&OK), None);
        assert_eq!(v.round(&OK), Some(true));
    }

    #[test]
    fn each_source_writes_under_its_own_prefix_and_only_serve_passes_the_string_match() {
        let prefixes = [
            VerdictSource::Inside,
            VerdictSource::Judge,
            VerdictSource::RehearsalInside,
            VerdictSource::RehearsalJudge,
        ]
        .map(VerdictSource::key_prefix);
        assert_eq!(
            prefixes,
            ["HEALTH#", "JUDGE#", "REHEARSAL-SELF#", "REHEARSAL-JUDGE#"]
        );
        assert!(VerdictAnswer::Serve.serves());
        for other in [
            VerdictAnswer::FailOver,
            VerdictAnswer::Stale,
            VerdictAnswer::Missing,
            VerdictAnswer::Unreadable,
        ] {
            assert!(!other.serves(), "{other:?}");
        }
    }

    #[test]
    fn the_health_functions_routes_name_a_view_and_its_source() {
        let route = |path: &str, judge: bool| HealthRoute::of("GET", path, judge);
        assert_eq!(
            route("/rehearsal/self", false),
            HealthRoute::Verdict {
                judged: Judged::ThisRegion,
                source: VerdictSource::RehearsalInside
            }
        );
        assert_eq!(
            route("/rehearsal/primary", true),
            HealthRoute::Verdict {
                judged: Judged::Primary,
                source: VerdictSource::RehearsalJudge
            }
        );
        assert_eq!(route("/rehearsal/primary", false), HealthRoute::NotFound);
        assert_eq!(
            HealthRoute::of("POST", "/self", true),
            HealthRoute::MethodNotAllowed
        );
    }
}
