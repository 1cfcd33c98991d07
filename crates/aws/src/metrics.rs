use crate::classify::classify;
use crate::MetricNames;
use async_trait::async_trait;
use aws_sdk_cloudwatch::primitives::DateTime;
use aws_sdk_cloudwatch::types::{
    Dimension, Metric, MetricDataQuery, MetricDatum, MetricStat, ScanBy, StandardUnit,
};
use aws_sdk_cloudwatch::Client;
use wsdr_core::{Error, HealthDatapoint, Metrics, Result, VerdictDatapoint};

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

const MINUTE_MS: u64 = 60_000;

fn classified<E>(error: aws_sdk_cloudwatch::error::SdkError<E>) -> Error
where
    E: aws_sdk_cloudwatch::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match classify(&error) {
        Error::Gone => Error::Internal("unexpected 410 from CloudWatch".into()),
        other => other,
    }
}

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
        request.send().await.map(|_| ()).map_err(classified)
    }

    /// `GetMetricData`, statistic Minimum per 60 s period, over the `minutes` whole minutes
    /// before the current one (CloudWatch aligns standard-resolution periods to the minute).
    async fn recent_health(
        &self,
        api_id: &str,
        minutes: u32,
        now_ms: u64,
    ) -> Result<Vec<Option<bool>>> {
        if minutes == 0 {
            return Ok(Vec::new());
        }
        let current = now_ms / MINUTE_MS;
        let first = current.saturating_sub(u64::from(minutes));
        let metric = Metric::builder()
            .namespace(&self.names.namespace)
            .metric_name(&self.names.health)
            .dimensions(Dimension::builder().name("ApiId").value(api_id).build())
            .build();
        let query = MetricDataQuery::builder()
            .id("health")
            .metric_stat(
                MetricStat::builder()
                    .metric(metric)
                    .period(STANDARD_RESOLUTION)
                    .stat("Minimum")
                    .build(),
            )
            .return_data(true)
            .build();
        let answer = self
            .client
            .get_metric_data()
            .metric_data_queries(query)
            .start_time(DateTime::from_millis((first * MINUTE_MS) as i64))
            .end_time(DateTime::from_millis((current * MINUTE_MS) as i64))
            .scan_by(ScanBy::TimestampAscending)
            .send()
            .await
            .map_err(classified)?;
        let mut out = vec![None; minutes as usize];
        for result in answer.metric_data_results() {
            for (at, value) in result.timestamps().iter().zip(result.values()) {
                // A time before the epoch or past 64-bit milliseconds is in no slot.
                let Some(ms) = at.to_millis().ok().and_then(|ms| u64::try_from(ms).ok()) else {
                    continue;
                };
                if let Some(slot) = (ms / MINUTE_MS)
                    .checked_sub(first)
                    .and_then(|i| out.get_mut(i as usize))
                {
                    let healthy = *value >= 1.0;
                    *slot = Some(slot.unwrap_or(true) && healthy);
                }
            }
        }
        Ok(out)
    }

    async fn put_verdict(&self, point: &VerdictDatapoint) -> Result<()> {
        self.client
            .put_metric_data()
            .namespace(&self.names.namespace)
            .metric_data(
                MetricDatum::builder()
                    .metric_name(&self.names.verdict)
                    .dimensions(
                        Dimension::builder()
                            .name("ApiId")
                            .value(&point.api_id)
                            .build(),
                    )
                    .value(if point.serve { 1.0 } else { 0.0 })
                    .unit(StandardUnit::Count)
                    .storage_resolution(STANDARD_RESOLUTION)
                    .timestamp(DateTime::from_millis(point.timestamp_ms as i64))
                    .build(),
            )
            .send()
            .await
            .map(|_| ())
            .map_err(classified)
    }
}
