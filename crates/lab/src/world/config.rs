//! The world's settings, in AWS terms: the time scale turns them into lab time.

use crate::world::scale::{AwsDuration, TimeScale};

/// The lab's settings, in AWS terms; the time scale turns them into lab time.
#[derive(Debug, Clone)]
pub struct LabConfig {
    pub scale: TimeScale,
    pub regions: [String; 2],
    /// Global Tables replication lag (AWS: usually under a second).
    pub replication_lag: AwsDuration,
    /// Failover record TTL.
    pub dns_ttl: AwsDuration,
    /// How often Route 53 reads the alarm.
    pub health_check_interval: AwsDuration,
    /// M: unhealthy minutes that fire the alarm.
    pub failover_datapoints: usize,
    /// Healthy minutes before failback (N = this + 1).
    pub failback_datapoints: usize,
    pub probes_per_run: u32,
    /// API Gateway's new-connection quota per second (AWS time).
    pub connect_rate: f64,
    pub idle_timeout: AwsDuration,
    pub max_duration: AwsDuration,
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
    pub strong_request_cost: AwsDuration,
    /// What the world runs on: real loopback TCP, the thread's RNG and the system clock
    /// (default), or a simulation's in-memory network, seeded draws and fixed epoch.
    pub environment: crate::world::env::Environment,
    /// Each table request of a handler takes a time drawn uniformly from this range (AWS
    /// time), so that concurrent invocations interleave at their requests. `None` (default):
    /// the real-time lab's own CPU time interleaves them; a simulation has none and sets it.
    pub store_service_time: Option<(AwsDuration, AwsDuration)>,
    /// The users' identity provider (its Region) and how each Region's authorizer keeps its
    /// keys.
    pub identity: crate::world::identity::IdentityConfig,
    /// How old a verdict may be and still count (AWS ms): `wsdr_core::STALE_AFTER_MS`.
    pub stale_after_ms: u64,
    /// How long a fail-over order gives DNS to answer the secondary before its move through
    /// the global name (template.yaml's `FAILOVER_WAIT_SECONDS` with endpoint checks).
    pub order_dns_deadline: AwsDuration,
    /// How the primary's evacuator handles fail-over orders.
    pub orders: OrderHandling,
    /// Which health checks the failover records carry: wsdr's composition, or the reference
    /// design's (one alarm check per record).
    pub composition: Composition,
    /// What Route 53's endpoint checks reach: the health functions directly (wsdr's), or the
    /// CloudFront front wsdr deployed before (`world::front`, for comparison).
    pub health_front: HealthFront,
    /// What the health functions' URLs grant (template.yaml: both actions).
    pub function_url: crate::world::route53::UrlPermissions,
    /// How each Region's pusher conflates, shards and budgets its pushes (AWS units;
    /// `template.yaml`'s `Push*` parameters).
    pub push: wsdr_core::PushSettings,
    /// The push jobs' queue and whether its workers hold a reservation (template.yaml's
    /// `PushJobs` and `PushWorkerFunction`; `before` for comparison).
    pub push_jobs: crate::world::push_jobs::PushJobQueue,
}

impl Default for LabConfig {
    fn default() -> Self {
        Self {
            scale: TimeScale::new(60.0),
            regions: ["us-east-1".into(), "us-west-2".into()],
            replication_lag: AwsDuration::from_millis(800),
            dns_ttl: AwsDuration::from_secs(60),
            health_check_interval: AwsDuration::from_secs(30),
            failover_datapoints: 2,
            failback_datapoints: 5,
            probes_per_run: 3,
            connect_rate: 500.0,
            idle_timeout: AwsDuration::from_secs(600),
            max_duration: AwsDuration::from_secs(7200),
            echo: false,
            store: crate::world::store::StoreKind::Memory,
            canary_secret: None,
            timeline_cap: None,
            herd_hint: true,
            health_check: crate::world::fast::HealthCheckKind::Alarm,
            fast: None,
            consistency: wsdr_core::Consistency::Eventual,
            third_member: ("us-east-2".into(), crate::world::mrsc::MemberKind::Witness),
            strong_request_cost: AwsDuration::from_millis(30),
            environment: crate::world::env::Environment::real(),
            store_service_time: None,
            // Every campaign and test of the guarantees runs with the snapshot; only the
            // reference design's own configuration goes without.
            identity: crate::world::identity::IdentityConfig::wsdr_defaults(),
            stale_after_ms: wsdr_core::STALE_AFTER_MS,
            order_dns_deadline: AwsDuration::from_secs(120),
            orders: OrderHandling::Wsdr,
            composition: Composition::Wsdr,
            health_front: HealthFront::Direct,
            function_url: crate::world::route53::UrlPermissions::BOTH,
            push: wsdr_core::PushSettings::default(),
            push_jobs: crate::world::push_jobs::PushJobQueue::Wsdr,
        }
    }
}

impl LabConfig {
    /// The reference design's settings, whose timers `Default` keeps (the baseline every
    /// campaign and timing test was written against): the verdict alarm's one-minute
    /// periods behind the failover records, a 60 s TTL, no fast path; and its authorizers
    /// with no snapshot of the issuer's keys (`Default` has one).
    pub fn reference() -> Self {
        Self {
            identity: crate::world::identity::IdentityConfig::reference(),
            composition: Composition::Reference,
            ..Self::default()
        }
    }

    /// wsdr's defaults, as `template.yaml` deploys them: the fast verdict (probe rounds
    /// every 5 s) decided and served in the secondary, Route 53 endpoint checks every 10 s
    /// on both records, a 20 s TTL (docs/DEPLOY.md, "The defaults").
    pub fn wsdr_defaults() -> Self {
        Self {
            dns_ttl: AwsDuration::from_secs(20),
            health_check: crate::world::fast::HealthCheckKind::Endpoint,
            fast: Some(crate::world::fast::FastConfig::default()),
            ..Self::default()
        }
    }

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
pub const SIMULATED_STORE_SERVICE_TIME: (AwsDuration, AwsDuration) =
    (AwsDuration::from_millis(2), AwsDuration::from_millis(9));

/// Which health checks the failover records carry (template.yaml; docs/DEPLOY.md, "Who
/// decides").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Composition {
    /// wsdr's: the PRIMARY record's check is healthy while either view of the primary says
    /// serve (the judge's outside verdict, or the primary's own inside verdict as Route 53's
    /// checkers reach it), a calculated check; the SECONDARY record's is a TCP check of the
    /// secondary's API endpoint (no judge in it).
    #[default]
    Wsdr,
    /// The reference design's: each record's check reads its Region's own verdict alarm, the
    /// last known status while the alarm has no data.
    Reference,
}

/// What Route 53's endpoint checks reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum HealthFront {
    /// Each Region's health function URL, directly: nothing in between.
    #[default]
    Direct,
    /// The CloudFront distribution wsdr deployed before (up to commit 791cbca) in front of
    /// the secondary's health function, with that design's answers (`world::front`).
    Cloudfront,
}

impl std::fmt::Display for HealthFront {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HealthFront::Direct => "direct",
            HealthFront::Cloudfront => "cloudfront",
        })
    }
}

/// How the primary's evacuator handles fail-over orders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum OrderHandling {
    /// wsdr's: each order claimed once in the order log, re-checked before each phase, DNS
    /// asked every 5 s up to the deadline, and the minute sweep of the judge's last change.
    #[default]
    Wsdr,
    /// The evacuator before the orders were made safe: every delivery ran, unchecked, after a
    /// fixed 45 s wait, and nothing but a delivery ran an order.
    Before,
}

impl std::fmt::Display for OrderHandling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            OrderHandling::Wsdr => "wsdr",
            OrderHandling::Before => "before",
        })
    }
}

/// How the failover records are decided: which checks they carry, what the endpoint checks
/// reach, and what the health functions' URLs grant (a drill report's `decision_path`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct DecisionPath {
    pub composition: Composition,
    pub health_front: HealthFront,
    pub function_url: crate::world::route53::UrlPermissions,
}

impl DecisionPath {
    /// One line for a report's table.
    pub fn describe(&self) -> String {
        format!(
            "{} composition, {} front, function URL {}",
            match self.composition {
                Composition::Wsdr => "wsdr's",
                Composition::Reference => "the reference",
            },
            self.health_front,
            if self.function_url.admits_anyone() {
                "open to its callers"
            } else {
                "refusing every caller (403)"
            }
        )
    }
}

impl LabConfig {
    /// The decision path this configuration runs.
    pub fn decision_path(&self) -> DecisionPath {
        DecisionPath {
            composition: self.composition,
            health_front: self.health_front,
            function_url: self.function_url,
        }
    }
}
