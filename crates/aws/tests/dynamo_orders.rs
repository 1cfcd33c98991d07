#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! DynamoOrderLog against DynamoDB Local: each fail-over order runs once however often it is
//! delivered; a run that died is taken over once it is stale; a finished order never runs
//! again; every item leaves by TTL a week after it was written.

mod common;

use wsdr_aws::DynamoOrderLog;
use wsdr_core::OrderLog;

const NOW: u64 = 1_767_225_600_000;
const STALE: u64 = 300_000;

#[tokio::test]
async fn an_order_is_claimed_once_taken_over_when_stale_and_never_again_once_finished() {
    let client = common::client();
    let table = common::connections_table(&client).await;
    let orders = DynamoOrderLog::new(client.clone(), &table);
    assert!(
        orders.claim("o1", NOW, STALE).await.unwrap(),
        "first delivery"
    );
    assert!(
        !orders.claim("o1", NOW + 1_000, STALE).await.unwrap(),
        "a redelivery"
    );
    assert!(
        !orders.claim("o1", NOW + STALE, STALE).await.unwrap(),
        "claimed exactly stale_ms ago: not yet stale"
    );
    assert!(
        orders.claim("o1", NOW + STALE + 1, STALE).await.unwrap(),
        "the run died: taken over"
    );
    assert!(
        orders.claim("o2", NOW, STALE).await.unwrap(),
        "another order"
    );
    orders.finish("o1", NOW + STALE + 2).await.unwrap();
    assert!(
        !orders.claim("o1", NOW + 10 * STALE, STALE).await.unwrap(),
        "finished: never again"
    );

    let item = client
        .get_item()
        .table_name(&table)
        .key(
            "pk",
            aws_sdk_dynamodb::types::AttributeValue::S("#order#o1".into()),
        )
        .key(
            "sk",
            aws_sdk_dynamodb::types::AttributeValue::S("ORDER".into()),
        )
        .send()
        .await
        .unwrap()
        .item
        .expect("the order's item");
    assert_eq!(item["done"].as_bool().unwrap(), &true);
    let written_secs = (NOW + STALE + 2) / 1000;
    assert_eq!(
        item["expiresAt"].as_n().unwrap(),
        &(written_secs + 7 * 24 * 3_600).to_string(),
        "a week after it was written"
    );
}

#[tokio::test]
async fn a_claim_on_a_missing_table_is_an_error_not_a_refusal() {
    let orders = DynamoOrderLog::new(common::client(), common::unique("absent"));
    assert!(orders.claim("o1", NOW, STALE).await.is_err());
}
