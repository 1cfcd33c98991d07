//! The rehearsal pair, as template.yaml deploys it beside the real failover records: a test
//! name whose PRIMARY record carries the same calculated check over the same two views, read
//! from the health functions' `/rehearsal/*` paths (the `REHEARSAL-JUDGE#` and
//! `REHEARSAL-SELF#` verdicts, which only `wsdr rehearse` writes), and whose SECONDARY record
//! carries the real SECONDARY check. Forcing its verdicts to "fail over" moves the test name
//! through the same functions, check types and checkers as the real one, and no user.
//!
//! The lab's side of `wsdr rehearse`: each endpoint check's status as Route 53 reports it
//! (the pre-flight), the rehearsal verdicts written in their Regions, and the test name's
//! answer from its own caching resolver (the real name's timeline never sees it).

use crate::world::health::Resolver;
use crate::world::region_id::{PerRegion, RegionId};
use crate::world::route53::HealthChecks;
use crate::world::scale::{AwsDuration, TimeScale};
use crate::world::timeline::Timeline;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Which view of the primary a rehearsal verdict stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum View {
    /// The primary's own (`REHEARSAL-SELF#`, in the primary's replica: `/rehearsal/self`).
    #[serde(rename = "self")]
    #[value(name = "self")]
    Inside,
    /// The judge's (`REHEARSAL-JUDGE#`, in the secondary's replica: `/rehearsal/primary`).
    Judge,
}

impl View {
    /// Where the verdict is written, and under which source.
    pub fn placement(self) -> (RegionId, wsdr_core::VerdictSource) {
        match self {
            View::Inside => (RegionId::Primary, wsdr_core::VerdictSource::RehearsalInside),
            View::Judge => (
                RegionId::Secondary,
                wsdr_core::VerdictSource::RehearsalJudge,
            ),
        }
    }
}

/// The rehearsal pair's state as a resolver and Route 53 see it (`GET /api/rehearsal`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RehearsalState {
    /// The test name's answer, from its own caching resolver (the records' TTL).
    pub answer: RegionId,
    pub primary_healthy: bool,
    pub secondary_healthy: bool,
    /// Every endpoint check's status, by the template's name (the real checks' too).
    pub checks: BTreeMap<String, bool>,
}

/// The rehearsal pair and the checks' statuses.
#[derive(Debug)]
pub struct Rehearsal {
    resolver: Resolver,
    checks: Mutex<BTreeMap<String, bool>>,
    /// Whether the pair exists (endpoint checks, wsdr's composition, no front).
    deployed: Mutex<bool>,
    versions: AtomicU64,
}

impl Rehearsal {
    pub fn new(ttl: AwsDuration, scale: TimeScale, names: PerRegion<String>) -> Self {
        Self {
            // Its own timeline: the test name's flips are not the real name's.
            resolver: Resolver::new(ttl, scale, Timeline::new(None), names),
            checks: Mutex::default(),
            deployed: Mutex::new(false),
            versions: AtomicU64::new(0),
        }
    }

    /// The checkers' latest reading of every endpoint check.
    pub fn observe(&self, checks: &mut HealthChecks) {
        let statuses = checks.endpoint_statuses();
        let mut held = lock(&self.checks);
        for (name, healthy) in statuses {
            held.insert(name.to_owned(), healthy);
        }
    }

    /// The rehearsal records' health (primary, secondary), as Route 53 reads them now.
    pub fn set_records(&self, (primary, secondary): (bool, bool)) {
        *lock(&self.deployed) = true;
        self.resolver.set_healthy(RegionId::Primary, primary);
        self.resolver.set_healthy(RegionId::Secondary, secondary);
    }

    /// The next version for a rehearsal verdict (each write a newer one).
    pub fn next_version(&self) -> u64 {
        self.versions.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The pair's state now, `None` when the configuration deploys no rehearsal pair.
    pub fn state(&self) -> Option<RehearsalState> {
        if !*lock(&self.deployed) {
            return None;
        }
        Some(RehearsalState {
            answer: self.resolver.answer(),
            primary_healthy: self.resolver.healthy(RegionId::Primary),
            secondary_healthy: self.resolver.healthy(RegionId::Secondary),
            checks: lock(&self.checks).clone(),
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
