//! wsdr's adapters on AWS, named by technology. This is the only crate that depends on
//! `aws-sdk-*`: the domain (`wsdr-core`) sees only its ports.
//!
//! | adapter | port | service |
//! |---|---|---|
//! | [`DynamoStateStore`] | `StateStore` | the global state table (Global Tables) |
//! | [`DynamoConnections`] | `Connections` | the regional connections table (TTL) |
//! | [`ApiGatewayNotifier`] | `Notifier` | API Gateway `@connections` |
//! | [`CloudWatchMetrics`] | `Metrics` | CloudWatch `PutMetricData` |
//! | [`HealthRecords`] | `HealthLedger` | the global state table (the fast verdict's records) |
//! | [`DynamoPushLeases`] | `PushLeases` | the regional connections table (one lease per auction) |
//! | [`SqsPushQueue`] | `PushQueue` | SQS (the push jobs) |
//!
//! Every SDK error is classified into `wsdr_core::Error` in one place ([`classify`]).
//!
//! Features: `dynamodb` (the tables), `cloudwatch` (metrics) and `https` (the SDK's HTTPS
//! client and environment configuration), all on by default for the Lambdas. The lab turns
//! them off for its quickest build: it needs only `@connections`, over plain HTTP.

pub mod change_records;
mod classify;
#[cfg(feature = "dynamodb")]
mod connections;
#[cfg(feature = "dynamodb")]
pub mod health;
/// Re-exported from `wsdr-lambda` (no SDK), where it lives.
pub mod keys;
pub mod local;
mod metric_names;
#[cfg(feature = "cloudwatch")]
mod metrics;
#[cfg(feature = "apigateway")]
mod notifier;
#[cfg(feature = "dynamodb")]
mod orders;
pub mod push_jobs;
#[cfg(feature = "dynamodb")]
mod push_leases;
#[cfg(feature = "sqs")]
pub mod push_queue;
#[cfg(feature = "dynamodb")]
pub mod schema;
#[cfg(feature = "dynamodb")]
mod state;
#[cfg(feature = "https")]
pub mod tls;

pub use classify::classify;
#[cfg(feature = "dynamodb")]
pub use connections::DynamoConnections;
#[cfg(feature = "dynamodb")]
pub use health::HealthRecords;
pub use metric_names::MetricNames;
#[cfg(feature = "cloudwatch")]
pub use metrics::{CloudWatchMetrics, STANDARD_RESOLUTION};
#[cfg(feature = "apigateway")]
pub use notifier::ApiGatewayNotifier;
#[cfg(feature = "dynamodb")]
pub use orders::DynamoOrderLog;
#[cfg(feature = "dynamodb")]
pub use push_leases::DynamoPushLeases;
#[cfg(feature = "sqs")]
pub use push_queue::{SqsFailoverOrders, SqsPushQueue};
#[cfg(feature = "dynamodb")]
pub use state::{DynamoLedgerStore, DynamoStateStore, IoCounts};

pub use aws_credential_types::provider::SharedCredentialsProvider;
pub use aws_credential_types::Credentials;
#[cfg(feature = "dynamodb")]
pub use aws_sdk_dynamodb::Client as DynamoClient;
pub use aws_smithy_runtime_api::client::behavior_version::BehaviorVersion;
pub use aws_types::region::Region;
pub use aws_types::SdkConfig;

/// Errors of setting the adapters up (the per-request errors are `wsdr_core::Error`).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Store(#[from] wsdr_core::Error),
}

/// The SDK configuration from the environment (credentials, Region, and endpoint overrides
/// such as `AWS_ENDPOINT_URL_DYNAMODB` for DynamoDB Local), with the HTTPS client [`tls`]
/// chooses (`WSDR_TLS_ROOTS`). Load once per cold start.
#[cfg(feature = "https")]
pub async fn load_sdk_config() -> Result<SdkConfig, Error> {
    let roots = tls::Roots::from_env_value(std::env::var(tls::ROOTS_VAR).ok().as_deref())?;
    // Always our client: the SDK's default one would link aws-lc.
    let loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .http_client(tls::https_client(roots)?);
    Ok(loader.load().await)
}

/// A DynamoDB client from a loaded SDK configuration.
#[cfg(feature = "dynamodb")]
pub fn dynamo_client(sdk: &SdkConfig) -> DynamoClient {
    DynamoClient::new(sdk)
}

/// An SQS client from a loaded SDK configuration.
#[cfg(feature = "sqs")]
pub fn sqs_client(sdk: &SdkConfig) -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::new(sdk)
}
