#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The chat room's drills (`wsdr drill --app chat`) as deterministic simulations: members post
//! in the lobby while the primary breaks; every member is back in the secondary, nothing
//! acknowledged is lost but with a Region lost for good in eventual mode (excused by name),
//! the kit's and the room's rules hold, and a drill replays to its digest.

use wsdr_core::Consistency;
use wsdr_lab::runs::chat_drill::{self, ChatDrillReport};
use wsdr_lab::{DrillConfig, LabConfig, Scenario};

fn config(scenario: Scenario, consistency: Consistency) -> DrillConfig {
    DrillConfig {
        scenario,
        users: 10,
        seed: 7,
        lab: LabConfig {
            consistency,
            ..LabConfig::wsdr_defaults()
        },
        ..DrillConfig::default()
    }
}

async fn drill(scenario: Scenario, consistency: Consistency) -> ChatDrillReport {
    chat_drill::run_simulated(config(scenario, consistency))
        .await
        .unwrap()
}

fn passed_with_everyone_moved(report: &ChatDrillReport) {
    assert!(report.passed, "{report:#?}");
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    assert!(report.converged);
    assert_eq!(report.members_restored_on_secondary, report.members);
    assert!(report.messages_acknowledged > 0);
    let moved = report.dns_moved_after_s.expect("the name moved");
    // Detected by the record's check before the name moved (the evacuation's scenario
    // detects nothing: it is planned).
    if let Some(detected) = report.detected_after_s {
        assert!(detected <= moved, "{report:#?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_room_fails_over_and_back_losing_nothing_acknowledged() {
    for (scenario, consistency) in [
        (Scenario::Throttle, Consistency::Eventual),
        (Scenario::Down, Consistency::Eventual),
        (Scenario::Failback, Consistency::Strong),
        (Scenario::Isolate, Consistency::Strong),
    ] {
        let report = drill(scenario, consistency).await;
        passed_with_everyone_moved(&report);
        assert!(report.failed_back, "{scenario:?}: {report:#?}");
        assert_eq!(report.rpo_lost_acknowledged, 0, "{scenario:?}");
        assert!(report.excused.values().all(|n| *n == 0), "{report:#?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_lost_for_good_costs_eventual_mode_only_its_unreplicated_messages() {
    let eventual = drill(Scenario::NeverReturns, Consistency::Eventual).await;
    passed_with_everyone_moved(&eventual);
    assert!(!eventual.failed_back);
    // What was lost is what the guarantee table excuses, by name, and nothing more.
    assert_eq!(
        eventual
            .excused
            .get("lost_with_region")
            .copied()
            .unwrap_or(0),
        eventual.rpo_lost_acknowledged
    );
    let strong = drill(Scenario::NeverReturns, Consistency::Strong).await;
    passed_with_everyone_moved(&strong);
    assert_eq!(strong.rpo_lost_acknowledged, 0, "{strong:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blip_moves_no_member_and_a_drill_replays_to_its_digest() {
    let blip = drill(Scenario::Blip, Consistency::Eventual).await;
    assert!(blip.passed, "{blip:#?}");
    assert_eq!(blip.members_restored_on_secondary, 0);
    assert_eq!(blip.dns_moved_after_s, None);
    let again = drill(Scenario::Blip, Consistency::Eventual).await;
    assert_eq!(again.digest, blip.digest);
    let other_seed = chat_drill::run_simulated(DrillConfig {
        seed: 8,
        ..config(Scenario::Blip, Consistency::Eventual)
    })
    .await
    .unwrap();
    assert_ne!(
        other_seed.digest, blip.digest,
        "the digest depends on the run"
    );
}
