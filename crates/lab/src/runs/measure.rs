//! A drill's measure: its trace in, its report out. No world, no I/O, no clock: everything
//! the report says is derived here from what the run recorded ([`DrillTrace`]), so a figure
//! lives in one place and a new one is written once.

use crate::runs::report::{HealthCheckPath, HealthCheckTimes, Percentiles, Report};
use crate::runs::scenario::Scenario;
use crate::sim::history::{below_an_earlier_bid, Violation};
use crate::sim::judge::Judgement;
use crate::sim::trace::{Answer, Outcome, UserTrace};
use crate::world::fast::HealthCheckKind;
use crate::world::replication::InFlight;
use crate::world::timeline::{Entry, Kind};
use crate::world::{AwsDuration, AwsInstant, PerRegion, RegionId, TimeScale};
use std::collections::{BTreeMap, BTreeSet};
use wsdr_protocol::Amount;

/// What one drill recorded: its settings, the instants it marked (AWS time), the timeline,
/// and the judged trace of every user.
#[derive(Debug)]
pub struct DrillTrace {
    pub scenario: Scenario,
    pub users: usize,
    pub client_fallback: bool,
    pub evacuate_on_failover: bool,
    pub scale: TimeScale,
    pub health_check: HealthCheckKind,
    /// What decides the failover records.
    pub decision_path: crate::world::config::DecisionPath,
    /// What the fail-over orders did (with the fast verdict).
    pub failover_orders: Option<crate::world::orders::OrderStats>,
    /// The fast path ran (the endpoint checks timed beside the alarm).
    pub fast_path: bool,
    pub dns_ttl: AwsDuration,
    pub consistency: wsdr_core::Consistency,
    pub simulated: bool,
    /// The Regions' names (the report's figures name them).
    pub names: PerRegion<String>,
    pub fault: AwsInstant,
    pub heal: AwsInstant,
    /// DNS answered the primary again after the heal.
    pub failed_back: bool,
    /// `failback` and `evacuate`: when the secondary's connections were ended (or
    /// evacuated) to time everyone's return to the primary.
    pub back_on_primary_from: Option<AwsInstant>,
    pub rpo_at_fault: InFlight,
    pub throttled_handshakes_during_move: u64,
    /// Handshakes the secondary's authorizer denied between the fault and the heal.
    pub denied_handshakes_during_move: u64,
    pub authorizer: crate::runs::report::AuthorizerFigures,
    pub pushes: wsdr_core::push::PushTotals,
    pub push_workers: crate::world::mapping::MappingStats,
    pub push_jobs: crate::world::push_jobs::PushJobStats,
    pub timeline: Vec<Entry>,
    pub judgement: Judgement,
    /// Strong mode: the table's own order of accepted bids (amount, Region).
    pub strong_order: Option<Vec<(Amount, RegionId)>>,
    pub no_quorum_refusals: Vec<u64>,
}

impl DrillTrace {
    /// A timeline entry's AWS instant (the timeline stamps lab time: the one conversion).
    fn at(&self, entry: &Entry) -> AwsInstant {
        self.scale.instant(entry.at_ms)
    }

    /// The first timeline entry of `kind` at or after `from`.
    fn first(&self, kind: Kind, from: AwsInstant) -> Option<AwsInstant> {
        self.timeline
            .iter()
            .filter(|e| e.kind == kind && self.at(e) >= from)
            .map(|e| self.at(e))
            .reduce(AwsInstant::min)
    }

    /// AWS ms from the fault to the first entry of `kind` after it.
    fn since_fault(&self, kind: Kind) -> Option<f64> {
        self.first(kind, self.fault).map(|t| t.ms_since(self.fault))
    }

    /// Timeline entries between the fault and the heal.
    fn during_fault(&self) -> impl Iterator<Item = &Entry> {
        self.timeline
            .iter()
            .filter(|e| self.at(e) >= self.fault && self.at(e) < self.heal)
    }

    /// The reports' `*_ms` figures are lab milliseconds, as they have always been: an AWS
    /// duration in milliseconds, divided by the time scale.
    fn lab_ms(&self, aws_ms: f64) -> f64 {
        aws_ms / self.scale.factor()
    }

    fn name(&self, region: RegionId) -> &str {
        &self.names[region]
    }
}

/// The report of a drill (its digest and the real handler times are the caller's: the
/// one is taken over this, the other is this machine's speed).
pub fn measure(trace: &DrillTrace) -> Report {
    let Judgement {
        trace: run,
        violations,
        ..
    } = &trace.judgement;
    let scale = trace.scale;
    let bids = BidFigures::of(trace);
    let users = UserFigures::of(trace);
    let times = TimelineFigures::of(trace);
    let split = split_between_regions(&run.users, &bids.accepted, trace.fault, trace.heal);
    // Strong mode: the table's own order is the truth (answers can arrive out of it).
    let accepted_below_other_region = trace
        .strong_order
        .as_ref()
        .map_or(split.accepted_below_other_region, |order| {
            below_an_earlier_bid(order)
        });
    let lab_ms = |aws_ms: f64| trace.lab_ms(aws_ms);
    let lab_ms_of = |aws: &[f64]| aws.iter().map(|ms| lab_ms(*ms)).collect::<Vec<f64>>();
    let mut report = Report {
        scenario: trace.scenario,
        clients: trace.users,
        time_scale: scale.factor(),
        restored: users.rtos_aws_ms.len(),
        rto_ms: Percentiles::of(&lab_ms_of(&users.rtos_aws_ms)),
        rto_aws_s: Percentiles::of(&users.restores_aws_s),
        restores_aws_s: users.restores_aws_s,
        connections_aws: connections_per_region(trace),
        detection_ms: times.detection_aws_ms.map(lab_ms),
        health_check: trace.health_check,
        decision_path: trace.decision_path,
        failover_orders: trace.failover_orders.clone(),
        dns_ttl_aws_s: trace.dns_ttl.as_secs_f64(),
        health_checks: times.health_checks.map(|checks| checks.in_lab_ms(trace)),
        dns_flip_ms: times.dns_flip_aws_ms.map(lab_ms),
        failback_ms: times.failback_aws_ms.map(lab_ms),
        dns_flips_during_fault: times.dns_flips_during_fault,
        dns_answers_to_failed_primary: times.dns_to_failed_primary,
        lost_acknowledged_bids: bids.lost_acknowledged,
        acknowledged_bids_lost_with_region: run.lost_acknowledged(),
        duplicate_bids: bids.duplicates,
        acks_for_a_replayed_bid_in_both_regions: bids.accepted_twice,
        acknowledged_bids: bids.acknowledged,
        recorded_bids: run.regions.first().map_or(0, |r| r.bids.len()),
        high_bid_consistent: bids.high_bid_consistent,
        converged: run.converged,
        rpo_items_at_fault: trace.rpo_at_fault.items,
        rpo_oldest_ms_at_fault: trace.rpo_at_fault.oldest_ms,
        client_fallback: trace.client_fallback,
        disconnects_during_fault: users.disconnects_during_fault,
        users_disconnected_during_fault: users.disconnected_during_fault,
        returns_to_primary_during_fault: users.returns_to_primary_during_fault,
        endpoint_moves: run.users.iter().map(|u| u.moves).sum(),
        split_ms: lab_ms(split.duration_aws_ms),
        split_aws_s: split.duration_aws_ms / 1000.0,
        accepted_below_other_region,
        violations: violations.clone(),
        timeline: trace.timeline.clone(),
        users_back_on_primary: users.back_on_primary_aws_ms.as_ref().map(Vec::len),
        users_seeing_errors: run
            .users
            .iter()
            .filter(|u| u.unplanned_disconnects > 0)
            .count(),
        evacuate_on_failover: trace.evacuate_on_failover,
        throttled_handshakes_during_move: trace.throttled_handshakes_during_move as usize,
        denied_handshakes_during_move: trace.denied_handshakes_during_move as usize,
        authorizer: trace.authorizer.clone(),
        pushes: trace.pushes.clone(),
        push_workers: trace.push_workers,
        push_jobs: trace.push_jobs,
        back_on_primary_ms: Percentiles::of(&lab_ms_of(
            users.back_on_primary_aws_ms.as_deref().unwrap_or_default(),
        )),
        failed_checks: Vec::new(),
        consistency: trace.consistency.to_string(),
        bid_latency_aws_ms: Percentiles::of(&bids.latency_aws_ms),
        bid_handler_ms: Percentiles::default(),
        redirected_bids: bids.redirected,
        no_quorum_refusals: trace.no_quorum_refusals.clone(),
        clock: if trace.simulated {
            "simulated".into()
        } else {
            "real".into()
        },
        digest: String::new(),
    };
    report.failed_checks = report.checks().iter().map(ToString::to_string).collect();
    report
}

/// An accepted answer: when, where, how much.
struct Accepted {
    at: AwsInstant,
    region: RegionId,
    amount: Amount,
}

/// What became of the bids: from the judged trace's operations and violations.
struct BidFigures {
    /// Distinct acknowledged bids missing or altered (no lost Region explains them).
    lost_acknowledged: usize,
    /// Distinct bids recorded that nobody placed, or placed twice.
    duplicates: usize,
    high_bid_consistent: bool,
    acknowledged: usize,
    accepted_twice: usize,
    /// Every `accepted` answer.
    accepted: Vec<Accepted>,
    latency_aws_ms: Vec<f64>,
    redirected: usize,
}

impl BidFigures {
    fn of(trace: &DrillTrace) -> Self {
        let Judgement {
            trace: run,
            violations,
            ..
        } = &trace.judgement;
        let ops = &run.ops;
        let distinct = |keep: fn(&Violation) -> bool| {
            violations
                .iter()
                .filter(|v| keep(v))
                .filter_map(Violation::bid)
                .collect::<BTreeSet<_>>()
                .len()
        };
        // A second `accepted` after the bid had been acknowledged: a replay taken again.
        let accepted_twice = ops
            .iter()
            .filter(|op| {
                let mut acknowledged = false;
                op.answers.iter().any(|reply| {
                    let twice = acknowledged && reply.answer == Answer::Accepted;
                    acknowledged |= reply.answer.acknowledges();
                    twice
                })
            })
            .count();
        Self {
            // The kit's rules over the bids as ops: an acknowledged bid missing or altered is
            // an acknowledged op missing; a record nobody placed, or placed twice, a copy no
            // write made.
            lost_acknowledged: distinct(|v| matches!(v, Violation::AcknowledgedOpMissing { .. })),
            duplicates: distinct(|v| matches!(v, Violation::OpNotWritten { .. })),
            high_bid_consistent: !violations.iter().any(|v| {
                matches!(
                    v,
                    Violation::HighBidWrong { .. }
                        | Violation::WinnersDiffer
                        | Violation::HighAboveAcknowledged { .. }
                )
            }),
            acknowledged: run.count(Outcome::Ok),
            accepted_twice,
            accepted: ops
                .iter()
                .flat_map(|op| {
                    op.answers
                        .iter()
                        .filter(|reply| reply.answer == Answer::Accepted)
                        .filter_map(move |reply| {
                            Some(Accepted {
                                at: reply.at,
                                region: reply.region?,
                                amount: op.amount,
                            })
                        })
                })
                .collect(),
            // Bids answered on the connection they were sent on (not queued offline, not
            // resent after a reconnect): the time the Region took to decide, plus the round
            // trip. Only a simulation's times are AWS time; a real-time lab's are this
            // machine's CPU time.
            latency_aws_ms: ops
                .iter()
                .filter(|_| trace.simulated)
                .filter_map(|op| {
                    op.answers
                        .first()
                        .filter(|reply| !reply.reconnected)
                        .map(|reply| reply.at.ms_since(op.invoked))
                })
                .collect(),
            redirected: ops
                .iter()
                .flat_map(|op| &op.answers)
                .filter(|reply| reply.answer == Answer::Redirected)
                .count(),
        }
    }
}

/// What the users lived through: restores, disconnects, returns.
struct UserFigures {
    /// Fault -> state restored in the secondary, AWS ms, per restored user.
    rtos_aws_ms: Vec<f64>,
    /// The same in AWS seconds, sorted.
    restores_aws_s: Vec<f64>,
    /// `failback` / `evacuate`: each returned user's time back on the primary, AWS ms.
    back_on_primary_aws_ms: Option<Vec<f64>>,
    disconnects_during_fault: usize,
    disconnected_during_fault: usize,
    returns_to_primary_during_fault: usize,
}

impl UserFigures {
    fn of(trace: &DrillTrace) -> Self {
        let users = &trace.judgement.trace.users;
        let (fault, heal) = (trace.fault, trace.heal);
        let restore_after = |u: &UserTrace, region: RegionId, after: AwsInstant| {
            u.first_restore(region, after).map(|at| at.ms_since(after))
        };
        let rtos_aws_ms: Vec<f64> = users
            .iter()
            .filter_map(|u| restore_after(u, RegionId::Secondary, fault))
            .collect();
        let mut restores_aws_s: Vec<f64> = rtos_aws_ms.iter().map(|ms| ms / 1000.0).collect();
        restores_aws_s.sort_by(f64::total_cmp);
        let disconnects_in_fault = |u: &UserTrace| {
            u.disconnects
                .iter()
                .filter(|d| **d >= fault && **d < heal)
                .count()
        };
        // Ping-pong: back on the primary after having been restored in the secondary, while
        // the fault lasts.
        let returns_to_primary_during_fault = users
            .iter()
            .map(|u| {
                let Some(first_secondary) = u.first_restore(RegionId::Secondary, fault) else {
                    return 0;
                };
                u.restores
                    .iter()
                    .filter(|r| {
                        r.at > first_secondary && r.at < heal && r.region == RegionId::Primary
                    })
                    .count()
            })
            .sum();
        Self {
            back_on_primary_aws_ms: trace.back_on_primary_from.map(|from| {
                users
                    .iter()
                    .filter_map(|u| restore_after(u, RegionId::Primary, from))
                    .collect()
            }),
            rtos_aws_ms,
            restores_aws_s,
            disconnects_during_fault: users.iter().map(disconnects_in_fault).sum(),
            disconnected_during_fault: users.iter().filter(|u| disconnects_in_fault(u) > 0).count(),
            returns_to_primary_during_fault,
        }
    }
}

/// What the timeline says of detection and DNS, AWS ms from the fault (failback: from the
/// heal).
struct TimelineFigures {
    detection_aws_ms: Option<f64>,
    health_checks: Option<HealthCheckTimes>,
    dns_flip_aws_ms: Option<f64>,
    failback_aws_ms: Option<f64>,
    dns_flips_during_fault: usize,
    dns_to_failed_primary: usize,
}

impl HealthCheckTimes {
    /// The same times, AWS ms in, as the report writes them (lab ms).
    fn in_lab_ms(self, trace: &DrillTrace) -> Self {
        let lab = |path: HealthCheckPath| HealthCheckPath {
            detection_ms: path.detection_ms.map(|ms| trace.lab_ms(ms)),
            unhealthy_ms: path.unhealthy_ms.map(|ms| trace.lab_ms(ms)),
        };
        Self {
            alarm: lab(self.alarm),
            endpoint: lab(self.endpoint),
        }
    }
}

/// DNS flips to the primary while a fault was on (between a fault and the next heal, from
/// the drill's fault to its heal): the name sent users to a Region still failed. A flapping
/// primary's fine spells are heals, so following it is not counted here.
fn dns_to_failed_primary(trace: &DrillTrace) -> usize {
    let to_primary = format!("resolver now answers {}", trace.name(RegionId::Primary));
    let mut failed = false;
    let mut count = 0;
    for e in trace.during_fault() {
        match e.kind {
            Kind::Fault => failed = true,
            Kind::Heal => failed = false,
            Kind::DnsFlip if failed && e.detail == to_primary => count += 1,
            _ => {}
        }
    }
    count
}

impl TimelineFigures {
    fn of(trace: &DrillTrace) -> Self {
        let detection_aws_ms = trace.since_fault(Kind::Alarm);
        Self {
            detection_aws_ms,
            health_checks: trace.fast_path.then(|| HealthCheckTimes {
                alarm: HealthCheckPath {
                    detection_ms: detection_aws_ms,
                    unhealthy_ms: trace.since_fault(Kind::HealthUnhealthy),
                },
                endpoint: HealthCheckPath {
                    detection_ms: trace.since_fault(Kind::FastFailover),
                    unhealthy_ms: trace.since_fault(Kind::EndpointUnhealthy),
                },
            }),
            dns_flip_aws_ms: trace.since_fault(Kind::DnsFlip),
            failback_aws_ms: trace
                .failed_back
                .then(|| trace.first(Kind::DnsFlip, trace.heal))
                .flatten()
                .map(|t| t.ms_since(trace.heal)),
            dns_flips_during_fault: trace
                .during_fault()
                .filter(|e| e.kind == Kind::DnsFlip)
                .count(),
            dns_to_failed_primary: dns_to_failed_primary(trace),
        }
    }
}

/// Users served by each Region over time, keyed by the Region's name: (AWS seconds since the
/// fault, users) at every change. A user is served from a state restore until its next
/// disconnect or restore.
fn connections_per_region(trace: &DrillTrace) -> BTreeMap<String, Vec<(f64, usize)>> {
    let mut edges: Vec<(AwsInstant, RegionId, i64)> = Vec::new();
    for user in &trace.judgement.trace.users {
        for (region, start, end) in user.served() {
            edges.push((start, region, 1));
            if let Some(end) = end {
                edges.push((end, region, -1));
            }
        }
    }
    edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.2.cmp(&b.2)));
    let mut live: BTreeMap<RegionId, i64> = BTreeMap::new();
    let mut series: BTreeMap<String, Vec<(f64, usize)>> = BTreeMap::new();
    for (at, region, delta) in edges {
        let count = live.entry(region).or_default();
        *count = (*count + delta).max(0);
        let users = usize::try_from(*count).unwrap_or(0);
        let point = (at.secs_since(trace.fault), users);
        let points = series.entry(trace.name(region).to_owned()).or_default();
        // Edges at one instant (a restore ending where the next begins) make one step.
        match points.last_mut() {
            Some(last) if last.0 == point.0 => *last = point,
            _ => points.push(point),
        }
    }
    series
}

/// What clients split between Regions cost.
struct Split {
    /// AWS ms, between the fault and the heal, during which users were being served by
    /// both Regions at once.
    duration_aws_ms: f64,
    /// Bids accepted by one Region after the other Region had accepted an equal or higher
    /// one: a single Region would have answered `too_low`. The bidder was told `accepted`
    /// and then saw the higher bid arrive by replication. Correctness holds (the high bid is
    /// derived); this is the freshness price of the split.
    accepted_below_other_region: usize,
}

/// A user is served by a Region from a state restore there until its next disconnect.
fn split_between_regions(
    users: &[UserTrace],
    accepted: &[Accepted],
    from: AwsInstant,
    to: AwsInstant,
) -> Split {
    // (time, region, +1/-1) for each user's service intervals, clipped to [from, to].
    let mut edges: Vec<(AwsInstant, RegionId, i32)> = Vec::new();
    for user in users {
        for (region, start, end) in user.served() {
            let (start, end) = (start.max(from), end.unwrap_or(AwsInstant::NEVER).min(to));
            if start < end {
                edges.push((start, region, 1));
                edges.push((end, region, -1));
            }
        }
    }
    edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.2.cmp(&b.2)));
    let mut live: BTreeMap<RegionId, i32> = BTreeMap::new();
    let mut duration_aws_ms = 0.0;
    let mut last = from;
    for (at, region, delta) in edges {
        if live.values().filter(|n| **n > 0).count() >= 2 {
            duration_aws_ms += at.ms_since(last);
        }
        *live.entry(region).or_default() += delta;
        last = at;
    }
    let mut accepted: Vec<&Accepted> = accepted.iter().collect();
    accepted.sort_by(|a, b| a.at.total_cmp(&b.at));
    let mut best: BTreeMap<RegionId, Amount> = BTreeMap::new();
    let mut accepted_below_other_region = 0;
    for bid in accepted {
        if best
            .iter()
            .any(|(r, high)| *r != bid.region && *high >= bid.amount)
        {
            accepted_below_other_region += 1;
        }
        let high = best.entry(bid.region).or_insert(bid.amount);
        *high = (*high).max(bid.amount);
    }
    Split {
        duration_aws_ms,
        accepted_below_other_region,
    }
}
