//! canary Lambda: wiring only. EventBridge invokes it every minute; with
//! `FAST_PROBE_INTERVAL_SECONDS` each invocation also runs fast rounds (the state table).

use lambda_runtime::service_fn;
use std::sync::Arc;

fn main() -> Result<(), lambda_runtime::Error> {
    wsdr_lambda::start(run)
}

async fn run() -> Result<(), lambda_runtime::Error> {
    // The SDK's configuration and the signing key from Secrets Manager
    // (`CANARY_HS256_SECRET_ID`), once per cold start, side by side.
    let (sdk, env) = tokio::join!(
        wsdr_aws::load_sdk_config(),
        wsdr_secrets::SecretEnv::read(
            &["CANARY_HS256_SECRET"],
            |name| std::env::var(name).ok(),
            Arc::new(rustls::crypto::ring::default_provider())
        )
    );
    let (sdk, env) = (sdk?, env?);
    let config = canary::Config::from_lookup(|name| env.get(name))?;
    let metrics = wsdr_aws::CloudWatchMetrics::from_sdk(&sdk, config.metric_names.clone());
    let ledger = config
        .fast
        .as_ref()
        .map(|fast| wsdr_aws::HealthRecords::new(wsdr_aws::dynamo_client(&sdk), &fast.state_table));
    let canary = canary::Canary::new(config, Arc::new(metrics), Arc::new(wsdr_core::SystemClock));
    // Fast rounds (endpoint health checks) record to the state table.
    let canary = match ledger {
        Some(ledger) => canary.with_health_ledger(Arc::new(ledger)),
        None => canary,
    };
    lambda_runtime::run(service_fn(|event| canary.handle(event))).await
}
