#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! DynamoStateStore against DynamoDB Local.

mod common;

use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use wsdr_auction::{Auction, BidCommit, BidRecord, LedgerStore, RegionSummary, StateStore};
use wsdr_aws::{DynamoLedgerStore, DynamoStateStore};
use wsdr_core::{CommitOutcome, UserId};
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
        position: 1,
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

/// DynamoDB (Local too) keeps a request token for 10 minutes across tables: tests that run
/// side by side must not share one.
fn token(name: &str) -> String {
    format!("{name}-{:016x}", rand::rng().random::<u64>())
}

fn commit(bid: &BidRecord, write_id: &str, expected: u64, summary: RegionSummary) -> BidCommit {
    BidCommit {
        bid: bid.clone(),
        write_id: write_id.into(),
        expected_accepted: expected,
        summary,
    }
}

fn a1() -> AuctionId {
    AuctionId::new("a1").unwrap()
}

#[tokio::test]
async fn commit_is_idempotent_per_bidder_and_bid_id() {
    let client = common::client();
    let store = DynamoStateStore::new(client.clone(), common::state_table(&client).await);
    let first = bid("bid-00000001", "alice", 150, 10);
    let s1 = RegionSummary::empty("us-east-1").with_bid(&first);
    let w1 = token("w1");
    let (_, _, written_before) = store.io().get();
    assert_eq!(
        store
            .commit_bid(&commit(&first, &w1, 0, s1.clone()))
            .await
            .unwrap(),
        CommitOutcome::Committed
    );
    let (_, _, written) = store.io().get();
    assert_eq!(
        written - written_before,
        2,
        "the copy and the summary, one transaction"
    );
    // Another request with the same (bidder, bidId) finds the copy; nothing is written.
    let replay = bid("bid-00000001", "alice", 150, 99);
    assert_eq!(
        store
            .commit_bid(&commit(&replay, &token("w2"), 1, s1.with_bid(&replay)))
            .await
            .unwrap(),
        CommitOutcome::Exists(first.clone())
    );
    // The same commit tried again (an SDK retry of a committed write) is recognised.
    assert_eq!(
        store
            .commit_bid(&commit(&first, &w1, 0, s1.clone()))
            .await
            .unwrap(),
        CommitOutcome::Committed
    );
    // mallory's bid under alice's bidId is a different item: it cannot touch alice's.
    let reuse = bid("bid-00000001", "mallory", 9_999, 100);
    let s2 = s1.with_bid(&reuse);
    assert_eq!(
        store
            .commit_bid(&commit(&reuse, &token("w3"), 1, s2.clone()))
            .await
            .unwrap(),
        CommitOutcome::Committed
    );
    let alice = UserId::new("alice").unwrap();
    assert_eq!(
        store
            .bid_copies(&a1(), &alice, &first.bid_id)
            .await
            .unwrap(),
        vec![first.clone()]
    );
    let snapshot = store.snapshot(&a1()).await.unwrap();
    assert_eq!(snapshot.bid_count, 2);
    assert_eq!(snapshot.high_bid, Some(reuse));
    assert_eq!(store.summaries(&a1()).await.unwrap(), vec![s2]);
}

#[tokio::test]
async fn commit_against_a_moved_summary_is_a_conflict_and_writes_nothing() {
    let client = common::client();
    let store = DynamoStateStore::new(client.clone(), common::state_table(&client).await);
    let first = bid("bid-00000001", "alice", 150, 10);
    let s1 = RegionSummary::empty("us-east-1").with_bid(&first);
    store
        .commit_bid(&commit(&first, &token("w1"), 0, s1.clone()))
        .await
        .unwrap();
    // Decided on the empty summary, but alice's bid moved it: conflict, no copy written.
    let late = bid("bid-00000002", "bob", 140, 11);
    assert_eq!(
        store
            .commit_bid(&commit(
                &late,
                &token("w2"),
                0,
                RegionSummary::empty("us-east-1").with_bid(&late)
            ))
            .await
            .unwrap(),
        CommitOutcome::Conflict
    );
    let bob = UserId::new("bob").unwrap();
    assert!(store
        .newest_user_bids(&a1(), &bob, 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(store.summaries(&a1()).await.unwrap(), vec![s1]);
}

#[tokio::test]
async fn bidder_key_segment_cannot_alias_another_bidder() {
    let client = common::client();
    let store = DynamoStateStore::new(client.clone(), common::state_table(&client).await);
    // "a#b" with bidId "x..." must not share a prefix with "a" bidding "b#x...".
    let tricky = bid("bid-00000009", "a#b", 150, 10);
    let plain = bid("bid-00000009", "a", 160, 11);
    let percent = bid("bid-00000009", "a%23b", 170, 12);
    let mut summary = RegionSummary::empty("us-east-1");
    for (i, b) in [&tricky, &plain, &percent].into_iter().enumerate() {
        let next = summary.with_bid(b);
        assert_eq!(
            store
                .commit_bid(&commit(
                    b,
                    &token(&format!("w{i}")),
                    summary.accepted,
                    next.clone()
                ))
                .await
                .unwrap(),
            CommitOutcome::Committed
        );
        summary = next;
    }
    for b in [&tricky, &plain, &percent] {
        assert_eq!(
            store.newest_user_bids(&a1(), &b.bidder, 10).await.unwrap(),
            vec![b.clone()]
        );
    }
}

#[tokio::test]
async fn summary_merge_picks_the_same_high_bid_as_the_domain_rank() {
    let client = common::client();
    let store = DynamoStateStore::new(client.clone(), common::state_table(&client).await);
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let mut summary = RegionSummary::empty("us-east-1");
    let mut bids = Vec::new();
    // Few distinct amounts and times, so ties on amount and on time are common.
    for i in 0..60 {
        let b = bid(
            &format!("bid-{:08}", rng.random_range(0..1_000_000)),
            &format!("u{i}"),
            rng.random_range(1..6) * 100,
            rng.random_range(0..3),
        );
        let next = summary.with_bid(&b);
        let outcome = store
            .commit_bid(&commit(
                &b,
                &token(&format!("w{i}")),
                summary.accepted,
                next.clone(),
            ))
            .await
            .unwrap();
        assert_eq!(outcome, CommitOutcome::Committed);
        summary = next;
        bids.push(b);
    }
    let expected = bids.iter().max_by(|a, b| a.rank(b)).cloned();
    let snapshot = store.snapshot(&a1()).await.unwrap();
    assert_eq!(snapshot.bid_count, bids.len() as u64);
    assert_eq!(snapshot.high_bid, expected);
    assert_eq!(
        bids_held(store.all_ops(&wsdr_auction::topic(&a1())).await.unwrap()).len(),
        bids.len()
    );
}

/// A TCP proxy in front of DynamoDB Local that forwards the first request containing
/// `marker`, lets DynamoDB commit it, and then drops the connection without answering: the
/// response is lost after the commit, and the SDK retries on its own.
async fn lossy_proxy(upstream: String, marker: &'static str) -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let upstream = upstream
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let dropped = Arc::new(AtomicUsize::new(0));
    let seen = dropped.clone();
    tokio::spawn(async move {
        loop {
            let Ok((client, _)) = listener.accept().await else {
                return;
            };
            let upstream = upstream.clone();
            let dropped = seen.clone();
            tokio::spawn(async move {
                let _ = relay(client, &upstream, &dropped, marker).await;
            });
        }
    });
    (format!("http://{addr}"), dropped)
}

async fn read_message(stream: &mut tokio::net::TcpStream) -> std::io::Result<Option<Vec<u8>>> {
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                return Ok(Some(buf));
            }
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

async fn relay(
    mut client: tokio::net::TcpStream,
    upstream: &str,
    dropped: &AtomicUsize,
    marker: &str,
) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    let mut server = tokio::net::TcpStream::connect(upstream).await?;
    while let Some(request) = read_message(&mut client).await? {
        server.write_all(&request).await?;
        let Some(response) = read_message(&mut server).await? else {
            return Ok(());
        };
        let marked = String::from_utf8_lossy(&request).contains(marker);
        if marked && dropped.fetch_add(1, Ordering::SeqCst) == 0 {
            return Ok(()); // committed upstream; the caller never hears of it
        }
        client.write_all(&response).await?;
    }
    Ok(())
}

#[tokio::test]
async fn sdk_retry_after_a_lost_commit_response_is_committed_once() {
    let direct = common::client();
    let table = common::state_table(&direct).await;
    let (endpoint, dropped) = lossy_proxy(common::endpoint(), "TransactWriteItems").await;
    let store = DynamoStateStore::new(
        wsdr_aws::local::dynamo_client(&endpoint, "us-east-1"),
        table.clone(),
    );
    let first = bid("bid-00000001", "alice", 150, 10);
    let s1 = RegionSummary::empty("us-east-1").with_bid(&first);
    // write ids are the ClientRequestToken: at most 36 printable characters.
    let outcome = store
        .commit_bid(&commit(&first, &token("lost-resp"), 0, s1.clone()))
        .await
        .unwrap();
    assert!(
        dropped.load(Ordering::SeqCst) >= 2,
        "the first response was dropped and the SDK retried"
    );
    assert_eq!(outcome, CommitOutcome::Committed);
    let check = DynamoStateStore::new(direct, table);
    assert_eq!(check.summaries(&a1()).await.unwrap(), vec![s1]);
    assert_eq!(
        bids_held(check.all_ops(&wsdr_auction::topic(&a1())).await.unwrap()),
        vec![first]
    );
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
    // A seed's conditional put on a missing table is that error too, not "seeded already";
    // so is a strong store's settle, not "settled before".
    let seeded = store.put_auction_if_absent(&auction("a1")).await;
    assert!(
        matches!(seeded, Err(wsdr_core::Error::Internal(ref m)) if m.contains("ResourceNotFoundException")),
        "{seeded:?}"
    );
    let strong = store.strongly_consistent();
    let settled = strong
        .settle(&bid("bid-00000001", "alice", 150, 10), "w1")
        .await;
    assert!(settled.is_err(), "{settled:?}");
}

// Strong mode on DynamoDB Local. DynamoDB Local is one Region, so it cannot show MRSC's
// quorum; what it shows is the adapter's half of the contract: the ledger head is one
// conditional put, a lost answer is recognised by the write id, copies are put once, and a
// failure to reach the table is `NoQuorum` (go elsewhere), never a rejection.

fn strong_service(store: Arc<DynamoLedgerStore>, region: &str) -> wsdr_auction::AuctionService {
    wsdr_auction::AuctionService::strong(
        store,
        Arc::new(wsdr_core::memory::MemoryConnections::default()),
        Arc::new(wsdr_core::memory::RecordingNotifier::default()),
        Arc::new(wsdr_core::SystemClock),
        region,
    )
}

async fn bid_status(
    service: &wsdr_auction::AuctionService,
    who: &str,
    amount: u64,
    bid_id: &str,
) -> wsdr_protocol::BidStatus {
    let frame =
        format!(r#"{{"action":"bid","auctionId":"a1","amount":{amount},"bidId":"{bid_id}"}}"#);
    let reply = service
        .handle_frame(
            &wsdr_core::ConnectionId::new(format!("c-{who}")).unwrap(),
            &UserId::new(who).unwrap(),
            frame.as_bytes(),
        )
        .await;
    match reply.message {
        wsdr_protocol::ServerMessage::BidResult { status, .. } => status,
        other => panic!("expected a bidResult, got {other:?}"),
    }
}

#[tokio::test]
async fn strong_bids_from_two_regions_are_ordered_on_one_ledger_head() {
    use wsdr_protocol::BidStatus;
    let client = common::client();
    let table = common::state_table(&client).await;
    let store = Arc::new(DynamoStateStore::new(client, table).strongly_consistent());
    let east = strong_service(store.clone(), "us-east-1");
    let west = strong_service(store.clone(), "us-east-2");
    east.ensure_auction(&auction("a1")).await.unwrap();
    assert_eq!(
        bid_status(&east, "alice", 500, "bid-00000001").await,
        BidStatus::Accepted
    );
    assert_eq!(
        bid_status(&west, "bob", 200, "bid-00000002").await,
        BidStatus::Rejected
    );
    assert_eq!(
        bid_status(&west, "alice", 500, "bid-00000001").await,
        BidStatus::Duplicate
    );
    assert_eq!(
        bid_status(&west, "bob", 505, "bid-00000003").await,
        BidStatus::Accepted
    );
    let head = store.head(&a1()).await.unwrap().unwrap();
    assert_eq!(head.summary.accepted, 2);
    assert_eq!(head.summary.region, wsdr_core::LEDGER);
    let last = head.last.unwrap();
    assert_eq!(
        (last.bid.amount.get(), last.bid.region.as_str()),
        (505, "us-east-2")
    );
    // The summaries query reads the head as the one summary.
    let summaries = store.summaries(&a1()).await.unwrap();
    assert_eq!(summaries, vec![head.summary]);
    let copies = bids_held(store.all_ops(&wsdr_auction::topic(&a1())).await.unwrap());
    assert_eq!(copies.len(), 2, "one copy per accepted bid: {copies:?}");
    // The strong table's own reads of a bidder's copies, through its index.
    let alices = store
        .newest_user_bids(&a1(), &UserId::new("alice").unwrap(), 10)
        .await
        .unwrap();
    assert_eq!(
        alices.iter().map(|b| b.amount.get()).collect::<Vec<_>>(),
        vec![500]
    );
    // The table's items read back as the domain's (the lab's dump uses this).
    let dumped = store.dump().await.unwrap();
    assert!(dumped
        .iter()
        .any(|item| matches!(item, wsdr_core::items::Item::Head { .. })));
}

#[tokio::test]
async fn strong_sdk_retry_after_a_lost_advance_answer_is_advanced_once() {
    let direct = common::client();
    let table = common::state_table(&direct).await;
    let (endpoint, dropped) = lossy_proxy(common::endpoint(), "\"LEDGER\"").await;
    let store = DynamoStateStore::new(
        wsdr_aws::local::dynamo_client(&endpoint, "us-east-1"),
        table.clone(),
    )
    .strongly_consistent();
    let first = bid("bid-00000001", "alice", 150, 10);
    let next = wsdr_auction::LedgerHead::empty().with_bid(&first, &token("adv"));
    let outcome = store.advance(&a1(), 0, &next).await.unwrap();
    assert!(
        dropped.load(Ordering::SeqCst) >= 2,
        "the first answer was dropped and the SDK retried"
    );
    assert_eq!(outcome, wsdr_core::Advance::Advanced);
    // Another writer's head at the same version is a move, not ours.
    let other = wsdr_auction::LedgerHead::empty().with_bid(&first, &token("other"));
    assert_eq!(
        store.advance(&a1(), 0, &other).await.unwrap(),
        wsdr_core::Advance::Moved
    );
    let check = DynamoStateStore::new(direct, table).strongly_consistent();
    assert_eq!(check.head(&a1()).await.unwrap(), Some(next));
}

#[tokio::test]
async fn strong_settle_writes_a_copy_once() {
    let client = common::client();
    let table = common::state_table(&client).await;
    let store = DynamoStateStore::new(client, table).strongly_consistent();
    let first = bid("bid-00000001", "alice", 150, 10);
    store.settle(&first, "w1").await.unwrap();
    // Counted as the bench reads a strong store's writes: one request, one item.
    assert_eq!(store.io().get(), (1, 0, 1));
    let mut later = first.clone();
    later.at = 99;
    store.settle(&later, "w2").await.unwrap();
    assert_eq!(
        bids_held(store.all_ops(&wsdr_auction::topic(&a1())).await.unwrap()),
        vec![first]
    );
}

#[tokio::test]
async fn strong_store_that_cannot_reach_its_table_answers_no_quorum() {
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let store = Arc::new(
        DynamoStateStore::new(
            wsdr_aws::local::dynamo_client(&endpoint, "us-east-1"),
            "wsdr-state",
        )
        .strongly_consistent(),
    );
    let error = store.head(&a1()).await.unwrap_err();
    assert!(matches!(error, wsdr_core::Error::NoQuorum(_)), "{error:?}");
    let service = strong_service(store, "us-east-1");
    assert_eq!(
        bid_status(&service, "alice", 500, "bid-00000001").await,
        wsdr_protocol::BidStatus::Redirect
    );
    // An eventual store never calls a failure "no quorum".
    let eventual = DynamoStateStore::new(
        wsdr_aws::local::dynamo_client(&endpoint, "us-east-1"),
        "wsdr-state",
    );
    let error = eventual.auction(&a1()).await.unwrap_err();
    assert!(matches!(error, wsdr_core::Error::Transient(_)), "{error:?}");
}

#[tokio::test]
async fn strong_head_write_whose_answer_is_lost_is_unknown_not_no_quorum() {
    use aws_sdk_dynamodb::config::retry::RetryConfig;
    let direct = common::client();
    let table = common::state_table(&direct).await;
    // Only the head's put carries `lastWriteId`: the reads before it pass.
    let (endpoint, dropped) = lossy_proxy(common::endpoint(), "lastWriteId").await;
    let no_retries = aws_sdk_dynamodb::Client::from_conf(
        wsdr_aws::local::dynamo_client(&endpoint, "us-east-1")
            .config()
            .to_builder()
            .retry_config(RetryConfig::disabled())
            .build(),
    );
    let store = Arc::new(DynamoStateStore::new(no_retries, table.clone()).strongly_consistent());
    let service = strong_service(store, "us-east-1");
    service.ensure_auction(&auction("a1")).await.unwrap();
    // The head write committed and its answer was lost: the bid may stand, so the answer
    // is `unknown` (settle, resend), not `redirect` ("decided nothing").
    assert_eq!(
        bid_status(&service, "alice", 500, "bid-00000001").await,
        wsdr_protocol::BidStatus::Unknown
    );
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    let check = DynamoStateStore::new(direct, table).strongly_consistent();
    let head = check.head(&a1()).await.unwrap().unwrap();
    assert_eq!(head.summary.accepted, 1, "it did commit");
}

#[tokio::test]
async fn newest_user_bids_are_newest_by_time_whatever_the_bid_ids() {
    let client = common::client();
    let table = common::state_table(&client).await;
    let store = DynamoStateStore::new(client, table);
    let mut summary = RegionSummary::empty("us-east-1");
    for i in 0..240u64 {
        // bidIds in no relation to time.
        let id = format!("bid-{:016x}", i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let copy = bid(&id, "alice", 100 + i, 1_000 + i);
        let next = summary.with_bid(&copy);
        let outcome = store
            .commit_bid(&commit(&copy, &token(&format!("w{i}")), i, next.clone()))
            .await
            .unwrap();
        assert_eq!(outcome, CommitOutcome::Committed);
        summary = next;
    }
    let newest = store
        .newest_user_bids(&a1(), &UserId::new("alice").unwrap(), 200)
        .await
        .unwrap();
    assert_eq!(newest.len(), 200);
    assert_eq!(newest[0].amount.get(), 339, "the newest first");
    assert!(newest.windows(2).all(|p| p[0].at > p[1].at));
    assert_eq!(newest[199].amount.get(), 140);
    // One page of the index, of the size asked: never the other 40 copies.
    let (requests, read, _) = store.io().get();
    let _ = store
        .newest_user_bids(&a1(), &UserId::new("alice").unwrap(), 200)
        .await
        .unwrap();
    let (requests_after, read_after, _) = store.io().get();
    assert_eq!((requests_after - requests, read_after - read), (1, 200));
}

/// Any app's op, not only a bid: the kit's items carry the app's JSON whole, key it by the
/// kit's fields, and read it back exactly (here a chat room's post, in its own namespace).
#[tokio::test]
async fn any_apps_op_is_stored_under_the_kits_keys_and_read_back_whole() {
    use serde_json::json;
    use wsdr_core::{OpCommit, OpStore, StoredOp, StoredSummary, TopicKey};
    use wsdr_protocol::{Digest, Namespace, OpId, TopicName};
    let client = common::client();
    let store = DynamoStateStore::new(client.clone(), common::state_table(&client).await);
    let room = TopicKey::new(
        Namespace::new("chat").unwrap(),
        TopicName::new("room-1").unwrap(),
    );
    let seed = json!({ "title": "Lamps", "ttlS": 300 });
    assert!(store.put_meta_if_absent(&room, &seed).await.unwrap());
    assert_eq!(store.meta(&room).await.unwrap(), Some(seed));
    let post = json!({ "kind": "post", "text": "héllo \"#world\"", "tags": ["a", "b"] });
    let copy = StoredOp {
        topic: room.clone(),
        author: UserId::new("carol#1").unwrap(),
        op_id: OpId::new("post-0001").unwrap(),
        region: "us-east-1".into(),
        at: 1_700_000_000_000,
        position: 1,
        digest: Digest::of(&post).unwrap(),
        op: post,
    };
    let summary = StoredSummary {
        region: "us-east-1".into(),
        accepted: 1,
        app: json!({ "last": "post-0001" }),
    };
    let commit = OpCommit {
        copy: copy.clone(),
        write_id: token("chat"),
        expected_accepted: 0,
        summary: summary.clone(),
    };
    assert_eq!(
        store.commit(&commit).await.unwrap(),
        CommitOutcome::Committed
    );
    assert_eq!(
        store
            .copies(&room, &copy.author, &copy.op_id)
            .await
            .unwrap(),
        vec![copy.clone()]
    );
    assert_eq!(
        OpStore::summaries(&store, &room).await.unwrap(),
        vec![summary]
    );
    assert_eq!(
        store
            .newest_by_author(&room, &copy.author, 10)
            .await
            .unwrap(),
        vec![copy.clone()]
    );
    // Another writer's attempt at the same key finds the copy, whole.
    let again = OpCommit {
        write_id: token("chat-again"),
        expected_accepted: 1,
        ..commit
    };
    assert_eq!(
        store.commit(&again).await.unwrap(),
        CommitOutcome::Exists(copy.clone())
    );
    // The auction's items live beside it and its reads never see the room's.
    assert!(bids_held(store.all_ops(&wsdr_auction::topic(&a1())).await.unwrap()).is_empty());
    let dumped = store.dump().await.unwrap();
    assert!(dumped.iter().any(|item| matches!(
        item,
        wsdr_core::items::Item::Op { op, .. } if *op == copy
    )));
}

/// A value with no canonical JSON (a fraction, an integer past 2^53) is refused before
/// anything is written: two Regions could not agree on its text.
#[tokio::test]
async fn an_op_without_a_canonical_form_is_refused_and_writes_nothing() {
    use serde_json::json;
    use wsdr_core::{OpCommit, OpStore, StoredOp, StoredSummary, TopicKey};
    use wsdr_protocol::{Digest, Namespace, OpId, TopicName};
    let client = common::client();
    let store = DynamoStateStore::new(client.clone(), common::state_table(&client).await);
    let room = TopicKey::new(
        Namespace::new("chat").unwrap(),
        TopicName::new("room-2").unwrap(),
    );
    let author = UserId::new("dave").unwrap();
    let op_id = OpId::new("post-0002").unwrap();
    for op in [
        json!({ "x": 0.5 }),
        json!({ "x": 9_007_199_254_740_993u64 }),
    ] {
        let commit = OpCommit {
            copy: StoredOp {
                topic: room.clone(),
                author: author.clone(),
                op_id: op_id.clone(),
                region: "us-east-1".into(),
                at: 1,
                position: 1,
                digest: Digest::of(&json!({})).unwrap(),
                op,
            },
            write_id: token("float"),
            expected_accepted: 0,
            summary: StoredSummary {
                region: "us-east-1".into(),
                accepted: 1,
                app: json!({}),
            },
        };
        assert!(matches!(
            store.commit(&commit).await,
            Err(wsdr_core::Error::Internal(_))
        ));
    }
    assert!(store
        .copies(&room, &author, &op_id)
        .await
        .unwrap()
        .is_empty());
    assert!(OpStore::summaries(&store, &room).await.unwrap().is_empty());
}

/// Another Region's write as Global Tables applies it: the whole item, with no condition, over
/// whatever this replica held; the dump reads it back as the kit's item.
#[tokio::test]
async fn a_replicated_write_is_put_whole_and_unconditionally() {
    use wsdr_core::items::Item;
    let client = common::client();
    let store = DynamoStateStore::new(client.clone(), common::state_table(&client).await);
    let summary = |accepted: u64| RegionSummary {
        region: "us-west-2".into(),
        accepted,
        high: Some(BidRecord {
            region: "us-west-2".into(),
            position: accepted,
            ..bid("bid-00000009", "bob", 100 + accepted, 5)
        }),
    };
    let item = |accepted: u64| Item::Summary {
        topic: wsdr_auction::store::topic(&a1()),
        summary: wsdr_auction::store::summary_of(&summary(accepted)),
    };
    store.put_as_replicated(&item(3)).await.unwrap();
    // An older version replicated late still lands: the replicator decides by its stamps,
    // the table applies what it is given.
    store.put_as_replicated(&item(2)).await.unwrap();
    assert_eq!(store.dump().await.unwrap(), vec![item(2)]);
    assert_eq!(store.summaries(&a1()).await.unwrap(), vec![summary(2)]);
}

/// An item the kit never writes (a topic's partition with another sort key) is refused by the
/// dump as malformed, never read as a topic's seed.
#[tokio::test]
async fn an_item_of_no_known_shape_is_refused_not_misread() {
    use aws_sdk_dynamodb::types::AttributeValue;
    let client = common::client();
    let table = common::state_table(&client).await;
    let store = DynamoStateStore::new(client.clone(), table.clone());
    store.put_auction_if_absent(&auction("a1")).await.unwrap();
    assert_eq!(store.dump().await.unwrap().len(), 1);
    client
        .put_item()
        .table_name(&table)
        .item("pk", AttributeValue::S("TOPIC#auction#a1".into()))
        .item("sk", AttributeValue::S("OTHER".into()))
        .item("meta", AttributeValue::S("{}".into()))
        .send()
        .await
        .unwrap();
    assert!(matches!(
        store.dump().await,
        Err(wsdr_core::Error::Internal(_))
    ));
}

/// A commit whose copy is already there under its own write id (its earlier try committed
/// and the answer was lost, past DynamoDB's token window) is that commit: `Committed`, never
/// answered as another request's copy.
#[tokio::test]
async fn a_copy_holding_the_commits_own_write_id_is_that_commit() {
    let client = common::client();
    let store = DynamoStateStore::new(client.clone(), common::state_table(&client).await)
        .strongly_consistent();
    let first = bid("bid-00000001", "alice", 500, 1_000);
    let write_id = token("own");
    // The copy alone, as the earlier try left it (the same item a commit writes).
    LedgerStore::settle(&store, &first, &write_id)
        .await
        .unwrap();
    let outcome = store
        .commit_bid(&commit(
            &first,
            &write_id,
            0,
            RegionSummary::empty("us-east-1").with_bid(&first),
        ))
        .await
        .unwrap();
    assert_eq!(outcome, CommitOutcome::Committed);
    // Another request's commit of the same bid finds it as an existing copy.
    let other = store
        .commit_bid(&commit(
            &first,
            &token("other"),
            0,
            RegionSummary::empty("us-east-1").with_bid(&first),
        ))
        .await
        .unwrap();
    assert_eq!(other, CommitOutcome::Exists(first));
}

/// A topic's log is read by position from the `by-position` index: one Region's copies (or,
/// on a strong table, the head's), in position order, from a position on, never another
/// topic's or another log's.
#[tokio::test]
async fn a_log_is_read_in_position_order_from_a_position_on() {
    use serde_json::json;
    use wsdr_core::{OpCommit, OpStore, StoredOp, StoredSummary, TopicKey, LEDGER};
    use wsdr_protocol::{Digest, Namespace, OpId, TopicName};
    let client = common::client();
    let table = common::state_table(&client).await;
    let store = DynamoStateStore::new(client.clone(), &table);
    let room = |name: &str| {
        TopicKey::new(
            Namespace::new("chat").unwrap(),
            TopicName::new(name).unwrap(),
        )
    };
    let post = |topic: &TopicKey, region: &str, position: u64| {
        let op = json!({ "kind": "post", "text": format!("{region} {position}") });
        StoredOp {
            topic: topic.clone(),
            author: UserId::new(["ann", "bo"][position as usize % 2]).unwrap(),
            op_id: OpId::new(format!("post-{region}-{position:04}")).unwrap(),
            region: region.into(),
            at: 1_700_000_000_000 + position,
            position,
            digest: Digest::of(&op).unwrap(),
            op,
        }
    };
    let commit = |copy: StoredOp| OpCommit {
        write_id: token(&format!("{}-{}", copy.region, copy.position)),
        expected_accepted: copy.position - 1,
        summary: StoredSummary {
            region: copy.region.clone(),
            accepted: copy.position,
            app: json!({}),
        },
        copy,
    };
    let (lamps, other) = (room("lamps"), room("lamps-2"));
    // Written out of order, as replication may deliver them.
    for position in [3, 1, 5, 2, 4] {
        store
            .put_as_replicated(&wsdr_core::items::Item::Op {
                op: post(&lamps, "us-east-1", position),
                write_id: token("replicated"),
            })
            .await
            .unwrap();
    }
    for position in [1, 2] {
        store
            .commit(&commit(post(&lamps, "us-west-2", position)))
            .await
            .unwrap();
    }
    store
        .commit(&commit(post(&other, "us-east-1", 1)))
        .await
        .unwrap();
    let positions = |ops: Vec<StoredOp>| -> Vec<(String, u64)> {
        ops.into_iter().map(|o| (o.region, o.position)).collect()
    };
    let east = |p: u64| ("us-east-1".to_owned(), p);
    assert_eq!(
        positions(store.log_after(&lamps, "us-east-1", 0, 100).await.unwrap()),
        [east(1), east(2), east(3), east(4), east(5)]
    );
    let (requests_before, read_before, _) = store.io().get();
    assert_eq!(
        positions(store.log_after(&lamps, "us-east-1", 2, 2).await.unwrap()),
        [east(3), east(4)],
        "from a position on, at most the limit"
    );
    let (requests, read, _) = store.io().get();
    assert_eq!(
        (requests - requests_before, read - read_before),
        (1, 2),
        "one page of the size asked: no page past the limit is read"
    );
    assert_eq!(
        store.log_after(&lamps, "us-west-2", 0, 10).await.unwrap(),
        vec![post(&lamps, "us-west-2", 1), post(&lamps, "us-west-2", 2)],
        "read back whole"
    );
    assert!(store
        .log_after(&lamps, "us-east-1", 5, 10)
        .await
        .unwrap()
        .is_empty());
    assert!(store
        .log_after(&lamps, "eu-west-1", 0, 10)
        .await
        .unwrap()
        .is_empty());
    // Strong mode: the head's copies are one log, whichever Region accepted each.
    let ledger = DynamoStateStore::new(client.clone(), &table).strongly_consistent();
    let strong = room("strong");
    for (region, position) in [("us-west-2", 2), ("us-east-1", 1)] {
        wsdr_core::HeadStore::settle(&ledger, &post(&strong, region, position), "w")
            .await
            .unwrap();
    }
    assert_eq!(
        positions(ledger.log_after(&strong, LEDGER, 0, 10).await.unwrap()),
        [east(1), ("us-west-2".to_owned(), 2)]
    );
    assert!(ledger
        .log_after(&strong, "us-east-1", 0, 10)
        .await
        .unwrap()
        .is_empty());
}

/// The copies read as bids: a copy under an auction's topic that is no bid fails the test.
fn bids_held(copies: Vec<wsdr_core::StoredOp>) -> Vec<wsdr_auction::BidRecord> {
    copies
        .iter()
        .map(|copy| wsdr_auction::store::bid_of(copy).expect("every copy is a bid"))
        .collect()
}

/// A topic's summaries are read to a bound (64: far more Regions than any deployment has), so
/// a partition that somehow grew past it is never read whole.
#[tokio::test]
async fn a_topics_summaries_are_read_to_their_bound() {
    use wsdr_core::items::Item;
    let client = common::client();
    let store = DynamoStateStore::new(client.clone(), common::state_table(&client).await);
    for n in 0..70 {
        let region = format!("region-{n:02}");
        let summary = RegionSummary {
            region: region.clone(),
            accepted: 1,
            high: Some(BidRecord {
                region,
                position: 1,
                ..bid("bid-00000001", "bob", 100, 5)
            }),
        };
        store
            .put_as_replicated(&Item::Summary {
                topic: wsdr_auction::store::topic(&a1()),
                summary: wsdr_auction::store::summary_of(&summary),
            })
            .await
            .unwrap();
    }
    assert_eq!(store.summaries(&a1()).await.unwrap().len(), 64);
}

/// A transaction another request raced (DynamoDB's `TransactionConflict`, on the copy or on
/// the summary), or whose summary moved on, is a conflict the writer retries; DynamoDB Local
/// does not race transactions, so a peer speaking DynamoDB's JSON protocol cancels them.
#[tokio::test]
async fn a_transaction_cancelled_by_a_race_or_a_moved_summary_is_a_conflict() {
    use axum::routing::post;
    for reasons in [
        r#"[{"Code":"TransactionConflict"},{"Code":"None"}]"#,
        r#"[{"Code":"None"},{"Code":"TransactionConflict"}]"#,
        r#"[{"Code":"None"},{"Code":"ConditionalCheckFailed"}]"#,
    ] {
        let body = format!(
            r#"{{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","Message":"Transaction cancelled","CancellationReasons":{reasons}}}"#
        );
        let app = axum::Router::new().route(
            "/",
            post(move || {
                let body = body.clone();
                async move { (axum::http::StatusCode::BAD_REQUEST, body) }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let client = wsdr_aws::local::dynamo_client(&format!("http://{address}"), "us-east-1");
        let store = DynamoStateStore::new(client, "state");
        let first = bid("bid-00000001", "alice", 150, 10);
        let summary = RegionSummary::empty("us-east-1").with_bid(&first);
        assert_eq!(
            store
                .commit_bid(&commit(&first, &token("w"), 0, summary))
                .await
                .unwrap(),
            CommitOutcome::Conflict,
            "{reasons}"
        );
    }
}
