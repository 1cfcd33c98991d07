//! What watches the Regions: the canaries (each its Region's watcher), the connection census,
//! the verdict alarms, the Route 53 health checks behind the failover records, and the fast
//! path's probe rounds and endpoint checks. Each is a task of the world's owner, started once
//! by [`World`]'s builder.

use crate::world::fast::{self as fastpath, EndpointCheck, FastConfig, HealthCheckKind};
use crate::world::health::{AlarmState, LabMetrics};
use crate::world::region_id::{PerRegion, RegionId};
use crate::world::scale::AwsDuration;
use crate::world::timeline::Kind;
use crate::world::{World, AUDIENCE};
use std::sync::Arc;
use std::time::Duration;
use wsdr_core::Clock;
use wsdr_protocol::AuctionId;

/// A probe never waits less than this, in real time: on a loaded 2-core machine a real-time
/// lab at a high time scale must not fail probes for want of CPU. A simulation has no CPU
/// time to wait for, and no floor.
const REAL_TIME_PROBE_FLOOR: Duration = Duration::from_millis(500);

/// How often the world's own clients look the global name up (AWS time).
const RESOLVER_QUERY_INTERVAL: AwsDuration = AwsDuration::from_secs(5);

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
                // Every lab canary is a watcher of its own Region: the primary's verdict moves
                // the PRIMARY record, the secondary's the SECONDARY one.
                verdict: Some(
                    wsdr_core::FailoverRule::new(
                        self.config.failover_datapoints as u32,
                        self.config.failback_datapoints as u32 + 1,
                    )
                    .map_err(|e| anyhow::anyhow!("failover rule: {e}"))?,
                ),
                fast: None,
            };
            let metrics = LabMetrics {
                store: self.metrics.clone(),
                timeline: self.timeline.clone(),
                region: region.name.clone(),
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

    pub(super) fn start_alarms(&mut self) {
        let alarms = self.alarms.clone();
        let metrics = self.metrics.clone();
        let timeline = self.timeline.clone();
        let period = self.alarms[RegionId::Primary].config.period;
        let start = timeline.start();
        self.owner.spawn(async move {
            let mut k: u32 = 0;
            loop {
                let (from, to) = metrics.period(u64::from(k));
                // Evaluate half a period after the period ends, so late datapoints count.
                tokio::time::sleep_until(start + period * (k + 1) + period / 2).await;
                for (region, alarm) in alarms.iter() {
                    if let Some(state) = alarm.evaluate(&metrics, from, to) {
                        // The drill times detection on the primary's alarm alone.
                        let kind = match (region, state) {
                            (RegionId::Primary, AlarmState::Alarm) => Kind::Alarm,
                            (RegionId::Primary, _) => Kind::AlarmOk,
                            (RegionId::Secondary, _) => Kind::Note,
                        };
                        timeline.record(kind, format!("{region} verdict alarm -> {state:?}"));
                    }
                }
                k += 1;
            }
        });
    }

    pub(super) fn start_health_checks(&mut self) {
        // With endpoint checks in charge, the alarm's checks are only timed (side by side).
        let drives_dns = self.config.health_check == HealthCheckKind::Alarm;
        let secondary_holds = self.config.secondary_holds;
        let checks = self.health_checks.clone();
        let resolver = self.resolver.clone();
        let timeline = self.timeline.clone();
        let interval = self.config.scale.lab(self.config.health_check_interval);
        self.owner.spawn(async move {
            let mut tick = tokio::time::interval(interval);
            let mut last: PerRegion<Option<bool>> = PerRegion::default();
            loop {
                tick.tick().await;
                let mut healthy = PerRegion::from_fn(|region| checks[region].poll());
                // wsdr's SECONDARY record is a calculated check: its verdict's, or the
                // primary's inverted (template.yaml, `SecondaryHoldsHealthCheck`).
                if secondary_holds {
                    healthy[RegionId::Secondary] = wsdr_core::secondary_holds(
                        healthy[RegionId::Secondary],
                        healthy[RegionId::Primary],
                    );
                }
                if drives_dns {
                    for (region, healthy) in healthy.iter() {
                        resolver.set_healthy(region, *healthy);
                    }
                }
                for (region, healthy) in healthy.iter() {
                    let healthy = *healthy;
                    if last[region] != Some(healthy) {
                        if last[region].is_some() {
                            let kind = match (region, healthy) {
                                (RegionId::Primary, true) => Kind::HealthHealthy,
                                (RegionId::Primary, false) => Kind::HealthUnhealthy,
                                _ => Kind::Note,
                            };
                            timeline.record(
                                kind,
                                format!(
                                    "Route 53 health check: {region} {}",
                                    if healthy { "healthy" } else { "unhealthy" }
                                ),
                            );
                        }
                        last[region] = Some(healthy);
                    }
                }
            }
        });
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

    /// The fast path: per Region, probe rounds feeding a fast verdict decided in the judge
    /// Region ([`fastpath::JUDGE`], the secondary) and written to its replica, where its
    /// health endpoint serves it; then replicated to the other Region like any item. Route 53
    /// endpoint health checks poll the judge for both failover records.
    ///
    /// The verdict on the primary folds two vantage points, as the watcher does in AWS: the
    /// watcher's own probe from the judge (outside), and the primary's canary's round
    /// (inside), which reaches the judge only by replication out of the primary (cut: no
    /// fresh round, counted failed). The verdict on the secondary is its own canary's
    /// (inside), as in AWS. A judge that is down decides nothing.
    pub(super) fn start_fast_path(
        &mut self,
        canary_secret: &str,
        fast: &FastConfig,
    ) -> anyhow::Result<()> {
        let scale = self.config.scale;
        let judge = self.regions[fastpath::JUDGE].clone();
        for (id, region) in self.regions.iter() {
            let config = canary::Config {
                target_url: region.url(),
                target_connect_to: None,
                expected_region: region.name.clone(),
                api_id: region.api_id.clone(),
                metric_names: wsdr_aws::MetricNames::default(),
                probes_per_run: 1,
                probe_spacing: Duration::ZERO,
                // The probe's own bound: under one round.
                probe_timeout: self.probe_timeout(fast.probe_interval),
                auction_id: AuctionId::new("canary")?,
                secret: canary_secret.as_bytes().to_vec(),
                issuer: "wsdr-canary".into(),
                audience: AUDIENCE.into(),
                placement: wsdr_client::TokenPlacement::QueryString,
                verdict: None,
                fast: None,
            };
            let prober = Arc::new(
                canary::Canary::new(
                    config,
                    Arc::new(wsdr_core::memory::MemoryMetrics::default()),
                    Arc::new(self.clock),
                )
                .with_network(self.config.environment.network.clone()),
            );
            let judge = judge.clone();
            let copy_to = self.regions[fastpath::JUDGE.other()].clone();
            // Out of the judged Region (its canary's rounds), and out of the judge (the
            // verdict's copy in the other Region).
            let inside_link = self.links[id].clone();
            let verdict_link = self.links[fastpath::JUDGE].clone();
            let faults = self.fast_faults.clone();
            let timeline = self.timeline.clone();
            let owner = self.owner.clone();
            let period = scale.lab(fast.probe_interval);
            let vantage_points = fastpath::vantage_points(id);
            let mut verdict = wsdr_core::FastVerdict::new(
                fast.fail_after,
                fast.recover_after,
                vantage_points.len(),
            );
            self.owner.spawn(async move {
                let mut tick = tokio::time::interval(period);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
                let mut version: u64 = 0;
                loop {
                    tick.tick().await;
                    // A judge that is down decides nothing; a silent watcher writes nothing.
                    if judge.is_down() || faults.is_silent() {
                        continue;
                    }
                    let probe = |vantage: fastpath::Vantage| {
                        let prober = prober.clone();
                        let blind = faults.is_blind(id, vantage.index());
                        // The judged Region's own round reaches the judge by replication
                        // (the judge's own rounds are already there).
                        let reaches_judge = vantage == fastpath::Vantage::Outside
                            || id == fastpath::JUDGE
                            || !inside_link.is_cut();
                        async move {
                            // The real canary's rule: a handshake refused with 429 is a
                            // Region up and busy (its connect quota spent), never a failure.
                            let ok = !blind && canary::counts_as_up(&prober.probe_once().await);
                            reaches_judge.then_some(ok)
                        }
                    };
                    let results =
                        futures::future::join_all(vantage_points.iter().map(|v| probe(*v))).await;
                    let changed = verdict.round(&results);
                    if changed.is_none() {
                        // The watcher rewrites its verdict every round: its age says the
                        // watcher is alive.
                        judge.record_verdict(id, version, verdict.serves());
                    }
                    if let Some(serve) = changed {
                        let (kind, what) = if serve {
                            (Kind::FastServe, "fast verdict -> serve")
                        } else {
                            (Kind::FastFailover, "fast verdict -> fail over")
                        };
                        fastpath::record(&timeline, id, kind, what);
                        version += 1;
                        // Written where it was decided; the other Region's copy follows by
                        // replication, when the judge's replication flows.
                        judge.record_verdict(id, version, serve);
                        let copy_to = copy_to.clone();
                        let link = verdict_link.clone();
                        owner.spawn(async move {
                            loop {
                                tokio::time::sleep(link.lag()).await;
                                if !link.is_cut() {
                                    copy_to.record_verdict(id, version, serve);
                                    return;
                                }
                            }
                        });
                    }
                }
            });
        }
        let judge_addr = self.regions[fastpath::JUDGE].addr;
        let resolver = self.resolver.clone();
        let timeline = self.timeline.clone();
        let drives_dns = self.config.health_check == HealthCheckKind::Endpoint;
        let interval = scale.lab(fast.check_interval);
        let timeout = self.probe_timeout(AwsDuration::from_secs(4));
        let threshold = fast.failure_threshold;
        let network = self.config.environment.network.clone();
        let cached_for = fast.cached_for.map(|ttl| scale.lab(ttl));
        let faults = self.fast_faults.clone();
        let entropy = self.config.environment.entropy.clone();
        self.owner.spawn(async move {
            let judge_client = crate::world::control::ControlClient::new(judge_addr, None)
                .with_timeout(timeout)
                .on_network(network);
            let mut checks = PerRegion::from_fn(|_| EndpointCheck::new(threshold));
            let mut last = PerRegion::new(true, true);
            // The cache in front of the health function, if any: each path's answer and when
            // it was fetched. Whatever floods the endpoint meets the cache, not the function.
            let mut cache: PerRegion<Option<(tokio::time::Instant, bool)>> =
                PerRegion::new(None, None);
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tick.tick().await;
                // Both checks read the judge: each Region's verdict where it was made.
                let fresh = |entry: &Option<(tokio::time::Instant, bool)>| {
                    entry.filter(|(at, _)| cached_for.is_some_and(|ttl| at.elapsed() < ttl))
                };
                let (a, b) = tokio::join!(
                    judge_client.get("/health/primary"),
                    judge_client.get("/health/secondary")
                );
                let answers = PerRegion::new(a, b).map(|_, r| matches!(r, Ok((200, _))));
                let mut ok = PerRegion::new(true, true);
                for region in RegionId::ALL {
                    ok[region] = match (cached_for, fresh(&cache[region])) {
                        (Some(_), Some((_, cached))) => cached,
                        (Some(_), None) => {
                            cache[region] = Some((tokio::time::Instant::now(), answers[region]));
                            answers[region]
                        }
                        // No cache: the flood's requests and the checkers' share the health
                        // function's concurrency; a refused check is a failed one.
                        (None, _) => {
                            let refused = entropy.below(100) < u64::from(faults.flood_percent());
                            answers[region] && !refused
                        }
                    };
                }
                for region in RegionId::ALL {
                    let healthy = checks[region].poll(ok[region]);
                    if healthy != last[region] {
                        last[region] = healthy;
                        let (kind, what) = if healthy {
                            (Kind::EndpointHealthy, "endpoint health check healthy")
                        } else {
                            (Kind::EndpointUnhealthy, "endpoint health check unhealthy")
                        };
                        fastpath::record(&timeline, region, kind, what);
                    }
                }
                if drives_dns {
                    for (region, healthy) in last.iter() {
                        resolver.set_healthy(region, *healthy);
                    }
                }
            }
        });
        Ok(())
    }
}
