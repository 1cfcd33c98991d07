#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! DynamoConnections against DynamoDB Local.

mod common;

use std::time::Duration;
use wsdr_aws::DynamoConnections;
use wsdr_core::{ConnectionId, Connections, UserId};
use wsdr_protocol::Topic;

/// A topic of the auction's namespace.
fn topic(name: &str) -> Topic {
    Topic::parse(&format!("auction:{name}")).unwrap()
}

const NOW: u64 = 1_767_225_600_000;

#[tokio::test]
async fn subscribers_of_a_topic_come_from_the_index_and_skip_expired() {
    let client = common::client();
    let table = common::connections_table(&client).await;
    let connections = DynamoConnections::new(client.clone(), &table, Duration::from_secs(9_000));
    let a1 = topic("a1");
    // Another app's topic of the same name is another topic.
    let a2 = Topic::parse("chat:a1").unwrap();
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
async fn a_shard_is_paged_in_connection_order_and_every_page_moves_on() {
    let client = common::client();
    let table = common::connections_table(&client).await;
    let connections = DynamoConnections::new(client.clone(), &table, Duration::from_secs(9_000));
    // Today's time: DynamoDB Local runs TTL deletion, so records that expire by the wall
    // clock (as the fixed now's do) vanish while the test reads them.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let a1 = topic("a1");
    let user = UserId::new("watcher").unwrap();
    // 160 watchers (about ten a shard), some of them expired.
    let mut expected: std::collections::BTreeMap<u16, Vec<String>> = Default::default();
    for i in 0..160 {
        let c = ConnectionId::new(format!("w{i:03}=")).unwrap();
        let at = if i % 7 == 0 { now - 9_001_000 } else { now };
        connections.subscribe(&c, &user, &a1, at).await.unwrap();
        if at == now {
            expected
                .entry(wsdr_core::push::shard_of(&c))
                .or_default()
                .push(c.to_string());
        }
    }
    // A GSI is eventually consistent (DynamoDB Local's too): wait, bounded, until the index
    // shows every live subscription before paging it.
    for _ in 0..100 {
        if connections.subscribers(&a1, now).await.unwrap().len() == 160 - 23 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let mut pages = 0;
    for shard in 0..wsdr_core::SUBSCRIBER_SHARDS {
        let mut seen = Vec::new();
        let mut after: Option<ConnectionId> = None;
        loop {
            let page = connections
                .subscribers_page(&a1, shard, after.as_ref(), 3, now)
                .await
                .unwrap();
            pages += 1;
            assert!(
                page.connections.len() <= 3,
                "a page holds at most its limit"
            );
            seen.extend(page.connections.iter().map(|c| c.to_string()));
            match page.resume_after {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        let mut want = expected.remove(&shard).unwrap_or_default();
        want.sort();
        assert_eq!(
            seen, want,
            "shard {shard}: every live watcher once, in order"
        );
    }
    assert!(
        pages > usize::from(wsdr_core::SUBSCRIBER_SHARDS) * 3,
        "{pages}"
    );
    // The whole audience, as every shard's pages give it.
    assert_eq!(
        connections.subscribers(&a1, now).await.unwrap().len(),
        160 - 23
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
        let auction = topic(&format!("a{i}"));
        connections
            .subscribe(&gone, &user, &auction, NOW)
            .await
            .unwrap();
    }
    connections
        .subscribe(&kept, &user, &topic("a0"), NOW)
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
    let auction = topic("a1");
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

#[tokio::test]
async fn a_census_counts_the_live_connections_and_is_read_back_as_taken() {
    let client = common::client();
    let table = common::connections_table(&client).await;
    let connections = DynamoConnections::new(client.clone(), &table, Duration::from_secs(9_000));
    assert_eq!(connections.census().await.unwrap(), None, "none taken yet");
    let user = UserId::new("dave").unwrap();
    // Expired a second before the census (epoch seconds), and live ones with subscriptions.
    connections
        .register(&ConnectionId::new("old=").unwrap(), &user, NOW - 9_001_000)
        .await
        .unwrap();
    for i in 0..3 {
        let c = ConnectionId::new(format!("c{i}=")).unwrap();
        connections.register(&c, &user, NOW).await.unwrap();
        connections
            .subscribe(&c, &user, &topic("a1"), NOW)
            .await
            .unwrap();
    }
    let taken = connections.take_census(NOW).await.unwrap();
    assert_eq!(
        taken,
        wsdr_core::Census {
            connections: 3,
            counted_at_ms: NOW
        }
    );
    assert_eq!(connections.census().await.unwrap(), Some(taken));
}
