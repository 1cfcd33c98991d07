#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! DynamoConnections against DynamoDB Local.

mod common;

use std::time::Duration;
use wsdr_aws::DynamoConnections;
use wsdr_core::{ConnectionId, Connections, UserId};
use wsdr_protocol::AuctionId;

const NOW: u64 = 1_767_225_600_000;

#[tokio::test]
async fn subscribers_of_an_auction_come_from_the_index_and_skip_expired() {
    let client = common::client();
    let table = common::connections_table(&client).await;
    let connections = DynamoConnections::new(client.clone(), &table, Duration::from_secs(9_000));
    let a1 = AuctionId::new("a1").unwrap();
    let a2 = AuctionId::new("a2").unwrap();
    let user = UserId::new("alice").unwrap();
    for (id, at) in [("old=", NOW - 9_001_000), ("c1=", NOW), ("c2=", NOW)] {
        let c = ConnectionId::new(id).unwrap();
        connections.register(&c, &user, at).await.unwrap();
        connections.subscribe(&c, &user, &a1, at).await.unwrap();
    }
    connections
        .subscribe(&ConnectionId::new("c3=").unwrap(), &user, &a2, NOW)
        .await
        .unwrap();
    let mut live: Vec<String> = connections
        .subscribers(&a1, NOW)
        .await
        .unwrap()
        .iter()
        .map(|c| c.to_string())
        .collect();
    live.sort();
    assert_eq!(
        live,
        ["c1=", "c2="],
        "the expired record must be ignored although TTL has not deleted it"
    );
    assert_eq!(
        common::scan(&client, &table).await.len(),
        7,
        "TTL deletion is lazy: the expired items are still there"
    );
}

#[tokio::test]
async fn remove_deletes_the_connection_and_all_its_subscriptions() {
    let client = common::client();
    let table = common::connections_table(&client).await;
    let connections = DynamoConnections::new(client.clone(), &table, Duration::from_secs(9_000));
    let user = UserId::new("bob").unwrap();
    let gone = ConnectionId::new("gone=").unwrap();
    let kept = ConnectionId::new("kept=").unwrap();
    connections.register(&gone, &user, NOW).await.unwrap();
    connections.register(&kept, &user, NOW).await.unwrap();
    for i in 0..30 {
        let auction = AuctionId::new(format!("a{i}")).unwrap();
        connections
            .subscribe(&gone, &user, &auction, NOW)
            .await
            .unwrap();
    }
    connections
        .subscribe(&kept, &user, &AuctionId::new("a0").unwrap(), NOW)
        .await
        .unwrap();
    connections.remove(&gone).await.unwrap();
    let left = common::scan(&client, &table).await;
    assert_eq!(left.len(), 2);
    assert!(left.iter().all(|i| i["pk"].as_s().unwrap() == "kept="));
    connections
        .remove(&ConnectionId::new("never-existed").unwrap())
        .await
        .unwrap();
}

#[tokio::test]
async fn connection_records_carry_a_ttl_in_epoch_seconds() {
    let client = common::client();
    let table = common::connections_table(&client).await;
    let ttl = client
        .describe_time_to_live()
        .table_name(&table)
        .send()
        .await
        .unwrap();
    let spec = ttl.time_to_live_description.unwrap();
    assert_eq!(spec.attribute_name(), Some("expiresAt"));
    let connections = DynamoConnections::new(client.clone(), &table, Duration::from_secs(9_000));
    connections
        .register(
            &ConnectionId::new("c=").unwrap(),
            &UserId::new("u").unwrap(),
            NOW,
        )
        .await
        .unwrap();
    let items = common::scan(&client, &table).await;
    let expires: u64 = items[0]["expiresAt"].as_n().unwrap().parse().unwrap();
    assert_eq!(expires, NOW / 1000 + 9_000);
}

#[tokio::test]
async fn all_lists_every_live_connection_once_and_skips_expired_and_subscriptions() {
    let client = common::client();
    let table = common::connections_table(&client).await;
    let connections = DynamoConnections::new(client.clone(), &table, Duration::from_secs(9_000));
    let user = UserId::new("carol").unwrap();
    let auction = AuctionId::new("a1").unwrap();
    connections
        .register(&ConnectionId::new("old=").unwrap(), &user, NOW - 9_001_000)
        .await
        .unwrap();
    // More than one scan page's worth is not needed to prove pagination (the SDK paginator
    // does it); subscriptions must not be listed as connections.
    for i in 0..40 {
        let c = ConnectionId::new(format!("c{i}=")).unwrap();
        connections.register(&c, &user, NOW).await.unwrap();
        connections
            .subscribe(&c, &user, &auction, NOW)
            .await
            .unwrap();
    }
    let mut all: Vec<String> = connections
        .all(NOW)
        .await
        .unwrap()
        .iter()
        .map(|c| c.to_string())
        .collect();
    all.sort();
    let mut expected: Vec<String> = (0..40).map(|i| format!("c{i}=")).collect();
    expected.sort();
    assert_eq!(all, expected);
}
