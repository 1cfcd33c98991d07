use crate::classify::classify;
use async_trait::async_trait;
use aws_sdk_apigatewaymanagement::primitives::Blob;
use aws_sdk_apigatewaymanagement::Client;
use aws_types::SdkConfig;
use wsdr_core::{ConnectionId, Notifier, Result};

/// Pushes frames through API Gateway's `@connections` API.
///
/// The endpoint must be the execute-api URL of the stage,
/// `https://{apiId}.execute-api.{region}.amazonaws.com/{stage}`: the custom domain does not
/// serve `@connections` (403 / no method found).
#[derive(Debug, Clone)]
pub struct ApiGatewayNotifier {
    client: Client,
}

impl ApiGatewayNotifier {
    pub fn new(sdk: &SdkConfig, callback_url: &str) -> Self {
        // One attempt per call: the fan-out owns retries (full jitter, bounded), and SDK
        // retries underneath would multiply them during a throttling storm.
        let config = aws_sdk_apigatewaymanagement::config::Builder::from(sdk)
            .endpoint_url(callback_url.trim_end_matches('/'))
            .retry_config(aws_smithy_types::retry::RetryConfig::standard().with_max_attempts(1))
            .build();
        Self {
            client: Client::from_conf(config),
        }
    }

    pub fn from_client(client: Client) -> Self {
        Self { client }
    }
}

#[async_trait]
impl Notifier for ApiGatewayNotifier {
    async fn send(&self, connection: &ConnectionId, payload: &[u8]) -> Result<()> {
        self.client
            .post_to_connection()
            .connection_id(connection.as_str())
            .data(Blob::new(payload))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| classify(&e))
    }
}
