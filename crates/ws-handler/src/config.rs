use crate::Error;
use serde::Deserialize;
use std::time::Duration;
use wsdr_auction::Auction;
use wsdr_chat::Room;
use wsdr_lambda::env::EnvError;
use wsdr_protocol::{Amount, AuctionId, TopicName};

/// Everything the handler reads from its environment, read once at cold start.
#[derive(Debug, Clone)]
pub struct Config {
    /// `STATE_TABLE`: the global state table.
    pub state_table: String,
    /// `CONNECTIONS_TABLE`: this Region's connections table.
    pub connections_table: String,
    /// `WS_CALLBACK_URL`: the execute-api URL of the stage, for `@connections`
    /// (`https://{apiId}.execute-api.{region}.amazonaws.com/{stage}`; not the custom domain).
    pub callback_url: String,
    /// `REGION_LABEL` (default `AWS_REGION`): the Region every frame names.
    pub region_label: String,
    /// `FANOUT_CONCURRENCY` (default 64): `@connections` posts in flight per broadcast.
    pub fanout_concurrency: usize,
    /// `CONNECTION_TTL_SECONDS` (default 9000 = 2.5 h): connection records expire after this.
    pub connection_ttl: Duration,
    /// `SUBPROTOCOL` (default `wsdr`): echoed on `$connect` when the client offers it.
    pub subprotocol: String,
    /// `SEED_AUCTIONS` (default none): JSON array of auctions created, if absent, the first
    /// time one is asked for (never at cold start).
    pub seed_auctions: Vec<Auction>,
    /// `SEED_ROOMS` (default none): JSON array of chat rooms (`{"name", "title", "maxChars"}`)
    /// created, if absent, the first time one is asked for. The chat app serves every
    /// deployment; a room that is neither seeded nor created is `unknown_topic`.
    pub seed_rooms: Vec<(TopicName, Room)>,
    /// `HERD_HINT_QUOTA_PER_SECOND` (default 0 = off): the other Region's new-connection
    /// quota. When set, `state` and `pong` replies advertise the herd window: this Region's
    /// connection census (taken every minute by the evacuator) over this quota.
    pub herd_hint_quota_per_s: Option<f64>,
    /// `CONSISTENCY` (default `eventual`): `strong` when the state table is a multi-Region
    /// strongly consistent (MRSC) global table; bids then go through its ledger head.
    pub consistency: wsdr_core::Consistency,
    /// How the stream's pushes run (`wsdr_core::push`): `PUSH_WINDOW_MS` (default 200, 10 to
    /// 60,000), `PUSH_BUDGET_PER_SECOND` (default 5,000, 1 to 10,000: this Region's share of
    /// the account's API Gateway quota), `PUSH_WORKERS` (default 16, 1 to 256),
    /// `PUSH_PAGE_SIZE` (default 500, 1 to 1,000).
    pub push: wsdr_core::PushSettings,
    /// `PUSH_QUEUE_URL` (default none): the SQS queue of push jobs. Set (as deployed), the
    /// stream's reader only starts pushes and the push workers' function runs the jobs; unset
    /// (a local run), the instance that reads the stream runs its pushes' jobs itself.
    pub push_queue_url: Option<String>,
    /// `FAST_FAILOVER_QUEUE_URL` (default none; the secondary with fast failovers): where
    /// the stream's reader forwards the primary's verdict changes that say fail over, for
    /// the evacuator.
    pub fast_failover_queue_url: Option<String>,
}

/// One entry of `SEED_ROOMS`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SeedRoom {
    pub name: TopicName,
    pub title: String,
    #[serde(default = "five_hundred")]
    pub max_chars: usize,
}

fn five_hundred() -> usize {
    500
}

/// One entry of `SEED_AUCTIONS`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SeedAuction {
    pub id: AuctionId,
    pub item: String,
    pub starting_price: Amount,
    /// Absent, 0 and 1 are all 1 (`Auction`'s increment is at least one unit).
    #[serde(default)]
    pub min_increment: u64,
    #[serde(default)]
    pub closes_at: Option<u64>,
}

impl From<SeedAuction> for Auction {
    fn from(s: SeedAuction) -> Self {
        Auction {
            id: s.id,
            item: s.item,
            starting_price: s.starting_price,
            min_increment: s.min_increment.max(1),
            closes_at: s.closes_at,
        }
    }
}

impl Config {
    pub fn from_env() -> Result<Self, Error> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Read the configuration through `get` (tests pass a map; never `set_var`).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, Error> {
        let env = wsdr_lambda::env::Env::new(get);
        let callback_url = env
            .http_url("WS_CALLBACK_URL", "the execute-api stage URL")?
            .ok_or(EnvError::Missing("WS_CALLBACK_URL"))?;
        let region_label = env
            .get("REGION_LABEL")
            .or_else(|| env.get("AWS_REGION"))
            .ok_or(EnvError::Missing("REGION_LABEL or AWS_REGION"))?;
        let fanout_concurrency = env.number("FANOUT_CONCURRENCY", 64)?;
        if fanout_concurrency == 0 || fanout_concurrency > 1024 {
            return Err(EnvError::Invalid {
                name: "FANOUT_CONCURRENCY",
                reason: "must be 1 to 1024".into(),
            }
            .into());
        }
        let seed_auctions = match env.get("SEED_AUCTIONS") {
            None => Vec::new(),
            Some(json) => serde_json::from_str::<Vec<SeedAuction>>(&json)
                .map_err(|e| EnvError::Invalid {
                    name: "SEED_AUCTIONS",
                    reason: e.to_string(),
                })?
                .into_iter()
                .map(Auction::from)
                .collect(),
        };
        let seed_rooms = match env.get("SEED_ROOMS") {
            None => Vec::new(),
            Some(json) => serde_json::from_str::<Vec<SeedRoom>>(&json)
                .map_err(|e| EnvError::Invalid {
                    name: "SEED_ROOMS",
                    reason: e.to_string(),
                })?
                .into_iter()
                .map(|room| {
                    (
                        room.name,
                        Room {
                            title: room.title,
                            max_chars: room.max_chars,
                        },
                    )
                })
                .collect(),
        };
        Ok(Self {
            state_table: env.required("STATE_TABLE")?,
            connections_table: env.required("CONNECTIONS_TABLE")?,
            callback_url,
            region_label,
            fanout_concurrency: fanout_concurrency as usize,
            connection_ttl: Duration::from_secs(env.number("CONNECTION_TTL_SECONDS", 9_000)?),
            subprotocol: env.get("SUBPROTOCOL").unwrap_or_else(|| "wsdr".into()),
            seed_auctions,
            seed_rooms,
            herd_hint_quota_per_s: match env.number("HERD_HINT_QUOTA_PER_SECOND", 0)? {
                0 => None,
                quota => Some(quota as f64),
            },
            consistency: match env.get("CONSISTENCY") {
                None => wsdr_core::Consistency::Eventual,
                Some(value) => value
                    .parse()
                    .map_err(|e: wsdr_core::Error| EnvError::Invalid {
                        name: "CONSISTENCY",
                        reason: e.to_string(),
                    })?,
            },
            push: push_settings(&env)?,
            push_queue_url: env.http_url("PUSH_QUEUE_URL", "the queue's URL")?,
            fast_failover_queue_url: env.http_url("FAST_FAILOVER_QUEUE_URL", "the queue's URL")?,
        })
    }
}

/// One whole-number setting within `range`, or a clear error naming it.
fn bounded(
    env: &wsdr_lambda::env::Env<impl Fn(&str) -> Option<String>>,
    name: &'static str,
    default: u64,
    range: std::ops::RangeInclusive<u64>,
) -> Result<u64, EnvError> {
    let value = env.number(name, default)?;
    if range.contains(&value) {
        Ok(value)
    } else {
        Err(EnvError::Invalid {
            name,
            reason: format!("must be {} to {}", range.start(), range.end()),
        })
    }
}

fn push_settings(
    env: &wsdr_lambda::env::Env<impl Fn(&str) -> Option<String>>,
) -> Result<wsdr_core::PushSettings, EnvError> {
    Ok(wsdr_core::PushSettings {
        window: Duration::from_millis(bounded(env, "PUSH_WINDOW_MS", 200, 10..=60_000)?),
        budget_per_second: bounded(env, "PUSH_BUDGET_PER_SECOND", 5_000, 1..=10_000)? as f64,
        workers: bounded(env, "PUSH_WORKERS", 16, 1..=256)? as usize,
        page: bounded(env, "PUSH_PAGE_SIZE", 500, 1..=1_000)? as usize,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn with(name: &str, value: &str) -> Result<Config, Error> {
        Config::from_lookup(|key| match key {
            "WS_CALLBACK_URL" => {
                Some("https://abc.execute-api.us-east-1.amazonaws.com/prod".into())
            }
            "REGION_LABEL" => Some("us-east-1".into()),
            "STATE_TABLE" => Some("state".into()),
            "CONNECTIONS_TABLE" => Some("connections".into()),
            key if key == name => Some(value.into()),
            _ => None,
        })
    }

    #[test]
    fn the_fanout_concurrency_is_1_to_1024() {
        for taken in ["1", "1024"] {
            assert!(with("FANOUT_CONCURRENCY", taken).is_ok(), "{taken}");
        }
        for refused in ["0", "1025"] {
            let error = with("FANOUT_CONCURRENCY", refused).unwrap_err().to_string();
            assert!(error.contains("FANOUT_CONCURRENCY"), "{refused}: {error}");
        }
    }

    #[test]
    fn the_push_settings_are_read_each_within_its_bounds() {
        let push = |name: &str, value: &str| with(name, value).map(|config| config.push);
        assert_eq!(
            push("PUSH_WINDOW_MS", "300").unwrap().window,
            Duration::from_millis(300)
        );
        assert_eq!(
            push("PUSH_BUDGET_PER_SECOND", "700")
                .unwrap()
                .budget_per_second,
            700.0
        );
        assert_eq!(push("PUSH_WORKERS", "4").unwrap().workers, 4);
        assert_eq!(push("PUSH_PAGE_SIZE", "50").unwrap().page, 50);
        let defaults = push("UNSET", "").unwrap();
        assert_eq!(
            (defaults.window, defaults.workers, defaults.page),
            (Duration::from_millis(200), 16, 500)
        );
        for (name, refused) in [
            ("PUSH_WINDOW_MS", "9"),
            ("PUSH_BUDGET_PER_SECOND", "10001"),
            ("PUSH_WORKERS", "0"),
            ("PUSH_PAGE_SIZE", "1001"),
        ] {
            let error = push(name, refused).unwrap_err().to_string();
            assert!(error.contains(name), "{name}={refused}: {error}");
        }
    }

    #[test]
    fn a_seeded_auction_without_an_increment_or_with_zero_has_an_increment_of_one() {
        for seed in [
            r#"[{"id":"lot-1","item":"x","startingPrice":100}]"#,
            r#"[{"id":"lot-1","item":"x","startingPrice":100,"minIncrement":0}]"#,
        ] {
            let config = with("SEED_AUCTIONS", seed).unwrap();
            assert_eq!(config.seed_auctions[0].min_increment, 1, "{seed}");
        }
        let config = with(
            "SEED_AUCTIONS",
            r#"[{"id":"lot-1","item":"x","startingPrice":100,"minIncrement":25}]"#,
        )
        .unwrap();
        assert_eq!(config.seed_auctions[0].min_increment, 25);
    }

    #[test]
    fn a_seeded_room_without_max_chars_takes_five_hundred() -> Result<(), serde_json::Error> {
        let room: SeedRoom = serde_json::from_str(r#"{"name":"lobby","title":"Lobby"}"#)?;
        assert_eq!(room.max_chars, 500);
        let set: SeedRoom =
            serde_json::from_str(r#"{"name":"lobby","title":"Lobby","maxChars":40}"#)?;
        assert_eq!(set.max_chars, 40);
        Ok(())
    }
}
