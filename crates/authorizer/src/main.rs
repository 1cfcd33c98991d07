//! authorizer Lambda: wiring only.

use lambda_runtime::{service_fn, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    wsdr_lambda::telemetry::init_tracing();
    let config = authorizer::Config::from_env()?;
    let authorizer = authorizer::Authorizer::new(&config).await;
    lambda_runtime::run(service_fn(|event: LambdaEvent<_>| authorizer.handle(event))).await
}
