//! The regional connections table. Not replicated: a connection id means nothing in the
//! other Region. Items expire by TTL (`expiresAt`, epoch seconds) because `$disconnect` is
//! best effort; reads ignore expired items themselves since TTL deletion is lazy.
//!
//! | item | pk | sk | attributes |
//! |---|---|---|---|
//! | connection | `<connectionId>` | `META` | userId, connectedAt, expiresAt |
//! | subscription | `<connectionId>` | `SUB#<auctionId>` | auctionId (GSI `by-topic`), auctionShard `<auctionId>#<shard>` (GSI `by-topic-shard`), userId, expiresAt |
//! | census | `#census` | `CENSUS` | connections, countedAt (ms): the last count of live connections |
//!
//! A connection id never starts with `#` (API Gateway's ids are base64 without it), so the
//! census item can never collide with a connection, and `all` skips it by its sort key.

use crate::classify::classify;
use crate::schema::{
    topic_shard, AUCTION_ID, AUCTION_SHARD, BY_AUCTION_SHARD_INDEX, EXPIRES_AT, PK, SK,
};
use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, DeleteRequest, WriteRequest};
use aws_sdk_dynamodb::Client;
use aws_smithy_async::future::pagination_stream::PaginationStream;
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use std::collections::HashMap;
use std::time::Duration;
use wsdr_core::{Census, ConnectionId, Connections, Error, Result, UserId};

const CENSUS_PK: &str = "#census";
const CENSUS_SK: &str = "CENSUS";
const CENSUS_CONNECTIONS: &str = "connections";
const CENSUS_COUNTED_AT: &str = "countedAt";
use wsdr_protocol::Topic;

/// [`Connections`] on a regional DynamoDB table with TTL.
#[derive(Debug, Clone)]
pub struct DynamoConnections {
    client: Client,
    table: String,
    ttl: Duration,
}

impl DynamoConnections {
    pub fn new(client: Client, table: impl Into<String>, ttl: Duration) -> Self {
        Self {
            client,
            table: table.into(),
            ttl,
        }
    }

    fn expires_at_secs(&self, now_ms: u64) -> u64 {
        (now_ms / 1000).saturating_add(self.ttl.as_secs())
    }

    async fn put(&self, item: HashMap<String, AttributeValue>) -> Result<()> {
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send()
            .await
            .map_err(|e| classify(&e))?;
        Ok(())
    }
}

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn n(v: u64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

/// The connection an item names, if its record is still live: the filter expression already
/// asks for that, and the check here keeps a reader honest whatever the query said.
fn live_connection_id(
    item: &HashMap<String, AttributeValue>,
    now_secs: u64,
) -> Option<ConnectionId> {
    let live = item
        .get(EXPIRES_AT)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .is_some_and(|exp| exp > now_secs);
    let id = item.get(PK)?.as_s().ok()?;
    live.then(|| ConnectionId::new(id.as_str()).ok()).flatten()
}

/// Retries of a batch delete's unprocessed items before giving up (TTL cleans up after).
const UNPROCESSED_RETRIES: u32 = 3;

#[async_trait]
impl Connections for DynamoConnections {
    async fn register(&self, connection: &ConnectionId, user: &UserId, now_ms: u64) -> Result<()> {
        self.put(HashMap::from([
            (PK.into(), s(connection.as_str())),
            (SK.into(), s("META")),
            ("userId".into(), s(user.as_str())),
            ("connectedAt".into(), n(now_ms)),
            (EXPIRES_AT.into(), n(self.expires_at_secs(now_ms))),
        ]))
        .await
    }

    async fn subscribe(
        &self,
        connection: &ConnectionId,
        user: &UserId,
        topic: &Topic,
        now_ms: u64,
    ) -> Result<()> {
        self.put(HashMap::from([
            (PK.into(), s(connection.as_str())),
            (SK.into(), s(format!("SUB#{topic}"))),
            (AUCTION_ID.into(), s(topic.to_string())),
            (
                AUCTION_SHARD.into(),
                s(topic_shard(topic, wsdr_core::push::shard_of(connection))),
            ),
            ("userId".into(), s(user.as_str())),
            (EXPIRES_AT.into(), n(self.expires_at_secs(now_ms))),
        ]))
        .await
    }

    async fn subscribers(&self, topic: &Topic, now_ms: u64) -> Result<Vec<ConnectionId>> {
        // Every shard, page by page (the pushes read one page of one shard at a time).
        let mut out = Vec::new();
        for shard in 0..wsdr_core::SUBSCRIBER_SHARDS {
            let mut after: Option<ConnectionId> = None;
            loop {
                let page = self
                    .subscribers_page(topic, shard, after.as_ref(), 1_000, now_ms)
                    .await?;
                out.extend(page.connections);
                match page.resume_after {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
        }
        Ok(out)
    }

    async fn subscribers_page(
        &self,
        topic: &Topic,
        shard: u16,
        after: Option<&ConnectionId>,
        limit: usize,
        now_ms: u64,
    ) -> Result<wsdr_core::SubscriberPage> {
        let now_secs = now_ms / 1000;
        let shard_key = topic_shard(topic, shard);
        // A GSI query resumes from the index's keys and the table's.
        let start = after.map(|connection| {
            HashMap::from([
                (AUCTION_SHARD.to_owned(), s(&shard_key)),
                (PK.to_owned(), s(connection.as_str())),
                (SK.to_owned(), s(format!("SUB#{topic}"))),
            ])
        });
        let page = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(BY_AUCTION_SHARD_INDEX)
            .key_condition_expression("#shard = :shard")
            .filter_expression("#expires > :now")
            .expression_attribute_names("#shard", AUCTION_SHARD)
            .expression_attribute_names("#expires", EXPIRES_AT)
            .expression_attribute_values(":shard", s(&shard_key))
            .expression_attribute_values(":now", n(now_secs))
            .limit(i32::try_from(limit.max(1)).unwrap_or(i32::MAX))
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(|e| classify(&e))?;
        let connections = page
            .items
            .unwrap_or_default()
            .iter()
            .filter_map(|item| live_connection_id(item, now_secs))
            .collect();
        let resume_after = page
            .last_evaluated_key
            .as_ref()
            .and_then(|key| key.get(PK))
            .and_then(|pk| pk.as_s().ok())
            .and_then(|pk| ConnectionId::new(pk.as_str()).ok());
        Ok(wsdr_core::SubscriberPage {
            connections,
            resume_after,
        })
    }

    async fn remove(&self, connection: &ConnectionId) -> Result<()> {
        let mut pages = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", s(connection.as_str()))
            .projection_expression("pk, sk")
            .into_paginator()
            .items()
            .send();
        let mut deletes = Vec::new();
        while let Some(item) = pages.next().await {
            let item = item.map_err(|e| classify(&e))?;
            let key: HashMap<String, AttributeValue> = item
                .into_iter()
                .filter(|(k, _)| k == PK || k == SK)
                .collect();
            let request = DeleteRequest::builder()
                .set_key(Some(key))
                .build()
                .map_err(|e| Error::Internal(e.to_string()))?;
            deletes.push(WriteRequest::builder().delete_request(request).build());
        }
        for chunk in deletes.chunks(25) {
            let mut pending = chunk.to_vec();
            for attempt in 0..=UNPROCESSED_RETRIES {
                let out = self
                    .client
                    .batch_write_item()
                    .request_items(&self.table, pending)
                    .send()
                    .await
                    .map_err(|e| classify(&e))?;
                pending = out
                    .unprocessed_items
                    .and_then(|mut m| m.remove(&self.table))
                    .unwrap_or_default();
                if pending.is_empty() {
                    break;
                }
                if attempt == UNPROCESSED_RETRIES {
                    return Err(Error::Throttled(format!(
                        "{} connection items left unprocessed",
                        pending.len()
                    )));
                }
                tokio::time::sleep(Duration::from_millis(20 << attempt)).await;
            }
        }
        Ok(())
    }

    /// A scan of the connection records (`sk = META`) still live. The table is regional
    /// and holds only this Region's connections and subscriptions, so a scan reads about
    /// one item per connection and one per subscription.
    async fn all(&self, now_ms: u64) -> Result<Vec<ConnectionId>> {
        let now_secs = now_ms / 1000;
        let pages = self
            .client
            .scan()
            .table_name(&self.table)
            .filter_expression("#sk = :meta AND #expires > :now")
            .projection_expression("#pk, #expires")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#sk", SK)
            .expression_attribute_names("#expires", EXPIRES_AT)
            .expression_attribute_values(":meta", s("META"))
            .expression_attribute_values(":now", n(now_secs))
            .into_paginator()
            .items()
            .send();
        live_connection_ids(pages, now_secs).await
    }

    async fn census(&self) -> Result<Option<Census>> {
        let item = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, s(CENSUS_PK))
            .key(SK, s(CENSUS_SK))
            .send()
            .await
            .map_err(|e| classify(&e))?
            .item;
        let number = |item: &HashMap<String, AttributeValue>, field: &str| {
            item.get(field)
                .and_then(|v| v.as_n().ok())
                .and_then(|v| v.parse::<u64>().ok())
        };
        Ok(item.and_then(|item| {
            Some(Census {
                connections: number(&item, CENSUS_CONNECTIONS)?,
                counted_at_ms: number(&item, CENSUS_COUNTED_AT)?,
            })
        }))
    }

    async fn take_census(&self, now_ms: u64) -> Result<Census> {
        let now_secs = now_ms / 1000;
        let mut connections = 0u64;
        let mut start: Option<HashMap<String, AttributeValue>> = None;
        loop {
            // Select=COUNT: the pages carry counts, not items (the same read units as `all`).
            let page = self
                .client
                .scan()
                .table_name(&self.table)
                .select(aws_sdk_dynamodb::types::Select::Count)
                .filter_expression("#sk = :meta AND #expires > :now")
                .expression_attribute_names("#sk", SK)
                .expression_attribute_names("#expires", EXPIRES_AT)
                .expression_attribute_values(":meta", s("META"))
                .expression_attribute_values(":now", n(now_secs))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| classify(&e))?;
            connections += u64::try_from(page.count).unwrap_or(0);
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => break,
            }
        }
        let census = Census {
            connections,
            counted_at_ms: now_ms,
        };
        self.put(HashMap::from([
            (PK.to_owned(), s(CENSUS_PK)),
            (SK.to_owned(), s(CENSUS_SK)),
            (CENSUS_CONNECTIONS.to_owned(), n(connections)),
            (CENSUS_COUNTED_AT.to_owned(), n(now_ms)),
        ]))
        .await?;
        Ok(census)
    }
}

/// The live connection ids among the items of a query's or a scan's pages; a page that fails
/// fails the whole read, classified.
async fn live_connection_ids<E>(
    mut items: PaginationStream<Result<HashMap<String, AttributeValue>, SdkError<E, HttpResponse>>>,
    now_secs: u64,
) -> Result<Vec<ConnectionId>>
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let mut out = Vec::new();
    while let Some(item) = items.next().await {
        let item = item.map_err(|e| classify(&e))?;
        out.extend(live_connection_id(&item, now_secs));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn record(expires_at: u64) -> HashMap<String, AttributeValue> {
        HashMap::from([
            (PK.to_owned(), AttributeValue::S("abc=".into())),
            (
                EXPIRES_AT.to_owned(),
                AttributeValue::N(expires_at.to_string()),
            ),
        ])
    }

    #[test]
    fn a_record_is_live_until_the_second_it_expires() {
        let id = Some(ConnectionId::new("abc=").unwrap());
        assert_eq!(live_connection_id(&record(1_000), 999), id);
        assert_eq!(live_connection_id(&record(1_000), 1_000), None);
        assert_eq!(live_connection_id(&record(1_000), 1_001), None);
        let mut unstamped = record(1_000);
        unstamped.remove(EXPIRES_AT);
        assert_eq!(
            live_connection_id(&unstamped, 0),
            None,
            "no expiry, not live"
        );
    }
}
