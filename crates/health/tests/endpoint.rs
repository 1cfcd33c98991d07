#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The health function on its real adapter: the fast verdicts in a DynamoDB Local state table,
//! read as the function reads them, answered as Route 53's string-match checks see them.

use health::{Config, Health};
use lambda_http::http::StatusCode;
use std::collections::HashMap;
use std::sync::Arc;
use wsdr_core::memory::ManualClock;
use wsdr_core::HealthLedger;
use wsdr_core::VerdictSource::{Inside, Judge, RehearsalJudge};

const NOW: u64 = 1_767_225_600_000;

fn dynamo_endpoint() -> String {
    std::env::var("DYNAMODB_ENDPOINT").unwrap_or_else(|_| {
        panic!("DYNAMODB_ENDPOINT is not set: run these tests with `make test`, which starts DynamoDB Local")
    })
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

async fn body(endpoint: &Health, method: &str, path: &str) -> (StatusCode, String) {
    let response = endpoint.handle(request_to(method, path)).await.unwrap();
    assert_eq!(response.headers()["cache-control"], "no-store");
    let status = response.status();
    let text = match response.into_body() {
        lambda_http::Body::Text(text) => text,
        lambda_http::Body::Binary(bytes) => String::from_utf8(bytes).unwrap(),
        lambda_http::Body::Empty => String::new(),
        _ => String::new(),
    };
    (status, text)
}

/// What Route 53's `HTTPS_STR_MATCH` check decides from one answer: a 2xx or 3xx status and
/// the search string in the body.
fn check_passes((status, text): &(StatusCode, String)) -> bool {
    (status.is_success() || status.is_redirection()) && text.contains(wsdr_core::SEARCH_STRING)
}

#[tokio::test]
async fn the_function_answers_its_own_regions_verdict_with_200_and_a_body() {
    let (client, table) = state_table("us-east-1", "health").await;
    let env = HashMap::from([
        ("API_ID", "api1".to_owned()),
        ("STATE_TABLE", table.clone()),
    ]);
    let config = Config::from_lookup(|k| env.get(k).cloned()).unwrap();
    let records = Arc::new(wsdr_aws::HealthRecords::new(client.clone(), &table));
    let clock = Arc::new(ManualClock::new(NOW));
    let endpoint = Health::new(config, records.clone(), clock.clone());

    // No verdict yet: no evidence for the Region, and still a 200.
    let none = body(&endpoint, "GET", "/self").await;
    assert_eq!(none.0, StatusCode::OK);
    assert!(!check_passes(&none), "{none:?}");
    // Its canary says serve.
    records
        .put_verdict("api1", Inside, true, NOW)
        .await
        .unwrap();
    assert!(check_passes(&body(&endpoint, "GET", "/self").await));
    assert!(check_passes(&body(&endpoint, "HEAD", "/self").await));
    // Its canary fails it over: 200, and the check fails on the body.
    records
        .put_verdict("api1", Inside, false, NOW)
        .await
        .unwrap();
    let failed = body(&endpoint, "GET", "/self").await;
    assert_eq!(failed, (StatusCode::OK, "verdict=fail-over\n".to_owned()));
    assert!(!check_passes(&failed));
    // Another API's verdict, or another source's, is not this one's.
    records
        .put_verdict("api2", Inside, true, NOW)
        .await
        .unwrap();
    records.put_verdict("api1", Judge, true, NOW).await.unwrap();
    assert!(!check_passes(&body(&endpoint, "GET", "/self").await));
    // Serve again, then the canary falls silent: a minute later its serve is no evidence.
    records
        .put_verdict("api1", Inside, true, NOW)
        .await
        .unwrap();
    clock.advance(60_000);
    assert!(
        check_passes(&body(&endpoint, "GET", "/self").await),
        "60 s old"
    );
    clock.advance(1);
    let stale = body(&endpoint, "GET", "/self").await;
    assert_eq!(stale.0, StatusCode::OK);
    assert!(stale.1.starts_with("verdict=stale"), "{stale:?}");
    assert!(!check_passes(&stale));
    // Nothing but the verdict paths, and GET or HEAD only.
    assert_eq!(
        body(&endpoint, "GET", "/primary").await.0,
        StatusCode::NOT_FOUND,
        "not the judge"
    );
    for path in ["/", "/secondary", "/a1b2"] {
        assert_eq!(body(&endpoint, "GET", path).await.0, StatusCode::NOT_FOUND);
    }
    assert_eq!(
        body(&endpoint, "POST", "/self").await.0,
        StatusCode::METHOD_NOT_ALLOWED
    );

    // This Region's table failing: 200 `verdict=unreadable`, a failed check.
    let env = HashMap::from([
        ("API_ID", "api1".to_owned()),
        ("STATE_TABLE", "no-such-table".to_owned()),
    ]);
    let broken = Health::new(
        Config::from_lookup(|k| env.get(k).cloned()).unwrap(),
        Arc::new(wsdr_aws::HealthRecords::new(client, "no-such-table")),
        clock,
    );
    let unreadable = body(&broken, "GET", "/self").await;
    assert_eq!(
        unreadable,
        (
            StatusCode::OK,
            "verdict=unreadable (the table failed)\n".to_owned()
        )
    );
    // Settings are checked at cold start.
    assert!(Config::from_lookup(|_| None).is_err());
}

/// The judge answers the primary's outside verdict and its own Region's inside one, each
/// from its own replica; a judge told no primary refuses `/primary`; the rehearsal paths read
/// the rehearsal's own records.
#[tokio::test]
async fn the_judge_answers_the_outside_verdict_on_the_primary() {
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
    let passes = |path: &'static str| {
        let judge = &judge;
        async move { check_passes(&body(judge, "GET", path).await) }
    };
    records
        .put_verdict("primaryApi", Judge, true, NOW)
        .await
        .unwrap();
    records
        .put_verdict("secondaryApi", Inside, true, NOW)
        .await
        .unwrap();
    assert!(passes("/primary").await);
    assert!(passes("/self").await);
    // The primary's own inside verdict, replicated here, is not the judge's.
    records
        .put_verdict("primaryApi", Inside, false, NOW)
        .await
        .unwrap();
    assert!(passes("/primary").await);
    // The watcher fails the primary over: only `/primary` says so.
    records
        .put_verdict("primaryApi", Judge, false, NOW)
        .await
        .unwrap();
    assert!(!passes("/primary").await);
    assert!(passes("/self").await);
    // Rehearsal records are their own: unwritten, they say nothing for the Region.
    assert!(!passes("/rehearsal/primary").await);
    records
        .put_verdict("primaryApi", RehearsalJudge, true, NOW)
        .await
        .unwrap();
    assert!(passes("/rehearsal/primary").await);
    assert!(
        !passes("/primary").await,
        "a rehearsal changes no real verdict"
    );
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
        body(&alone, "GET", "/primary").await.0,
        StatusCode::NOT_FOUND
    );
}
