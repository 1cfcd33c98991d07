//! The kit's write path, for any app: an op is recorded exactly once per Region that accepts
//! it, decided by the app's pure rules against what this Region has seen, with the store
//! failures that must never become rejections kept apart. The app ([`App`]) only says what
//! its values are and what it accepts; everything that makes the guarantees hold is here:
//!
//! - a replay (the author's op id held in any Region's copy this Region has) answers from the
//!   copy: `duplicate` for the same payload (by digest), `op_id_reused` for another;
//! - eventual mode (MREC): read this Region's summaries, decide, commit the copy and this
//!   Region's summary in one conditional transaction; a concurrent op here moved the summary:
//!   decide again on fresh state, after a randomised pause, at most [`COMMIT_ATTEMPTS`] times;
//! - strong mode (MRSC): one conditional write of the topic's head decides the op, checked
//!   against the latest version in every Region; before moving the head, the head's last op
//!   gets its copy, so every accepted op but the newest has one;
//! - a failure before the write is `unknown` with nothing written (send it again); a failure
//!   at the write is `unknown` (its outcome is not known); in strong mode a Region that cannot
//!   reach the quorum answers `redirect`. Only the app's own verdicts are rejections.

use crate::items::{LastOp, StoredHead, StoredOp, StoredSummary, TopicKey};
use crate::model::UserId;
use crate::ports::{Advance, Clock, CommitOutcome, Entropy, HeadStore, OpCommit, OpStore, Pause};
use serde_json::Value as Json;
use std::sync::Arc;
use wsdr_protocol::{Digest, OpId};

/// How many times an op is decided again when a concurrent op in this Region moved the
/// summary (or, in strong mode, any Region moved the head) between the read and the write.
pub const COMMIT_ATTEMPTS: u32 = 12;

/// An app's rules for its writes. Pure: the kit calls them with what it read and writes what
/// they return; an app never touches the store.
pub trait App: Send + Sync + 'static {
    /// The topic's seed, decoded (the auction's rules).
    type Meta: Send + Sync;
    /// One write (a bid's amount).
    type Op: Send + Sync;
    /// One Region's fold of its own accepted ops (the auction's high bid).
    type Summary: Send + Sync;
    /// Why the app refuses an op: final, whatever is sent again.
    type Reject: Copy + Send + Sync + std::fmt::Debug;

    /// The op as stored and digested: a value with a canonical JSON form.
    fn op_json(&self, op: &Self::Op) -> Json;
    /// A stored summary's app part, read back; an error if it is not this app's.
    fn summary(&self, topic: &TopicKey, stored: &StoredSummary) -> crate::Result<Self::Summary>;
    /// A summary's app part as stored.
    fn summary_json(&self, summary: &Self::Summary) -> Json;
    /// The fold of no ops.
    fn empty_summary(&self) -> Self::Summary;
    /// Whether the topic takes ops now at all, from its seed and the clock alone (checked
    /// before any read: an auction past its close).
    fn admit(&self, meta: &Self::Meta, now_ms: u64) -> Result<(), Self::Reject>;
    /// Decide `op` against every Region's summary this Region holds (strong mode: the head's
    /// one summary).
    fn decide(
        &self,
        meta: &Self::Meta,
        seen: &[Self::Summary],
        op: &Self::Op,
    ) -> Result<(), Self::Reject>;
    /// The ops a summary holds whole (the auction's high bid), read as held copies: a Region
    /// holds them even before (or without) their copy item. Default: none.
    fn carried(&self, _topic: &TopicKey, _summary: &Self::Summary) -> Vec<StoredOp> {
        Vec::new()
    }
    /// This Region's summary with `copy` (this Region's copy of `op`) counted in; an error
    /// only if the copy is not this app's.
    fn fold(
        &self,
        own: &Self::Summary,
        copy: &StoredOp,
        op: &Self::Op,
    ) -> crate::Result<Self::Summary>;
}

/// How a write ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written<R> {
    /// Recorded now (or by an earlier try of this very request).
    Accepted,
    /// The author's op id was already recorded with this payload.
    Duplicate,
    /// The author's op id was already recorded with another payload: final.
    OpIdReused,
    /// The app refused it: final.
    Rejected(R),
    /// Nothing was written (a failure before the write): send it again, same op id.
    Unavailable(crate::Error),
    /// The write failed and may have committed: send it again, same op id, and settle it.
    Unknown(crate::Error),
    /// Strong mode: this Region cannot reach its table's quorum; nothing it did decides the
    /// op. Send it again elsewhere.
    Redirect(crate::Error),
}

/// Where a write failed: before its write (nothing recorded) or at it (outcome unknown).
enum Failure {
    BeforeCommit(crate::Error),
    AtCommit(crate::Error),
}

/// What one attempt at deciding an op came to.
enum Attempt<R> {
    Decided(Written<R>),
    /// Another request moved the state first (nothing was written): decide again.
    Again,
}

/// How a writer decides: fixed when it is built, from the store it is given.
#[derive(Clone)]
enum Path {
    /// Per Region, on an eventually consistent table (MREC).
    Regional(Arc<dyn OpStore>),
    /// On the topic's head, on a multi-Region strongly consistent table (MRSC).
    Head(Arc<dyn HeadStore>),
}

/// The kit's write path for one app in one Region.
pub struct Writer<A> {
    app: Arc<A>,
    path: Path,
    region: String,
    clock: Arc<dyn Clock>,
    entropy: Arc<dyn Entropy>,
    pause: Arc<dyn Pause>,
}

impl<A> Clone for Writer<A> {
    fn clone(&self) -> Self {
        Self {
            app: self.app.clone(),
            path: self.path.clone(),
            region: self.region.clone(),
            clock: self.clock.clone(),
            entropy: self.entropy.clone(),
            pause: self.pause.clone(),
        }
    }
}

impl<A> std::fmt::Debug for Writer<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("region", &self.region)
            .field("on_the_head", &matches!(self.path, Path::Head(_)))
            .finish_non_exhaustive()
    }
}

/// One op to write: whose, under which id, in which topic.
#[allow(missing_debug_implementations)] // the app's values need not be Debug
pub struct Write<'a, A: App> {
    pub meta: &'a A::Meta,
    pub topic: &'a TopicKey,
    pub author: &'a UserId,
    pub op_id: &'a OpId,
    pub op: &'a A::Op,
}

impl<A: App> Writer<A> {
    /// A writer deciding per Region (eventual mode).
    pub fn regional(
        app: Arc<A>,
        store: Arc<dyn OpStore>,
        region: impl Into<String>,
        clock: Arc<dyn Clock>,
        entropy: Arc<dyn Entropy>,
        pause: Arc<dyn Pause>,
    ) -> Self {
        Self::on(Path::Regional(store), app, region, clock, entropy, pause)
    }

    /// A writer deciding on each topic's head (strong mode): only a head store will do.
    pub fn on_head(
        app: Arc<A>,
        store: Arc<dyn HeadStore>,
        region: impl Into<String>,
        clock: Arc<dyn Clock>,
        entropy: Arc<dyn Entropy>,
        pause: Arc<dyn Pause>,
    ) -> Self {
        Self::on(Path::Head(store), app, region, clock, entropy, pause)
    }

    fn on(
        path: Path,
        app: Arc<A>,
        region: impl Into<String>,
        clock: Arc<dyn Clock>,
        entropy: Arc<dyn Entropy>,
        pause: Arc<dyn Pause>,
    ) -> Self {
        Self {
            app,
            path,
            region: region.into(),
            clock,
            entropy,
            pause,
        }
    }

    /// Whether this writer decides on the topic's head (strong mode).
    pub fn on_the_head(&self) -> bool {
        matches!(self.path, Path::Head(_))
    }

    /// Draw retry pauses and write ids from `entropy`.
    pub fn with_entropy(mut self, entropy: Arc<dyn Entropy>) -> Self {
        self.entropy = entropy;
        self
    }

    /// Pause between attempts with `pause`.
    pub fn with_pause(mut self, pause: Arc<dyn Pause>) -> Self {
        self.pause = pause;
        self
    }

    /// Write one op. Never an error: every outcome, a store failure included, is a
    /// [`Written`] the caller answers.
    pub async fn write(&self, write: &Write<'_, A>) -> Written<A::Reject> {
        let digest = match Digest::of(&self.app.op_json(write.op)) {
            Ok(digest) => digest,
            Err(error) => {
                // The app's op has no canonical form: an app bug, never a store state.
                return Written::Unavailable(crate::Error::Internal(format!(
                    "the op has no canonical JSON: {error}"
                )));
            }
        };
        let outcome = match &self.path {
            Path::Regional(store) => self.write_regional(store.as_ref(), write, digest).await,
            Path::Head(store) => {
                self.decide("the topic's head", |_| {
                    self.head_attempt(store.as_ref(), write, digest)
                })
                .await
            }
        };
        match outcome {
            Ok(written) => written,
            Err(Failure::BeforeCommit(error @ crate::Error::NoQuorum(_)))
            | Err(Failure::AtCommit(error @ crate::Error::NoQuorum(_))) => {
                // Whatever the stage, the op is safe to send elsewhere: its op id is checked
                // against the latest version everywhere.
                Written::Redirect(error)
            }
            Err(Failure::BeforeCommit(error)) => Written::Unavailable(error),
            Err(Failure::AtCommit(error)) => Written::Unknown(error),
        }
    }

    async fn write_regional(
        &self,
        store: &dyn OpStore,
        write: &Write<'_, A>,
        digest: Digest,
    ) -> Result<Written<A::Reject>, Failure> {
        // A replay (in any Region's copy we hold) answers from the copy: check order matters,
        // a replay must answer `duplicate` even if the topic has since moved past it.
        if let Some(written) = self.replayed(store, write, digest).await? {
            return Ok(written);
        }
        self.decide("the topic's summary", |_| {
            self.regional_attempt(store, write, digest)
        })
        .await
    }

    /// The answer to an op this author already made, if it is one.
    async fn replayed(
        &self,
        store: &dyn OpStore,
        write: &Write<'_, A>,
        digest: Digest,
    ) -> Result<Option<Written<A::Reject>>, Failure> {
        let copies = store
            .copies(write.topic, write.author, write.op_id)
            .await
            .map_err(Failure::BeforeCommit)?;
        if copies.is_empty() {
            return Ok(None);
        }
        Ok(Some(if copies.iter().any(|c| c.digest == digest) {
            Written::Duplicate
        } else {
            Written::OpIdReused
        }))
    }

    /// Decide an op: `attempt` until it decides, pausing before each new try, at most
    /// [`COMMIT_ATTEMPTS`] times. Both paths retry a lost race this way.
    async fn decide<F>(
        &self,
        what_moved: &str,
        mut attempt: impl FnMut(u32) -> F,
    ) -> Result<Written<A::Reject>, Failure>
    where
        F: std::future::Future<Output = Result<Attempt<A::Reject>, Failure>>,
    {
        for n in 0..COMMIT_ATTEMPTS {
            match attempt(n).await? {
                Attempt::Decided(written) => return Ok(written),
                Attempt::Again => {
                    // Racing writers spread out: up to 2 ms after the first loss, doubling
                    // to 128 ms.
                    let ms = self.entropy.below(1 + (2u64 << n.min(6)));
                    self.pause.pause(std::time::Duration::from_millis(ms)).await;
                }
            }
        }
        Err(Failure::BeforeCommit(crate::Error::Transient(format!(
            "{what_moved} kept moving ({COMMIT_ATTEMPTS} tries)"
        ))))
    }

    /// One attempt of the eventual path: read the Region's summaries, let the app decide,
    /// commit the copy and this Region's summary in one transaction.
    async fn regional_attempt(
        &self,
        store: &dyn OpStore,
        write: &Write<'_, A>,
        digest: Digest,
    ) -> Result<Attempt<A::Reject>, Failure> {
        use Failure::{AtCommit, BeforeCommit};
        let now = self.clock.now_ms();
        if let Err(reason) = self.app.admit(write.meta, now) {
            return Ok(Attempt::Decided(Written::Rejected(reason)));
        }
        let stored = store.summaries(write.topic).await.map_err(BeforeCommit)?;
        let newest = newest_per_region(&stored);
        let seen = newest
            .iter()
            .map(|s| self.app.summary(write.topic, s))
            .collect::<crate::Result<Vec<_>>>()
            .map_err(BeforeCommit)?;
        if let Err(reason) = self.app.decide(write.meta, &seen, write.op) {
            return Ok(Attempt::Decided(Written::Rejected(reason)));
        }
        let (own_accepted, own) = match newest.iter().position(|s| s.region == self.region) {
            Some(i) => (newest[i].accepted, &seen[i]),
            None => (0, &self.app.empty_summary()),
        };
        let copy = self.copy(write, digest, now, own_accepted + 1);
        let folded = self.app.fold(own, &copy, write.op).map_err(BeforeCommit)?;
        let commit = OpCommit {
            summary: StoredSummary {
                region: self.region.clone(),
                accepted: own_accepted + 1,
                app: self.app.summary_json(&folded),
            },
            expected_accepted: own_accepted,
            // One id per attempt: it is also DynamoDB's ClientRequestToken, which must not
            // be reused with other parameters (an attempt after a conflict differs).
            write_id: self.write_id(),
            copy,
        };
        match store.commit(&commit).await.map_err(AtCommit)? {
            CommitOutcome::Committed => Ok(Attempt::Decided(Written::Accepted)),
            CommitOutcome::Exists(existing) => Ok(Attempt::Decided(if existing.digest == digest {
                Written::Duplicate
            } else {
                Written::OpIdReused
            })),
            // Another op in this Region moved the summary: decide again on fresh state.
            CommitOutcome::Conflict => Ok(Attempt::Again),
        }
    }

    /// One attempt of the strong path: settle the head's last op, answer a replay from the
    /// copies, let the app decide, move the head in one conditional write.
    async fn head_attempt(
        &self,
        store: &dyn HeadStore,
        write: &Write<'_, A>,
        digest: Digest,
    ) -> Result<Attempt<A::Reject>, Failure> {
        use Failure::{AtCommit, BeforeCommit};
        let head = store
            .head(write.topic)
            .await
            .map_err(BeforeCommit)?
            .unwrap_or_else(|| StoredHead {
                summary: StoredSummary {
                    region: crate::model::LEDGER.to_owned(),
                    accepted: 0,
                    app: self.app.summary_json(&self.app.empty_summary()),
                },
                last: None,
            });
        if let Some(last) = &head.last {
            match store.settle(&last.op, &last.write_id).await {
                Ok(()) => {}
                // Another Region is writing the same copy (it read the same head): it is
                // the same item either way. Decide again on fresh state.
                Err(crate::Error::WriteConflict(_)) => return Ok(Attempt::Again),
                Err(error) => return Err(BeforeCommit(error)),
            }
        }
        // Every accepted op now has its copy: the copies answer a replay.
        if let Some(written) = self.replayed(store, write, digest).await? {
            return Ok(Attempt::Decided(written));
        }
        let now = self.clock.now_ms();
        if let Err(reason) = self.app.admit(write.meta, now) {
            return Ok(Attempt::Decided(Written::Rejected(reason)));
        }
        let seen = self
            .app
            .summary(write.topic, &head.summary)
            .map_err(BeforeCommit)?;
        if let Err(reason) = self
            .app
            .decide(write.meta, std::slice::from_ref(&seen), write.op)
        {
            return Ok(Attempt::Decided(Written::Rejected(reason)));
        }
        let copy = self.copy(write, digest, now, head.summary.accepted + 1);
        let folded = self
            .app
            .fold(&seen, &copy, write.op)
            .map_err(BeforeCommit)?;
        let write_id = self.write_id();
        let next = StoredHead {
            summary: StoredSummary {
                region: head.summary.region.clone(),
                accepted: head.summary.accepted + 1,
                app: self.app.summary_json(&folded),
            },
            last: Some(LastOp {
                op: copy.clone(),
                write_id: write_id.clone(),
            }),
        };
        match store
            .advance(write.topic, head.summary.accepted, &next)
            .await
        {
            Ok(Advance::Advanced) => {
                // Decided. The copy is written now or by the next op, whichever comes
                // first; a failure here changes nothing for this answer.
                if let Err(error) = store.settle(&copy, &write_id).await {
                    tracing::warn!(%error, op_id = %write.op_id, "copy of an accepted op deferred to the next op");
                }
                Ok(Attempt::Decided(Written::Accepted))
            }
            // Another op moved the head first, or a request in another Region was writing
            // it (nothing written either way): decide again on fresh state.
            Ok(Advance::Moved) | Err(crate::Error::WriteConflict(_)) => Ok(Attempt::Again),
            Err(error) => Err(AtCommit(error)),
        }
    }

    /// This Region's copy of an op accepted now, at `position`.
    fn copy(&self, write: &Write<'_, A>, digest: Digest, now: u64, position: u64) -> StoredOp {
        StoredOp {
            topic: write.topic.clone(),
            author: write.author.clone(),
            op_id: write.op_id.clone(),
            region: self.region.clone(),
            at: now,
            position,
            digest,
            op: self.app.op_json(write.op),
        }
    }

    /// A fresh id for one write attempt (the store recognises its own write by it).
    fn write_id(&self) -> String {
        format!(
            "{:016x}{:016x}",
            self.entropy.below(u64::MAX),
            self.entropy.below(u64::MAX)
        )
    }
}

/// Each Region's newest summary (duplicates of one Region keep the highest count), in
/// Region order: what a Region has seen of a topic.
pub fn newest_per_region(summaries: &[StoredSummary]) -> Vec<StoredSummary> {
    let mut newest: std::collections::BTreeMap<&str, &StoredSummary> = Default::default();
    for summary in summaries {
        let slot = newest.entry(summary.region.as_str()).or_insert(summary);
        if summary.accepted > slot.accepted {
            *slot = summary;
        }
    }
    newest.into_values().cloned().collect()
}

#[cfg(test)]
mod tests {
    //! The write path with an app that is not the auction: a chat room's posts. Everything
    //! the auction relies on holds for it with no line of the kit changed.
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use crate::memory::{ManualClock, MemoryStateStore};
    use crate::ports::{SeededEntropy, TokioPause};
    use serde_json::json;
    use wsdr_protocol::{Namespace, TopicName};

    /// A room that holds at most `cap` posts per Region; a post is its text.
    struct Room;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Refused {
        Full,
    }

    struct Settings {
        cap: u64,
    }

    impl App for Room {
        type Meta = Settings;
        type Op = String;
        type Summary = (u64, Vec<String>);
        type Reject = Refused;

        fn op_json(&self, text: &String) -> Json {
            json!({ "text": text })
        }
        fn summary(&self, _: &TopicKey, stored: &StoredSummary) -> crate::Result<Self::Summary> {
            let last: Vec<String> = serde_json::from_value(stored.app["last"].clone())
                .map_err(|e| crate::Error::Internal(e.to_string()))?;
            Ok((stored.accepted, last))
        }
        fn summary_json(&self, (_, last): &Self::Summary) -> Json {
            json!({ "last": last })
        }
        fn empty_summary(&self) -> Self::Summary {
            (0, Vec::new())
        }
        fn admit(&self, _: &Settings, _: u64) -> Result<(), Refused> {
            Ok(())
        }
        fn decide(
            &self,
            room: &Settings,
            seen: &[Self::Summary],
            _: &String,
        ) -> Result<(), Refused> {
            // Per Region: the cap counts what each Region accepted, as its own summary does.
            if seen.iter().any(|(accepted, _)| *accepted >= room.cap) {
                return Err(Refused::Full);
            }
            Ok(())
        }
        fn fold(
            &self,
            (accepted, last): &Self::Summary,
            copy: &StoredOp,
            _: &String,
        ) -> crate::Result<Self::Summary> {
            let mut last = last.clone();
            last.push(copy.op_id.to_string());
            last.truncate(3);
            Ok((accepted + 1, last))
        }
    }

    fn room() -> TopicKey {
        TopicKey::new(
            Namespace::new("chat").unwrap(),
            TopicName::new("room-1").unwrap(),
        )
    }

    fn user(name: &str) -> UserId {
        UserId::new(name).unwrap()
    }

    fn op_id(n: u32) -> OpId {
        OpId::new(format!("post-{n:04}")).unwrap()
    }

    /// A room's writer per Region over `store`, with a fixed clock and seed.
    fn writer(store: Arc<dyn OpStore>, region: &str) -> Writer<Room> {
        Writer::regional(
            Arc::new(Room),
            store,
            region,
            Arc::new(ManualClock::new(1_000)),
            Arc::new(SeededEntropy::new(7)),
            Arc::new(TokioPause),
        )
    }

    /// A room's writer on the head of `store`.
    fn head_writer(store: Arc<dyn HeadStore>, region: &str) -> Writer<Room> {
        Writer::on_head(
            Arc::new(Room),
            store,
            region,
            Arc::new(ManualClock::new(1_000)),
            Arc::new(SeededEntropy::new(7)),
            Arc::new(TokioPause),
        )
    }

    async fn post(
        writer: &Writer<Room>,
        who: &str,
        n: u32,
        text: &str,
        cap: u64,
    ) -> Written<Refused> {
        writer
            .write(&Write {
                meta: &Settings { cap },
                topic: &room(),
                author: &user(who),
                op_id: &op_id(n),
                op: &text.to_owned(),
            })
            .await
    }

    #[tokio::test]
    async fn a_post_is_recorded_once_and_its_id_never_takes_another_text() {
        let store = Arc::new(MemoryStateStore::new(
            "us-east-1",
            Arc::new(ManualClock::new(1_000)),
        ));
        let east = writer(store.clone(), "us-east-1");
        assert_eq!(post(&east, "ann", 1, "hello", 10).await, Written::Accepted);
        assert_eq!(post(&east, "ann", 1, "hello", 10).await, Written::Duplicate);
        assert_eq!(post(&east, "ann", 1, "bye", 10).await, Written::OpIdReused);
        // Another author's op id is their own.
        assert_eq!(post(&east, "bob", 1, "bye", 10).await, Written::Accepted);
        let copies = store.all_ops(&room());
        assert_eq!(copies.len(), 2);
        let ann = copies.iter().find(|c| c.author == user("ann")).unwrap();
        assert_eq!(ann.op, json!({ "text": "hello" }));
        assert_eq!(ann.digest, Digest::of(&json!({ "text": "hello" })).unwrap());
        let summaries = OpStore::summaries(store.as_ref(), &room()).await.unwrap();
        assert_eq!(summaries.len(), 1);
        assert_eq!(summaries[0].accepted, 2);
        assert_eq!(
            summaries[0].app,
            json!({ "last": ["post-0001", "post-0001"] })
        );
    }

    #[tokio::test]
    async fn the_apps_refusal_is_final_and_writes_nothing() {
        let store = Arc::new(MemoryStateStore::new(
            "us-east-1",
            Arc::new(ManualClock::new(1_000)),
        ));
        let east = writer(store.clone(), "us-east-1");
        assert_eq!(post(&east, "ann", 1, "one", 1).await, Written::Accepted);
        assert_eq!(
            post(&east, "ann", 2, "two", 1).await,
            Written::Rejected(Refused::Full)
        );
        assert_eq!(store.all_ops(&room()).len(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_posts_in_one_region_take_gapless_positions() {
        let store = Arc::new(MemoryStateStore::new(
            "us-east-1",
            Arc::new(ManualClock::new(1_000)),
        ));
        let east = writer(store.clone(), "us-east-1");
        let posts = (1..=16).map(|n| {
            let east = east.clone();
            tokio::spawn(async move { post(&east, &format!("u{n}"), n, "hi", 100).await })
        });
        for task in posts {
            assert_eq!(task.await.unwrap(), Written::Accepted);
        }
        let mut positions: Vec<u64> = store.all_ops(&room()).iter().map(|c| c.position).collect();
        positions.sort_unstable();
        assert_eq!(positions, (1..=16).collect::<Vec<u64>>());
    }

    #[tokio::test]
    async fn a_store_that_fails_before_the_write_leaves_the_post_to_send_again() {
        let store = Arc::new(MemoryStateStore::new(
            "us-east-1",
            Arc::new(ManualClock::new(1_000)),
        ));
        let east = writer(store.clone(), "us-east-1");
        store.set_outage(Some(crate::Error::Transient("down".into())));
        assert!(matches!(
            post(&east, "ann", 1, "hi", 10).await,
            Written::Unavailable(_)
        ));
        store.set_outage(Some(crate::Error::NoQuorum("cut off".into())));
        assert!(matches!(
            post(&east, "ann", 1, "hi", 10).await,
            Written::Redirect(_)
        ));
        store.set_outage(None);
        assert!(store.all_ops(&room()).is_empty());
        assert_eq!(post(&east, "ann", 1, "hi", 10).await, Written::Accepted);
    }

    /// What a test does to a memory table's answers.
    #[derive(Clone, Copy)]
    enum Twist {
        /// The commit's answer is lost after it committed (a timeout after the write).
        LosesTheAnswer,
        /// The commit loses the race for the summary every time.
        AlwaysMoved,
        /// Point reads miss every copy: the copy appears between the replay check and the
        /// commit (another request of the same op, in this Region).
        CopyArrivesLate,
    }

    /// A memory table with one [`Twist`].
    struct Twisted(Arc<MemoryStateStore>, Twist);

    #[async_trait::async_trait]
    impl OpStore for Twisted {
        async fn put_meta_if_absent(&self, t: &TopicKey, m: &Json) -> crate::Result<bool> {
            self.0.put_meta_if_absent(t, m).await
        }
        async fn meta(&self, t: &TopicKey) -> crate::Result<Option<Json>> {
            self.0.meta(t).await
        }
        async fn copies(&self, t: &TopicKey, a: &UserId, o: &OpId) -> crate::Result<Vec<StoredOp>> {
            match self.1 {
                Twist::CopyArrivesLate => Ok(Vec::new()),
                _ => self.0.copies(t, a, o).await,
            }
        }
        async fn summaries(&self, t: &TopicKey) -> crate::Result<Vec<StoredSummary>> {
            OpStore::summaries(self.0.as_ref(), t).await
        }
        async fn commit(&self, c: &OpCommit) -> crate::Result<CommitOutcome> {
            match self.1 {
                Twist::AlwaysMoved => Ok(CommitOutcome::Conflict),
                Twist::LosesTheAnswer => {
                    self.0.commit(c).await?;
                    Err(crate::Error::Transient("the answer was lost".into()))
                }
                Twist::CopyArrivesLate => self.0.commit(c).await,
            }
        }
        async fn newest_by_author(
            &self,
            t: &TopicKey,
            a: &UserId,
            l: usize,
        ) -> crate::Result<Vec<StoredOp>> {
            self.0.newest_by_author(t, a, l).await
        }
        async fn log_after(
            &self,
            t: &TopicKey,
            log: &str,
            after: u64,
            l: usize,
        ) -> crate::Result<Vec<StoredOp>> {
            self.0.log_after(t, log, after, l).await
        }
    }

    /// The largest draw every time, so the pauses are their bounds less one.
    #[derive(Debug)]
    struct Largest;

    impl Entropy for Largest {
        fn below(&self, bound: u64) -> u64 {
            bound.saturating_sub(1)
        }
    }

    /// Records each pause instead of waiting it.
    #[derive(Debug, Default)]
    struct Recorded(std::sync::Mutex<Vec<u64>>);

    #[async_trait::async_trait]
    impl Pause for Recorded {
        async fn pause(&self, duration: std::time::Duration) {
            self.0.lock().unwrap().push(duration.as_millis() as u64);
        }
    }

    #[tokio::test]
    async fn a_race_lost_every_time_pauses_doubling_then_gives_up_unwritten() {
        let table = Arc::new(MemoryStateStore::new(
            "us-east-1",
            Arc::new(ManualClock::new(1_000)),
        ));
        let pauses = Arc::new(Recorded::default());
        let writer = Writer::regional(
            Arc::new(Room),
            Arc::new(Twisted(table.clone(), Twist::AlwaysMoved)),
            "us-east-1",
            Arc::new(ManualClock::new(1_000)),
            Arc::new(Largest),
            Arc::new(TokioPause),
        )
        .with_pause(pauses.clone());
        assert!(matches!(
            post(&writer, "ann", 1, "hi", 10).await,
            Written::Unavailable(crate::Error::Transient(_))
        ));
        // Up to 2 ms after the first loss, doubling to 128 ms; one pause per lost attempt.
        assert_eq!(
            *pauses.0.lock().unwrap(),
            vec![2, 4, 8, 16, 32, 64, 128, 128, 128, 128, 128, 128]
        );
        assert!(table.all_ops(&room()).is_empty());
    }

    #[tokio::test]
    async fn a_region_counts_its_own_posts_beside_the_other_regions_summary() {
        let clock = Arc::new(ManualClock::new(1_000));
        let (east, west) = (
            Arc::new(MemoryStateStore::new("us-east-1", clock.clone())),
            Arc::new(MemoryStateStore::new("us-west-2", clock)),
        );
        let mut feed = east.change_feed();
        let east_writer = writer(east.clone(), "us-east-1");
        for n in 1..=3 {
            assert_eq!(
                post(&east_writer, "ann", n, "e", 10).await,
                Written::Accepted
            );
        }
        while let Ok(change) = feed.try_recv() {
            west.apply_replicated(change);
        }
        // West holds east's summary (3) and writes its own, from 0.
        let west_writer = writer(west.clone(), "us-west-2");
        assert_eq!(
            post(&west_writer, "bob", 9, "w", 10).await,
            Written::Accepted
        );
        let mut counts: Vec<(String, u64)> = OpStore::summaries(west.as_ref(), &room())
            .await
            .unwrap()
            .into_iter()
            .map(|s| (s.region, s.accepted))
            .collect();
        counts.sort();
        assert_eq!(
            counts,
            vec![("us-east-1".to_owned(), 3), ("us-west-2".to_owned(), 1)]
        );
        let bobs = west
            .all_ops(&room())
            .into_iter()
            .find(|c| c.author == user("bob"))
            .unwrap();
        assert_eq!((bobs.region.as_str(), bobs.position), ("us-west-2", 1));
    }

    #[test]
    fn each_regions_newest_summary_is_the_one_with_the_highest_count() {
        let summary = |region: &str, accepted: u64| StoredSummary {
            region: region.into(),
            accepted,
            app: json!({ "n": accepted }),
        };
        let newest = newest_per_region(&[
            summary("r1", 2),
            summary("r1", 5),
            summary("r2", 1),
            summary("r1", 3),
        ]);
        assert_eq!(newest, vec![summary("r1", 5), summary("r2", 1)]);
    }

    #[tokio::test]
    async fn a_copy_found_at_the_commit_answers_by_its_payload() {
        let table = Arc::new(MemoryStateStore::new(
            "us-east-1",
            Arc::new(ManualClock::new(1_000)),
        ));
        let late = writer(
            Arc::new(Twisted(table.clone(), Twist::CopyArrivesLate)),
            "us-east-1",
        );
        assert_eq!(post(&late, "ann", 1, "hi", 10).await, Written::Accepted);
        assert_eq!(post(&late, "ann", 1, "hi", 10).await, Written::Duplicate);
        assert_eq!(post(&late, "ann", 1, "ho", 10).await, Written::OpIdReused);
        assert_eq!(table.all_ops(&room()).len(), 1);
    }

    #[test]
    fn a_writer_says_which_path_it_decides_on() {
        let table = Arc::new(MemoryStateStore::new(
            "us-east-1",
            Arc::new(ManualClock::new(1_000)),
        ));
        let regional = writer(table.clone(), "us-east-1");
        assert!(!regional.on_the_head());
        let head = head_writer(table, "us-west-2");
        assert!(head.on_the_head());
        assert!(format!("{head:?}").contains("us-west-2"));
    }

    #[tokio::test]
    async fn a_lost_commit_answer_is_unknown_and_its_resend_a_duplicate() {
        let table = Arc::new(MemoryStateStore::new(
            "us-east-1",
            Arc::new(ManualClock::new(1_000)),
        ));
        let lossy = writer(
            Arc::new(Twisted(table.clone(), Twist::LosesTheAnswer)),
            "us-east-1",
        );
        assert!(matches!(
            post(&lossy, "ann", 1, "hi", 10).await,
            Written::Unknown(_)
        ));
        let east = writer(table.clone(), "us-east-1");
        assert_eq!(post(&east, "ann", 1, "hi", 10).await, Written::Duplicate);
        assert_eq!(table.all_ops(&room()).len(), 1);
    }

    #[tokio::test]
    async fn on_the_head_two_regions_share_one_order_of_positions() {
        // One linearizable table plays the strongly consistent one.
        let table = Arc::new(MemoryStateStore::new(
            "mrsc",
            Arc::new(ManualClock::new(1_000)),
        ));
        let (east, west) = (
            head_writer(table.clone(), "us-east-1"),
            head_writer(table.clone(), "us-west-2"),
        );
        assert_eq!(post(&east, "ann", 1, "a", 10).await, Written::Accepted);
        assert_eq!(post(&west, "bob", 2, "b", 10).await, Written::Accepted);
        assert_eq!(post(&east, "ann", 3, "c", 10).await, Written::Accepted);
        // A replay in the other Region, after the head moved past it.
        assert_eq!(post(&west, "ann", 1, "a", 10).await, Written::Duplicate);
        assert_eq!(post(&west, "ann", 1, "z", 10).await, Written::OpIdReused);
        let head = HeadStore::head(table.as_ref(), &room())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(head.summary.accepted, 3);
        assert_eq!(
            head.summary.app,
            json!({ "last": ["post-0001", "post-0002", "post-0003"] })
        );
        let last = head.last.unwrap();
        assert_eq!(
            (last.op.position, last.op.region.as_str()),
            (3, "us-east-1")
        );
        let mut copies: Vec<(u64, String)> = table
            .all_ops(&room())
            .iter()
            .map(|c| (c.position, c.region.clone()))
            .collect();
        copies.sort();
        assert_eq!(
            copies,
            vec![
                (1, "us-east-1".to_owned()),
                (2, "us-west-2".to_owned()),
                (3, "us-east-1".to_owned())
            ]
        );
        // The cap counts the head's ops: one order for every Region.
        assert_eq!(
            post(&west, "bob", 4, "d", 3).await,
            Written::Rejected(Refused::Full)
        );
    }
}
