//! The state table's stream: every auction whose summary changed is pushed to this Region's
//! subscribers, off the bid's path.
//!
//! The stream shows this Region's own writes and, since Global Tables write every replicated
//! item into the replica's own stream like a local write (docs/DATA_MODEL.md cites the AWS
//! page), the other Region's too: one push path for local and replicated bids. A changed
//! summary item (`SUMMARY#<auction>` / `<region>`, or strong mode's ledger head) names the
//! auction; the instance's [`wsdr_core::push::Pusher`] starts a push of each (or, if one is in
//! flight, marks its lease for a trailing push), each push one job per subscriber shard on the
//! push queue. The push workers' function (the same binary) receives those jobs from SQS
//! ([`App::handle_push_jobs`]).
//!
//! In the secondary with fast failovers, the same batches carry the primary's verdict changes
//! that say fail over (the mapping's second filter): they are forwarded to the evacuator's
//! queue, so that this mapping stays the only reader of the global table's stream.
//!
//! The lab runs [`App::on_summaries`], the same path, on every summary its Region commits or
//! its replicator applies, and its workers run [`wsdr_core::push::Pusher::run_job`].

use crate::App;
use serde_json::Value;
use wsdr_protocol::AuctionId;

/// The auction of every summary item (or ledger head) an event's records touched, from the
/// keys alone (a stream record always carries `Keys`; images depend on the view type).
pub fn summary_keys(event: &Value) -> Vec<AuctionId> {
    let Some(records) = event.get("Records").and_then(Value::as_array) else {
        return Vec::new();
    };
    records
        .iter()
        .filter(|r| r.get("eventSource").and_then(Value::as_str) == Some("aws:dynamodb"))
        .filter_map(|r| {
            let keys = r.get("dynamodb")?.get("Keys")?;
            let pk = keys.get("pk")?.get("S")?.as_str()?;
            let sk = keys.get("sk")?.get("S")?.as_str()?;
            let (auction, _) = wsdr_aws::keys::summary_of_keys(pk, sk)?;
            Some(auction)
        })
        .collect()
}

/// The records of a stream batch that are a fast verdict's change saying fail over
/// (`HEALTH#<apiId>` / `CHANGE` with `serve` false in the new image): the evacuator's orders.
/// The same test as the mapping's filter, made here too.
pub fn fail_over_records(event: &Value) -> Vec<&Value> {
    let Some(records) = event.get("Records").and_then(Value::as_array) else {
        return Vec::new();
    };
    records
        .iter()
        .filter(|r| r.get("eventSource").and_then(Value::as_str) == Some("aws:dynamodb"))
        .filter(|r| {
            let keys = &r["dynamodb"]["Keys"];
            keys["sk"]["S"] == "CHANGE"
                && keys["pk"]["S"]
                    .as_str()
                    .is_some_and(|pk| pk.starts_with("HEALTH#"))
                && r["dynamodb"]["NewImage"]["serve"]["BOOL"] == false
        })
        .collect()
}

/// The event source of a batch's first record (`aws:dynamodb`, `aws:sqs`), if the event is a
/// batch of records (and not an API Gateway event).
fn record_source(event: &Value) -> Option<&str> {
    event
        .get("Records")
        .and_then(Value::as_array)
        .and_then(|r| r.first())
        .and_then(|r| r.get("eventSource"))
        .and_then(Value::as_str)
}

/// Whether a Lambda event is a DynamoDB stream batch.
pub fn is_stream_event(event: &Value) -> bool {
    record_source(event) == Some("aws:dynamodb")
}

/// Whether a Lambda event is a batch of push jobs from SQS.
pub fn is_push_job_event(event: &Value) -> bool {
    record_source(event) == Some("aws:sqs")
}

impl App {
    /// Start a push of every auction whose summary changed (or mark the one in flight):
    /// returns the auctions whose push started. A push whose posts fail is counted, never an
    /// error (subscribers resync by heartbeat anyway).
    pub async fn on_summaries(&self, auctions: &[AuctionId]) -> Vec<AuctionId> {
        self.pusher().changed(auctions);
        let pushed = self.pusher().drain().await;
        let totals = self.pusher().totals();
        tracing::info!(
            changes = auctions.len(),
            pushed = pushed.len(),
            total_pushes = totals.pushes,
            total_merged = totals.merged,
            total_posts = totals.posts,
            widened_pushes = totals.widening.widened_pushes,
            "pushes started"
        );
        pushed
    }

    /// A DynamoDB stream batch. An error (the batch is then retried, at most twice) only when
    /// a push's jobs could not be queued: its change would otherwise wait for the next one.
    pub async fn handle_stream(&self, event: &Value) -> Result<Value, lambda_runtime::Error> {
        // The fast verdict's fail-over changes first: the evacuation must not wait for pushes.
        // A send that fails fails the batch (retried, pushes included: their starts are
        // idempotent by the lease).
        let orders = fail_over_records(event);
        match (self.failover_orders(), orders.is_empty()) {
            (_, true) => {}
            (Some(queue), false) => {
                for record in &orders {
                    queue.send(record.to_string()).await.map_err(|error| {
                        format!("fail-over order not forwarded ({error}); the batch is retried")
                    })?;
                }
                tracing::warn!(orders = orders.len(), "fast failover: evacuation ordered");
            }
            (None, false) => tracing::warn!(
                orders = orders.len(),
                "a fail-over change, but FAST_FAILOVER_QUEUE_URL is not set: not forwarded"
            ),
        }
        let unqueued = self.pusher().totals().unqueued;
        self.on_summaries(&summary_keys(event)).await;
        let now_unqueued = self.pusher().totals().unqueued;
        if now_unqueued > unqueued {
            return Err(format!(
                "{} push(es) not queued; the batch is retried",
                now_unqueued - unqueued
            )
            .into());
        }
        Ok(serde_json::json!({ "batchItemFailures": [] }))
    }

    /// A batch of push jobs from SQS: each job posted, recorded and, if it was its push's
    /// last, followed by the trailing push. A message that is not a job, or whose lease or
    /// queue call failed, is reported as a batch item failure: SQS delivers it again, and
    /// after the queue's receive limit moves it to the dead-letter queue.
    pub async fn handle_push_jobs(&self, event: &Value) -> Value {
        let records = event
            .get("Records")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let mut failures = Vec::new();
        for record in records {
            let id = record
                .get("messageId")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let body = record
                .get("body")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let outcome = match wsdr_aws::push_jobs::decode_work(body) {
                Ok(work) => self.pusher().run(&work).await,
                Err(error) => Err(error),
            };
            if let Err(error) = outcome {
                tracing::warn!(%error, message_id = id, "push job failed; SQS delivers it again");
                failures.push(serde_json::json!({ "itemIdentifier": id }));
            }
        }
        let totals = self.pusher().totals();
        tracing::info!(
            jobs = records.len(),
            failed = failures.len(),
            total_posts = totals.posts,
            total_delivered = totals.delivered,
            "push jobs run"
        );
        serde_json::json!({ "batchItemFailures": failures })
    }

    /// Any event the function receives: an API Gateway WebSocket event, a batch from the
    /// state table's stream, or a batch of push jobs from SQS.
    pub async fn handle_any(
        &self,
        event: lambda_runtime::LambdaEvent<Value>,
    ) -> Result<Value, lambda_runtime::Error> {
        if is_stream_event(&event.payload) {
            return self.handle_stream(&event.payload).await;
        }
        if is_push_job_event(&event.payload) {
            return Ok(self.handle_push_jobs(&event.payload).await);
        }
        let request = serde_json::from_value(event.payload)?;
        Ok(serde_json::to_value(self.respond(request).await)?)
    }
}
