//! The health endpoint: a `lambda_http` function in the secondary (the judge), behind a
//! function URL, that the Route 53 HTTPS health checks of BOTH failover records poll every
//! 10 s. It answers from the fast verdicts recorded in its own Region's replica, where they
//! were decided (the primary's watcher and the secondary's canary both run here), never by
//! probing and never from a copy replicated out of the Region being judged: one item read
//! per request (docs/DEPLOY.md, "Who decides").
//!
//! | path | verdict on |
//! |---|---|
//! | `/primary` | the primary (`PRIMARY_API_ID`): the PRIMARY record's check |
//! | `/secondary` or `/` | this Region (`API_ID`): the SECONDARY record's check |
//!
//! | verdict | answer |
//! |---|---|
//! | fail over, recorded within `STALE_AFTER_SECONDS` | 503 `fail over` |
//! | serve, or none recent (the judge stopped: no evidence against the Region) | 200 `serve` |
//! | unreadable (this Region's table fails) | 503 `verdict unreadable` |
//!
//! This Region itself being down is what Route 53's checkers see as no answer at all, for
//! both records: both unhealthy, and Route 53 answers the primary.

use lambda_http::http::{Method, StatusCode};
use lambda_http::{Body, Request, Response};
use std::sync::Arc;
use std::time::Duration;
use wsdr_core::{Clock, HealthLedger};

/// One setting missing or malformed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Env(#[from] wsdr_lambda::env::EnvError),
    #[error("could not build the response: {0}")]
    Response(String),
}

/// The endpoint's configuration, from its environment.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `API_ID`: this Region's WebSocket API (`/secondary`, `/`).
    pub api_id: String,
    /// `PRIMARY_API_ID`: the primary's WebSocket API (`/primary`); unset: `/primary` answers
    /// 404 (an endpoint that judges only its own Region).
    pub primary_api_id: Option<String>,
    /// `STATE_TABLE`: the global state table (this Region's replica).
    pub state_table: String,
    /// `STALE_AFTER_SECONDS` (default 60): an older verdict is stale (answered, and alarmed:
    /// the answer's body says so and the log has `verdict stale`).
    pub stale_after: Duration,
    /// `STALE_HOLD_SECONDS` (default 21,600: 6 hours): a stale verdict is still answered
    /// (last known status) until it is this old; older, or none ever, answers "serve".
    pub stale_hold: Duration,
}

impl Config {
    pub fn from_env() -> Result<Self, Error> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, Error> {
        let env = wsdr_lambda::env::Env::new(get);
        Ok(Self {
            api_id: env.required("API_ID")?,
            primary_api_id: env
                .get("PRIMARY_API_ID")
                .filter(|id| !id.is_empty() && id != "none"),
            state_table: env.required("STATE_TABLE")?,
            stale_after: Duration::from_secs(env.number("STALE_AFTER_SECONDS", 60)?.max(1)),
            stale_hold: Duration::from_secs(env.number("STALE_HOLD_SECONDS", 21_600)?.max(1)),
        })
    }
}

/// The endpoint with its adapters.
pub struct Health {
    config: Config,
    ledger: Arc<dyn HealthLedger>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Health")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Health {
    pub fn new(config: Config, ledger: Arc<dyn HealthLedger>, clock: Arc<dyn Clock>) -> Self {
        Self {
            config,
            ledger,
            clock,
        }
    }

    /// The status and body for this Region now (`/secondary`, `/`). On the judge (it knows
    /// the primary), a failed secondary still answers 200 while the primary's verdict is
    /// fail over: with both records unhealthy Route 53 would answer the failed primary
    /// (`wsdr_core::secondary_holds`).
    pub async fn answer(&self) -> (StatusCode, &'static str) {
        let own = self.answer_for(&self.config.api_id).await;
        if own.0 == StatusCode::OK {
            return own;
        }
        let Some(primary) = &self.config.primary_api_id else {
            return own;
        };
        let primary_serves = self.answer_for(primary).await.0 == StatusCode::OK;
        if wsdr_core::secondary_holds(false, primary_serves) {
            (
                StatusCode::OK,
                "serve (holding: the primary is failed over)",
            )
        } else {
            own
        }
    }

    /// The status and body for the API `api_id`'s Region now.
    async fn answer_for(&self, api_id: &str) -> (StatusCode, &'static str) {
        match self.ledger.verdict(api_id).await {
            Ok(verdict) => {
                let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
                let age = wsdr_core::VerdictAge {
                    stale_after_ms: ms(self.config.stale_after),
                    hold_ms: ms(self.config.stale_hold),
                };
                let answer = wsdr_core::endpoint_answer(verdict, self.clock.now_ms(), age);
                if answer.stale {
                    // The alarm's source (template.yaml, VerdictStaleAlarm): the watcher is
                    // silent, and the answer is its last verdict.
                    tracing::error!(api_id, serves = answer.serves, "verdict stale");
                }
                match (answer.serves, answer.stale) {
                    (true, false) => (StatusCode::OK, "serve"),
                    (true, true) => (StatusCode::OK, "serve (stale verdict)"),
                    (false, false) => (StatusCode::SERVICE_UNAVAILABLE, "fail over"),
                    (false, true) => (StatusCode::SERVICE_UNAVAILABLE, "fail over (stale verdict)"),
                }
            }
            Err(error) => {
                tracing::error!(%error, "fast verdict unreadable");
                (StatusCode::SERVICE_UNAVAILABLE, "verdict unreadable")
            }
        }
    }

    /// The Lambda entry point: `GET` (or `HEAD`) on `/primary`, `/secondary` or `/`.
    pub async fn handle(&self, request: Request) -> Result<Response<Body>, Error> {
        let (status, body) = match (request.method(), request.uri().path()) {
            (&Method::GET | &Method::HEAD, "/" | "/secondary") => self.answer().await,
            (&Method::GET | &Method::HEAD, "/primary") => match &self.config.primary_api_id {
                Some(primary) => self.answer_for(primary).await,
                None => (StatusCode::NOT_FOUND, "no primary to judge here"),
            },
            (&Method::GET | &Method::HEAD, _) => {
                (StatusCode::NOT_FOUND, "use /primary or /secondary")
            }
            _ => (StatusCode::METHOD_NOT_ALLOWED, "GET only"),
        };
        Response::builder()
            .status(status)
            .header("content-type", "text/plain")
            .header("cache-control", "no-store")
            .body(Body::from(body))
            .map_err(|e| Error::Response(e.to_string()))
    }
}
