//! The global state table (replicated by Global Tables): the kit's op store, the same items
//! for every app. docs/DATA_MODEL.md has the design and the argument for each guarantee.
//!
//! | item | pk | sk | attributes | writer |
//! |---|---|---|---|---|
//! | topic seed | `TOPIC#<ns>#<topic>` | `META` | meta (JSON) | any (identical seeds) |
//! | op copy | `OPS#<ns>#<topic>#<author>` | `<opId>#<region>` | author, opId, region, at, position, digest, op (JSON), writeId | its Region |
//! | summary | `SUMMARY#<ns>#<topic>` | `<region>` | region, accepted, app (JSON) | its Region |
//! | strong-mode head | `SUMMARY#<ns>#<topic>` | `LEDGER` | a summary's, and the newest op's as `last*` | any Region, conditionally |
//!
//! GSI `by-time` (`pk`, `at`) lists one author's copies newest first, whatever their op ids.
//! GSI `by-position` (`log`, `position`) reads one log of a topic in position order: a copy's
//! `log` is `<ns>#<topic>#<region>` for a Region's count (eventual mode), `<ns>#<topic>#global`
//! for the head's (strong mode). Both are eventually consistent, on an MRSC table too.
//!
//! `<author>` is the `sub` with `%` and `#` percent-encoded, so a partition key names exactly
//! one author. Every item written in two Regions is either identical in both (seeds) or has
//! one writer Region (op copies, summaries): Global Tables' per-item last writer wins can
//! then never replace one user's data with another's, whatever the app. An app's values are
//! stored as their canonical JSON text (`wsdr_protocol::canonical_json`).
//!
//! An op is one `TransactWriteItems`: the copy (`attribute_not_exists(pk)`) and this Region's
//! summary (`accepted = :expected`), with the attempt's `writeId` as `ClientRequestToken`, so
//! an SDK retry of a committed transaction is recognised (by DynamoDB's idempotency window,
//! and by the copy's `writeId` after it) and answered `Committed`.
//!
//! Replication is Global Tables' business, not this adapter's: the lab emulates it around the
//! adapter (`wsdr-lab`'s `store` module), with [`DynamoStateStore::put_as_replicated`] to apply
//! another Region's write as Global Tables does, unconditionally.

use crate::classify::classify;
use crate::keys::{
    author_segment, summary_of_keys, topic_of_meta_key, topic_of_ops_key, topic_segment, LEDGER_SK,
    OPS_PREFIX, SUMMARY_PREFIX, TOPIC_PREFIX,
};
use crate::schema::{BID_AT, BY_POSITION_INDEX, BY_TIME_INDEX, LOG, PK, POSITION, SK};
use async_trait::async_trait;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeValue, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
};
use aws_sdk_dynamodb::Client;
use serde_json::Value as Json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use wsdr_core::items::{Item as StateItem, LastOp};
use wsdr_core::{
    Advance, CommitOutcome, Error, HeadStore, OpCommit, OpStore, Result, StoredHead, StoredOp,
    StoredSummary, TopicKey, UserId,
};
use wsdr_protocol::{canonical_json, Digest, OpId};

type Item = HashMap<String, AttributeValue>;

const META: &str = "META";

/// Item reads and writes of one store, counted as DynamoDB bills them by item (a query
/// returning 3 items reads 3; a transaction of 2 puts writes 2), for `make bench`.
#[derive(Debug, Default)]
pub struct IoCounts {
    pub requests: AtomicU64,
    pub items_read: AtomicU64,
    pub items_written: AtomicU64,
}

impl IoCounts {
    /// (requests, items read, items written) so far.
    pub fn get(&self) -> (u64, u64, u64) {
        (
            self.requests.load(Ordering::Relaxed),
            self.items_read.load(Ordering::Relaxed),
            self.items_written.load(Ordering::Relaxed),
        )
    }

    fn read(&self, items: u64) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.items_read.fetch_add(items, Ordering::Relaxed);
    }

    fn wrote(&self, items: u64) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.items_written.fetch_add(items, Ordering::Relaxed);
    }
}

/// [`StateStore`] on a DynamoDB (Global) table.
#[derive(Debug, Clone)]
pub struct DynamoStateStore {
    client: Client,
    table: String,
    io: Arc<IoCounts>,
    /// The table is a multi-Region strongly consistent (MRSC) global table: bids go through
    /// the ledger head (`head`/`advance`/`settle`).
    strong: bool,
}

impl DynamoStateStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
            io: Arc::default(),
            strong: false,
        }
    }

    /// The same store on an MRSC table. Every read here is already `ConsistentRead` (on MRSC
    /// that is the latest version in every Region). What changes is what a failure means: a
    /// read, or a write that decides nothing (a copy's settle), that failed for a reason
    /// other than its own (timeout, 5xx, no connection) is taken as this Region being unable
    /// to reach the quorum (`Error::NoQuorum`), so the request goes to another Region:
    /// DynamoDB does not name isolation apart from other server errors. The write that
    /// decides a bid (`advance`) is different: after such a failure it may have committed,
    /// so it stays `Transient` and the bid is answered `unknown` (see `advance`).
    pub fn strongly_consistent(mut self) -> DynamoLedgerStore {
        self.strong = true;
        DynamoLedgerStore(self)
    }

    fn fail<E>(
        &self,
        error: &aws_sdk_dynamodb::error::SdkError<
            E,
            aws_smithy_runtime_api::client::orchestrator::HttpResponse,
        >,
    ) -> Error
    where
        E: aws_smithy_types::error::metadata::ProvideErrorMetadata + std::error::Error + 'static,
    {
        match classify(error) {
            Error::Transient(cause) if self.strong => Error::NoQuorum(cause),
            other => other,
        }
    }

    pub fn io(&self) -> &IoCounts {
        &self.io
    }

    /// Write `item` exactly as given, with no condition: how Global Tables applies a write
    /// replicated from another Region (the lab's replicator uses it; the Lambdas never do).
    pub async fn put_as_replicated(&self, item: &StateItem) -> Result<()> {
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(to_item(item)?))
            .send()
            .await
            .map_err(|e| self.fail(&e))?;
        self.io.wrote(1);
        Ok(())
    }

    /// Every item of the table in key order (the lab's convergence check and tests; a scan:
    /// never on a request path).
    pub async fn dump(&self) -> Result<Vec<StateItem>> {
        let mut pages = self
            .client
            .scan()
            .table_name(&self.table)
            .consistent_read(true)
            .into_paginator()
            .items()
            .send();
        let mut out = Vec::new();
        while let Some(item) = pages.next().await {
            let item = item.map_err(|e| self.fail(&e))?;
            let pk = get_s(&item, PK)?.to_owned();
            let sk = get_s(&item, SK)?.to_owned();
            out.push(((pk.clone(), sk.clone()), parse_item(&pk, &sk, &item)?));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out.into_iter().map(|(_, item)| item).collect())
    }

    /// Every op copy of a topic, all authors (checkers and tests: a scan of the table, never
    /// on a request path).
    pub async fn all_ops(&self, topic: &TopicKey) -> Result<Vec<StoredOp>> {
        let mut pages = self
            .client
            .scan()
            .table_name(&self.table)
            .filter_expression("begins_with(pk, :ops)")
            .expression_attribute_values(
                ":ops",
                s(format!("{OPS_PREFIX}{}#", topic_segment(topic))),
            )
            .consistent_read(true)
            .into_paginator()
            .items()
            .send();
        let mut ops = Vec::new();
        while let Some(item) = pages.next().await {
            ops.push(parse_op(topic, &item.map_err(|e| self.fail(&e))?)?);
        }
        Ok(ops)
    }

    /// The items of partition `pk` whose sort key starts with `prefix` (strongly consistent),
    /// at most `limit` of them. Every partition it reads is small: one auction's summaries
    /// (one per Region) or one bidder's bids in one auction.
    async fn query_partition(
        &self,
        pk: String,
        prefix: &str,
        limit: Option<usize>,
    ) -> Result<Vec<Item>> {
        let mut query = self
            .client
            .query()
            .table_name(&self.table)
            .expression_attribute_values(":pk", s(pk));
        // A key condition cannot compare with an empty string: no prefix, no condition on sk.
        query = if prefix.is_empty() {
            query.key_condition_expression("pk = :pk")
        } else {
            query
                .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
                .expression_attribute_values(":prefix", s(prefix))
        };
        let mut pages = query
            .set_limit(limit.map(|l| l.min(1000) as i32))
            .consistent_read(true)
            .into_paginator()
            .send();
        let mut items = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| self.fail(&e))?;
            let got = page.items.unwrap_or_default();
            self.io.read(got.len() as u64);
            items.extend(got);
            if limit.is_some_and(|l| items.len() >= l) {
                items.truncate(limit.unwrap_or(usize::MAX));
                break;
            }
        }
        Ok(items)
    }

    async fn get(&self, pk: String, sk: String) -> Result<Option<Item>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, AttributeValue::S(pk))
            .key(SK, AttributeValue::S(sk))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.fail(&e))?;
        self.io.read(u64::from(out.item.is_some()));
        Ok(out.item)
    }
}

fn meta_pk(topic: &TopicKey) -> String {
    format!("{TOPIC_PREFIX}{}", topic_segment(topic))
}

/// One author's ops in one topic: their own partition.
fn ops_pk(topic: &TopicKey, author: &UserId) -> String {
    format!(
        "{OPS_PREFIX}{}#{}",
        topic_segment(topic),
        author_segment(author.as_str())
    )
}

/// Every copy of an op in its author's partition: an op id has no `#` (ids.rs).
fn op_copies_prefix(op_id: &OpId) -> String {
    format!("{op_id}#")
}

fn op_sk(op: &StoredOp) -> String {
    format!("{}{}", op_copies_prefix(&op.op_id), op.region)
}

/// One topic's summaries: their own partition, one item per Region (and strong mode's head).
fn summaries_pk(topic: &TopicKey) -> String {
    format!("{SUMMARY_PREFIX}{}", topic_segment(topic))
}

fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn n(v: u64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

fn malformed(field: &str) -> Error {
    Error::Internal(format!("state item has a missing or malformed `{field}`"))
}

fn get_s<'a>(item: &'a Item, field: &str) -> Result<&'a str> {
    item.get(field)
        .and_then(|v| v.as_s().ok())
        .map(String::as_str)
        .ok_or_else(|| malformed(field))
}

fn get_n(item: &Item, field: &str) -> Result<u64> {
    item.get(field)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| malformed(field))
}

/// An app's value as stored: its canonical JSON text. A value without one (a float, an
/// integer JavaScript cannot hold) is refused before anything is written.
fn json_text(value: &Json, field: &str) -> Result<AttributeValue> {
    canonical_json(value)
        .map(s)
        .map_err(|e| Error::Internal(format!("`{field}` has no canonical JSON: {e}")))
}

fn get_json(item: &Item, field: &str) -> Result<Json> {
    serde_json::from_str(get_s(item, field)?).map_err(|_| malformed(field))
}

fn is_conditional_check_failed<R>(error: &SdkError<PutItemError, R>) -> bool {
    matches!(
        error.as_service_error(),
        Some(PutItemError::ConditionalCheckFailedException(_))
    )
}

fn meta_item(topic: &TopicKey, meta: &Json) -> Result<Item> {
    Ok(Item::from([
        (PK.into(), s(meta_pk(topic))),
        (SK.into(), s(META)),
        ("type".into(), s("topic")),
        ("meta".into(), json_text(meta, "meta")?),
    ]))
}

/// An op copy's own attributes, each under `prefix` (`""` for a copy item, `last` for the
/// head's newest op).
/// An op attribute's name under `prefix`: `at` is `at` in a copy and `lastAt` in a head.
fn attribute(prefix: &str, field: &str) -> String {
    if prefix.is_empty() {
        return field.to_owned();
    }
    let mut chars = field.chars();
    let first = chars.next().map(|c| c.to_ascii_uppercase());
    format!("{prefix}{}{}", first.unwrap_or_default(), chars.as_str())
}

fn put_op(item: &mut Item, prefix: &str, op: &StoredOp) -> Result<()> {
    let name = |field: &str| attribute(prefix, field);
    item.insert(name("author"), s(op.author.as_str()));
    item.insert(name("opId"), s(op.op_id.as_str()));
    item.insert(name("region"), s(op.region.clone()));
    item.insert(name(BID_AT), n(op.at));
    item.insert(name(POSITION), n(op.position));
    item.insert(name("digest"), s(op.digest.to_string()));
    item.insert(name("op"), json_text(&op.op, "op")?);
    Ok(())
}

fn get_op(item: &Item, prefix: &str, topic: &TopicKey) -> Result<StoredOp> {
    let field = |name: &str| attribute(prefix, name);
    Ok(StoredOp {
        topic: topic.clone(),
        author: UserId::new(get_s(item, &field("author"))?)
            .map_err(|_| malformed(&field("author")))?,
        op_id: OpId::new(get_s(item, &field("opId"))?).map_err(|_| malformed(&field("opId")))?,
        region: get_s(item, &field("region"))?.to_owned(),
        at: get_n(item, &field(BID_AT))?,
        position: get_n(item, &field(POSITION))?,
        digest: Digest::parse(get_s(item, &field("digest"))?)
            .map_err(|_| malformed(&field("digest")))?,
        op: get_json(item, &field("op"))?,
    })
}

/// The `log` attribute of a copy in `log` (a Region, or the head's [`wsdr_core::LEDGER`]).
fn log_key(topic: &TopicKey, log: &str) -> String {
    format!("{}#{log}", topic_segment(topic))
}

/// A copy item, in `log`: the accepting Region's (eventual mode) or the head's (strong mode).
fn op_item(op: &StoredOp, write_id: &str, log: &str) -> Result<Item> {
    let mut item = Item::from([
        (PK.into(), s(ops_pk(&op.topic, &op.author))),
        (SK.into(), s(op_sk(op))),
        ("type".into(), s("op")),
        ("writeId".into(), s(write_id)),
        (LOG.into(), s(log_key(&op.topic, log))),
    ]);
    put_op(&mut item, "", op)?;
    Ok(item)
}

fn parse_op(topic: &TopicKey, item: &Item) -> Result<StoredOp> {
    get_op(item, "", topic)
}

fn summary_item(topic: &TopicKey, summary: &StoredSummary) -> Result<Item> {
    Ok(Item::from([
        (PK.into(), s(summaries_pk(topic))),
        (SK.into(), s(summary.region.clone())),
        ("type".into(), s("summary")),
        ("region".into(), s(summary.region.clone())),
        ("accepted".into(), n(summary.accepted)),
        ("app".into(), json_text(&summary.app, "app")?),
    ]))
}

fn parse_summary(item: &Item) -> Result<StoredSummary> {
    Ok(StoredSummary {
        region: get_s(item, "region")?.to_owned(),
        accepted: get_n(item, "accepted")?,
        app: get_json(item, "app")?,
    })
}

/// A strong-mode head: the summary's attributes (so a summaries query reads it as the one
/// summary, labelled `global`) plus the newest accepted op (`last*`) and its write id.
fn head_item(topic: &TopicKey, head: &StoredHead) -> Result<Item> {
    let mut item = summary_item(topic, &head.summary)?;
    item.insert(SK.into(), s(LEDGER_SK));
    item.insert("type".into(), s("head"));
    if let Some(last) = &head.last {
        put_op(&mut item, "last", &last.op)?;
        item.insert("lastWriteId".into(), s(last.write_id.clone()));
    }
    Ok(item)
}

fn parse_head(topic: &TopicKey, item: &Item) -> Result<StoredHead> {
    let last = match item.get("lastOpId") {
        None => None,
        Some(_) => Some(LastOp {
            op: get_op(item, "last", topic)?,
            write_id: get_s(item, "lastWriteId")?.to_owned(),
        }),
    };
    Ok(StoredHead {
        summary: parse_summary(item)?,
        last,
    })
}

/// A kit item as a table item (without the lab's stamp).
fn to_item(item: &StateItem) -> Result<Item> {
    match item {
        StateItem::Meta { topic, meta } => meta_item(topic, meta),
        // Replicated by the lab into an eventual table: the copy is in its Region's log.
        StateItem::Op { op, write_id } => op_item(op, write_id, &op.region),
        StateItem::Summary { topic, summary } => summary_item(topic, summary),
        StateItem::Head { topic, head } => head_item(topic, head),
    }
}

/// Any item of the table back into a kit item, by its key shape.
fn parse_item(pk: &str, sk: &str, item: &Item) -> Result<StateItem> {
    if let Some((topic, region)) = summary_of_keys(pk, sk) {
        return Ok(if region == LEDGER_SK {
            StateItem::Head {
                head: parse_head(&topic, item)?,
                topic,
            }
        } else {
            StateItem::Summary {
                summary: parse_summary(item)?,
                topic,
            }
        });
    }
    if let Some(topic) = topic_of_ops_key(pk) {
        return Ok(StateItem::Op {
            op: parse_op(&topic, item)?,
            write_id: get_s(item, "writeId")?.to_owned(),
        });
    }
    match topic_of_meta_key(pk) {
        Some(topic) if sk == META => Ok(StateItem::Meta {
            meta: get_json(item, "meta")?,
            topic,
        }),
        _ => Err(malformed(PK)),
    }
}

/// What a cancelled op transaction means: `Some(outcome)` for a condition that failed,
/// `None` for anything else (classified by the caller).
fn cancelled_outcome(
    error: &TransactWriteItemsError,
    commit: &OpCommit,
) -> Option<Result<CommitOutcome>> {
    let TransactWriteItemsError::TransactionCanceledException(cancelled) = error else {
        return None;
    };
    let reasons = cancelled.cancellation_reasons();
    let code = |i: usize| reasons.get(i).and_then(|r| r.code()).unwrap_or("None");
    if code(0) == "ConditionalCheckFailed" {
        let Some(old) = reasons.first().and_then(|r| r.item()) else {
            return Some(Err(Error::Transient(
                "op copy exists but was not returned".into(),
            )));
        };
        let old = old.clone();
        return Some(match get_s(&old, "writeId") {
            Ok(id) if id == commit.write_id => Ok(CommitOutcome::Committed),
            _ => parse_op(&commit.copy.topic, &old).map(CommitOutcome::Exists),
        });
    }
    if code(1) == "ConditionalCheckFailed"
        || code(0) == "TransactionConflict"
        || code(1) == "TransactionConflict"
    {
        return Some(Ok(CommitOutcome::Conflict));
    }
    None
}

#[async_trait]
impl OpStore for DynamoStateStore {
    async fn put_meta_if_absent(&self, topic: &TopicKey, meta: &Json) -> Result<bool> {
        let item = meta_item(topic, meta)?;
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(e) if is_conditional_check_failed(&e) => Ok(false),
            Err(e) => Err(self.fail(&e)),
        }
    }

    async fn meta(&self, topic: &TopicKey) -> Result<Option<Json>> {
        self.get(meta_pk(topic), META.into())
            .await?
            .map(|item| get_json(&item, "meta"))
            .transpose()
    }

    async fn copies(
        &self,
        topic: &TopicKey,
        author: &UserId,
        op_id: &OpId,
    ) -> Result<Vec<StoredOp>> {
        self.query_partition(ops_pk(topic, author), &op_copies_prefix(op_id), Some(16))
            .await?
            .iter()
            .map(|item| parse_op(topic, item))
            .collect()
    }

    async fn summaries(&self, topic: &TopicKey) -> Result<Vec<StoredSummary>> {
        self.query_partition(summaries_pk(topic), "", Some(64))
            .await?
            .iter()
            .map(parse_summary)
            .collect()
    }

    async fn commit(&self, commit: &OpCommit) -> Result<CommitOutcome> {
        let copy = op_item(&commit.copy, &commit.write_id, &commit.copy.region)?;
        let summary = summary_item(&commit.copy.topic, &commit.summary)?;
        let put_copy = Put::builder()
            .table_name(&self.table)
            .set_item(Some(copy))
            .condition_expression("attribute_not_exists(pk)")
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(|e| Error::Internal(e.to_string()))?;
        let summary_condition = if commit.expected_accepted == 0 {
            "attribute_not_exists(pk)"
        } else {
            "accepted = :expected"
        };
        let mut put_summary = Put::builder()
            .table_name(&self.table)
            .set_item(Some(summary))
            .condition_expression(summary_condition);
        if commit.expected_accepted != 0 {
            put_summary =
                put_summary.expression_attribute_values(":expected", n(commit.expected_accepted));
        }
        let put_summary = put_summary
            .build()
            .map_err(|e| Error::Internal(e.to_string()))?;
        let result = self
            .client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().put(put_copy).build())
            .transact_items(TransactWriteItem::builder().put(put_summary).build())
            // DynamoDB answers a retry with the same token (within 10 minutes) as the first
            // call: the SDK's retry after a lost response sees success, not a failed condition.
            .client_request_token(&commit.write_id)
            .send()
            .await;
        self.io.wrote(2);
        match result {
            Ok(_) => Ok(CommitOutcome::Committed),
            Err(e) => match e
                .as_service_error()
                .and_then(|se| cancelled_outcome(se, commit))
            {
                Some(outcome) => outcome,
                None => Err(self.fail(&e)),
            },
        }
    }

    async fn newest_by_author(
        &self,
        topic: &TopicKey,
        author: &UserId,
        limit: usize,
    ) -> Result<Vec<StoredOp>> {
        // The GSI, newest first: the base table's sort key is op id order, which says nothing
        // of time. GSI reads are eventually consistent (within the Region), like everything
        // replication brings; settlement uses point reads on the table instead.
        let mut pages = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(BY_TIME_INDEX)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", s(ops_pk(topic, author)))
            .scan_index_forward(false)
            .limit(limit.clamp(1, 1000) as i32)
            .into_paginator()
            .send();
        let mut ops = Vec::new();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| self.fail(&e))?;
            let got = page.items.unwrap_or_default();
            self.io.read(got.len() as u64);
            for item in &got {
                ops.push(parse_op(topic, item)?);
            }
            if ops.len() >= limit {
                break;
            }
        }
        // Equal times come back in no documented order: the port's order breaks the tie.
        ops.sort_by(|a, b| (b.at, &b.op_id, &b.region).cmp(&(a.at, &a.op_id, &a.region)));
        ops.truncate(limit);
        Ok(ops)
    }

    async fn log_after(
        &self,
        topic: &TopicKey,
        log: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredOp>> {
        self.log_page(topic, log, after, limit).await
    }
}

impl DynamoStateStore {
    /// One page of a log from the `by-position` index: every item of it is a copy of `topic`
    /// (the key names the topic), in position order.
    async fn log_page(
        &self,
        topic: &TopicKey,
        log: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredOp>> {
        let mut pages = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(BY_POSITION_INDEX)
            .key_condition_expression("#log = :log AND #position > :after")
            .expression_attribute_names("#log", LOG)
            .expression_attribute_names("#position", POSITION)
            .expression_attribute_values(":log", s(log_key(topic, log)))
            .expression_attribute_values(":after", n(after))
            .limit(limit.clamp(1, 1000) as i32)
            .into_paginator()
            .send();
        let mut ops = Vec::new();
        while ops.len() < limit {
            let Some(page) = pages.next().await else {
                break;
            };
            let page = page.map_err(|e| self.fail(&e))?;
            let got = page.items.unwrap_or_default();
            self.io.read(got.len() as u64);
            for item in &got {
                ops.push(parse_op(topic, item)?);
            }
        }
        ops.truncate(limit);
        Ok(ops)
    }
}

/// [`HeadStore`] on a DynamoDB multi-Region strongly consistent (MRSC) global table:
/// [`DynamoStateStore::strongly_consistent`] makes one. Only this type keeps a head, so a
/// strong service cannot be built on an eventually consistent table.
#[derive(Debug, Clone)]
pub struct DynamoLedgerStore(DynamoStateStore);

impl DynamoLedgerStore {
    pub fn io(&self) -> &IoCounts {
        self.0.io()
    }

    /// Every item of the table (tests and the lab's convergence checks).
    pub async fn dump(&self) -> Result<Vec<StateItem>> {
        self.0.dump().await
    }

    /// Every copy of a topic, all authors and Regions (checkers and tests).
    pub async fn all_ops(&self, topic: &TopicKey) -> Result<Vec<StoredOp>> {
        self.0.all_ops(topic).await
    }
}

#[async_trait]
impl OpStore for DynamoLedgerStore {
    async fn put_meta_if_absent(&self, topic: &TopicKey, meta: &Json) -> Result<bool> {
        self.0.put_meta_if_absent(topic, meta).await
    }

    async fn meta(&self, topic: &TopicKey) -> Result<Option<Json>> {
        self.0.meta(topic).await
    }

    async fn copies(
        &self,
        topic: &TopicKey,
        author: &UserId,
        op_id: &OpId,
    ) -> Result<Vec<StoredOp>> {
        self.0.copies(topic, author, op_id).await
    }

    async fn summaries(&self, topic: &TopicKey) -> Result<Vec<StoredSummary>> {
        OpStore::summaries(&self.0, topic).await
    }

    async fn commit(&self, commit: &OpCommit) -> Result<CommitOutcome> {
        self.0.commit(commit).await
    }

    async fn newest_by_author(
        &self,
        topic: &TopicKey,
        author: &UserId,
        limit: usize,
    ) -> Result<Vec<StoredOp>> {
        self.0.newest_by_author(topic, author, limit).await
    }

    async fn log_after(
        &self,
        topic: &TopicKey,
        log: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredOp>> {
        self.0.log_page(topic, log, after, limit).await
    }
}

#[async_trait]
impl HeadStore for DynamoLedgerStore {
    async fn head(&self, topic: &TopicKey) -> Result<Option<StoredHead>> {
        self.0
            .get(summaries_pk(topic), LEDGER_SK.into())
            .await?
            .map(|item| parse_head(topic, &item))
            .transpose()
    }

    async fn advance(
        &self,
        topic: &TopicKey,
        expected_accepted: u64,
        next: &StoredHead,
    ) -> Result<Advance> {
        let mut put = self
            .0
            .client
            .put_item()
            .table_name(&self.0.table)
            .set_item(Some(head_item(topic, next)?))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        put = if expected_accepted == 0 {
            put.condition_expression("attribute_not_exists(pk)")
        } else {
            put.condition_expression("accepted = :expected")
                .expression_attribute_values(":expected", n(expected_accepted))
        };
        let result = put.send().await;
        self.0.io.wrote(1);
        match result {
            Ok(_) => Ok(Advance::Advanced),
            Err(e) => match e.as_service_error() {
                Some(PutItemError::ConditionalCheckFailedException(failed)) => {
                    // The SDK's retry of this very write after a lost answer finds its own
                    // head: recognised by the write id.
                    let current = failed.item().and_then(|old| old.get("lastWriteId"));
                    let mine = next.last.as_ref().map(|l| s(l.write_id.clone()));
                    Ok(if mine.is_some() && current == mine.as_ref() {
                        Advance::Advanced
                    } else {
                        Advance::Moved
                    })
                }
                // A failed write that decides an op: unlike a read, a write whose request
                // timed out, got a 5xx or lost its connection may still have committed
                // (DynamoDB documents `InternalServerError` as "the request may or may not
                // have succeeded"). Those stay `Transient`, which the service answers
                // `unknown`, never `NoQuorum` (`redirect`); only answers that say the request
                // was refused (conditional check, replicated write conflict, throttling,
                // validation) prove nothing was written.
                _ => Err(classify(&e)),
            },
        }
    }

    async fn settle(&self, copy: &StoredOp, write_id: &str) -> Result<()> {
        let result = self
            .0
            .client
            .put_item()
            .table_name(&self.0.table)
            .set_item(Some(op_item(copy, write_id, wsdr_core::LEDGER)?))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        self.0.io.wrote(1);
        match result {
            Ok(_) => Ok(()),
            // Written before (by the accepting request or a later op): the same item.
            Err(e) if is_conditional_check_failed(&e) => Ok(()),
            Err(e) => Err(self.0.fail(&e)),
        }
    }
}
