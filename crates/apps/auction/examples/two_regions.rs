#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! A small two-Region scenario on the in-memory adapters: bids in the primary, replication,
//! a lost primary, state restored from the secondary, and an unconfirmed bid replayed safely.
//! (`make demo` runs this until the full lab exists.)

use std::sync::Arc;
use wsdr_auction::{Auction, AuctionService};
use wsdr_core::memory::{ManualClock, MemoryConnections, MemoryStateStore, RecordingNotifier};
use wsdr_core::{ConnectionId, UserId};
use wsdr_protocol::{Amount, AuctionId};

fn main() -> anyhow::Result<()> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(run())
}

fn region(name: &str, clock: Arc<ManualClock>) -> (Arc<MemoryStateStore>, AuctionService) {
    let store = Arc::new(MemoryStateStore::new(name, clock.clone()));
    let service = AuctionService::new(
        store.clone(),
        Arc::new(MemoryConnections::default()),
        Arc::new(RecordingNotifier::default()),
        clock,
        name,
    );
    (store, service)
}

async fn run() -> anyhow::Result<()> {
    let clock = Arc::new(ManualClock::new(1_767_225_600_000));
    let (primary, east) = region("us-east-1", clock.clone());
    let (secondary, west) = region("us-west-2", clock.clone());
    let mut feed = primary.change_feed();
    east.ensure_auction(&Auction {
        id: AuctionId::new("lot-1")?,
        item: "1959 Fender Stratocaster".into(),
        starting_price: Amount::new(100_000)?,
        min_increment: 1_000,
        closes_at: None,
    })
    .await?;

    let alice = UserId::new("alice")?;
    let bob = UserId::new("bob")?;
    let frame = |amount: u64, id: &str| {
        format!(r#"{{"action":"bid","auctionId":"lot-1","amount":{amount},"bidId":"{id}"}}"#)
    };
    let show =
        |who: &str, reply: &wsdr_core::Reply| println!("  {who:<6} <- {}", reply.message.to_json());

    println!("1. both users bid in the primary (us-east-1)");
    show(
        "alice",
        &east
            .handle_frame(
                &ConnectionId::new("e-a")?,
                &alice,
                frame(100_000, "alice-0001").as_bytes(),
            )
            .await,
    );
    clock.advance(400);
    show(
        "bob",
        &east
            .handle_frame(
                &ConnectionId::new("e-b")?,
                &bob,
                frame(150_000, "bob-000001").as_bytes(),
            )
            .await,
    );

    println!("2. Global Tables replicate the primary's writes to us-west-2");
    let mut replicated = 0;
    while let Ok(change) = feed.try_recv() {
        replicated += usize::from(secondary.apply_replicated(change));
    }
    println!("  {replicated} items replicated");

    println!("3. alice bids again; the primary records it, then fails before she sees the ack");
    clock.advance(300);
    let _lost_ack = east
        .handle_frame(
            &ConnectionId::new("e-a")?,
            &alice,
            frame(200_000, "alice-0002").as_bytes(),
        )
        .await;
    println!("  (the write of alice-0002 had not replicated when us-east-1 went down)");

    println!("4. alice reconnects to us-west-2: getState, then replays her unconfirmed bid");
    let conn = ConnectionId::new("w-a")?;
    show(
        "alice",
        &west
            .handle_frame(
                &conn,
                &alice,
                br#"{"action":"getState","auctionId":"lot-1"}"#,
            )
            .await,
    );
    clock.advance(50);
    show(
        "alice",
        &west
            .handle_frame(&conn, &alice, frame(200_000, "alice-0002").as_bytes())
            .await,
    );
    show(
        "alice",
        &west
            .handle_frame(&conn, &alice, frame(200_000, "alice-0002").as_bytes())
            .await,
    );

    println!("5. the primary comes back; replication catches up both ways");
    let mut west_feed_items = secondary.dump();
    west_feed_items.retain(|c| c.writer == "us-west-2");
    for change in west_feed_items {
        primary.apply_replicated(change);
    }
    while let Ok(change) = feed.try_recv() {
        secondary.apply_replicated(change);
    }
    let converged = primary.dump() == secondary.dump();
    println!("  regions converged: {converged}");
    show(
        "alice",
        &east
            .handle_frame(
                &ConnectionId::new("e-a2")?,
                &alice,
                br#"{"action":"getState","auctionId":"lot-1"}"#,
            )
            .await,
    );
    anyhow::ensure!(converged, "regions did not converge");
    Ok(())
}
