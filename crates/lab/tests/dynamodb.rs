#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The lab with each Region's state in DynamoDB Local (`--dynamodb`): the real `wsdr-aws`
//! adapter behind the handler, replicated with per-item last-writer-wins conditional puts.
//! Needs DYNAMODB_ENDPOINT (make test starts DynamoDB Local).

use wsdr_lab::runs::drill;
use wsdr_lab::world::store::StoreKind;
use wsdr_lab::{DrillConfig, LabConfig, Scenario, TimeScale};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_drill_on_dynamodb_local_loses_nothing_and_converges() {
    let endpoint = std::env::var("DYNAMODB_ENDPOINT").unwrap_or_else(|_| {
        panic!("DYNAMODB_ENDPOINT is not set: run with `make test`, which starts DynamoDB Local")
    });
    let report = drill::run(DrillConfig {
        scenario: Scenario::Partition,
        users: 6,
        seed: 5,
        lab: LabConfig {
            scale: TimeScale::new(30.0),
            replication_lag: wsdr_lab::AwsDuration::from_millis(800),
            store: StoreKind::Dynamo { endpoint },
            ..LabConfig::default()
        },
        ..DrillConfig::default()
    })
    .await
    .unwrap();
    let table = report.table();
    assert!(report.acknowledged_bids > 0, "{table}");
    assert_eq!(report.lost_acknowledged_bids, 0, "{table}");
    assert_eq!(report.duplicate_bids, 0, "{table}");
    assert!(report.converged, "{table}");
    assert!(report.high_bid_consistent, "{table}");
    assert_eq!(report.restored, 6, "{table}");
}

#[tokio::test]
async fn replicated_writes_apply_with_last_writer_wins_per_item() {
    use wsdr_auction::{Auction, StateStore};
    use wsdr_aws::DynamoStateStore;
    use wsdr_core::items::{Change, Item};
    use wsdr_lab::world::clock::{LabClock, RegionClock};
    use wsdr_lab::world::store::{DynamoReplica, ReplicaStore};
    use wsdr_protocol::{Amount, AuctionId};
    let endpoint = std::env::var("DYNAMODB_ENDPOINT").expect("DYNAMODB_ENDPOINT (make test)");
    let table = format!("lww-{:08x}", rand::random::<u32>());
    let east_client = wsdr_aws::local::dynamo_client(&endpoint, "us-east-1");
    let west_client = wsdr_aws::local::dynamo_client(&endpoint, "us-west-2");
    // DynamoDB Local runs with -sharedDb: one table per Region, as the lab makes them.
    let (east_table, west_table) = (format!("{table}-east"), format!("{table}-west"));
    wsdr_aws::schema::create_state_table(&east_client, &east_table)
        .await
        .unwrap();
    wsdr_aws::schema::create_state_table(&west_client, &west_table)
        .await
        .unwrap();
    // Each Region stamps with its own clock; the west's runs 5 s behind.
    let lab = LabClock::new();
    let (east_clock, west_clock) = (RegionClock::new(lab), RegionClock::new(lab));
    west_clock.set_skew_ms(-5_000);
    let east = DynamoReplica::new(
        DynamoStateStore::new(east_client, east_table),
        "us-east-1",
        east_clock,
    );
    let west = DynamoReplica::new(
        DynamoStateStore::new(west_client, west_table),
        "us-west-2",
        west_clock,
    );
    let mut feed = east.change_feed();
    let auction = Auction {
        id: AuctionId::new("lot-9").unwrap(),
        item: "first".into(),
        starting_price: Amount::new(100).unwrap(),
        min_increment: 1,
        closes_at: None,
    };
    assert!(east.put_auction_if_absent(&auction).await.unwrap());
    let change = feed.recv().await.expect("the write is on the feed");
    assert_eq!(change.writer, "us-east-1");
    assert!(west.apply_replicated(&change).await.unwrap(), "new item");
    assert_eq!(east.dump().await.unwrap(), west.dump().await.unwrap());

    let with = |item: &str, written_at: u64, writer: &str| Change {
        item: Item::Meta {
            topic: wsdr_auction::store::topic(&auction.id),
            meta: wsdr_auction::store::meta_of(&Auction {
                item: item.into(),
                ..auction.clone()
            }),
        },
        written_at,
        writer: writer.into(),
    };
    let t = change.written_at;
    assert!(!west
        .apply_replicated(&with("older", t - 1, "us-west-2"))
        .await
        .unwrap());
    assert!(!west
        .apply_replicated(&with("tie, smaller writer", t, "a"))
        .await
        .unwrap());
    assert!(west
        .apply_replicated(&with("tie, larger writer", t, "z"))
        .await
        .unwrap());
    assert!(west
        .apply_replicated(&with("newer", t + 1, "a"))
        .await
        .unwrap());
    let stored = west.auction(&auction.id).await.unwrap().unwrap();
    assert_eq!(stored.item, "newer");
    // A later local write in the west loses to the east's earlier one when the west's clock is
    // behind: last writer wins by the writers' clocks, not by real time (as on AWS).
    let mut west_feed = west.change_feed();
    let later = Auction {
        id: AuctionId::new("lot-10").unwrap(),
        ..auction.clone()
    };
    assert!(west.put_auction_if_absent(&later).await.unwrap());
    let west_write = west_feed.recv().await.unwrap();
    assert!(
        west_write.written_at < t,
        "stamped by the west's own clock, which runs behind the east's"
    );
    // The adapter's items carry no replication attributes: the stamps live in the replica.
    assert_eq!(west.adapter().dump().await.unwrap().len(), 2);
}
