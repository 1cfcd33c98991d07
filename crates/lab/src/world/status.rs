//! What the world looks like now, for the control API, the control room and `/metrics`.
//!
//! Reading the status changes nothing: the DNS answer it shows is the one the shared
//! resolver gave its last client (the world's own clients ask it every few seconds), so the
//! flip that made it so is always among the key events.

use crate::world::health::AlarmState;
use crate::world::region_id::RegionId;
use crate::world::replication::InFlight;
use crate::world::timeline::{Entry, Kind};
use crate::world::World;
use serde::Serialize;

/// Status for the control API and the control room.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub lab_seconds: f64,
    pub time_scale: f64,
    pub front_door: String,
    pub regions: Vec<RegionStatus>,
    pub alarm: AlarmState,
    pub primary_healthy: bool,
    /// The secondary's verdict alarm and health check (the SECONDARY record's).
    pub secondary_alarm: AlarmState,
    pub secondary_healthy: bool,
    pub dns_answer: Option<String>,
    pub replication: Vec<LinkStatus>,
    /// The watcher canary's last datapoints for the primary, oldest first (true = healthy).
    pub canary: Vec<bool>,
    /// The last system events (faults, probes failing, alarm, health check, DNS), oldest first.
    pub events: Vec<Entry>,
    /// Every key event of the run (fault, heal, alarms, health checks, DNS flips, notes),
    /// oldest first: what the control room keeps on screen.
    pub key_events: Vec<Entry>,
    /// The fault in force, if any: since when, and how the users are doing.
    pub fault: Option<FaultStatus>,
    /// The simulated users, when a run attached them (`wsdr lab --users N`, drills).
    pub users: Option<UsersStatus>,
    /// `eventual` or `strong`.
    pub consistency: String,
    /// What the failover records' health checks read: `alarm` (the verdict alarms, the
    /// reference design's) or `endpoint` (the fast verdicts, served by the judge).
    pub health_check: crate::world::fast::HealthCheckKind,
    /// With the fast path: the fast verdict on each Region as the judge (the secondary)
    /// serves it, primary first (true = serve).
    pub fast_verdicts: Option<Vec<bool>>,
    /// Strong mode: the MRSC table's members (the serving Regions' replicas, then the third
    /// member), each with whether it reaches a quorum now.
    pub table_members: Option<Vec<crate::world::mrsc::MemberStatus>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FaultStatus {
    /// What the last fault entry said.
    pub detail: String,
    pub since_lab_s: f64,
    pub since_aws_s: f64,
    /// Users restored in a Region other than the primary since the fault.
    pub restored: Option<usize>,
    /// The slowest of those restores so far, AWS seconds (the RTO so far).
    pub rto_so_far_aws_s: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct UsersStatus {
    pub total: usize,
    pub online: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct RegionStatus {
    pub name: String,
    pub url: String,
    pub down: bool,
    pub throttled: bool,
    pub sockets: usize,
    pub handshakes: u64,
    pub throttled_429: u64,
    pub integration_errors: u64,
    /// Bids this Region answered `accepted`.
    pub bids_accepted: u64,
    /// This Region's canary datapoints, oldest first (true = healthy).
    pub canary: Vec<bool>,
    /// The Region's verdict alarm and its Route 53 health check.
    pub alarm: AlarmState,
    pub health_check_healthy: bool,
    /// With the fast path: the fast verdict on this Region as the judge serves it.
    pub fast_verdict: Option<bool>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LinkStatus {
    pub from: String,
    pub to: String,
    pub cut: bool,
    pub lag_ms: f64,
    pub in_flight: InFlight,
    pub applied: u64,
}

impl World {
    /// The world as the control room shows it. Read-only.
    pub fn status(&self) -> Status {
        let names = self.names();
        // The state first, the timeline after: a change is recorded before (or under the
        // same lock as) the state it announces, so a status never shows a DNS answer whose
        // flip is missing from its key events.
        let dns_answer = Some(names[self.last_dns_answer()].clone());
        // Read once: the fault in force is derived from the same entries.
        let key_events = self.timeline().key_entries();
        let canary_of = |region: RegionId| -> Vec<bool> {
            self.timeline()
                .recent(6, |e| {
                    matches!(e.kind, Kind::ProbeOk | Kind::ProbeFailed)
                        && e.region.as_deref() == Some(names[region].as_str())
                })
                .iter()
                .map(|e| e.kind == Kind::ProbeOk)
                .collect()
        };
        Status {
            lab_seconds: self.timeline().elapsed().as_secs_f64(),
            time_scale: self.config().scale.factor(),
            front_door: self.front_door_url(),
            regions: self
                .regions()
                .map(|(id, r)| {
                    let counters = r.counters();
                    RegionStatus {
                        name: r.name.clone(),
                        url: r.url(),
                        down: r.is_down(),
                        throttled: r.is_throttled(),
                        sockets: r.live_sockets(),
                        handshakes: counters.handshakes,
                        throttled_429: counters.throttled_429,
                        integration_errors: counters.integration_errors,
                        bids_accepted: counters.bids_accepted,
                        canary: canary_of(id),
                        alarm: self.alarm_state(id),
                        health_check_healthy: self.healthy(id),
                        fast_verdict: self.fast_verdict(id),
                    }
                })
                .collect(),
            health_check: self.config().health_check,
            fast_verdicts: self.config().fast.as_ref().map(|_| {
                RegionId::ALL
                    .iter()
                    .filter_map(|r| self.fast_verdict(*r))
                    .collect()
            }),
            alarm: self.alarm_state(RegionId::Primary),
            primary_healthy: self.healthy(RegionId::Primary),
            secondary_alarm: self.alarm_state(RegionId::Secondary),
            secondary_healthy: self.healthy(RegionId::Secondary),
            dns_answer,
            replication: RegionId::ALL
                .iter()
                .map(|from| {
                    let link = self.link(*from);
                    LinkStatus {
                        from: names[*from].clone(),
                        to: names[from.other()].clone(),
                        cut: link.is_cut(),
                        lag_ms: link.lag().as_secs_f64() * 1000.0,
                        in_flight: link.in_flight(),
                        applied: link.applied(),
                    }
                })
                .collect(),
            // The primary's datapoints (the watcher's), as before; per Region in `regions`.
            canary: canary_of(RegionId::Primary),
            events: self.timeline().recent(12, |e| {
                !matches!(
                    e.kind,
                    Kind::ProbeOk
                        | Kind::ClientDisconnected
                        | Kind::ClientRestored
                        | Kind::ClientMoved
                )
            }),
            fault: self
                .last_fault_in(&key_events)
                .filter(|(_, healed)| !healed)
                .map(|(f, _)| f),
            key_events,
            users: self.users().map(|u| UsersStatus {
                total: u.total(),
                online: u.online(),
            }),
            consistency: self.config().consistency.to_string(),
            table_members: self.cluster().map(|c| c.status()),
        }
    }

    /// The last fault of the run, and whether a heal followed it.
    pub fn last_fault(&self) -> Option<(FaultStatus, bool)> {
        self.last_fault_in(&self.timeline().key_entries())
    }

    /// The same, from key entries already read (`Status::key_events`).
    pub fn last_fault_in(&self, key: &[Entry]) -> Option<(FaultStatus, bool)> {
        let last_fault = key.iter().rposition(|e| e.kind == Kind::Fault)?;
        let healed = key[last_fault..].iter().any(|e| e.kind == Kind::Heal);
        let fault = &key[last_fault];
        let scale = self.config().scale;
        let since_lab_s = (self.timeline().elapsed().as_secs_f64() * 1000.0 - fault.at_ms) / 1000.0;
        let restores: Option<Vec<f64>> = self
            .users()
            .map(|u| u.restored_since(scale.instant(fault.at_ms), RegionId::Secondary));
        Some((
            FaultStatus {
                detail: fault.detail.clone(),
                since_lab_s,
                since_aws_s: scale.aws_secs(since_lab_s * 1000.0),
                restored: restores.as_ref().map(Vec::len),
                rto_so_far_aws_s: restores
                    .as_ref()
                    .and_then(|r| r.iter().copied().reduce(f64::max)),
            },
            healed,
        ))
    }
}
