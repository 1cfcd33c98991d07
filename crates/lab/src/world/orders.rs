//! Fail-over orders as AWS carries them, and what can go wrong on the way.
//!
//! As deployed (template.yaml, docs/DEPLOY.md "Moving the sessions"): the judge's watcher
//! writes a `CHANGE` item when its verdict on the primary turns; the state table's stream
//! carries it to the handler (the stream's one reader, `MaximumRetryAttempts` 2, an on-failure
//! destination), which forwards it to the `FastFailovers` queue; the primary's evacuator takes
//! it from there (visibility 1,800 s, two receives, then the dead-letter queue). Every hop is
//! at least once: a retried stream batch forwards the order again, a message can be received
//! twice, a batch that fails its retries leaves the stream for its on-failure destination and
//! never reaches the queue. So orders arrive duplicated, late or never.
//!
//! The lab runs the evacuator's own journey for each delivery ([`wsdr_core::run_order`]: the
//! claim in the order log, the re-checks, the direct move, DNS asked every 5 s until the
//! deadline, the move through the global name), and its minute sweep (the judge's last change
//! read from the judge's replica, run as the order it is). Faults: `orders-duplicated`
//! (each order delivered `copies` times, one second apart, two at once at most, as the
//! queue's mapping allows), `orders-lost` (every order lost before the queue).

use crate::world::scale::AwsDuration;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// The primary's evacuator's reserved concurrency (template.yaml, `PrimaryEvacuatorFunction`).
pub const PRIMARY_EVACUATOR_CONCURRENCY: usize = 2;
/// The `FastFailovers` queue's visibility timeout, and the receives before its dead-letter
/// queue (template.yaml).
pub const ORDER_VISIBILITY: AwsDuration = AwsDuration::from_secs(1_800);
pub const ORDER_MAX_RECEIVES: u8 = 2;

/// What the order path did in a run (the drill report's `failover_orders`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct OrderStats {
    /// Changes of the judge's verdict on the primary to fail over (each one order).
    pub emitted: u64,
    /// Orders lost before the queue (`orders-lost`).
    pub lost: u64,
    /// Deliveries from the queue (copies included) and runs from the minute sweep.
    pub deliveries: u64,
    pub sweeps: u64,
    /// Runs that moved everyone through the global name, by order id.
    pub moves_by_order: BTreeMap<String, u64>,
    /// Runs that moved nobody through the global name, by reason.
    pub declined: BTreeMap<String, u64>,
    /// Runs that failed (the move itself): the message is received again after the
    /// visibility timeout, once, then dead-lettered.
    pub failed: u64,
    pub dead_lettered: u64,
}

impl OrderStats {
    /// The most global moves any one order made (at most 1 when orders run once).
    pub fn most_moves_of_one_order(&self) -> u64 {
        self.moves_by_order.values().copied().max().unwrap_or(0)
    }
}

/// What the order faults do now.
#[derive(Debug, Default)]
pub struct OrderFaults {
    state: Mutex<(u8, bool)>,
}

impl OrderFaults {
    /// Each order delivered this many times (1: once).
    pub fn copies(&self) -> u8 {
        lock(&self.state).0.max(1)
    }

    pub fn lost(&self) -> bool {
        lock(&self.state).1
    }

    pub fn duplicate(&self, copies: u8) {
        lock(&self.state).0 = copies;
    }

    pub fn lose(&self, lost: bool) {
        lock(&self.state).1 = lost;
    }

    pub fn heal(&self) {
        *lock(&self.state) = (1, false);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
