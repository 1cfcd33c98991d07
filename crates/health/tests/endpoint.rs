#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The health endpoint on its real adapter: the fast verdict in a DynamoDB Local state table,
//! read as the function reads it, answered as Route 53's checkers see it.

use health::{Config, Health};
use lambda_http::http::StatusCode;
use std::collections::HashMap;
use std::sync::Arc;
use wsdr_core::memory::ManualClock;
use wsdr_core::HealthLedger;

const NOW: u64 = 1_767_225_600_000;

fn dynamo_endpoint() -> String {
    std::env::var("DYNAMODB_ENDPOINT").unwrap_or_else(|_| {
        panic!("DYNAMODB_ENDPOINT is not set: run these tests with `make test`, which starts DynamoDB Local")
    })
}

fn request(method: &str) -> lambda_http::Request {
    request_to(method, "/")
}

fn request_to(method: &str, path: &str) -> lambda_http::Request {
    lambda_http::http::Request::builder()
        .method(method)
        .uri(format!("https://abc.lambda-url.us-west-2.on.aws{path}"))
        .body(lambda_http::Body::Empty)
        .unwrap()
}

/// A fresh state table in DynamoDB Local, as the stacks create it.
async fn state_table(region: &str, prefix: &str) -> (wsdr_aws::DynamoClient, String) {
    let client = wsdr_aws::local::dynamo_client(&dynamo_endpoint(), region);
    let table = format!(
        "{prefix}-{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    wsdr_aws::schema::create_state_table(&client, &table)
        .await
        .unwrap();
    (client, table)
}

#[tokio::test]
async fn the_endpoint_answers_from_the_recorded_verdict() {
    let (client, table) = state_table("us-east-1", "health").await;
    let env = HashMap::from([
        ("API_ID", "api1".to_owned()),
        ("STATE_TABLE", table.clone()),
    ]);
    let config = Config::from_lookup(|k| env.get(k).cloned()).unwrap();
    let records = Arc::new(wsdr_aws::HealthRecords::new(client.clone(), &table));
    let clock = Arc::new(ManualClock::new(NOW));
    let endpoint = Health::new(config, records.clone(), clock.clone());

    // No verdict yet: serve.
    assert_eq!(endpoint.answer().await, (StatusCode::OK, "serve"));
    // The watcher fails the Region over.
    records.put_verdict("api1", false, NOW).await.unwrap();
    let response = endpoint.handle(request("GET")).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()["cache-control"], "no-store");
    // Another API's verdict is not this one's.
    records.put_verdict("api2", true, NOW).await.unwrap();
    assert_eq!(endpoint.answer().await.0, StatusCode::SERVICE_UNAVAILABLE);
    // The watcher stops: a minute later its failover still holds (last known status: a
    // silent watcher must not send everyone back to a dead Region), flagged as stale.
    clock.advance(61_000);
    assert_eq!(
        endpoint.answer().await,
        (StatusCode::SERVICE_UNAVAILABLE, "fail over (stale verdict)")
    );
    // Past the hold (6 hours by default) it is no evidence any more: serve.
    clock.advance(6 * 3_600_000);
    assert_eq!(
        endpoint.answer().await,
        (StatusCode::OK, "serve (stale verdict)")
    );
    // Fresh again, and serve.
    let later = NOW + 61_000 + 6 * 3_600_000;
    records.put_verdict("api1", true, later).await.unwrap();
    assert_eq!(endpoint.answer().await, (StatusCode::OK, "serve"));
    assert_eq!(
        endpoint.handle(request("HEAD")).await.unwrap().status(),
        StatusCode::OK
    );
    assert_eq!(
        endpoint.handle(request("POST")).await.unwrap().status(),
        StatusCode::METHOD_NOT_ALLOWED
    );

    // This Region's table failing: 503, a Region that cannot read its table cannot serve.
    let env = HashMap::from([
        ("API_ID", "api1".to_owned()),
        ("STATE_TABLE", "no-such-table".to_owned()),
    ]);
    let broken = Health::new(
        Config::from_lookup(|k| env.get(k).cloned()).unwrap(),
        Arc::new(wsdr_aws::HealthRecords::new(client, "no-such-table")),
        clock,
    );
    assert_eq!(
        broken.answer().await,
        (StatusCode::SERVICE_UNAVAILABLE, "verdict unreadable")
    );
    // Settings are checked at cold start.
    assert!(Config::from_lookup(|_| None).is_err());
}

/// The judge answers for both Regions from its own replica: `/primary` reads the primary's
/// verdict (written here by the watcher), `/secondary` and `/` this Region's (holding while
/// the primary is failed over), and a judge told no primary refuses `/primary`.
#[tokio::test]
async fn the_judge_answers_each_record_from_its_own_replica() {
    let (client, table) = state_table("us-west-2", "judge").await;
    let env = HashMap::from([
        ("API_ID", "secondaryApi".to_owned()),
        ("PRIMARY_API_ID", "primaryApi".to_owned()),
        ("STATE_TABLE", table.clone()),
    ]);
    let records = Arc::new(wsdr_aws::HealthRecords::new(client.clone(), &table));
    let clock = Arc::new(ManualClock::new(NOW));
    let judge = Health::new(
        Config::from_lookup(|k| env.get(k).cloned()).unwrap(),
        records.clone(),
        clock.clone(),
    );
    let status = |path: &'static str| {
        let judge = &judge;
        async move {
            judge
                .handle(request_to("GET", path))
                .await
                .unwrap()
                .status()
        }
    };
    for path in ["/primary", "/secondary", "/"] {
        assert_eq!(status(path).await, StatusCode::OK, "{path}: no verdict yet");
    }
    // The watcher fails the primary over: only the PRIMARY record's check sees it.
    records.put_verdict("primaryApi", false, NOW).await.unwrap();
    assert_eq!(status("/primary").await, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(status("/secondary").await, StatusCode::OK);
    assert_eq!(status("/").await, StatusCode::OK);
    // The secondary's own canary fails it while the primary is failed over: the secondary
    // holds (both unhealthy, Route 53 would answer the failed primary).
    records
        .put_verdict("secondaryApi", false, NOW)
        .await
        .unwrap();
    assert_eq!(status("/secondary").await, StatusCode::OK, "holds");
    assert_eq!(status("/primary").await, StatusCode::SERVICE_UNAVAILABLE);
    // The primary serves again: now the SECONDARY record's check sees its own verdict.
    records
        .put_verdict("primaryApi", true, NOW + 1)
        .await
        .unwrap();
    assert_eq!(status("/secondary").await, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(status("/").await, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(status("/elsewhere").await, StatusCode::NOT_FOUND);
    // Without a primary to judge, `/primary` is no answer at all (never a silent 200).
    let env = HashMap::from([
        ("API_ID", "secondaryApi".to_owned()),
        ("PRIMARY_API_ID", "none".to_owned()),
        ("STATE_TABLE", table.clone()),
    ]);
    let alone = Health::new(
        Config::from_lookup(|k| env.get(k).cloned()).unwrap(),
        records,
        clock,
    );
    assert_eq!(
        alone
            .handle(request_to("GET", "/primary"))
            .await
            .unwrap()
            .status(),
        StatusCode::NOT_FOUND
    );
}
