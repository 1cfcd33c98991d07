//! Everything that happens in the lab, stamped with lab time since the start (an entry's
//! `at_ms`, as reports and the control API have always written it); [`Timeline::instant`]
//! reads an entry's AWS instant.

use crate::world::scale::{AwsInstant, TimeScale};
use serde::Serialize;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// Kinds of timeline entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Fault,
    Heal,
    ProbeFailed,
    ProbeOk,
    Alarm,
    AlarmOk,
    HealthUnhealthy,
    HealthHealthy,
    DnsFlip,
    ClientDisconnected,
    ClientRestored,
    /// Client-assisted failover moved a client to another endpoint.
    ClientMoved,
    Note,
    /// The fast verdict (probe rounds every 5 s) says: fail the primary over.
    FastFailover,
    /// The fast verdict says: serve the primary again.
    FastServe,
    /// The primary's endpoint health check (its HTTPS health endpoint, polled every 10 s)
    /// turned unhealthy.
    EndpointUnhealthy,
    EndpointHealthy,
}

impl Kind {
    /// What an operator follows a fault by: the fault, the heal, alarms, health checks, DNS
    /// flips and notes. Kept for a whole run even when the rest of the timeline is trimmed.
    pub fn is_key(self) -> bool {
        matches!(
            self,
            Kind::Fault
                | Kind::Heal
                | Kind::Alarm
                | Kind::AlarmOk
                | Kind::HealthUnhealthy
                | Kind::HealthHealthy
                | Kind::DnsFlip
                | Kind::Note
                | Kind::FastFailover
                | Kind::FastServe
                | Kind::EndpointUnhealthy
                | Kind::EndpointHealthy
        )
    }

    /// The kind's one name, as the JSON spells it (`alarm_ok`): the console uses it too.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Fault => "fault",
            Kind::Heal => "heal",
            Kind::ProbeFailed => "probe_failed",
            Kind::ProbeOk => "probe_ok",
            Kind::Alarm => "alarm",
            Kind::AlarmOk => "alarm_ok",
            Kind::HealthUnhealthy => "health_unhealthy",
            Kind::HealthHealthy => "health_healthy",
            Kind::DnsFlip => "dns_flip",
            Kind::ClientDisconnected => "client_disconnected",
            Kind::ClientRestored => "client_restored",
            Kind::ClientMoved => "client_moved",
            Kind::Note => "note",
            Kind::FastFailover => "fast_failover",
            Kind::FastServe => "fast_serve",
            Kind::EndpointUnhealthy => "endpoint_unhealthy",
            Kind::EndpointHealthy => "endpoint_healthy",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    /// Milliseconds since the lab started.
    pub at_ms: f64,
    pub kind: Kind,
    pub detail: String,
    /// The Region the entry is about, when it is about one (canary datapoints).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
}

/// Key entries kept by a trimmed timeline (see [`Timeline::bounded`]).
pub const KEY_ENTRIES_KEPT: usize = 2_000;

/// A shared, append-only timeline. Optionally echoes entries as they happen (progress), as
/// `tracing` events with target `wsdr::timeline` (crate::console formats them).
/// Drills keep every entry (they are judged on them); a long-running lab keeps the last
/// `cap` entries and, apart from them, the last [`KEY_ENTRIES_KEPT`] key ones.
#[derive(Debug, Clone)]
pub struct Timeline {
    start: Instant,
    entries: Arc<Mutex<Entries>>,
    scale: TimeScale,
    echo: bool,
}

#[derive(Debug, Default)]
struct Entries {
    all: std::collections::VecDeque<Entry>,
    key: std::collections::VecDeque<Entry>,
    cap: Option<usize>,
}

impl Timeline {
    /// `echo = Some(scale)` prints each entry with its AWS-equivalent time; its instants are
    /// AWS time at that scale (1 without one).
    pub fn new(echo: Option<f64>) -> Self {
        Self {
            start: Instant::now(),
            entries: Arc::default(),
            scale: TimeScale::new(echo.unwrap_or(1.0)),
            echo: echo.is_some(),
        }
    }

    /// A timeline whose time 0 is `origin` (the world's clock's start: one origin for the
    /// timeline, the alarms' periods, the canaries' schedule and every Region's clock), at
    /// the world's time `scale`; `echo` prints each entry as it happens.
    pub fn starting_at(origin: Instant, scale: TimeScale, echo: bool, cap: Option<usize>) -> Self {
        let timeline = Self {
            start: origin,
            entries: Arc::default(),
            scale,
            echo,
        };
        timeline.lock().cap = cap.map(|c| c.max(1));
        timeline
    }

    /// A timeline that keeps at most `cap` entries (the oldest go first), and the key ones
    /// separately ([`Kind::is_key`]), so a lab that runs for days stays within bounds.
    pub fn bounded(echo: Option<f64>, cap: usize) -> Self {
        let timeline = Self::new(echo);
        timeline.lock().cap = Some(cap.max(1));
        timeline
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The key entries (faults, heals, alarms, health checks, DNS flips, notes), oldest
    /// first: all of them, or the last [`KEY_ENTRIES_KEPT`] of a bounded timeline.
    pub fn key_entries(&self) -> Vec<Entry> {
        let entries = self.lock();
        if entries.cap.is_some() {
            entries.key.iter().cloned().collect()
        } else {
            entries
                .all
                .iter()
                .filter(|e| e.kind.is_key())
                .cloned()
                .collect()
        }
    }

    /// How many entries are held now (bounded timelines stay under their cap).
    pub fn held(&self) -> usize {
        let entries = self.lock();
        entries.all.len() + entries.key.len()
    }

    pub fn start(&self) -> Instant {
        self.start
    }

    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    pub fn record(&self, kind: Kind, detail: impl Into<String>) {
        self.push(kind, None, detail.into());
    }

    /// An entry about one Region.
    pub fn record_in(&self, kind: Kind, region: &str, detail: impl Into<String>) {
        self.push(kind, Some(region.to_owned()), detail.into());
    }

    fn push(&self, kind: Kind, region: Option<String>, detail: String) {
        let entry = Entry {
            at_ms: self.start.elapsed().as_secs_f64() * 1000.0,
            kind,
            detail,
            region,
        };
        if self.echo {
            let scale = self.scale.factor();
            if !matches!(
                kind,
                Kind::ProbeOk | Kind::ClientDisconnected | Kind::ClientRestored | Kind::ClientMoved
            ) {
                tracing::info!(
                    target: "wsdr::timeline",
                    lab_s = entry.at_ms / 1000.0,
                    aws_s = entry.at_ms / 1000.0 * scale,
                    kind = kind.name(),
                    region = entry.region.as_deref(),
                    "{}",
                    entry.detail
                );
            }
        }
        let mut entries = self.lock();
        if let Some(cap) = entries.cap {
            if kind.is_key() {
                entries.key.push_back(entry.clone());
                if entries.key.len() > KEY_ENTRIES_KEPT {
                    entries.key.pop_front();
                }
            }
            if entries.all.len() >= cap {
                entries.all.pop_front();
            }
        }
        entries.all.push_back(entry);
    }

    /// The last `n` entries that `keep` accepts, oldest first, without copying the rest.
    pub fn recent(&self, n: usize, keep: impl Fn(&Entry) -> bool) -> Vec<Entry> {
        let entries = self.lock();
        let mut picked: Vec<Entry> = entries
            .all
            .iter()
            .rev()
            .filter(|e| keep(e))
            .take(n)
            .cloned()
            .collect();
        picked.reverse();
        picked
    }

    /// Every entry held, oldest first.
    pub fn entries(&self) -> Vec<Entry> {
        self.lock().all.iter().cloned().collect()
    }

    /// Now, as an AWS instant.
    pub fn now(&self) -> AwsInstant {
        self.scale
            .instant(self.start.elapsed().as_secs_f64() * 1000.0)
    }

    /// An entry's AWS instant.
    pub fn instant(&self, entry: &Entry) -> AwsInstant {
        self.scale.instant(entry.at_ms)
    }

    /// The instant of the first entry of `kind` at or after `from`.
    pub fn first(&self, kind: Kind, from: AwsInstant) -> Option<AwsInstant> {
        let from_ms = self.scale.lab_ms_of(from);
        self.entries()
            .iter()
            .filter(|e| e.kind == kind && e.at_ms >= from_ms)
            .map(|e| e.at_ms)
            .reduce(f64::min)
            .map(|ms| self.scale.instant(ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The console prints `Kind::name`, the JSON carries serde's name: they are one.
    #[test]
    fn a_kind_has_one_name_in_the_console_and_the_json() {
        for kind in [
            Kind::Fault,
            Kind::Heal,
            Kind::ProbeFailed,
            Kind::ProbeOk,
            Kind::Alarm,
            Kind::AlarmOk,
            Kind::HealthUnhealthy,
            Kind::HealthHealthy,
            Kind::DnsFlip,
            Kind::ClientDisconnected,
            Kind::ClientRestored,
            Kind::ClientMoved,
            Kind::Note,
        ] {
            assert_eq!(serde_json::to_value(kind).expect("serializes"), kind.name());
        }
    }

    #[test]
    fn a_bounded_timeline_keeps_its_cap_and_every_recent_key_entry() {
        let timeline = Timeline::bounded(None, 100);
        timeline.record(Kind::Fault, "the fault");
        for i in 0..10_000 {
            timeline.record_in(Kind::ProbeOk, "us-east-1", format!("probe {i}"));
        }
        timeline.record(Kind::Heal, "the heal");
        assert!(timeline.held() <= 100 + KEY_ENTRIES_KEPT);
        assert_eq!(timeline.entries().len(), 100);
        let key: Vec<Kind> = timeline.key_entries().iter().map(|e| e.kind).collect();
        assert_eq!(
            key,
            [Kind::Fault, Kind::Heal],
            "the fault outlives 10,000 probes"
        );
        for i in 0..(KEY_ENTRIES_KEPT + 10) {
            timeline.record(Kind::Note, format!("note {i}"));
        }
        assert_eq!(timeline.key_entries().len(), KEY_ENTRIES_KEPT);
    }

    #[test]
    fn an_unbounded_timeline_keeps_everything() {
        let timeline = Timeline::new(None);
        for i in 0..500 {
            timeline.record(Kind::ClientRestored, format!("user {i}"));
        }
        timeline.record(Kind::DnsFlip, "flip");
        assert_eq!(timeline.entries().len(), 501);
        assert_eq!(timeline.key_entries().len(), 1);
    }
}
