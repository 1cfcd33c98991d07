//! The state table's stream: bids that arrived by replication are pushed to this Region's
//! subscribers.
//!
//! Global Tables write every replicated item into the replica's own stream, like a local write
//! (docs/DATA_MODEL.md cites the AWS page). A changed summary item of *another* Region
//! (`SUMMARY#<auction>` / `<region>`) means that Region's bids reached this one: the handler reads the merged
//! summaries and pushes a `bidUpdate` to every subscriber here. This Region's own summaries
//! were pushed by the request that wrote them, so they are skipped (the template's event
//! filter drops them before the function is even invoked; the check here keeps the rule true
//! without it).
//!
//! The lab runs [`App::on_replicated_summaries`], the same path, on every summary its
//! replicator applies.

use crate::App;
use serde_json::Value;
use wsdr_protocol::AuctionId;

/// The `(auction, Region)` of every summary item an event's records touched, from the keys
/// alone (a stream record always carries `Keys`; images depend on the view type).
pub fn summary_keys(event: &Value) -> Vec<(AuctionId, String)> {
    let Some(records) = event.get("Records").and_then(Value::as_array) else {
        return Vec::new();
    };
    records
        .iter()
        .filter(|r| r.get("eventSource").and_then(Value::as_str) == Some("aws:dynamodb"))
        .filter_map(|r| {
            let record = r.get("dynamodb")?;
            let keys = record.get("Keys")?;
            let pk = keys.get("pk")?.get("S")?.as_str()?;
            let sk = keys.get("sk")?.get("S")?.as_str()?;
            let (auction, region) = wsdr_aws::keys::summary_of_keys(pk, sk)?;
            if sk == wsdr_aws::keys::LEDGER_SK {
                // Strong mode: one head for every Region; the Region that moved it is the
                // one that accepted its last bid (and pushed it there already).
                let last = record
                    .get("NewImage")?
                    .get("lastRegion")?
                    .get("S")?
                    .as_str()?;
                return Some((auction, last.to_owned()));
            }
            Some((auction, region.to_owned()))
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
    /// Push the merged state of every auction whose summary from another Region changed.
    /// Returns the auctions announced. A failed announce is logged and skipped: the stream
    /// batch must not be retried for a push (subscribers resync on reconnect anyway).
    pub async fn on_replicated_summaries(
        &self,
        summaries: &[(AuctionId, String)],
    ) -> Vec<AuctionId> {
        let own = self.service().region();
        let mut auctions: Vec<&AuctionId> = summaries
            .iter()
            .filter(|(_, region)| region != own)
            .map(|(auction, _)| auction)
            .collect();
        auctions.sort();
        auctions.dedup();
        let mut announced = Vec::new();
        for auction in auctions {
            // A throttled or unreachable table must not cost subscribers the push: a few
            // quick retries (the stream batch itself is not retried for a push).
            let mut result = self.service().announce_replicated(auction).await;
            for delay_ms in [50u64, 150, 400] {
                match &result {
                    Err(error) if error.is_retryable() => {
                        tokio::time::sleep(std::time::Duration::from_millis(delay_ms)).await;
                        result = self.service().announce_replicated(auction).await;
                    }
                    _ => break,
                }
            }
            match result {
                Ok(report) => {
                    tracing::info!(
                        auction_id = %auction,
                        targets = report.targets,
                        delivered = report.delivered,
                        "replicated bids pushed"
                    );
                    announced.push(auction.clone());
                }
                Err(error) => {
                    tracing::warn!(%error, auction_id = %auction, "push of replicated bids failed")
                }
            }
        }
        announced
    }

    /// A DynamoDB stream batch. Always succeeds (see [`App::on_replicated_summaries`]).
    pub async fn handle_stream(&self, event: &Value) -> Value {
        self.on_replicated_summaries(&summary_keys(event)).await;
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
