//! authorizer Lambda: wiring only.

use lambda_runtime::{service_fn, LambdaEvent};

fn main() -> Result<(), lambda_runtime::Error> {
    wsdr_lambda::start(run)
}

async fn run() -> Result<(), lambda_runtime::Error> {
    // HS256 keys from Secrets Manager (`CANARY_HS256_SECRET_ID`, `JWT_HS256_SECRET_ID`), once
    // per cold start, read concurrently with one signed request each (no AWS SDK).
    let env = wsdr_secrets::SecretEnv::read(
        &["CANARY_HS256_SECRET", "JWT_HS256_SECRET"],
        |name| std::env::var(name).ok(),
        std::sync::Arc::new(rustls::crypto::ring::default_provider()),
    )
    .await?;
    let config = authorizer::Config::from_lookup(|name| env.get(name))?;
    let authorizer = authorizer::Authorizer::new(&config).await;
    lambda_runtime::run(service_fn(|event: LambdaEvent<_>| authorizer.handle(event))).await
}
