#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The evacuator's own binary under a local Lambda Runtime API, on DynamoDB Local: `main`'s
//! wiring (its configuration and SDK clients built from the environment, as Lambda gives
//! them) takes a census of its target Region's connections table as the deployed function
//! does each minute. `cargo test` of the library never runs `main`.

mod common;

use common::{connections_table, dynamo_endpoint};
use std::time::Duration;
use wsdr_core::{ConnectionId, Connections, UserId};
use wsdr_runtime_api::{Answer, Function};

const BINARY: &str = env!("CARGO_BIN_EXE_evacuator");

#[tokio::test]
async fn the_binary_counts_its_target_regions_live_connections() {
    let endpoint = dynamo_endpoint();
    let client = wsdr_aws::local::dynamo_client(&endpoint, "us-east-1");
    let table = connections_table(&client, "runtime").await;
    let records = wsdr_aws::DynamoConnections::new(client, &table, Duration::from_secs(9_000));
    let now = wsdr_core::Clock::now_ms(&wsdr_core::SystemClock);
    for i in 0..3 {
        records
            .register(
                &ConnectionId::new(format!("c{i}=")).unwrap(),
                &UserId::new("alice").unwrap(),
                now,
            )
            .await
            .unwrap();
    }
    let mut function = Function::start(
        BINARY,
        &[
            ("AWS_REGION", "us-west-2"),
            ("AWS_ACCESS_KEY_ID", "local"),
            ("AWS_SECRET_ACCESS_KEY", "local"),
            ("AWS_ENDPOINT_URL_DYNAMODB", &endpoint),
            ("TARGET_REGION", "us-east-1"),
            ("TARGET_CONNECTIONS_TABLE", &table),
            ("TARGET_CALLBACK_URL", "http://127.0.0.1:9/prod"),
        ],
    )
    .await
    .unwrap();
    let answer = function
        .invoke(serde_json::json!({ "census": true }))
        .await
        .unwrap();
    let Answer::Response(census) = &answer else {
        panic!("no census: {answer:?}\n{}", function.stop().await);
    };
    function.stop().await;
    assert_eq!(census["region"], "us-east-1", "{census}");
    assert_eq!(census["connections"], 3, "{census}");
}

#[tokio::test]
async fn the_binary_without_its_target_fails_its_start_and_answers_nothing() {
    let mut function = Function::start(BINARY, &[("AWS_REGION", "us-west-2")])
        .await
        .unwrap();
    let answer = function
        .invoke(serde_json::json!({ "census": true }))
        .await
        .unwrap();
    let logs = function.stop().await;
    assert!(
        matches!(answer, Answer::Exited(Some(code)) if code != 0),
        "{answer:?}\n{logs}"
    );
}
