//! `wsdr load`: many concurrent connections bidding against the lab for a while, checking that
//! no acknowledged bid is lost, memory does not keep growing, and no connection gets stuck.
//! Clients connect to the primary's own endpoint (the front door would double the sockets in
//! this one process).

use crate::sim::history::Violation;
use crate::sim::judge::{check_bids, final_states, kit_trace};
use crate::sim::trace::{Lost, Outcome, RunTrace};
use crate::sim::users::{Behaviour, ClientFactory, LabTokens, Population, UserSpec};
use crate::world::scale::TimeScale;
use crate::world::RegionId;
use crate::world::{LabConfig, World};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use wsdr_auction::Auction;
use wsdr_client::ClientBuilder;
use wsdr_protocol::{Amount, AuctionId};

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
    /// Broken guarantees the history checker found, over every auction (crate::sim::history),
    /// and the first few of them.
    pub violations: usize,
    pub violation_examples: Vec<Violation>,
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

/// The same auctions in both Regions (identical seed items, as a deploy writes them).
async fn seed_auctions(lab: &World, auctions: &[AuctionId]) -> anyhow::Result<()> {
    for (_, region) in lab.regions() {
        for id in auctions {
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
    Ok(())
}

pub async fn run(config: LoadConfig) -> anyhow::Result<LoadReport> {
    let lab = Arc::new(
        World::builder()
            .config(LabConfig {
                scale: TimeScale::new(1.0),
                ..LabConfig::default()
            })
            .start()
            .await?,
    );
    let per_auction = config.users_per_auction.max(1);
    let auctions: Vec<AuctionId> = (0..config.connections.div_ceil(per_auction))
        .map(|i| AuctionId::new(format!("load-{i}")))
        .collect::<Result<_, _>>()?;
    seed_auctions(&lab, &auctions).await?;
    let specs = (0..config.connections)
        .map(|i| UserSpec::new(format!("load-{i}"), &auctions[i / per_auction]))
        .collect::<anyhow::Result<_>>()?;
    // The primary's own endpoint, reference timers (time scale 1).
    let clients: ClientFactory = {
        let lab = lab.clone();
        let url = lab.region(RegionId::Primary).url();
        Arc::new(move |spec: &UserSpec, _index: usize, seed: u64| {
            ClientBuilder::new(url.clone())
                .token_provider(Arc::new(LabTokens::new(lab.clone(), spec.sub())))
                .subscribe(spec.auction.clone())
                .seed(seed)
        })
    };
    let behaviour = Behaviour {
        floor: 1_000,
        increment: 1,
        steps: (1, 50),
        ..Behaviour::honest(config.bid_every_secs)
    };
    let started = Instant::now();
    let users = Population::start(lab.clone(), specs, behaviour, config.seed, clients, false);
    // Everyone connected (the quota lets in 500 per second).
    let deadline = Instant::now() + Duration::from_secs(120);
    while users.online() < config.connections && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let connect_all_secs = started.elapsed().as_secs_f64();
    users.set_bidding(true);
    let bidding_started = Instant::now();
    let mut rss = vec![(0.0, rss_kib())];
    while bidding_started.elapsed().as_secs_f64() < config.secs {
        tokio::time::sleep(Duration::from_secs(5).min(Duration::from_secs_f64(config.secs))).await;
        rss.push((bidding_started.elapsed().as_secs_f64(), rss_kib()));
    }
    users.set_bidding(false);
    // Outstanding answers, replication drained, then every user's final view.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let drain = Instant::now() + Duration::from_secs(30);
    while lab.in_flight().items > 0 && Instant::now() < drain {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let converged = lab.converged().await;
    let mut highs: BTreeMap<AuctionId, Option<Amount>> = BTreeMap::new();
    for id in &auctions {
        let states = final_states(&lab, id).await?;
        highs.insert(
            id.clone(),
            states
                .first()
                .and_then(|r| r.high.as_ref().map(|h| h.amount)),
        );
    }
    let ends = users
        .final_views(
            |id| highs.get(id).copied().flatten(),
            Duration::from_secs(10),
            Duration::from_secs(10),
        )
        .await;
    let ops = users.ops();
    let records = users.records();
    let peak = users.peak_online();
    users.close().await;

    // The kit's rules and the auction's, auction by auction.
    let mut violations = Vec::new();
    for id in &auctions {
        let regions = final_states(&lab, id).await?;
        let trace = RunTrace {
            ops: ops.iter().filter(|o| &o.auction == id).cloned().collect(),
            users: Vec::new(),
            ends: ends.iter().filter(|u| &u.auction == id).cloned().collect(),
            regions,
            converged,
            lost: Lost::new(),
            lost_summaries: 0,
        };
        let kit = kit_trace(&lab, &ops, id).await?;
        violations.extend(check_bids(&trace, &kit).0);
    }
    let lost: BTreeSet<_> = violations
        .iter()
        .filter(|v| matches!(v, Violation::AcknowledgedOpMissing { .. }))
        .filter_map(Violation::bid)
        .collect();
    let stuck = violations
        .iter()
        .filter(|v| matches!(v, Violation::UserNotConnected { .. }))
        .count();
    let quarter = rss
        .iter()
        .find(|(t, _)| *t >= config.secs / 4.0)
        .map_or(1, |(_, kib)| (*kib).max(1));
    let end = rss.last().map_or(0, |(_, kib)| *kib);
    let growth = end as f64 / quarter as f64;
    let passed = violations.is_empty() && growth < 1.5;
    Ok(LoadReport {
        connections: config.connections,
        secs: config.secs,
        connected_peak: peak,
        connect_all_secs,
        bids_invoked: ops.len() as u64,
        bids_acknowledged: ops.iter().filter(|o| o.outcome() == Outcome::Ok).count(),
        lost_acknowledged_bids: lost.len(),
        disconnects: records
            .iter()
            .map(|r| r.trace.disconnects.len() as u64)
            .sum(),
        stuck_connections: stuck,
        violations: violations.len(),
        violation_examples: violations.iter().take(10).cloned().collect(),
        rss_kib: rss,
        rss_growth: growth,
        passed,
    })
}
