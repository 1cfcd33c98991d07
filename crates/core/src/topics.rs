//! The kit's service for any app's topics: the generic envelope (`write`, `getState` with a
//! `topic`, a heartbeat naming a topic, the `topicUpdate` push) over the kit's write and read
//! paths. An app implements [`TopicApp`] (its values, its rules, its view, how its ops are
//! delivered) and is served by an [`AppService`]; the deployment's front door routes every
//! frame naming a topic to the service of the topic's namespace ([`Apps`]).
//!
//! Two deliveries, as the app says ([`Delivery`]):
//! - **latest**: a client needs the newest state only (the auction: a conflated push carries
//!   the view, and a watcher may never see an intermediate one);
//! - **log**: every op counts (a chat room): `topicState` and `topicUpdate` carry ops with their
//!   position in their log (a Region's count, or strong mode's head's), so a client sees a
//!   hole by position and reads it with `getState{since}`; `complete` says whether an answer
//!   reaches every log's count this Region holds.

use crate::items::{StoredOp, StoredSummary, TopicKey};
use crate::model::{ConnectionId, Principal, UserId};
use crate::ports::{Clock, Connections, Entropy, HeadStore, OpStore, Pause};
use crate::read::Reader;
use crate::write::{App, Write, Writer, Written};
use crate::Result;
use async_trait::async_trait;
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::sync::Arc;
use wsdr_protocol::{
    ErrorCode, Namespace, OpId, OpView, ProtocolError, ServerMessage, SettledOpCopyView,
    SettledOpView, Topic, TopicName, TopicYouView, Versions, WriteStatus,
};

/// How an app's subscribers get its ops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// The newest view only (pushes conflate).
    Latest,
    /// Every op, by position: `getState` without `since` carries each log's newest `tail`
    /// ops; a push, of each log's newest `push_tail`, those accepted within `push_window_ms`
    /// of that log's newest (by its Region's clock). A push is posted to every subscriber:
    /// what one push interval brings is enough, and a subscriber further behind reads the
    /// rest with `getState{since}`.
    Log {
        tail: usize,
        push_tail: usize,
        push_window_ms: u64,
    },
}

/// The most ops of one log one `topicState` carries: past it the answer is not `complete` and
/// the client reads on from where it stopped. About 250 bytes an op keeps an answer of two
/// Regions' pages inside API Gateway's 128 KB message.
pub const LOG_PAGE_MAX: usize = 200;

/// The most of the caller's own ops a `topicState` lists (newest first).
pub const OWN_OPS_MAX: usize = 50;

/// The most bytes of ops (as JSON) one `topicState` or `topicUpdate` carries: API Gateway
/// takes a message of at most 128 KB, so a page of large ops is cut short of it (and says
/// `complete: false`; the client reads on from where it stopped). One op is always carried,
/// so an answer always moves the client's frontier.
pub const OPS_BYTES_MAX: usize = 96 * 1024;

/// An app as the kit serves it: [`App`]'s rules for writes, and what its frames carry.
pub trait TopicApp: App {
    /// The namespace of its topics (`chat` for `chat:lobby`).
    fn namespace(&self) -> Namespace;
    /// The op a `write` carries, checked: bad input is a protocol error and touches nothing.
    fn parse_op(&self, op: &Json) -> std::result::Result<Self::Op, ProtocolError>;
    /// A topic's stored seed, decoded; an error if it is not this app's.
    fn meta(&self, topic: &TopicKey, stored: &Json) -> Result<Self::Meta>;
    /// The `reason` of a `writeResult` the app refused.
    fn reject_code(&self, reason: Self::Reject) -> &'static str;
    /// The public view: a function of the topic's seed and every Region's summary this Region
    /// holds (each with its count), whatever order they arrived in.
    fn view(&self, meta: &Self::Meta, seen: &[(StoredSummary, Self::Summary)]) -> Json;
    /// How its subscribers get its ops. Default: the newest view only.
    fn delivery(&self) -> Delivery {
        Delivery::Latest
    }
}

/// One app's topics, as the front door calls them (object-safe: one per namespace).
#[async_trait]
pub trait TopicService: Send + Sync {
    fn namespace(&self) -> Namespace;
    /// `write`: every outcome, a store failure included, is a `writeResult` (or an error frame
    /// for an op the app cannot read).
    async fn write(
        &self,
        caller: &Principal,
        topic: &Topic,
        op_id: &OpId,
        op: &Json,
    ) -> ServerMessage;
    /// `getState` naming the topic: subscribes a user's connection first, then reads.
    async fn state(
        &self,
        connection: &ConnectionId,
        caller: &Principal,
        topic: &Topic,
        op_ids: &[OpId],
        since: Option<&Versions>,
    ) -> Result<ServerMessage>;
    /// The topic's version vector as this Region holds it (a pong's).
    async fn versions(&self, topic: &Topic) -> Result<Versions>;
    /// The `topicUpdate` a push of the topic posts, read when the push starts.
    async fn push_frame(&self, topic: &Topic) -> Result<String>;
}

/// The apps of a deployment, by namespace. Cheap to clone.
#[derive(Clone, Default)]
pub struct Apps(Arc<BTreeMap<Namespace, Arc<dyn TopicService>>>);

impl std::fmt::Debug for Apps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

impl Apps {
    /// These apps and `service`'s (which replaces an app of the same namespace).
    pub fn with(self, service: Arc<dyn TopicService>) -> Self {
        let mut apps = (*self.0).clone();
        apps.insert(service.namespace(), service);
        Self(Arc::new(apps))
    }

    /// The service of a topic's namespace, if any app has it.
    pub fn get(&self, topic: &Topic) -> Option<&Arc<dyn TopicService>> {
        self.0.get(&topic.namespace)
    }
}

/// The kit's service for one app in one Region. Cheap to clone; build one per cold start.
pub struct AppService<A: TopicApp> {
    app: Arc<A>,
    store: Arc<dyn OpStore>,
    writer: Writer<A>,
    reader: Reader<A>,
    connections: Arc<dyn Connections>,
    clock: Arc<dyn Clock>,
    region: String,
    /// Topics created on first use when missing, with their seeds (names in this namespace).
    seeds: Arc<BTreeMap<TopicName, Json>>,
}

impl<A: TopicApp> Clone for AppService<A> {
    fn clone(&self) -> Self {
        Self {
            app: self.app.clone(),
            store: self.store.clone(),
            writer: self.writer.clone(),
            reader: self.reader.clone(),
            connections: self.connections.clone(),
            clock: self.clock.clone(),
            region: self.region.clone(),
            seeds: self.seeds.clone(),
        }
    }
}

impl<A: TopicApp> std::fmt::Debug for AppService<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppService")
            .field("namespace", &self.app.namespace())
            .field("region", &self.region)
            .field("strong", &self.writer.on_the_head())
            .finish_non_exhaustive()
    }
}

impl<A: TopicApp> AppService<A> {
    /// `app` deciding per Region (eventual mode).
    pub fn new(
        app: A,
        store: Arc<dyn OpStore>,
        connections: Arc<dyn Connections>,
        clock: Arc<dyn Clock>,
        region: impl Into<String>,
    ) -> Self {
        let app = Arc::new(app);
        let region = region.into();
        let writer = Writer::regional(
            app.clone(),
            store.clone(),
            region.clone(),
            clock.clone(),
            Arc::new(crate::ports::ThreadEntropy),
            Arc::new(crate::ports::TokioPause),
        );
        Self {
            reader: Reader::regional(app.clone(), store.clone()),
            app,
            store,
            writer,
            connections,
            clock,
            region,
            seeds: Arc::default(),
        }
    }

    /// `app` deciding on each topic's head (strong mode): a store on a strongly consistent
    /// table, and nothing else.
    pub fn strong(
        app: A,
        store: Arc<dyn HeadStore>,
        connections: Arc<dyn Connections>,
        clock: Arc<dyn Clock>,
        region: impl Into<String>,
    ) -> Self {
        let ops: Arc<dyn OpStore> = store.clone();
        let mut service = Self::new(app, ops, connections, clock, region);
        service.writer = Writer::on_head(
            service.app.clone(),
            store.clone(),
            service.region.clone(),
            service.clock.clone(),
            Arc::new(crate::ports::ThreadEntropy),
            Arc::new(crate::ports::TokioPause),
        );
        service.reader = Reader::on_head(service.app.clone(), store);
        service
    }

    /// Draw retry pauses and write ids from `entropy`.
    pub fn with_entropy(mut self, entropy: Arc<dyn Entropy>) -> Self {
        self.writer = self.writer.with_entropy(entropy);
        self
    }

    /// Wait retry pauses with `pause`.
    pub fn with_pause(mut self, pause: Arc<dyn Pause>) -> Self {
        self.writer = self.writer.with_pause(pause);
        self
    }

    /// Topics to create, if missing, the first time one is asked for: names in this app's
    /// namespace, with their seeds.
    pub fn with_seeds(mut self, seeds: impl IntoIterator<Item = (TopicName, Json)>) -> Self {
        self.seeds = Arc::new(seeds.into_iter().collect());
        self
    }

    /// The topic's seed, creating it first if it is a missing seeded one.
    async fn find_meta(&self, topic: &Topic) -> Result<Option<A::Meta>> {
        let stored = match self.store.meta(topic).await? {
            Some(stored) => Some(stored),
            None => match self.seeds.get(&topic.name) {
                Some(seed) if topic.namespace == self.app.namespace() => {
                    self.store.put_meta_if_absent(topic, seed).await?;
                    // Re-read: a concurrent creator (or replication) may have won.
                    self.store.meta(topic).await?
                }
                _ => None,
            },
        };
        stored
            .map(|stored| self.app.meta(topic, &stored))
            .transpose()
    }

    fn answer(&self, op_id: &OpId, status: WriteStatus, reason: Option<&str>) -> ServerMessage {
        ServerMessage::WriteResult {
            op_id: op_id.clone(),
            status,
            reason: reason.map(str::to_owned),
            region: self.region.clone(),
        }
    }

    /// The ops the summaries and the head carry whole: held even before (or without) their
    /// copy.
    fn carried(
        &self,
        topic: &Topic,
        summaries: &[(StoredSummary, A::Summary)],
        newest: Option<&StoredOp>,
    ) -> Vec<StoredOp> {
        summaries
            .iter()
            .flat_map(|(_, app)| self.app.carried(topic, app))
            .chain(newest.cloned())
            .collect()
    }

    /// Each log's ops this Region holds past a position: `since`'s, or each log's newest
    /// `tail` without it; and whether they reach every log's count without a hole.
    async fn log(
        &self,
        topic: &Topic,
        versions: &Versions,
        since: Option<&Versions>,
        tail: usize,
        window_ms: Option<u64>,
        carried: &[StoredOp],
    ) -> Result<(Vec<OpView>, bool)> {
        // Every log this Region counts is read from `since` even when the count says the
        // caller has it all: copies past the count are served too (below).
        let windows: Vec<(&String, u64, u64)> = versions
            .iter()
            .map(|(log, &count)| {
                let from = match since {
                    Some(since) => since.get(log).copied().unwrap_or(0),
                    None => count.saturating_sub(tail as u64),
                };
                (log, from, count)
            })
            .collect();
        // A page is read whole (not only up to the count): a copy can be held past the
        // count this Region has of its log, when it arrived before the summary version
        // that counts it, or that version was lost with its Region for good. Such a copy is
        // served like any other: hidden, an acknowledged op that survived would never show.
        let pages = futures::future::try_join_all(
            windows
                .iter()
                .map(|(log, from, _)| self.store.log_after(topic, log, *from, LOG_PAGE_MAX)),
        )
        .await?;
        let mut ops = Vec::new();
        let mut complete = true;
        let mut bytes = 0;
        for ((log, from, count), page) in windows.into_iter().zip(pages) {
            let cut = page.len() >= LOG_PAGE_MAX;
            let held: BTreeMap<u64, StoredOp> = page
                .into_iter()
                .chain(carried.iter().filter(|op| op.in_log(log)).cloned())
                .filter(|op| op.position > from && op.position <= from + LOG_PAGE_MAX as u64)
                .map(|op| (op.position, op))
                .collect();
            // The log's end as known here: its count, or a copy held past it; never below
            // `from` (a caller may have read past this Region's count elsewhere).
            let top = held
                .keys()
                .next_back()
                .copied()
                .unwrap_or(0)
                .max(count)
                .max(from);
            let last = top.min(from + LOG_PAGE_MAX as u64);
            // A gap (a copy not arrived), or a page cut short of the log's end.
            complete &= !cut && last == top && held.len() as u64 == last - from;
            // A push carries the window only: judged here, before any copy is turned into
            // its view and measured (a push of a busy room reads a tail of 100 a log and
            // carries a few).
            let held = match window_ms {
                Some(window_ms) => within_window(held, window_ms),
                None => held,
            };
            for op in held.into_values() {
                let view = op_view(&op, log);
                bytes += serde_json::to_string(&view).map_or(0, |text| text.len());
                if bytes > OPS_BYTES_MAX && !ops.is_empty() {
                    // Cut in position order: what is carried is a prefix of each window, so
                    // the client's frontier moves and it asks on from there.
                    return Ok((ops, false));
                }
                ops.push(view);
            }
        }
        Ok((ops, complete))
    }

    /// The log a copy's position is in: its Region's count, or in strong mode the head's.
    fn log_of<'a>(&self, op: &'a StoredOp) -> &'a str {
        if self.writer.on_the_head() {
            crate::model::LEDGER
        } else {
            &op.region
        }
    }

    /// The version vector of what this Region holds.
    fn versions_of(summaries: &[(StoredSummary, A::Summary)]) -> Versions {
        summaries
            .iter()
            .map(|(stored, _)| (stored.region.clone(), stored.accepted))
            .collect()
    }

    fn unknown_topic(&self, topic: &Topic) -> ServerMessage {
        ServerMessage::error(
            &ProtocolError::new(ErrorCode::InvalidField, format!("no topic `{topic}`")),
            &self.region,
        )
    }
}

/// Of one log's copies, those accepted within `window_ms` of its newest (each log by its own
/// Region's clock).
fn within_window(held: BTreeMap<u64, StoredOp>, window_ms: u64) -> BTreeMap<u64, StoredOp> {
    let Some(newest) = held.values().map(|op| op.at).max() else {
        return held;
    };
    let from = newest.saturating_sub(window_ms);
    held.into_iter().filter(|(_, op)| op.at >= from).collect()
}

/// A copy as the wire shows it, in `log`.
fn op_view(op: &StoredOp, log: &str) -> OpView {
    OpView {
        author: op.author.as_str().to_owned(),
        op_id: op.op_id.clone(),
        region: op.region.clone(),
        position: op.position,
        log: log.to_owned(),
        at: op.at,
        digest: op.digest,
        op: op.op.clone(),
    }
}

/// The answer for one named op id: every copy this Region holds, by Region and digest.
fn settled(op_id: &OpId, copies: &[StoredOp]) -> SettledOpView {
    let mut held: Vec<SettledOpCopyView> = copies
        .iter()
        .map(|c| SettledOpCopyView {
            region: c.region.clone(),
            digest: c.digest,
        })
        .collect();
    held.sort_by(|a, b| (&a.region, a.digest).cmp(&(&b.region, b.digest)));
    held.dedup();
    SettledOpView {
        op_id: op_id.clone(),
        stands: !held.is_empty(),
        copies: held,
    }
}

#[async_trait]
impl<A: TopicApp> TopicService for AppService<A> {
    fn namespace(&self) -> Namespace {
        self.app.namespace()
    }

    async fn write(
        &self,
        caller: &Principal,
        topic: &Topic,
        op_id: &OpId,
        op: &Json,
    ) -> ServerMessage {
        let Principal::User(user) = caller else {
            tracing::warn!(user = %caller.subject(), %op_id, "a probe identity tried to write: refused");
            return self.answer(op_id, WriteStatus::Rejected, Some("forbidden"));
        };
        let op = match self.app.parse_op(op) {
            Ok(op) => op,
            Err(error) => return ServerMessage::error(&error, &self.region),
        };
        let written = match self.find_meta(topic).await {
            Err(error @ crate::Error::NoQuorum(_)) => Written::Redirect(error),
            Err(error) => Written::Unavailable(error),
            Ok(None) => return self.answer(op_id, WriteStatus::Rejected, Some("unknown_topic")),
            Ok(Some(meta)) => {
                self.writer
                    .write(&Write {
                        meta: &meta,
                        topic,
                        author: user,
                        op_id,
                        op: &op,
                    })
                    .await
            }
        };
        let (status, reason) = match &written {
            Written::Accepted => (WriteStatus::Accepted, None),
            Written::Duplicate => (WriteStatus::Duplicate, None),
            Written::OpIdReused => (WriteStatus::Rejected, Some("op_id_reused")),
            Written::Rejected(reason) => {
                (WriteStatus::Rejected, Some(self.app.reject_code(*reason)))
            }
            Written::Redirect(error) => {
                tracing::warn!(%error, %op_id, %topic, "write not decided: no quorum here; redirected");
                (WriteStatus::Redirect, Some("no_quorum"))
            }
            Written::Unavailable(error) => {
                tracing::error!(%error, %op_id, %topic, "write failed before it was written");
                (WriteStatus::Unknown, Some("unavailable"))
            }
            Written::Unknown(error) => {
                tracing::error!(%error, %op_id, %topic, "write failed: outcome unknown");
                (WriteStatus::Unknown, None)
            }
        };
        self.answer(op_id, status, reason)
    }

    async fn state(
        &self,
        connection: &ConnectionId,
        caller: &Principal,
        topic: &Topic,
        op_ids: &[OpId],
        since: Option<&Versions>,
    ) -> Result<ServerMessage> {
        let Some(meta) = self.find_meta(topic).await? else {
            return Ok(self.unknown_topic(topic));
        };
        // A probe reads the public state only: no subscription, nobody's ops.
        let (reader, op_ids): (Option<&UserId>, &[OpId]) = match caller {
            Principal::User(user) => (Some(user), op_ids),
            Principal::Probe(_) => (None, &[]),
        };
        if let Some(user) = reader {
            // Subscribe first, then read: a change after the subscription is pushed, one
            // before it is in what is read.
            self.connections
                .subscribe(connection, user, topic, self.clock.now_ms())
                .await?;
        }
        let op_ids = &op_ids[..op_ids.len().min(wsdr_protocol::limits::SETTLE_BIDS_MAX)];
        let (summaries, newest, own, named) = match reader {
            Some(user) => {
                let holding = self.reader.hold(topic, user, op_ids, OWN_OPS_MAX).await?;
                (
                    holding.summaries,
                    holding.newest,
                    holding.own,
                    holding.named,
                )
            }
            None => {
                let (summaries, newest) = self.reader.summaries(topic).await?;
                (summaries, newest, Vec::new(), Vec::new())
            }
        };
        let versions = Self::versions_of(&summaries);
        let (ops, complete) = match self.app.delivery() {
            Delivery::Latest => (Vec::new(), true),
            Delivery::Log { tail, .. } => {
                let carried = self.carried(topic, &summaries, newest.as_ref());
                self.log(topic, &versions, since, tail, None, &carried)
                    .await?
            }
        };
        let mut own = own;
        own.sort_by(|a, b| (b.at, &b.op_id, &b.region).cmp(&(a.at, &a.op_id, &a.region)));
        own.truncate(OWN_OPS_MAX);
        Ok(ServerMessage::TopicState {
            region: self.region.clone(),
            topic: topic.clone(),
            view: self.app.view(&meta, &summaries),
            versions,
            ops,
            complete,
            you: TopicYouView {
                user_id: caller.subject().as_str().to_owned(),
                ops: own.iter().map(|op| op_view(op, self.log_of(op))).collect(),
                settled: named
                    .iter()
                    .map(|(op_id, copies)| settled(op_id, copies))
                    .collect(),
            },
            herd_window_ms: None,
        })
    }

    async fn versions(&self, topic: &Topic) -> Result<Versions> {
        let (summaries, _) = self.reader.summaries(topic).await?;
        Ok(Self::versions_of(&summaries))
    }

    async fn push_frame(&self, topic: &Topic) -> Result<String> {
        let Some(meta) = self.find_meta(topic).await? else {
            return Err(crate::Error::Internal(format!(
                "a push of `{topic}`, which has no seed here"
            )));
        };
        let (summaries, newest) = self.reader.summaries(topic).await?;
        let versions = Self::versions_of(&summaries);
        let ops = match self.app.delivery() {
            Delivery::Latest => Vec::new(),
            Delivery::Log {
                push_tail,
                push_window_ms,
                ..
            } => {
                let carried = self.carried(topic, &summaries, newest.as_ref());
                self.log(
                    topic,
                    &versions,
                    None,
                    push_tail,
                    Some(push_window_ms),
                    &carried,
                )
                .await?
                .0
            }
        };
        Ok(ServerMessage::TopicUpdate {
            region: self.region.clone(),
            topic: topic.clone(),
            view: self.app.view(&meta, &summaries),
            versions,
            ops,
        }
        .to_json())
    }
}

#[cfg(test)]
mod tests {
    //! The kit's topic service with a notes app of its own (every note counts, delivered by
    //! position): windows, holes, pages, carried ops, settlement, both modes, routing.
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use crate::memory::{ManualClock, MemoryConnections, MemoryStateStore};
    use serde_json::json;

    /// Notes: an op is `{"note": ".."}`; a Region's summary carries its newest note.
    struct Notes;

    impl App for Notes {
        type Meta = String;
        type Op = String;
        type Summary = Option<StoredOp>;
        type Reject = ();

        fn op_json(&self, note: &String) -> Json {
            json!({ "note": note })
        }
        fn summary(&self, topic: &TopicKey, stored: &StoredSummary) -> Result<Option<StoredOp>> {
            match stored.app.get("last") {
                Some(Json::Null) | None => Ok(None),
                Some(last) => StoredOp::from_json(topic, last).map(Some),
            }
        }
        fn summary_json(&self, last: &Option<StoredOp>) -> Json {
            json!({ "last": last.as_ref().map(StoredOp::to_json) })
        }
        fn empty_summary(&self) -> Option<StoredOp> {
            None
        }
        fn admit(&self, _: &String, _: u64) -> std::result::Result<(), ()> {
            Ok(())
        }
        fn decide(
            &self,
            _: &String,
            _: &[Option<StoredOp>],
            note: &String,
        ) -> std::result::Result<(), ()> {
            if note == "refused" {
                Err(())
            } else {
                Ok(())
            }
        }
        fn carried(&self, _: &TopicKey, last: &Option<StoredOp>) -> Vec<StoredOp> {
            last.iter().cloned().collect()
        }
        fn fold(
            &self,
            _: &Option<StoredOp>,
            copy: &StoredOp,
            _: &String,
        ) -> Result<Option<StoredOp>> {
            Ok(Some(copy.clone()))
        }
    }

    impl TopicApp for Notes {
        fn namespace(&self) -> Namespace {
            Namespace::new("notes").unwrap()
        }
        fn parse_op(&self, op: &Json) -> std::result::Result<String, ProtocolError> {
            op.get("note")
                .and_then(Json::as_str)
                .map(str::to_owned)
                .ok_or_else(|| {
                    ProtocolError::new(ErrorCode::InvalidField, "a note is {\"note\": ..}")
                })
        }
        fn meta(&self, _: &TopicKey, stored: &Json) -> Result<String> {
            Ok(stored["title"].as_str().unwrap_or_default().to_owned())
        }
        fn reject_code(&self, _: ()) -> &'static str {
            "refused_note"
        }
        fn view(&self, title: &String, seen: &[(StoredSummary, Option<StoredOp>)]) -> Json {
            json!({ "title": title, "regions": seen.len() })
        }
        fn delivery(&self) -> Delivery {
            Delivery::Log {
                tail: 3,
                push_tail: 2,
                push_window_ms: 60_000,
            }
        }
    }

    fn pad() -> Topic {
        Topic::parse("notes:pad").unwrap()
    }

    fn region(name: &str) -> (Arc<MemoryStateStore>, AppService<Notes>) {
        let clock = Arc::new(ManualClock::new(1_000));
        let store = Arc::new(MemoryStateStore::new(name, clock.clone()));
        let service = AppService::new(
            Notes,
            store.clone(),
            Arc::new(MemoryConnections::default()),
            clock,
            name,
        )
        .with_seeds([(TopicName::new("pad").unwrap(), json!({ "title": "Pad" }))]);
        (store, service)
    }

    fn ann() -> Principal {
        Principal::User(UserId::new("ann").unwrap())
    }

    async fn note(service: &AppService<Notes>, n: u32) -> ServerMessage {
        service
            .write(
                &ann(),
                &pad(),
                &OpId::new(format!("note-{n:05}")).unwrap(),
                &json!({ "note": format!("n{n}") }),
            )
            .await
    }

    struct Seen {
        versions: Versions,
        positions: Vec<u64>,
        /// Each op's view, in bytes of JSON: what an answer's cut counts.
        sizes: Vec<usize>,
        complete: bool,
        view: Json,
        you: TopicYouView,
    }

    async fn read(
        service: &AppService<Notes>,
        who: Principal,
        since: Option<Versions>,
        named: &[&str],
    ) -> Seen {
        let named: Vec<OpId> = named.iter().map(|n| OpId::new(*n).unwrap()).collect();
        match service
            .state(
                &ConnectionId::new("c=").unwrap(),
                &who,
                &pad(),
                &named,
                since.as_ref(),
            )
            .await
            .unwrap()
        {
            ServerMessage::TopicState {
                versions,
                ops,
                complete,
                view,
                you,
                ..
            } => Seen {
                versions,
                positions: ops.iter().map(|o| o.position).collect(),
                sizes: ops
                    .iter()
                    .map(|o| serde_json::to_string(o).map_or(0, |text| text.len()))
                    .collect(),
                complete,
                view,
                you,
            },
            other => panic!("not a topicState: {other:?}"),
        }
    }

    fn at(log: &str, position: u64) -> Versions {
        Versions::from([(log.to_owned(), position)])
    }

    #[tokio::test(start_paused = true)]
    async fn a_state_carries_the_newest_ops_or_those_past_since_and_a_push_its_tail() {
        let (_, service) = region("a");
        for n in 1..=5 {
            assert!(matches!(
                note(&service, n).await,
                ServerMessage::WriteResult {
                    status: WriteStatus::Accepted,
                    ..
                }
            ));
        }
        let newest = read(&service, ann(), None, &[]).await;
        assert_eq!(newest.versions, at("a", 5));
        assert_eq!(newest.positions, [3, 4, 5], "the newest `tail`");
        assert!(newest.complete);
        assert_eq!(newest.view, json!({ "title": "Pad", "regions": 1 }));
        assert_eq!(
            read(&service, ann(), Some(at("a", 1)), &[]).await.positions,
            [2, 3, 4, 5]
        );
        let caught_up = read(&service, ann(), Some(at("a", 5)), &[]).await;
        assert!(caught_up.positions.is_empty() && caught_up.complete);
        assert_eq!(service.versions(&pad()).await.unwrap(), at("a", 5));
        let push: Json = serde_json::from_str(&service.push_frame(&pad()).await.unwrap()).unwrap();
        assert_eq!(push["type"], "topicUpdate");
        assert_eq!(push["view"]["title"], "Pad");
        assert_eq!(push["versions"], json!({ "a": 5 }));
        let pushed: Vec<u64> = push["ops"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["position"].as_u64().unwrap())
            .collect();
        assert_eq!(pushed, [4, 5], "the newest `push_tail`");
        assert_eq!(push["ops"][1]["log"], "a");
    }

    #[tokio::test(start_paused = true)]
    async fn a_hole_is_incomplete_the_newest_op_is_held_by_its_summary_and_a_page_is_bounded() {
        let (a_store, a) = region("a");
        let (b_store, b) = region("b");
        let mut feed = a_store.change_feed();
        for n in 1..=5 {
            note(&a, n).await;
        }
        // B holds a's summary (carrying note 5) and the copies of 1, 2 and 4 only.
        while let Ok(change) = feed.try_recv() {
            let keep = match &change.item {
                crate::items::Item::Op { op, .. } => [1, 2, 4].contains(&op.position),
                _ => true,
            };
            if keep {
                b_store.apply_replicated(change);
            }
        }
        let all = read(&b, ann(), Some(at("a", 0)), &[]).await;
        assert_eq!(
            all.positions,
            [1, 2, 4, 5],
            "5 from the summary that carries it"
        );
        assert!(!all.complete, "3 is missing");
        let from_three = read(&b, ann(), Some(at("a", 3)), &[]).await;
        assert_eq!(from_three.positions, [4, 5]);
        assert!(from_three.complete, "nothing missing past 3");
        let from_four = read(&b, ann(), Some(at("a", 4)), &[]).await;
        assert_eq!(
            from_four.positions,
            [5],
            "a carried op below the window is not repeated"
        );
        // One answer carries at most LOG_PAGE_MAX ops of a log.
        let (_, big) = region("a");
        let total = LOG_PAGE_MAX as u32 + 3;
        for n in 1..=total {
            note(&big, n).await;
        }
        let page = read(&big, ann(), Some(at("a", 0)), &[]).await;
        assert_eq!(page.positions.len(), LOG_PAGE_MAX);
        assert_eq!(page.positions.last(), Some(&(LOG_PAGE_MAX as u64)));
        assert!(!page.complete, "more than one answer carries");
        let rest = read(&big, ann(), Some(at("a", LOG_PAGE_MAX as u64)), &[]).await;
        assert_eq!(rest.positions.len(), 3);
        assert!(rest.complete);
    }

    #[test]
    fn a_push_carries_what_each_log_accepted_within_the_window_of_its_newest() {
        let log = |name: &str, times: &[u64]| -> BTreeMap<u64, StoredOp> {
            times
                .iter()
                .zip(1u64..)
                .map(|(&at, position)| {
                    let copy = StoredOp {
                        topic: pad(),
                        author: UserId::new("ann").unwrap(),
                        op_id: OpId::new(format!("note-{name}-{position:04}")).unwrap(),
                        region: name.into(),
                        position,
                        at,
                        digest: wsdr_protocol::Digest::of(&json!({})).unwrap(),
                        op: json!({}),
                    };
                    (position, copy)
                })
                .collect()
        };
        let kept = |held: BTreeMap<u64, StoredOp>| -> Vec<u64> {
            within_window(held, 10_000).into_keys().collect()
        };
        assert_eq!(
            kept(log("a", &[1_000, 10_000, 11_000, 20_000])),
            [2, 3, 4],
            "at 10,000 is exactly the window's edge: kept; 1,000 is past it"
        );
        // Another Region's log, by its own clock: judged against its own newest.
        assert_eq!(kept(log("b", &[100])), [1]);
        assert!(kept(BTreeMap::new()).is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_copy_past_the_count_is_served_when_its_summary_never_arrived() {
        let (a_store, a) = region("a");
        let (b_store, b) = region("b");
        let mut feed = a_store.change_feed();
        for n in 1..=3 {
            note(&a, n).await;
        }
        // B holds every copy, and a's summary as it was after note 2 only (the version that
        // counted 3 lost with its Region, say).
        let mut summaries = 0;
        while let Ok(change) = feed.try_recv() {
            let keep = match &change.item {
                crate::items::Item::Summary { .. } => {
                    summaries += 1;
                    summaries <= 2
                }
                _ => true,
            };
            if keep {
                b_store.apply_replicated(change);
            }
        }
        let fresh = read(&b, ann(), None, &[]).await;
        assert_eq!(fresh.versions.get("a"), Some(&2), "counted to 2");
        assert_eq!(fresh.positions, [1, 2, 3], "3 is held, so it is served");
        assert!(fresh.complete);
        // A caller with the count already read on past it.
        let caught_up = read(&b, ann(), Some(at("a", 2)), &[]).await;
        assert_eq!(caught_up.positions, [3]);
        assert!(caught_up.complete);
        let all = read(&b, ann(), Some(at("a", 3)), &[]).await;
        assert!(all.positions.is_empty() && all.complete);
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_of_large_ops_is_cut_to_fit_a_message_and_read_on_from_there() {
        let (_, service) = region("a");
        let big = "x".repeat(3_000);
        for n in 1..=60 {
            service
                .write(
                    &ann(),
                    &pad(),
                    &OpId::new(format!("note-{n:05}")).unwrap(),
                    &json!({ "note": big }),
                )
                .await;
        }
        let first = read(&service, ann(), Some(at("a", 0)), &[]).await;
        let carried = first.positions.len();
        assert!((20..60).contains(&carried), "{carried} ops of 3 KB");
        assert_eq!(
            first.positions,
            (1..=carried as u64).collect::<Vec<_>>(),
            "a prefix"
        );
        assert!(!first.complete, "cut short of the count");
        let mut frontier = carried as u64;
        let mut answers = 1;
        loop {
            let next = read(&service, ann(), Some(at("a", frontier)), &[]).await;
            answers += 1;
            assert_eq!(next.positions.first(), Some(&(frontier + 1)));
            frontier = *next.positions.last().unwrap();
            if next.complete {
                break;
            }
            assert!(answers < 10, "every answer moves the frontier");
        }
        assert_eq!(frontier, 60);
        let push = service.push_frame(&pad()).await.unwrap();
        assert!(
            push.len() <= OPS_BYTES_MAX + 4_096,
            "a push fits a message: {}",
            push.len()
        );
    }

    /// Ops whose views add up to exactly [`OPS_BYTES_MAX`] fit one answer; one byte more is
    /// cut before the op that passes it.
    #[tokio::test(start_paused = true)]
    async fn an_answer_carries_ops_up_to_exactly_its_byte_limit() {
        let write = |service: &AppService<Notes>, n: u32, length: usize| {
            let service = service.clone();
            async move {
                service
                    .write(
                        &ann(),
                        &pad(),
                        &OpId::new(format!("note-{n:05}")).unwrap(),
                        &json!({ "note": "x".repeat(length) }),
                    )
                    .await
            }
        };
        for spare in [0, 1] {
            let (_, service) = region("a");
            for n in 1..=20 {
                write(&service, n, 3_000).await;
            }
            let first = read(&service, ann(), Some(at("a", 0)), &[]).await;
            assert!(first.complete, "20 ops of 3 KB fit");
            let held: usize = first.sizes.iter().sum();
            // The 21st op's view: the 20th's, with its note this much longer.
            let longer = OPS_BYTES_MAX - held - first.sizes[19] + spare;
            write(&service, 21, 3_000 + longer).await;
            let answer = read(&service, ann(), Some(at("a", 0)), &[]).await;
            if spare == 0 {
                assert_eq!(answer.sizes.iter().sum::<usize>(), OPS_BYTES_MAX);
                assert_eq!(answer.positions.len(), 21, "exactly the limit: all of them");
                assert!(answer.complete);
            } else {
                assert_eq!(
                    answer.positions.len(),
                    20,
                    "a byte past it: cut before the 21st"
                );
                assert!(!answer.complete);
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn named_ops_settle_by_copy_and_a_probe_reads_nobodys() {
        let (_, service) = region("a");
        note(&service, 1).await;
        assert!(matches!(
            service.write(&ann(), &pad(), &OpId::new("note-refused").unwrap(), &json!({ "note": "refused" })).await,
            ServerMessage::WriteResult { status: WriteStatus::Rejected, reason: Some(r), .. } if r == "refused_note"
        ));
        assert!(matches!(
            service
                .write(
                    &ann(),
                    &pad(),
                    &OpId::new("note-bad-0").unwrap(),
                    &json!({ "text": "x" })
                )
                .await,
            ServerMessage::Error { .. }
        ));
        let seen = read(&service, ann(), None, &["note-00001", "note-00009"]).await;
        assert_eq!(seen.you.user_id, "ann");
        assert_eq!(seen.you.ops.len(), 1);
        assert_eq!(seen.you.ops[0].log, "a");
        let stands: Vec<bool> = seen.you.settled.iter().map(|s| s.stands).collect();
        assert_eq!(stands, [true, false]);
        assert_eq!(seen.you.settled[0].copies[0].region, "a");
        let probe = Principal::Probe(UserId::new("canary:p").unwrap());
        let public = read(&service, probe.clone(), None, &["note-00001"]).await;
        assert!(public.you.ops.is_empty() && public.you.settled.is_empty());
        assert_eq!(public.positions, [1], "the public log");
        assert!(matches!(
            service.write(&probe, &pad(), &OpId::new("note-probe1").unwrap(), &json!({ "note": "x" })).await,
            ServerMessage::WriteResult { reason: Some(r), .. } if r == "forbidden"
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn seeds_are_this_apps_topics_only_and_apps_route_by_namespace() {
        let (_, service) = region("a");
        // The seed's name in another namespace is no topic.
        let other = Topic::parse("other:pad").unwrap();
        assert!(matches!(
            service
                .state(&ConnectionId::new("c=").unwrap(), &ann(), &other, &[], None)
                .await
                .unwrap(),
            ServerMessage::Error { .. }
        ));
        assert!(matches!(
            service.write(&ann(), &Topic::parse("notes:nowhere").unwrap(), &OpId::new("note-00001").unwrap(), &json!({ "note": "x" })).await,
            ServerMessage::WriteResult { reason: Some(r), .. } if r == "unknown_topic"
        ));
        let apps = Apps::default().with(Arc::new(service.clone()));
        assert!(apps.get(&pad()).is_some());
        assert!(apps.get(&other).is_none());
        assert_eq!(format!("{apps:?}"), r#"[Namespace("notes")]"#);
        assert!(format!("{service:?}").contains("notes"));
    }

    #[tokio::test(start_paused = true)]
    async fn in_strong_mode_every_op_is_in_the_heads_log() {
        let clock = Arc::new(ManualClock::new(1_000));
        let table = Arc::new(MemoryStateStore::new("a", clock.clone()));
        let service = AppService::strong(
            Notes,
            table,
            Arc::new(MemoryConnections::default()),
            clock,
            "a",
        )
        .with_seeds([(TopicName::new("pad").unwrap(), json!({ "title": "Pad" }))]);
        for n in 1..=3 {
            note(&service, n).await;
        }
        let seen = read(&service, ann(), None, &[]).await;
        assert_eq!(seen.versions, at(crate::model::LEDGER, 3));
        assert_eq!(seen.positions, [1, 2, 3]);
        assert!(
            seen.complete,
            "the newest op is the head's, held before its copy"
        );
        assert!(seen.you.ops.iter().all(|o| o.log == crate::model::LEDGER));
    }
}
