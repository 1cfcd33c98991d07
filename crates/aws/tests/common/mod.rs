//! Shared by the DynamoDB Local tests. `make test` starts DynamoDB Local on a free port and
//! exports DYNAMODB_ENDPOINT (scripts/with-dynamodb-local.sh).
#![allow(dead_code, clippy::expect_used, clippy::panic)]

use aws_sdk_dynamodb::Client;
use rand::Rng;

pub fn endpoint() -> String {
    std::env::var("DYNAMODB_ENDPOINT").unwrap_or_else(|_| {
        panic!(
            "DYNAMODB_ENDPOINT is not set: these tests run against DynamoDB Local. \
             Run them with `make test` (or scripts/with-dynamodb-local.sh cargo test)."
        )
    })
}

pub fn client() -> Client {
    wsdr_aws::local::dynamo_client(&endpoint(), "us-east-1")
}

/// A table name no other test uses (tests share one DynamoDB Local).
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{:016x}", rand::rng().random::<u64>())
}

pub async fn state_table(client: &Client) -> String {
    let name = unique("state");
    wsdr_aws::schema::create_state_table(client, &name)
        .await
        .expect("create state table");
    name
}

pub async fn connections_table(client: &Client) -> String {
    let name = unique("connections");
    wsdr_aws::schema::create_connections_table(client, &name)
        .await
        .expect("create connections table");
    name
}

/// Every item of a table, sorted by key.
pub async fn scan(
    client: &Client,
    table: &str,
) -> Vec<std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>> {
    let mut items: Vec<_> = client
        .scan()
        .table_name(table)
        .consistent_read(true)
        .into_paginator()
        .items()
        .send()
        .collect::<Result<Vec<_>, _>>()
        .await
        .expect("scan");
    items.sort_by_key(|i| format!("{:?}{:?}", i.get("pk"), i.get("sk")));
    items
}
