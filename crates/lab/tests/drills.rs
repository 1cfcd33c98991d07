#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! Every drill scenario end to end at time scale 60 (one lab second = one AWS minute), with
//! assertions on the report. Scenarios run one after another: they share two cores.

use wsdr_lab::{drill, DrillConfig, LabConfig, Scenario, TimeScale};

fn config(scenario: Scenario) -> DrillConfig {
    DrillConfig {
        scenario,
        users: 10,
        seed: 7,
        lab: LabConfig {
            scale: TimeScale::new(60.0),
            ..LabConfig::default()
        },
        ..DrillConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_fails_over_without_losing_or_doubling_a_bid() {
    for scenario in [
        Scenario::Throttle,
        Scenario::Down,
        Scenario::Partition,
        Scenario::Flapping,
        Scenario::Failback,
    ] {
        let report = drill::run(config(scenario)).await.unwrap();
        let name = format!("{scenario:?}");
        assert_eq!(
            report.restored,
            10,
            "{name}: every client restored in the secondary\n{}",
            report.table()
        );
        assert_eq!(
            report.lost_acknowledged_bids,
            0,
            "{name}\n{}",
            report.table()
        );
        assert_eq!(report.duplicate_bids, 0, "{name}\n{}", report.table());
        assert!(
            report.converged,
            "{name}: Regions converged\n{}",
            report.table()
        );
        assert!(report.high_bid_consistent, "{name}\n{}", report.table());
        assert!(report.acknowledged_bids > 0, "{name}: the drill must bid");
        // Detection: 2 breaching minutes, never faster than 1 minute, and bounded.
        let detection = report.detection_ms.expect("alarm fired") * 60.0 / 1000.0;
        assert!(
            (60.0..=300.0).contains(&detection),
            "{name}: detection {detection:.0} s AWS"
        );
        let dns = report.dns_flip_ms.expect("DNS flipped") * 60.0 / 1000.0;
        assert!(dns >= detection, "{name}: DNS cannot flip before the alarm");
        let p99 = report.rto_aws_s.p99.unwrap();
        assert!(p99 < 600.0, "{name}: RTO p99 {p99:.0} s AWS");
        // Failback is slower than failover and happens.
        let failback = report.failback_ms.expect("failed back") * 60.0 / 1000.0;
        assert!(failback >= 240.0, "{name}: failback after {failback:.0} s AWS is too fast to be the 5-healthy-minute rule");
        // A flapping primary makes the name flip once, not back and forth.
        assert_eq!(
            report.dns_flips_during_fault,
            1,
            "{name}: DNS ping-pong\n{}",
            report.table()
        );
        if scenario == Scenario::Partition {
            // Replication was cut during the failover: data was at risk, and still converged.
            assert!(report.converged);
        }
        let json = serde_json::to_value(&report).unwrap();
        for field in [
            "rto_ms",
            "detection_ms",
            "dns_flip_ms",
            "lost_acknowledged_bids",
            "duplicate_bids",
            "converged",
            "clients",
            "scenario",
        ] {
            assert!(json.get(field).is_some(), "report field {field}");
        }
        for q in ["p50", "p99", "max"] {
            assert!(json["rto_ms"][q].is_number(), "rto_ms.{q}");
        }
    }
}

#[tokio::test]
async fn control_api_reports_status_and_injects_faults() {
    use std::sync::Arc;
    let lab = Arc::new(wsdr_lab::Lab::start(LabConfig::default()).await.unwrap());
    let addr = wsdr_lab::control::serve(lab.clone(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let (status, body) =
        wsdr_lab::control::post_json(addr, "/api/fault", r#"{"kind":"throttle","region":0}"#)
            .await
            .unwrap();
    assert_eq!(status, 200, "{body}");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["regions"][0]["throttled"], true);
    assert_eq!(json["regions"][1]["throttled"], false);
    let (status, _) =
        wsdr_lab::control::post_json(addr, "/api/fault", r#"{"kind":"melt","region":0}"#)
            .await
            .unwrap();
    assert_eq!(status, 400);
    let (status, body) =
        wsdr_lab::control::post_json(addr, "/api/fault", r#"{"kind":"partition"}"#)
            .await
            .unwrap();
    assert_eq!(status, 200);
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(json["replication"]
        .as_array()
        .unwrap()
        .iter()
        .all(|l| l["cut"] == true));
    let (status, body) = wsdr_lab::control::post_json(addr, "/api/fault", r#"{"kind":"heal"}"#)
        .await
        .unwrap();
    assert_eq!(status, 200);
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["regions"][0]["throttled"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_that_never_returns_loses_exactly_its_unreplicated_bids() {
    // A minute of replication lag (AWS) at the fault: the primary takes its backlog with it.
    let mut config = config(Scenario::NeverReturns);
    config.lab.replication_lag = std::time::Duration::from_secs(60);
    let report = drill::run(config).await.unwrap();
    let table = report.table();
    assert_eq!(report.restored, 10, "{table}");
    assert_eq!(
        report.lost_acknowledged_bids, 0,
        "nothing else may be missing\n{table}"
    );
    assert!(
        report.acknowledged_bids_lost_with_region > 0,
        "a minute of backlog holds acknowledged bids\n{table}"
    );
    assert_eq!(report.duplicate_bids, 0, "{table}");
    assert!(report.high_bid_consistent, "{table}");
    assert!(
        report.failback_ms.is_none(),
        "a lost Region takes no traffic back"
    );
    assert!(report.passed(), "{table}");
}

/// The lab runs on tokio's clock alone: a drill at time scale 1 (AWS seconds, the reference
/// design's own timers) runs in paused time, where tokio jumps to the next timer whenever
/// every task waits. Ten AWS minutes of drill pass in a few seconds of CPU.
#[tokio::test(start_paused = true)]
async fn a_drill_at_aws_speed_runs_in_paused_time() {
    let started = tokio::time::Instant::now();
    let report = drill::run(DrillConfig {
        scenario: Scenario::Throttle,
        users: 5,
        seed: 3,
        lab: LabConfig {
            scale: TimeScale::new(1.0),
            ..LabConfig::default()
        },
        ..DrillConfig::default()
    })
    .await
    .unwrap();
    assert!(report.passed(), "{}", report.table());
    assert_eq!(report.restored, 5, "{}", report.table());
    // The reference design's detection (three one-minute periods) took AWS minutes of the
    // paused clock: only virtual time can pass that fast.
    let detection = report.detection_ms.expect("the fault was detected");
    assert!(detection >= 120_000.0, "{}", report.table());
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(300),
        "the drill spanned {:?} of lab time",
        started.elapsed()
    );
}
