//! The push leases ([`wsdr_core::push::PushLeases`]) as one item per topic in the Regional
//! connections table: the stream's reader and the push workers are different invocations, and
//! only a conditional update decides between them.
//!
//! | item | pk | sk | attributes |
//! |---|---|---|---|
//! | push lease | `#push#<auctionId>` | `PUSH` | generation, jobs, startedMs, audience, pending, nextMs, expiresAt |
//!
//! Each rule of [`wsdr_core::push::LeaseBook`] is one condition here (the same contract test
//! runs against both). A lease item expires a day after its last change (TTL): an idle
//! topic's lease holds nothing a fresh one would not. The connections table is not
//! replicated, so each Region's pushes have their own leases, as they have their own
//! subscribers.

use crate::classify::classify;
use crate::schema::{EXPIRES_AT, PK, SK};
use async_trait::async_trait;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use aws_sdk_dynamodb::Client;
use std::collections::HashMap;
use wsdr_core::push::{Begin, Finished, PushLeases, LEASE_STALE, SUBSCRIBER_SHARDS};
use wsdr_core::Result;
use wsdr_protocol::Topic;

const LEASE_SK: &str = "PUSH";
const GENERATION: &str = "generation";
const JOBS: &str = "jobs";
const STARTED: &str = "startedMs";
const AUDIENCE: &str = "audience";
const PENDING: &str = "pending";
const NEXT: &str = "nextMs";
/// How long an untouched lease item lives.
const LEASE_TTL_SECS: u64 = 24 * 60 * 60;
/// Attempts of a begin whose two conditions both failed (the lease changed in between).
const BEGIN_ATTEMPTS: usize = 4;

/// [`PushLeases`] on the Regional connections table.
#[derive(Debug, Clone)]
pub struct DynamoPushLeases {
    client: Client,
    table: String,
}

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn n(v: impl ToString) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

fn number(item: &HashMap<String, AttributeValue>, field: &str) -> u64 {
    item.get(field)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0)
}

fn flag(item: &HashMap<String, AttributeValue>, field: &str) -> bool {
    item.get(field)
        .and_then(|v| v.as_bool().ok())
        .copied()
        .unwrap_or(false)
}

fn failed_condition<R>(error: &SdkError<UpdateItemError, R>) -> bool {
    matches!(
        error.as_service_error(),
        Some(UpdateItemError::ConditionalCheckFailedException(_))
    )
}

impl DynamoPushLeases {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    /// An update of the lease item that names `#jobs` and `:zero` (every rule reads the
    /// outstanding jobs); DynamoDB refuses names and values an expression does not use.
    fn update(&self, topic: &Topic) -> UpdateBuilder {
        self.client
            .update_item()
            .table_name(&self.table)
            .key(PK, s(format!("#push#{topic}")))
            .key(SK, s(LEASE_SK))
            .expression_attribute_names("#jobs", JOBS)
            .expression_attribute_values(":zero", n(0))
            .return_values(ReturnValue::AllNew)
    }

    /// [`Self::update`], also naming `#gen`.
    fn update_generation(&self, topic: &Topic) -> UpdateBuilder {
        self.update(topic)
            .expression_attribute_names("#gen", GENERATION)
    }

    /// [`Self::update`], also naming `#expires` and `:expires` (a day from `now_ms`).
    fn update_expiring(&self, topic: &Topic, now_ms: u64) -> UpdateBuilder {
        self.update(topic)
            .expression_attribute_names("#expires", EXPIRES_AT)
            .expression_attribute_values(
                ":expires",
                n((now_ms / 1000).saturating_add(LEASE_TTL_SECS)),
            )
    }

    async fn read(&self, topic: &Topic) -> Result<HashMap<String, AttributeValue>> {
        Ok(self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, s(format!("#push#{topic}")))
            .key(SK, s(LEASE_SK))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| classify(&e))?
            .item
            .unwrap_or_default())
    }
}

type UpdateBuilder = aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;

/// The instant at or before which a push's start makes its lease stale (signed: early clocks
/// have none).
fn stale_before(now_ms: u64) -> i128 {
    i128::from(now_ms) - LEASE_STALE.as_millis() as i128
}

#[async_trait]
impl PushLeases for DynamoPushLeases {
    async fn begin(&self, topic: &Topic, now_ms: u64, window_ms: u64) -> Result<Begin> {
        for _ in 0..BEGIN_ATTEMPTS {
            let start = self
                .update_expiring(topic, now_ms)
                .expression_attribute_names("#gen", GENERATION)
                .update_expression(
                    "SET #gen = if_not_exists(#gen, :zero) + :one, #jobs = :shards, \
                     #started = :now, #aud = :zero, #pending = :false, #next = :first_next, \
                     #expires = :expires",
                )
                // No push, or none in flight and the spacing over, or the one in flight stale.
                .condition_expression(
                    "attribute_not_exists(#jobs) OR (#jobs <= :zero AND #next <= :now) \
                     OR (#jobs > :zero AND #started <= :stale)",
                )
                .expression_attribute_names("#started", STARTED)
                .expression_attribute_names("#aud", AUDIENCE)
                .expression_attribute_names("#pending", PENDING)
                .expression_attribute_names("#next", NEXT)
                .expression_attribute_values(":one", n(1))
                .expression_attribute_values(":shards", n(SUBSCRIBER_SHARDS))
                .expression_attribute_values(":now", n(now_ms))
                .expression_attribute_values(":false", AttributeValue::Bool(false))
                .expression_attribute_values(":first_next", n(now_ms.saturating_add(window_ms)))
                .expression_attribute_values(":stale", n(stale_before(now_ms)))
                .send()
                .await;
            match start {
                Ok(out) => {
                    let item = out.attributes.unwrap_or_default();
                    return Ok(Begin::Started {
                        generation: number(&item, GENERATION),
                    });
                }
                Err(e) if failed_condition(&e) => {}
                Err(e) => return Err(classify(&e)),
            }
            // A push is in flight (and not stale): mark the change for its last job.
            let mark = self
                .update_expiring(topic, now_ms)
                .update_expression("SET #pending = :true, #expires = :expires")
                .condition_expression("#jobs > :zero AND #started > :stale")
                .expression_attribute_names("#started", STARTED)
                .expression_attribute_names("#pending", PENDING)
                .expression_attribute_values(":true", AttributeValue::Bool(true))
                .expression_attribute_values(":stale", n(stale_before(now_ms)))
                .send()
                .await;
            match mark {
                Ok(_) => return Ok(Begin::Marked),
                Err(e) if failed_condition(&e) => {}
                Err(e) => return Err(classify(&e)),
            }
            // Neither: nothing in flight and the spacing not over, or the lease changed
            // between the two updates (then try again).
            let item = self.read(topic).await?;
            let next = number(&item, NEXT);
            if number(&item, JOBS) == 0 && now_ms < next {
                return Ok(Begin::NotBefore(next));
            }
        }
        Err(wsdr_core::Error::Transient(format!(
            "the push lease of {topic} changed under every attempt"
        )))
    }

    async fn record(
        &self,
        topic: &Topic,
        generation: u64,
        targets: u64,
        job_done: bool,
    ) -> Result<Option<Finished>> {
        let out = self
            .update_generation(topic)
            .update_expression("SET #aud = #aud + :targets, #jobs = #jobs - :done")
            .condition_expression("#gen = :gen AND #jobs > :zero")
            .expression_attribute_names("#aud", AUDIENCE)
            .expression_attribute_values(":targets", n(targets))
            .expression_attribute_values(":done", n(u8::from(job_done)))
            .expression_attribute_values(":gen", n(generation))
            .send()
            .await;
        let item = match out {
            Ok(out) => out.attributes.unwrap_or_default(),
            Err(e) if failed_condition(&e) => return Ok(None),
            Err(e) => return Err(classify(&e)),
        };
        Ok((job_done && number(&item, JOBS) == 0).then(|| Finished {
            started_ms: number(&item, STARTED),
            audience: number(&item, AUDIENCE),
        }))
    }

    async fn close(&self, topic: &Topic, generation: u64, next_ms: u64) -> Result<bool> {
        let out = self
            .update_generation(topic)
            .update_expression("SET #next = :next")
            .condition_expression("#gen = :gen AND #jobs <= :zero")
            .expression_attribute_names("#next", NEXT)
            .expression_attribute_values(":next", n(next_ms))
            .expression_attribute_values(":gen", n(generation))
            .send()
            .await;
        match out {
            Ok(out) => Ok(flag(&out.attributes.unwrap_or_default(), PENDING)),
            Err(e) if failed_condition(&e) => Ok(false),
            Err(e) => Err(classify(&e)),
        }
    }

    async fn release(&self, topic: &Topic, generation: u64) -> Result<()> {
        let out = self
            .update_generation(topic)
            .update_expression("SET #jobs = :zero, #next = :zero")
            .condition_expression("#gen = :gen")
            .expression_attribute_names("#next", NEXT)
            .expression_attribute_values(":gen", n(generation))
            .send()
            .await;
        match out {
            Ok(_) => Ok(()),
            Err(e) if failed_condition(&e) => Ok(()),
            Err(e) => Err(classify(&e)),
        }
    }
}
