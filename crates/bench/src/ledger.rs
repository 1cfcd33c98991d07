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

/// One auction with `prior` bids already recorded, behind the service.
struct Prepared {
    prior: usize,
    store: Arc<DynamoStateStore>,
    service: AuctionService,
    auction: AuctionId,
    samples: Vec<f64>,
    io: (u64, u64, u64),
    bids: usize,
    seq: usize,
}

async fn prepare(
    endpoint: &str,
    prior: usize,
    consistency: wsdr_core::Consistency,
) -> anyhow::Result<Prepared> {
    let client = wsdr_aws::local::dynamo_client(endpoint, "us-east-1");
    let table = format!("bench-ledger-{:08x}", rand::random::<u32>());
    wsdr_aws::schema::create_state_table(&client, &table).await?;
    let strong = consistency == wsdr_core::Consistency::Strong;
    let store = DynamoStateStore::new(client, table);
    let store = Arc::new(if strong {
        store.strongly_consistent()
    } else {
        store
    });
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
    let mut head = wsdr_core::LedgerHead::empty();
    for i in 0..prior {
        let bid = BidRecord {
            auction_id: auction.clone(),
            bid_id: BidId::new(format!("prior-{i:08}"))?,
            bidder: UserId::new(format!("user-{}", i % 500))?,
            amount: Amount::new(1 + i as u64)?,
            at: i as u64,
            region: "us-east-1".into(),
        };
        if strong {
            let write_id = format!("prior-{i:08}-{:08x}", rand::random::<u32>());
            let next = head.with_bid(&bid, &write_id);
            let outcome = store
                .advance(&auction, head.summary.accepted, &next)
                .await?;
            anyhow::ensure!(
                outcome == wsdr_core::Advance::Advanced,
                "history bid {i}: {outcome:?}"
            );
            store.settle(&bid, &write_id).await?;
            head = next;
            continue;
        }
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
    )
    .with_consistency(consistency);
    Ok(Prepared {
        prior,
        store,
        service,
        auction,
        samples: Vec::new(),
        io: (0, 0, 0),
        bids: 0,
        seq: 0,
    })
}

impl Prepared {
    /// `n` more rising bids, timed one by one.
    async fn measure(&mut self, n: usize) -> anyhow::Result<()> {
        let connection = ConnectionId::new("bench-conn")?;
        let user = UserId::new("bench-user")?;
        let before = self.store.io().get();
        for _ in 0..n {
            // Ids and amounts keep rising across rounds (the warm-up's included).
            let i = self.seq;
            self.seq += 1;
            let amount = Amount::new(10 + self.prior as u64 + i as u64)?;
            let bid_id = BidId::new(format!("bench-{i:08}"))?;
            let start = Instant::now();
            let reply = self
                .service
                .bid(&connection, &user, &self.auction, amount, &bid_id)
                .await?;
            self.samples.push(start.elapsed().as_secs_f64() * 1e6);
            match reply.message {
                ServerMessage::BidResult {
                    status: BidStatus::Accepted,
                    ..
                } => {}
                other => anyhow::bail!("bench bid {i} not accepted: {other:?}"),
            }
            self.bids += 1;
        }
        let after = self.store.io().get();
        self.io.0 += after.0 - before.0;
        self.io.1 += after.1 - before.1;
        self.io.2 += after.2 - before.2;
        Ok(())
    }

    fn cost(mut self) -> LedgerCost {
        self.samples.sort_by(f64::total_cmp);
        let per = |v: u64| v as f64 / self.bids.max(1) as f64;
        LedgerCost {
            prior_bids: self.prior,
            bids: self.bids,
            p50_us: percentile(&self.samples, 0.5),
            p99_us: percentile(&self.samples, 0.99),
            requests_per_bid: per(self.io.0),
            items_read_per_bid: per(self.io.1),
            items_written_per_bid: per(self.io.2),
        }
    }
}

/// Auctions with each number of prior bids on DynamoDB Local, then `bids` rising bids on
/// each, measured in interleaved rounds (so DynamoDB Local's JIT warm-up and the machine's
/// noise fall on every size alike).
pub async fn run_all(
    endpoint: &str,
    priors: &[usize],
    bids: usize,
    consistency: wsdr_core::Consistency,
) -> anyhow::Result<Vec<LedgerCost>> {
    let mut prepared = Vec::new();
    for prior in priors {
        prepared.push(prepare(endpoint, *prior, consistency).await?);
    }
    // Warm-up round, not recorded.
    for p in &mut prepared {
        p.measure(20).await?;
        p.samples.clear();
        p.io = (0, 0, 0);
        p.bids = 0;
    }
    let rounds = 5;
    for _ in 0..rounds {
        for p in &mut prepared {
            p.measure(bids / rounds).await?;
        }
    }
    Ok(prepared.into_iter().map(Prepared::cost).collect())
}
