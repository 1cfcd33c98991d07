//! `wsdr chaos`: randomized failover drills with a history checker. Each run draws a fault
//! schedule from its seed, runs it against a fresh lab while simulated users bid and
//! reconnect (half of them with client-assisted failover), heals, and checks the history
//! (crate::sim::history). A violation prints the run's seed, its schedule and the operations on the
//! bids involved.

use crate::runs::chaos_apps::{AuctionRun, CampaignApp, ChatRun, RunContext};
use crate::runs::plan::{Action, Plan};
use crate::sim::history::{Excused, Violation};
use crate::sim::trace::{FinalState, Op, Outcome, RunTrace};
use crate::world::clock::wait_for;
use crate::world::owner::Holdings;
use crate::world::scale::{serde_as, AwsDuration, TimeScale};
use crate::world::{Fault, LabConfig, RegionId, World};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use wsdr_protocol::AuctionId;

/// One step of a run's fault schedule (durations in AWS seconds). Written with the faults'
/// own spelling (kebab-case, as `FaultKind` and the CLI: `ack-lost`); the snake_case of older
/// schedules (`ack_lost`) is still read, so they replay.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
#[serde(tag = "fault", rename_all = "kebab-case")]
pub enum Step {
    /// The primary down (sockets dropped, handshakes refused, its replication stalled).
    Down {
        #[serde(with = "serde_as::secs")]
        secs: AwsDuration,
    },
    /// The primary's handler throttled (reserved concurrency 0).
    Throttle {
        #[serde(with = "serde_as::secs")]
        secs: AwsDuration,
    },
    /// Replication cut both ways.
    Partition {
        #[serde(with = "serde_as::secs")]
        secs: AwsDuration,
    },
    /// Replication lag raised to `lag_ms`.
    #[serde(alias = "lag_spike")]
    LagSpike {
        #[serde(with = "serde_as::millis")]
        lag_ms: AwsDuration,
        #[serde(with = "serde_as::secs")]
        secs: AwsDuration,
    },
    /// The primary throttled and healed `cycles` times (`secs` each way).
    Flapping {
        cycles: u32,
        #[serde(with = "serde_as::secs")]
        secs: AwsDuration,
    },
    /// Throttled long enough to fail over, healed while users keep bidding, then long
    /// enough to fail back.
    #[serde(alias = "failback_under_load")]
    FailbackUnderLoad {
        #[serde(with = "serde_as::secs")]
        secs: AwsDuration,
    },
    /// Replication lags `lag_ms`, then the primary is lost with data in flight.
    #[serde(alias = "lost_while_lagging")]
    LostWhileLagging {
        #[serde(with = "serde_as::millis")]
        lag_ms: AwsDuration,
        #[serde(with = "serde_as::secs")]
        secs: AwsDuration,
    },
    /// Replication lags `lag_ms`, then the primary is lost for good: what it had not
    /// replicated is lost (the RPO), and the run ends on the secondary alone.
    #[serde(alias = "never_returns")]
    NeverReturns {
        #[serde(with = "serde_as::millis")]
        lag_ms: AwsDuration,
        #[serde(with = "serde_as::secs")]
        secs: AwsDuration,
    },
    /// `percent`% of bids in `region` lose their connection right after the commit.
    #[serde(alias = "ack_lost")]
    AckLost {
        region: RegionId,
        percent: u8,
        #[serde(with = "serde_as::secs")]
        secs: AwsDuration,
    },
    /// `percent`% of `region`'s table requests throttled.
    #[serde(alias = "store_throttle")]
    StoreThrottle {
        region: RegionId,
        percent: u8,
        #[serde(with = "serde_as::secs")]
        secs: AwsDuration,
    },
    /// `region`'s table unreachable from its handler.
    #[serde(alias = "store_outage")]
    StoreOutage {
        region: RegionId,
        #[serde(with = "serde_as::secs")]
        secs: AwsDuration,
    },
    /// `percent`% of `region`'s `@connections` posts throttled.
    #[serde(alias = "connections_throttle")]
    ConnectionsThrottle {
        region: RegionId,
        percent: u8,
        #[serde(with = "serde_as::secs")]
        secs: AwsDuration,
    },
    /// `$disconnect` never delivered in either Region, while the primary goes down.
    #[serde(alias = "disconnect_dropped")]
    DisconnectDropped {
        #[serde(with = "serde_as::secs")]
        secs: AwsDuration,
    },
    /// `region`'s clock `ms` off (either sign).
    Skew {
        region: RegionId,
        ms: i64,
        #[serde(with = "serde_as::secs")]
        secs: AwsDuration,
    },
    /// Replication out of `from` cut, the other direction flowing.
    #[serde(alias = "one_way")]
    OneWay {
        from: RegionId,
        #[serde(with = "serde_as::secs")]
        secs: AwsDuration,
    },
    /// A resolver that ignores the TTL (keeps answers `keep_secs`) while the primary is down.
    #[serde(alias = "sticky_dns")]
    StickyDns {
        #[serde(with = "serde_as::whole_secs")]
        keep_secs: AwsDuration,
        #[serde(with = "serde_as::secs")]
        secs: AwsDuration,
    },
    /// Every integration in `region` `ms` slower.
    Slow {
        region: RegionId,
        #[serde(with = "serde_as::millis")]
        ms: AwsDuration,
        #[serde(with = "serde_as::secs")]
        secs: AwsDuration,
    },
    /// A planned evacuation of `from` (out of DNS, every connection told to move), then
    /// back in service after `secs`.
    Evacuate {
        from: RegionId,
        #[serde(with = "serde_as::secs")]
        secs: AwsDuration,
    },
    /// `region`'s table replica cut off from every other member (strong mode: no quorum
    /// there; eventual mode: replication cut both ways), its API still serving.
    Isolate {
        region: RegionId,
        #[serde(with = "serde_as::secs")]
        secs: AwsDuration,
    },
    /// The primary down while the secondary admits `percent`% of its new-connection quota:
    /// the users stand for a herd 100/percent times larger, and most handshakes get 429.
    Herd {
        percent: u8,
        #[serde(with = "serde_as::secs")]
        secs: AwsDuration,
    },
    /// The primary down, and a minute later the judge's watcher silent for `quiet`.
    WatcherSilent {
        #[serde(with = "serde_as::secs")]
        quiet: AwsDuration,
        #[serde(with = "serde_as::secs")]
        secs: AwsDuration,
    },
    /// The network between the Regions cut (replication and the watcher's probe of the
    /// primary), both Regions serving their users.
    InterRegionPartition {
        #[serde(with = "serde_as::secs")]
        secs: AwsDuration,
    },
    /// The primary down, and a minute later the health endpoint flooded: `percent`% of the
    /// requests reaching the health function refused.
    HealthFlood {
        percent: u8,
        #[serde(with = "serde_as::secs")]
        secs: AwsDuration,
    },
    /// The primary down while `clients` other clients reconnect to the secondary at once:
    /// a storm of authorizer cold starts, each reading its keys from Secrets Manager.
    SecretsStorm {
        clients: u32,
        #[serde(with = "serde_as::secs")]
        secs: AwsDuration,
    },
    /// The primary down; 90 s later, once the name has moved, the secondary (the judge)
    /// lost for good as the primary heals: the name must come back to the primary.
    JudgeLost {
        #[serde(with = "serde_as::secs")]
        secs: AwsDuration,
    },
    /// The primary slow (sessions stay up: only the evacuator moves them) while every
    /// fail-over order is delivered `copies` times.
    OrdersDuplicated {
        copies: u8,
        #[serde(with = "serde_as::secs")]
        secs: AwsDuration,
    },
    /// The primary slow while every fail-over order is lost before the queue: only the
    /// evacuator's minute sweep runs it.
    OrdersLost {
        #[serde(with = "serde_as::secs")]
        secs: AwsDuration,
    },
    /// Nothing.
    Calm {
        #[serde(with = "serde_as::secs")]
        secs: AwsDuration,
    },
}

impl Step {
    /// The Region this step loses for good, if any.
    pub fn loses_for_good(&self) -> Option<RegionId> {
        match self {
            Step::NeverReturns { .. } => Some(RegionId::Primary),
            Step::JudgeLost { .. } => Some(RegionId::Secondary),
            _ => None,
        }
    }

    fn draw(rng: &mut SmallRng) -> Self {
        let secs = |rng: &mut SmallRng, lo: f64, hi: f64| {
            AwsDuration::from_secs_f64(rng.random_range(lo..hi).round())
        };
        let region = |rng: &mut SmallRng| {
            if rng.random_range(0..2) == 0 {
                RegionId::Primary
            } else {
                RegionId::Secondary
            }
        };
        match rng.random_range(0..28) {
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
                lag_ms: AwsDuration::from_millis(rng.random_range(2_000..30_000)),
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
                lag_ms: AwsDuration::from_millis(rng.random_range(5_000..30_000)),
                secs: secs(rng, 60.0, 300.0),
            },
            7 => Step::NeverReturns {
                lag_ms: AwsDuration::from_millis(rng.random_range(1_000..20_000)),
                secs: secs(rng, 120.0, 300.0),
            },
            8 | 9 => Step::AckLost {
                region: region(rng),
                percent: rng.random_range(20..80),
                secs: secs(rng, 30.0, 200.0),
            },
            10 => Step::StoreThrottle {
                region: region(rng),
                percent: rng.random_range(10..70),
                secs: secs(rng, 30.0, 200.0),
            },
            11 => Step::StoreOutage {
                region: region(rng),
                secs: secs(rng, 10.0, 120.0),
            },
            12 => Step::ConnectionsThrottle {
                region: region(rng),
                percent: rng.random_range(20..90),
                secs: secs(rng, 30.0, 200.0),
            },
            13 => Step::DisconnectDropped {
                secs: secs(rng, 30.0, 200.0),
            },
            14 => Step::Skew {
                region: region(rng),
                ms: rng.random_range(-5_000..5_000),
                secs: secs(rng, 30.0, 200.0),
            },
            15 => Step::OneWay {
                from: region(rng),
                secs: secs(rng, 10.0, 200.0),
            },
            16 => Step::StickyDns {
                keep_secs: AwsDuration::from_secs(rng.random_range(120..600)),
                secs: secs(rng, 60.0, 300.0),
            },
            17 => Step::Slow {
                region: region(rng),
                ms: AwsDuration::from_millis(rng.random_range(200..3_000)),
                secs: secs(rng, 30.0, 200.0),
            },
            18 => Step::Evacuate {
                from: region(rng),
                secs: secs(rng, 30.0, 200.0),
            },
            19 => Step::Isolate {
                region: region(rng),
                secs: secs(rng, 30.0, 300.0),
            },
            20 => Step::Herd {
                percent: rng.random_range(1..10),
                secs: secs(rng, 60.0, 300.0),
            },
            21 => Step::WatcherSilent {
                quiet: secs(rng, 120.0, 900.0),
                secs: secs(rng, 120.0, 300.0),
            },
            22 => Step::InterRegionPartition {
                secs: secs(rng, 30.0, 300.0),
            },
            23 => Step::HealthFlood {
                percent: rng.random_range(50..100),
                secs: secs(rng, 120.0, 300.0),
            },
            24 => Step::SecretsStorm {
                clients: rng.random_range(500..3_000),
                secs: secs(rng, 60.0, 300.0),
            },
            25 => Step::JudgeLost {
                secs: secs(rng, 60.0, 300.0),
            },
            26 => Step::OrdersDuplicated {
                copies: rng.random_range(2..5),
                secs: secs(rng, 150.0, 300.0),
            },
            27 => Step::OrdersLost {
                secs: secs(rng, 150.0, 300.0),
            },
            _ => Step::Calm {
                secs: secs(rng, 5.0, 60.0),
            },
        }
    }

    /// What this step does, as a plan: its faults, then a heal when it ends.
    pub fn plan(&self) -> Plan {
        use crate::world::RegionId::{Primary, Secondary};
        let zero = AwsDuration::ZERO;
        let (plan, length) = match *self {
            Step::Calm { secs: s } => (Plan::new(), s),
            Step::Down { secs: s } => (Plan::new().inject(zero, Fault::Down(Primary)), s),
            Step::Throttle { secs: s } => (Plan::new().inject(zero, Fault::Throttle(Primary)), s),
            Step::Partition { secs: s } => (Plan::new().inject(zero, Fault::Partition), s),
            Step::LagSpike { lag_ms, secs: s } => (Plan::new().inject(zero, Fault::Lag(lag_ms)), s),
            Step::Flapping { cycles, secs: s } => {
                let mut plan = Plan::new();
                for cycle in 0..cycles {
                    let at = s * (2 * cycle);
                    plan = plan
                        .inject(at, Fault::Throttle(Primary))
                        .inject(at + s, Fault::Heal);
                }
                (plan, s * (2 * cycles))
            }
            Step::FailbackUnderLoad { secs: s } => (
                Plan::new()
                    .inject(zero, Fault::Throttle(Primary))
                    .inject(s, Fault::Heal),
                s + AwsDuration::from_secs(450),
            ),
            Step::LostWhileLagging { lag_ms, secs: s } => (
                Plan::new()
                    .inject(zero, Fault::Lag(lag_ms))
                    .inject(AwsDuration::from_secs(10), Fault::Down(Primary)),
                AwsDuration::from_secs(10) + s,
            ),
            // Watch and strike: the primary is lost the moment the secondary holds one of
            // its summaries ahead of the copy it names (not by luck of timing).
            Step::NeverReturns { lag_ms, secs: s } => (
                Plan::new().inject(zero, Fault::Lag(lag_ms)).at(
                    AwsDuration::from_secs(10),
                    Action::LoseWhenSummaryAhead {
                        region: Primary,
                        within: AwsDuration::from_secs(60),
                    },
                ),
                AwsDuration::from_secs(10) + s,
            ),
            Step::AckLost {
                region,
                percent,
                secs: s,
            } => (
                Plan::new().inject(zero, Fault::AckLost { region, percent }),
                s,
            ),
            Step::StoreThrottle {
                region,
                percent,
                secs: s,
            } => (
                Plan::new().inject(zero, Fault::StoreThrottle { region, percent }),
                s,
            ),
            Step::StoreOutage { region, secs: s } => {
                (Plan::new().inject(zero, Fault::StoreOutage(region)), s)
            }
            Step::ConnectionsThrottle {
                region,
                percent,
                secs: s,
            } => (
                Plan::new().inject(zero, Fault::ConnectionsThrottle { region, percent }),
                s,
            ),
            Step::DisconnectDropped { secs: s } => (
                Plan::new()
                    .inject(zero, Fault::DisconnectDropped(Primary))
                    .inject(zero, Fault::DisconnectDropped(Secondary))
                    .inject(zero, Fault::Down(Primary)),
                s,
            ),
            Step::Skew {
                region,
                ms: skew,
                secs: s,
            } => (
                Plan::new().inject(zero, Fault::Skew { region, ms: skew }),
                s,
            ),
            Step::OneWay { from, secs: s } => (Plan::new().inject(zero, Fault::OneWay { from }), s),
            Step::StickyDns { keep_secs, secs: s } => (
                Plan::new()
                    .inject(zero, Fault::StickyDns(keep_secs))
                    .inject(zero, Fault::Down(Primary)),
                s,
            ),
            Step::Slow {
                region,
                ms: by,
                secs: s,
            } => (Plan::new().inject(zero, Fault::Slow { region, by }), s),
            // Under `@connections` throttling on purpose: the evacuation must keep telling.
            Step::Evacuate { from, secs: s } => (
                Plan::new()
                    .inject(
                        zero,
                        Fault::ConnectionsThrottle {
                            region: from,
                            percent: EVACUATION_PUSH_THROTTLE_PERCENT,
                        },
                    )
                    .at(zero, Action::Evacuate(from))
                    .at(s, Action::Restore(from)),
                s,
            ),
            Step::Herd { percent, secs: s } => (
                Plan::new()
                    .inject(
                        zero,
                        Fault::ConnectQuota {
                            region: Secondary,
                            percent,
                        },
                    )
                    .inject(zero, Fault::Down(Primary)),
                s,
            ),
            Step::WatcherSilent { quiet, secs: s } => (
                Plan::new()
                    .inject(zero, Fault::Down(Primary))
                    .inject(AwsDuration::from_secs(60), Fault::WatcherSilent(quiet)),
                AwsDuration::from_secs(60) + s,
            ),
            Step::InterRegionPartition { secs: s } => {
                (Plan::new().inject(zero, Fault::InterRegionPartition), s)
            }
            Step::HealthFlood { percent, secs: s } => (
                Plan::new()
                    .inject(zero, Fault::Down(Primary))
                    .inject(AwsDuration::from_secs(60), Fault::HealthFlood { percent }),
                AwsDuration::from_secs(60) + s,
            ),
            Step::Isolate { region, secs: s } => {
                (Plan::new().inject(zero, Fault::Isolate(region)), s)
            }
            Step::SecretsStorm { clients, secs: s } => (
                Plan::new().inject(zero, Fault::Down(Primary)).inject(
                    zero,
                    Fault::ReconnectHerd {
                        region: Secondary,
                        clients,
                    },
                ),
                s,
            ),
            // The secondary lost for good at 90 s; the step's heal (a second later) brings
            // the primary back, never the secondary; what follows runs on the primary alone.
            Step::OrdersDuplicated { copies, secs: s } => (
                Plan::new()
                    .inject(zero, Fault::OrdersDuplicated { copies })
                    .inject(
                        zero,
                        Fault::Slow {
                            region: Primary,
                            by: AwsDuration::from_millis(6_000),
                        },
                    ),
                s,
            ),
            Step::OrdersLost { secs: s } => (
                Plan::new().inject(zero, Fault::OrdersLost).inject(
                    zero,
                    Fault::Slow {
                        region: Primary,
                        by: AwsDuration::from_millis(6_000),
                    },
                ),
                s,
            ),
            Step::JudgeLost { secs: s } => (
                Plan::new()
                    .inject(zero, Fault::Down(Primary))
                    .inject(AwsDuration::from_secs(90), Fault::NeverReturns(Secondary)),
                AwsDuration::from_secs(91) + s,
            ),
        };
        plan.inject(length, Fault::Heal)
    }
}

/// How much of the evacuated Region's `@connections` posts an `evacuate` step throttles: at
/// 80% a post fails all five attempts of one broadcast a third of the time, so an evacuation
/// that posted each slot once would leave some of every herd untold; telling again until
/// the deadline reaches them all.
pub const EVACUATION_PUSH_THROTTLE_PERCENT: u8 = 80;

/// A schedule's steps as one plan, each starting when the one before it ends.
pub fn compile(schedule: &[Step]) -> Plan {
    schedule
        .iter()
        .fold(Plan::new(), |plan, step| plan.then(step.plan()))
}

/// How a run keeps time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Clock {
    /// A deterministic simulation (crate::runs::sim): one thread, tokio's paused clock, an
    /// in-memory network, every draw from the run's seed; AWS time at scale 1. A run is a
    /// function of its seed, and costs only its CPU time.
    Simulated,
    /// The time-scaled real world: real loopback sockets and real sleeps, the machine's
    /// scheduler and RNG (what `wsdr lab` runs on).
    Real,
}

// Where the simulated store's service time lives now; kept here for outside users.
pub use crate::world::SIMULATED_STORE_SERVICE_TIME;

/// Campaign settings.
#[derive(Debug, Clone)]
pub struct ChaosConfig {
    pub seed: u64,
    pub runs: usize,
    /// The index of the first run: a campaign of `runs` runs from it (`--first-run`), so that
    /// a long campaign runs in parts, each the same runs the whole would run.
    pub first_run: usize,
    pub users: usize,
    /// The real clock's time scale (a simulated run is always at scale 1).
    pub scale: TimeScale,
    pub clock: Clock,
    /// Keep each run's full history in its report (`--history`).
    pub keep_history: bool,
    /// Play this schedule instead of the one the seed draws (`--schedule`, and shrinking);
    /// everything else still follows the seed.
    pub schedule: Option<Vec<Step>>,
    /// Print one line per run.
    pub progress: bool,
    /// Runs in flight at once (each its own lab; seeds do not depend on it).
    pub parallel: usize,
    /// The state table's mode for every run.
    pub consistency: wsdr_core::Consistency,
    /// The failover decision's timers: wsdr's defaults (what users deploy) or the reference
    /// design's (the verdict alarms' minutes).
    pub timers: Timers,
    /// The app the users use.
    pub app: App,
}

/// Which app the users of a campaign use (the same lab, faults and failover either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum App {
    /// The auction: users bid on `lot-1`, attackers on their own lots first; the auction's
    /// checker (crate::sim::history).
    #[default]
    Auction,
    /// The chat room: members post in `chat:lobby`; the kit's rules over the ops
    /// (crate::sim::topic_rules) and the room's over what members show (crate::sim::chat).
    Chat,
}

impl App {
    pub fn name(self) -> &'static str {
        match self {
            App::Auction => "auction",
            App::Chat => "chat",
        }
    }

    /// What its users' ops are called in a report line.
    pub fn op_noun(self) -> &'static str {
        match self {
            App::Auction => "bids",
            App::Chat => "messages",
        }
    }
}

/// Which failover decision a campaign runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Timers {
    /// wsdr's defaults, as template.yaml deploys them (`LabConfig::wsdr_defaults`: endpoint
    /// checks on the two views, 20 s TTL).
    #[default]
    Wsdr,
    /// The reference design's timers (`LabConfig::default`: the verdict alarms' one-minute
    /// periods, 60 s TTL), with wsdr's composition.
    Reference,
}

impl Timers {
    pub fn name(self) -> &'static str {
        match self {
            Timers::Wsdr => "wsdr",
            Timers::Reference => "reference",
        }
    }

    fn lab(self) -> LabConfig {
        match self {
            Timers::Wsdr => LabConfig::wsdr_defaults(),
            Timers::Reference => LabConfig::default(),
        }
    }
}

impl Default for ChaosConfig {
    fn default() -> Self {
        Self {
            seed: 1,
            runs: 50,
            first_run: 0,
            users: 8,
            scale: TimeScale::new(300.0),
            clock: Clock::Simulated,
            keep_history: false,
            schedule: None,
            progress: false,
            parallel: 1,
            consistency: wsdr_core::Consistency::Eventual,
            timers: Timers::Wsdr,
            app: App::Auction,
        }
    }
}

/// One run's result.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub run: usize,
    /// Replay with `wsdr chaos --replay <seed>` (and the same mode and users).
    pub seed: u64,
    /// `eventual` or `strong`.
    pub consistency: String,
    /// `wsdr` or `reference`: the failover decision's timers.
    pub timers: String,
    /// `auction` or `chat`: the app the users used.
    pub app: String,
    pub users: usize,
    pub clock: Clock,
    pub schedule: Vec<Step>,
    pub faults: usize,
    pub bids_invoked: usize,
    pub bids_acknowledged: usize,
    pub bids_unknown: usize,
    /// Ops of any app (the auction's bids, the chat room's messages): invoked, acknowledged
    /// (`accepted` or `duplicate`), unknown to their writer.
    pub ops_invoked: usize,
    pub ops_acknowledged: usize,
    pub ops_unknown: usize,
    /// Holes reported to the users' apps (`Event::Discontinuity`; topics with a log only).
    pub discontinuities: usize,
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
    /// Apps closed by their users with a bid (the chat room: a post) unanswered.
    pub closed_mid_bid: usize,
    /// What the checker forgave, by excuse name (docs/RELIABILITY.md, the guarantee table):
    /// the kit's rules and the app's, counted together.
    pub excused: BTreeMap<String, usize>,
    /// `never-returns` struck the moment a summary had arrived ahead of its copy (watch and
    /// strike), rather than at the end of its window.
    pub struck_summary_ahead: usize,
    /// A digest of the run's history (its schedule, every operation, the lab's timeline,
    /// the Regions' final states and the violations): a simulated run replays to the same.
    pub digest: String,
    /// The history the digest was taken over, one JSON line each (with `--history`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<String>,
}

/// The campaign's figures (docs/RELIABILITY.md).
#[derive(Debug, Clone, Serialize)]
pub struct CampaignReport {
    pub seed: u64,
    /// `eventual` or `strong`.
    pub consistency: String,
    /// `wsdr` or `reference`: the failover decision's timers.
    pub timers: String,
    /// `auction` or `chat`.
    pub app: String,
    /// `simulated` or `real`.
    pub clock: Clock,
    pub runs: usize,
    /// The first run's index (0 unless `--first-run`): the runs are `first_run..first_run + runs`.
    pub first_run: usize,
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
    /// Ops of either app over the campaign (as each run's).
    pub ops_invoked: usize,
    pub ops_acknowledged: usize,
    pub ops_unknown: usize,
    pub discontinuities: usize,
    /// Apps closed by their users with a bid (the chat room: a post) unanswered, over the
    /// campaign.
    pub closed_mid_bid: usize,
    /// What the checker forgave over the campaign, by excuse name; every excuse is listed,
    /// with 0 when it never applied.
    pub excused: BTreeMap<String, usize>,
    /// `never-returns` faults that struck the moment a summary had arrived ahead of its copy.
    pub struck_summary_ahead: usize,
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
        consistency: config.consistency.to_string(),
        timers: config.timers.name().to_owned(),
        app: config.app.name().to_owned(),
        clock: config.clock,
        runs: config.runs,
        first_run: config.first_run,
        users_per_run: config.users,
        time_scale: config.scale.factor(),
        faults_injected: 0,
        faults_by_kind: BTreeMap::new(),
        rpo_lost_acknowledged: 0,
        bids_invoked: 0,
        bids_acknowledged: 0,
        bids_unknown: 0,
        ops_invoked: 0,
        ops_acknowledged: 0,
        ops_unknown: 0,
        discontinuities: 0,
        closed_mid_bid: 0,
        excused: crate::sim::history::Excuse::ALL
            .iter()
            .map(|e| (e.name().to_owned(), 0))
            .collect(),
        struck_summary_ahead: 0,
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
            let (config, i) = (config.clone(), config.first_run + next);
            in_flight.spawn(async move { run(i, run_seed(config.seed, i), config).await });
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
                "run {:>4} seed {:>20} digest {}: {} faults, {} {} ({} acknowledged, {} unknown), fds {} tasks {}, {}",
                i,
                seed,
                run.digest,
                run.faults,
                run.ops_invoked,
                config.app.op_noun(),
                run.ops_acknowledged,
                run.ops_unknown,
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
        report.ops_invoked += run.ops_invoked;
        report.ops_acknowledged += run.ops_acknowledged;
        report.ops_unknown += run.ops_unknown;
        report.discontinuities += run.discontinuities;
        report.closed_mid_bid += run.closed_mid_bid;
        for (name, n) in &run.excused {
            *report.excused.entry(name.clone()).or_default() += n;
        }
        report.struck_summary_ahead += run.struck_summary_ahead;
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
        "VIOLATION in run {} (digest {}) — replay with: {}\n  schedule: {}\n",
        run.run,
        run.digest,
        replay_command(run),
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

/// How long an attacker waits for one answer: 30 s AWS; on the real clock never under 5 s
/// of real time (at time scale 300, 30 s AWS is 100 ms, which a loaded 2-core machine can
/// miss; an attacker that gives up early judges nothing, and waiting longer cannot hide a
/// violation). A simulated run is at scale 1 and never starved.
pub(crate) fn attack_wait(scale: TimeScale, clock: Clock) -> Duration {
    match clock {
        Clock::Simulated => scale.lab(AwsDuration::from_secs(30)),
        Clock::Real => scale
            .lab(AwsDuration::from_secs(30))
            .max(Duration::from_secs(5)),
    }
}

/// Bids of the chaos campaign's prolific user: more copies than one 200-item page.
const PROLIFIC_BIDS: usize = 210;
/// Bids each of the two racers places, one racer per Region, on the prolific user's lot.
const RACING_BIDS: usize = 30;

/// The command that replays `run` on its own (simulated runs replay exactly).
pub fn replay_command(run: &RunReport) -> String {
    let mut command = format!(
        "wsdr chaos --replay {} --consistency {} --users {} --timers {}",
        run.seed, run.consistency, run.users, run.timers
    );
    if run.app != App::Auction.name() {
        command.push_str(&format!(" --app {}", run.app));
    }
    if run.clock == Clock::Real {
        command.push_str(" --clock real");
    }
    if run.schedule != drawn_schedule(run.seed) {
        command.push_str(&format!(
            " --schedule '{}'",
            serde_json::to_string(&run.schedule).unwrap_or_default()
        ));
    }
    command
}

/// One run on the campaign's clock.
async fn run(run: usize, seed: u64, config: Arc<ChaosConfig>) -> anyhow::Result<RunReport> {
    match config.clock {
        Clock::Simulated => {
            crate::runs::sim::simulate(
                seed,
                move || async move { run_once(run, seed, &config).await },
            )
            .await
        }
        Clock::Real => run_once(run, seed, &config).await,
    }
}

/// Replay one run by its seed (`wsdr chaos --replay SEED`).
pub async fn replay(seed: u64, config: ChaosConfig) -> anyhow::Result<RunReport> {
    run(0, seed, Arc::new(config)).await
}

/// The fault schedule a run's seed draws.
pub fn drawn_schedule(seed: u64) -> Vec<Step> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let steps = rng.random_range(2..5);
    let mut schedule: Vec<Step> = Vec::with_capacity(steps);
    let mut lost = None;
    for _ in 0..steps {
        // A schedule loses at most one Region for good: with both gone there is no system
        // left to check. A step that would lose the other one is drawn again (bounded: each
        // draw conflicts with probability 1/26 or less).
        let step = (0..16)
            .map(|_| Step::draw(&mut rng))
            .find(|step| match (lost, step.loses_for_good()) {
                (Some(gone), Some(next)) => gone == next,
                _ => true,
            })
            .unwrap_or(Step::Calm {
                secs: AwsDuration::from_secs(30),
            });
        lost = lost.or(step.loses_for_good());
        schedule.push(step);
    }
    schedule
}

/// A schedule given on the command line obeys the drawn schedules' rule: at most one
/// Region lost for good.
pub fn check_schedule(schedule: &[Step]) -> anyhow::Result<()> {
    let mut lost = schedule.iter().filter_map(Step::loses_for_good);
    if let Some(first) = lost.next() {
        if let Some(other) = lost.find(|r| *r != first) {
            anyhow::bail!(
                "the schedule loses both Regions for good ({} and {}): there would be no \
                 system left to check; keep never-returns and judge-lost apart",
                first.role(),
                other.role()
            );
        }
    }
    Ok(())
}

/// The fewest steps of `schedule` that still fail: drop one step at a time, keeping each drop
/// after which `fails` still holds, until no single step can go (a local minimum: every
/// step left is needed). `fails` runs the candidate schedule; each call is one replay.
pub async fn shrink_schedule<F, Fut>(schedule: Vec<Step>, mut fails: F) -> Vec<Step>
where
    F: FnMut(Vec<Step>) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let mut current = schedule;
    let mut i = 0;
    while i < current.len() {
        let mut candidate = current.clone();
        candidate.remove(i);
        if fails(candidate.clone()).await {
            current = candidate;
        } else {
            i += 1;
        }
    }
    current
}

/// Replay `seed` and, if it fails, shrink its schedule ([`shrink_schedule`]); the last
/// failing run (the shrunk one), or the passing replay.
pub async fn shrink(seed: u64, config: ChaosConfig) -> anyhow::Result<RunReport> {
    let config = Arc::new(config);
    let first = run(0, seed, config.clone()).await?;
    if first.violations.is_empty() {
        return Ok(first);
    }
    let last = std::sync::Mutex::new(first.clone());
    let minimal = shrink_schedule(first.schedule.clone(), |candidate| {
        let mut config = (*config).clone();
        config.schedule = Some(candidate);
        let last = &last;
        async move {
            match run(0, seed, Arc::new(config)).await {
                Ok(report) if !report.violations.is_empty() => {
                    *last.lock().unwrap_or_else(|p| p.into_inner()) = report;
                    true
                }
                _ => false,
            }
        }
    })
    .await;
    let last = last.into_inner().unwrap_or_else(|p| p.into_inner());
    // The last failing candidate is the minimal schedule unless nothing could be dropped.
    Ok(if last.schedule == minimal {
        last
    } else {
        first
    })
}

async fn run_once(run: usize, seed: u64, config: &ChaosConfig) -> anyhow::Result<RunReport> {
    let schedule = config
        .schedule
        .clone()
        .unwrap_or_else(|| drawn_schedule(seed));
    check_schedule(&schedule)?;
    let lab_config = LabConfig {
        scale: config.scale,
        consistency: config.consistency,
        ..config.timers.lab()
    };
    let lab_config = match config.clock {
        Clock::Simulated => lab_config.simulated(seed),
        Clock::Real => lab_config,
    };
    let scale = lab_config.scale;
    let lab = Arc::new(World::builder().config(lab_config).start().await?);
    // The primary's evacuator, as deployed: fail-over orders and the minute sweep.
    lab.start_failover_evacuator();
    let steady = wait_for(scale.lab(AwsDuration::from_secs(900)), || {
        lab.healthy(RegionId::Primary) && lab.resolve() == RegionId::Primary
    })
    .await;
    anyhow::ensure!(steady, "run {run}: the lab never reached steady state");
    match config.app {
        App::Auction => play::<AuctionRun>(run, seed, config, schedule, lab).await,
        App::Chat => play::<ChatRun>(run, seed, config, schedule, lab).await,
    }
}

/// Every app's run on a steady lab, the same loop: its people start (and warm up), the
/// schedule plays, the lab heals, everyone reconnects and uses the healed system a little
/// longer; then the app's judge (the kit's rules and its own) and the failover's own rules.
async fn play<A: CampaignApp>(
    run: usize,
    seed: u64,
    config: &ChaosConfig,
    schedule: Vec<Step>,
    lab: Arc<World>,
) -> anyhow::Result<RunReport> {
    let scale = lab.config().scale;
    let people = A::start(&lab, config, seed).await?;
    let plan = compile(&schedule);
    crate::runs::plan::play(&lab, &plan).await;
    lab.inject(Fault::Heal);
    wait_for(scale.lab(AwsDuration::from_secs(900)), || {
        people.all_connected()
    })
    .await;
    tokio::time::sleep(scale.lab(AwsDuration::from_secs(30))).await;
    let judged = people
        .judge(&lab, scale.lab(AwsDuration::from_secs(30)))
        .await?;
    let failover = failover_violations(&lab);
    Ok(A::report(
        judged,
        failover,
        RunContext {
            run,
            seed,
            config,
            schedule,
            plan: &plan,
            lab: &lab,
        },
    ))
}

/// Faults a plan injects, by kind (the CLI's names).
pub(crate) fn faults_by_kind(plan: &Plan) -> BTreeMap<String, usize> {
    let mut by_kind = BTreeMap::new();
    for kind in plan.fault_names() {
        *by_kind.entry(kind.to_owned()).or_default() += 1;
    }
    by_kind
}

/// The digest of a run's history lines (a simulated run replays to the same).
pub(crate) fn digest_of(history: &[String]) -> crate::runs::sim::Digest {
    let mut digest = crate::runs::sim::Digest::default();
    for line in history {
        digest.line(line);
    }
    digest
}

/// `never-returns` faults that struck on a summary ahead of its copy.
pub(crate) fn struck_summary_ahead(lab: &World) -> usize {
    lab.timeline()
        .entries()
        .iter()
        .filter(|e| e.detail == crate::runs::plan::STRUCK_SUMMARY_AHEAD)
        .count()
}

/// The failover's own rules, whatever the app: every planned evacuation told everyone, and
/// however often a fail-over order was delivered, it moved everyone through the global name
/// once.
pub(crate) fn failover_violations(lab: &World) -> Vec<Violation> {
    let evacuations = lab
        .planned_evacuations()
        .into_iter()
        .filter(|report| !report.complete)
        .map(|report| Violation::EvacuationIncomplete {
            untold: report.untold,
            connections: report.connections,
        });
    let orders = lab
        .order_stats()
        .moves_by_order
        .into_iter()
        .filter(|(_, moves)| *moves > 1)
        .map(|(order, moves)| Violation::OrderRanTwice { order, moves });
    evacuations.chain(orders).collect()
}

/// The attackers who need the lab to themselves, before the users arrive: the prolific user
/// alone on its lot, two racers (one in each Region), one bidId with two amounts in a split.
pub(crate) async fn attack_before_the_users(
    lab: &Arc<World>,
    scale: TimeScale,
    clock: Clock,
) -> anyhow::Result<Vec<Violation>> {
    // The prolific user first, alone on its own lot, before any fault: hundreds of bids.
    let started = std::time::Instant::now();
    let mut attacks = crate::sim::attackers::prolific(
        lab,
        "prolific-user",
        &AuctionId::new("lot-2")?,
        PROLIFIC_BIDS,
        attack_wait(scale, clock),
    )
    .await;
    tracing::debug!(elapsed = ?started.elapsed(), "prolific user done");
    // Then two racers on the same lot, one in each Region.
    attacks.extend(
        crate::sim::attackers::racers(
            lab,
            &AuctionId::new("lot-2")?,
            RACING_BIDS,
            scale.lab(AwsDuration::from_secs(30)),
        )
        .await,
    );
    // Then one bidId with two amounts, one in each Region, during a short split.
    attacks.extend(
        crate::sim::attackers::split_reuser(
            lab,
            &AuctionId::new("lot-3")?,
            scale.lab(AwsDuration::from_secs(30)),
        )
        .await,
    );
    Ok(attacks)
}

/// The run's report: its record, checked, summed and digested.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_report(
    run: usize,
    seed: u64,
    config: &ChaosConfig,
    schedule: Vec<Step>,
    plan: &Plan,
    lab: &World,
    trace: RunTrace,
    violations: Vec<Violation>,
    excused: &Excused,
) -> RunReport {
    let ops = &trace.ops;
    let rpo_lost_acknowledged = trace.lost_acknowledged();
    let faults_by_kind = faults_by_kind(plan);
    let evidence: Vec<Op> = violations
        .iter()
        .filter_map(Violation::bid)
        .filter_map(|key| ops.iter().find(|op| op.key() == key).cloned())
        .collect();
    let closed_mid_bid = trace.users.iter().map(|u| u.closed_mid_bid as usize).sum();
    let history = history_lines(
        &schedule,
        ops,
        &lab.timeline().entries(),
        &trace.regions,
        &violations,
    );
    let digest = digest_of(&history);
    RunReport {
        run,
        seed,
        consistency: config.consistency.to_string(),
        timers: config.timers.name().to_owned(),
        users: config.users,
        clock: config.clock,
        digest: digest.hex(),
        history: if config.keep_history {
            history
        } else {
            Vec::new()
        },
        faults: plan.fault_names().count(),
        schedule,
        bids_invoked: ops.len(),
        bids_acknowledged: trace.count(Outcome::Ok),
        bids_unknown: trace.count(Outcome::Unknown),
        app: App::Auction.name().to_owned(),
        ops_invoked: ops.len(),
        ops_acknowledged: trace.count(Outcome::Ok),
        ops_unknown: trace.count(Outcome::Unknown),
        discontinuities: 0,
        violations,
        evidence,
        holdings_after: Holdings::default(),
        faults_by_kind,
        rpo_lost_acknowledged,
        lost_copies: trace.lost.len(),
        closed_mid_bid,
        excused: excused
            .iter()
            .map(|(e, n)| (e.name().to_owned(), *n))
            .collect(),
        struck_summary_ahead: struck_summary_ahead(lab),
    }
}

/// Strong mode's own promises, checked against the table's order and quorum (none on an
/// eventual table).
pub(crate) fn strong_mode_violations(
    lab: &World,
    trace: &RunTrace,
    kit: &crate::sim::topic_rules::TopicTrace,
    auction: &AuctionId,
    excused: &mut Excused,
) -> Vec<Violation> {
    let Some(order) = lab.strong_order(auction) else {
        return Vec::new();
    };
    let connections_ended: BTreeMap<_, _> = trace
        .ends
        .iter()
        .zip(&trace.users)
        .map(|(end, user)| (end.user.clone(), user.connections_ended.clone()))
        .collect();
    let mut violations = crate::sim::history::redirected_but_decided(
        &trace.ops,
        &lab.strong_accepted_by(auction),
        &connections_ended,
        excused,
    );
    let count = crate::sim::history::below_an_earlier_bid(&order);
    if count > 0 {
        violations.push(Violation::AcceptedBelowEarlierBid { count });
    }
    // The quorum rule is the kit's, over the bids as ops (the chat room's too).
    violations.extend(crate::sim::topic_rules::acknowledged_without_quorum(
        &kit.writes,
        |region, from, to| lab.lacked_quorum_throughout(region, from, to),
    ));
    violations
}

/// One line of a run's history: its kind, then the record as JSON.
pub(crate) fn history_line(kind: &str, value: &impl Serialize) -> String {
    format!(
        "{kind} {}",
        serde_json::to_string(value).unwrap_or_else(|e| format!("unserializable: {e}"))
    )
}

/// A run's history as JSON lines, in a fixed order: the schedule, every operation, the lab's
/// timeline, the Regions' final states, the violations.
fn history_lines(
    schedule: &[Step],
    ops: &[Op],
    timeline: &[crate::world::timeline::Entry],
    regions: &[FinalState],
    violations: &[Violation],
) -> Vec<String> {
    use history_line as line;
    let mut lines = vec![line("schedule", &schedule)];
    lines.extend(ops.iter().map(|op| line("op", op)));
    lines.extend(timeline.iter().map(|entry| line("timeline", entry)));
    lines.extend(regions.iter().map(|region| line("final", region)));
    lines.extend(violations.iter().map(|v| line("violation", v)));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn shrinking_keeps_exactly_the_steps_the_failure_needs() {
        let schedule = vec![
            Step::Calm {
                secs: AwsDuration::from_secs(10),
            },
            Step::Down {
                secs: AwsDuration::from_secs(60),
            },
            Step::Partition {
                secs: AwsDuration::from_secs(30),
            },
            Step::Skew {
                region: RegionId::Secondary,
                ms: 500,
                secs: AwsDuration::from_secs(20),
            },
            Step::Throttle {
                secs: AwsDuration::from_secs(90),
            },
        ];
        // Fails when a down and a throttle are both in the schedule.
        let fails = |candidate: Vec<Step>| async move {
            candidate.iter().any(|s| matches!(s, Step::Down { .. }))
                && candidate.iter().any(|s| matches!(s, Step::Throttle { .. }))
        };
        let minimal = shrink_schedule(schedule, fails).await;
        assert_eq!(
            minimal,
            vec![
                Step::Down {
                    secs: AwsDuration::from_secs(60)
                },
                Step::Throttle {
                    secs: AwsDuration::from_secs(90)
                }
            ]
        );
    }

    #[test]
    fn steps_are_written_as_the_faults_are_spelled_and_old_schedules_still_read() {
        let step = Step::AckLost {
            region: RegionId::Primary,
            percent: 30,
            secs: AwsDuration::from_secs(60),
        };
        let written = serde_json::to_string(&step).unwrap_or_default();
        assert!(written.contains(r#""fault":"ack-lost""#), "{written}");
        assert!(written.contains(crate::world::FaultKind::AckLost.name()));
        // A schedule recorded before: snake_case.
        let old = r#"[{"fault":"ack_lost","region":0,"percent":30,"secs":60.0},{"fault":"never_returns","lag_ms":500,"secs":120.0},{"fault":"down","secs":60.0}]"#;
        assert_eq!(
            crate::cli::schedule(old).map(|s| s.0),
            Ok(vec![
                step,
                Step::NeverReturns {
                    lag_ms: AwsDuration::from_millis(500),
                    secs: AwsDuration::from_secs(120)
                },
                Step::Down {
                    secs: AwsDuration::from_secs(60)
                },
            ])
        );
    }

    #[test]
    fn a_schedule_loses_at_most_one_region_for_good() {
        let judge_lost = Step::JudgeLost {
            secs: AwsDuration::from_secs(60),
        };
        let never_returns = Step::NeverReturns {
            lag_ms: AwsDuration::from_millis(500),
            secs: AwsDuration::from_secs(120),
        };
        assert!(check_schedule(&[never_returns, never_returns]).is_ok());
        assert!(check_schedule(&[judge_lost, judge_lost]).is_ok());
        let both = check_schedule(&[judge_lost, never_returns]);
        assert!(
            both.is_err_and(|e| e.to_string().contains("both Regions for good")),
            "a schedule that loses both Regions is refused with a reason"
        );
        // The draw keeps to the rule, and does draw the judge-lost step.
        let mut drew_judge_lost = 0;
        for seed in 0..2_000 {
            let schedule = drawn_schedule(seed);
            assert!(
                check_schedule(&schedule).is_ok(),
                "seed {seed}: {schedule:?}"
            );
            drew_judge_lost +=
                usize::from(schedule.iter().any(|s| matches!(s, Step::JudgeLost { .. })));
        }
        assert!(
            drew_judge_lost > 100,
            "judge-lost drawn in {drew_judge_lost} of 2000 schedules"
        );
    }

    #[test]
    fn a_schedule_round_trips_through_its_json() {
        let schedule = drawn_schedule(7);
        let text = serde_json::to_string(&schedule).unwrap_or_default();
        assert_eq!(
            crate::cli::schedule(&text),
            Ok(crate::cli::ScheduleArg(schedule))
        );
    }

    #[test]
    fn durations_are_one_type_inside_and_keep_their_written_units() {
        // Every Step duration is an AwsDuration; the JSON keeps the unit in the field name,
        // so schedules recorded before read the same and digests taken over them hold.
        let step = Step::StickyDns {
            keep_secs: AwsDuration::from_secs(300),
            secs: AwsDuration::from_millis(60_500),
        };
        assert_eq!(
            serde_json::to_string(&step).unwrap_or_default(),
            r#"{"fault":"sticky-dns","keep_secs":300,"secs":60.5}"#
        );
        let slow = r#"{"fault":"slow","region":"primary","ms":250,"secs":30.0}"#;
        assert_eq!(
            serde_json::from_str::<Step>(slow).ok(),
            Some(Step::Slow {
                region: RegionId::Primary,
                ms: AwsDuration::from_millis(250),
                secs: AwsDuration::from_secs(30),
            })
        );
        let negative = serde_json::from_str::<Step>(r#"{"fault":"down","secs":-1.0}"#);
        assert!(
            negative.is_err_and(|e| e.to_string().contains("finite number >= 0")),
            "a negative duration is refused with a reason"
        );
    }
}
