//! wsdr's adapters on AWS, named by technology. This is the only crate that depends on
//! `aws-sdk-*`: the domain (`wsdr-core`) sees only its ports.
//!
//! | adapter | port | service |
//! |---|---|---|
//! | [`DynamoStateStore`] | `StateStore` | the global state table (Global Tables) |
//! | [`DynamoConnections`] | `Connections` | the regional connections table (TTL) |
//! | [`ApiGatewayNotifier`] | `Notifier` | API Gateway `@connections` |
//! | [`CloudWatchMetrics`] | `Metrics` | CloudWatch `PutMetricData` |
//!
//! Every SDK error is classified into `wsdr_core::Error` in one place ([`classify`]).

mod classify;
mod connections;
pub mod env;
pub mod local;
mod metrics;
mod notifier;
pub mod schema;
mod state;
pub mod telemetry;

pub use classify::classify;
pub use connections::DynamoConnections;
pub use metrics::{CloudWatchMetrics, MetricNames, STANDARD_RESOLUTION};
pub use notifier::ApiGatewayNotifier;
pub use state::DynamoStateStore;

pub use aws_config::{BehaviorVersion, Region, SdkConfig};
pub use aws_credential_types::provider::SharedCredentialsProvider;
pub use aws_credential_types::Credentials;
pub use aws_sdk_dynamodb::Client as DynamoClient;

/// Errors of setting the adapters up (the per-request errors are `wsdr_core::Error`).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Store(#[from] wsdr_core::Error),
}

/// The SDK configuration from the environment (credentials, Region, and endpoint overrides
/// such as `AWS_ENDPOINT_URL_DYNAMODB` for DynamoDB Local). Load once per cold start.
pub async fn load_sdk_config() -> SdkConfig {
    aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await
}

/// A DynamoDB client from a loaded SDK configuration.
pub fn dynamo_client(sdk: &SdkConfig) -> DynamoClient {
    DynamoClient::new(sdk)
}
