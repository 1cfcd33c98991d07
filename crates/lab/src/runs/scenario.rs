//! What a drill breaks: each scenario is a plan (crate::runs::plan) that strikes the
//! primary when the drill's fault is due. The drill heals once it has measured the recovery.

use crate::runs::plan::{Action, Plan};
use crate::world::scale::AwsDuration;
use crate::world::{Fault, RegionId};

/// A primary whose every integration is 6 s slower: users' heartbeats still pass, the
/// canary's 5 s probes do not.
const SLOW_PRIMARY: Fault = Fault::Slow {
    region: RegionId::Primary,
    by: AwsDuration::from_millis(6_000),
};

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
    /// Throttle, fail over, heal under load, then measure the move back: DNS failing back,
    /// and every user back on the primary once the secondary's connections end (the lab
    /// brings API Gateway's 2-hour connection limit forward).
    Failback,
    /// One lost heartbeat: the primary throttled for 3 s, then fine. Nobody may move: no
    /// disconnect, no endpoint change, no DNS flip.
    Blip,
    /// The primary lost for good with its replication backlog: the acknowledged bids it had
    /// not replicated are lost (the measured RPO); nothing else may be.
    NeverReturns,
    /// The primary slow (every integration 6 s slower): users' heartbeats still pass, the
    /// canary's 5 s probes do not. The failover decision moves the name, but open sessions
    /// stay on the slow primary unless the evacuator moves them (`--evacuate-on-failover`).
    Slow,
    /// No fault: a planned evacuation of the primary (out of DNS, then every connection
    /// told to move, paced to the secondary's quota), then the same in reverse once it is
    /// back. No user may see an error.
    Evacuate,
    /// The primary's table replica cut off from the other Regions, its API still serving.
    /// Strong mode: the primary has no quorum, answers bids `redirect`, its canary's state
    /// read fails and the name moves. Eventual mode: a replication partition nobody detects
    /// (the primary keeps serving; users do not move).
    Isolate,
    /// The primary degraded (its handler throttled) while replication INTO it stalls: a
    /// verdict written outside the primary cannot reach the primary's replica. The failover
    /// records' checks read the verdict where it was made (the secondary), so the name moves
    /// anyway; a health endpoint inside the primary would keep answering `serve`.
    Degraded,
    /// The primary down while its users are a herd far larger than the secondary's
    /// new-connection quota (the secondary admits 1% of it, `connect-quota`): for as long as
    /// the herd lasts most handshakes get 429, the secondary's canary's among them. A 429 is
    /// the quota of a Region that is up: its verdict must stay "serve", or DNS answers the
    /// dead primary.
    Herd,
    /// The primary down, and a minute later, once the name has moved, the judge's watcher
    /// silent for ten minutes (a failed secret read at init, an EventBridge delay, a
    /// deploy): the health endpoint answers from a verdict that ages. It must keep
    /// answering the last known status, or DNS returns to the dead primary.
    WatcherSilent,
    /// The network between the two Regions cut for five minutes (replication and the
    /// watcher's probe of the primary), both Regions healthy and reached by their users.
    /// Both views of the primary cross that path, so the primary is failed over while
    /// healthy: what that costs is measured (docs/DEPLOY.md, the dependency table).
    InterRegionPartition,
    /// The primary down, and a minute later, once the name has moved, the health endpoint
    /// flooded from the internet for five minutes (90% of the requests reaching the health
    /// function refused). Route 53's checks must keep reading the verdict, or both records
    /// turn unhealthy and DNS answers the dead primary.
    HealthFlood,
    /// The primary down, and at that moment 2,000 other clients reconnect to the secondary
    /// at once (other apps' clients, without a herd window): the connect quota's burst lets
    /// 500 through in the first instant, each finds every authorizer sandbox busy or
    /// starting, and each new sandbox reads its keys from the secondary's Secrets Manager.
    /// No read may be throttled out of its retries: no `$connect` may get a 500.
    SecretsStorm,
    /// The primary down; once everyone is on the secondary, the secondary (the judge, where
    /// the watcher runs) lost for good as the primary heals. Nothing the judge says can help
    /// now: the name must go back to the primary, and every user be restored there, within
    /// five minutes of the heal.
    JudgeLost,
    /// The reference game day (the primary's handler throttled) after minutes in which every
    /// checker read "serve": whatever holds an answer on the checks' path (a cache, a last
    /// known status) must not answer "serve" for the failed primary. wsdr's checks reach the
    /// health functions directly; `--health-front cloudfront` runs the front that did.
    CachedServe,
    /// The primary slow (as `slow`: sessions stay up, only the evacuator moves them) while
    /// every fail-over order is delivered three times, a second apart (a stream batch
    /// retried, a message received again). Each order must move everyone once.
    OrdersDuplicated,
    /// The primary slow while every fail-over order is lost before the queue (a stream batch
    /// dropped after its retries). The evacuator's minute sweep must find the judge's change
    /// and move everyone anyway.
    OrdersLost,
    /// The primary down, and its users a herd on the secondary whose unreserved concurrency
    /// is taken for four minutes (the herd's handlers, the account's other functions): the
    /// auction's pushes must keep flowing. wsdr's workers hold a reservation; workers without
    /// one are throttled, their jobs wait out the visibility timeout and may expire unseen
    /// (`--push-jobs before`).
    PushHerd,
}

impl Scenario {
    /// The scenario's one name, as the CLI (`--scenario`) and the JSON report spell it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Throttle => "throttle",
            Self::Down => "down",
            Self::Partition => "partition",
            Self::Flapping => "flapping",
            Self::Failback => "failback",
            Self::Blip => "blip",
            Self::NeverReturns => "never-returns",
            Self::Evacuate => "evacuate",
            Self::Slow => "slow",
            Self::Isolate => "isolate",
            Self::Degraded => "degraded",
            Self::Herd => "herd",
            Self::WatcherSilent => "watcher-silent",
            Self::InterRegionPartition => "inter-region-partition",
            Self::HealthFlood => "health-flood",
            Self::SecretsStorm => "secrets-storm",
            Self::JudgeLost => "judge-lost",
            Self::CachedServe => "cached-serve",
            Self::OrdersDuplicated => "orders-duplicated",
            Self::OrdersLost => "orders-lost",
            Self::PushHerd => "push-herd",
        }
    }
}

impl Scenario {
    /// What the scenario does when the drill's fault strikes, from that instant.
    pub fn plan(self) -> Plan {
        use RegionId::{Primary, Secondary};
        let secs = AwsDuration::from_secs;
        let now = AwsDuration::ZERO;
        match self {
            Scenario::Evacuate => Plan::new().at(now, Action::Evacuate(Primary)),
            Scenario::Slow => Plan::new().inject(now, SLOW_PRIMARY),
            Scenario::OrdersDuplicated => Plan::new()
                .inject(now, Fault::OrdersDuplicated { copies: 3 })
                .inject(now, SLOW_PRIMARY),
            Scenario::OrdersLost => Plan::new()
                .inject(now, Fault::OrdersLost)
                .inject(now, SLOW_PRIMARY),
            Scenario::PushHerd => Plan::new()
                .inject(now, Fault::Down(Primary))
                .inject(
                    now,
                    Fault::ConcurrencyExhausted {
                        region: Secondary,
                        lasting: secs(240),
                    },
                )
                // Past the retention of the queue before (300 s) after the exhaustion ends:
                // every job it throttled has run, expired or been dead-lettered by then.
                .lasting(secs(420)),
            Scenario::Throttle | Scenario::Failback | Scenario::CachedServe => {
                Plan::new().inject(now, Fault::Throttle(Primary))
            }
            Scenario::Down | Scenario::JudgeLost => Plan::new().inject(now, Fault::Down(Primary)),
            Scenario::HealthFlood => Plan::new()
                .inject(now, Fault::Down(Primary))
                .inject(secs(60), Fault::HealthFlood { percent: 90 })
                .lasting(secs(300)),
            Scenario::InterRegionPartition => Plan::new()
                .inject(now, Fault::InterRegionPartition)
                .lasting(secs(300)),
            Scenario::WatcherSilent => Plan::new()
                .inject(now, Fault::Down(Primary))
                .inject(secs(60), Fault::WatcherSilent(secs(600)))
                .lasting(secs(300)),
            Scenario::Herd => Plan::new()
                .inject(
                    now,
                    Fault::ConnectQuota {
                        region: Secondary,
                        percent: 1,
                    },
                )
                .inject(now, Fault::Down(Primary)),
            Scenario::SecretsStorm => Plan::new().inject(now, Fault::Down(Primary)).inject(
                now,
                Fault::ReconnectHerd {
                    region: Secondary,
                    clients: 2_000,
                },
            ),
            Scenario::NeverReturns => Plan::new().inject(now, Fault::NeverReturns(Primary)),
            Scenario::Isolate => Plan::new().inject(now, Fault::Isolate(Primary)),
            Scenario::Degraded => Plan::new()
                .inject(now, Fault::OneWay { from: Secondary })
                .inject(now, Fault::Throttle(Primary)),
            Scenario::Partition => Plan::new()
                .inject(now, Fault::Partition)
                .inject(now, Fault::Throttle(Primary)),
            Scenario::Blip => Plan::new()
                .inject(now, Fault::Throttle(Primary))
                .inject(secs(3), Fault::Heal),
            Scenario::Flapping => {
                // Broken 90 s, fine 60 s, three times; then broken for good.
                let mut plan = Plan::new();
                for cycle in 0..3 {
                    let at = secs(150) * cycle;
                    plan = plan
                        .inject(at, Fault::Throttle(Primary))
                        .inject(at + secs(90), Fault::Heal);
                }
                plan.inject(secs(450), Fault::Throttle(Primary))
            }
        }
    }
}
