//! The auction service: one method per route, each returning the reply for the caller.

use crate::auction_store::{bid_of, AuctionApp, StateStore};
use crate::fanout::FanoutConfig;
use crate::items::{StoredOp, StoredSummary};
use crate::model::{
    last_bid, own_bids, Auction, AuctionSnapshot, BidRecord, ConnectionId, Consistency, Principal,
    RegionSummary, UserId,
};
use crate::ports::{Census, Clock, Connections, HeadStore, Notifier, OpStore};
use crate::read::Reader;
use crate::topics::{AppService, Apps, TopicService};
use crate::write::{Write, Writer, Written};
use crate::Result;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wsdr_protocol::{
    limits, Amount, AuctionId, BidId, BidStatus, ClientMessage, ErrorCode, Namespace, OpId,
    ProtocolError, ServerMessage, SettledBidView, SettledCopyView, Topic, TopicName, Versions,
    YouView,
};

/// What became of a bid on the kit's write path, before it is answered in a `bidResult` or
/// a `writeResult`.
enum Placed {
    UnknownAuction,
    Written(Written<BidReason>),
}

impl Placed {
    /// The frame's status and reason. Only the app's own refusals are `rejected`; a failure
    /// before the write is `unknown` with `unavailable` (nothing written: the bid may be sent
    /// again, same id, and may win; `unknown` makes every client, old ones included, settle
    /// it and resend it). `unknown` and `reused` name this frame's reasons for those two.
    fn answer(self, unknown: BidReason, reused: BidReason) -> (BidStatus, Option<&'static str>) {
        match self {
            Placed::UnknownAuction => (BidStatus::Rejected, Some(unknown.as_str())),
            Placed::Written(written) => match written {
                Written::Accepted => (BidStatus::Accepted, None),
                Written::Duplicate => (BidStatus::Duplicate, None),
                Written::OpIdReused => (BidStatus::Rejected, Some(reused.as_str())),
                Written::Rejected(reason) => (BidStatus::Rejected, Some(reason.as_str())),
                Written::Redirect(_) => (BidStatus::Redirect, Some(BidReason::NoQuorum.as_str())),
                Written::Unavailable(_) => {
                    (BidStatus::Unknown, Some(BidReason::Unavailable.as_str()))
                }
                Written::Unknown(_) => (BidStatus::Unknown, None),
            },
        }
    }
}

/// Why a bid was rejected: the `reason` of a rejected `bidResult`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BidReason {
    UnknownAuction,
    AuctionClosed,
    BelowStartingPrice,
    TooLow,
    /// The caller already used this bidId for a different amount.
    BidIdReused,
    /// The caller is a probe (the canary): it may not bid as anyone.
    Forbidden,
    /// Not a rejection (answered with status `unknown`): the store failed before anything
    /// was written, or the bid kept losing races; nothing was recorded by this request.
    /// Send it again, same bidId.
    Unavailable,
    /// Not a rejection (answered with status `redirect`, strong mode): this Region cannot
    /// reach its table's quorum and decided nothing. Send it to another Region, same bidId.
    NoQuorum,
    /// `writeResult`'s name for an unknown auction: no app of this deployment has the topic,
    /// or the topic does not exist.
    UnknownTopic,
    /// `writeResult`'s name for a reused id: this writer used the op id in this topic for
    /// another payload.
    OpIdReused,
}

impl BidReason {
    pub fn as_str(self) -> &'static str {
        match self {
            BidReason::UnknownAuction => "unknown_auction",
            BidReason::AuctionClosed => "auction_closed",
            BidReason::BelowStartingPrice => "below_starting_price",
            BidReason::TooLow => "too_low",
            BidReason::BidIdReused => "bid_id_reused",
            BidReason::Forbidden => "forbidden",
            BidReason::Unavailable => "unavailable",
            BidReason::NoQuorum => "no_quorum",
            BidReason::UnknownTopic => "unknown_topic",
            BidReason::OpIdReused => "op_id_reused",
        }
    }
}

/// The answer to one client frame. Nothing a frame causes is pushed before it is answered
/// (pushes start from the state table's stream: [`crate::push`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub message: ServerMessage,
}

impl Reply {
    fn only(message: ServerMessage) -> Self {
        Self { message }
    }
}

/// What a Region advertises in its `state` replies so that its clients, if all cut off at
/// once, come back at the rate the other Region admits: the herd window, the Region's live
/// connections (its last census) over the destination's new-connection quota.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HerdHint {
    /// New connections per second the other Region admits (API Gateway: 500/s by default).
    pub destination_quota_per_s: f64,
    /// A census older than this is ignored (its schedule stopped): no hint rather than a
    /// wrong one.
    pub max_census_age: Duration,
    /// How long one instance reuses the census it read (one read per instance per period).
    pub reuse_for: Duration,
}

impl Default for HerdHint {
    fn default() -> Self {
        Self {
            destination_quota_per_s: 500.0,
            max_census_age: Duration::from_secs(300),
            reuse_for: Duration::from_secs(60),
        }
    }
}

/// The census an instance read, and when (its clock, ms).
#[derive(Debug, Default)]
struct CensusCache {
    read_at_ms: Option<u64>,
    census: Option<Census>,
}

/// The real-time auction, over its ports. Cheap to clone; build one per cold start.
#[derive(Clone)]
pub struct AuctionService {
    store: Arc<dyn OpStore>,
    connections: Arc<dyn Connections>,
    notifier: Arc<dyn Notifier>,
    clock: Arc<dyn Clock>,
    region: String,
    fanout: FanoutConfig,
    /// Auctions created on first use when missing (the demo's lots): no store call at cold
    /// start, one conditional put the first time a missing seeded auction is asked for.
    seeds: Arc<Vec<Auction>>,
    /// The herd hint to advertise, if any, and the census it was last computed from.
    herd: Option<(HerdHint, Arc<Mutex<CensusCache>>)>,
    /// The kit's write path, with the auction's rules (how bids are decided is fixed when
    /// the service is built, from the store it is given).
    writer: Writer<AuctionApp>,
    /// The kit's read path, with the auction's summaries.
    reader: Reader<AuctionApp>,
    /// The auction on the kit's envelope (`write`, `getState` naming a topic).
    topics: AppService<AuctionApp>,
    /// Every other app of the deployment, by namespace: frames naming their topics go to them.
    apps: Apps,
    /// Retry pauses, fan-out jitter and write ids.
    entropy: Arc<dyn crate::ports::Entropy>,
}

impl std::fmt::Debug for AuctionService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuctionService")
            .field("region", &self.region)
            .field("fanout", &self.fanout)
            .finish_non_exhaustive()
    }
}

impl AuctionService {
    /// A service deciding bids per Region (eventual mode), on any state store.
    pub fn new(
        store: Arc<dyn OpStore>,
        connections: Arc<dyn Connections>,
        notifier: Arc<dyn Notifier>,
        clock: Arc<dyn Clock>,
        region: impl Into<String>,
    ) -> Self {
        let region = region.into();
        let fanout = FanoutConfig::default();
        let entropy: Arc<dyn crate::ports::Entropy> = Arc::new(crate::ports::ThreadEntropy);
        let writer = Writer::regional(
            Arc::new(AuctionApp),
            store.clone(),
            region.clone(),
            clock.clone(),
            entropy.clone(),
            fanout.pause.clone(),
        );
        let topics = AppService::new(
            AuctionApp,
            store.clone(),
            connections.clone(),
            clock.clone(),
            region.clone(),
        )
        .with_entropy(entropy.clone())
        .with_pause(fanout.pause.clone());
        Self {
            reader: Reader::regional(Arc::new(AuctionApp), store.clone()),
            topics,
            apps: Apps::default(),
            store,
            connections,
            notifier,
            clock,
            region,
            fanout,
            seeds: Arc::default(),
            herd: None,
            writer,
            entropy,
        }
    }

    /// Draw retry pauses and fan-out jitter from `entropy` (default: the thread's RNG).
    pub fn with_entropy(mut self, entropy: Arc<dyn crate::ports::Entropy>) -> Self {
        self.fanout.jitter = entropy.clone();
        self.writer = self.writer.with_entropy(entropy.clone());
        self.topics = self.topics.with_entropy(entropy.clone());
        self.entropy = entropy;
        self
    }

    /// A service deciding bids on each auction's ledger head (strong mode): it needs a store
    /// on a multi-Region strongly consistent table, and takes nothing else.
    pub fn strong(
        store: Arc<dyn HeadStore>,
        connections: Arc<dyn Connections>,
        notifier: Arc<dyn Notifier>,
        clock: Arc<dyn Clock>,
        region: impl Into<String>,
    ) -> Self {
        let state: Arc<dyn OpStore> = store.clone();
        let mut service = Self::new(state, connections, notifier, clock, region);
        service.writer = Writer::on_head(
            Arc::new(AuctionApp),
            store.clone(),
            service.region.clone(),
            service.clock.clone(),
            service.entropy.clone(),
            service.fanout.pause.clone(),
        );
        // Reads follow the head too. For the auction the regional reader would read the same
        // (the summaries query returns the head's summary, and the head's newest bid is its
        // high bid, which that summary carries whole); for an app whose newest op is not
        // carried, only the head's reader holds it (read.rs's tests).
        service.reader = Reader::on_head(Arc::new(AuctionApp), store.clone());
        service.topics = AppService::strong(
            AuctionApp,
            store,
            service.connections.clone(),
            service.clock.clone(),
            service.region.clone(),
        )
        .with_entropy(service.entropy.clone())
        .with_pause(service.fanout.pause.clone());
        service
    }

    /// Serve `apps` beside the auction: frames naming their topics (`write`, `getState` and
    /// heartbeats with a `topic`) and their pushes go to the app of the topic's namespace.
    pub fn with_apps(mut self, apps: Apps) -> Self {
        self.apps = apps;
        self
    }

    /// The service of a topic's namespace: the auction's own, or another app's.
    fn topic_service(&self, topic: &Topic) -> Option<&dyn TopicService> {
        if topic.namespace == Namespace::auction() {
            Some(&self.topics)
        } else {
            self.apps.get(topic).map(|service| service.as_ref())
        }
    }

    /// Whether a topic is one this deployment serves (its namespace is an app's): the push
    /// path starts pushes of those only.
    pub fn serves(&self, topic: &Topic) -> bool {
        self.topic_service(topic).is_some()
    }

    pub fn consistency(&self) -> Consistency {
        if self.writer.on_the_head() {
            Consistency::Strong
        } else {
            Consistency::Eventual
        }
    }

    /// Advertise a herd window in `state` replies, from the Region's connection census.
    pub fn with_herd_hint(mut self, hint: HerdHint) -> Self {
        self.herd = Some((hint, Arc::default()));
        self
    }

    /// The herd window to advertise: from the census this instance last read (read again
    /// when older than `reuse_for`), if it is recent enough. A failed read is logged and
    /// means no hint: a `state` reply never fails for it.
    async fn herd_window_ms(&self) -> Option<u64> {
        let (hint, cache) = self.herd.as_ref()?;
        let now = self.clock.now_ms();
        let reuse_ms = u64::try_from(hint.reuse_for.as_millis()).unwrap_or(u64::MAX);
        let cached = {
            let cache = cache
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            cache
                .read_at_ms
                .filter(|at| now.saturating_sub(*at) < reuse_ms)
                .map(|_| cache.census)
        };
        let census = match cached {
            Some(census) => census,
            None => {
                let census = match self.connections.census().await {
                    Ok(census) => census,
                    Err(error) => {
                        tracing::warn!(%error, "connection census unreadable: no herd hint");
                        None
                    }
                };
                let mut cache = cache
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                cache.read_at_ms = Some(now);
                cache.census = census;
                census
            }
        }?;
        let max_age_ms = u64::try_from(hint.max_census_age.as_millis()).unwrap_or(u64::MAX);
        if now.saturating_sub(census.counted_at_ms) > max_age_ms {
            return None;
        }
        let window = crate::herd_window(
            usize::try_from(census.connections).unwrap_or(usize::MAX),
            hint.destination_quota_per_s,
            Duration::ZERO,
        );
        u64::try_from(window.as_millis()).ok()
    }

    /// Auctions to create, if missing, the first time one is asked for.
    pub fn with_seed_auctions(mut self, seeds: Vec<Auction>) -> Self {
        self.topics = self.topics.with_seeds(
            seeds
                .iter()
                .map(|a| (TopicName::from(&a.id), crate::auction_store::meta_of(a))),
        );
        self.seeds = Arc::new(seeds);
        self
    }

    /// The auction, creating it first if it is a missing seeded one.
    async fn find_auction(&self, id: &AuctionId) -> Result<Option<Auction>> {
        if let Some(auction) = self.store.auction(id).await? {
            return Ok(Some(auction));
        }
        let Some(seed) = self.seeds.iter().find(|a| a.id == *id) else {
            return Ok(None);
        };
        self.store.put_auction_if_absent(seed).await?;
        // Re-read: a concurrent creator (or replication) may have won.
        self.store.auction(id).await
    }

    /// Broadcast as `fanout` says; its jitter is the service's entropy, its pauses the
    /// service's.
    pub fn with_fanout(mut self, fanout: FanoutConfig) -> Self {
        self.fanout = FanoutConfig {
            jitter: self.entropy.clone(),
            pause: self.fanout.pause.clone(),
            ..fanout
        };
        self
    }

    /// Wait retry pauses and fan-out backoff with `pause` (default: tokio's clock).
    pub fn with_pause(mut self, pause: Arc<dyn crate::ports::Pause>) -> Self {
        self.writer = self.writer.with_pause(pause.clone());
        self.topics = self.topics.with_pause(pause.clone());
        self.fanout.pause = pause;
        self
    }

    /// The Region label every frame carries.
    pub fn region(&self) -> &str {
        &self.region
    }

    pub fn store(&self) -> &Arc<dyn OpStore> {
        &self.store
    }

    /// `$connect`: remember which user holds this connection.
    pub async fn connect(&self, connection: &ConnectionId, user: &UserId) -> Result<()> {
        self.connections
            .register(connection, user, self.clock.now_ms())
            .await
    }

    /// `$disconnect` (best effort: API Gateway may never send it; records also expire).
    pub async fn disconnect(&self, connection: &ConnectionId) -> Result<()> {
        self.connections.remove(connection).await
    }

    /// Create an auction unless it exists (idempotent seeding).
    pub async fn ensure_auction(&self, auction: &Auction) -> Result<bool> {
        self.store.put_auction_if_absent(auction).await
    }

    /// One raw client frame, as the `bid`/`getState`/`heartbeat`/`$default` routes get it.
    /// Never fails: bad input becomes an error frame, a store failure becomes an `internal`
    /// error frame (logged here with its cause, which the client never sees), and the
    /// connection stays open either way, as with API Gateway.
    pub async fn handle_frame(
        &self,
        connection: &ConnectionId,
        caller: impl Into<Principal>,
        frame: &[u8],
    ) -> Reply {
        let caller = caller.into();
        let message = match wsdr_protocol::parse_client_message(frame) {
            Ok(message) => message,
            Err(error) => return Reply::only(self.error_frame(&error)),
        };
        let action = message.action();
        let user = caller.subject().clone();
        match self.handle(connection, &caller, message).await {
            Ok(reply) => reply,
            Err(crate::Error::NoQuorum(cause)) => {
                tracing::warn!(%cause, action, "no quorum: the client is sent elsewhere");
                Reply::only(self.no_quorum_frame())
            }
            Err(error) => {
                tracing::error!(%error, action, connection_id = %connection, user = %user, "request failed");
                Reply::only(self.error_frame(&ProtocolError::new(
                    ErrorCode::Internal,
                    "the request could not be completed; try again",
                )))
            }
        }
    }

    /// One parsed client frame from `caller` on `connection`. A probe may send heartbeats
    /// and read auctions; it never reads or writes anyone's bids.
    pub async fn handle(
        &self,
        connection: &ConnectionId,
        caller: &Principal,
        message: ClientMessage,
    ) -> Result<Reply> {
        match (message, caller) {
            (
                ClientMessage::Heartbeat {
                    topic: Some(topic), ..
                },
                _,
            ) => Ok(Reply::only(self.heartbeat_on_topic(topic).await)),
            (ClientMessage::Heartbeat { auction_id, .. }, _) => {
                Ok(Reply::only(self.heartbeat_watching(auction_id).await))
            }
            (
                ClientMessage::GetTopic {
                    topic,
                    op_ids,
                    since,
                },
                caller,
            ) => self
                .topic_state(connection, caller, &topic, &op_ids, since.as_ref())
                .await
                .map(Reply::only),
            (
                ClientMessage::GetState {
                    auction_id,
                    bid_ids,
                },
                Principal::User(user),
            ) => self
                .get_state_settling(connection, user, &auction_id, &bid_ids)
                .await
                .map(Reply::only),
            (ClientMessage::GetState { auction_id, .. }, Principal::Probe(probe)) => {
                self.probe_state(probe, &auction_id).await.map(Reply::only)
            }
            (
                ClientMessage::Bid {
                    auction_id,
                    amount,
                    bid_id,
                },
                Principal::User(user),
            ) => self.bid(user, &auction_id, amount, &bid_id).await,
            (ClientMessage::Bid { bid_id, .. }, Principal::Probe(probe)) => {
                tracing::warn!(user = %probe, %bid_id, "a probe identity tried to bid: refused");
                Ok(self.bid_result(&bid_id, Err(BidReason::Forbidden)))
            }
            (ClientMessage::Write { topic, op_id, op }, caller) => {
                Ok(Reply::only(match self.topic_service(&topic) {
                    Some(service) => service.write(caller, &topic, &op_id, &op).await,
                    None => ServerMessage::WriteResult {
                        op_id,
                        status: BidStatus::Rejected,
                        reason: Some(BidReason::UnknownTopic.as_str().to_owned()),
                        region: self.region.clone(),
                    },
                }))
            }
        }
    }

    /// `getState` naming a topic (any app's, the auction's included): the app's answer,
    /// with this Region's herd hint.
    async fn topic_state(
        &self,
        connection: &ConnectionId,
        caller: &Principal,
        topic: &Topic,
        op_ids: &[OpId],
        since: Option<&Versions>,
    ) -> Result<ServerMessage> {
        let Some(service) = self.topic_service(topic) else {
            return Ok(self.error_frame(&ProtocolError::new(
                ErrorCode::InvalidField,
                format!("no app of this deployment has the topic `{topic}`"),
            )));
        };
        let (state, herd) = tokio::join!(
            service.state(connection, caller, topic, op_ids, since),
            self.herd_window_ms(),
        );
        let mut state = state?;
        if let ServerMessage::TopicState { herd_window_ms, .. } = &mut state {
            *herd_window_ms = herd;
        }
        Ok(state)
    }

    /// `heartbeat` naming a topic: a pong with that topic's versions (without them if the
    /// read fails or no app has the topic: the pong is a liveness answer first).
    async fn heartbeat_on_topic(&self, topic: Topic) -> ServerMessage {
        let (herd_window_ms, versions) = tokio::join!(self.herd_window_ms(), async {
            let service = self.topic_service(&topic)?;
            match service.versions(&topic).await {
                Ok(versions) => Some(versions),
                Err(error) => {
                    tracing::warn!(%error, %topic, "pong without versions: summaries unreadable");
                    None
                }
            }
        });
        ServerMessage::Pong {
            region: self.region.clone(),
            ts: self.clock.now_ms(),
            herd_window_ms,
            auction_id: None,
            topic: versions.as_ref().map(|_| topic),
            versions,
        }
    }

    /// The error frame for a protocol error, in this Region.
    pub fn error_frame(&self, error: &ProtocolError) -> ServerMessage {
        ServerMessage::error(error, &self.region)
    }

    /// `heartbeat`: a pong, with the herd hint when one is configured (from this instance's
    /// cached census: at most one read per instance per `reuse_for`).
    pub async fn heartbeat(&self) -> ServerMessage {
        self.heartbeat_watching(None).await
    }

    /// `heartbeat` naming the auction the client watches: the pong also carries that
    /// auction's version vector as this Region sees it (one read of its summaries, or its
    /// ledger head), so a client that missed a push learns it is behind within one
    /// heartbeat. The pong is a liveness answer first: if the read fails it goes without
    /// versions (logged), never as an error.
    pub async fn heartbeat_watching(&self, auction_id: Option<AuctionId>) -> ServerMessage {
        let (herd_window_ms, versions) = tokio::join!(self.herd_window_ms(), async {
            let auction_id = auction_id.as_ref()?;
            match self.read_summaries(auction_id).await {
                Ok((summaries, _)) => Some(AuctionSnapshot::merge(&summaries).versions),
                Err(error) => {
                    tracing::warn!(%error, %auction_id, "pong without versions: summaries unreadable");
                    None
                }
            }
        });
        let versions: Option<Versions> = versions;
        ServerMessage::Pong {
            region: self.region.clone(),
            ts: self.clock.now_ms(),
            herd_window_ms,
            auction_id: versions.as_ref().and(auction_id),
            topic: None,
            versions,
        }
    }

    /// `getState` from a probe: the auction's public state only, no subscription, and a
    /// `you` with no bids (a probe has none and may read nobody's).
    async fn probe_state(&self, probe: &UserId, auction_id: &AuctionId) -> Result<ServerMessage> {
        let Some(auction) = self.find_auction(auction_id).await? else {
            return Ok(self.unknown_auction_frame(auction_id));
        };
        let (summaries, _) = self.read_summaries(auction_id).await?;
        Ok(ServerMessage::State {
            region: self.region.clone(),
            auction: AuctionSnapshot::merge(&summaries).view(&auction),
            you: YouView {
                user_id: probe.as_str().to_owned(),
                last_bid: None,
                bids: Vec::new(),
                settled: Vec::new(),
            },
            herd_window_ms: None,
        })
    }

    fn unknown_auction_frame(&self, auction_id: &AuctionId) -> ServerMessage {
        self.error_frame(&ProtocolError::new(
            ErrorCode::InvalidField,
            format!("no auction `{auction_id}`"),
        ))
    }

    /// `getState`: the auction as this Region sees it, and the caller's own standing bids.
    /// Also subscribes the connection to the auction's updates.
    pub async fn get_state(
        &self,
        connection: &ConnectionId,
        user: &UserId,
        auction_id: &AuctionId,
    ) -> Result<ServerMessage> {
        self.get_state_settling(connection, user, auction_id, &[])
            .await
    }

    /// `getState` naming bids the caller is unsure of (`bidIds`): besides the state, each
    /// gets a point read of its copies (and, in strong mode, a look at the ledger head's
    /// newest bid, whose copy may not be written yet), so the answer holds however many
    /// bids the user has. Cost: one query per named bid, at most [`limits::SETTLE_BIDS_MAX`].
    pub async fn get_state_settling(
        &self,
        connection: &ConnectionId,
        user: &UserId,
        auction_id: &AuctionId,
        bid_ids: &[BidId],
    ) -> Result<ServerMessage> {
        let Some(auction) = self.find_auction(auction_id).await? else {
            return Ok(self.unknown_auction_frame(auction_id));
        };
        // Subscribe first, then read: an update applied after the subscription is pushed to
        // this connection, one applied before it is in what we read. Read in parallel, the
        // other way round could miss an update that lands between the read and the
        // subscription (a replicated bid during a reconnect).
        let topic = crate::auction_store::topic(auction_id);
        self.connections
            .subscribe(connection, user, &topic, self.clock.now_ms())
            .await?;
        // The newest copies by time: copies of one bid in several Regions fold into one
        // entry, so read enough copies for OWN_BIDS_MAX bids even if each has two. The kit's
        // reader adds the caller's bids that the summaries (each Region's high bid) and, in
        // strong mode, the ledger head's newest bid carry whole: held here even before (or
        // without) their copy item, so the winner shown is always a bid the caller's reads
        // find.
        let bid_ids = &bid_ids[..bid_ids.len().min(limits::SETTLE_BIDS_MAX)];
        let op_ids: Vec<OpId> = bid_ids.iter().map(OpId::from).collect();
        let (holding, herd_window_ms) = tokio::join!(
            self.reader
                .hold(&topic, user, &op_ids, 2 * limits::OWN_BIDS_MAX),
            self.herd_window_ms(),
        );
        let holding = holding?;
        let summaries = region_summaries(&holding.summaries);
        let settled = bid_ids
            .iter()
            .zip(&holding.named)
            .map(|(bid_id, (_, copies))| {
                let copies = bids_of(copies)?;
                Ok(settled_view(bid_id, &copies))
            })
            .collect::<Result<Vec<_>>>()?;
        let copies = bids_of(&holding.own)?;
        let snapshot = AuctionSnapshot::merge(&summaries);
        let bids = own_bids(&copies, limits::OWN_BIDS_MAX);
        Ok(ServerMessage::State {
            region: self.region.clone(),
            auction: snapshot.view(&auction),
            you: YouView {
                user_id: user.as_str().to_owned(),
                last_bid: last_bid(&bids),
                bids,
                settled,
            },
            herd_window_ms,
        })
    }

    /// The auction's summaries as this Region reads them, and (strong mode) the newest
    /// accepted bid, whose copy may not be written yet.
    async fn read_summaries(
        &self,
        auction_id: &AuctionId,
    ) -> Result<(Vec<RegionSummary>, Option<BidRecord>)> {
        let (summaries, newest) = self
            .reader
            .summaries(&crate::auction_store::topic(auction_id))
            .await?;
        Ok((
            region_summaries(&summaries),
            newest.as_ref().map(bid_of).transpose()?,
        ))
    }

    /// The error frame of a strong-mode Region cut off from its table's quorum: the client
    /// goes to another Region (docs/PROTOCOL.md).
    fn no_quorum_frame(&self) -> ServerMessage {
        self.error_frame(&ProtocolError::new(
            ErrorCode::NoQuorum,
            "this Region cannot reach its table's quorum; connect to another Region",
        ))
    }

    /// `bid`: idempotent by (bidder, bidId). Never an anonymous error: every outcome, a store
    /// failure included, is a `bidResult` for this bidId. The kit's write path decides it
    /// ([`crate::write`]); this answers its outcome in the auction's frame. An accepted bid's
    /// answer waits for no push: the state table's stream starts the auction's push
    /// ([`crate::push`]), the same path as for bids that replication brought.
    pub async fn bid(
        &self,
        user: &UserId,
        auction_id: &AuctionId,
        amount: Amount,
        bid_id: &BidId,
    ) -> Result<Reply> {
        let (status, reason) = self
            .place(user, auction_id, amount, bid_id)
            .await
            .answer(BidReason::UnknownAuction, BidReason::BidIdReused);
        Ok(Reply::only(ServerMessage::BidResult {
            bid_id: bid_id.clone(),
            status,
            reason: reason.map(str::to_owned),
            region: self.region.clone(),
        }))
    }

    /// Decide a bid on the kit's write path (unknown auctions aside), logging what was not
    /// decided here.
    async fn place(
        &self,
        user: &UserId,
        auction_id: &AuctionId,
        amount: Amount,
        bid_id: &BidId,
    ) -> Placed {
        let written = match self.find_auction(auction_id).await {
            Err(error @ crate::Error::NoQuorum(_)) => Written::Redirect(error),
            Err(error) => Written::Unavailable(error),
            Ok(None) => return Placed::UnknownAuction,
            Ok(Some(auction)) => {
                self.writer
                    .write(&Write {
                        meta: &auction,
                        topic: &crate::auction_store::topic(auction_id),
                        author: user,
                        op_id: &OpId::from(bid_id),
                        op: &amount,
                    })
                    .await
            }
        };
        match &written {
            Written::Redirect(error) => {
                tracing::warn!(%error, %bid_id, user = %user, "bid not decided: no quorum here; redirected");
            }
            Written::Unavailable(error) => {
                tracing::error!(%error, %bid_id, user = %user, "bid failed before its write");
            }
            Written::Unknown(error) => {
                tracing::error!(%error, %bid_id, user = %user, "bid write failed: outcome unknown");
            }
            _ => {}
        }
        Placed::Written(written)
    }

    /// The `bidUpdate` frame of one push of `auction_id`: the merged state of every Region's
    /// summary this Region holds, read when the push starts (so a conflated push carries
    /// every change before it).
    pub async fn push_frame(&self, auction_id: &AuctionId) -> Result<String> {
        let (summaries, _) = self.read_summaries(auction_id).await?;
        let snapshot = AuctionSnapshot::merge(&summaries);
        Ok(ServerMessage::BidUpdate {
            region: self.region.clone(),
            auction_id: auction_id.clone(),
            high_bid: snapshot.high_bid.as_ref().map(BidRecord::view),
            bid_count: snapshot.bid_count,
            version: snapshot.bid_count,
            versions: snapshot.versions.clone(),
        }
        .to_json())
    }

    /// The registry, notifier and fan-out settings a push worker posts with.
    pub fn push_worker(&self, settings: crate::push::PushSettings) -> crate::push::PushWorker {
        crate::push::PushWorker {
            connections: self.connections.clone(),
            notifier: self.notifier.clone(),
            fanout: self.fanout.clone(),
            settings,
            pause: self.fanout.pause.clone(),
            pacer: Arc::new(crate::push::Pacer::new(
                settings.budget_per_second,
                self.clock.clone(),
                self.fanout.pause.clone(),
            )),
            frames: None,
        }
    }

    fn bid_result(&self, bid_id: &BidId, outcome: Result<BidStatus, BidReason>) -> Reply {
        let (status, reason) = match outcome {
            Ok(status) => (status, None),
            Err(reason) => (BidStatus::Rejected, Some(reason.as_str().to_owned())),
        };
        Reply::only(ServerMessage::BidResult {
            bid_id: bid_id.clone(),
            status,
            reason,
            region: self.region.clone(),
        })
    }
}

/// The auction's summaries from the kit's (each Region's count and its high bid).
fn region_summaries(summaries: &[(StoredSummary, Option<BidRecord>)]) -> Vec<RegionSummary> {
    summaries
        .iter()
        .map(|(stored, high)| RegionSummary {
            region: stored.region.clone(),
            accepted: stored.accepted,
            high: high.clone(),
        })
        .collect()
}

/// Op copies read as bids.
fn bids_of(copies: &[StoredOp]) -> Result<Vec<BidRecord>> {
    copies.iter().map(bid_of).collect()
}

/// The answer for one named bidId from the copies a point read found (any Region's).
/// What the serving Region holds of one bidId: each copy with its own Region and amount,
/// and `amount` only when every copy agrees (a bidId reused with two amounts in a split
/// has two bids under it; naming one amount for both would tell the user a falsehood).
fn settled_view(bid_id: &BidId, copies: &[BidRecord]) -> SettledBidView {
    let mut held: Vec<SettledCopyView> = copies
        .iter()
        .map(|c| SettledCopyView {
            region: c.region.clone(),
            amount: c.amount,
        })
        .collect();
    held.sort_by(|a, b| a.region.cmp(&b.region).then(a.amount.cmp(&b.amount)));
    held.dedup();
    let mut regions: Vec<String> = held.iter().map(|c| c.region.clone()).collect();
    regions.dedup();
    let amount = match held.split_first() {
        Some((first, rest)) if rest.iter().all(|c| c.amount == first.amount) => Some(first.amount),
        _ => None,
    };
    SettledBidView {
        bid_id: bid_id.clone(),
        stands: !held.is_empty(),
        amount,
        regions,
        copies: held,
    }
}

#[async_trait::async_trait]
impl crate::push::PushSource for AuctionService {
    /// The auction's topics push `bidUpdate` (what its clients read); another app's, its
    /// `topicUpdate`.
    async fn push_frame(&self, topic: &Topic) -> Result<String> {
        if let Some(auction) = crate::auction_store::auction_of(topic) {
            return AuctionService::push_frame(self, &auction).await;
        }
        match self.apps.get(topic) {
            Some(service) => service.push_frame(topic).await,
            None => Err(crate::Error::Internal(format!(
                "a push of `{topic}`, which no app of this deployment has"
            ))),
        }
    }

    fn push_worker(&self, settings: crate::push::PushSettings) -> crate::push::PushWorker {
        AuctionService::push_worker(self, settings)
    }
}
