#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! CloudWatchMetrics with the SDK's own mocking tool (aws-smithy-mocks): the exact
//! PutMetricData request the canary sends.

use aws_sdk_cloudwatch::operation::put_metric_data::{PutMetricDataError, PutMetricDataOutput};
use aws_sdk_cloudwatch::types::StandardUnit;
use aws_sdk_cloudwatch::Client;
use aws_smithy_mocks::{mock, mock_client};
use std::sync::{Arc, Mutex};
use wsdr_aws::{CloudWatchMetrics, MetricNames};
use wsdr_core::{HealthDatapoint, Metrics, VerdictDatapoint};

#[tokio::test]
async fn health_datapoint_is_put_with_namespace_dimension_unit_and_standard_resolution() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let capture = seen.clone();
    let rule = mock!(Client::put_metric_data)
        .match_requests(move |req| {
            capture.lock().unwrap().push(req.clone());
            true
        })
        .sequence()
        .output(|| PutMetricDataOutput::builder().build())
        .times(2)
        .build();
    let client = mock_client!(aws_sdk_cloudwatch, [&rule]);
    let metrics = CloudWatchMetrics::new(client, MetricNames::default());
    for (healthy, latency) in [(true, Some(42.5)), (false, None)] {
        metrics
            .put_health(&HealthDatapoint {
                api_id: "abc123def4".into(),
                healthy,
                latency_ms: latency,
                timestamp_ms: 1_796_145_600_000,
            })
            .await
            .unwrap();
    }
    assert_eq!(rule.num_calls(), 2);
    let requests = seen.lock().unwrap().clone();
    let healthy = &requests[0];
    assert_eq!(healthy.namespace(), Some("App"));
    let data = healthy.metric_data();
    assert_eq!(data.len(), 2);
    let health = &data[0];
    assert_eq!(health.metric_name(), Some("WebSocketHealth"));
    assert_eq!(health.value(), Some(1.0));
    assert_eq!(health.unit(), Some(&StandardUnit::Count));
    assert_eq!(health.storage_resolution(), Some(60));
    assert_eq!(
        health.timestamp().unwrap().to_millis().unwrap(),
        1_796_145_600_000
    );
    let dims = health.dimensions();
    assert_eq!(
        (dims.len(), dims[0].name(), dims[0].value()),
        (1, Some("ApiId"), Some("abc123def4"))
    );
    let latency = &data[1];
    assert_eq!(latency.metric_name(), Some("ProbeLatency"));
    assert_eq!(
        (latency.value(), latency.unit()),
        (Some(42.5), Some(&StandardUnit::Milliseconds))
    );
    assert_eq!(latency.storage_resolution(), Some(60));
    let unhealthy = &requests[1].metric_data();
    assert_eq!(
        unhealthy.len(),
        1,
        "no latency datum without a successful probe"
    );
    assert_eq!(unhealthy[0].value(), Some(0.0));
}

#[tokio::test]
async fn names_come_from_configuration() {
    let rule = mock!(Client::put_metric_data)
        .match_requests(|req| {
            req.namespace() == Some("Shop/Realtime")
                && req.metric_data()[0].metric_name() == Some("Health")
        })
        .then_output(|| PutMetricDataOutput::builder().build());
    let client = mock_client!(aws_sdk_cloudwatch, [&rule]);
    let names = MetricNames {
        namespace: "Shop/Realtime".into(),
        health: "Health".into(),
        latency: "Rtt".into(),
        verdict: "Verdict".into(),
    };
    CloudWatchMetrics::new(client, names)
        .put_health(&HealthDatapoint {
            api_id: "x".into(),
            healthy: true,
            latency_ms: None,
            timestamp_ms: 0,
        })
        .await
        .unwrap();
    assert_eq!(rule.num_calls(), 1);
}

#[tokio::test]
async fn put_failure_is_an_error_for_the_caller() {
    let rule = mock!(Client::put_metric_data).then_error(|| {
        PutMetricDataError::InternalServiceFault(
            aws_sdk_cloudwatch::types::error::InternalServiceFault::builder()
                .message("boom")
                .build(),
        )
    });
    let client = mock_client!(aws_sdk_cloudwatch, [&rule]);
    let result = CloudWatchMetrics::new(client, MetricNames::default())
        .put_health(&HealthDatapoint {
            api_id: "x".into(),
            healthy: true,
            latency_ms: None,
            timestamp_ms: 0,
        })
        .await;
    assert!(result.is_err());
}

/// The watcher reads its own last minutes back: Minimum per 60 s period over the whole
/// minutes before the current one, and maps CloudWatch's sparse answer to one slot per minute.
#[tokio::test]
async fn recent_health_asks_for_whole_minutes_and_fills_the_gaps() {
    use aws_sdk_cloudwatch::operation::get_metric_data::GetMetricDataOutput;
    use aws_sdk_cloudwatch::primitives::DateTime;
    use aws_sdk_cloudwatch::types::MetricDataResult;
    const MINUTE: i64 = 60_000;
    let now = 1_796_145_600_000_i64 + 25_000; // 25 s into a minute
    let current = now / MINUTE * MINUTE;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let capture = seen.clone();
    let rule = mock!(Client::get_metric_data)
        .match_requests(move |req| {
            capture.lock().unwrap().push(req.clone());
            true
        })
        .then_output(move || {
            GetMetricDataOutput::builder()
                .metric_data_results(
                    MetricDataResult::builder()
                        .id("health")
                        // Minutes -5, -3 and -1 (the others hold no datapoint).
                        .timestamps(DateTime::from_millis(current - 5 * MINUTE))
                        .timestamps(DateTime::from_millis(current - 3 * MINUTE))
                        .timestamps(DateTime::from_millis(current - MINUTE))
                        .values(1.0)
                        .values(0.0)
                        .values(1.0)
                        .build(),
                )
                .build()
        });
    let client = mock_client!(aws_sdk_cloudwatch, [&rule]);
    let minutes = CloudWatchMetrics::new(client, MetricNames::default())
        .recent_health("abc123def4", 5, now as u64)
        .await
        .unwrap();
    assert_eq!(
        minutes,
        vec![Some(true), None, Some(false), None, Some(true)]
    );
    let request = seen.lock().unwrap()[0].clone();
    assert_eq!(
        request.start_time().unwrap().to_millis().unwrap(),
        current - 5 * MINUTE
    );
    assert_eq!(
        request.end_time().unwrap().to_millis().unwrap(),
        current,
        "the current minute is the caller's"
    );
    let query = &request.metric_data_queries()[0];
    let stat = query.metric_stat().unwrap();
    assert_eq!((stat.period(), stat.stat()), (Some(60), Some("Minimum")));
    let metric = stat.metric().unwrap();
    assert_eq!(
        (metric.namespace(), metric.metric_name()),
        (Some("App"), Some("WebSocketHealth"))
    );
    assert_eq!(metric.dimensions()[0].value(), Some("abc123def4"));
}

#[tokio::test]
async fn verdict_is_put_under_its_own_metric_name() {
    let rule = mock!(Client::put_metric_data)
        .match_requests(|req| {
            let datum = &req.metric_data()[0];
            req.namespace() == Some("App")
                && datum.metric_name() == Some("FailoverVerdict")
                && datum.value() == Some(0.0)
                && datum.storage_resolution() == Some(60)
                && datum.dimensions()[0].value() == Some("abc123def4")
        })
        .then_output(|| PutMetricDataOutput::builder().build());
    let client = mock_client!(aws_sdk_cloudwatch, [&rule]);
    CloudWatchMetrics::new(client, MetricNames::default())
        .put_verdict(&VerdictDatapoint {
            api_id: "abc123def4".into(),
            serve: false,
            timestamp_ms: 1_796_145_600_000,
        })
        .await
        .unwrap();
    assert_eq!(rule.num_calls(), 1);
}
