//! The push jobs' queue on SQS ([`wsdr_core::push::PushQueue`]), and the jobs' wire form.
//!
//! The stream's reader sends a push's jobs (one per subscriber shard) with
//! `SendMessageBatch`, ten to a request; a worker sends a continuation the same way. The
//! push workers' function reads the queue through its event source mapping, whose maximum
//! concurrency is the worker count (template.yaml, `PushJobs`), and decodes each message with
//! [`decode_job`].

use crate::classify::classify;
use async_trait::async_trait;
use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
use aws_sdk_sqs::Client;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use wsdr_core::push::{PushJob, PushQueue};
use wsdr_core::{ConnectionId, Error, Result};
use wsdr_protocol::AuctionId;

/// The version of a job message's form; a worker refuses (and the queue moves to its dead
/// letter queue) a message of another.
const JOB_FORMAT: u32 = 1;

/// SQS takes at most ten messages per batch request.
const BATCH: usize = 10;

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct JobMessage {
    v: u32,
    auction: String,
    shard: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    after: Option<String>,
    frame: String,
    started_ms: u64,
    generation: u64,
}

/// A job as a message body (JSON).
pub fn encode_job(job: &PushJob) -> String {
    let message = JobMessage {
        v: JOB_FORMAT,
        auction: job.auction.to_string(),
        shard: job.shard,
        after: job.after.as_ref().map(ToString::to_string),
        frame: job.frame.to_string(),
        started_ms: job.started_ms,
        generation: job.generation,
    };
    // A struct of strings and numbers always serializes.
    serde_json::to_string(&message).unwrap_or_default()
}

/// A message body back to its job; a body that is not one is a clear error.
pub fn decode_job(body: &str) -> Result<PushJob> {
    let bad = |what: String| Error::BadRequest(format!("push job message: {what}"));
    let message: JobMessage = serde_json::from_str(body).map_err(|e| bad(e.to_string()))?;
    if message.v != JOB_FORMAT {
        return Err(bad(format!(
            "format {} (this worker reads {JOB_FORMAT})",
            message.v
        )));
    }
    if message.shard >= wsdr_core::SUBSCRIBER_SHARDS {
        return Err(bad(format!("shard {} out of range", message.shard)));
    }
    Ok(PushJob {
        auction: AuctionId::new(message.auction).map_err(|e| bad(e.to_string()))?,
        shard: message.shard,
        after: message
            .after
            .map(ConnectionId::new)
            .transpose()
            .map_err(|e| bad(e.to_string()))?,
        frame: Arc::from(message.frame),
        started_ms: message.started_ms,
        generation: message.generation,
    })
}

/// [`PushQueue`] on an SQS queue.
#[derive(Debug, Clone)]
pub struct SqsPushQueue {
    client: Client,
    url: String,
}

impl SqsPushQueue {
    /// Clients built once per cold start: `client` from [`sqs_client`](crate::sqs_client).
    pub fn new(client: Client, url: impl Into<String>) -> Self {
        Self {
            client,
            url: url.into(),
        }
    }
}

#[async_trait]
impl PushQueue for SqsPushQueue {
    async fn send(&self, jobs: Vec<PushJob>) -> Result<()> {
        for batch in jobs.chunks(BATCH) {
            let entries = batch
                .iter()
                .enumerate()
                .map(|(i, job)| {
                    SendMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .message_body(encode_job(job))
                        .build()
                        .map_err(|e| Error::Internal(e.to_string()))
                })
                .collect::<Result<Vec<_>>>()?;
            let out = self
                .client
                .send_message_batch()
                .queue_url(&self.url)
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(|e| classify(&e))?;
            // A batch can succeed in part: each failed entry says whether it was the sender's
            // fault. The whole send is then failed (and retried by the caller's caller); the
            // jobs that went through may run twice, which delivery at least once allows.
            if let Some(failed) = out.failed.first() {
                let detail = format!(
                    "{} of {} push jobs not queued: {} {}",
                    out.failed.len(),
                    batch.len(),
                    failed.code,
                    failed.message.as_deref().unwrap_or("")
                );
                return Err(if failed.sender_fault {
                    Error::Internal(detail)
                } else {
                    Error::Transient(detail)
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_survives_its_message_form_and_a_bad_body_is_a_clear_error() {
        let job = PushJob {
            auction: AuctionId::new("a1").unwrap(),
            shard: 7,
            after: Some(ConnectionId::new("abc=").unwrap()),
            frame: Arc::from(r#"{"type":"bidUpdate"}"#),
            started_ms: 1_700_000_000_123,
            generation: 42,
        };
        assert_eq!(decode_job(&encode_job(&job)).unwrap(), job);
        for body in [
            "",
            "{}",
            r#"{"v":2,"auction":"a1","shard":1,"frame":"","startedMs":0,"generation":1}"#,
            r#"{"v":1,"auction":"a1","shard":16,"frame":"","startedMs":0,"generation":1}"#,
            r#"{"v":1,"auction":"","shard":1,"frame":"","startedMs":0,"generation":1}"#,
        ] {
            let error = decode_job(body).unwrap_err();
            assert!(matches!(error, Error::BadRequest(_)), "{body}: {error}");
        }
    }
}
