#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! DynamoStateStore against DynamoDB Local.

mod common;

use rand::{Rng, SeedableRng};
use wsdr_aws::DynamoStateStore;
use wsdr_core::{Auction, BidRecord, InsertOutcome, StateStore, UserBid, UserId};
use wsdr_protocol::{Amount, AuctionId, BidId};

fn auction(id: &str) -> Auction {
    Auction {
        id: AuctionId::new(id).unwrap(),
        item: "Tiffany lamp".into(),
        starting_price: Amount::new(100).unwrap(),
        min_increment: 5,
        closes_at: Some(1_900_000_000_000),
    }
}

fn bid(id: &str, who: &str, amount: u64, at: u64) -> BidRecord {
    BidRecord {
        auction_id: AuctionId::new("a1").unwrap(),
        bid_id: BidId::new(id).unwrap(),
        bidder: UserId::new(who).unwrap(),
        amount: Amount::new(amount).unwrap(),
        at,
        region: "us-east-1".into(),
    }
}

#[tokio::test]
async fn auction_is_created_once_and_read_back() {
    let client = common::client();
    let store = DynamoStateStore::new(client.clone(), common::state_table(&client).await);
    assert!(store.put_auction_if_absent(&auction("a1")).await.unwrap());
    let mut changed = auction("a1");
    changed.item = "other".into();
    assert!(!store.put_auction_if_absent(&changed).await.unwrap());
    assert_eq!(
        store.auction(&AuctionId::new("a1").unwrap()).await.unwrap(),
        Some(auction("a1"))
    );
    assert_eq!(
        store.auction(&AuctionId::new("zz").unwrap()).await.unwrap(),
        None
    );
    let mut open = auction("a2");
    open.closes_at = None;
    store.put_auction_if_absent(&open).await.unwrap();
    assert_eq!(store.auction(&open.id).await.unwrap(), Some(open));
}

#[tokio::test]
async fn insert_bid_is_idempotent_by_bid_id() {
    let client = common::client();
    let store = DynamoStateStore::new(client.clone(), common::state_table(&client).await);
    let first = bid("bid-00000001", "alice", 150, 10);
    assert_eq!(
        store.insert_bid(&first).await.unwrap(),
        InsertOutcome::Inserted
    );
    let replay = bid("bid-00000001", "alice", 150, 99);
    assert_eq!(
        store.insert_bid(&replay).await.unwrap(),
        InsertOutcome::Exists(first.clone())
    );
    let reuse = bid("bid-00000001", "mallory", 9_999, 100);
    assert_eq!(
        store.insert_bid(&reuse).await.unwrap(),
        InsertOutcome::Exists(first.clone())
    );
    assert_eq!(
        store.bid(&first.auction_id, &first.bid_id).await.unwrap(),
        Some(first)
    );
    let snapshot = store
        .snapshot(&AuctionId::new("a1").unwrap())
        .await
        .unwrap();
    assert_eq!(snapshot.bid_count, 1);
}

#[tokio::test]
async fn snapshot_picks_the_same_high_bid_as_the_domain_rank() {
    let client = common::client();
    let store = DynamoStateStore::new(client.clone(), common::state_table(&client).await);
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let mut bids = Vec::new();
    // Few distinct amounts and times, so ties on amount and on time are common.
    for i in 0..120 {
        let b = bid(
            &format!("bid-{:08}", rng.random_range(0..1_000_000)),
            &format!("u{i}"),
            rng.random_range(1..6) * 100,
            rng.random_range(0..3),
        );
        if store.insert_bid(&b).await.unwrap() == InsertOutcome::Inserted {
            bids.push(b);
        }
    }
    let expected = bids.iter().max_by(|a, b| a.rank(b)).cloned();
    let snapshot = store
        .snapshot(&AuctionId::new("a1").unwrap())
        .await
        .unwrap();
    assert_eq!(snapshot.bid_count, bids.len() as u64);
    assert_eq!(snapshot.high_bid, expected);
}

#[tokio::test]
async fn last_bid_never_goes_backwards() {
    let client = common::client();
    let store = DynamoStateStore::new(client.clone(), common::state_table(&client).await);
    let user = UserId::new("alice").unwrap();
    let a1 = AuctionId::new("a1").unwrap();
    let newer = UserBid {
        amount: Amount::new(300).unwrap(),
        bid_id: BidId::new("bid-newer1").unwrap(),
        at: 20,
    };
    let older = UserBid {
        amount: Amount::new(200).unwrap(),
        bid_id: BidId::new("bid-older1").unwrap(),
        at: 10,
    };
    assert_eq!(store.last_bid(&user, &a1).await.unwrap(), None);
    store.record_last_bid(&user, &a1, &newer).await.unwrap();
    store.record_last_bid(&user, &a1, &older).await.unwrap();
    assert_eq!(store.last_bid(&user, &a1).await.unwrap(), Some(newer));
}

#[tokio::test]
async fn unreachable_table_is_a_classified_error_not_a_panic() {
    let client = common::client();
    let store = DynamoStateStore::new(client, "no-such-table");
    let error = store
        .auction(&AuctionId::new("a1").unwrap())
        .await
        .unwrap_err();
    assert!(
        matches!(error, wsdr_core::Error::Internal(ref m) if m.contains("ResourceNotFoundException")),
        "{error:?}"
    );
}
