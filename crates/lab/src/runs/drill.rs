//! Failover drills: simulated users bidding through the front door while a scenario breaks
//! the primary; then the checks and the report.

use crate::runs::report::{Percentiles, Report};
use crate::sim::users::{user_client, wait_for};
use crate::world::lab::{Fault, Lab, LabConfig};
use crate::world::timeline::Kind;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use wsdr_client::Event;
use wsdr_protocol::{Amount, AuctionId, BidStatus};

/// The scenarios a drill can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// The reference game day: the primary's handler throttled (reserved concurrency 0).
    Throttle,
    /// The primary Region down: sockets dropped, new connections refused, replication stalled.
    Down,
    /// Replication partitioned while the primary is throttled: failover with data at risk.
    Partition,
    /// The primary flaps (throttled, then fine, then throttled...) before staying broken.
    Flapping,
    /// Throttle, fail over, heal, and measure failback.
    Failback,
    /// One lost heartbeat: the primary throttled for 3 s, then fine. Nobody may move: no
    /// disconnect, no endpoint change, no DNS flip.
    Blip,
    /// The primary lost for good with its replication backlog: the acknowledged bids it had
    /// not replicated are lost (the measured RPO); nothing else may be.
    NeverReturns,
}

/// Drill settings.
#[derive(Debug, Clone)]
pub struct DrillConfig {
    pub scenario: Scenario,
    pub users: usize,
    pub lab: LabConfig,
    pub seed: u64,
    /// AWS seconds of steady bidding before the fault.
    pub warm_bidding_secs: f64,
    /// AWS seconds between a user's bids (mean).
    pub bid_every_secs: f64,
    /// Bound on the whole recovery, AWS seconds.
    pub recovery_timeout_secs: f64,
    pub progress: bool,
    /// Give the simulated users the Regions' own endpoints (client-assisted failover).
    pub client_fallback: bool,
}

impl Default for DrillConfig {
    fn default() -> Self {
        Self {
            scenario: Scenario::Throttle,
            users: 50,
            lab: LabConfig::default(),
            seed: 1,
            warm_bidding_secs: 30.0,
            bid_every_secs: 20.0,
            recovery_timeout_secs: 900.0,
            progress: false,
            client_fallback: false,
        }
    }
}

/// What one simulated user saw.
#[derive(Debug, Default, Clone)]
struct UserLog {
    /// bid id -> amount, for every bid the server acknowledged (accepted or duplicate).
    acknowledged: HashMap<String, u64>,
    /// bid id -> amount, for every bid sent.
    invoked: HashMap<String, u64>,
    /// Times (lab ms) and Regions of each state restore.
    restores: Vec<(f64, String)>,
    disconnects: Vec<f64>,
    /// (ack time lab ms, Region, amount) of every bid answered `accepted`.
    accepted: Vec<(f64, String, u64)>,
    /// Endpoint changes made by client-assisted failover.
    moves: usize,
    accepted_twice: usize,
    high_seen: u64,
}

/// Run one drill end to end.
pub async fn run(config: DrillConfig) -> anyhow::Result<Report> {
    let scale = config.lab.scale;
    let lab = Arc::new(Lab::start(config.lab.clone()).await?);
    let secondary = lab.config.regions[1].clone();
    let timeline = lab.timeline.clone();

    // Steady state: the alarm has evaluated OK and the name resolves to the primary.
    let steady = wait_for(scale.secs(600.0), || {
        lab.resolver.primary_healthy() && lab.resolver.answer() == 0
    })
    .await;
    anyhow::ensure!(
        steady,
        "the lab never reached steady state (alarm OK, DNS on the primary)"
    );
    timeline.record(
        Kind::Note,
        format!("steady state; starting {} users", config.users),
    );

    let logs: Vec<Arc<Mutex<UserLog>>> = (0..config.users).map(|_| Arc::default()).collect();
    let (stop_tx, stop_rx) = watch::channel(false);
    let auction = AuctionId::new("lot-1")?;
    let mut users = Vec::new();
    for (i, log) in logs.iter().enumerate() {
        users.push(tokio::spawn(user(
            lab.clone(),
            i,
            config.clone(),
            auction.clone(),
            log.clone(),
            stop_rx.clone(),
        )));
    }
    let all_restored_on = |region: &str, after: f64| {
        logs.iter().all(|l| {
            l.lock()
                .unwrap_or_else(|p| p.into_inner())
                .restores
                .iter()
                .any(|(at, r)| *at >= after && r == region)
        })
    };
    let connected = wait_for(scale.secs(300.0), || {
        all_restored_on(&lab.config.regions[0], 0.0)
    })
    .await;
    anyhow::ensure!(connected, "not every user connected to the primary");
    tokio::time::sleep(scale.secs(config.warm_bidding_secs)).await;

    // The fault.
    let rpo = lab.in_flight();
    let fault_ms = timeline.elapsed().as_secs_f64() * 1000.0;
    match config.scenario {
        Scenario::Throttle | Scenario::Failback => lab.fault(Fault::Throttle(0)),
        Scenario::Down => lab.fault(Fault::Down(0)),
        Scenario::NeverReturns => lab.fault(Fault::NeverReturns(0)),
        Scenario::Partition => {
            lab.fault(Fault::Partition);
            lab.fault(Fault::Throttle(0));
        }
        Scenario::Blip => {
            lab.fault(Fault::Throttle(0));
            tokio::time::sleep(scale.secs(3.0)).await;
            lab.fault(Fault::Heal);
        }
        Scenario::Flapping => {
            // Broken 90 s, fine 60 s, three times; then broken for good.
            for _ in 0..3 {
                lab.fault(Fault::Throttle(0));
                tokio::time::sleep(scale.secs(90.0)).await;
                lab.fault(Fault::Heal);
                tokio::time::sleep(scale.secs(60.0)).await;
            }
            lab.fault(Fault::Throttle(0));
        }
    }
    let recovered = if config.scenario == Scenario::Blip {
        // Two heartbeat rounds and three alarm periods: time for anything to go wrong.
        tokio::time::sleep(scale.secs(180.0)).await;
        true
    } else {
        wait_for(scale.secs(config.recovery_timeout_secs), || {
            all_restored_on(&secondary, fault_ms)
        })
        .await
    };
    if !recovered {
        timeline.record(
            Kind::Note,
            "recovery timeout: not every user restored on the secondary",
        );
    }
    tokio::time::sleep(scale.secs(20.0)).await;

    // Heal and measure failback (the name resolving to the primary again).
    let heal_ms = timeline.elapsed().as_secs_f64() * 1000.0;
    lab.fault(Fault::Heal);
    // A Region lost for good never takes traffic back.
    let failed_back = config.scenario != Scenario::NeverReturns
        && wait_for(scale.secs(900.0), || lab.resolver.answer() == 0).await;
    let failback_ms = failed_back
        .then(|| timeline.first(Kind::DnsFlip, heal_ms))
        .flatten()
        .map(|t| t - heal_ms);

    // Stop, let replication drain, check.
    let _ = stop_tx.send(true);
    for user in users {
        let _ = user.await;
    }
    let drained = wait_for(scale.secs(300.0), || lab.in_flight().items == 0).await;
    tokio::time::sleep(scale.secs(5.0)).await;
    let converged = drained && lab.converged().await;

    let bids = |records: Vec<wsdr_core::BidRecord>| -> BTreeMap<String, (String, u64)> {
        records
            .into_iter()
            .map(|b| {
                (
                    b.bid_id.as_str().to_owned(),
                    (b.bidder.as_str().to_owned(), b.amount.get()),
                )
            })
            .collect()
    };
    let west = bids(lab.regions[1].store.all_bids(&auction).await?);
    // A primary lost for good is not read: only the survivor counts, and the bid copies the
    // primary took with it are the losses the drill expects (and reports).
    let east = if lab.gone().contains(&0) {
        west.clone()
    } else {
        bids(lab.regions[0].store.all_bids(&auction).await?)
    };
    let lost_with_region: std::collections::BTreeSet<(String, u64)> = lab
        .lost_writes()
        .into_iter()
        .filter_map(|c| match c.item {
            wsdr_core::items::Item::Bid { bid, .. } => {
                Some((bid.bid_id.as_str().to_owned(), bid.amount.get()))
            }
            _ => None,
        })
        .collect();
    let logs: Vec<UserLog> = logs
        .iter()
        .map(|l| l.lock().unwrap_or_else(|p| p.into_inner()).clone())
        .collect();
    let mut acknowledged: HashMap<String, u64> = HashMap::new();
    let mut invoked: HashMap<String, (String, u64)> = HashMap::new();
    for (i, log) in logs.iter().enumerate() {
        acknowledged.extend(log.acknowledged.iter().map(|(k, v)| (k.clone(), *v)));
        invoked.extend(
            log.invoked
                .iter()
                .map(|(k, v)| (k.clone(), (format!("user-{i}"), *v))),
        );
    }
    let missing: Vec<(&String, &u64)> = acknowledged
        .iter()
        .filter(|(id, amount)| {
            east.get(*id).map(|b| b.1) != Some(**amount)
                || west.get(*id).map(|b| b.1) != Some(**amount)
        })
        .collect();
    let lost_with_the_region = missing
        .iter()
        .filter(|(id, amount)| lost_with_region.contains(&((*id).clone(), **amount)))
        .count();
    let lost = missing.len() - lost_with_the_region;
    // A record that matches no operation a user made, or does not match the operation's
    // user and amount, would be a bid applied twice or invented.
    let duplicates = east
        .iter()
        .filter(|(id, (bidder, amount))| invoked.get(*id) != Some(&(bidder.clone(), *amount)))
        .count();
    // The high bid is the highest recorded bid, and no acknowledged bid is above it.
    let max_acknowledged = acknowledged
        .iter()
        .filter(|(id, amount)| !lost_with_region.contains(&((*id).clone(), **amount)))
        .map(|(_, amount)| *amount)
        .max()
        .unwrap_or(0);
    let max_recorded = east.values().map(|b| b.1).max();
    let mut highs = Vec::new();
    for (i, region) in lab.regions.iter().enumerate() {
        if lab.gone().contains(&i) {
            continue;
        }
        highs.push(
            region
                .store
                .snapshot(&auction)
                .await?
                .high_bid
                .map(|b| b.amount.get()),
        );
    }
    let high_bid_matches =
        highs.iter().all(|h| *h == max_recorded) && max_recorded.unwrap_or(0) >= max_acknowledged;

    let rtos: Vec<f64> = logs
        .iter()
        .filter_map(|l| {
            l.restores
                .iter()
                .find(|(at, r)| *at >= fault_ms && *r == secondary)
                .map(|(at, _)| at - fault_ms)
        })
        .collect();
    let restored = rtos.len();
    let detection_ms = timeline.first(Kind::Alarm, fault_ms).map(|t| t - fault_ms);
    let dns_flip_ms = timeline
        .first(Kind::DnsFlip, fault_ms)
        .map(|t| t - fault_ms);
    let dns_flips = timeline
        .entries()
        .iter()
        .filter(|e| e.kind == Kind::DnsFlip && e.at_ms >= fault_ms && e.at_ms < heal_ms)
        .count();
    let accepted_twice: usize = logs.iter().map(|l| l.accepted_twice).sum();
    let split = split_between_regions(&logs, fault_ms, heal_ms);
    let primary = &lab.config.regions[0];
    let disconnects_during_fault = logs
        .iter()
        .map(|l| {
            l.disconnects
                .iter()
                .filter(|d| **d >= fault_ms && **d < heal_ms)
                .count()
        })
        .sum();
    // Ping-pong: back on the primary after having been restored in the secondary, while
    // the fault lasts.
    let returns_to_primary_during_fault = logs
        .iter()
        .map(|l| {
            let Some(first_secondary) = l
                .restores
                .iter()
                .find(|(at, r)| *at >= fault_ms && *r == secondary)
                .map(|r| r.0)
            else {
                return 0;
            };
            l.restores
                .iter()
                .filter(|(at, r)| *at > first_secondary && *at < heal_ms && r == primary)
                .count()
        })
        .sum();

    Ok(Report {
        scenario: config.scenario,
        clients: config.users,
        time_scale: scale.factor(),
        restored,
        rto_ms: Percentiles::of(&rtos),
        rto_aws_s: Percentiles::of(
            &rtos
                .iter()
                .map(|ms| ms * scale.factor() / 1000.0)
                .collect::<Vec<_>>(),
        ),
        detection_ms,
        dns_flip_ms,
        failback_ms,
        dns_flips_during_fault: dns_flips,
        lost_acknowledged_bids: lost,
        acknowledged_bids_lost_with_region: lost_with_the_region,
        duplicate_bids: duplicates,
        acks_for_a_replayed_bid_in_both_regions: accepted_twice,
        acknowledged_bids: acknowledged.len(),
        recorded_bids: east.len(),
        high_bid_consistent: high_bid_matches,
        converged,
        rpo_items_at_fault: rpo.items,
        rpo_oldest_ms_at_fault: rpo.oldest_ms,
        client_fallback: config.client_fallback,
        disconnects_during_fault,
        returns_to_primary_during_fault,
        endpoint_moves: logs.iter().map(|l| l.moves).sum(),
        split_ms: split.duration_ms,
        split_aws_s: split.duration_ms * scale.factor() / 1000.0,
        accepted_below_other_region: split.accepted_below_other_region,
        timeline: timeline.entries(),
    })
}

/// What clients split between Regions cost.
struct Split {
    /// Lab ms, between the fault and the heal, during which users were being served by
    /// both Regions at once.
    duration_ms: f64,
    /// Bids accepted by one Region after the other Region had accepted an equal or higher
    /// one: a single Region would have answered `too_low`. The bidder was told `accepted`
    /// and then saw the higher bid arrive by replication. Correctness holds (the high bid is
    /// derived); this is the freshness price of the split.
    accepted_below_other_region: usize,
}

/// A user is served by a Region from a state restore there until its next disconnect.
fn split_between_regions(logs: &[UserLog], from_ms: f64, to_ms: f64) -> Split {
    // (time, region, +1/-1) for each user's service intervals, clipped to [from, to].
    let mut edges: Vec<(f64, String, i32)> = Vec::new();
    for log in logs {
        for (i, (start, region)) in log.restores.iter().enumerate() {
            let next_restore = log.restores.get(i + 1).map(|r| r.0).unwrap_or(f64::MAX);
            let end = log
                .disconnects
                .iter()
                .copied()
                .find(|d| *d >= *start)
                .unwrap_or(f64::MAX)
                .min(next_restore);
            let (start, end) = (start.max(from_ms), end.min(to_ms));
            if start < end {
                edges.push((start, region.clone(), 1));
                edges.push((end, region.clone(), -1));
            }
        }
    }
    edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.2.cmp(&b.2)));
    let mut live: BTreeMap<String, i32> = BTreeMap::new();
    let mut duration_ms = 0.0;
    let mut last = from_ms;
    for (at, region, delta) in edges {
        if live.values().filter(|n| **n > 0).count() >= 2 {
            duration_ms += at - last;
        }
        *live.entry(region).or_default() += delta;
        last = at;
    }
    let mut accepted: Vec<&(f64, String, u64)> =
        logs.iter().flat_map(|l| l.accepted.iter()).collect();
    accepted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut best: HashMap<&str, u64> = HashMap::new();
    let mut accepted_below_other_region = 0;
    for (_, region, amount) in accepted {
        if best
            .iter()
            .any(|(r, high)| *r != region.as_str() && *high >= *amount)
        {
            accepted_below_other_region += 1;
        }
        let high = best.entry(region.as_str()).or_default();
        *high = (*high).max(*amount);
    }
    Split {
        duration_ms,
        accepted_below_other_region,
    }
}

async fn user(
    lab: Arc<Lab>,
    index: usize,
    config: DrillConfig,
    auction: AuctionId,
    log: Arc<Mutex<UserLog>>,
    mut stop: watch::Receiver<bool>,
) {
    let scale = config.lab.scale;
    let sub = format!("user-{index}");
    let seed = config
        .seed
        .wrapping_mul(1_000_003)
        .wrapping_add(index as u64);
    let (client, mut events) =
        user_client(&lab, &sub, &auction, seed, config.client_fallback).start();
    let mut rng = SmallRng::seed_from_u64(config.seed ^ (index as u64) << 20);
    let timeline = lab.timeline.clone();
    let mut next_bid = Instant::now() + scale.secs(rng.random_range(0.0..config.bid_every_secs));
    // After the stop: no new bids, but keep listening so outstanding bids get their acks.
    let mut draining: Option<Instant> = None;
    loop {
        let drain_deadline = draining.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            _ = stop.changed(), if draining.is_none() => {
                draining = Some(Instant::now() + scale.secs(15.0));
            }
            _ = tokio::time::sleep_until(drain_deadline), if draining.is_some() => break,
            _ = tokio::time::sleep_until(next_bid), if draining.is_none() => {
                next_bid = Instant::now() + scale.secs(rng.random_range(0.5..1.5) * config.bid_every_secs);
                let amount = {
                    let l = log.lock().unwrap_or_else(|p| p.into_inner());
                    l.high_seen.max(100_000) + 1_000 * rng.random_range(1..20)
                };
                let Ok(amount) = Amount::new(amount) else { continue };
                if let Ok(bid_id) = client.bid(auction.clone(), amount).await {
                    log.lock().unwrap_or_else(|p| p.into_inner()).invoked.insert(bid_id.as_str().to_owned(), amount.get());
                }
            }
            event = events.recv() => {
                let Some(event) = event else { break };
                let at = timeline.elapsed().as_secs_f64() * 1000.0;
                let mut l = log.lock().unwrap_or_else(|p| p.into_inner());
                match event {
                    Event::StateRestored { region, auction, .. } => {
                        if let Some(h) = auction.high_bid { l.high_seen = l.high_seen.max(h.amount.get()); }
                        l.restores.push((at, region.clone()));
                        drop(l);
                        timeline.record(Kind::ClientRestored, format!("{sub} restored from {region}"));
                    }
                    Event::StateUpdated { high_bid: Some(h), .. } => l.high_seen = l.high_seen.max(h.amount.get()),
                    Event::EndpointChanged { url, regional, reason } => {
                        l.moves += 1;
                        drop(l);
                        let to = if regional { url } else { "the global name".to_owned() };
                        timeline.record(Kind::ClientMoved, format!("{sub} -> {to} ({reason})"));
                    }
                    Event::BidResult { bid_id, status, region, .. } => {
                        if status == BidStatus::Accepted {
                            if let Some(amount) = l.invoked.get(bid_id.as_str()).copied() {
                                l.accepted.push((at, region, amount));
                            }
                        }
                        if matches!(status, BidStatus::Accepted | BidStatus::Duplicate) {
                            let amount = l.invoked.get(bid_id.as_str()).copied();
                            if let Some(amount) = amount {
                                if l.acknowledged.insert(bid_id.as_str().to_owned(), amount).is_some() && status == BidStatus::Accepted {
                                    l.accepted_twice += 1;
                                }
                                l.high_seen = l.high_seen.max(amount);
                            }
                        }
                    }
                    Event::Disconnected { reason } => {
                        l.disconnects.push(at);
                        drop(l);
                        timeline.record(Kind::ClientDisconnected, format!("{sub}: {reason:?}"));
                    }
                    _ => {}
                }
            }
        }
    }
    client.close();
}
