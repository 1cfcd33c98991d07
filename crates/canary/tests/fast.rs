#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The fast rounds of one invocation, on paused time against Regions on an in-memory network:
//! a probe every interval for the window, each round recorded, the verdict folded, resumed at
//! a cold start, and every ledger failure counted; and the settings that shape them.

mod common;

use async_trait::async_trait;
use canary::{Canary, Config};
use common::{server_on, Behavior};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use wsdr_core::memory::{ManualClock, MemoryHealthLedger, MemoryMetrics};
use wsdr_core::{HealthLedger, VerdictSource};

const API: &str = "abc123def4";

fn lookup(url: &str, extra: &[(&str, &str)]) -> Result<Config, canary::Error> {
    let mut env: HashMap<String, String> = [
        ("TARGET_URL", url),
        ("EXPECTED_REGION", "us-east-1"),
        ("API_ID", API),
        (
            "CANARY_HS256_SECRET",
            "canary-secret-0123456789abcdef012345",
        ),
        ("JWT_AUDIENCE", "wsdr"),
        ("PROBE_TIMEOUT_SECONDS", "1"),
        ("FAST_PROBE_INTERVAL_SECONDS", "2"),
        ("FAST_WINDOW_SECONDS", "10"),
        ("FAST_FAIL_AFTER", "3"),
        ("FAST_RECOVER_AFTER", "4"),
        ("STATE_TABLE", "state"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    for (k, v) in extra {
        env.insert((*k).to_owned(), (*v).to_owned());
    }
    Config::from_lookup(|name| env.get(name).cloned())
}

/// A canary on `network` recording to `ledger`.
fn canary(
    network: &wsdr_net::Network,
    url: &str,
    extra: &[(&str, &str)],
    ledger: Arc<dyn HealthLedger>,
) -> Canary {
    Canary::new(
        lookup(url, extra).unwrap(),
        Arc::new(MemoryMetrics::default()),
        Arc::new(ManualClock::new(1_000_000)),
    )
    .with_network(network.clone())
    .with_health_ledger(ledger)
}

/// A URL nothing listens on, on `network`'s loopback.
const NOBODY: &str = "ws://127.0.0.1:9/prod";

#[tokio::test(start_paused = true)]
async fn a_healthy_region_is_probed_every_interval_for_the_window_and_served() {
    let network = wsdr_net::Network::memory();
    let region = server_on(&network, Behavior::Good).await;
    let ledger = Arc::new(MemoryHealthLedger::default());
    let started = tokio::time::Instant::now();
    let report = canary(&network, &region.url, &[], ledger.clone())
        .fast_rounds()
        .await;
    // Rounds at 0, 2, 4, 6 and 8 s of a 10 s window.
    assert_eq!(report.rounds, 5, "{report:?}");
    assert_eq!(started.elapsed(), Duration::from_secs(8));
    assert_eq!(report.failed_rounds, 0);
    assert_eq!(report.serves, Some(true));
    assert_eq!(report.ledger_errors, 0);
    assert_eq!(
        region.connections.load(std::sync::atomic::Ordering::SeqCst),
        5
    );
    let tokens = region.tokens.lock().unwrap().clone();
    assert_eq!(tokens.len(), 5, "a token in each round's query");
    // Each a 60-second token minted at the canary's clock (1,000,000 ms: 1,000 s).
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::HS256);
    validation.validate_exp = false;
    validation.set_audience(&["wsdr"]);
    let key =
        jsonwebtoken::DecodingKey::from_secret(b"canary-secret-0123456789abcdef012345").unwrap();
    for token in &tokens {
        let claims = jsonwebtoken::decode::<serde_json::Value>(token, &key, &validation)
            .unwrap()
            .claims;
        assert_eq!(
            (&claims["sub"], &claims["iat"], &claims["exp"]),
            (&"canary:us-east-1".into(), &1_000.into(), &1_060.into()),
            "{claims}"
        );
    }
    assert_eq!(
        ledger.round(API, VerdictSource::Inside),
        Some((true, 1_000_000))
    );
    let recorded = ledger.verdict(API, VerdictSource::Inside).await.unwrap();
    assert_eq!(recorded, Some((true, 1_000_000)));
    assert_eq!(
        ledger
            .last_change(API, VerdictSource::Inside)
            .await
            .unwrap(),
        None,
        "serving from the start is no change"
    );
}

#[tokio::test(start_paused = true)]
async fn a_dead_region_fails_after_fail_after_rounds_and_the_change_is_recorded() {
    let network = wsdr_net::Network::memory();
    let ledger = Arc::new(MemoryHealthLedger::default());
    let report = canary(
        &network,
        NOBODY,
        &[("FAST_VANTAGE", "outside")],
        ledger.clone(),
    )
    .fast_rounds()
    .await;
    assert_eq!((report.rounds, report.failed_rounds), (5, 5), "{report:?}");
    assert_eq!(report.serves, Some(false));
    assert_eq!(
        ledger.round(API, VerdictSource::Judge).map(|r| r.0),
        Some(false)
    );
    let change = ledger.last_change(API, VerdictSource::Judge).await.unwrap();
    assert_eq!(change.map(|c| c.0), Some(false));
    assert_eq!(
        ledger.verdict(API, VerdictSource::Inside).await.unwrap(),
        None,
        "recorded under its own vantage point only"
    );
}

#[tokio::test(start_paused = true)]
async fn a_cold_start_resumes_a_recorded_failover_until_recover_after_rounds() {
    let network = wsdr_net::Network::memory();
    let region = server_on(&network, Behavior::Good).await;
    let ledger = Arc::new(MemoryHealthLedger::default());
    ledger
        .put_verdict(API, VerdictSource::Inside, false, 999_000)
        .await
        .unwrap();
    // Three good rounds: fewer than the four that fail back.
    let report = canary(
        &network,
        &region.url,
        &[("FAST_WINDOW_SECONDS", "6")],
        ledger.clone(),
    )
    .fast_rounds()
    .await;
    assert_eq!((report.rounds, report.failed_rounds), (3, 0), "{report:?}");
    assert_eq!(report.serves, Some(false), "the failover holds");
}

#[tokio::test(start_paused = true)]
async fn a_canary_that_does_not_decide_records_rounds_and_no_verdict() {
    let network = wsdr_net::Network::memory();
    let ledger = Arc::new(MemoryHealthLedger::default());
    let report = canary(
        &network,
        NOBODY,
        &[("FAST_DECIDES", "false")],
        ledger.clone(),
    )
    .fast_rounds()
    .await;
    assert_eq!((report.rounds, report.failed_rounds), (5, 5), "{report:?}");
    assert_eq!(report.serves, None);
    assert_eq!(
        ledger.round(API, VerdictSource::Inside).map(|r| r.0),
        Some(false)
    );
    assert_eq!(
        ledger.verdict(API, VerdictSource::Inside).await.unwrap(),
        None
    );
}

/// A state table that answers every call with an error.
struct Unwritable;

#[async_trait]
impl HealthLedger for Unwritable {
    async fn put_round(&self, _: &str, _: VerdictSource, _: bool, _: u64) -> wsdr_core::Result<()> {
        Err(wsdr_core::Error::Throttled("throttled".into()))
    }
    async fn put_verdict(
        &self,
        _: &str,
        _: VerdictSource,
        _: bool,
        _: u64,
    ) -> wsdr_core::Result<()> {
        Err(wsdr_core::Error::Throttled("throttled".into()))
    }
    async fn verdict(&self, _: &str, _: VerdictSource) -> wsdr_core::Result<Option<(bool, u64)>> {
        Err(wsdr_core::Error::Throttled("throttled".into()))
    }
    async fn put_change(
        &self,
        _: &str,
        _: VerdictSource,
        _: bool,
        _: u64,
    ) -> wsdr_core::Result<()> {
        Err(wsdr_core::Error::Throttled("throttled".into()))
    }
    async fn last_change(
        &self,
        _: &str,
        _: VerdictSource,
    ) -> wsdr_core::Result<Option<(bool, u64)>> {
        Err(wsdr_core::Error::Throttled("throttled".into()))
    }
}

#[tokio::test(start_paused = true)]
async fn every_record_the_state_table_refuses_is_counted_and_the_rounds_go_on() {
    let network = wsdr_net::Network::memory();
    let report = canary(&network, NOBODY, &[], Arc::new(Unwritable))
        .fast_rounds()
        .await;
    assert_eq!((report.rounds, report.failed_rounds), (5, 5), "{report:?}");
    assert_eq!(report.serves, Some(false));
    // The verdict read at the start, five rounds and five verdicts, one change.
    assert_eq!(report.ledger_errors, 1 + 5 + 5 + 1);
}

#[test]
fn fast_rounds_are_1_to_30_seconds_apart_and_0_is_none() {
    let interval = |seconds: &str| {
        lookup(NOBODY, &[("FAST_PROBE_INTERVAL_SECONDS", seconds)])
            .map(|config| config.fast.map(|fast| fast.interval))
    };
    assert_eq!(interval("0").unwrap(), None);
    assert_eq!(interval("1").unwrap(), Some(Duration::from_secs(1)));
    assert_eq!(interval("30").unwrap(), Some(Duration::from_secs(30)));
    let refused = interval("31").unwrap_err().to_string();
    assert!(refused.contains("FAST_PROBE_INTERVAL_SECONDS"), "{refused}");
}

#[test]
fn a_connect_to_address_of_none_or_blank_is_no_address() {
    let connect_to = |value: &str| {
        lookup(NOBODY, &[("TARGET_CONNECT_TO", value)])
            .unwrap()
            .target_connect_to
    };
    assert_eq!(connect_to("none"), None);
    assert_eq!(connect_to("  "), None);
    assert_eq!(connect_to("192.0.2.10"), Some("192.0.2.10".to_owned()));
}

#[tokio::test(start_paused = true)]
async fn a_subprotocol_placement_carries_the_token_in_the_offer_not_the_query() {
    let network = wsdr_net::Network::memory();
    let region = server_on(&network, Behavior::Good).await;
    let ledger = Arc::new(MemoryHealthLedger::default());
    let canary = canary(
        &network,
        &region.url,
        &[("TOKEN_PLACEMENT", "subprotocol")],
        ledger,
    );
    assert!(canary.probe_once().await.is_ok());
    assert!(region.tokens.lock().unwrap().is_empty());
    let offers = region.protocols.lock().unwrap().clone();
    assert_eq!(offers.len(), 1);
    assert!(offers[0].starts_with("wsdr, ey"), "{offers:?}");
}

#[tokio::test(start_paused = true)]
async fn a_probe_dials_the_connect_to_address_under_the_targets_name() {
    let network = wsdr_net::Network::memory();
    let region = server_on(&network, Behavior::Good).await;
    let port = region.url.rsplit(':').next().unwrap();
    let named = format!("ws://primary.example.com:{port}");
    let ledger: Arc<dyn HealthLedger> = Arc::new(MemoryHealthLedger::default());
    let dialled = canary(
        &network,
        &named,
        &[("TARGET_CONNECT_TO", "127.0.0.1")],
        ledger.clone(),
    );
    assert!(dialled.probe_once().await.is_ok());
    // Without the address, the name alone does not reach it.
    assert!(canary(&network, &named, &[], ledger)
        .probe_once()
        .await
        .is_err());
}

#[tokio::test(start_paused = true)]
async fn the_minutes_probes_are_spaced_after_the_first_and_their_latency_is_the_mean() {
    let network = wsdr_net::Network::memory();
    let region = server_on(&network, Behavior::Slow(Duration::from_millis(300))).await;
    let canary = Arc::new(canary(
        &network,
        &region.url,
        &[("PROBES_PER_RUN", "3"), ("PROBE_SPACING_SECONDS", "15")],
        Arc::new(MemoryHealthLedger::default()),
    ));
    let connections = || region.connections.load(std::sync::atomic::Ordering::SeqCst);
    let run = tokio::spawn({
        let canary = canary.clone();
        async move { canary.run_once().await }
    });
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(connections(), 1, "the first probe at once");
    tokio::time::sleep(Duration::from_millis(15_000)).await;
    assert_eq!(
        connections(),
        1,
        "the second one spacing after the first's end"
    );
    let report = run.await.unwrap().unwrap();
    assert_eq!(connections(), 2);
    // Two of three planned succeeded: the majority is decided.
    assert_eq!((report.probes, report.successes), (2, 2), "{report:?}");
    assert!(report.healthy);
    assert_eq!(report.latency_ms, Some(300.0));
}

#[tokio::test(start_paused = true)]
async fn a_probe_times_its_heartbeat_and_its_whole_exchange_in_milliseconds() {
    let network = wsdr_net::Network::memory();
    let region = server_on(&network, Behavior::Slow(Duration::from_millis(250))).await;
    let canary = canary(
        &network,
        &region.url,
        &[],
        Arc::new(MemoryHealthLedger::default()),
    );
    let success = canary.probe_once().await.unwrap();
    assert_eq!(success.heartbeat_ms, 250.0);
    assert_eq!(success.total_ms, 250.0);
    assert_eq!(
        format!("{canary:?}"),
        format!("Canary {{ target: {:?}, .. }}", region.url)
    );
}
