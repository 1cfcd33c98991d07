#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The bid ledger's guarantees under Global Tables (MREC) rules, on the in-memory store:
//! per-item last writer wins, conditions checked only where the write lands, replicated writes
//! applied unconditionally, no ordering across items. Each test is a hostile or unlucky
//! history that broke the first data model (bids keyed by bidId alone, high bid and last bid
//! stored per auction/user and replicated by last writer wins).

use rand::seq::SliceRandom;
use rand::SeedableRng;
use std::sync::Arc;
use tokio::sync::mpsc::UnboundedReceiver;
use wsdr_auction::BidsHeld;
use wsdr_auction::{Auction, AuctionService, StateStore};
use wsdr_core::memory::{
    Change, Item, ManualClock, MemoryConnections, MemoryStateStore, RecordingNotifier,
};
use wsdr_core::push::{PushSettings, Pusher};
use wsdr_core::{ConnectionId, UserId};
use wsdr_protocol::{Amount, AuctionId, BidStatus, ServerMessage};

struct Region {
    name: &'static str,
    store: Arc<MemoryStateStore>,
    notifier: Arc<RecordingNotifier>,
    service: AuctionService,
    /// The Region's stream reader (no window: the tests step the clock themselves).
    pusher: Pusher,
    feed: UnboundedReceiver<Change>,
}

struct World {
    clock: Arc<ManualClock>,
    regions: [Region; 2],
}

fn region(name: &'static str, clock: Arc<ManualClock>) -> Region {
    let store = Arc::new(MemoryStateStore::new(name, clock.clone()));
    let notifier = Arc::new(RecordingNotifier::default());
    let service = AuctionService::new(
        store.clone(),
        Arc::new(MemoryConnections::default()),
        notifier.clone(),
        clock.clone(),
        name,
    );
    let pusher = Pusher::new(
        service.clone(),
        PushSettings {
            window: std::time::Duration::ZERO,
            ..PushSettings::default()
        },
        clock,
        Arc::new(wsdr_core::TokioPause),
    );
    let feed = store.change_feed();
    Region {
        name,
        store,
        notifier,
        service,
        pusher,
        feed,
    }
}

fn a1() -> AuctionId {
    AuctionId::new("a1").unwrap()
}

async fn world() -> World {
    let clock = Arc::new(ManualClock::new(1_000_000));
    let mut w = World {
        regions: [
            region("us-east-1", clock.clone()),
            region("us-west-2", clock.clone()),
        ],
        clock,
    };
    let auction = Auction {
        id: a1(),
        item: "lamp".into(),
        starting_price: Amount::new(100).unwrap(),
        min_increment: 10,
        closes_at: None,
    };
    w.regions[0].service.ensure_auction(&auction).await.unwrap();
    w.replicate(7).await;
    w
}

impl World {
    /// Ship every pending write both ways, in a shuffled order, applying each with last
    /// writer wins; a summary of the other Region triggers the replicated push, as the stream
    /// handler does in AWS.
    async fn replicate(&mut self, seed: u64) {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        for from in 0..2 {
            let mut pending = Vec::new();
            while let Ok(change) = self.regions[from].feed.try_recv() {
                pending.push(change);
            }
            pending.shuffle(&mut rng);
            let to = &self.regions[1 - from];
            for change in pending {
                let summary = matches!(change.item, Item::Summary { .. });
                let topic = change.item.topic().clone();
                if to.store.apply_replicated(change) && summary {
                    to.pusher.changed([&topic]);
                    to.pusher.drain().await;
                }
            }
        }
    }

    async fn bid(
        &self,
        r: usize,
        who: &str,
        amount: u64,
        bid_id: &str,
    ) -> (BidStatus, Option<String>) {
        self.clock.advance(1);
        let frame =
            format!(r#"{{"action":"bid","auctionId":"a1","amount":{amount},"bidId":"{bid_id}"}}"#);
        let reply = self.regions[r]
            .service
            .handle_frame(&conn(who, r), &user(who), frame.as_bytes())
            .await;
        match reply.message {
            ServerMessage::BidResult { status, reason, .. } => (status, reason),
            other => panic!("not a bidResult: {other:?}"),
        }
    }

    async fn state(&self, r: usize, who: &str) -> (ServerMessage, wsdr_protocol::YouView) {
        let message = self.regions[r]
            .service
            .get_state(&conn(who, r), &user(who), &a1())
            .await
            .unwrap();
        let ServerMessage::State { ref you, .. } = message else {
            panic!("not a state: {message:?}")
        };
        let you = you.clone();
        (message, you)
    }

    async fn high(&self, r: usize) -> Option<(String, u64)> {
        self.regions[r]
            .store
            .snapshot(&a1())
            .await
            .unwrap()
            .high_bid
            .map(|b| (b.bidder.as_str().to_owned(), b.amount.get()))
    }
}

fn user(name: &str) -> UserId {
    UserId::new(name).unwrap()
}

fn conn(who: &str, r: usize) -> ConnectionId {
    ConnectionId::new(format!("{who}-{r}")).unwrap()
}

#[tokio::test]
async fn bid_id_reuse_by_another_user_in_the_other_region_erases_nothing() {
    let mut w = world().await;
    assert_eq!(
        w.bid(0, "alice", 500_000, "bid-alice-01").await.0,
        BidStatus::Accepted
    );
    // Partition: mallory sends alice's bidId, seen in a bidUpdate, with a lower amount to the
    // Region that has never seen it. It is mallory's own bid there (an honest acceptance at
    // that Region's view), never a write over alice's.
    assert_eq!(
        w.bid(1, "mallory", 200_000, "bid-alice-01").await.0,
        BidStatus::Accepted
    );
    w.replicate(1).await;
    for r in 0..2 {
        assert_eq!(
            w.high(r).await,
            Some(("alice".into(), 500_000)),
            "{}: alice's acknowledged bid must stay the high bid",
            w.regions[r].name
        );
        let bids = w.regions[r].store.all_bids(&a1());
        assert!(bids
            .iter()
            .any(|b| b.bidder.as_str() == "alice" && b.amount.get() == 500_000));
    }
    assert_eq!(w.regions[0].store.dump(), w.regions[1].store.dump());
}

#[tokio::test]
async fn own_bid_id_reused_with_another_amount_in_both_regions_keeps_both() {
    let mut w = world().await;
    assert_eq!(
        w.bid(0, "alice", 300, "bid-alice-02").await.0,
        BidStatus::Accepted
    );
    assert_eq!(
        w.bid(1, "alice", 400, "bid-alice-02").await.0,
        BidStatus::Accepted
    );
    w.replicate(2).await;
    for r in 0..2 {
        let (_, you) = w.state(r, "alice").await;
        let mut amounts: Vec<u64> = you.bids.iter().map(|b| b.amount.get()).collect();
        amounts.sort();
        assert_eq!(amounts, vec![300, 400], "both acknowledged bids stand");
        assert_eq!(w.high(r).await, Some(("alice".into(), 400)));
    }
    // After convergence a third use of the id with yet another amount is refused.
    assert_eq!(
        w.bid(0, "alice", 900, "bid-alice-02").await,
        (BidStatus::Rejected, Some("bid_id_reused".into()))
    );
}

#[tokio::test]
async fn replay_rejected_in_the_other_region_is_listed_as_standing_after_heal() {
    let mut w = world().await;
    // alice's bid is accepted in the east; its answer is lost; partition.
    assert_eq!(
        w.bid(0, "alice", 150, "bid-alice-03").await.0,
        BidStatus::Accepted
    );
    // Meanwhile bob bids higher in the west, and alice's client replays there: too_low.
    assert_eq!(
        w.bid(1, "bob", 200, "bid-bob-0003").await.0,
        BidStatus::Accepted
    );
    assert_eq!(
        w.bid(1, "alice", 150, "bid-alice-03").await,
        (BidStatus::Rejected, Some("too_low".into()))
    );
    let (_, before) = w.state(1, "alice").await;
    assert!(before.bids.is_empty(), "the west has not seen it yet");
    w.replicate(3).await;
    // The west now lists alice's bid among her standing bids: her client settles the
    // rejection it got against this (it stands), without any action of hers.
    let (_, after) = w.state(1, "alice").await;
    let listed = after
        .bids
        .iter()
        .find(|b| b.bid_id.as_str() == "bid-alice-03")
        .expect("alice's acknowledged bid is listed in the west");
    assert_eq!(listed.amount.get(), 150);
    assert_eq!(listed.regions, vec!["us-east-1".to_owned()]);
    assert_eq!(after.last_bid.unwrap().bid_id.as_str(), "bid-alice-03");
}

#[tokio::test]
async fn equal_bids_in_a_split_converge_to_one_stable_winner() {
    for seed in 0..20 {
        let mut w = world().await;
        // Split: equal amounts in both Regions, and one of them replayed into the other
        // Region where it is accepted again (a second copy with a later `at`).
        assert_eq!(
            w.bid(0, "alice", 250, "bid-alice-04").await.0,
            BidStatus::Accepted
        );
        assert_eq!(
            w.bid(1, "bob", 250, "bid-bob-00004").await.0,
            BidStatus::Accepted
        );
        w.clock.advance(50);
        assert_eq!(
            w.bid(1, "carol", 240, "bid-carol-004").await.0,
            BidStatus::Rejected
        );
        w.replicate(seed).await;
        let east = w.high(0).await;
        let west = w.high(1).await;
        assert_eq!(east, west, "seed {seed}: one winner in both Regions");
        // The earlier of the two equal bids wins, and keeps winning after more replication.
        assert_eq!(east, Some(("alice".into(), 250)));
        w.replicate(seed + 100).await;
        assert_eq!(w.high(1).await, east);
        assert_eq!(w.regions[0].store.dump(), w.regions[1].store.dump());
    }
}

#[tokio::test]
async fn replayed_bid_copies_in_both_regions_rank_by_the_earliest_copy() {
    let mut w = world().await;
    // alice's bid lands in the east; the ack is lost; her replay lands in the west before
    // replication, where it is new: two copies of one bid, with different `at`.
    assert_eq!(
        w.bid(0, "alice", 300, "bid-alice-05").await.0,
        BidStatus::Accepted
    );
    let first_at = wsdr_core::Clock::now_ms(w.clock.as_ref());
    w.clock.advance(40);
    assert_eq!(
        w.bid(1, "alice", 300, "bid-alice-05").await.0,
        BidStatus::Accepted
    );
    assert_eq!(
        w.bid(1, "bob", 305, "bid-bob-00005").await.0,
        BidStatus::Rejected
    );
    w.replicate(5).await;
    for r in 0..2 {
        let high = w.regions[r]
            .store
            .snapshot(&a1())
            .await
            .unwrap()
            .high_bid
            .unwrap();
        assert_eq!(high.bidder.as_str(), "alice");
        assert_eq!(high.at, first_at, "the earliest copy, in both Regions");
        let (_, you) = w.state(r, "alice").await;
        assert_eq!(you.bids.len(), 1, "two copies, one bid");
        assert_eq!(you.bids[0].regions, vec!["us-east-1", "us-west-2"]);
    }
}

#[tokio::test]
async fn replicated_bid_is_pushed_to_subscribers_in_the_other_region() {
    let mut w = world().await;
    // carol watches the auction in the west.
    w.state(1, "carol").await;
    let sent_before = w.regions[1].notifier.sent().len();
    assert_eq!(
        w.bid(0, "alice", 700, "bid-alice-06").await.0,
        BidStatus::Accepted
    );
    assert_eq!(
        w.regions[1].notifier.sent().len(),
        sent_before,
        "not replicated yet"
    );
    w.replicate(6).await;
    let sent = w.regions[1].notifier.sent();
    let (to, frame) = sent.last().expect("a push in the west");
    assert_eq!(to.as_str(), "carol-1");
    let frame: serde_json::Value = serde_json::from_slice(frame).unwrap();
    assert_eq!(frame["type"], "bidUpdate");
    assert_eq!(frame["region"], "us-west-2");
    assert_eq!(frame["highBid"]["amount"], 700);
    assert_eq!(frame["highBid"]["bidder"], "alice");
    assert_eq!(frame["versions"]["us-east-1"], 1);
}

#[tokio::test]
async fn versions_never_go_backwards_and_order_views_across_regions() {
    let mut w = world().await;
    w.bid(0, "alice", 100, "bid-alice-07").await;
    w.bid(0, "bob", 120, "bid-bob-00007").await;
    let (ServerMessage::State { auction: east, .. }, _) = w.state(0, "alice").await else {
        unreachable!()
    };
    // The west has not seen the east's bids: its view is dominated, a client can tell.
    let (ServerMessage::State { auction: stale, .. }, _) = w.state(1, "alice").await else {
        unreachable!()
    };
    assert!(wsdr_protocol::dominates(&east.versions, &stale.versions));
    assert!(!wsdr_protocol::dominates(&stale.versions, &east.versions));
    w.replicate(8).await;
    let (ServerMessage::State { auction: fresh, .. }, _) = w.state(1, "alice").await else {
        unreachable!()
    };
    assert!(wsdr_protocol::dominates(&fresh.versions, &east.versions));
    assert_eq!(fresh.high_bid, east.high_bid);
}

#[tokio::test]
async fn a_regions_writes_of_one_item_in_one_millisecond_replicate_in_order() {
    let mut w = world().await;
    // Two bids in the east within one millisecond (the clock does not move between them):
    // the summary's second version must still replace the first everywhere.
    let frame = |amount: u64, id: &str| {
        format!(r#"{{"action":"bid","auctionId":"a1","amount":{amount},"bidId":"{id}"}}"#)
    };
    for (who, amount, id) in [
        ("alice", 300, "bid-alice-08"),
        ("bob", 400, "bid-bob-00008"),
    ] {
        let reply = w.regions[0]
            .service
            .handle_frame(&conn(who, 0), &user(who), frame(amount, id).as_bytes())
            .await;
        assert!(reply.message.to_json().contains("accepted"));
    }
    // ... and after its clock stepped back.
    w.clock.set(500_000);
    w.bid(0, "carol", 500, "bid-carol-008").await;
    w.replicate(9).await;
    let west = w.regions[1].store.snapshot(&a1()).await.unwrap();
    assert_eq!(west.bid_count, 3);
    assert_eq!(w.high(1).await, Some(("carol".into(), 500)));
    assert_eq!(w.regions[0].store.dump(), w.regions[1].store.dump());
}
