//! The fast failover path, beside the minute-by-minute alarm: a fast verdict from probe
//! rounds every 5 s (AWS) (`wsdr_core::FastVerdict`), decided and served in the judge Region
//! ([`JUDGE`]: `GET /health/{primary|secondary}` on its address, 200 = serve, 503 = fail
//! over), which the Route 53 *endpoint* health checks of both failover records poll every
//! 10 s. A judge that is down answers neither: both records unhealthy, and Route 53 answers
//! the primary.
//!
//! Both paths always run when the fast path is on; `HealthCheckKind` says which one the
//! failover records follow, and the other is timed alongside, so one drill reports both.

use crate::world::region_id::{PerRegion, RegionId};
use crate::world::scale::AwsDuration;
use crate::world::timeline::{Kind, Timeline};
use std::sync::atomic::{AtomicBool, Ordering};

/// What the failover records' health checks read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum HealthCheckKind {
    /// A `CLOUDWATCH_METRIC` check on the verdict alarm (one-minute periods; the reference
    /// design's kind).
    #[default]
    Alarm,
    /// An HTTPS endpoint check on the Region's health endpoint, every 10 s, which answers
    /// from the fast verdict.
    Endpoint,
}

impl HealthCheckKind {
    pub fn name(self) -> &'static str {
        match self {
            HealthCheckKind::Alarm => "alarm",
            HealthCheckKind::Endpoint => "endpoint",
        }
    }
}

/// The fast path's settings, in AWS time.
#[derive(Debug, Clone, PartialEq)]
pub struct FastConfig {
    /// Between probe rounds.
    pub probe_interval: AwsDuration,
    /// Rounds failed at every vantage point before failing over.
    pub fail_after: u32,
    /// Rounds passed at every vantage point before serving again.
    pub recover_after: u32,
    /// Route 53 endpoint health check `RequestInterval` (10 or 30 s).
    pub check_interval: AwsDuration,
    /// Route 53 `FailureThreshold`: consecutive results that change the check's status.
    pub failure_threshold: u32,
    /// What answers the checks: the health function itself, or a cache in front of it that
    /// keeps each answer this long (wsdr's default: CloudFront, 2 s; docs/DEPLOY.md).
    pub cached_for: Option<AwsDuration>,
}

impl Default for FastConfig {
    fn default() -> Self {
        Self {
            probe_interval: AwsDuration::from_secs(5),
            fail_after: 3,
            recover_after: 12,
            check_interval: AwsDuration::from_secs(10),
            failure_threshold: 1,
            cached_for: Some(AwsDuration::from_secs(2)),
        }
    }
}

/// Where every fast verdict is decided, written and served: the secondary. The primary's
/// watcher runs there, the secondary's own canary decides the secondary's verdict, and its
/// health endpoint answers both failover records' checks (docs/DEPLOY.md, "Who decides").
pub const JUDGE: RegionId = RegionId::Secondary;

/// A vantage point of a fast verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vantage {
    /// The watcher, probing from outside the judged Region (from the judge).
    Outside,
    /// The judged Region's own canary.
    Inside,
}

impl Vantage {
    /// Its index for [`FastFaults`] (0 outside, 1 inside).
    pub fn index(self) -> usize {
        match self {
            Vantage::Outside => 0,
            Vantage::Inside => 1,
        }
    }
}

/// The vantage points of a Region's fast verdict, as deployed: the primary's folds the
/// watcher outside it with its own canary; the secondary's is its own canary's (it is the
/// judge, and nothing outside it watches it).
pub fn vantage_points(judged: RegionId) -> &'static [Vantage] {
    if judged == JUDGE {
        &[Vantage::Inside]
    } else {
        &[Vantage::Outside, Vantage::Inside]
    }
}

/// Faults of the fast path's own (for tests: one vantage point that cannot see a Region).
#[derive(Debug, Default)]
pub struct FastFaults {
    /// Per Region, per vantage point: that vantage point's probes fail.
    blind: PerRegion<[AtomicBool; 2]>,
    /// The judge's watcher writes no verdict until then (`watcher-silent`).
    silent_until: std::sync::Mutex<Option<tokio::time::Instant>>,
    /// The network between the Regions cut: the watcher, in the judge, cannot reach the
    /// Region it watches (`inter-region-partition`).
    between_cut: AtomicBool,
    /// `health-flood`: the share of the health function's requests refused, percent.
    flood_percent: std::sync::atomic::AtomicU8,
}

impl FastFaults {
    /// The watcher silent for `lab` (lab time) from now; `None`: writing again.
    pub fn silence(&self, lab: Option<std::time::Duration>) {
        *self.silent_until.lock().unwrap_or_else(|p| p.into_inner()) =
            lab.map(|d| tokio::time::Instant::now() + d);
    }

    /// Whether the watcher is silent now.
    pub fn is_silent(&self) -> bool {
        self.silent_until
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some_and(|until| tokio::time::Instant::now() < until)
    }

    /// Blind (or restore) one vantage point of `region`'s verdict.
    pub fn set_blind(&self, region: RegionId, vantage: usize, blind: bool) {
        if let Some(flag) = self.blind[region].get(vantage) {
            flag.store(blind, Ordering::SeqCst);
        }
    }

    /// Flood the health endpoint: `percent` of the requests reaching the health function
    /// refused (0: no flood).
    pub fn flood(&self, percent: u8) {
        self.flood_percent.store(percent.min(100), Ordering::SeqCst);
    }

    /// The share of the health function's requests refused now, percent.
    pub fn flood_percent(&self) -> u8 {
        self.flood_percent.load(Ordering::SeqCst)
    }

    /// Cut (or restore) the network between the Regions.
    pub fn cut_between(&self, cut: bool) {
        self.between_cut.store(cut, Ordering::SeqCst);
    }

    /// Whether a vantage point is blind to a Region.
    pub fn is_blind(&self, region: RegionId, vantage: usize) -> bool {
        let cut_off = region != JUDGE
            && vantage == Vantage::Outside.index()
            && self.between_cut.load(Ordering::SeqCst);
        cut_off
            || self.blind[region]
                .get(vantage)
                .is_some_and(|flag| flag.load(Ordering::SeqCst))
    }
}

/// An endpoint health check's status, with Route 53's failure threshold.
#[derive(Debug, Clone)]
pub struct EndpointCheck {
    threshold: u32,
    healthy: bool,
    streak: u32,
}

impl EndpointCheck {
    pub fn new(threshold: u32) -> Self {
        Self {
            threshold: threshold.max(1),
            healthy: true,
            streak: 0,
        }
    }

    /// One poll's result; the check's status after it.
    pub fn poll(&mut self, ok: bool) -> bool {
        if ok == self.healthy {
            self.streak = 0;
        } else {
            self.streak += 1;
            if self.streak >= self.threshold {
                self.healthy = ok;
                self.streak = 0;
            }
        }
        self.healthy
    }
}

/// Record a change of the primary's fast verdict or endpoint check (the drill times the
/// primary's); the secondary's go in as notes.
pub fn record(timeline: &Timeline, region: RegionId, kind: Kind, what: &str) {
    let kind = match region {
        RegionId::Primary => kind,
        RegionId::Secondary => Kind::Note,
    };
    timeline.record(kind, format!("{region}: {what}"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_check_changes_after_threshold_results_in_a_row() {
        let mut check = EndpointCheck::new(2);
        assert!(check.poll(false), "one failure is not enough");
        assert!(check.poll(true));
        assert!(check.poll(false));
        assert!(!check.poll(false), "two in a row");
        assert!(!check.poll(true));
        assert!(check.poll(true));
        let mut check = EndpointCheck::new(1);
        assert!(!check.poll(false));
        assert!(check.poll(true));
    }
}
