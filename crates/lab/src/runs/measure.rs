//! A drill's measure: its trace in, its report out. No world, no I/O, no clock: everything
//! the report says is derived here from what the run recorded ([`DrillTrace`]), so a figure
//! lives in one place and a new one is written once.

use crate::runs::report::{HealthCheckPath, HealthCheckTimes, Percentiles, Report};
use crate::runs::scenario::Scenario;
use crate::sim::history::{below_an_earlier_bid, lost_acknowledged, Answer, Outcome, Violation};
use crate::sim::judge::Judgement;
use crate::sim::users::UserRecord;
use crate::world::fast::HealthCheckKind;
use crate::world::replication::InFlight;
use crate::world::timeline::{Entry, Kind};
use crate::world::{AwsDuration, TimeScale};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// What one drill recorded: its settings, the instants it marked (lab ms since the lab
/// started), the timeline, and the judged history of every user.
#[derive(Debug)]
pub struct DrillTrace {
    pub scenario: Scenario,
    pub users: usize,
    pub client_fallback: bool,
    pub evacuate_on_failover: bool,
    pub scale: TimeScale,
    pub health_check: HealthCheckKind,
    /// The fast path ran (the endpoint checks timed beside the alarm).
    pub fast_path: bool,
    pub dns_ttl: AwsDuration,
    pub consistency: wsdr_core::Consistency,
    pub simulated: bool,
    /// The Regions' names.
    pub primary: String,
    pub secondary: String,
    pub fault_ms: f64,
    pub heal_ms: f64,
    /// DNS answered the primary again after the heal.
    pub failed_back: bool,
    /// `failback` and `evacuate`: when the secondary's connections were ended (or
    /// evacuated) to time everyone's return to the primary.
    pub back_on_primary_from_ms: Option<f64>,
    pub rpo_at_fault: InFlight,
    pub throttled_handshakes_during_move: u64,
    /// Handshakes the secondary's authorizer denied between the fault and the heal.
    pub denied_handshakes_during_move: u64,
    pub timeline: Vec<Entry>,
    pub judgement: Judgement,
    /// Strong mode: the table's own order of accepted bids (amount, Region).
    pub strong_order: Option<Vec<(u64, String)>>,
    pub no_quorum_refusals: Vec<u64>,
}

impl DrillTrace {
    /// The first timeline entry of `kind` at or after `from_ms`, lab ms.
    fn first(&self, kind: Kind, from_ms: f64) -> Option<f64> {
        self.timeline
            .iter()
            .filter(|e| e.kind == kind && e.at_ms >= from_ms)
            .map(|e| e.at_ms)
            .reduce(f64::min)
    }

    /// Lab ms from the fault to the first entry of `kind` after it.
    fn since_fault(&self, kind: Kind) -> Option<f64> {
        self.first(kind, self.fault_ms).map(|t| t - self.fault_ms)
    }
}

/// The report of a drill (its digest and the real handler times are the caller's: the
/// one is taken over this, the other is this machine's speed).
pub fn measure(trace: &DrillTrace) -> Report {
    let Judgement {
        converged,
        regions,
        ops,
        records: logs,
        lost,
        violations,
        ..
    } = &trace.judgement;
    let scale = trace.scale;
    let bids = BidFigures::of(trace);
    let users = UserFigures::of(trace);
    let times = TimelineFigures::of(trace);
    let split = split_between_regions(logs, &bids.accepted, trace.fault_ms, trace.heal_ms);
    // Strong mode: the table's own order is the truth (answers can arrive out of it).
    let accepted_below_other_region = trace
        .strong_order
        .as_ref()
        .map_or(split.accepted_below_other_region, |order| {
            below_an_earlier_bid(order)
        });
    let mut report = Report {
        scenario: trace.scenario,
        clients: trace.users,
        time_scale: scale.factor(),
        restored: users.rtos.len(),
        rto_ms: Percentiles::of(&users.rtos),
        rto_aws_s: Percentiles::of(&users.restores_aws_s),
        restores_aws_s: users.restores_aws_s,
        connections_aws: connections_per_region(logs, trace.fault_ms, scale.factor()),
        detection_ms: times.detection_ms,
        health_check: trace.health_check,
        dns_ttl_aws_s: trace.dns_ttl.as_secs_f64(),
        health_checks: times.health_checks,
        dns_flip_ms: times.dns_flip_ms,
        failback_ms: times.failback_ms,
        dns_flips_during_fault: times.dns_flips_during_fault,
        dns_answers_to_failed_primary: times.dns_to_failed_primary,
        lost_acknowledged_bids: bids.lost_acknowledged,
        acknowledged_bids_lost_with_region: lost_acknowledged(ops, regions, lost),
        duplicate_bids: bids.duplicates,
        acks_for_a_replayed_bid_in_both_regions: bids.accepted_twice,
        acknowledged_bids: bids.acknowledged,
        recorded_bids: regions.first().map_or(0, |r| r.bids.len()),
        high_bid_consistent: bids.high_bid_consistent,
        converged: *converged,
        rpo_items_at_fault: trace.rpo_at_fault.items,
        rpo_oldest_ms_at_fault: trace.rpo_at_fault.oldest_ms,
        client_fallback: trace.client_fallback,
        disconnects_during_fault: users.disconnects_during_fault,
        users_disconnected_during_fault: users.disconnected_during_fault,
        returns_to_primary_during_fault: users.returns_to_primary_during_fault,
        endpoint_moves: logs.iter().map(|l| l.moves).sum(),
        split_ms: split.duration_ms,
        split_aws_s: scale.aws_secs(split.duration_ms),
        accepted_below_other_region,
        violations: violations.clone(),
        timeline: trace.timeline.clone(),
        users_back_on_primary: users.back_on_primary.as_ref().map(Vec::len),
        users_seeing_errors: logs.iter().filter(|l| l.unplanned_disconnects > 0).count(),
        evacuate_on_failover: trace.evacuate_on_failover,
        throttled_handshakes_during_move: trace.throttled_handshakes_during_move as usize,
        denied_handshakes_during_move: trace.denied_handshakes_during_move as usize,
        back_on_primary_ms: Percentiles::of(users.back_on_primary.as_deref().unwrap_or_default()),
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

/// What became of the bids: from the judged history's operations and violations.
struct BidFigures {
    /// Distinct acknowledged bids missing or altered (no lost Region explains them).
    lost_acknowledged: usize,
    /// Distinct bids recorded that nobody placed, or placed twice.
    duplicates: usize,
    high_bid_consistent: bool,
    acknowledged: usize,
    accepted_twice: usize,
    /// Every `accepted` answer: (lab ms, Region, amount).
    accepted: Vec<(f64, String, u64)>,
    latency_aws_ms: Vec<f64>,
    redirected: usize,
}

impl BidFigures {
    fn of(trace: &DrillTrace) -> Self {
        let Judgement {
            ops, violations, ..
        } = &trace.judgement;
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
                op.answers.iter().any(|(_, answer, _, _)| {
                    let twice = acknowledged && *answer == Answer::Accepted;
                    acknowledged |= matches!(answer, Answer::Accepted | Answer::Duplicate);
                    twice
                })
            })
            .count();
        Self {
            lost_acknowledged: distinct(|v| {
                matches!(
                    v,
                    Violation::AcknowledgedBidMissing { .. }
                        | Violation::AcknowledgedBidAltered { .. }
                )
            }),
            duplicates: distinct(|v| matches!(v, Violation::UnexplainedRecord { .. })),
            high_bid_consistent: !violations.iter().any(|v| {
                matches!(
                    v,
                    Violation::HighBidWrong { .. }
                        | Violation::WinnersDiffer
                        | Violation::HighAboveAcknowledged { .. }
                )
            }),
            acknowledged: ops.iter().filter(|o| o.outcome() == Outcome::Ok).count(),
            accepted_twice,
            accepted: ops
                .iter()
                .flat_map(|op| {
                    op.answers
                        .iter()
                        .filter(|a| a.1 == Answer::Accepted)
                        .map(move |a| (a.0, a.2.clone(), op.amount))
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
                        .filter(|a| !a.3)
                        .map(|a| trace.scale.aws_ms(a.0 - op.invoked_ms))
                })
                .collect(),
            redirected: ops
                .iter()
                .flat_map(|op| &op.answers)
                .filter(|a| a.1 == Answer::Redirected)
                .count(),
        }
    }
}

/// What the users lived through: restores, disconnects, returns.
struct UserFigures {
    /// Fault -> state restored in the secondary, lab ms, per restored user.
    rtos: Vec<f64>,
    /// The same in AWS seconds, sorted.
    restores_aws_s: Vec<f64>,
    /// `failback` / `evacuate`: each returned user's time back on the primary, lab ms.
    back_on_primary: Option<Vec<f64>>,
    disconnects_during_fault: usize,
    disconnected_during_fault: usize,
    returns_to_primary_during_fault: usize,
}

impl UserFigures {
    fn of(trace: &DrillTrace) -> Self {
        let logs = &trace.judgement.records;
        let (fault_ms, heal_ms) = (trace.fault_ms, trace.heal_ms);
        let first_restore_after = |l: &UserRecord, after: f64, region: &str| {
            l.restores
                .iter()
                .find(|(at, r)| *at >= after && r == region)
                .map(|(at, _)| at - after)
        };
        let rtos: Vec<f64> = logs
            .iter()
            .filter_map(|l| first_restore_after(l, fault_ms, &trace.secondary))
            .collect();
        let mut restores_aws_s: Vec<f64> =
            rtos.iter().map(|ms| trace.scale.aws_secs(*ms)).collect();
        restores_aws_s.sort_by(f64::total_cmp);
        let disconnects_in_fault = |l: &UserRecord| {
            l.disconnects
                .iter()
                .filter(|d| **d >= fault_ms && **d < heal_ms)
                .count()
        };
        // Ping-pong: back on the primary after having been restored in the secondary, while
        // the fault lasts.
        let returns_to_primary_during_fault = logs
            .iter()
            .map(|l| {
                let Some(first_secondary) = l
                    .restores
                    .iter()
                    .find(|(at, r)| *at >= fault_ms && *r == trace.secondary)
                    .map(|r| r.0)
                else {
                    return 0;
                };
                l.restores
                    .iter()
                    .filter(|(at, r)| *at > first_secondary && *at < heal_ms && *r == trace.primary)
                    .count()
            })
            .sum();
        Self {
            back_on_primary: trace.back_on_primary_from_ms.map(|from| {
                logs.iter()
                    .filter_map(|l| first_restore_after(l, from, &trace.primary))
                    .collect()
            }),
            rtos,
            restores_aws_s,
            disconnects_during_fault: logs.iter().map(disconnects_in_fault).sum(),
            disconnected_during_fault: logs.iter().filter(|l| disconnects_in_fault(l) > 0).count(),
            returns_to_primary_during_fault,
        }
    }
}

/// What the timeline says of detection and DNS, lab ms from the fault (failback: from the
/// heal).
struct TimelineFigures {
    detection_ms: Option<f64>,
    health_checks: Option<HealthCheckTimes>,
    dns_flip_ms: Option<f64>,
    failback_ms: Option<f64>,
    dns_flips_during_fault: usize,
    dns_to_failed_primary: usize,
}

/// DNS flips to the primary while a fault was on (between a fault and the next heal, from
/// the drill's fault to its heal): the name sent users to a Region still failed. A flapping
/// primary's fine spells are heals, so following it is not counted here.
fn dns_to_failed_primary(trace: &DrillTrace) -> usize {
    let to_primary = format!("resolver now answers {}", trace.primary);
    let mut failed = false;
    let mut count = 0;
    for e in trace
        .timeline
        .iter()
        .filter(|e| e.at_ms >= trace.fault_ms && e.at_ms < trace.heal_ms)
    {
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
        let detection_ms = trace.since_fault(Kind::Alarm);
        Self {
            detection_ms,
            health_checks: trace.fast_path.then(|| HealthCheckTimes {
                alarm: HealthCheckPath {
                    detection_ms,
                    unhealthy_ms: trace.since_fault(Kind::HealthUnhealthy),
                },
                endpoint: HealthCheckPath {
                    detection_ms: trace.since_fault(Kind::FastFailover),
                    unhealthy_ms: trace.since_fault(Kind::EndpointUnhealthy),
                },
            }),
            dns_flip_ms: trace.since_fault(Kind::DnsFlip),
            failback_ms: trace
                .failed_back
                .then(|| trace.first(Kind::DnsFlip, trace.heal_ms))
                .flatten()
                .map(|t| t - trace.heal_ms),
            dns_flips_during_fault: trace
                .timeline
                .iter()
                .filter(|e| {
                    e.kind == Kind::DnsFlip && e.at_ms >= trace.fault_ms && e.at_ms < trace.heal_ms
                })
                .count(),
            dns_to_failed_primary: dns_to_failed_primary(trace),
        }
    }
}

/// Users served by each Region over time: (AWS seconds since the fault, users) at every
/// change. A user is served from a state restore until its next disconnect or restore.
fn connections_per_region(
    logs: &[UserRecord],
    fault_ms: f64,
    scale: f64,
) -> BTreeMap<String, Vec<(f64, usize)>> {
    let mut edges: Vec<(f64, String, i64)> = Vec::new();
    for log in logs {
        for (i, (start, region)) in log.restores.iter().enumerate() {
            edges.push((*start, region.clone(), 1));
            let next_restore = log.restores.get(i + 1).map(|r| r.0);
            let disconnect = log.disconnects.iter().copied().find(|d| *d >= *start);
            let end = match (disconnect, next_restore) {
                (Some(d), Some(r)) => Some(d.min(r)),
                (d, r) => d.or(r),
            };
            if let Some(end) = end {
                edges.push((end, region.clone(), -1));
            }
        }
    }
    edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.2.cmp(&b.2)));
    let mut live: BTreeMap<String, i64> = BTreeMap::new();
    let mut series: BTreeMap<String, Vec<(f64, usize)>> = BTreeMap::new();
    for (at, region, delta) in edges {
        let count = live.entry(region.clone()).or_default();
        *count = (*count + delta).max(0);
        let users = usize::try_from(*count).unwrap_or(0);
        let point = ((at - fault_ms) * scale / 1000.0, users);
        let points = series.entry(region).or_default();
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
    /// Lab ms, between the fault and the heal, during which users were being served by
    /// both Regions at once.
    duration_ms: f64,
    /// Bids accepted by one Region after the other Region had accepted an equal or higher
    /// one: a single Region would have answered `too_low`. The bidder was told `accepted`
    /// and then saw the higher bid arrive by replication. Correctness holds (the high bid is
    /// derived); this is the freshness price of the split.
    accepted_below_other_region: usize,
}

/// A user is served by a Region from a state restore there until its next disconnect.
fn split_between_regions(
    logs: &[UserRecord],
    accepted: &[(f64, String, u64)],
    from_ms: f64,
    to_ms: f64,
) -> Split {
    // (time, region, +1/-1) for each user's service intervals, clipped to [from, to].
    let mut edges: Vec<(f64, String, i32)> = Vec::new();
    for log in logs {
        for (i, (start, region)) in log.restores.iter().enumerate() {
            let next_restore = log.restores.get(i + 1).map(|r| r.0).unwrap_or(f64::MAX);
            let end = log
                .disconnects
                .iter()
                .copied()
                .find(|d| *d >= *start)
                .unwrap_or(f64::MAX)
                .min(next_restore);
            let (start, end) = (start.max(from_ms), end.min(to_ms));
            if start < end {
                edges.push((start, region.clone(), 1));
                edges.push((end, region.clone(), -1));
            }
        }
    }
    edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.2.cmp(&b.2)));
    let mut live: BTreeMap<String, i32> = BTreeMap::new();
    let mut duration_ms = 0.0;
    let mut last = from_ms;
    for (at, region, delta) in edges {
        if live.values().filter(|n| **n > 0).count() >= 2 {
            duration_ms += at - last;
        }
        *live.entry(region).or_default() += delta;
        last = at;
    }
    let mut accepted: Vec<&(f64, String, u64)> = accepted.iter().collect();
    accepted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut best: HashMap<&str, u64> = HashMap::new();
    let mut accepted_below_other_region = 0;
    for (_, region, amount) in accepted {
        if best
            .iter()
            .any(|(r, high)| *r != region.as_str() && *high >= *amount)
        {
            accepted_below_other_region += 1;
        }
        let high = best.entry(region.as_str()).or_default();
        *high = (*high).max(*amount);
    }
    Split {
        duration_ms,
        accepted_below_other_region,
    }
}
