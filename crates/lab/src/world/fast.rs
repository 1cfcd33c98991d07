//! The fast failover path, beside the minute-by-minute alarm: fast verdicts from probe rounds
//! every 5 s (AWS) (`wsdr_core::FastVerdict`), one per vantage point, each written in its own
//! Region and served there by its health function: each Region's own canary's verdict on
//! itself (`/self`), and the watcher's on the primary, decided in the judge ([`JUDGE`],
//! `/primary`). Route 53's endpoint checks read them (`world::route53`, `world::monitoring`).
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
    /// Route 53 `FailureThreshold`: consecutive results that change a checker's view.
    pub failure_threshold: u32,
}

impl Default for FastConfig {
    fn default() -> Self {
        Self {
            probe_interval: AwsDuration::from_secs(5),
            fail_after: 3,
            recover_after: 12,
            check_interval: AwsDuration::from_secs(10),
            failure_threshold: 1,
        }
    }
}

/// The judge: where the watcher runs and its verdict on the primary is written and served
/// (the secondary: outside the Region it judges; docs/DEPLOY.md, "Who decides").
pub const JUDGE: RegionId = RegionId::Secondary;

/// A vantage point of a fast verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vantage {
    /// The watcher, probing the primary from outside it (from the judge).
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
    /// `health-flood`: the share of the requests reaching a health function that it refuses
    /// (429), percent: a flood of paths, which no cache in front of it would stop.
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

    /// Flood the health functions: `percent` of the requests reaching them refused (0: no
    /// flood).
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

    /// Whether the network between the Regions is cut.
    pub fn is_cut_between(&self) -> bool {
        self.between_cut.load(Ordering::SeqCst)
    }

    /// Whether a vantage point is blind to a Region (the outside one crosses the path
    /// between the Regions).
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

/// Record a change of the primary's fast verdict or endpoint check (the drill times the
/// primary's); the secondary's go in as notes.
pub fn record(timeline: &Timeline, region: RegionId, kind: Kind, what: &str) {
    let kind = match region {
        RegionId::Primary => kind,
        RegionId::Secondary => Kind::Note,
    };
    timeline.record(kind, format!("{region}: {what}"));
}
