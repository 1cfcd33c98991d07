#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The auction rules and the idempotency guarantee, against the in-memory adapters.

use std::sync::Arc;
use wsdr_auction::BidsHeld;
use wsdr_auction::{Auction, AuctionService};
use wsdr_core::memory::{ManualClock, MemoryConnections, MemoryStateStore, RecordingNotifier};
use wsdr_core::{ConnectionId, UserId};
use wsdr_protocol::{Amount, AuctionId, BidStatus, ErrorCode, ServerMessage};

struct World {
    clock: Arc<ManualClock>,
    store: Arc<MemoryStateStore>,
    connections: Arc<MemoryConnections>,
    notifier: Arc<RecordingNotifier>,
    service: AuctionService,
}

const T0: u64 = 1_700_000_000_000;

fn auction(id: &str) -> Auction {
    Auction {
        id: AuctionId::new(id).unwrap(),
        item: "Tiffany lamp".into(),
        starting_price: Amount::new(100).unwrap(),
        min_increment: 10,
        closes_at: Some(T0 + 60_000),
    }
}

async fn world() -> World {
    let clock = Arc::new(ManualClock::new(T0));
    let store = Arc::new(MemoryStateStore::new("us-east-1", clock.clone()));
    let connections = Arc::new(MemoryConnections::default());
    let notifier = Arc::new(RecordingNotifier::default());
    let service = AuctionService::new(
        store.clone(),
        connections.clone(),
        notifier.clone(),
        clock.clone(),
        "us-east-1",
    );
    service.ensure_auction(&auction("a1")).await.unwrap();
    World {
        clock,
        store,
        connections,
        notifier,
        service,
    }
}

fn user(name: &str) -> UserId {
    UserId::new(name).unwrap()
}

fn conn(name: &str) -> ConnectionId {
    ConnectionId::new(name).unwrap()
}

fn bid_frame(auction: &str, amount: u64, bid_id: &str) -> Vec<u8> {
    format!(r#"{{"action":"bid","auctionId":"{auction}","amount":{amount},"bidId":"{bid_id}"}}"#)
        .into_bytes()
}

async fn bid(w: &World, who: &str, amount: u64, bid_id: &str) -> (BidStatus, Option<String>) {
    let reply = w
        .service
        .handle_frame(
            &conn(&format!("c-{who}")),
            &user(who),
            &bid_frame("a1", amount, bid_id),
        )
        .await;
    match reply.message {
        ServerMessage::BidResult {
            status,
            reason,
            region,
            ..
        } => {
            assert_eq!(region, "us-east-1");
            (status, reason)
        }
        other => panic!("expected bidResult, got {other:?}"),
    }
}

#[tokio::test]
async fn bid_rules_table() {
    // Each row runs on a fresh world after the setup bids, so rows are independent.
    struct Row {
        name: &'static str,
        setup: &'static [(&'static str, u64, &'static str)],
        advance_ms: u64,
        bid: (&'static str, u64, &'static str),
        status: BidStatus,
        reason: Option<&'static str>,
    }
    let rows = [
        Row {
            name: "first_bid_at_starting_price_is_accepted",
            setup: &[],
            advance_ms: 0,
            bid: ("alice", 100, "bid-a-0001"),
            status: BidStatus::Accepted,
            reason: None,
        },
        Row {
            name: "first_bid_below_starting_price_is_rejected",
            setup: &[],
            advance_ms: 0,
            bid: ("alice", 99, "bid-a-0001"),
            status: BidStatus::Rejected,
            reason: Some("below_starting_price"),
        },
        Row {
            name: "bid_at_increment_is_accepted",
            setup: &[("alice", 100, "bid-a-0001")],
            advance_ms: 0,
            bid: ("bob", 110, "bid-b-0001"),
            status: BidStatus::Accepted,
            reason: None,
        },
        Row {
            name: "bid_below_increment_is_rejected",
            setup: &[("alice", 100, "bid-a-0001")],
            advance_ms: 0,
            bid: ("bob", 109, "bid-b-0001"),
            status: BidStatus::Rejected,
            reason: Some("too_low"),
        },
        Row {
            name: "bid_equal_to_high_is_rejected",
            setup: &[("alice", 100, "bid-a-0001")],
            advance_ms: 0,
            bid: ("bob", 100, "bid-b-0001"),
            status: BidStatus::Rejected,
            reason: Some("too_low"),
        },
        Row {
            name: "replay_of_accepted_bid_is_duplicate",
            setup: &[("alice", 100, "bid-a-0001")],
            advance_ms: 0,
            bid: ("alice", 100, "bid-a-0001"),
            status: BidStatus::Duplicate,
            reason: None,
        },
        Row {
            name: "replay_after_being_outbid_is_still_duplicate",
            setup: &[("alice", 100, "bid-a-0001"), ("bob", 500, "bid-b-0001")],
            advance_ms: 0,
            bid: ("alice", 100, "bid-a-0001"),
            status: BidStatus::Duplicate,
            reason: None,
        },
        Row {
            name: "replay_after_close_is_still_duplicate",
            setup: &[("alice", 100, "bid-a-0001")],
            advance_ms: 60_000,
            bid: ("alice", 100, "bid-a-0001"),
            status: BidStatus::Duplicate,
            reason: None,
        },
        Row {
            // A bidId is scoped to its bidder: bob's bid under alice's id is bob's own bid,
            // judged on its amount, and cannot touch alice's.
            name: "reused_bid_id_by_other_user_is_judged_as_their_own_bid",
            setup: &[("alice", 100, "bid-a-0001")],
            advance_ms: 0,
            bid: ("bob", 200, "bid-a-0001"),
            status: BidStatus::Accepted,
            reason: None,
        },
        Row {
            name: "reused_bid_id_by_other_user_with_same_amount_is_too_low",
            setup: &[("alice", 100, "bid-a-0001")],
            advance_ms: 0,
            bid: ("bob", 100, "bid-a-0001"),
            status: BidStatus::Rejected,
            reason: Some("too_low"),
        },
        Row {
            name: "reused_bid_id_with_other_amount_is_rejected",
            setup: &[("alice", 100, "bid-a-0001")],
            advance_ms: 0,
            bid: ("alice", 200, "bid-a-0001"),
            status: BidStatus::Rejected,
            reason: Some("bid_id_reused"),
        },
        Row {
            name: "bid_after_close_is_rejected",
            setup: &[],
            advance_ms: 60_000,
            bid: ("alice", 100, "bid-a-0001"),
            status: BidStatus::Rejected,
            reason: Some("auction_closed"),
        },
        Row {
            name: "bid_just_before_close_is_accepted",
            setup: &[],
            advance_ms: 59_999,
            bid: ("alice", 100, "bid-a-0001"),
            status: BidStatus::Accepted,
            reason: None,
        },
    ];
    for row in rows {
        let w = world().await;
        for (who, amount, id) in row.setup {
            assert_eq!(
                bid(&w, who, *amount, id).await.0,
                BidStatus::Accepted,
                "{}: setup",
                row.name
            );
        }
        w.clock.advance(row.advance_ms);
        let before = w.store.dump();
        let (status, reason) = bid(&w, row.bid.0, row.bid.1, row.bid.2).await;
        assert_eq!(status, row.status, "{}", row.name);
        assert_eq!(reason.as_deref(), row.reason, "{}", row.name);
        if status != BidStatus::Accepted {
            assert_eq!(w.store.dump(), before, "{}: state changed", row.name);
        }
    }
}

#[tokio::test]
async fn bid_on_unknown_auction_is_rejected() {
    let w = world().await;
    let reply = w
        .service
        .handle_frame(
            &conn("c1"),
            &user("alice"),
            &bid_frame("nope", 500, "bid-x-0001"),
        )
        .await;
    assert!(matches!(
        reply.message,
        ServerMessage::BidResult { status: BidStatus::Rejected, reason: Some(ref r), .. } if r == "unknown_auction"
    ));
}

#[tokio::test]
async fn get_state_is_keyed_by_user_not_connection() {
    let w = world().await;
    assert_eq!(
        bid(&w, "alice", 150, "bid-a-0001").await.0,
        BidStatus::Accepted
    );
    w.clock.advance(5);
    assert_eq!(
        bid(&w, "bob", 170, "bid-b-0001").await.0,
        BidStatus::Accepted
    );
    // Alice reconnects on a brand-new connection: her last bid is still hers.
    let reply = w
        .service
        .handle_frame(
            &conn("new-conn"),
            &user("alice"),
            br#"{"action":"getState","auctionId":"a1"}"#,
        )
        .await;
    let ServerMessage::State {
        region,
        auction,
        you,
        ..
    } = reply.message
    else {
        panic!("not state")
    };
    assert_eq!(region, "us-east-1");
    assert_eq!(auction.high_bid.as_ref().unwrap().amount.get(), 170);
    assert_eq!(auction.high_bid.as_ref().unwrap().bidder, "bob");
    assert_eq!(auction.bid_count, 2);
    assert_eq!(you.user_id, "alice");
    assert_eq!(you.last_bid.unwrap().amount.get(), 150);
}

#[tokio::test]
async fn get_state_of_unknown_auction_is_an_invalid_field_error() {
    let w = world().await;
    let reply = w
        .service
        .handle_frame(
            &conn("c"),
            &user("alice"),
            br#"{"action":"getState","auctionId":"zz"}"#,
        )
        .await;
    assert!(matches!(
        reply.message,
        ServerMessage::Error {
            code: ErrorCode::InvalidField,
            ..
        }
    ));
}

#[tokio::test]
async fn heartbeat_answers_pong_with_region_and_time() {
    let w = world().await;
    let reply = w
        .service
        .handle_frame(&conn("c"), &user("u"), br#"{"action":"heartbeat"}"#)
        .await;
    assert_eq!(
        reply.message,
        ServerMessage::Pong {
            region: "us-east-1".into(),
            ts: T0,
            herd_window_ms: None,
            auction_id: None,
            topic: None,
            versions: None,
        }
    );
}

#[tokio::test]
async fn hostile_frames_through_the_service_change_nothing() {
    let w = world().await;
    assert_eq!(
        bid(&w, "alice", 100, "bid-a-0001").await.0,
        BidStatus::Accepted
    );
    let frames: Vec<(&[u8], ErrorCode)> = vec![
        (b"", ErrorCode::BadJson),
        (b"{", ErrorCode::BadJson),
        (br#"{"action":"sell"}"#, ErrorCode::UnknownAction),
        (
            br#"{"action":"bid","auctionId":"a1","amount":500.5,"bidId":"bid-z-0001"}"#,
            ErrorCode::InvalidField,
        ),
        (
            br#"{"action":"bid","auctionId":"a1","amount":-500,"bidId":"bid-z-0001"}"#,
            ErrorCode::InvalidField,
        ),
        (
            br#"{"action":"bid","auctionId":"a1","amount":0,"bidId":"bid-z-0001"}"#,
            ErrorCode::InvalidField,
        ),
        (
            br#"{"action":"bid","auctionId":"a1","amount":500,"amount":900,"bidId":"bid-z-0001"}"#,
            ErrorCode::InvalidField,
        ),
        (
            br#"{"action":"bid","auctionId":"a1","amount":"500","bidId":"bid-z-0001"}"#,
            ErrorCode::InvalidField,
        ),
        (
            br#"{"action":"bid","auctionId":"a1","amount":500}"#,
            ErrorCode::InvalidField,
        ),
    ];
    let before = w.store.dump();
    let sent_before = w.notifier.sent().len();
    for (frame, code) in frames {
        let reply = w
            .service
            .handle_frame(&conn("c-mallory"), &user("mallory"), frame)
            .await;
        match reply.message {
            ServerMessage::Error {
                code: got, region, ..
            } => {
                assert_eq!(got, code, "{}", String::from_utf8_lossy(frame));
                assert_eq!(region, "us-east-1");
            }
            other => panic!("expected error frame, got {other:?}"),
        }
    }
    assert_eq!(w.store.dump(), before);
    assert_eq!(w.notifier.sent().len(), sent_before);
}

#[tokio::test]
async fn store_outage_answers_the_bid_by_its_id_without_leaking_detail() {
    let w = world().await;
    w.store.set_outage(Some(wsdr_core::Error::Transient(
        "dynamodb: connection reset by peer 10.0.0.7".into(),
    )));
    let reply = w
        .service
        .handle_frame(
            &conn("c"),
            &user("alice"),
            &bid_frame("a1", 100, "bid-a-0001"),
        )
        .await;
    let text = reply.message.to_json();
    let ServerMessage::BidResult {
        bid_id,
        status,
        reason,
        ..
    } = reply.message
    else {
        panic!("not a bidResult: {text}")
    };
    assert_eq!(bid_id.as_str(), "bid-a-0001");
    assert_eq!(status, BidStatus::Unknown);
    assert_eq!(reason.as_deref(), Some("unavailable"));
    assert!(!text.contains("10.0.0.7"));
    // getState is not a bid: it still answers an internal error frame, without detail.
    let reply = w
        .service
        .handle_frame(
            &conn("c"),
            &user("alice"),
            br#"{"action":"getState","auctionId":"a1"}"#,
        )
        .await;
    let ServerMessage::Error { code, message, .. } = reply.message else {
        panic!("not an error")
    };
    assert_eq!(code, ErrorCode::Internal);
    assert!(!message.contains("10.0.0.7"));
}

/// The Region's stream reader: the auction changed, push what is due.
async fn push(w: &World) -> wsdr_core::push::PushTotals {
    let pusher = wsdr_core::push::Pusher::new(
        w.service.clone(),
        wsdr_core::PushSettings::default(),
        w.clock.clone(),
        Arc::new(wsdr_core::TokioPause),
    );
    pusher.changed([&wsdr_auction::store::topic(&AuctionId::new("a1").unwrap())]);
    pusher.drain().await;
    pusher.totals()
}

async fn watch(w: &World, who: &[&str]) {
    for who in who {
        w.service
            .connect(&conn(&format!("c-{who}")), &user(who))
            .await
            .unwrap();
        w.service
            .handle_frame(
                &conn(&format!("c-{who}")),
                &user(who),
                br#"{"action":"getState","auctionId":"a1"}"#,
            )
            .await;
    }
}

#[tokio::test]
async fn an_accepted_bid_is_answered_before_any_push_and_pushed_from_the_stream() {
    let w = world().await;
    watch(&w, &["alice", "bob", "carol"]).await;
    let reply = w
        .service
        .handle_frame(
            &conn("c-alice"),
            &user("alice"),
            &bid_frame("a1", 100, "bid-a-0001"),
        )
        .await;
    assert!(matches!(
        reply.message,
        ServerMessage::BidResult {
            status: BidStatus::Accepted,
            ..
        }
    ));
    assert!(w.notifier.sent().is_empty(), "the answer waits for no push");
    let totals = push(&w).await;
    assert_eq!((totals.pushes, totals.posts, totals.delivered), (1, 3, 3));
    assert_eq!(totals.jobs, u64::from(wsdr_core::SUBSCRIBER_SHARDS));
    let mut targets: Vec<String> = w
        .notifier
        .sent()
        .iter()
        .map(|(c, _)| c.to_string())
        .collect();
    targets.sort();
    assert_eq!(
        targets,
        ["c-alice", "c-bob", "c-carol"],
        "the bidder too: one path"
    );
    let frame: serde_json::Value = serde_json::from_slice(&w.notifier.sent()[0].1).unwrap();
    assert_eq!(frame["type"], "bidUpdate");
    assert_eq!(frame["highBid"]["amount"], 100);
    assert_eq!(frame["region"], "us-east-1");
}

#[tokio::test]
async fn gone_target_is_removed_by_the_push() {
    let w = world().await;
    watch(&w, &["alice", "bob", "carol"]).await;
    w.notifier.mark_gone(&conn("c-bob"));
    w.service
        .handle_frame(
            &conn("c-alice"),
            &user("alice"),
            &bid_frame("a1", 100, "bid-a-0001"),
        )
        .await;
    let totals = push(&w).await;
    assert_eq!((totals.delivered, totals.gone), (2, 1));
    assert!(!w.connections.contains(&conn("c-bob")));
    assert!(w.connections.contains(&conn("c-alice")));
    assert!(w.connections.contains(&conn("c-carol")));
}

#[tokio::test(start_paused = true)]
async fn throttled_target_is_retried_then_delivered() {
    let w = world().await;
    watch(&w, &["alice", "bob"]).await;
    w.notifier.throttle(&conn("c-bob"), 3);
    w.service
        .handle_frame(
            &conn("c-alice"),
            &user("alice"),
            &bid_frame("a1", 100, "bid-a-0001"),
        )
        .await;
    let totals = push(&w).await;
    assert_eq!((totals.delivered, totals.failed), (2, 0));
}

#[tokio::test(start_paused = true)]
async fn target_throttled_past_retry_budget_is_counted_failed_not_fatal() {
    let w = world().await;
    watch(&w, &["alice", "bob"]).await;
    w.notifier.throttle(&conn("c-bob"), 100);
    let reply = w
        .service
        .handle_frame(
            &conn("c-alice"),
            &user("alice"),
            &bid_frame("a1", 100, "bid-a-0001"),
        )
        .await;
    assert!(matches!(
        reply.message,
        ServerMessage::BidResult {
            status: BidStatus::Accepted,
            ..
        }
    ));
    let totals = push(&w).await;
    assert_eq!((totals.delivered, totals.failed), (1, 1));
}

#[tokio::test]
async fn a_push_reads_one_page_per_job_and_carries_on_where_it_ended() {
    let w = world().await;
    let watchers: Vec<String> = (0..200).map(|i| format!("w{i:03}")).collect();
    let names: Vec<&str> = watchers.iter().map(String::as_str).collect();
    watch(&w, &names).await;
    w.service
        .handle_frame(
            &conn("c-w000"),
            &user("w000"),
            &bid_frame("a1", 100, "bid-a-0001"),
        )
        .await;
    let pusher = wsdr_core::push::Pusher::new(
        w.service.clone(),
        wsdr_core::PushSettings {
            page: 4,
            workers: 3,
            ..wsdr_core::PushSettings::default()
        },
        w.clock.clone(),
        Arc::new(wsdr_core::TokioPause),
    );
    pusher.changed([&wsdr_auction::store::topic(&AuctionId::new("a1").unwrap())]);
    pusher.drain().await;
    let totals = pusher.totals();
    assert_eq!((totals.delivered, totals.subscriber_reads), (200, 200));
    // 16 shards of about 12 at 4 a page: about 3 or 4 jobs a shard, never one for all.
    assert!(totals.jobs >= 50, "{totals:?}");
    let mut told: Vec<String> = w
        .notifier
        .sent()
        .iter()
        .map(|(c, _)| c.to_string())
        .collect();
    told.sort();
    told.dedup();
    assert_eq!(told.len(), 200, "each once");
}

/// The stream's reader and the workers as two instances on one queue and one set of leases
/// (SQS and the DynamoDB lease item in AWS): the reader only starts pushes, a change during a
/// push is merged into it, and the push's last job starts the trailing push, which carries
/// the newest bid.
#[tokio::test(start_paused = true)]
async fn the_stream_starts_pushes_the_workers_post_and_the_last_job_starts_the_trailing_one() {
    use wsdr_core::push::{InProcessLeases, LocalPushQueue, PushPorts};
    let w = world().await;
    let names: Vec<String> = (0..40).map(|i| format!("w{i:02}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    watch(&w, &names).await;
    let queue = Arc::new(LocalPushQueue::new(
        w.clock.clone(),
        Arc::new(wsdr_core::TokioPause),
    ));
    let leases = Arc::new(InProcessLeases::default());
    let instance = || {
        wsdr_core::push::Pusher::queued(
            w.service.clone(),
            wsdr_core::PushSettings::default(),
            w.clock.clone(),
            Arc::new(wsdr_core::TokioPause),
            PushPorts {
                leases: leases.clone(),
                queue: queue.clone(),
                posts_per_second: 5_000.0 / 16.0,
            },
        )
    };
    let (stream, worker) = (instance(), instance());
    let a1 = wsdr_auction::store::topic(&AuctionId::new("a1").unwrap());
    assert_eq!(
        bid(&w, "w00", 100, "bid-a-0001").await.0,
        BidStatus::Accepted
    );
    stream.changed([&a1]);
    assert_eq!(stream.drain().await, vec![a1.clone()]);
    assert_eq!(queue.len(), usize::from(wsdr_core::SUBSCRIBER_SHARDS));
    assert!(
        w.notifier.sent().is_empty(),
        "the stream's reader posts nothing"
    );
    // A second bid while the first push is queued: merged, no second set of jobs.
    assert_eq!(
        bid(&w, "w01", 150, "bid-b-0001").await.0,
        BidStatus::Accepted
    );
    stream.changed([&a1]);
    assert!(stream.drain().await.is_empty());
    assert_eq!(stream.totals().merged, 1);
    assert_eq!(queue.len(), usize::from(wsdr_core::SUBSCRIBER_SHARDS));
    // The spacing passes while the workers run: the last job starts the trailing push.
    w.clock.advance(250);
    let mut ran = 0;
    while let Some(job) = queue.try_next() {
        worker.run(&job).await.unwrap();
        ran += 1;
    }
    assert_eq!(ran, 2 * usize::from(wsdr_core::SUBSCRIBER_SHARDS));
    let totals = worker.totals();
    assert_eq!((totals.pushes, totals.delivered), (1, 80), "{totals:?}");
    // Every watcher's last frame carries the newest bid.
    let mut last: std::collections::BTreeMap<String, serde_json::Value> = Default::default();
    for (to, frame) in w.notifier.sent() {
        last.insert(to.to_string(), serde_json::from_slice(&frame).unwrap());
    }
    assert_eq!(last.len(), 40);
    assert!(
        last.values().all(|f| f["highBid"]["amount"] == 150),
        "{last:?}"
    );
    // Nothing waits: the next change after the spacing starts a push at once.
    assert!(queue.is_empty());
    w.clock.advance(250);
    stream.changed([&a1]);
    assert_eq!(stream.drain().await, vec![a1]);
}

/// A push whose spacing ends long after the change that needs it (a wide window, or a push
/// that finished early) is neither waited for past the limit nor dropped: it is queued as a
/// delayed start, and the worker that takes it when due pushes the newest bid. Both starters
/// do so: a push's last job (a change merged into it) and the stream's reader (a change after
/// it).
#[tokio::test(start_paused = true)]
async fn a_push_whose_spacing_ends_past_the_wait_limit_is_queued_as_a_delayed_start() {
    use wsdr_core::push::{InProcessLeases, LocalPushQueue, PushPorts, PushWork};
    let w = world().await;
    watch(&w, &["w00", "w01", "w02"]).await;
    let queue = Arc::new(LocalPushQueue::new(
        w.clock.clone(),
        Arc::new(wsdr_core::TokioPause),
    ));
    let settings = wsdr_core::PushSettings {
        window: std::time::Duration::from_secs(20),
        ..wsdr_core::PushSettings::default()
    };
    let pusher = wsdr_core::push::Pusher::queued(
        w.service.clone(),
        settings,
        w.clock.clone(),
        Arc::new(wsdr_core::TokioPause),
        PushPorts {
            leases: Arc::new(InProcessLeases::default()),
            queue: queue.clone(),
            posts_per_second: 5_000.0,
        },
    );
    let shown = |w: &World| {
        let mut last: std::collections::BTreeMap<String, u64> = Default::default();
        for (to, frame) in w.notifier.sent() {
            let frame: serde_json::Value = serde_json::from_slice(&frame).unwrap();
            last.insert(to.to_string(), frame["highBid"]["amount"].as_u64().unwrap());
        }
        last
    };
    let run_ready = |queue: Arc<LocalPushQueue>| {
        let pusher = &pusher;
        async move {
            let mut ran = Vec::new();
            while let Some(work) = queue.try_next() {
                pusher.run(&work).await.unwrap();
                ran.push(work);
            }
            ran
        }
    };
    let a1 = wsdr_auction::store::topic(&AuctionId::new("a1").unwrap());
    assert_eq!(
        bid(&w, "w00", 100, "bid-a-0001").await.0,
        BidStatus::Accepted
    );
    pusher.changed([&a1]);
    assert_eq!(pusher.drain().await, vec![a1.clone()]);
    // A change while the push is queued is merged; its last job finds the spacing 19 s ahead.
    assert_eq!(
        bid(&w, "w01", 150, "bid-b-0001").await.0,
        BidStatus::Accepted
    );
    pusher.changed([&a1]);
    assert!(pusher.drain().await.is_empty());
    w.clock.advance(1_000);
    let ran = run_ready(queue.clone()).await;
    assert!(ran.iter().all(|work| matches!(work, PushWork::Page(_))));
    assert_eq!((queue.len(), queue.delayed()), (0, 1));
    assert_eq!(pusher.totals().deferred, 1);
    // Not due before the spacing ends; due after it (delays are whole seconds).
    w.clock.advance(18_000);
    assert!(queue.try_next().is_none());
    w.clock.advance(1_000);
    let ran = run_ready(queue.clone()).await;
    assert_eq!(ran.first(), Some(&PushWork::Start(a1.clone())));
    assert_eq!(pusher.totals().pushes, 2);
    assert!(shown(&w).values().all(|&amount| amount == 150));
    // A change right after that push: the stream's reader puts its start off as well.
    w.clock.advance(1_000);
    assert_eq!(
        bid(&w, "w02", 200, "bid-c-0001").await.0,
        BidStatus::Accepted
    );
    pusher.changed([&a1]);
    assert!(pusher.drain().await.is_empty());
    assert_eq!((queue.len(), queue.delayed()), (0, 1));
    assert!(shown(&w).values().all(|&amount| amount == 150));
    w.clock.advance(19_000);
    run_ready(queue.clone()).await;
    let last = shown(&w);
    assert_eq!(last.len(), 3);
    assert!(last.values().all(|&amount| amount == 200), "{last:?}");
    let totals = pusher.totals();
    assert_eq!((totals.pushes, totals.deferred), (3, 2), "{totals:?}");
}

#[tokio::test]
async fn expired_connection_records_are_ignored_on_read() {
    let connections = MemoryConnections::new(1_000);
    use wsdr_core::Connections;
    let a1 = wsdr_auction::store::topic(&AuctionId::new("a1").unwrap());
    connections
        .subscribe(&conn("old"), &user("u"), &a1, 0)
        .await
        .unwrap();
    connections
        .subscribe(&conn("new"), &user("u"), &a1, 900)
        .await
        .unwrap();
    let live = connections.subscribers(&a1, 1_500).await.unwrap();
    assert_eq!(live, vec![conn("new")]);
}

#[tokio::test]
async fn seeded_auctions_are_created_on_first_use_not_at_start() {
    let w = world().await;
    let service = w
        .service
        .clone()
        .with_seed_auctions(vec![auction("seeded")]);
    let id = AuctionId::new("seeded").unwrap();
    use wsdr_auction::StateStore;
    assert!(
        w.store.auction(&id).await.unwrap().is_none(),
        "nothing written at construction"
    );
    let reply = service
        .handle_frame(
            &conn("c1"),
            &user("ann"),
            br#"{"action":"getState","auctionId":"seeded"}"#,
        )
        .await;
    assert!(
        matches!(reply.message, ServerMessage::State { ref auction, .. } if auction.id == id),
        "{:?}",
        reply.message
    );
    assert!(w.store.auction(&id).await.unwrap().is_some());
    // A bid on a seeded auction works from a cold start too; an unknown one is still refused.
    let reply = service
        .handle_frame(
            &conn("c1"),
            &user("ann"),
            &bid_frame("seeded", 150, "bid-seeded-1"),
        )
        .await;
    assert!(matches!(
        reply.message,
        ServerMessage::BidResult {
            status: BidStatus::Accepted,
            ..
        }
    ));
    let reply = service
        .handle_frame(
            &conn("c1"),
            &user("ann"),
            &bid_frame("nope", 150, "bid-nope-001"),
        )
        .await;
    assert!(matches!(
        reply.message,
        ServerMessage::BidResult {
            status: BidStatus::Rejected,
            ..
        }
    ));
}

/// The herd window a `getState` reply advertises, if any.
async fn advertised(service: &AuctionService, connection: &str) -> Option<u64> {
    let reply = service
        .handle_frame(
            &conn(connection),
            &user("alice"),
            br#"{"action":"getState","auctionId":"a1"}"#,
        )
        .await;
    let ServerMessage::State { herd_window_ms, .. } = reply.message else {
        panic!("not state: {:?}", reply.message)
    };
    herd_window_ms
}

#[tokio::test]
async fn state_advertises_the_herd_window_from_a_recent_census_only() {
    use std::time::Duration;
    use wsdr_core::{Connections, HerdHint};
    let w = world().await;
    let hint = HerdHint {
        destination_quota_per_s: 5.0,
        max_census_age: Duration::from_secs(300),
        reuse_for: Duration::from_secs(60),
    };
    let service = w.service.clone().with_herd_hint(hint);
    for i in 0..50 {
        w.connections
            .register(&conn(&format!("c{i}")), &user("u"), T0)
            .await
            .unwrap();
    }
    assert_eq!(
        advertised(&service, "c0").await,
        None,
        "no census taken yet: no hint"
    );
    assert_eq!(
        advertised(&w.service, "c0").await,
        None,
        "no hint configured"
    );
    w.connections.take_census(T0).await.unwrap();
    // The instance read "no census" a moment ago and reuses that for a minute.
    assert_eq!(advertised(&service, "c0").await, None);
    w.clock.advance(61_000);
    // 50 connections at 5 per second: 10 s.
    assert_eq!(advertised(&service, "c0").await, Some(10_000));
    // More connections, counted again: the instance sees it only after its reuse period.
    for i in 50..100 {
        w.connections
            .register(&conn(&format!("c{i}")), &user("u"), T0 + 61_000)
            .await
            .unwrap();
    }
    w.connections.take_census(T0 + 61_000).await.unwrap();
    assert_eq!(advertised(&service, "c0").await, Some(10_000));
    w.clock.advance(60_000);
    assert_eq!(advertised(&service, "c0").await, Some(20_000));
    // The census schedule stops: once the last count is older than 5 minutes, no hint
    // rather than a stale one.
    w.clock.advance(300_000);
    assert_eq!(advertised(&service, "c0").await, None);
}

/// The server decides bids by the rule the clients show as the minimum next bid: the shared
/// vectors (conformance/minimum_bid.json) against `Auction::minimum_next_bid`, the floor every
/// bid is judged by, and against the `state` view's rules.
#[test]
fn the_acceptance_floor_is_the_minimum_the_clients_show() {
    let path = format!(
        "{}/../../../conformance/minimum_bid.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for case in file["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let rules = Auction {
            starting_price: Amount::new(case["starting_price"].as_u64().unwrap()).unwrap(),
            min_increment: case["min_increment"].as_u64().unwrap(),
            ..auction("lot-1")
        };
        let high = case["high"].as_u64().map(|amount| wsdr_auction::BidRecord {
            auction_id: AuctionId::new("lot-1").unwrap(),
            bid_id: wsdr_protocol::BidId::new("bob-00000001").unwrap(),
            bidder: user("bob"),
            amount: Amount::new(amount).unwrap(),
            at: T0,
            region: "us-east-1".into(),
            position: 1,
        });
        let floor = rules.minimum_next_bid(high.as_ref());
        assert_eq!(
            Amount::new(floor).ok().map(Amount::get),
            case["expect"].as_u64(),
            "{name}"
        );
    }
}

async fn state_json(w: &World) -> serde_json::Value {
    let frame = w
        .service
        .get_state(&conn("c1"), &user("alice"), &AuctionId::new("a1").unwrap())
        .await
        .unwrap();
    serde_json::to_value(&frame).unwrap()
}

#[tokio::test]
async fn a_state_names_the_auctions_rules_and_its_minimum_next_bid() {
    let w = world().await;
    let rules = auction("a1");
    let first = state_json(&w).await;
    assert_eq!(
        first["auction"]["startingPrice"],
        rules.starting_price.get()
    );
    assert_eq!(first["auction"]["minIncrement"], rules.min_increment);
    assert_eq!(first["auction"]["minNextBid"], rules.starting_price.get());
    assert_eq!(
        bid(&w, "alice", 150, "alice-00000001").await.0,
        BidStatus::Accepted
    );
    let after = state_json(&w).await;
    assert_eq!(after["auction"]["minNextBid"], 150 + rules.min_increment);
}

#[tokio::test]
async fn a_push_never_posts_a_state_read_before_it_started() {
    let w = world().await;
    let frames = wsdr_core::push::FrameSource::new(
        w.service.clone(),
        w.clock.clone(),
        std::time::Duration::from_millis(200),
    );
    let a1 = wsdr_auction::store::topic(&AuctionId::new("a1").unwrap());
    let fallback: Arc<str> = Arc::from("");
    w.service
        .handle_frame(
            &conn("c-alice"),
            &user("alice"),
            &bid_frame("a1", 100, "bid-a-0001"),
        )
        .await;
    // A chunk of an earlier push reads (and caches) the state with alice's bid.
    let first = frames.frame(&a1, T0, &fallback).await;
    assert!(first.contains("\"amount\":100"), "{first}");
    w.clock.advance(50);
    w.service
        .handle_frame(
            &conn("c-bob"),
            &user("bob"),
            &bid_frame("a1", 200, "bid-b-0001"),
        )
        .await;
    w.clock.advance(50);
    // The push for bob's bid starts after it: its chunks must not post the cached state
    // (still within the window's age), which lacks the very bid the push is for.
    let pushed = frames.frame(&a1, T0 + 75, &fallback).await;
    assert!(pushed.contains("\"amount\":200"), "{pushed}");
}

/// The kit's envelope: `write` to `auction:<id>` with `{"amount": n}` is a bid. One op id is
/// one op whichever frame carries it; other namespaces, bad ops and probes are refused.
#[tokio::test]
async fn a_write_to_an_auctions_topic_is_the_same_bid_as_its_bid_frame() {
    let w = world().await;
    let write = |who: &'static str, frame: String| {
        let w = &w;
        async move {
            w.service
                .handle_frame(&conn(&format!("c-{who}")), &user(who), frame.as_bytes())
                .await
                .message
        }
    };
    let frame = |topic: &str, op_id: &str, op: &str| {
        format!(r#"{{"action":"write","topic":"{topic}","opId":"{op_id}","op":{op}}}"#)
    };
    let result = |message: ServerMessage| match message {
        ServerMessage::WriteResult {
            op_id,
            status,
            reason,
            region,
        } => {
            assert_eq!(region, "us-east-1");
            (op_id.to_string(), status, reason)
        }
        other => panic!("expected writeResult, got {other:?}"),
    };
    assert_eq!(
        result(
            write(
                "ann",
                frame("auction:a1", "op-00000001", r#"{"amount":150}"#)
            )
            .await
        ),
        ("op-00000001".to_owned(), BidStatus::Accepted, None)
    );
    // The same op id through the auction's own frame: the same op.
    assert_eq!(
        bid(&w, "ann", 150, "op-00000001").await,
        (BidStatus::Duplicate, None)
    );
    // One write to a1, answered: (op id, status, reason).
    let to_a1 = |who: &'static str, op_id: &'static str, op: &'static str| {
        let answer = write(who, frame("auction:a1", op_id, op));
        async move { result(answer.await) }
    };
    assert_eq!(
        to_a1("ann", "op-00000001", r#"{"amount":170}"#).await,
        (
            "op-00000001".to_owned(),
            BidStatus::Rejected,
            Some("op_id_reused".to_owned())
        )
    );
    // The auction's rules answer under their own names.
    assert_eq!(
        to_a1("bob", "op-00000002", r#"{"amount":155}"#).await,
        (
            "op-00000002".to_owned(),
            BidStatus::Rejected,
            Some("too_low".to_owned())
        )
    );
    for (topic, reason) in [
        ("auction:nope", "unknown_topic"),
        ("chat:room-1", "unknown_topic"),
    ] {
        assert_eq!(
            result(write("bob", frame(topic, "op-00000003", r#"{"amount":500}"#)).await).2,
            Some(reason.to_owned()),
            "{topic}"
        );
    }
    // A bad op is a protocol error and touches nothing.
    for op in [
        r#"{"amount":0}"#,
        r#"{"amount":500,"x":1}"#,
        r#"{"amount":"500"}"#,
        "[500]",
    ] {
        match write("bob", frame("auction:a1", "op-00000004", op)).await {
            ServerMessage::Error { code, .. } => assert_eq!(code, ErrorCode::InvalidField, "{op}"),
            other => panic!("{op}: expected an error frame, got {other:?}"),
        }
    }
    assert_eq!(w.store.all_bids(&AuctionId::new("a1").unwrap()).len(), 1);
    // A probe identity writes nothing.
    let probe = wsdr_core::Principal::Probe(user("canary:probe"));
    let reply = w
        .service
        .handle(
            &conn("c-probe"),
            &probe,
            wsdr_protocol::parse_client_message(
                frame("auction:a1", "op-00000005", r#"{"amount":900}"#).as_bytes(),
            )
            .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        result(reply.message).2,
        Some("forbidden".to_owned()),
        "a probe may not write"
    );
    assert_eq!(w.store.all_bids(&AuctionId::new("a1").unwrap()).len(), 1);
}

/// The auction read as any app's topic (`getState{topic:"auction:<id>"}`): its view is the
/// `state` frame's `auction`, with the same high bid; the auction delivers its latest view,
/// so no ops; the caller's own bids are its ops; another app's namespace is an error frame.
#[tokio::test]
async fn the_auction_is_read_as_a_topic_with_the_state_frames_view() {
    let w = world().await;
    assert_eq!(
        bid(&w, "bob", 100, "bid-b-0001").await.0,
        BidStatus::Accepted
    );
    let legacy = state_json(&w).await;
    let reply = w
        .service
        .handle_frame(
            &conn("c-bob"),
            &user("bob"),
            br#"{"action":"getState","topic":"auction:a1","opIds":["bid-b-0001"]}"#,
        )
        .await;
    let topic = serde_json::to_value(&reply.message).unwrap();
    assert_eq!(topic["type"], "topicState", "{topic}");
    assert_eq!(topic["view"], legacy["auction"]);
    assert_eq!(topic["view"]["highBid"]["amount"], 100);
    assert_eq!(topic["versions"], serde_json::json!({ "us-east-1": 1 }));
    assert_eq!(topic["ops"], serde_json::json!([]));
    assert_eq!(topic["complete"], true);
    assert_eq!(topic["you"]["ops"][0]["opId"], "bid-b-0001");
    assert_eq!(topic["you"]["settled"][0]["stands"], true);
    assert_eq!(
        topic["you"]["settled"][0]["copies"][0]["digest"],
        wsdr_protocol::bid_digest(wsdr_protocol::Amount::new(100).unwrap()).to_string()
    );
    let elsewhere = w
        .service
        .handle_frame(
            &conn("c-bob"),
            &user("bob"),
            br#"{"action":"getState","topic":"chess:game-1"}"#,
        )
        .await;
    assert!(matches!(
        elsewhere.message,
        wsdr_protocol::ServerMessage::Error { .. }
    ));
    // Pushes start for the deployment's apps' topics only.
    assert!(w
        .service
        .serves(&wsdr_protocol::Topic::parse("auction:a1").unwrap()));
    assert!(!w
        .service
        .serves(&wsdr_protocol::Topic::parse("chess:game-1").unwrap()));
    // A heartbeat naming the topic carries its versions.
    let pong = w
        .service
        .handle_frame(
            &conn("c-bob"),
            &user("bob"),
            br#"{"action":"heartbeat","topic":"auction:a1"}"#,
        )
        .await;
    let pong = serde_json::to_value(&pong.message).unwrap();
    assert_eq!(pong["topic"], "auction:a1");
    assert_eq!(pong["versions"], serde_json::json!({ "us-east-1": 1 }));
}

/// The auction's service is also a deployment's front door: its connection lifecycle, Region
/// label and `bidUpdate` are the gateway's and the auction's, through either handle.
#[tokio::test]
async fn the_service_and_its_gateway_are_one_front_door() {
    let w = world().await;
    assert_eq!(w.service.region(), "us-east-1");
    assert_eq!(w.service.gateway().region(), "us-east-1");
    assert!(format!("{:?}", w.service).contains("us-east-1"));
    w.service
        .connect(&conn("c1"), &user("alice"))
        .await
        .unwrap();
    assert!(w.connections.contains(&conn("c1")));
    w.service.disconnect(&conn("c1")).await.unwrap();
    assert!(!w.connections.contains(&conn("c1")));
    w.service
        .bid(
            &user("alice"),
            &AuctionId::new("a1").unwrap(),
            Amount::new(120).unwrap(),
            &wsdr_protocol::BidId::new("bid-00001").unwrap(),
        )
        .await
        .unwrap();
    let frame: serde_json::Value = serde_json::from_str(
        &w.service
            .push_frame(&AuctionId::new("a1").unwrap())
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(frame["type"], "bidUpdate");
    assert_eq!(frame["highBid"]["amount"], 120);
    assert_eq!(frame["region"], "us-east-1");
    // The same frame through the push path's source, by topic.
    let by_topic = wsdr_core::push::PushSource::push_frame(
        &w.service,
        &wsdr_auction::topic(&AuctionId::new("a1").unwrap()),
    )
    .await
    .unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&by_topic).unwrap(),
        frame
    );
}
