use crate::classify::classify;
use crate::MetricNames;
use async_trait::async_trait;
use aws_sdk_cloudwatch::primitives::DateTime;
use aws_sdk_cloudwatch::types::{Dimension, MetricDatum, StandardUnit};
use aws_sdk_cloudwatch::Client;
use wsdr_core::{Error, HealthDatapoint, Metrics, Result};

/// [`Metrics`] on CloudWatch: `App/WebSocketHealth` (dimension `ApiId`) = 1 or 0, and the
/// probe latency, both at standard (60 s) resolution because Route 53 health checks accept
/// alarms on standard-resolution metrics only.
#[derive(Debug, Clone)]
pub struct CloudWatchMetrics {
    client: Client,
    names: MetricNames,
}

/// Standard resolution: one datapoint per minute.
pub const STANDARD_RESOLUTION: i32 = 60;

impl CloudWatchMetrics {
    pub fn new(client: Client, names: MetricNames) -> Self {
        Self { client, names }
    }

    pub fn from_sdk(sdk: &aws_types::SdkConfig, names: MetricNames) -> Self {
        Self::new(Client::new(sdk), names)
    }
}

#[async_trait]
impl Metrics for CloudWatchMetrics {
    async fn put_health(&self, point: &HealthDatapoint) -> Result<()> {
        let dimension = Dimension::builder()
            .name("ApiId")
            .value(&point.api_id)
            .build();
        let timestamp = DateTime::from_millis(point.timestamp_ms as i64);
        let mut request = self
            .client
            .put_metric_data()
            .namespace(&self.names.namespace)
            .metric_data(
                MetricDatum::builder()
                    .metric_name(&self.names.health)
                    .dimensions(dimension.clone())
                    .value(if point.healthy { 1.0 } else { 0.0 })
                    .unit(StandardUnit::Count)
                    .storage_resolution(STANDARD_RESOLUTION)
                    .timestamp(timestamp)
                    .build(),
            );
        if let Some(latency) = point.latency_ms {
            request = request.metric_data(
                MetricDatum::builder()
                    .metric_name(&self.names.latency)
                    .dimensions(dimension)
                    .value(latency)
                    .unit(StandardUnit::Milliseconds)
                    .storage_resolution(STANDARD_RESOLUTION)
                    .timestamp(timestamp)
                    .build(),
            );
        }
        request
            .send()
            .await
            .map(|_| ())
            .map_err(|e| match classify(&e) {
                Error::Gone => Error::Internal("unexpected 410 from CloudWatch".into()),
                other => other,
            })
    }
}
