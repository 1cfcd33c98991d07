//! Push work's wire form: the body of its SQS message (JSON, versioned). Compiled without
//! the SQS client, so that any build of the handler can decode what the queue delivers.
//!
//! Two kinds share the queue: a page job (no `kind`, or `"kind":"page"`) and a delayed start
//! (`{"v":2,"kind":"start","topic":"<ns>:<name>"}`). Format 1 named an auction (`"auction":"…"`)
//! before pushes were any app's; a worker still reads it, as that auction's topic, so messages
//! queued by the previous release are pushed, not dead-lettered.

use serde::{Deserialize, Serialize};
use std::sync::Arc;
use wsdr_core::push::{PushJob, PushWork};
use wsdr_core::{ConnectionId, Error, Result};
use wsdr_protocol::{AuctionId, Namespace, Topic, TopicName};

/// The version of a job message's form; a worker refuses (and the queue moves to its dead
/// letter queue) a message of another.
const JOB_FORMAT: u32 = 2;
/// The previous form, read still: the same fields with `auction` (an auction id) for `topic`.
const AUCTION_JOB_FORMAT: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct JobMessage {
    v: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    topic: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    auction: Option<String>,
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
        kind: None,
        topic: Some(job.topic.to_string()),
        auction: None,
        shard: job.shard,
        after: job.after.as_ref().map(ToString::to_string),
        frame: job.frame.to_string(),
        started_ms: job.started_ms,
        generation: job.generation,
    };
    // A struct of strings and numbers always serializes.
    serde_json::to_string(&message).unwrap_or_default()
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StartMessage {
    v: u32,
    kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    topic: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    auction: Option<String>,
}

const START: &str = "start";

/// A delayed start as a message body (JSON).
pub fn encode_start(topic: &Topic) -> String {
    let message = StartMessage {
        v: JOB_FORMAT,
        kind: START.to_owned(),
        topic: Some(topic.to_string()),
        auction: None,
    };
    serde_json::to_string(&message).unwrap_or_default()
}

fn bad(what: String) -> Error {
    Error::BadRequest(format!("push job message: {what}"))
}

/// The topic a message names, by its format: `topic` in this one, `auction` in the previous.
fn topic_of(v: u32, topic: Option<String>, auction: Option<String>) -> Result<Topic> {
    match (v, topic, auction) {
        (JOB_FORMAT, Some(topic), None) => Topic::parse(&topic).map_err(|e| bad(e.to_string())),
        (AUCTION_JOB_FORMAT, None, Some(auction)) => AuctionId::new(auction)
            .map(|id| Topic::new(Namespace::auction(), TopicName::from(&id)))
            .map_err(|e| bad(e.to_string())),
        (JOB_FORMAT | AUCTION_JOB_FORMAT, _, _) => Err(bad(format!(
            "format {v} names its topic by `{}` alone",
            if v == JOB_FORMAT { "topic" } else { "auction" }
        ))),
        (v, _, _) => Err(bad(format!(
            "format {v} (this worker reads {AUCTION_JOB_FORMAT} and {JOB_FORMAT})"
        ))),
    }
}

/// A message body back to its work (a page job or a start); a body that is neither is a clear
/// error.
pub fn decode_work(body: &str) -> Result<PushWork> {
    let value: serde_json::Value = serde_json::from_str(body).map_err(|e| bad(e.to_string()))?;
    match value.get("kind").and_then(serde_json::Value::as_str) {
        Some(START) => {
            let message: StartMessage =
                serde_json::from_value(value).map_err(|e| bad(e.to_string()))?;
            Ok(PushWork::Start(topic_of(
                message.v,
                message.topic,
                message.auction,
            )?))
        }
        None | Some("page") => decode_job(body).map(PushWork::Page),
        Some(other) => Err(bad(format!("unknown kind {other:?}"))),
    }
}

/// A page job's message body back to its job; a body that is not one is a clear error.
pub fn decode_job(body: &str) -> Result<PushJob> {
    let message: JobMessage = serde_json::from_str(body).map_err(|e| bad(e.to_string()))?;
    let topic = topic_of(message.v, message.topic, message.auction)?;
    if message.kind.as_deref().is_some_and(|k| k != "page") {
        return Err(bad(format!("not a page job: {:?}", message.kind)));
    }
    if message.shard >= wsdr_core::SUBSCRIBER_SHARDS {
        return Err(bad(format!("shard {} out of range", message.shard)));
    }
    Ok(PushJob {
        topic,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_survives_its_message_form_and_a_bad_body_is_a_clear_error() {
        let a1 = Topic::parse("chat:room:1").unwrap();
        let job = PushJob {
            topic: a1.clone(),
            shard: 7,
            after: Some(ConnectionId::new("abc=").unwrap()),
            frame: Arc::from(r#"{"type":"bidUpdate"}"#),
            started_ms: 1_700_000_000_123,
            generation: 42,
        };
        assert_eq!(decode_job(&encode_job(&job)).unwrap(), job);
        assert_eq!(
            decode_work(&encode_job(&job)).unwrap(),
            PushWork::Page(job.clone())
        );
        assert_eq!(
            decode_work(&encode_start(&a1)).unwrap(),
            PushWork::Start(a1)
        );
        // The previous release's messages name an auction: read as its topic (an auction id
        // may hold `:`; it is still the auction's).
        let lot = Topic::parse("auction:lot:1").unwrap();
        assert_eq!(
            decode_work(r#"{"v":1,"kind":"start","auction":"lot:1"}"#).unwrap(),
            PushWork::Start(lot.clone())
        );
        let old_page =
            r#"{"v":1,"auction":"lot:1","shard":3,"frame":"f","startedMs":5,"generation":2}"#;
        assert_eq!(decode_job(old_page).unwrap().topic, lot);
        // A page job may name its kind; only a page is one.
        let named_page = r#"{"v":2,"kind":"page","topic":"chat:room:1","shard":3,"frame":"f","startedMs":5,"generation":2}"#;
        assert_eq!(decode_job(named_page).unwrap().shard, 3);
        let named_start = r#"{"v":2,"kind":"start","topic":"chat:room:1","shard":3,"frame":"f","startedMs":5,"generation":2}"#;
        assert!(matches!(decode_job(named_start), Err(Error::BadRequest(_))));
        for body in [
            "",
            "{}",
            r#"{"v":2,"auction":"a1","shard":1,"frame":"","startedMs":0,"generation":1}"#,
            r#"{"v":1,"topic":"auction:a1","shard":1,"frame":"","startedMs":0,"generation":1}"#,
            r#"{"v":2,"topic":"a1","shard":1,"frame":"","startedMs":0,"generation":1}"#,
            r#"{"v":2,"topic":"auction:a1","auction":"a1","shard":1,"frame":"","startedMs":0,"generation":1}"#,
            r#"{"v":3,"topic":"auction:a1","shard":1,"frame":"","startedMs":0,"generation":1}"#,
            r#"{"v":2,"kind":"start","topic":"auction:a1","shard":1}"#,
            r#"{"v":1,"auction":"a1","shard":16,"frame":"","startedMs":0,"generation":1}"#,
            r#"{"v":1,"auction":"","shard":1,"frame":"","startedMs":0,"generation":1}"#,
            r#"{"v":1,"kind":"start","auction":""}"#,
            r#"{"v":2,"kind":"start","auction":"a1"}"#,
            r#"{"v":1,"kind":"start","auction":"a1","shard":1}"#,
            r#"{"v":1,"kind":"stop","auction":"a1"}"#,
            r#"{"v":1,"kind":"start","auction":"a1","shard":1,"frame":"","startedMs":0,"generation":1}"#,
        ] {
            let error = decode_work(body).unwrap_err();
            assert!(matches!(error, Error::BadRequest(_)), "{body}: {error}");
        }
    }
}
