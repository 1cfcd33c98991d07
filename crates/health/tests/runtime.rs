#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The health endpoint's own binary under a local Lambda Runtime API, on DynamoDB Local:
//! `main`'s wiring (its configuration and the state table's client built from the
//! environment, behind `lambda_http`) answers Route 53's check of a function URL from the
//! recorded verdict, as the deployed function does. `cargo test` of the library never runs
//! `main`.

use serde_json::Value;
use wsdr_core::{HealthLedger, VerdictSource};
use wsdr_runtime_api::{Answer, Function};

const BINARY: &str = env!("CARGO_BIN_EXE_health");
const CHECK: &str = include_str!("../../../events/health-check.json");

/// The answer's status and body: every answer is a 200 whose body carries the verdict (the
/// checks match the body's text, docs/DEPLOY.md).
fn answered(answer: &Answer) -> (u64, String) {
    let Answer::Response(response) = answer else {
        panic!("no response: {answer:?}");
    };
    (
        response["statusCode"].as_u64().unwrap_or_default(),
        response["body"].as_str().unwrap_or_default().to_owned(),
    )
}

#[tokio::test]
async fn the_binary_answers_a_checker_with_the_recorded_verdict_of_its_region() {
    let endpoint = std::env::var("DYNAMODB_ENDPOINT").unwrap_or_else(|_| {
        panic!("DYNAMODB_ENDPOINT is not set: run these tests with `make test`, which starts DynamoDB Local")
    });
    let client = wsdr_aws::local::dynamo_client(&endpoint, "us-east-1");
    let table = format!(
        "health-{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    wsdr_aws::schema::create_state_table(&client, &table)
        .await
        .unwrap();
    let records = wsdr_aws::HealthRecords::new(client, &table);
    let now = wsdr_core::Clock::now_ms(&wsdr_core::SystemClock);
    records
        .put_verdict("abc123def4", VerdictSource::Inside, true, now)
        .await
        .unwrap();
    let mut function = Function::start(
        BINARY,
        &[
            ("AWS_REGION", "us-east-1"),
            ("AWS_ACCESS_KEY_ID", "local"),
            ("AWS_SECRET_ACCESS_KEY", "local"),
            ("AWS_ENDPOINT_URL_DYNAMODB", &endpoint),
            ("STATE_TABLE", &table),
            ("API_ID", "abc123def4"),
        ],
    )
    .await
    .unwrap();
    let check: Value = serde_json::from_str(CHECK).unwrap();
    let serving = function.invoke(check.clone()).await.unwrap();
    if answered(&serving) != (200, "verdict=serve\n".to_owned()) {
        panic!("{serving:?}\n{}", function.stop().await);
    }
    records
        .put_verdict("abc123def4", VerdictSource::Inside, false, now)
        .await
        .unwrap();
    let failed_over = function.invoke(check).await.unwrap();
    let logs = function.stop().await;
    // Plain text without Lambda's JSON format.
    let roots = logs
        .lines()
        .find(|line| line.contains("TLS roots"))
        .unwrap_or_else(|| panic!("{logs}"));
    assert!(!roots.trim_start().starts_with('{'), "{roots}");
    assert_eq!(
        answered(&failed_over),
        (200, "verdict=fail-over\n".to_owned())
    );
}

#[tokio::test]
async fn the_binary_without_its_table_fails_its_start_and_answers_nothing() {
    let mut function = Function::start(BINARY, &[("AWS_REGION", "us-east-1")])
        .await
        .unwrap();
    let check: Value = serde_json::from_str(CHECK).unwrap();
    let answer = function.invoke(check).await.unwrap();
    let logs = function.stop().await;
    assert!(
        matches!(answer, Answer::Exited(Some(code)) if code != 0),
        "{answer:?}\n{logs}"
    );
}
