//! Faults: one typed vocabulary for the CLI (`wsdr fault`), the control API
//! (`POST /api/fault`), chaos schedules and drills.
//!
//! A [`Fault`] says what breaks, in AWS time; the [`crate::world::World`] hands it to each
//! part it concerns (`Region::inject`, `Link::inject`, `FaultyStore::inject`,
//! `Resolver::inject`, `Cluster::inject`), and each part decides what it means for itself.
//! [`FaultKind`] is its name, spelled the same way everywhere.

use crate::world::region_id::{PerRegion, RegionId};
use crate::world::scale::AwsDuration;
use serde::{Deserialize, Serialize};

/// A fault's name, as the CLI, the control API (`kind`), the chaos summary and the docs
/// spell it.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    clap::ValueEnum,
    Serialize,
    Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// The Region's API refuses every connection and drops its sockets.
    Down,
    /// The Region's handler throttled (reserved concurrency 0): every frame gets an error.
    Throttle,
    /// Replication between the Regions cut both ways.
    Partition,
    /// Replication lag (--ms).
    Lag,
    /// The Region lost for good, with its unreplicated writes.
    NeverReturns,
    /// Acknowledgements lost after the write committed (--percent).
    AckLost,
    /// The Region's table throttles writes (--percent).
    StoreThrottle,
    /// The Region's table unavailable.
    StoreOutage,
    /// `@connections` posts throttled (--percent).
    ConnectionsThrottle,
    /// `$disconnect` never delivered.
    DisconnectDropped,
    /// The Region's clock off by --ms (may be negative).
    Skew,
    /// Replication cut one way, out of --from.
    OneWay,
    /// Resolvers keep answers --ms longer than the TTL.
    StickyDns,
    /// Every frame in the Region takes --ms longer.
    Slow,
    /// The Region's table replica cut off from the other Regions (strong mode: no quorum).
    Isolate,
    /// The Region's new-connection quota cut to --percent of its own: a herd that many times
    /// larger than the lab's users meets it.
    ConnectQuota,
    /// The judge's watcher writes no fast verdict for --ms (a failed secret read at init, an
    /// EventBridge delay, a deploy).
    WatcherSilent,
    /// The network between the two Regions cut (replication and the watcher's probe of the
    /// primary), each Region still reachable by its users.
    InterRegionPartition,
    /// The health endpoint flooded from the internet: --percent of its capacity taken.
    HealthFlood,
    /// --clients other clients reconnect to the Region at once: its connect quota and its
    /// authorizer's cold starts (and their secret reads) meet them.
    ReconnectHerd,
    /// Every fail-over order delivered --copies times (default 3): a stream batch retried, a
    /// message received again.
    OrdersDuplicated,
    /// Every fail-over order lost before the queue (a stream batch dropped after its
    /// retries).
    OrdersLost,
    /// The Region's unreserved concurrency taken (a herd's handlers, the account's other
    /// functions) for --ms (0: until heal): functions without a reservation are throttled
    /// (the lab runs its push workers through it).
    ConcurrencyExhausted,
    /// End every fault.
    Heal,
}

impl FaultKind {
    /// Every kind that breaks something (`heal` excluded), in the docs' order.
    pub fn faults() -> impl Iterator<Item = FaultKind> {
        use clap::ValueEnum;
        Self::value_variants()
            .iter()
            .copied()
            .filter(|k| *k != FaultKind::Heal)
    }

    /// The kind's name (`never-returns`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Down => "down",
            Self::Throttle => "throttle",
            Self::Partition => "partition",
            Self::Lag => "lag",
            Self::NeverReturns => "never-returns",
            Self::AckLost => "ack-lost",
            Self::StoreThrottle => "store-throttle",
            Self::StoreOutage => "store-outage",
            Self::ConnectionsThrottle => "connections-throttle",
            Self::DisconnectDropped => "disconnect-dropped",
            Self::Skew => "skew",
            Self::OneWay => "one-way",
            Self::StickyDns => "sticky-dns",
            Self::Slow => "slow",
            Self::Isolate => "isolate",
            Self::ConnectQuota => "connect-quota",
            Self::WatcherSilent => "watcher-silent",
            Self::InterRegionPartition => "inter-region-partition",
            Self::HealthFlood => "health-flood",
            Self::ReconnectHerd => "reconnect-herd",
            Self::OrdersDuplicated => "orders-duplicated",
            Self::OrdersLost => "orders-lost",
            Self::ConcurrencyExhausted => "concurrency-exhausted",
            Self::Heal => "heal",
        }
    }

    /// The kind named `name`, if there is one. The chaos schedules' older snake_case
    /// spelling (`ack_lost`) is read too, so what a report printed can be sent back.
    pub fn parse(name: &str) -> Option<Self> {
        use clap::ValueEnum;
        let name = name.replace('_', "-");
        Self::value_variants()
            .iter()
            .copied()
            .find(|k| k.name() == name)
    }
}

impl std::fmt::Display for FaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A fault to inject. Durations and skews are AWS time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    /// Every socket dropped, new connections refused, its replication stalled.
    Down(RegionId),
    /// Reserved concurrency 0 on the Region's handler (the reference game day).
    Throttle(RegionId),
    /// Replication cut both ways.
    Partition,
    /// Replication lag.
    Lag(AwsDuration),
    /// Down for good: what it had not replicated is lost (the measured RPO). Heal does not
    /// bring it back.
    NeverReturns(RegionId),
    /// This percentage of writes (bids and the kit's `write`s) lose their connection right
    /// after the commit, and of the Region's commits lose their answer from the table after
    /// the table applied them.
    AckLost { region: RegionId, percent: u8 },
    /// This percentage of the handler's table requests are throttled.
    StoreThrottle { region: RegionId, percent: u8 },
    /// The handler cannot reach its table at all.
    StoreOutage(RegionId),
    /// This percentage of `@connections` posts answer 429 LimitExceeded.
    ConnectionsThrottle { region: RegionId, percent: u8 },
    /// `$disconnect` is never delivered.
    DisconnectDropped(RegionId),
    /// The Region's clock runs `ms` AWS milliseconds ahead (negative: behind) of the others.
    Skew { region: RegionId, ms: i64 },
    /// Replication from `from` to the other Region cut; the other direction flows.
    OneWay { from: RegionId },
    /// Clients resolve the global name through a resolver that ignores the TTL and keeps an
    /// answer this long.
    StickyDns(AwsDuration),
    /// Every integration in the Region takes this much longer.
    Slow { region: RegionId, by: AwsDuration },
    /// The Region's table replica cut off from every other member (its API still serves).
    /// Strong mode: the Region has no quorum and decides nothing. Eventual mode: its
    /// replication cut both ways (a partition).
    Isolate(RegionId),
    /// The Region admits this percentage of its new-connection quota (API Gateway's 500 per
    /// second, [`crate::world::LabConfig::connect_rate`]), at least one handshake in a burst:
    /// the lab's users stand for a herd 100/percent times larger.
    ConnectQuota { region: RegionId, percent: u8 },
    /// The judge's watcher writes no fast verdict for this long: the health endpoint answers
    /// from a verdict that ages.
    WatcherSilent(AwsDuration),
    /// Replication cut both ways and the watcher (in the judge) unable to reach the primary:
    /// the inter-Region path both views of the primary cross. Users reach both Regions.
    InterRegionPartition,
    /// Whoever knows the health endpoint's address floods it: this percentage of the
    /// requests that reach the health function are refused (its concurrency spent), Route
    /// 53's checks among them. A cache in front (wsdr's default) answers them instead.
    HealthFlood { percent: u8 },
    /// This many clients (other apps', without a herd window) reconnect to the Region at
    /// once, each with a valid token, retrying with backoff.
    ReconnectHerd { region: RegionId, clients: u32 },
    /// Every fail-over order delivered this many times, one second apart.
    OrdersDuplicated { copies: u8 },
    /// Every fail-over order lost before the queue: only the evacuator's minute sweep finds
    /// the judge's change.
    OrdersLost,
    /// The Region's unreserved concurrency taken for this long (zero: until heal): every
    /// invocation of a function without a reservation is throttled, the push workers' among
    /// them unless they hold one.
    ConcurrencyExhausted {
        region: RegionId,
        lasting: AwsDuration,
    },
    /// Everything back to normal (a Region that never returns stays gone).
    Heal,
}

impl Fault {
    pub fn kind(&self) -> FaultKind {
        match self {
            Fault::Down(_) => FaultKind::Down,
            Fault::Throttle(_) => FaultKind::Throttle,
            Fault::Partition => FaultKind::Partition,
            Fault::Lag(_) => FaultKind::Lag,
            Fault::NeverReturns(_) => FaultKind::NeverReturns,
            Fault::AckLost { .. } => FaultKind::AckLost,
            Fault::StoreThrottle { .. } => FaultKind::StoreThrottle,
            Fault::StoreOutage(_) => FaultKind::StoreOutage,
            Fault::ConnectionsThrottle { .. } => FaultKind::ConnectionsThrottle,
            Fault::DisconnectDropped(_) => FaultKind::DisconnectDropped,
            Fault::Skew { .. } => FaultKind::Skew,
            Fault::OneWay { .. } => FaultKind::OneWay,
            Fault::StickyDns(_) => FaultKind::StickyDns,
            Fault::Slow { .. } => FaultKind::Slow,
            Fault::Isolate(_) => FaultKind::Isolate,
            Fault::ConnectQuota { .. } => FaultKind::ConnectQuota,
            Fault::WatcherSilent(_) => FaultKind::WatcherSilent,
            Fault::InterRegionPartition => FaultKind::InterRegionPartition,
            Fault::HealthFlood { .. } => FaultKind::HealthFlood,
            Fault::ReconnectHerd { .. } => FaultKind::ReconnectHerd,
            Fault::OrdersDuplicated { .. } => FaultKind::OrdersDuplicated,
            Fault::OrdersLost => FaultKind::OrdersLost,
            Fault::ConcurrencyExhausted { .. } => FaultKind::ConcurrencyExhausted,
            Fault::Heal => FaultKind::Heal,
        }
    }

    /// The timeline's line for the fault (the Regions by name). A Region lost for good adds
    /// how many writes went with it, which only the links know.
    pub fn describe(&self, names: &PerRegion<String>) -> String {
        match *self {
            Fault::Isolate(r) => {
                format!("{}: table replica cut off from the other Regions", names[r])
            }
            Fault::Down(r) => format!("{} down", names[r]),
            Fault::Throttle(r) => {
                format!("{} handler throttled (reserved concurrency 0)", names[r])
            }
            Fault::Partition => "replication partitioned".into(),
            Fault::Lag(lag) => format!("replication lag {} ms (AWS)", lag.as_millis()),
            Fault::NeverReturns(r) => format!("{} lost for good", names[r]),
            Fault::AckLost { region, percent } => format!(
                "{}: {percent}% of bids lose their answer after the commit",
                names[region]
            ),
            Fault::StoreThrottle { region, percent } => {
                format!("{}: {percent}% of table requests throttled", names[region])
            }
            Fault::StoreOutage(r) => format!("{}: table unreachable", names[r]),
            Fault::ConnectionsThrottle { region, percent } => format!(
                "{}: {percent}% of @connections posts throttled",
                names[region]
            ),
            Fault::DisconnectDropped(r) => format!("{}: $disconnect dropped", names[r]),
            Fault::Skew { region, ms } => {
                format!("{}: clock skewed {ms} ms (AWS)", names[region])
            }
            Fault::OneWay { from } => {
                format!("replication {} -> {} cut", names[from], names[from.other()])
            }
            Fault::StickyDns(keep) => format!(
                "resolver ignores the TTL, keeps answers {} s (AWS)",
                keep.as_secs()
            ),
            Fault::Slow { region, by } => format!(
                "{}: every integration {} ms slower (AWS)",
                names[region],
                by.as_millis()
            ),
            Fault::ConnectQuota { region, percent } => format!(
                "{}: new-connection quota cut to {percent}% (a herd {}x the lab's users)",
                names[region],
                100 / u32::from(percent.max(1))
            ),
            Fault::WatcherSilent(quiet) => format!(
                "the watcher writes no verdict for {} s (AWS)",
                quiet.as_secs()
            ),
            Fault::InterRegionPartition => {
                "the network between the Regions cut (replication, the watcher's probe); users reach both"
                    .into()
            }
            Fault::HealthFlood { percent } => format!(
                "the health endpoint flooded: {percent}% of the requests reaching the health function refused"
            ),
            Fault::ReconnectHerd { region, clients } => format!(
                "{clients} clients reconnect to {} at once (cold starts, secret reads)",
                names[region]
            ),
            Fault::OrdersDuplicated { copies } => {
                format!("every fail-over order delivered {copies} times")
            }
            Fault::OrdersLost => "every fail-over order lost before the queue".into(),
            Fault::ConcurrencyExhausted { region, lasting } => format!(
                "{}: the account's unreserved concurrency exhausted{} (functions without a reservation throttled)",
                names[region],
                if lasting == AwsDuration::ZERO {
                    String::new()
                } else {
                    format!(" for {} s (AWS)", lasting.as_secs())
                }
            ),
            Fault::Heal => "all faults healed".into(),
        }
    }
}

/// A Region in a fault request: its index (0 = primary, 1 = secondary), its role
/// (`"primary"`) or its name (`"us-east-1"`). The index form is the original API and stays.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum RegionRef {
    Index(usize),
    Name(String),
}

impl Default for RegionRef {
    fn default() -> Self {
        Self::Index(0)
    }
}

impl RegionRef {
    /// The Region among `names` (the lab's Regions).
    pub fn resolve(&self, names: &PerRegion<String>) -> Result<RegionId, String> {
        match self {
            Self::Index(i) => RegionId::from_index(*i)
                .ok_or_else(|| "region must be 0 (primary) or 1 (secondary)".into()),
            Self::Name(role) if role == "primary" => Ok(RegionId::Primary),
            Self::Name(role) if role == "secondary" => Ok(RegionId::Secondary),
            Self::Name(name) => names
                .iter()
                .find(|(_, n)| *n == name)
                .map(|(id, _)| id)
                .ok_or_else(|| {
                    format!(
                        "no Region `{name}` in this lab: its Regions are {} and {} (or 0 and 1)",
                        names[RegionId::Primary],
                        names[RegionId::Secondary]
                    )
                }),
        }
    }
}

/// The largest reconnect herd a request may ask for (each client is a task of the lab).
pub const MAX_HERD_CLIENTS: u32 = 100_000;

/// A fault as the control API takes it (`POST /api/fault`); docs/LAB.md lists the fields.
/// `wsdr fault` sends this type ([`FaultRequest::new`]); the kind stays a string on the wire
/// so that an unknown one gets a 400 that lists the known ones.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct FaultRequest {
    pub kind: String,
    #[serde(default)]
    pub region: RegionRef,
    /// AWS milliseconds (`lag`, `skew` (signed), `sticky-dns`, `slow`, `watcher-silent`,
    /// `concurrency-exhausted` (0: until heal)).
    #[serde(default)]
    pub ms: i64,
    /// `ack-lost`, `store-throttle`, `connections-throttle`: share affected, 0 to 100
    /// (default 50); `connect-quota`: the share of the quota left; `health-flood`: the share of
    /// the health function's requests refused.
    #[serde(default)]
    pub percent: Option<u8>,
    /// `one-way`: the Region whose outgoing replication is cut (default `region`).
    #[serde(default)]
    pub from: Option<RegionRef>,
    /// `reconnect-herd`: how many clients (default 2,000, at most 100,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clients: Option<u32>,
    /// `orders-duplicated`: deliveries of each order (default 3, 1 to 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copies: Option<u8>,
}

impl FaultRequest {
    /// A request for `kind`, spelled as the control API documents it.
    pub fn new(kind: FaultKind, region: RegionRef) -> Self {
        Self {
            kind: kind.name().to_owned(),
            region,
            ms: 0,
            percent: None,
            from: None,
            clients: None,
            copies: None,
        }
    }

    /// The fault this request asks for, against the lab's Region names; errors are for the
    /// HTTP 400 body.
    pub fn fault(&self, names: &PerRegion<String>) -> Result<Fault, String> {
        let Some(kind) = FaultKind::parse(&self.kind) else {
            let known: Vec<&str> = FaultKind::faults().map(FaultKind::name).collect();
            return Err(format!(
                "unknown fault `{}`: {}, heal",
                self.kind,
                known.join(", ")
            ));
        };
        let region = self.region.resolve(names)?;
        let from = self.from.as_ref().map(|f| f.resolve(names)).transpose()?;
        let percent = match self.percent {
            Some(p) if p > 100 => return Err("percent must be 0 to 100".into()),
            Some(p) => p,
            None => 50,
        };
        let non_negative = || {
            u64::try_from(self.ms)
                .map(AwsDuration::from_millis)
                .map_err(|_| format!("`{kind}` needs ms >= 0"))
        };
        Ok(match kind {
            FaultKind::Down => Fault::Down(region),
            FaultKind::Throttle => Fault::Throttle(region),
            FaultKind::Partition => Fault::Partition,
            FaultKind::Lag => Fault::Lag(non_negative()?),
            FaultKind::NeverReturns => Fault::NeverReturns(region),
            FaultKind::AckLost => Fault::AckLost { region, percent },
            FaultKind::StoreThrottle => Fault::StoreThrottle { region, percent },
            FaultKind::StoreOutage => Fault::StoreOutage(region),
            FaultKind::ConnectionsThrottle => Fault::ConnectionsThrottle { region, percent },
            FaultKind::DisconnectDropped => Fault::DisconnectDropped(region),
            FaultKind::Skew => Fault::Skew {
                region,
                ms: self.ms,
            },
            FaultKind::OneWay => Fault::OneWay {
                from: from.unwrap_or(region),
            },
            FaultKind::StickyDns => Fault::StickyDns(non_negative()?),
            FaultKind::Slow => Fault::Slow {
                region,
                by: non_negative()?,
            },
            FaultKind::Isolate => Fault::Isolate(region),
            FaultKind::ConnectQuota => Fault::ConnectQuota { region, percent },
            FaultKind::WatcherSilent => Fault::WatcherSilent(non_negative()?),
            FaultKind::InterRegionPartition => Fault::InterRegionPartition,
            FaultKind::HealthFlood => Fault::HealthFlood { percent },
            FaultKind::ReconnectHerd => Fault::ReconnectHerd {
                region,
                clients: match self.clients {
                    Some(n) if n > MAX_HERD_CLIENTS => {
                        return Err(format!("clients must be at most {MAX_HERD_CLIENTS}"))
                    }
                    Some(n) => n,
                    None => 2_000,
                },
            },
            FaultKind::OrdersDuplicated => Fault::OrdersDuplicated {
                copies: match self.copies {
                    Some(n @ 1..=10) => n,
                    Some(_) => return Err("copies must be 1 to 10".into()),
                    None => 3,
                },
            },
            FaultKind::OrdersLost => Fault::OrdersLost,
            FaultKind::ConcurrencyExhausted => Fault::ConcurrencyExhausted {
                region,
                lasting: non_negative()?,
            },
            FaultKind::Heal => Fault::Heal,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> PerRegion<String> {
        PerRegion::new("us-east-1".into(), "us-west-2".into())
    }

    fn request(json: &str) -> Result<Fault, String> {
        let request: FaultRequest = serde_json::from_str(json).map_err(|e| e.to_string())?;
        request.fault(&names())
    }

    #[test]
    fn every_kind_is_named_as_the_cli_names_it() {
        use clap::ValueEnum;
        for kind in FaultKind::value_variants() {
            let cli = kind.to_possible_value().map(|v| v.get_name().to_owned());
            assert_eq!(cli.as_deref(), Some(kind.name()));
            assert_eq!(FaultKind::parse(kind.name()), Some(*kind));
            // The chaos schedules' older spelling reads as the same kind.
            assert_eq!(
                FaultKind::parse(&kind.name().replace('-', "_")),
                Some(*kind)
            );
            let json = serde_json::to_string(kind).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", kind.name()));
        }
    }

    #[test]
    fn every_kind_a_request_can_name_is_the_kind_it_makes() {
        for kind in FaultKind::faults().chain([FaultKind::Heal]) {
            let fault = request(&format!(r#"{{"kind":"{kind}","ms":100}}"#));
            assert_eq!(fault.map(|f| f.kind()), Ok(kind));
        }
    }

    #[test]
    fn requests_name_regions_by_index_role_or_name() {
        assert_eq!(
            request(r#"{"kind":"down","region":1}"#),
            Ok(Fault::Down(RegionId::Secondary))
        );
        assert_eq!(
            request(r#"{"kind":"down","region":"secondary"}"#),
            Ok(Fault::Down(RegionId::Secondary))
        );
        assert_eq!(
            request(r#"{"kind":"one-way","from":"us-west-2"}"#),
            Ok(Fault::OneWay {
                from: RegionId::Secondary
            })
        );
        assert!(request(r#"{"kind":"down","region":2}"#).is_err());
        assert!(request(r#"{"kind":"down","region":"eu-west-1"}"#)
            .is_err_and(|e| e.contains("us-east-1 and us-west-2")));
    }

    #[test]
    fn bad_requests_say_what_is_wrong() {
        assert!(request(r#"{"kind":"meteor"}"#).is_err_and(|e| e.contains("down, throttle")));
        assert!(request(r#"{"kind":"lag","ms":-5}"#).is_err_and(|e| e.contains("ms >= 0")));
        assert!(request(r#"{"kind":"ack-lost","percent":101}"#).is_err());
        assert_eq!(
            request(r#"{"kind":"reconnect-herd","region":"secondary","clients":300}"#),
            Ok(Fault::ReconnectHerd {
                region: RegionId::Secondary,
                clients: 300
            })
        );
        assert!(request(r#"{"kind":"reconnect-herd","clients":100001}"#)
            .is_err_and(|e| e.contains("at most 100000")));
        assert_eq!(
            request(r#"{"kind":"skew","region":0,"ms":-250}"#),
            Ok(Fault::Skew {
                region: RegionId::Primary,
                ms: -250
            })
        );
    }
}
