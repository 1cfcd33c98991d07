//! Failover drills: simulated users bidding through the front door while a scenario breaks
//! the primary; then the checks and the report.

use crate::runs::report::{HealthCheckPath, HealthCheckTimes, Percentiles, Report};
pub use crate::runs::scenario::Scenario;
use crate::sim::history::{below_an_earlier_bid, lost_acknowledged, Answer, Outcome, Violation};
use crate::sim::judge::{judge, Judgement};
use crate::sim::users::{Behaviour, Population, UserRecord};
use crate::world::clock::wait_for;
use crate::world::timeline::Kind;
use crate::world::{Fault, LabConfig, RegionId, World};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use wsdr_protocol::AuctionId;

/// Drill settings.
#[derive(Debug, Clone)]
pub struct DrillConfig {
    pub scenario: Scenario,
    pub users: usize,
    pub lab: LabConfig,
    pub seed: u64,
    /// AWS seconds of steady bidding before the fault.
    pub warm_bidding_secs: f64,
    /// AWS seconds between a user's bids (mean).
    pub bid_every_secs: f64,
    /// Bound on the whole recovery, AWS seconds.
    pub recovery_timeout_secs: f64,
    pub progress: bool,
    /// Give the simulated users the Regions' own endpoints (client-assisted failover).
    pub client_fallback: bool,
    /// Once the failover decision has moved the name, tell the connections still on the
    /// primary to move (`moveTo`, [`World::start_failover_evacuator`]). On by default.
    pub evacuate_on_failover: bool,
}

impl Default for DrillConfig {
    fn default() -> Self {
        Self {
            scenario: Scenario::Throttle,
            users: 50,
            lab: LabConfig::default(),
            seed: 1,
            warm_bidding_secs: 30.0,
            bid_every_secs: 20.0,
            recovery_timeout_secs: 900.0,
            progress: false,
            client_fallback: false,
            evacuate_on_failover: true,
        }
    }
}

/// Run one drill end to end.
pub async fn run(config: DrillConfig) -> anyhow::Result<Report> {
    let scale = config.lab.scale;
    let lab = Arc::new(World::builder().config(config.lab.clone()).start().await?);
    if config.evacuate_on_failover {
        lab.start_failover_evacuator();
    }
    let secondary = lab.name(RegionId::Secondary).to_owned();
    let timeline = lab.timeline().clone();

    // Steady state: the alarm has evaluated OK and the name resolves to the primary.
    let steady = wait_for(scale.secs(600.0), || {
        lab.healthy(RegionId::Primary) && lab.resolve() == RegionId::Primary
    })
    .await;
    anyhow::ensure!(
        steady,
        "the lab never reached steady state (alarm OK, DNS on the primary)"
    );
    timeline.record(
        Kind::Note,
        format!("steady state; starting {} users", config.users),
    );

    let auction = AuctionId::new("lot-1")?;
    let fallback = config.client_fallback;
    let users = Population::through_front_door(
        &lab,
        config.users,
        &auction,
        Behaviour {
            narrate: true,
            ..Behaviour::honest(config.bid_every_secs)
        },
        config.seed,
        move |_| fallback,
    );
    let all_restored_on = |region: &str, after: f64| {
        users
            .records()
            .iter()
            .all(|r| r.restores.iter().any(|(at, r)| *at >= after && r == region))
    };
    let connected = wait_for(scale.secs(300.0), || {
        all_restored_on(&lab.config().regions[0], 0.0)
    })
    .await;
    anyhow::ensure!(connected, "not every user connected to the primary");
    // The fault strikes at a seeded moment within one TTL: where it falls in the resolver's
    // cache period decides how long the old answer lives on, and one shared resolver (the
    // lab's) would otherwise give every run the same luck. Different seeds sample it.
    let phase = {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(config.seed ^ 0x5eed_f00d);
        rng.random::<f64>() * lab.config().dns_ttl.as_secs_f64()
    };
    tokio::time::sleep(scale.secs(config.warm_bidding_secs + phase)).await;

    // The fault.
    let rpo = lab.in_flight();
    let fault_ms = timeline.elapsed().as_secs_f64() * 1000.0;
    let throttled_before = lab.region(RegionId::Secondary).counters().throttled_429;
    crate::runs::plan::play(&lab, &config.scenario.plan()).await;
    let recovered = if config.scenario == Scenario::Blip {
        // Two heartbeat rounds and three alarm periods: time for anything to go wrong.
        tokio::time::sleep(scale.secs(180.0)).await;
        true
    } else {
        wait_for(scale.secs(config.recovery_timeout_secs), || {
            all_restored_on(&secondary, fault_ms)
        })
        .await
    };
    if !recovered {
        timeline.record(
            Kind::Note,
            "recovery timeout: not every user restored on the secondary",
        );
    }
    tokio::time::sleep(scale.secs(20.0)).await;
    // Never heal before the alarm and DNS have had their chance: clients that moved on their
    // own (client-assisted failover) may be back long before them, and a drill that healed
    // first would report no detection, or a DNS flip after the heal.
    if config.scenario != Scenario::Blip {
        wait_for(scale.secs(600.0), || {
            timeline.first(Kind::DnsFlip, fault_ms).is_some()
        })
        .await;
        // Both kinds of health check timed side by side: let the slower one flip too.
        if lab.fast_config().is_some() && config.scenario != Scenario::Evacuate {
            wait_for(scale.secs(600.0), || {
                timeline.first(Kind::HealthUnhealthy, fault_ms).is_some()
                    && timeline.first(Kind::EndpointUnhealthy, fault_ms).is_some()
            })
            .await;
        }
    }

    // Heal and measure failback (the name resolving to the primary again).
    let heal_ms = timeline.elapsed().as_secs_f64() * 1000.0;
    lab.inject(Fault::Heal);
    if config.scenario == Scenario::Evacuate {
        // Maintenance over: the primary back in DNS.
        lab.set_in_service(RegionId::Primary, true);
    }
    let throttled_during_move =
        lab.region(RegionId::Secondary).counters().throttled_429 - throttled_before;
    // A Region lost for good never takes traffic back.
    let failed_back = config.scenario != Scenario::NeverReturns
        && wait_for(scale.secs(900.0), || lab.resolve() == RegionId::Primary).await;
    let failback_ms = failed_back
        .then(|| timeline.first(Kind::DnsFlip, heal_ms))
        .flatten()
        .map(|t| t - heal_ms);

    // Failback of the users: sockets stay where they are until they end. End them on the
    // secondary, as its 2-hour connection limit would, and time everyone's return.
    let mut back_on_primary = None;
    let moves_back =
        matches!(config.scenario, Scenario::Failback | Scenario::Evacuate) && failed_back;
    if moves_back {
        let ended_ms = timeline.elapsed().as_secs_f64() * 1000.0;
        if config.scenario == Scenario::Evacuate {
            // The same operation in reverse: DNS already answers the primary.
            lab.evacuate(RegionId::Secondary, false, "maintenance over")
                .await?;
        } else {
            timeline.record(
                Kind::Note,
                format!("{secondary}: every connection ended (the 2-hour limit, brought forward)"),
            );
            lab.region(RegionId::Secondary).drop_all_sockets();
        }
        wait_for(scale.secs(config.recovery_timeout_secs), || {
            all_restored_on(lab.name(RegionId::Primary), ended_ms)
        })
        .await;
        let returns: Vec<f64> = users
            .records()
            .iter()
            .filter_map(|r| {
                r.restores
                    .iter()
                    .find(|(at, region)| *at >= ended_ms && *region == lab.config().regions[0])
                    .map(|(at, _)| at - ended_ms)
            })
            .collect();
        back_on_primary = Some(returns);
    }

    // Stop bidding, let outstanding answers arrive and replication drain, then check the
    // history like any chaos run.
    let Judgement {
        converged,
        regions,
        ops,
        records: logs,
        lost,
        violations,
        ..
    } = judge(&lab, &users, &auction, scale.secs(15.0)).await?;
    let distinct = |keep: fn(&Violation) -> bool| {
        violations
            .iter()
            .filter(|v| keep(v))
            .filter_map(Violation::bid)
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    };
    let lost_acknowledged_bids = distinct(|v| {
        matches!(
            v,
            Violation::AcknowledgedBidMissing { .. } | Violation::AcknowledgedBidAltered { .. }
        )
    });
    let duplicates = distinct(|v| matches!(v, Violation::UnexplainedRecord { .. }));
    let high_bid_matches = !violations.iter().any(|v| {
        matches!(
            v,
            Violation::HighBidWrong { .. }
                | Violation::WinnersDiffer
                | Violation::HighAboveAcknowledged { .. }
        )
    });
    let acknowledged = ops.iter().filter(|o| o.outcome() == Outcome::Ok).count();
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
    let accepted: Vec<(f64, String, u64)> = ops
        .iter()
        .flat_map(|op| {
            op.answers
                .iter()
                .filter(|a| a.1 == Answer::Accepted)
                .map(move |a| (a.0, a.2.clone(), op.amount))
        })
        .collect();

    let rtos: Vec<f64> = logs
        .iter()
        .filter_map(|l| {
            l.restores
                .iter()
                .find(|(at, r)| *at >= fault_ms && *r == secondary)
                .map(|(at, _)| at - fault_ms)
        })
        .collect();
    let restored = rtos.len();
    let mut restores_aws_s: Vec<f64> = rtos.iter().map(|ms| scale.aws_secs(*ms)).collect();
    restores_aws_s.sort_by(f64::total_cmp);
    let detection_ms = timeline.first(Kind::Alarm, fault_ms).map(|t| t - fault_ms);
    let since_fault = |kind: Kind| timeline.first(kind, fault_ms).map(|t| t - fault_ms);
    let health_checks = lab.fast_config().map(|_| HealthCheckTimes {
        alarm: HealthCheckPath {
            detection_ms,
            unhealthy_ms: since_fault(Kind::HealthUnhealthy),
        },
        endpoint: HealthCheckPath {
            detection_ms: since_fault(Kind::FastFailover),
            unhealthy_ms: since_fault(Kind::EndpointUnhealthy),
        },
    });
    let dns_flip_ms = timeline
        .first(Kind::DnsFlip, fault_ms)
        .map(|t| t - fault_ms);
    let dns_flips = timeline
        .entries()
        .iter()
        .filter(|e| e.kind == Kind::DnsFlip && e.at_ms >= fault_ms && e.at_ms < heal_ms)
        .count();
    let mut split = split_between_regions(&logs, &accepted, fault_ms, heal_ms);
    if let Some(cluster) = &lab.cluster() {
        // Strong mode: the table's own order is the truth (answers can arrive out of it).
        split.accepted_below_other_region =
            below_an_earlier_bid(&cluster.accepted_in_order(&auction));
    }
    // Bids answered on the connection they were sent on (not queued offline, not resent
    // after a reconnect): the time the Region took to decide, plus the round trip. Only a
    // simulation's times are AWS time; a real-time lab's are this machine's CPU time.
    let simulated = lab.config().environment.is_simulated();
    let bid_latency_aws_ms: Vec<f64> = ops
        .iter()
        .filter(|_| simulated)
        .filter_map(|op| {
            op.answers
                .first()
                .filter(|a| !a.3)
                .map(|a| scale.aws_ms(a.0 - op.invoked_ms))
        })
        .collect();
    let redirected_bids = ops
        .iter()
        .flat_map(|op| &op.answers)
        .filter(|a| a.1 == Answer::Redirected)
        .count();
    let primary = &lab.config().regions[0];
    let disconnects_in_fault = |l: &UserRecord| {
        l.disconnects
            .iter()
            .filter(|d| **d >= fault_ms && **d < heal_ms)
            .count()
    };
    let disconnects_during_fault = logs.iter().map(disconnects_in_fault).sum();
    let users_disconnected_during_fault =
        logs.iter().filter(|l| disconnects_in_fault(l) > 0).count();
    // Ping-pong: back on the primary after having been restored in the secondary, while
    // the fault lasts.
    let returns_to_primary_during_fault = logs
        .iter()
        .map(|l| {
            let Some(first_secondary) = l
                .restores
                .iter()
                .find(|(at, r)| *at >= fault_ms && *r == secondary)
                .map(|r| r.0)
            else {
                return 0;
            };
            l.restores
                .iter()
                .filter(|(at, r)| *at > first_secondary && *at < heal_ms && r == primary)
                .count()
        })
        .sum();

    let mut report = Report {
        scenario: config.scenario,
        clients: config.users,
        time_scale: scale.factor(),
        restored,
        rto_ms: Percentiles::of(&rtos),
        rto_aws_s: Percentiles::of(&restores_aws_s),
        restores_aws_s,
        connections_aws: connections_per_region(&logs, fault_ms, scale.factor()),
        detection_ms,
        health_check: lab.config().health_check,
        dns_ttl_aws_s: lab.config().dns_ttl.as_secs_f64(),
        health_checks,
        dns_flip_ms,
        failback_ms,
        dns_flips_during_fault: dns_flips,
        lost_acknowledged_bids,
        acknowledged_bids_lost_with_region: lost_acknowledged(&ops, &regions, &lost),
        duplicate_bids: duplicates,
        acks_for_a_replayed_bid_in_both_regions: accepted_twice,
        acknowledged_bids: acknowledged,
        recorded_bids: regions.first().map_or(0, |r| r.bids.len()),
        high_bid_consistent: high_bid_matches,
        converged,
        rpo_items_at_fault: rpo.items,
        rpo_oldest_ms_at_fault: rpo.oldest_ms,
        client_fallback: config.client_fallback,
        disconnects_during_fault,
        users_disconnected_during_fault,
        returns_to_primary_during_fault,
        endpoint_moves: logs.iter().map(|l| l.moves).sum(),
        split_ms: split.duration_ms,
        split_aws_s: scale.aws_secs(split.duration_ms),
        accepted_below_other_region: split.accepted_below_other_region,
        violations,
        timeline: timeline.entries(),
        users_back_on_primary: back_on_primary.as_ref().map(Vec::len),
        users_seeing_errors: logs.iter().filter(|l| l.unplanned_disconnects > 0).count(),
        evacuate_on_failover: config.evacuate_on_failover,
        throttled_handshakes_during_move: throttled_during_move as usize,
        back_on_primary_ms: Percentiles::of(back_on_primary.as_deref().unwrap_or_default()),
        failed_checks: Vec::new(),
        consistency: lab.config().consistency.to_string(),
        bid_latency_aws_ms: Percentiles::of(&bid_latency_aws_ms),
        // Filled in after the digest: this machine's speed is no function of the seed.
        bid_handler_ms: Percentiles::default(),
        redirected_bids,
        no_quorum_refusals: lab
            .cluster()
            .map(|c| c.refused().into_iter().take(2).collect())
            .unwrap_or_default(),
        clock: if lab.config().environment.is_simulated() {
            "simulated".into()
        } else {
            "real".into()
        },
        digest: String::new(),
    };
    report.failed_checks = report.checks();
    let mut digest = crate::runs::sim::Digest::default();
    digest.add(serde_json::to_string(&report)?.as_bytes());
    report.digest = digest.hex();
    // A simulation's wall time between a handler's awaits is the rest of the simulation's
    // work: its handler times say nothing about a handler, so it reports none.
    let handler_ms: Vec<f64> = lab
        .regions()
        .filter(|_| !simulated)
        .flat_map(|(_, region)| region.bid_handler_ms())
        .collect();
    report.bid_handler_ms = Percentiles::of(&handler_ms);
    Ok(report)
}

impl DrillConfig {
    /// The same drill as a deterministic simulation: AWS time at scale 1, the in-memory
    /// network, every draw from the seed, DynamoDB-like table service times
    /// (crate::runs::sim). The lab's store stays as configured (DynamoDB Local is a real
    /// peer: a drill on it is not a simulation).
    pub fn simulated(mut self) -> Self {
        self.lab = self.lab.simulated(self.seed);
        self
    }
}

/// Run one drill as a deterministic simulation on its own thread ([`DrillConfig::simulated`]).
pub async fn run_simulated(config: DrillConfig) -> anyhow::Result<Report> {
    let config = config.simulated();
    crate::runs::sim::simulate(config.seed, move || run(config)).await
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bid_taken_after_a_higher_one_is_counted() {
        let order = |amounts: &[u64]| -> Vec<(u64, String)> {
            amounts.iter().map(|a| (*a, "r".to_owned())).collect()
        };
        assert_eq!(below_an_earlier_bid(&order(&[100, 110, 120])), 0);
        assert_eq!(below_an_earlier_bid(&order(&[100, 130, 120, 140, 140])), 2);
    }

    /// One vocabulary: the console's name, the CLI's value and the JSON report's are one.
    #[test]
    fn a_scenario_has_one_name_in_the_cli_the_json_and_the_console() {
        use clap::ValueEnum;
        for scenario in Scenario::value_variants() {
            let cli = scenario.to_possible_value().expect("a CLI value");
            let json = serde_json::to_value(scenario).expect("serializes");
            assert_eq!(cli.get_name(), scenario.name());
            assert_eq!(json, scenario.name());
        }
    }
}
