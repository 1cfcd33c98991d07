//! Bid cost against an auction's history: the ledger keeps per-bid reads and writes constant
//! (docs/DATA_MODEL.md), so latency must not grow with the number of prior bids.

use crate::common::percentile;
use std::sync::Arc;
use std::time::Instant;
use wsdr_auction::LedgerStore;
use wsdr_auction::{Auction, AuctionService, BidCommit, BidRecord, RegionSummary, StateStore};
use wsdr_aws::{DynamoLedgerStore, DynamoStateStore};
use wsdr_core::memory::{MemoryConnections, RecordingNotifier};
use wsdr_core::{CommitOutcome, ConnectionId, SystemClock, UserId};
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

/// A fresh state table on DynamoDB Local holding one open auction, `lot-1`.
async fn bench_table(
    endpoint: &str,
    prefix: &str,
    strong: bool,
) -> anyhow::Result<(
    Arc<DynamoStateStore>,
    Option<Arc<DynamoLedgerStore>>,
    AuctionId,
)> {
    let client = wsdr_aws::local::dynamo_client(endpoint, "us-east-1");
    let table = format!("{prefix}-{:08x}", rand::random::<u32>());
    wsdr_aws::schema::create_state_table(&client, &table).await?;
    let store = Arc::new(DynamoStateStore::new(client, table));
    // The same table as a ledger (it shares the store's I/O counts).
    let ledger = strong.then(|| Arc::new(store.as_ref().clone().strongly_consistent()));
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
    Ok((store, ledger, auction))
}

async fn prepare(
    endpoint: &str,
    prior: usize,
    consistency: wsdr_core::Consistency,
) -> anyhow::Result<Prepared> {
    let strong = consistency == wsdr_core::Consistency::Strong;
    let (store, ledger, auction) = bench_table(endpoint, "bench-ledger", strong).await?;
    // History, written straight through the store (as the service would, without its reads).
    let mut summary = RegionSummary::empty("us-east-1");
    let mut head = wsdr_auction::LedgerHead::empty();
    for i in 0..prior {
        let bid = BidRecord {
            auction_id: auction.clone(),
            bid_id: BidId::new(format!("prior-{i:08}"))?,
            bidder: UserId::new(format!("user-{}", i % 500))?,
            amount: Amount::new(1 + i as u64)?,
            at: i as u64,
            region: "us-east-1".into(),
            position: i as u64 + 1,
        };
        if let Some(store) = &ledger {
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
    let connections = Arc::new(MemoryConnections::default());
    let notifier = Arc::new(RecordingNotifier::default());
    let service = match &ledger {
        None => AuctionService::new(
            store.clone(),
            connections,
            notifier,
            Arc::new(SystemClock),
            "us-east-1",
        ),
        Some(ledger) => AuctionService::strong(
            ledger.clone(),
            connections,
            notifier,
            Arc::new(SystemClock),
            "us-east-1",
        ),
    };
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
                .bid(&user, &self.auction, amount, &bid_id)
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

/// What one `getState` costs for a user with `own_bids` bids that names `named` of them.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SettleCost {
    pub own_bids: usize,
    pub named: usize,
    pub p50_us: f64,
    pub p99_us: f64,
    pub requests: f64,
    pub items_read: f64,
}

/// `getState` (eventual mode, DynamoDB Local) for one user holding each number of bids in
/// `owns`, naming each number of them in `named` (`bidIds`), `reps` times each, interleaved.
pub async fn settle_costs(
    endpoint: &str,
    owns: &[usize],
    named: &[usize],
    reps: usize,
) -> anyhow::Result<Vec<SettleCost>> {
    let user = UserId::new("bench-user")?;
    let connection = ConnectionId::new("bench-conn")?;
    let mut worlds = Vec::new();
    for &own in owns {
        let (store, _, auction) = bench_table(endpoint, "bench-settle", false).await?;
        let mut summary = RegionSummary::empty("us-east-1");
        let mut ids = Vec::new();
        for i in 0..own {
            // bidIds in no relation to time, as a client's UUIDs are.
            let bid_id = BidId::new(format!(
                "b-{:016x}",
                (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ))?;
            let bid = BidRecord {
                auction_id: auction.clone(),
                bid_id: bid_id.clone(),
                bidder: user.clone(),
                amount: Amount::new(1 + i as u64)?,
                at: 1_000 + i as u64,
                region: "us-east-1".into(),
                position: summary.accepted + 1,
            };
            let next = summary.with_bid(&bid);
            let outcome = store
                .commit_bid(&BidCommit {
                    bid,
                    write_id: format!("own-{i:08}-{:08x}", rand::random::<u32>()),
                    expected_accepted: summary.accepted,
                    summary: next.clone(),
                })
                .await?;
            anyhow::ensure!(outcome == CommitOutcome::Committed, "bid {i}: {outcome:?}");
            summary = next;
            ids.push(bid_id);
        }
        let service = AuctionService::new(
            store.clone(),
            Arc::new(MemoryConnections::default()),
            Arc::new(RecordingNotifier::default()),
            Arc::new(SystemClock),
            "us-east-1",
        );
        worlds.push((own, store, service, auction, ids));
    }
    // (own bids, named, samples, (requests, items read)).
    type Row = (usize, usize, Vec<f64>, (u64, u64));
    let mut rows: Vec<Row> = Vec::new();
    for (own, ..) in &worlds {
        for k in named {
            rows.push((*own, *k, Vec::new(), (0, 0)));
        }
    }
    // One warm-up pass, then `reps` passes, each over every (own, named) pair.
    for pass in 0..=reps {
        for row in rows.iter_mut() {
            let Some((_, store, service, auction, ids)) = worlds.iter().find(|w| w.0 == row.0)
            else {
                continue;
            };
            // `named` distinct bids spread over the user's history, newest to oldest.
            let step = (ids.len() / row.1.max(1)).max(1);
            let names: Vec<BidId> = ids
                .iter()
                .rev()
                .step_by(step)
                .take(row.1)
                .cloned()
                .collect();
            let before = store.io().get();
            let start = Instant::now();
            let state = service
                .get_state_settling(&connection, &user, auction, &names)
                .await?;
            let elapsed = start.elapsed().as_secs_f64() * 1e6;
            let after = store.io().get();
            if let ServerMessage::State { you, .. } = &state {
                anyhow::ensure!(
                    you.settled.len() == names.len() && you.settled.iter().all(|s| s.stands),
                    "every named bid stands"
                );
            }
            if pass > 0 {
                row.2.push(elapsed);
                row.3 .0 += after.0 - before.0;
                row.3 .1 += after.1 - before.1;
            }
        }
    }
    Ok(rows
        .into_iter()
        .map(|(own, named, mut samples, (requests, items))| {
            samples.sort_by(f64::total_cmp);
            SettleCost {
                own_bids: own,
                named,
                p50_us: percentile(&samples, 0.5),
                p99_us: percentile(&samples, 0.99),
                requests: requests as f64 / reps.max(1) as f64,
                items_read: items as f64 / reps.max(1) as f64,
            }
        })
        .collect())
}
