//! The wsdr WebSocket handler Lambda, one function behind every route of the API:
//! `$connect`, `$disconnect`, `bid`, `getState`, `heartbeat` and `$default`.
//!
//! `main.rs` only wires: [`Config::from_env`], the SDK clients ([`app_from_aws`]), then
//! [`App::handle`] for every event. The handler is testable in-process with any adapters.

mod config;
mod handler;

pub use config::{Config, SeedAuction};
pub use handler::App;

#[cfg(feature = "aws")]
use std::sync::Arc;
#[cfg(feature = "aws")]
use wsdr_aws::{ApiGatewayNotifier, DynamoConnections, DynamoStateStore, SdkConfig};
#[cfg(feature = "aws")]
use wsdr_core::{AuctionService, FanoutConfig, SystemClock};

/// Errors of the cold start. Requests themselves never fail (see [`App::handle`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("environment variable {0} is required")]
    MissingVar(&'static str),
    #[error("environment variable {name} is invalid: {reason}")]
    InvalidVar { name: &'static str, reason: String },
    #[error("could not seed auction: {0}")]
    Seed(#[from] wsdr_core::Error),
}

/// Build the handler on DynamoDB and API Gateway: clients built once per cold start, then
/// the configured auctions created if absent (idempotent; safe in both Regions).
#[cfg(feature = "aws")]
pub async fn app_from_aws(config: &Config, sdk: &SdkConfig) -> Result<App, Error> {
    let dynamo = wsdr_aws::dynamo_client(sdk);
    let service = AuctionService::new(
        Arc::new(DynamoStateStore::new(dynamo.clone(), &config.state_table)),
        Arc::new(DynamoConnections::new(
            dynamo,
            &config.connections_table,
            config.connection_ttl,
        )),
        Arc::new(ApiGatewayNotifier::new(sdk, &config.callback_url)),
        Arc::new(SystemClock),
        &config.region_label,
    )
    .with_fanout(FanoutConfig {
        concurrency: config.fanout_concurrency,
        ..FanoutConfig::default()
    })
    // Created on first use, not here: a cold start makes no network call.
    .with_seed_auctions(config.seed_auctions.clone());
    Ok(App::new(service, &config.subprotocol))
}

impl From<wsdr_aws::env::EnvError> for Error {
    fn from(error: wsdr_aws::env::EnvError) -> Self {
        match error {
            wsdr_aws::env::EnvError::Missing(name) => Error::MissingVar(name),
            wsdr_aws::env::EnvError::Invalid { name, reason } => Error::InvalidVar { name, reason },
        }
    }
}
