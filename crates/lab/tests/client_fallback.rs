#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! Client-assisted failover in the lab, as deterministic simulations (AWS time: a busy
//! machine cannot move a ratio or a bar): the DNS-only and client-assisted
//! runs of one scenario compared; a flapping primary causes no ping-pong; a blip (one lost
//! heartbeat) moves nobody.

use wsdr_lab::runs::drill;
use wsdr_lab::runs::report::Comparison;
use wsdr_lab::{DrillConfig, LabConfig, Scenario};

fn config(scenario: Scenario, client_fallback: bool) -> DrillConfig {
    DrillConfig {
        scenario,
        users: 20,
        seed: 3,
        client_fallback,
        lab: LabConfig::default(),
        ..DrillConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_assistance_halves_p99_rto_without_losing_or_doubling_a_bid() {
    let dns_only = drill::run_simulated(config(Scenario::Throttle, false))
        .await
        .unwrap();
    let assisted = drill::run_simulated(config(Scenario::Throttle, true))
        .await
        .unwrap();
    let comparison = Comparison::new(dns_only, assisted);
    let table = comparison.table();
    assert!(comparison.passed(), "{table}");
    let ratio = comparison.p99_rto_ratio.expect("both runs restored");
    assert!(ratio < 0.5, "p99 ratio {ratio:.2}\n{table}");
    assert!(
        comparison.client_assisted.endpoint_moves >= 20,
        "every client moved on its own\n{table}"
    );
    assert_eq!(comparison.dns_only.endpoint_moves, 0, "{table}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flapping_primary_makes_no_client_ping_pong_and_a_blip_moves_nobody() {
    let flapping = drill::run_simulated(config(Scenario::Flapping, true))
        .await
        .unwrap();
    assert_eq!(
        flapping.returns_to_primary_during_fault,
        0,
        "{}",
        flapping.table()
    );
    assert!(flapping.passed(), "{}", flapping.table());

    for client_fallback in [false, true] {
        let blip = drill::run_simulated(config(Scenario::Blip, client_fallback))
            .await
            .unwrap();
        let table = blip.table();
        assert_eq!(blip.disconnects_during_fault, 0, "{table}");
        assert_eq!(blip.endpoint_moves, 0, "{table}");
        assert_eq!(blip.restored, 0, "{table}");
        assert_eq!(blip.dns_flips_during_fault, 0, "{table}");
        assert!(blip.passed(), "{table}");
    }
}
