//! ws-handler Lambda: wiring only.

use lambda_runtime::{service_fn, LambdaEvent};

fn main() -> Result<(), lambda_runtime::Error> {
    wsdr_lambda::start(run)
}

async fn run() -> Result<(), lambda_runtime::Error> {
    let config = ws_handler::Config::from_env()?;
    let sdk = wsdr_aws::load_sdk_config().await?;
    let app = ws_handler::app_from_aws(&config, &sdk).await?;
    lambda_runtime::run(service_fn(|event: LambdaEvent<_>| app.handle_any(event))).await
}
