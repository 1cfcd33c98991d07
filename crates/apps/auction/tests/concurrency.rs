#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! Many tasks bidding at once never lose the highest bid and never apply a bidId twice.

use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::sync::Arc;
use wsdr_auction::BidsHeld;
use wsdr_auction::{Auction, AuctionService};
use wsdr_core::memory::{MemoryConnections, MemoryStateStore, RecordingNotifier};
use wsdr_core::{ConnectionId, SystemClock, UserId};
use wsdr_protocol::{Amount, AuctionId, BidStatus, ServerMessage};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thousands_of_concurrent_bids_keep_the_max_and_apply_each_id_once() {
    let clock = Arc::new(SystemClock);
    let store = Arc::new(MemoryStateStore::new("us-east-1", clock.clone()));
    let service = AuctionService::new(
        store.clone(),
        Arc::new(MemoryConnections::default()),
        Arc::new(RecordingNotifier::default()),
        clock,
        "us-east-1",
    );
    let auction_id = AuctionId::new("hot").unwrap();
    service
        .ensure_auction(&Auction {
            id: auction_id.clone(),
            item: "hot item".into(),
            starting_price: Amount::new(1).unwrap(),
            min_increment: 1,
            closes_at: None,
        })
        .await
        .unwrap();

    // 1,200 distinct bids, each sent twice (a replay) from 50 users, all at once.
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    let bids: Vec<(String, u64, String)> = (0..1_200)
        .map(|i| {
            (
                format!("user-{}", i % 50),
                rng.random_range(1..1_000_000),
                format!("bid-{i:06}"),
            )
        })
        .collect();
    let mut tasks = Vec::new();
    for copy in 0..2 {
        for (who, amount, id) in bids.clone() {
            let service = service.clone();
            tasks.push(tokio::spawn(async move {
                let frame = format!(
                    r#"{{"action":"bid","auctionId":"hot","amount":{amount},"bidId":"{id}"}}"#
                );
                let reply = service
                    .handle_frame(
                        &ConnectionId::new(format!("c-{who}-{copy}")).unwrap(),
                        &UserId::new(who).unwrap(),
                        frame.as_bytes(),
                    )
                    .await;
                match reply.message {
                    ServerMessage::BidResult { status, .. } => (id, amount, status),
                    other => panic!("unexpected {other:?}"),
                }
            }));
        }
    }
    let mut accepted: HashMap<String, u64> = HashMap::new();
    let mut accepted_count = 0;
    for task in tasks {
        let (id, amount, status) = task.await.unwrap();
        if status == BidStatus::Accepted {
            accepted_count += 1;
            assert!(
                accepted.insert(id.clone(), amount).is_none(),
                "bid {id} accepted twice"
            );
        }
    }
    assert_eq!(accepted_count, accepted.len());
    let recorded = store.all_bids(&auction_id);
    assert_eq!(
        recorded.len(),
        accepted.len(),
        "every accepted bid recorded once, nothing else"
    );
    for bid in &recorded {
        assert_eq!(accepted.get(bid.bid_id.as_str()), Some(&bid.amount.get()));
    }
    let max_accepted = accepted.values().max().copied().unwrap();
    let max_offered = bids.iter().map(|b| b.1).max().unwrap();
    assert_eq!(
        max_accepted, max_offered,
        "the highest offer must be accepted"
    );
    use wsdr_auction::StateStore;
    let snapshot = store.snapshot(&auction_id).await.unwrap();
    assert_eq!(snapshot.high_bid.unwrap().amount.get(), max_accepted);
    assert_eq!(snapshot.bid_count, accepted.len() as u64);
}
