#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The handler's own binary under a local Lambda Runtime API, on DynamoDB Local and a local
//! `@connections` endpoint: `main`'s wiring (the configuration and SDK clients built from the
//! environment, as Lambda gives them) answers a `$connect` and a `getState` as the deployed
//! function does. `cargo test` of the library never runs `main`.

mod common;

use common::*;
use serde_json::Value;
use wsdr_aws::local::dynamo_client;
use wsdr_runtime_api::{Answer, Function};

const BINARY: &str = env!("CARGO_BIN_EXE_ws-handler");

fn event(json: &str, connection: &str) -> Value {
    serde_json::to_value(event_as(json, connection, "user-alice", None)).unwrap()
}

fn frame(answer: &Answer) -> Value {
    let Answer::Response(response) = answer else {
        panic!("no response: {answer:?}");
    };
    assert_eq!(response["statusCode"], 200, "{response}");
    serde_json::from_str(response["body"].as_str().unwrap_or("null")).unwrap()
}

#[tokio::test]
async fn the_binary_connects_and_answers_get_state_from_dynamodb_naming_its_region() {
    let client = dynamo_client(&dynamo_endpoint(), "us-east-1");
    let (state, connections) = (unique("state"), unique("connections"));
    wsdr_aws::schema::create_state_table(&client, &state)
        .await
        .unwrap();
    wsdr_aws::schema::create_connections_table(&client, &connections)
        .await
        .unwrap();
    let callback = CallbackServer::default();
    let callback_url = callback.start().await;
    let endpoint = dynamo_endpoint();
    let seed =
        r#"[{"id":"lot-1","item":"Stratocaster","startingPrice":100000,"minIncrement":1000}]"#;
    let mut function = Function::start(
        BINARY,
        &[
            ("AWS_REGION", "us-east-1"),
            ("AWS_ACCESS_KEY_ID", "local"),
            ("AWS_SECRET_ACCESS_KEY", "local"),
            ("AWS_ENDPOINT_URL_DYNAMODB", &endpoint),
            ("STATE_TABLE", &state),
            ("CONNECTIONS_TABLE", &connections),
            ("WS_CALLBACK_URL", &callback_url),
            ("REGION_LABEL", "eu-test-1"),
            ("SEED_AUCTIONS", seed),
        ],
    )
    .await
    .unwrap();

    let connected = function.invoke(event(CONNECT, "conn-1")).await.unwrap();
    let Answer::Response(response) = &connected else {
        panic!("no response: {connected:?}\n{}", function.stop().await);
    };
    assert_eq!(response["statusCode"], 200, "{response}");
    let state_frame = frame(&function.invoke(event(GET_STATE, "conn-1")).await.unwrap());
    assert_eq!(state_frame["type"], "state", "{state_frame}");
    assert_eq!(state_frame["region"], "eu-test-1", "{state_frame}");
    assert_eq!(state_frame["auction"]["id"], "lot-1", "{state_frame}");
    assert_eq!(state_frame["you"]["userId"], "user-alice", "{state_frame}");
    function.stop().await;

    // The connection is in the table the binary was given.
    let scanned = client
        .scan()
        .table_name(&connections)
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    assert!(scanned.count > 0, "the $connect wrote no connection");
}

#[tokio::test]
async fn the_binary_without_its_tables_fails_its_start_and_answers_nothing() {
    let mut function = Function::start(BINARY, &[("AWS_REGION", "us-east-1")])
        .await
        .unwrap();
    let answer = function.invoke(event(CONNECT, "conn-1")).await.unwrap();
    let logs = function.stop().await;
    assert!(
        matches!(answer, Answer::Exited(Some(code)) if code != 0),
        "{answer:?}\n{logs}"
    );
    assert!(logs.contains("WS_CALLBACK_URL"), "{logs}");
}
