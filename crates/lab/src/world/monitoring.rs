//! What watches the Regions: the canaries (each Region's own, probing it from inside), the
//! watcher (in the judge, probing the primary from outside it), the connection census, the
//! verdict alarms, the fast path's probe rounds, and Route 53's health checks behind the
//! failover records (`world::route53`). Each is a task of the world's owner, started once by
//! [`World`]'s builder.

use crate::world::config::{Composition, HealthFront};
use crate::world::fast::{self as fastpath, FastConfig, FastFaults, HealthCheckKind, Vantage};
use crate::world::front::{self, Edges, OldVerdicts, Origin};
use crate::world::health::{Alarm, AlarmState, LabMetrics, Resolver};
use crate::world::region::Region;
use crate::world::region_id::{PerRegion, RegionId};
use crate::world::route53::{
    CheckId, CheckKind, CheckSpec, HealthChecks, InsufficientData, Records, Reply, Target,
    UrlPermissions, CHECKER_LOCATIONS,
};
use crate::world::scale::{AwsDuration, TimeScale};
use crate::world::timeline::{Kind, Timeline};
use crate::world::{World, AUDIENCE};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wsdr_core::{Clock, Metrics, VerdictSource};
use wsdr_protocol::AuctionId;

/// A probe never waits less than this, in real time: on a loaded 2-core machine a real-time
/// lab at a high time scale must not fail probes for want of CPU. A simulation has no CPU
/// time to wait for, and no floor.
const REAL_TIME_PROBE_FLOOR: Duration = Duration::from_millis(500);

/// How often the world's own clients look the global name up (AWS time).
const RESOLVER_QUERY_INTERVAL: AwsDuration = AwsDuration::from_secs(5);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The verdict on the primary the CloudFront front's design served: both views folded in the
/// judge (its watcher's probe and the primary's own rounds, which reached it by replication).
/// Kept only with `HealthFront::Cloudfront`.
#[derive(Debug, Default)]
pub struct LegacyVerdict(Mutex<Option<(bool, tokio::time::Instant)>>);

impl LegacyVerdict {
    fn record(&self, serve: bool) {
        *lock(&self.0) = Some((serve, tokio::time::Instant::now()));
    }

    fn read(&self, scale: TimeScale) -> Option<(bool, u64)> {
        lock(&self.0).map(|(serve, at)| {
            (
                serve,
                (at.elapsed().as_secs_f64() * scale.factor() * 1000.0) as u64,
            )
        })
    }
}

/// What Route 53's checkers reach, and how each answers them.
struct Endpoints {
    regions: PerRegion<Arc<Region>>,
    faults: Arc<FastFaults>,
    entropy: Arc<dyn wsdr_core::Entropy>,
    function_url: UrlPermissions,
    edges: Mutex<Edges>,
    legacy: Arc<LegacyVerdict>,
    timeline: Timeline,
    scale: TimeScale,
}

impl Endpoints {
    /// Whether a flood makes the health function refuse this request (429).
    fn flooded(&self) -> bool {
        let percent = self.faults.flood_percent();
        percent > 0 && self.entropy.below(100) < u64::from(percent)
    }

    fn reply(&self, target: &Target, checker: usize) -> Reply {
        match target {
            Target::Api { region } => {
                if self.regions[*region].is_down() {
                    Reply::NoAnswer
                } else {
                    Reply::Connected
                }
            }
            Target::Function { region, path } => {
                let region = &self.regions[*region];
                if region.is_down() {
                    return Reply::NoAnswer;
                }
                if self.flooded() {
                    return Reply::Http {
                        status: 429,
                        body: "TooManyRequestsException".into(),
                    };
                }
                match region.health_function(path) {
                    Some((status, body)) => Reply::Http {
                        status,
                        body: body.to_owned(),
                    },
                    None => Reply::NoAnswer,
                }
            }
            Target::Front { path } => {
                let now_ms = self
                    .scale
                    .aws_ms(self.timeline.elapsed().as_secs_f64() * 1000.0)
                    as u64;
                let origin = || {
                    let judge = &self.regions[front::ORIGIN];
                    if judge.is_down() {
                        Origin::NoAnswer
                    } else if !self.function_url.admits_anyone() {
                        Origin::Refused(403)
                    } else if self.flooded() {
                        Origin::Refused(429)
                    } else {
                        let (status, body) = front::old_function_answer(
                            path,
                            OldVerdicts {
                                primary: self.legacy.read(self.scale),
                                secondary: judge
                                    .verdict_copy(RegionId::Secondary, VerdictSource::Inside),
                            },
                        );
                        Origin::Answer(status, body)
                    }
                };
                lock(&self.edges).request(checker, path, now_ms, origin)
            }
        }
    }
}

/// The failover records' checks, for each kind of record check (one drives DNS, the other is
/// timed beside it).
struct Decision {
    checks: HealthChecks,
    alarm_records: Records,
    endpoint_records: Option<Records>,
    /// The rehearsal pair (template.yaml's `Rehearsal*`): the same checks on the health
    /// functions' `/rehearsal/*` paths, the same SECONDARY check.
    rehearsal_records: Option<Records>,
}

impl World {
    /// A probe's timeout: `aws` in lab time, floored in the real-time lab.
    fn probe_timeout(&self, aws: AwsDuration) -> Duration {
        let lab = self.config.scale.lab(aws);
        if self.config.environment.is_simulated() {
            lab
        } else {
            lab.max(REAL_TIME_PROBE_FLOOR)
        }
    }

    /// A prober of `target` (the real canary's probe: connect, heartbeat, pong).
    fn prober(
        &self,
        canary_secret: &str,
        target: &Region,
        timeout: AwsDuration,
    ) -> anyhow::Result<Arc<canary::Canary>> {
        let config = canary::Config {
            target_url: target.url(),
            target_connect_to: None,
            expected_region: target.name.clone(),
            api_id: target.api_id.clone(),
            metric_names: wsdr_aws::MetricNames::default(),
            probes_per_run: 1,
            probe_spacing: Duration::ZERO,
            probe_timeout: self.probe_timeout(timeout),
            auction_id: AuctionId::new("canary")?,
            secret: canary_secret.as_bytes().to_vec(),
            issuer: "wsdr-canary".into(),
            audience: AUDIENCE.into(),
            placement: wsdr_client::TokenPlacement::QueryString,
            verdict: None,
            fast: None,
        };
        Ok(Arc::new(
            canary::Canary::new(
                config,
                Arc::new(wsdr_core::memory::MemoryMetrics::default()),
                Arc::new(self.clock),
            )
            .with_network(self.config.environment.network.clone()),
        ))
    }

    fn failover_rule(&self) -> anyhow::Result<wsdr_core::FailoverRule> {
        wsdr_core::FailoverRule::new(
            self.config.failover_datapoints as u32,
            self.config.failback_datapoints as u32 + 1,
        )
        .map_err(|e| anyhow::anyhow!("failover rule: {e}"))
    }

    /// Each Region's own canary, every minute: probes its Region from inside, publishes its
    /// datapoint and its minute verdict to its own Region's CloudWatch (what the reference
    /// design's alarm reads, and the primary's inside view with alarm checks). A Region that
    /// is down, as its users see it, still runs it (its probes fail): the lab's assumption.
    pub(super) fn start_canaries(&mut self, canary_secret: &str) -> anyhow::Result<()> {
        let scale = self.config.scale;
        let period = scale.lab(AwsDuration::from_secs(60));
        for (_, region) in self.regions.iter() {
            let config = canary::Config {
                target_url: region.url(),
                target_connect_to: None,
                expected_region: region.name.clone(),
                api_id: region.api_id.clone(),
                metric_names: wsdr_aws::MetricNames::default(),
                probes_per_run: self.config.probes_per_run,
                probe_spacing: scale.lab(AwsDuration::from_secs(15)),
                probe_timeout: self.probe_timeout(AwsDuration::from_secs(5)),
                auction_id: AuctionId::new("canary")?,
                secret: canary_secret.as_bytes().to_vec(),
                issuer: "wsdr-canary".into(),
                audience: AUDIENCE.into(),
                placement: wsdr_client::TokenPlacement::QueryString,
                verdict: Some(self.failover_rule()?),
                fast: None,
            };
            let metrics = LabMetrics {
                store: self.metrics.clone(),
                timeline: self.timeline.clone(),
                region: region.name.clone(),
                judged: region.name.clone(),
            };
            let canary = Arc::new(
                canary::Canary::new(config, Arc::new(metrics), Arc::new(self.clock))
                    .with_network(self.config.environment.network.clone()),
            );
            let start = self.timeline.start();
            let runs = self.owner.clone();
            let timeline = self.timeline.clone();
            let name = region.name.clone();
            self.owner.spawn(async move {
                // Runs start a tenth into each period so each datapoint lands inside it.
                let mut tick = tokio::time::interval_at(start + period / 10, period);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
                loop {
                    tick.tick().await;
                    let canary = canary.clone();
                    let timeline = timeline.clone();
                    let name = name.clone();
                    runs.spawn(async move {
                        // A failed run is the datapoint's 0, already published; what did not
                        // even publish is worth a line.
                        if let Err(error) = canary.run_once().await {
                            timeline.record_in(
                                Kind::Note,
                                &name,
                                format!("canary run failed: {error}"),
                            );
                        }
                    });
                }
            });
        }
        Ok(())
    }

    /// The watcher's minute runs (wsdr's composition): in the judge, probing the primary from
    /// outside it (the path between the Regions), publishing to the judge's CloudWatch and
    /// deciding its minute verdict from its own datapoints, as the canary Lambda does with
    /// `VERDICT_*` set (`canary::Canary::run_once`). A judge that is down, or a watcher that is
    /// silent, publishes nothing.
    pub(super) fn start_watcher(&mut self, canary_secret: &str) -> anyhow::Result<()> {
        let scale = self.config.scale;
        let period = scale.lab(AwsDuration::from_secs(60));
        let spacing = scale.lab(AwsDuration::from_secs(15));
        let planned = self.config.probes_per_run;
        let rule = self.failover_rule()?;
        let prober = self.prober(
            canary_secret,
            &self.regions[RegionId::Primary],
            AwsDuration::from_secs(5),
        )?;
        let metrics = LabMetrics {
            store: self.metrics.clone(),
            timeline: self.timeline.clone(),
            region: self.regions[fastpath::JUDGE].name.clone(),
            judged: self.regions[RegionId::Primary].name.clone(),
        };
        let judge = self.regions[fastpath::JUDGE].clone();
        let api_id = self.regions[RegionId::Primary].api_id.clone();
        let faults = self.fast_faults.clone();
        let clock = self.clock;
        let start = self.timeline.start();
        let runs = self.owner.clone();
        self.owner.spawn(async move {
            let mut tick = tokio::time::interval_at(start + period / 10, period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tick.tick().await;
                if judge.is_down() || faults.is_silent() {
                    continue;
                }
                let (prober, metrics, faults, api_id) = (
                    prober.clone(),
                    metrics.clone(),
                    faults.clone(),
                    api_id.clone(),
                );
                runs.spawn(async move {
                    let started_ms = clock.now_ms();
                    let mut outcomes = Vec::new();
                    let mut healthy = None;
                    for attempt in 0..planned {
                        if attempt > 0 {
                            tokio::time::sleep(spacing).await;
                        }
                        let blind = faults.is_blind(RegionId::Primary, Vantage::Outside.index());
                        let ok = !blind && canary::counts_as_up(&prober.probe_once().await);
                        outcomes.push(ok);
                        healthy = canary::fold(&outcomes, planned);
                        if healthy.is_some() {
                            break;
                        }
                    }
                    let healthy = healthy.unwrap_or(false);
                    let point = wsdr_core::HealthDatapoint {
                        api_id: api_id.clone(),
                        healthy,
                        latency_ms: None,
                        timestamp_ms: started_ms,
                    };
                    if metrics.put_health(&point).await.is_err() {
                        return;
                    }
                    let Ok(mut minutes) = metrics
                        .recent_health(&api_id, rule.window.saturating_sub(1), started_ms)
                        .await
                    else {
                        return;
                    };
                    minutes.push(Some(healthy));
                    let _ = metrics
                        .put_verdict(&wsdr_core::VerdictDatapoint {
                            api_id,
                            serve: rule.serves(&minutes),
                            timestamp_ms: started_ms,
                        })
                        .await;
                });
            }
        });
        Ok(())
    }

    /// Each Region's connection census, every minute (in AWS: the evacuator function on a
    /// schedule, `{"census": true}`), from which its handler computes the herd hint.
    pub(super) fn start_census(&mut self) {
        let period = self.config.scale.lab(AwsDuration::from_secs(60));
        for region in self.regions.values() {
            let region = region.clone();
            self.owner.spawn(async move {
                let mut tick = tokio::time::interval(period);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
                loop {
                    tick.tick().await;
                    let now = region.clock.now_ms();
                    if let Err(error) =
                        wsdr_core::Connections::take_census(region.registry.as_ref(), now).await
                    {
                        tracing::warn!(%error, region = %region.name, "census failed");
                    }
                }
            });
        }
    }

    /// Every verdict alarm, at each period's end: each Region's own, and the watcher's on the
    /// primary (in the judge's CloudWatch).
    pub(super) fn start_alarms(&mut self) {
        let mut alarms: Vec<(String, Arc<Alarm>, bool)> = self
            .alarms
            .iter()
            .map(|(region, alarm)| {
                (
                    format!("{region} verdict alarm"),
                    alarm.clone(),
                    region == RegionId::Primary
                        && self.config.composition == Composition::Reference,
                )
            })
            .collect();
        alarms.push((
            "the watcher's verdict alarm on the primary".into(),
            self.watcher_alarm.clone(),
            self.config.composition == Composition::Wsdr,
        ));
        let metrics = self.metrics.clone();
        let timeline = self.timeline.clone();
        let period = self.watcher_alarm.config.period;
        let start = timeline.start();
        self.owner.spawn(async move {
            let mut k: u32 = 0;
            loop {
                let (from, to) = metrics.period(u64::from(k));
                // Evaluate half a period after the period ends, so late datapoints count.
                tokio::time::sleep_until(start + period * (k + 1) + period / 2).await;
                for (name, alarm, times_detection) in &alarms {
                    if let Some(state) = alarm.evaluate(&metrics, from, to) {
                        // The drill times detection on the alarm that decides the primary.
                        let kind = match (times_detection, state) {
                            (true, AlarmState::Alarm) => Kind::Alarm,
                            (true, _) => Kind::AlarmOk,
                            (false, _) => Kind::Note,
                        };
                        timeline.record(kind, format!("{name} -> {state:?}"));
                    }
                }
                k += 1;
            }
        });
    }

    /// The failover records' checks as template.yaml makes them for this configuration
    /// (docs/DEPLOY.md, "Who decides").
    fn decision(&self) -> anyhow::Result<Decision> {
        use RegionId::{Primary, Secondary};
        let mut checks = HealthChecks::new();
        let fast = self.fast_config();
        let threshold = fast.as_ref().map_or(1, |fast| fast.failure_threshold);
        let str_match = |region, path| CheckKind::Https {
            target: Target::Function { region, path },
            search: Some(wsdr_core::SEARCH_STRING),
            failure_threshold: threshold,
        };
        let spec = |name, kind| CheckSpec {
            name,
            kind,
            inverted: false,
        };
        let alarm_records = match self.config.composition {
            Composition::Reference => Records {
                primary: Some(checks.add(spec(
                    "PrimaryHealthCheck",
                    CheckKind::Alarm {
                        alarm: self.alarms[Primary].clone(),
                        insufficient: InsufficientData::LastKnownStatus,
                    },
                ))?),
                secondary: Some(checks.add(spec(
                    "SecondaryHealthCheck",
                    CheckKind::Alarm {
                        alarm: self.alarms[Secondary].clone(),
                        insufficient: InsufficientData::LastKnownStatus,
                    },
                ))?),
            },
            Composition::Wsdr => {
                let outside = checks.add(spec(
                    "PrimaryVerdictCheck",
                    CheckKind::Alarm {
                        alarm: self.watcher_alarm.clone(),
                        insufficient: InsufficientData::Unhealthy,
                    },
                ))?;
                let inside = checks.add(spec(
                    "PrimarySelfCheck",
                    CheckKind::Alarm {
                        alarm: self.alarms[Primary].clone(),
                        insufficient: InsufficientData::Unhealthy,
                    },
                ))?;
                Records {
                    primary: Some(checks.add(spec(
                        "PrimaryHealthCheck",
                        CheckKind::Calculated {
                            children: vec![outside, inside],
                            threshold: crate::world::route53::PRIMARY_VIEWS_NEEDED,
                        },
                    ))?),
                    secondary: Some(self.liveness(&mut checks, threshold)?),
                }
            }
        };
        let endpoint_records = match (fast.is_some(), self.config.health_front) {
            (false, _) => None,
            (true, HealthFront::Cloudfront) => {
                let front = |path| CheckKind::Https {
                    target: Target::Front { path },
                    search: None,
                    failure_threshold: threshold,
                };
                Some(Records {
                    primary: Some(checks.add(spec("PrimaryHealthCheck", front("/primary")))?),
                    secondary: Some(checks.add(spec("SecondaryHealthCheck", front("/secondary")))?),
                })
            }
            (true, HealthFront::Direct) => match self.config.composition {
                Composition::Reference => Some(Records {
                    primary: Some(
                        checks.add(spec("PrimaryHealthCheck", str_match(Secondary, "/primary")))?,
                    ),
                    secondary: Some(
                        checks.add(spec("SecondaryHealthCheck", str_match(Secondary, "/self")))?,
                    ),
                }),
                Composition::Wsdr => {
                    let outside = checks.add(spec(
                        "PrimaryVerdictCheck",
                        str_match(Secondary, "/primary"),
                    ))?;
                    let inside =
                        checks.add(spec("PrimarySelfCheck", str_match(Primary, "/self")))?;
                    let primary = checks.add(spec(
                        "PrimaryHealthCheck",
                        CheckKind::Calculated {
                            children: vec![outside, inside],
                            threshold: crate::world::route53::PRIMARY_VIEWS_NEEDED,
                        },
                    ))?;
                    let secondary = match alarm_records.secondary {
                        Some(liveness) => liveness,
                        None => self.liveness(&mut checks, threshold)?,
                    };
                    Some(Records {
                        primary: Some(primary),
                        secondary: Some(secondary),
                    })
                }
            },
        };
        let rehearsal_records = match (&endpoint_records, self.config.health_front) {
            (Some(records), HealthFront::Direct)
                if self.config.composition == Composition::Wsdr =>
            {
                let outside = checks.add(spec(
                    "RehearsalVerdictCheck",
                    str_match(Secondary, "/rehearsal/primary"),
                ))?;
                let inside = checks.add(spec(
                    "RehearsalSelfCheck",
                    str_match(Primary, "/rehearsal/self"),
                ))?;
                let primary = checks.add(spec(
                    "RehearsalPrimaryCheck",
                    CheckKind::Calculated {
                        children: vec![outside, inside],
                        threshold: crate::world::route53::PRIMARY_VIEWS_NEEDED,
                    },
                ))?;
                Some(Records {
                    primary: Some(primary),
                    secondary: records.secondary,
                })
            }
            _ => None,
        };
        Ok(Decision {
            checks,
            alarm_records,
            endpoint_records,
            rehearsal_records,
        })
    }

    /// The SECONDARY record's check in wsdr's composition: the secondary's API endpoint
    /// reachable (TCP 443), nothing the judge says.
    fn liveness(&self, checks: &mut HealthChecks, threshold: u32) -> anyhow::Result<CheckId> {
        checks.add(CheckSpec {
            name: "SecondaryHealthCheck",
            kind: CheckKind::Tcp {
                target: Target::Api {
                    region: RegionId::Secondary,
                },
                failure_threshold: threshold,
            },
            inverted: false,
        })
    }

    /// Route 53: the checkers poll every endpoint check, each on its own slot of the
    /// interval; the records' health follows, and the kind that drives DNS sets the
    /// resolver's. Alarm checks are read at the alarm path's own interval, as before.
    pub(super) fn start_route53(&mut self) -> anyhow::Result<()> {
        let Decision {
            checks,
            alarm_records,
            endpoint_records,
            rehearsal_records,
        } = self.decision()?;
        let rehearsal = self.rehearsal.clone();
        let checks = Arc::new(Mutex::new(checks));
        let endpoints = Arc::new(Endpoints {
            regions: self.regions.clone(),
            faults: self.fast_faults.clone(),
            entropy: self.config.environment.entropy.clone(),
            function_url: self.config.function_url,
            edges: Mutex::default(),
            legacy: self.legacy_verdict.clone(),
            timeline: self.timeline.clone(),
            scale: self.config.scale,
        });
        let drives = self.config.health_check;
        let resolver = self.resolver.clone();
        let timeline = self.timeline.clone();
        // Alarm checks: read every `health_check_interval`.
        {
            let checks = checks.clone();
            let resolver = resolver.clone();
            let timeline = timeline.clone();
            let interval = self.config.scale.lab(self.config.health_check_interval);
            self.owner.spawn(async move {
                let mut tick = tokio::time::interval(interval);
                let mut last = PerRegion::new(None, None);
                loop {
                    tick.tick().await;
                    let health = alarm_records.health(&mut lock(&checks));
                    report(
                        &timeline,
                        &mut last,
                        health,
                        (Kind::HealthHealthy, Kind::HealthUnhealthy),
                        "Route 53 health check",
                    );
                    if drives == HealthCheckKind::Alarm {
                        set(&resolver, health);
                    }
                }
            });
        }
        // Endpoint checks: the checkers, one slot each per interval.
        let has_endpoints = lock(&checks).endpoint_checks().next().is_some();
        if has_endpoints {
            let interval = self
                .fast_config()
                .map_or(AwsDuration::from_secs(10), |fast| fast.check_interval);
            let slot = self.config.scale.lab(interval) / CHECKER_LOCATIONS.len() as u32;
            // The checks exist once the verdicts do (the secondary stack, which creates them,
            // is deployed after the primary's canary runs): the first slot after one round.
            let first = tokio::time::Instant::now()
                + self.fast_config().map_or(Duration::ZERO, |fast| {
                    self.config.scale.lab(fast.probe_interval)
                });
            self.owner.spawn(async move {
                let mut tick = tokio::time::interval_at(first, slot);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
                let mut last = PerRegion::new(None, None);
                let mut turn: usize = 0;
                loop {
                    tick.tick().await;
                    let checker = turn % CHECKER_LOCATIONS.len();
                    turn += 1;
                    let mut checks = lock(&checks);
                    let targets: Vec<(CheckId, Target)> = checks
                        .endpoint_checks()
                        .map(|(id, target)| (id, target.clone()))
                        .collect();
                    for (id, target) in targets {
                        let reply = endpoints.reply(&target, checker);
                        checks.record(id, checker, &reply);
                    }
                    // Each check's status as Route 53 reports it (`wsdr rehearse`'s
                    // pre-flight), and the rehearsal pair's records.
                    rehearsal.observe(&mut checks);
                    if let Some(records) = rehearsal_records {
                        rehearsal.set_records(records.health(&mut checks));
                    }
                    if let Some(records) = endpoint_records {
                        let health = records.health(&mut checks);
                        report(
                            &timeline,
                            &mut last,
                            health,
                            (Kind::EndpointHealthy, Kind::EndpointUnhealthy),
                            "endpoint health check",
                        );
                        if drives == HealthCheckKind::Endpoint {
                            set(&resolver, health);
                        }
                    }
                }
            });
        }
        Ok(())
    }

    /// A shared recursive resolver serves many clients, so someone asks it every few
    /// seconds: without this a lab with no users would never look the name up, and its
    /// control room would show the answer from before the last failover.
    pub(super) fn start_resolver_clients(&mut self) {
        let every = self.config.scale.lab(RESOLVER_QUERY_INTERVAL);
        let resolver = self.resolver.clone();
        self.owner.spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tick.tick().await;
                resolver.answer();
            }
        });
    }

    /// The fast path: probe rounds every few seconds, each vantage point deciding its own
    /// verdict and writing it in its own Region, where that Region's health function serves
    /// it: each Region's canary on itself (inside, written in that Region), and the watcher
    /// on the primary (outside, written in the judge: it crosses the path between the
    /// Regions). A judge that is down decides nothing; a silent watcher writes nothing.
    /// With the CloudFront front, the judge also keeps that design's folded verdict.
    pub(super) fn start_fast_path(
        &mut self,
        canary_secret: &str,
        fast: &FastConfig,
    ) -> anyhow::Result<()> {
        let period = self.config.scale.lab(fast.probe_interval);
        let legacy = self.config.health_front == HealthFront::Cloudfront;
        // Each Region's latest own round (the legacy fold reads the primary's, as that
        // design's judge read it by replication).
        type Round = Arc<Mutex<Option<(bool, tokio::time::Instant)>>>;
        let rounds: PerRegion<Round> = PerRegion::default();
        for (id, region) in self.regions.iter() {
            let own_round = rounds[id].clone();
            let prober = self.prober(canary_secret, region, fast.probe_interval)?;
            let home = region.clone();
            let other = self.regions[id.other()].clone();
            let link = self.links[id].clone();
            let faults = self.fast_faults.clone();
            let timeline = self.timeline.clone();
            let owner = self.owner.clone();
            let mut verdict = wsdr_core::FastVerdict::new(fast.fail_after, fast.recover_after, 1);
            self.owner.spawn(async move {
                let mut tick = tokio::time::interval(period);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
                let mut version: u64 = 0;
                loop {
                    tick.tick().await;
                    // A Region that is down, as its users see it, still runs its own canary
                    // (the lab's assumption, as for the minute canary): its probes fail, and
                    // its verdict turns in its own replica.
                    let blind = faults.is_blind(id, Vantage::Inside.index());
                    let ok = !blind && canary::counts_as_up(&prober.probe_once().await);
                    *lock(&own_round) = Some((ok, tokio::time::Instant::now()));
                    if let Some(serve) = verdict.round(&[Some(ok)]) {
                        timeline.record(
                            Kind::Note,
                            format!(
                                "{id}: its own canary's verdict -> {}",
                                if serve { "serve" } else { "fail over" }
                            ),
                        );
                    }
                    version += 1;
                    let serve = verdict.serves();
                    home.record_verdict(id, VerdictSource::Inside, version, serve);
                    replicate(
                        &owner,
                        &link,
                        &other,
                        id,
                        VerdictSource::Inside,
                        version,
                        serve,
                    );
                }
            });
        }
        // The watcher, in the judge.
        let prober = self.prober(
            canary_secret,
            &self.regions[RegionId::Primary],
            fast.probe_interval,
        )?;
        let judge = self.regions[fastpath::JUDGE].clone();
        let primary = self.regions[RegionId::Primary].clone();
        let primary_round = rounds[RegionId::Primary].clone();
        let fresh = period * 2 + self.config.scale.lab(AwsDuration::from_secs(5));
        let inside_link = self.links[RegionId::Primary].clone();
        let verdict_link = self.links[fastpath::JUDGE].clone();
        let faults = self.fast_faults.clone();
        let timeline = self.timeline.clone();
        let owner = self.owner.clone();
        let legacy_verdict = self.legacy_verdict.clone();
        let mut verdict = wsdr_core::FastVerdict::new(fast.fail_after, fast.recover_after, 1);
        let mut folded = wsdr_core::FastVerdict::new(fast.fail_after, fast.recover_after, 2);
        self.owner.spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            let mut version: u64 = 0;
            loop {
                tick.tick().await;
                if judge.is_down() || faults.is_silent() {
                    continue;
                }
                let blind = faults.is_blind(RegionId::Primary, Vantage::Outside.index());
                let ok = !blind && canary::counts_as_up(&prober.probe_once().await);
                version += 1;
                if let Some(serve) = verdict.round(&[Some(ok)]) {
                    let (kind, what) = if serve {
                        (Kind::FastServe, "the judge's verdict -> serve")
                    } else {
                        (Kind::FastFailover, "the judge's verdict -> fail over")
                    };
                    fastpath::record(&timeline, RegionId::Primary, kind, what);
                }
                let serve = verdict.serves();
                judge.record_verdict(RegionId::Primary, VerdictSource::Judge, version, serve);
                replicate(
                    &owner,
                    &verdict_link,
                    &primary,
                    RegionId::Primary,
                    VerdictSource::Judge,
                    version,
                    serve,
                );
                if legacy {
                    // That design's fold: the primary's own latest round counted only if it
                    // reached the judge by replication (recent, and the link not cut).
                    let inside = (*lock(&primary_round))
                        .filter(|(_, at)| !inside_link.is_cut() && at.elapsed() <= fresh)
                        .map(|(ok, _)| ok);
                    folded.round(&[Some(ok), inside]);
                    legacy_verdict.record(folded.serves());
                }
            }
        });
        Ok(())
    }
}

/// A verdict's copy reaches the other Region by replication, when its link flows.
fn replicate(
    owner: &crate::world::owner::Owner,
    link: &crate::world::replication::Link,
    to: &Arc<Region>,
    judged: RegionId,
    source: VerdictSource,
    version: u64,
    serve: bool,
) {
    let (link, to) = (link.clone(), to.clone());
    owner.spawn(async move {
        loop {
            tokio::time::sleep(link.lag()).await;
            if !link.is_cut() {
                to.record_verdict(judged, source, version, serve);
                return;
            }
        }
    });
}

/// The resolver follows the records' health.
fn set(resolver: &Resolver, (primary, secondary): (bool, bool)) {
    resolver.set_healthy(RegionId::Primary, primary);
    resolver.set_healthy(RegionId::Secondary, secondary);
}

/// Record each change of a record's health (the primary's with `kinds`; the secondary's as
/// a note).
fn report(
    timeline: &Timeline,
    last: &mut PerRegion<Option<bool>>,
    (primary, secondary): (bool, bool),
    (healthy_kind, unhealthy_kind): (Kind, Kind),
    what: &str,
) {
    for (region, healthy) in [
        (RegionId::Primary, primary),
        (RegionId::Secondary, secondary),
    ] {
        if last[region] != Some(healthy) {
            if last[region].is_some() {
                let kind = match (region, healthy) {
                    (RegionId::Primary, true) => healthy_kind,
                    (RegionId::Primary, false) => unhealthy_kind,
                    _ => Kind::Note,
                };
                timeline.record(
                    kind,
                    format!(
                        "{what}: {region} {}",
                        if healthy { "healthy" } else { "unhealthy" }
                    ),
                );
            }
            last[region] = Some(healthy);
        }
    }
}
