#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! Answers that are not final: a replay rejected by a Region that has not seen the first copy,
//! and an `unknown` outcome. The client settles them against `you.bids` without user action
//! (docs/CLIENT.md), on paused time against a fake Region.

mod common;

use common::{until, FakeRegion, Kill, Mode};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;
use wsdr_client::{ClientBuilder, Event, StaticToken};
use wsdr_protocol::{Amount, AuctionId, BidId, BidStatus};

fn builder(region: &FakeRegion) -> ClientBuilder {
    ClientBuilder::new(region.url.clone())
        .token_provider(Arc::new(StaticToken("t0k3n".into())))
        .subscribe(AuctionId::new("lot-1").unwrap())
        .heartbeat(Duration::from_secs(10), Duration::from_secs(15))
        .settle_window(Duration::from_secs(60))
        .seed(11)
}

async fn restored(events: &mut UnboundedReceiver<Event>) {
    until(events, Duration::from_secs(30), |e| {
        matches!(e, Event::StateRestored { .. }).then_some(())
    })
    .await
}

async fn result_of(events: &mut UnboundedReceiver<Event>, bid_id: &BidId) -> BidStatus {
    until(events, Duration::from_secs(30), |e| match e {
        Event::BidResult {
            bid_id: id, status, ..
        } if id == bid_id => Some(*status),
        _ => None,
    })
    .await
}

async fn settled(events: &mut UnboundedReceiver<Event>, bid_id: &BidId, within: Duration) -> bool {
    until(events, within, |e| match e {
        Event::BidSettled {
            bid_id: id, stands, ..
        } if id == bid_id => Some(*stands),
        _ => None,
    })
    .await
}

/// A bid whose ack is lost, then replayed after a reconnect into a Region that rejects it.
async fn replayed_and_rejected(
    region: &FakeRegion,
) -> (wsdr_client::Client, UnboundedReceiver<Event>, BidId) {
    let (client, mut events) = builder(region).start();
    restored(&mut events).await;
    region.set_mode(Mode::LoseBidResults);
    let bid_id = client
        .bid(AuctionId::new("lot-1").unwrap(), Amount::new(500).unwrap())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    region.set_mode(Mode::RejectBids);
    region.kill_all(Kill::Abrupt);
    assert_eq!(result_of(&mut events, &bid_id).await, BidStatus::Rejected);
    (client, events, bid_id)
}

#[tokio::test(start_paused = true)]
async fn replay_rejected_elsewhere_settles_as_standing_once_state_lists_it() {
    let region = FakeRegion::start("us-west-2").await;
    let (_client, mut events, bid_id) = replayed_and_rejected(&region).await;
    let looks_before = region.get_states();
    // Replication brings the first copy: the next state lists it.
    region.list_bid(bid_id.as_str(), 500);
    assert!(settled(&mut events, &bid_id, Duration::from_secs(25)).await);
    assert!(
        region.get_states() > looks_before,
        "the client looked again by itself (getState at a heartbeat)"
    );
}

#[tokio::test(start_paused = true)]
async fn replay_rejected_elsewhere_and_never_seen_settles_as_not_standing_after_the_window() {
    let region = FakeRegion::start("us-west-2").await;
    let (_client, mut events, bid_id) = replayed_and_rejected(&region).await;
    let started = Instant::now();
    assert!(!settled(&mut events, &bid_id, Duration::from_secs(120)).await);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(60) && waited <= Duration::from_secs(75),
        "settled after {waited:?}: the window (60 s) plus at most one heartbeat"
    );
}

#[tokio::test(start_paused = true)]
async fn a_bid_rejected_on_its_only_send_is_final() {
    let region = FakeRegion::start("us-east-1").await;
    let (client, mut events) = builder(&region).start();
    restored(&mut events).await;
    region.set_mode(Mode::RejectBids);
    let bid_id = client
        .bid(AuctionId::new("lot-1").unwrap(), Amount::new(500).unwrap())
        .await
        .unwrap();
    assert_eq!(result_of(&mut events, &bid_id).await, BidStatus::Rejected);
    let looks = region.get_states();
    tokio::time::sleep(Duration::from_secs(90)).await;
    assert_eq!(
        region.get_states(),
        looks,
        "nothing doubtful: no extra getState"
    );
    while let Ok(event) = events.try_recv() {
        assert!(!matches!(event, Event::BidSettled { .. }), "{event:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn an_unknown_outcome_is_resent_when_state_does_not_list_it() {
    let region = FakeRegion::start("us-east-1").await;
    let (client, mut events) = builder(&region).start();
    restored(&mut events).await;
    region.set_mode(Mode::UnknownBids);
    let bid_id = client
        .bid(AuctionId::new("lot-1").unwrap(), Amount::new(700).unwrap())
        .await
        .unwrap();
    assert_eq!(result_of(&mut events, &bid_id).await, BidStatus::Unknown);
    // The store works again; the next look (a heartbeat away) does not list it: resent.
    region.set_mode(Mode::Normal);
    // The fake counts the first send as received, so the resend is its `duplicate`.
    let resent = result_of(&mut events, &bid_id).await;
    assert!(
        matches!(resent, BidStatus::Accepted | BidStatus::Duplicate),
        "{resent:?}"
    );
    assert_eq!(
        region.times_received(bid_id.as_str()),
        2,
        "sent once more, not more"
    );
}
