//! The chat room's failover drill (`wsdr drill --app chat`): members post in `chat:lobby`
//! through the front door while a scenario breaks the primary. The steady state, the fault,
//! the recovery, the heal and the failback are the auction's drill's (drill.rs); the end is
//! the chat campaign's (the kit's rules over the ops and the room's over what every member
//! shows: crate::sim::chat), and the report is the room's own ([`ChatDrillReport`],
//! docs/DRILL_REPORT.md, "The chat room's drill"): the auction's report is built from bids
//! and keeps its shape.

use crate::runs::drill::{
    all_restored_on, heal_and_fail_back, recovery, steady_lab, DrillConfig, Failback,
};
use crate::runs::scenario::Scenario;
use crate::runs::stats::Percentiles;
use crate::sim::chat::{ChatBehaviour, ChatJudgement, Members};
use crate::sim::history::Violation;
use crate::world::timeline::Kind;
use crate::world::{AwsDuration, AwsInstant, RegionId, UsersView};
use serde::Serialize;
use std::collections::BTreeMap;

/// What a chat drill measured and what the checker made of it. Times are AWS seconds from
/// the fault.
#[derive(Debug, Clone, Serialize)]
pub struct ChatDrillReport {
    /// Always `chat`.
    pub app: String,
    pub scenario: Scenario,
    pub consistency: String,
    pub simulated: bool,
    pub seed: u64,
    pub members: usize,
    /// The primary's health check turned unhealthy (the record's check, whichever kind).
    pub detected_after_s: Option<f64>,
    /// The name first answered the secondary.
    pub dns_moved_after_s: Option<f64>,
    /// Members whose app read the room again in the secondary after the fault, and when
    /// (p50, p99, max over them).
    pub members_restored_on_secondary: usize,
    pub restored_after_s: Percentiles,
    /// Every member restored in the secondary before the recovery timeout.
    pub recovered: bool,
    /// The name answered the primary again after the heal (never for a Region lost for
    /// good).
    pub failed_back: bool,
    pub messages_invoked: usize,
    pub messages_acknowledged: usize,
    pub messages_unknown: usize,
    /// Acknowledged messages no surviving Region holds (only with a Region lost for good,
    /// eventual mode; excused by name below).
    pub rpo_lost_acknowledged: usize,
    /// Holes reported to members' apps (a Region's log lost past what the others hold).
    pub discontinuities: usize,
    /// Every surviving Region holds the same copies.
    pub converged: bool,
    pub violations: Vec<Violation>,
    /// Losses the guarantee table excuses, by name (docs/RELIABILITY.md).
    pub excused: BTreeMap<String, usize>,
    /// The run's history (writes, the timeline, final copies, members' views, violations)
    /// hashed: a simulated drill replays to the same digest.
    pub digest: String,
    /// No violation, every member restored in the secondary and the name back on the
    /// primary after the heal (a Region lost for good never takes it back); for a blip,
    /// nobody moved and the name stayed.
    pub passed: bool,
}

/// Run one chat drill end to end.
pub async fn run(config: DrillConfig) -> anyhow::Result<ChatDrillReport> {
    let secs = AwsDuration::from_secs;
    let lab = steady_lab(&config).await?;
    let timeline = lab.timeline().clone();
    timeline.record(
        Kind::Note,
        format!("steady state; {} members join the lobby", config.users),
    );
    let fallback = config.client_fallback;
    let members = Members::through_front_door(
        &lab,
        config.users,
        ChatBehaviour::honest(config.bid_every.as_secs_f64()),
        config.seed,
        move |_| fallback,
    )?;
    let connected = lab
        .wait_for(secs(300), || {
            all_restored_on(members.as_ref(), RegionId::Primary, AwsInstant::START)
        })
        .await;
    anyhow::ensure!(
        connected,
        "not every member joined the lobby on the primary"
    );
    lab.sleep(config.warm_bidding).await;

    let fault = lab.now();
    crate::runs::plan::play(&lab, &config.scenario.plan()).await;
    let recovered = recovery(&lab, &config, members.as_ref(), fault).await;
    let restored = members.restored_since(fault, RegionId::Secondary);
    lab.sleep(secs(20)).await;
    if config.scenario != Scenario::Blip {
        lab.wait_for(secs(600), || timeline.first(Kind::DnsFlip, fault).is_some())
            .await;
    }
    let before = lab.region(RegionId::Secondary).counters();
    let Failback { failed_back, .. } = heal_and_fail_back(
        &lab,
        &config,
        members.as_ref(),
        (before.throttled_429, before.denied),
    )
    .await?;

    let ChatJudgement {
        trace,
        mut violations,
        excused,
    } = crate::sim::chat::judge(&lab, &members, lab.lab_time(secs(30))).await?;
    violations.extend(crate::runs::chaos::failover_violations(&lab));
    members.close().await;

    let writes = &trace.topic.writes;
    let rpo_lost_acknowledged = trace.lost_acknowledged();
    let after_fault = |kind: Kind| {
        timeline
            .first(kind, fault)
            .map(|at| round_ms(at.secs_since(fault)))
    };
    let detected_after_s = match (
        after_fault(Kind::HealthUnhealthy),
        after_fault(Kind::EndpointUnhealthy),
    ) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let history = trace.history(&timeline.entries(), &violations);
    let digest = crate::runs::chaos::digest_of(&history).hex();
    let dns_moved_after_s = after_fault(Kind::DnsFlip);
    // A blip moves nobody: no member restored elsewhere, the name never moved.
    let moved_nobody = restored.is_empty() && dns_moved_after_s.is_none();
    let passed = violations.is_empty()
        && recovered
        && match config.scenario {
            Scenario::Blip => moved_nobody,
            Scenario::NeverReturns => true,
            _ => failed_back,
        };
    Ok(ChatDrillReport {
        app: "chat".to_owned(),
        scenario: config.scenario,
        consistency: lab.config().consistency.to_string(),
        simulated: lab.config().environment.is_simulated(),
        seed: config.seed,
        members: config.users,
        detected_after_s,
        dns_moved_after_s,
        members_restored_on_secondary: restored.len(),
        restored_after_s: Percentiles::of(
            &restored.iter().map(|s| round_ms(*s)).collect::<Vec<_>>(),
        ),
        recovered,
        failed_back,
        messages_invoked: writes.len(),
        messages_acknowledged: writes.iter().filter(|w| w.acknowledged()).count(),
        messages_unknown: writes.iter().filter(|w| w.unknown()).count(),
        rpo_lost_acknowledged,
        discontinuities: trace.discontinuities,
        converged: trace.converged,
        violations,
        excused: excused
            .iter()
            .map(|(e, n)| (e.name().to_owned(), *n))
            .collect(),
        digest,
        passed,
    })
}

/// One chat drill as a deterministic simulation on its own thread.
pub async fn run_simulated(config: DrillConfig) -> anyhow::Result<ChatDrillReport> {
    let config = config.simulated();
    crate::runs::sim::simulate(config.seed, move || run(config)).await
}

/// Seconds to the millisecond: a report's figures, not the float's noise.
fn round_ms(secs: f64) -> f64 {
    (secs * 1000.0).round() / 1000.0
}
