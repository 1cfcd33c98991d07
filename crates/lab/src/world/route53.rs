//! Route 53's health checks and failover records, by the rules AWS documents for them (each
//! rule below quotes its page; docs/LAB.md, "The AWS behaviours the failover relies on", lists
//! them with the tests that pin them):
//!
//! - Endpoint checks are made by **health checkers in several locations**, each on its own
//!   schedule ("health checkers in different data centers don't coordinate with one another"),
//!   each changing its own view after `FailureThreshold` results in a row; "If more than 18% of
//!   health checkers report that an endpoint is healthy, Route 53 considers it healthy"
//!   ("How Amazon Route 53 determines whether a health check is healthy").
//! - `HTTPS_STR_MATCH`: a TCP connection, then "an HTTP status code of 2xx or 3xx", then the
//!   search string "entirely in the first 5,120 bytes of the response body"; `TCP`: a
//!   connection, nothing more (same page).
//! - `CLOUDWATCH_METRIC`: the alarm's data; with too little data, `InsufficientDataHealthStatus`
//!   decides: healthy, unhealthy or the last known status (same page).
//! - `CALCULATED`: "Route 53 adds up the number of child health checks that are considered to
//!   be healthy" and compares it with `HealthThreshold` (same page).
//! - `Inverted` turns healthy into unhealthy and back ("Values that you specify when you create
//!   or update health checks"); "Route 53 considers a new health check to be healthy until
//!   there's enough data ... If you chose the option to invert the health check status, Route
//!   53 considers a new health check to be unhealthy until there's enough data".
//! - Failover records: the primary when it is healthy; the secondary when the primary is
//!   unhealthy and the secondary healthy; "If Route 53 considers both the primary and secondary
//!   records unhealthy, Route 53 returns the primary record"; a secondary record without a
//!   health check is answered whenever the primary is unhealthy ("How Amazon Route 53 chooses
//!   records when health checking is configured").
//!
//! What the lab assumes where AWS publishes nothing: one checker per location of the default
//! list (eight), every checker outside both of the deployment's Regions (none fails with
//! them), and the checkers' schedules evenly staggered over the interval.

use crate::world::health::{Alarm, AlarmState};
use crate::world::region_id::RegionId;
use std::sync::Arc;

/// The default checker locations ("If you don't specify any regions, Route 53 health checkers
/// in all of the regions listed under Valid Values check your endpoint": HealthCheckConfig,
/// `Regions`): one checker each in the lab.
pub const CHECKER_LOCATIONS: [&str; 8] = [
    "us-east-1",
    "us-west-1",
    "us-west-2",
    "eu-west-1",
    "ap-southeast-1",
    "ap-southeast-2",
    "ap-northeast-1",
    "sa-east-1",
];

/// wsdr's PRIMARY record check: healthy while at least this many of its two views say serve
/// (template.yaml, `PrimaryHealthCheck`'s `HealthThreshold`).
pub const PRIMARY_VIEWS_NEEDED: usize = 1;

/// Route 53's threshold: healthy while more than this share of the checkers that report say so.
pub const HEALTHY_SHARE: f64 = 0.18;

/// How much of a response body a string-match check searches.
pub const SEARCHED_BODY_BYTES: usize = 5_120;

/// What a function URL's resource policy grants the caller (template.yaml: for `AuthType
/// NONE`, SAM's function URL adds both to `*`). "Starting in October 2025, new function URLs
/// will require both lambda:InvokeFunctionUrl and lambda:InvokeFunction permissions"
/// (Lambda, "Control access to Lambda function URLs"): with either missing, every request is
/// refused with 403.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct UrlPermissions {
    pub invoke_function_url: bool,
    pub invoke_function: bool,
}

impl UrlPermissions {
    /// What wsdr's template grants (both actions).
    pub const BOTH: UrlPermissions = UrlPermissions {
        invoke_function_url: true,
        invoke_function: true,
    };

    /// `lambda:InvokeFunctionUrl` alone: what the health distribution had before.
    pub const URL_ONLY: UrlPermissions = UrlPermissions {
        invoke_function_url: true,
        invoke_function: false,
    };

    pub fn admits_anyone(self) -> bool {
        self.invoke_function_url && self.invoke_function
    }
}

/// What one checker's request got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// No TCP connection within the check's limit (4 s for HTTPS, 10 s for TCP), or no
    /// status or body in time: the Region, or the front, did not answer.
    NoAnswer,
    /// A TCP connection (what a `TCP` check asks).
    Connected,
    /// An HTTP answer.
    Http { status: u16, body: String },
}

/// Where an endpoint check's requests go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A Region's health function URL, `path` on it.
    Function {
        region: RegionId,
        path: &'static str,
    },
    /// A Region's API endpoint (its custom domain's Regional target), port 443.
    Api { region: RegionId },
    /// The legacy health front (a CloudFront distribution in front of the secondary's
    /// health function): `path` on it, through the checker's edge.
    Front { path: &'static str },
}

/// `InsufficientDataHealthStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsufficientData {
    Healthy,
    Unhealthy,
    LastKnownStatus,
}

/// One health check's configuration.
#[derive(Debug, Clone)]
pub enum CheckKind {
    /// `HTTPS` (no search string) or `HTTPS_STR_MATCH`.
    Https {
        target: Target,
        search: Option<&'static str>,
        failure_threshold: u32,
    },
    /// `TCP`.
    Tcp {
        target: Target,
        failure_threshold: u32,
    },
    /// `CLOUDWATCH_METRIC` on an alarm.
    Alarm {
        alarm: Arc<Alarm>,
        insufficient: InsufficientData,
    },
    /// `CALCULATED` over earlier checks of the same set.
    Calculated {
        children: Vec<CheckId>,
        threshold: usize,
    },
}

/// A check's index in its [`HealthChecks`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CheckId(usize);

/// A health check: its name (as the template names it), configuration and `Inverted`.
#[derive(Debug, Clone)]
pub struct CheckSpec {
    pub name: &'static str,
    pub kind: CheckKind,
    pub inverted: bool,
}

/// One checker's view of one endpoint: nothing yet, or its status and how many results in a
/// row have disagreed with it.
#[derive(Debug, Clone, Copy, Default)]
struct CheckerView {
    status: Option<bool>,
    streak: u32,
}

impl CheckerView {
    fn record(&mut self, ok: bool, threshold: u32) {
        match self.status {
            // A checker's first results: its status once `threshold` agree (enough data).
            None => {
                self.streak += 1;
                if self.streak >= threshold.max(1) {
                    self.status = Some(ok);
                    self.streak = 0;
                }
            }
            Some(status) if status == ok => self.streak = 0,
            Some(_) => {
                self.streak += 1;
                if self.streak >= threshold.max(1) {
                    self.status = Some(ok);
                    self.streak = 0;
                }
            }
        }
    }
}

/// A set of health checks and what the checkers have seen of them.
#[derive(Debug)]
pub struct HealthChecks {
    specs: Vec<CheckSpec>,
    /// Per check, per checker (endpoint checks only).
    views: Vec<Vec<CheckerView>>,
    /// Per check: an alarm check's last status (for `LastKnownStatus`).
    last_known: Vec<Option<bool>>,
}

impl Default for HealthChecks {
    fn default() -> Self {
        Self::new()
    }
}

impl HealthChecks {
    pub fn new() -> Self {
        Self {
            specs: Vec::new(),
            views: Vec::new(),
            last_known: Vec::new(),
        }
    }

    /// Add a check; a calculated check names only checks added before it, and is not a child
    /// of another calculated check ("You can't configure a calculated health check to monitor
    /// the health of other calculated health checks").
    pub fn add(&mut self, spec: CheckSpec) -> anyhow::Result<CheckId> {
        if let CheckKind::Calculated { children, .. } = &spec.kind {
            for child in children {
                let known = self.specs.get(child.0).ok_or_else(|| {
                    anyhow::anyhow!("{}: child {} is not in the set", spec.name, child.0)
                })?;
                anyhow::ensure!(
                    !matches!(known.kind, CheckKind::Calculated { .. }),
                    "{}: a calculated check cannot monitor another calculated check ({})",
                    spec.name,
                    known.name
                );
            }
        }
        self.specs.push(spec);
        self.views
            .push(vec![CheckerView::default(); CHECKER_LOCATIONS.len()]);
        self.last_known.push(None);
        Ok(CheckId(self.specs.len() - 1))
    }

    pub fn spec(&self, id: CheckId) -> &CheckSpec {
        &self.specs[id.0]
    }

    /// Every endpoint check's name and health now (what `GetHealthCheckStatus` reports:
    /// it answers for endpoint checks, not calculated ones).
    pub fn endpoint_statuses(&mut self) -> Vec<(&'static str, bool)> {
        let ids: Vec<CheckId> = self.endpoint_checks().map(|(id, _)| id).collect();
        ids.into_iter()
            .map(|id| (self.specs[id.0].name, self.healthy(id)))
            .collect()
    }

    /// Every endpoint check and where its requests go.
    pub fn endpoint_checks(&self) -> impl Iterator<Item = (CheckId, &Target)> + '_ {
        self.specs
            .iter()
            .enumerate()
            .filter_map(|(i, spec)| match &spec.kind {
                CheckKind::Https { target, .. } | CheckKind::Tcp { target, .. } => {
                    Some((CheckId(i), target))
                }
                _ => None,
            })
    }

    /// Checker `checker`'s request to endpoint check `id` got `reply`.
    pub fn record(&mut self, id: CheckId, checker: usize, reply: &Reply) {
        let (ok, threshold) = match &self.specs[id.0].kind {
            CheckKind::Https {
                search,
                failure_threshold,
                ..
            } => (https_ok(reply, *search), *failure_threshold),
            CheckKind::Tcp {
                failure_threshold, ..
            } => (
                matches!(reply, Reply::Connected | Reply::Http { .. }),
                *failure_threshold,
            ),
            _ => return,
        };
        if let Some(view) = self.views[id.0].get_mut(checker) {
            view.record(ok, threshold);
        }
    }

    /// The check's status now (inversion applied).
    pub fn healthy(&mut self, id: CheckId) -> bool {
        let spec = self.specs[id.0].clone();
        let status = match &spec.kind {
            CheckKind::Https { .. } | CheckKind::Tcp { .. } => {
                let reported: Vec<bool> =
                    self.views[id.0].iter().filter_map(|v| v.status).collect();
                if reported.is_empty() {
                    // A new check is healthy (an inverted one unhealthy) until there is data.
                    None
                } else {
                    let healthy = reported.iter().filter(|h| **h).count();
                    Some(healthy as f64 > HEALTHY_SHARE * reported.len() as f64)
                }
            }
            CheckKind::Alarm {
                alarm,
                insufficient,
            } => {
                let status = match alarm.state() {
                    AlarmState::Ok => Some(true),
                    AlarmState::Alarm => Some(false),
                    // A check whose alarm never had data is new: healthy until there is
                    // enough data (see the module's rules). After that, its setting.
                    AlarmState::InsufficientData => self.last_known[id.0].and(match insufficient {
                        InsufficientData::Healthy => Some(true),
                        InsufficientData::Unhealthy => Some(false),
                        InsufficientData::LastKnownStatus => self.last_known[id.0],
                    }),
                };
                if status.is_some() {
                    self.last_known[id.0] = status;
                }
                status
            }
            CheckKind::Calculated {
                children,
                threshold,
            } => {
                let healthy = children.iter().filter(|c| self.healthy(**c)).count();
                Some(healthy >= *threshold)
            }
        };
        match status {
            Some(healthy) => healthy != spec.inverted,
            None => !spec.inverted,
        }
    }
}

/// Whether one checker's `HTTPS` or `HTTPS_STR_MATCH` request passed.
fn https_ok(reply: &Reply, search: Option<&str>) -> bool {
    match reply {
        Reply::Http { status, body } if (200..400).contains(status) => match search {
            None => true,
            Some(search) => {
                let searched = &body.as_bytes()[..body.len().min(SEARCHED_BODY_BYTES)];
                searched
                    .windows(search.len().max(1))
                    .any(|w| w == search.as_bytes())
            }
        },
        _ => false,
    }
}

/// The failover record pair: each record's health check, or none.
#[derive(Debug, Clone, Copy)]
pub struct Records {
    pub primary: Option<CheckId>,
    pub secondary: Option<CheckId>,
}

impl Records {
    /// Each record's health (a record without a check is always healthy).
    pub fn health(&self, checks: &mut HealthChecks) -> (bool, bool) {
        let mut of = |check: Option<CheckId>| check.is_none_or(|c| checks.healthy(c));
        (of(self.primary), of(self.secondary))
    }
}

/// What Route 53 answers for a failover pair from its records' health.
pub fn failover_answer(primary_healthy: bool, secondary_healthy: bool) -> RegionId {
    if primary_healthy || !secondary_healthy {
        RegionId::Primary
    } else {
        RegionId::Secondary
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::health::{AlarmConfig, MetricKind, MetricsStore, MissingData};

    fn http(status: u16, body: &str) -> Reply {
        Reply::Http {
            status,
            body: body.to_owned(),
        }
    }

    fn str_match(set: &mut HealthChecks, inverted: bool) -> CheckId {
        set.add(CheckSpec {
            name: "verdict",
            kind: CheckKind::Https {
                target: Target::Function {
                    region: RegionId::Secondary,
                    path: "/primary",
                },
                search: Some("verdict=serve"),
                failure_threshold: 1,
            },
            inverted,
        })
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn all_checkers(set: &mut HealthChecks, id: CheckId, reply: &Reply) {
        for checker in 0..CHECKER_LOCATIONS.len() {
            set.record(id, checker, reply);
        }
    }

    #[test]
    fn a_new_check_is_healthy_and_a_new_inverted_one_unhealthy_until_there_is_data() {
        let mut set = HealthChecks::new();
        let plain = str_match(&mut set, false);
        let inverted = str_match(&mut set, true);
        assert!(set.healthy(plain));
        assert!(!set.healthy(inverted));
        all_checkers(&mut set, plain, &http(200, "verdict=fail-over"));
        all_checkers(&mut set, inverted, &http(200, "verdict=fail-over"));
        assert!(!set.healthy(plain));
        assert!(set.healthy(inverted));
    }

    #[test]
    fn a_string_match_check_needs_a_2xx_or_3xx_and_the_string_in_the_first_5120_bytes() {
        let serve = Some("verdict=serve");
        assert!(https_ok(&http(200, "verdict=serve\n"), serve));
        assert!(https_ok(&http(302, "verdict=serve"), serve));
        assert!(!https_ok(&http(503, "verdict=serve"), serve), "a 5xx fails");
        assert!(!https_ok(&http(429, "verdict=serve"), serve), "a 4xx fails");
        assert!(!https_ok(&http(200, "verdict=fail-over"), serve));
        assert!(!https_ok(&Reply::NoAnswer, serve));
        let late = format!("{}verdict=serve", " ".repeat(5_110));
        assert!(
            !https_ok(&http(200, &late), serve),
            "not entirely within 5,120 bytes"
        );
        let early = format!("{}verdict=serve", " ".repeat(5_107));
        assert!(https_ok(&http(200, &early), serve));
        assert!(
            https_ok(&http(204, ""), None),
            "no search string: the status alone"
        );
    }

    #[test]
    fn an_endpoint_is_healthy_while_more_than_18_percent_of_checkers_say_so() {
        let mut set = HealthChecks::new();
        let id = str_match(&mut set, false);
        all_checkers(&mut set, id, &http(200, "verdict=fail-over"));
        // 1 of 8 is 12.5%: unhealthy; 2 of 8 is 25%: healthy.
        set.record(id, 0, &http(200, "verdict=serve"));
        assert!(!set.healthy(id));
        set.record(id, 1, &http(200, "verdict=serve"));
        assert!(set.healthy(id));
    }

    #[test]
    fn each_checker_changes_its_view_after_the_failure_threshold_in_a_row() {
        let mut set = HealthChecks::new();
        let id = set
            .add(CheckSpec {
                name: "tcp",
                kind: CheckKind::Tcp {
                    target: Target::Api {
                        region: RegionId::Secondary,
                    },
                    failure_threshold: 3,
                },
                inverted: false,
            })
            .unwrap_or_else(|e| panic!("{e}"));
        for _ in 0..3 {
            all_checkers(&mut set, id, &Reply::Connected);
        }
        assert!(set.healthy(id));
        all_checkers(&mut set, id, &Reply::NoAnswer);
        all_checkers(&mut set, id, &Reply::NoAnswer);
        assert!(set.healthy(id), "two failures of three");
        all_checkers(&mut set, id, &Reply::Connected);
        all_checkers(&mut set, id, &Reply::NoAnswer);
        all_checkers(&mut set, id, &Reply::NoAnswer);
        assert!(set.healthy(id), "a success starts the count again");
        all_checkers(&mut set, id, &Reply::NoAnswer);
        assert!(!set.healthy(id));
    }

    #[test]
    fn a_calculated_check_counts_its_healthy_children_and_never_nests() {
        let mut set = HealthChecks::new();
        let a = str_match(&mut set, false);
        let b = str_match(&mut set, false);
        let or = set
            .add(CheckSpec {
                name: "or",
                kind: CheckKind::Calculated {
                    children: vec![a, b],
                    threshold: 1,
                },
                inverted: false,
            })
            .unwrap_or_else(|e| panic!("{e}"));
        all_checkers(&mut set, a, &Reply::NoAnswer);
        assert!(set.healthy(or), "one of two");
        all_checkers(&mut set, b, &http(200, "verdict=stale"));
        assert!(!set.healthy(or));
        let nested = set.add(CheckSpec {
            name: "nested",
            kind: CheckKind::Calculated {
                children: vec![or],
                threshold: 1,
            },
            inverted: false,
        });
        assert!(nested.is_err());
    }

    #[test]
    fn an_alarm_check_without_data_follows_its_insufficient_data_setting() {
        let alarm = Arc::new(Alarm::new(
            MetricKind::Verdict,
            "us-west-2",
            "api",
            AlarmConfig {
                period: std::time::Duration::from_secs(60),
                datapoints_to_alarm: 1,
                evaluation_periods: 1,
                missing: MissingData::Missing,
            },
        ));
        let metrics = MetricsStore::new(0, std::time::Duration::from_secs(60));
        let mut set = HealthChecks::new();
        let check = |insufficient| CheckSpec {
            name: "alarm",
            kind: CheckKind::Alarm {
                alarm: alarm.clone(),
                insufficient,
            },
            inverted: false,
        };
        let healthy = set
            .add(check(InsufficientData::Healthy))
            .unwrap_or_else(|e| panic!("{e}"));
        let unhealthy = set
            .add(check(InsufficientData::Unhealthy))
            .unwrap_or_else(|e| panic!("{e}"));
        let last = set
            .add(check(InsufficientData::LastKnownStatus))
            .unwrap_or_else(|e| panic!("{e}"));
        for id in [healthy, unhealthy, last] {
            assert!(set.healthy(id), "new: healthy until there is data");
        }
        metrics.put(MetricKind::Verdict, "us-west-2", "api", false, 10);
        alarm.evaluate(&metrics, 0, 60_000);
        for id in [healthy, unhealthy, last] {
            assert!(!set.healthy(id), "the alarm fired");
        }
        // The data stops: the last known status stays, the others follow their setting.
        alarm.evaluate(&metrics, 60_000, 120_000);
        assert!(!set.healthy(last), "last known: unhealthy");
        assert!(set.healthy(healthy));
        assert!(!set.healthy(unhealthy));
    }

    #[test]
    fn route_53_answers_the_primary_unless_only_the_secondary_is_healthy() {
        use RegionId::{Primary, Secondary};
        assert_eq!(failover_answer(true, true), Primary);
        assert_eq!(failover_answer(true, false), Primary);
        assert_eq!(failover_answer(false, true), Secondary);
        assert_eq!(failover_answer(false, false), Primary, "both unhealthy");
        let mut set = HealthChecks::new();
        let p = str_match(&mut set, false);
        all_checkers(&mut set, p, &Reply::NoAnswer);
        let without_secondary_check = Records {
            primary: Some(p),
            secondary: None,
        };
        assert_eq!(without_secondary_check.health(&mut set), (false, true));
    }

    #[test]
    fn a_function_url_answers_only_with_both_permissions() {
        assert!(UrlPermissions::BOTH.admits_anyone());
        assert!(!UrlPermissions::URL_ONLY.admits_anyone());
    }
}
