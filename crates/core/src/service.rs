//! The auction service: one method per route, each returning the reply for the caller.

use crate::auction_store::{BidCommit, LedgerStore, StateStore};
use crate::fanout::FanoutConfig;
use crate::model::{
    held_bids, last_bid, own_bids, Auction, AuctionSnapshot, BidRecord, ConnectionId, Consistency,
    LedgerHead, Principal, RegionSummary, UserId,
};
use crate::ports::{Advance, Census, Clock, CommitOutcome, Connections, Notifier};
use crate::Result;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wsdr_protocol::{
    limits, Amount, AuctionId, BidId, BidStatus, ClientMessage, ErrorCode, ProtocolError,
    ServerMessage, SettledBidView, SettledCopyView, Versions, YouView,
};

/// How many times a bid is decided again when a concurrent bid in this Region moved the
/// summary first (each retry reads fresh state; a hot auction settles within a few).
const COMMIT_ATTEMPTS: u32 = 12;

/// Where a bid failed: before its write (nothing recorded) or at it (outcome unknown).
enum BidFailure {
    BeforeCommit(crate::Error),
    AtCommit(crate::Error),
}

impl BidFailure {
    /// Strong mode: this Region could not reach the table's quorum. Whatever the stage,
    /// the bid is safe to send elsewhere (its bidId is checked against the latest version
    /// everywhere), so the answer is a redirect, never a rejection.
    fn no_quorum(&self) -> bool {
        matches!(
            self,
            BidFailure::BeforeCommit(crate::Error::NoQuorum(_))
                | BidFailure::AtCommit(crate::Error::NoQuorum(_))
        )
    }
}

/// A short randomised pause after losing a race for the summary or the head, so that racing
/// writers spread out: up to 2 ms after the first loss, doubling to 128 ms.
async fn pause_before_deciding_again(
    entropy: &dyn crate::ports::Entropy,
    pause: &dyn crate::ports::Pause,
    attempt: u32,
) {
    let ms = entropy.below(1 + (2u64 << attempt.min(6)));
    pause.pause(std::time::Duration::from_millis(ms)).await;
}

/// Why `amount` cannot be accepted against `high` (the rule both consistency modes apply).
fn too_low(auction: &Auction, amount: Amount, high: Option<&BidRecord>) -> Option<BidReason> {
    if amount.get() >= auction.minimum_next_bid(high) {
        return None;
    }
    Some(if high.is_none() {
        BidReason::BelowStartingPrice
    } else {
        BidReason::TooLow
    })
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
    store: Arc<dyn StateStore>,
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
    /// How bids are decided, fixed when the service is built.
    path: BidPath,
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

/// How a service decides bids: chosen by its constructor, from the store it is given.
#[derive(Clone)]
enum BidPath {
    /// Per Region, on an eventually consistent table (MREC): each Region's summary decides.
    Regional,
    /// On the auction's ledger head, on a multi-Region strongly consistent table (MRSC).
    Ledger(Arc<dyn LedgerStore>),
}

/// What one attempt at deciding a bid came to.
enum Attempt {
    Decided(Box<Reply>),
    /// Another request moved the state first (nothing was written): decide again on fresh
    /// state, after a pause.
    Again,
}

impl AuctionService {
    /// A service deciding bids per Region (eventual mode), on any state store.
    pub fn new(
        store: Arc<dyn StateStore>,
        connections: Arc<dyn Connections>,
        notifier: Arc<dyn Notifier>,
        clock: Arc<dyn Clock>,
        region: impl Into<String>,
    ) -> Self {
        Self {
            store,
            connections,
            notifier,
            clock,
            region: region.into(),
            fanout: FanoutConfig::default(),
            seeds: Arc::default(),
            herd: None,
            path: BidPath::Regional,
            entropy: Arc::new(crate::ports::ThreadEntropy),
        }
    }

    /// Draw retry pauses and fan-out jitter from `entropy` (default: the thread's RNG).
    pub fn with_entropy(mut self, entropy: Arc<dyn crate::ports::Entropy>) -> Self {
        self.fanout.jitter = entropy.clone();
        self.entropy = entropy;
        self
    }

    /// A service deciding bids on each auction's ledger head (strong mode): it needs a store
    /// on a multi-Region strongly consistent table, and takes nothing else.
    pub fn strong(
        store: Arc<dyn LedgerStore>,
        connections: Arc<dyn Connections>,
        notifier: Arc<dyn Notifier>,
        clock: Arc<dyn Clock>,
        region: impl Into<String>,
    ) -> Self {
        let state: Arc<dyn StateStore> = store.clone();
        Self {
            path: BidPath::Ledger(store),
            ..Self::new(state, connections, notifier, clock, region)
        }
    }

    pub fn consistency(&self) -> Consistency {
        match self.path {
            BidPath::Regional => Consistency::Eventual,
            BidPath::Ledger(_) => Consistency::Strong,
        }
    }

    /// The answer to a bid this user already made (a copy of `bid_id` in any Region this
    /// store has seen), if it is one.
    async fn replayed(
        &self,
        auction_id: &AuctionId,
        user: &UserId,
        bid_id: &BidId,
        amount: Amount,
    ) -> Result<Option<Reply>, BidFailure> {
        let copies = self
            .store
            .bid_copies(auction_id, user, bid_id)
            .await
            .map_err(BidFailure::BeforeCommit)?;
        Ok(self.replay_answer(bid_id, amount, &copies))
    }

    /// This Region's copy of a bid accepted now.
    fn bid_record(
        &self,
        auction_id: &AuctionId,
        user: &UserId,
        bid_id: &BidId,
        amount: Amount,
        now: u64,
        position: u64,
    ) -> BidRecord {
        BidRecord {
            auction_id: auction_id.clone(),
            bid_id: bid_id.clone(),
            bidder: user.clone(),
            amount,
            at: now,
            region: self.region.clone(),
            position,
        }
    }

    /// Decide a bid: `attempt` until it decides, pausing before each new try, at most
    /// [`COMMIT_ATTEMPTS`] times. Both bid paths retry a lost race this way.
    async fn decide<F>(
        &self,
        what_moved: &str,
        mut attempt: impl FnMut(u32) -> F,
    ) -> Result<Reply, BidFailure>
    where
        F: std::future::Future<Output = Result<Attempt, BidFailure>>,
    {
        for n in 0..COMMIT_ATTEMPTS {
            match attempt(n).await? {
                Attempt::Decided(reply) => return Ok(*reply),
                Attempt::Again => {
                    pause_before_deciding_again(
                        self.entropy.as_ref(),
                        self.fanout.pause.as_ref(),
                        n,
                    )
                    .await;
                }
            }
        }
        Err(BidFailure::BeforeCommit(crate::Error::Transient(format!(
            "{what_moved} kept moving ({COMMIT_ATTEMPTS} tries)"
        ))))
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
        self.fanout.pause = pause;
        self
    }

    /// The Region label every frame carries.
    pub fn region(&self) -> &str {
        &self.region
    }

    pub fn store(&self) -> &Arc<dyn StateStore> {
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
            (ClientMessage::Heartbeat { auction_id }, _) => {
                Ok(Reply::only(self.heartbeat_watching(auction_id).await))
            }
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
        self.connections
            .subscribe(connection, user, auction_id, self.clock.now_ms())
            .await?;
        // The newest copies by time: copies of one bid in several Regions fold into one
        // entry, so read enough copies for OWN_BIDS_MAX bids even if each has two.
        let bid_ids = &bid_ids[..bid_ids.len().min(limits::SETTLE_BIDS_MAX)];
        let (summaries, copies, named, herd_window_ms) = tokio::join!(
            self.read_summaries(auction_id),
            self.store
                .newest_user_bids(auction_id, user, 2 * limits::OWN_BIDS_MAX),
            futures::future::try_join_all(
                bid_ids
                    .iter()
                    .map(|bid_id| self.store.bid_copies(auction_id, user, bid_id))
            ),
            self.herd_window_ms(),
        );
        let (summaries, newest) = summaries?;
        // The caller's bids that the summaries (each Region's high bid) and, in strong mode,
        // the ledger head's newest bid carry whole: held here even before (or without) their
        // copy item, so the winner shown is always a bid the caller's reads find.
        let carried: Vec<&BidRecord> = summaries
            .iter()
            .filter_map(|s| s.high.as_ref())
            .chain(newest.as_ref())
            .filter(|bid| bid.bidder == *user)
            .collect();
        let named = named?;
        let settled = bid_ids
            .iter()
            .zip(named)
            .map(|(bid_id, found)| {
                let found = held_bids(
                    found,
                    carried.iter().copied().filter(|bid| bid.bid_id == *bid_id),
                );
                settled_view(bid_id, &found)
            })
            .collect();
        let copies = held_bids(copies?, carried.iter().copied());
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
        match &self.path {
            BidPath::Regional => Ok((self.store.summaries(auction_id).await?, None)),
            BidPath::Ledger(ledger) => {
                let head = ledger.head(auction_id).await?;
                Ok(match head {
                    Some(head) => (vec![head.summary], head.last.map(|l| l.bid)),
                    None => (Vec::new(), None),
                })
            }
        }
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
    /// failure included, is a `bidResult` for this bidId.
    pub async fn bid(
        &self,
        user: &UserId,
        auction_id: &AuctionId,
        amount: Amount,
        bid_id: &BidId,
    ) -> Result<Reply> {
        let outcome = match self.find_auction(auction_id).await {
            Err(error) => Err(BidFailure::BeforeCommit(error)),
            Ok(None) => Ok(self.bid_result(bid_id, Err(BidReason::UnknownAuction))),
            Ok(Some(auction)) => match &self.path {
                BidPath::Regional => self.try_bid(user, &auction, amount, bid_id).await,
                BidPath::Ledger(ledger) => {
                    self.try_bid_strong(ledger.as_ref(), user, &auction, amount, bid_id)
                        .await
                }
            },
        };
        match outcome {
            Ok(reply) => Ok(reply),
            Err(failure) if failure.no_quorum() => {
                tracing::warn!(%bid_id, user = %user, "bid not decided: no quorum here; redirected");
                Ok(self.bid_result(bid_id, Ok(BidStatus::Redirect)))
            }
            Err(BidFailure::BeforeCommit(error)) => {
                // Nothing was written, but this is no rejection: the bid may be sent again
                // (same bidId) and may win. `unknown` makes every client, old ones included,
                // settle it and resend it.
                tracing::error!(%error, %bid_id, user = %user, "bid failed before its write");
                Ok(self.undecided(bid_id, BidReason::Unavailable))
            }
            Err(BidFailure::AtCommit(error)) => {
                tracing::error!(%error, %bid_id, user = %user, "bid write failed: outcome unknown");
                Ok(self.bid_result(bid_id, Ok(BidStatus::Unknown)))
            }
        }
    }

    async fn try_bid(
        &self,
        user: &UserId,
        auction: &Auction,
        amount: Amount,
        bid_id: &BidId,
    ) -> Result<Reply, BidFailure> {
        let auction_id = &auction.id;
        // A replay (in any Region's copy we hold) answers from the copy: check order matters,
        // a replay must answer `duplicate` even if the auction has since moved past it.
        if let Some(reply) = self.replayed(auction_id, user, bid_id, amount).await? {
            return Ok(reply);
        }
        self.decide("the auction's summary", |_| {
            self.regional_attempt(user, auction, amount, bid_id)
        })
        .await
    }

    /// One attempt of the eventual path: read the Region's summaries, apply the amount rule,
    /// commit the copy and this Region's summary in one transaction.
    async fn regional_attempt(
        &self,
        user: &UserId,
        auction: &Auction,
        amount: Amount,
        bid_id: &BidId,
    ) -> Result<Attempt, BidFailure> {
        use BidFailure::{AtCommit, BeforeCommit};
        let auction_id = &auction.id;
        let now = self.clock.now_ms();
        if !auction.is_open(now) {
            return Ok(Attempt::Decided(Box::new(
                self.bid_result(bid_id, Err(BidReason::AuctionClosed)),
            )));
        }
        let summaries = self
            .store
            .summaries(auction_id)
            .await
            .map_err(BeforeCommit)?;
        let before = AuctionSnapshot::merge(&summaries);
        if let Some(reason) = too_low(auction, amount, before.high_bid.as_ref()) {
            return Ok(Attempt::Decided(Box::new(
                self.bid_result(bid_id, Err(reason)),
            )));
        }
        let own = summaries
            .iter()
            .filter(|s| s.region == self.region)
            .max_by_key(|s| s.accepted)
            .cloned()
            .unwrap_or_else(|| RegionSummary::empty(self.region.clone()));
        let bid = self.bid_record(auction_id, user, bid_id, amount, now, own.accepted + 1);
        let commit = BidCommit {
            summary: own.with_bid(&bid),
            expected_accepted: own.accepted,
            // One id per attempt: it is also DynamoDB's ClientRequestToken, which must not
            // be reused with other parameters (an attempt after a conflict differs).
            write_id: self.write_id(),
            bid,
        };
        match self.store.commit_bid(&commit).await.map_err(AtCommit)? {
            CommitOutcome::Committed => Ok(Attempt::Decided(Box::new(self.accepted(bid_id)))),
            CommitOutcome::Exists(existing) => Ok(Attempt::Decided(Box::new(
                self.replay_result(amount, &existing),
            ))),
            // Another bid in this Region moved the summary: decide again on fresh state.
            CommitOutcome::Conflict => Ok(Attempt::Again),
        }
    }

    /// The strong-mode bid: one conditional write of the auction's ledger head decides it,
    /// checked against the latest version in every Region (docs/DATA_MODEL.md, "Strong
    /// mode"). Before moving the head, the head's last bid gets its copy: so every accepted
    /// bid but the newest has one, and a replay is found in the copies or in the head.
    async fn try_bid_strong(
        &self,
        ledger: &dyn LedgerStore,
        user: &UserId,
        auction: &Auction,
        amount: Amount,
        bid_id: &BidId,
    ) -> Result<Reply, BidFailure> {
        self.decide("the auction's ledger head", |_| {
            self.ledger_attempt(ledger, user, auction, amount, bid_id)
        })
        .await
    }

    /// One attempt of the strong path: settle the head's last bid, answer a replay from the
    /// copies, apply the amount rule, move the head in one conditional write.
    async fn ledger_attempt(
        &self,
        ledger: &dyn LedgerStore,
        user: &UserId,
        auction: &Auction,
        amount: Amount,
        bid_id: &BidId,
    ) -> Result<Attempt, BidFailure> {
        use BidFailure::{AtCommit, BeforeCommit};
        let auction_id = &auction.id;
        let head = ledger
            .head(auction_id)
            .await
            .map_err(BeforeCommit)?
            .unwrap_or_else(LedgerHead::empty);
        if let Some(last) = &head.last {
            match ledger.settle(&last.bid, &last.write_id).await {
                Ok(()) => {}
                // Another Region is writing the same copy (it read the same head): it is
                // the same item either way. Decide again on fresh state.
                Err(crate::Error::WriteConflict(_)) => return Ok(Attempt::Again),
                Err(error) => return Err(BeforeCommit(error)),
            }
        }
        // Every accepted bid now has its copy: the copies answer a replay.
        if let Some(reply) = self.replayed(auction_id, user, bid_id, amount).await? {
            return Ok(Attempt::Decided(Box::new(reply)));
        }
        let now = self.clock.now_ms();
        if !auction.is_open(now) {
            return Ok(Attempt::Decided(Box::new(
                self.bid_result(bid_id, Err(BidReason::AuctionClosed)),
            )));
        }
        if let Some(reason) = too_low(auction, amount, head.summary.high.as_ref()) {
            return Ok(Attempt::Decided(Box::new(
                self.bid_result(bid_id, Err(reason)),
            )));
        }
        let bid = self.bid_record(
            auction_id,
            user,
            bid_id,
            amount,
            now,
            head.summary.accepted + 1,
        );
        let write_id = self.write_id();
        let next = head.with_bid(&bid, &write_id);
        match ledger
            .advance(auction_id, head.summary.accepted, &next)
            .await
        {
            Ok(Advance::Advanced) => {
                // Decided. The copy is written now or by the next bid, whichever comes
                // first; a failure here changes nothing for this answer.
                if let Err(error) = ledger.settle(&bid, &write_id).await {
                    tracing::warn!(%error, %bid_id, "copy of an accepted bid deferred to the next bid");
                }
                Ok(Attempt::Decided(Box::new(self.accepted(bid_id))))
            }
            // Another bid moved the head first, or a request in another Region was
            // writing it (nothing written either way): decide again on fresh state.
            Ok(Advance::Moved) | Err(crate::Error::WriteConflict(_)) => Ok(Attempt::Again),
            Err(error) => Err(AtCommit(error)),
        }
    }

    /// The answer to a recorded bid. It waits for no push: the state table's stream starts
    /// the auction's push ([`crate::push`]), the same path as for bids that replication
    /// brought.
    fn accepted(&self, bid_id: &BidId) -> Reply {
        self.bid_result(bid_id, Ok(BidStatus::Accepted))
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

    /// The answer to a bid whose (bidder, bidId) this Region already holds copies of.
    fn replay_answer(&self, bid_id: &BidId, amount: Amount, copies: &[BidRecord]) -> Option<Reply> {
        if copies.is_empty() {
            return None;
        }
        let status = if copies.iter().any(|c| c.amount == amount) {
            Ok(BidStatus::Duplicate)
        } else {
            Err(BidReason::BidIdReused)
        };
        Some(self.bid_result(bid_id, status))
    }

    /// A fresh id for one bid attempt (the store recognises its own write by it).
    fn write_id(&self) -> String {
        format!(
            "{:016x}{:016x}",
            self.entropy.below(u64::MAX),
            self.entropy.below(u64::MAX)
        )
    }

    fn replay_result(&self, amount: Amount, existing: &BidRecord) -> Reply {
        if existing.amount == amount {
            self.bid_result(&existing.bid_id, Ok(BidStatus::Duplicate))
        } else {
            self.bid_result(&existing.bid_id, Err(BidReason::BidIdReused))
        }
    }

    /// A bid this request did not decide, for `reason`: status `unknown` (send it again, same
    /// bidId), never `rejected`.
    fn undecided(&self, bid_id: &BidId, reason: BidReason) -> Reply {
        Reply::only(ServerMessage::BidResult {
            bid_id: bid_id.clone(),
            status: BidStatus::Unknown,
            reason: Some(reason.as_str().to_owned()),
            region: self.region.clone(),
        })
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
    async fn push_frame(&self, auction: &AuctionId) -> Result<String> {
        AuctionService::push_frame(self, auction).await
    }

    fn push_worker(&self, settings: crate::push::PushSettings) -> crate::push::PushWorker {
        AuctionService::push_worker(self, settings)
    }
}
