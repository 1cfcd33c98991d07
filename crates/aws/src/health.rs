//! The fast verdict's records, in the state table: a Global Table, so that a record written
//! in one Region is read from the other's replica (the watcher outside a Region reads the
//! Region's own probe rounds; the Region's health endpoint reads the watcher's verdict).
//!
//! | item | pk | sk | attributes |
//! |---|---|---|---|
//! | a vantage point's last probe round | `HEALTH#<apiId>` | `ROUND#<vantage>` | ok, atMs |
//! | the fast verdict on the API's Region | `HEALTH#<apiId>` | `VERDICT` | serve, atMs |
//!
//! Last writer wins per item is exactly right for them: each has one writer, and only the
//! latest matters. The table's stream filter passes `SUMMARY#` keys only, so these never
//! wake the handler.

use crate::classify::classify;
use crate::schema::{PK, SK};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use std::collections::HashMap;
use wsdr_core::Result;

/// A timestamped yes/no: a probe round's result, or a verdict's "serve".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamped {
    pub yes: bool,
    pub at_ms: u64,
}

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

    async fn put(&self, api_id: &str, sk: String, field: &str, value: Stamped) -> Result<()> {
        self.client
            .put_item()
            .table_name(&self.table)
            .item(PK, AttributeValue::S(format!("HEALTH#{api_id}")))
            .item(SK, AttributeValue::S(sk))
            .item(field, AttributeValue::Bool(value.yes))
            .item("atMs", AttributeValue::N(value.at_ms.to_string()))
            .send()
            .await
            .map_err(|e| classify(&e))?;
        Ok(())
    }

    async fn get(&self, api_id: &str, sk: String, field: &str) -> Result<Option<Stamped>> {
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
            Some(Stamped {
                yes: *item.get(field)?.as_bool().ok()?,
                at_ms: item.get("atMs")?.as_n().ok()?.parse().ok()?,
            })
        }))
    }

    /// Record a vantage point's latest probe round.
    pub async fn put_round(&self, api_id: &str, vantage: &str, round: Stamped) -> Result<()> {
        self.put(api_id, format!("ROUND#{vantage}"), "ok", round)
            .await
    }

    /// A vantage point's latest probe round, if any was recorded.
    pub async fn round(&self, api_id: &str, vantage: &str) -> Result<Option<Stamped>> {
        self.get(api_id, format!("ROUND#{vantage}"), "ok").await
    }

    /// Record the fast verdict on the API's Region (`yes` = serve).
    pub async fn put_verdict(&self, api_id: &str, verdict: Stamped) -> Result<()> {
        self.put(api_id, "VERDICT".into(), "serve", verdict).await
    }

    /// The latest fast verdict on the API's Region, if any.
    pub async fn verdict(&self, api_id: &str) -> Result<Option<Stamped>> {
        self.get(api_id, "VERDICT".into(), "serve").await
    }
}

#[async_trait::async_trait]
impl wsdr_core::HealthLedger for HealthRecords {
    async fn put_round(&self, api_id: &str, vantage: &str, ok: bool, at_ms: u64) -> Result<()> {
        HealthRecords::put_round(self, api_id, vantage, Stamped { yes: ok, at_ms }).await
    }

    async fn round(&self, api_id: &str, vantage: &str) -> Result<Option<(bool, u64)>> {
        Ok(HealthRecords::round(self, api_id, vantage)
            .await?
            .map(|s| (s.yes, s.at_ms)))
    }

    async fn put_verdict(&self, api_id: &str, serve: bool, at_ms: u64) -> Result<()> {
        HealthRecords::put_verdict(self, api_id, Stamped { yes: serve, at_ms }).await
    }

    async fn verdict(&self, api_id: &str) -> Result<Option<(bool, u64)>> {
        Ok(HealthRecords::verdict(self, api_id)
            .await?
            .map(|s| (s.yes, s.at_ms)))
    }
}
