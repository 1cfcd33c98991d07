//! `wsdr load`: many concurrent connections bidding against the lab for a while, checking that
//! no acknowledged bid is lost, memory does not keep growing, and no connection gets stuck.
//! Clients connect to the primary's own endpoint (the front door would double the sockets in
//! this one process).

use crate::sim::users::LabTokens;
use crate::world::lab::{Lab, LabConfig};
use crate::world::scale::TimeScale;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use wsdr_client::{ClientBuilder, Event};
use wsdr_core::Auction;
use wsdr_protocol::{Amount, AuctionId, BidStatus};

#[derive(Debug, Clone)]
pub struct LoadConfig {
    pub connections: usize,
    /// How long everyone bids, lab seconds.
    pub secs: f64,
    /// Users per auction (each accepted bid is pushed to the auction's other users).
    pub users_per_auction: usize,
    /// Mean seconds between one user's bids.
    pub bid_every_secs: f64,
    pub seed: u64,
}

impl Default for LoadConfig {
    fn default() -> Self {
        Self {
            connections: 5_000,
            secs: 60.0,
            users_per_auction: 50,
            bid_every_secs: 30.0,
            seed: 1,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct LoadReport {
    pub connections: usize,
    pub secs: f64,
    pub connected_peak: usize,
    /// Seconds until every client had restored state.
    pub connect_all_secs: f64,
    pub bids_invoked: u64,
    pub bids_acknowledged: usize,
    pub lost_acknowledged_bids: usize,
    /// Established sessions lost (handshakes refused by the quota are not counted).
    pub disconnects: u64,
    /// Clients that did not answer a final resync within 10 s.
    pub stuck_connections: usize,
    /// (lab seconds since bidding began, resident set KiB), sampled every 5 s.
    pub rss_kib: Vec<(f64, u64)>,
    /// RSS at the end / RSS a quarter into the run: no unbounded growth means close to 1.
    pub rss_growth: f64,
    pub passed: bool,
}

/// Resident set size of this process, KiB (Linux; 0 elsewhere).
pub fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

pub async fn run(config: LoadConfig) -> anyhow::Result<LoadReport> {
    let lab = Arc::new(
        Lab::start(LabConfig {
            scale: TimeScale::new(1.0),
            ..LabConfig::default()
        })
        .await?,
    );
    let auctions: Vec<AuctionId> =
        (0..config.connections.div_ceil(config.users_per_auction.max(1)))
            .map(|i| AuctionId::new(format!("load-{i}")))
            .collect::<Result<_, _>>()?;
    for region in &lab.regions {
        for id in &auctions {
            region
                .service()
                .ensure_auction(&Auction {
                    id: id.clone(),
                    item: format!("load lot {id}"),
                    starting_price: Amount::new(1_000)?,
                    min_increment: 1,
                    closes_at: None,
                })
                .await?;
        }
    }
    let url = lab.regions[0].url();
    let connected = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let invoked = Arc::new(AtomicU64::new(0));
    let disconnects = Arc::new(AtomicU64::new(0));
    let acknowledged: Arc<Mutex<HashMap<String, (AuctionId, u64)>>> = Arc::default();
    let resynced = Arc::new(AtomicUsize::new(0));
    let (bidding_tx, bidding_rx) = watch::channel(false);
    let (resync_tx, resync_rx) = watch::channel(false);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..config.connections {
        let auction = auctions[i / config.users_per_auction.max(1)].clone();
        let (client, mut events) = ClientBuilder::new(url.clone())
            .token_provider(Arc::new(LabTokens {
                lab: lab.clone(),
                sub: format!("load-{i}"),
            }))
            .subscribe(auction.clone())
            .seed(config.seed.wrapping_add(i as u64))
            .start();
        let (connected, peak, invoked, disconnects, acknowledged, resynced) = (
            connected.clone(),
            peak.clone(),
            invoked.clone(),
            disconnects.clone(),
            acknowledged.clone(),
            resynced.clone(),
        );
        let mut bidding = bidding_rx.clone();
        let mut resync = resync_rx.clone();
        let every = config.bid_every_secs;
        let seed = config.seed ^ ((i as u64) << 24);
        tasks.push(tokio::spawn(async move {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut amounts: HashMap<String, u64> = HashMap::new();
            let mut high = 1_000u64;
            let mut online = false;
            let mut next_bid = Instant::now() + Duration::from_secs(3600);
            let mut waiting_resync = false;
            loop {
                tokio::select! {
                    changed = bidding.changed() => {
                        if changed.is_err() { break; }
                        next_bid = if *bidding.borrow() {
                            Instant::now() + Duration::from_secs_f64(rng.random_range(0.0..every))
                        } else {
                            Instant::now() + Duration::from_secs(3600)
                        };
                    }
                    changed = resync.changed() => {
                        if changed.is_err() || !*resync.borrow() { break; }
                        waiting_resync = true;
                        let _ = client.resync();
                    }
                    _ = tokio::time::sleep_until(next_bid) => {
                        next_bid = Instant::now() + Duration::from_secs_f64(rng.random_range(0.5..1.5) * every);
                        let Ok(amount) = Amount::new(high + rng.random_range(1..50)) else { continue };
                        if let Ok(bid_id) = client.bid(auction.clone(), amount).await {
                            invoked.fetch_add(1, Ordering::Relaxed);
                            amounts.insert(bid_id.as_str().to_owned(), amount.get());
                        }
                    }
                    event = events.recv() => match event {
                        None => break,
                        Some(Event::StateRestored { auction: view, outage, .. }) => {
                            high = high.max(view.high_bid.map_or(0, |h| h.amount.get()));
                            if !online {
                                online = true;
                                let now = connected.fetch_add(1, Ordering::Relaxed) + 1;
                                peak.fetch_max(now, Ordering::Relaxed);
                            }
                            if waiting_resync && outage.is_none() {
                                waiting_resync = false;
                                resynced.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        Some(Event::StateUpdated { high_bid: Some(h), .. }) => high = high.max(h.amount.get()),
                        Some(Event::BidResult { bid_id, status, .. }) => {
                            if let Some(amount) = amounts.remove(bid_id.as_str()) {
                                if matches!(status, BidStatus::Accepted | BidStatus::Duplicate) {
                                    high = high.max(amount);
                                    acknowledged.lock().unwrap_or_else(|p| p.into_inner())
                                        .insert(bid_id.as_str().to_owned(), (auction.clone(), amount));
                                }
                            }
                        }
                        Some(Event::Disconnected { .. }) => {
                            // Only sessions lost count: a handshake refused by the quota is
                            // not a disconnect.
                            if online {
                                disconnects.fetch_add(1, Ordering::Relaxed);
                                online = false;
                                connected.fetch_sub(1, Ordering::Relaxed);
                            }
                        }
                        Some(_) => {}
                    }
                }
            }
            client.close();
        }));
    }
    // Everyone connected (the quota lets in 500 per second).
    let deadline = Instant::now() + Duration::from_secs(120);
    while connected.load(Ordering::Relaxed) < config.connections && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let connect_all_secs = started.elapsed().as_secs_f64();
    let _ = bidding_tx.send(true);
    let bidding_started = Instant::now();
    let mut rss = vec![(0.0, rss_kib())];
    while bidding_started.elapsed().as_secs_f64() < config.secs {
        tokio::time::sleep(Duration::from_secs(5).min(Duration::from_secs_f64(config.secs))).await;
        rss.push((bidding_started.elapsed().as_secs_f64(), rss_kib()));
    }
    let _ = bidding_tx.send(false);
    // Outstanding answers, then a final resync of every client.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let _ = resync_tx.send(true);
    let deadline = Instant::now() + Duration::from_secs(10);
    while resynced.load(Ordering::Relaxed) < config.connections && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let stuck = config.connections - resynced.load(Ordering::Relaxed);
    let drain = Instant::now() + Duration::from_secs(30);
    while lab.in_flight().items > 0 && Instant::now() < drain {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(resync_tx);
    drop(bidding_tx);
    for task in tasks {
        let _ = task.await;
    }

    let acknowledged = acknowledged
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let mut recorded: HashMap<(usize, String), u64> = HashMap::new();
    for (r, region) in lab.regions.iter().enumerate() {
        for id in &auctions {
            for bid in region.store.all_bids(id).await? {
                recorded.insert((r, bid.bid_id.as_str().to_owned()), bid.amount.get());
            }
        }
    }
    let lost = acknowledged
        .iter()
        .filter(|(id, (_, amount))| {
            (0..2).any(|r| recorded.get(&(r, (*id).clone())) != Some(amount))
        })
        .count();
    let quarter = rss
        .iter()
        .find(|(t, _)| *t >= config.secs / 4.0)
        .map_or(1, |(_, kib)| (*kib).max(1));
    let end = rss.last().map_or(0, |(_, kib)| *kib);
    let growth = end as f64 / quarter as f64;
    let passed = lost == 0 && stuck == 0 && growth < 1.5;
    Ok(LoadReport {
        connections: config.connections,
        secs: config.secs,
        connected_peak: peak.load(Ordering::Relaxed),
        connect_all_secs,
        bids_invoked: invoked.load(Ordering::Relaxed),
        bids_acknowledged: acknowledged.len(),
        lost_acknowledged_bids: lost,
        disconnects: disconnects.load(Ordering::Relaxed),
        stuck_connections: stuck,
        rss_kib: rss,
        rss_growth: growth,
        passed,
    })
}
