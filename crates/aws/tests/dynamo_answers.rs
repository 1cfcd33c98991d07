#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! Answers DynamoDB gives and DynamoDB Local does not, from a peer speaking DynamoDB's JSON
//! protocol for the operations called: a batch delete's unprocessed items (a throttled
//! partition), retried after 20, 40 and 80 ms, then reported; a count scan in several pages
//! (past 1 MB of items read), summed to its last page; and a peer that never answers, given
//! up on at the connect and read timeouts together; and an error other than a failed
//! condition, which ends a push lease's begin where it happens.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use axum::Router;
use serde_json::json;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wsdr_core::{ConnectionId, Connections, Error};

const TABLE: &str = "connections";

/// Answers `Query` with one connection's two items, each `BatchWriteItem` with its delete
/// requests left unprocessed `unprocessed` times in a row, a count `Scan` in two pages of 3
/// and 2 (the last one's key empty), `PutItem` with nothing; and for a push lease, the race
/// of a push started between a begin's two updates: the first three `UpdateItem`s fail
/// their condition, `GetItem` shows the push in flight, the fourth (a mark) succeeds.
#[derive(Clone)]
struct Peer {
    unprocessed: u32,
    batches: Arc<AtomicU32>,
    scans: Arc<AtomicU32>,
    updates: Arc<AtomicU32>,
    /// The lease `GetItem` shows: its jobs out and when its spacing ends.
    lease: (u64, u64),
    /// The `UpdateItem` (counted from 0) answered with an error other than a failed
    /// condition: a `ValidationException`, which no retry mends.
    refused_update: Option<u32>,
}

const NOW_MS: u64 = 1_767_225_600_000;

async fn answer(
    State(peer): State<Peer>,
    headers: HeaderMap,
    body: Bytes,
) -> (axum::http::StatusCode, String) {
    let target = headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let answer = match target {
        "DynamoDB_20120810.Query" => json!({
            "Items": [
                { "pk": { "S": "c=" }, "sk": { "S": "META" } },
                { "pk": { "S": "c=" }, "sk": { "S": "SUB#auction#lot-1" } }
            ],
            "Count": 2, "ScannedCount": 2
        })
        .to_string(),
        "DynamoDB_20120810.BatchWriteItem" => {
            let asked: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let call = peer.batches.fetch_add(1, Ordering::SeqCst);
            let left = if call < peer.unprocessed {
                asked["RequestItems"].clone()
            } else {
                json!({})
            };
            json!({ "UnprocessedItems": left }).to_string()
        }
        "DynamoDB_20120810.Scan" => {
            let asked: serde_json::Value = serde_json::from_slice(&body).unwrap();
            peer.scans.fetch_add(1, Ordering::SeqCst);
            if asked.get("ExclusiveStartKey").is_none() {
                json!({ "Count": 3, "ScannedCount": 900,
                        "LastEvaluatedKey": { "pk": { "S": "c3=" }, "sk": { "S": "META" } } })
            } else {
                json!({ "Count": 2, "ScannedCount": 600, "LastEvaluatedKey": {} })
            }
            .to_string()
        }
        "DynamoDB_20120810.PutItem" => "{}".to_owned(),
        "DynamoDB_20120810.UpdateItem" => {
            let call = peer.updates.fetch_add(1, Ordering::SeqCst);
            if peer.refused_update == Some(call) {
                return (
                    axum::http::StatusCode::BAD_REQUEST,
                    json!({
                        "__type": "com.amazon.coral.validate#ValidationException",
                        "message": "One or more parameter values were invalid"
                    })
                    .to_string(),
                );
            }
            if call < 3 {
                return (
                    axum::http::StatusCode::BAD_REQUEST,
                    json!({
                        "__type": "com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException",
                        "message": "The conditional request failed"
                    })
                    .to_string(),
                );
            }
            json!({ "Attributes": {} }).to_string()
        }
        "DynamoDB_20120810.GetItem" => json!({ "Item": {
            "pk": { "S": "#push#auction:a1" }, "sk": { "S": "PUSH" },
            "jobs": { "N": peer.lease.0.to_string() }, "nextMs": { "N": peer.lease.1.to_string() }
        } })
        .to_string(),
        other => panic!("unexpected operation {other}"),
    };
    (axum::http::StatusCode::OK, answer)
}

async fn peer(unprocessed: u32) -> (String, Peer) {
    peer_with_lease(unprocessed, (3, NOW_MS + 1_000)).await
}

async fn peer_with_lease(unprocessed: u32, lease: (u64, u64)) -> (String, Peer) {
    peer_refusing(unprocessed, lease, None).await
}

async fn peer_refusing(
    unprocessed: u32,
    lease: (u64, u64),
    refused_update: Option<u32>,
) -> (String, Peer) {
    let peer = Peer {
        lease,
        refused_update,
        unprocessed,
        batches: Arc::default(),
        scans: Arc::default(),
        updates: Arc::default(),
    };
    let app = Router::new()
        .route("/", post(answer))
        .with_state(peer.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{address}"), peer)
}

fn registry(endpoint: &str) -> wsdr_aws::DynamoConnections {
    wsdr_aws::DynamoConnections::new(
        wsdr_aws::local::dynamo_client(endpoint, "us-east-1"),
        TABLE,
        Duration::from_secs(9_000),
    )
}

#[tokio::test]
async fn unprocessed_deletes_are_sent_again_until_done() {
    let (endpoint, peer) = peer(1).await;
    registry(&endpoint)
        .remove(&ConnectionId::new("c=").unwrap())
        .await
        .unwrap();
    assert_eq!(peer.batches.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn deletes_left_unprocessed_after_three_retries_are_reported_throttled() {
    let (endpoint, peer) = peer(u32::MAX).await;
    let started = Instant::now();
    let result = registry(&endpoint)
        .remove(&ConnectionId::new("c=").unwrap())
        .await;
    assert!(
        matches!(&result, Err(Error::Throttled(why)) if why.contains("2 connection items left unprocessed")),
        "{result:?}"
    );
    assert_eq!(
        peer.batches.load(Ordering::SeqCst),
        4,
        "the first send and three retries"
    );
    // Paused 20, 40 and 80 ms between them (a busy machine only adds to it).
    assert!(
        started.elapsed() >= Duration::from_millis(140),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_census_sums_every_page_of_its_count_scan_and_stops_at_an_empty_key() {
    let (endpoint, peer) = peer(0).await;
    let census = tokio::time::timeout(
        Duration::from_secs(10),
        registry(&endpoint).take_census(1_767_225_600_000),
    )
    .await
    .expect("the scan ends at its last page")
    .unwrap();
    assert_eq!(census.connections, 5);
    assert_eq!(peer.scans.load(Ordering::SeqCst), 2);
}

/// The local client's exchange is bounded by the connect and read timeouts together (one
/// pooled exchange up to the response's headers).
#[tokio::test]
async fn a_peer_that_never_answers_is_given_up_on_after_both_timeouts() {
    use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    // Accepts and holds every connection, answering nothing.
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(format!("http://{address}"))
        .http_client(wsdr_aws::local::plain_http_client())
        .credentials_provider(Credentials::new("local", "local", None, None, "test"))
        .timeout_config(
            aws_smithy_types::timeout::TimeoutConfig::builder()
                .connect_timeout(Duration::from_millis(200))
                .read_timeout(Duration::from_millis(100))
                .build(),
        )
        .retry_config(aws_smithy_types::retry::RetryConfig::disabled())
        .build();
    let client = aws_sdk_dynamodb::Client::from_conf(config);
    let started = Instant::now();
    let result = client.list_tables().send().await;
    let took = started.elapsed();
    assert!(result.is_err(), "{result:?}");
    assert!(took >= Duration::from_millis(290), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

/// A push started between a begin's two updates (by another instance), or one whose
/// spacing ends at this very millisecond: the begin reads the lease, finds it changed, and
/// tries again, marking the change; it never answers "not before" for a lease that has jobs
/// out or whose spacing is over.
#[tokio::test]
async fn a_begin_that_lost_both_conditions_to_a_changed_lease_tries_again_and_marks() {
    use wsdr_core::push::{Begin, PushLeases};
    for lease in [(3, NOW_MS + 1_000), (0, NOW_MS)] {
        let (endpoint, peer) = peer_with_lease(0, lease).await;
        let leases = wsdr_aws::DynamoPushLeases::new(
            wsdr_aws::local::dynamo_client(&endpoint, "us-east-1"),
            TABLE,
        );
        let topic = wsdr_protocol::Topic::parse("auction:a1").unwrap();
        assert_eq!(
            leases.begin(&topic, NOW_MS, 200).await.unwrap(),
            Begin::Marked,
            "{lease:?}"
        );
        assert_eq!(peer.updates.load(Ordering::SeqCst), 4, "{lease:?}");
    }
}

/// An error other than a failed condition ends a begin at once, on the start's update as on
/// the mark's: it is the caller's to retry or report, never read as "a push is in flight".
#[tokio::test]
async fn an_error_other_than_a_failed_condition_ends_the_begin_where_it_happens() {
    use wsdr_core::push::PushLeases;
    // The start refused (update 0), or the start's condition failed and the mark refused (1).
    for refused in [0, 1] {
        let (endpoint, peer) = peer_refusing(0, (3, NOW_MS + 1_000), Some(refused)).await;
        let leases = wsdr_aws::DynamoPushLeases::new(
            wsdr_aws::local::dynamo_client(&endpoint, "us-east-1"),
            TABLE,
        );
        let topic = wsdr_protocol::Topic::parse("auction:a1").unwrap();
        let answer = leases.begin(&topic, NOW_MS, 200).await;
        assert!(answer.is_err(), "update {refused} refused: {answer:?}");
        assert_eq!(
            peer.updates.load(Ordering::SeqCst),
            refused + 1,
            "update {refused} refused: nothing sent after it"
        );
    }
}
