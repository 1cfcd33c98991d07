//! The state table's stream: every auction whose summary changed is pushed to this Region's
//! subscribers, off the bid's path.
//!
//! The stream shows this Region's own writes and, since Global Tables write every replicated
//! item into the replica's own stream like a local write (docs/DATA_MODEL.md cites the AWS
//! page), the other Region's too: one push path for local and replicated bids. A changed
//! summary item (`SUMMARY#<auction>` / `<region>`, or strong mode's ledger head) names the
//! auction; the instance's [`wsdr_core::push::Pusher`] conflates the batch's changes with the
//! last push of each auction (at most one push per auction per spacing) and runs each push as
//! one job per subscriber shard.
//!
//! The lab runs [`App::on_summaries`], the same path, on every summary its Region commits or
//! its replicator applies.

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

/// Whether a Lambda event is a DynamoDB stream batch (and not an API Gateway event).
pub fn is_stream_event(event: &Value) -> bool {
    event
        .get("Records")
        .and_then(Value::as_array)
        .and_then(|r| r.first())
        .and_then(|r| r.get("eventSource"))
        .and_then(Value::as_str)
        == Some("aws:dynamodb")
}

impl App {
    /// Push every auction whose summary changed, conflated with its last push: returns the
    /// auctions pushed. A push that fails is logged and counted, never an error: the stream
    /// batch must not be retried for a push (subscribers resync by heartbeat anyway).
    pub async fn on_summaries(&self, auctions: &[AuctionId]) -> Vec<AuctionId> {
        self.pusher().changed(auctions);
        let pushed = self.pusher().drain().await;
        let totals = self.pusher().totals();
        tracing::info!(
            changes = auctions.len(),
            pushed = pushed.len(),
            total_pushes = totals.pushes,
            total_posts = totals.posts,
            widened_pushes = totals.widening.widened_pushes,
            "pushed"
        );
        pushed
    }

    /// A DynamoDB stream batch. Always succeeds (see [`App::on_summaries`]).
    pub async fn handle_stream(&self, event: &Value) -> Value {
        self.on_summaries(&summary_keys(event)).await;
        serde_json::json!({ "batchItemFailures": [] })
    }

    /// Any event the function receives: an API Gateway WebSocket event, or a batch from the
    /// state table's stream.
    pub async fn handle_any(
        &self,
        event: lambda_runtime::LambdaEvent<Value>,
    ) -> Result<Value, lambda_runtime::Error> {
        if is_stream_event(&event.payload) {
            return Ok(self.handle_stream(&event.payload).await);
        }
        let request = serde_json::from_value(event.payload)?;
        Ok(serde_json::to_value(self.respond(request).await)?)
    }
}
