//! Clients for local peers: the lab's `@connections` endpoint and DynamoDB Local. They speak
//! plain HTTP on loopback, so they work with or without the `https` feature.

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::{HttpRequest, HttpResponse};
use aws_smithy_runtime_api::client::result::ConnectorError;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::time::Duration;
use wsdr_net::hyper::Connector as NetConnector;
use wsdr_net::Network;

/// A plain-HTTP client for the SDK (HTTP/1.1 over a pooled hyper client, no TLS), for
/// loopback endpoints. The lab's quickest build has no TLS stack at all: aws-lc and the SDK's
/// HTTPS client were a third of its cold compile (docs/LAB.md).
pub fn plain_http_client() -> SharedHttpClient {
    plain_http_client_on(Network::Tcp)
}

/// [`plain_http_client`] over `network` (a simulation's in-memory network).
pub fn plain_http_client_on(network: Network) -> SharedHttpClient {
    SharedHttpClient::new(PlainHttpClient {
        pool: Client::builder(TokioExecutor::new()).build(NetConnector::new(network)),
    })
}

/// Milliseconds since the Unix epoch, from whatever clock the caller keeps.
pub type NowMs = std::sync::Arc<dyn Fn() -> u64 + Send + Sync>;

/// The SDK configuration of a client of a loopback peer (the lab's `@connections` endpoint):
/// its Region name, plain HTTP over `network`, placeholder credentials (the peer checks none),
/// and, when given, the caller's clock for signing and the SDK's own timers, so that a
/// simulation's SDK calls read no system clock.
pub fn local_sdk_config(
    region: &str,
    network: Network,
    now_ms: Option<NowMs>,
) -> aws_types::SdkConfig {
    let builder = aws_types::SdkConfig::builder()
        .behavior_version(crate::BehaviorVersion::latest())
        .region(aws_types::region::Region::new(region.to_owned()))
        .http_client(plain_http_client_on(network))
        .credentials_provider(
            aws_credential_types::provider::SharedCredentialsProvider::new(
                aws_credential_types::Credentials::new("local", "local", None, None, "wsdr-local"),
            ),
        );
    match now_ms {
        Some(now_ms) => builder.time_source(CallerClock(now_ms)).build(),
        None => builder.build(),
    }
}

/// The SDK's time source on the caller's clock.
struct CallerClock(NowMs);

impl std::fmt::Debug for CallerClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CallerClock")
    }
}

impl aws_types::sdk_config::TimeSource for CallerClock {
    fn now(&self) -> std::time::SystemTime {
        std::time::UNIX_EPOCH + Duration::from_millis((self.0)())
    }
}

/// One connection pool for every operation; each operation's timeouts ride on its connector.
#[derive(Debug, Clone)]
struct PlainHttpClient {
    pool: Client<NetConnector, SdkBody>,
}

impl HttpClient for PlainHttpClient {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        _components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        // The pool is shared, so the connect and read timeouts bound the whole exchange up
        // to the response headers together rather than each phase on its own.
        let limit = match (settings.connect_timeout(), settings.read_timeout()) {
            (None, None) => None,
            (connect, read) => Some(connect.unwrap_or_default() + read.unwrap_or_default()),
        };
        SharedHttpConnector::new(PlainHttpConnector {
            pool: self.pool.clone(),
            limit,
        })
    }
}

#[derive(Debug)]
struct PlainHttpConnector {
    pool: Client<NetConnector, SdkBody>,
    limit: Option<Duration>,
}

impl HttpConnector for PlainHttpConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let (pool, limit) = (self.pool.clone(), self.limit);
        HttpConnectorFuture::new(async move {
            let request = request
                .try_into_http1x()
                .map_err(|e| ConnectorError::user(e.into()))?;
            let exchange = pool.request(request);
            let response = match limit {
                Some(limit) => tokio::time::timeout(limit, exchange)
                    .await
                    .map_err(|e| ConnectorError::timeout(e.into()))?,
                None => exchange.await,
            }
            .map_err(classify_exchange_error)?;
            let response = response.map(SdkBody::from_body_1_x);
            HttpResponse::try_from(response).map_err(|e| ConnectorError::other(e.into(), None))
        })
    }
}

/// The SDK retries a request only on errors it knows to be transient: a refused connect, and
/// (as the SDK's own HTTPS client classifies them) a connection closed or a response cut off
/// mid-way, which is how a response lost after the server acted looks.
fn classify_exchange_error(error: hyper_util::client::legacy::Error) -> ConnectorError {
    let lost = std::error::Error::source(&error)
        .and_then(|source| source.downcast_ref::<hyper::Error>())
        .map(|e| [e.is_incomplete_message(), e.is_closed(), e.is_canceled()])
        .unwrap_or_default();
    if worth_retrying(error.is_connect(), lost) {
        ConnectorError::io(error.into())
    } else {
        ConnectorError::other(error.into(), None)
    }
}

/// A failed connect, or a response lost on the way (a message cut off, a connection closed,
/// a request cancelled with its pooled connection): any one of them is worth another try.
fn worth_retrying(connect: bool, [incomplete, closed, canceled]: [bool; 3]) -> bool {
    connect || incomplete || closed || canceled
}

/// A DynamoDB client for a local endpoint such as `http://127.0.0.1:8000`, with static
/// placeholder credentials (DynamoDB Local checks the signature format, not the key).
#[cfg(feature = "dynamodb")]
pub fn dynamo_client(endpoint: &str, region: &str) -> aws_sdk_dynamodb::Client {
    use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(region.to_owned()))
        .endpoint_url(endpoint)
        .http_client(plain_http_client())
        .credentials_provider(Credentials::new("local", "local", None, None, "wsdr-local"))
        .build();
    aws_sdk_dynamodb::Client::from_conf(config)
}

/// An SQS client for a local endpoint (the test suite's SQS peer), with static placeholder
/// credentials.
#[cfg(feature = "sqs")]
pub fn sqs_client(endpoint: &str, region: &str) -> aws_sdk_sqs::Client {
    use aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
    let config = aws_sdk_sqs::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(region.to_owned()))
        .endpoint_url(endpoint)
        .http_client(plain_http_client())
        .credentials_provider(Credentials::new("local", "local", None, None, "wsdr-local"))
        .build();
    aws_sdk_sqs::Client::from_conf(config)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_failed_connect_or_any_sign_of_a_lost_response_is_worth_another_try() {
        assert!(!worth_retrying(false, [false, false, false]));
        assert!(worth_retrying(true, [false, false, false]));
        for lost in [
            [true, false, false],
            [false, true, false],
            [false, false, true],
        ] {
            assert!(worth_retrying(false, lost), "{lost:?}");
        }
    }

    #[test]
    fn a_callers_clock_is_the_sdks_time_and_names_itself() {
        let config = local_sdk_config(
            "us-east-1",
            Network::Tcp,
            Some(std::sync::Arc::new(|| 1_767_225_600_123)),
        );
        let time = config.time_source().unwrap();
        assert_eq!(
            time.now(),
            std::time::UNIX_EPOCH + Duration::from_millis(1_767_225_600_123)
        );
        assert!(format!("{time:?}").contains("CallerClock"), "{time:?}");
        let system = local_sdk_config("us-east-1", Network::Tcp, None);
        assert!(!format!("{:?}", system.time_source()).contains("CallerClock"));
    }
}
