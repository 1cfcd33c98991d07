//! The drill report: a table for people, JSON for machines, an SVG timeline for both.

use crate::runs::scenario::Scenario;
use crate::world::fast::HealthCheckKind;
use crate::world::scale::TimeScale;
use crate::world::timeline::Entry;
use serde::Serialize;
use std::path::Path;

pub use crate::runs::stats::Percentiles;

/// Everything a drill measured. Field names are part of the documented format
/// (docs/DRILL_REPORT.md).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub scenario: Scenario,
    pub clients: usize,
    pub time_scale: f64,
    /// Clients that restored state in the secondary after the fault.
    pub restored: usize,
    /// Fault -> state restored in the secondary, per client, lab milliseconds.
    pub rto_ms: Percentiles,
    /// The same in AWS-equivalent seconds (lab time x time scale).
    pub rto_aws_s: Percentiles,
    /// Every restored user's RTO, AWS-equivalent seconds, sorted (the chart's curve).
    #[serde(default)]
    pub restores_aws_s: Vec<f64>,
    /// Users served by each Region over time: (AWS-equivalent seconds since the fault, users)
    /// at every change (the chart's bottom panel).
    #[serde(default)]
    pub connections_aws: std::collections::BTreeMap<String, Vec<(f64, usize)>>,
    /// Fault -> alarm in ALARM, lab ms.
    pub detection_ms: Option<f64>,
    /// What moved DNS: `alarm` (the verdict alarm's health check) or `endpoint` (the health
    /// endpoints' checks, from the fast verdict).
    #[serde(default)]
    pub health_check: crate::world::fast::HealthCheckKind,
    /// What decides the failover records: the checks' composition, what the endpoint checks
    /// reach, and whether the health functions' URLs let callers in.
    pub decision_path: crate::world::config::DecisionPath,
    /// What the fail-over orders did, with the fast verdict: emitted, lost, delivered, swept,
    /// each order's moves through the global name, what declined and why, failures and
    /// dead letters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failover_orders: Option<crate::world::orders::OrderStats>,
    /// Both kinds side by side, when the fast path ran (`--health-check endpoint` or
    /// `--fast-path`): each one's detection and health check flip, lab ms from the fault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_checks: Option<HealthCheckTimes>,
    /// The failover records' TTL, AWS seconds.
    #[serde(default)]
    pub dns_ttl_aws_s: f64,
    /// Fault -> the resolver answering the secondary, lab ms.
    pub dns_flip_ms: Option<f64>,
    /// Heal -> the resolver answering the primary again, lab ms.
    pub failback_ms: Option<f64>,
    pub dns_flips_during_fault: usize,
    /// Times DNS went back to the primary while it was still failed (a fault on, no heal
    /// since): a herd over the quota, a silent watcher, a flood. Any fails the drill.
    #[serde(default)]
    pub dns_answers_to_failed_primary: usize,
    /// Acknowledged bids missing from a surviving Region that no lost Region explains (must
    /// be 0).
    pub lost_acknowledged_bids: usize,
    /// Acknowledged bids that a Region lost for good took with it, unreplicated (the measured
    /// RPO in bids; only the `never-returns` scenario has any).
    #[serde(default)]
    pub acknowledged_bids_lost_with_region: usize,
    pub duplicate_bids: usize,
    /// Bids replayed into the other Region before replication had carried them there (both
    /// Regions answered `accepted`; one item after convergence). Informational.
    pub acks_for_a_replayed_bid_in_both_regions: usize,
    pub acknowledged_bids: usize,
    pub recorded_bids: usize,
    /// Both Regions' high bid is the highest recorded bid, and no acknowledged bid is higher.
    pub high_bid_consistent: bool,
    pub converged: bool,
    /// Replication data at risk when the fault hit: items written, not yet replicated.
    pub rpo_items_at_fault: usize,
    pub rpo_oldest_ms_at_fault: f64,
    /// Whether the users had the Regions' own endpoints (client-assisted failover).
    pub client_fallback: bool,
    /// Client disconnects between the fault and the heal: every closed socket, so one user
    /// whose reconnect attempts fail counts once per attempt.
    pub disconnects_during_fault: usize,
    /// Users who lost their connection at least once between the fault and the heal.
    #[serde(default)]
    pub users_disconnected_during_fault: usize,
    /// Restores on the primary by clients already restored in the secondary, before the
    /// heal: ping-pong (must be 0).
    pub returns_to_primary_during_fault: usize,
    /// Endpoint changes made by client-assisted failover, all users together.
    pub endpoint_moves: usize,
    /// Between fault and heal, how long users were served by both Regions at once (lab ms).
    pub split_ms: f64,
    pub split_aws_s: f64,
    /// Bids one Region accepted after the other had accepted an equal or higher one: the
    /// freshness cost of a split (correctness is unaffected; see docs/CLIENT.md).
    pub accepted_below_other_region: usize,
    /// What the history checker found (crate::sim::history): every broken guarantee, the
    /// same kinds a chaos run reports. Empty on a passing drill.
    pub violations: Vec<crate::sim::history::Violation>,
    pub timeline: Vec<Entry>,
    /// `failback` only: users restored on the primary after the secondary's connections
    /// ended, and how long that took from then, lab ms.
    #[serde(default)]
    pub users_back_on_primary: Option<usize>,
    #[serde(default)]
    pub back_on_primary_ms: Percentiles,
    /// Whether an evacuator moved the sessions still on the primary once the name had
    /// failed over (`--evacuate-on-failover`).
    #[serde(default)]
    pub evacuate_on_failover: bool,
    /// Users whose session ended for a reason they would see as an error (anything but a
    /// server-directed move, a planned return, or closing the app). `evacuate` requires 0.
    #[serde(default)]
    pub users_seeing_errors: usize,
    /// Handshakes the secondary refused over its quota (429) between the fault (or the
    /// evacuation) and the heal.
    #[serde(default)]
    pub throttled_handshakes_during_move: usize,
    /// Users' handshakes the secondary's authorizer denied (403) between the fault and the
    /// heal: with the issuer's Region lost, a Region whose authorizers cannot get the keys
    /// denies every user. A drill has no attacker, so any is a failure.
    #[serde(default)]
    pub denied_handshakes_during_move: usize,
    /// The authorizer functions of both Regions over the whole drill: cold starts, their
    /// secret reads, and the `$connect`s answered 500 because a new sandbox's init failed.
    pub authorizer: AuthorizerFigures,
    /// Both Regions' pushers over the drill: pushes, posts, subscriber reads, and how often
    /// an audience over the `@connections` budget widened an auction's window.
    #[serde(default)]
    pub pushes: wsdr_core::push::PushTotals,
    /// Both Regions' push workers as Lambda's SQS event source mapping ran them: invocations,
    /// cold starts, and how many ran at once (the mapping starts at five and scales up).
    #[serde(default)]
    pub push_workers: crate::world::mapping::MappingStats,
    /// Both Regions' push job queues: receives Lambda throttled, jobs run late, dead-lettered
    /// or expired unseen, the longest wait of a throttled job (AWS ms), and jobs reserved
    /// workers ran while the Region's unreserved concurrency was exhausted.
    #[serde(default)]
    pub push_jobs: crate::world::push_jobs::PushJobStats,
    /// Every check the drill failed, in words (empty: PASS). The same list the console's
    /// verdict line prints.
    #[serde(default)]
    pub failed_checks: Vec<String>,
    /// The state table's mode: `eventual` (MREC) or `strong` (MRSC).
    pub consistency: String,
    /// Invoke to first answer of every bid, AWS milliseconds, from simulated drills only:
    /// there every wait is modelled AWS time (table service times, strong mode's cross-Region
    /// cost, the Region's faults) and no CPU time counts. A real-time drill leaves it empty:
    /// its lab milliseconds are this machine's CPU time, which no time scale turns into AWS
    /// time.
    #[serde(default)]
    pub bid_latency_aws_ms: Percentiles,
    /// Each bid's integration as the handler took it, real milliseconds on this machine
    /// (against the lab's tables or DynamoDB Local), apart from the lab's scaled waits; real-
    /// time drills only. Not part of the digest (it is this machine's speed, not a function of
    /// the seed).
    #[serde(default)]
    pub bid_handler_ms: Percentiles,
    /// Bid answers `redirect` (strong mode: a Region without quorum decided nothing).
    #[serde(default)]
    pub redirected_bids: usize,
    /// Strong mode: table requests refused for want of a quorum, per serving Region.
    #[serde(default)]
    pub no_quorum_refusals: Vec<u64>,
    /// `simulated` (a deterministic simulation: the report is a function of the seed and
    /// configuration) or `real` (the time-scaled real world).
    pub clock: String,
    /// A digest of every other field of this report: two simulated drills with the same
    /// seed and settings print the same.
    pub digest: String,
}

impl Report {
    /// A lab-millisecond field of this report (`*_ms`, `timeline[].at_ms`) in AWS seconds:
    /// the one place a report's two units meet.
    pub fn aws_secs(&self, lab_ms: f64) -> f64 {
        TimeScale::new(self.time_scale).aws_secs(lab_ms)
    }

    /// Nothing lost, nothing doubled, Regions converged, no ping-pong, the fault detected
    /// and every client restored in the secondary; for a blip, nobody moved at all.
    pub fn passed(&self) -> bool {
        self.checks().is_empty()
    }

    /// The checks this drill failed.
    pub fn checks(&self) -> Vec<Check> {
        let mut failed = Vec::new();
        fail_unless(&mut failed, self.clients > 0, Check::NoUsers);
        self.mode_checks(&mut failed);
        self.scenario_checks(&mut failed);
        self.outcome_checks(&mut failed);
        failed
    }

    /// What the consistency mode promises.
    fn mode_checks(&self, failed: &mut Vec<Check>) {
        if self.consistency == "strong" {
            // What strong mode promises (docs/DATA_MODEL.md, "Strong mode").
            fail_unless(
                failed,
                self.accepted_below_other_region == 0,
                Check::StrongAcceptedBelow {
                    bids: self.accepted_below_other_region,
                },
            );
            fail_unless(
                failed,
                self.acknowledged_bids_lost_with_region == 0,
                Check::StrongLostWithRegion {
                    bids: self.acknowledged_bids_lost_with_region,
                },
            );
        }
    }

    /// What the scenario must show: who moved, who did not, where the name pointed.
    fn scenario_checks(&self, failed: &mut Vec<Check>) {
        if self.scenario == Scenario::InterRegionPartition {
            // Both Regions are healthy and reached by their users: the right outcome is that
            // nobody is failed over. wsdr's defaults fail this (docs/DEPLOY.md says why).
            fail_unless(
                failed,
                self.dns_flips_during_fault == 0,
                Check::FailedOverHealthyPrimary {
                    flips: self.dns_flips_during_fault,
                },
            );
        } else if self.scenario == Scenario::Blip {
            fail_unless(
                failed,
                self.restored == 0,
                Check::MovedAfterBlip {
                    users: self.restored,
                },
            );
            fail_unless(
                failed,
                self.users_disconnected_during_fault == 0 && self.disconnects_during_fault == 0,
                Check::DisconnectedDuringBlip {
                    users: self.users_disconnected_during_fault,
                },
            );
            fail_unless(
                failed,
                self.endpoint_moves == 0,
                Check::EndpointMovesDuringBlip {
                    moves: self.endpoint_moves,
                },
            );
            fail_unless(
                failed,
                self.dns_flips_during_fault == 0,
                Check::DnsFlippedDuringBlip {
                    flips: self.dns_flips_during_fault,
                },
            );
        } else if self.scenario == Scenario::Evacuate {
            fail_unless(
                failed,
                self.users_seeing_errors == 0,
                Check::ErrorsDuringEvacuation {
                    users: self.users_seeing_errors,
                },
            );
            fail_unless(
                failed,
                self.restored == self.clients,
                Check::NotAllMoved {
                    moved: self.restored,
                    users: self.clients,
                },
            );
        } else {
            // The name went back to the primary while it was still failed (a herd over the
            // quota, a silent watcher, a flood). A flapping primary's first healthy minute
            // looks like a recovery until it breaks again: the name may follow it once, and
            // flap damping (wsdr_core::FastVerdict) keeps it from following again.
            let allowed = usize::from(self.scenario == Scenario::Flapping);
            fail_unless(
                failed,
                self.dns_answers_to_failed_primary <= allowed,
                Check::DnsBackToFailedPrimary {
                    times: self.dns_answers_to_failed_primary,
                },
            );
            let detected = match self.health_check {
                HealthCheckKind::Alarm => self.detection_ms.is_some(),
                HealthCheckKind::Endpoint => self
                    .health_checks
                    .as_ref()
                    .is_some_and(|h| h.endpoint.detection_ms.is_some()),
            };
            fail_unless(
                failed,
                detected,
                Check::NeverDetected {
                    by: self.health_check,
                },
            );
            fail_unless(
                failed,
                self.restored == self.clients,
                Check::NotAllRestored {
                    restored: self.restored,
                    users: self.clients,
                },
            );
        }
    }

    /// What every drill must end with: nobody denied, no bid lost or doubled, one winner.
    fn outcome_checks(&self, failed: &mut Vec<Check>) {
        fail_unless(
            failed,
            self.denied_handshakes_during_move == 0,
            Check::UsersDenied {
                handshakes: self.denied_handshakes_during_move,
            },
        );
        fail_unless(
            failed,
            self.authorizer.handshakes_failed == 0,
            Check::AuthorizerInitFailed {
                handshakes: self.authorizer.handshakes_failed,
                throttled_reads: self.authorizer.secrets_throttled,
            },
        );
        if matches!(
            self.scenario,
            Scenario::Failback | Scenario::Evacuate | Scenario::JudgeLost
        ) {
            fail_unless(failed, self.failback_ms.is_some(), Check::NoFailback);
            let back = self.users_back_on_primary.unwrap_or(0);
            fail_unless(
                failed,
                back == self.clients,
                Check::NotAllBack {
                    back,
                    users: self.clients,
                },
            );
        }
        if self.scenario == Scenario::JudgeLost {
            // Within minutes: the primary's own view must earn its recovery streak and
            // Route 53's checkers see it; nothing waits on the lost judge.
            const BOUND_S: u64 = 300;
            if let Some(ms) = self.failback_ms {
                let secs = self.aws_secs(ms).round() as u64;
                fail_unless(
                    failed,
                    secs <= BOUND_S,
                    Check::SlowFailback {
                        secs,
                        bound: BOUND_S,
                    },
                );
            }
        }
        if let Some(orders) = &self.failover_orders {
            // Whatever the deliveries: each order moves everyone through the global name once.
            let moves = orders.most_moves_of_one_order();
            fail_unless(failed, moves <= 1, Check::OrderRanTwice { moves });
            let exercised = match self.scenario {
                Scenario::OrdersDuplicated => orders.deliveries > orders.emitted,
                Scenario::OrdersLost => orders.lost > 0,
                _ => true,
            };
            fail_unless(failed, exercised, Check::OrdersNotExercised);
        }
        // A push job that never runs is a watcher left to its heartbeat; one that waits past a
        // visibility timeout of wsdr's queue is a stalled auction.
        let jobs = &self.push_jobs;
        fail_unless(
            failed,
            jobs.lost() == 0,
            Check::PushJobsLost {
                dead_lettered: jobs.dead_lettered,
                expired: jobs.expired,
            },
        );
        let bound_ms = crate::world::push_jobs::PUSH_JOB_VISIBILITY.as_millis() as u64;
        fail_unless(
            failed,
            jobs.longest_wait_ms <= bound_ms,
            Check::PushJobsStalled {
                secs: jobs.longest_wait_ms / 1000,
                bound: bound_ms / 1000,
            },
        );
        if self.scenario == Scenario::PushHerd {
            fail_unless(
                failed,
                jobs.throttled_receives + jobs.ran_while_exhausted > 0,
                Check::PushHerdNotExercised,
            );
        }
        fail_unless(
            failed,
            self.lost_acknowledged_bids == 0,
            Check::AcknowledgedBidsLost {
                bids: self.lost_acknowledged_bids,
            },
        );
        fail_unless(
            failed,
            self.duplicate_bids == 0,
            Check::DuplicateBids {
                bids: self.duplicate_bids,
            },
        );
        fail_unless(failed, self.converged, Check::NotConverged);
        fail_unless(failed, self.high_bid_consistent, Check::HighBidInconsistent);
        fail_unless(
            failed,
            self.returns_to_primary_during_fault == 0,
            Check::PingPong {
                returns: self.returns_to_primary_during_fault,
            },
        );
        if !self.violations.is_empty() {
            let mut kinds: Vec<String> = self
                .violations
                .iter()
                .map(|v| {
                    serde_json::to_value(v)
                        .ok()
                        .and_then(|j| j.get("kind").and_then(|k| k.as_str()).map(str::to_owned))
                        .unwrap_or_else(|| "violation".to_owned())
                })
                .collect();
            kinds.sort();
            kinds.dedup();
            fail_unless(
                failed,
                false,
                Check::HistoryViolations {
                    count: self.violations.len(),
                    kinds,
                },
            );
        }
    }

    pub fn table(&self) -> String {
        let ms = |v: Option<f64>| {
            v.map_or("-".to_owned(), |v| {
                format!("{:.0} ms lab = {:.1} s AWS", v, self.aws_secs(v))
            })
        };
        let mut rows: Vec<(&str, String)> = vec![
            (
                "restored in secondary",
                format!("{}/{}", self.restored, self.clients),
            ),
            ("RTO p50", ms(self.rto_ms.p50)),
            ("RTO p99", ms(self.rto_ms.p99)),
            ("RTO max", ms(self.rto_ms.max)),
            ("decision path", self.decision_path.describe()),
            ("detection (alarm)", ms(self.detection_ms)),
        ];
        if let Some(h) = &self.health_checks {
            rows.push(("detection (fast verdict)", ms(h.endpoint.detection_ms)));
            rows.push(("health check unhealthy (alarm)", ms(h.alarm.unhealthy_ms)));
            rows.push((
                "health check unhealthy (endpoint)",
                ms(h.endpoint.unhealthy_ms),
            ));
        }
        rows.extend([
            ("DNS flip", ms(self.dns_flip_ms)),
            ("failback (DNS)", ms(self.failback_ms)),
        ]);
        if let Some(back) = self.users_back_on_primary {
            rows.push((
                "back on primary",
                format!(
                    "{back}/{}, p50 {}, p99 {}",
                    self.clients,
                    ms(self.back_on_primary_ms.p50),
                    ms(self.back_on_primary_ms.p99)
                ),
            ));
        }
        if self.scenario == Scenario::Evacuate || self.throttled_handshakes_during_move > 0 {
            rows.push((
                "handshakes refused (429)",
                self.throttled_handshakes_during_move.to_string(),
            ));
        }
        rows.push((
            "handshakes denied (403)",
            self.denied_handshakes_during_move.to_string(),
        ));
        rows.push(("users seeing errors", self.users_seeing_errors.to_string()));
        rows.extend([
            (
                "DNS flips during fault",
                self.dns_flips_during_fault.to_string(),
            ),
            (
                "DNS to the failed primary",
                self.dns_answers_to_failed_primary.to_string(),
            ),
            ("acknowledged bids", self.acknowledged_bids.to_string()),
            (
                "lost acknowledged bids",
                self.lost_acknowledged_bids.to_string(),
            ),
        ]);
        if self.scenario == Scenario::NeverReturns {
            rows.push((
                "lost with the Region",
                format!(
                    "{} acknowledged bids (measured RPO)",
                    self.acknowledged_bids_lost_with_region
                ),
            ));
        }
        rows.extend([
            ("duplicate bids", self.duplicate_bids.to_string()),
            ("high bid consistent", self.high_bid_consistent.to_string()),
            (
                "RPO window at fault",
                format!(
                    "{} items, oldest {:.0} ms",
                    self.rpo_items_at_fault, self.rpo_oldest_ms_at_fault
                ),
            ),
            ("regions converged", self.converged.to_string()),
            (
                "users disconnected",
                format!(
                    "{} ({} disconnects during the fault)",
                    self.users_disconnected_during_fault, self.disconnects_during_fault
                ),
            ),
            (
                "back on primary (ping-pong)",
                self.returns_to_primary_during_fault.to_string(),
            ),
        ]);
        if self.client_fallback {
            rows.push(("endpoint moves (clients)", self.endpoint_moves.to_string()));
        }
        rows.push((
            "pushes (window widened)",
            format!(
                "{} pushes, {} posts ({} widened by the budget, widest spacing {} ms AWS)",
                self.pushes.pushes,
                self.pushes.posts,
                self.pushes.widening.widened_pushes,
                self.pushes.widening.widest_spacing_ms
            ),
        ));
        rows.push((
            "push workers (cold starts)",
            format!(
                "{} invocations, {} cold starts, at most {} at once",
                self.push_workers.invocations,
                self.push_workers.cold_starts,
                self.push_workers.peak_concurrency
            ),
        ));
        let jobs = &self.push_jobs;
        if jobs.throttled_receives + jobs.ran_while_exhausted > 0 {
            rows.push((
                "push jobs (pool exhausted)",
                format!(
                    "{} ran by reserved workers, {} receives throttled, {} late (longest wait {} s AWS), {} dead-lettered, {} expired",
                    jobs.ran_while_exhausted,
                    jobs.throttled_receives,
                    jobs.late_jobs,
                    jobs.longest_wait_ms / 1000,
                    jobs.dead_lettered,
                    jobs.expired
                ),
            ));
        }
        rows.push(("consistency", self.consistency.clone()));
        let p50_p99 = |p: &Percentiles, digits: usize| match (p.p50, p.p99) {
            (Some(p50), Some(p99)) => format!("p50 {p50:.digits$} ms, p99 {p99:.digits$} ms"),
            _ => "-".into(),
        };
        if self.clock == "simulated" {
            rows.push((
                "bid latency (AWS, modelled)",
                p50_p99(&self.bid_latency_aws_ms, 0),
            ));
        }
        rows.push(("bid handler time (real)", p50_p99(&self.bid_handler_ms, 2)));
        if self.redirected_bids > 0 || self.consistency == "strong" {
            rows.push((
                "bids redirected (no quorum)",
                self.redirected_bids.to_string(),
            ));
        }
        rows.extend([
            ("split between Regions", ms(Some(self.split_ms))),
            (
                "accepted below other high",
                self.accepted_below_other_region.to_string(),
            ),
            ("history violations", self.violations.len().to_string()),
        ]);
        for v in &self.violations {
            rows.push(("", serde_json::to_string(v).unwrap_or_default()));
        }
        let failed = self.checks();
        rows.push((
            "verdict",
            if failed.is_empty() {
                "PASS".to_owned()
            } else {
                let words: Vec<String> = failed.iter().map(ToString::to_string).collect();
                format!("FAIL: {}", words.join("; "))
            },
        ));
        format!(
            "drill report: scenario {}, {} clients, time scale {}\n{}\n",
            self.scenario.name(),
            self.clients,
            self.time_scale,
            two_columns(rows)
        )
    }

    pub fn write_json(&self, path: &Path) -> anyhow::Result<()> {
        write_pretty_json(path, self)
    }
}

/// The same scenario and seed with the table in each mode (`wsdr drill --compare-consistency`).
#[derive(Debug, Clone, Serialize)]
pub struct ConsistencyComparison {
    pub scenario: Scenario,
    pub eventual: Report,
    pub strong: Report,
}

impl ConsistencyComparison {
    pub fn passed(&self) -> bool {
        self.eventual.passed() && self.strong.passed()
    }

    pub fn table(&self) -> String {
        let aws_s = |r: &Report, v: Option<f64>| {
            v.map_or("-".to_owned(), |v| format!("{:.1} s", r.aws_secs(v)))
        };
        let ms = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.0} ms"));
        let real_ms = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.2} ms"));
        let (e, s) = (&self.eventual, &self.strong);
        let row =
            |name: &'static str, value: &dyn Fn(&Report) -> String| (name, value(e), value(s));
        let rows: Vec<(&str, String, String)> = vec![
            row("RTO p50 (AWS)", &|r| aws_s(r, r.rto_ms.p50)),
            row("RTO p99 (AWS)", &|r| aws_s(r, r.rto_ms.p99)),
            row("restored", &|r| format!("{}/{}", r.restored, r.clients)),
            row("bid latency p50 (AWS, simulated)", &|r| {
                ms(r.bid_latency_aws_ms.p50)
            }),
            row("bid latency p99 (AWS, simulated)", &|r| {
                ms(r.bid_latency_aws_ms.p99)
            }),
            row("bid handler p50 (real)", &|r| real_ms(r.bid_handler_ms.p50)),
            row("bid handler p99 (real)", &|r| real_ms(r.bid_handler_ms.p99)),
            row("acknowledged bids", &|r| r.acknowledged_bids.to_string()),
            row("accepted below other high", &|r| {
                r.accepted_below_other_region.to_string()
            }),
            row("acknowledged lost with a Region", &|r| {
                r.acknowledged_bids_lost_with_region.to_string()
            }),
            row("lost acknowledged bids", &|r| {
                r.lost_acknowledged_bids.to_string()
            }),
            row("same winner everywhere", &|r| {
                r.high_bid_consistent.to_string()
            }),
            row("bids redirected", &|r| r.redirected_bids.to_string()),
        ];
        let mut table = plain_table();
        table.set_header(vec!["", "eventual (MREC)", "strong (MRSC)"]);
        for (name, a, b) in rows {
            table.add_row(vec![name.to_owned(), a, b]);
        }
        table.add_row(vec![
            "verdict".to_owned(),
            verdict(&e.checks()),
            verdict(&s.checks()),
        ]);
        right_align(&mut table, &[1, 2]);
        format!(
            "comparison: scenario {}, {} clients, same seed\n{table}\n",
            self.scenario.name(),
            e.clients
        )
    }

    pub fn write_json(&self, path: &Path) -> anyhow::Result<()> {
        write_pretty_json(path, self)
    }
}

/// The same scenario run twice with the same seed: DNS-only, then client-assisted.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub scenario: Scenario,
    pub dns_only: Report,
    pub client_assisted: Report,
    /// Client-assisted p99 RTO / DNS-only p99 RTO (target: under 0.5).
    pub p99_rto_ratio: Option<f64>,
}

impl Comparison {
    pub fn new(dns_only: Report, client_assisted: Report) -> Self {
        let p99_rto_ratio = match (dns_only.rto_ms.p99, client_assisted.rto_ms.p99) {
            (Some(dns), Some(client)) if dns > 0.0 => Some(client / dns),
            _ => None,
        };
        Self {
            scenario: dns_only.scenario,
            dns_only,
            client_assisted,
            p99_rto_ratio,
        }
    }

    /// Both runs passed.
    pub fn passed(&self) -> bool {
        self.dns_only.passed() && self.client_assisted.passed()
    }

    pub fn table(&self) -> String {
        let aws = |r: &Report, v: Option<f64>| {
            v.map_or("-".to_owned(), |v| format!("{:.1} s", r.aws_secs(v)))
        };
        let (d, c) = (&self.dns_only, &self.client_assisted);
        let row = |name: &'static str, value: fn(&Report) -> String| (name, value(d), value(c));
        let rows: Vec<(&str, String, String)> = vec![
            ("RTO p50 (AWS)", aws(d, d.rto_ms.p50), aws(c, c.rto_ms.p50)),
            ("RTO p99 (AWS)", aws(d, d.rto_ms.p99), aws(c, c.rto_ms.p99)),
            ("RTO max (AWS)", aws(d, d.rto_ms.max), aws(c, c.rto_ms.max)),
            row("restored", |r| format!("{}/{}", r.restored, r.clients)),
            row("lost acknowledged bids", |r| {
                r.lost_acknowledged_bids.to_string()
            }),
            row("duplicate bids", |r| r.duplicate_bids.to_string()),
            row("split (AWS)", |r| format!("{:.1} s", r.split_aws_s)),
            row("accepted below other high", |r| {
                r.accepted_below_other_region.to_string()
            }),
            row("back on primary (ping-pong)", |r| {
                r.returns_to_primary_during_fault.to_string()
            }),
            row("endpoint moves", |r| r.endpoint_moves.to_string()),
            row("converged", |r| r.converged.to_string()),
        ];
        let mut table = plain_table();
        table.set_header(vec!["", "DNS only", "client-assisted"]);
        for (name, a, b) in rows {
            table.add_row(vec![name.to_owned(), a, b]);
        }
        table.add_row(vec![
            "p99 RTO ratio".to_owned(),
            self.p99_rto_ratio
                .map_or("-".to_owned(), |r| format!("{r:.2} (target < 0.50)")),
            String::new(),
        ]);
        table.add_row(vec![
            "verdict".to_owned(),
            verdict(&d.checks()),
            verdict(&c.checks()),
        ]);
        right_align(&mut table, &[1, 2]);
        format!(
            "comparison: scenario {}, {} clients, same seed\n{table}\n",
            self.scenario.name(),
            d.clients
        )
    }

    pub fn write_json(&self, path: &Path) -> anyhow::Result<()> {
        write_pretty_json(path, self)
    }
}

/// One of wsdr's timing targets against the reference design (issue targets, AWS seconds).
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    pub name: String,
    /// The limit, AWS seconds (the measured figure must be under it).
    pub limit_s: f64,
    /// What the run measured, AWS seconds (`None`: nobody was restored).
    pub measured_s: Option<f64>,
    pub met: bool,
}

/// The same scenario and seed under the reference design's settings and under wsdr's
/// defaults, on one time axis (the demo): the reference design (the verdict alarm behind the
/// records, 60 s TTL, DNS-only clients, nobody told to move), wsdr's defaults with DNS-only
/// clients, and wsdr's defaults with wsdr clients (regional fallback, server-directed
/// moves).
#[derive(Debug, Clone, Serialize)]
pub struct ReferenceComparison {
    pub scenario: Scenario,
    pub reference: Report,
    pub wsdr_dns_only: Report,
    pub wsdr_clients: Report,
    /// wsdr's targets, each against its own run.
    pub targets: Vec<Target>,
    /// The same wsdr-clients run once more on real sockets at a time scale, beside the
    /// three runs that decide (`--real-beside`): what it measured and how late this
    /// machine ran its timers. Never part of the verdict (docs/DRILL_REPORT.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub real_time: Option<RealTimeRun>,
    /// Why the real-time run beside the verdict did not complete, if it did not (a machine
    /// too busy to reach steady state); not part of the verdict either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub real_time_error: Option<String>,
}

/// A real-time run shown beside a verdict decided by simulation.
#[derive(Debug, Clone, Serialize)]
pub struct RealTimeRun {
    pub time_scale: f64,
    pub report: Report,
    pub stalls: crate::runs::stalls::Stalls,
    /// The run's failed checks and missed targets: printed and recorded, not the verdict
    /// (a busy machine can cause any of them).
    pub notes: Vec<String>,
}

impl RealTimeRun {
    pub fn new(report: Report, stalls: crate::runs::stalls::Stalls) -> Self {
        let mut notes = report.failed_checks.clone();
        let p99 = report.rto_aws_s.p99;
        if !p99.is_some_and(|p| p < ReferenceComparison::WSDR_CLIENTS_P99_LIMIT_S) {
            notes.push(format!(
                "RTO p99 {} (the simulated target is under {:.0} s)",
                p99.map_or("not measured".into(), |m| format!("{m:.1} s")),
                ReferenceComparison::WSDR_CLIENTS_P99_LIMIT_S
            ));
        }
        Self {
            time_scale: report.time_scale,
            report,
            stalls,
            notes,
        }
    }

    pub fn table(&self) -> String {
        let s = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.1} s"));
        let r = &self.report;
        let mut out = format!(
            "beside the verdict: wsdr clients on real sockets at time scale {} (this machine's speed; not the verdict)\n",
            self.time_scale
        );
        out.push_str(&format!(
            "  RTO p50 / p99 / max (AWS): {} / {} / {}; restored {}/{}; lost acknowledged bids {}; duplicate bids {}\n",
            s(r.rto_aws_s.p50),
            s(r.rto_aws_s.p99),
            s(r.rto_aws_s.max),
            r.restored,
            r.clients,
            r.lost_acknowledged_bids,
            r.duplicate_bids
        ));
        out.push_str(&format!("  {}\n", self.stalls.line()));
        if self.notes.is_empty() {
            out.push_str("  notes: none (it passed its own checks too)\n");
        } else {
            out.push_str(&format!("  notes: {}\n", self.notes.join("; ")));
        }
        out
    }
}

impl ReferenceComparison {
    /// RTO p99 under 60 s for DNS-only clients and under 30 s for wsdr clients, with wsdr's
    /// defaults.
    pub const DNS_ONLY_P99_LIMIT_S: f64 = 60.0;
    pub const WSDR_CLIENTS_P99_LIMIT_S: f64 = 30.0;

    pub fn new(reference: Report, wsdr_dns_only: Report, wsdr_clients: Report) -> Self {
        let target = |name: &str, limit_s: f64, report: &Report| {
            let measured_s = report.rto_aws_s.p99;
            Target {
                name: name.to_owned(),
                limit_s,
                measured_s,
                met: measured_s.is_some_and(|m| m < limit_s),
            }
        };
        let targets = vec![
            target(
                "wsdr defaults, DNS-only clients: RTO p99",
                Self::DNS_ONLY_P99_LIMIT_S,
                &wsdr_dns_only,
            ),
            target(
                "wsdr defaults, wsdr clients: RTO p99",
                Self::WSDR_CLIENTS_P99_LIMIT_S,
                &wsdr_clients,
            ),
        ];
        Self {
            scenario: reference.scenario,
            reference,
            wsdr_dns_only,
            wsdr_clients,
            targets,
            real_time: None,
            real_time_error: None,
        }
    }

    /// Every failed check of the three runs (each prefixed with its run) and every target
    /// missed.
    pub fn failures(&self) -> Vec<String> {
        let runs = [
            ("reference", &self.reference),
            ("wsdr DNS-only", &self.wsdr_dns_only),
            ("wsdr clients", &self.wsdr_clients),
        ];
        let mut failures: Vec<String> = runs
            .iter()
            .flat_map(|(name, r)| r.failed_checks.iter().map(move |c| format!("{name}: {c}")))
            .collect();
        failures.extend(self.targets.iter().filter(|t| !t.met).map(|t| {
            format!(
                "{} {} (target under {:.0} s)",
                t.name,
                t.measured_s
                    .map_or("not measured".into(), |m| format!("{m:.1} s")),
                t.limit_s
            )
        }));
        failures
    }

    pub fn table(&self) -> String {
        let runs = [&self.reference, &self.wsdr_dns_only, &self.wsdr_clients];
        let s = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.1} s"));
        let aws = |r: &Report, v: Option<f64>| s(v.map(|v| r.aws_secs(v)));
        type Cell = fn(&Report) -> String;
        let rows: Vec<(&str, Cell)> = vec![
            ("health checks read", |r| match r.health_check {
                crate::world::fast::HealthCheckKind::Alarm => "verdict alarm".into(),
                crate::world::fast::HealthCheckKind::Endpoint => "fast verdict".into(),
            }),
            ("DNS TTL", |r| format!("{:.0} s", r.dns_ttl_aws_s)),
            ("clients", |r| {
                if r.client_fallback {
                    "wsdr (regional fallback)".into()
                } else {
                    "DNS only".into()
                }
            }),
            ("detection (AWS)", |r| {
                let detection = match r.health_check {
                    crate::world::fast::HealthCheckKind::Alarm => r.detection_ms,
                    crate::world::fast::HealthCheckKind::Endpoint => r
                        .health_checks
                        .as_ref()
                        .and_then(|h| h.endpoint.detection_ms),
                };
                detection.map_or("-".into(), |v| format!("{:.1} s", r.aws_secs(v)))
            }),
            ("DNS flip (AWS)", |r| {
                r.dns_flip_ms
                    .map_or("-".into(), |v| format!("{:.1} s", r.aws_secs(v)))
            }),
            ("restored", |r| format!("{}/{}", r.restored, r.clients)),
            ("lost acknowledged bids", |r| {
                r.lost_acknowledged_bids.to_string()
            }),
            ("duplicate bids", |r| r.duplicate_bids.to_string()),
            ("DNS flips during fault", |r| {
                r.dns_flips_during_fault.to_string()
            }),
            ("back on primary (ping-pong)", |r| {
                r.returns_to_primary_during_fault.to_string()
            }),
            ("bid handler p99 (real)", |r| {
                r.bid_handler_ms
                    .p99
                    .map_or("-".into(), |v| format!("{v:.2} ms"))
            }),
        ];
        let mut table = plain_table();
        table.set_header(vec![
            "",
            "reference design",
            "wsdr, DNS-only clients",
            "wsdr, wsdr clients",
        ]);
        for (name, pick) in [
            ("RTO p50 (AWS)", 0),
            ("RTO p99 (AWS)", 1),
            ("RTO max (AWS)", 2),
        ] {
            let mut row = vec![name.to_owned()];
            for r in runs {
                let v = [r.rto_ms.p50, r.rto_ms.p99, r.rto_ms.max][pick];
                row.push(aws(r, v));
            }
            table.add_row(row);
        }
        for (name, cell) in rows {
            let mut row = vec![name.to_owned()];
            row.extend(runs.iter().map(|r| cell(r)));
            table.add_row(row);
        }
        let mut verdicts = vec!["checks".to_owned()];
        verdicts.extend(runs.iter().map(|r| verdict(&r.checks())));
        table.add_row(verdicts);
        right_align(&mut table, &[1, 2, 3]);
        let mut out = format!(
            "the reference design against wsdr's defaults: scenario {}, {} clients, same seed, one time axis\n{table}\n",
            self.scenario.name(),
            self.reference.clients
        );
        for t in &self.targets {
            out.push_str(&format!(
                "  target: {} under {:.0} s: {} ({})\n",
                t.name,
                t.limit_s,
                s(t.measured_s),
                if t.met { "met" } else { "MISSED" }
            ));
        }
        if let Some(real) = &self.real_time {
            out.push('\n');
            out.push_str(&real.table());
        }
        out
    }

    pub fn write_json(&self, path: &Path) -> anyhow::Result<()> {
        write_pretty_json(path, self)
    }
}

/// A borderless table for the console (comfy-table: its column widths, not hand padding).
fn plain_table() -> comfy_table::Table {
    let mut table = comfy_table::Table::new();
    table
        .load_style(comfy_table::presets::NOTHING)
        .set_content_arrangement(comfy_table::ContentArrangement::Disabled);
    table
}

fn right_align(table: &mut comfy_table::Table, columns: &[usize]) {
    for index in columns {
        if let Some(column) = table.column_mut(*index) {
            column.set_cell_alignment(comfy_table::CellAlignment::Right);
        }
    }
}

/// Name and value rows, the names in one column.
fn two_columns(rows: Vec<(&str, String)>) -> comfy_table::Table {
    let mut table = plain_table();
    for (name, value) in rows {
        table.add_row(vec![name.to_owned(), value]);
    }
    table
}

fn verdict(failed: &[Check]) -> String {
    if failed.is_empty() {
        "PASS".to_owned()
    } else {
        format!("FAIL ({})", failed.len())
    }
}

/// A check a drill failed, each in words an operator can act on (its `Display`, the text
/// `failed_checks` carries in the JSON report).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "check", rename_all = "snake_case")]
pub enum Check {
    NoUsers,
    StrongAcceptedBelow {
        bids: usize,
    },
    StrongLostWithRegion {
        bids: usize,
    },
    MovedAfterBlip {
        users: usize,
    },
    DisconnectedDuringBlip {
        users: usize,
    },
    EndpointMovesDuringBlip {
        moves: usize,
    },
    DnsFlippedDuringBlip {
        flips: usize,
    },
    ErrorsDuringEvacuation {
        users: usize,
    },
    NotAllMoved {
        moved: usize,
        users: usize,
    },
    NeverDetected {
        by: HealthCheckKind,
    },
    NotAllRestored {
        restored: usize,
        users: usize,
    },
    UsersDenied {
        handshakes: usize,
    },
    AuthorizerInitFailed {
        handshakes: usize,
        throttled_reads: u64,
    },
    DnsBackToFailedPrimary {
        times: usize,
    },
    FailedOverHealthyPrimary {
        flips: usize,
    },
    NoFailback,
    /// `judge-lost`: the name went back to the primary, but later than the bound.
    SlowFailback {
        secs: u64,
        bound: u64,
    },
    NotAllBack {
        back: usize,
        users: usize,
    },
    /// One fail-over order moved everyone through the global name more than once.
    OrderRanTwice {
        moves: u64,
    },
    /// `orders-duplicated` delivered no order twice, or `orders-lost` lost none: the drill
    /// tested nothing.
    OrdersNotExercised,
    /// Push jobs that never ran: dead-lettered, or deleted unseen past the retention.
    PushJobsLost {
        dead_lettered: u64,
        expired: u64,
    },
    /// A throttled push job waited longer than a visibility timeout of wsdr's queue.
    PushJobsStalled {
        secs: u64,
        bound: u64,
    },
    /// `push-herd` ran no push job while the secondary's pool was exhausted: the drill
    /// tested nothing.
    PushHerdNotExercised,
    AcknowledgedBidsLost {
        bids: usize,
    },
    DuplicateBids {
        bids: usize,
    },
    NotConverged,
    HighBidInconsistent,
    PingPong {
        returns: usize,
    },
    HistoryViolations {
        count: usize,
        kinds: Vec<String>,
    },
}

impl std::fmt::Display for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Check::NoUsers => write!(
                f,
                "no users: a drill with nobody connected measures nothing"
            ),
            Check::StrongAcceptedBelow { bids } => {
                write!(
                    f,
                    "strong mode accepted {bids} bids below one already acknowledged"
                )
            }
            Check::StrongLostWithRegion { bids } => {
                write!(f, "strong mode lost {bids} acknowledged bids with a Region")
            }
            Check::MovedAfterBlip { users } => {
                write!(f, "{users} users moved to the secondary after a blip")
            }
            Check::DisconnectedDuringBlip { users } => {
                write!(f, "{users} users disconnected during a blip")
            }
            Check::EndpointMovesDuringBlip { moves } => {
                write!(f, "{moves} endpoint moves during a blip")
            }
            Check::DnsFlippedDuringBlip { flips } => {
                write!(f, "DNS flipped {flips} times during a blip")
            }
            Check::ErrorsDuringEvacuation { users } => {
                write!(f, "{users} users saw an error during a planned evacuation")
            }
            Check::NotAllMoved { moved, users } => {
                write!(f, "moved to the secondary: {moved}/{users}")
            }
            Check::NeverDetected { by } => write!(
                f,
                "the fault was never detected (no {})",
                match by {
                    HealthCheckKind::Alarm => "alarm",
                    HealthCheckKind::Endpoint => "fast verdict",
                }
            ),
            Check::NotAllRestored { restored, users } => {
                write!(f, "restored in the secondary: {restored}/{users}")
            }
            Check::FailedOverHealthyPrimary { flips } => write!(
                f,
                "a partition between two healthy Regions moved DNS {flips} times (nobody should move)"
            ),
            Check::DnsBackToFailedPrimary { times } => write!(
                f,
                "DNS answered the failed primary again {times} times during the fault"
            ),
            Check::UsersDenied { handshakes } => write!(
                f,
                "the secondary's authorizer denied {handshakes} users' handshakes (403)"
            ),
            Check::AuthorizerInitFailed {
                handshakes,
                throttled_reads,
            } => write!(
                f,
                "{handshakes} handshakes answered 500: new authorizer sandboxes failed their init ({throttled_reads} secret reads throttled)"
            ),
            Check::NoFailback => write!(f, "DNS never failed back to the primary after the heal"),
            Check::SlowFailback { secs, bound } => write!(
                f,
                "DNS went back to the primary {secs} s after the heal (bound {bound} s)"
            ),
            Check::NotAllBack { back, users } => {
                write!(f, "back on the primary after failback: {back}/{users}")
            }
            Check::OrderRanTwice { moves } => write!(
                f,
                "one fail-over order moved everyone {moves} times (an order must run once)"
            ),
            Check::OrdersNotExercised => write!(
                f,
                "no fail-over order was duplicated or lost: the drill tested nothing"
            ),
            Check::PushJobsLost {
                dead_lettered,
                expired,
            } => write!(
                f,
                "push jobs never ran: {dead_lettered} dead-lettered, {expired} expired unseen"
            ),
            Check::PushJobsStalled { secs, bound } => write!(
                f,
                "a throttled push job waited {secs} s (bound {bound} s)"
            ),
            Check::PushHerdNotExercised => write!(
                f,
                "no push job ran or was throttled while the pool was exhausted: the drill tested nothing"
            ),
            Check::AcknowledgedBidsLost { bids } => write!(f, "{bids} acknowledged bids lost"),
            Check::DuplicateBids { bids } => write!(f, "{bids} duplicate bids"),
            Check::NotConverged => write!(f, "the Regions did not converge"),
            Check::HighBidInconsistent => write!(
                f,
                "the high bid differs between Regions or from the acknowledged bids"
            ),
            Check::PingPong { returns } => {
                write!(
                    f,
                    "{returns} returns to the primary during the fault (ping-pong)"
                )
            }
            Check::HistoryViolations { count, kinds } => {
                write!(f, "{count} history violations ({})", kinds.join(", "))
            }
        }
    }
}

/// One kind of health check's times in a drill, lab ms from the fault.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HealthCheckPath {
    /// The decision: the alarm in ALARM, or the fast verdict failing the primary over.
    pub detection_ms: Option<f64>,
    /// The primary's health check turned unhealthy (Route 53 then answers the secondary;
    /// resolvers follow within the TTL).
    pub unhealthy_ms: Option<f64>,
}

/// Both kinds of health check, side by side.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HealthCheckTimes {
    pub alarm: HealthCheckPath,
    pub endpoint: HealthCheckPath,
}

/// A report as pretty JSON at `path`, creating its folder.
pub fn write_pretty_json(path: &Path, value: &impl Serialize) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, serde_json::to_vec_pretty(value)?)?;
    Ok(())
}

/// Record `failure` unless `ok`.
fn fail_unless(failed: &mut Vec<Check>, ok: bool, failure: Check) {
    if !ok {
        failed.push(failure);
    }
}

/// What the authorizer functions of both Regions did over a drill.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AuthorizerFigures {
    pub invocations: u64,
    pub cold_starts: u64,
    /// The most cold starts one Region's function began in one AWS second.
    pub peak_cold_starts_per_second: u64,
    /// Cold starts whose secret reads were all throttled.
    pub init_failures: u64,
    /// `$connect`s answered 500 for an init failure (users' and a reconnect herd's).
    pub handshakes_failed: usize,
    pub secrets_requests: u64,
    pub secrets_throttled: u64,
    /// A reconnect herd's clients authorized, and those that gave up.
    pub herd_connected: u64,
    pub herd_gave_up: u64,
}
