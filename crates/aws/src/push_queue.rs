//! The push jobs' queue on SQS ([`wsdr_core::push::PushQueue`]).
//!
//! The stream's reader sends a push's jobs (one per subscriber shard) with
//! `SendMessageBatch`, ten to a request; a worker sends a continuation the same way. The
//! push workers' function reads the queue through its event source mapping, whose maximum
//! concurrency is the worker count (template.yaml, `PushJobs`), and decodes each message with
//! [`crate::push_jobs::decode_work`]. A start put off until a topic's spacing ends is one
//! message with `DelaySeconds`.

use crate::classify::classify;
use crate::push_jobs::{encode_job, encode_start};
use async_trait::async_trait;
use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
use aws_sdk_sqs::Client;
use std::time::Duration;
use wsdr_core::push::{PushJob, PushQueue, START_DELAY_LIMIT};
use wsdr_core::{Error, Result};
use wsdr_protocol::Topic;

/// SQS takes at most ten messages per batch request.
const BATCH: usize = 10;

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

    async fn send_start(&self, topic: &Topic, delay: Duration) -> Result<()> {
        let seconds = delay.min(START_DELAY_LIMIT).as_secs_f64().ceil() as i32;
        self.client
            .send_message()
            .queue_url(&self.url)
            .message_body(encode_start(topic))
            .delay_seconds(seconds)
            .send()
            .await
            .map_err(|e| classify(&e))?;
        Ok(())
    }
}

/// The fast failover's orders to the evacuator (`FastFailovers`, in the secondary): the
/// stream's one reader (the handler's `SummaryChanges` mapping) forwards each verdict change
/// that says fail over, as the stream record's JSON, so that no second mapping reads the
/// global table's stream.
#[derive(Debug, Clone)]
pub struct SqsFailoverOrders {
    client: Client,
    url: String,
}

impl SqsFailoverOrders {
    /// Clients built once per cold start: `client` from [`sqs_client`](crate::sqs_client).
    pub fn new(client: Client, url: impl Into<String>) -> Self {
        Self {
            client,
            url: url.into(),
        }
    }

    /// Send one order (a stream record's JSON).
    pub async fn send(&self, body: String) -> Result<()> {
        self.client
            .send_message()
            .queue_url(&self.url)
            .message_body(body)
            .send()
            .await
            .map_err(|e| classify(&e))?;
        Ok(())
    }
}
