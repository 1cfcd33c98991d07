//! health Lambda: wiring only. A function URL in front; Route 53's checkers call it.

use std::sync::Arc;

fn main() -> Result<(), lambda_http::Error> {
    wsdr_lambda::start(run)
}

async fn run() -> Result<(), lambda_http::Error> {
    let config = health::Config::from_env()?;
    let sdk = wsdr_aws::load_sdk_config().await?;
    let ledger = wsdr_aws::HealthRecords::new(wsdr_aws::dynamo_client(&sdk), &config.state_table);
    let endpoint = health::Health::new(config, Arc::new(ledger), Arc::new(wsdr_core::SystemClock));
    lambda_http::run(lambda_http::service_fn(|request| async {
        endpoint
            .handle(request)
            .await
            .map_err(|e| lambda_http::Error::from(e.to_string()))
    }))
    .await
}
