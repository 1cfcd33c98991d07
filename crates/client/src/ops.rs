//! The client's book of its own writes ("ops"), for any app, free of sockets and clocks: the
//! caller passes the time. It knows an op by its op id (the idempotency key the server keeps
//! for good), its topic and the digest of its payload ([`wsdr_protocol::Digest`]), never by
//! what the op means; the app's own form of the op (`T`: the auction keeps its bid frame's
//! fields) rides along. The browser client's `OpBook` (web/wsdr-client.js) follows the same
//! rules:
//!
//! - sent, unanswered ops are replayed after every reconnect with the same op id;
//! - a replay answered `rejected` (the Region may not have seen the first copy yet), unless the
//!   reason is one of the book's final reasons (the op id reused with another payload), or an
//!   `unknown` answer is doubtful: it settles as standing when the server shows a copy with
//!   the same op id and digest, is sent again when an `unknown` one is not shown, and settles
//!   as not standing once the settle window has passed;
//! - a `redirect` decided nothing: the op stays unanswered, for the next Region;
//! - ops made offline wait in order and are dropped unsent once too old
//!   ([`crate::offline`]).

use std::collections::VecDeque;
use std::time::Duration;
use tokio::time::Instant;
use wsdr_protocol::{BidStatus, Digest};

/// One op as the book holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op<T> {
    /// The op's idempotency key: the same on every send.
    pub op_id: String,
    /// The topic it writes to (the auction).
    pub topic: String,
    /// The digest of its payload: a copy with this op id and another digest is not this op.
    pub digest: Digest,
    /// The app's own form of the op (what its frame is built from).
    pub app: T,
}

#[derive(Debug)]
struct Unanswered<T> {
    op: Op<T>,
    /// Sessions the op was sent in: more than one means a replay.
    sends: u32,
}

#[derive(Debug)]
struct Doubt<T> {
    op: Op<T>,
    since: Instant,
    /// The server could not tell whether it recorded the op: send it again if a read does not
    /// show it (a replay is safe: ops are idempotent by op id).
    unknown: bool,
}

/// What a write's result did to the book.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answered {
    /// Final: accepted, a duplicate of a standing op, or rejected where no copy can exist.
    Final,
    /// Not final: the op waits for its settlement.
    Doubtful,
    /// Nothing was decided (a redirect): the op stays unanswered.
    Undecided,
    /// The book holds no such op (answered before, or never sent from here).
    NotHeld,
}

/// A doubtful op's final word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    /// The op's id.
    pub op_id: String,
    /// Whether a copy of it, with its payload, stands.
    pub stands: bool,
}

/// The book. `T` is the app's form of an op.
#[derive(Debug)]
pub struct OpBook<T> {
    settle_window: Duration,
    final_reasons: Vec<String>,
    unanswered: Vec<Unanswered<T>>,
    doubtful: Vec<Doubt<T>>,
    queued: VecDeque<(Op<T>, Instant)>,
}

impl<T: Clone> OpBook<T> {
    /// A book whose doubts settle as not standing after `settle_window`, and for which a
    /// rejection with one of `final_reasons` is final even after a replay.
    pub fn new(settle_window: Duration, final_reasons: &[&str]) -> Self {
        Self {
            settle_window,
            final_reasons: final_reasons.iter().map(|r| (*r).to_owned()).collect(),
            unanswered: Vec::new(),
            doubtful: Vec::new(),
            queued: VecDeque::new(),
        }
    }

    /// An op sent now, on the open session.
    pub fn sent(&mut self, op: Op<T>) {
        self.unanswered.push(Unanswered { op, sends: 1 });
    }

    /// An op made while offline: it waits for the next session.
    pub fn queue(&mut self, op: Op<T>, at: Instant) {
        self.queued.push_back((op, at));
    }

    /// Ops made offline and not sent yet.
    pub fn queued(&self) -> usize {
        self.queued.len()
    }

    /// A session opens: the unanswered ops again (same op ids), then the ops queued offline
    /// that are no older than `max_age` at `now`. Returns the ops to send, in that order, and
    /// the op ids of the queued ones dropped unsent.
    pub fn open_session(&mut self, now: Instant, max_age: Duration) -> (Vec<Op<T>>, Vec<String>) {
        let mut send = Vec::new();
        for unanswered in &mut self.unanswered {
            unanswered.sends += 1;
            send.push(unanswered.op.clone());
        }
        let mut expired = Vec::new();
        while let Some((op, at)) = self.queued.pop_front() {
            if crate::offline::expired(now.saturating_duration_since(at), max_age) {
                expired.push(op.op_id);
                continue;
            }
            send.push(op.clone());
            self.unanswered.push(Unanswered { op, sends: 1 });
        }
        (send, expired)
    }

    /// A write's result for `op_id`.
    pub fn answered(
        &mut self,
        op_id: &str,
        status: BidStatus,
        reason: Option<&str>,
        now: Instant,
    ) -> Answered {
        if status == BidStatus::Redirect {
            return Answered::Undecided;
        }
        let Some(position) = self.unanswered.iter().position(|u| u.op.op_id == op_id) else {
            return Answered::NotHeld;
        };
        let unanswered = self.unanswered.remove(position);
        // A replay rejected by a Region that may not have seen the first copy yet, or an
        // unknown outcome: not final. A rejection of an op sent once is final: no copy can
        // exist anywhere.
        let final_reason = reason.is_some_and(|r| self.final_reasons.iter().any(|f| f == r));
        let replayed_and_rejected =
            status == BidStatus::Rejected && unanswered.sends > 1 && !final_reason;
        if replayed_and_rejected || status == BidStatus::Unknown {
            self.doubtful.push(Doubt {
                op: unanswered.op,
                since: now,
                unknown: status == BidStatus::Unknown,
            });
            Answered::Doubtful
        } else {
            Answered::Final
        }
    }

    /// The doubtful op ids of `topic`, the oldest doubts first, at most `max`.
    pub fn doubts_of(&self, topic: &str, max: usize) -> Vec<String> {
        let mut ids: Vec<String> = Vec::new();
        for doubt in self.doubtful.iter().filter(|d| d.op.topic == topic) {
            if ids.len() == max {
                break;
            }
            if !ids.contains(&doubt.op.op_id) {
                ids.push(doubt.op.op_id.clone());
            }
        }
        ids
    }

    /// The topics with doubtful ops, sorted.
    pub fn doubtful_topics(&self) -> Vec<String> {
        let mut topics: Vec<String> = self.doubtful.iter().map(|d| d.op.topic.clone()).collect();
        topics.sort();
        topics.dedup();
        topics
    }

    /// A read of `topic` answered: `shows(op)` says whether it shows the caller's copy of
    /// that op with that payload (the same op id and digest; the auction's older frames name
    /// amounts instead). A doubtful op shown settles as standing; an `unknown` one not shown
    /// goes back to unanswered and is returned, to be sent again.
    pub fn settle(
        &mut self,
        topic: &str,
        shows: impl Fn(&Op<T>) -> bool,
    ) -> (Vec<Settled>, Vec<Op<T>>) {
        let mut settled = Vec::new();
        let mut resend = Vec::new();
        let mut still = Vec::new();
        for doubt in std::mem::take(&mut self.doubtful) {
            if doubt.op.topic != topic {
                still.push(doubt);
            } else if shows(&doubt.op) {
                settled.push(Settled {
                    op_id: doubt.op.op_id,
                    stands: true,
                });
            } else if doubt.unknown {
                // Not recorded here: send it again (same op id, so at most one copy per
                // Region), and let its answer decide.
                resend.push(doubt.op.clone());
                self.unanswered.push(Unanswered {
                    op: doubt.op,
                    sends: 1,
                });
            } else {
                still.push(doubt);
            }
        }
        self.doubtful = still;
        (settled, resend)
    }

    /// A push shows the caller's op `op_id` of `topic` standing with payload `digest`:
    /// settles it if it was doubtful (the same payload only).
    pub fn settle_shown(&mut self, topic: &str, op_id: &str, digest: &Digest) -> Option<Settled> {
        let position = self
            .doubtful
            .iter()
            .position(|d| d.op.topic == topic && d.op.op_id == op_id && d.op.digest == *digest)?;
        let doubt = self.doubtful.remove(position);
        Some(Settled {
            op_id: doubt.op.op_id,
            stands: true,
        })
    }

    /// Doubtful ops whose window has passed at `now` settle as not standing.
    pub fn expire(&mut self, now: Instant) -> Vec<Settled> {
        let window = self.settle_window;
        let (expired, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.doubtful)
            .into_iter()
            .partition(|d| now.saturating_duration_since(d.since) >= window);
        self.doubtful = kept;
        expired
            .into_iter()
            .map(|d| Settled {
                op_id: d.op.op_id,
                stands: false,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    //! The book with a chat room's posts: no amount, no high bid, nothing but op ids, topics
    //! and digests.
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn post(op_id: &str, text: &str) -> Op<String> {
        Op {
            op_id: op_id.into(),
            topic: "chat:r1".into(),
            digest: Digest::of(&json!({"kind": "post", "text": text})).unwrap(),
            app: text.into(),
        }
    }

    fn book() -> OpBook<String> {
        OpBook::new(Duration::from_secs(120), &["op_id_reused"])
    }

    fn ids(ops: &[Op<String>]) -> Vec<&str> {
        ops.iter().map(|o| o.op_id.as_str()).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn unanswered_posts_are_replayed_each_session_and_queued_ones_after_them() {
        let t0 = Instant::now();
        let mut book = book();
        book.sent(post("m1", "hi"));
        book.queue(post("m2", "old"), t0);
        book.queue(post("m3", "young"), t0 + Duration::from_secs(20));
        assert_eq!(book.queued(), 2);
        let max_age = Duration::from_secs(30);
        let (send, expired) = book.open_session(t0 + Duration::from_secs(31), max_age);
        assert_eq!(ids(&send), ["m1", "m3"]);
        assert_eq!(expired, ["m2"]);
        assert_eq!(book.queued(), 0);
        let (again, _) = book.open_session(t0 + Duration::from_secs(999), max_age);
        assert_eq!(ids(&again), ["m1", "m3"], "sent ones never expire offline");
        let (edge, _) = {
            let mut b = self::book();
            b.queue(post("m4", "edge"), t0);
            b.open_session(t0 + max_age, max_age)
        };
        assert_eq!(
            ids(&edge),
            ["m4"],
            "an age equal to the limit is still sent"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn rejections_are_final_once_sent_once_doubtful_after_a_replay_except_final_reasons() {
        let now = Instant::now();
        let mut book = book();
        for id in ["m1", "m2", "m3"] {
            book.sent(post(id, id));
        }
        let rejected = BidStatus::Rejected;
        assert_eq!(
            book.answered("m1", rejected, Some("too_long"), now),
            Answered::Final
        );
        book.open_session(now, Duration::ZERO);
        assert_eq!(
            book.answered("m2", rejected, Some("not_member"), now),
            Answered::Doubtful
        );
        assert_eq!(
            book.answered("m3", rejected, Some("op_id_reused"), now),
            Answered::Final
        );
        assert_eq!(book.doubts_of("chat:r1", 32), ["m2"]);
        assert_eq!(
            book.answered("m2", BidStatus::Accepted, None, now),
            Answered::NotHeld
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_redirect_leaves_the_post_for_the_next_region() {
        let now = Instant::now();
        let mut book = book();
        book.sent(post("m1", "a"));
        assert_eq!(
            book.answered("m1", BidStatus::Redirect, None, now),
            Answered::Undecided
        );
        let (send, _) = book.open_session(now, Duration::ZERO);
        assert_eq!(ids(&send), ["m1"]);
        assert_eq!(
            book.answered("m1", BidStatus::Accepted, None, now),
            Answered::Final
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_doubt_settles_only_on_a_copy_with_its_own_digest() {
        let now = Instant::now();
        let mut book = book();
        book.sent(post("m1", "hello"));
        assert_eq!(
            book.answered("m1", BidStatus::Unknown, None, now),
            Answered::Doubtful
        );
        let other = post("m1", "HELLO").digest;
        let (settled, resend) = book.settle("chat:r1", |op| op.op_id == "m1" && op.digest == other);
        assert!(settled.is_empty());
        assert_eq!(ids(&resend), ["m1"], "unknown and not shown: sent again");
        book.answered("m1", BidStatus::Unknown, None, now);
        let mine = post("m1", "hello").digest;
        let (settled, resend) = book.settle("chat:r1", |op| op.op_id == "m1" && op.digest == mine);
        assert_eq!(
            settled,
            [Settled {
                op_id: "m1".into(),
                stands: true
            }]
        );
        assert!(resend.is_empty());
        assert!(book.doubtful_topics().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn other_topics_settle_nothing_and_a_doubt_not_shown_waits_for_the_window() {
        let t0 = Instant::now();
        let mut book = book();
        book.sent(post("m1", "a"));
        book.open_session(t0, Duration::ZERO);
        book.answered("m1", BidStatus::Rejected, Some("rate_limited"), t0);
        assert_eq!(book.doubtful_topics(), ["chat:r1"]);
        assert!(book.doubts_of("chat:r2", 32).is_empty());
        assert!(book.doubts_of("chat:r1", 0).is_empty());
        assert_eq!(book.settle("chat:r2", |_| true).0, []);
        let (settled, resend) = book.settle("chat:r1", |_| false);
        assert!(settled.is_empty() && resend.is_empty(), "not unknown: kept");
        let window = Duration::from_secs(120);
        assert!(book
            .expire(t0 + window - Duration::from_millis(1))
            .is_empty());
        assert_eq!(
            book.expire(t0 + window),
            [Settled {
                op_id: "m1".into(),
                stands: false
            }]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_push_settles_a_doubt_with_the_same_topic_op_id_and_payload_only() {
        let now = Instant::now();
        let mut book = book();
        book.sent(post("m1", "a"));
        book.answered("m1", BidStatus::Unknown, None, now);
        let a = post("m1", "a").digest;
        assert_eq!(
            book.settle_shown("chat:r1", "m1", &post("m1", "b").digest),
            None
        );
        assert_eq!(book.settle_shown("chat:r2", "m1", &a), None);
        assert_eq!(book.settle_shown("chat:r1", "m9", &a), None);
        assert!(book.settle_shown("chat:r1", "m1", &a).is_some());
        assert_eq!(book.settle_shown("chat:r1", "m1", &a), None, "once");
    }
}
