#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The push path's adapters against real local peers: the lease item on DynamoDB Local (the
//! same contract the in-process book keeps, and a race of many starters), the job queue on
//! the SQS peer (moto's server; `make test` starts both).

mod common;

use std::sync::Arc;
use wsdr_aws::{DynamoPushLeases, SqsPushQueue};
use wsdr_core::push::{check_lease_contract, Begin, PushJob, PushLeases, PushQueue};
use wsdr_protocol::Topic;

/// A topic of the auction's namespace.
fn topic(name: &str) -> Topic {
    Topic::parse(&format!("auction:{name}")).unwrap()
}

fn sqs_endpoint() -> String {
    std::env::var("SQS_ENDPOINT").unwrap_or_else(|_| {
        panic!(
            "SQS_ENDPOINT is not set: this test runs against a local SQS peer. \
             Run it with `make test` (or scripts/with-dynamodb-local.sh cargo test)."
        )
    })
}

#[tokio::test]
async fn the_lease_item_keeps_the_lease_contract() {
    let client = common::client();
    let table = common::connections_table(&client).await;
    let leases = DynamoPushLeases::new(client, &table);
    check_lease_contract(&leases, &topic("a1")).await.unwrap();
}

/// Twenty starters at once (stream invocations and last jobs of several instances): exactly
/// one holds the lease, every other learns that a push is in flight.
#[tokio::test]
async fn of_many_racing_starters_exactly_one_takes_the_lease() {
    let client = common::client();
    let table = common::connections_table(&client).await;
    let leases = Arc::new(DynamoPushLeases::new(client, &table));
    let auction = topic("hot");
    let mut racers = tokio::task::JoinSet::new();
    for _ in 0..20 {
        let (leases, auction) = (leases.clone(), auction.clone());
        racers.spawn(async move { leases.begin(&auction, 5_000, 200).await.unwrap() });
    }
    let mut outcomes = Vec::new();
    while let Some(outcome) = racers.join_next().await {
        outcomes.push(outcome.unwrap());
    }
    let started = outcomes
        .iter()
        .filter(|o| matches!(o, Begin::Started { .. }))
        .count();
    assert_eq!(started, 1, "{outcomes:?}");
    assert_eq!(outcomes.iter().filter(|o| **o == Begin::Marked).count(), 19);
}

/// A lease item leaves by TTL a day after its last change; a table that cannot be reached
/// is an error, never a lease taken or marked.
#[tokio::test]
async fn a_lease_item_expires_a_day_after_its_last_change_and_a_missing_table_is_an_error() {
    let client = common::client();
    let table = common::connections_table(&client).await;
    let leases = DynamoPushLeases::new(client.clone(), &table);
    let now_ms = 1_767_225_600_500;
    leases.begin(&topic("a1"), now_ms, 200).await.unwrap();
    let item = client
        .get_item()
        .table_name(&table)
        .key(
            "pk",
            aws_sdk_dynamodb::types::AttributeValue::S("#push#auction:a1".into()),
        )
        .key(
            "sk",
            aws_sdk_dynamodb::types::AttributeValue::S("PUSH".into()),
        )
        .send()
        .await
        .unwrap()
        .item
        .expect("the lease item");
    assert_eq!(
        item["expiresAt"].as_n().unwrap(),
        &(now_ms / 1000 + 24 * 3_600).to_string()
    );

    let absent = DynamoPushLeases::new(client, common::unique("absent"));
    assert!(absent.begin(&topic("a1"), now_ms, 200).await.is_err());
    assert!(absent.close(&topic("a1"), 1, now_ms).await.is_err());
    assert!(absent.record(&topic("a1"), 1, 10, true).await.is_err());
    assert!(absent.release(&topic("a1"), 1).await.is_err());
}

/// The lease item lives beside the connections but is none of them: the evacuator's scan
/// and the census skip it.
#[tokio::test]
async fn a_lease_item_is_not_a_connection() {
    use wsdr_core::Connections;
    let client = common::client();
    let table = common::connections_table(&client).await;
    let leases = DynamoPushLeases::new(client.clone(), &table);
    leases.begin(&topic("a1"), 1_000, 200).await.unwrap();
    let connections =
        wsdr_aws::DynamoConnections::new(client, &table, std::time::Duration::from_secs(3_600));
    assert!(connections.all(1_000).await.unwrap().is_empty());
    assert_eq!(connections.take_census(1_000).await.unwrap().connections, 0);
}

#[tokio::test]
async fn a_push_s_jobs_cross_the_sqs_peer_intact_in_batches_of_ten() {
    let sqs = wsdr_aws::local::sqs_client(&sqs_endpoint(), "us-east-1");
    let url = sqs
        .create_queue()
        .queue_name(common::unique("push"))
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let queue = SqsPushQueue::new(sqs.clone(), &url);
    let auction = topic("a1");
    let jobs = PushJob::for_push(&auction, Arc::from(r#"{"type":"bidUpdate"}"#), 1_234, 9);
    queue.send(jobs.clone()).await.unwrap();
    let mut received = Vec::new();
    for _ in 0..10 {
        let out = sqs
            .receive_message()
            .queue_url(&url)
            .max_number_of_messages(10)
            .send()
            .await
            .unwrap();
        for message in out.messages() {
            received.push(wsdr_aws::push_jobs::decode_job(message.body().unwrap()).unwrap());
        }
        if received.len() == jobs.len() {
            break;
        }
    }
    received.sort_by_key(|j| j.shard);
    assert_eq!(received, jobs);
}

/// A put-off start is one message, held back by its delay: due now it is received at once,
/// due in fifteen minutes it is not (the peer keeps SQS's `DelaySeconds`).
#[tokio::test]
async fn a_put_off_start_crosses_the_sqs_peer_with_its_delay() {
    use std::time::Duration;
    use wsdr_core::push::PushWork;
    let sqs = wsdr_aws::local::sqs_client(&sqs_endpoint(), "us-east-1");
    let url = sqs
        .create_queue()
        .queue_name(common::unique("push-start"))
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let queue = SqsPushQueue::new(sqs.clone(), &url);
    let (later, now) = (topic("later"), topic("now"));
    queue
        .send_start(&later, Duration::from_secs(900))
        .await
        .unwrap();
    queue.send_start(&now, Duration::ZERO).await.unwrap();
    let mut received = Vec::new();
    for _ in 0..3 {
        let out = sqs
            .receive_message()
            .queue_url(&url)
            .max_number_of_messages(10)
            .send()
            .await
            .unwrap();
        for message in out.messages() {
            received.push(wsdr_aws::push_jobs::decode_work(message.body().unwrap()).unwrap());
        }
    }
    assert_eq!(received, vec![PushWork::Start(now)]);
    let attributes = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesDelayed)
        .send()
        .await
        .unwrap();
    let delayed = attributes
        .attributes()
        .and_then(|a| {
            a.get(&aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesDelayed)
        })
        .cloned();
    assert_eq!(delayed.as_deref(), Some("1"));
}

#[tokio::test]
async fn a_queue_that_does_not_exist_is_an_error_not_a_loss() {
    let sqs = wsdr_aws::local::sqs_client(&sqs_endpoint(), "us-east-1");
    let queue = SqsPushQueue::new(
        sqs,
        format!("{}/123456789012/no-such-queue", sqs_endpoint()),
    );
    let jobs = PushJob::for_push(&topic("a1"), Arc::from("{}"), 1, 1);
    assert!(queue.send(jobs).await.is_err());
    let orders = wsdr_aws::SqsFailoverOrders::new(
        wsdr_aws::local::sqs_client(&sqs_endpoint(), "us-east-1"),
        format!("{}/123456789012/no-such-queue", sqs_endpoint()),
    );
    assert!(orders.send("{}".to_owned()).await.is_err());
}

/// A fail-over order crosses to the evacuator's queue as the stream record's JSON, whole.
#[tokio::test]
async fn a_fail_over_order_crosses_the_sqs_peer_whole() {
    let sqs = wsdr_aws::local::sqs_client(&sqs_endpoint(), "us-east-1");
    let url = sqs
        .create_queue()
        .queue_name(common::unique("fast-failovers"))
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let order =
        r#"{"eventID":"1","dynamodb":{"Keys":{"pk":{"S":"JUDGE#abc"},"sk":{"S":"CHANGE"}}}}"#;
    wsdr_aws::SqsFailoverOrders::new(sqs.clone(), &url)
        .send(order.to_owned())
        .await
        .unwrap();
    let received = sqs.receive_message().queue_url(&url).send().await.unwrap();
    let bodies: Vec<&str> = received
        .messages()
        .iter()
        .filter_map(|message| message.body())
        .collect();
    assert_eq!(bodies, [order]);
}

/// A release of a generation the lease has left behind changes nothing and is no error.
#[tokio::test]
async fn a_release_of_an_old_generation_leaves_the_lease_held() {
    let client = common::client();
    let table = common::connections_table(&client).await;
    let leases = DynamoPushLeases::new(client, &table);
    let held = match leases.begin(&topic("a1"), 1_000, 200).await.unwrap() {
        Begin::Started { generation } => generation,
        other => panic!("{other:?}"),
    };
    leases.release(&topic("a1"), held + 1).await.unwrap();
    assert_eq!(
        leases.begin(&topic("a1"), 1_050, 200).await.unwrap(),
        Begin::Marked,
        "still in flight"
    );
}
