//! canary Lambda: wiring only. EventBridge invokes it every minute.

use lambda_runtime::service_fn;
use std::sync::Arc;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    wsdr_aws::telemetry::init_tracing();
    let config = canary::Config::from_env()?;
    let sdk = wsdr_aws::load_sdk_config().await;
    let metrics = wsdr_aws::CloudWatchMetrics::from_sdk(&sdk, config.metric_names.clone());
    let canary = canary::Canary::new(config, Arc::new(metrics), Arc::new(wsdr_core::SystemClock));
    lambda_runtime::run(service_fn(|event| canary.handle(event))).await
}
