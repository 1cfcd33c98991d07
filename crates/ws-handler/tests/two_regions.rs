#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! Split brain on real tables: hundreds of concurrent bids land in two "Region" tables on
//! DynamoDB Local (some replayed in both, as a client that failed over before its ack would),
//! then the tables are merged as Global Tables MREC would (last writer wins per item).
//! No acknowledged bid may be lost, none applied twice, and both sides must agree.

mod common;

use aws_sdk_dynamodb::types::AttributeValue;
use common::*;
use futures::future::join_all;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use ws_handler::{app_from_aws, App, Config};
use wsdr_aws::local::dynamo_client;

type Item = HashMap<String, AttributeValue>;

async fn region_app(label: &str, state_table: &str, callback_url: &str) -> App {
    let client = dynamo_client(&dynamo_endpoint(), "us-east-1");
    let connections = unique("connections");
    wsdr_aws::schema::create_connections_table(&client, &connections)
        .await
        .unwrap();
    let env = HashMap::from([
        ("STATE_TABLE", state_table.to_owned()),
        ("CONNECTIONS_TABLE", connections),
        ("WS_CALLBACK_URL", callback_url.to_owned()),
        ("REGION_LABEL", label.to_owned()),
        (
            "SEED_AUCTIONS",
            r#"[{"id":"lot-1","item":"Stratocaster","startingPrice":100,"minIncrement":1}]"#
                .to_owned(),
        ),
    ]);
    let config = Config::from_lookup(|k| env.get(k).cloned()).unwrap();
    let sdk = local_sdk();
    app_from_aws(&config, &sdk).await.unwrap()
}

async fn scan(client: &wsdr_aws::DynamoClient, table: &str) -> Vec<Item> {
    client
        .scan()
        .table_name(table)
        .consistent_read(true)
        .into_paginator()
        .items()
        .send()
        .collect::<Result<Vec<_>, _>>()
        .await
        .unwrap()
}

fn key(item: &Item) -> (String, String) {
    (
        item["pk"].as_s().unwrap().clone(),
        item["sk"].as_s().unwrap().clone(),
    )
}

/// The MREC rule: per item, the later write wins (ties broken by Region, deterministically).
fn stamp(item: &Item) -> (u64, String) {
    let at = item
        .get("at")
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let region = item
        .get("region")
        .and_then(|v| v.as_s().ok())
        .cloned()
        .unwrap_or_default();
    (at, region)
}

/// Global Tables replication between two tables, done at once: every item of either table
/// written to both, last writer wins per item (by `at`, then Region; items with one writer
/// Region, as every ledger item has, have only one version anyway).
async fn merge(client: &wsdr_aws::DynamoClient, east_table: &str, west_table: &str) {
    let mut merged: HashMap<(String, String), Item> = HashMap::new();
    for item in scan(client, east_table)
        .await
        .into_iter()
        .chain(scan(client, west_table).await)
    {
        match merged.get(&key(&item)) {
            Some(current) if stamp(current) >= stamp(&item) => {}
            _ => {
                merged.insert(key(&item), item);
            }
        }
    }
    for table in [east_table, west_table] {
        for item in merged.values() {
            client
                .put_item()
                .table_name(table)
                .set_item(Some(item.clone()))
                .send()
                .await
                .unwrap();
        }
    }
}

fn bid_event(
    user: &str,
    region: &str,
    amount: u64,
    bid_id: &str,
) -> aws_lambda_events::apigw::ApiGatewayWebsocketProxyRequest {
    let frame =
        format!(r#"{{"action":"bid","auctionId":"lot-1","amount":{amount},"bidId":"{bid_id}"}}"#);
    message("bid", &format!("{user}-{region}"), user, frame.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bid_id_reuse_and_equal_bids_in_a_split_keep_every_bid_and_one_winner() {
    let client = dynamo_client(&dynamo_endpoint(), "us-east-1");
    let (east_table, west_table) = (unique("state-east"), unique("state-west"));
    for table in [&east_table, &west_table] {
        wsdr_aws::schema::create_state_table(&client, table)
            .await
            .unwrap();
    }
    let callback = CallbackServer::default();
    let url = callback.start().await;
    let east = region_app("us-east-1", &east_table, &url).await;
    let west = region_app("us-west-2", &west_table, &url).await;
    let status = |reply: serde_json::Value| reply["status"].as_str().unwrap().to_owned();

    // Split. alice's bid in the east; mallory sends alice's bidId (seen in a push) with a lower
    // amount to the west, which has never seen it; carol bids alice's amount in the west.
    let alice = body(
        &east
            .respond(bid_event("alice", "e", 500, "bid-alice-1"))
            .await,
    );
    assert_eq!(status(alice), "accepted");
    let mallory = body(
        &west
            .respond(bid_event("mallory", "w", 200, "bid-alice-1"))
            .await,
    );
    assert_eq!(
        status(mallory),
        "accepted",
        "mallory's own bid, judged on its amount"
    );
    let carol = body(
        &west
            .respond(bid_event("carol", "w", 500, "bid-carol-1"))
            .await,
    );
    assert_eq!(status(carol), "accepted");

    merge(&client, &east_table, &west_table).await;

    async fn state(app: &App, user: &str) -> serde_json::Value {
        let event = message(
            "getState",
            &format!("{user}-state"),
            user,
            br#"{"action":"getState","auctionId":"lot-1"}"#,
        );
        body(&app.respond(event).await)
    }
    let (e, w) = (state(&east, "alice").await, state(&west, "alice").await);
    assert_eq!(e["auction"], w["auction"], "one auction in both Regions");
    assert_eq!(e["auction"]["highBid"]["bidder"], "alice", "{e}");
    assert_eq!(e["auction"]["highBid"]["amount"], 500);
    // alice's acknowledged bid stands in both Regions, untouched by mallory's.
    for view in [&e, &w] {
        let bids = view["you"]["bids"].as_array().unwrap();
        assert_eq!(bids.len(), 1, "{view}");
        assert_eq!(bids[0]["bidId"], "bid-alice-1");
        assert_eq!(bids[0]["amount"], 500);
    }
    let m = state(&west, "mallory").await;
    assert_eq!(
        m["you"]["bids"][0]["amount"], 200,
        "mallory's bid is his own"
    );
    // A replay of alice's bid in the west is now a duplicate, not a new bid.
    let replay = body(
        &west
            .respond(bid_event("alice", "w", 500, "bid-alice-1"))
            .await,
    );
    assert_eq!(status(replay), "duplicate");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_bids_in_two_regions_converge_without_loss_or_double_apply() {
    let client = dynamo_client(&dynamo_endpoint(), "us-east-1");
    let (east_table, west_table) = (unique("state-east"), unique("state-west"));
    wsdr_aws::schema::create_state_table(&client, &east_table)
        .await
        .unwrap();
    wsdr_aws::schema::create_state_table(&client, &west_table)
        .await
        .unwrap();
    let callback = CallbackServer::default();
    let url = callback.start().await;
    let east = Arc::new(region_app("us-east-1", &east_table, &url).await);
    let west = Arc::new(region_app("us-west-2", &west_table, &url).await);

    // 520 bids from 40 users, each sent to a random Region; one in five is replayed in the
    // other Region with the same bidId. In flight together in batches of 26: within a Region
    // bids serialize on its summary item, so a batch's accepted bids rise in commit order.
    let mut rng = rand::rngs::StdRng::seed_from_u64(2026);
    let mut plan = Vec::new();
    for i in 0..520u32 {
        let user = format!("user-{}", i % 40);
        let bid_id = format!("bid-{i:06}");
        // A rising market with noise: bids race each other near the top, so many are
        // accepted and many of those race a higher one in the other Region.
        let amount: u64 = 1_000 + u64::from(i) * 150 + rng.random_range(0..20_000);
        let first_east = rng.random_bool(0.5);
        plan.push((user.clone(), bid_id.clone(), amount, first_east));
        if rng.random_bool(0.2) {
            plan.push((user, bid_id, amount, !first_east));
        }
    }
    let mut acknowledged: BTreeMap<(String, String), u64> = BTreeMap::new();
    let (mut sent, mut accepted, mut duplicates, mut too_low) = (0, 0, 0, 0);
    for batch in plan.chunks(26) {
        let calls = batch.iter().map(|(user, bid_id, amount, to_east)| {
            let app = if *to_east { east.clone() } else { west.clone() };
            let frame = format!(
                r#"{{"action":"bid","auctionId":"lot-1","amount":{amount},"bidId":"{bid_id}"}}"#
            );
            let conn = format!("{user}-{}", if *to_east { "e" } else { "w" });
            let user = user.clone();
            async move {
                body(
                    &app.respond(message("bid", &conn, &user, frame.as_bytes()))
                        .await,
                )
            }
        });
        for (reply, (user, bid_id, amount, _)) in join_all(calls).await.into_iter().zip(batch) {
            sent += 1;
            assert_eq!(reply["type"], "bidResult", "{reply}");
            match reply["status"].as_str().unwrap() {
                status @ ("accepted" | "duplicate") => {
                    accepted += usize::from(status == "accepted");
                    duplicates += usize::from(status == "duplicate");
                    acknowledged.insert((user.clone(), bid_id.clone()), *amount);
                }
                "rejected" => {
                    too_low += 1;
                    assert_eq!(reply["reason"], "too_low", "{reply}");
                }
                other => panic!("status {other}"),
            }
        }
    }
    assert!(sent >= 500, "at least 500 bids must be sent, sent {sent}");
    assert!(
        acknowledged.len() > 50,
        "the test must exercise many acknowledged bids"
    );

    // Global Tables replication, done at once after the split: last writer wins per item.
    merge(&client, &east_table, &west_table).await;

    let east_items = scan(&client, &east_table).await;
    let west_items = scan(&client, &west_table).await;
    let copies = |items: &[Item]| {
        items
            .iter()
            .filter(|i| i["pk"].as_s().unwrap().starts_with("OPS#"))
            .count()
    };
    // Copies of one bid (accepted in both Regions) fold into one (bidder, bidId) entry.
    let bids = |items: &[Item]| -> BTreeMap<(String, String), u64> {
        items
            .iter()
            .filter(|i| i["pk"].as_s().unwrap().starts_with("OPS#"))
            .map(|i| {
                let op: serde_json::Value = serde_json::from_str(i["op"].as_s().unwrap()).unwrap();
                (
                    (
                        i["author"].as_s().unwrap().clone(),
                        i["opId"].as_s().unwrap().clone(),
                    ),
                    op["amount"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let (east_bids, west_bids) = (bids(&east_items), bids(&west_items));
    assert_eq!(east_bids, west_bids, "both Regions hold the same bids");
    for (key, amount) in &acknowledged {
        assert_eq!(
            east_bids.get(key),
            Some(amount),
            "acknowledged bid {key:?} lost or altered"
        );
    }
    assert_eq!(
        east_bids.len(),
        acknowledged.len(),
        "every recorded bid was acknowledged exactly once"
    );

    let max_acknowledged = acknowledged.values().max().copied().unwrap();
    let state = |app: Arc<App>| async move {
        body(
            &app.respond(message(
                "getState",
                "checker",
                "checker",
                br#"{"action":"getState","auctionId":"lot-1"}"#,
            ))
            .await,
        )
    };
    let (e, w) = (state(east.clone()).await, state(west.clone()).await);
    assert_eq!(
        e["auction"], w["auction"],
        "both Regions show one consistent auction"
    );
    assert_eq!(e["auction"]["highBid"]["amount"], max_acknowledged);
    assert_eq!(
        e["auction"]["bidCount"],
        copies(&east_items) as u64,
        "the summaries count every copy"
    );
    assert_eq!(
        (e["region"].as_str(), w["region"].as_str()),
        (Some("us-east-1"), Some("us-west-2"))
    );
    // Acknowledgements beyond one per bidId: replays the other Region acknowledged too
    // (a copy in each Region).
    let both = accepted + duplicates - acknowledged.len();
    eprintln!(
        "two regions: {sent} bids sent, {} bidIds acknowledged ({accepted} accepted, \
         {duplicates} duplicate answers; {both} replays acknowledged in both Regions), \
         {too_low} rejected too low; {} bid copies on each side after the merge; high bid {} on both",
        acknowledged.len(),
        copies(&east_items),
        max_acknowledged
    );
}
