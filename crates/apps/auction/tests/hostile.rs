#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! Hostile users against the domain: a probe identity that names a victim, a user with
//! hundreds of bids whose newest must still show and settle, bids pushed out of order.

use std::sync::Arc;
use wsdr_auction::BidsHeld;
use wsdr_auction::{Auction, AuctionService};
use wsdr_core::memory::{ManualClock, MemoryConnections, MemoryStateStore, RecordingNotifier};
use wsdr_core::{ConnectionId, Principal, UserId};
use wsdr_protocol::{Amount, AuctionId, BidStatus, ServerMessage, YouView};

const T0: u64 = 1_700_000_000_000;

struct World {
    clock: Arc<ManualClock>,
    store: Arc<MemoryStateStore>,
    service: AuctionService,
}

async fn world() -> World {
    let clock = Arc::new(ManualClock::new(T0));
    let store = Arc::new(MemoryStateStore::new("us-east-1", clock.clone()));
    let service = AuctionService::new(
        store.clone(),
        Arc::new(MemoryConnections::default()),
        Arc::new(RecordingNotifier::default()),
        clock.clone(),
        "us-east-1",
    );
    service
        .ensure_auction(&Auction {
            id: AuctionId::new("a1").unwrap(),
            item: "lamp".into(),
            starting_price: Amount::new(100).unwrap(),
            min_increment: 1,
            closes_at: None,
        })
        .await
        .unwrap();
    World {
        clock,
        store,
        service,
    }
}

fn conn() -> ConnectionId {
    ConnectionId::new("c-1").unwrap()
}

fn bid_frame(amount: u64, bid_id: &str) -> Vec<u8> {
    format!(r#"{{"action":"bid","auctionId":"a1","amount":{amount},"bidId":"{bid_id}"}}"#)
        .into_bytes()
}

async fn send(w: &World, who: impl Into<Principal>, frame: &[u8]) -> ServerMessage {
    w.service.handle_frame(&conn(), who, frame).await.message
}

fn you(message: ServerMessage) -> YouView {
    match message {
        ServerMessage::State { you, .. } => you,
        other => panic!("expected a state, got {other:?}"),
    }
}

/// A bidId no sort order relates to time: a fixed permutation of the bid's number.
fn scattered_bid_id(i: u64) -> String {
    format!("bid-{:016x}", i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

#[test]
fn a_probe_flag_and_a_users_subject_name_no_principal() {
    assert!(Principal::from_authorizer("alice", true).is_err());
    assert!(Principal::from_authorizer("canary:us-east-1", false).is_err());
    assert!(matches!(
        Principal::from_authorizer("canary:us-east-1", true),
        Ok(Principal::Probe(_))
    ));
    assert!(matches!(
        Principal::from_authorizer("alice", false),
        Ok(Principal::User(_))
    ));
}

#[tokio::test]
async fn a_probe_can_neither_bid_nor_read_anyones_bids() {
    let w = world().await;
    let alice = UserId::new("alice").unwrap();
    assert!(matches!(
        send(&w, &alice, &bid_frame(500, "bid-alice-1")).await,
        ServerMessage::BidResult {
            status: BidStatus::Accepted,
            ..
        }
    ));
    let probe = Principal::from_authorizer("canary:us-east-1", true).unwrap();
    match send(&w, probe.clone(), &bid_frame(900, "bid-probe-1")).await {
        ServerMessage::BidResult { status, reason, .. } => {
            assert_eq!(status, BidStatus::Rejected);
            assert_eq!(reason.as_deref(), Some("forbidden"));
        }
        other => panic!("expected a bidResult, got {other:?}"),
    }
    let state = send(
        &w,
        probe,
        br#"{"action":"getState","auctionId":"a1","bidIds":["bid-alice-1"]}"#,
    )
    .await;
    let ServerMessage::State { auction, you, .. } = state else {
        panic!("expected a state");
    };
    assert_eq!(
        auction.high_bid.map(|h| h.amount.get()),
        Some(500),
        "public state"
    );
    assert!(you.bids.is_empty() && you.last_bid.is_none() && you.settled.is_empty());
    assert_eq!(you.user_id, "canary:us-east-1");
    let bids = w.store.all_bids(&AuctionId::new("a1").unwrap());
    assert_eq!(bids.len(), 1, "the probe wrote nothing: {bids:?}");
}

#[tokio::test]
async fn a_user_with_hundreds_of_bids_sees_the_newest_and_settles_any_of_them() {
    let w = world().await;
    let alice = UserId::new("alice").unwrap();
    for i in 0..250u64 {
        w.clock.advance(10);
        let reply = send(&w, &alice, &bid_frame(100 + i, &scattered_bid_id(i))).await;
        assert!(
            matches!(
                reply,
                ServerMessage::BidResult {
                    status: BidStatus::Accepted,
                    ..
                }
            ),
            "bid {i}: {reply:?}"
        );
    }
    let newest = scattered_bid_id(249);
    let oldest = scattered_bid_id(0);
    let never = "bid-never-sent-1";
    let frame = format!(
        r#"{{"action":"getState","auctionId":"a1","bidIds":["{oldest}","{newest}","{never}"]}}"#
    );
    let you = you(send(&w, &alice, frame.as_bytes()).await);
    let last = you.last_bid.expect("a last bid");
    assert_eq!(last.bid_id.as_str(), newest, "the newest by time");
    assert_eq!(last.amount.get(), 349);
    assert_eq!(
        you.bids.len(),
        wsdr_protocol::limits::OWN_BIDS_MAX,
        "the list is the newest OWN_BIDS_MAX"
    );
    assert!(you.bids.windows(2).all(|p| p[0].at >= p[1].at));
    assert_eq!(you.bids.last().map(|b| b.amount.get()), Some(250));
    let settled: Vec<(String, bool, Option<u64>)> = you
        .settled
        .iter()
        .map(|s| {
            (
                s.bid_id.as_str().to_owned(),
                s.stands,
                s.amount.map(|a| a.get()),
            )
        })
        .collect();
    assert_eq!(
        settled,
        vec![
            (oldest, true, Some(100)),
            (newest, true, Some(349)),
            (never.to_owned(), false, None),
        ]
    );
}

#[tokio::test]
async fn a_get_state_naming_too_many_bids_is_refused_whole() {
    let w = world().await;
    let ids: Vec<String> = (0..=wsdr_protocol::limits::SETTLE_BIDS_MAX as u64)
        .map(|i| format!("\"{}\"", scattered_bid_id(i)))
        .collect();
    let frame = format!(
        r#"{{"action":"getState","auctionId":"a1","bidIds":[{}]}}"#,
        ids.join(",")
    );
    match send(&w, &UserId::new("alice").unwrap(), frame.as_bytes()).await {
        ServerMessage::Error { code, .. } => {
            assert_eq!(code, wsdr_protocol::ErrorCode::InvalidField)
        }
        other => panic!("expected an error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_heartbeat_naming_an_auction_carries_its_versions() {
    let w = world().await;
    let alice = UserId::new("alice").unwrap();
    send(&w, &alice, &bid_frame(500, "bid-alice-1")).await;
    match send(&w, &alice, br#"{"action":"heartbeat","auctionId":"a1"}"#).await {
        ServerMessage::Pong {
            auction_id,
            versions,
            ..
        } => {
            assert_eq!(
                auction_id.map(|a| a.as_str().to_owned()).as_deref(),
                Some("a1")
            );
            assert_eq!(versions.and_then(|v| v.get("us-east-1").copied()), Some(1));
        }
        other => panic!("expected a pong, got {other:?}"),
    }
}

/// A bidId reused with two amounts during a split (200 accepted in one Region, 300 in the
/// other): once both copies are in one Region, settlement names each copy's own Region and
/// amount, and no single amount, since neither stands "in both Regions".
#[tokio::test]
async fn a_bid_id_reused_with_two_amounts_settles_each_copy_with_its_own_amount() {
    let east = world().await;
    let clock = east.clock.clone();
    let west_store = Arc::new(MemoryStateStore::new("us-west-2", clock.clone()));
    let west = AuctionService::new(
        west_store.clone(),
        Arc::new(MemoryConnections::default()),
        Arc::new(RecordingNotifier::default()),
        clock.clone(),
        "us-west-2",
    );
    for change in east.store.dump() {
        west_store.apply_replicated(change);
    }
    let alice = UserId::new("alice").unwrap();
    let reused = "bid-reused-0001";
    clock.advance(10);
    let first = send(&east, &alice, &bid_frame(200, reused)).await;
    assert!(
        matches!(
            first,
            ServerMessage::BidResult {
                status: BidStatus::Accepted,
                ..
            }
        ),
        "{first:?}"
    );
    clock.advance(10);
    let second = west
        .handle_frame(&conn(), &alice, &bid_frame(300, reused))
        .await
        .message;
    assert!(
        matches!(
            second,
            ServerMessage::BidResult {
                status: BidStatus::Accepted,
                ..
            }
        ),
        "{second:?}"
    );
    // The split heals: the west's writes reach the east.
    for change in west_store.dump() {
        east.store.apply_replicated(change);
    }
    let frame = format!(r#"{{"action":"getState","auctionId":"a1","bidIds":["{reused}"]}}"#);
    let you = you(send(&east, &alice, frame.as_bytes()).await);
    let settled = &you.settled[0];
    assert!(settled.stands);
    assert_eq!(
        settled.amount, None,
        "the copies disagree: no single amount"
    );
    let copies: Vec<(&str, u64)> = settled
        .copies
        .iter()
        .map(|c| (c.region.as_str(), c.amount.get()))
        .collect();
    assert_eq!(copies, vec![("us-east-1", 200), ("us-west-2", 300)]);
    assert_eq!(settled.regions, vec!["us-east-1", "us-west-2"]);
    assert!(settled.stands_with(Amount::new(300).unwrap()));
    assert!(settled.stands_with(Amount::new(200).unwrap()));
    assert!(!settled.stands_with(Amount::new(250).unwrap()));
}
