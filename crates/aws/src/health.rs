//! The fast verdicts' records, in the state table. Each item has one writer, in one Region,
//! and is read in that same Region (docs/DEPLOY.md, "Who decides"); the partition key says
//! whose it is, so that each writer's role is scoped to its own prefix by
//! `dynamodb:LeadingKeys` (template.yaml) and nobody else can write a verdict or a change:
//!
//! | item | pk | sk | attributes | written by, where |
//! |---|---|---|---|---|
//! | a probe round of the Region's own canary | `HEALTH#<apiId>` | `ROUND` | ok, atMs | the Region's canary, in it |
//! | its verdict on its own Region | `HEALTH#<apiId>` | `VERDICT` | serve, atMs | the same |
//! | that verdict's last change | `HEALTH#<apiId>` | `CHANGE` | serve, atMs | the same |
//! | a probe round of the watcher | `JUDGE#<apiId>` | `ROUND` | ok, atMs | the watcher, in the judge |
//! | the judge's verdict on the primary | `JUDGE#<apiId>` | `VERDICT` | serve, atMs | the same |
//! | that verdict's last change: the fail-over order | `JUDGE#<apiId>` | `CHANGE` | serve, atMs | the same |
//!
//! Last writer wins per item is exactly right for them: each has one writer, and only the
//! latest matters. The handler's stream filter (the stream's one reader) passes `SUMMARY#`
//! keys and, in the secondary, the judge's `CHANGE` on the primary when it says fail over,
//! which it forwards to the evacuator's queue.

use crate::classify::classify;
use crate::schema::{PK, SK};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use std::collections::HashMap;
use wsdr_core::{Result, VerdictSource};

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
        (api_id, source): (&str, VerdictSource),
        sk: &str,
        field: &str,
        (yes, at_ms): (bool, u64),
    ) -> Result<()> {
        self.client
            .put_item()
            .table_name(&self.table)
            .item(PK, AttributeValue::S(pk(api_id, source)))
            .item(SK, AttributeValue::S(sk.to_owned()))
            .item(field, AttributeValue::Bool(yes))
            .item("atMs", AttributeValue::N(at_ms.to_string()))
            .send()
            .await
            .map_err(|e| classify(&e))?;
        Ok(())
    }

    async fn get(
        &self,
        (api_id, source): (&str, VerdictSource),
        sk: &str,
        field: &str,
    ) -> Result<Option<(bool, u64)>> {
        let item = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, AttributeValue::S(pk(api_id, source)))
            .key(SK, AttributeValue::S(sk.to_owned()))
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

/// The partition key of `source`'s records about `api_id`.
pub fn pk(api_id: &str, source: VerdictSource) -> String {
    format!("{}{api_id}", source.key_prefix())
}

#[async_trait::async_trait]
impl wsdr_core::HealthLedger for HealthRecords {
    async fn put_round(
        &self,
        api_id: &str,
        source: VerdictSource,
        ok: bool,
        at_ms: u64,
    ) -> Result<()> {
        self.put((api_id, source), "ROUND", "ok", (ok, at_ms)).await
    }

    async fn put_verdict(
        &self,
        api_id: &str,
        source: VerdictSource,
        serve: bool,
        at_ms: u64,
    ) -> Result<()> {
        self.put((api_id, source), "VERDICT", "serve", (serve, at_ms))
            .await
    }

    async fn verdict(&self, api_id: &str, source: VerdictSource) -> Result<Option<(bool, u64)>> {
        self.get((api_id, source), "VERDICT", "serve").await
    }

    async fn put_change(
        &self,
        api_id: &str,
        source: VerdictSource,
        serve: bool,
        at_ms: u64,
    ) -> Result<()> {
        self.put((api_id, source), "CHANGE", "serve", (serve, at_ms))
            .await
    }

    async fn last_change(
        &self,
        api_id: &str,
        source: VerdictSource,
    ) -> Result<Option<(bool, u64)>> {
        self.get((api_id, source), "CHANGE", "serve").await
    }
}
