//! The health function: a `lambda_http` function behind a function URL (`AuthType NONE`), in
//! both Regions, that Route 53's `HTTPS_STR_MATCH` health checks poll every 10 s. It answers
//! one verdict per request from its own Region's replica, where that verdict was written: one
//! item read, no probing (docs/DEPLOY.md, "Who decides").
//!
//! | path | verdict on | written by |
//! |---|---|---|
//! | `/self` | this Region (`API_ID`) | this Region's own canary (inside view) |
//! | `/primary` | the primary (`PRIMARY_API_ID`; the judge only) | the watcher here (outside view) |
//! | `/rehearsal/self`, `/rehearsal/primary` | the same two | `wsdr rehearse` |
//!
//! Every answer is **200** with a body that says which ([`wsdr_core::VerdictAnswer`]): only a
//! verdict written within `STALE_AFTER_SECONDS` that says serve contains `verdict=serve`,
//! the checks' `SearchString`. A silent writer, a missing verdict or an unreadable table is
//! no evidence for the Region, and nothing between this function and Route 53 can turn one
//! answer into another: no cache stands in front of it, and a failed request is a failed
//! check, which Route 53's composition of the two views turns toward the Region that is alive.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Request, Response};
use std::sync::Arc;
use std::time::Duration;
use wsdr_core::{Clock, HealthLedger, HealthRoute, Judged, VerdictAnswer};

/// One setting missing or malformed, or a response that could not be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Env(#[from] wsdr_lambda::env::EnvError),
    #[error("could not build the response: {0}")]
    Response(String),
}

/// The function's configuration, from its environment.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `API_ID`: this Region's WebSocket API (`/self`).
    pub api_id: String,
    /// `PRIMARY_API_ID`: the primary's WebSocket API, on the judge (`/primary`); unset or
    /// `none`: `/primary` answers 404.
    pub primary_api_id: Option<String>,
    /// `STATE_TABLE`: the global state table (this Region's replica).
    pub state_table: String,
    /// `STALE_AFTER_SECONDS` (default 60): an older verdict answers `verdict=stale`, and the
    /// log has `verdict stale` (alarmed: its writer is silent).
    pub stale_after: Duration,
}

impl Config {
    pub fn from_env() -> Result<Self, Error> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, Error> {
        let env = wsdr_lambda::env::Env::new(get);
        Ok(Self {
            api_id: env.required("API_ID")?,
            primary_api_id: env.optional("PRIMARY_API_ID"),
            state_table: env.required("STATE_TABLE")?,
            stale_after: Duration::from_secs(
                env.number("STALE_AFTER_SECONDS", wsdr_core::STALE_AFTER_MS / 1000)?
                    .max(1),
            ),
        })
    }
}

/// The function with its adapters.
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

    /// The answer to `method path` (status, body).
    pub async fn answer(&self, method: &str, path: &str) -> (StatusCode, &'static str) {
        match HealthRoute::of(method, path, self.config.primary_api_id.is_some()) {
            HealthRoute::MethodNotAllowed => (StatusCode::METHOD_NOT_ALLOWED, "GET only\n"),
            HealthRoute::NotFound => (
                StatusCode::NOT_FOUND,
                if self.config.primary_api_id.is_some() {
                    "use /self or /primary\n"
                } else {
                    "use /self\n"
                },
            ),
            HealthRoute::Verdict { judged, source } => {
                let api_id = match judged {
                    Judged::ThisRegion => self.config.api_id.as_str(),
                    // Routed only when the judge knows the primary.
                    Judged::Primary => self.config.primary_api_id.as_deref().unwrap_or_default(),
                };
                let read = self.ledger.verdict(api_id, source).await.map_err(|error| {
                    tracing::error!(%error, api_id, ?source, "verdict unreadable");
                });
                let stale_after_ms =
                    u64::try_from(self.config.stale_after.as_millis()).unwrap_or(u64::MAX);
                let answer = VerdictAnswer::of(read, self.clock.now_ms(), stale_after_ms);
                if answer == VerdictAnswer::Stale {
                    // The alarm's source (template.yaml, VerdictStaleAlarm): a writer is silent.
                    tracing::error!(api_id, ?source, "verdict stale");
                }
                (StatusCode::OK, answer.body())
            }
        }
    }

    /// The Lambda entry point.
    pub async fn handle(&self, request: Request) -> Result<Response<Body>, Error> {
        let (status, body) = self
            .answer(request.method().as_str(), request.uri().path())
            .await;
        Response::builder()
            .status(status)
            .header("content-type", "text/plain")
            .header("cache-control", "no-store")
            .body(Body::from(body))
            .map_err(|e| Error::Response(e.to_string()))
    }
}
