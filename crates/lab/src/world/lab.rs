//! The whole two-Region system on one machine.

use crate::world::clock::{LabClock, RegionClock};
use crate::world::frontdoor;
use crate::world::health::{
    Alarm, AlarmConfig, AlarmState, HealthCheck, LabMetrics, MetricKind, MetricsStore, MissingData,
    Resolver,
};
use crate::world::owner::Owner;
use crate::world::region::{Quotas, Region};
use crate::world::replication::{InFlight, Link};
use crate::world::scale::TimeScale;
use crate::world::store::{FaultyStore, ReplicaStore, StoreFailure};
use crate::world::timeline::{Kind, Timeline};
use authorizer::Authorizer;
use serde::Serialize;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use wsdr_core::items::Change;
use wsdr_core::{Auction, Clock};
use wsdr_protocol::{Amount, AuctionId};

/// The lab's settings, in AWS terms; the time scale turns them into lab time.
#[derive(Debug, Clone)]
pub struct LabConfig {
    pub scale: TimeScale,
    pub regions: [String; 2],
    /// Global Tables replication lag (AWS: usually under a second).
    pub replication_lag: Duration,
    /// Failover record TTL.
    pub dns_ttl: Duration,
    /// How often Route 53 reads the alarm.
    pub health_check_interval: Duration,
    /// M: unhealthy minutes that fire the alarm.
    pub failover_datapoints: usize,
    /// Healthy minutes before failback (N = this + 1).
    pub failback_datapoints: usize,
    pub probes_per_run: u32,
    /// API Gateway's new-connection quota per second (AWS time).
    pub connect_rate: f64,
    pub idle_timeout: Duration,
    pub max_duration: Duration,
    /// Print the timeline as it happens.
    pub echo: bool,
    /// Where state lives: in memory (default) or DynamoDB Local (`--dynamodb`).
    pub store: crate::world::store::StoreKind,
    /// The canary identity's HS256 secret (32+ bytes). Random per start unless given, so
    /// that a canary outside the lab (the canary Lambda under `cargo lambda watch`,
    /// `make invoke-local`) can mint tokens the lab's authorizer accepts.
    pub canary_secret: Option<String>,
    /// Keep at most this many timeline entries (plus the key ones): set for a lab that runs
    /// for hours (`wsdr lab`); drills keep everything they are judged on.
    pub timeline_cap: Option<usize>,
    /// Each Region counts its connections every minute and advertises the herd window
    /// (its head count over the other Region's connect quota) in `state` replies
    /// (default). `false`: no census, no hint (clients fall back on their own guess).
    pub herd_hint: bool,
    /// What the failover records' health checks read: the verdict alarm (default) or the
    /// Regions' health endpoints (the fast verdict, polled every 10 s).
    pub health_check: crate::world::fast::HealthCheckKind,
    /// The fast path (fast verdict, health endpoints, endpoint checks). Always on with
    /// `health_check: Endpoint`; with `Alarm` it runs beside it when set, for comparison.
    pub fast: Option<crate::world::fast::FastConfig>,
    /// The state table's mode: eventual (MREC, the two Regions' tables replicate) or strong
    /// (MRSC: the two Regions' replicas and a third member decide by quorum).
    pub consistency: wsdr_core::Consistency,
    /// Strong mode's third member: its Region, and whether it is a witness (default) or a
    /// full replica (no application is deployed there either way).
    pub third_member: (String, crate::world::mrsc::MemberKind),
    /// Strong mode: what one strongly consistent request costs across Regions, AWS time
    /// (AWS publishes no figure; docs/DATA_MODEL.md states the assumption).
    pub strong_request_cost: Duration,
    /// What the world runs on: real loopback TCP, the thread's RNG and the system clock
    /// (default), or a simulation's in-memory network, seeded draws and fixed epoch.
    pub environment: crate::world::env::Environment,
    /// Each table request of a handler takes a time drawn uniformly from this range (AWS
    /// time), so that concurrent invocations interleave at their requests. `None` (default):
    /// the real-time lab's own CPU time interleaves them; a simulation has none and sets it.
    pub store_service_time: Option<(Duration, Duration)>,
}

impl Default for LabConfig {
    fn default() -> Self {
        Self {
            scale: TimeScale::new(60.0),
            regions: ["us-east-1".into(), "us-west-2".into()],
            replication_lag: Duration::from_millis(800),
            dns_ttl: Duration::from_secs(60),
            health_check_interval: Duration::from_secs(30),
            failover_datapoints: 2,
            failback_datapoints: 5,
            probes_per_run: 3,
            connect_rate: 500.0,
            idle_timeout: Duration::from_secs(600),
            max_duration: Duration::from_secs(7200),
            echo: false,
            store: crate::world::store::StoreKind::Memory,
            canary_secret: None,
            timeline_cap: None,
            herd_hint: true,
            health_check: crate::world::fast::HealthCheckKind::Alarm,
            fast: None,
            consistency: wsdr_core::Consistency::Eventual,
            third_member: ("us-east-2".into(), crate::world::mrsc::MemberKind::Witness),
            strong_request_cost: Duration::from_millis(30),
            environment: crate::world::env::Environment::real(),
            store_service_time: None,
        }
    }
}

impl LabConfig {
    /// The same lab as a deterministic simulation seeded `seed`: AWS time (scale 1), the
    /// in-memory network, every draw from the seed, DynamoDB-like table service times
    /// (docs/LAB.md, "Deterministic simulation"). Chaos runs and simulated drills both use it.
    pub fn simulated(mut self, seed: u64) -> Self {
        self.scale = TimeScale::new(1.0);
        self.environment = crate::world::env::Environment::simulated(seed);
        self.store_service_time = Some(SIMULATED_STORE_SERVICE_TIME);
        self
    }
}

/// Each table request's service time in a simulated run, AWS time: DynamoDB's single-digit
/// milliseconds, so that concurrent invocations interleave at every request as they do on
/// the service (a simulation spends no time on CPU work).
pub const SIMULATED_STORE_SERVICE_TIME: (Duration, Duration) =
    (Duration::from_millis(2), Duration::from_millis(9));

/// What the lab can ask of the users a run attaches to it ([`Lab::attach_users`]), for the
/// control room and `/metrics`: the lab itself knows sockets, not users.
pub trait UsersView: Send + Sync {
    /// Users in the run.
    fn total(&self) -> usize;
    /// Users whose app holds an open connection now.
    fn online(&self) -> usize;
    /// For each user restored (state read after a reconnect) at or after `since_ms` in
    /// `region`: how long after `since_ms`, lab ms.
    fn restored_since(&self, since_ms: f64, region: &str) -> Vec<f64>;
}

/// A fault to inject. Regions by index (0 primary, 1 secondary); durations and skews in AWS
/// time. The names in `kind()` are the CLI's, the control API's and the chaos summary's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    /// Every socket dropped, new connections refused, its replication stalled.
    Down(usize),
    /// Reserved concurrency 0 on the Region's handler (the reference game day).
    Throttle(usize),
    /// Replication cut both ways.
    Partition,
    /// Replication lag, AWS time.
    Lag(Duration),
    /// Down for good: what it had not replicated is lost (the measured RPO). Heal does not
    /// bring it back.
    NeverReturns(usize),
    /// This percentage of bids lose their connection right after the commit.
    AckLost { region: usize, percent: u8 },
    /// This percentage of the handler's table requests are throttled.
    StoreThrottle { region: usize, percent: u8 },
    /// The handler cannot reach its table at all.
    StoreOutage(usize),
    /// This percentage of `@connections` posts answer 429 LimitExceeded.
    ConnectionsThrottle { region: usize, percent: u8 },
    /// `$disconnect` is never delivered.
    DisconnectDropped(usize),
    /// The Region's clock runs `ms` ahead (negative: behind) of the others.
    Skew { region: usize, ms: i64 },
    /// Replication from `from` to the other Region cut; the other direction flows.
    OneWay { from: usize },
    /// Clients resolve the global name through a resolver that ignores the TTL and keeps an
    /// answer this long.
    StickyDns(Duration),
    /// Every integration in the Region takes this much longer.
    Slow { region: usize, ms: u64 },
    /// The Region's table replica cut off from every other member (its API still serves).
    /// Strong mode: the Region has no quorum and decides nothing. Eventual mode: its
    /// replication cut both ways (a partition).
    Isolate(usize),
    /// Everything back to normal (a Region that never returns stays gone).
    Heal,
}

impl Fault {
    /// The fault's name as the CLI, the control API and the chaos summary spell it.
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::Down(_) => "down",
            Fault::Throttle(_) => "throttle",
            Fault::Partition => "partition",
            Fault::Lag(_) => "lag",
            Fault::NeverReturns(_) => "never-returns",
            Fault::AckLost { .. } => "ack-lost",
            Fault::StoreThrottle { .. } => "store-throttle",
            Fault::StoreOutage(_) => "store-outage",
            Fault::ConnectionsThrottle { .. } => "connections-throttle",
            Fault::DisconnectDropped(_) => "disconnect-dropped",
            Fault::Skew { .. } => "skew",
            Fault::OneWay { .. } => "one-way",
            Fault::StickyDns(_) => "sticky-dns",
            Fault::Slow { .. } => "slow",
            Fault::Isolate(_) => "isolate",
            Fault::Heal => "heal",
        }
    }
}

/// Every fault kind, as named by [`Fault::kind`] (heal excluded).
pub const FAULT_KINDS: &[&str] = &[
    "down",
    "throttle",
    "partition",
    "lag",
    "never-returns",
    "ack-lost",
    "store-throttle",
    "store-outage",
    "connections-throttle",
    "disconnect-dropped",
    "skew",
    "one-way",
    "sticky-dns",
    "slow",
    "isolate",
];

pub const USER_ISSUER: &str = "https://lab.wsdr.local";
pub const AUDIENCE: &str = "wsdr";

/// The running lab.
pub struct Lab {
    pub config: LabConfig,
    pub regions: [Arc<Region>; 2],
    /// `links[0]`: primary -> secondary; `links[1]`: secondary -> primary.
    pub links: [Link; 2],
    pub resolver: Arc<Resolver>,
    /// The primary's verdict alarm (one period of the watcher's `FailoverVerdict`): its
    /// health check decides the PRIMARY failover record.
    pub alarm: Arc<Alarm>,
    /// The secondary's own verdict alarm, behind the SECONDARY record's health check.
    pub secondary_alarm: Arc<Alarm>,
    pub health_checks: [Arc<HealthCheck>; 2],
    /// The fast path's own faults (a blind vantage point).
    pub fast_faults: Arc<crate::world::fast::FastFaults>,
    pub metrics: Arc<MetricsStore>,
    pub timeline: Timeline,
    pub front_door: SocketAddr,
    user_secret: String,
    /// The canary issuer's secret: the chaos campaign's attackers hold it (a leaked secret).
    canary_secret: String,
    /// Strong mode's MRSC table (its members, quorum, faults); `None` in eventual mode.
    pub mrsc: Option<Arc<crate::world::mrsc::Cluster>>,
    /// Strong mode: every change of the serving Regions' quorum, as (lab ms before the
    /// change, lab ms after it, each serving Region's quorum after it), for the checker's
    /// "a Region without quorum acknowledged nothing".
    quorum_log: std::sync::Mutex<Vec<(f64, f64, Vec<bool>)>>,
    /// Every task and listener of this lab: cancelled when the lab is dropped.
    owner: Owner,
    /// The lab's one clock (tokio's, as epoch ms); each Region's clock is built on it.
    pub clock: LabClock,
    /// Each Region's store as its handler sees it, with injectable failures.
    pub store_faults: [Arc<FaultyStore>; 2],
    /// Writes a Region that never returned took with it.
    lost: std::sync::Mutex<Vec<Change>>,
    /// The simulated users of a run, if one attached them.
    /// Weak: the users hold the lab, and the lab must not keep them (or itself) alive.
    users: std::sync::OnceLock<std::sync::Weak<dyn UsersView>>,
}

impl std::fmt::Debug for Lab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lab")
            .field("front_door", &self.front_door)
            .finish_non_exhaustive()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for region in &self.regions {
            region.drop_all_sockets();
        }
        self.owner.cancel();
    }
}

fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// A 64-hex-digit secret drawn from the world's entropy.
fn secret(entropy: &dyn wsdr_core::Entropy) -> String {
    crate::world::env::hex(entropy, 64)
}

/// Status for the control API and the control room.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub lab_seconds: f64,
    pub time_scale: f64,
    pub front_door: String,
    pub regions: Vec<RegionStatus>,
    pub alarm: AlarmState,
    pub primary_healthy: bool,
    /// The secondary's verdict alarm and health check (the SECONDARY record's).
    pub secondary_alarm: AlarmState,
    pub secondary_healthy: bool,
    pub dns_answer: Option<String>,
    pub replication: Vec<LinkStatus>,
    /// The watcher canary's last datapoints for the primary, oldest first (true = healthy).
    pub canary: Vec<bool>,
    /// The last system events (faults, probes failing, alarm, health check, DNS), oldest first.
    pub events: Vec<crate::world::timeline::Entry>,
    /// Every key event of the run (fault, heal, alarms, health checks, DNS flips, notes),
    /// oldest first: what the control room keeps on screen.
    pub key_events: Vec<crate::world::timeline::Entry>,
    /// The fault in force, if any: since when, and how the users are doing.
    pub fault: Option<FaultStatus>,
    /// The simulated users, when a run attached them (`wsdr lab --users N`, drills).
    pub users: Option<UsersStatus>,
    /// `eventual` or `strong`.
    pub consistency: String,
    /// Strong mode: the MRSC table's members (the serving Regions' replicas, then the third
    /// member), each with whether it reaches a quorum now.
    pub table_members: Option<Vec<crate::world::mrsc::MemberStatus>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FaultStatus {
    /// What the last fault entry said.
    pub detail: String,
    pub since_lab_s: f64,
    pub since_aws_s: f64,
    /// Users restored in a Region other than the primary since the fault.
    pub restored: Option<usize>,
    /// The slowest of those restores so far, AWS seconds (the RTO so far).
    pub rto_so_far_aws_s: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct UsersStatus {
    pub total: usize,
    pub online: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct RegionStatus {
    pub name: String,
    pub url: String,
    pub down: bool,
    pub throttled: bool,
    pub sockets: usize,
    pub handshakes: u64,
    pub throttled_429: u64,
    pub integration_errors: u64,
    /// Bids this Region answered `accepted`.
    pub bids_accepted: u64,
    /// This Region's canary datapoints, oldest first (true = healthy).
    pub canary: Vec<bool>,
    /// The Region's verdict alarm and its Route 53 health check.
    pub alarm: AlarmState,
    pub health_check_healthy: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct LinkStatus {
    pub from: String,
    pub to: String,
    pub cut: bool,
    pub lag_ms: f64,
    pub in_flight: InFlight,
    pub applied: u64,
}

impl Lab {
    pub async fn start(config: LabConfig) -> anyhow::Result<Self> {
        let scale = config.scale;
        let echo = config.echo.then_some(scale.factor());
        let timeline = match config.timeline_cap {
            Some(cap) => Timeline::bounded(echo, cap),
            None => Timeline::new(echo),
        };
        let env = config.environment.clone();
        let user_secret = secret(env.entropy.as_ref());
        let canary_secret = config
            .canary_secret
            .clone()
            .unwrap_or_else(|| secret(env.entropy.as_ref()));
        let auth_env = [
            ("JWT_ISSUER", USER_ISSUER.to_owned()),
            ("JWT_AUDIENCE", AUDIENCE.to_owned()),
            ("JWT_HS256_SECRET", user_secret.clone()),
            ("CANARY_HS256_SECRET", canary_secret.clone()),
        ];
        let auth_config = authorizer::Config::from_lookup(|k| {
            auth_env
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.clone())
        })?;
        let clock = match env.epoch_ms {
            Some(epoch_ms) => LabClock::at(epoch_ms),
            None => LabClock::new(),
        };
        // Token times judged by the lab's clock (a simulation's starts at a fixed epoch).
        let authorizer = Arc::new(
            Authorizer::new(&auth_config)
                .await
                .with_clock(Arc::new(move || clock.now_ms() / 1000)),
        );
        let quotas = Quotas {
            connect_rate: config.connect_rate * scale.factor(),
            connect_burst: config.connect_rate,
            post_latency: Duration::ZERO,
            fanout: wsdr_core::FanoutConfig::default(),
            idle_timeout: scale.lab(config.idle_timeout),
            max_duration: scale.lab(config.max_duration),
            max_frame_bytes: wsdr_protocol::limits::MAX_FRAME_BYTES,
            max_message_bytes: wsdr_protocol::limits::MAX_MESSAGE_BYTES,
            herd_hint: config.herd_hint.then(|| wsdr_core::HerdHint {
                destination_quota_per_s: config.connect_rate * scale.factor(),
                max_census_age: scale.lab(Duration::from_secs(300)),
                reuse_for: scale.lab(Duration::from_secs(60)),
            }),
            consistency: config.consistency,
        };
        let clocks = [RegionClock::new(clock), RegionClock::new(clock)];
        let (mrsc, [east, west]) = match config.consistency {
            wsdr_core::Consistency::Eventual => (
                None,
                crate::world::store::open(
                    &config.store,
                    &config.regions,
                    &clocks,
                    env.entropy.as_ref(),
                )
                .await?,
            ),
            wsdr_core::Consistency::Strong => {
                anyhow::ensure!(
                    matches!(config.store, crate::world::store::StoreKind::Memory),
                    "strong mode runs on the lab's in-memory MRSC table; DynamoDB Local has no \
                     multi-Region mode to stand on"
                );
                let cluster = crate::world::mrsc::Cluster::new(
                    vec![
                        (
                            config.regions[0].clone(),
                            crate::world::mrsc::MemberKind::Replica,
                        ),
                        (
                            config.regions[1].clone(),
                            crate::world::mrsc::MemberKind::Replica,
                        ),
                        config.third_member.clone(),
                    ],
                    scale.lab(config.strong_request_cost),
                    clocks[0].clone(),
                    env.entropy.clone(),
                );
                let stores: [Arc<dyn ReplicaStore>; 2] = [cluster.member(0), cluster.member(1)];
                (Some(cluster), stores)
            }
        };
        let service_time = config
            .store_service_time
            .map(|(low, high)| (scale.lab(low), scale.lab(high)));
        let store_faults = [
            Arc::new(FaultyStore::new(east, env.entropy.clone(), service_time)),
            Arc::new(FaultyStore::new(west, env.entropy.clone(), service_time)),
        ];
        let stores: [Arc<dyn ReplicaStore>; 2] = [store_faults[0].clone(), store_faults[1].clone()];
        let lag = scale.lab(config.replication_lag);
        let owner = Owner::new();
        let links = [
            Link::start(
                stores[0].as_ref(),
                stores[1].clone(),
                lag,
                &owner,
                env.entropy.clone(),
            ),
            Link::start(
                stores[1].as_ref(),
                stores[0].clone(),
                lag,
                &owner,
                env.entropy.clone(),
            ),
        ];
        let shared = crate::world::env::Shared {
            scale,
            timeline: timeline.clone(),
            owner: owner.clone(),
            environment: env.clone(),
        };
        let regions = [
            Region::start(
                &config.regions[0],
                stores[0].clone(),
                authorizer.clone(),
                quotas.clone(),
                clocks[0].clone(),
                shared.clone(),
            )
            .await?,
            Region::start(
                &config.regions[1],
                stores[1].clone(),
                authorizer,
                quotas,
                clocks[1].clone(),
                shared.clone(),
            )
            .await?,
        ];
        // Replicated bids are pushed in the Region they reach, by the handler's stream path.
        for (link, target) in links.iter().zip([regions[1].clone(), regions[0].clone()]) {
            link.on_applied(Arc::new(move |change| target.on_replicated(change)));
        }
        for region in &regions {
            for (id, item, price, increment) in [
                ("lot-1", "1959 Fender Stratocaster", 100_000, 1_000),
                ("canary", "canary probe", 1, 1),
                // The chaos campaign's prolific bidder bids here alone, hundreds of times.
                ("lot-2", "box of 500 guitar picks", 1, 1),
            ] {
                region
                    .service()
                    .ensure_auction(&Auction {
                        id: AuctionId::new(id)?,
                        item: item.into(),
                        starting_price: Amount::new(price)?,
                        min_increment: increment,
                        closes_at: None,
                    })
                    .await?;
            }
        }
        let resolver = Arc::new(Resolver::new(
            scale.lab(config.dns_ttl),
            timeline.clone(),
            config.regions.clone(),
        ));
        // The watchers' verdicts decide; each alarm is one period of one verdict (the rule
        // itself runs in the watcher: wsdr_core::verdict), missing data is not considered,
        // and each health check keeps its last status while its alarm has no data.
        let period = scale.secs(60.0);
        let verdict_alarm = |api_id: &str| {
            Arc::new(Alarm::new(
                MetricKind::Verdict,
                api_id,
                AlarmConfig {
                    period,
                    datapoints_to_alarm: 1,
                    evaluation_periods: 1,
                    missing: MissingData::Missing,
                },
            ))
        };
        let alarm = verdict_alarm(&regions[0].api_id);
        let secondary_alarm = verdict_alarm(&regions[1].api_id);
        let health_checks = [
            Arc::new(HealthCheck::new(alarm.clone())),
            Arc::new(HealthCheck::new(secondary_alarm.clone())),
        ];
        let metrics = Arc::new(MetricsStore::new(clock.now_ms(), period));
        let front_door = frontdoor::start(
            resolver.clone(),
            [regions[0].addr, regions[1].addr],
            &owner,
            &env.network,
        )
        .await?;
        let mut lab = Self {
            config,
            regions,
            links,
            resolver,
            alarm,
            secondary_alarm,
            health_checks,
            fast_faults: Arc::default(),
            quorum_log: std::sync::Mutex::new(
                mrsc.iter()
                    .map(|c| (0.0, 0.0, (0..2).map(|r| c.has_quorum(r)).collect()))
                    .collect(),
            ),
            mrsc,
            metrics,
            timeline,
            front_door,
            user_secret,
            canary_secret: canary_secret.clone(),
            owner,
            clock,
            store_faults,
            lost: std::sync::Mutex::new(Vec::new()),
            users: std::sync::OnceLock::new(),
        };
        lab.start_canaries(&canary_secret)?;
        if lab.config.herd_hint {
            lab.start_census();
        }
        lab.start_alarm();
        lab.start_health_check();
        if let Some(fast) = lab.fast_config() {
            lab.start_fast_path(&canary_secret, &fast)?;
        }
        Ok(lab)
    }

    fn start_canaries(&mut self, canary_secret: &str) -> anyhow::Result<()> {
        let scale = self.config.scale;
        let period = scale.secs(60.0);
        for region in &self.regions {
            let config = canary::Config {
                target_url: region.url(),
                expected_region: region.name.clone(),
                api_id: region.api_id.clone(),
                metric_names: wsdr_aws::MetricNames::default(),
                probes_per_run: self.config.probes_per_run,
                probe_spacing: scale.secs(15.0),
                // Never below 500 ms of real time: a loaded 2-core machine must not fail probes.
                probe_timeout: scale.secs(5.0).max(Duration::from_millis(500)),
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
            self.owner.spawn(async move {
                // Runs start a tenth into each period so each datapoint lands inside it.
                let mut tick = tokio::time::interval_at(start + period / 10, period);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
                loop {
                    tick.tick().await;
                    let canary = canary.clone();
                    runs.spawn(async move {
                        let _ = canary.run_once().await;
                    });
                }
            });
        }
        Ok(())
    }

    /// Each Region's connection census, every minute (in AWS: the evacuator function on a
    /// schedule, `{"census": true}`), from which its handler computes the herd hint.
    fn start_census(&mut self) {
        let period = self.config.scale.secs(60.0);
        for region in &self.regions {
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

    fn start_alarm(&mut self) {
        let alarms = [
            (self.alarm.clone(), "primary", true),
            (self.secondary_alarm.clone(), "secondary", false),
        ];
        let metrics = self.metrics.clone();
        let timeline = self.timeline.clone();
        let period = self.alarm.config.period;
        let start = timeline.start();
        self.owner.spawn(async move {
            let mut k: u32 = 0;
            loop {
                let (from, to) = metrics.period(u64::from(k));
                // Evaluate half a period after the period ends, so late datapoints count.
                tokio::time::sleep_until(start + period * (k + 1) + period / 2).await;
                for (alarm, name, decides) in &alarms {
                    if let Some(state) = alarm.evaluate(&metrics, from, to) {
                        // The drill times detection on the primary's alarm alone.
                        let kind = match (decides, state) {
                            (true, AlarmState::Alarm) => Kind::Alarm,
                            (true, _) => Kind::AlarmOk,
                            (false, _) => Kind::Note,
                        };
                        timeline.record(kind, format!("{name} verdict alarm -> {state:?}"));
                    }
                }
                k += 1;
            }
        });
    }

    fn start_health_check(&mut self) {
        // With endpoint checks in charge, the alarm's checks are only timed (side by side).
        let drives_dns = self.config.health_check == crate::world::fast::HealthCheckKind::Alarm;
        let checks = self.health_checks.clone();
        let resolver = self.resolver.clone();
        let timeline = self.timeline.clone();
        let interval = self.config.scale.lab(self.config.health_check_interval);
        self.owner.spawn(async move {
            let mut tick = tokio::time::interval(interval);
            let mut last: [Option<bool>; 2] = [None, None];
            loop {
                tick.tick().await;
                let healthy = [checks[0].poll(), checks[1].poll()];
                if drives_dns {
                    resolver.set_primary_healthy(healthy[0]);
                    resolver.set_secondary_healthy(healthy[1]);
                }
                for (i, name) in ["primary", "secondary"].iter().enumerate() {
                    if last[i] != Some(healthy[i]) {
                        if last[i].is_some() {
                            let kind = match (i, healthy[i]) {
                                (0, true) => Kind::HealthHealthy,
                                (0, false) => Kind::HealthUnhealthy,
                                _ => Kind::Note,
                            };
                            timeline.record(
                                kind,
                                format!(
                                    "Route 53 health check: {name} {}",
                                    if healthy[i] { "healthy" } else { "unhealthy" }
                                ),
                            );
                        }
                        last[i] = Some(healthy[i]);
                    }
                }
            }
        });
    }

    /// The fast path's settings, when it runs.
    pub fn fast_config(&self) -> Option<crate::world::fast::FastConfig> {
        match (self.config.health_check, &self.config.fast) {
            (_, Some(fast)) => Some(fast.clone()),
            (crate::world::fast::HealthCheckKind::Endpoint, None) => Some(Default::default()),
            (crate::world::fast::HealthCheckKind::Alarm, None) => None,
        }
    }

    /// The fast path: per Region, probe rounds at two vantage points feeding a fast verdict
    /// (replicated into the Region, where its health endpoint serves it), and a Route 53
    /// endpoint health check polling that endpoint.
    fn start_fast_path(
        &mut self,
        canary_secret: &str,
        fast: &crate::world::fast::FastConfig,
    ) -> anyhow::Result<()> {
        use crate::world::fast::{self as fastpath, EndpointCheck};
        let scale = self.config.scale;
        let lag = scale.lab(self.config.replication_lag);
        for (index, region) in self.regions.iter().enumerate() {
            let config = canary::Config {
                target_url: region.url(),
                expected_region: region.name.clone(),
                api_id: region.api_id.clone(),
                metric_names: wsdr_aws::MetricNames::default(),
                probes_per_run: 1,
                probe_spacing: Duration::ZERO,
                // The probe's own bound: under one round (the 500 ms floor as for the canary).
                probe_timeout: scale
                    .lab(fast.probe_interval)
                    .max(Duration::from_millis(500)),
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
            let region = region.clone();
            let faults = self.fast_faults.clone();
            let timeline = self.timeline.clone();
            let owner = self.owner.clone();
            let period = scale.lab(fast.probe_interval);
            let mut verdict = wsdr_core::FastVerdict::new(
                fast.fail_after,
                fast.recover_after,
                fastpath::VANTAGE_POINTS.len(),
            );
            let name = if index == 0 { "primary" } else { "secondary" };
            self.owner.spawn(async move {
                let mut tick = tokio::time::interval(period);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
                loop {
                    tick.tick().await;
                    let probe = |vantage: usize| {
                        let prober = prober.clone();
                        let blind = fastpath::blind(&faults, index, vantage);
                        async move { Some(!blind && prober.probe_once().await.is_ok()) }
                    };
                    let (outside, inside) = tokio::join!(probe(0), probe(1));
                    if let Some(serve) = verdict.round(&[outside, inside]) {
                        let (kind, what) = if serve {
                            (Kind::FastServe, "fast verdict -> serve")
                        } else {
                            (Kind::FastFailover, "fast verdict -> fail over")
                        };
                        fastpath::record(&timeline, index, name, kind, what);
                        // The verdict reaches the Region's health endpoint by replication.
                        let region = region.clone();
                        owner.spawn(async move {
                            tokio::time::sleep(lag).await;
                            region.health_verdict.store(serve, Ordering::SeqCst);
                        });
                    }
                }
            });
        }
        let urls: Vec<SocketAddr> = self.regions.iter().map(|r| r.addr).collect();
        let resolver = self.resolver.clone();
        let timeline = self.timeline.clone();
        let drives_dns = self.config.health_check == crate::world::fast::HealthCheckKind::Endpoint;
        let interval = scale.lab(fast.check_interval);
        let timeout = scale.secs(4.0).max(Duration::from_millis(500));
        let threshold = fast.failure_threshold;
        let network = self.config.environment.network.clone();
        self.owner.spawn(async move {
            let clients: Vec<crate::control::ControlClient> = urls
                .iter()
                .map(|addr| {
                    crate::control::ControlClient::new(*addr, None)
                        .with_timeout(timeout)
                        .on_network(network.clone())
                })
                .collect();
            let mut checks = [EndpointCheck::new(threshold), EndpointCheck::new(threshold)];
            let mut last = [true, true];
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tick.tick().await;
                let (a, b) = tokio::join!(clients[0].get("/health"), clients[1].get("/health"));
                let ok = [a, b].map(|r| matches!(r, Ok((200, _))));
                for i in 0..2 {
                    let healthy = checks[i].poll(ok[i]);
                    if healthy != last[i] {
                        last[i] = healthy;
                        let name = if i == 0 { "primary" } else { "secondary" };
                        let (kind, what) = if healthy {
                            (Kind::EndpointHealthy, "endpoint health check healthy")
                        } else {
                            (Kind::EndpointUnhealthy, "endpoint health check unhealthy")
                        };
                        crate::world::fast::record(&timeline, i, name, kind, what);
                    }
                }
                if drives_dns {
                    resolver.set_primary_healthy(last[0]);
                    resolver.set_secondary_healthy(last[1]);
                }
            }
        });
        Ok(())
    }

    /// The global name clients use.
    pub fn front_door_url(&self) -> String {
        format!("ws://{}/prod", self.front_door)
    }

    /// A fresh user token (HS256, one hour).
    pub fn user_token(&self, sub: &str) -> String {
        let now = self.clock.now_ms() / 1000;
        let claims = serde_json::json!({"sub": sub, "iss": USER_ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 3600});
        jsonwebtoken::EncodingKey::from_secret(self.user_secret.as_bytes())
            .and_then(|key| jsonwebtoken::encode(&jsonwebtoken::Header::default(), &claims, &key))
            .unwrap_or_default()
    }

    /// A token of the canary issuer naming `sub` (a probe's `canary:*`, or, as an attacker
    /// holding a leaked canary secret would try, a user's).
    pub fn probe_token(&self, sub: &str) -> String {
        let now = self.clock.now_ms() / 1000;
        let claims = serde_json::json!({"sub": sub, "iss": "wsdr-canary", "aud": AUDIENCE, "iat": now, "exp": now + 60});
        jsonwebtoken::EncodingKey::from_secret(self.canary_secret.as_bytes())
            .and_then(|key| jsonwebtoken::encode(&jsonwebtoken::Header::default(), &claims, &key))
            .unwrap_or_default()
    }

    pub fn user_secret(&self) -> &str {
        &self.user_secret
    }

    pub fn fault(&self, fault: Fault) {
        let names = &self.config.regions;
        if let Some(cluster) = &self.mrsc {
            let before = self.timeline.elapsed().as_secs_f64() * 1000.0;
            self.strong_fault(cluster, fault);
            let after = self.timeline.elapsed().as_secs_f64() * 1000.0;
            let quorum = (0..2).map(|r| cluster.has_quorum(r)).collect();
            lock(&self.quorum_log).push((before, after, quorum));
        }
        match fault {
            Fault::Isolate(r) => {
                // The Region's replication both ways (eventual), or its table member (strong,
                // above): in both modes the pushes between the Regions stop too.
                for link in &self.links {
                    link.set_cut(true);
                }
                self.timeline.record(
                    Kind::Fault,
                    format!("{}: table replica cut off from the other Regions", names[r]),
                );
            }
            Fault::Down(r) => {
                self.regions[r].faults.down.store(true, Ordering::SeqCst);
                self.regions[r].drop_all_sockets();
                self.links[r].set_cut(true);
                self.timeline
                    .record(Kind::Fault, format!("{} down", names[r]));
            }
            Fault::Throttle(r) => {
                self.regions[r]
                    .faults
                    .throttled
                    .store(true, Ordering::SeqCst);
                self.timeline.record(
                    Kind::Fault,
                    format!("{} handler throttled (reserved concurrency 0)", names[r]),
                );
            }
            Fault::Partition => {
                for link in &self.links {
                    link.set_cut(true);
                }
                self.timeline.record(Kind::Fault, "replication partitioned");
            }
            Fault::Lag(lag) => {
                for link in &self.links {
                    link.set_lag(self.config.scale.lab(lag));
                }
                self.timeline.record(
                    Kind::Fault,
                    format!("replication lag {} ms (AWS)", lag.as_millis()),
                );
            }
            Fault::NeverReturns(r) => {
                let region = &self.regions[r];
                region.faults.gone.store(true, Ordering::SeqCst);
                region.faults.down.store(true, Ordering::SeqCst);
                region.drop_all_sockets();
                // Both directions end with it; what it had not shipped is gone.
                for link in &self.links {
                    link.set_cut(true);
                }
                let lost = self.links[r].discard();
                let count = lost.len();
                lock(&self.lost).extend(lost);
                self.timeline.record(
                    Kind::Fault,
                    format!(
                        "{} lost for good ({count} unreplicated writes lost with it)",
                        names[r]
                    ),
                );
            }
            Fault::AckLost { region, percent } => {
                self.regions[region]
                    .faults
                    .ack_lost_percent
                    .store(percent.min(100), Ordering::SeqCst);
                self.timeline.record(
                    Kind::Fault,
                    format!(
                        "{}: {percent}% of bids lose their answer after the commit",
                        names[region]
                    ),
                );
            }
            Fault::StoreThrottle { region, percent } => {
                self.store_faults[region].set_failure(Some(StoreFailure::Throttle {
                    percent: percent.min(100),
                }));
                self.timeline.record(
                    Kind::Fault,
                    format!("{}: {percent}% of table requests throttled", names[region]),
                );
            }
            Fault::StoreOutage(r) => {
                self.store_faults[r].set_failure(Some(StoreFailure::Outage));
                self.timeline
                    .record(Kind::Fault, format!("{}: table unreachable", names[r]));
            }
            Fault::ConnectionsThrottle { region, percent } => {
                self.regions[region]
                    .faults
                    .connections_throttle_percent
                    .store(percent.min(100), Ordering::SeqCst);
                self.timeline.record(
                    Kind::Fault,
                    format!(
                        "{}: {percent}% of @connections posts throttled",
                        names[region]
                    ),
                );
            }
            Fault::DisconnectDropped(r) => {
                self.regions[r]
                    .faults
                    .disconnect_dropped
                    .store(true, Ordering::SeqCst);
                self.timeline
                    .record(Kind::Fault, format!("{}: $disconnect dropped", names[r]));
            }
            Fault::Skew { region, ms } => {
                let lab_ms = (ms as f64 / self.config.scale.factor()).round() as i64;
                self.regions[region].clock.set_skew_ms(lab_ms);
                self.timeline.record(
                    Kind::Fault,
                    format!("{}: clock skewed {ms} ms (AWS)", names[region]),
                );
            }
            Fault::OneWay { from } => {
                self.links[from].set_cut(true);
                self.timeline.record(
                    Kind::Fault,
                    format!("replication {} -> {} cut", names[from], names[1 - from]),
                );
            }
            Fault::StickyDns(keep) => {
                self.resolver
                    .set_ttl_override(Some(self.config.scale.lab(keep)));
                self.timeline.record(
                    Kind::Fault,
                    format!(
                        "resolver ignores the TTL, keeps answers {} s (AWS)",
                        keep.as_secs()
                    ),
                );
            }
            Fault::Slow { region, ms } => {
                let lab = self.config.scale.lab(Duration::from_millis(ms));
                self.regions[region]
                    .faults
                    .slow_us
                    .store(lab.as_micros() as u64, Ordering::SeqCst);
                self.timeline.record(
                    Kind::Fault,
                    format!("{}: every integration {ms} ms slower (AWS)", names[region]),
                );
            }
            Fault::Heal => {
                for region in &self.regions {
                    region.faults.heal();
                    region.clock.reset();
                }
                for store in &self.store_faults {
                    store.set_failure(None);
                }
                let gone = self.gone();
                for (i, link) in self.links.iter().enumerate() {
                    // A link from or to a Region that never returned stays cut.
                    link.set_cut(gone.iter().any(|g| *g == i || *g == 1 - i));
                    link.set_lag(self.config.scale.lab(self.config.replication_lag));
                }
                self.resolver.set_ttl_override(None);
                self.timeline.record(Kind::Heal, "all faults healed");
            }
        }
    }

    /// What a fault does to strong mode's MRSC table, on top of what it does to the Regions.
    fn strong_fault(&self, cluster: &crate::world::mrsc::Cluster, fault: Fault) {
        match fault {
            Fault::Down(r) | Fault::NeverReturns(r) => cluster.set_down(r, true),
            Fault::Partition | Fault::OneWay { .. } => cluster.set_cut(0, 1, true),
            Fault::Isolate(r) => cluster.set_isolated(r, true),
            // The head write commits, then its answer is lost (a timeout or a 5xx after the
            // commit): the bid must be `unknown`, never `redirect`.
            Fault::AckLost { region, percent } => cluster.set_lost_answers(region, percent),
            // Replication lag has no MRSC counterpart: a slower cross-Region path makes every
            // request slower instead.
            Fault::Lag(lag) => cluster.set_cost(
                self.config
                    .scale
                    .lab(lag.max(self.config.strong_request_cost)),
            ),
            Fault::Heal => {
                cluster.heal();
                cluster.set_cost(self.config.scale.lab(self.config.strong_request_cost));
                for r in self.gone() {
                    cluster.set_down(r, true);
                }
            }
            _ => {}
        }
    }

    /// Strong mode: whether `region` certainly had no quorum for the whole of
    /// [`from_ms`, `to_ms`] (lab ms on the timeline): from after a change that left it
    /// without one to before the next change. Always false in eventual mode.
    pub fn lacked_quorum_throughout(&self, region: usize, from_ms: f64, to_ms: f64) -> bool {
        let log = lock(&self.quorum_log);
        log.iter().enumerate().any(|(i, (_, after, quorum))| {
            let until = log.get(i + 1).map_or(f64::INFINITY, |next| next.0);
            !quorum.get(region).copied().unwrap_or(true) && *after <= from_ms && to_ms < until
        })
    }

    /// Regions lost for good (`never-returns`).
    pub fn gone(&self) -> Vec<usize> {
        (0..2)
            .filter(|r| self.regions[*r].faults.gone.load(Ordering::SeqCst))
            .collect()
    }

    /// Writes that Regions lost for good took with them (including any their handlers
    /// committed after the fault, which could never be shipped).
    pub fn lost_writes(&self) -> Vec<Change> {
        let mut lost = lock(&self.lost);
        for r in self.gone() {
            lost.extend(self.links[r].discard());
        }
        lost.clone()
    }

    /// Data written but not yet replicated, both ways (a lost Region's queue excluded: it
    /// will never drain).
    pub fn in_flight(&self) -> InFlight {
        let gone = self.gone();
        let mut total = InFlight {
            items: 0,
            oldest_ms: 0.0,
        };
        for link in &self.links {
            // With a Region lost for good nothing replicates any more, either way.
            if !gone.is_empty() {
                continue;
            }
            let f = link.in_flight();
            total.items += f.items;
            total.oldest_ms = total.oldest_ms.max(f.oldest_ms);
        }
        total
    }

    /// Both stores hold exactly the same items (false if either cannot be read). With a
    /// Region lost for good there is one store left: converged by definition.
    pub async fn converged(&self) -> bool {
        if !self.gone().is_empty() {
            return true;
        }
        match (
            self.regions[0].store.dump().await,
            self.regions[1].store.dump().await,
        ) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
    }

    pub fn status(&self) -> Status {
        let names = &self.config.regions;
        // The resolver first: reading its answer can record a DNS flip, which must then be
        // among the key events of the same status (a page showing the new answer without
        // the flip that produced it would be a status that contradicts itself).
        let dns_answer = names[self.resolver.answer()].clone();
        // Read once: the fault in force is derived from the same entries.
        let key_events = self.timeline.key_entries();
        Status {
            lab_seconds: self.timeline.elapsed().as_secs_f64(),
            time_scale: self.config.scale.factor(),
            front_door: self.front_door_url(),
            regions: self
                .regions
                .iter()
                .enumerate()
                .map(|(i, r)| RegionStatus {
                    name: r.name.clone(),
                    url: r.url(),
                    down: r.faults.down.load(Ordering::SeqCst),
                    throttled: r.faults.throttled.load(Ordering::SeqCst),
                    sockets: r.live_sockets(),
                    handshakes: r.counters.handshakes.load(Ordering::Relaxed),
                    throttled_429: r.counters.throttled_429.load(Ordering::Relaxed),
                    integration_errors: r.counters.integration_errors.load(Ordering::Relaxed),
                    bids_accepted: r.counters.bids_accepted.load(Ordering::Relaxed),
                    canary: self
                        .timeline
                        .recent(6, |e| {
                            matches!(e.kind, Kind::ProbeOk | Kind::ProbeFailed)
                                && e.region.as_deref() == Some(r.name.as_str())
                        })
                        .iter()
                        .map(|e| e.kind == Kind::ProbeOk)
                        .collect(),
                    alarm: if i == 0 {
                        self.alarm.state()
                    } else {
                        self.secondary_alarm.state()
                    },
                    health_check_healthy: if i == 0 {
                        self.resolver.primary_healthy()
                    } else {
                        self.resolver.secondary_healthy()
                    },
                })
                .collect(),
            alarm: self.alarm.state(),
            primary_healthy: self.resolver.primary_healthy(),
            secondary_alarm: self.secondary_alarm.state(),
            secondary_healthy: self.resolver.secondary_healthy(),
            // A lookup like any client's: it honours the TTL (and records a flip when it sees one).
            dns_answer: Some(dns_answer),
            replication: self
                .links
                .iter()
                .enumerate()
                .map(|(i, l)| LinkStatus {
                    from: names[i].clone(),
                    to: names[1 - i].clone(),
                    cut: l.is_cut(),
                    lag_ms: l.lag().as_secs_f64() * 1000.0,
                    in_flight: l.in_flight(),
                    applied: l.applied(),
                })
                .collect(),
            // The primary's datapoints (the watcher's), as before; per Region in `regions`.
            canary: self
                .timeline
                .recent(6, |e| {
                    matches!(e.kind, Kind::ProbeOk | Kind::ProbeFailed)
                        && e.region.as_deref() == Some(names[0].as_str())
                })
                .iter()
                .map(|e| e.kind == Kind::ProbeOk)
                .collect(),
            events: self.timeline.recent(12, |e| {
                !matches!(
                    e.kind,
                    Kind::ProbeOk
                        | Kind::ClientDisconnected
                        | Kind::ClientRestored
                        | Kind::ClientMoved
                )
            }),
            fault: self
                .last_fault_in(&key_events)
                .filter(|(_, healed)| !healed)
                .map(|(f, _)| f),
            key_events,
            users: self.users().map(|u| UsersStatus {
                total: u.total(),
                online: u.online(),
            }),
            consistency: self.config.consistency.to_string(),
            table_members: self.mrsc.as_ref().map(|c| c.status()),
        }
    }

    /// The unplanned path: once the failover decision has moved the name to the secondary
    /// (the primary's health check unhealthy, the resolver answering the secondary), an
    /// evacuator outside the primary tells the connections still on it to move, through the
    /// primary's own `@connections` endpoint. Clients whose sessions stay up on a degraded
    /// primary (slow, partly failing) then leave too; once per failover.
    pub fn start_failover_evacuator(self: &Arc<Self>) {
        let lab = Arc::downgrade(self);
        let every = self.config.scale.secs(5.0);
        self.owner.spawn(async move {
            let mut evacuated = false;
            loop {
                tokio::time::sleep(every).await;
                let Some(lab) = lab.upgrade() else { return };
                let failed_over = !lab.resolver.primary_healthy() && lab.resolver.answer() == 1;
                if failed_over && !evacuated {
                    evacuated = true;
                    if let Err(error) = lab.evacuate(0, false, "failover").await {
                        lab.timeline
                            .record(Kind::Note, format!("evacuation failed: {error:#}"));
                    }
                } else if lab.resolver.primary_healthy() {
                    evacuated = false;
                }
            }
        });
    }

    /// Take a Region out of DNS (or put it back): a planned move's first step.
    pub fn set_in_service(&self, region: usize, in_service: bool) {
        self.resolver.set_in_service(region, in_service);
        self.timeline.record(
            Kind::Note,
            format!(
                "{} {} DNS (planned)",
                self.config.regions[region],
                if in_service {
                    "back in"
                } else {
                    "taken out of"
                }
            ),
        );
    }

    /// Tell every connection of Region `from` to move to the other Region (`moveTo`),
    /// through `from`'s own `@connections` endpoint with the real SDK client, paced to the
    /// destination's quota (wsdr_core::evacuate). `planned`: take `from` out of DNS first
    /// and wait until the name answers the destination, so clients that follow the global
    /// name land there; the move itself is planned, not a failure. `reason` goes to the
    /// clients.
    pub async fn evacuate(
        &self,
        from: usize,
        planned: bool,
        reason: &str,
    ) -> anyhow::Result<wsdr_core::EvacuationReport> {
        anyhow::ensure!(from < 2, "region must be 0 (primary) or 1 (secondary)");
        let to = 1 - from;
        let scale = self.config.scale;
        if planned {
            self.set_in_service(from, false);
            let ttl = scale.lab(self.config.dns_ttl);
            let flipped = crate::world::clock::wait_for(ttl * 3 + scale.secs(30.0), || {
                self.resolver.answer() == to
            })
            .await;
            if !flipped {
                // Nobody moves to a destination DNS will not send them to: put the Region
                // back as it was.
                self.set_in_service(from, true);
                anyhow::bail!(
                    "the name never answered {} after {} left DNS (is {} healthy?); {} is back in DNS and nobody was moved",
                    self.config.regions[to],
                    self.config.regions[from],
                    self.config.regions[to],
                    self.config.regions[from]
                );
            }
        }
        let region = &self.regions[from];
        let notifier = region.connections_notifier();
        let connections: Arc<dyn wsdr_core::Connections> = region.registry.clone();
        // Lab seconds: the destination admits connect_rate per AWS second.
        let plan = wsdr_core::Evacuation {
            reason: reason.to_owned(),
            destination_quota_per_s: self.config.connect_rate * scale.factor(),
            min_window: scale.secs(2.0),
            posts_per_s: 2_000.0 * scale.factor(),
            ..wsdr_core::Evacuation::new(region.name.clone(), self.config.regions[to].clone())
        };
        self.timeline.record(
            Kind::Note,
            format!("evacuating {} to {}", region.name, self.config.regions[to]),
        );
        let report =
            wsdr_core::evacuate(&connections, &notifier, &plan, region.clock.now_ms()).await?;
        self.timeline.record(
            Kind::Note,
            format!(
                "{}: {} connections told to move within {:.0} s AWS, in {} slots ({} gone, {} failed)",
                region.name,
                report.connections,
                report.window_ms as f64 / 1000.0 * scale.factor(),
                report.slots,
                report.posts.gone,
                report.posts.failed
            ),
        );
        Ok(report)
    }

    /// Attach a run's users so the control room and `/metrics` can count them (once).
    pub fn attach_users(&self, users: &Arc<dyn UsersView>) {
        let _ = self.users.set(Arc::downgrade(users));
    }

    fn users(&self) -> Option<Arc<dyn UsersView>> {
        self.users.get().and_then(std::sync::Weak::upgrade)
    }

    /// The last fault of the run, and whether a heal followed it.
    pub fn last_fault(&self) -> Option<(FaultStatus, bool)> {
        self.last_fault_in(&self.timeline.key_entries())
    }

    /// The same, from key entries already read (`Status::key_events`).
    pub fn last_fault_in(
        &self,
        key: &[crate::world::timeline::Entry],
    ) -> Option<(FaultStatus, bool)> {
        let last_fault = key.iter().rposition(|e| e.kind == Kind::Fault)?;
        let healed = key[last_fault..].iter().any(|e| e.kind == Kind::Heal);
        let fault = &key[last_fault];
        let since_lab_s = (self.timeline.elapsed().as_secs_f64() * 1000.0 - fault.at_ms) / 1000.0;
        let restores: Option<Vec<f64>> = self.users().map(|u| {
            self.config.regions[1..]
                .iter()
                .flat_map(|region| u.restored_since(fault.at_ms, region))
                .collect()
        });
        Some((
            FaultStatus {
                detail: fault.detail.clone(),
                since_lab_s,
                since_aws_s: since_lab_s * self.config.scale.factor(),
                restored: restores.as_ref().map(Vec::len),
                rto_so_far_aws_s: restores.as_ref().and_then(|r| {
                    r.iter()
                        .copied()
                        .reduce(f64::max)
                        .map(|ms| ms / 1000.0 * self.config.scale.factor())
                }),
            },
            healed,
        ))
    }
}
