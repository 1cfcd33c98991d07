#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The evacuator on its real adapters: a DynamoDB Local connections table (written by the
//! handler's own adapter) and a local `@connections` endpoint called by the real
//! `aws-sdk-apigatewaymanagement` client.

mod common;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use common::{connections_table, dynamo_endpoint};
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
    let table = connections_table(&client, "evacuate").await;
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
    // An unknown field in the invocation is an error, not silently dropped.
    assert!(serde_json::from_str::<Request>(r#"{"to":"us-west-2","region":"x"}"#).is_err());
}

/// An evacuator on the in-memory adapters, aimed at us-east-1 with these extra settings,
/// holding one live connection; and what it posts.
async fn memory_evacuator(
    extra: &[(&'static str, &str)],
) -> (Evacuator, Arc<wsdr_core::memory::RecordingNotifier>) {
    memory_evacuator_of(1, extra).await
}

/// [`memory_evacuator`] holding `connections` live connections, `c1=` and on.
async fn memory_evacuator_of(
    connections: usize,
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
    for n in 1..=connections {
        registry
            .register(
                &ConnectionId::new(format!("c{n}=")).unwrap(),
                &UserId::new("u").unwrap(),
                now,
            )
            .await
            .unwrap();
    }
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
    stream_batch_at(serve, 1_767_225_600_000)
}

/// The judge's verdict change on the primary, as the state table's stream carries it.
fn stream_batch_at(serve: bool, at_ms: u64) -> serde_json::Value {
    serde_json::json!({"Records": [{
        "eventID": "1", "eventName": "MODIFY", "eventSource": "aws:dynamodb",
        "awsRegion": "us-west-2",
        "dynamodb": {
            "Keys": {"pk": {"S": "JUDGE#abc123"}, "sk": {"S": "CHANGE"}},
            "NewImage": {"pk": {"S": "JUDGE#abc123"}, "sk": {"S": "CHANGE"},
                         "serve": {"BOOL": serve}, "atMs": {"N": at_ms.to_string()}},
            "SizeBytes": 96, "StreamViewType": "NEW_AND_OLD_IMAGES"
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

/// The re-checks as a script: what each answers now.
#[derive(Default)]
struct Scripted {
    judge: Mutex<Option<wsdr_core::VerdictAnswer>>,
    primary_self: Mutex<Option<bool>>,
    dns: Mutex<Option<bool>>,
}

#[async_trait::async_trait]
impl evacuator::order::Checks for Scripted {
    async fn judge_answer(&self) -> wsdr_core::VerdictAnswer {
        self.judge
            .lock()
            .unwrap()
            .unwrap_or(wsdr_core::VerdictAnswer::FailOver)
    }
    async fn primary_self_serves(&self) -> Option<bool> {
        *self.primary_self.lock().unwrap()
    }
    async fn dns_answers_destination(&self) -> Option<bool> {
        *self.dns.lock().unwrap()
    }
}

fn nothing(answer: Answer) -> String {
    match answer {
        Answer::Nothing { nothing } => nothing,
        other => panic!("expected nothing done, got {other:?}"),
    }
}

/// An order runs once however often it is delivered (a stream batch retried, an SQS message
/// received again, two invocations at once); the next change is a new order.
#[tokio::test(start_paused = true)]
async fn each_order_runs_once_whatever_its_deliveries() {
    let (evacuator, notifier) = memory_evacuator(&[
        ("FAILOVER_TO", "us-west-2"),
        ("FAILOVER_WAIT_SECONDS", "10"),
    ])
    .await;
    let evacuator =
        Arc::new(evacuator.with_order_log(Arc::new(wsdr_core::memory::MemoryOrderLog::default())));
    let order = || serde_json::from_value::<Invocation>(stream_batch(false)).unwrap();
    // Two deliveries at once (the mapping's maximum concurrency is 2): one runs.
    let (a, b) = tokio::join!(evacuator.invoke(order()), evacuator.invoke(order()));
    let answers = [a.unwrap(), b.unwrap()];
    assert_eq!(
        answers
            .iter()
            .filter(|a| matches!(a, Answer::Evacuated(_)))
            .count(),
        1,
        "{answers:?}"
    );
    // A late redelivery: nothing.
    assert!(nothing(evacuator.invoke(order()).await.unwrap()).contains("ran already"));
    assert_eq!(notifier.sent().len(), 1, "one move");
    // The next fail-over (another change, another atMs) is another order.
    let next =
        serde_json::from_value::<Invocation>(stream_batch_at(false, 1_767_225_700_000)).unwrap();
    assert!(matches!(
        evacuator.invoke(next).await.unwrap(),
        Answer::Evacuated(_)
    ));
}

/// An order is a trigger: before each phase the evacuator re-checks the judge's verdict, the
/// primary's own view and, before the move through the global name, DNS. A verdict that came
/// back, a primary whose own view serves (its record stays healthy: a partition, a blind
/// watcher) or a name still answering the primary moves nobody through it.
#[tokio::test(start_paused = true)]
async fn an_order_is_rechecked_before_each_phase() {
    let run = |script: Scripted| async move {
        let (evacuator, notifier) = memory_evacuator(&[
            ("FAILOVER_TO", "us-west-2"),
            ("FAILOVER_WAIT_SECONDS", "30"),
            ("FAILOVER_ENDPOINT", "wss://usw2.auction.example.com"),
        ])
        .await;
        let script = Arc::new(script);
        let evacuator = evacuator.with_checks(script.clone());
        let order = serde_json::from_value::<Invocation>(stream_batch(false)).unwrap();
        let answer = evacuator.invoke(order).await.unwrap();
        (answer, notifier.sent().len())
    };
    // Everything says go: the direct move, then the global one.
    let (answer, posts) = run(Scripted {
        dns: Mutex::new(Some(true)),
        ..Scripted::default()
    })
    .await;
    assert!(matches!(answer, Answer::Evacuated(_)), "{answer:?}");
    assert_eq!(posts, 2);
    // The judge's verdict came back (or went stale): nobody moves.
    for judge in [
        wsdr_core::VerdictAnswer::Serve,
        wsdr_core::VerdictAnswer::Stale,
        wsdr_core::VerdictAnswer::Unreadable,
    ] {
        let (answer, posts) = run(Scripted {
            judge: Mutex::new(Some(judge)),
            dns: Mutex::new(Some(true)),
            ..Scripted::default()
        })
        .await;
        assert!(
            nothing(answer).contains("no longer says fail over"),
            "{judge:?}"
        );
        assert_eq!(posts, 0, "{judge:?}");
    }
    // The primary's own view serves: nobody moves.
    let (answer, posts) = run(Scripted {
        primary_self: Mutex::new(Some(true)),
        dns: Mutex::new(Some(true)),
        ..Scripted::default()
    })
    .await;
    assert!(nothing(answer).contains("own view says it serves"));
    assert_eq!(posts, 0);
    // DNS still answers the primary (or cannot be told) after the wait: the direct move went
    // out (clients that know the destination), nobody is sent through the global name.
    for dns in [Some(false), None] {
        let (answer, posts) = run(Scripted {
            primary_self: Mutex::new(None),
            dns: Mutex::new(dns),
            ..Scripted::default()
        })
        .await;
        assert!(
            nothing(answer).contains("does not answer the destination"),
            "{dns:?}"
        );
        assert_eq!(posts, 1, "the direct move only ({dns:?})");
    }
}

/// DNS asked again every 5 s: the move through the global name goes as soon as the name
/// answers the destination, not at the deadline; a name that never does moves nobody
/// through it, and gives up at the deadline.
#[tokio::test(start_paused = true)]
async fn the_global_move_goes_when_dns_answers_and_gives_up_at_the_deadline() {
    let (evacuator, notifier) = memory_evacuator(&[
        ("FAILOVER_TO", "us-west-2"),
        ("FAILOVER_WAIT_SECONDS", "120"),
    ])
    .await;
    let script = Arc::new(Scripted {
        dns: Mutex::new(Some(false)),
        ..Scripted::default()
    });
    let evacuator = evacuator.with_checks(script.clone());
    let started = tokio::time::Instant::now();
    let turn = {
        let script = script.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(22)).await;
            *script.dns.lock().unwrap() = Some(true);
        })
    };
    let order = serde_json::from_value::<Invocation>(stream_batch(false)).unwrap();
    let answer = evacuator.invoke(order).await.unwrap();
    turn.await.unwrap();
    assert!(matches!(answer, Answer::Evacuated(_)), "{answer:?}");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(22) && took <= Duration::from_secs(27),
        "moved {took:?} after the order: within one 5 s poll of DNS answering (22 s)"
    );
    assert_eq!(notifier.sent().len(), 1);
    *script.dns.lock().unwrap() = Some(false);
    let started = tokio::time::Instant::now();
    let next =
        serde_json::from_value::<Invocation>(stream_batch_at(false, 1_767_225_700_000)).unwrap();
    assert!(nothing(evacuator.invoke(next).await.unwrap()).contains("does not answer"));
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(120),
        "gave up at the deadline"
    );
}

/// The minute sweep runs the order the stream lost: the judge's last change, read from this
/// Region's replica, is the same order (the same id) the stream would have carried, so the
/// sweep and any late delivery run it once between them.
#[tokio::test(start_paused = true)]
async fn the_sweep_runs_a_lost_order_once_and_the_late_delivery_moves_nobody() {
    let (evacuator, notifier) = memory_evacuator(&[
        ("FAILOVER_TO", "us-west-2"),
        ("FAILOVER_WAIT_SECONDS", "30"),
        ("STATE_TABLE", "state"),
        ("PRIMARY_API_ID", "abc123"),
    ])
    .await;
    let ledger = Arc::new(wsdr_core::memory::MemoryHealthLedger::default());
    let evacuator = evacuator
        .with_ledger(ledger.clone())
        .with_order_log(Arc::new(wsdr_core::memory::MemoryOrderLog::default()))
        .with_checks(Arc::new(Scripted {
            dns: Mutex::new(Some(true)),
            ..Scripted::default()
        }));
    let sweep =
        || serde_json::from_value::<Invocation>(serde_json::json!({"sweep": true})).unwrap();
    // No change yet, then a change back to serve: nothing to do.
    assert!(nothing(evacuator.invoke(sweep()).await.unwrap()).contains("not a fail-over"));
    use wsdr_core::HealthLedger;
    let judge = wsdr_core::VerdictSource::Judge;
    ledger
        .put_change("abc123", judge, true, 1_767_225_500_000)
        .await
        .unwrap();
    assert!(nothing(evacuator.invoke(sweep()).await.unwrap()).contains("not a fail-over"));
    // The judge failed the primary over; the stream's order was lost. The sweep runs it.
    ledger
        .put_change("abc123", judge, false, 1_767_225_600_000)
        .await
        .unwrap();
    assert!(matches!(
        evacuator.invoke(sweep()).await.unwrap(),
        Answer::Evacuated(_)
    ));
    // The next sweeps, and the order arriving late after all: the same order, run already.
    assert!(nothing(evacuator.invoke(sweep()).await.unwrap()).contains("ran already"));
    let late = serde_json::from_value::<Invocation>(stream_batch(false)).unwrap();
    assert!(nothing(evacuator.invoke(late).await.unwrap()).contains("ran already"));
    assert_eq!(notifier.sent().len(), 1, "one move");
    // A sweep with nothing to read the changes from is refused with a reason.
    let (bare, _) = memory_evacuator(&[("FAILOVER_TO", "us-west-2")]).await;
    let refused = bare.invoke(sweep()).await.unwrap_err().to_string();
    assert!(refused.contains("STATE_TABLE"), "{refused}");
}

/// The re-checks and the order log on their AWS adapters: the judge's verdict read from a
/// DynamoDB Local state table, the primary's own view from a real HTTP health function
/// (the `health` answers), DNS through a resolver table; the order log on DynamoDB Local.
#[tokio::test]
async fn the_rechecks_and_the_order_log_read_their_real_peers() {
    use evacuator::order::Checks;
    use evacuator::recheck::{AwsChecks, RecheckConfig, Resolve};
    use wsdr_core::{HealthLedger, OrderLog, VerdictAnswer, VerdictSource};
    let client = wsdr_aws::dynamo_client(&local_sdk());
    let suffix = format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let state = format!("state-{suffix}");
    wsdr_aws::schema::create_state_table(&client, &state)
        .await
        .unwrap();
    let ledger = Arc::new(wsdr_aws::HealthRecords::new(client.clone(), &state));
    // The primary's health function: answers whatever `body` holds.
    let body = Arc::new(Mutex::new("verdict=serve\n".to_owned()));
    let served = body.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new().route(
        "/self",
        axum::routing::get(move || {
            let served = served.clone();
            async move { served.lock().unwrap().clone() }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    struct Table(HashMap<&'static str, Vec<std::net::IpAddr>>);
    #[async_trait::async_trait]
    impl Resolve for Table {
        async fn addresses(&self, name: &str) -> Option<HashSet<std::net::IpAddr>> {
            self.0.get(name).map(|a| a.iter().copied().collect())
        }
    }
    let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
    let resolver = Arc::new(Table(HashMap::from([
        ("auction.example.com", vec![ip("10.0.0.2")]),
        (
            "d-west.execute-api.us-west-2.amazonaws.com",
            vec![ip("10.0.0.2"), ip("10.0.0.3")],
        ),
        ("stale.example.com", vec![ip("10.0.0.9")]),
    ])));
    let clock = Arc::new(wsdr_core::memory::ManualClock::new(1_767_225_600_000));
    let checks = |global: &str| {
        AwsChecks::new(
            RecheckConfig {
                state_table: state.clone(),
                primary_api_id: "abc123".into(),
                primary_self_url: Some(format!("http://{addr}/self")),
                global_name: Some(global.into()),
                destination_name: Some("d-west.execute-api.us-west-2.amazonaws.com".into()),
            },
            ledger.clone(),
        )
        .with(clock.clone(), resolver.clone())
    };
    let moved = checks("auction.example.com");
    assert_eq!(moved.judge_answer().await, VerdictAnswer::Missing);
    ledger
        .put_verdict("abc123", VerdictSource::Judge, false, 1_767_225_600_000)
        .await
        .unwrap();
    // The primary's own verdict is not the judge's.
    ledger
        .put_verdict("abc123", VerdictSource::Inside, true, 1_767_225_600_000)
        .await
        .unwrap();
    assert_eq!(moved.judge_answer().await, VerdictAnswer::FailOver);
    assert_eq!(moved.primary_self_serves().await, Some(true));
    *body.lock().unwrap() = "verdict=fail-over\n".into();
    assert_eq!(moved.primary_self_serves().await, Some(false));
    assert_eq!(moved.dns_answers_destination().await, Some(true));
    assert_eq!(
        checks("stale.example.com").dns_answers_destination().await,
        Some(false)
    );
    assert_eq!(
        checks("unknown.example.com")
            .dns_answers_destination()
            .await,
        None
    );
    clock.advance(61_000);
    assert_eq!(moved.judge_answer().await, VerdictAnswer::Stale);
    // Nothing answering at the primary's URL: no answer, not "serve".
    let gone = AwsChecks::new(
        RecheckConfig {
            state_table: state.clone(),
            primary_api_id: "abc123".into(),
            primary_self_url: Some("http://127.0.0.1:9/self".into()),
            global_name: None,
            destination_name: None,
        },
        ledger.clone(),
    );
    assert_eq!(gone.primary_self_serves().await, None);
    assert_eq!(gone.dns_answers_destination().await, None);

    // The order log: one claim wins; a finished order stays done; a claim whose run died
    // (older than the stale bound, unfinished) is taken over.
    let orders_table = format!("connections-{suffix}");
    wsdr_aws::schema::create_connections_table(&client, &orders_table)
        .await
        .unwrap();
    let log = wsdr_aws::DynamoOrderLog::new(client.clone(), &orders_table);
    assert!(log.claim("abc123@1", 1_000, 300_000).await.unwrap());
    assert!(!log.claim("abc123@1", 2_000, 300_000).await.unwrap());
    assert!(log.claim("abc123@2", 2_000, 300_000).await.unwrap());
    assert!(
        log.claim("abc123@1", 302_000, 300_000).await.unwrap(),
        "taken over"
    );
    log.finish("abc123@1", 303_000).await.unwrap();
    assert!(
        !log.claim("abc123@1", 10_000_000, 300_000).await.unwrap(),
        "done"
    );
}

#[test]
fn the_longest_wait_a_setting_may_ask_is_240_seconds() {
    let wait = |seconds: &str| {
        let env = HashMap::from([
            ("TARGET_REGION", "us-east-1".to_owned()),
            ("TARGET_CONNECTIONS_TABLE", "t".to_owned()),
            ("TARGET_CALLBACK_URL", "http://127.0.0.1:1/prod".to_owned()),
            ("FAILOVER_WAIT_SECONDS", seconds.to_owned()),
        ]);
        Config::from_lookup(|k| env.get(k).cloned()).map(|config| config.failover_wait_seconds)
    };
    assert_eq!(wait("240").unwrap(), 240);
    let refused = wait("241").unwrap_err().to_string();
    assert!(refused.contains("FAILOVER_WAIT_SECONDS"), "{refused}");
}

/// The function times out at 300 s: after the longest wait (240 s), the untold are told again
/// for the 45 s left of its 285 s budget, not the minute they get without a wait. (The posts'
/// retry pauses are drawn from the thread's RNG: the bounds hold whatever they draw.)
#[tokio::test(start_paused = true)]
async fn the_untold_are_told_again_within_what_the_wait_left_of_the_functions_time() {
    for (wait, telling) in [(0, 60), (240, 45)] {
        let (evacuator, notifier) = memory_evacuator(&[]).await;
        notifier.throttle(&ConnectionId::new("c1=").unwrap(), u32::MAX);
        let request: Request =
            serde_json::from_str(&format!(r#"{{"to":"us-west-2","waitSeconds":{wait}}}"#)).unwrap();
        let started = tokio::time::Instant::now();
        let answer = evacuator.run(request).await.unwrap();
        let took = started.elapsed();
        assert!(!answer.complete && answer.untold == 1, "{answer:?}");
        // Rounds start while one more fits before the deadline; the last round's posts may
        // run past it by their retries (four, under a second in all).
        assert!(
            took <= Duration::from_secs(wait + telling + 1),
            "wait {wait}: {took:?}"
        );
        assert!(
            took > Duration::from_secs(wait + telling - 2),
            "wait {wait}: {took:?}"
        );
    }
}

#[tokio::test]
async fn an_evacuators_debug_shows_its_configuration() {
    let (evacuator, _) = memory_evacuator(&[]).await;
    let shown = format!("{evacuator:?}");
    assert!(shown.starts_with("Evacuator { config: Config {"), "{shown}");
    assert!(
        shown.contains("us-east-1") && shown.ends_with(".. }"),
        "{shown}"
    );
}

/// On paused time: a mutant that waits instead of refusing fails here, it does not hang.
#[tokio::test(start_paused = true)]
async fn a_wait_longer_than_the_function_allows_is_refused_up_front_and_240_s_is_waited() {
    let (evacuator, notifier) = memory_evacuator(&[]).await;
    let started = tokio::time::Instant::now();
    let request: Request = serde_json::from_str(r#"{"to":"us-west-2","waitSeconds":241}"#).unwrap();
    let err = evacuator.run(request).await.unwrap_err();
    assert!(err.to_string().contains("waitSeconds"), "{err}");
    assert_eq!(started.elapsed(), Duration::ZERO, "refused before any wait");
    assert!(notifier.sent().is_empty());

    let request: Request = serde_json::from_str(r#"{"to":"us-west-2","waitSeconds":240}"#).unwrap();
    let answer = evacuator.run(request).await.unwrap();
    assert_eq!(answer.delivered, 1);
    assert!(started.elapsed() >= Duration::from_secs(240));
}

#[tokio::test(start_paused = true)]
async fn the_posting_pace_setting_spaces_the_destinations_slots() {
    // One connection a slot, one post a second: the fourth slot's post is 3 s in.
    let (evacuator, notifier) = memory_evacuator_of(
        4,
        &[
            ("DESTINATION_QUOTA_PER_SECOND", "1"),
            ("POSTS_PER_SECOND", "1"),
        ],
    )
    .await;
    let started = tokio::time::Instant::now();
    let request: Request = serde_json::from_str(r#"{"to":"us-west-2"}"#).unwrap();
    let answer = evacuator.run(request).await.unwrap();
    assert_eq!((answer.delivered, answer.slots), (4, 4), "{answer:?}");
    assert_eq!(notifier.sent().len(), 4);
    assert_eq!(started.elapsed(), Duration::from_secs(3));
}
