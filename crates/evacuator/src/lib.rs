//! The evacuator: one invocation empties one Region. It lists that Region's live
//! connections in its connections table and posts `moveTo` to each through that Region's
//! `@connections` endpoint (wsdr_core::evacuate), paced to the destination's new-connection
//! quota, and answers with the report.
//!
//! It also takes the Region's connection census (`{"census": true}`, every minute on a
//! schedule): one count of the live connections, recorded in the connections table, from
//! which the handler computes the herd window it advertises (wsdr_core::HerdHint). It is the
//! function that already reads the whole connection list.
//!
//! The one aimed at the primary also takes fail-over orders (`FAILOVER_TO`): the judge's
//! verdict change on the primary to "fail over", forwarded by the handler (the stream's one
//! reader) through the fast failovers' queue, or a stream batch an operator replays. Each
//! order runs once (`ORDERS_TABLE`) and is re-checked before each phase ([`order`]): with
//! `FAILOVER_ENDPOINT` it first sends, at once, a move naming the destination's own endpoint
//! (only clients given that URL follow it, with no DNS involved); then it waits
//! `FAILOVER_WAIT_SECONDS` for Route 53 and the TTL and evacuates everyone still there
//! through the global name, once DNS answers the destination.
//!
//! Configured for the Region it empties (`TARGET_*`), not for the Region it runs in: the stack
//! in each Region runs one aimed at its own connections (a planned evacuation: the Region is
//! healthy), and the secondary's stack can run one aimed at the primary (a failover decided
//! outside the primary: its API and table still answer, its handler does not). The invoker
//! takes the Region out of DNS first (`make evacuate`, docs/DEPLOY.md).

pub mod order;
pub mod recheck;

use order::{Checks, Declined, OrderLog};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use wsdr_aws::change_records::FailoverOrder;
use wsdr_core::HealthLedger;
use wsdr_core::{Connections, Evacuation, EvacuationReport, Notifier};

/// One setting missing or malformed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting missing or malformed (the one configuration error of every Lambda).
    #[error(transparent)]
    Config(#[from] wsdr_lambda::env::EnvError),
    #[error("invalid request: {0}")]
    Request(String),
    #[error(transparent)]
    Domain(#[from] wsdr_core::Error),
}

/// The evacuator's configuration, from its environment.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `TARGET_REGION`: the Region whose connections are moved (frames name it).
    pub target_region: String,
    /// `TARGET_AWS_REGION` (default `TARGET_REGION`): the AWS Region its table and API are
    /// in, which the SDK clients sign for.
    pub target_aws_region: String,
    /// `TARGET_CONNECTIONS_TABLE`: that Region's connections table.
    pub connections_table: String,
    /// `TARGET_CALLBACK_URL`: that Region's execute-api stage URL (`@connections`).
    pub callback_url: String,
    /// `DESTINATION_QUOTA_PER_SECOND` (default 500): new connections per second the
    /// destination admits (API Gateway's default account quota).
    pub destination_quota_per_s: f64,
    /// `POSTS_PER_SECOND` (default 2000): `@connections` posts per second at most (they count
    /// against API Gateway's account throttle, 10,000 per second by default).
    pub posts_per_s: f64,
    /// `CONNECTION_TTL_SECONDS` (default 9000), as the handler writes records.
    pub connection_ttl: Duration,
    /// `FAILOVER_TO`: where a failover recorded in the state table's stream (the fast
    /// verdict's `CHANGE` item saying fail over) sends the users. Unset: stream events are
    /// refused.
    pub failover_to: Option<String>,
    /// `FAILOVER_WAIT_SECONDS` (default 90, at most 240): how long such an evacuation waits
    /// for Route 53's endpoint check and the TTL.
    pub failover_wait_seconds: u64,
    /// `FAILOVER_ENDPOINT`: the destination's own endpoint. Set: a stream failover first
    /// sends, at once, a move naming it; clients given that endpoint (wsdr clients with the
    /// Regions' own endpoints) follow it without waiting for DNS, clients that know only the
    /// global name ignore a URL they were not given and follow the move after the wait.
    pub failover_endpoint: Option<String>,
    /// What an order is re-checked against ([`recheck`]); `None` without `STATE_TABLE`
    /// (a planned evacuator: nothing to re-check).
    pub recheck: Option<recheck::RecheckConfig>,
    /// `ORDERS_TABLE`: where each order's id is recorded (a conditional put), so that it runs
    /// once; unset: every delivery runs.
    pub orders_table: Option<String>,
}

impl Config {
    pub fn from_env() -> Result<Self, Error> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, Error> {
        let env = wsdr_lambda::env::Env::new(get);
        let callback_url = env
            .http_url("TARGET_CALLBACK_URL", "the execute-api stage URL")?
            .ok_or(wsdr_lambda::env::EnvError::Missing("TARGET_CALLBACK_URL"))?;
        let positive = |name: &'static str, default: u64| -> Result<f64, Error> {
            match env.number(name, default)? {
                0 => Err(wsdr_lambda::env::EnvError::Invalid {
                    name,
                    reason: "must be at least 1".into(),
                }
                .into()),
                n => Ok(n as f64),
            }
        };
        let target_region = env.required("TARGET_REGION")?;
        Ok(Self {
            target_aws_region: env
                .get("TARGET_AWS_REGION")
                .unwrap_or_else(|| target_region.clone()),
            target_region,
            connections_table: env.required("TARGET_CONNECTIONS_TABLE")?,
            callback_url,
            destination_quota_per_s: positive("DESTINATION_QUOTA_PER_SECOND", 500)?,
            posts_per_s: positive("POSTS_PER_SECOND", 2_000)?,
            connection_ttl: Duration::from_secs(env.number("CONNECTION_TTL_SECONDS", 9_000)?),
            failover_to: env.get("FAILOVER_TO"),
            failover_endpoint: env.optional("FAILOVER_ENDPOINT"),
            recheck: recheck::RecheckConfig::from_env(&env)?,
            orders_table: env.optional("ORDERS_TABLE"),
            failover_wait_seconds: match env.number("FAILOVER_WAIT_SECONDS", 90)? {
                wait if wait > MAX_WAIT_SECONDS => {
                    return Err(wsdr_lambda::env::EnvError::Invalid {
                        name: "FAILOVER_WAIT_SECONDS",
                        reason: format!("must be at most {MAX_WAIT_SECONDS}"),
                    }
                    .into())
                }
                wait => wait,
            },
        })
    }
}

/// An invocation: where the users go, and why.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Request {
    /// The destination Region (as its frames name it).
    pub to: String,
    /// The destination's own endpoint, for clients that know it; absent: the global name.
    #[serde(default)]
    pub endpoint: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
    /// Wait this long before evacuating (at most [`MAX_WAIT_SECONDS`]): when the failover
    /// alarm invokes the evacuator, Route 53's checkers and the resolvers' TTL need that
    /// time before the global name answers the destination.
    #[serde(default)]
    pub wait_seconds: Option<u64>,
}

/// The longest wait an invocation may ask for: the function's 300 s timeout leaves a minute
/// for the evacuation itself (10,000 connections are posted in 5 s).
pub const MAX_WAIT_SECONDS: u64 = 240;

/// The function's timeout (template.yaml) less a margin for listing and answering: the
/// wait and the telling of the untold fit in it.
const TELLING_BUDGET_SECONDS: u64 = 300 - 15;

/// How long the untold are told again at most (less when the wait used the budget).
const TELL_AGAIN_SECONDS: u64 = 60;

/// A census invocation: `{"census": true}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CensusRequest {
    pub census: bool,
}

/// The minute sweep: `{"sweep": true}` ([`Evacuator::sweep`]).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SweepRequest {
    pub sweep: bool,
}

/// Fail-over orders: an SQS batch from the fast failovers' queue (each body a stream record
/// the handler forwarded), or a DynamoDB stream batch (an operator's replay of one). Decoded
/// by `wsdr_aws::change_records`, the handler's own decoding.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct StreamBatch {
    #[serde(rename = "Records")]
    pub records: Vec<serde_json::Value>,
}

impl StreamBatch {
    /// The orders in the batch: the judge's changes on the primary to fail over.
    pub fn orders(&self) -> Vec<FailoverOrder> {
        self.records
            .iter()
            .filter_map(|record| {
                if record["eventSource"] == "aws:sqs" {
                    let message: aws_lambda_events::sqs::SqsMessage =
                        serde_json::from_value(record.clone()).ok()?;
                    FailoverOrder::of_message(&message)
                } else {
                    let record: aws_lambda_events::dynamodb::EventRecord =
                        serde_json::from_value(record.clone()).ok()?;
                    FailoverOrder::of_record(&record)
                }
            })
            .collect()
    }
}

/// Any invocation the function takes.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum Invocation {
    Census(CensusRequest),
    Sweep(SweepRequest),
    Evacuate(Request),
    Stream(StreamBatch),
}

/// A census's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CensusResponse {
    pub region: String,
    pub connections: u64,
    pub counted_at_ms: u64,
}

/// Any answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Answer {
    Census(CensusResponse),
    Evacuated(Response),
    /// A batch with no order in it, or an order that moved nobody (and why).
    Nothing {
        nothing: String,
    },
}

/// The answer to an evacuation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    pub region: String,
    pub to: String,
    pub connections: usize,
    pub window_ms: u64,
    /// One-second slots of the destination's quota the herd was cut into.
    pub slots: usize,
    pub delivered: usize,
    pub gone: usize,
    pub failed: usize,
    pub retries: usize,
    /// Connections never told to move before the plan's deadline (their posts failed).
    pub untold: usize,
    /// Rounds of telling the untold again.
    pub rounds: usize,
    /// Every connection was told or is gone; `false`: the evacuation is incomplete.
    pub complete: bool,
}

impl Response {
    fn new(region: &str, to: &str, report: EvacuationReport) -> Self {
        Self {
            region: region.to_owned(),
            to: to.to_owned(),
            connections: report.connections,
            window_ms: report.window_ms,
            slots: report.slots,
            delivered: report.posts.delivered,
            gone: report.posts.gone,
            failed: report.posts.failed,
            retries: report.posts.retries,
            untold: report.untold,
            rounds: report.rounds,
            complete: report.complete,
        }
    }
}

/// An order that moved nobody, logged and answered.
fn declined(id: &str, why: Declined) -> Answer {
    tracing::warn!(order = %id, "{}", why.reason());
    Answer::Nothing {
        nothing: why.reason().into(),
    }
}

/// The evacuator with its adapters.
pub struct Evacuator {
    config: Config,
    connections: Arc<dyn Connections>,
    notifier: Arc<dyn Notifier>,
    clock: Arc<dyn wsdr_core::Clock>,
    checks: Option<Arc<dyn Checks>>,
    orders: Option<Arc<dyn OrderLog>>,
    /// Where the judge's changes are read (the sweep).
    ledger: Option<Arc<dyn HealthLedger>>,
}

impl std::fmt::Debug for Evacuator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Evacuator")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Evacuator {
    pub fn new(
        config: Config,
        connections: Arc<dyn Connections>,
        notifier: Arc<dyn Notifier>,
        clock: Arc<dyn wsdr_core::Clock>,
    ) -> Self {
        Self {
            config,
            connections,
            notifier,
            clock,
            checks: None,
            orders: None,
            ledger: None,
        }
    }

    /// Re-check every order against these before each phase.
    pub fn with_checks(mut self, checks: Arc<dyn Checks>) -> Self {
        self.checks = Some(checks);
        self
    }

    /// Record every order here, so that each runs once.
    pub fn with_order_log(mut self, orders: Arc<dyn OrderLog>) -> Self {
        self.orders = Some(orders);
        self
    }

    /// Read the judge's changes here (the sweep).
    pub fn with_ledger(mut self, ledger: Arc<dyn HealthLedger>) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// The SDK adapters: the target Region's connections table and `@connections` endpoint,
    /// signed for the target's AWS Region whichever Region this runs in; with
    /// `STATE_TABLE`, the re-checks (this Region's replica, the primary's health function,
    /// DNS); with `ORDERS_TABLE`, the order log (this Region's table).
    pub fn from_aws(config: Config, sdk: &wsdr_aws::SdkConfig) -> Self {
        let here = sdk;
        let target = &sdk
            .to_builder()
            .region(wsdr_aws::Region::new(config.target_aws_region.clone()))
            .build();
        let connections = wsdr_aws::DynamoConnections::new(
            wsdr_aws::dynamo_client(target),
            &config.connections_table,
            config.connection_ttl,
        );
        let notifier = wsdr_aws::ApiGatewayNotifier::new(target, &config.callback_url);
        let ledger = config.recheck.as_ref().map(|recheck| {
            Arc::new(wsdr_aws::HealthRecords::new(
                wsdr_aws::dynamo_client(here),
                &recheck.state_table,
            )) as Arc<dyn HealthLedger>
        });
        let checks = config
            .recheck
            .clone()
            .zip(ledger.clone())
            .map(|(recheck, ledger)| {
                Arc::new(recheck::AwsChecks::new(recheck, ledger)) as Arc<dyn Checks>
            });
        let orders = config.orders_table.clone().map(|table| {
            Arc::new(wsdr_aws::DynamoOrderLog::new(
                wsdr_aws::dynamo_client(here),
                table,
            )) as Arc<dyn OrderLog>
        });
        let mut evacuator = Self::new(
            config,
            Arc::new(connections),
            Arc::new(notifier),
            Arc::new(wsdr_core::SystemClock),
        );
        evacuator.checks = checks;
        evacuator.orders = orders;
        evacuator.ledger = ledger;
        evacuator
    }

    /// One evacuation.
    pub async fn run(&self, request: Request) -> Result<Response, Error> {
        if request.to.trim().is_empty() || request.to == self.config.target_region {
            return Err(Error::Request(format!(
                "`to` must name the other Region, not `{}`",
                request.to
            )));
        }
        if let Some(endpoint) = &request.endpoint {
            if !(endpoint.starts_with("wss://") || endpoint.starts_with("ws://")) {
                return Err(Error::Request(
                    "`endpoint` must be a ws(s):// URL the clients were given".into(),
                ));
            }
        }
        let waited = request.wait_seconds.unwrap_or(0);
        if waited > MAX_WAIT_SECONDS {
            return Err(Error::Request(format!(
                "`waitSeconds` must be at most {MAX_WAIT_SECONDS} (the function times out at 300 s)"
            )));
        }
        // Once per evacuation, whatever the wait (none for a planned one).
        tracing::info!(wait = waited, to = %request.to, "evacuating after the wait for DNS");
        tokio::time::sleep(Duration::from_secs(waited)).await;
        let plan = Evacuation {
            endpoint: request.endpoint.clone(),
            reason: request.reason.unwrap_or_else(|| "maintenance".into()),
            destination_quota_per_s: self.config.destination_quota_per_s,
            posts_per_s: self.config.posts_per_s,
            deadline: Duration::from_secs(TELL_AGAIN_SECONDS.min(TELLING_BUDGET_SECONDS - waited)),
            ..Evacuation::new(self.config.target_region.clone(), request.to.clone())
        };
        let report = wsdr_core::evacuate(
            &self.connections,
            &self.notifier,
            &plan,
            self.clock.now_ms(),
        )
        .await?;
        tracing::info!(
            region = %self.config.target_region,
            to = %request.to,
            connections = report.connections,
            delivered = report.posts.delivered,
            gone = report.posts.gone,
            failed = report.posts.failed,
            untold = report.untold,
            complete = report.complete,
            "{}",
            if report.complete { "evacuation done" } else { "evacuation INCOMPLETE: connections never told to move" }
        );
        Ok(Response::new(
            &self.config.target_region,
            &request.to,
            report,
        ))
    }

    /// Count the target Region's live connections and record the count.
    pub async fn census(&self) -> Result<CensusResponse, Error> {
        let census = self.connections.take_census(self.clock.now_ms()).await?;
        tracing::info!(
            region = %self.config.target_region,
            connections = census.connections,
            "census taken"
        );
        Ok(CensusResponse {
            region: self.config.target_region.clone(),
            connections: census.connections,
            counted_at_ms: census.counted_at_ms,
        })
    }

    /// One invocation of either kind.
    pub async fn invoke(&self, invocation: Invocation) -> Result<Answer, Error> {
        match invocation {
            Invocation::Census(CensusRequest { census: true }) => {
                self.census().await.map(Answer::Census)
            }
            Invocation::Census(CensusRequest { census: false }) => Err(Error::Request(
                "`census` must be true (or send an evacuation: `to`, `reason`)".into(),
            )),
            Invocation::Sweep(SweepRequest { sweep: true }) => self.sweep().await,
            Invocation::Sweep(SweepRequest { sweep: false }) => {
                Err(Error::Request("`sweep` must be true".into()))
            }
            Invocation::Evacuate(request) => self.run(request).await.map(Answer::Evacuated),
            Invocation::Stream(batch) => {
                let Some(to) = self.config.failover_to.clone() else {
                    return Err(Error::Request(
                        "a stream event, but FAILOVER_TO is not set".into(),
                    ));
                };
                // The newest order of the batch (one per message as deployed).
                match batch.orders().into_iter().max_by_key(|o| o.at_ms) {
                    None => Ok(Answer::Nothing {
                        nothing: "no failover in the batch".into(),
                    }),
                    Some(order) => self.run_order(&order, to).await,
                }
            }
        }
    }

    /// One fail-over order, once, re-checked before each phase (`wsdr_core::run_order`).
    async fn run_order(&self, order: &FailoverOrder, to: String) -> Result<Answer, Error> {
        let id = order.id();
        tracing::warn!(region = %self.config.target_region, %to, order = %id, "fail-over order");
        let mover = OrderMoves {
            evacuator: self,
            to,
        };
        let times = wsdr_core::OrderTimes::new(Duration::from_secs(
            self.config.failover_wait_seconds.min(MAX_WAIT_SECONDS),
        ));
        let ports = wsdr_core::OrderPorts {
            log: self.orders.as_deref(),
            checks: self.checks.as_deref(),
            mover: &mover,
            clock: self.clock.as_ref(),
            pause: &wsdr_core::TokioPause,
        };
        match wsdr_core::run_order(&id, &ports, &times).await {
            Ok(wsdr_core::OrderOutcome::Moved(response)) => Ok(Answer::Evacuated(response)),
            Ok(wsdr_core::OrderOutcome::Declined(why)) => Ok(declined(&id, why)),
            Err(error) => Err(Error::Domain(error)),
        }
    }

    /// The minute sweep (`{"sweep": true}`): the judge's last change on the primary, read
    /// from this Region's replica, run as the order it is. An order the stream lost (a batch
    /// dropped after its retries, a message expired) runs within a minute; one already run
    /// is claimed in the order log and moves nobody again. An order is an accelerator; the
    /// sweep is what makes the move happen.
    pub async fn sweep(&self) -> Result<Answer, Error> {
        let (Some(to), Some(ledger), Some(recheck)) = (
            self.config.failover_to.clone(),
            self.ledger.as_ref(),
            self.config.recheck.as_ref(),
        ) else {
            return Err(Error::Request(
                "a sweep needs FAILOVER_TO and STATE_TABLE (the judge's changes)".into(),
            ));
        };
        match ledger
            .last_change(&recheck.primary_api_id, wsdr_core::VerdictSource::Judge)
            .await?
        {
            Some((false, at_ms)) => {
                let order = FailoverOrder {
                    api_id: recheck.primary_api_id.clone(),
                    at_ms,
                };
                self.run_order(&order, to).await
            }
            _ => Ok(Answer::Nothing {
                nothing: "the judge's last change on the primary is not a fail-over".into(),
            }),
        }
    }

    /// The Lambda entry point.
    pub async fn handle(
        &self,
        event: lambda_runtime::LambdaEvent<serde_json::Value>,
    ) -> Result<Answer, lambda_runtime::Error> {
        let invocation: Invocation = serde_json::from_value(event.payload).map_err(|e| {
            lambda_runtime::Error::from(format!(
                "invalid request: {e} (expected {{\"to\": \"<Region>\", \"reason\": \"...\"}}, {{\"census\": true}}, {{\"sweep\": true}} or a DynamoDB stream batch)"
            ))
        })?;
        self.invoke(invocation)
            .await
            .map_err(|e| lambda_runtime::Error::from(e.to_string()))
    }
}

/// An order's two moves, as the evacuator makes them.
struct OrderMoves<'a> {
    evacuator: &'a Evacuator,
    to: String,
}

#[async_trait::async_trait]
impl order::SessionMover for OrderMoves<'_> {
    type Report = Response;

    async fn move_direct(&self) -> Option<wsdr_core::Result<Response>> {
        let endpoint = self.evacuator.config.failover_endpoint.clone()?;
        let moved = self
            .evacuator
            .run(Request {
                to: self.to.clone(),
                endpoint: Some(endpoint),
                reason: Some("failover".into()),
                wait_seconds: None,
            })
            .await;
        if let Ok(direct) = &moved {
            tracing::info!(
                delivered = direct.delivered,
                "direct move sent (clients that know the destination's endpoint)"
            );
        }
        Some(moved.map_err(into_domain))
    }

    async fn move_all(&self) -> wsdr_core::Result<Response> {
        self.evacuator
            .run(Request {
                to: self.to.clone(),
                endpoint: None,
                reason: Some("failover".into()),
                wait_seconds: None,
            })
            .await
            .map_err(into_domain)
    }
}

fn into_domain(error: Error) -> wsdr_core::Error {
    match error {
        Error::Domain(error) => error,
        other => wsdr_core::Error::Internal(other.to_string()),
    }
}
