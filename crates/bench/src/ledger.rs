//! Bid cost against an auction's history: the ledger keeps per-bid reads and writes constant
//! (docs/DATA_MODEL.md), so latency must not grow with the number of prior bids.

use crate::common::percentile;
use std::sync::Arc;
use std::time::Instant;
use wsdr_aws::DynamoStateStore;
use wsdr_core::memory::{MemoryConnections, RecordingNotifier};
use wsdr_core::{
    Auction, AuctionService, BidCommit, BidRecord, CommitOutcome, ConnectionId, RegionSummary,
    StateStore, SystemClock, UserId,
};
use wsdr_protocol::{Amount, AuctionId, BidId, BidStatus, ServerMessage};

#[derive(Debug, Clone, serde::Serialize)]
pub struct LedgerCost {
    pub prior_bids: usize,
    pub bids: usize,
    pub p50_us: f64,
    pub p99_us: f64,
    pub requests_per_bid: f64,
    pub items_read_per_bid: f64,
    pub items_written_per_bid: f64,
}

/// One auction with `prior` bids already recorded, then `bids` rising bids through the
/// service, timed one by one, on DynamoDB Local.
pub async fn run(endpoint: &str, prior: usize, bids: usize) -> anyhow::Result<LedgerCost> {
    let client = wsdr_aws::local::dynamo_client(endpoint, "us-east-1");
    let table = format!("bench-ledger-{:08x}", rand::random::<u32>());
    wsdr_aws::schema::create_state_table(&client, &table).await?;
    let store = Arc::new(DynamoStateStore::new(client, table));
    let auction = AuctionId::new("lot-1")?;
    store
        .put_auction_if_absent(&Auction {
            id: auction.clone(),
            item: "bench".into(),
            starting_price: Amount::new(1)?,
            min_increment: 1,
            closes_at: None,
        })
        .await?;
    // History, written straight through the store (as the service would, without its reads).
    let mut summary = RegionSummary::empty("us-east-1");
    for i in 0..prior {
        let bid = BidRecord {
            auction_id: auction.clone(),
            bid_id: BidId::new(format!("prior-{i:08}"))?,
            bidder: UserId::new(format!("user-{}", i % 500))?,
            amount: Amount::new(1 + i as u64)?,
            at: i as u64,
            region: "us-east-1".into(),
        };
        let next = summary.with_bid(&bid);
        let outcome = store
            .commit_bid(&BidCommit {
                bid,
                write_id: format!("prior-{i:08}-{:08x}", rand::random::<u32>()),
                expected_accepted: summary.accepted,
                summary: next.clone(),
            })
            .await?;
        anyhow::ensure!(
            outcome == CommitOutcome::Committed,
            "history bid {i}: {outcome:?}"
        );
        summary = next;
    }
    let service = AuctionService::new(
        store.clone(),
        Arc::new(MemoryConnections::default()),
        Arc::new(RecordingNotifier::default()),
        Arc::new(SystemClock),
        "us-east-1",
    );
    let connection = ConnectionId::new("bench-conn")?;
    let user = UserId::new("bench-user")?;
    let before = store.io().get();
    let mut samples = Vec::with_capacity(bids);
    for i in 0..bids {
        let amount = Amount::new(10 + prior as u64 + i as u64)?;
        let bid_id = BidId::new(format!("bench-{i:08}"))?;
        let start = Instant::now();
        let reply = service
            .bid(&connection, &user, &auction, amount, &bid_id)
            .await?;
        samples.push(start.elapsed().as_secs_f64() * 1e6);
        match reply.message {
            ServerMessage::BidResult {
                status: BidStatus::Accepted,
                ..
            } => {}
            other => anyhow::bail!("bench bid {i} not accepted: {other:?}"),
        }
    }
    let after = store.io().get();
    samples.sort_by(f64::total_cmp);
    let per = |a: u64, b: u64| (b - a) as f64 / bids as f64;
    Ok(LedgerCost {
        prior_bids: prior,
        bids,
        p50_us: percentile(&samples, 0.5),
        p99_us: percentile(&samples, 0.99),
        requests_per_bid: per(before.0, after.0),
        items_read_per_bid: per(before.1, after.1),
        items_written_per_bid: per(before.2, after.2),
    })
}
