//! The failover decision, emulated: a metrics store the real canary publishes to, an alarm
//! with CloudWatch semantics, a Route 53 health check that reads the alarm, and a caching
//! resolver that answers with the healthy Region.

use crate::world::fault::Fault;
use crate::world::region_id::{PerRegion, RegionId};
use crate::world::scale::{AwsDuration, TimeScale};
use crate::world::timeline::{Kind, Timeline};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use wsdr_core::{HealthDatapoint, Metrics, VerdictDatapoint};

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Which of the canary's metrics a datapoint belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    /// `App/WebSocketHealth`: 1 healthy, 0 not.
    Health,
    /// `App/FailoverVerdict`: 1 serve, 0 fail over (a watcher's verdict).
    Verdict,
}

/// One datapoint: (timestamp ms, metric, the receiving CloudWatch's Region, `ApiId`, value).
type Datapoint = (u64, MetricKind, String, String, bool);

/// CloudWatch, as far as the alarms and the watchers need it: datapoints by the Region whose
/// CloudWatch received them, metric and `ApiId`, placed in periods by their own timestamp
/// (epoch ms), as `PutMetricData`'s `Timestamp` places them. Periods are one AWS minute of lab time, counted from `origin_ms`
/// (CloudWatch aligns them to the minute; the lab's minute starts with the lab).
#[derive(Debug)]
pub struct MetricsStore {
    points: Mutex<Vec<Datapoint>>,
    origin_ms: u64,
    period_ms: u64,
}

impl MetricsStore {
    pub fn new(origin_ms: u64, period: Duration) -> Self {
        Self {
            points: Mutex::default(),
            origin_ms,
            period_ms: (period.as_millis() as u64).max(1),
        }
    }

    /// A datapoint published to `cloudwatch`'s (a Region name) CloudWatch.
    pub fn put(
        &self,
        metric: MetricKind,
        cloudwatch: &str,
        api_id: &str,
        value: bool,
        timestamp_ms: u64,
    ) {
        lock(&self.points).push((
            timestamp_ms,
            metric,
            cloudwatch.to_owned(),
            api_id.to_owned(),
            value,
        ));
    }

    /// `[from, to)` of period `k` (epoch ms).
    pub fn period(&self, k: u64) -> (u64, u64) {
        let from = self.origin_ms + self.period_ms * k;
        (from, from + self.period_ms)
    }

    /// The period `at_ms` falls in.
    pub fn period_of(&self, at_ms: u64) -> u64 {
        at_ms.saturating_sub(self.origin_ms) / self.period_ms
    }

    /// Statistic Minimum of `cloudwatch`'s datapoints in `[from, to)` (epoch ms), None when
    /// there are none.
    pub fn minimum(
        &self,
        metric: MetricKind,
        cloudwatch: &str,
        api_id: &str,
        from: u64,
        to: u64,
    ) -> Option<bool> {
        let points = lock(&self.points);
        let mut any = None;
        for (at, kind, region, id, value) in points.iter() {
            if *kind == metric && region == cloudwatch && id == api_id && *at >= from && *at < to {
                any = Some(any.unwrap_or(true) && *value);
            }
        }
        any
    }
}

/// The canary's sink in the lab: it stamps each datapoint when published, and a watcher
/// reads its own history back, as from `GetMetricData`, from the CloudWatch of the Region
/// it runs in (`region`).
#[derive(Debug, Clone)]
pub struct LabMetrics {
    pub store: Arc<MetricsStore>,
    pub timeline: Timeline,
    pub region: String,
    /// The Region the datapoints are about (the watcher's: the primary; a canary's: its own).
    pub judged: String,
}

#[async_trait::async_trait]
impl Metrics for LabMetrics {
    async fn put_health(&self, point: &HealthDatapoint) -> wsdr_core::Result<()> {
        self.store.put(
            MetricKind::Health,
            &self.region,
            &point.api_id,
            point.healthy,
            point.timestamp_ms,
        );
        let kind = if point.healthy {
            Kind::ProbeOk
        } else {
            Kind::ProbeFailed
        };
        let who = if self.judged == self.region {
            "canary"
        } else {
            "watcher"
        };
        self.timeline.record_in(
            kind,
            &self.judged,
            format!(
                "{who} datapoint {} for {}",
                u8::from(point.healthy),
                self.judged
            ),
        );
        Ok(())
    }

    async fn recent_health(
        &self,
        api_id: &str,
        minutes: u32,
        now_ms: u64,
    ) -> wsdr_core::Result<Vec<Option<bool>>> {
        let current = self.store.period_of(now_ms);
        Ok((1..=u64::from(minutes))
            .rev()
            .map(|back| match current.checked_sub(back) {
                Some(k) => {
                    let (from, to) = self.store.period(k);
                    self.store
                        .minimum(MetricKind::Health, &self.region, api_id, from, to)
                }
                // Before the lab started: no datapoint, as for a fresh metric.
                None => None,
            })
            .collect())
    }

    async fn put_verdict(&self, point: &VerdictDatapoint) -> wsdr_core::Result<()> {
        self.store.put(
            MetricKind::Verdict,
            &self.region,
            &point.api_id,
            point.serve,
            point.timestamp_ms,
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

/// `TreatMissingData`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingData {
    /// A period without a datapoint breaches.
    Breaching,
    /// Periods without datapoints are not considered; all missing is INSUFFICIENT_DATA.
    Missing,
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
    pub missing: MissingData,
}

/// An alarm on one metric of one Region's CloudWatch, evaluated at each period's end like
/// CloudWatch:
/// `Minimum < 1` is breaching, ALARM when at least M of the last N periods breach, OK
/// otherwise; missing data as configured. Periods before the alarm existed are not in the
/// window.
#[derive(Debug)]
pub struct Alarm {
    pub config: AlarmConfig,
    metric: MetricKind,
    cloudwatch: String,
    api_id: String,
    window: Mutex<VecDeque<Option<bool>>>,
    state: Mutex<AlarmState>,
}

impl Alarm {
    pub fn new(
        metric: MetricKind,
        cloudwatch: impl Into<String>,
        api_id: impl Into<String>,
        config: AlarmConfig,
    ) -> Self {
        Self {
            config,
            metric,
            cloudwatch: cloudwatch.into(),
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
        let breaching = match metrics.minimum(self.metric, &self.cloudwatch, &self.api_id, from, to)
        {
            Some(value) => Some(!value),
            None if self.config.missing == MissingData::Breaching => Some(true),
            None => None,
        };
        let mut window = lock(&self.window);
        window.push_back(breaching);
        while window.len() > self.config.evaluation_periods {
            window.pop_front();
        }
        let next = if window.iter().all(Option::is_none) {
            AlarmState::InsufficientData
        } else if window.iter().filter(|b| **b == Some(true)).count()
            >= self.config.datapoints_to_alarm
        {
            AlarmState::Alarm
        } else {
            AlarmState::Ok
        };
        let mut state = lock(&self.state);
        (std::mem::replace(&mut *state, next) != next).then_some(next)
    }
}

/// The caching resolver in front of the failover records: it re-reads the authoritative
/// answer (see [`Resolver::authoritative`]) at most once per TTL, like a shared recursive
/// resolver.
#[derive(Debug)]
pub struct Resolver {
    ttl: Duration,
    scale: TimeScale,
    /// `sticky-dns`: a resolver that ignores the record's TTL and keeps its answer this long.
    ttl_override: Mutex<Option<Duration>>,
    cached: Mutex<Option<(RegionId, Instant)>>,
    /// Each failover record's health check, as Route 53 reads it.
    healthy: Mutex<PerRegion<bool>>,
    /// Regions taken out of DNS on purpose (a planned evacuation; ARC Region switch's
    /// health check in AWS), whatever their alarm says.
    out_of_service: Mutex<PerRegion<bool>>,
    timeline: Timeline,
    names: PerRegion<String>,
}

impl Resolver {
    pub fn new(
        ttl: AwsDuration,
        scale: TimeScale,
        timeline: Timeline,
        names: PerRegion<String>,
    ) -> Self {
        Self {
            ttl: scale.lab(ttl),
            scale,
            ttl_override: Mutex::new(None),
            cached: Mutex::new(None),
            healthy: Mutex::new(PerRegion::new(true, true)),
            out_of_service: Mutex::default(),
            timeline,
            names,
        }
    }

    /// A failover record's health check verdict (Route 53 side).
    pub fn set_healthy(&self, region: RegionId, healthy: bool) {
        lock(&self.healthy)[region] = healthy;
    }

    pub fn healthy(&self, region: RegionId) -> bool {
        lock(&self.healthy)[region]
    }

    /// What Route 53 answers for failover records: the primary if healthy, else the
    /// secondary if healthy, else the primary ("if both are unhealthy, Route 53 responds as
    /// if both were healthy": it returns the primary).
    fn authoritative(&self) -> RegionId {
        let out = lock(&self.out_of_service).clone();
        let healthy = lock(&self.healthy).clone();
        let serving = |r: RegionId| healthy[r] && !out[r];
        if serving(RegionId::Primary) || !serving(RegionId::Secondary) {
            RegionId::Primary
        } else {
            RegionId::Secondary
        }
    }

    /// Take a Region out of DNS (or put it back), as a calculated health check with a
    /// Region switch child does in AWS (template.yaml, `FailoverControl`).
    pub fn set_in_service(&self, region: RegionId, in_service: bool) {
        lock(&self.out_of_service)[region] = !in_service;
    }

    pub fn in_service(&self, region: RegionId) -> bool {
        !lock(&self.out_of_service)[region]
    }

    /// Apply what `fault` means for the resolvers clients use: `sticky-dns` makes them keep
    /// answers longer than the TTL; heal makes them honour it again.
    pub fn inject(&self, fault: &Fault) {
        match *fault {
            Fault::StickyDns(keep) => *lock(&self.ttl_override) = Some(self.scale.lab(keep)),
            Fault::Heal => *lock(&self.ttl_override) = None,
            _ => {}
        }
    }

    /// How long an answer is kept now.
    fn ttl(&self) -> Duration {
        lock(&self.ttl_override).unwrap_or(self.ttl)
    }

    /// The Region a new connection is sent to: a client's lookup, which refreshes the
    /// cache once its answer is older than the TTL (and records a flip it sees).
    pub fn answer(&self) -> RegionId {
        let ttl = self.ttl();
        let mut cached = lock(&self.cached);
        let now = Instant::now();
        match *cached {
            Some((region, at)) if now.duration_since(at) < ttl => region,
            previous => {
                let region = self.authoritative();
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

    /// The answer the resolver gave last (the authoritative one if nobody has asked yet),
    /// without refreshing anything: every change of it is a recorded flip, so a status that
    /// shows it never contradicts its own timeline.
    pub fn last_answer(&self) -> RegionId {
        match *lock(&self.cached) {
            Some((region, _)) => region,
            None => self.authoritative(),
        }
    }
}
