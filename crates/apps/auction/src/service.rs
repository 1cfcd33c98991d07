//! The auction's service: its own frames beside the kit's envelope (`bid`, `bidResult`,
//! `getState` naming an auction, its `state`, `bidUpdate` and the pong naming an auction),
//! each decided and read on the kit's write and read paths, and the deployment's front door
//! ([`Gateway`]) built with the auction in it.

use crate::model::{last_bid, own_bids, Auction, AuctionSnapshot, BidRecord, RegionSummary};
use crate::store::{bid_of, meta_of, topic, AuctionApp, StateStore};
use std::sync::Arc;
use wsdr_core::fanout::FanoutConfig;
use wsdr_core::items::{StoredOp, StoredSummary};
use wsdr_core::ports::{Clock, Connections, Entropy, HeadStore, Notifier, OpStore, Pause};
use wsdr_core::push::{PushSettings, PushSource, PushWorker};
use wsdr_core::read::Reader;
use wsdr_core::topics::{AppService, Apps};
use wsdr_core::write::{Write, Writer, Written};
use wsdr_core::{
    AppFrames, ConnectionId, Consistency, Gateway, HerdHint, Principal, Reply, Result, UserId,
};
use wsdr_protocol::{
    limits, Amount, AuctionId, BidId, BidStatus, ClientMessage, ErrorCode, OpId, ProtocolError,
    ServerMessage, SettledBidView, SettledCopyView, Topic, TopicName, Versions, YouView,
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

/// The auction's own frames and its reads and writes on the kit: what the gateway asks for a
/// frame outside the envelope.
#[derive(Clone)]
struct Routes {
    store: Arc<dyn OpStore>,
    connections: Arc<dyn Connections>,
    clock: Arc<dyn Clock>,
    region: String,
    /// Auctions created on first use when missing (the demo's lots): no store call at cold
    /// start, one conditional put the first time a missing seeded auction is asked for.
    seeds: Arc<Vec<Auction>>,
    /// The kit's write path, with the auction's rules (how bids are decided is fixed when
    /// the service is built, from the store it is given).
    writer: Writer<AuctionApp>,
    /// The kit's read path, with the auction's summaries.
    reader: Reader<AuctionApp>,
}

/// The real-time auction, over the kit's ports: the auction's service and the front door
/// ([`AuctionService::gateway`]) of a deployment serving it (and any other apps given).
/// Cheap to clone; build one per cold start.
#[derive(Clone)]
pub struct AuctionService {
    routes: Arc<Routes>,
    /// The auction on the kit's envelope (`write`, `getState` naming a topic).
    topics: AppService<AuctionApp>,
    /// The deployment's other apps, by namespace.
    apps: Apps,
    gateway: Gateway,
}

impl std::fmt::Debug for AuctionService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuctionService")
            .field("gateway", &self.gateway)
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
        let gateway = Gateway::new(connections.clone(), notifier, clock.clone(), region.clone());
        let fanout = gateway.fanout().clone();
        let writer = Writer::regional(
            Arc::new(AuctionApp),
            store.clone(),
            region.clone(),
            clock.clone(),
            fanout.jitter.clone(),
            fanout.pause.clone(),
        );
        let topics = AppService::new(
            AuctionApp,
            store.clone(),
            connections.clone(),
            clock.clone(),
            region.clone(),
        )
        .with_entropy(fanout.jitter.clone())
        .with_pause(fanout.pause.clone());
        Self {
            routes: Arc::new(Routes {
                reader: Reader::regional(Arc::new(AuctionApp), store.clone()),
                store,
                connections,
                clock,
                region,
                seeds: Arc::default(),
                writer,
            }),
            topics,
            apps: Apps::default(),
            gateway,
        }
        .assembled()
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
        let fanout = service.gateway.fanout().clone();
        let mut routes = (*service.routes).clone();
        routes.writer = Writer::on_head(
            Arc::new(AuctionApp),
            store.clone(),
            routes.region.clone(),
            routes.clock.clone(),
            fanout.jitter.clone(),
            fanout.pause.clone(),
        );
        // Reads follow the head too. For the auction the regional reader would read the same
        // (the summaries query returns the head's summary, and the head's newest bid is its
        // high bid, which that summary carries whole); for an app whose newest op is not
        // carried, only the head's reader holds it (read.rs's tests).
        routes.reader = Reader::on_head(Arc::new(AuctionApp), store.clone());
        service.topics = AppService::strong(
            AuctionApp,
            store,
            routes.connections.clone(),
            routes.clock.clone(),
            routes.region.clone(),
        )
        .with_entropy(fanout.jitter.clone())
        .with_pause(fanout.pause.clone());
        service.routes = Arc::new(routes);
        service.assembled()
    }

    /// The gateway with this service's auction in it: its topics among the apps, its own
    /// frames answered. Every builder ends here.
    fn assembled(mut self) -> Self {
        let apps = self.apps.clone().with(Arc::new(self.topics.clone()));
        let frames: Arc<dyn AppFrames> = self.routes.clone();
        self.gateway = self.gateway.with_apps(apps).with_frames(frames);
        self
    }

    /// Change the routes (the writer, the seeds) and assemble again.
    fn with_routes(mut self, change: impl FnOnce(&mut Routes)) -> Self {
        let mut routes = (*self.routes).clone();
        change(&mut routes);
        self.routes = Arc::new(routes);
        self.assembled()
    }

    /// Draw retry pauses, fan-out jitter and write ids from `entropy` (default: the thread's
    /// RNG).
    pub fn with_entropy(mut self, entropy: Arc<dyn Entropy>) -> Self {
        self.topics = self.topics.with_entropy(entropy.clone());
        self.gateway = self.gateway.with_entropy(entropy.clone());
        self.with_routes(|routes| routes.writer = routes.writer.clone().with_entropy(entropy))
    }

    /// Wait retry pauses and fan-out backoff with `pause` (default: tokio's clock).
    pub fn with_pause(mut self, pause: Arc<dyn Pause>) -> Self {
        self.topics = self.topics.with_pause(pause.clone());
        self.gateway = self.gateway.with_pause(pause.clone());
        self.with_routes(|routes| routes.writer = routes.writer.clone().with_pause(pause))
    }

    /// Serve `apps` beside the auction: frames naming their topics (`write`, `getState` and
    /// heartbeats with a `topic`) and their pushes go to the app of the topic's namespace.
    pub fn with_apps(mut self, apps: Apps) -> Self {
        self.apps = apps;
        self.assembled()
    }

    /// Advertise a herd window in `state` replies, from the Region's connection census.
    pub fn with_herd_hint(mut self, hint: HerdHint) -> Self {
        self.gateway = self.gateway.with_herd_hint(hint);
        self
    }

    /// Broadcast as `fanout` says; its jitter is the service's entropy, its pauses the
    /// service's.
    pub fn with_fanout(mut self, fanout: FanoutConfig) -> Self {
        self.gateway = self.gateway.with_fanout(fanout);
        self
    }

    /// Auctions to create, if missing, the first time one is asked for.
    pub fn with_seed_auctions(mut self, seeds: Vec<Auction>) -> Self {
        self.topics = self
            .topics
            .with_seeds(seeds.iter().map(|a| (TopicName::from(&a.id), meta_of(a))));
        self.with_routes(|routes| routes.seeds = Arc::new(seeds))
    }

    /// The front door of a deployment serving this auction (and the apps given).
    pub fn gateway(&self) -> &Gateway {
        &self.gateway
    }

    /// The front door, for a handler that needs nothing of the auction's own API.
    pub fn into_gateway(self) -> Gateway {
        self.gateway
    }

    /// The Region label every frame carries.
    pub fn region(&self) -> &str {
        &self.routes.region
    }

    pub fn store(&self) -> &Arc<dyn OpStore> {
        &self.routes.store
    }

    pub fn consistency(&self) -> Consistency {
        if self.routes.writer.on_the_head() {
            Consistency::Strong
        } else {
            Consistency::Eventual
        }
    }

    /// Whether a topic is one this deployment serves ([`Gateway::serves`]).
    pub fn serves(&self, topic: &Topic) -> bool {
        self.gateway.serves(topic)
    }

    /// `$connect` ([`Gateway::connect`]).
    pub async fn connect(&self, connection: &ConnectionId, user: &UserId) -> Result<()> {
        self.gateway.connect(connection, user).await
    }

    /// `$disconnect` ([`Gateway::disconnect`]).
    pub async fn disconnect(&self, connection: &ConnectionId) -> Result<()> {
        self.gateway.disconnect(connection).await
    }

    /// One raw client frame ([`Gateway::handle_frame`]).
    pub async fn handle_frame(
        &self,
        connection: &ConnectionId,
        caller: impl Into<Principal>,
        frame: &[u8],
    ) -> Reply {
        self.gateway.handle_frame(connection, caller, frame).await
    }

    /// One parsed client frame ([`Gateway::handle`]).
    pub async fn handle(
        &self,
        connection: &ConnectionId,
        caller: &Principal,
        message: ClientMessage,
    ) -> Result<Reply> {
        self.gateway.handle(connection, caller, message).await
    }

    /// The error frame for a protocol error, in this Region.
    pub fn error_frame(&self, error: &ProtocolError) -> ServerMessage {
        self.gateway.error_frame(error)
    }

    /// `heartbeat`: a pong, with the herd hint when one is configured.
    pub async fn heartbeat(&self) -> ServerMessage {
        self.gateway.heartbeat().await
    }

    /// `heartbeat` naming the auction the client watches ([`Routes::heartbeat_watching`]).
    pub async fn heartbeat_watching(&self, auction_id: Option<AuctionId>) -> ServerMessage {
        self.routes
            .heartbeat_watching(&self.gateway, auction_id)
            .await
    }

    /// Create an auction unless it exists (idempotent seeding).
    pub async fn ensure_auction(&self, auction: &Auction) -> Result<bool> {
        self.routes.ensure_auction(auction).await
    }

    /// `getState`: the auction as this Region sees it, and the caller's own standing bids.
    /// Also subscribes the connection to the auction's updates.
    pub async fn get_state(
        &self,
        connection: &ConnectionId,
        user: &UserId,
        auction_id: &AuctionId,
    ) -> Result<ServerMessage> {
        self.routes
            .get_state(&self.gateway, connection, user, auction_id)
            .await
    }

    /// `getState` naming bids the caller is unsure of ([`Routes::get_state_settling`]).
    pub async fn get_state_settling(
        &self,
        connection: &ConnectionId,
        user: &UserId,
        auction_id: &AuctionId,
        bid_ids: &[BidId],
    ) -> Result<ServerMessage> {
        self.routes
            .get_state_settling(&self.gateway, connection, user, auction_id, bid_ids)
            .await
    }

    /// `bid` ([`Routes::bid`]).
    pub async fn bid(
        &self,
        user: &UserId,
        auction_id: &AuctionId,
        amount: Amount,
        bid_id: &BidId,
    ) -> Result<Reply> {
        self.routes.bid(user, auction_id, amount, bid_id).await
    }

    /// The `bidUpdate` frame of one push of `auction_id` ([`Routes::push_frame`]).
    pub async fn push_frame(&self, auction_id: &AuctionId) -> Result<String> {
        self.routes.push_frame(auction_id).await
    }

    /// The registry, notifier and fan-out settings a push worker posts with.
    pub fn push_worker(&self, settings: PushSettings) -> PushWorker {
        self.gateway.push_worker(settings)
    }
}

impl From<AuctionService> for Gateway {
    fn from(service: AuctionService) -> Self {
        service.into_gateway()
    }
}

#[async_trait::async_trait]
impl PushSource for AuctionService {
    async fn push_frame(&self, topic: &Topic) -> Result<String> {
        PushSource::push_frame(&self.gateway, topic).await
    }

    fn push_worker(&self, settings: PushSettings) -> PushWorker {
        self.gateway.push_worker(settings)
    }
}

#[async_trait::async_trait]
impl AppFrames for Routes {
    /// The auction's own frames. A probe may send heartbeats and read auctions; it never
    /// reads or writes anyone's bids.
    async fn handle(
        &self,
        gateway: &Gateway,
        connection: &ConnectionId,
        caller: &Principal,
        message: ClientMessage,
    ) -> Result<Reply> {
        match (message, caller) {
            (ClientMessage::Heartbeat { auction_id, .. }, _) => Ok(Reply::only(
                self.heartbeat_watching(gateway, auction_id).await,
            )),
            (
                ClientMessage::GetState {
                    auction_id,
                    bid_ids,
                },
                Principal::User(user),
            ) => self
                .get_state_settling(gateway, connection, user, &auction_id, &bid_ids)
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
            (other, _) => Ok(Reply::only(self.error_frame(&ProtocolError::new(
                ErrorCode::UnknownAction,
                format!("`{}` is not an auction frame", other.action()),
            )))),
        }
    }

    /// The auction's topics push `bidUpdate` (what its clients read).
    async fn push_frame(&self, _: &Gateway, topic: &Topic) -> Option<Result<String>> {
        let auction = crate::store::auction_of(topic)?;
        Some(Routes::push_frame(self, &auction).await)
    }
}

impl Routes {
    /// The error frame for a protocol error, in this Region.
    fn error_frame(&self, error: &ProtocolError) -> ServerMessage {
        ServerMessage::error(error, &self.region)
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

    /// Create an auction unless it exists (idempotent seeding).
    async fn ensure_auction(&self, auction: &Auction) -> Result<bool> {
        self.store.put_auction_if_absent(auction).await
    }

    /// `heartbeat` naming the auction the client watches: the pong also carries that
    /// auction's version vector as this Region sees it (one read of its summaries, or its
    /// ledger head), so a client that missed a push learns it is behind within one
    /// heartbeat. The pong is a liveness answer first: if the read fails it goes without
    /// versions (logged), never as an error.
    async fn heartbeat_watching(
        &self,
        gateway: &Gateway,
        auction_id: Option<AuctionId>,
    ) -> ServerMessage {
        let (herd_window_ms, versions) = tokio::join!(gateway.herd_window_ms(), async {
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
    async fn get_state(
        &self,
        gateway: &Gateway,
        connection: &ConnectionId,
        user: &UserId,
        auction_id: &AuctionId,
    ) -> Result<ServerMessage> {
        self.get_state_settling(gateway, connection, user, auction_id, &[])
            .await
    }

    /// `getState` naming bids the caller is unsure of (`bidIds`): besides the state, each
    /// gets a point read of its copies (and, in strong mode, a look at the ledger head's
    /// newest bid, whose copy may not be written yet), so the answer holds however many
    /// bids the user has. Cost: one query per named bid, at most [`limits::SETTLE_BIDS_MAX`].
    async fn get_state_settling(
        &self,
        gateway: &Gateway,
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
        let topic = topic(auction_id);
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
            gateway.herd_window_ms(),
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
        let (summaries, newest) = self.reader.summaries(&topic(auction_id)).await?;
        Ok((
            region_summaries(&summaries),
            newest.as_ref().map(bid_of).transpose()?,
        ))
    }

    /// `bid`: idempotent by (bidder, bidId). Never an anonymous error: every outcome, a store
    /// failure included, is a `bidResult` for this bidId. The kit's write path decides it
    /// ([`crate::write`]); this answers its outcome in the auction's frame. An accepted bid's
    /// answer waits for no push: the state table's stream starts the auction's push
    /// ([`crate::push`]), the same path as for bids that replication brought.
    async fn bid(
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
            Err(error @ wsdr_core::Error::NoQuorum(_)) => Written::Redirect(error),
            Err(error) => Written::Unavailable(error),
            Ok(None) => return Placed::UnknownAuction,
            Ok(Some(auction)) => {
                self.writer
                    .write(&Write {
                        meta: &auction,
                        topic: &topic(auction_id),
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
    async fn push_frame(&self, auction_id: &AuctionId) -> Result<String> {
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
