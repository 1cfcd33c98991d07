//! The two tables, as code: key names shared by the adapters, and `create_*` functions that
//! make tables identical to `template.yaml`'s (for DynamoDB Local in tests and the lab).

use crate::classify::classify;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, TimeToLiveSpecification,
};
use aws_sdk_dynamodb::Client;

/// Partition key attribute of both tables.
pub const PK: &str = "pk";
/// Sort key attribute of both tables.
pub const SK: &str = "sk";
/// State table: the GSI that lists one bidder's bid copies in one auction newest first
/// (`pk` as the table's, sort key [`BID_AT`]); sparse: only bid copies carry `at`.
pub const BY_TIME_INDEX: &str = "by-time";
/// State table: the GSI that reads one log of a topic in position order (`getState` with
/// `since`, a stream app's history): hash [`LOG`], range `position`.
pub const BY_POSITION_INDEX: &str = "by-position";
/// State table: the log an op copy is in, `<ns>#<topic>#<log>` (the accepting Region, or
/// `global` for strong mode's head), only on copy items: the key of [`BY_POSITION_INDEX`].
pub const LOG: &str = "log";
/// State table: an op copy's position in its log (a number).
pub const POSITION: &str = "position";
/// State table: a bid copy's acceptance time (epoch ms, a number), sort key of
/// [`BY_TIME_INDEX`].
pub const BID_AT: &str = "at";
/// Connections table: TTL attribute (epoch seconds).
pub const EXPIRES_AT: &str = "expiresAt";
/// Connections table: a subscription's topic (`<ns>:<name>`), written for the template's older
/// `by-auction` index (no longer read; it goes in the next release). The attribute and index
/// names are the first app's: renaming an index is dropping it and building another on a
/// live table, for a name, so they stay and hold any app's topic.
pub const AUCTION_ID: &str = "auctionId";
/// Connections table: the GSI that pages one shard of a topic's subscribed connections
/// (the push workers' read; `wsdr_core::push`).
pub const BY_AUCTION_SHARD_INDEX: &str = "by-auction-shard";
/// Connections table: partition key of [`BY_AUCTION_SHARD_INDEX`]:
/// `<topic>#<shard>` (only on subscription items).
pub const AUCTION_SHARD: &str = "auctionShard";

/// The [`AUCTION_SHARD`] value of one shard of a topic.
pub fn topic_shard(topic: &wsdr_protocol::Topic, shard: u16) -> String {
    format!("{topic}#{shard}")
}

fn key(name: &str, kind: KeyType) -> Result<KeySchemaElement, wsdr_core::Error> {
    KeySchemaElement::builder()
        .attribute_name(name)
        .key_type(kind)
        .build()
        .map_err(|e| wsdr_core::Error::Internal(e.to_string()))
}

fn attribute(name: &str) -> Result<AttributeDefinition, wsdr_core::Error> {
    AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(ScalarAttributeType::S)
        .build()
        .map_err(|e| wsdr_core::Error::Internal(e.to_string()))
}

/// The global state table: `pk`/`sk`, on-demand, GSI `by-time` on `pk`/`at` and GSI
/// `by-position` on `log`/`position` (as the template's).
pub async fn create_state_table(client: &Client, name: &str) -> Result<(), wsdr_core::Error> {
    let by_position = GlobalSecondaryIndex::builder()
        .index_name(BY_POSITION_INDEX)
        .key_schema(key(LOG, KeyType::Hash)?)
        .key_schema(key(POSITION, KeyType::Range)?)
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::All)
                .build(),
        )
        .build()
        .map_err(|e| wsdr_core::Error::Internal(e.to_string()))?;
    let by_time = GlobalSecondaryIndex::builder()
        .index_name(BY_TIME_INDEX)
        .key_schema(key(PK, KeyType::Hash)?)
        .key_schema(key(BID_AT, KeyType::Range)?)
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::All)
                .build(),
        )
        .build()
        .map_err(|e| wsdr_core::Error::Internal(e.to_string()))?;
    client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attribute(PK)?)
        .attribute_definitions(attribute(SK)?)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name(BID_AT)
                .attribute_type(ScalarAttributeType::N)
                .build()
                .map_err(|e| wsdr_core::Error::Internal(e.to_string()))?,
        )
        .attribute_definitions(attribute(LOG)?)
        .attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name(POSITION)
                .attribute_type(ScalarAttributeType::N)
                .build()
                .map_err(|e| wsdr_core::Error::Internal(e.to_string()))?,
        )
        .key_schema(key(PK, KeyType::Hash)?)
        .key_schema(key(SK, KeyType::Range)?)
        .global_secondary_indexes(by_time)
        .global_secondary_indexes(by_position)
        .send()
        .await
        .map_err(|e| classify(&e))?;
    Ok(())
}

/// The regional connections table: `pk` = connection id, `sk` = `META` or
/// `SUB#<auctionId>`, GSI `by-auction-shard` on `auctionShard`/`pk`, TTL on `expiresAt`. (The
/// template's table also keeps the `by-auction` index, no longer read, for one release.)
pub async fn create_connections_table(client: &Client, name: &str) -> Result<(), wsdr_core::Error> {
    let by_shard = GlobalSecondaryIndex::builder()
        .index_name(BY_AUCTION_SHARD_INDEX)
        .key_schema(key(AUCTION_SHARD, KeyType::Hash)?)
        .key_schema(key(PK, KeyType::Range)?)
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::Include)
                .non_key_attributes(EXPIRES_AT)
                .build(),
        )
        .build()
        .map_err(|e| wsdr_core::Error::Internal(e.to_string()))?;
    client
        .create_table()
        .table_name(name)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attribute(PK)?)
        .attribute_definitions(attribute(SK)?)
        .attribute_definitions(attribute(AUCTION_SHARD)?)
        .key_schema(key(PK, KeyType::Hash)?)
        .key_schema(key(SK, KeyType::Range)?)
        .global_secondary_indexes(by_shard)
        .send()
        .await
        .map_err(|e| classify(&e))?;
    client
        .update_time_to_live()
        .table_name(name)
        .time_to_live_specification(
            TimeToLiveSpecification::builder()
                .enabled(true)
                .attribute_name(EXPIRES_AT)
                .build()
                .map_err(|e| wsdr_core::Error::Internal(e.to_string()))?,
        )
        .send()
        .await
        .map_err(|e| classify(&e))?;
    Ok(())
}
