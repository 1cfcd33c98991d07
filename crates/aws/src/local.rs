//! Clients for local peers (DynamoDB Local), used by the lab's `--dynamodb` mode and tests.

use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_dynamodb::Client;

/// A DynamoDB client for a local endpoint such as `http://127.0.0.1:8000`, with static
/// placeholder credentials (DynamoDB Local checks the signature format, not the key).
pub fn dynamo_client(endpoint: &str, region: &str) -> Client {
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(region.to_owned()))
        .endpoint_url(endpoint)
        .credentials_provider(Credentials::new("local", "local", None, None, "wsdr-local"))
        .build();
    Client::from_conf(config)
}
