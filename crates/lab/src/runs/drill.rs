//! Failover drills: simulated users bidding through the front door while a scenario breaks
//! the primary; then the checks and the report.

use crate::runs::measure::{measure, DrillTrace};
use crate::runs::report::{Percentiles, Report};
pub use crate::runs::scenario::Scenario;
use crate::sim::judge::judge;
use crate::sim::users::{Behaviour, Population};
use crate::world::timeline::Kind;
use crate::world::{AwsDuration, AwsInstant, Fault, LabConfig, RegionId, UsersView, World};
use std::sync::Arc;
use wsdr_protocol::AuctionId;

/// Drill settings.
#[derive(Debug, Clone)]
pub struct DrillConfig {
    pub scenario: Scenario,
    pub users: usize,
    pub lab: LabConfig,
    pub seed: u64,
    /// Steady bidding before the fault.
    pub warm_bidding: AwsDuration,
    /// Between a user's bids (mean).
    pub bid_every: AwsDuration,
    /// Bound on the whole recovery.
    pub recovery_timeout: AwsDuration,
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
            warm_bidding: AwsDuration::from_secs(30),
            bid_every: AwsDuration::from_secs(20),
            recovery_timeout: AwsDuration::from_secs(900),
            progress: false,
            client_fallback: false,
            evacuate_on_failover: true,
        }
    }
}

/// Run one drill end to end.
pub async fn run(config: DrillConfig) -> anyhow::Result<Report> {
    let scale = config.lab.scale;
    let secs = AwsDuration::from_secs;
    let lab = steady_lab(&config).await?;
    let timeline = lab.timeline().clone();
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
            ..Behaviour::honest(config.bid_every.as_secs_f64())
        },
        config.seed,
        move |_| fallback,
    )?;
    let connected = lab
        .wait_for(secs(300), || {
            all_restored_on(users.as_ref(), RegionId::Primary, AwsInstant::START)
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
    lab.sleep(AwsDuration::from_secs_f64(
        config.warm_bidding.as_secs_f64() + phase,
    ))
    .await;

    // The fault.
    let rpo = lab.in_flight();
    let fault = lab.now();
    let before = lab.region(RegionId::Secondary).counters();
    let throttled_before = (before.throttled_429, before.denied);
    crate::runs::plan::play(&lab, &config.scenario.plan()).await;
    let recovered = recovery(&lab, &config, users.as_ref(), fault).await;
    if !recovered {
        timeline.record(
            Kind::Note,
            "recovery timeout: not every user restored on the secondary",
        );
    }
    lab.sleep(secs(20)).await;
    // Never heal before the alarm and DNS have had their chance: clients that moved on their
    // own (client-assisted failover) may be back long before them, and a drill that healed
    // first would report no detection, or a DNS flip after the heal.
    if config.scenario != Scenario::Blip {
        lab.wait_for(secs(600), || timeline.first(Kind::DnsFlip, fault).is_some())
            .await;
        // Both kinds of health check timed side by side: let the slower one flip too.
        if lab.fast_config().is_some() && config.scenario != Scenario::Evacuate {
            lab.wait_for(secs(600), || {
                timeline.first(Kind::HealthUnhealthy, fault).is_some()
                    && timeline.first(Kind::EndpointUnhealthy, fault).is_some()
            })
            .await;
        }
    }

    let Failback {
        heal,
        failed_back,
        back_on_primary_from,
        throttled_during_move,
        denied_during_move,
    } = heal_and_fail_back(&lab, &config, users.as_ref(), throttled_before).await?;

    // Stop bidding, let outstanding answers arrive and replication drain, then check the
    // history like any chaos run; everything after is measured from the trace alone.
    let judgement = judge(&lab, &users, &auction, lab.lab_time(secs(15))).await?;
    let trace = DrillTrace {
        scenario: config.scenario,
        users: config.users,
        client_fallback: config.client_fallback,
        evacuate_on_failover: config.evacuate_on_failover,
        scale,
        health_check: lab.config().health_check,
        decision_path: lab.config().decision_path(),
        fast_path: lab.fast_config().is_some(),
        dns_ttl: lab.config().dns_ttl,
        consistency: lab.config().consistency,
        simulated: lab.config().environment.is_simulated(),
        names: lab.names().clone(),
        fault,
        heal,
        failed_back,
        back_on_primary_from,
        rpo_at_fault: rpo,
        throttled_handshakes_during_move: throttled_during_move,
        denied_handshakes_during_move: denied_during_move,
        authorizer: authorizer_figures(&lab),
        pushes: push_figures(&lab),
        push_workers: push_worker_figures(&lab),
        push_jobs: push_job_figures(&lab),
        failover_orders: lab.fast_config().map(|_| lab.order_stats()),
        timeline: timeline.entries(),
        judgement,
        strong_order: lab.strong_order(&auction),
        no_quorum_refusals: lab
            .cluster()
            .map(|c| c.refused().into_iter().take(2).collect())
            .unwrap_or_default(),
    };
    let mut report = measure(&trace);
    let mut digest = crate::runs::sim::Digest::default();
    digest.add(serde_json::to_string(&report)?.as_bytes());
    report.digest = digest.hex();
    // A simulation's wall time between a handler's awaits is the rest of the simulation's
    // work: its handler times say nothing about a handler, so it reports none. Not in the
    // digest: this machine's speed is no function of the seed.
    let handler_ms: Vec<f64> = lab
        .regions()
        .filter(|_| !trace.simulated)
        .flat_map(|(_, region)| region.bid_handler_ms())
        .collect();
    report.bid_handler_ms = Percentiles::of(&handler_ms);
    Ok(report)
}

/// The drill's lab, started (with the fail-over evacuator if the drill asks for it) and in
/// steady state: the alarm has evaluated OK and the name resolves to the primary. Any app's
/// drill starts here.
pub(crate) async fn steady_lab(config: &DrillConfig) -> anyhow::Result<Arc<World>> {
    let lab = Arc::new(World::builder().config(config.lab.clone()).start().await?);
    if config.evacuate_on_failover {
        lab.start_failover_evacuator();
    }
    let steady = lab
        .wait_for(AwsDuration::from_secs(600), || {
            lab.healthy(RegionId::Primary) && lab.resolve() == RegionId::Primary
        })
        .await;
    anyhow::ensure!(
        steady,
        "the lab never reached steady state (alarm OK, DNS on the primary)"
    );
    Ok(lab)
}

/// After the fault: whether every user restored its state in the secondary within the
/// recovery timeout; for a blip, the time for anything to go wrong (two heartbeat rounds and
/// three alarm periods), then `true`.
pub(crate) async fn recovery(
    lab: &World,
    config: &DrillConfig,
    users: &dyn UsersView,
    fault: AwsInstant,
) -> bool {
    if config.scenario == Scenario::Blip {
        lab.sleep(AwsDuration::from_secs(180)).await;
        return true;
    }
    lab.wait_for(config.recovery_timeout, || {
        all_restored_on(users, RegionId::Secondary, fault)
    })
    .await
}

/// What the heal and the failback after it marked.
pub(crate) struct Failback {
    pub heal: AwsInstant,
    pub failed_back: bool,
    pub back_on_primary_from: Option<AwsInstant>,
    pub throttled_during_move: u64,
    pub denied_during_move: u64,
}

/// Heal, wait for the name to answer the primary again, and (failback, evacuate) end the
/// secondary's sessions and wait for everyone's return.
pub(crate) async fn heal_and_fail_back(
    lab: &World,
    config: &DrillConfig,
    users: &dyn UsersView,
    (throttled_before, denied_before): (u64, u64),
) -> anyhow::Result<Failback> {
    let timeline = lab.timeline();
    let secondary = lab.name(RegionId::Secondary);
    // Heal and measure failback (the name resolving to the primary again).
    let heal = lab.now();
    if config.scenario == Scenario::JudgeLost {
        // The judge's Region lost for good as the primary heals.
        lab.inject(Fault::NeverReturns(RegionId::Secondary));
    }
    lab.inject(Fault::Heal);
    if config.scenario == Scenario::Evacuate {
        // Maintenance over: the primary back in DNS.
        lab.set_in_service(RegionId::Primary, true);
    }
    let at_heal = lab.region(RegionId::Secondary).counters();
    let throttled_during_move = at_heal.throttled_429 - throttled_before;
    let denied_during_move = at_heal.denied - denied_before;
    // A Region lost for good never takes traffic back.
    let failed_back = config.scenario != Scenario::NeverReturns
        && lab
            .wait_for(AwsDuration::from_secs(900), || {
                lab.resolve() == RegionId::Primary
            })
            .await;

    // Failback of the users: sockets stay where they are until they end. End them on the
    // secondary, as its 2-hour connection limit would, and time everyone's return.
    let mut back_on_primary_from = None;
    let moves_back = matches!(
        config.scenario,
        Scenario::Failback | Scenario::Evacuate | Scenario::JudgeLost
    ) && failed_back;
    if moves_back {
        let ended = lab.now();
        if config.scenario == Scenario::JudgeLost {
            // The secondary's sockets went with it: every user comes back through DNS.
        } else if config.scenario == Scenario::Evacuate {
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
        lab.wait_for(config.recovery_timeout, || {
            all_restored_on(users, RegionId::Primary, ended)
        })
        .await;
        back_on_primary_from = Some(ended);
    }
    Ok(Failback {
        heal,
        failed_back,
        back_on_primary_from,
        throttled_during_move,
        denied_during_move,
    })
}

/// Every user (a bidder or a room's member) has restored its state in `region` at or after
/// `after`.
pub(crate) fn all_restored_on(users: &dyn UsersView, region: RegionId, after: AwsInstant) -> bool {
    users.restored_since(after, region).len() == users.total()
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

/// Both Regions' pushers, summed (the widest spacing is the wider of the two).
fn push_figures(lab: &World) -> wsdr_core::push::PushTotals {
    let mut sum = wsdr_core::push::PushTotals::default();
    for (_, region) in lab.regions() {
        sum.add(&region.push_totals());
    }
    sum
}

/// Both Regions' push job queues, summed (the longest wait: the longer of the two).
fn push_job_figures(lab: &World) -> crate::world::push_jobs::PushJobStats {
    let mut sum = crate::world::push_jobs::PushJobStats::default();
    for (_, region) in lab.regions() {
        sum.add(&region.push_job_stats());
    }
    sum
}

/// Both Regions' push workers, summed (peaks: the higher of the two).
fn push_worker_figures(lab: &World) -> crate::world::mapping::MappingStats {
    let mut sum = crate::world::mapping::MappingStats::default();
    for (_, region) in lab.regions() {
        let s = region.push_worker_stats();
        sum.invocations += s.invocations;
        sum.cold_starts += s.cold_starts;
        sum.peak_concurrency = sum.peak_concurrency.max(s.peak_concurrency);
        sum.peak_allowed = sum.peak_allowed.max(s.peak_allowed);
    }
    sum
}

/// Both Regions' authorizer functions and their `$connect` 500s, summed.
fn authorizer_figures(lab: &World) -> crate::runs::report::AuthorizerFigures {
    let mut figures = crate::runs::report::AuthorizerFigures::default();
    for (_, region) in lab.regions() {
        let stats = region.authorizer_stats();
        let counters = region.counters();
        figures.invocations += stats.invocations;
        figures.cold_starts += stats.cold_starts;
        figures.peak_cold_starts_per_second = figures
            .peak_cold_starts_per_second
            .max(stats.peak_cold_starts_per_second);
        figures.init_failures += stats.init_failures;
        figures.secrets_requests += stats.secrets_requests;
        figures.secrets_throttled += stats.secrets_throttled;
        figures.handshakes_failed += counters.authorizer_errors as usize;
        figures.herd_connected += counters.herd_connected;
        figures.herd_gave_up += counters.herd_gave_up;
    }
    figures
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::history::below_an_earlier_bid;

    #[test]
    fn a_bid_taken_after_a_higher_one_is_counted() {
        let order = |amounts: &[u64]| -> Vec<(wsdr_protocol::Amount, RegionId)> {
            amounts
                .iter()
                .filter_map(|a| wsdr_protocol::Amount::new(*a).ok())
                .map(|a| (a, RegionId::Primary))
                .collect()
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
