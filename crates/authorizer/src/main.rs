//! authorizer Lambda: wiring only.

use lambda_runtime::{service_fn, LambdaEvent};

fn main() -> Result<(), lambda_runtime::Error> {
    wsdr_lambda::start(run)
}

async fn run() -> Result<(), lambda_runtime::Error> {
    wsdr_lambda::telemetry::init_tracing();
    // HS256 keys from Secrets Manager (`CANARY_HS256_SECRET_ID`, `JWT_HS256_SECRET_ID`), once
    // per cold start; no SDK configuration is loaded when neither is to be read.
    const KEYS: &[&str] = &["CANARY_HS256_SECRET", "JWT_HS256_SECRET"];
    let env = if wsdr_aws::secrets::needed(KEYS) {
        let sdk = wsdr_aws::load_sdk_config().await?;
        wsdr_aws::secrets::env_with_secrets(&sdk, KEYS).await?
    } else {
        wsdr_aws::secrets::SecretEnv::default()
    };
    let config = authorizer::Config::from_lookup(|name| env.get(name))?;
    let authorizer = authorizer::Authorizer::new(&config).await;
    lambda_runtime::run(service_fn(|event: LambdaEvent<_>| authorizer.handle(event))).await
}
