//! The fast verdict's records, in the state table: a Global Table, so that a record written
//! in one Region is read from the other's replica (the watcher outside a Region reads the
//! Region's own probe rounds; the Region's health endpoint reads the watcher's verdict).
//!
//! | item | pk | sk | attributes |
//! |---|---|---|---|
//! | a vantage point's last probe round | `HEALTH#<apiId>` | `ROUND#<vantage>` | ok, atMs |
//! | the fast verdict on the API's Region | `HEALTH#<apiId>` | `VERDICT` | serve, atMs |
//! | the verdict's last change | `HEALTH#<apiId>` | `CHANGE` | serve, atMs |
//!
//! Last writer wins per item is exactly right for them: each has one writer, and only the
//! latest matters. The handler's stream filter (the stream's one reader) passes `SUMMARY#`
//! keys and, in the secondary with `HealthCheckType=endpoint`, the primary's `CHANGE` items
//! that say fail over, which it forwards to the evacuator's queue.

use crate::classify::classify;
use crate::schema::{PK, SK};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use std::collections::HashMap;
use wsdr_core::Result;

/// The health records of the state table.
#[derive(Debug, Clone)]
pub struct HealthRecords {
    client: Client,
    table: String,
}

impl HealthRecords {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    async fn put(
        &self,
        api_id: &str,
        sk: String,
        field: &str,
        (yes, at_ms): (bool, u64),
    ) -> Result<()> {
        self.client
            .put_item()
            .table_name(&self.table)
            .item(PK, AttributeValue::S(format!("HEALTH#{api_id}")))
            .item(SK, AttributeValue::S(sk))
            .item(field, AttributeValue::Bool(yes))
            .item("atMs", AttributeValue::N(at_ms.to_string()))
            .send()
            .await
            .map_err(|e| classify(&e))?;
        Ok(())
    }

    async fn get(&self, api_id: &str, sk: String, field: &str) -> Result<Option<(bool, u64)>> {
        let item = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, AttributeValue::S(format!("HEALTH#{api_id}")))
            .key(SK, AttributeValue::S(sk))
            .send()
            .await
            .map_err(|e| classify(&e))?
            .item;
        Ok(item.and_then(|item: HashMap<String, AttributeValue>| {
            Some((
                *item.get(field)?.as_bool().ok()?,
                item.get("atMs")?.as_n().ok()?.parse().ok()?,
            ))
        }))
    }
}

#[async_trait::async_trait]
impl wsdr_core::HealthLedger for HealthRecords {
    async fn put_round(&self, api_id: &str, vantage: &str, ok: bool, at_ms: u64) -> Result<()> {
        self.put(api_id, format!("ROUND#{vantage}"), "ok", (ok, at_ms))
            .await
    }

    async fn round(&self, api_id: &str, vantage: &str) -> Result<Option<(bool, u64)>> {
        self.get(api_id, format!("ROUND#{vantage}"), "ok").await
    }

    async fn put_verdict(&self, api_id: &str, serve: bool, at_ms: u64) -> Result<()> {
        self.put(api_id, "VERDICT".into(), "serve", (serve, at_ms))
            .await
    }

    async fn verdict(&self, api_id: &str) -> Result<Option<(bool, u64)>> {
        self.get(api_id, "VERDICT".into(), "serve").await
    }

    async fn put_change(&self, api_id: &str, serve: bool, at_ms: u64) -> Result<()> {
        self.put(api_id, "CHANGE".into(), "serve", (serve, at_ms))
            .await
    }

    async fn last_change(&self, api_id: &str) -> Result<Option<(bool, u64)>> {
        self.get(api_id, "CHANGE".into(), "serve").await
    }
}
