//! The client's copy of a topic whose every op counts (a chat room), free of sockets and
//! clocks: the op copies it holds by log and position, what it asks for after a reconnect or a
//! hole, and when a hole is one to report.
//!
//! The server gives each op copy a position in its log (the accepting Region's count, or in
//! strong mode the topic's head's: docs/PROTOCOL.md, `topicState`). The client keeps, per log,
//! its *frontier*: the highest position up to which it holds every copy. It asks
//! `getState{since: frontier}` after every reconnect, when a push or a pong shows positions
//! past a hole, and again while an answer says `complete: false` and brought something new. An
//! answer that brings nothing new for a hole the server still counts is a discontinuity (a copy
//! lost with a Region that never returns, or not replicated yet): reported once per log and
//! frontier, asked again only when that log's frontier or count moves.

use std::collections::{BTreeMap, BTreeSet};
use wsdr_protocol::{ClientMessage, OpId, OpView, Topic, Versions};

/// What merging an answer or a push did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Merged {
    /// Copies held now that were not before, in position order per log.
    pub added: Vec<OpView>,
    /// A log the server counts past the client's frontier (a hole, or copies not sent).
    pub behind: bool,
}

/// One topic as the client holds it.
#[derive(Debug, Clone)]
pub struct TopicLog {
    topic: Topic,
    /// Every copy held, by (log, position).
    ops: BTreeMap<(String, u64), OpView>,
    /// The server's counts, each the highest seen (counts only grow).
    versions: Versions,
    /// The view of the latest answer or push.
    view: serde_json::Value,
    /// The holes of the last answer that said `complete: false` and brought nothing new:
    /// asking again is useless until one of them moves (its frontier or its count). Only the
    /// logs with a hole count: another log's new copies do not make a stuck hole worth
    /// asking about (a Region lost for good leaves its log's hole for the session, while
    /// the living Region's log moves with every message).
    stuck: Option<Holes>,
    /// Every (log, frontier) reported as a hole: each is reported once.
    reported: BTreeSet<(String, u64)>,
}

/// Per log with a hole: its frontier, and the server's count of it.
pub type Holes = BTreeMap<String, (u64, u64)>;

/// What an answer calls for ([`TopicLog::answered`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Nothing more to ask.
    Done,
    /// Ask again from the new frontier.
    AskAgain,
    /// A hole the server cannot fill now, newly seen: the frontier it stops at.
    Hole(Versions),
}

impl TopicLog {
    /// Nothing held of `topic` yet.
    pub fn new(topic: Topic) -> Self {
        Self {
            topic,
            ops: BTreeMap::new(),
            versions: Versions::new(),
            view: serde_json::Value::Null,
            stuck: None,
            reported: BTreeSet::new(),
        }
    }

    /// The topic.
    pub fn topic(&self) -> &Topic {
        &self.topic
    }

    /// Every copy held, by log then position.
    pub fn ops(&self) -> impl Iterator<Item = &OpView> {
        self.ops.values()
    }

    /// The server's counts as the client last heard them.
    pub fn versions(&self) -> &Versions {
        &self.versions
    }

    /// The app's view of the latest answer or push.
    pub fn view(&self) -> &serde_json::Value {
        &self.view
    }

    /// Per log, the highest position up to which every copy is held (0: none), for every
    /// log the server counts or the client holds.
    pub fn frontier(&self) -> Versions {
        let logs: BTreeSet<&String> = self
            .versions
            .keys()
            .chain(self.ops.keys().map(|(log, _)| log))
            .collect();
        logs.into_iter()
            .map(|log| {
                // The log's held positions in order, walked once: up to the first gap.
                let mut next = 1;
                for ((held_log, position), _) in self.ops.range((log.clone(), 1)..) {
                    if held_log != log || *position != next {
                        break;
                    }
                    next += 1;
                }
                (log.clone(), next - 1)
            })
            .collect()
    }

    /// The logs with a hole: those the server counts, or the client holds copies, past the
    /// frontier.
    pub fn holes(&self) -> Holes {
        self.frontier()
            .into_iter()
            .filter_map(|(log, at)| {
                let count = self.versions.get(&log).copied().unwrap_or(0);
                let held_past = self
                    .ops
                    .range((log.clone(), at + 1)..)
                    .next()
                    .is_some_and(|((held, _), _)| *held == log);
                (count > at || held_past).then_some((log, (at, count)))
            })
            .collect()
    }

    /// Whether the server counts copies past the frontier in some log.
    pub fn is_behind(&self, versions: &Versions) -> bool {
        let frontier = self.frontier();
        versions
            .iter()
            .any(|(log, count)| frontier.get(log).copied().unwrap_or(0) < *count)
    }

    /// The server's counts as a pong says them (counts only grow): a count that moved makes
    /// a stuck hole worth asking about again.
    pub fn counted(&mut self, versions: &Versions) {
        for (log, count) in versions {
            let slot = self.versions.entry(log.clone()).or_insert(0);
            *slot = (*slot).max(*count);
        }
    }

    /// Fold copies and the server's counts in (an answer's or a push's): copies already held
    /// change nothing, counts only grow.
    pub fn merge(
        &mut self,
        versions: &Versions,
        view: serde_json::Value,
        ops: Vec<OpView>,
    ) -> Merged {
        self.counted(versions);
        self.view = view;
        let mut added = Vec::new();
        for op in ops {
            let key = (op.log.clone(), op.position);
            if let std::collections::btree_map::Entry::Vacant(slot) = self.ops.entry(key) {
                added.push(slot.insert(op).clone());
            }
        }
        Merged {
            behind: self.is_behind(&self.versions.clone()),
            added,
        }
    }

    /// What to do after an answer (`complete` as it said) that brought `merged`: nothing
    /// when complete; ask again when incomplete but it brought copies (more than one answer
    /// carries, or a hole filling); otherwise the hole is stuck (a discontinuity, reported
    /// once per log and frontier), and it is not asked for again until it moves.
    pub fn answered(&mut self, merged: &Merged, complete: bool) -> Answer {
        if complete {
            self.stuck = None;
            return Answer::Done;
        }
        if !merged.added.is_empty() {
            self.stuck = None;
            return Answer::AskAgain;
        }
        let holes = self.holes();
        let mut newly = false;
        for (log, (at, _)) in &holes {
            newly |= self.reported.insert((log.clone(), *at));
        }
        self.stuck = Some(holes);
        if newly {
            Answer::Hole(self.frontier())
        } else {
            Answer::Done
        }
    }

    /// Whether asking now is useful: not while the holes of the last fruitless answer are
    /// the client's, each at the same frontier and count.
    pub fn worth_asking(&self) -> bool {
        self.stuck.as_ref() != Some(&self.holes())
    }

    /// The `getState` for this topic: from the frontier when anything is held (the copies
    /// past it), naming the op ids to settle.
    pub fn request(&self, op_ids: Vec<OpId>) -> ClientMessage {
        let since = (!self.versions.is_empty() || !self.ops.is_empty()).then(|| self.frontier());
        ClientMessage::GetTopic {
            topic: self.topic.clone(),
            op_ids,
            since,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn copy(log: &str, position: u64) -> OpView {
        let op = serde_json::json!({ "text": format!("{log} {position}") });
        OpView {
            author: "ann".into(),
            op_id: OpId::new(format!("msg-{log}-{position:04}")).unwrap(),
            region: log.into(),
            position,
            log: log.into(),
            at: position,
            digest: wsdr_protocol::Digest::of(&op).unwrap(),
            op,
        }
    }

    fn counts(pairs: &[(&str, u64)]) -> Versions {
        pairs.iter().map(|(l, c)| ((*l).to_owned(), *c)).collect()
    }

    fn log() -> TopicLog {
        TopicLog::new(Topic::parse("chat:lobby").unwrap())
    }

    #[test]
    fn the_frontier_stops_at_the_first_hole_of_each_log() {
        let mut held = log();
        let merged = held.merge(
            &counts(&[("e", 4), ("w", 1)]),
            serde_json::Value::Null,
            vec![copy("e", 1), copy("e", 2), copy("e", 4), copy("w", 1)],
        );
        assert_eq!(merged.added.len(), 4);
        assert!(merged.behind, "e:3 is missing");
        assert_eq!(held.frontier(), counts(&[("e", 2), ("w", 1)]));
        // A copy held twice is held once; counts never go down.
        let again = held.merge(
            &counts(&[("e", 3)]),
            serde_json::Value::Null,
            vec![copy("e", 2), copy("e", 3)],
        );
        assert_eq!(again.added, vec![copy("e", 3)]);
        assert!(!again.behind);
        assert_eq!(held.versions(), &counts(&[("e", 4), ("w", 1)]));
        assert_eq!(held.frontier(), counts(&[("e", 4), ("w", 1)]));
        assert!(held.is_behind(&counts(&[("w", 2)])));
        assert!(!held.is_behind(&counts(&[("e", 4)])));
    }

    #[test]
    fn the_request_asks_from_the_frontier_once_anything_is_held() {
        let mut held = log();
        assert!(matches!(
            held.request(Vec::new()),
            ClientMessage::GetTopic { since: None, .. }
        ));
        held.merge(
            &counts(&[("e", 3)]),
            serde_json::Value::Null,
            vec![copy("e", 1), copy("e", 3)],
        );
        let ClientMessage::GetTopic { since, .. } = held.request(Vec::new()) else {
            panic!("not a getState");
        };
        assert_eq!(since, Some(counts(&[("e", 1)])));
    }

    #[test]
    fn a_stuck_hole_is_not_asked_for_nor_reported_again_as_another_log_moves() {
        let mut held = log();
        // w's log has a hole at 2 (its Region lost for good, say); e's is whole.
        let first = held.merge(
            &counts(&[("e", 1), ("w", 3)]),
            serde_json::Value::Null,
            vec![copy("e", 1), copy("w", 1), copy("w", 3)],
        );
        assert_eq!(held.answered(&first, false), Answer::AskAgain);
        let nothing = held.merge(
            &counts(&[("e", 1), ("w", 3)]),
            serde_json::Value::Null,
            vec![],
        );
        assert!(matches!(held.answered(&nothing, false), Answer::Hole(_)));
        assert_eq!(held.holes(), Holes::from([("w".to_owned(), (1, 3))]));
        // e's log moves with every new message: no new question about w, no new report.
        for position in 2..5 {
            let push = held.merge(
                &counts(&[("e", position), ("w", 3)]),
                serde_json::Value::Null,
                vec![copy("e", position)],
            );
            assert!(push.behind, "w is still behind");
            assert!(!held.worth_asking(), "e's copies do not move w's hole");
            assert_eq!(held.answered(&Merged::default(), false), Answer::Done);
        }
        // A copy held past a count (its count never arrived) is a hole's edge too.
        let mut past = log();
        past.merge(
            &counts(&[("w", 1)]),
            serde_json::Value::Null,
            vec![copy("w", 3)],
        );
        assert_eq!(past.holes(), Holes::from([("w".to_owned(), (0, 1))]));
        // Each alone makes a hole: a count past the frontier with nothing held past it ...
        let mut counted = log();
        counted.merge(
            &counts(&[("w", 2)]),
            serde_json::Value::Null,
            vec![copy("w", 1)],
        );
        assert_eq!(counted.holes(), Holes::from([("w".to_owned(), (1, 2))]));
        // ... and a copy held past a frontier the count does not pass.
        let mut ahead = log();
        ahead.merge(
            &counts(&[("w", 1)]),
            serde_json::Value::Null,
            vec![copy("w", 1), copy("w", 3)],
        );
        assert_eq!(ahead.holes(), Holes::from([("w".to_owned(), (1, 1))]));
        // A log whole up to its count has none.
        let mut whole = log();
        whole.merge(
            &counts(&[("w", 1)]),
            serde_json::Value::Null,
            vec![copy("w", 1)],
        );
        assert!(whole.holes().is_empty());
    }

    #[test]
    fn a_hole_that_stays_is_reported_once_and_asked_again_when_the_counts_move() {
        let mut held = log();
        let first = held.merge(
            &counts(&[("e", 3)]),
            serde_json::Value::Null,
            vec![copy("e", 1), copy("e", 3)],
        );
        assert_eq!(
            held.answered(&first, false),
            Answer::AskAgain,
            "it brought copies"
        );
        let nothing = held.merge(&counts(&[("e", 3)]), serde_json::Value::Null, Vec::new());
        assert_eq!(
            held.answered(&nothing, false),
            Answer::Hole(counts(&[("e", 1)]))
        );
        assert!(!held.worth_asking(), "the same question has no new answer");
        assert_eq!(
            held.answered(&nothing, false),
            Answer::Done,
            "reported once"
        );
        // The server counts a new copy: worth asking; the hole is not reported again.
        held.merge(&counts(&[("e", 4)]), serde_json::Value::Null, Vec::new());
        assert!(held.worth_asking());
        let newer = held.merge(
            &counts(&[("e", 4)]),
            serde_json::Value::Null,
            vec![copy("e", 4)],
        );
        assert_eq!(held.answered(&newer, false), Answer::AskAgain);
        let still = held.merge(&counts(&[("e", 4)]), serde_json::Value::Null, Vec::new());
        assert_eq!(
            held.answered(&still, false),
            Answer::Done,
            "the same frontier, already reported"
        );
        // The hole fills (replication caught up): complete.
        let filled = held.merge(
            &counts(&[("e", 4)]),
            serde_json::Value::Null,
            vec![copy("e", 2)],
        );
        assert_eq!(held.answered(&filled, true), Answer::Done);
        assert_eq!(held.frontier(), counts(&[("e", 4)]));
    }

    #[test]
    fn a_log_shows_what_it_holds_in_order_and_the_latest_view() {
        let mut held = log();
        held.merge(
            &counts(&[("e", 2), ("w", 1)]),
            serde_json::json!({ "members": 3 }),
            vec![copy("w", 1), copy("e", 2), copy("e", 1)],
        );
        let order: Vec<(String, u64)> = held.ops().map(|c| (c.log.clone(), c.position)).collect();
        assert_eq!(
            order,
            [
                ("e".to_owned(), 1),
                ("e".to_owned(), 2),
                ("w".to_owned(), 1)
            ]
        );
        assert_eq!(held.view(), &serde_json::json!({ "members": 3 }));
    }

    #[test]
    fn a_request_reads_from_the_frontier_once_the_server_counted_anything() {
        let fresh = log();
        assert_eq!(
            fresh.request(Vec::new()).to_json(),
            r#"{"action":"getState","topic":"chat:lobby"}"#,
            "nothing counted, nothing held: the newest"
        );
        // Counted but none held (an answer that brought no copies): from the start.
        let mut counted = log();
        counted.merge(&counts(&[("e", 3)]), serde_json::Value::Null, Vec::new());
        assert_eq!(
            counted.request(Vec::new()).to_json(),
            r#"{"action":"getState","topic":"chat:lobby","since":{"e":0}}"#
        );
    }
}
