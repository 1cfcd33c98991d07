#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The evacuator on its real adapters: a DynamoDB Local connections table (written by the
//! handler's own adapter) and a local `@connections` endpoint called by the real
//! `aws-sdk-apigatewaymanagement` client.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use evacuator::{Answer, Config, Evacuator, Invocation, Request};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wsdr_core::{ConnectionId, Connections, SystemClock, UserId};

#[derive(Clone, Default)]
struct Callback {
    posts: Arc<Mutex<Vec<(String, String)>>>,
    gone: Arc<Mutex<HashSet<String>>>,
}

async fn post_to(
    State(s): State<Callback>,
    Path((_stage, id)): Path<(String, String)>,
    body: String,
) -> StatusCode {
    if s.gone.lock().unwrap().contains(&id) {
        return StatusCode::GONE;
    }
    s.posts.lock().unwrap().push((id, body));
    StatusCode::OK
}

async fn callback_server(state: Callback) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new()
        .route("/{stage}/@connections/{id}", post(post_to))
        .with_state(state);
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/prod")
}

fn dynamo_endpoint() -> String {
    std::env::var("DYNAMODB_ENDPOINT").unwrap_or_else(|_| {
        panic!("DYNAMODB_ENDPOINT is not set: run these tests with `make test`, which starts DynamoDB Local")
    })
}

fn local_sdk() -> wsdr_aws::SdkConfig {
    wsdr_aws::SdkConfig::builder()
        .behavior_version(wsdr_aws::BehaviorVersion::latest())
        .region(wsdr_aws::Region::new("us-west-2"))
        .endpoint_url(dynamo_endpoint())
        .http_client(wsdr_aws::local::plain_http_client())
        .credentials_provider(wsdr_aws::SharedCredentialsProvider::new(
            wsdr_aws::Credentials::new("local", "local", None, None, "test"),
        ))
        .build()
}

#[tokio::test]
async fn every_live_connection_of_the_target_region_is_told_to_move_once() {
    let client = wsdr_aws::local::dynamo_client(&dynamo_endpoint(), "us-east-1");
    let table = format!(
        "evacuate-{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    wsdr_aws::schema::create_connections_table(&client, &table)
        .await
        .unwrap();
    // The handler's own adapter writes the records, as in AWS.
    let records = wsdr_aws::DynamoConnections::new(client, &table, Duration::from_secs(9_000));
    let now = wsdr_core::Clock::now_ms(&SystemClock);
    let user = UserId::new("alice").unwrap();
    for i in 0..12 {
        records
            .register(&ConnectionId::new(format!("c{i}=")).unwrap(), &user, now)
            .await
            .unwrap();
    }
    // One that expired by TTL but is not deleted yet: not told.
    records
        .register(&ConnectionId::new("old=").unwrap(), &user, now - 9_001_000)
        .await
        .unwrap();
    let callback = Callback::default();
    callback.gone.lock().unwrap().insert("c3=".into());
    let url = callback_server(callback.clone()).await;
    let env = HashMap::from([
        ("TARGET_REGION", "us-east-1".to_owned()),
        ("TARGET_CONNECTIONS_TABLE", table.clone()),
        ("TARGET_CALLBACK_URL", url),
        ("DESTINATION_QUOTA_PER_SECOND", "4".to_owned()),
    ]);
    let config = Config::from_lookup(|k| env.get(k).cloned()).unwrap();
    // Runs "in" us-west-2, aimed at us-east-1: the clients sign for the target.
    let evacuator = Evacuator::from_aws(config, &local_sdk());
    let answer = evacuator
        .run(Request {
            to: "us-west-2".into(),
            endpoint: None,
            reason: Some("failover".into()),
            wait_seconds: None,
        })
        .await
        .unwrap();
    assert_eq!(answer.connections, 12);
    assert_eq!(answer.delivered, 11);
    assert_eq!(answer.gone, 1, "c3= answered 410");
    assert_eq!(answer.window_ms, 3_000, "12 connections at 4 per second");
    assert_eq!(answer.slots, 3, "one slot per second of the window");
    let posts = callback.posts.lock().unwrap().clone();
    assert_eq!(posts.len(), 11);
    let ids: HashSet<&str> = posts.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids.len(), 11, "each connection told once");
    assert!(!ids.contains("old="));
    let frame: serde_json::Value = serde_json::from_str(&posts[0].1).unwrap();
    assert_eq!(frame["type"], "moveTo");
    assert_eq!(frame["region"], "us-east-1");
    assert_eq!(frame["to"], "us-west-2");
    assert_eq!(frame["reason"], "failover");
    // The gone connection's records were removed, as fan-out does.
    let left = records.all(now).await.unwrap();
    assert_eq!(left.len(), 11);

    // The census: no count recorded yet, then the live connections (not the expired one),
    // which the handler's adapter reads back; the census item is no connection.
    assert_eq!(records.census().await.unwrap(), None);
    let invocation: Invocation = serde_json::from_str(r#"{"census": true}"#).unwrap();
    let Answer::Census(census) = evacuator.invoke(invocation).await.unwrap() else {
        panic!("a census answer")
    };
    assert_eq!(census.connections, 11);
    assert_eq!(census.region, "us-east-1");
    assert_eq!(
        records.census().await.unwrap(),
        Some(wsdr_core::Census {
            connections: 11,
            counted_at_ms: census.counted_at_ms
        })
    );
    assert_eq!(records.all(now).await.unwrap().len(), 11);
    let invocation: Invocation = serde_json::from_str(r#"{"census": false}"#).unwrap();
    let err = evacuator.invoke(invocation).await.unwrap_err();
    assert!(err.to_string().contains("census"), "{err}");
    // An evacuation request still parses as one.
    let invocation: Invocation =
        serde_json::from_str(r#"{"to": "us-west-2", "reason": "x"}"#).unwrap();
    assert!(matches!(invocation, Invocation::Evacuate(_)));
    assert!(serde_json::from_str::<Invocation>(r#"{"census": true, "to": "x"}"#).is_err());
}

#[tokio::test]
async fn bad_requests_and_settings_are_refused_with_a_reason() {
    let env = HashMap::from([
        ("TARGET_REGION", "us-east-1".to_owned()),
        ("TARGET_CONNECTIONS_TABLE", "t".to_owned()),
        ("TARGET_CALLBACK_URL", "ftp://nope".to_owned()),
    ]);
    let err = Config::from_lookup(|k| env.get(k).cloned()).unwrap_err();
    assert!(err.to_string().contains("TARGET_CALLBACK_URL"), "{err}");
    let env = HashMap::from([
        ("TARGET_REGION", "us-east-1".to_owned()),
        ("TARGET_CONNECTIONS_TABLE", "t".to_owned()),
        (
            "TARGET_CALLBACK_URL",
            "https://x.execute-api.us-east-1.amazonaws.com/prod".to_owned(),
        ),
        ("POSTS_PER_SECOND", "0".to_owned()),
    ]);
    let err = Config::from_lookup(|k| env.get(k).cloned()).unwrap_err();
    assert!(err.to_string().contains("POSTS_PER_SECOND"), "{err}");
    let missing = Config::from_lookup(|_| None).unwrap_err();
    assert!(
        missing.to_string().contains("TARGET_CALLBACK_URL"),
        "{missing}"
    );

    let env = HashMap::from([
        ("TARGET_REGION", "us-east-1".to_owned()),
        ("TARGET_CONNECTIONS_TABLE", "t".to_owned()),
        ("TARGET_CALLBACK_URL", "http://127.0.0.1:1/prod".to_owned()),
    ]);
    let evacuator = Evacuator::new(
        Config::from_lookup(|k| env.get(k).cloned()).unwrap(),
        Arc::new(wsdr_core::memory::MemoryConnections::default()),
        Arc::new(wsdr_core::memory::RecordingNotifier::default()),
        Arc::new(SystemClock),
    );
    for (to, endpoint) in [
        ("us-east-1", None),
        ("", None),
        ("us-west-2", Some("http://x")),
    ] {
        let request = Request {
            to: to.into(),
            endpoint: endpoint.map(str::to_owned),
            reason: None,
            wait_seconds: None,
        };
        assert!(evacuator.run(request).await.is_err(), "{to} {endpoint:?}");
    }
    // A wait longer than the function's timeout allows is refused up front.
    let request: Request = serde_json::from_str(r#"{"to":"us-west-2","waitSeconds":241}"#).unwrap();
    let err = evacuator.run(request).await.unwrap_err();
    assert!(err.to_string().contains("waitSeconds"), "{err}");
    // An unknown field in the invocation is an error, not silently dropped.
    assert!(serde_json::from_str::<Request>(r#"{"to":"us-west-2","region":"x"}"#).is_err());
}

/// An evacuator on the in-memory adapters, aimed at us-east-1 with these extra settings,
/// holding one live connection; and what it posts.
async fn memory_evacuator(
    extra: &[(&'static str, &str)],
) -> (Evacuator, Arc<wsdr_core::memory::RecordingNotifier>) {
    let mut env = HashMap::from([
        ("TARGET_REGION", "us-east-1".to_owned()),
        ("TARGET_CONNECTIONS_TABLE", "t".to_owned()),
        ("TARGET_CALLBACK_URL", "http://127.0.0.1:1/prod".to_owned()),
    ]);
    env.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
    let registry = Arc::new(wsdr_core::memory::MemoryConnections::default());
    let now = wsdr_core::Clock::now_ms(&SystemClock);
    registry
        .register(
            &ConnectionId::new("c1=").unwrap(),
            &UserId::new("u").unwrap(),
            now,
        )
        .await
        .unwrap();
    let notifier = Arc::new(wsdr_core::memory::RecordingNotifier::default());
    let evacuator = Evacuator::new(
        Config::from_lookup(|k| env.get(k).cloned()).unwrap(),
        registry,
        notifier.clone(),
        Arc::new(SystemClock),
    );
    (evacuator, notifier)
}

/// The failover alarm's invocation waits for DNS before it evacuates (paused time: the wait
/// is the only thing between the invocation and the posts).
#[tokio::test(start_paused = true)]
async fn an_invocation_with_a_wait_evacuates_only_after_it() {
    let (evacuator, notifier) = memory_evacuator(&[]).await;
    let request: Request =
        serde_json::from_str(r#"{"to":"us-west-2","reason":"failover","waitSeconds":90}"#).unwrap();
    let started = tokio::time::Instant::now();
    let run = tokio::spawn(async move { evacuator.run(request).await });
    tokio::time::sleep(Duration::from_secs(89)).await;
    assert!(
        notifier.sent().is_empty(),
        "nobody told before the wait is over"
    );
    let answer = run.await.unwrap().unwrap();
    assert!(started.elapsed() >= Duration::from_secs(90));
    assert_eq!(answer.delivered, 1);
    assert_eq!(notifier.sent().len(), 1);
}

fn stream_batch(serve: bool) -> serde_json::Value {
    serde_json::json!({"Records": [{
        "eventID": "1", "eventName": "MODIFY", "eventSource": "aws:dynamodb",
        "awsRegion": "us-west-2",
        "dynamodb": {
            "Keys": {"pk": {"S": "HEALTH#abc123"}, "sk": {"S": "CHANGE"}},
            "NewImage": {"pk": {"S": "HEALTH#abc123"}, "sk": {"S": "CHANGE"},
                         "serve": {"BOOL": serve}, "atMs": {"N": "1767225600000"}},
            "StreamViewType": "NEW_AND_OLD_IMAGES"
        }
    }]})
}

/// The fast path's trigger: the fast verdict's change record, through the state table's
/// stream, evacuates the primary once the endpoint check and the TTL have had their time.
#[tokio::test(start_paused = true)]
async fn a_fast_failover_in_the_stream_evacuates_after_the_wait() {
    let (evacuator, notifier) = memory_evacuator(&[
        ("FAILOVER_TO", "us-west-2"),
        ("FAILOVER_WAIT_SECONDS", "60"),
    ])
    .await;
    // The verdict coming back: nothing to do.
    let invocation: Invocation = serde_json::from_value(stream_batch(true)).unwrap();
    assert!(matches!(
        evacuator.invoke(invocation).await.unwrap(),
        Answer::Nothing { .. }
    ));
    assert!(notifier.sent().is_empty());
    // Fail over: the wait, then the move.
    let started = tokio::time::Instant::now();
    let invocation: Invocation = serde_json::from_value(stream_batch(false)).unwrap();
    let Answer::Evacuated(answer) = evacuator.invoke(invocation).await.unwrap() else {
        panic!("an evacuation")
    };
    assert!(started.elapsed() >= Duration::from_secs(60));
    assert_eq!(answer.to, "us-west-2");
    assert_eq!(answer.delivered, 1);
    let frame: serde_json::Value = serde_json::from_slice(&notifier.sent()[0].1).unwrap();
    assert_eq!(frame["reason"], "failover");

    // Without FAILOVER_TO a stream event is refused, not guessed at.
    let env = HashMap::from([
        ("TARGET_REGION", "us-east-1".to_owned()),
        ("TARGET_CONNECTIONS_TABLE", "t".to_owned()),
        ("TARGET_CALLBACK_URL", "http://127.0.0.1:1/prod".to_owned()),
    ]);
    let unconfigured = Evacuator::new(
        Config::from_lookup(|k| env.get(k).cloned()).unwrap(),
        Arc::new(wsdr_core::memory::MemoryConnections::default()),
        notifier,
        Arc::new(SystemClock),
    );
    let invocation: Invocation = serde_json::from_value(stream_batch(false)).unwrap();
    assert!(unconfigured.invoke(invocation).await.is_err());
    let too_long = HashMap::from([
        ("TARGET_REGION", "us-east-1".to_owned()),
        ("TARGET_CONNECTIONS_TABLE", "t".to_owned()),
        ("TARGET_CALLBACK_URL", "http://127.0.0.1:1/prod".to_owned()),
        ("FAILOVER_WAIT_SECONDS", "241".to_owned()),
    ]);
    assert!(Config::from_lookup(|k| too_long.get(k).cloned()).is_err());
}

/// With `FAILOVER_ENDPOINT`, a stream failover moves twice: at once, a move naming the
/// destination's own endpoint (for clients that know it), then after the wait the move
/// through the global name (no endpoint) for everyone still there.
#[tokio::test(start_paused = true)]
async fn a_fast_failover_moves_clients_that_know_the_endpoint_at_once() {
    let (evacuator, notifier) = memory_evacuator(&[
        ("FAILOVER_TO", "us-west-2"),
        ("FAILOVER_WAIT_SECONDS", "60"),
        ("FAILOVER_ENDPOINT", "wss://usw2.auction.example.com"),
    ])
    .await;
    let invocation: Invocation = serde_json::from_value(stream_batch(false)).unwrap();
    let run = tokio::spawn(async move { evacuator.invoke(invocation).await });
    tokio::time::sleep(Duration::from_secs(1)).await;
    let sent = notifier.sent();
    assert_eq!(sent.len(), 1, "the direct move goes out before the wait");
    let direct: serde_json::Value = serde_json::from_slice(&sent[0].1).unwrap();
    assert_eq!(direct["endpoint"], "wss://usw2.auction.example.com");
    assert!(matches!(run.await.unwrap().unwrap(), Answer::Evacuated(_)));
    let sent = notifier.sent();
    assert_eq!(sent.len(), 2);
    let global: serde_json::Value = serde_json::from_slice(&sent[1].1).unwrap();
    assert!(global.get("endpoint").is_none(), "{global}");
}

/// As deployed: the handler (the stream's one reader) forwards the change record to the fast
/// failovers' queue, and the evacuator receives it as an SQS batch whose body is that record.
#[tokio::test(start_paused = true)]
async fn a_fast_failover_forwarded_through_the_queue_evacuates_after_the_wait() {
    let (evacuator, notifier) = memory_evacuator(&[
        ("FAILOVER_TO", "us-west-2"),
        ("FAILOVER_WAIT_SECONDS", "60"),
    ])
    .await;
    let queued = |body: String| {
        serde_json::json!({"Records": [{
            "messageId": "m-1", "eventSource": "aws:sqs",
            "eventSourceARN": "arn:aws:sqs:us-west-2:123456789012:wsdr-secondary-FastFailovers-x",
            "body": body
        }]})
    };
    let record = |serve| stream_batch(serve)["Records"][0].to_string();
    for body in [record(true), "not json".to_owned(), "{}".to_owned()] {
        let invocation: Invocation = serde_json::from_value(queued(body.clone())).unwrap();
        assert!(
            matches!(
                evacuator.invoke(invocation).await.unwrap(),
                Answer::Nothing { .. }
            ),
            "{body}"
        );
    }
    assert!(notifier.sent().is_empty());
    let started = tokio::time::Instant::now();
    let invocation: Invocation = serde_json::from_value(queued(record(false))).unwrap();
    let Answer::Evacuated(answer) = evacuator.invoke(invocation).await.unwrap() else {
        panic!("an evacuation")
    };
    assert!(started.elapsed() >= Duration::from_secs(60));
    assert_eq!((answer.to.as_str(), answer.delivered), ("us-west-2", 1));
}
