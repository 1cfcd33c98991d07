//! The failover decision, emulated: a metrics store the real canary publishes to, an alarm
//! with CloudWatch semantics, a Route 53 health check that reads the alarm, and a caching
//! resolver that answers with the healthy Region.

use crate::world::timeline::{Kind, Timeline};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use wsdr_core::{HealthDatapoint, Metrics};

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// CloudWatch, as far as the alarm needs it: datapoints by `ApiId`, placed in periods by
/// their own timestamp (epoch ms), as `PutMetricData`'s `Timestamp` places them.
#[derive(Debug, Default)]
pub struct MetricsStore {
    points: Mutex<Vec<(u64, String, bool)>>,
}

impl MetricsStore {
    pub fn put(&self, api_id: &str, healthy: bool, timestamp_ms: u64) {
        lock(&self.points).push((timestamp_ms, api_id.to_owned(), healthy));
    }

    /// Statistic Minimum of the datapoints in `[from, to)` (epoch ms), None when there are none.
    pub fn minimum(&self, api_id: &str, from: u64, to: u64) -> Option<bool> {
        let points = lock(&self.points);
        let mut any = None;
        for (at, id, healthy) in points.iter() {
            if id == api_id && *at >= from && *at < to {
                any = Some(any.unwrap_or(true) && *healthy);
            }
        }
        any
    }
}

/// The canary's sink in the lab: it stamps each datapoint when published.
#[derive(Debug, Clone)]
pub struct LabMetrics {
    pub store: Arc<MetricsStore>,
    pub timeline: Timeline,
    pub region: String,
}

#[async_trait::async_trait]
impl Metrics for LabMetrics {
    async fn put_health(&self, point: &HealthDatapoint) -> wsdr_core::Result<()> {
        self.store
            .put(&point.api_id, point.healthy, point.timestamp_ms);
        let kind = if point.healthy {
            Kind::ProbeOk
        } else {
            Kind::ProbeFailed
        };
        self.timeline.record(
            kind,
            format!(
                "canary datapoint {} for {}",
                u8::from(point.healthy),
                self.region
            ),
        );
        Ok(())
    }
}

/// Alarm states, serialized with CloudWatch's names (`OK`, `ALARM`, `INSUFFICIENT_DATA`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AlarmState {
    InsufficientData,
    Ok,
    Alarm,
}

/// Alarm settings, in periods.
#[derive(Debug, Clone, Copy)]
pub struct AlarmConfig {
    /// Period (lab time).
    pub period: Duration,
    /// M: breaching datapoints that fire the alarm.
    pub datapoints_to_alarm: usize,
    /// N: the evaluation window.
    pub evaluation_periods: usize,
}

/// An alarm on one metric, evaluated at each period's end like CloudWatch:
/// `Minimum < 1` is breaching, missing data is breaching, ALARM when at least M of the last N
/// periods breach, OK otherwise. Periods before the alarm existed are not in the window.
#[derive(Debug)]
pub struct Alarm {
    pub config: AlarmConfig,
    api_id: String,
    window: Mutex<VecDeque<bool>>,
    state: Mutex<AlarmState>,
}

impl Alarm {
    pub fn new(api_id: impl Into<String>, config: AlarmConfig) -> Self {
        Self {
            config,
            api_id: api_id.into(),
            window: Mutex::default(),
            state: Mutex::new(AlarmState::InsufficientData),
        }
    }

    pub fn state(&self) -> AlarmState {
        *lock(&self.state)
    }

    /// Evaluate the period `[from, to)` (epoch ms). Returns the new state if it changed.
    pub fn evaluate(&self, metrics: &MetricsStore, from: u64, to: u64) -> Option<AlarmState> {
        let breaching = metrics.minimum(&self.api_id, from, to) != Some(true);
        let mut window = lock(&self.window);
        window.push_back(breaching);
        while window.len() > self.config.evaluation_periods {
            window.pop_front();
        }
        let count = window.iter().filter(|b| **b).count();
        let next = if count >= self.config.datapoints_to_alarm {
            AlarmState::Alarm
        } else {
            AlarmState::Ok
        };
        let mut state = lock(&self.state);
        (std::mem::replace(&mut *state, next) != next).then_some(next)
    }
}

/// The caching resolver in front of the failover records: it re-reads the authoritative
/// answer (primary if the health check is healthy, else secondary) at most once per TTL,
/// like a shared recursive resolver.
#[derive(Debug)]
pub struct Resolver {
    ttl: Duration,
    /// `sticky-dns`: a resolver that ignores the record's TTL and keeps its answer this long.
    ttl_override: Mutex<Option<Duration>>,
    cached: Mutex<Option<(usize, Instant)>>,
    healthy_primary: Mutex<bool>,
    timeline: Timeline,
    names: [String; 2],
}

impl Resolver {
    pub fn new(ttl: Duration, timeline: Timeline, names: [String; 2]) -> Self {
        Self {
            ttl,
            ttl_override: Mutex::new(None),
            cached: Mutex::new(None),
            healthy_primary: Mutex::new(true),
            timeline,
            names,
        }
    }

    /// The health check's verdict on the primary (Route 53 side).
    pub fn set_primary_healthy(&self, healthy: bool) {
        *lock(&self.healthy_primary) = healthy;
    }

    pub fn primary_healthy(&self) -> bool {
        *lock(&self.healthy_primary)
    }

    /// Keep cached answers for `ttl` instead of the record's TTL (None: honour the TTL).
    pub fn set_ttl_override(&self, ttl: Option<Duration>) {
        *lock(&self.ttl_override) = ttl;
    }

    /// The Region index (0 primary, 1 secondary) a new connection is sent to.
    pub fn answer(&self) -> usize {
        let ttl = lock(&self.ttl_override).unwrap_or(self.ttl);
        let mut cached = lock(&self.cached);
        let now = Instant::now();
        match *cached {
            Some((region, at)) if now.duration_since(at) < ttl => region,
            previous => {
                let region = if self.primary_healthy() { 0 } else { 1 };
                if let Some((old, _)) = previous {
                    if old != region {
                        self.timeline.record(
                            Kind::DnsFlip,
                            format!("resolver now answers {}", self.names[region]),
                        );
                    }
                }
                *cached = Some((region, now));
                region
            }
        }
    }
}
