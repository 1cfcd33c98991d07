//! The two Regions and what stands between them and the users: the whole two-Region system
//! on one machine, as one [`World`].
//!
//! A world is made by its [`WorldBuilder`] and changed only through what it offers: faults
//! ([`World::inject`]), planned moves ([`World::evacuate`], [`World::set_in_service`]) and
//! lookups a client would make. Everything else is read-only ([`World::status`] and the
//! accessors); each part applies the faults that concern it (`Region::inject`,
//! `Link::inject`, `FaultyStore::inject`, `Resolver::inject`, `Cluster::inject`).

pub mod clock;
pub mod config;
pub mod control;
pub mod env;
pub mod fast;
pub mod fault;
pub mod front;
pub mod frontdoor;
pub mod health;
pub mod identity;
pub mod mapping;
mod monitoring;
pub mod mrsc;
pub mod orders;
pub mod owner;
pub mod prometheus;
pub mod push_jobs;
pub mod quota;
pub mod region;
pub mod region_id;
pub mod rehearsal;
pub mod replication;
pub mod route53;
pub mod scale;
pub mod secrets;
pub mod status;
pub mod store;
pub mod timeline;

pub use config::{LabConfig, SIMULATED_STORE_SERVICE_TIME};
pub use fault::{Fault, FaultKind};
pub use region_id::{PerRegion, RegionId};
pub use scale::{AwsDuration, AwsInstant, TimeScale};

use crate::world::clock::{LabClock, RegionClock};
use crate::world::fast::{FastConfig, FastFaults, HealthCheckKind};
use crate::world::health::{
    Alarm, AlarmConfig, AlarmState, MetricKind, MetricsStore, MissingData, Resolver,
};
use crate::world::identity::{AuthorizerFunction, ColdStart, IdentityProvider};
use crate::world::mrsc::{Cluster, MemberKind};
use crate::world::owner::Owner;
use crate::world::region::{Quotas, Region};
use crate::world::replication::{InFlight, Link};
use crate::world::secrets::SecretsManager;
use crate::world::store::{FaultyStore, LedgerReplica, RegionTable, ReplicaStore};
use crate::world::timeline::{Kind, Timeline};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use wsdr_auction::Auction;
use wsdr_core::items::Change;
use wsdr_core::{Clock, UserId};
use wsdr_protocol::{Amount, AuctionId, BidId};

pub const USER_ISSUER: &str = "https://lab.wsdr.local";
pub const AUDIENCE: &str = "wsdr";
/// A user token's lifetime (a Cognito ID token's default, one hour).
pub const USER_TOKEN_LIFETIME_SECS: u64 = 3600;

/// What the world can ask of the users a run attaches to it ([`World::attach_users`]), for
/// the control room and `/metrics`: the world itself knows sockets, not users.
pub trait UsersView: Send + Sync {
    /// Users in the run.
    fn total(&self) -> usize;
    /// Users whose app holds an open connection now.
    fn online(&self) -> usize;
    /// For each user restored (state read after a reconnect) at or after `since` in
    /// `region`: how long after, AWS seconds.
    fn restored_since(&self, since: AwsInstant, region: RegionId) -> Vec<f64>;
}

/// The running two-Region system.
pub struct World {
    config: LabConfig,
    names: PerRegion<String>,
    regions: PerRegion<Arc<Region>>,
    /// Replication out of each Region (the link from the primary ships the primary's writes
    /// to the secondary).
    links: PerRegion<Link>,
    resolver: Arc<Resolver>,
    /// Each Region's verdict alarm (one period of its own canary's `FailoverVerdict`, in its
    /// own CloudWatch): the inside view with alarm checks, and the reference design's check.
    alarms: PerRegion<Arc<Alarm>>,
    /// The watcher's verdict alarm on the primary, in the judge's CloudWatch (the outside
    /// view with alarm checks).
    watcher_alarm: Arc<Alarm>,
    /// The folded verdict the CloudFront front's design served (`HealthFront::Cloudfront`).
    legacy_verdict: Arc<monitoring::LegacyVerdict>,
    /// The fast path's own faults (a blind vantage point).
    fast_faults: Arc<FastFaults>,
    metrics: Arc<MetricsStore>,
    timeline: Timeline,
    front_door: SocketAddr,
    /// The users' issuer, in its Region.
    identity: Arc<IdentityProvider>,
    /// Each user's token as the app stores it (kept across restarts of the app), with the
    /// second it was issued.
    app_tokens: Mutex<std::collections::HashMap<String, (String, u64)>>,
    /// The canary issuer's secret: the chaos campaign's attackers hold it (a leaked secret).
    canary_secret: String,
    /// Strong mode's MRSC table (its members, quorum, faults); `None` in eventual mode.
    cluster: Option<Arc<Cluster>>,
    /// Strong mode: every change of the serving Regions' quorum, as (lab ms before the
    /// change, lab ms after it, each serving Region's quorum after it), for the checker's
    /// "a Region without quorum acknowledged nothing".
    quorum_log: Mutex<Vec<(f64, f64, PerRegion<bool>)>>,
    /// Every task and listener of this world: cancelled when it is dropped.
    owner: Owner,
    /// The one clock (tokio's, as epoch ms); each Region's clock is built on it.
    clock: LabClock,
    /// Each Region's store as its handler sees it, with injectable failures.
    stores: PerRegion<RegionTable>,
    /// Writes a Region that never returned took with it.
    lost: Mutex<Vec<Change>>,
    /// What each planned evacuation reported (checked by the campaign: complete, or not).
    planned_evacuations: Mutex<Vec<wsdr_core::EvacuationReport>>,
    /// The judge's last change on the primary (its `CHANGE` item: serve, lab ms), written
    /// when the judge's verdict turns; the fail-over orders and the minute sweep read it.
    judge_change: Mutex<Option<(bool, u64)>>,
    /// The rehearsal pair (`wsdr rehearse`) and every endpoint check's status.
    rehearsal: Arc<rehearsal::Rehearsal>,
    /// The primary's evacuator's order log (in the judge's Region): each order runs once.
    order_log: Arc<wsdr_core::memory::MemoryOrderLog>,
    order_faults: orders::OrderFaults,
    order_stats: Mutex<orders::OrderStats>,
    /// The primary's evacuator's reserved concurrency (2): deliveries and sweeps beyond it wait.
    order_slots: Arc<tokio::sync::Semaphore>,
    /// The simulated users of a run, if one attached them. Weak: the users hold the world,
    /// and the world must not keep them (or itself) alive.
    users: OnceLock<Weak<dyn UsersView>>,
}

impl std::fmt::Debug for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("World")
            .field("front_door", &self.front_door)
            .finish_non_exhaustive()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        for region in self.regions.values() {
            region.drop_all_sockets();
        }
        self.owner.cancel();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// A 64-hex-digit secret drawn from the world's entropy.
fn secret(entropy: &dyn wsdr_core::Entropy) -> String {
    crate::world::env::hex(entropy, 64)
}

/// Makes a [`World`]: settings first, then [`WorldBuilder::start`].
#[derive(Debug, Clone, Default)]
pub struct WorldBuilder {
    config: LabConfig,
}

impl WorldBuilder {
    /// Every setting at once (a drill's or a campaign's configuration).
    pub fn config(mut self, config: LabConfig) -> Self {
        self.config = config;
        self
    }

    /// One lab second stands for `scale` AWS seconds.
    pub fn time_scale(mut self, scale: f64) -> Self {
        self.config.scale = TimeScale::new(scale);
        self
    }

    /// The Regions' names, primary first.
    pub fn regions(mut self, primary: &str, secondary: &str) -> Self {
        self.config.regions = [primary.to_owned(), secondary.to_owned()];
        self
    }

    pub fn consistency(mut self, consistency: wsdr_core::Consistency) -> Self {
        self.config.consistency = consistency;
        self
    }

    pub fn health_check(mut self, kind: HealthCheckKind) -> Self {
        self.config.health_check = kind;
        self
    }

    pub fn dns_ttl(mut self, ttl: AwsDuration) -> Self {
        self.config.dns_ttl = ttl;
        self
    }

    pub fn replication_lag(mut self, lag: AwsDuration) -> Self {
        self.config.replication_lag = lag;
        self
    }

    /// Print the timeline as it happens.
    pub fn echo(mut self, echo: bool) -> Self {
        self.config.echo = echo;
        self
    }

    /// The same world as a deterministic simulation seeded `seed` ([`LabConfig::simulated`]).
    pub fn simulated(mut self, seed: u64) -> Self {
        self.config = self.config.simulated(seed);
        self
    }

    /// Change any other setting.
    pub fn with(mut self, change: impl FnOnce(&mut LabConfig)) -> Self {
        change(&mut self.config);
        self
    }

    /// Start every Region, the replication between them, the front door and everything that
    /// watches them.
    pub async fn start(self) -> anyhow::Result<World> {
        World::start(self.config).await
    }
}

impl World {
    pub fn builder() -> WorldBuilder {
        WorldBuilder::default()
    }

    async fn start(config: LabConfig) -> anyhow::Result<Self> {
        let scale = config.scale;
        let names = PerRegion::from(config.regions.clone());
        let env = config.environment.clone();
        // The one clock: the timeline, the alarms' periods, the canaries' schedule and every
        // Region's clock count from its start.
        let clock = match env.epoch_ms {
            Some(epoch_ms) => LabClock::at(epoch_ms),
            None => LabClock::new(),
        };
        let timeline =
            Timeline::starting_at(clock.start(), scale, config.echo, config.timeline_cap);
        // The user issuer's HS256 secret of the lab before it had an identity provider: still
        // drawn, so that a seed's later draws (connection ids, coin flips) are those it drew.
        let _ = secret(env.entropy.as_ref());
        let canary_secret = config
            .canary_secret
            .clone()
            .unwrap_or_else(|| secret(env.entropy.as_ref()));
        let reach: crate::world::identity::Reach = Arc::default();
        let identity = Arc::new(IdentityProvider::new(
            config.identity.home,
            reach.clone(),
            scale,
        )?);
        let mut auth_env = vec![
            ("JWT_ISSUER", USER_ISSUER.to_owned()),
            ("JWT_AUDIENCE", AUDIENCE.to_owned()),
            (
                "JWT_JWKS_URL",
                format!(
                    "https://idp.{}.lab.wsdr.local/.well-known/jwks.json",
                    names[config.identity.home]
                ),
            ),
            ("JWT_ALGORITHMS", "ES256".to_owned()),
            ("CANARY_HS256_SECRET", canary_secret.clone()),
        ];
        if config.identity.snapshot {
            auth_env.push(("JWT_JWKS_SNAPSHOT", identity.jwks_text()));
        }
        let auth_config = authorizer::Config::from_lookup(|k| {
            auth_env
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.clone())
        })?;
        // Token times judged by the lab's clock (a simulation's starts at a fixed epoch).
        let token_clock: authorizer::NowSecs = Arc::new(move || clock.now_ms() / 1000);
        let authorizers = PerRegion::from_fn(|_| {
            Arc::new(AuthorizerFunction::new(ColdStart {
                config: auth_config.clone(),
                issuer: identity.clone(),
                now_secs: token_clock.clone(),
                secrets: SecretsManager::new(scale),
                reads: config.identity.secrets,
                entropy: env.entropy.clone(),
                lifetime: scale.lab(config.identity.sandbox_lifetime),
                init: scale.lab(config.identity.init_time),
                invocation: scale.lab(config.identity.invocation_time),
                scale,
                started: tokio::time::Instant::now(),
            }))
        });
        let quotas = Quotas {
            connect_rate: scale.per_lab_second(config.connect_rate),
            connect_burst: config.connect_rate,
            post_latency: std::time::Duration::ZERO,
            fanout: wsdr_core::FanoutConfig::default(),
            idle_timeout: scale.lab(config.idle_timeout),
            max_duration: scale.lab(config.max_duration),
            max_frame_bytes: wsdr_protocol::limits::MAX_FRAME_BYTES,
            max_message_bytes: wsdr_protocol::limits::MAX_MESSAGE_BYTES,
            herd_hint: config.herd_hint.then(|| wsdr_core::HerdHint {
                destination_quota_per_s: scale.per_lab_second(config.connect_rate),
                max_census_age: scale.lab(AwsDuration::from_secs(300)),
                reuse_for: scale.lab(AwsDuration::from_secs(60)),
            }),
            consistency: config.consistency,
            push: config.push,
            stale_after_ms: config.stale_after_ms,
            function_url: config.function_url,
            push_jobs: config.push_jobs.settings(),
        };
        let clocks = PerRegion::from_fn(|_| RegionClock::new(clock));
        let service_time = config
            .store_service_time
            .map(|(low, high)| (scale.lab(low), scale.lab(high)));
        // Each Region's table with the lab's injectable failures on the handler's path.
        fn faulty<T: ?Sized>(
            region: RegionId,
            inner: Arc<T>,
            entropy: &Arc<dyn wsdr_core::Entropy>,
            service_time: Option<(std::time::Duration, std::time::Duration)>,
        ) -> Arc<FaultyStore<T>> {
            Arc::new(FaultyStore::new(
                region,
                inner,
                entropy.clone(),
                service_time,
            ))
        }
        let (cluster, stores) = match config.consistency {
            wsdr_core::Consistency::Eventual => {
                let tables =
                    crate::world::store::open(&config.store, &names, &clocks, env.entropy.as_ref())
                        .await?;
                let stores = tables.map(|region, table| {
                    RegionTable::Eventual(faulty(region, table, &env.entropy, service_time))
                });
                (None, stores)
            }
            wsdr_core::Consistency::Strong => {
                anyhow::ensure!(
                    matches!(config.store, crate::world::store::StoreKind::Memory),
                    "strong mode runs on the lab's in-memory MRSC table; DynamoDB Local has no \
                     multi-Region mode to stand on"
                );
                let cluster = Cluster::new(
                    vec![
                        (names[RegionId::Primary].clone(), MemberKind::Replica),
                        (names[RegionId::Secondary].clone(), MemberKind::Replica),
                        config.third_member.clone(),
                    ],
                    config.strong_request_cost,
                    scale,
                    clocks[RegionId::Primary].clone(),
                    env.entropy.clone(),
                );
                let stores = PerRegion::from_fn(|region| {
                    let member: Arc<dyn LedgerReplica> = cluster.member(region.index());
                    RegionTable::Strong(faulty(region, member, &env.entropy, service_time))
                });
                (Some(cluster), stores)
            }
        };
        let replicas: PerRegion<Arc<dyn ReplicaStore>> =
            stores.as_ref().map(|_, store| store.replica());
        let owner = Owner::new();
        let links = PerRegion::from_fn(|from| {
            Link::start(
                from,
                replicas[from].as_ref(),
                replicas[from.other()].clone(),
                config.replication_lag,
                scale,
                &owner,
                env.entropy.clone(),
            )
        });
        let shared = crate::world::env::Shared {
            scale,
            timeline: timeline.clone(),
            owner: owner.clone(),
            environment: env.clone(),
        };
        let mut started = Vec::with_capacity(2);
        for region in RegionId::ALL {
            started.push(
                Region::start(
                    region,
                    &names[region],
                    stores[region].clone(),
                    authorizers[region].clone(),
                    quotas.clone(),
                    clocks[region].clone(),
                    shared.clone(),
                )
                .await?,
            );
        }
        let [primary, secondary]: [Arc<Region>; 2] = started
            .try_into()
            .map_err(|_| anyhow::anyhow!("two Regions start"))?;
        let regions = PerRegion::new(primary, secondary);
        // The issuer is reachable while its Region is.
        let weak = regions.as_ref().map(|_, region| Arc::downgrade(region));
        let _ = reach.set(Box::new(move |id| {
            weak[id]
                .upgrade()
                .map(|region| !region.is_down() && !region.is_gone())
        }));
        if cluster.is_some() {
            for link in links.values() {
                link.carry_quorum_writes();
            }
        }
        // Replicated bids are pushed in the Region they reach, by the handler's stream path.
        for (from, link) in links.iter() {
            let target = regions[from.other()].clone();
            link.on_applied(Arc::new(move |change| target.on_replicated(change)));
        }
        for region in regions.values() {
            for (id, item, price, increment) in [
                ("lot-1", "1959 Fender Stratocaster", 100_000, 1_000),
                ("canary", "canary probe", 1, 1),
                // The chaos campaign's prolific bidder bids here alone, hundreds of times.
                ("lot-2", "box of 500 guitar picks", 1, 1),
                // The split reuser's one bidId with two amounts.
                ("lot-3", "spare tremolo arm", 1, 1),
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
        let rehearsal = Arc::new(rehearsal::Rehearsal::new(
            config.dns_ttl,
            scale,
            names.clone(),
        ));
        let resolver = Arc::new(Resolver::new(
            config.dns_ttl,
            scale,
            timeline.clone(),
            names.clone(),
        ));
        // Each alarm is one period of one verdict (the rule itself runs in the canary:
        // wsdr_core::verdict), missing data is not considered (INSUFFICIENT_DATA), and the
        // health checks say what that means for them (world::route53).
        let period = scale.lab(AwsDuration::from_secs(60));
        let verdict_alarm = |cloudwatch: &str, api_id: &str| {
            Arc::new(Alarm::new(
                MetricKind::Verdict,
                cloudwatch,
                api_id,
                AlarmConfig {
                    period,
                    datapoints_to_alarm: 1,
                    evaluation_periods: 1,
                    missing: MissingData::Missing,
                },
            ))
        };
        let alarms = regions
            .as_ref()
            .map(|_, region| verdict_alarm(&region.name, &region.api_id));
        let watcher_alarm = verdict_alarm(
            &regions[fast::JUDGE].name,
            &regions[RegionId::Primary].api_id,
        );
        let metrics = Arc::new(MetricsStore::new(clock.start_ms(), period));
        let front_door = frontdoor::start(
            resolver.clone(),
            regions.as_ref().map(|_, r| r.addr),
            &owner,
            &env.network,
        )
        .await?;
        let mut world = Self {
            quorum_log: Mutex::new(
                cluster
                    .iter()
                    .map(|c| (0.0, 0.0, PerRegion::from_fn(|r| c.has_quorum(r.index()))))
                    .collect(),
            ),
            config,
            names,
            regions,
            links,
            resolver,
            alarms,
            watcher_alarm,
            legacy_verdict: Arc::default(),
            fast_faults: Arc::default(),
            planned_evacuations: Mutex::default(),
            judge_change: Mutex::default(),
            rehearsal,
            order_log: Arc::default(),
            order_faults: orders::OrderFaults::default(),
            order_stats: Mutex::default(),
            order_slots: Arc::new(tokio::sync::Semaphore::new(PRIMARY_EVACUATOR_CONCURRENCY)),
            cluster,
            metrics,
            timeline,
            front_door,
            identity,
            app_tokens: Mutex::default(),
            canary_secret: canary_secret.clone(),
            owner,
            clock,
            stores,
            lost: Mutex::new(Vec::new()),
            users: OnceLock::new(),
        };
        world.start_canaries(&canary_secret)?;
        if world.config.composition == config::Composition::Wsdr {
            world.start_watcher(&canary_secret)?;
        }
        if world.config.herd_hint {
            world.start_census();
        }
        world.start_alarms();
        if let Some(fast) = world.fast_config() {
            world.start_fast_path(&canary_secret, &fast)?;
        }
        world.start_route53()?;
        world.start_resolver_clients();
        Ok(world)
    }

    // ----- What it is made of (read-only) -----

    pub fn config(&self) -> &LabConfig {
        &self.config
    }

    pub fn scale(&self) -> TimeScale {
        self.config.scale
    }

    /// The Regions' names.
    pub fn names(&self) -> &PerRegion<String> {
        &self.names
    }

    pub fn name(&self, region: RegionId) -> &str {
        &self.names[region]
    }

    pub fn region(&self, region: RegionId) -> &Arc<Region> {
        &self.regions[region]
    }

    /// Each Region, primary first.
    pub fn regions(&self) -> impl Iterator<Item = (RegionId, &Arc<Region>)> {
        self.regions.iter()
    }

    /// The Region named `name`, if the world has one.
    pub fn region_named(&self, name: &str) -> Option<RegionId> {
        self.names
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(id, _)| id)
    }

    /// Replication out of `from`.
    pub fn link(&self, from: RegionId) -> &Link {
        &self.links[from]
    }

    pub fn timeline(&self) -> &Timeline {
        &self.timeline
    }

    /// The world's one clock.
    pub fn clock(&self) -> LabClock {
        self.clock
    }

    /// World milliseconds since the world started (the timeline's time).
    pub fn now_ms(&self) -> f64 {
        self.timeline.elapsed().as_secs_f64() * 1000.0
    }

    /// Now, in AWS time: what a run's trace records.
    pub fn now(&self) -> AwsInstant {
        self.scale().instant(self.now_ms())
    }

    /// The lab time an AWS duration takes here (divided by the time scale): the one
    /// conversion the people and the runs in this world need.
    pub fn lab_time(&self, aws: AwsDuration) -> std::time::Duration {
        self.scale().lab(aws)
    }

    /// Wait `aws` (AWS time).
    pub async fn sleep(&self, aws: AwsDuration) {
        tokio::time::sleep(self.lab_time(aws)).await;
    }

    /// Wait until `condition` holds, for at most `within` (AWS time); whether it held.
    pub async fn wait_for(&self, within: AwsDuration, condition: impl FnMut() -> bool) -> bool {
        crate::world::clock::wait_for(self.lab_time(within), condition).await
    }

    /// Strong mode: the bids the table accepted on `auction`, in the order it took them
    /// (amount, accepting Region); `None` in eventual mode.
    pub fn strong_order(&self, auction: &AuctionId) -> Option<Vec<(Amount, RegionId)>> {
        let cluster = self.cluster.as_ref()?;
        Some(
            cluster
                .accepted_in_order(auction)
                .into_iter()
                .filter_map(|(amount, name)| Some((amount, self.region_named(&name)?)))
                .collect(),
        )
    }

    /// Strong mode: every bid a head write accepted on `auction` (bidder, bidId, accepting
    /// Region, when it committed); empty in eventual mode.
    pub fn strong_accepted_by(
        &self,
        auction: &AuctionId,
    ) -> Vec<(UserId, BidId, RegionId, AwsInstant)> {
        let start = self.timeline.start();
        self.cluster.as_ref().map_or_else(Vec::new, |cluster| {
            cluster
                .accepted_by(auction)
                .into_iter()
                .filter_map(|(bidder, bid_id, name, at)| {
                    let lab_ms = at.saturating_duration_since(start).as_secs_f64() * 1000.0;
                    Some((
                        bidder,
                        bid_id,
                        self.region_named(&name)?,
                        self.scale().instant(lab_ms),
                    ))
                })
                .collect()
        })
    }

    /// Strong mode's MRSC table; `None` in eventual mode.
    pub fn cluster(&self) -> Option<&Arc<Cluster>> {
        self.cluster.as_ref()
    }

    /// The fast path's settings, when it runs.
    pub fn fast_config(&self) -> Option<FastConfig> {
        match (self.config.health_check, &self.config.fast) {
            (_, Some(fast)) => Some(fast.clone()),
            (HealthCheckKind::Endpoint, None) => Some(FastConfig::default()),
            (HealthCheckKind::Alarm, None) => None,
        }
    }

    /// The global name clients use.
    pub fn front_door_url(&self) -> String {
        format!("ws://{}/prod", self.front_door)
    }

    // ----- DNS, as Route 53 and a client's resolver see it -----

    /// What a client resolving the global name is told now (through the shared caching
    /// resolver: a lookup refreshes its cache once per TTL, and records a flip it sees).
    pub fn resolve(&self) -> RegionId {
        self.resolver.answer()
    }

    /// What the shared resolver told its last client, without asking it anything.
    pub fn last_dns_answer(&self) -> RegionId {
        self.resolver.last_answer()
    }

    /// Whether `region`'s failover record's health check reads healthy.
    pub fn healthy(&self, region: RegionId) -> bool {
        self.resolver.healthy(region)
    }

    /// Whether `region` is in DNS (not taken out for a planned move).
    pub fn in_service(&self, region: RegionId) -> bool {
        self.resolver.in_service(region)
    }

    /// With the fast path: the fast verdict on `region` that counts against it (true =
    /// serve, fresh): the judge's on the primary (the outside view, as `/primary` serves it),
    /// the secondary's own on the secondary (`/self` there).
    pub fn fast_verdict(&self, region: RegionId) -> Option<bool> {
        self.fast_config().map(|_| match region {
            RegionId::Primary => self.regions[fast::JUDGE]
                .verdict_serves(RegionId::Primary, wsdr_core::VerdictSource::Judge),
            RegionId::Secondary => self.regions[RegionId::Secondary]
                .verdict_serves(RegionId::Secondary, wsdr_core::VerdictSource::Inside),
        })
    }

    /// With the fast path: `region`'s own canary's verdict on it, as its health function
    /// serves it at `/self` (true = serve, fresh; false also when the Region is down).
    pub fn inside_verdict(&self, region: RegionId) -> Option<bool> {
        self.fast_config().map(|_| self.self_check_passes(region))
    }

    /// Whether `region`'s health function answers `/self` with a fresh serve to a caller
    /// that reaches it (Route 53's string match).
    fn self_check_passes(&self, region: RegionId) -> bool {
        self.regions[region]
            .health_function("/self")
            .is_some_and(|(status, body)| status == 200 && body.contains(wsdr_core::SEARCH_STRING))
    }

    pub fn alarm_state(&self, region: RegionId) -> AlarmState {
        self.alarms[region].state()
    }

    // ----- Tokens -----

    /// A fresh user token (ES256, one hour) from the users' issuer: a sign-in, which fails
    /// while the issuer's Region is down or lost.
    pub fn user_token(&self, sub: &str) -> anyhow::Result<String> {
        let now = self.clock.now_ms() / 1000;
        let claims = serde_json::json!({"sub": sub, "iss": USER_ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + USER_TOKEN_LIFETIME_SECS});
        self.identity.sign_in(&claims)
    }

    /// The token a user's app presents: the one it stores, until it is refused (`refresh`)
    /// or has under five minutes left; then a sign-in. While the issuer's Region is down a
    /// sign-in fails, and the app keeps presenting the stored token while it is valid.
    pub fn app_token(&self, sub: &str, refresh: bool) -> anyhow::Result<String> {
        let now = self.clock.now_ms() / 1000;
        let mut stored = lock(&self.app_tokens);
        let valid_for = |issued: u64| (issued + USER_TOKEN_LIFETIME_SECS).saturating_sub(now);
        if let Some((token, issued)) = stored.get(sub) {
            if !refresh && valid_for(*issued) > 300 {
                return Ok(token.clone());
            }
        }
        match self.user_token(sub) {
            Ok(token) => {
                stored.insert(sub.to_owned(), (token.clone(), now));
                Ok(token)
            }
            Err(error) => match stored.get(sub) {
                Some((token, issued)) if valid_for(*issued) > 0 => Ok(token.clone()),
                _ => Err(error),
            },
        }
    }

    /// The users' issuer.
    pub fn identity(&self) -> &IdentityProvider {
        &self.identity
    }

    /// A token of the canary issuer naming `sub` (a probe's `canary:*`, or, as an attacker
    /// holding a leaked canary secret would try, a user's).
    pub fn probe_token(&self, sub: &str) -> anyhow::Result<String> {
        let now = self.clock.now_ms() / 1000;
        let claims = serde_json::json!({"sub": sub, "iss": "wsdr-canary", "aud": AUDIENCE, "iat": now, "exp": now + 60});
        mint(&self.canary_secret, &claims)
    }

    // ----- Faults -----

    /// Break something (or heal everything): each part of the world applies what the fault
    /// means for it, and the timeline records it.
    pub fn inject(&self, fault: Fault) {
        for region in self.regions.values() {
            region.inject(&fault);
        }
        let gone = self.gone();
        for store in self.stores.values() {
            store.inject(&fault);
        }
        // Between the Regions, an inter-Region partition is a replication partition; the
        // fast path's watcher loses its probe of the primary as well.
        let between = match fault {
            Fault::InterRegionPartition => Fault::Partition,
            other => other,
        };
        let mut lost = Vec::new();
        for link in self.links.values() {
            lost.extend(link.inject(&between, &gone));
        }
        self.resolver.inject(&fault);
        match fault {
            Fault::WatcherSilent(quiet) => self.fast_faults.silence(Some(self.scale().lab(quiet))),
            Fault::InterRegionPartition => self.fast_faults.cut_between(true),
            Fault::HealthFlood { percent } => self.fast_faults.flood(percent),
            Fault::ReconnectHerd { region, clients } => {
                let now = self.clock.now_ms() / 1000;
                // A canary-issuer token, valid for the herd's whole life: what the herd
                // spends is sandboxes and quotas, whoever its clients are.
                let claims = serde_json::json!({"sub": "canary:herd", "iss": "wsdr-canary", "aud": AUDIENCE, "iat": now, "exp": now + 3_600});
                match mint(&self.canary_secret, &claims) {
                    Ok(token) => self.regions[region].reconnect_herd(clients, &token),
                    Err(error) => tracing::error!(%error, "no token for the reconnect herd"),
                }
            }
            Fault::OrdersDuplicated { copies } => self.order_faults.duplicate(copies),
            Fault::OrdersLost => self.order_faults.lose(true),
            Fault::Heal => {
                self.fast_faults.silence(None);
                self.fast_faults.cut_between(false);
                self.fast_faults.flood(0);
                self.order_faults.heal();
            }
            _ => {}
        }
        if let Some(cluster) = &self.cluster {
            let before = self.now_ms();
            cluster.inject(&between, &gone);
            let quorum = PerRegion::from_fn(|r| cluster.has_quorum(r.index()));
            lock(&self.quorum_log).push((before, self.now_ms(), quorum));
        }
        let mut detail = fault.describe(&self.names);
        if let Fault::NeverReturns(_) = fault {
            detail.push_str(&format!(
                " ({} unreplicated writes lost with it)",
                lost.len()
            ));
        }
        lock(&self.lost).extend(lost);
        let kind = match fault {
            Fault::Heal => Kind::Heal,
            _ => Kind::Fault,
        };
        self.timeline.record(kind, detail);
    }

    /// Blind (or restore) one vantage point of `region`'s fast verdict: the fast path's own
    /// fault, for tests of its "every vantage point" rule.
    pub fn set_blind(&self, region: RegionId, vantage: usize, blind: bool) {
        self.fast_faults.set_blind(region, vantage, blind);
    }

    /// Strong mode: whether `region` certainly had no quorum for the whole of [`from`,
    /// `to`]: from after a change that left it without one to before the next change.
    /// Always false in eventual mode.
    pub fn lacked_quorum_throughout(
        &self,
        region: RegionId,
        from: AwsInstant,
        to: AwsInstant,
    ) -> bool {
        let (from_ms, to_ms) = (self.scale().lab_ms_of(from), self.scale().lab_ms_of(to));
        let log = lock(&self.quorum_log);
        log.iter().enumerate().any(|(i, (_, after, quorum))| {
            let until = log.get(i + 1).map_or(f64::INFINITY, |next| next.0);
            !quorum[region] && *after <= from_ms && to_ms < until
        })
    }

    /// Regions lost for good (`never-returns`).
    pub fn gone(&self) -> Vec<RegionId> {
        self.regions
            .iter()
            .filter(|(_, region)| region.is_gone())
            .map(|(id, _)| id)
            .collect()
    }

    /// Writes that Regions lost for good took with them (including any their handlers
    /// committed after the fault, which could never be shipped).
    pub fn lost_writes(&self) -> Vec<Change> {
        let mut lost = lock(&self.lost);
        for region in self.gone() {
            lost.extend(self.links[region].discard());
        }
        lost.clone()
    }

    /// Data written but not yet replicated, both ways (none once a Region is lost for good:
    /// nothing replicates any more, either way).
    pub fn in_flight(&self) -> InFlight {
        let mut total = InFlight {
            items: 0,
            oldest_ms: 0.0,
        };
        if !self.gone().is_empty() {
            return total;
        }
        for link in self.links.values() {
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
            self.regions[RegionId::Primary].store.dump().await,
            self.regions[RegionId::Secondary].store.dump().await,
        ) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
    }

    // ----- Planned and unplanned moves -----

    /// The unplanned path: an evacuator outside the primary tells the connections still on it
    /// to move, through the primary's own `@connections` endpoint, so that clients whose
    /// sessions stay up on a degraded primary (slow, partly failing) leave too. With the fast
    /// verdict (wsdr's defaults) it runs on fail-over orders as AWS carries them
    /// ([`orders`]): the judge's change, delivered at least once (or lost), and the minute
    /// sweep; each run is `wsdr_core::run_order`, the evacuator's own code.
    pub fn start_failover_evacuator(self: &Arc<Self>) {
        if self.fast_config().is_none() {
            return self.start_legacy_failover_evacuator();
        }
        let world = Arc::downgrade(self);
        let scale = self.config.scale;
        // The stream carries the judge's change to the handler within about a second.
        let every = scale.lab(AwsDuration::from_secs(1));
        self.owner.spawn(async move {
            let mut last_serve: Option<bool> = None;
            let mut tick: u64 = 0;
            loop {
                tokio::time::sleep(every).await;
                tick += 1;
                let Some(world) = world.upgrade() else { return };
                // The judge, its table's stream, its queue and the evacuator all live in the
                // judge's Region, and fail with it.
                let judge = &world.regions[fast::JUDGE];
                if judge.is_down() {
                    continue;
                }
                if let Some((serve, _age)) =
                    judge.verdict_copy(RegionId::Primary, wsdr_core::VerdictSource::Judge)
                {
                    if last_serve != Some(serve) {
                        last_serve = Some(serve);
                        let at = judge.clock_now_ms();
                        *lock(&world.judge_change) = Some((serve, at));
                        if !serve {
                            world.emit_order(order_id(at));
                        }
                    }
                }
                // The minute sweep: the judge's last change, run as the order it is.
                let sweeps = world.config.orders == config::OrderHandling::Wsdr;
                if sweeps && tick.is_multiple_of(60) {
                    if let Some((false, at)) = *lock(&world.judge_change) {
                        lock(&world.order_stats).sweeps += 1;
                        world.deliver_order(order_id(at), 0, false);
                    }
                }
            }
        });
    }

    /// The rehearsal pair's state (`None`: this configuration deploys none).
    pub fn rehearsal(&self) -> Option<rehearsal::RehearsalState> {
        self.rehearsal.state()
    }

    /// `wsdr rehearse` writes a rehearsal verdict of `view` in its Region (the primary's own
    /// view in the primary's replica, the judge's in the secondary's), as an operator's
    /// `PutItem` would; an error when that Region is down.
    pub fn write_rehearsal_verdict(
        &self,
        view: rehearsal::View,
        serve: bool,
    ) -> anyhow::Result<()> {
        let (region, source) = view.placement();
        anyhow::ensure!(
            !self.regions[region].is_down(),
            "{} is down: its table cannot be written",
            self.names[region]
        );
        let version = self.rehearsal.next_version();
        self.regions[region].record_verdict(RegionId::Primary, source, version, serve);
        Ok(())
    }

    /// What the fail-over orders did so far.
    pub fn order_stats(&self) -> orders::OrderStats {
        lock(&self.order_stats).clone()
    }

    /// The judge's change to fail over enters the stream: lost before the queue
    /// (`orders-lost`), or delivered (as many times as `orders-duplicated` says, a second
    /// apart).
    fn emit_order(self: &Arc<Self>, id: String) {
        lock(&self.order_stats).emitted += 1;
        if self.order_faults.lost() {
            lock(&self.order_stats).lost += 1;
            self.timeline.record(
                Kind::Note,
                format!("fail-over order {id} lost before the queue (the stream batch went to its on-failure destination)"),
            );
            return;
        }
        let copies = self.order_faults.copies();
        for copy in 0..copies {
            let world = Arc::downgrade(self);
            let id = id.clone();
            let after = self
                .config
                .scale
                .lab(AwsDuration::from_secs(u64::from(copy)));
            self.owner.spawn(async move {
                tokio::time::sleep(after).await;
                if let Some(world) = world.upgrade() {
                    world.deliver_order(id, 1, true);
                }
            });
        }
    }

    /// One invocation of the primary's evacuator for order `id` (`receive`: the queue's
    /// receive count, 0 for the sweep), within its reserved concurrency. A run that fails is
    /// received again after the queue's visibility timeout, once; then it is dead-lettered.
    fn deliver_order(self: &Arc<Self>, id: String, receive: u8, from_queue: bool) {
        let world = Arc::downgrade(self);
        self.owner.spawn(async move {
            let Some(slots) = world.upgrade().map(|w| w.order_slots.clone()) else {
                return;
            };
            let Ok(_slot) = slots.acquire_owned().await else {
                return;
            };
            let Some(world) = world.upgrade() else { return };
            if world.regions[fast::JUDGE].is_down() {
                return;
            }
            if from_queue {
                lock(&world.order_stats).deliveries += 1;
            }
            let outcome = world.run_order(&id).await;
            let mut stats = lock(&world.order_stats);
            match outcome {
                Ok(wsdr_core::OrderOutcome::Moved(_)) => {
                    *stats.moves_by_order.entry(id).or_default() += 1;
                }
                Ok(wsdr_core::OrderOutcome::Declined(why)) => {
                    let name = serde_json::to_value(why)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default();
                    *stats.declined.entry(name).or_default() += 1;
                }
                Err(error) => {
                    stats.failed += 1;
                    drop(stats);
                    world
                        .timeline
                        .record(Kind::Note, format!("fail-over order {id} failed: {error}"));
                    if from_queue && receive < ORDER_MAX_RECEIVES {
                        let again = Arc::downgrade(&world);
                        let visibility = world.config.scale.lab(ORDER_VISIBILITY);
                        world.owner.spawn(async move {
                            tokio::time::sleep(visibility).await;
                            if let Some(world) = again.upgrade() {
                                world.deliver_order(id, receive + 1, true);
                            }
                        });
                    } else if from_queue {
                        lock(&world.order_stats).dead_lettered += 1;
                    }
                }
            }
        });
    }

    /// The evacuator's journey for one order, on this world's ports.
    async fn run_order(
        self: &Arc<Self>,
        id: &str,
    ) -> wsdr_core::Result<wsdr_core::OrderOutcome<wsdr_core::EvacuationReport>> {
        let scale = self.config.scale;
        let judge = &self.regions[fast::JUDGE];
        let ports_world = OrderPortsOfWorld {
            world: self.clone(),
        };
        let pause = crate::world::scale::ScaledPause(scale);
        let wsdr = self.config.orders == config::OrderHandling::Wsdr;
        let times = wsdr_core::OrderTimes {
            dns_poll: std::time::Duration::from_secs(5),
            // Before: a fixed wait of 45 s (its FAILOVER_WAIT_SECONDS), then the move.
            dns_deadline: if wsdr {
                self.config.order_dns_deadline.get()
            } else {
                std::time::Duration::from_secs(45)
            },
            stale_claim_ms: scale.lab(AwsDuration::from_secs(300)).as_millis() as u64,
        };
        let ports = wsdr_core::OrderPorts {
            log: wsdr.then_some(self.order_log.as_ref() as &dyn wsdr_core::OrderLog),
            checks: wsdr.then_some(&ports_world as &dyn wsdr_core::OrderChecks),
            mover: &ports_world,
            clock: judge.clock.as_ref(),
            pause: &pause,
        };
        wsdr_core::run_order(id, &ports, &times).await
    }

    /// The reference design's path (alarm checks, no fast verdict and so no orders): once the
    /// alarm has moved the name to the secondary (the primary's health check unhealthy, the
    /// resolver answering the secondary), an evacuator outside the primary tells the
    /// connections still on it to move; once per failover.
    fn start_legacy_failover_evacuator(self: &Arc<Self>) {
        let world = Arc::downgrade(self);
        // In AWS the verdict's change record reaches the evacuator through the table's stream
        // within about a second; the move after the flip is checked every 5 s.
        let every = self.config.scale.lab(AwsDuration::from_secs(1));
        self.owner.spawn(async move {
            let (mut direct, mut evacuated) = (false, false);
            let mut tick: u64 = 0;
            loop {
                tokio::time::sleep(every).await;
                tick += 1;
                let Some(world) = world.upgrade() else { return };
                // First, at the judge's verdict itself: a move that names the secondary's own
                // endpoint. Clients that know the Regions follow it at once, whatever DNS
                // answers; clients that know only the global name ignore a URL they were not
                // given, and wait for the move after the flip. Re-checked before it is sent
                // (the evacuator's order is only a trigger): the judge still says fail over,
                // the secondary serves, and the primary's own view, as the evacuator reaches
                // it from the judge, does not say serve (while it does, Route 53 keeps the
                // PRIMARY record healthy: the primary is not failed over).
                let judge = &world.regions[fast::JUDGE];
                let verdict_says_move = world.fast_config().is_some()
                    && judge.verdict_answer(RegionId::Primary, wsdr_core::VerdictSource::Judge)
                        == wsdr_core::VerdictAnswer::FailOver
                    && world.regions[RegionId::Secondary]
                        .verdict_serves(RegionId::Secondary, wsdr_core::VerdictSource::Inside)
                    && !(world.reaches_across(fast::JUDGE, RegionId::Primary)
                        && world.self_check_passes(RegionId::Primary));
                if verdict_says_move && !direct {
                    direct = true;
                    let endpoint = world.regions[RegionId::Secondary].url();
                    if let Err(error) = world
                        .move_sessions_from(
                            fast::JUDGE,
                            RegionId::Primary,
                            Some(endpoint),
                            "failover",
                        )
                        .await
                    {
                        world
                            .timeline
                            .record(Kind::Note, format!("direct move failed: {error:#}"));
                    }
                }
                if !tick.is_multiple_of(5) {
                    continue;
                }
                let primary_healthy = world.healthy(RegionId::Primary);
                let failed_over = !primary_healthy && world.resolve() == RegionId::Secondary;
                if failed_over && !evacuated {
                    evacuated = true;
                    if let Err(error) = world
                        .move_sessions_from(fast::JUDGE, RegionId::Primary, None, "failover")
                        .await
                    {
                        world
                            .timeline
                            .record(Kind::Note, format!("evacuation failed: {error:#}"));
                    }
                } else if primary_healthy {
                    evacuated = false;
                    direct = direct && verdict_says_move;
                }
            }
        });
    }

    /// Take a Region out of DNS (or put it back): a planned move's first step.
    pub fn set_in_service(&self, region: RegionId, in_service: bool) {
        self.resolver.set_in_service(region, in_service);
        self.timeline.record(
            Kind::Note,
            format!(
                "{} {} DNS (planned)",
                self.names[region],
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
        from: RegionId,
        planned: bool,
        reason: &str,
    ) -> anyhow::Result<wsdr_core::EvacuationReport> {
        let to = from.other();
        let scale = self.config.scale;
        if planned {
            self.set_in_service(from, false);
            let ttl = scale.lab(self.config.dns_ttl);
            let flipped = crate::world::clock::wait_for(
                ttl * 3 + scale.lab(AwsDuration::from_secs(30)),
                || self.resolve() == to,
            )
            .await;
            if !flipped {
                // Nobody moves to a destination DNS will not send them to: put the Region
                // back as it was.
                self.set_in_service(from, true);
                anyhow::bail!(
                    "the name never answered {} after {} left DNS (is {} healthy?); {} is back in DNS and nobody was moved",
                    self.names[to],
                    self.names[from],
                    self.names[to],
                    self.names[from]
                );
            }
        }
        let report = self.move_sessions(from, None, reason).await?;
        if planned {
            lock(&self.planned_evacuations).push(report.clone());
        }
        Ok(report)
    }

    /// What every planned evacuation of this world reported, in order.
    pub fn planned_evacuations(&self) -> Vec<wsdr_core::EvacuationReport> {
        lock(&self.planned_evacuations).clone()
    }

    /// Whether something in `from` reaches `to`'s public endpoints now (across the path
    /// between the Regions when they differ: `inter-region-partition` cuts it).
    pub fn reaches_across(&self, from: RegionId, to: RegionId) -> bool {
        from == to || !self.fast_faults.is_cut_between()
    }

    /// [`World::move_sessions`] by an evacuator running in `mover`: its posts to `from`'s
    /// `@connections` endpoint cross the path between the Regions when the two differ, and
    /// fail while it is cut.
    pub async fn move_sessions_from(
        &self,
        mover: RegionId,
        from: RegionId,
        endpoint: Option<String>,
        reason: &str,
    ) -> anyhow::Result<wsdr_core::EvacuationReport> {
        anyhow::ensure!(
            self.reaches_across(mover, from),
            "the evacuator in {} cannot reach {}'s @connections endpoint: the path between the Regions is cut",
            self.names[mover],
            self.names[from]
        );
        self.move_sessions(from, endpoint, reason).await
    }

    /// Tell every connection of `from` to move to the other Region, naming `endpoint` (the
    /// destination's own URL: only clients that were given it follow) or none (each client
    /// goes to the destination's endpoint if it knows it, else to the global name).
    pub async fn move_sessions(
        &self,
        from: RegionId,
        endpoint: Option<String>,
        reason: &str,
    ) -> anyhow::Result<wsdr_core::EvacuationReport> {
        let to = from.other();
        let scale = self.config.scale;
        let region = &self.regions[from];
        let notifier = region.connections_notifier();
        let connections: Arc<dyn wsdr_core::Connections> = region.registry.clone();
        // World seconds: the destination admits connect_rate per AWS second.
        let plan = wsdr_core::Evacuation {
            reason: reason.to_owned(),
            destination_quota_per_s: scale.per_lab_second(self.config.connect_rate),
            min_window: scale.lab(AwsDuration::from_secs(2)),
            posts_per_s: scale.per_lab_second(2_000.0),
            deadline: scale.lab(AwsDuration::from_secs(60)),
            retry_every: scale.lab(AwsDuration::from_secs(1)),
            // Retries of throttled posts draw their jitter from the world's entropy (seeded in a
            // simulation, so an evacuation under throttling replays) and wait AWS durations
            // scaled to the lab's clock, as the handler's own fan-out does.
            fanout: wsdr_core::FanoutConfig {
                jitter: self.config.environment.entropy.clone(),
                pause: Arc::new(crate::world::scale::ScaledPause(scale)),
                ..wsdr_core::FanoutConfig::default()
            },
            endpoint: endpoint.clone(),
            ..wsdr_core::Evacuation::new(region.name.clone(), self.names[to].clone())
        };
        self.timeline.record(
            Kind::Note,
            match &endpoint {
                Some(url) => format!(
                    "moving {}'s sessions to {} ({url}: clients that know it)",
                    region.name, self.names[to]
                ),
                None => format!("evacuating {} to {}", region.name, self.names[to]),
            },
        );
        let report =
            wsdr_core::evacuate(&connections, &notifier, &plan, region.clock.now_ms()).await?;
        self.timeline.record(
            Kind::Note,
            format!(
                "{}: {} connections told to move within {:.0} s AWS, in {} slots ({} gone, {} never told{})",
                region.name,
                report.connections,
                scale.aws_secs(report.window_ms as f64),
                report.slots,
                report.posts.gone,
                report.untold,
                if report.complete { "" } else { ": INCOMPLETE" }
            ),
        );
        Ok(report)
    }

    // ----- Users -----

    /// Attach a run's users so the control room and `/metrics` can count them (once).
    pub fn attach_users(&self, users: &Arc<dyn UsersView>) {
        let _ = self.users.set(Arc::downgrade(users));
    }

    fn users(&self) -> Option<Arc<dyn UsersView>> {
        self.users.get().and_then(Weak::upgrade)
    }
}

/// An HS256 token for `claims` (the lab's own tokens, and `wsdr smoke`'s for a deployment
/// whose users' tokens are HS256: docs/AUTH.md).
pub fn mint(secret: &str, claims: &serde_json::Value) -> anyhow::Result<String> {
    jsonwebtoken::EncodingKey::from_secret(secret.as_bytes())
        .and_then(|key| jsonwebtoken::encode(&jsonwebtoken::Header::default(), claims, &key))
        .map_err(|e| anyhow::anyhow!("cannot sign a lab token: {e}"))
}

use orders::{ORDER_MAX_RECEIVES, ORDER_VISIBILITY, PRIMARY_EVACUATOR_CONCURRENCY};

/// An order's id: the judge's change on the primary, as `FailoverOrder::id` spells it.
fn order_id(at_ms: u64) -> String {
    format!("primary@{at_ms}")
}

/// The world as an order's ports: its checks read the judge's replica, the primary's health
/// function (across the path between the Regions) and the resolver; its moves go through the
/// primary's `@connections` endpoint from the judge's Region.
struct OrderPortsOfWorld {
    world: Arc<World>,
}

#[async_trait::async_trait]
impl wsdr_core::OrderChecks for OrderPortsOfWorld {
    async fn judge_answer(&self) -> wsdr_core::VerdictAnswer {
        self.world.regions[fast::JUDGE]
            .verdict_answer(RegionId::Primary, wsdr_core::VerdictSource::Judge)
    }

    async fn primary_self_serves(&self) -> Option<bool> {
        if !self.world.reaches_across(fast::JUDGE, RegionId::Primary) {
            return None;
        }
        self.world.regions[RegionId::Primary]
            .health_function("/self")
            .map(|(status, body)| status == 200 && body.contains(wsdr_core::SEARCH_STRING))
    }

    async fn dns_answers_destination(&self) -> Option<bool> {
        Some(self.world.resolve() == fast::JUDGE)
    }
}

#[async_trait::async_trait]
impl wsdr_core::SessionMover for OrderPortsOfWorld {
    type Report = wsdr_core::EvacuationReport;

    async fn move_direct(&self) -> Option<wsdr_core::Result<wsdr_core::EvacuationReport>> {
        let endpoint = self.world.regions[fast::JUDGE].url();
        Some(
            self.world
                .move_sessions_from(fast::JUDGE, RegionId::Primary, Some(endpoint), "failover")
                .await
                .map_err(|e| wsdr_core::Error::Transient(format!("{e:#}"))),
        )
    }

    async fn move_all(&self) -> wsdr_core::Result<wsdr_core::EvacuationReport> {
        self.world
            .move_sessions_from(fast::JUDGE, RegionId::Primary, None, "failover")
            .await
            .map_err(|e| wsdr_core::Error::Transient(format!("{e:#}")))
    }
}
