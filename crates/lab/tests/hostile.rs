#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The outside review's attacks through the lab, in both consistency modes: a leaked canary
//! secret used as a victim and as a probe, a user with hundreds of bids, racing bids from
//! both Regions, and a watcher whose push never comes.

use std::sync::Arc;
use std::time::Duration;
use wsdr_client::{ClientBuilder, Event, StaticToken};
use wsdr_core::Consistency;
use wsdr_lab::sim::attackers;
use wsdr_lab::RegionId;
use wsdr_lab::{Fault, LabConfig, TimeScale, World};
use wsdr_protocol::{Amount, AuctionId, BidStatus};

async fn lab_in(consistency: Consistency) -> Arc<World> {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_attackers_break_nothing_in_either_mode() {
    for consistency in [Consistency::Eventual, Consistency::Strong] {
        let lab = lab_in(consistency).await;
        let lot1 = AuctionId::new("lot-1").unwrap();
        let lot2 = AuctionId::new("lot-2").unwrap();
        let within = Duration::from_secs(5);
        let mut found = attackers::impostor(&lab, "alice", &lot1, within).await;
        found.extend(attackers::prolific(&lab, "prolific", &lot2, 210, within).await);
        found.extend(attackers::racers(&lab, &lot2, 20, within).await);
        assert!(found.is_empty(), "{consistency}: {found:#?}");
    }
}

/// A client on one Region's own URL following `lot-1`, with a one-second heartbeat (a
/// minute of AWS time at this lab's scale).
fn watcher(
    lab: &World,
    region: RegionId,
    sub: &str,
) -> (
    wsdr_client::Client,
    tokio::sync::mpsc::UnboundedReceiver<Event>,
) {
    ClientBuilder::new(lab.region(region).url())
        .token_provider(Arc::new(StaticToken(lab.user_token(sub).unwrap())))
        .subscribe(AuctionId::new("lot-1").unwrap())
        .heartbeat(Duration::from_secs(1), Duration::from_secs(3))
        .seed(3)
        .start()
}

/// The status of the next bid answer among a client's events (within 5 s).
async fn next_bid_answer(events: &mut tokio::sync::mpsc::UnboundedReceiver<Event>) -> BidStatus {
    loop {
        match tokio::time::timeout(Duration::from_secs(5), events.recv()).await {
            Ok(Some(Event::BidResult { status, .. })) => return status,
            Ok(Some(_)) => continue,
            other => panic!("no answer: {other:?}"),
        }
    }
}

/// The high bid the watcher shows next, from a push or a state.
async fn shown_high(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<Event>,
    wanted: u64,
    within: Duration,
) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let Ok(Some(event)) = tokio::time::timeout_at(deadline, events.recv()).await else {
            return false;
        };
        let high = match event {
            Event::StateRestored { auction, .. } => auction.high_bid.map(|h| h.amount.get()),
            Event::StateUpdated { high_bid, .. } => high_bid.map(|h| h.amount.get()),
            _ => continue,
        };
        if high == Some(wanted) {
            return true;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_whose_push_never_comes_shows_the_bid_within_a_heartbeat() {
    let lab = lab_in(Consistency::Strong).await;
    let (_watching, mut watched) = watcher(&lab, RegionId::Secondary, "watcher");
    let (bidder, mut bids) = watcher(&lab, RegionId::Primary, "bidder");
    // Both have their first state.
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The Regions' path is cut both ways: the witness still makes a quorum for each, so the
    // bid is decided, but the push that would carry it to the other Region never leaves.
    lab.inject(Fault::Partition);
    bidder
        .bid(
            AuctionId::new("lot-1").unwrap(),
            Amount::new(250_000).unwrap(),
        )
        .await
        .unwrap();
    let answer = next_bid_answer(&mut bids).await;
    assert_eq!(answer, BidStatus::Accepted);
    // One heartbeat interval (1 s) plus a round trip, with slack for a busy machine.
    assert!(
        shown_high(&mut watched, 250_000, Duration::from_secs(3)).await,
        "the watcher never showed the bid: its pong should have sent it to getState"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committed_head_write_whose_answer_is_lost_is_unknown_and_settles_as_standing() {
    let lab = lab_in(Consistency::Strong).await;
    let cluster = lab.cluster().expect("strong mode has an MRSC table");
    // Every head write through the first Region commits, then its answer is lost.
    cluster.set_lost_answers(0, 100);
    let (client, mut events) = ClientBuilder::new(lab.region(RegionId::Primary).url())
        .token_provider(Arc::new(StaticToken(lab.user_token("alice").unwrap())))
        .subscribe(AuctionId::new("lot-1").unwrap())
        .heartbeat(Duration::from_secs(1), Duration::from_secs(3))
        .seed(9)
        .start();
    let bid_id = client
        .bid(
            AuctionId::new("lot-1").unwrap(),
            Amount::new(300_000).unwrap(),
        )
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let mut answered = None;
    let mut settled = None;
    while settled.is_none() {
        let Ok(Some(event)) = tokio::time::timeout_at(deadline, events.recv()).await else {
            break;
        };
        match event {
            Event::BidResult {
                bid_id: id, status, ..
            } if id == bid_id && answered.is_none() => {
                answered = Some(status);
                // The next heartbeat's getState names it.
                cluster.set_lost_answers(0, 0);
            }
            Event::BidSettled {
                bid_id: id, stands, ..
            } if id == bid_id => settled = Some(stands),
            _ => {}
        }
    }
    assert_eq!(
        answered,
        Some(BidStatus::Unknown),
        "the write may have committed: not a redirect"
    );
    assert_eq!(
        settled,
        Some(true),
        "it did commit, and settles as standing"
    );
    let taken = cluster.accepted_by(&AuctionId::new("lot-1").unwrap());
    assert_eq!(
        taken
            .iter()
            .filter(|(bidder, ..)| bidder.as_str() == "alice")
            .count(),
        1,
        "decided once: {taken:?}"
    );
}

/// Strong mode: a bid acknowledged right before its Region is lost for good is pushed by the
/// survivor. While the two Regions cannot reach each other, the primary decides a bid with
/// the witness (its quorum), and the secondary's replica does not have it yet; the primary is
/// then lost for good and the partition heals. The write is on the quorum, so the
/// secondary's replica gets it, and its own stream pushes it: a subscriber there that never
/// heartbeats (no pong can resync it) must be shown it by a push.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strong_mode_a_bid_acknowledged_just_before_its_region_is_lost_is_pushed_by_the_survivor() {
    use wsdr_client::exchange::{next_message, send};
    use wsdr_protocol::{ClientMessage, ServerFrame, ServerMessage};
    let lab = lab_in(Consistency::Strong).await;
    let lot = AuctionId::new("lot-1").unwrap();
    let options = wsdr_client::ConnectOptions {
        token: Some(lab.user_token("bare-subscriber").unwrap()),
        network: lab.config().environment.network.clone(),
        ..wsdr_client::ConnectOptions::default()
    };
    let mut bare = wsdr_client::connect(&lab.region(RegionId::Secondary).url(), &options)
        .await
        .unwrap();
    send(
        &mut bare,
        &ClientMessage::GetState {
            auction_id: lot.clone(),
            bid_ids: Vec::new(),
        },
    )
    .await
    .unwrap();
    let first = next_message(
        &mut bare,
        tokio::time::Instant::now() + Duration::from_secs(5),
    )
    .await
    .unwrap();
    assert!(matches!(first, ServerMessage::State { .. }), "{first:?}");
    let (bidder, mut bids) = watcher(&lab, RegionId::Primary, "bidder");
    tokio::time::sleep(Duration::from_millis(300)).await;
    lab.inject(Fault::Partition);
    bidder
        .bid(lot.clone(), Amount::new(420_000).unwrap())
        .await
        .unwrap();
    let answer = next_bid_answer(&mut bids).await;
    assert_eq!(answer, BidStatus::Accepted);
    assert!(
        lab.link(RegionId::Primary).holds_a_head(),
        "the head must still be unshown in the secondary when the loss strikes"
    );
    lab.inject(Fault::NeverReturns(RegionId::Primary));
    lab.inject(Fault::Heal);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let mut pushed = false;
    while let Ok(Some(Ok(frame))) =
        tokio::time::timeout_at(deadline, futures::StreamExt::next(&mut bare)).await
    {
        let Ok(text) = frame.into_text() else {
            continue;
        };
        if let Ok(ServerFrame::Message(ServerMessage::BidUpdate {
            high_bid: Some(high),
            ..
        })) = wsdr_protocol::parse_server_frame(&text)
        {
            if high.amount.get() == 420_000 {
                pushed = true;
                break;
            }
        }
    }
    assert!(pushed, "the survivor never pushed the bid it holds");
}
