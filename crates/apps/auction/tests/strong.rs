#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! Strong mode: bids decided by one conditional write of the auction's ledger head, on a
//! store that is linearizable across Regions (one in-memory store shared by two services
//! plays the multi-Region strongly consistent table; the lab adds quorum, latency and
//! conflicts). Faults are injected around it: lost answers, missing copies, no quorum,
//! replicated write conflicts.

use async_trait::async_trait;
use serde_json::Value as Json;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use wsdr_auction::BidsHeld;
use wsdr_auction::{Auction, AuctionService};
use wsdr_core::memory::{ManualClock, MemoryConnections, MemoryStateStore, RecordingNotifier};
use wsdr_core::{
    Advance, CommitOutcome, ConnectionId, Error, HeadStore, OpCommit, OpStore, StoredHead,
    StoredOp, StoredSummary, TopicKey, UserId,
};
use wsdr_protocol::{Amount, AuctionId, BidStatus, ErrorCode, OpId, ServerMessage};

const T0: u64 = 1_700_000_000_000;

/// What the wrapper does to the next calls.
#[derive(Default)]
struct Faults {
    /// `advance` commits, then answers an error (the answer is lost), this many times.
    lose_advance_answer: AtomicU32,
    /// `advance` answers `ReplicatedWriteConflictException` without writing, this many times.
    conflicts: AtomicU32,
    /// The first `settle` of each of these bidIds fails (a copy left for the next bid to
    /// write).
    no_copy_for: std::sync::Mutex<Vec<String>>,
    /// `settle` answers `ReplicatedWriteConflictException` without writing, this many times
    /// (another Region writing the same copy: both read the same head).
    settle_conflicts: AtomicU32,
    /// Every call fails with no quorum while set.
    isolated: std::sync::atomic::AtomicBool,
}

fn take(counter: &AtomicU32) -> bool {
    counter
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

/// One Region's view of the shared strongly consistent table, with injectable faults.
struct RegionView {
    table: Arc<MemoryStateStore>,
    faults: Faults,
}

impl RegionView {
    /// Every call yields first, so that concurrent bids interleave at every request as
    /// they would across Regions.
    async fn gate(&self) -> wsdr_core::Result<()> {
        tokio::task::yield_now().await;
        if self.faults.isolated.load(Ordering::SeqCst) {
            return Err(Error::NoQuorum("isolated (test)".into()));
        }
        Ok(())
    }
}

#[async_trait]
impl OpStore for RegionView {
    async fn put_meta_if_absent(&self, topic: &TopicKey, meta: &Json) -> wsdr_core::Result<bool> {
        self.gate().await?;
        self.table.put_meta_if_absent(topic, meta).await
    }
    async fn meta(&self, topic: &TopicKey) -> wsdr_core::Result<Option<Json>> {
        self.gate().await?;
        self.table.meta(topic).await
    }
    async fn copies(
        &self,
        topic: &TopicKey,
        author: &UserId,
        op_id: &OpId,
    ) -> wsdr_core::Result<Vec<StoredOp>> {
        self.gate().await?;
        self.table.copies(topic, author, op_id).await
    }
    async fn summaries(&self, topic: &TopicKey) -> wsdr_core::Result<Vec<StoredSummary>> {
        self.gate().await?;
        OpStore::summaries(self.table.as_ref(), topic).await
    }
    async fn commit(&self, commit: &OpCommit) -> wsdr_core::Result<CommitOutcome> {
        self.gate().await?;
        self.table.commit(commit).await
    }
    async fn newest_by_author(
        &self,
        topic: &TopicKey,
        author: &UserId,
        limit: usize,
    ) -> wsdr_core::Result<Vec<StoredOp>> {
        self.gate().await?;
        self.table.newest_by_author(topic, author, limit).await
    }
    async fn log_after(
        &self,
        topic: &TopicKey,
        log: &str,
        after: u64,
        limit: usize,
    ) -> wsdr_core::Result<Vec<StoredOp>> {
        self.gate().await?;
        self.table.log_after(topic, log, after, limit).await
    }
}

#[async_trait]
impl HeadStore for RegionView {
    async fn head(&self, topic: &TopicKey) -> wsdr_core::Result<Option<StoredHead>> {
        self.gate().await?;
        HeadStore::head(self.table.as_ref(), topic).await
    }
    async fn advance(
        &self,
        topic: &TopicKey,
        expected_accepted: u64,
        next: &StoredHead,
    ) -> wsdr_core::Result<Advance> {
        self.gate().await?;
        if take(&self.faults.conflicts) {
            return Err(Error::WriteConflict(
                "being modified in another Region".into(),
            ));
        }
        let outcome =
            HeadStore::advance(self.table.as_ref(), topic, expected_accepted, next).await?;
        if take(&self.faults.lose_advance_answer) {
            return Err(Error::Transient("the answer was lost (test)".into()));
        }
        Ok(outcome)
    }
    async fn settle(&self, copy: &StoredOp, write_id: &str) -> wsdr_core::Result<()> {
        self.gate().await?;
        if take(&self.faults.settle_conflicts) {
            return Err(Error::WriteConflict(
                "the copy is being written in another Region".into(),
            ));
        }
        {
            let mut no_copy = self.faults.no_copy_for.lock().unwrap();
            if let Some(i) = no_copy.iter().position(|b| b == copy.op_id.as_str()) {
                no_copy.remove(i);
                return Err(Error::Transient("copy write failed (test)".into()));
            }
        }
        HeadStore::settle(self.table.as_ref(), copy, write_id).await
    }
}

struct Region {
    view: Arc<RegionView>,
    service: AuctionService,
}

struct World {
    table: Arc<MemoryStateStore>,
    regions: Vec<Region>,
}

fn auction() -> Auction {
    Auction {
        id: AuctionId::new("a1").unwrap(),
        item: "Tiffany lamp".into(),
        starting_price: Amount::new(100).unwrap(),
        min_increment: 10,
        closes_at: None,
    }
}

async fn world() -> World {
    let clock = Arc::new(ManualClock::new(T0));
    let table = Arc::new(MemoryStateStore::new("mrsc", clock.clone()));
    let mut regions = Vec::new();
    for name in ["us-east-1", "us-east-2"] {
        let view = Arc::new(RegionView {
            table: table.clone(),
            faults: Faults::default(),
        });
        let service = AuctionService::strong(
            view.clone(),
            Arc::new(MemoryConnections::default()),
            Arc::new(RecordingNotifier::default()),
            clock.clone(),
            name,
        );
        regions.push(Region { view, service });
    }
    regions[0].service.ensure_auction(&auction()).await.unwrap();
    World { table, regions }
}

fn bid_frame(amount: u64, bid_id: &str) -> Vec<u8> {
    // bidIds are 8 to 64 characters.
    let bid_id = format!("bid-{bid_id:0>8}");
    format!(r#"{{"action":"bid","auctionId":"a1","amount":{amount},"bidId":"{bid_id}"}}"#)
        .into_bytes()
}

async fn bid(
    w: &World,
    region: usize,
    who: &str,
    amount: u64,
    bid_id: &str,
) -> (BidStatus, Option<String>) {
    let reply = w.regions[region]
        .service
        .handle_frame(
            &ConnectionId::new(format!("c-{who}-{region}")).unwrap(),
            &UserId::new(who).unwrap(),
            &bid_frame(amount, bid_id),
        )
        .await;
    match reply.message {
        ServerMessage::BidResult { status, reason, .. } => (status, reason),
        other => panic!("expected a bidResult, got {other:?}"),
    }
}

async fn state(w: &World, region: usize, who: &str) -> ServerMessage {
    w.regions[region]
        .service
        .handle_frame(
            &ConnectionId::new(format!("c-{who}-{region}")).unwrap(),
            &UserId::new(who).unwrap(),
            br#"{"action":"getState","auctionId":"a1"}"#,
        )
        .await
        .message
}

/// The accepting request's own write of this bid's copy will fail.
fn fail_copy(w: &World, region: usize, bid_id: &str) {
    w.regions[region]
        .view
        .faults
        .no_copy_for
        .lock()
        .unwrap()
        .push(format!("bid-{bid_id:0>8}"));
}

fn head_amount(message: &ServerMessage) -> Option<u64> {
    match message {
        ServerMessage::State { auction, .. } => auction.high_bid.as_ref().map(|h| h.amount.get()),
        other => panic!("expected a state, got {other:?}"),
    }
}

#[tokio::test]
async fn a_bid_below_the_other_regions_acknowledged_high_is_rejected() {
    let w = world().await;
    for region in &w.regions {
        assert_eq!(region.service.consistency(), wsdr_core::Consistency::Strong);
    }
    assert_eq!(bid(&w, 0, "alice", 500, "b1").await.0, BidStatus::Accepted);
    // MREC would accept this in the other Region until alice's bid replicated.
    assert_eq!(
        bid(&w, 1, "bob", 200, "b1").await,
        (BidStatus::Rejected, Some("too_low".into()))
    );
    assert_eq!(bid(&w, 1, "bob", 510, "b2").await.0, BidStatus::Accepted);
    for region in 0..2 {
        assert_eq!(head_amount(&state(&w, region, "carol").await), Some(510));
    }
}

#[tokio::test]
async fn a_replay_in_the_other_region_is_a_duplicate_even_before_its_copy_exists() {
    let w = world().await;
    // The accepting request's own copy write fails: the head alone records the bid.
    fail_copy(&w, 0, "b1");
    assert_eq!(bid(&w, 0, "alice", 500, "b1").await.0, BidStatus::Accepted);
    assert!(w.table.all_bids(&AuctionId::new("a1").unwrap()).is_empty());
    // The state lists it from the head.
    match state(&w, 1, "alice").await {
        ServerMessage::State { you, .. } => {
            assert_eq!(you.bids.len(), 1);
            assert_eq!(you.bids[0].bid_id.as_str(), "bid-000000b1");
        }
        other => panic!("{other:?}"),
    }
    // The replay in the other Region first writes the head's copy, then finds it.
    assert_eq!(bid(&w, 1, "alice", 500, "b1").await.0, BidStatus::Duplicate);
    assert_eq!(
        bid(&w, 1, "alice", 900, "b1").await,
        (BidStatus::Rejected, Some("bid_id_reused".into()))
    );
    assert_eq!(w.table.all_bids(&AuctionId::new("a1").unwrap()).len(), 1);
}

#[tokio::test]
async fn every_accepted_bid_but_the_newest_has_its_copy_even_when_copy_writes_fail() {
    let w = world().await;
    for (i, amount) in [100u64, 200, 300, 400].into_iter().enumerate() {
        fail_copy(&w, i % 2, &format!("b{i}"));
        let (status, _) = bid(&w, i % 2, &format!("u{i}"), amount, &format!("b{i}")).await;
        assert_eq!(status, BidStatus::Accepted);
        let copies = w.table.all_bids(&AuctionId::new("a1").unwrap());
        assert_eq!(copies.len(), i, "bids before the newest all have copies");
    }
}

#[tokio::test]
async fn a_lost_answer_is_unknown_and_the_resend_anywhere_is_a_duplicate() {
    let w = world().await;
    w.regions[0]
        .view
        .faults
        .lose_advance_answer
        .store(1, Ordering::SeqCst);
    assert_eq!(bid(&w, 0, "alice", 500, "b1").await.0, BidStatus::Unknown);
    // The client resends it (same bidId) wherever it reconnected.
    assert_eq!(bid(&w, 1, "alice", 500, "b1").await.0, BidStatus::Duplicate);
    let head = wsdr_auction::LedgerStore::head(w.table.as_ref(), &AuctionId::new("a1").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(head.summary.accepted, 1, "committed once");
}

#[tokio::test]
async fn a_region_without_quorum_redirects_and_never_rejects() {
    let w = world().await;
    assert_eq!(bid(&w, 1, "bob", 500, "b0").await.0, BidStatus::Accepted);
    w.regions[0]
        .view
        .faults
        .isolated
        .store(true, Ordering::SeqCst);
    // Even a bid that would be too low is not judged: nothing can be decided here.
    assert_eq!(
        bid(&w, 0, "alice", 100, "b1").await.0,
        BidStatus::Redirect,
        "a minority Region must not reject"
    );
    assert_eq!(
        bid(&w, 0, "alice", 700, "b2").await,
        (BidStatus::Redirect, Some("no_quorum".to_owned())),
        "docs/PROTOCOL.md: a redirect names why"
    );
    match state(&w, 0, "alice").await {
        ServerMessage::Error { code, .. } => assert_eq!(code, ErrorCode::NoQuorum),
        other => panic!("expected a no_quorum error, got {other:?}"),
    }
    // The same bid in the majority Region is decided there, once.
    assert_eq!(bid(&w, 1, "alice", 700, "b2").await.0, BidStatus::Accepted);
    w.regions[0]
        .view
        .faults
        .isolated
        .store(false, Ordering::SeqCst);
    assert_eq!(bid(&w, 0, "alice", 700, "b2").await.0, BidStatus::Duplicate);
}

#[tokio::test]
async fn a_replicated_write_conflict_is_decided_again_not_failed() {
    let w = world().await;
    w.regions[0]
        .view
        .faults
        .conflicts
        .store(3, Ordering::SeqCst);
    assert_eq!(bid(&w, 0, "alice", 500, "b1").await.0, BidStatus::Accepted);
}

#[tokio::test]
async fn a_conflict_on_the_previous_bids_copy_is_decided_again_not_rejected() {
    let w = world().await;
    assert_eq!(bid(&w, 0, "alice", 500, "b1").await.0, BidStatus::Accepted);
    // The next bid first writes alice's copy; another Region is writing the same copy.
    fail_copy(&w, 0, "b1");
    w.regions[1]
        .view
        .faults
        .settle_conflicts
        .store(3, Ordering::SeqCst);
    assert_eq!(
        bid(&w, 1, "bob", 600, "b2").await,
        (BidStatus::Accepted, None),
        "a retryable conflict is decided again, never answered as a rejection"
    );
}

#[tokio::test]
async fn racing_bids_whose_copy_writes_conflict_are_all_decided() {
    let w = Arc::new(world().await);
    for region in &w.regions {
        region
            .view
            .faults
            .settle_conflicts
            .store(20, Ordering::SeqCst);
    }
    let mut tasks = Vec::new();
    for i in 0..30u64 {
        let w = w.clone();
        tasks.push(tokio::spawn(async move {
            let who = format!("user{}", i % 5);
            bid(&w, (i % 2) as usize, &who, 100 + 10 * i, &format!("r{i}")).await
        }));
    }
    for task in tasks {
        let (status, reason) = task.await.unwrap();
        assert!(
            status == BidStatus::Accepted
                || (status == BidStatus::Rejected && reason.as_deref() == Some("too_low")),
            "every racing bid is decided: {status:?} {reason:?}"
        );
    }
}

#[tokio::test]
async fn racing_bids_in_both_regions_are_ordered_once_and_strictly_rise() {
    let w = Arc::new(world().await);
    let mut tasks = Vec::new();
    for i in 0..40u64 {
        let w = w.clone();
        tasks.push(tokio::spawn(async move {
            let region = (i % 2) as usize;
            let who = format!("u{}", i % 7);
            let amount = 100 + (i * 37 % 23) * 10;
            let (status, _) = bid(&w, region, &who, amount, &format!("b{i}")).await;
            (status, who, amount, format!("b{i}"))
        }));
    }
    let mut accepted = Vec::new();
    for task in tasks {
        let (status, who, amount, bid_id) = task.await.unwrap();
        assert!(matches!(status, BidStatus::Accepted | BidStatus::Rejected));
        if status == BidStatus::Accepted {
            accepted.push((who, amount, bid_id));
        }
    }
    // One more bid settles the newest's copy.
    let (status, _) = bid(&w, 0, "closer", 1_000_000, "last").await;
    assert_eq!(status, BidStatus::Accepted);
    let auction_id = AuctionId::new("a1").unwrap();
    let mut copies = w.table.all_bids(&auction_id);
    assert_eq!(
        copies.len(),
        accepted.len() + 1,
        "one copy per accepted bid"
    );
    let head = wsdr_auction::LedgerStore::head(w.table.as_ref(), &auction_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(head.summary.accepted as usize, accepted.len() + 1);
    // In acceptance order (the copies' clock is frozen, so order by amount), every
    // accepted bid beat the one before by the increment: no bid below an acknowledged one.
    copies.sort_by_key(|c| c.amount);
    for pair in copies.windows(2) {
        assert!(
            pair[1].amount.get() >= pair[0].amount.get() + 10,
            "{pair:?}"
        );
    }
    for (who, amount, bid_id) in accepted {
        assert!(copies.iter().any(|c| c.bidder.as_str() == who
            && c.amount.get() == amount
            && c.bid_id.as_str() == format!("bid-{bid_id:0>8}")));
    }
}

#[tokio::test]
async fn one_bid_id_raced_with_two_amounts_in_two_regions_stands_once() {
    let w = Arc::new(world().await);
    let (a, b) = tokio::join!(
        bid(&w, 0, "alice", 500, "b1"),
        bid(&w, 1, "alice", 900, "b1")
    );
    let statuses = [a.0, b.0];
    assert_eq!(
        statuses
            .iter()
            .filter(|s| **s == BidStatus::Accepted)
            .count(),
        1,
        "{a:?} {b:?}"
    );
    let loser = if a.0 == BidStatus::Accepted { &b } else { &a };
    assert_eq!(
        (loser.0, loser.1.as_deref()),
        (BidStatus::Rejected, Some("bid_id_reused"))
    );
    bid(&w, 0, "closer", 1_000_000, "last").await;
    let mine: Vec<_> = w
        .table
        .all_bids(&AuctionId::new("a1").unwrap())
        .into_iter()
        .filter(|c| c.bidder.as_str() == "alice")
        .collect();
    assert_eq!(mine.len(), 1, "one copy of alice's b1: {mine:?}");
}

#[tokio::test]
async fn a_bid_id_reused_by_another_user_is_their_own_bid() {
    let w = world().await;
    assert_eq!(bid(&w, 0, "alice", 500, "b1").await.0, BidStatus::Accepted);
    // Mallory saw alice's bidId in a push and sends it in the other Region.
    assert_eq!(
        bid(&w, 1, "mallory", 600, "b1").await.0,
        BidStatus::Accepted
    );
    bid(&w, 0, "closer", 1_000_000, "last").await;
    let copies = w.table.all_bids(&AuctionId::new("a1").unwrap());
    let alice = copies
        .iter()
        .find(|c| c.bidder.as_str() == "alice")
        .unwrap();
    assert_eq!(alice.amount.get(), 500, "alice's bid is untouched");
    assert!(copies.iter().any(|c| c.bidder.as_str() == "mallory"));
}
