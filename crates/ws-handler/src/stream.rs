//! The state table's stream: every auction whose summary changed is pushed to this Region's
//! subscribers, off the bid's path.
//!
//! The stream shows this Region's own writes and, since Global Tables write every replicated
//! item into the replica's own stream like a local write (docs/DATA_MODEL.md cites the AWS
//! page), the other Region's too: one push path for local and replicated bids. A changed
//! summary item (`SUMMARY#auction#<auction>` / `<region>`, or strong mode's ledger head) names the
//! auction; the instance's [`wsdr_core::push::Pusher`] starts a push of each (or, if one is in
//! flight, marks its lease for a trailing push), each push one job per subscriber shard on the
//! push queue. The push workers' function (the same binary) receives those jobs from SQS
//! ([`App::handle_push_jobs`]).
//!
//! In the secondary with fast failovers, the same batches carry the judge's verdict changes on
//! the primary that say fail over (the mapping's second filter; `JUDGE#<apiId>` / `CHANGE`):
//! each record is forwarded, as it came, to the evacuator's queue, so that this mapping stays
//! the only reader of the global table's stream. Records are decoded once, typed
//! (`wsdr_aws::change_records` on `aws_lambda_events`), for the handler and the evacuator.
//!
//! The lab runs [`App::on_summaries`], the same path, on every summary its Region commits or
//! its replicator applies, and its workers run [`wsdr_core::push::Pusher::run_job`].

use crate::App;
use aws_lambda_events::dynamodb::Event as StreamEvent;
use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use aws_lambda_events::streams::DynamoDbEventResponse;
use serde_json::Value;
use wsdr_protocol::Topic;

/// The topic of every summary item (or ledger head) a stream batch's records touched
/// (`wsdr_aws::change_records`: one decoding for every reader of the stream), any app's.
pub fn summary_keys(event: &StreamEvent) -> Vec<Topic> {
    wsdr_aws::change_records::summary_topics(event)
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
    /// Start a push of every topic whose summary changed (or mark the one in flight):
    /// returns the topics whose push started. A push whose posts fail is counted, never an
    /// error (subscribers resync by heartbeat anyway).
    pub async fn on_summaries(&self, topics: &[Topic]) -> Vec<Topic> {
        // A topic of no app of this deployment (a namespace another version serves) has no
        // frame to push.
        let served: Vec<&Topic> = topics
            .iter()
            .filter(|topic| self.service().serves(topic))
            .collect();
        self.pusher().changed(served);
        let pushed = self.pusher().drain().await;
        let totals = self.pusher().totals();
        tracing::info!(
            changes = topics.len(),
            pushed = pushed.len(),
            total_pushes = totals.pushes,
            total_merged = totals.merged,
            total_posts = totals.posts,
            widened_pushes = totals.widening.widened_pushes,
            "pushes started"
        );
        pushed
    }

    /// A DynamoDB stream batch. An error (the batch is then retried, at most twice, then
    /// recorded in the mapping's on-failure queue) only when a fail-over order or a push's
    /// jobs could not be queued: its change would otherwise wait for the next one.
    pub async fn handle_stream(
        &self,
        event: &StreamEvent,
    ) -> Result<DynamoDbEventResponse, lambda_runtime::Error> {
        // The judge's fail-over orders first: the evacuation must not wait for pushes. A send
        // that fails fails the batch (retried, pushes included: their starts are idempotent
        // by the lease, the orders by their id in the evacuator).
        let orders = wsdr_aws::change_records::failover_orders(event);
        match (self.failover_orders(), orders.is_empty()) {
            (_, true) => {}
            (Some(queue), false) => {
                for (order, record) in &orders {
                    let body = serde_json::to_string(record)
                        .map_err(|error| format!("fail-over order not encoded: {error}"))?;
                    queue.send(body).await.map_err(|error| {
                        format!("fail-over order not forwarded ({error}); the batch is retried")
                    })?;
                    tracing::warn!(order = %order.id(), "fast failover: evacuation ordered");
                }
            }
            (None, false) => tracing::warn!(
                orders = orders.len(),
                "a fail-over order, but FAST_FAILOVER_QUEUE_URL is not set: not forwarded"
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
        Ok(DynamoDbEventResponse::default())
    }

    /// A batch of push jobs from SQS: each job posted, recorded and, if it was its push's
    /// last, followed by the trailing push. A message that is not a job, or whose lease or
    /// queue call failed, is reported as a batch item failure: SQS delivers it again, and
    /// after the queue's receive limit moves it to the dead-letter queue.
    pub async fn handle_push_jobs(&self, event: &SqsEvent) -> SqsBatchResponse {
        let mut response = SqsBatchResponse::default();
        for message in &event.records {
            let id = message.message_id.clone().unwrap_or_default();
            let outcome =
                match wsdr_aws::push_jobs::decode_work(message.body.as_deref().unwrap_or_default())
                {
                    Ok(work) => self.pusher().run(&work).await,
                    Err(error) => Err(error),
                };
            if let Err(error) = outcome {
                tracing::warn!(%error, message_id = %id, "push job failed; SQS delivers it again");
                let mut failure = BatchItemFailure::default();
                failure.item_identifier = id;
                response.batch_item_failures.push(failure);
            }
        }
        let totals = self.pusher().totals();
        tracing::info!(
            jobs = event.records.len(),
            failed = response.batch_item_failures.len(),
            total_posts = totals.posts,
            total_delivered = totals.delivered,
            "push jobs run"
        );
        response
    }

    /// Any event the function receives: an API Gateway WebSocket event, a batch from the
    /// state table's stream, or a batch of push jobs from SQS.
    pub async fn handle_any(
        &self,
        event: lambda_runtime::LambdaEvent<Value>,
    ) -> Result<Value, lambda_runtime::Error> {
        if is_stream_event(&event.payload) {
            let batch: StreamEvent = serde_json::from_value(event.payload)?;
            return Ok(serde_json::to_value(self.handle_stream(&batch).await?)?);
        }
        if is_push_job_event(&event.payload) {
            let batch: SqsEvent = serde_json::from_value(event.payload)?;
            return Ok(serde_json::to_value(self.handle_push_jobs(&batch).await)?);
        }
        let request = serde_json::from_value(event.payload)?;
        Ok(serde_json::to_value(self.respond(request).await)?)
    }
}
