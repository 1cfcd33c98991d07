#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! Every drill scenario as a deterministic simulation (AWS time, scale 1, no real sleeps):
//! each passes its own checks, and a drill replays to the same report digest. At scale 1 the
//! `slow` scenario needs no special time scale (no real-time floor on probe timeouts).

use wsdr_core::Consistency;
use wsdr_lab::{drill, DrillConfig, LabConfig, Scenario};

fn config(scenario: Scenario, consistency: Consistency) -> DrillConfig {
    DrillConfig {
        scenario,
        users: 10,
        seed: 7,
        lab: LabConfig {
            consistency,
            ..LabConfig::default()
        },
        ..DrillConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_passes_as_a_simulated_drill() {
    let cases = [
        (Scenario::Throttle, Consistency::Eventual),
        (Scenario::Down, Consistency::Eventual),
        (Scenario::Partition, Consistency::Eventual),
        (Scenario::Flapping, Consistency::Eventual),
        (Scenario::Failback, Consistency::Eventual),
        (Scenario::Blip, Consistency::Eventual),
        (Scenario::NeverReturns, Consistency::Eventual),
        (Scenario::NeverReturns, Consistency::Strong),
        (Scenario::Slow, Consistency::Eventual),
        (Scenario::Evacuate, Consistency::Eventual),
        // Eventual mode never notices an isolated table replica (docs/LAB.md): strong only.
        (Scenario::Isolate, Consistency::Strong),
    ];
    for (scenario, consistency) in cases {
        let report = drill::run_simulated(config(scenario, consistency))
            .await
            .unwrap();
        let name = format!("{scenario:?} ({consistency})");
        assert_eq!(report.clock, "simulated", "{name}");
        assert_eq!(report.time_scale, 1.0, "{name}: AWS time");
        assert!(
            report.passed(),
            "{name}: {:?}\n{}",
            report.failed_checks,
            report.table()
        );
        assert_eq!(
            report.lost_acknowledged_bids,
            0,
            "{name}\n{}",
            report.table()
        );
        assert_eq!(report.duplicate_bids, 0, "{name}\n{}", report.table());
        assert!(report.converged, "{name}\n{}", report.table());
        assert!(report.acknowledged_bids > 0, "{name}: the drill must bid");
        match scenario {
            // Nobody may move.
            Scenario::Blip => assert_eq!(report.endpoint_moves, 0, "{name}"),
            Scenario::Evacuate => assert_eq!(report.users_seeing_errors, 0, "{name}"),
            _ => assert_eq!(report.restored, 10, "{name}\n{}", report.table()),
        }
    }
}

#[tokio::test]
async fn a_simulated_drill_replays_to_the_same_report() {
    let a = drill::run_simulated(config(Scenario::Throttle, Consistency::Eventual))
        .await
        .unwrap();
    let b = drill::run_simulated(config(Scenario::Throttle, Consistency::Eventual))
        .await
        .unwrap();
    assert_eq!(a.digest, b.digest);
    assert_eq!(a.rto_ms.p99, b.rto_ms.p99);
    let other_seed = drill::run_simulated(DrillConfig {
        seed: 8,
        ..config(Scenario::Throttle, Consistency::Eventual)
    })
    .await
    .unwrap();
    assert_ne!(a.digest, other_seed.digest);
}
