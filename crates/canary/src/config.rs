use crate::Error;
use std::time::Duration;
use wsdr_aws::MetricNames;
use wsdr_client::TokenPlacement;
use wsdr_lambda::env::EnvError;
use wsdr_protocol::AuctionId;

/// The canary's configuration, read once at cold start.
#[derive(Debug, Clone)]
pub struct Config {
    /// `TARGET_URL`: the WebSocket URL probed: the execute-api URL, or the custom domain's
    /// when `TARGET_CONNECT_TO` pins it to one Region.
    pub target_url: String,
    /// `TARGET_CONNECT_TO` (optional, `host[:port]`): dial this address for `TARGET_URL`'s
    /// name (the judged Region's custom-domain endpoint, `d-….execute-api.<region>.amazonaws.com`),
    /// so the probe goes through that Region's certificate and API mapping whatever the
    /// failover record answers.
    pub target_connect_to: Option<String>,
    /// `EXPECTED_REGION` (default `REGION_LABEL`, then `AWS_REGION`).
    pub expected_region: String,
    /// `API_ID`: the `ApiId` dimension.
    pub api_id: String,
    /// `METRIC_NAMESPACE` (App), `HEALTH_METRIC_NAME` (WebSocketHealth),
    /// `LATENCY_METRIC_NAME` (ProbeLatency), `VERDICT_METRIC_NAME` (FailoverVerdict).
    pub metric_names: MetricNames,
    /// `PROBES_PER_RUN` (default 3): folded into one datapoint by majority.
    pub probes_per_run: u32,
    /// `PROBE_SPACING_SECONDS` (default 15): pause between probes of one run.
    pub probe_spacing: Duration,
    /// `PROBE_TIMEOUT_SECONDS` (default 5): bound on one probe.
    pub probe_timeout: Duration,
    /// `CANARY_AUCTION_ID` (default `canary`): read by the getState round trip.
    pub auction_id: AuctionId,
    /// `CANARY_HS256_SECRET`: signs the canary's own tokens.
    pub secret: Vec<u8>,
    /// `CANARY_ISSUER` (default `wsdr-canary`).
    pub issuer: String,
    /// `JWT_AUDIENCE`.
    pub audience: String,
    /// `TOKEN_PLACEMENT`: `query` (default) or `subprotocol`.
    pub placement: TokenPlacement,
    /// `VERDICT_FAILOVER_DATAPOINTS` (M) and `VERDICT_WINDOW` (N), both or neither: with them
    /// the canary is a watcher, and after each datapoint it publishes its failover verdict
    /// (`VERDICT_METRIC_NAME`, default `FailoverVerdict`) computed from its own last N
    /// datapoints (wsdr_core::verdict).
    pub verdict: Option<wsdr_core::FailoverRule>,
    /// Fast probe rounds for endpoint health checks (`FAST_PROBE_INTERVAL_SECONDS` > 0), or
    /// none.
    pub fast: Option<FastRounds>,
}

/// The fast path: every invocation also runs probe rounds every few seconds for most of its
/// minute, records each round (`HealthLedger`, the state table), and, when it decides, its
/// own fast verdict (`wsdr_core::FastVerdict`), which the health function of the Region it
/// writes in serves.
#[derive(Debug, Clone, PartialEq)]
pub struct FastRounds {
    /// `FAST_PROBE_INTERVAL_SECONDS`: between rounds (1 to 30).
    pub interval: Duration,
    /// `FAST_WINDOW_SECONDS` (default 55): how long one invocation runs rounds (the next
    /// one starts a minute after this one).
    pub window: Duration,
    /// `FAST_VANTAGE`: `inside` (default: a Region's canary probing itself, its records
    /// under `HEALTH#<apiId>`) or `outside` (the watcher in the judge probing the primary,
    /// under `JUDGE#<apiId>`).
    pub source: wsdr_core::VerdictSource,
    /// `FAST_DECIDES` (default `true`): decide and record this vantage point's verdict from
    /// its own rounds; `false` records the rounds alone.
    pub decides: bool,
    /// `FAST_FAIL_AFTER` (3) and `FAST_RECOVER_AFTER` (12): rounds in a row at every vantage
    /// point.
    pub fail_after: u32,
    pub recover_after: u32,
    /// `STATE_TABLE`: where the records go.
    pub state_table: String,
}

impl Config {
    pub fn from_env() -> Result<Self, Error> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, Error> {
        let env = wsdr_lambda::env::Env::new(get);
        let probes_per_run = env.number("PROBES_PER_RUN", 3)?;
        if !(1..=10).contains(&probes_per_run) {
            return Err(EnvError::Invalid {
                name: "PROBES_PER_RUN",
                reason: "must be 1 to 10".into(),
            }
            .into());
        }
        let auction_id = AuctionId::new(
            env.get("CANARY_AUCTION_ID")
                .unwrap_or_else(|| "canary".into()),
        )
        .map_err(|e| EnvError::Invalid {
            name: "CANARY_AUCTION_ID",
            reason: e.message,
        })?;
        let placement = match env.get("TOKEN_PLACEMENT").as_deref() {
            None | Some("query") => TokenPlacement::QueryString,
            Some("subprotocol") => TokenPlacement::Subprotocol,
            Some(other) => {
                return Err(EnvError::Invalid {
                    name: "TOKEN_PLACEMENT",
                    reason: format!("`{other}`: use query or subprotocol"),
                }
                .into())
            }
        };
        let verdict = match (
            env.get("VERDICT_FAILOVER_DATAPOINTS"),
            env.get("VERDICT_WINDOW"),
        ) {
            (None, None) => None,
            (Some(_), Some(_)) => {
                let m = env.number("VERDICT_FAILOVER_DATAPOINTS", 0)?;
                let n = env.number("VERDICT_WINDOW", 0)?;
                let rule = u32::try_from(m)
                    .ok()
                    .zip(u32::try_from(n).ok())
                    .ok_or_else(|| "out of range".to_owned())
                    .and_then(|(m, n)| wsdr_core::FailoverRule::new(m, n));
                Some(rule.map_err(|reason| EnvError::Invalid {
                    name: "VERDICT_FAILOVER_DATAPOINTS",
                    reason,
                })?)
            }
            (Some(_), None) => return Err(EnvError::Missing("VERDICT_WINDOW").into()),
            (None, Some(_)) => return Err(EnvError::Missing("VERDICT_FAILOVER_DATAPOINTS").into()),
        };
        let fast = match env.number("FAST_PROBE_INTERVAL_SECONDS", 0)? {
            0 => None,
            interval if interval > 30 => {
                return Err(EnvError::Invalid {
                    name: "FAST_PROBE_INTERVAL_SECONDS",
                    reason: "must be 1 to 30 (0 or unset: no fast rounds)".into(),
                }
                .into())
            }
            interval => Some(FastRounds {
                interval: Duration::from_secs(interval),
                window: Duration::from_secs(env.number("FAST_WINDOW_SECONDS", 55)?.clamp(1, 840)),
                source: match env.get("FAST_VANTAGE").as_deref() {
                    None | Some("inside") => wsdr_core::VerdictSource::Inside,
                    Some("outside") => wsdr_core::VerdictSource::Judge,
                    Some(other) => {
                        return Err(EnvError::Invalid {
                            name: "FAST_VANTAGE",
                            reason: format!("`{other}`: use inside or outside"),
                        }
                        .into())
                    }
                },
                decides: match env.get("FAST_DECIDES").as_deref() {
                    None | Some("true") => true,
                    Some("false") => false,
                    Some(other) => {
                        return Err(EnvError::Invalid {
                            name: "FAST_DECIDES",
                            reason: format!("`{other}`: use true or false"),
                        }
                        .into())
                    }
                },
                fail_after: env.number("FAST_FAIL_AFTER", 3)?.clamp(1, 100) as u32,
                recover_after: env.number("FAST_RECOVER_AFTER", 12)?.clamp(1, 1000) as u32,
                state_table: env.required("STATE_TABLE")?,
            }),
        };
        let defaults = MetricNames::default();
        Ok(Self {
            target_url: env.required("TARGET_URL")?,
            target_connect_to: env.optional("TARGET_CONNECT_TO"),
            expected_region: env
                .get("EXPECTED_REGION")
                .or_else(|| env.get("REGION_LABEL"))
                .or_else(|| env.get("AWS_REGION"))
                .ok_or(EnvError::Missing("EXPECTED_REGION"))?,
            api_id: env.required("API_ID")?,
            metric_names: MetricNames {
                namespace: env.get("METRIC_NAMESPACE").unwrap_or(defaults.namespace),
                health: env.get("HEALTH_METRIC_NAME").unwrap_or(defaults.health),
                latency: env.get("LATENCY_METRIC_NAME").unwrap_or(defaults.latency),
                verdict: env.get("VERDICT_METRIC_NAME").unwrap_or(defaults.verdict),
            },
            probes_per_run: probes_per_run as u32,
            probe_spacing: Duration::from_secs(env.number("PROBE_SPACING_SECONDS", 15)?),
            probe_timeout: Duration::from_secs(env.number("PROBE_TIMEOUT_SECONDS", 5)?.max(1)),
            auction_id,
            secret: env.required("CANARY_HS256_SECRET")?.into_bytes(),
            issuer: env
                .get("CANARY_ISSUER")
                .unwrap_or_else(|| "wsdr-canary".into()),
            audience: env.required("JWT_AUDIENCE")?,
            placement,
            verdict,
            fast,
        })
    }
}
