//! The items of the replicated state store, as Global Tables sees them, for every app alike:
//! a topic's seed, one Region's copy of an op, one Region's summary of a topic, and (strong
//! mode) a topic's head. An app's own values (the seed, the op, the summary's fold) ride as
//! JSON inside them; the keys, conditions and stamps are the kit's, so "every item written in
//! two Regions is identical in both or has exactly one writer Region" holds whatever the app
//! (docs/DATA_MODEL.md). Adapters convert these to their storage; the lab's replicator ships
//! them.

use crate::model::UserId;
use serde_json::Value as Json;
use wsdr_protocol::{Digest, OpId};

/// A topic as the store keys it: its app's namespace and its name there (the wire's
/// `<namespace>:<name>`).
pub use wsdr_protocol::Topic as TopicKey;

/// One Region's copy of an accepted op. A copy is its own item, keyed by (topic, author, op
/// id, Region), so no write in any Region can replace another user's op or another Region's
/// copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredOp {
    pub topic: TopicKey,
    /// The verified `sub` of the user who wrote it (never taken from a frame).
    pub author: UserId,
    /// The client-made idempotency key, scoped to the author and topic.
    pub op_id: OpId,
    /// The Region that accepted this copy (and the only one that ever writes it).
    pub region: String,
    /// Milliseconds since the epoch at which the accepting Region took it (its own clock).
    pub at: u64,
    /// The accepting Region's accepted count for the topic with this op counted in: gapless
    /// per Region (in strong mode, per topic), written by the same transaction as the count.
    pub position: u64,
    /// The digest of the op's canonical JSON: two copies with one op id and different digests
    /// are two payloads under one key (a reused op id).
    pub digest: Digest,
    /// The app's op.
    pub op: Json,
}

impl StoredOp {
    /// The copy as JSON, for an app whose summary carries an op whole (a chat room's newest
    /// message): every field but the topic, which the summary's key names.
    pub fn to_json(&self) -> Json {
        serde_json::json!({
            "author": self.author.as_str(),
            "opId": self.op_id.as_str(),
            "region": self.region,
            "at": self.at,
            "position": self.position,
            "digest": self.digest.to_string(),
            "op": self.op,
        })
    }

    /// A copy of `topic` read back from [`StoredOp::to_json`]; an error names the field that
    /// is missing or malformed. The digest must be the op's: a carried op is not trusted more
    /// than a copy.
    pub fn from_json(topic: &TopicKey, value: &Json) -> crate::Result<Self> {
        let malformed = |field: &str| {
            crate::Error::Internal(format!("carried op has a missing or malformed `{field}`"))
        };
        let text = |field: &str| {
            value
                .get(field)
                .and_then(Json::as_str)
                .ok_or_else(|| malformed(field))
        };
        let number = |field: &str| {
            value
                .get(field)
                .and_then(Json::as_u64)
                .ok_or_else(|| malformed(field))
        };
        let op = value.get("op").cloned().ok_or_else(|| malformed("op"))?;
        let digest = Digest::parse(text("digest")?).map_err(|_| malformed("digest"))?;
        if Digest::of(&op).ok() != Some(digest) {
            return Err(malformed("digest"));
        }
        Ok(Self {
            topic: topic.clone(),
            author: UserId::new(text("author")?).map_err(|_| malformed("author"))?,
            op_id: OpId::new(text("opId")?).map_err(|_| malformed("opId"))?,
            region: text("region")?.to_owned(),
            at: number("at")?,
            position: number("position")?,
            digest,
            op,
        })
    }

    /// Whether this copy is in `log` ([`crate::ports::OpStore::log_after`]): the head's log
    /// ([`crate::model::LEDGER`], strong mode) holds every copy of the topic; a Region's log the
    /// copies that Region accepted.
    pub fn in_log(&self, log: &str) -> bool {
        log == crate::model::LEDGER || self.region == log
    }
}

/// One page of a log from the copies a store holds: those of `log` past `after`, in position
/// order, at most `limit` (the stores that hold their items in memory answer
/// [`crate::ports::OpStore::log_after`] with it).
pub fn log_page(
    ops: impl IntoIterator<Item = StoredOp>,
    log: &str,
    after: u64,
    limit: usize,
) -> Vec<StoredOp> {
    let mut page: Vec<StoredOp> = ops
        .into_iter()
        .filter(|op| op.in_log(log) && op.position > after)
        .collect();
    page.sort_by(|a, b| (a.position, &a.region).cmp(&(b.position, &b.region)));
    page.truncate(limit);
    page
}

/// One Region's summary of a topic: how many ops it accepted and the app's fold of them.
/// Only its own Region writes it (conditionally on `accepted`, in the same transaction as the
/// op's copy), so replication only ever delivers newer versions of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSummary {
    pub region: String,
    /// Ops this Region accepted in the topic; also the summary's version.
    pub accepted: u64,
    /// The app's fold of those ops.
    pub app: Json,
}

/// Strong mode: the newest accepted op as the head records it, with the id of the write that
/// accepted it (its copy may not be written yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastOp {
    pub op: StoredOp,
    pub write_id: String,
}

/// Strong mode: a topic's single point of order, the summary of every accepted op (its
/// `accepted` is the ledger's length and the head's version) and the newest op.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredHead {
    pub summary: StoredSummary,
    pub last: Option<LastOp>,
}

/// One replicated item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// A topic's immutable seed (every Region writes the same one).
    Meta { topic: TopicKey, meta: Json },
    /// One Region's copy of an op, with the id of the write that created it.
    Op { op: StoredOp, write_id: String },
    /// One Region's summary of a topic.
    Summary {
        topic: TopicKey,
        summary: StoredSummary,
    },
    /// Strong mode: the topic's head (one per topic, written by every Region).
    Head { topic: TopicKey, head: StoredHead },
}

/// The key of an item: two writes with the same key are versions of one item.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ItemKey {
    Meta(TopicKey),
    Op {
        topic: TopicKey,
        author: UserId,
        op_id: OpId,
        region: String,
    },
    Summary {
        topic: TopicKey,
        region: String,
    },
    Head(TopicKey),
}

impl StoredOp {
    /// The key of this copy's item.
    pub fn key(&self) -> ItemKey {
        ItemKey::Op {
            topic: self.topic.clone(),
            author: self.author.clone(),
            op_id: self.op_id.clone(),
            region: self.region.clone(),
        }
    }
}

impl Item {
    pub fn key(&self) -> ItemKey {
        match self {
            Item::Meta { topic, .. } => ItemKey::Meta(topic.clone()),
            Item::Op { op, .. } => op.key(),
            Item::Summary { topic, summary } => ItemKey::Summary {
                topic: topic.clone(),
                region: summary.region.clone(),
            },
            Item::Head { topic, .. } => ItemKey::Head(topic.clone()),
        }
    }

    /// The topic the item belongs to.
    pub fn topic(&self) -> &TopicKey {
        match self {
            Item::Op { op, .. } => &op.topic,
            Item::Meta { topic, .. } | Item::Summary { topic, .. } | Item::Head { topic, .. } => {
                topic
            }
        }
    }
}

/// A write as Global Tables replicates it: the whole item with its last-writer-wins stamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub item: Item,
    /// Milliseconds since the epoch at which the writing Region wrote it, by that Region's
    /// clock (Global Tables' own timestamp; the Regions' clocks may disagree).
    pub written_at: u64,
    /// The Region that wrote it; breaks ties between equal timestamps deterministically.
    pub writer: String,
}

/// Global Tables' conflict rule between two versions of one item, by their stamps (the write
/// time by the writing Region's clock, then the writer, so that a tie still has one winner):
/// whether `candidate` replaces `current`. The one place the rule is written.
pub fn last_writer_wins(candidate: (u64, &str), current: (u64, &str)) -> bool {
    candidate > current
}

impl Change {
    /// The version's stamp: (write time, writer).
    pub fn stamp(&self) -> (u64, &str) {
        (self.written_at, &self.writer)
    }

    /// Whether this version replaces `other` ([`last_writer_wins`]).
    pub fn newer_than(&self, other: &Change) -> bool {
        last_writer_wins(self.stamp(), other.stamp())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy(region: &str, position: u64) -> StoredOp {
        let op = serde_json::json!({ "n": position });
        StoredOp {
            topic: TopicKey::parse("chat:r").unwrap(),
            author: UserId::new("ann").unwrap(),
            op_id: OpId::new(format!("op-{region}-{position:04}")).unwrap(),
            region: region.into(),
            at: position,
            position,
            digest: Digest::of(&op).unwrap(),
            op,
        }
    }

    #[test]
    fn a_carried_copy_reads_back_whole_and_a_corrupt_one_is_refused() {
        let held = copy("a", 7);
        let topic = held.topic.clone();
        assert_eq!(StoredOp::from_json(&topic, &held.to_json()).unwrap(), held);
        let mut bent = held.to_json();
        bent["op"] = serde_json::json!({ "n": 8 });
        assert!(
            StoredOp::from_json(&topic, &bent).is_err(),
            "digest of another op"
        );
        for field in ["author", "opId", "region", "at", "position", "digest", "op"] {
            let mut missing = held.to_json();
            missing.as_object_mut().unwrap().remove(field);
            assert!(StoredOp::from_json(&topic, &missing).is_err(), "{field}");
        }
    }

    #[test]
    fn a_log_page_is_one_logs_copies_past_a_position_in_order() {
        let held = [
            copy("b", 2),
            copy("a", 4),
            copy("a", 1),
            copy("a", 3),
            copy("b", 1),
        ];
        let page = |log: &str, after: u64, limit: usize| -> Vec<(String, u64)> {
            log_page(held.clone(), log, after, limit)
                .into_iter()
                .map(|c| (c.region, c.position))
                .collect()
        };
        let a = |p: u64| ("a".to_owned(), p);
        let b = |p: u64| ("b".to_owned(), p);
        assert_eq!(page("a", 0, 10), [a(1), a(3), a(4)], "a gap stays a gap");
        assert_eq!(
            page("a", 1, 1),
            [a(3)],
            "past the position, at most the limit"
        );
        assert_eq!(page("a", 4, 10), []);
        assert_eq!(page("b", 1, 10), [b(2)]);
        // The head's log holds every copy, by the head's positions.
        assert_eq!(page(crate::model::LEDGER, 1, 10), [b(2), a(3), a(4)]);
    }

    #[test]
    fn the_later_write_wins_and_a_tie_goes_to_one_writer_by_name() {
        assert!(last_writer_wins((2, "us-east-1"), (1, "us-west-2")));
        assert!(!last_writer_wins((1, "us-west-2"), (2, "us-east-1")));
        // Equal times (two Regions' clocks): the same winner from either side.
        assert!(last_writer_wins((5, "us-west-2"), (5, "us-east-1")));
        assert!(!last_writer_wins((5, "us-east-1"), (5, "us-west-2")));
        let change = |at: u64, writer: &str| Change {
            item: Item::Op {
                op: copy("e", 1),
                write_id: "w".into(),
            },
            written_at: at,
            writer: writer.into(),
        };
        assert!(change(3, "a").newer_than(&change(2, "b")));
        assert!(!change(2, "b").newer_than(&change(3, "a")));
    }
}
