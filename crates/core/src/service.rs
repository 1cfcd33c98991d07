//! The auction service: one method per route, each returning the reply for the caller.

use crate::fanout::{broadcast, FanoutConfig, FanoutReport};
use crate::model::{Auction, BidRecord, ConnectionId, UserBid, UserId};
use crate::ports::{Clock, Connections, InsertOutcome, Notifier, StateStore};
use crate::Result;
use std::sync::Arc;
use wsdr_protocol::{
    Amount, AuctionId, BidId, BidStatus, ClientMessage, ErrorCode, ProtocolError, ServerMessage,
    YouView,
};

/// Why a bid was rejected: the `reason` of a rejected `bidResult`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BidReason {
    UnknownAuction,
    AuctionClosed,
    BelowStartingPrice,
    TooLow,
    /// The bidId was already used for a different bid (other bidder, amount or auction).
    BidIdReused,
}

impl BidReason {
    pub fn as_str(self) -> &'static str {
        match self {
            BidReason::UnknownAuction => "unknown_auction",
            BidReason::AuctionClosed => "auction_closed",
            BidReason::BelowStartingPrice => "below_starting_price",
            BidReason::TooLow => "too_low",
            BidReason::BidIdReused => "bid_id_reused",
        }
    }
}

/// The answer to one client frame, plus what the broadcast it caused did (if any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub message: ServerMessage,
    pub fanout: Option<FanoutReport>,
}

impl Reply {
    fn only(message: ServerMessage) -> Self {
        Self {
            message,
            fanout: None,
        }
    }
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
        }
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

    pub fn with_fanout(mut self, fanout: FanoutConfig) -> Self {
        self.fanout = fanout;
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
        user: &UserId,
        frame: &[u8],
    ) -> Reply {
        let message = match wsdr_protocol::parse_client_message(frame) {
            Ok(message) => message,
            Err(error) => return Reply::only(self.error_frame(&error)),
        };
        let action = message.action();
        match self.handle(connection, user, message).await {
            Ok(reply) => reply,
            Err(error) => {
                tracing::error!(%error, action, connection_id = %connection, user = %user, "request failed");
                Reply::only(self.error_frame(&ProtocolError::new(
                    ErrorCode::Internal,
                    "the request could not be completed; try again",
                )))
            }
        }
    }

    /// One parsed client frame from `user` on `connection`.
    pub async fn handle(
        &self,
        connection: &ConnectionId,
        user: &UserId,
        message: ClientMessage,
    ) -> Result<Reply> {
        match message {
            ClientMessage::Heartbeat => Ok(Reply::only(self.pong())),
            ClientMessage::GetState { auction_id } => self
                .get_state(connection, user, &auction_id)
                .await
                .map(Reply::only),
            ClientMessage::Bid {
                auction_id,
                amount,
                bid_id,
            } => {
                self.bid(connection, user, &auction_id, amount, &bid_id)
                    .await
            }
        }
    }

    /// The error frame for a protocol error, in this Region.
    pub fn error_frame(&self, error: &ProtocolError) -> ServerMessage {
        ServerMessage::error(error, &self.region)
    }

    pub fn pong(&self) -> ServerMessage {
        ServerMessage::Pong {
            region: self.region.clone(),
            ts: self.clock.now_ms(),
        }
    }

    /// `getState`: the auction as this Region sees it, and the caller's last bid. Also
    /// subscribes the connection to the auction's updates.
    pub async fn get_state(
        &self,
        connection: &ConnectionId,
        user: &UserId,
        auction_id: &AuctionId,
    ) -> Result<ServerMessage> {
        let Some(auction) = self.find_auction(auction_id).await? else {
            return Ok(self.error_frame(&ProtocolError::new(
                ErrorCode::InvalidField,
                format!("no auction `{auction_id}`"),
            )));
        };
        let (snapshot, last_bid, subscribed) = tokio::join!(
            self.store.snapshot(auction_id),
            self.store.last_bid(user, auction_id),
            self.connections
                .subscribe(connection, user, auction_id, self.clock.now_ms()),
        );
        subscribed?;
        Ok(ServerMessage::State {
            region: self.region.clone(),
            auction: snapshot?.view(&auction),
            you: YouView {
                user_id: user.as_str().to_owned(),
                last_bid: last_bid?.map(|b| b.view()),
            },
        })
    }

    /// `bid`: idempotent by `bid_id`. Check order matters: a replay of a recorded bid must
    /// answer `duplicate` even if the auction has since moved past its amount.
    pub async fn bid(
        &self,
        connection: &ConnectionId,
        user: &UserId,
        auction_id: &AuctionId,
        amount: Amount,
        bid_id: &BidId,
    ) -> Result<Reply> {
        let now = self.clock.now_ms();
        let candidate = BidRecord {
            auction_id: auction_id.clone(),
            bid_id: bid_id.clone(),
            bidder: user.clone(),
            amount,
            at: now,
            region: self.region.clone(),
        };
        let Some(auction) = self.find_auction(auction_id).await? else {
            return Ok(self.bid_result(bid_id, Err(BidReason::UnknownAuction)));
        };
        if let Some(existing) = self.store.bid(auction_id, bid_id).await? {
            return Ok(self.replay_result(&candidate, &existing));
        }
        if !auction.is_open(now) {
            return Ok(self.bid_result(bid_id, Err(BidReason::AuctionClosed)));
        }
        let before = self.store.snapshot(auction_id).await?;
        if amount.get() < auction.minimum_next_bid(before.high_bid.as_ref()) {
            let reason = if before.high_bid.is_none() {
                BidReason::BelowStartingPrice
            } else {
                BidReason::TooLow
            };
            return Ok(self.bid_result(bid_id, Err(reason)));
        }
        match self.store.insert_bid(&candidate).await? {
            InsertOutcome::Exists(existing) => Ok(self.replay_result(&candidate, &existing)),
            InsertOutcome::Inserted => {
                self.store
                    .record_last_bid(user, auction_id, &UserBid::from(&candidate))
                    .await?;
                let fanout = self.announce(connection, auction_id).await?;
                Ok(Reply {
                    message: self.bid_result(bid_id, Ok(BidStatus::Accepted)).message,
                    fanout: Some(fanout),
                })
            }
        }
    }

    /// Push the auction's new state to its other subscribers.
    async fn announce(
        &self,
        sender: &ConnectionId,
        auction_id: &AuctionId,
    ) -> Result<FanoutReport> {
        let now = self.clock.now_ms();
        let (snapshot, subscribers) = tokio::join!(
            self.store.snapshot(auction_id),
            self.connections.subscribers(auction_id, now),
        );
        let snapshot = snapshot?;
        let targets: Vec<ConnectionId> = subscribers?.into_iter().filter(|c| c != sender).collect();
        let frame = ServerMessage::BidUpdate {
            region: self.region.clone(),
            auction_id: auction_id.clone(),
            high_bid: snapshot.high_bid.as_ref().map(BidRecord::view),
            bid_count: snapshot.bid_count,
            version: snapshot.bid_count,
        }
        .to_json();
        Ok(broadcast(
            &self.notifier,
            &self.connections,
            &targets,
            frame.as_bytes(),
            &self.fanout,
        )
        .await)
    }

    fn replay_result(&self, candidate: &BidRecord, existing: &BidRecord) -> Reply {
        if existing.is_same_bid(candidate) {
            self.bid_result(&candidate.bid_id, Ok(BidStatus::Duplicate))
        } else {
            self.bid_result(&candidate.bid_id, Err(BidReason::BidIdReused))
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
