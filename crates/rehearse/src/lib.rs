//! `wsdr rehearse`: the failover decision proves itself in a deployment, without moving a
//! single user (docs/DEPLOY.md, "Rehearse").
//!
//! 1. **Pre-flight.** Every endpoint check the failover records need reports healthy as Route
//!    53 counts it (more than 18% of its checkers see success): a deployment whose checks
//!    cannot see the health functions can never fail over, and is not green.
//! 2. **Arm.** The rehearsal pair (template.yaml's `Rehearsal*`: a test name whose PRIMARY
//!    record carries the same calculated check over the same two views, read from the health
//!    functions' `/rehearsal/*` paths, and whose SECONDARY record carries the real SECONDARY
//!    check) is set to serve: both rehearsal verdicts written `serve`, until the test name
//!    answers the primary.
//! 3. **Fail over.** Both rehearsal verdicts turn to fail over: detection (the PRIMARY
//!    record's checks unhealthy) and flip (the test name answering the secondary, as a
//!    resolver sees it) are timed.
//! 4. **Back.** Both serve again: detection and flip back are timed.
//!
//! The verdicts are rewritten every [`Settings::refresh`] while the rehearsal runs (a verdict
//! older than 60 s is no evidence); after it nobody rewrites them, they go stale, and the test
//! name's PRIMARY record turns unhealthy on its own: the test name rests on the secondary. No
//! real record, verdict or connection is touched.
//!
//! The same engine runs against the lab (its control API) and against AWS ([`aws`]: DynamoDB
//! writes in each Region, Route 53's `GetHealthCheckStatus`, the system's resolver).

pub mod aws;
pub mod route53;

use async_trait::async_trait;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// Errors of a rehearsal's parts (a rehearsal that ran and failed is a [`Report`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting missing or malformed.
    #[error("invalid setting: {0}")]
    Setting(String),
    /// A peer (the lab, DynamoDB, Route 53, DNS) did not answer as it should.
    #[error("{0}")]
    Peer(String),
    #[error(transparent)]
    Store(#[from] wsdr_core::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The endpoint checks the real failover records need, by the template's names: each must
/// report healthy before anything is rehearsed.
pub const REQUIRED_CHECKS: [&str; 3] = [
    "PrimaryVerdictCheck",
    "PrimarySelfCheck",
    "SecondaryHealthCheck",
];

/// Which view of the primary a rehearsal verdict stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum View {
    /// The primary's own (`REHEARSAL-SELF#<apiId>`, written in the primary's Region).
    #[serde(rename = "self")]
    Inside,
    /// The judge's (`REHEARSAL-JUDGE#<apiId>`, written in the secondary's Region).
    Judge,
}

impl View {
    pub const BOTH: [View; 2] = [View::Inside, View::Judge];

    pub fn source(self) -> wsdr_core::VerdictSource {
        match self {
            View::Inside => wsdr_core::VerdictSource::RehearsalInside,
            View::Judge => wsdr_core::VerdictSource::RehearsalJudge,
        }
    }
}

/// Where the test name points now, as a resolver answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Answer {
    Primary,
    Secondary,
    /// Neither target (no answer, or an address of neither Region).
    Neither,
}

/// The rehearsal pair as seen now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    /// The test name's PRIMARY record healthy (either rehearsal view's check healthy).
    pub primary_healthy: bool,
    pub answer: Answer,
}

/// A deployment to rehearse in.
#[async_trait]
pub trait Target: Send + Sync {
    /// Every endpoint check's health by the template's name, as Route 53 reports it.
    async fn check_statuses(&self) -> Result<BTreeMap<String, bool>>;
    /// Write one rehearsal verdict in its Region.
    async fn write(&self, view: View, serve: bool) -> Result<()>;
    /// The rehearsal pair now.
    async fn observe(&self) -> Result<Observation>;
}

/// How a rehearsal runs. Durations are AWS time; `aws_second` is how long one lasts on the
/// target's clock (1 s against AWS; 1/scale against a time-scaled lab).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    pub aws_second: Duration,
    /// How often the rehearsal verdicts are rewritten (they are stale after 60 s).
    pub refresh: Duration,
    /// How often the pair is looked at.
    pub poll: Duration,
    /// How long each phase may take before the rehearsal fails.
    pub phase_timeout: Duration,
    /// How long the pair is held as it is after each move, so that every checker has caught
    /// up before the next change is timed (a change timed right after the last one would meet
    /// checkers still on their way, and time less than a real failure takes).
    pub settle: Duration,
    /// Pre-flight and one write of each verdict, and nothing awaited.
    pub dry_run: bool,
}

impl Settings {
    /// Against AWS: one AWS second is a second; the pair looked at every 5 s (each look is two
    /// `GetHealthCheckStatus` calls and a lookup), each phase given ten minutes.
    pub fn aws() -> Self {
        Self {
            aws_second: Duration::from_secs(1),
            refresh: Duration::from_secs(10),
            poll: Duration::from_secs(5),
            phase_timeout: Duration::from_secs(600),
            settle: Duration::from_secs(60),
            dry_run: false,
        }
    }

    fn lasts(&self, aws: Duration) -> Duration {
        self.aws_second.mul_f64(aws.as_secs_f64())
    }
}

/// One timed phase: from the verdicts' change, AWS seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Phase {
    /// The PRIMARY record's checks turned (unhealthy, or healthy again).
    pub detection_s: Option<f64>,
    /// The test name answered the other Region, as a resolver sees it.
    pub flip_s: Option<f64>,
}

/// What a rehearsal found (`--report`'s JSON).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Report {
    /// Every endpoint check's health at the start, by name.
    pub preflight: BTreeMap<String, bool>,
    pub dry_run: bool,
    /// AWS seconds until the test name answered the primary with both verdicts serving.
    pub armed_s: Option<f64>,
    pub fail_over: Option<Phase>,
    pub fail_back: Option<Phase>,
    /// Why the rehearsal failed, in words an operator can act on; empty: it passed.
    pub failures: Vec<String>,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// Run a rehearsal against `target`.
pub async fn rehearse(target: &dyn Target, settings: &Settings) -> Result<Report> {
    let mut report = Report {
        preflight: target.check_statuses().await?,
        dry_run: settings.dry_run,
        ..Report::default()
    };
    for check in REQUIRED_CHECKS {
        match report.preflight.get(check) {
            Some(true) => {}
            Some(false) => report.failures.push(format!(
                "{check} reports unhealthy: the failover records cannot fail over as deployed (fix it before anything else)"
            )),
            None => report.failures.push(format!(
                "{check} is not deployed (the rehearsal needs endpoint checks: HealthCheckType=endpoint)"
            )),
        }
    }
    if !report.passed() {
        return Ok(report);
    }
    if settings.dry_run {
        for view in View::BOTH {
            target.write(view, true).await?;
        }
        return Ok(report);
    }
    let armed = phase(target, settings, true).await?;
    report.armed_s = armed.flip_s;
    if armed.flip_s.is_none() {
        report.failures.push(
            "the rehearsal pair never answered the primary with both rehearsal verdicts serving"
                .into(),
        );
        return Ok(report);
    }
    hold(target, settings, true).await?;
    let over = phase(target, settings, false).await?;
    report.fail_over = Some(over);
    if over.detection_s.is_none() {
        report.failures.push(
            "the rehearsal PRIMARY record never turned unhealthy after both views said fail over"
                .into(),
        );
    } else if over.flip_s.is_none() {
        report.failures.push(
            "the test name never answered the secondary after its PRIMARY record turned unhealthy"
                .into(),
        );
    }
    hold(target, settings, false).await?;
    let back = phase(target, settings, true).await?;
    report.fail_back = Some(back);
    if back.flip_s.is_none() {
        report.failures.push(
            "the test name never came back to the primary after both views served again".into(),
        );
    }
    Ok(report)
}

/// Keep both verdicts at `serve` for [`Settings::settle`], rewriting them every `refresh`.
async fn hold(target: &dyn Target, settings: &Settings, serve: bool) -> Result<()> {
    let started = tokio::time::Instant::now();
    while started.elapsed() < settings.lasts(settings.settle) {
        for view in View::BOTH {
            target.write(view, serve).await?;
        }
        let left = settings
            .lasts(settings.settle)
            .saturating_sub(started.elapsed());
        tokio::time::sleep(settings.lasts(settings.refresh).min(left)).await;
    }
    Ok(())
}

/// Write both verdicts as `serve` (again every `refresh`) until the PRIMARY record's health
/// and then the answer follow, or the phase times out.
async fn phase(target: &dyn Target, settings: &Settings, serve: bool) -> Result<Phase> {
    let started = tokio::time::Instant::now();
    let mut written: Option<tokio::time::Instant> = None;
    let mut times = Phase::default();
    let wanted = if serve {
        Answer::Primary
    } else {
        Answer::Secondary
    };
    let aws_secs = |at: tokio::time::Instant| {
        at.duration_since(started).as_secs_f64() / settings.aws_second.as_secs_f64()
    };
    loop {
        let now = tokio::time::Instant::now();
        if written.is_none_or(|at| now.duration_since(at) >= settings.lasts(settings.refresh)) {
            for view in View::BOTH {
                target.write(view, serve).await?;
            }
            written = Some(now);
        }
        match target.observe().await {
            Ok(seen) => {
                if times.detection_s.is_none() && seen.primary_healthy == serve {
                    times.detection_s = Some(aws_secs(tokio::time::Instant::now()));
                }
                if times.detection_s.is_some() && seen.answer == wanted {
                    times.flip_s = Some(aws_secs(tokio::time::Instant::now()));
                    return Ok(times);
                }
            }
            // A look that failed is tried again at the next poll (the phase's timeout bounds it).
            Err(error) => tracing::warn!(%error, "rehearsal: looking at the pair failed"),
        }
        if now.duration_since(started) >= settings.lasts(settings.phase_timeout) {
            return Ok(times);
        }
        tokio::time::sleep(settings.lasts(settings.poll)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A deployment whose PRIMARY record follows the verdicts after `detect` and whose name
    /// follows the record after `ttl` (AWS seconds on tokio's paused clock).
    struct Fake {
        statuses: BTreeMap<String, bool>,
        detect: Duration,
        ttl: Duration,
        /// (serve, when it was last changed), per view.
        verdicts: Mutex<BTreeMap<&'static str, (bool, tokio::time::Instant)>>,
        writes: Mutex<usize>,
        /// The record never follows the verdicts (a check that cannot see the function).
        stuck: bool,
    }

    impl Fake {
        fn new(detect: u64, ttl: u64) -> Self {
            Self {
                statuses: REQUIRED_CHECKS
                    .iter()
                    .map(|c| (c.to_string(), true))
                    .collect(),
                detect: Duration::from_secs(detect),
                ttl: Duration::from_secs(ttl),
                verdicts: Mutex::default(),
                writes: Mutex::new(0),
                stuck: false,
            }
        }

        /// Serving (the last change of either view) since when.
        fn serving(&self) -> Option<(bool, tokio::time::Instant)> {
            let verdicts = self.verdicts.lock().unwrap_or_else(|p| p.into_inner());
            let serve = verdicts.values().any(|(serve, _)| *serve);
            verdicts
                .values()
                .map(|(_, at)| *at)
                .max()
                .map(|at| (serve, at))
        }
    }

    #[async_trait]
    impl Target for Fake {
        async fn check_statuses(&self) -> Result<BTreeMap<String, bool>> {
            Ok(self.statuses.clone())
        }
        async fn write(&self, view: View, serve: bool) -> Result<()> {
            *self.writes.lock().unwrap_or_else(|p| p.into_inner()) += 1;
            let key = match view {
                View::Inside => "self",
                View::Judge => "judge",
            };
            let mut verdicts = self.verdicts.lock().unwrap_or_else(|p| p.into_inner());
            let changed = verdicts.get(key).is_none_or(|(old, _)| *old != serve);
            if changed {
                verdicts.insert(key, (serve, tokio::time::Instant::now()));
            }
            Ok(())
        }
        async fn observe(&self) -> Result<Observation> {
            let Some((serve, since)) = self.serving() else {
                return Ok(Observation {
                    primary_healthy: false,
                    answer: Answer::Secondary,
                });
            };
            let elapsed = since.elapsed();
            let healthy = if self.stuck || elapsed < self.detect {
                !serve
            } else {
                serve
            };
            let moved = !self.stuck && elapsed >= self.detect + self.ttl;
            let answer = match (serve, moved) {
                (true, true) | (false, false) => Answer::Primary,
                _ => Answer::Secondary,
            };
            Ok(Observation {
                primary_healthy: healthy,
                answer,
            })
        }
    }

    fn settings() -> Settings {
        Settings {
            poll: Duration::from_secs(1),
            ..Settings::aws()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_deployment_that_follows_its_verdicts_rehearses_with_its_times() {
        let fake = Fake::new(30, 20);
        let report = rehearse(&fake, &settings()).await.unwrap_or_default();
        assert!(report.passed(), "{report:?}");
        let over = report.fail_over.unwrap_or_default();
        assert_eq!(over.detection_s, Some(30.0));
        assert_eq!(over.flip_s, Some(50.0));
        let back = report.fail_back.unwrap_or_default();
        assert_eq!((back.detection_s, back.flip_s), (Some(30.0), Some(50.0)));
        // Rewritten every 10 s while it ran (well within the 60 s stale bound), the two
        // settles' 60 s included.
        assert!(*fake.writes.lock().unwrap_or_else(|p| p.into_inner()) >= 2 * 27);
    }

    #[tokio::test(start_paused = true)]
    async fn a_check_that_reports_unhealthy_fails_the_preflight_and_nothing_is_written() {
        let mut fake = Fake::new(30, 20);
        fake.statuses.insert("PrimarySelfCheck".into(), false);
        fake.statuses.remove("SecondaryHealthCheck");
        let report = rehearse(&fake, &settings()).await.unwrap_or_default();
        assert_eq!(report.failures.len(), 2, "{report:?}");
        assert!(report.failures[0].contains("PrimarySelfCheck reports unhealthy"));
        assert!(report.failures[1].contains("SecondaryHealthCheck is not deployed"));
        assert_eq!(*fake.writes.lock().unwrap_or_else(|p| p.into_inner()), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_record_that_never_follows_fails_the_rehearsal_within_its_timeouts() {
        let mut fake = Fake::new(30, 20);
        fake.stuck = true;
        let report = rehearse(&fake, &settings()).await.unwrap_or_default();
        assert!(!report.passed());
        assert!(
            report.failures[0].contains("never answered the primary"),
            "{report:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_dry_run_checks_and_writes_once_and_awaits_nothing() {
        let fake = Fake::new(30, 20);
        let started = tokio::time::Instant::now();
        let report = rehearse(
            &fake,
            &Settings {
                dry_run: true,
                ..settings()
            },
        )
        .await
        .unwrap_or_default();
        assert!(report.passed() && report.dry_run && report.fail_over.is_none());
        assert_eq!(*fake.writes.lock().unwrap_or_else(|p| p.into_inner()), 2);
        assert_eq!(started.elapsed(), Duration::ZERO);
    }
}
