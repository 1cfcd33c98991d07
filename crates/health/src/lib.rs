//! The health endpoint: one `lambda_http` function per Region, behind a function URL, that a
//! Route 53 HTTPS health check polls every 10 s. It answers from the fast verdict on its
//! Region (`HealthLedger`: the state table, replicated from the watcher outside the Region),
//! never by probing: one item read per request.
//!
//! | verdict on this Region | answer |
//! |---|---|
//! | fail over, recorded within `STALE_AFTER_SECONDS` | 503 `fail over` |
//! | serve, or none recent (the watcher stopped: no evidence against this Region) | 200 `serve` |
//! | unreadable (this Region's table fails) | 503 `verdict unreadable` |
//!
//! The Region itself being down is what Route 53's checkers see as no answer at all.

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
    /// `API_ID`: the WebSocket API whose Region this endpoint speaks for.
    pub api_id: String,
    /// `STATE_TABLE`: the global state table (this Region's replica).
    pub state_table: String,
    /// `STALE_AFTER_SECONDS` (default 60): an older verdict is no evidence.
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
            state_table: env.required("STATE_TABLE")?,
            stale_after: Duration::from_secs(env.number("STALE_AFTER_SECONDS", 60)?.max(1)),
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

    /// The status and body for this Region now.
    pub async fn answer(&self) -> (StatusCode, &'static str) {
        match self.ledger.verdict(&self.config.api_id).await {
            Ok(verdict) => {
                let stale_ms =
                    u64::try_from(self.config.stale_after.as_millis()).unwrap_or(u64::MAX);
                if wsdr_core::endpoint_serves(verdict, self.clock.now_ms(), stale_ms) {
                    (StatusCode::OK, "serve")
                } else {
                    (StatusCode::SERVICE_UNAVAILABLE, "fail over")
                }
            }
            Err(error) => {
                tracing::error!(%error, "fast verdict unreadable");
                (StatusCode::SERVICE_UNAVAILABLE, "verdict unreadable")
            }
        }
    }

    /// The Lambda entry point: `GET` (or `HEAD`) on any path.
    pub async fn handle(&self, request: Request) -> Result<Response<Body>, Error> {
        let (status, body) = match *request.method() {
            Method::GET | Method::HEAD => self.answer().await,
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
