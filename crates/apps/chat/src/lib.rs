//! A chat room on the wsdr kit: wsdr's second app, and the worked example of docs/KIT.md.
//!
//! A room is a topic `chat:<room>`; a message is an op `{"text": ".."}` written with the kit's
//! `write` frame. What the kit gives every message (docs/KIT.md): it is recorded once per
//! Region that accepts it (a resend with its op id is a `duplicate`), no one can write in
//! another's name (the author is the token's `sub`), and it has a position in its log (the
//! accepting Region's count, or in strong mode the room's head's) so a client sees a hole by
//! position and reads it with `getState{since}`. What this app adds: the room's rules (a
//! message's length), its view, and one order of messages that is a function of the copies
//! alone ([`conversation`]), so every client that holds the same copies shows the same room.
//!
//! The room delivers every op ([`Delivery::Log`]): a `topicState` carries each Region's
//! newest [`HISTORY`] messages (or those past `since`), a push each Region's newest
//! [`PUSH_TAIL`]. Each Region's summary carries its newest message whole, so a Region shows
//! it even before the message's own item has replicated.

use serde_json::{json, Value as Json};
use std::collections::BTreeMap;
use wsdr_core::items::StoredOp;
use wsdr_core::topics::{Delivery, TopicApp};
use wsdr_core::write::App;
use wsdr_core::{Error, Result, StoredSummary, TopicKey};
use wsdr_protocol::{Digest, ErrorCode, Namespace, OpId, OpView, ProtocolError};

/// The namespace of every room.
pub const NAMESPACE: &str = "chat";
/// The longest message the wire takes, in bytes of UTF-8: past it a `write` is a protocol
/// error. A room may allow fewer characters ([`Room::max_chars`]).
pub const MAX_TEXT_BYTES: usize = 4_000;
/// Messages per Region a `getState` without `since` carries.
pub const HISTORY: usize = 50;
/// Messages per Region a push carries: a client that holds fewer of them than the push's
/// positions imply reads the rest with `getState{since}`. A push is posted to every watcher,
/// a read is a request, its reads and an answer per watcher, so a push carries what one
/// push interval brings at busy rates: 100 messages of 120 characters are under 32 KB (API
/// Gateway bills a message per 32 KB), and an answer is cut at 96 KB whatever the messages'
/// size (BENCHMARKS.md, "A busy room": 20 made every one of 10,000 watchers read at 10
/// messages/s).
pub const PUSH_TAIL: usize = 100;
/// Of those, a push carries the messages accepted within this long of a Region's newest: a
/// push interval at 10,000 watchers is about 2.5 s (the spacing widened to audience / budget,
/// then the posting), so 10 s spares every watcher that heard the previous push a read,
/// while a quiet room's push carries only its few new messages, not the last hundred.
pub const PUSH_WINDOW_MS: u64 = 10_000;

/// A room's seed: what it shows and what it takes. Identical in every Region (seeded, never
/// changed), so it may be written by any of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Room {
    pub title: String,
    /// The longest message the room takes, in characters: longer is refused (`too_long`).
    pub max_chars: usize,
}

impl Room {
    /// A room's seed as the kit stores it.
    pub fn to_json(&self) -> Json {
        json!({ "title": self.title, "maxChars": self.max_chars })
    }
}

/// One message, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Post {
    pub text: String,
}

/// Why a room refuses a message: final, whatever is sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Longer than the room's `max_chars`.
    TooLong,
}

/// The chat app, in its namespace (one deployment may host rooms under several).
#[derive(Debug, Clone)]
pub struct Chat {
    namespace: Namespace,
}

impl Chat {
    /// Rooms in `namespace` (usually [`NAMESPACE`]: [`Chat::namespace`]).
    pub fn in_namespace(namespace: Namespace) -> Self {
        Self { namespace }
    }

    /// The usual namespace, [`NAMESPACE`].
    pub fn namespace() -> std::result::Result<Namespace, ProtocolError> {
        Namespace::new(NAMESPACE)
    }
}

fn malformed(what: &str) -> Error {
    Error::Internal(format!(
        "stored chat item has a missing or malformed `{what}`"
    ))
}

impl App for Chat {
    type Meta = Room;
    type Op = Post;
    /// The newest message this Region accepted, whole (none before the first).
    type Summary = Option<StoredOp>;
    type Reject = Refusal;

    fn op_json(&self, post: &Post) -> Json {
        json!({ "text": post.text })
    }

    fn summary(&self, topic: &TopicKey, stored: &StoredSummary) -> Result<Option<StoredOp>> {
        match stored.app.get("last") {
            None => Err(malformed("last")),
            Some(Json::Null) => Ok(None),
            Some(last) => StoredOp::from_json(topic, last).map(Some),
        }
    }

    fn summary_json(&self, last: &Option<StoredOp>) -> Json {
        json!({ "last": last.as_ref().map(StoredOp::to_json) })
    }

    fn empty_summary(&self) -> Option<StoredOp> {
        None
    }

    fn admit(&self, _room: &Room, _now_ms: u64) -> std::result::Result<(), Refusal> {
        Ok(())
    }

    /// A message's length is the room's only rule: no other Region's messages change it, so
    /// a Region decides alone (and a split changes nothing).
    fn decide(
        &self,
        room: &Room,
        _seen: &[Option<StoredOp>],
        post: &Post,
    ) -> std::result::Result<(), Refusal> {
        if post.text.chars().count() > room.max_chars {
            Err(Refusal::TooLong)
        } else {
            Ok(())
        }
    }

    fn carried(&self, _topic: &TopicKey, last: &Option<StoredOp>) -> Vec<StoredOp> {
        last.iter().cloned().collect()
    }

    /// The newest message is the one just accepted (positions only grow).
    fn fold(
        &self,
        _own: &Option<StoredOp>,
        copy: &StoredOp,
        _post: &Post,
    ) -> Result<Option<StoredOp>> {
        Ok(Some(copy.clone()))
    }
}

impl TopicApp for Chat {
    fn namespace(&self) -> Namespace {
        self.namespace.clone()
    }

    fn parse_op(&self, op: &Json) -> std::result::Result<Post, ProtocolError> {
        let invalid = |message: String| ProtocolError::new(ErrorCode::InvalidField, message);
        let fields = op
            .as_object()
            .filter(|fields| fields.len() == 1)
            .ok_or_else(|| invalid("a message is `{\"text\": \"..\"}`".into()))?;
        let text = fields
            .get("text")
            .and_then(Json::as_str)
            .ok_or_else(|| invalid("a message's `text` is a string".into()))?;
        if text.trim().is_empty() {
            return Err(invalid("a message's `text` is empty".into()));
        }
        if text.len() > MAX_TEXT_BYTES {
            return Err(invalid(format!(
                "a message's `text` is {} bytes; at most {MAX_TEXT_BYTES}",
                text.len()
            )));
        }
        Ok(Post {
            text: text.to_owned(),
        })
    }

    fn meta(&self, _topic: &TopicKey, stored: &Json) -> Result<Room> {
        Ok(Room {
            title: stored
                .get("title")
                .and_then(Json::as_str)
                .ok_or_else(|| malformed("title"))?
                .to_owned(),
            max_chars: stored
                .get("maxChars")
                .and_then(Json::as_u64)
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| malformed("maxChars"))?,
        })
    }

    fn reject_code(&self, reason: Refusal) -> &'static str {
        match reason {
            Refusal::TooLong => "too_long",
        }
    }

    fn view(&self, room: &Room, _seen: &[(StoredSummary, Option<StoredOp>)]) -> Json {
        room.to_json()
    }

    fn delivery(&self) -> Delivery {
        Delivery::Log {
            tail: HISTORY,
            push_tail: PUSH_TAIL,
            push_window_ms: PUSH_WINDOW_MS,
        }
    }
}

/// One message as a room shows it: every copy of it folded into one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub author: String,
    pub op_id: OpId,
    pub text: String,
    /// When its earliest copy was accepted (that Region's clock), and where.
    pub at: u64,
    pub region: String,
    pub digest: Digest,
}

/// The room's messages from the copies a client holds, in the one order every client shows:
/// the copies of one message (one author's op id with one payload, accepted in one Region or,
/// replayed across a failover, in two) fold into one, placed by its earliest copy (time,
/// then Region, author, op id). A function of the set of copies alone, so it is the same
/// whatever order they arrived in; a late copy from a split inserts at its place. An op id
/// reused for another text (two payloads, each accepted in one Region during a split) is two
/// messages: both were accepted.
pub fn conversation<'a>(copies: impl IntoIterator<Item = &'a OpView>) -> Vec<Message> {
    let mut earliest: BTreeMap<(&str, &OpId, Digest), &OpView> = BTreeMap::new();
    for copy in copies {
        let slot = earliest
            .entry((copy.author.as_str(), &copy.op_id, copy.digest))
            .or_insert(copy);
        if (copy.at, &copy.region) < (slot.at, &slot.region) {
            *slot = copy;
        }
    }
    let mut messages: Vec<Message> = earliest
        .into_values()
        .map(|copy| Message {
            author: copy.author.clone(),
            op_id: copy.op_id.clone(),
            text: copy
                .op
                .get("text")
                .and_then(Json::as_str)
                .unwrap_or_default()
                .to_owned(),
            at: copy.at,
            region: copy.region.clone(),
            digest: copy.digest,
        })
        .collect();
    messages.sort_by(|a, b| {
        (a.at, &a.region, &a.author, &a.op_id, a.digest)
            .cmp(&(b.at, &b.region, &b.author, &b.op_id, b.digest))
    });
    messages
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn chat() -> Chat {
        Chat::in_namespace(Chat::namespace().unwrap())
    }

    #[test]
    fn a_message_of_the_wires_limit_is_taken_and_one_byte_more_refused() {
        let text = |bytes: usize| json!({ "text": "é".repeat(bytes / 2) + &"a".repeat(bytes % 2) });
        assert!(chat().parse_op(&text(MAX_TEXT_BYTES)).is_ok());
        assert!(chat().parse_op(&text(MAX_TEXT_BYTES + 1)).is_err());
        assert!(
            chat().parse_op(&json!({ "text": " \n " })).is_err(),
            "blank"
        );
    }

    #[test]
    fn a_room_takes_a_message_of_its_length_and_refuses_one_character_more() {
        let room = Room {
            title: "r".into(),
            max_chars: 3,
        };
        let post = |text: &str| Post { text: text.into() };
        assert_eq!(
            chat().decide(&room, &[], &post("héé")),
            Ok(()),
            "characters, not bytes"
        );
        assert_eq!(
            chat().decide(&room, &[], &post("abcd")),
            Err(Refusal::TooLong)
        );
    }

    fn copy(author: &str, id: &str, region: &str, at: u64, text: &str) -> OpView {
        let op = json!({ "text": text });
        OpView {
            author: author.into(),
            op_id: OpId::new(id).unwrap(),
            region: region.into(),
            position: at,
            log: region.into(),
            at,
            digest: Digest::of(&op).unwrap(),
            op,
        }
    }

    #[test]
    fn a_message_is_placed_by_its_earliest_copy_whatever_arrived_first() {
        // The replay's copy (west, later) arrives before the first copy (east, earlier).
        let replayed = copy("ann", "ann-msg-0001", "us-west-2", 50, "hi");
        let first = copy("ann", "ann-msg-0001", "us-east-1", 10, "hi");
        let other = copy("bo", "bo-msg-0001", "us-west-2", 30, "yo");
        for copies in [
            vec![replayed.clone(), other.clone(), first.clone()],
            vec![first.clone(), replayed.clone(), other.clone()],
        ] {
            let shown = conversation(&copies);
            assert_eq!(
                shown
                    .iter()
                    .map(|m| (m.text.as_str(), m.at, m.region.as_str()))
                    .collect::<Vec<_>>(),
                [("hi", 10, "us-east-1"), ("yo", 30, "us-west-2")]
            );
        }
        // One op id reused for another text: two messages, both accepted.
        let reused = copy("ann", "ann-msg-0001", "us-west-2", 20, "other");
        assert_eq!(conversation(&[first, reused]).len(), 2);
    }
}
