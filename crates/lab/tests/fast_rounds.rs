#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The canary's fast rounds (what the Lambdas run in AWS) against a lab Region: each vantage
//! point (the Region's own canary, the watcher outside it) records its rounds and decides its
//! own verdict, under its own key, and a restart resumes what it decided.

use std::sync::Arc;
use std::time::Duration;
use wsdr_core::memory::{MemoryHealthLedger, MemoryMetrics};
use wsdr_core::HealthLedger;
use wsdr_core::VerdictSource::{self, Inside, Judge};
use wsdr_lab::RegionId;
use wsdr_lab::{Fault, LabConfig, TimeScale, World};

const SECRET: &str = "fast-rounds-test-secret-of-32-bytes-or-more";

fn canary(
    lab: &World,
    source: VerdictSource,
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
            source,
            decides: true,
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
async fn each_vantage_point_decides_its_own_verdict_under_its_own_key() {
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
    let inside = canary(&lab, Inside, &ledger, 1_000);
    let outside = canary(&lab, Judge, &ledger, 1_000);

    // Healthy: ten rounds each, each verdict recorded as serve every round.
    let (inner, report) = tokio::join!(inside.fast_rounds(), outside.fast_rounds());
    assert_eq!(report.rounds, 10);
    assert_eq!(report.failed_rounds, 0, "{report:?}");
    assert_eq!((inner.serves, report.serves), (Some(true), Some(true)));
    for source in [Inside, Judge] {
        assert_eq!(
            ledger.verdict(&api, source).await.unwrap().map(|v| v.0),
            Some(true)
        );
        assert_eq!(ledger.round(&api, source).map(|r| r.0), Some(true));
    }

    // The handler throttled: each view fails and turns within the invocation.
    lab.inject(Fault::Throttle(RegionId::Primary));
    let (inner, report) = tokio::join!(inside.fast_rounds(), outside.fast_rounds());
    assert_eq!(report.failed_rounds, 10, "{report:?}");
    assert_eq!((inner.serves, report.serves), (Some(false), Some(false)));
    assert_eq!(
        ledger.last_change(&api, Judge).await.unwrap().map(|c| c.0),
        Some(false),
        "the judge's change: the fail-over order"
    );

    // Healed, and only the watcher runs: its own verdict comes back after the recovery
    // streak; the inside verdict is untouched (another writer's item).
    lab.inject(Fault::Heal);
    let report = outside.fast_rounds().await;
    assert_eq!(report.failed_rounds, 0, "{report:?}");
    assert_eq!(report.serves, Some(true));
    assert_eq!(
        ledger.verdict(&api, Inside).await.unwrap().map(|v| v.0),
        Some(false)
    );

    // A new watcher instance (a cold start) resumes a recorded failover rather than writing
    // "serve" over it: one healthy round is not the recovery streak.
    ledger
        .put_verdict(
            &api,
            Judge,
            false,
            wsdr_core::Clock::now_ms(&wsdr_core::SystemClock),
        )
        .await
        .unwrap();
    let cold = canary(&lab, Judge, &ledger, 100);
    let report = cold.fast_rounds().await;
    assert_eq!((report.rounds, report.failed_rounds), (1, 0), "{report:?}");
    assert_eq!(report.serves, Some(false));
    assert_eq!(
        ledger.verdict(&api, Judge).await.unwrap().map(|v| v.0),
        Some(false)
    );
}
