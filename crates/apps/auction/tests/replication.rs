#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! Global Tables (MREC) semantics of the in-memory store: two Regions accepting bids while
//! split converge to the same state once their writes are exchanged, in any order.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use std::sync::Arc;
use wsdr_auction::{Auction, AuctionService, StateStore};
use wsdr_core::memory::{
    Change, ManualClock, MemoryConnections, MemoryStateStore, RecordingNotifier,
};
use wsdr_core::{ConnectionId, UserId};
use wsdr_protocol::{Amount, AuctionId};

fn region(name: &str, clock: Arc<ManualClock>) -> (Arc<MemoryStateStore>, AuctionService) {
    let store = Arc::new(MemoryStateStore::new(name, clock.clone()));
    let service = AuctionService::new(
        store.clone(),
        Arc::new(MemoryConnections::default()),
        Arc::new(RecordingNotifier::default()),
        clock,
        name,
    );
    (store, service)
}

fn drain(feed: &mut tokio::sync::mpsc::UnboundedReceiver<Change>) -> Vec<Change> {
    let mut out = Vec::new();
    while let Ok(c) = feed.try_recv() {
        out.push(c);
    }
    out
}

#[tokio::test]
async fn split_regions_converge_to_the_same_high_bid() {
    let clock = Arc::new(ManualClock::new(1_000));
    let (east, east_svc) = region("us-east-1", clock.clone());
    let (west, west_svc) = region("us-west-2", clock.clone());
    let mut east_feed = east.change_feed();
    let mut west_feed = west.change_feed();
    let a1 = AuctionId::new("a1").unwrap();
    let auction = Auction {
        id: a1.clone(),
        item: "x".into(),
        starting_price: Amount::new(10).unwrap(),
        min_increment: 1,
        closes_at: None,
    };
    east_svc.ensure_auction(&auction).await.unwrap();
    for c in drain(&mut east_feed) {
        west.apply_replicated(c);
    }

    // Split: each Region accepts bids the other does not see, including the same bidId
    // replayed in both (a client that failed over before its ack arrived) and equal amounts.
    let frames = |amount: u64, id: &str| {
        format!(r#"{{"action":"bid","auctionId":"a1","amount":{amount},"bidId":"{id}"}}"#)
    };
    let u = |n: &str| UserId::new(n).unwrap();
    let c = |n: &str| ConnectionId::new(n).unwrap();
    east_svc
        .handle_frame(&c("e1"), &u("alice"), frames(100, "bid-alice-1").as_bytes())
        .await;
    clock.advance(3);
    west_svc
        .handle_frame(&c("w1"), &u("bob"), frames(120, "bid-bob-001").as_bytes())
        .await;
    clock.advance(3);
    west_svc
        .handle_frame(&c("w2"), &u("alice"), frames(100, "bid-alice-1").as_bytes())
        .await;
    clock.advance(3);
    east_svc
        .handle_frame(&c("e2"), &u("carol"), frames(120, "bid-carol-1").as_bytes())
        .await;

    // Heal: exchange writes in a shuffled order (replication gives no cross-item ordering).
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let mut to_west = drain(&mut east_feed);
    let mut to_east = drain(&mut west_feed);
    to_west.shuffle(&mut rng);
    to_east.shuffle(&mut rng);
    for ch in to_west {
        west.apply_replicated(ch);
    }
    for ch in to_east {
        east.apply_replicated(ch);
    }

    assert_eq!(
        east.dump(),
        west.dump(),
        "regions must hold identical items"
    );
    let e = east.snapshot(&a1).await.unwrap();
    let w = west.snapshot(&a1).await.unwrap();
    assert_eq!(e, w);
    assert_eq!(e.bid_count, 3, "the replayed bid exists once");
    // Equal amounts: the earlier bid (bob's, in the west) wins in both Regions.
    assert_eq!(e.high_bid.unwrap().bidder.as_str(), "bob");
}

#[tokio::test]
async fn older_replicated_write_never_replaces_newer() {
    let clock = Arc::new(ManualClock::new(5_000));
    let store = MemoryStateStore::new("us-west-2", clock);
    let a1 = AuctionId::new("a1").unwrap();
    let item = |name: &str| wsdr_core::memory::Item::Meta {
        topic: wsdr_auction::store::topic(&a1),
        meta: wsdr_auction::store::meta_of(&Auction {
            id: a1.clone(),
            item: name.into(),
            starting_price: Amount::new(1).unwrap(),
            min_increment: 1,
            closes_at: None,
        }),
    };
    assert!(store.apply_replicated(Change {
        item: item("new"),
        written_at: 10,
        writer: "us-east-1".into()
    }));
    assert!(!store.apply_replicated(Change {
        item: item("old"),
        written_at: 9,
        writer: "us-east-1".into()
    }));
    assert_eq!(store.auction(&a1).await.unwrap().unwrap().item, "new");
}
