#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! Every watching subscriber converges without relying on one path: pongs carry the watched
//! auction's versions (a missed push shows within one heartbeat), pushes merge element-wise
//! (a late one cannot take the view backwards), and getState names the uncertain bids.

mod common;

use common::{until, FakeRegion, Mode};
use std::sync::Arc;
use std::time::Duration;
use wsdr_client::{ClientBuilder, Event, StaticToken};
use wsdr_protocol::{Amount, AuctionId, BidStatus};

fn builder(region: &FakeRegion) -> ClientBuilder {
    ClientBuilder::new(region.url.clone())
        .token_provider(Arc::new(StaticToken("t0k3n".into())))
        .subscribe(AuctionId::new("lot-1").unwrap())
        .heartbeat(Duration::from_secs(10), Duration::from_secs(15))
        .seed(5)
}

async fn restored_high(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<Event>,
    within: Duration,
) -> Option<u64> {
    until(events, within, |e| match e {
        Event::StateRestored { auction, .. } => {
            Some(auction.high_bid.as_ref().map(|h| h.amount.get()))
        }
        _ => None,
    })
    .await
}

#[tokio::test(start_paused = true)]
async fn a_pong_showing_a_newer_view_resyncs_within_one_heartbeat() {
    let region = FakeRegion::start("us-east-1").await;
    region.set_view(
        serde_json::json!({"us-east-1": 1}),
        Some((500, "bid-00000001")),
    );
    let (_client, mut events) = builder(&region).start();
    assert_eq!(
        restored_high(&mut events, Duration::from_secs(5)).await,
        Some(500)
    );
    // A bid accepted elsewhere reached this Region; its push never came.
    region.set_view(
        serde_json::json!({"us-east-1": 1, "us-west-2": 1}),
        Some((900, "bid-00000002")),
    );
    // Heartbeat interval (10 s) plus a round trip.
    assert_eq!(
        restored_high(&mut events, Duration::from_secs(11)).await,
        Some(900)
    );
    assert_eq!(region.get_states(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_pong_the_view_already_dominates_costs_no_resync() {
    let region = FakeRegion::start("us-east-1").await;
    region.set_view(
        serde_json::json!({"us-east-1": 3}),
        Some((500, "bid-00000001")),
    );
    let (_client, mut events) = builder(&region).start();
    restored_high(&mut events, Duration::from_secs(5)).await;
    tokio::time::sleep(Duration::from_secs(45)).await;
    assert_eq!(region.get_states(), 1, "four pongs, each already seen");
}

#[tokio::test(start_paused = true)]
async fn incomparable_pushes_merge_and_never_show_a_lower_high_bid() {
    let region = FakeRegion::start("us-east-1").await;
    region.set_view(serde_json::json!({"A": 1, "B": 1}), None);
    let (_client, mut events) = builder(&region).start();
    restored_high(&mut events, Duration::from_secs(5)).await;
    let push = |versions: &str, amount: u64, id: &str| {
        format!(
            r#"{{"type":"bidUpdate","region":"A","auctionId":"lot-1","highBid":{{"amount":{amount},"bidder":"b","bidId":"{id}","at":5}},"bidCount":3,"version":3,"versions":{versions}}}"#
        )
    };
    region.push_all(&push(r#"{"A":1,"B":2}"#, 700, "bid-00000007"));
    // Built from a read before the one above, delivered after it.
    region.push_all(&push(r#"{"A":2,"B":1}"#, 600, "bid-00000006"));
    let mut shown = Vec::new();
    for _ in 0..2 {
        shown.push(
            until(&mut events, Duration::from_secs(5), |e| match e {
                Event::StateUpdated {
                    high_bid, versions, ..
                } => Some((high_bid.as_ref().map(|h| h.amount.get()), versions.clone())),
                _ => None,
            })
            .await,
        );
    }
    assert_eq!(shown[0].0, Some(700));
    assert_eq!(
        shown[1].0,
        Some(700),
        "the late push does not lower the high bid"
    );
    assert_eq!(
        shown[1].1,
        [("A".to_owned(), 2), ("B".to_owned(), 2)]
            .into_iter()
            .collect()
    );
}

#[tokio::test(start_paused = true)]
async fn an_uncertain_bid_is_named_in_the_next_get_state() {
    let region = FakeRegion::start("us-east-1").await;
    let (client, mut events) = builder(&region).start();
    restored_high(&mut events, Duration::from_secs(5)).await;
    region.set_mode(Mode::UnknownBids);
    let bid_id = client
        .bid(AuctionId::new("lot-1").unwrap(), Amount::new(700).unwrap())
        .await
        .unwrap();
    until(&mut events, Duration::from_secs(5), |e| match e {
        Event::BidResult {
            bid_id: id, status, ..
        } if *id == bid_id => (*status == BidStatus::Unknown).then_some(()),
        _ => None,
    })
    .await;
    region.set_mode(Mode::Normal);
    tokio::time::sleep(Duration::from_secs(11)).await;
    let frames = region.get_state_frames();
    let named = frames.last().unwrap();
    assert_eq!(
        named["bidIds"],
        serde_json::json!([bid_id.as_str()]),
        "{frames:?}"
    );
    assert!(
        frames[0].get("bidIds").is_none(),
        "nothing uncertain at first"
    );
}
