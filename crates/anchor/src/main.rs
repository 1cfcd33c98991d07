//! The anchor of `make bench`'s cold starts: `lambda_runtime` and an echo, nothing else.

use lambda_runtime::{service_fn, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    lambda_runtime::run(service_fn(
        |event: LambdaEvent<serde_json::Value>| async move {
            Ok::<_, lambda_runtime::Error>(event.payload)
        },
    ))
    .await
}
