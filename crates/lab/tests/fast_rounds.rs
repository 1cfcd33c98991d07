#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The canary's fast rounds (what the Lambdas run in AWS) against a lab Region: the Region's
//! own canary records its rounds, the watcher outside decides with them, and the verdict
//! that a health endpoint would serve follows the Region's health.

use std::sync::Arc;
use std::time::Duration;
use wsdr_core::memory::{MemoryHealthLedger, MemoryMetrics};
use wsdr_core::HealthLedger;
use wsdr_lab::RegionId;
use wsdr_lab::{Fault, LabConfig, TimeScale, World};

const SECRET: &str = "fast-rounds-test-secret-of-32-bytes-or-more";

fn canary(
    lab: &World,
    vantage: &str,
    decides: Option<Vec<String>>,
    ledger: &Arc<MemoryHealthLedger>,
    window_ms: u64,
) -> canary::Canary {
    let region = &lab.region(RegionId::Primary);
    let config = canary::Config {
        target_url: region.url(),
        target_connect_to: None,
        expected_region: region.name.clone(),
        api_id: region.api_id.clone(),
        metric_names: wsdr_aws::MetricNames::default(),
        probes_per_run: 1,
        probe_spacing: Duration::ZERO,
        probe_timeout: Duration::from_millis(500),
        auction_id: wsdr_protocol::AuctionId::new("canary").unwrap(),
        secret: SECRET.as_bytes().to_vec(),
        issuer: "wsdr-canary".into(),
        audience: wsdr_lab::world::AUDIENCE.into(),
        placement: wsdr_client::TokenPlacement::QueryString,
        verdict: None,
        fast: Some(canary::FastRounds {
            interval: Duration::from_millis(100),
            window: Duration::from_millis(window_ms),
            vantage: vantage.into(),
            decides,
            fail_after: 3,
            recover_after: 4,
            state_table: "unused".into(),
        }),
    };
    canary::Canary::new(
        config,
        Arc::new(MemoryMetrics::default()),
        Arc::new(wsdr_core::SystemClock),
    )
    .with_health_ledger(ledger.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watcher_decides_with_the_regions_own_rounds() {
    let lab = World::builder()
        .config(LabConfig {
            scale: TimeScale::new(60.0),
            canary_secret: Some(SECRET.into()),
            ..LabConfig::default()
        })
        .start()
        .await
        .unwrap();
    let api = lab.region(RegionId::Primary).api_id.clone();
    let ledger = Arc::new(MemoryHealthLedger::default());
    let inside = canary(&lab, "inside", None, &ledger, 1_000);
    let outside = canary(&lab, "outside", Some(vec!["inside".into()]), &ledger, 1_000);

    // Healthy: ten rounds each, the verdict recorded as serve every round.
    let (_, report) = tokio::join!(inside.fast_rounds(), outside.fast_rounds());
    assert_eq!(report.rounds, 10);
    assert_eq!(report.failed_rounds, 0, "{report:?}");
    assert_eq!(report.serves, Some(true));
    assert_eq!(ledger.verdict(&api).await.unwrap().map(|v| v.0), Some(true));
    assert_eq!(
        ledger.round(&api, "inside").await.unwrap().map(|r| r.0),
        Some(true)
    );

    // The handler throttled: both views fail, the verdict turns within the invocation.
    lab.inject(Fault::Throttle(RegionId::Primary));
    let (_, report) = tokio::join!(inside.fast_rounds(), outside.fast_rounds());
    assert_eq!(report.failed_rounds, 10, "{report:?}");
    assert_eq!(report.serves, Some(false));
    assert_eq!(
        ledger.verdict(&api).await.unwrap().map(|v| v.0),
        Some(false)
    );

    // Healed, but the Region's own canary does not run: its last round (a failure) stands
    // until it goes stale, and a silent view never votes to serve. The watcher alone cannot
    // bring the Region back.
    lab.inject(Fault::Heal);
    tokio::time::sleep(Duration::from_millis(600)).await;
    let report = outside.fast_rounds().await;
    assert_eq!(report.failed_rounds, 0, "{report:?}");
    assert_eq!(report.serves, Some(false), "one view alone decides nothing");

    // Both views healthy again: serve, after the recovery streak.
    let (_, report) = tokio::join!(inside.fast_rounds(), outside.fast_rounds());
    assert_eq!(report.serves, Some(true), "{report:?}");

    // A new watcher instance (a cold start) resumes a recorded failover rather than writing
    // "serve" over it: one healthy round is not the recovery streak.
    ledger
        .put_verdict(
            &api,
            false,
            wsdr_core::Clock::now_ms(&wsdr_core::SystemClock),
        )
        .await
        .unwrap();
    let cold = canary(&lab, "outside", Some(vec!["inside".into()]), &ledger, 100);
    let report = cold.fast_rounds().await;
    assert_eq!((report.rounds, report.failed_rounds), (1, 0), "{report:?}");
    assert_eq!(report.serves, Some(false));
    assert_eq!(
        ledger.verdict(&api).await.unwrap().map(|v| v.0),
        Some(false)
    );
}
