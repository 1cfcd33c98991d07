//! `wsdr chaos`: randomized failover drills with a history checker. Each run draws a fault
//! schedule from its seed, runs it against a fresh lab while simulated users bid and
//! reconnect (half of them with client-assisted failover), heals, and checks the history
//! (crate::sim::history). A violation prints the run's seed, its schedule and the operations on the
//! bids involved.

use crate::sim::history::{
    check, lost_acknowledged, Answer, BidKey, FinalState, Lost, Op, Record, UserEnd, Violation,
};
use crate::sim::users::{user_client, wait_for};
use crate::world::lab::{Fault, Lab, LabConfig};
use crate::world::owner::Holdings;
use crate::world::scale::TimeScale;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use wsdr_client::Event;
use wsdr_protocol::{Amount, AuctionId, BidId, BidStatus};

/// One step of a run's fault schedule (durations in AWS seconds).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "fault", rename_all = "snake_case")]
pub enum Step {
    /// The primary down (sockets dropped, handshakes refused, its replication stalled).
    Down { secs: f64 },
    /// The primary's handler throttled (reserved concurrency 0).
    Throttle { secs: f64 },
    /// Replication cut both ways.
    Partition { secs: f64 },
    /// Replication lag raised to `lag_ms`.
    LagSpike { lag_ms: u64, secs: f64 },
    /// The primary throttled and healed `cycles` times (`secs` each way).
    Flapping { cycles: u32, secs: f64 },
    /// Throttled long enough to fail over, healed while users keep bidding, then long
    /// enough to fail back.
    FailbackUnderLoad { secs: f64 },
    /// Replication lags `lag_ms`, then the primary is lost with data in flight.
    LostWhileLagging { lag_ms: u64, secs: f64 },
    /// Replication lags `lag_ms`, then the primary is lost for good: what it had not
    /// replicated is lost (the RPO), and the run ends on the secondary alone.
    NeverReturns { lag_ms: u64, secs: f64 },
    /// `percent`% of bids in `region` lose their connection right after the commit.
    AckLost {
        region: usize,
        percent: u8,
        secs: f64,
    },
    /// `percent`% of `region`'s table requests throttled.
    StoreThrottle {
        region: usize,
        percent: u8,
        secs: f64,
    },
    /// `region`'s table unreachable from its handler.
    StoreOutage { region: usize, secs: f64 },
    /// `percent`% of `region`'s `@connections` posts throttled.
    ConnectionsThrottle {
        region: usize,
        percent: u8,
        secs: f64,
    },
    /// `$disconnect` never delivered in either Region, while the primary goes down.
    DisconnectDropped { secs: f64 },
    /// `region`'s clock `ms` off (either sign).
    Skew { region: usize, ms: i64, secs: f64 },
    /// Replication out of `from` cut, the other direction flowing.
    OneWay { from: usize, secs: f64 },
    /// A resolver that ignores the TTL (keeps answers `keep_secs`) while the primary is down.
    StickyDns { keep_secs: u64, secs: f64 },
    /// Every integration in `region` `ms` slower.
    Slow { region: usize, ms: u64, secs: f64 },
    /// Nothing.
    Calm { secs: f64 },
}

impl Step {
    fn draw(rng: &mut SmallRng) -> Self {
        let secs = |rng: &mut SmallRng, lo: f64, hi: f64| rng.random_range(lo..hi).round();
        match rng.random_range(0..18) {
            0 => Step::Down {
                secs: secs(rng, 30.0, 300.0),
            },
            1 => Step::Throttle {
                secs: secs(rng, 30.0, 300.0),
            },
            2 => Step::Partition {
                secs: secs(rng, 10.0, 200.0),
            },
            3 => Step::LagSpike {
                lag_ms: rng.random_range(2_000..30_000),
                secs: secs(rng, 10.0, 120.0),
            },
            4 => Step::Flapping {
                cycles: rng.random_range(2..5),
                secs: secs(rng, 20.0, 90.0),
            },
            5 => Step::FailbackUnderLoad {
                secs: secs(rng, 150.0, 300.0),
            },
            6 => Step::LostWhileLagging {
                lag_ms: rng.random_range(5_000..30_000),
                secs: secs(rng, 60.0, 300.0),
            },
            7 => Step::NeverReturns {
                lag_ms: rng.random_range(1_000..20_000),
                secs: secs(rng, 120.0, 300.0),
            },
            8 | 9 => Step::AckLost {
                region: rng.random_range(0..2),
                percent: rng.random_range(20..80),
                secs: secs(rng, 30.0, 200.0),
            },
            10 => Step::StoreThrottle {
                region: rng.random_range(0..2),
                percent: rng.random_range(10..70),
                secs: secs(rng, 30.0, 200.0),
            },
            11 => Step::StoreOutage {
                region: rng.random_range(0..2),
                secs: secs(rng, 10.0, 120.0),
            },
            12 => Step::ConnectionsThrottle {
                region: rng.random_range(0..2),
                percent: rng.random_range(20..90),
                secs: secs(rng, 30.0, 200.0),
            },
            13 => Step::DisconnectDropped {
                secs: secs(rng, 30.0, 200.0),
            },
            14 => Step::Skew {
                region: rng.random_range(0..2),
                ms: rng.random_range(-5_000..5_000),
                secs: secs(rng, 30.0, 200.0),
            },
            15 => Step::OneWay {
                from: rng.random_range(0..2),
                secs: secs(rng, 10.0, 200.0),
            },
            16 => Step::StickyDns {
                keep_secs: rng.random_range(120..600),
                secs: secs(rng, 60.0, 300.0),
            },
            17 => Step::Slow {
                region: rng.random_range(0..2),
                ms: rng.random_range(200..3_000),
                secs: secs(rng, 30.0, 200.0),
            },
            _ => Step::Calm {
                secs: secs(rng, 5.0, 60.0),
            },
        }
    }

    /// Faults this step injects (heals excluded).
    fn faults(&self) -> usize {
        self.kinds().len()
    }

    /// The fault kinds this step injects, as the CLI names them (one entry per injection).
    pub fn kinds(&self) -> Vec<&'static str> {
        match self {
            Step::Calm { .. } => vec![],
            Step::Down { .. } => vec!["down"],
            Step::Throttle { .. } | Step::FailbackUnderLoad { .. } => vec!["throttle"],
            Step::Partition { .. } => vec!["partition"],
            Step::LagSpike { .. } => vec!["lag"],
            Step::Flapping { cycles, .. } => vec!["throttle"; *cycles as usize],
            Step::LostWhileLagging { .. } => vec!["lag", "down"],
            Step::NeverReturns { .. } => vec!["lag", "never-returns"],
            Step::AckLost { .. } => vec!["ack-lost"],
            Step::StoreThrottle { .. } => vec!["store-throttle"],
            Step::StoreOutage { .. } => vec!["store-outage"],
            Step::ConnectionsThrottle { .. } => vec!["connections-throttle"],
            Step::DisconnectDropped { .. } => vec!["disconnect-dropped", "down"],
            Step::Skew { .. } => vec!["skew"],
            Step::OneWay { .. } => vec!["one-way"],
            Step::StickyDns { .. } => vec!["sticky-dns", "down"],
            Step::Slow { .. } => vec!["slow"],
        }
    }
}

/// Campaign settings.
#[derive(Debug, Clone)]
pub struct ChaosConfig {
    pub seed: u64,
    pub runs: usize,
    pub users: usize,
    pub scale: TimeScale,
    /// Print one line per run.
    pub progress: bool,
    /// Runs in flight at once (each its own lab; seeds do not depend on it).
    pub parallel: usize,
}

impl Default for ChaosConfig {
    fn default() -> Self {
        Self {
            seed: 1,
            runs: 50,
            users: 8,
            scale: TimeScale::new(300.0),
            progress: false,
            parallel: 1,
        }
    }
}

/// One run's result.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub run: usize,
    /// Reproduce with `wsdr chaos --seed <seed> --runs 1`.
    pub seed: u64,
    pub schedule: Vec<Step>,
    pub faults: usize,
    pub bids_invoked: usize,
    pub bids_acknowledged: usize,
    pub bids_unknown: usize,
    pub violations: Vec<Violation>,
    /// The operations on the bids the violations are about (the minimal history).
    pub evidence: Vec<Op>,
    /// Descriptors and tasks held by the process after the run's lab was dropped.
    pub holdings_after: Holdings,
    pub faults_by_kind: BTreeMap<String, usize>,
    /// Acknowledged bids lost because a Region never came back with them (the RPO, in bids).
    pub rpo_lost_acknowledged: usize,
    /// Bid copies that Region took with it (acknowledged or not).
    pub lost_copies: usize,
}

/// The campaign's figures (docs/RELIABILITY.md).
#[derive(Debug, Clone, Serialize)]
pub struct CampaignReport {
    pub seed: u64,
    pub runs: usize,
    pub users_per_run: usize,
    pub time_scale: f64,
    pub faults_injected: usize,
    /// Faults injected, by kind (the CLI's names).
    pub faults_by_kind: BTreeMap<String, usize>,
    /// Acknowledged bids lost with Regions that never came back, over the campaign.
    pub rpo_lost_acknowledged: usize,
    pub bids_invoked: usize,
    pub bids_acknowledged: usize,
    pub bids_unknown: usize,
    pub violations: usize,
    pub failed_runs: Vec<RunReport>,
    pub wall_seconds: f64,
    pub parallel: usize,
    /// Descriptors and tasks before the first run and after the last: a campaign must not
    /// accumulate them (every lab's tasks and listeners end with it).
    pub holdings_start: Holdings,
    pub holdings_end: Holdings,
    /// The most held after any run.
    pub holdings_peak: Holdings,
}

/// The seed of run `i` of a campaign seeded `seed` (so a failing run replays on its own).
pub fn run_seed(seed: u64, i: usize) -> u64 {
    if i == 0 {
        return seed;
    }
    seed.wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407u64.wrapping_mul(i as u64 + 1))
}

pub async fn campaign(config: ChaosConfig) -> anyhow::Result<CampaignReport> {
    let started = std::time::Instant::now();
    let mut report = CampaignReport {
        seed: config.seed,
        runs: config.runs,
        users_per_run: config.users,
        time_scale: config.scale.factor(),
        faults_injected: 0,
        faults_by_kind: BTreeMap::new(),
        rpo_lost_acknowledged: 0,
        bids_invoked: 0,
        bids_acknowledged: 0,
        bids_unknown: 0,
        violations: 0,
        failed_runs: Vec::new(),
        wall_seconds: 0.0,
        parallel: config.parallel.max(1),
        holdings_start: Holdings::now(),
        holdings_end: Holdings::default(),
        holdings_peak: Holdings::default(),
    };
    let config = Arc::new(config);
    let mut in_flight = tokio::task::JoinSet::new();
    let mut next = 0;
    let mut done = 0;
    while done < config.runs {
        while next < config.runs && in_flight.len() < config.parallel.max(1) {
            let (config, i) = (config.clone(), next);
            in_flight.spawn(async move { run_once(i, run_seed(config.seed, i), &config).await });
            next += 1;
        }
        let Some(joined) = in_flight.join_next().await else {
            break;
        };
        done += 1;
        let mut run = joined??;
        let (i, seed) = (run.run, run.seed);
        // Let the dropped lab's tasks see their cancellation before counting.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        run.holdings_after = Holdings::now();
        report.holdings_peak.descriptors = report
            .holdings_peak
            .descriptors
            .max(run.holdings_after.descriptors);
        report.holdings_peak.tasks = report.holdings_peak.tasks.max(run.holdings_after.tasks);
        if config.progress {
            println!(
                "run {:>4} seed {:>20}: {} faults, {} bids ({} acknowledged, {} unknown), fds {} tasks {}, {}",
                i,
                seed,
                run.faults,
                run.bids_invoked,
                run.bids_acknowledged,
                run.bids_unknown,
                run.holdings_after.descriptors,
                run.holdings_after.tasks,
                if run.violations.is_empty() {
                    "ok".to_owned()
                } else {
                    format!("{} VIOLATIONS", run.violations.len())
                }
            );
        }
        report.faults_injected += run.faults;
        for (kind, n) in &run.faults_by_kind {
            *report.faults_by_kind.entry(kind.clone()).or_default() += n;
        }
        report.rpo_lost_acknowledged += run.rpo_lost_acknowledged;
        report.bids_invoked += run.bids_invoked;
        report.bids_acknowledged += run.bids_acknowledged;
        report.bids_unknown += run.bids_unknown;
        report.violations += run.violations.len();
        if !run.violations.is_empty() {
            eprintln!("{}", describe(&run));
            report.failed_runs.push(run);
        }
    }
    report.failed_runs.sort_by_key(|r| r.run);
    report.wall_seconds = started.elapsed().as_secs_f64();
    report.holdings_end = Holdings::now();
    Ok(report)
}

/// A failing run, for people.
pub fn describe(run: &RunReport) -> String {
    let mut out = format!(
        "VIOLATION in run {} — reproduce with: wsdr chaos --seed {} --runs 1\n  schedule: {}\n",
        run.run,
        run.seed,
        serde_json::to_string(&run.schedule).unwrap_or_default()
    );
    for v in &run.violations {
        out.push_str(&format!(
            "  {}\n",
            serde_json::to_string(v).unwrap_or_default()
        ));
    }
    for op in &run.evidence {
        out.push_str(&format!(
            "  history: {}\n",
            serde_json::to_string(op).unwrap_or_default()
        ));
    }
    out
}

#[derive(Default)]
struct UserState {
    connected: bool,
    high_seen: Option<u64>,
    /// Sessions lost so far.
    reconnects: u64,
    /// bid id -> `reconnects` when it was invoked: an answer after a reconnect may answer a
    /// replay, in another Region.
    invoked_at: HashMap<String, u64>,
    resynced: bool,
    /// The bidId of the last high bid pushed to this user by someone else: a hostile user
    /// reuses it for a bid of its own.
    others_bid_id: Option<BidId>,
    /// The version vector of the last view the client reported.
    versions: wsdr_protocol::Versions,
    /// Pushes the client reported that were strictly older than the view it had.
    views_backwards: u32,
    /// (connected with a view, high bid seen) just before the forced final resync.
    before_resync: Option<(bool, Option<u64>)>,
}

impl UserState {
    fn reconnects_at(&mut self, bid_id: &str) {
        self.invoked_at.insert(bid_id.to_owned(), self.reconnects);
    }

    fn replayed_since_invoke(&self, bid_id: &str) -> bool {
        self.invoked_at
            .get(bid_id)
            .is_none_or(|at| *at != self.reconnects)
    }
}

struct Shared {
    /// Keyed by (bidder, bidId): a bidId is scoped to its bidder.
    ops: Mutex<HashMap<BidKey, Op>>,
    users: Vec<Mutex<UserState>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

async fn run_once(run: usize, seed: u64, config: &ChaosConfig) -> anyhow::Result<RunReport> {
    let scale = config.scale;
    let mut rng = SmallRng::seed_from_u64(seed);
    let schedule: Vec<Step> = (0..rng.random_range(2..5))
        .map(|_| Step::draw(&mut rng))
        .collect();
    let lab = Arc::new(
        Lab::start(LabConfig {
            scale,
            ..LabConfig::default()
        })
        .await?,
    );
    let steady = wait_for(scale.secs(900.0), || {
        lab.resolver.primary_healthy() && lab.resolver.answer() == 0
    })
    .await;
    anyhow::ensure!(steady, "run {run}: the lab never reached steady state");

    let auction = AuctionId::new("lot-1")?;
    let shared = Arc::new(Shared {
        ops: Mutex::new(HashMap::new()),
        users: (0..config.users).map(|_| Mutex::default()).collect(),
    });
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut clients = Vec::new();
    let mut tasks = Vec::new();
    for i in 0..config.users {
        let (client, task) = user(
            lab.clone(),
            i,
            seed,
            scale,
            auction.clone(),
            shared.clone(),
            stop_rx.clone(),
        );
        clients.push(client);
        tasks.push(task);
    }
    tokio::time::sleep(scale.secs(30.0)).await;

    for step in &schedule {
        play(&lab, *step, scale).await;
    }
    lab.fault(Fault::Heal);
    // Everyone back, bidding a little longer on the healed system.
    wait_for(scale.secs(900.0), || {
        shared.users.iter().all(|u| lock(u).connected)
    })
    .await;
    tokio::time::sleep(scale.secs(30.0)).await;
    let _ = stop_tx.send(true);
    // Outstanding answers, then replication drained.
    tokio::time::sleep(scale.secs(30.0)).await;
    // A client that reconnects late (a slow machine) may still replay an unconfirmed bid after
    // the first drain, so convergence gets a few bounded rounds: drain, settle, compare.
    let mut converged = false;
    for _ in 0..4 {
        let drained = wait_for(scale.secs(600.0), || lab.in_flight().items == 0).await;
        tokio::time::sleep(scale.secs(5.0)).await;
        if drained && lab.converged().await {
            converged = true;
            break;
        }
    }

    // Pushes take replication lag plus fan-out time: give them a bounded window (a minute,
    // AWS) to bring every connected user the converged high bid before looking.
    let mut converged_high = None;
    for (i, region) in lab.regions.iter().enumerate() {
        if !lab.gone().contains(&i) {
            converged_high = region
                .store
                .snapshot(&auction)
                .await?
                .high_bid
                .map(|b| b.amount.get());
            break;
        }
    }
    wait_for(scale.secs(60.0), || {
        shared.users.iter().all(|u| {
            let u = lock(u);
            !(u.connected && u.resynced) || u.high_seen == converged_high
        })
    })
    .await;
    // What pushes (and reconnects' own resyncs) brought each user, before the forced one.
    for state in &shared.users {
        let mut state = lock(state);
        state.before_resync = Some((state.connected && state.resynced, state.high_seen));
    }
    // Every user asks for the state once more; the answer is its final view.
    for state in &shared.users {
        lock(state).resynced = false;
    }
    for client in &clients {
        let _ = client.resync();
    }
    // A user that dropped meanwhile reconnects and its client asks for the state itself:
    // liveness is every user connected with a fresh view within the window.
    wait_for(scale.secs(300.0), || {
        shared.users.iter().all(|u| {
            let u = lock(u);
            u.connected && u.resynced
        })
    })
    .await;
    // The users' final views, taken before closing them.
    let users: Vec<UserEnd> = shared
        .users
        .iter()
        .enumerate()
        .map(|(i, u)| {
            let u = lock(u);
            let (was_connected, pushed) = u.before_resync.unwrap_or((false, None));
            UserEnd {
                user: format!("user-{i}"),
                connected: u.connected && u.resynced,
                high_seen: u.high_seen,
                high_before_resync: was_connected.then_some(pushed),
                views_backwards: u.views_backwards,
            }
        })
        .collect();
    for client in &clients {
        client.close();
    }
    for task in tasks {
        let _ = task.await;
    }

    // A Region lost for good is not checked: what it took with it is the RPO, and the
    // checker is told exactly which bid copies those are.
    let gone = lab.gone();
    let lost: Lost = lab
        .lost_writes()
        .into_iter()
        .filter_map(|change| match change.item {
            wsdr_core::items::Item::Bid { bid, .. } => Some((
                bid.bidder.as_str().to_owned(),
                bid.bid_id.as_str().to_owned(),
                bid.amount.get(),
            )),
            _ => None,
        })
        .collect();
    let mut regions = Vec::new();
    for (i, (name, region)) in lab.config.regions.iter().zip(&lab.regions).enumerate() {
        if gone.contains(&i) {
            continue;
        }
        let copies = region.store.all_bids(&auction).await?;
        let mut bids: std::collections::BTreeMap<BidKey, Vec<Record>> = Default::default();
        for copy in &copies {
            let records = bids
                .entry((
                    copy.bidder.as_str().to_owned(),
                    copy.bid_id.as_str().to_owned(),
                ))
                .or_default();
            match records.iter_mut().find(|r| r.amount == copy.amount.get()) {
                Some(record) => record.at = record.at.min(copy.at),
                None => records.push(Record {
                    amount: copy.amount.get(),
                    at: copy.at,
                }),
            }
        }
        for records in bids.values_mut() {
            records.sort_by_key(|r| r.amount);
        }
        let snapshot = region.store.snapshot(&auction).await?;
        regions.push(FinalState {
            region: name.clone(),
            bids,
            copies: copies.len(),
            high: snapshot.high_bid.as_ref().map(|b| {
                (
                    b.bidder.as_str().to_owned(),
                    b.bid_id.as_str().to_owned(),
                    b.amount.get(),
                )
            }),
            bid_count: snapshot.bid_count,
        });
    }
    let ops: Vec<Op> = lock(&shared.ops).values().cloned().collect();
    let violations = check(&ops, &regions, converged, &users, &lost);
    let rpo_lost_acknowledged = lost_acknowledged(&ops, &regions, &lost);
    let mut faults_by_kind: BTreeMap<String, usize> = BTreeMap::new();
    for kind in schedule.iter().flat_map(Step::kinds) {
        *faults_by_kind.entry(kind.to_owned()).or_default() += 1;
    }
    let evidence: Vec<Op> = violations
        .iter()
        .filter_map(Violation::bid)
        .filter_map(|(bidder, id)| {
            ops.iter()
                .find(|op| op.user == bidder && op.bid_id == id)
                .cloned()
        })
        .collect();
    use crate::sim::history::Outcome;
    Ok(RunReport {
        run,
        seed,
        faults: schedule.iter().map(Step::faults).sum(),
        schedule,
        bids_invoked: ops.len(),
        bids_acknowledged: ops.iter().filter(|o| o.outcome() == Outcome::Ok).count(),
        bids_unknown: ops
            .iter()
            .filter(|o| o.outcome() == Outcome::Unknown)
            .count(),
        violations,
        evidence,
        holdings_after: Holdings::default(),
        faults_by_kind,
        rpo_lost_acknowledged,
        lost_copies: lost.len(),
    })
}

async fn play(lab: &Lab, step: Step, scale: TimeScale) {
    let sleep = |secs: f64| tokio::time::sleep(scale.secs(secs));
    match step {
        Step::Down { secs } => {
            lab.fault(Fault::Down(0));
            sleep(secs).await;
        }
        Step::Throttle { secs } => {
            lab.fault(Fault::Throttle(0));
            sleep(secs).await;
        }
        Step::Partition { secs } => {
            lab.fault(Fault::Partition);
            sleep(secs).await;
        }
        Step::LagSpike { lag_ms, secs } => {
            lab.fault(Fault::Lag(Duration::from_millis(lag_ms)));
            sleep(secs).await;
        }
        Step::Flapping { cycles, secs } => {
            for _ in 0..cycles {
                lab.fault(Fault::Throttle(0));
                sleep(secs).await;
                lab.fault(Fault::Heal);
                sleep(secs).await;
            }
        }
        Step::FailbackUnderLoad { secs } => {
            lab.fault(Fault::Throttle(0));
            sleep(secs).await;
            lab.fault(Fault::Heal);
            sleep(450.0).await;
        }
        Step::LostWhileLagging { lag_ms, secs } => {
            lab.fault(Fault::Lag(Duration::from_millis(lag_ms)));
            sleep(10.0).await;
            lab.fault(Fault::Down(0));
            sleep(secs).await;
        }
        Step::NeverReturns { lag_ms, secs } => {
            lab.fault(Fault::Lag(Duration::from_millis(lag_ms)));
            sleep(10.0).await;
            lab.fault(Fault::NeverReturns(0));
            sleep(secs).await;
        }
        Step::AckLost {
            region,
            percent,
            secs,
        } => {
            lab.fault(Fault::AckLost { region, percent });
            sleep(secs).await;
        }
        Step::StoreThrottle {
            region,
            percent,
            secs,
        } => {
            lab.fault(Fault::StoreThrottle { region, percent });
            sleep(secs).await;
        }
        Step::StoreOutage { region, secs } => {
            lab.fault(Fault::StoreOutage(region));
            sleep(secs).await;
        }
        Step::ConnectionsThrottle {
            region,
            percent,
            secs,
        } => {
            lab.fault(Fault::ConnectionsThrottle { region, percent });
            sleep(secs).await;
        }
        Step::DisconnectDropped { secs } => {
            lab.fault(Fault::DisconnectDropped(0));
            lab.fault(Fault::DisconnectDropped(1));
            lab.fault(Fault::Down(0));
            sleep(secs).await;
        }
        Step::Skew { region, ms, secs } => {
            lab.fault(Fault::Skew { region, ms });
            sleep(secs).await;
        }
        Step::OneWay { from, secs } => {
            lab.fault(Fault::OneWay { from });
            sleep(secs).await;
        }
        Step::StickyDns { keep_secs, secs } => {
            lab.fault(Fault::StickyDns(Duration::from_secs(keep_secs)));
            lab.fault(Fault::Down(0));
            sleep(secs).await;
        }
        Step::Slow { region, ms, secs } => {
            lab.fault(Fault::Slow { region, ms });
            sleep(secs).await;
        }
        Step::Calm { secs } => sleep(secs).await,
    }
    lab.fault(Fault::Heal);
}

fn user(
    lab: Arc<Lab>,
    index: usize,
    seed: u64,
    scale: TimeScale,
    auction: AuctionId,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) -> (wsdr_client::Client, tokio::task::JoinHandle<()>) {
    let sub = format!("user-{index}");
    let builder = user_client(
        &lab,
        &sub,
        &auction,
        seed.wrapping_add(index as u64),
        index % 2 == 1,
    );
    let (client, mut events) = builder.start();
    let handle = client.clone();
    let task = tokio::spawn(async move {
        let mut rng = SmallRng::seed_from_u64(seed ^ ((index as u64) << 32));
        let clock = Instant::now();
        let now_ms = move || clock.elapsed().as_secs_f64() * 1000.0;
        let mut next_bid = Instant::now() + scale.secs(rng.random_range(1.0..10.0));
        let mut bidding = true;
        loop {
            tokio::select! {
                _ = stop.changed(), if bidding => bidding = false,
                _ = tokio::time::sleep_until(next_bid), if bidding => {
                    next_bid = Instant::now() + scale.secs(rng.random_range(3.0..15.0));
                    let high = lock(&shared.users[index]).high_seen.unwrap_or(100_000);
                    // Mostly above the high bid; sometimes at or below it (a rejection).
                    let mut amount = if rng.random_bool(0.15) {
                        high.saturating_sub(1_000 * rng.random_range(0..3)).max(100_000)
                    } else {
                        // The minimum next bid, often: users on both Regions during a split
                        // then place equal amounts.
                        high + 1_000 * rng.random_range(1..4)
                    };
                    // Awkward users: amounts that are not multiples of the increment.
                    if rng.random_bool(0.3) {
                        amount += rng.random_range(1..1_000);
                    }
                    let Ok(amount) = Amount::new(amount) else { continue };
                    // A hostile user, now and then: reuse a bidId another user's bid carried
                    // in a push (same Region or, after a failover, the other one).
                    let stolen = if rng.random_bool(0.1) {
                        lock(&shared.users[index]).others_bid_id.clone().filter(|id| {
                            !lock(&shared.ops).contains_key(&(sub.clone(), id.as_str().to_owned()))
                        })
                    } else {
                        None
                    };
                    let sent = match stolen {
                        Some(id) => handle.bid_with_id(auction.clone(), amount, id).await,
                        None => handle.bid(auction.clone(), amount).await,
                    };
                    if let Ok(bid_id) = sent {
                        lock(&shared.ops).insert((sub.clone(), bid_id.as_str().to_owned()), Op {
                            user: sub.clone(),
                            bid_id: bid_id.as_str().to_owned(),
                            amount: amount.get(),
                            invoked_ms: now_ms(),
                            answers: Vec::new(),
                        });
                        // Remember the reconnect count at invoke, to tell replays apart.
                        lock(&shared.users[index]).reconnects_at(bid_id.as_str());
                    }
                }
                event = events.recv() => {
                    let Some(event) = event else { break };
                    let mut state = lock(&shared.users[index]);
                    match event {
                        Event::StateRestored { auction, .. } => {
                            // A getState answer, whether asked by `resync` or by the client
                            // itself after a reconnect: either is a fresh final view.
                            state.connected = true;
                            state.resynced = true;
                            state.high_seen = auction.high_bid.map(|h| h.amount.get());
                            state.versions = auction.versions;
                        }
                        Event::StateUpdated { high_bid, versions, .. } => {
                            if let Some(h) = high_bid.as_ref().filter(|h| h.bidder != sub) {
                                state.others_bid_id = Some(h.bid_id.clone());
                            }
                            // The client must never report a view older than the one it has.
                            if state.versions != versions
                                && wsdr_protocol::dominates(&state.versions, &versions)
                            {
                                state.views_backwards += 1;
                            }
                            wsdr_protocol::merge_versions(&mut state.versions, &versions);
                            let seen = high_bid.map(|h| h.amount.get());
                            state.high_seen = state.high_seen.max(seen);
                        }
                        Event::Disconnected { .. } => {
                            state.connected = false;
                            state.resynced = false;
                            state.reconnects += 1;
                        }
                        Event::BidExpired { bid_id } => {
                            drop(state);
                            if let Some(op) = lock(&shared.ops).get_mut(&(sub.clone(), bid_id.as_str().to_owned())) {
                                op.answers.push((now_ms(), Answer::Expired, String::new(), true));
                            }
                        }
                        Event::BidResult { bid_id, status, region, .. } => {
                            let replayed = state.replayed_since_invoke(bid_id.as_str());
                            let answer = match status {
                                BidStatus::Accepted => Answer::Accepted,
                                BidStatus::Duplicate => Answer::Duplicate,
                                BidStatus::Rejected => Answer::Rejected,
                                BidStatus::Unknown => Answer::Unknown,
                            };
                            drop(state);
                            let mut ops = lock(&shared.ops);
                            if let Some(op) = ops.get_mut(&(sub.clone(), bid_id.as_str().to_owned())) {
                                op.answers.push((now_ms(), answer, region, replayed));
                                if matches!(answer, Answer::Accepted | Answer::Duplicate) {
                                    let amount = op.amount;
                                    drop(ops);
                                    let mut state = lock(&shared.users[index]);
                                    state.high_seen = state.high_seen.max(Some(amount));
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
    });
    (client, task)
}
