//! What the evacuator's tests on DynamoDB Local share.
#![allow(dead_code, clippy::unwrap_used, clippy::panic)]

/// DynamoDB Local's endpoint, which `make test` starts.
pub fn dynamo_endpoint() -> String {
    std::env::var("DYNAMODB_ENDPOINT").unwrap_or_else(|_| {
        panic!("DYNAMODB_ENDPOINT is not set: run these tests with `make test`, which starts DynamoDB Local")
    })
}

/// A new connections table on DynamoDB Local, named `<prefix>-<now in ns>`.
pub async fn connections_table(client: &wsdr_aws::DynamoClient, prefix: &str) -> String {
    let table = format!(
        "{prefix}-{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    wsdr_aws::schema::create_connections_table(client, &table)
        .await
        .unwrap();
    table
}
