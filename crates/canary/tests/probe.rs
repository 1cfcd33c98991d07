#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::result_large_err,
    clippy::type_complexity
)] // test code
//! The probe against local WebSocket servers (port 0) that behave well, refuse the handshake,
//! never answer, answer with API Gateway's internal-error frame, answer slowly, name the
//! wrong Region, or answer heartbeats but fail getState. Each gives its typed outcome within
//! the timeout; then whole canary runs, with the metrics sink captured.

mod common;

use canary::{fold, Canary, Config, ProbeFailure, ProbeTarget};
use common::{server, Behavior};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wsdr_client::{ConnectError, ConnectOptions};
use wsdr_core::memory::MemoryMetrics;
use wsdr_core::SystemClock;
use wsdr_protocol::AuctionId;

fn target(url: &str, timeout_ms: u64) -> ProbeTarget {
    ProbeTarget {
        url: url.into(),
        expected_region: "us-east-1".into(),
        auction_id: AuctionId::new("canary").unwrap(),
        timeout: Duration::from_millis(timeout_ms),
    }
}

#[tokio::test]
async fn probe_outcomes_are_typed_and_bounded_by_the_timeout() {
    let cases: Vec<(
        Behavior,
        fn(&Result<canary::ProbeSuccess, ProbeFailure>) -> bool,
    )> = vec![
        (Behavior::Good, |r| r.is_ok()),
        (Behavior::Refuse(401), |r| {
            matches!(
                r,
                Err(ProbeFailure::Connect(ConnectError::Refused { status: 401 }))
            )
        }),
        (Behavior::Refuse(403), |r| {
            matches!(
                r,
                Err(ProbeFailure::Connect(ConnectError::Refused { status: 403 }))
            )
        }),
        (Behavior::Refuse(429), |r| {
            matches!(
                r,
                Err(ProbeFailure::Connect(ConnectError::Refused { status: 429 }))
            )
        }),
        (Behavior::Refuse(500), |r| {
            matches!(
                r,
                Err(ProbeFailure::Connect(ConnectError::Refused { status: 500 }))
            )
        }),
        (Behavior::Silent, |r| {
            matches!(r, Err(ProbeFailure::Timeout(canary::probe_stage::Pong)))
        }),
        (
            Behavior::GatewayError,
            |r| matches!(r, Err(ProbeFailure::GatewayError(m)) if m == "Internal server error"),
        ),
        (Behavior::Slow(Duration::from_millis(800)), |r| {
            matches!(r, Err(ProbeFailure::Timeout(_)))
        }),
        (
            Behavior::WrongRegion,
            |r| matches!(r, Err(ProbeFailure::WrongRegion { got, .. }) if got == "us-west-2"),
        ),
        (
            Behavior::HeartbeatOnly,
            |r| matches!(r, Err(ProbeFailure::WrongReply(m)) if m.contains("internal")),
        ),
    ];
    for (behavior, expected) in cases {
        let s = server(behavior).await;
        let started = Instant::now();
        let outcome = canary::probe(&target(&s.url, 300), &ConnectOptions::default()).await;
        let elapsed = started.elapsed();
        assert!(expected(&outcome), "{behavior:?}: got {outcome:?}");
        // Only a success and a 429 (the Region's quota spent by a herd: up, busy) count as up.
        assert_eq!(
            canary::counts_as_up(&outcome),
            matches!(behavior, Behavior::Good | Behavior::Refuse(429)),
            "{behavior:?}: {outcome:?}"
        );
        assert!(
            elapsed < Duration::from_millis(600),
            "{behavior:?}: took {elapsed:?}"
        );
    }
}

#[tokio::test]
async fn closed_port_and_bad_tls_are_connect_failures() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = format!("ws://{}/prod", listener.local_addr().unwrap());
    drop(listener);
    let outcome = canary::probe(&target(&closed, 500), &ConnectOptions::default()).await;
    assert!(
        matches!(outcome, Err(ProbeFailure::Connect(ConnectError::Tcp(_)))),
        "{outcome:?}"
    );
    // wss:// to a plain WebSocket server: the TLS handshake fails.
    let plain = server(Behavior::Good).await;
    let outcome = canary::probe(
        &target(&plain.url.replace("ws://", "wss://"), 500),
        &ConnectOptions::default(),
    )
    .await;
    assert!(
        matches!(outcome, Err(ProbeFailure::Connect(ConnectError::Tls(_)))),
        "{outcome:?}"
    );
}

#[test]
fn fold_is_a_majority_decided_as_early_as_possible() {
    assert_eq!(fold(&[true, true], 3), Some(true));
    assert_eq!(
        fold(&[false, false], 3),
        Some(false),
        "a dead Region fails after two probes"
    );
    assert_eq!(fold(&[false], 3), None);
    assert_eq!(fold(&[false, true], 3), None);
    assert_eq!(
        fold(&[false, true, true], 3),
        Some(true),
        "one lost probe does not fail a Region"
    );
    assert_eq!(fold(&[true, false, false], 3), Some(false));
    assert_eq!(fold(&[true], 1), Some(true));
    assert_eq!(fold(&[false], 1), Some(false));
}

const SECRET: &str = "canary-secret-0123456789abcdef012345";

fn config(url: &str) -> Config {
    config_with(url, &[])
}

/// The test canary's configuration, with `extra` variables set too.
fn config_with(url: &str, extra: &[(&'static str, &str)]) -> Config {
    let mut env: HashMap<&str, String> = HashMap::from([
        ("TARGET_URL", url.to_owned()),
        ("EXPECTED_REGION", "us-east-1".to_owned()),
        ("API_ID", "abc123def4".to_owned()),
        ("PROBE_SPACING_SECONDS", "0".to_owned()),
        ("PROBE_TIMEOUT_SECONDS", "1".to_owned()),
        ("CANARY_HS256_SECRET", SECRET.to_owned()),
        ("JWT_AUDIENCE", "wsdr".to_owned()),
    ]);
    env.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
    Config::from_lookup(|k| env.get(k).cloned()).unwrap()
}

#[tokio::test]
async fn canary_run_publishes_one_for_a_healthy_region_with_a_token_the_authorizer_accepts() {
    let s = server(Behavior::Good).await;
    let metrics = Arc::new(MemoryMetrics::default());
    let canary = Canary::new(config(&s.url), metrics.clone(), Arc::new(SystemClock));
    let event: aws_lambda_events::eventbridge::EventBridgeEvent =
        serde_json::from_str(include_str!("../../../events/scheduled.json")).unwrap();
    let report = canary
        .handle(lambda_runtime::LambdaEvent::new(
            event,
            lambda_runtime::Context::default(),
        ))
        .await
        .unwrap();
    assert!(report.healthy);
    assert_eq!(
        (report.probes, report.successes),
        (2, 2),
        "2 of 3 settle the majority"
    );
    let points = metrics.points();
    assert_eq!(points.len(), 1);
    assert!(points[0].healthy);
    assert_eq!(points[0].api_id, "abc123def4");
    assert!(points[0].latency_ms.unwrap() > 0.0);

    // The token the canary sent passes the real authorizer configured with the same secret.
    let token = s.tokens.lock().unwrap()[0].clone();
    let env = HashMap::from([
        ("JWT_ISSUER", "https://auth.example.com"),
        ("JWT_AUDIENCE", "wsdr"),
        ("JWT_HS256_SECRET", "user-secret-0123456789abcdef0123456789"),
        ("CANARY_HS256_SECRET", SECRET),
    ]);
    let auth_config =
        authorizer::Config::from_lookup(|k| env.get(k).map(|v| v.to_string())).unwrap();
    let identity = authorizer::Verifier::new(&auth_config)
        .await
        .verify(&token)
        .await
        .unwrap();
    assert_eq!(identity.sub, "canary:us-east-1");
    assert!(identity.canary);
}

#[tokio::test]
async fn canary_run_publishes_zero_for_a_dead_region_and_still_succeeds() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("ws://{}/prod", listener.local_addr().unwrap());
    drop(listener);
    let metrics = Arc::new(MemoryMetrics::default());
    let report = Canary::new(config(&dead), metrics.clone(), Arc::new(SystemClock))
        .run_once()
        .await
        .unwrap();
    assert!(!report.healthy);
    assert_eq!(report.probes, 2, "failed at once, without the third probe");
    assert!(!metrics.points()[0].healthy);
    assert_eq!(metrics.points()[0].latency_ms, None);
}

#[tokio::test]
async fn one_lost_probe_does_not_fail_the_region() {
    let s = server(Behavior::DropFirst(1)).await;
    let metrics = Arc::new(MemoryMetrics::default());
    let report = Canary::new(config(&s.url), metrics.clone(), Arc::new(SystemClock))
        .run_once()
        .await
        .unwrap();
    assert!(report.healthy, "{report:?}");
    assert_eq!(report.probes, 3);
    assert_eq!(s.connections.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn canary_that_cannot_publish_fails_its_invocation() {
    let s = server(Behavior::Good).await;
    let metrics = Arc::new(MemoryMetrics::default());
    metrics.set_failing(true);
    assert!(Canary::new(config(&s.url), metrics, Arc::new(SystemClock))
        .run_once()
        .await
        .is_err());
}

fn watcher_config(url: &str) -> Config {
    config_with(
        url,
        &[
            ("VERDICT_FAILOVER_DATAPOINTS", "2"),
            ("VERDICT_WINDOW", "6"),
        ],
    )
}

/// A watcher run by run, one minute apart: its verdict follows the rule over its own
/// datapoints, read back from the metrics sink (two bad minutes fail over, five good ones
/// in a row fail back).
#[tokio::test]
async fn a_watcher_publishes_the_verdict_of_its_own_last_minutes() {
    let good = server(Behavior::Good).await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("ws://{}/prod", listener.local_addr().unwrap());
    drop(listener);
    let metrics = Arc::new(MemoryMetrics::default());
    let clock = Arc::new(wsdr_core::memory::ManualClock::new(1_796_145_600_000));
    let live = Canary::new(watcher_config(&good.url), metrics.clone(), clock.clone());
    let down = Canary::new(watcher_config(&dead), metrics.clone(), clock.clone());
    let mut verdicts = Vec::new();
    for minute in "1001111101".chars() {
        let canary = if minute == '1' { &live } else { &down };
        let report = canary.run_once().await.unwrap();
        verdicts.push(report.verdict.unwrap());
        clock.advance(60_000);
    }
    let shown: String = verdicts
        .iter()
        .map(|v| if *v { 'S' } else { 'F' })
        .collect();
    // minute:  1 0 0 1 1 1 1 1 0 1
    // verdict: S S F F F F F S S S  (fail over at the 2nd bad minute; back after 5 good)
    assert_eq!(shown, "SSFFFFFSSS");
    let published: Vec<bool> = metrics.verdicts().iter().map(|v| v.serve).collect();
    assert_eq!(published, verdicts, "every run publishes its verdict");
    assert!(metrics.verdicts().iter().all(|v| v.api_id == "abc123def4"));
}

#[tokio::test]
async fn a_watcher_that_cannot_read_its_history_publishes_no_verdict_and_fails() {
    let s = server(Behavior::Good).await;
    let metrics = Arc::new(FailingReads::default());
    let report = Canary::new(
        watcher_config(&s.url),
        metrics.clone(),
        Arc::new(SystemClock),
    )
    .run_once()
    .await;
    assert!(report.is_err(), "the invocation fails, visibly");
    assert_eq!(
        metrics.healths.load(Ordering::SeqCst),
        1,
        "the health datapoint still went out"
    );
    assert_eq!(
        metrics.verdicts.load(Ordering::SeqCst),
        0,
        "no verdict without its history"
    );
}

#[test]
fn a_watcher_needs_both_rule_settings_and_a_possible_rule() {
    let base = [
        ("TARGET_URL", "ws://x"),
        ("EXPECTED_REGION", "us-east-1"),
        ("API_ID", "a"),
        ("CANARY_HS256_SECRET", SECRET),
        ("JWT_AUDIENCE", "wsdr"),
    ];
    let with = |extra: &[(&'static str, &'static str)]| {
        let env: HashMap<&str, &str> = base.iter().chain(extra).copied().collect();
        Config::from_lookup(|k| env.get(k).map(|v| v.to_string()))
    };
    assert!(with(&[]).unwrap().verdict.is_none());
    assert!(with(&[("VERDICT_WINDOW", "6")]).is_err());
    assert!(with(&[("VERDICT_FAILOVER_DATAPOINTS", "2")]).is_err());
    assert!(with(&[
        ("VERDICT_FAILOVER_DATAPOINTS", "7"),
        ("VERDICT_WINDOW", "6")
    ])
    .is_err());
    let rule = with(&[
        ("VERDICT_FAILOVER_DATAPOINTS", "2"),
        ("VERDICT_WINDOW", "6"),
    ])
    .unwrap()
    .verdict
    .unwrap();
    assert_eq!((rule.failover_after, rule.window), (2, 6));
}

/// A sink that takes datapoints but cannot answer GetMetricData.
#[derive(Default)]
struct FailingReads {
    healths: std::sync::atomic::AtomicUsize,
    verdicts: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl wsdr_core::Metrics for FailingReads {
    async fn put_health(&self, _: &wsdr_core::HealthDatapoint) -> wsdr_core::Result<()> {
        self.healths.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    async fn recent_health(&self, _: &str, _: u32, _: u64) -> wsdr_core::Result<Vec<Option<bool>>> {
        Err(wsdr_core::Error::Transient(
            "GetMetricData throttled".into(),
        ))
    }
    async fn put_verdict(&self, _: &wsdr_core::VerdictDatapoint) -> wsdr_core::Result<()> {
        self.verdicts.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[tokio::test]
async fn the_watcher_judges_a_region_through_the_name_clients_use_at_that_regions_address() {
    let s = server(Behavior::Good).await;
    // The server's URL with its address swapped for a name no resolver knows (RFC 6761's
    // `.invalid`): only `TARGET_CONNECT_TO` can reach it, and no lookup is made.
    let (address, rest) = s
        .url
        .strip_prefix("ws://")
        .unwrap()
        .split_once('/')
        .unwrap_or((s.url.strip_prefix("ws://").unwrap(), ""));
    let port = address.rsplit_once(':').unwrap().1;
    let by_name = format!("ws://auction.wsdr.invalid:{port}/{rest}");
    let metrics = Arc::new(MemoryMetrics::default());
    let canary = Canary::new(
        config_with(&by_name, &[("TARGET_CONNECT_TO", address)]),
        metrics.clone(),
        Arc::new(SystemClock),
    );
    let report = canary.run_once().await.unwrap();
    assert!(report.healthy, "{report:?}");
}
