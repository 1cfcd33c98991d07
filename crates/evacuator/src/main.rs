//! evacuator Lambda: wiring only. Invoked by `make evacuate` (or an operator) with
//! `{"to": "<Region>", "reason": "..."}`.

use lambda_runtime::{service_fn, LambdaEvent};

fn main() -> Result<(), lambda_runtime::Error> {
    wsdr_lambda::start(run)
}

async fn run() -> Result<(), lambda_runtime::Error> {
    let config = evacuator::Config::from_env()?;
    let sdk = wsdr_aws::load_sdk_config().await?;
    let evacuator = evacuator::Evacuator::from_aws(config, &sdk);
    lambda_runtime::run(service_fn(|event: LambdaEvent<_>| evacuator.handle(event))).await
}
