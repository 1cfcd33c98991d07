//! Server to client frames. Every frame names the Region that served it.

use crate::digest::Digest;
use crate::error::{ErrorCode, ProtocolError};
use crate::ids::{Amount, AuctionId, BidId, OpId, Topic};
use serde::{Deserialize, Serialize};

/// The `message` API Gateway sends, on a socket it keeps open, when the Lambda integration
/// fails or is throttled: `{"message": "Internal server error", "connectionId": .., "requestId": ..}`.
pub const GATEWAY_INTERNAL_ERROR: &str = "Internal server error";

/// The current high bid of an auction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HighBidView {
    pub amount: Amount,
    pub bidder: String,
    pub bid_id: BidId,
    /// Milliseconds since the Unix epoch at which the accepting Region took the bid.
    pub at: u64,
}

/// How many bids each Region has accepted in an auction, as the serving Region has seen them:
/// a version vector. Each Region's count only grows, so view `a` is at least as fresh as view
/// `b` exactly when every count of `a` is >= the same count of `b` ([`Versions::dominates`]).
pub type Versions = std::collections::BTreeMap<String, u64>;

/// Whether `a` has seen everything `b` has (every Region's count at least as high).
pub fn dominates(a: &Versions, b: &Versions) -> bool {
    b.iter()
        .all(|(region, count)| a.get(region).copied().unwrap_or(0) >= *count)
}

/// Fold `other` into `into`: each Region's count becomes the larger of the two (the least
/// view that has seen both).
pub fn merge_versions(into: &mut Versions, other: &Versions) {
    for (region, count) in other {
        let slot = into.entry(region.clone()).or_insert(0);
        *slot = (*slot).max(*count);
    }
}

impl HighBidView {
    /// Whether `self` is the higher bid of the two, by the order the server picks the high
    /// bid with (higher amount; then the earlier copy; then bidder, then bidId, the smaller
    /// first). High bids are max registers: merging two views of one auction keeps the
    /// higher, whichever arrived last.
    pub fn outranks(&self, other: &HighBidView) -> bool {
        self.amount
            .cmp(&other.amount)
            .then_with(|| other.at.cmp(&self.at))
            .then_with(|| other.bidder.cmp(&self.bidder))
            .then_with(|| other.bid_id.cmp(&self.bid_id))
            == std::cmp::Ordering::Greater
    }
}

/// The higher of two optional high bids (see [`HighBidView::outranks`]).
pub fn higher_bid(a: Option<HighBidView>, b: Option<HighBidView>) -> Option<HighBidView> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b.outranks(&a) { b } else { a }),
        (a, None) => a,
        (None, b) => b,
    }
}

/// An auction as a client sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuctionView {
    pub id: AuctionId,
    pub item: String,
    pub high_bid: Option<HighBidView>,
    /// Bids accepted, summed over the Regions (a bid accepted in both Regions during a split,
    /// a replay, counts once per Region).
    pub bid_count: u64,
    /// The sum of `versions`. Only grows within one Region; across Regions compare `versions`.
    pub version: u64,
    /// Accepted bids per Region (a version vector): see [`dominates`].
    #[serde(default)]
    pub versions: Versions,
    /// The auction's rules, for a bid form: the first bid must be at least `startingPrice`,
    /// a later one must beat the high bid by at least `minIncrement` (see
    /// [`minimum_next_bid`]). Absent from servers that predate them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starting_price: Option<Amount>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_increment: Option<u64>,
    /// The smallest amount the serving Region would accept when it sent this view (its rules
    /// on the high bid it held). After a `bidUpdate`, [`AuctionView::minimum_next_bid`] gives
    /// it for the merged view.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_next_bid: Option<Amount>,
}

impl AuctionView {
    /// The smallest amount that can win against the high bid this view shows, by the
    /// auction's rules; `None` when the server sent no rules (or nothing can beat it).
    pub fn minimum_next_bid(&self) -> Option<Amount> {
        let high = self.high_bid.as_ref().map(|h| h.amount);
        minimum_next_bid(self.starting_price?, self.min_increment?, high)
    }
}

/// The acceptance rule's floor, the one rule the server decides bids with: with no high bid
/// the starting price, else the high bid plus the increment (at least 1); `None` when no
/// amount within the protocol's limit can beat the high bid.
pub fn minimum_next_bid(
    starting_price: Amount,
    min_increment: u64,
    high: Option<Amount>,
) -> Option<Amount> {
    let floor = match high {
        None => starting_price.get(),
        Some(h) => h.get().saturating_add(min_increment.max(1)),
    };
    Amount::new(floor).ok()
}

/// The caller's own last bid in an auction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastBidView {
    pub amount: Amount,
    pub bid_id: BidId,
    pub at: u64,
}

/// One of the caller's own standing bids.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnBidView {
    pub bid_id: BidId,
    pub amount: Amount,
    /// When the first Region that recorded it took it (ms since the epoch).
    pub at: u64,
    /// The Region(s) whose copy the serving Region holds.
    pub regions: Vec<String>,
}

/// The caller as the server knows them (from the token's `sub`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct YouView {
    pub user_id: String,
    /// The caller's latest standing bid (by `at`), derived from `bids`.
    pub last_bid: Option<LastBidView>,
    /// The caller's standing bids in this auction as the serving Region holds them, at most
    /// [`crate::limits::OWN_BIDS_MAX`], newest first: a client settles its uncertain bids
    /// against this list.
    #[serde(default)]
    pub bids: Vec<OwnBidView>,
    /// The answer for each bidId the `getState` named (`bidIds`), in that order: whether the
    /// serving Region holds a copy of that bid of the caller's. Absent when none was named.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settled: Vec<SettledBidView>,
}

/// One op of any app as a Region holds it: one Region's copy (in a `topicState` or a
/// `topicUpdate`). Copies of one op (its author's op id) accepted in two Regions are two
/// entries, one per Region: a client shows the op once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpView {
    pub author: String,
    pub op_id: OpId,
    /// The Region that accepted this copy.
    pub region: String,
    /// The copy's place in its log: the count of `log` with it (a Region's, or strong mode's
    /// `global`); gapless per log as written.
    pub position: u64,
    /// The log the position is in (a key of `versions`).
    pub log: String,
    /// Milliseconds since the Unix epoch at which the accepting Region took it.
    pub at: u64,
    pub digest: Digest,
    pub op: serde_json::Value,
}

/// The caller's part of a `topicState`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicYouView {
    pub user_id: String,
    /// The caller's newest ops in the topic this Region holds (copies), newest first.
    #[serde(default)]
    pub ops: Vec<OpView>,
    /// The answer for each op id the `getState` named (`opIds`), in that order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settled: Vec<SettledOpView>,
}

/// Whether one op the client asked about stands, by a point read of its copies: it stands
/// with the client's payload when a copy has the digest the client computed of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SettledOpView {
    pub op_id: OpId,
    /// The serving Region holds a copy (false is final in strong mode only).
    pub stands: bool,
    /// Each copy it holds: its Region and the digest of its payload.
    #[serde(default)]
    pub copies: Vec<SettledOpCopyView>,
}

/// One copy of a settled op.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SettledOpCopyView {
    pub region: String,
    pub digest: Digest,
}

/// Whether one bid the client asked about stands, by a point read of its copies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SettledBidView {
    pub bid_id: BidId,
    /// The serving Region holds a copy of this bid (its own or a replicated one). `false`
    /// is final in strong mode; in eventual mode a copy accepted elsewhere may still be on
    /// its way (docs/PROTOCOL.md).
    pub stands: bool,
    /// The amount of the standing bid when every copy has the same one (compare it with the
    /// amount sent: a different one means the bidId was used for another bid). Absent when
    /// copies disagree (a bidId reused with two amounts, one accepted in each Region during
    /// a split): then read `copies`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<Amount>,
    /// The Regions whose copy the serving Region holds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub regions: Vec<String>,
    /// Each copy the serving Region holds, with its own Region and amount (one per Region).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub copies: Vec<SettledCopyView>,
}

impl SettledBidView {
    /// A copy of this bid with this amount stands (in the Region it names).
    pub fn stands_with(&self, amount: Amount) -> bool {
        self.stands
            && (self.copies.iter().any(|c| c.amount == amount)
                || (self.copies.is_empty() && self.amount == Some(amount)))
    }
}

/// One copy of a settled bid: the Region that accepted it and the amount it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SettledCopyView {
    pub region: String,
    pub amount: Amount,
}

/// What the server did with a bid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BidStatus {
    /// Recorded now.
    Accepted,
    /// This bidId was recorded before (a replay); nothing changed.
    Duplicate,
    /// Not recorded; `reason` says why. Final for this Region's copy only: a replayed bid
    /// may already stand in another Region (see `YouView::bids`).
    Rejected,
    /// The Region could not tell whether it recorded the bid (a store failure during the
    /// write). Replaying it with the same bidId is safe; `getState` tells if it stands.
    Unknown,
    /// Strong mode only: this Region cannot decide bids now (cut off from the table's
    /// quorum; `reason` is `no_quorum`). Not a rejection: nothing was decided here. Send the
    /// same bid, same bidId, to another Region; it answers as if this one was never asked.
    Redirect,
}

/// A `writeResult`'s status: the statuses of a bid's answer, for any app's op.
pub type WriteStatus = BidStatus;

/// A frame the server sends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ServerMessage {
    #[serde(rename_all = "camelCase")]
    Pong {
        region: String,
        ts: u64,
        /// The herd hint, as in `state`: refreshed on every heartbeat so that a client that
        /// connected when the Region was quiet learns how many it would be sharing a
        /// reconnect with. Absent when unknown.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        herd_window_ms: Option<u64>,
        /// The auction the heartbeat named (`auctionId`), echoed with its version vector as
        /// this Region sees it: a client whose view does not dominate it resyncs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        auction_id: Option<AuctionId>,
        /// The topic the heartbeat named (`topic`), echoed with its version vector.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        topic: Option<Topic>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        versions: Option<Versions>,
    },
    /// The answer to `getState` naming a `topic` (any app's): the topic as this Region holds
    /// it. `view` is the app's (a function of every Region's summary); `ops` are the ops of a
    /// topic whose every op counts (a chat room): past the `since` the client sent, or the
    /// newest ones; empty for a topic that shows its latest state only (the auction).
    /// `complete` is false when `ops` leave a hole: a log this Region counts further than the
    /// copies it holds (replication delivers items in no order; a Region lost for good may
    /// never deliver them) or more ops than one answer carries; ask again from the
    /// positions held (`since`), and tell the user of a gap that stays.
    #[serde(rename_all = "camelCase")]
    TopicState {
        region: String,
        topic: Topic,
        versions: Versions,
        view: serde_json::Value,
        #[serde(default)]
        ops: Vec<OpView>,
        complete: bool,
        you: TopicYouView,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        herd_window_ms: Option<u64>,
    },
    /// Pushed to a topic's subscribers when any Region's summary of it changed (the
    /// `topicState` fields without `you`): the view and, for a topic whose every op counts,
    /// each log's newest ops. A client that sees a position it lacks below them asks
    /// `getState` with `since`.
    #[serde(rename_all = "camelCase")]
    TopicUpdate {
        region: String,
        topic: Topic,
        versions: Versions,
        view: serde_json::Value,
        #[serde(default)]
        ops: Vec<OpView>,
    },
    #[serde(rename_all = "camelCase")]
    State {
        region: String,
        auction: AuctionView,
        you: YouView,
        /// The herd hint: if this connection is lost together with the rest of the Region's,
        /// spread the first reconnect uniformly over this many ms (the Region's connections
        /// over the other Region's new-connection quota). Absent when the server does not
        /// know its head count.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        herd_window_ms: Option<u64>,
    },
    #[serde(rename_all = "camelCase")]
    BidResult {
        bid_id: BidId,
        status: BidStatus,
        reason: Option<String>,
        region: String,
    },
    /// The answer to a `write` (the kit's envelope): the same statuses as a bid's, for the
    /// op id; `reason` names a rejection (`unknown_topic`, `op_id_reused`, `forbidden`, or
    /// the app's own) or why an `unknown` was not decided (`unavailable`).
    #[serde(rename_all = "camelCase")]
    WriteResult {
        op_id: OpId,
        status: WriteStatus,
        reason: Option<String>,
        region: String,
    },
    /// Pushed to an auction's connections after a bid accepted in this Region (to the
    /// others) or one that arrived by replication (to everyone).
    #[serde(rename_all = "camelCase")]
    BidUpdate {
        region: String,
        auction_id: AuctionId,
        high_bid: Option<HighBidView>,
        bid_count: u64,
        version: u64,
        #[serde(default)]
        versions: Versions,
    },
    Error {
        code: ErrorCode,
        message: String,
        region: String,
    },
    /// The server asks the client to leave this Region for `to` (a planned evacuation, or a
    /// failover decided outside this Region): reconnect at a uniformly random moment within
    /// `windowMs` after waiting `afterMs` (the client's slot in the herd), to `endpoint` (a Region's own endpoint the client already knows) or, when
    /// absent, to the Region's endpoint the client knows or else the global name; then
    /// resync and replay as after any reconnect. A client ignores a destination it does not
    /// already know, and old clients ignore the frame (unknown types are ignored).
    #[serde(rename_all = "camelCase")]
    MoveTo {
        region: String,
        to: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        endpoint: Option<String>,
        window_ms: u64,
        /// How long to wait before the window opens: the evacuation gives each group of
        /// clients its own slot, so the herd arrives at the destination's quota however fast
        /// the frames went out. Absent = 0.
        #[serde(default, skip_serializing_if = "is_zero")]
        after_ms: u64,
        #[serde(default)]
        reason: String,
    },
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

impl ServerMessage {
    /// The Region named in the frame.
    pub fn region(&self) -> &str {
        match self {
            ServerMessage::Pong { region, .. }
            | ServerMessage::TopicState { region, .. }
            | ServerMessage::TopicUpdate { region, .. }
            | ServerMessage::State { region, .. }
            | ServerMessage::BidResult { region, .. }
            | ServerMessage::WriteResult { region, .. }
            | ServerMessage::BidUpdate { region, .. }
            | ServerMessage::Error { region, .. }
            | ServerMessage::MoveTo { region, .. } => region,
        }
    }

    /// A frame the server sends of its own accord (a push, a move order), never as the answer
    /// to a request: whoever waits for an answer skips it.
    pub fn is_unsolicited(&self) -> bool {
        matches!(
            self,
            ServerMessage::BidUpdate { .. }
                | ServerMessage::TopicUpdate { .. }
                | ServerMessage::MoveTo { .. }
        )
    }

    /// The frame as JSON text. Infallible for these types (string keys, no floats).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// An error frame.
    pub fn error(error: &ProtocolError, region: &str) -> Self {
        ServerMessage::Error {
            code: error.code,
            message: error.message.clone(),
            region: region.to_owned(),
        }
    }
}

/// Anything a client may receive: one of our frames, or API Gateway's own error frame.
#[derive(Debug, Clone, PartialEq, Eq)]
// One frame at a time is parsed and matched at once: boxing the common variant would cost an
// allocation per frame to save stack space nobody is short of.
#[allow(clippy::large_enum_variant)]
pub enum ServerFrame {
    Message(ServerMessage),
    /// API Gateway answered instead of our Lambda (integration failed or throttled).
    GatewayError {
        message: String,
    },
}

/// Parse a frame received by a client. Total, like the client-side parser.
pub fn parse_server_frame(text: &str) -> Result<ServerFrame, ProtocolError> {
    #[derive(Deserialize)]
    struct GatewayFrame {
        message: String,
    }
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|_| ProtocolError::bad_json("frame is not valid JSON"))?;
    if value.get("type").is_some() {
        return serde_json::from_value(value)
            .map(ServerFrame::Message)
            .map_err(|e| ProtocolError::invalid_field(format!("unexpected frame: {e}")));
    }
    serde_json::from_value::<GatewayFrame>(value)
        .map(|g| ServerFrame::GatewayError { message: g.message })
        .map_err(|_| ProtocolError::invalid_field("frame has neither `type` nor `message`"))
}
