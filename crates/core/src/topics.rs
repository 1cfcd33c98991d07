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
    /// ops, a push each log's newest `push_tail`.
    Log { tail: usize, push_tail: usize },
}

/// The most ops of one log one `topicState` carries: past it the answer is not `complete` and
/// the client reads on from where it stopped. About 250 bytes an op keeps an answer of two
/// Regions' pages inside API Gateway's 128 KB message.
pub const LOG_PAGE_MAX: usize = 200;

/// The most of the caller's own ops a `topicState` lists (newest first).
pub const OWN_OPS_MAX: usize = 50;

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
        carried: &[StoredOp],
    ) -> Result<(Vec<OpView>, bool)> {
        let windows: Vec<(&String, u64, u64)> = versions
            .iter()
            .filter_map(|(log, &count)| {
                let from = match since {
                    Some(since) => since.get(log).copied().unwrap_or(0),
                    None => count.saturating_sub(tail as u64),
                };
                (from < count).then_some((log, from, count))
            })
            .collect();
        let pages = futures::future::try_join_all(windows.iter().map(|(log, from, count)| {
            let want = usize::try_from(count - from)
                .unwrap_or(usize::MAX)
                .min(LOG_PAGE_MAX);
            self.store.log_after(topic, log, *from, want)
        }))
        .await?;
        let mut ops = Vec::new();
        let mut complete = true;
        for ((log, from, count), page) in windows.into_iter().zip(pages) {
            let last = count.min(from + LOG_PAGE_MAX as u64);
            let mut held: BTreeMap<u64, StoredOp> = page
                .into_iter()
                .chain(carried.iter().filter(|op| op.in_log(log)).cloned())
                .filter(|op| op.position > from && op.position <= last)
                .map(|op| (op.position, op))
                .collect();
            // A gap (a copy not arrived) or a page cut short of the count.
            complete &= last == count && held.len() as u64 == last - from;
            ops.extend(
                std::mem::take(&mut held)
                    .into_values()
                    .map(|op| op_view(&op, log)),
            );
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
                self.log(topic, &versions, since, tail, &carried).await?
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
            Delivery::Log { push_tail, .. } => {
                let carried = self.carried(topic, &summaries, newest.as_ref());
                self.log(topic, &versions, None, push_tail, &carried)
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
