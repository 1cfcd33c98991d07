//! Everything that happens in the lab, stamped with lab time since the start.

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
}

#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    /// Milliseconds since the lab started.
    pub at_ms: f64,
    pub kind: Kind,
    pub detail: String,
}

/// A shared, append-only timeline. Optionally echoes entries as they happen (progress).
#[derive(Debug, Clone)]
pub struct Timeline {
    start: Instant,
    entries: Arc<Mutex<Vec<Entry>>>,
    echo: Option<f64>,
}

impl Timeline {
    /// `echo = Some(scale)` prints each entry with its AWS-equivalent time.
    pub fn new(echo: Option<f64>) -> Self {
        Self {
            start: Instant::now(),
            entries: Arc::default(),
            echo,
        }
    }

    pub fn start(&self) -> Instant {
        self.start
    }

    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    pub fn record(&self, kind: Kind, detail: impl Into<String>) {
        let entry = Entry {
            at_ms: self.start.elapsed().as_secs_f64() * 1000.0,
            kind,
            detail: detail.into(),
        };
        if let Some(scale) = self.echo {
            if !matches!(
                kind,
                Kind::ProbeOk | Kind::ClientDisconnected | Kind::ClientRestored | Kind::ClientMoved
            ) {
                println!(
                    "  [{:>7.2} s lab | {:>6.0} s AWS] {:?}: {}",
                    entry.at_ms / 1000.0,
                    entry.at_ms / 1000.0 * scale,
                    kind,
                    entry.detail
                );
            }
        }
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(entry);
    }

    /// The last `n` entries that `keep` accepts, oldest first, without copying the rest.
    pub fn recent(&self, n: usize, keep: impl Fn(&Entry) -> bool) -> Vec<Entry> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let mut picked: Vec<Entry> = entries
            .iter()
            .rev()
            .filter(|e| keep(e))
            .take(n)
            .cloned()
            .collect();
        picked.reverse();
        picked
    }

    pub fn entries(&self) -> Vec<Entry> {
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The first entry of `kind` at or after `from_ms`.
    pub fn first(&self, kind: Kind, from_ms: f64) -> Option<f64> {
        self.entries()
            .iter()
            .filter(|e| e.kind == kind && e.at_ms >= from_ms)
            .map(|e| e.at_ms)
            .reduce(f64::min)
    }
}
