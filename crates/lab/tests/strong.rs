#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! Strong mode in the lab: the MRSC table (two Regions' replicas and a witness) under the real
//! handler, reached by real clients through each Region's own URL.

use std::sync::Arc;
use std::time::Duration;
use wsdr_client::{ClientBuilder, Event, StaticToken};
use wsdr_lab::RegionId;
use wsdr_lab::{Fault, LabConfig, TimeScale, World};
use wsdr_protocol::{Amount, AuctionId, BidStatus};

async fn lab_in(consistency: wsdr_core::Consistency) -> Arc<World> {
    Arc::new(
        World::builder()
            .config(LabConfig {
                scale: TimeScale::new(60.0),
                consistency,
                ..LabConfig::default()
            })
            .start()
            .await
            .unwrap(),
    )
}

/// A client on one Region's own URL, following `lot-1`.
fn client(
    lab: &World,
    region: RegionId,
    sub: &str,
) -> (
    wsdr_client::Client,
    tokio::sync::mpsc::UnboundedReceiver<Event>,
) {
    let endpoints = lab
        .regions()
        .map(|(_, r)| wsdr_client::RegionalEndpoint {
            region: r.name.clone(),
            url: r.url(),
        })
        .collect();
    ClientBuilder::new(lab.region(region).url())
        .token_provider(Arc::new(StaticToken(lab.user_token(sub).unwrap())))
        .fallback(wsdr_client::Fallback::new(endpoints))
        .subscribe(AuctionId::new("lot-1").unwrap())
        .seed(1)
        .start()
}

async fn next_result(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<Event>,
) -> (BidStatus, Option<String>, String) {
    loop {
        let event = tokio::time::timeout(Duration::from_secs(10), events.recv())
            .await
            .expect("an answer within 10 s")
            .expect("the client runs");
        if let Event::BidResult {
            status,
            reason,
            region,
            ..
        } = event
        {
            return (status, reason, region);
        }
    }
}

/// Alice bids 200,000 on lot-1 and is accepted; then Bob bids 150,000 in his Region: his
/// answer (status, reason).
async fn alice_high_then_bob_lower(
    alice: &wsdr_client::Client,
    alice_events: &mut tokio::sync::mpsc::UnboundedReceiver<Event>,
    bob: &wsdr_client::Client,
    bob_events: &mut tokio::sync::mpsc::UnboundedReceiver<Event>,
) -> (BidStatus, Option<String>) {
    let lot = AuctionId::new("lot-1").unwrap();
    alice
        .bid(lot.clone(), Amount::new(200_000).unwrap())
        .await
        .unwrap();
    assert_eq!(next_result(alice_events).await.0, BidStatus::Accepted);
    bob.bid(lot, Amount::new(150_000).unwrap()).await.unwrap();
    let (status, reason, _) = next_result(bob_events).await;
    (status, reason)
}

async fn restored(events: &mut tokio::sync::mpsc::UnboundedReceiver<Event>) -> String {
    loop {
        let event = tokio::time::timeout(Duration::from_secs(10), events.recv())
            .await
            .expect("a state within 10 s")
            .expect("the client runs");
        if let Event::StateRestored { region, .. } = event {
            return region;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_regions_order_bids_on_one_ledger_and_a_minority_region_redirects() {
    let lab = lab_in(wsdr_core::Consistency::Strong).await;
    let (alice, mut alice_events) = client(&lab, RegionId::Primary, "alice");
    let (bob, mut bob_events) = client(&lab, RegionId::Secondary, "bob");
    assert_eq!(restored(&mut alice_events).await, "us-east-1");
    assert_eq!(restored(&mut bob_events).await, "us-west-2");
    let lot = AuctionId::new("lot-1").unwrap();

    // Below alice's acknowledged bid in the other Region: MREC could accept it; MRSC never.
    let (status, reason) =
        alice_high_then_bob_lower(&alice, &mut alice_events, &bob, &mut bob_events).await;
    assert_eq!(
        (status, reason.as_deref()),
        (BidStatus::Rejected, Some("too_low"))
    );

    // The primary's replica cut off from the secondary and the witness.
    lab.inject(Fault::Isolate(RegionId::Primary));
    alice
        .bid(lot.clone(), Amount::new(300_000).unwrap())
        .await
        .unwrap();
    let (status, _, region) = next_result(&mut alice_events).await;
    assert_eq!(
        (status, region.as_str()),
        (BidStatus::Redirect, "us-east-1")
    );
    let members = lab.status().table_members.unwrap();
    assert!(!members[0].quorum && members[1].quorum && members[2].quorum);
    lab.inject(Fault::Heal);
    drop((alice, bob));
}

fn strong_drill(scenario: wsdr_lab::Scenario) -> wsdr_lab::DrillConfig {
    wsdr_lab::DrillConfig {
        scenario,
        users: 10,
        seed: 7,
        lab: LabConfig {
            scale: TimeScale::new(60.0),
            consistency: wsdr_core::Consistency::Strong,
            ..LabConfig::default()
        },
        ..wsdr_lab::DrillConfig::default()
    }
}

/// Strong mode's promises, end to end: no bid accepted below an acknowledged one, nothing
/// acknowledged lost even with a Region gone for good, one winner; a Region cut off from
/// the quorum redirects its users, and the failover decision moves the name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strong_drills_lose_nothing_and_order_every_bid_once() {
    use wsdr_lab::Scenario;
    for scenario in [
        Scenario::Isolate,
        Scenario::NeverReturns,
        Scenario::Partition,
    ] {
        let report = wsdr_lab::runs::drill::run_simulated(strong_drill(scenario))
            .await
            .unwrap();
        let name = format!("{scenario:?}");
        assert_eq!(report.consistency, "strong");
        assert_eq!(report.restored, 10, "{name}\n{}", report.table());
        assert!(report.acknowledged_bids > 0, "{name}: the drill must bid");
        assert_eq!(
            report.accepted_below_other_region,
            0,
            "{name}\n{}",
            report.table()
        );
        assert_eq!(
            report.acknowledged_bids_lost_with_region,
            0,
            "{name}\n{}",
            report.table()
        );
        assert_eq!(
            report.lost_acknowledged_bids,
            0,
            "{name}\n{}",
            report.table()
        );
        assert!(report.high_bid_consistent, "{name}\n{}", report.table());
        assert!(report.passed(), "{name}: {:?}", report.failed_checks);
        if scenario == Scenario::Isolate {
            // The primary's users were told to go elsewhere, and its table refused them.
            assert!(report.redirected_bids > 0, "{}", report.table());
            assert!(
                report.no_quorum_refusals[0] > 0,
                "{:?}",
                report.no_quorum_refusals
            );
        }
    }
}

/// During a partition, with one user on each Region's own URL: eventual mode accepts a bid
/// below the high bid the other Region has already acknowledged; strong mode cannot (and
/// the test shows the difference is real, not the measure's blindness).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_partition_eventual_accepts_below_the_other_region_and_strong_refuses() {
    for consistency in [
        wsdr_core::Consistency::Eventual,
        wsdr_core::Consistency::Strong,
    ] {
        let lab = lab_in(consistency).await;
        let (alice, mut alice_events) = client(&lab, RegionId::Primary, "alice");
        let (bob, mut bob_events) = client(&lab, RegionId::Secondary, "bob");
        restored(&mut alice_events).await;
        restored(&mut bob_events).await;
        lab.inject(Fault::Partition);
        let (status, reason) =
            alice_high_then_bob_lower(&alice, &mut alice_events, &bob, &mut bob_events).await;
        match consistency {
            wsdr_core::Consistency::Eventual => assert_eq!(status, BidStatus::Accepted),
            wsdr_core::Consistency::Strong => {
                assert_eq!(
                    (status, reason.as_deref()),
                    (BidStatus::Rejected, Some("too_low"))
                )
            }
        }
        drop((alice, bob));
    }
}

/// The primary is lost for good while every strong request pays a 12.5 s cross-Region cost:
/// the survivor's probes time out and its own verdict turns to fail-over too. The SECONDARY
/// record reads the secondary's endpoint, not its verdict (docs/DEPLOY.md, the decision), so
/// the name still moves and stays; when the record read the secondary's own verdict, a
/// DNS-only user who reopened the app stayed on the dead primary until the run ended
/// (`user_not_connected`, seed 8375395329192610678 of the strong campaign before the
/// judge-lost step was added to the draw, and seven more like it). The schedule is pinned:
/// a new step in the draw changes what a seed draws.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_survivor_keeps_the_name_once_the_primary_is_lost_for_good() {
    use wsdr_lab::runs::chaos::{self, ChaosConfig, Clock};
    let schedule: Vec<chaos::Step> = serde_json::from_str(
        r#"[{"fault":"disconnect-dropped","secs":56.0},{"fault":"never-returns","lag_ms":12544,"secs":159.0}]"#,
    )
    .unwrap();
    let run = chaos::replay(
        8_375_395_329_192_610_678,
        ChaosConfig {
            clock: Clock::Simulated,
            consistency: wsdr_core::Consistency::Strong,
            schedule: Some(schedule),
            ..ChaosConfig::default()
        },
    )
    .await
    .unwrap();
    assert!(
        run.schedule
            .iter()
            .any(|step| matches!(step, chaos::Step::NeverReturns { .. })),
        "the seed's schedule loses the primary for good: {:?}",
        run.schedule
    );
    assert!(run.violations.is_empty(), "{}", chaos::describe(&run));
}
