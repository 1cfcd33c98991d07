//! The reconnecting auction client: one background task per client, driven by commands
//! (bid, close) and reporting [`Event`]s. See docs/CLIENT.md for the state machine.

use crate::backoff::Backoff;
use crate::fallback::{Decision, EndpointPolicy, Fallback, ProbeResult, Target};
use crate::heartbeat::{Broken, Heartbeat};
use crate::moves::{Destination, MoveOrder, MoveRequest};
use crate::ops::{Answered, Op, OpBook, Settled};
use crate::topics::{Answer, TopicLog};
use crate::transport::{connect, ConnectError, ConnectOptions, TokenPlacement, WsStream};
use futures::future::BoxFuture;
use futures::{SinkExt, StreamExt};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::error::ProtocolError;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use wsdr_protocol::{
    bid_digest, dominates, higher_bid, merge_versions, parse_server_frame, Amount, AuctionId,
    AuctionView, BidId, BidStatus, ClientMessage, Digest, ErrorCode, HighBidView, OpId, OpView,
    ServerFrame, ServerMessage, Topic, TopicYouView, Versions, YouView,
};

/// The client's view of one auction: the least view that has seen every frame it got.
/// Versions are per-Region counters and the high bid a max register, so two views merge
/// element-wise, in any order, to the same result: a push that arrives late cannot take the
/// view backwards, and two incomparable pushes combine instead of replacing each other.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct AuctionViewState {
    versions: Versions,
    high: Option<HighBidView>,
}

impl AuctionViewState {
    /// Fold a pushed view in; returns whether anything changed.
    fn merge(&mut self, versions: &Versions, high: Option<&HighBidView>) -> bool {
        let before = self.clone();
        merge_versions(&mut self.versions, versions);
        self.high = higher_bid(self.high.take(), high.cloned());
        *self != before
    }
}

/// Why a [`TokenProvider`] has no token.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Worth trying again later (the identity provider unreachable, a timeout): the client
    /// retries with its backoff, as after a failed connect.
    #[error("no token for now: {0}")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// No token will come (the user signed out, the session was revoked): the client gives up
    /// ([`Event::GaveUp`]) instead of retrying forever.
    #[error("no token: {0}")]
    Denied(String),
}

/// Supplies a token for every (re)connect. `refresh` is true after the server refused the
/// previous token (401/403): return a *new* one, or the client gives up rather than loop.
pub trait TokenProvider: Send + Sync {
    /// A token for the next connect; `refresh`: the last one was refused, a new one is due.
    fn token(&self, refresh: bool) -> BoxFuture<'_, Result<String, TokenError>>;
}

/// A fixed token (tests, long-lived service credentials).
#[derive(Debug, Clone)]
pub struct StaticToken(pub String);

impl TokenProvider for StaticToken {
    fn token(&self, _refresh: bool) -> BoxFuture<'_, Result<String, TokenError>> {
        Box::pin(async move { Ok(self.0.clone()) })
    }
}

/// A token provider from an async closure: `TokenFn(|refresh| async move { ... })`, or through
/// [`ClientBuilder::token_fn`].
pub struct TokenFn<F>(pub F);

impl<F> std::fmt::Debug for TokenFn<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenFn(..)")
    }
}

impl<F, Fut> TokenProvider for TokenFn<F>
where
    F: Fn(bool) -> Fut + Send + Sync,
    Fut: std::future::Future<Output = Result<String, TokenError>> + Send + 'static,
{
    fn token(&self, refresh: bool) -> BoxFuture<'_, Result<String, TokenError>> {
        Box::pin((self.0)(refresh))
    }
}

/// Milliseconds of wall-clock time. The client's timers run on the monotonic clock, which on
/// most systems stops while a laptop sleeps; the wall clock does not, and is how a client
/// waking up notices that its socket has been silent for far longer than it thought.
pub trait WallClock: Send + Sync {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemWallClock;

impl WallClock for SystemWallClock {
    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }
}

/// What happens to a bid made while disconnected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OfflineBids {
    /// Keep up to `max` bids; send them after the next resync unless older than `max_age`
    /// (a stale bid is dropped with [`Event::BidExpired`], never sent late).
    Queue {
        /// Most bids kept while offline; one more is refused with [`ClientError::QueueFull`].
        max: usize,
        /// Oldest a queued bid may be when it is finally sent.
        max_age: Duration,
    },
    /// Refuse at once with [`ClientError::NotConnected`].
    Reject,
}

impl Default for OfflineBids {
    fn default() -> Self {
        OfflineBids::Queue {
            max: 16,
            max_age: Duration::from_secs(30),
        }
    }
}

/// Why a session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
// New variants and settings are additions, not breaking changes: match with a `_` arm.
#[non_exhaustive]
pub enum DisconnectReason {
    /// `threshold` consecutive heartbeats were answered with something other than a pong
    /// (API Gateway's internal-error frame, our `internal` error) or not answered.
    HeartbeatFailures(u32),
    /// Nothing at all was received for the heartbeat timeout.
    Silent,
    /// The server closed the socket (code, if it sent a close frame).
    Closed {
        /// The close frame's code (1000 and 1001 are clean: not a failure).
        code: Option<u16>,
    },
    /// The connection could not be opened.
    ConnectFailed(ConnectError),
    /// The socket failed.
    Error(String),
    /// The application closed the client.
    ClientClosed,
    /// Client-assisted failover: the global name has been healthy long enough, so the
    /// client leaves its fallback Region for it (docs/CLIENT.md).
    Returning,
    /// The server asked the client to move to another Region (`moveTo`), and it did.
    Moved {
        /// The Region moved to.
        to: String,
    },
    /// Strong mode: the Region could not reach its table's quorum (a `redirect` bid answer
    /// or a `no_quorum` error): the client goes to another Region and resends its
    /// unanswered bids there (same bidIds).
    Redirected {
        /// The Region that could not reach its quorum.
        from: String,
    },
    /// The token provider failed for now ([`TokenError::Unavailable`]): retried with the
    /// backoff.
    TokenUnavailable(String),
}

impl From<Broken> for DisconnectReason {
    fn from(broken: Broken) -> Self {
        match broken {
            Broken::Failures(n) => DisconnectReason::HeartbeatFailures(n),
            Broken::Silent => DisconnectReason::Silent,
        }
    }
}

impl DisconnectReason {
    /// Its number (`conformance/reason_codes.json`, the same in the browser client).
    pub fn code(&self) -> crate::ReasonCode {
        use crate::ReasonCode as C;
        match self {
            DisconnectReason::HeartbeatFailures(_) => C::HeartbeatFailures,
            DisconnectReason::Silent => C::Silent,
            DisconnectReason::Closed { .. } => C::ServerClosed,
            DisconnectReason::ConnectFailed(ConnectError::Timeout(_)) => C::ConnectTimeout,
            DisconnectReason::ConnectFailed(_) => C::ConnectFailed,
            DisconnectReason::Error(_) => C::SocketError,
            DisconnectReason::ClientClosed => C::ClientClosed,
            DisconnectReason::Returning => C::Returning,
            DisconnectReason::Moved { .. } => C::Moved,
            DisconnectReason::Redirected { .. } => C::Redirected,
            DisconnectReason::TokenUnavailable(_) => C::TokenUnavailable,
        }
    }

    /// Whether this end counts against the endpoint in the fallback policy: a broken
    /// session or a failed connect. A clean close, a 429 (the quota of a healthy Region)
    /// or a refused token say nothing about the Region's health.
    fn counts_as_failure(&self) -> bool {
        match self {
            DisconnectReason::HeartbeatFailures(_)
            | DisconnectReason::Silent
            | DisconnectReason::Error(_)
            | DisconnectReason::TokenUnavailable(_) => true,
            DisconnectReason::Closed { code } => !matches!(code, Some(1000 | 1001)),
            DisconnectReason::ConnectFailed(error) => !matches!(
                error,
                ConnectError::Refused {
                    status: 401 | 403 | 429
                }
            ),
            DisconnectReason::ClientClosed
            | DisconnectReason::Returning
            | DisconnectReason::Moved { .. }
            | DisconnectReason::Redirected { .. } => false,
        }
    }
}

/// What the client tells the application.
#[derive(Debug, Clone, PartialEq, Eq)]
// New variants and settings are additions, not breaking changes: match with a `_` arm.
#[non_exhaustive]
pub enum Event {
    /// A connect is starting (before the token is asked for).
    Connecting {
        /// Failed attempts since the last stable session (0 on the first).
        attempt: u32,
    },
    /// The first frame of a session named the serving Region.
    Connected {
        /// The Region serving this session.
        region: String,
    },
    /// The answer to the `getState` sent after a (re)connect. `outage` is the time since the
    /// connection was lost (None on the first connect).
    StateRestored {
        /// The Region that answered.
        region: String,
        /// The auction as that Region sees it: replace the view with it.
        auction: AuctionView,
        /// The user's own bids there, and the settlement of those the request named.
        you: YouView,
        /// How long the user was without a session.
        outage: Option<Duration>,
    },
    /// A pushed update of a subscribed auction. Pushes older than the view the client
    /// already has (its `versions` dominated by the last view's) are not reported.
    StateUpdated {
        /// The Region that pushed it.
        region: String,
        /// The auction it is about.
        auction_id: AuctionId,
        /// The high bid of the merged view.
        high_bid: Option<HighBidView>,
        /// Bids in the merged view (the sum of `versions`).
        bid_count: u64,
        /// The same sum (kept for older readers).
        version: u64,
        /// The merged version vector: each Region's count, only ever growing.
        versions: Versions,
    },
    /// The server's answer to one of this client's bids (docs/PROTOCOL.md, `bidResult`).
    BidResult {
        /// The bid answered.
        bid_id: BidId,
        /// `accepted` and `duplicate` stand; `rejected` is final for a bid sent once;
        /// `unknown` is settled later ([`Event::BidSettled`]).
        status: BidStatus,
        /// Why, for `rejected`, `unknown` and `redirect`.
        reason: Option<String>,
        /// The Region that answered.
        region: String,
    },
    /// The final word on a bid whose [`Event::BidResult`] could not be: a replay rejected by a
    /// Region that had not seen the first copy, or an `unknown` answer. `stands: true` once a
    /// `state` lists it among the user's bids (or it is the high bid); `stands: false` if it
    /// was not seen within [`ClientConfig::settle_window`].
    BidSettled {
        /// The bid settled.
        bid_id: BidId,
        /// Whether it stands.
        stands: bool,
        /// The Region whose answer settled it (none when the settle window ran out).
        region: Option<String>,
    },
    /// A queued offline bid outlived `max_age` and was dropped unsent.
    BidExpired {
        /// The bid dropped.
        bid_id: BidId,
    },
    /// The answer to the `getState` of a joined topic (any app's; docs/PROTOCOL.md,
    /// `topicState`), after a (re)connect or a hole.
    TopicRestored {
        /// The Region that answered.
        region: String,
        /// The topic.
        topic: Topic,
        /// The server's counts per log (each the highest the client heard).
        versions: Versions,
        /// The app's view.
        view: serde_json::Value,
        /// Op copies the client did not hold before (every app keeps its own list: the chat
        /// room's order is `wsdr_chat::conversation` over all of them).
        added: Vec<OpView>,
        /// Whether the answer reached the server's counts without a hole.
        complete: bool,
        /// How long the user was without a session (first answer after a reconnect only).
        outage: Option<Duration>,
    },
    /// A push of a joined topic (`topicUpdate`) that brought copies not held.
    TopicUpdated {
        /// The Region that pushed it.
        region: String,
        /// The topic.
        topic: Topic,
        /// The server's counts per log (each the highest the client heard).
        versions: Versions,
        /// The app's view.
        view: serde_json::Value,
        /// Op copies the client did not hold before.
        added: Vec<OpView>,
    },
    /// A joined topic has a hole the serving Region cannot fill now: copies it counts but
    /// does not hold (lost with a Region that never returns, or not replicated yet). Said
    /// once per hole; the client asks again when the Region's counts move. Show it: "some
    /// messages may be missing".
    Discontinuity {
        /// The Region that answered.
        region: String,
        /// The topic.
        topic: Topic,
        /// Per log, the highest position up to which the client holds every copy.
        held_to: Versions,
        /// The serving Region's counts.
        versions: Versions,
    },
    /// The server's answer to one of this client's writes (`writeResult`).
    WriteResult {
        /// The write answered.
        op_id: OpId,
        /// As [`Event::BidResult`]'s.
        status: BidStatus,
        /// Why, for `rejected`, `unknown` and `redirect`.
        reason: Option<String>,
        /// The Region that answered.
        region: String,
    },
    /// The final word on a write whose [`Event::WriteResult`] could not be (as
    /// [`Event::BidSettled`]).
    WriteSettled {
        /// The write settled.
        op_id: OpId,
        /// Whether a copy of it, with its payload, stands.
        stands: bool,
        /// The Region whose answer settled it (none when the settle window ran out).
        region: Option<String>,
    },
    /// A write queued offline outlived `max_age` and was dropped unsent.
    WriteExpired {
        /// The write dropped.
        op_id: OpId,
    },
    /// A session ended (or a connect failed).
    Disconnected {
        /// Why.
        reason: DisconnectReason,
    },
    /// The next connect is due after `delay` (full-jitter backoff, docs/CLIENT.md).
    Reconnecting {
        /// The attempt about to be made.
        attempt: u32,
        /// How long the client waits first.
        delay: Duration,
    },
    /// The client stopped for good: `max_attempts` ran out, or no token will come.
    #[non_exhaustive]
    GaveUp {
        /// Why, for people.
        reason: String,
        /// Why, as a number ([`crate::ReasonCode::AttemptsExhausted`] or
        /// [`crate::ReasonCode::TokenDenied`]).
        code: crate::ReasonCode,
    },
    /// The server asked this client to move (`moveTo`) and it will, after `after`: the
    /// session then ends with [`DisconnectReason::Moved`] and the client reconnects at once.
    MoveScheduled {
        /// The Region the client will move to.
        to: String,
        /// When, from now: its slot in the herd.
        after: Duration,
        /// The server's reason (`failover`, `maintenance`, ...).
        reason: String,
    },
    /// Client-assisted failover or a server-directed move sent the next connect to another
    /// endpoint: a Region's own endpoint, or back to the global name.
    EndpointChanged {
        /// The URL the next connect uses.
        url: String,
        /// Whether it is one Region's own endpoint (else the global name).
        regional: bool,
        /// Why it changed.
        reason: String,
    },
}

/// Why a command could not be carried out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
// New variants and settings are additions, not breaking changes: match with a `_` arm.
#[non_exhaustive]
pub enum ClientError {
    /// Offline, and [`OfflineBids::Reject`] is the policy.
    #[error("not connected, and offline bids are rejected")]
    NotConnected,
    /// Offline, and [`OfflineBids::Queue`]'s `max` bids are already waiting.
    #[error("the offline bid queue is full")]
    QueueFull,
    /// The client was closed or gave up.
    #[error("the client has stopped")]
    Stopped,
    /// A write's op has no canonical JSON form (a fraction, an integer past 2^53 - 1): no
    /// server takes it, and two sides could not agree on its digest.
    #[error("the op cannot be written: {0}")]
    InvalidOp(String),
}

/// Every setting of a client. Defaults follow the reference design (docs/CLIENT.md).
#[derive(Clone)]
// New variants and settings are additions, not breaking changes: match with a `_` arm.
#[non_exhaustive]
pub struct ClientConfig {
    /// The global name (`wss://auction.example.com`), or one Region's URL.
    pub url: String,
    /// Asked for a token at every (re)connect.
    pub token_provider: Arc<dyn TokenProvider>,
    /// Where the token travels: query string (default) or subprotocol.
    pub placement: TokenPlacement,
    /// How often a heartbeat goes out (default 30 s).
    pub heartbeat_interval: Duration,
    /// Silence after which the socket is presumed dead (default 35 s).
    pub heartbeat_timeout: Duration,
    /// Failed heartbeat rounds in a row that break the session (default 2).
    pub failure_threshold: u32,
    /// The reconnect backoff (full jitter, base 2 s, cap 20 s, herd hint honoured).
    pub backoff: Backoff,
    /// Reconnects before giving up ([`Event::GaveUp`]); `None`: never give up.
    pub max_attempts: Option<u32>,
    /// A session this long resets the attempt count (and so the backoff window).
    pub stable_after: Duration,
    /// How long a connect (TCP, TLS, upgrade) may take.
    pub connect_timeout: Duration,
    /// The auctions whose state is fetched after every (re)connect and whose versions the
    /// heartbeats carry.
    pub auctions: Vec<AuctionId>,
    /// The topics of any app whose every op this client holds (a chat room): fetched after
    /// every (re)connect from the positions held, their versions in the heartbeats.
    pub topics: Vec<Topic>,
    /// What happens to bids (and writes) made while offline.
    pub offline_bids: OfflineBids,
    /// Seed of the client's random draws (backoff, bid ids, moves); `None`: from the OS.
    pub seed: Option<u64>,
    /// The wall clock, beside the monotonic one (a machine that slept).
    pub wall_clock: Arc<dyn WallClock>,
    /// Chooses the URL at every connect (default: always `url`). Lets a test or a benchmark
    /// stand in for DNS, and lets an app rotate endpoints.
    pub url_provider: Option<Arc<dyn Fn() -> String + Send + Sync>>,
    /// Client-assisted failover (off by default: DNS alone decides).
    pub fallback: Option<Fallback>,
    /// How long an uncertain bid is watched for (re-read with `getState` at every heartbeat)
    /// before it is settled as not standing.
    pub settle_window: Duration,
    /// Where connections go: TCP (default), or a simulation's in-memory network.
    #[cfg(feature = "simulation")]
    pub network: wsdr_net::Network,
    /// Divides every duration above when the client starts (default 1: real time). A lab
    /// run at time scale 20 compresses AWS's minutes twentyfold; its clients must too.
    pub time_scale: f64,
}

impl ClientConfig {
    /// This configuration with every duration divided by `time_scale` (which becomes 1). A
    /// connect timeout is not scaled below 500 ms (a handshake takes real time), unless it
    /// was set lower.
    pub fn scaled(mut self) -> Self {
        let factor = self.time_scale;
        if !(factor.is_finite() && factor > 0.0) || factor == 1.0 {
            self.time_scale = 1.0;
            return self;
        }
        let d = |x: Duration| x.div_f64(factor);
        self.heartbeat_interval = d(self.heartbeat_interval);
        self.heartbeat_timeout = d(self.heartbeat_timeout);
        self.backoff = self.backoff.scaled(factor);
        self.stable_after = d(self.stable_after);
        self.connect_timeout =
            d(self.connect_timeout).max(self.connect_timeout.min(Duration::from_millis(500)));
        self.settle_window = d(self.settle_window);
        if let OfflineBids::Queue { max, max_age } = self.offline_bids {
            self.offline_bids = OfflineBids::Queue {
                max,
                max_age: d(max_age),
            };
        }
        self.fallback = self.fallback.map(|f| f.scaled(factor));
        self.time_scale = 1.0;
        self
    }
}

impl std::fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientConfig")
            .field("url", &self.url)
            .field("heartbeat_interval", &self.heartbeat_interval)
            .field("heartbeat_timeout", &self.heartbeat_timeout)
            .field("failure_threshold", &self.failure_threshold)
            .field("backoff", &self.backoff)
            .field("max_attempts", &self.max_attempts)
            .finish_non_exhaustive()
    }
}

/// Builds a [`Client`].
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    config: ClientConfig,
}

impl ClientBuilder {
    /// A client of `url` with the reference design's defaults (docs/CLIENT.md).
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            config: ClientConfig {
                url: url.into(),
                token_provider: Arc::new(StaticToken(String::new())),
                placement: TokenPlacement::QueryString,
                settle_window: Duration::from_secs(120),
                heartbeat_interval: Duration::from_secs(30),
                heartbeat_timeout: Duration::from_secs(35),
                failure_threshold: 2,
                backoff: Backoff::default(),
                max_attempts: None,
                stable_after: Duration::from_secs(30),
                connect_timeout: Duration::from_secs(10),
                auctions: Vec::new(),
                topics: Vec::new(),
                offline_bids: OfflineBids::default(),
                seed: None,
                wall_clock: Arc::new(SystemWallClock),
                url_provider: None,
                fallback: None,
                #[cfg(feature = "simulation")]
                network: wsdr_net::Network::Tcp,
                time_scale: 1.0,
            },
        }
    }

    /// The token source, asked at every (re)connect (default: no token).
    pub fn token_provider(mut self, provider: Arc<dyn TokenProvider>) -> Self {
        self.config.token_provider = provider;
        self
    }
    /// The token provider as an async closure; `refresh` is true after the server refused
    /// the last token (see [`TokenProvider`]).
    pub fn token_fn<F, Fut>(self, provider: F) -> Self
    where
        F: Fn(bool) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<String, TokenError>> + Send + 'static,
    {
        self.token_provider(Arc::new(TokenFn(provider)))
    }
    /// Where the token travels (default: the query string, as API Gateway's authorizer reads it).
    pub fn token_placement(mut self, placement: TokenPlacement) -> Self {
        self.config.placement = placement;
        self
    }
    /// Heartbeat every `interval`; a socket silent for `timeout` is dead.
    pub fn heartbeat(mut self, interval: Duration, timeout: Duration) -> Self {
        self.config.heartbeat_interval = interval.max(Duration::from_millis(1));
        self.config.heartbeat_timeout = timeout;
        self
    }
    /// Failed heartbeat rounds in a row that break the session (default 2).
    pub fn failure_threshold(mut self, threshold: u32) -> Self {
        self.config.failure_threshold = threshold.max(1);
        self
    }
    /// The reconnect backoff.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.config.backoff = backoff;
        self
    }
    /// Give up after `max` failed reconnects (default: never).
    pub fn max_attempts(mut self, max: Option<u32>) -> Self {
        self.config.max_attempts = max;
        self
    }
    /// A session this long resets the backoff (default 30 s).
    pub fn stable_after(mut self, after: Duration) -> Self {
        self.config.stable_after = after;
        self
    }
    /// How long one connect may take (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.config.connect_timeout = timeout;
        self
    }
    /// Watch `auction`: its state after every (re)connect, its versions in the heartbeats.
    pub fn subscribe(mut self, auction: AuctionId) -> Self {
        self.config.auctions.push(auction);
        self
    }
    /// Join `topic` (any app's, every op held: a chat room): its ops after every (re)connect
    /// from the positions held, holes asked for and reported, its versions in the heartbeats.
    pub fn join(mut self, topic: Topic) -> Self {
        if !self.config.topics.contains(&topic) {
            self.config.topics.push(topic);
        }
        self
    }
    /// How long a doubtful bid waits for its settlement (default 120 s).
    pub fn settle_window(mut self, window: Duration) -> Self {
        self.config.settle_window = window;
        self
    }

    /// Queue or refuse bids made while offline (default: queue 16 for 30 s).
    pub fn offline_bids(mut self, policy: OfflineBids) -> Self {
        self.config.offline_bids = policy;
        self
    }
    /// Seed the client's random draws: the same seed, the same backoff, ids and moves.
    pub fn seed(mut self, seed: u64) -> Self {
        self.config.seed = Some(seed);
        self
    }
    /// The wall clock (tests, simulations).
    pub fn wall_clock(mut self, clock: Arc<dyn WallClock>) -> Self {
        self.config.wall_clock = clock;
        self
    }

    /// Choose the URL at every connect (stands in for DNS in tests and benchmarks).
    pub fn url_provider(mut self, provider: Arc<dyn Fn() -> String + Send + Sync>) -> Self {
        self.config.url_provider = Some(provider);
        self
    }

    /// Let the client reach the Regions' own endpoints when the global name's Region keeps
    /// failing (docs/CLIENT.md, "Client-assisted failover").
    pub fn fallback(mut self, fallback: Fallback) -> Self {
        self.config.fallback = Some(fallback);
        self
    }

    /// Connect over `network` instead of the operating system's TCP (the lab's simulations;
    /// feature `simulation`).
    #[cfg(feature = "simulation")]
    pub fn network(mut self, network: wsdr_net::Network) -> Self {
        self.config.network = network;
        self
    }

    /// Run `factor` times faster than real time: every duration (heartbeat, backoff, stable
    /// session, connect timeout, settle window, offline bid age, fallback recheck) is divided
    /// by it when the client starts, whatever order they were set in. For a lab run at
    /// `--time-scale factor`; 1 (the default) is real time.
    pub fn time_scale(mut self, factor: f64) -> Self {
        self.config.time_scale = factor;
        self
    }

    /// The configuration so far (unscaled: [`ClientConfig::scaled`] applies the time scale).
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// Start the client's task. Read the returned events: they are not dropped.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime: the task is spawned onto the runtime `start` is called in
    /// (`#[tokio::main]`, or within `Runtime::block_on`).
    pub fn start(self) -> (Client, mpsc::UnboundedReceiver<Event>) {
        let (runner, client, events) = self.parts();
        tokio::spawn(runner.run());
        (client, events)
    }

    /// The state machine, the application's handle and its events, before anything runs.
    fn parts(mut self) -> (Runner, Client, mpsc::UnboundedReceiver<Event>) {
        self.config = self.config.scaled();
        let (command_tx, command_rx) = mpsc::unbounded_channel();
        let (event_tx, event_rx) = mpsc::unbounded_channel();
        // Two streams from one seed: the runner's (jitter, moves) and the handle's (bid ids),
        // so that a seeded client draws the same ids whatever its timers did.
        let (rng, ids) = match self.config.seed {
            Some(seed) => (
                SmallRng::seed_from_u64(seed),
                SmallRng::seed_from_u64(seed ^ BID_ID_STREAM),
            ),
            None => (SmallRng::from_os_rng(), SmallRng::from_os_rng()),
        };
        let runner = Runner {
            book: OpBook::new(self.config.settle_window, &["bid_id_reused"]),
            writes: OpBook::new(self.config.settle_window, &["op_id_reused"]),
            logs: self
                .config
                .topics
                .iter()
                .map(|topic| (topic.clone(), TopicLog::new(topic.clone())))
                .collect(),
            policy: self.config.fallback.clone().map(EndpointPolicy::new),
            moving: None,
            herd_hint: None,
            config: self.config,
            events: event_tx,
            commands: command_rx,
            rng,
            views: HashMap::new(),
            heartbeats_sent: 0,
            user_id: None,
            resend: Vec::new(),
            redirected_from: None,
            attempt: 0,
            outage_since: None,
            refused_token: None,
        };
        (
            runner,
            Client {
                commands: command_tx,
                ids: Arc::new(std::sync::Mutex::new(ids)),
            },
            event_rx,
        )
    }
}

enum Command {
    Bid {
        auction_id: AuctionId,
        amount: Amount,
        bid_id: BidId,
        reply: oneshot::Sender<Result<BidId, ClientError>>,
    },
    Write {
        topic: Topic,
        op_id: OpId,
        op: serde_json::Value,
        reply: oneshot::Sender<Result<OpId, ClientError>>,
    },
    Resync,
    Close,
}

/// A handle on a running client. Cheap to clone; the task stops on [`Client::close`] or
/// when every handle is dropped.
#[derive(Debug, Clone)]
pub struct Client {
    commands: mpsc::UnboundedSender<Command>,
    /// Where fresh bid ids come from (seeded with the client, else from the OS).
    ids: Arc<std::sync::Mutex<SmallRng>>,
}

/// Mixed into a client's seed for its bid-id stream.
const BID_ID_STREAM: u64 = 0x6269_6469_6473_0001;

impl Client {
    /// Bid with a fresh bid id. `Ok` means sent (or queued while offline); the verdict
    /// arrives as [`Event::BidResult`].
    pub async fn bid(&self, auction_id: AuctionId, amount: Amount) -> Result<BidId, ClientError> {
        let id: u128 = self.ids.lock().unwrap_or_else(|p| p.into_inner()).random();
        let bid_id = BidId::new(format!("{id:032x}")).map_err(|_| ClientError::Stopped)?;
        self.bid_with_id(auction_id, amount, bid_id).await
    }

    /// Bid with a bid id of the caller's choosing.
    pub async fn bid_with_id(
        &self,
        auction_id: AuctionId,
        amount: Amount,
        bid_id: BidId,
    ) -> Result<BidId, ClientError> {
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(Command::Bid {
                auction_id,
                amount,
                bid_id,
                reply,
            })
            .map_err(|_| ClientError::Stopped)?;
        answer.await.map_err(|_| ClientError::Stopped)?
    }

    /// Write `op` to `topic` (any app's) with a fresh op id. `Ok` means sent (or queued while
    /// offline); the verdict arrives as [`Event::WriteResult`]. Replayed with the same op id
    /// after every reconnect until answered, settled like a bid when the answer cannot be
    /// final.
    pub async fn write(&self, topic: Topic, op: serde_json::Value) -> Result<OpId, ClientError> {
        let id: u128 = self.ids.lock().unwrap_or_else(|p| p.into_inner()).random();
        let op_id = OpId::new(format!("{id:032x}")).map_err(|_| ClientError::Stopped)?;
        self.write_with_id(topic, op, op_id).await
    }

    /// Write with an op id of the caller's choosing.
    pub async fn write_with_id(
        &self,
        topic: Topic,
        op: serde_json::Value,
        op_id: OpId,
    ) -> Result<OpId, ClientError> {
        Digest::of(&op).map_err(|e| ClientError::InvalidOp(e.message))?;
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(Command::Write {
                topic,
                op_id,
                op,
                reply,
            })
            .map_err(|_| ClientError::Stopped)?;
        answer.await.map_err(|_| ClientError::Stopped)?
    }

    /// Ask for the subscribed auctions' state now (answered by [`Event::StateRestored`] with
    /// `outage: None`). Offline it does nothing: the reconnect resyncs anyway.
    pub fn resync(&self) -> Result<(), ClientError> {
        self.commands
            .send(Command::Resync)
            .map_err(|_| ClientError::Stopped)
    }

    /// Close the connection and stop reconnecting.
    pub fn close(&self) {
        let _ = self.commands.send(Command::Close);
    }
}

/// A bid as the op book holds it: what its frame is built from, the same every send.
#[derive(Debug, Clone)]
struct BidOp {
    auction_id: AuctionId,
    amount: Amount,
    bid_id: BidId,
}

impl BidOp {
    /// The bid's frame: the same bidId every time it is sent.
    fn message(&self) -> ClientMessage {
        ClientMessage::Bid {
            auction_id: self.auction_id.clone(),
            amount: self.amount,
            bid_id: self.bid_id.clone(),
        }
    }

    /// The bid as an op: op id = bidId, topic = the auction, digest of `{"amount": ...}`.
    fn into_op(self) -> Op<BidOp> {
        Op {
            op_id: self.bid_id.as_str().to_owned(),
            topic: self.auction_id.as_str().to_owned(),
            digest: bid_digest(self.amount),
            app: self,
        }
    }
}

/// A write as the op book holds it: the same frame every send.
#[derive(Debug, Clone)]
struct WriteOp {
    topic: Topic,
    op_id: OpId,
    op: serde_json::Value,
}

impl WriteOp {
    fn message(&self) -> ClientMessage {
        ClientMessage::Write {
            topic: self.topic.clone(),
            op_id: self.op_id.clone(),
            op: self.op.clone(),
        }
    }

    /// The write as an op; `None` for an op without a canonical form (refused before).
    fn into_op(self) -> Option<Op<WriteOp>> {
        let digest = Digest::of(&self.op).ok()?;
        Some(Op {
            op_id: self.op_id.as_str().to_owned(),
            topic: self.topic.to_string(),
            digest,
            app: self,
        })
    }
}

/// The digest of a bid's payload, `{"amount": n}`: its canonical form written directly (an
/// amount is an integer far below 2^53, so the form always exists).
struct Runner {
    config: ClientConfig,
    events: mpsc::UnboundedSender<Event>,
    commands: mpsc::UnboundedReceiver<Command>,
    rng: SmallRng,
    /// The user's bids as ops: sent and unanswered (replayed with the same bid id after every
    /// reconnect), doubtful, queued offline ([`crate::ops`]).
    book: OpBook<BidOp>,
    /// The user's writes to topics, kept as bids are.
    writes: OpBook<WriteOp>,
    /// The joined topics' ops as held.
    logs: BTreeMap<Topic, TopicLog>,
    /// The merged view per auction (stale pushes change nothing and are not reported).
    views: HashMap<AuctionId, AuctionViewState>,
    /// Heartbeats sent: each names the next watched auction in turn, so every watched
    /// auction's version comes back within `auctions` heartbeats.
    heartbeats_sent: usize,
    /// The user as the server names them (from the first `state`).
    user_id: Option<String>,
    /// Frames to send as soon as the session loop can (resends of `unknown` bids).
    resend: Vec<ClientMessage>,
    /// Set when the serving Region said it cannot reach its quorum: the session ends and
    /// the client goes elsewhere.
    redirected_from: Option<String>,
    attempt: u32,
    outage_since: Option<Instant>,
    refused_token: Option<String>,
    policy: Option<EndpointPolicy>,
    /// A server-directed move the current session will make.
    moving: Option<MoveOrder>,
    /// The herd window the server advertised in its last `state` reply.
    herd_hint: Option<Duration>,
}

/// A topic frame's common part (`topicState`, `topicUpdate`).
struct TopicAnswer {
    region: String,
    topic: Topic,
    versions: Versions,
    view: serde_json::Value,
    ops: Vec<OpView>,
}

enum Flow {
    Continue,
    Stop,
}

/// What follows the end of a session.
#[derive(Debug, PartialEq)]
enum Next {
    /// The client stops (closed by the application, or it gave up).
    Stop,
    /// Connect again at once (a planned move, a redirect, a return to the global name).
    Now,
    /// Connect again after this backoff delay.
    After(Duration),
}

/// What the session's decisions ask of the I/O loop, in order.
#[derive(Debug, PartialEq)]
enum Step {
    /// Send this frame.
    Send(ClientMessage),
    /// The next heartbeat is due after this long (replaces the running timer).
    HeartbeatIn(Duration),
    /// Follow the server-directed move after this long.
    MoveIn(Duration),
    /// End the session for this reason.
    End(DisconnectReason),
}

/// One connected session's own state (the heartbeat rule, when it last heard anything, the
/// Region serving it): created at each connect, dropped with the socket.
struct Session {
    heartbeat: Heartbeat,
    connected_at: Instant,
    last_rx: Instant,
    last_rx_wall: u64,
    /// A session this long resets the backoff; said once.
    stable: bool,
    /// Named by the session's first frame.
    region: Option<String>,
}

impl Session {
    fn new(config: &ClientConfig) -> Self {
        Self {
            heartbeat: Heartbeat::new(
                config.heartbeat_interval,
                config.heartbeat_timeout,
                config.failure_threshold,
            ),
            connected_at: Instant::now(),
            last_rx: Instant::now(),
            last_rx_wall: config.wall_clock.now_ms(),
            stable: false,
            region: None,
        }
    }

    /// Something arrived (any frame, even one that is not text).
    fn heard(&mut self, wall_ms: u64) {
        self.last_rx = Instant::now();
        self.last_rx_wall = wall_ms;
    }
}

/// The session's two timers, as the I/O loop holds them.
struct Timers<'a> {
    heartbeat: std::pin::Pin<&'a mut tokio::time::Sleep>,
    moving: std::pin::Pin<&'a mut tokio::time::Sleep>,
}

/// Carry out `steps` in order on the socket and the timers; the first failed send or `End`
/// ends the session (the one place a failed send is handled).
async fn execute(
    ws: &mut WsStream,
    steps: Vec<Step>,
    timers: &mut Timers<'_>,
) -> Option<DisconnectReason> {
    for step in steps {
        match step {
            Step::Send(message) => {
                if ws.send(Message::text(message.to_json())).await.is_err() {
                    return Some(DisconnectReason::Error("send failed".into()));
                }
            }
            Step::HeartbeatIn(after) => timers.heartbeat.as_mut().reset(Instant::now() + after),
            Step::MoveIn(after) => timers.moving.as_mut().reset(Instant::now() + after),
            Step::End(reason) => return Some(reason),
        }
    }
    None
}

/// End the socket for `reason`: a close frame (a normal one when the app closed the client,
/// "going away" otherwise), then drop both halves, whatever the peer does with its side of
/// the close handshake.
async fn close(mut ws: WsStream, reason: DisconnectReason) -> DisconnectReason {
    let (frame, wait) = if reason == DisconnectReason::ClientClosed {
        (None, Duration::from_millis(500))
    } else {
        (
            Some(tokio_tungstenite::tungstenite::protocol::CloseFrame {
                code: CloseCode::Away,
                reason: "".into(),
            }),
            Duration::from_millis(100),
        )
    };
    let _ = tokio::time::timeout(wait, ws.send(Message::Close(frame))).await;
    drop(ws);
    reason
}

impl Runner {
    fn emit(&self, event: Event) {
        let _ = self.events.send(event);
    }

    async fn run(mut self) {
        loop {
            self.emit(Event::Connecting {
                attempt: self.attempt,
            });
            let reason = match self.open().await {
                Ok(Some(ws)) => self.session(ws).await,
                Ok(None) => return,
                Err(reason) => reason,
            };
            match self.on_disconnect(reason) {
                Next::Stop => return,
                Next::Now => continue,
                Next::After(delay) => {
                    if let Flow::Stop = self.idle(delay).await {
                        return;
                    }
                }
            }
        }
    }

    /// A session ended (or a connect failed) for `reason`: decide, without I/O, what comes
    /// next: stop, connect again at once, or after a backoff delay. Counts the failure against
    /// the endpoint, follows a redirect or a server-directed move, and emits the events.
    fn on_disconnect(&mut self, reason: DisconnectReason) -> Next {
        if reason == DisconnectReason::ClientClosed {
            self.emit(Event::Disconnected { reason });
            return Next::Stop;
        }
        self.outage_since.get_or_insert_with(Instant::now);
        let throttled = matches!(
            reason,
            DisconnectReason::ConnectFailed(ConnectError::Refused { status: 429 })
        );
        let going_away = matches!(
            reason,
            DisconnectReason::Closed {
                code: Some(1000 | 1001)
            } | DisconnectReason::Returning
        );
        let moved = match &mut self.policy {
            Some(policy) if reason.counts_as_failure() => policy.on_failure(),
            _ => None,
        };
        let returning = reason == DisconnectReason::Returning;
        let moved_by_server = matches!(reason, DisconnectReason::Moved { .. });
        let redirected = match &reason {
            DisconnectReason::Redirected { from } => Some(from.clone()),
            _ => None,
        };
        self.emit(Event::Disconnected { reason });
        if let Some(from) = redirected {
            // Another Region's own endpoint at once, if the app gave the client any;
            // otherwise the global name, after the usual backoff (the failover decision
            // moves it: the canary's quorum probe fails in such a Region).
            let global = self.global_url();
            if let Some(policy) = self.policy.as_mut() {
                if policy.redirect_from(&from).is_some() {
                    let url = policy.url(&global);
                    self.emit(Event::EndpointChanged {
                        url,
                        regional: true,
                        reason: format!("{from} cannot reach its table's quorum"),
                    });
                    self.attempt = 0;
                    return Next::Now;
                }
            }
        }
        if moved_by_server {
            if let Some(order) = self.moving.take() {
                self.follow(order);
            }
            // The server spread the moves over its window: reconnect at once.
            self.attempt = 0;
            return Next::Now;
        }
        if let (Some(_), Some(policy)) = (moved, &self.policy) {
            let url = policy.url(&self.global_url());
            self.emit(Event::EndpointChanged {
                regional: policy.on_fallback(),
                reason: format!(
                    "{} consecutive failures",
                    policy.config().after_failures.max(1)
                ),
                url,
            });
            // Backoff is per endpoint: it spares the one that kept failing. The new one
            // has not failed yet, so its first connect draws from the first window (still
            // jittered, and spread over the advertised herd window).
            self.attempt = 0;
        }
        if returning {
            // Moving back is planned, not a failure: reconnect at once.
            self.attempt = 0;
            return Next::Now;
        }
        if going_away {
            // API Gateway's 2-hour limit or a clean shutdown: nothing is wrong, so use the
            // smallest window (still jittered: a whole fleet is cut at the same time).
            self.attempt = 0;
        }
        // An unplanned loss may be the whole Region's: spread the first retry over the
        // herd window the server advertised (crate::backoff).
        let herd_hint = if going_away { None } else { self.herd_hint };
        if crate::give_up::after_failures(self.attempt, self.config.max_attempts) {
            self.emit(Event::GaveUp {
                reason: format!("{} reconnect attempts failed", self.attempt),
                code: crate::ReasonCode::AttemptsExhausted,
            });
            return Next::Stop;
        }
        let delay =
            self.config
                .backoff
                .delay_for(self.attempt, throttled, herd_hint, &mut self.rng);
        self.attempt = self.attempt.saturating_add(1);
        self.emit(Event::Reconnecting {
            attempt: self.attempt,
            delay,
        });
        Next::After(delay)
    }

    /// Wait `delay` while serving commands as the offline policy says.
    async fn idle(&mut self, delay: Duration) -> Flow {
        // One timer for the whole wait, however many commands arrive during it.
        let waited = tokio::time::sleep(delay);
        tokio::pin!(waited);
        loop {
            tokio::select! {
                biased;
                () = &mut waited => return Flow::Continue,
                command = self.commands.recv() => {
                    if let Flow::Stop = self.offline_command(command) {
                        return Flow::Stop;
                    }
                }
            }
        }
    }

    fn offline_command(&mut self, command: Option<Command>) -> Flow {
        match command {
            None | Some(Command::Close) => {
                self.emit(Event::Disconnected {
                    reason: DisconnectReason::ClientClosed,
                });
                Flow::Stop
            }
            Some(Command::Bid {
                auction_id,
                amount,
                bid_id,
                reply,
            }) => {
                let answer = match self.config.offline_bids {
                    OfflineBids::Reject => Err(ClientError::NotConnected),
                    OfflineBids::Queue { max, .. }
                        if !crate::offline::admits(self.book.queued(), max) =>
                    {
                        Err(ClientError::QueueFull)
                    }
                    OfflineBids::Queue { .. } => {
                        let bid = BidOp {
                            auction_id,
                            amount,
                            bid_id: bid_id.clone(),
                        };
                        self.book.queue(bid.into_op(), Instant::now());
                        Ok(bid_id)
                    }
                };
                let _ = reply.send(answer);
                Flow::Continue
            }
            Some(Command::Write {
                topic,
                op_id,
                op,
                reply,
            }) => {
                let answer = match self.config.offline_bids {
                    OfflineBids::Reject => Err(ClientError::NotConnected),
                    OfflineBids::Queue { max, .. }
                        if !crate::offline::admits(self.writes.queued(), max) =>
                    {
                        Err(ClientError::QueueFull)
                    }
                    OfflineBids::Queue { .. } => {
                        let write = WriteOp {
                            topic,
                            op_id: op_id.clone(),
                            op,
                        };
                        match write.into_op() {
                            Some(op) => {
                                self.writes.queue(op, Instant::now());
                                Ok(op_id)
                            }
                            None => Err(ClientError::InvalidOp("no canonical form".into())),
                        }
                    }
                };
                let _ = reply.send(answer);
                Flow::Continue
            }
            Some(Command::Resync) => Flow::Continue,
        }
    }

    /// Where the global name leads now.
    fn global_url(&self) -> String {
        match &self.config.url_provider {
            Some(provider) => provider(),
            None => self.config.url.clone(),
        }
    }

    /// Point the next connect where a server-directed move goes.
    fn follow(&mut self, order: MoveOrder) {
        let global = self.global_url();
        let (url, regional) = match (&order.destination, self.policy.as_mut()) {
            (Destination::Regional(index), Some(policy)) => {
                policy.move_to(Target::Regional(*index));
                (policy.url(&global), true)
            }
            (_, Some(policy)) => {
                policy.move_to(Target::Global);
                (policy.url(&global), false)
            }
            (_, None) => (global, false),
        };
        self.emit(Event::EndpointChanged {
            url,
            regional,
            reason: format!("the server moved this client to {}", order.to),
        });
    }

    /// A `moveTo` frame: follow it (once per session) if its destination is known.
    fn on_move_to(&mut self, request: MoveRequest<'_>, reason: String) -> Option<Duration> {
        if self.moving.is_some() {
            return None;
        }
        let to = request.to;
        let regions = self
            .policy
            .as_ref()
            .map(|p| p.config().regions.clone())
            .unwrap_or_default();
        match crate::moves::decide(request, &self.config.url, &regions, &mut self.rng) {
            Ok(order) => {
                let after = order.after;
                self.emit(Event::MoveScheduled {
                    to: order.to.clone(),
                    after,
                    reason,
                });
                self.moving = Some(order);
                Some(after)
            }
            Err(ignored) => {
                tracing::info!(?ignored, %to, "moveTo ignored");
                None
            }
        }
    }

    /// How this client dials, with `token` (empty: none).
    fn connect_options(&self, token: String) -> ConnectOptions {
        ConnectOptions {
            token: (!token.is_empty()).then_some(token),
            placement: self.config.placement,
            timeout: self.config.connect_timeout,
            #[cfg(feature = "simulation")]
            network: self.config.network.clone(),
            ..ConnectOptions::default()
        }
    }

    /// Probe the global name once: connect with a fresh token, heartbeat, expect a pong.
    fn probe_global(&self) -> BoxFuture<'static, ProbeResult> {
        let url = self.global_url();
        let tokens = self.config.token_provider.clone();
        let timeout = self.config.connect_timeout;
        let options = self.connect_options(String::new());
        Box::pin(async move {
            let Ok(token) = tokens.token(false).await else {
                return ProbeResult::Failed;
            };
            let options = ConnectOptions {
                token: (!token.is_empty()).then_some(token),
                ..options
            };
            // Connect, then the heartbeat round trip the canary's probe uses too.
            let exchange = async {
                let mut ws = connect(&url, &options).await.ok()?;
                let deadline = Instant::now() + timeout;
                let region = crate::exchange::heartbeat(&mut ws, deadline).await.ok();
                let _ = ws.send(Message::Close(None)).await;
                region
            };
            match tokio::time::timeout(timeout.saturating_mul(2), exchange).await {
                Ok(Some(region)) => ProbeResult::Healthy(region),
                _ => ProbeResult::Failed,
            }
        })
    }

    /// Open a connection. `Ok(None)`: the application closed the client meanwhile.
    async fn open(&mut self) -> Result<Option<WsStream>, DisconnectReason> {
        let refresh = self.refused_token.is_some();
        let token = match self.config.token_provider.token(refresh).await {
            Ok(token) => token,
            Err(error) if crate::give_up::on_token_error(&error) => {
                self.emit(Event::GaveUp {
                    reason: format!("the token provider gave up: {error}"),
                    code: crate::ReasonCode::TokenDenied,
                });
                return Ok(None);
            }
            Err(error) => {
                return Err(DisconnectReason::TokenUnavailable(format!(
                    "token provider failed: {error}"
                )))
            }
        };
        if self.refused_token.as_deref() == Some(token.as_str()) {
            self.emit(Event::GaveUp {
                reason: "the server refused the token and no new token was provided".into(),
                code: crate::ReasonCode::TokenDenied,
            });
            return Ok(None);
        }
        let options = self.connect_options(token.clone());
        let url = match &self.policy {
            Some(policy) => policy.url(&self.global_url()),
            None => self.global_url(),
        };
        let connecting = connect(&url, &options);
        tokio::pin!(connecting);
        loop {
            tokio::select! {
                biased;
                result = &mut connecting => {
                    return match result {
                        Ok(ws) => {
                            self.refused_token = None;
                            Ok(Some(ws))
                        }
                        Err(error) => {
                            if matches!(error, ConnectError::Refused { status: 401 | 403 }) {
                                self.refused_token = Some(token);
                            }
                            Err(DisconnectReason::ConnectFailed(error))
                        }
                    };
                }
                command = self.commands.recv() => {
                    if let Flow::Stop = self.offline_command(command) {
                        return Ok(None);
                    }
                }
            }
        }
    }

    /// One connected session: resync, replay, then heartbeat and serve commands until the
    /// connection is judged broken. This loop only pumps I/O: each input (a frame, a timer,
    /// a probe's result, a command) goes to a method that decides without I/O and returns the
    /// [`Step`]s to take, which [`execute`] carries out.
    async fn session(&mut self, mut ws: WsStream) -> DisconnectReason {
        let far = Duration::from_secs(86_400 * 365);
        let heartbeat_due = tokio::time::sleep(far);
        tokio::pin!(heartbeat_due);
        // A server-directed move: armed by a `moveTo` frame.
        let move_due = tokio::time::sleep(far);
        tokio::pin!(move_due);
        let mut timers = Timers {
            heartbeat: heartbeat_due.as_mut(),
            moving: move_due.as_mut(),
        };
        let opening = self.session_opening();
        if let Some(reason) = execute(&mut ws, opening, &mut timers).await {
            return close(ws, reason).await;
        }
        // The session's clocks start once the opening frames are out.
        let mut session = Session::new(&self.config);
        let first = session.heartbeat.first_due();
        timers.heartbeat.as_mut().reset(Instant::now() + first);
        self.moving = None;
        // Client-assisted failover: while on a Region's own endpoint, probe the global name.
        let recheck = self
            .policy
            .as_ref()
            .map(|p| p.config().recheck.max(Duration::from_millis(1)))
            .unwrap_or(Duration::from_secs(3600));
        let mut recheck_ticker = tokio::time::interval_at(Instant::now() + recheck, recheck);
        recheck_ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut probe: Option<BoxFuture<'static, ProbeResult>> = None;

        let reason = loop {
            let steps = tokio::select! {
                biased;
                frame = ws.next() => match frame {
                    None => vec![Step::End(DisconnectReason::Closed { code: None })],
                    Some(Err(WsError::ConnectionClosed | WsError::AlreadyClosed))
                    | Some(Err(WsError::Protocol(ProtocolError::ResetWithoutClosingHandshake))) => {
                        vec![Step::End(DisconnectReason::Closed { code: None })]
                    }
                    Some(Err(error)) => vec![Step::End(DisconnectReason::Error(error.to_string()))],
                    Some(Ok(Message::Close(frame))) => {
                        vec![Step::End(DisconnectReason::Closed { code: frame.map(|f| u16::from(f.code)) })]
                    }
                    Some(Ok(Message::Text(text))) => {
                        session.heard(self.config.wall_clock.now_ms());
                        self.on_text(&mut session, &text)
                    }
                    Some(Ok(_)) => {
                        session.heard(self.config.wall_clock.now_ms());
                        Vec::new()
                    }
                },
                () = &mut timers.heartbeat => self.on_heartbeat_due(&mut session),
                () = &mut timers.moving, if self.moving.is_some() => {
                    let to = self.moving.as_ref().map(|m| m.to.clone()).unwrap_or_default();
                    vec![Step::End(DisconnectReason::Moved { to })]
                }
                _ = recheck_ticker.tick(), if probe.is_none()
                    && self.policy.as_ref().is_some_and(EndpointPolicy::on_fallback) => {
                    probe = Some(self.probe_global());
                    Vec::new()
                }
                result = async { match probe.as_mut() { Some(p) => p.await, None => std::future::pending().await } } => {
                    probe = None;
                    self.on_probe(&session, result)
                }
                command = self.commands.recv() => self.on_session_command(command),
            };
            if let Some(reason) = execute(&mut ws, steps, &mut timers).await {
                break reason;
            }
        };
        close(ws, reason).await
    }

    /// What a new session sends first: a `getState` per watched auction (naming its doubtful
    /// bids), the unanswered bids again (same bidIds), and the bids queued while offline that
    /// are still young enough.
    fn session_opening(&mut self) -> Vec<Step> {
        let mut outgoing: Vec<Step> = Vec::new();
        for auction_id in &self.config.auctions {
            outgoing.push(Step::Send(self.state_request(auction_id)));
        }
        for topic in &self.config.topics {
            outgoing.extend(self.topic_request(topic).map(Step::Send));
        }
        if self.config.auctions.is_empty() && self.config.topics.is_empty() {
            outgoing.push(Step::Send(ClientMessage::Heartbeat {
                auction_id: None,
                topic: None,
            }));
        }
        let max_age = match self.config.offline_bids {
            OfflineBids::Queue { max_age, .. } => max_age,
            OfflineBids::Reject => Duration::ZERO,
        };
        let (send, expired) = self.book.open_session(Instant::now(), max_age);
        outgoing.extend(send.iter().map(|op| Step::Send(op.app.message())));
        for op in expired.into_iter().filter_map(|id| BidId::new(id).ok()) {
            self.emit(Event::BidExpired { bid_id: op });
        }
        let (send, expired) = self.writes.open_session(Instant::now(), max_age);
        outgoing.extend(send.iter().map(|op| Step::Send(op.app.message())));
        for op_id in expired.into_iter().filter_map(|id| OpId::new(id).ok()) {
            self.emit(Event::WriteExpired { op_id });
        }
        outgoing
    }

    /// The `getState` of a joined topic, from the positions held, naming its doubtful writes.
    fn topic_request(&self, topic: &Topic) -> Option<ClientMessage> {
        let op_ids = self
            .writes
            .doubts_of(&topic.to_string(), wsdr_protocol::limits::SETTLE_BIDS_MAX)
            .into_iter()
            .filter_map(|id| OpId::new(id).ok())
            .collect();
        self.logs.get(topic).map(|log| log.request(op_ids))
    }

    /// A text frame arrived in `session`.
    fn on_text(&mut self, session: &mut Session, text: &str) -> Vec<Step> {
        let mut steps = Vec::new();
        match parse_server_frame(text) {
            Ok(ServerFrame::GatewayError { message }) => {
                tracing::debug!(%message, "API Gateway error frame");
                if let Some(confirm) = session.heartbeat.on_error_frame() {
                    steps.push(Step::HeartbeatIn(confirm));
                }
            }
            Ok(ServerFrame::Message(message)) => {
                if session.region.is_none() {
                    session.region = Some(message.region().to_owned());
                    self.emit(Event::Connected {
                        region: message.region().to_owned(),
                    });
                }
                match message {
                    ServerMessage::Pong {
                        herd_window_ms,
                        auction_id,
                        topic,
                        versions,
                        ..
                    } => {
                        session.heartbeat.on_pong();
                        // The Region's latest word: absent means it no longer knows its head
                        // count.
                        self.herd_hint = herd_window_ms.map(Duration::from_millis);
                        match (auction_id, topic, versions) {
                            (Some(auction_id), _, Some(versions)) => {
                                self.on_pong_versions(&auction_id, &versions);
                            }
                            (None, Some(topic), Some(versions)) => {
                                self.on_pong_topic(&topic, &versions);
                            }
                            _ => {}
                        }
                    }
                    ServerMessage::MoveTo {
                        region,
                        to,
                        endpoint,
                        window_ms,
                        after_ms,
                        reason,
                    } => {
                        let request = MoveRequest {
                            serving_region: &region,
                            to: &to,
                            endpoint: endpoint.as_deref(),
                            delay: Duration::from_millis(after_ms),
                            window: Duration::from_millis(window_ms),
                        };
                        if let Some(after) = self.on_move_to(request, reason) {
                            steps.push(Step::MoveIn(after));
                        }
                    }
                    ServerMessage::Error {
                        code: ErrorCode::Internal,
                        ..
                    } => {
                        if let Some(confirm) = session.heartbeat.on_error_frame() {
                            steps.push(Step::HeartbeatIn(confirm));
                        }
                    }
                    ServerMessage::Error {
                        code: ErrorCode::NoQuorum,
                        region,
                        ..
                    } => {
                        self.redirected_from = Some(region);
                    }
                    other => self.on_message(other),
                }
                if let Some(from) = self.redirected_from.take() {
                    steps.push(Step::End(DisconnectReason::Redirected { from }));
                    return steps;
                }
                steps.extend(std::mem::take(&mut self.resend).into_iter().map(Step::Send));
            }
            Err(error) => tracing::debug!(%error, "unreadable frame ignored"),
        }
        if let Some(broken) = session.heartbeat.broken() {
            steps.push(Step::End(broken.into()));
        }
        steps
    }

    /// The heartbeat timer fired: the rule judges the round that ends here
    /// (crate::heartbeat); a live session sends the next heartbeat and re-reads the doubtful
    /// bids (getState lists the user's standing bids).
    fn on_heartbeat_due(&mut self, session: &mut Session) -> Vec<Step> {
        let silence = session.last_rx.elapsed();
        let wall_silence = Duration::from_millis(
            self.config
                .wall_clock
                .now_ms()
                .saturating_sub(session.last_rx_wall),
        );
        let next = match session.heartbeat.on_due(silence, wall_silence) {
            Ok(next) => next,
            Err(broken) => return vec![Step::End(broken.into())],
        };
        let mut steps = vec![Step::Send(self.next_heartbeat())];
        steps.extend(self.recheck_doubtful().into_iter().map(Step::Send));
        steps.push(Step::HeartbeatIn(next));
        if !session.stable && session.connected_at.elapsed() >= self.config.stable_after {
            session.stable = true;
            self.attempt = 0;
        }
        steps
    }

    /// A probe of the global name answered (client-assisted failover).
    fn on_probe(&mut self, session: &Session, result: ProbeResult) -> Vec<Step> {
        let global = self.global_url();
        let Some(policy) = self.policy.as_mut() else {
            return Vec::new();
        };
        let (reason, steps) = match policy.on_probe(result, session.region.as_deref()) {
            Decision::Stay => return Vec::new(),
            Decision::AdoptGlobal => ("the global name leads to this Region again", Vec::new()),
            Decision::Return => (
                "the global name has been healthy long enough",
                vec![Step::End(DisconnectReason::Returning)],
            ),
        };
        let url = policy.url(&global);
        self.emit(Event::EndpointChanged {
            url,
            regional: false,
            reason: reason.into(),
        });
        steps
    }

    /// A command from the application while connected.
    fn on_session_command(&mut self, command: Option<Command>) -> Vec<Step> {
        match command {
            None | Some(Command::Close) => vec![Step::End(DisconnectReason::ClientClosed)],
            Some(Command::Resync) => self
                .config
                .auctions
                .iter()
                .map(|auction_id| self.state_request(auction_id))
                .chain(
                    self.config
                        .topics
                        .iter()
                        .filter_map(|topic| self.topic_request(topic)),
                )
                .map(Step::Send)
                .collect(),
            Some(Command::Write {
                topic,
                op_id,
                op,
                reply,
            }) => {
                let write = WriteOp {
                    topic,
                    op_id: op_id.clone(),
                    op,
                };
                let frame = write.message();
                match write.into_op() {
                    Some(op) => {
                        self.writes.sent(op);
                        let _ = reply.send(Ok(op_id));
                        vec![Step::Send(frame)]
                    }
                    None => {
                        let _ = reply.send(Err(ClientError::InvalidOp("no canonical form".into())));
                        Vec::new()
                    }
                }
            }
            Some(Command::Bid {
                auction_id,
                amount,
                bid_id,
                reply,
            }) => {
                let bid = BidOp {
                    auction_id,
                    amount,
                    bid_id: bid_id.clone(),
                };
                let frame = bid.message();
                self.book.sent(bid.into_op());
                let _ = reply.send(Ok(bid_id));
                vec![Step::Send(frame)]
            }
        }
    }

    fn on_message(&mut self, message: ServerMessage) {
        match message {
            ServerMessage::State {
                region,
                auction,
                you,
                herd_window_ms,
            } => {
                self.herd_hint = herd_window_ms.map(Duration::from_millis);
                let outage = self.outage_since.take().map(|t| t.elapsed());
                if let Some(policy) = self.policy.as_mut() {
                    policy.on_restored(&region);
                }
                // An explicit read replaces the view, even one that looks older: after a
                // Region is lost for good, the survivor's view is the truth.
                tracing::debug!(%region, versions = ?auction.versions, high = ?auction.high_bid.as_ref().map(|h| h.amount), "state");
                self.views.insert(
                    auction.id.clone(),
                    AuctionViewState {
                        versions: auction.versions.clone(),
                        high: auction.high_bid.clone(),
                    },
                );
                self.user_id = Some(you.user_id.clone());
                self.settle_from_state(&region, &auction, &you);
                self.emit(Event::StateRestored {
                    region,
                    auction,
                    you,
                    outage,
                });
            }
            ServerMessage::BidUpdate {
                region,
                auction_id,
                high_bid,
                versions,
                ..
            } => {
                let known = self.views.entry(auction_id.clone()).or_default();
                if !known.merge(&versions, high_bid.as_ref()) {
                    tracing::debug!(%auction_id, ?versions, view = ?known.versions, "stale push ignored");
                    return;
                }
                let merged = known.clone();
                tracing::debug!(%auction_id, %region, versions = ?merged.versions, high = ?merged.high.as_ref().map(|h| h.amount), "push");
                if let Some(high) = &high_bid {
                    self.settle_if_mine(&region, &auction_id, high);
                }
                // The merged view, not the push: a push built from an older read must not
                // show a lower high bid than one already shown.
                let total: u64 = merged.versions.values().sum();
                self.emit(Event::StateUpdated {
                    region,
                    auction_id,
                    high_bid: merged.high,
                    bid_count: total,
                    version: total,
                    versions: merged.versions,
                })
            }
            ServerMessage::BidResult {
                bid_id,
                status,
                reason,
                region,
            } => {
                // The book decides what the answer means (crate::ops): a redirect decided
                // nothing, and the bid goes (same bidId) to the Region the client moves to.
                let answered =
                    self.book
                        .answered(bid_id.as_str(), status, reason.as_deref(), Instant::now());
                self.on_answered(answered, &region);
                self.emit(Event::BidResult {
                    bid_id,
                    status,
                    reason,
                    region,
                });
            }
            ServerMessage::Error { code, message, .. } => {
                tracing::warn!(%code, %message, "server error frame");
            }
            // Both handled in the session loop (the heartbeat rule, the move timer).
            ServerMessage::Pong { .. } | ServerMessage::MoveTo { .. } => {}
            ServerMessage::WriteResult {
                op_id,
                status,
                reason,
                region,
            } => {
                let answered =
                    self.writes
                        .answered(op_id.as_str(), status, reason.as_deref(), Instant::now());
                self.on_answered(answered, &region);
                self.emit(Event::WriteResult {
                    op_id,
                    status,
                    reason,
                    region,
                });
            }
            ServerMessage::TopicState {
                region,
                topic,
                versions,
                view,
                ops,
                complete,
                you,
                herd_window_ms,
            } => self.on_topic_state(
                TopicAnswer {
                    region,
                    topic,
                    versions,
                    view,
                    ops,
                },
                complete,
                you,
                herd_window_ms,
            ),
            ServerMessage::TopicUpdate {
                region,
                topic,
                versions,
                view,
                ops,
            } => self.on_topic_update(TopicAnswer {
                region,
                topic,
                versions,
                view,
                ops,
            }),
        }
    }

    /// The `getState` for one auction, naming the uncertain bids of it (at most
    /// [`wsdr_protocol::limits::SETTLE_BIDS_MAX`], the oldest doubts first): the answer says
    /// for each whether it stands, however many bids the user has.
    fn state_request(&self, auction_id: &AuctionId) -> ClientMessage {
        let bid_ids = self
            .book
            .doubts_of(auction_id.as_str(), wsdr_protocol::limits::SETTLE_BIDS_MAX)
            .into_iter()
            .filter_map(|id| BidId::new(id).ok())
            .collect();
        ClientMessage::GetState {
            auction_id: auction_id.clone(),
            bid_ids,
        }
    }

    /// The next heartbeat frame, naming the watched auctions, then the joined topics, in
    /// turn.
    fn next_heartbeat(&mut self) -> ClientMessage {
        let auctions = &self.config.auctions;
        let topics = &self.config.topics;
        let watched = auctions.len() + topics.len();
        let turn = (watched > 0).then(|| self.heartbeats_sent % watched);
        self.heartbeats_sent = self.heartbeats_sent.wrapping_add(1);
        match turn {
            Some(i) if i < auctions.len() => ClientMessage::Heartbeat {
                auction_id: Some(auctions[i].clone()),
                topic: None,
            },
            Some(i) => ClientMessage::Heartbeat {
                auction_id: None,
                topic: topics.get(i - auctions.len()).cloned(),
            },
            None => ClientMessage::Heartbeat {
                auction_id: None,
                topic: None,
            },
        }
    }

    /// What the book made of an answer: a redirect decided nothing, and the op goes (same op
    /// id) to the Region the client moves to.
    fn on_answered(&mut self, answered: Answered, region: &str) {
        if answered == Answered::Undecided {
            self.redirected_from = Some(region.to_owned());
        }
    }

    /// A pong's versions for a joined topic: the Region counts copies past a hole the client
    /// has, and asking may fill it (not while the same question had no new answer).
    fn on_pong_topic(&mut self, topic: &Topic, versions: &Versions) {
        let Some(log) = self.logs.get_mut(topic) else {
            return;
        };
        log.counted(versions);
        if log.is_behind(versions) && log.worth_asking() {
            tracing::debug!(%topic, ?versions, "pong shows copies not held: ask");
            if let Some(frame) = self.topic_request(topic) {
                self.resend.push(frame);
            }
        }
    }

    /// A joined topic's `topicState`: fold the copies in, settle the writes it answers, and
    /// ask again or report a hole as the log says.
    fn on_topic_state(
        &mut self,
        answer: TopicAnswer,
        complete: bool,
        you: TopicYouView,
        herd_window_ms: Option<u64>,
    ) {
        let TopicAnswer {
            region,
            topic,
            versions,
            view,
            ops,
        } = answer;
        let Some(log) = self.logs.get_mut(&topic) else {
            tracing::debug!(%topic, "a topicState for a topic this client did not join");
            return;
        };
        let merged = log.merge(&versions, view.clone(), ops);
        let next = log.answered(&merged, complete);
        let held_to = log.frontier();
        let versions = log.versions().clone();
        self.herd_hint = herd_window_ms.map(Duration::from_millis);
        let outage = self.outage_since.take().map(|t| t.elapsed());
        if let Some(policy) = self.policy.as_mut() {
            policy.on_restored(&region);
        }
        self.user_id = Some(you.user_id.clone());
        let me = you.user_id.as_str();
        let (settled, resend) = self.writes.settle(&topic.to_string(), |op| {
            let shown = |o: &OpView| {
                o.author == me && o.op_id.as_str() == op.op_id && o.digest == op.digest
            };
            you.settled.iter().any(|s| {
                s.op_id.as_str() == op.op_id && s.copies.iter().any(|c| c.digest == op.digest)
            }) || you.ops.iter().any(shown)
                || merged.added.iter().any(shown)
        });
        for settled in settled {
            self.emit_write_settled(settled, Some(&region));
        }
        self.resend
            .extend(resend.into_iter().map(|op| op.app.message()));
        match next {
            Answer::Done => {}
            Answer::AskAgain => self.resend.extend(self.topic_request(&topic)),
            Answer::Hole(_) => self.emit(Event::Discontinuity {
                region: region.clone(),
                topic: topic.clone(),
                held_to,
                versions: versions.clone(),
            }),
        }
        self.emit(Event::TopicRestored {
            region,
            topic,
            versions,
            view,
            added: merged.added,
            complete,
            outage,
        });
    }

    /// A joined topic's push: fold the copies in; a hole below them is asked for.
    fn on_topic_update(&mut self, answer: TopicAnswer) {
        let TopicAnswer {
            region,
            topic,
            versions,
            view,
            ops,
        } = answer;
        let Some(log) = self.logs.get_mut(&topic) else {
            tracing::debug!(%topic, "a topicUpdate for a topic this client did not join");
            return;
        };
        let merged = log.merge(&versions, view.clone(), ops);
        let ask = merged.behind && log.worth_asking();
        let versions = log.versions().clone();
        let topic_key = topic.to_string();
        for op in &merged.added {
            if Some(&op.author) != self.user_id.as_ref() {
                continue;
            }
            if let Some(settled) =
                self.writes
                    .settle_shown(&topic_key, op.op_id.as_str(), &op.digest)
            {
                self.emit_write_settled(settled, Some(&region));
            }
        }
        if ask {
            self.resend.extend(self.topic_request(&topic));
        }
        if merged.added.is_empty() {
            return;
        }
        self.emit(Event::TopicUpdated {
            region,
            topic,
            versions,
            view,
            added: merged.added,
        });
    }

    fn emit_write_settled(&self, settled: Settled, region: Option<&str>) {
        if let Ok(op_id) = OpId::new(settled.op_id) {
            self.emit(Event::WriteSettled {
                op_id,
                stands: settled.stands,
                region: region.map(str::to_owned),
            });
        }
    }

    /// A pong's version vector for a watched auction: if the Region has seen bids this
    /// client's view has not (a push lost or still on its way), resync that auction now.
    fn on_pong_versions(&mut self, auction_id: &AuctionId, versions: &Versions) {
        let behind = self
            .views
            .get(auction_id)
            .is_none_or(|view| !dominates(&view.versions, versions));
        if behind {
            tracing::debug!(%auction_id, ?versions, "pong shows a newer view: resync");
            let frame = self.state_request(auction_id);
            self.resend.push(frame);
        }
    }

    /// Settle uncertain bids of this auction against the user's standing bids: the bids the
    /// request named (`you.settled`, a point read each), else the newest ones (`you.bids`,
    /// from servers that predate `bidIds`).
    fn settle_from_state(&mut self, region: &str, auction: &AuctionView, you: &YouView) {
        let (settled, resend) = self.book.settle(auction.id.as_str(), |op| {
            let bid = &op.app;
            you.settled
                .iter()
                .any(|s| s.bid_id == bid.bid_id && s.stands_with(bid.amount))
                || you
                    .bids
                    .iter()
                    .any(|b| b.bid_id == bid.bid_id && b.amount == bid.amount)
        });
        for settled in settled {
            self.emit_settled(settled, Some(region));
        }
        // Not recorded here: sent again (same bidId, so at most one copy per Region), and its
        // answer decides.
        self.resend
            .extend(resend.into_iter().map(|op| op.app.message()));
    }

    /// A pushed high bid that is one of the user's uncertain bids settles it.
    fn settle_if_mine(&mut self, region: &str, auction_id: &AuctionId, high: &HighBidView) {
        if self.user_id.as_deref() != Some(high.bidder.as_str()) {
            return;
        }
        let shown = self.book.settle_shown(
            auction_id.as_str(),
            high.bid_id.as_str(),
            &bid_digest(high.amount),
        );
        if let Some(settled) = shown {
            self.emit_settled(settled, Some(region));
        }
    }

    fn emit_settled(&self, settled: Settled, region: Option<&str>) {
        if let Ok(bid_id) = BidId::new(settled.op_id) {
            self.emit(Event::BidSettled {
                bid_id,
                stands: settled.stands,
                region: region.map(str::to_owned),
            });
        }
    }

    /// At a heartbeat: settle as not standing what the window has given up on, and return
    /// the `getState` frames that look again at the rest.
    fn recheck_doubtful(&mut self) -> Vec<ClientMessage> {
        for settled in self.book.expire(Instant::now()) {
            self.emit_settled(settled, None);
        }
        for settled in self.writes.expire(Instant::now()) {
            self.emit_write_settled(settled, None);
        }
        let mut frames: Vec<ClientMessage> = self
            .book
            .doubtful_topics()
            .into_iter()
            .filter_map(|topic| AuctionId::new(topic).ok())
            .map(|auction_id| self.state_request(&auction_id))
            .collect();
        for topic in self.writes.doubtful_topics() {
            let Ok(topic) = Topic::parse(&topic) else {
                continue;
            };
            // Written to without joining: held from now on, to settle the write.
            self.logs
                .entry(topic.clone())
                .or_insert_with(|| TopicLog::new(topic.clone()));
            frames.extend(self.topic_request(&topic));
        }
        frames
    }
}

#[cfg(test)]
mod tests {
    //! The session's decisions without a socket: frames and timers in, steps and events out.
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    #[test]
    fn a_bids_digest_is_its_payloads_canonical_digest() {
        for amount in [1, 150_000, wsdr_protocol::limits::MAX_AMOUNT] {
            let amount = Amount::new(amount).unwrap();
            let payload = serde_json::json!({ "amount": amount.get() });
            assert_eq!(
                bid_digest(amount),
                wsdr_protocol::Digest::of(&payload).unwrap()
            );
        }
    }

    #[test]
    fn a_time_scale_divides_every_duration_once_whatever_the_order() {
        let builder = ClientBuilder::new("ws://lab")
            .time_scale(20.0)
            .heartbeat(Duration::from_secs(30), Duration::from_secs(35))
            .fallback(Fallback::new(Vec::new()));
        let config = builder.config().clone().scaled();
        assert_eq!(config.heartbeat_interval, Duration::from_millis(1_500));
        assert_eq!(config.heartbeat_timeout, Duration::from_millis(1_750));
        assert_eq!(config.backoff.base, Duration::from_millis(100));
        assert_eq!(config.backoff.cap, Duration::from_secs(1));
        assert_eq!(config.stable_after, Duration::from_millis(1_500));
        assert_eq!(
            config.connect_timeout,
            Duration::from_millis(500),
            "not below 500 ms"
        );
        assert_eq!(config.settle_window, Duration::from_secs(6));
        assert_eq!(
            config.offline_bids,
            OfflineBids::Queue {
                max: 16,
                max_age: Duration::from_millis(1_500)
            }
        );
        assert_eq!(
            config.fallback.as_ref().map(|f| f.recheck),
            Some(Duration::from_secs(3))
        );
        assert_eq!(config.time_scale, 1.0);
        assert_eq!(
            config.clone().scaled().heartbeat_interval,
            Duration::from_millis(1_500),
            "once"
        );
        let real = ClientBuilder::new("ws://x").config().clone().scaled();
        assert_eq!(real.heartbeat_interval, Duration::from_secs(30));
        assert_eq!(real.connect_timeout, Duration::from_secs(10));
    }

    #[test]
    fn a_time_scale_that_is_no_positive_finite_number_is_real_time() {
        for factor in [0.0, -3.0, f64::NAN, f64::INFINITY, 1.0] {
            let config = ClientBuilder::new("ws://x")
                .time_scale(factor)
                .config()
                .clone()
                .scaled();
            assert_eq!(
                config.heartbeat_interval,
                Duration::from_secs(30),
                "{factor}"
            );
            assert_eq!(config.connect_timeout, Duration::from_secs(10), "{factor}");
            assert_eq!(config.time_scale, 1.0);
        }
    }

    #[test]
    fn only_an_end_that_says_the_region_is_unwell_counts_against_its_endpoint() {
        use DisconnectReason as R;
        let refused = |status| R::ConnectFailed(ConnectError::Refused { status });
        let counts = [
            R::HeartbeatFailures(2),
            R::Silent,
            R::Error("reset".into()),
            R::TokenUnavailable("issuer down".into()),
            R::Closed { code: None },
            R::Closed { code: Some(1006) },
            R::Closed { code: Some(1011) },
            refused(500),
            refused(502),
            R::ConnectFailed(ConnectError::Tcp("refused".into())),
        ];
        for reason in &counts {
            assert!(reason.counts_as_failure(), "{reason:?}");
        }
        let says_nothing = [
            R::Closed { code: Some(1000) },
            R::Closed { code: Some(1001) },
            refused(401),
            refused(403),
            refused(429),
            R::ClientClosed,
            R::Returning,
            R::Moved { to: "west".into() },
            R::Redirected {
                from: "east".into(),
            },
        ];
        for reason in &says_nothing {
            assert!(!reason.counts_as_failure(), "{reason:?}");
        }
    }

    #[test]
    fn the_system_wall_clock_is_the_time_since_the_epoch_and_debug_output_hides_secrets() {
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let now = SystemWallClock.now_ms();
        assert!(now >= before && now < before + 60_000, "{before} {now}");
        let provider =
            TokenFn(|_refresh: bool| async { Ok::<String, TokenError>("secret".into()) });
        assert_eq!(format!("{provider:?}"), "TokenFn(..)");
        let config = format!("{:?}", ClientBuilder::new("ws://lab.test").config());
        assert!(config.starts_with("ClientConfig {"), "{config}");
        assert!(config.contains("ws://lab.test"), "{config}");
    }

    fn runner() -> (Runner, mpsc::UnboundedReceiver<Event>) {
        let (runner, _client, events) = ClientBuilder::new("ws://auction.test")
            .subscribe(AuctionId::new("lot-1").unwrap())
            .heartbeat(Duration::from_secs(30), Duration::from_secs(35))
            .seed(7)
            .parts();
        (runner, events)
    }

    const STATE: &str = r#"{"type":"state","region":"us-east-1","auction":{"id":"lot-1","item":"x","highBid":null,"bidCount":0,"version":0,"versions":{}},"you":{"userId":"alice","lastBid":null,"bids":[]}}"#;
    const GATEWAY_ERROR: &str =
        r#"{"message":"Internal server error","connectionId":"c","requestId":"r"}"#;

    fn sends(steps: &[Step]) -> Vec<String> {
        steps
            .iter()
            .filter_map(|s| match s {
                Step::Send(message) => Some(message.to_json()),
                _ => None,
            })
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn two_failed_heartbeat_rounds_end_the_session() {
        let (mut runner, mut events) = runner();
        let opening = runner.session_opening();
        assert_eq!(
            sends(&opening),
            vec![r#"{"action":"getState","auctionId":"lot-1"}"#]
        );
        let mut session = Session::new(&runner.config);
        assert!(runner.on_text(&mut session, STATE).is_empty());
        assert!(
            matches!(events.try_recv(), Ok(Event::Connected { region }) if region == "us-east-1")
        );
        assert!(matches!(events.try_recv(), Ok(Event::StateRestored { .. })));

        // Round 1: the heartbeat goes out and is answered by API Gateway's error frame.
        tokio::time::advance(Duration::from_secs(30)).await;
        let steps = runner.on_heartbeat_due(&mut session);
        assert_eq!(
            sends(&steps),
            vec![r#"{"action":"heartbeat","auctionId":"lot-1"}"#]
        );
        assert_eq!(
            steps.last(),
            Some(&Step::HeartbeatIn(Duration::from_secs(30)))
        );
        session.heard(runner.config.wall_clock.now_ms());
        assert_eq!(
            runner.on_text(&mut session, GATEWAY_ERROR),
            vec![Step::HeartbeatIn(Duration::from_secs(5))],
            "one failure: confirm after timeout - interval"
        );
        // Round 2: the confirmation heartbeat gets no answer; the next due time judges it.
        tokio::time::advance(Duration::from_secs(5)).await;
        let steps = runner.on_heartbeat_due(&mut session);
        assert_eq!(
            steps.last(),
            Some(&Step::HeartbeatIn(Duration::from_secs(5)))
        );
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(
            runner.on_heartbeat_due(&mut session),
            vec![Step::End(DisconnectReason::HeartbeatFailures(2))]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_unknown_bid_not_listed_in_the_next_state_is_sent_again() {
        let (mut runner, _events) = runner();
        let mut session = Session::new(&runner.config);
        runner.on_text(&mut session, STATE);
        let (reply, answer) = oneshot::channel();
        let bid_id = BidId::new("alice-000000001").unwrap();
        let steps = runner.on_session_command(Some(Command::Bid {
            auction_id: AuctionId::new("lot-1").unwrap(),
            amount: Amount::new(150_000).unwrap(),
            bid_id: bid_id.clone(),
            reply,
        }));
        assert_eq!(answer.await.unwrap(), Ok(bid_id.clone()));
        let bid = sends(&steps)[0].clone();
        assert!(bid.contains(r#""action":"bid""#), "{bid}");
        let unknown = r#"{"type":"bidResult","bidId":"alice-000000001","status":"unknown","reason":null,"region":"us-east-1"}"#;
        assert!(runner.on_text(&mut session, unknown).is_empty());
        // The heartbeat re-reads it by name; the state does not list it: the same frame again.
        tokio::time::advance(Duration::from_secs(30)).await;
        let steps = runner.on_heartbeat_due(&mut session);
        assert!(
            sends(&steps)
                .iter()
                .any(|f| f.contains(r#""bidIds":["alice-000000001"]"#)),
            "{steps:?}"
        );
        assert_eq!(sends(&runner.on_text(&mut session, STATE)), vec![bid]);
    }

    /// A bid of 150,000 sent, answered `unknown`: doubtful. Returns the runner, its session
    /// and its events, the bid's frame sent.
    async fn doubtful_bid() -> (Runner, Session, mpsc::UnboundedReceiver<Event>) {
        let (mut runner, mut events) = runner();
        let mut session = Session::new(&runner.config);
        runner.on_text(&mut session, STATE);
        let (reply, _answer) = oneshot::channel();
        runner.on_session_command(Some(Command::Bid {
            auction_id: AuctionId::new("lot-1").unwrap(),
            amount: Amount::new(150_000).unwrap(),
            bid_id: BidId::new("alice-000000001").unwrap(),
            reply,
        }));
        let unknown = r#"{"type":"bidResult","bidId":"alice-000000001","status":"unknown","reason":null,"region":"us-east-1"}"#;
        runner.on_text(&mut session, unknown);
        while events.try_recv().is_ok() {}
        (runner, session, events)
    }

    /// A runner joined to a chat room only (no auction).
    fn room_runner() -> (Runner, Session, mpsc::UnboundedReceiver<Event>) {
        let (runner, _client, events) = ClientBuilder::new("ws://chat.test")
            .join(Topic::parse("chat:lobby").unwrap())
            .heartbeat(Duration::from_secs(30), Duration::from_secs(35))
            .seed(7)
            .parts();
        let session = Session::new(&runner.config);
        (runner, session, events)
    }

    fn copy_json(author: &str, op_id: &str, log: &str, position: u64, text: &str) -> String {
        let op = serde_json::json!({ "text": text });
        let digest = Digest::of(&op).unwrap();
        format!(
            r#"{{"author":"{author}","opId":"{op_id}","region":"{log}","position":{position},"log":"{log}","at":{position},"digest":"{digest}","op":{op}}}"#
        )
    }

    fn room_state(versions: &str, ops: &[String], complete: bool, you: &str) -> String {
        format!(
            r#"{{"type":"topicState","region":"us-east-1","topic":"chat:lobby","versions":{versions},"view":{{}},"ops":[{}],"complete":{complete},"you":{you}}}"#,
            ops.join(",")
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_room_is_read_from_its_positions_and_a_hole_is_asked_for_then_reported_once() {
        let (mut runner, mut session, mut events) = room_runner();
        assert_eq!(
            sends(&runner.session_opening()),
            vec![r#"{"action":"getState","topic":"chat:lobby"}"#],
            "nothing held yet: the newest messages"
        );
        let you = r#"{"userId":"bo","ops":[]}"#;
        // Positions 1 and 3 of 3: the answer says incomplete and brought copies: ask again
        // from the frontier.
        let first = room_state(
            r#"{"us-east-1":3}"#,
            &[
                copy_json("ann", "ann-msg-0001", "us-east-1", 1, "one"),
                copy_json("ann", "ann-msg-0003", "us-east-1", 3, "three"),
            ],
            false,
            you,
        );
        let steps = runner.on_text(&mut session, &first);
        assert_eq!(
            sends(&steps),
            vec![r#"{"action":"getState","topic":"chat:lobby","since":{"us-east-1":1}}"#]
        );
        // Nothing new for the hole: reported once, not asked again.
        let nothing = room_state(r#"{"us-east-1":3}"#, &[], false, you);
        assert!(sends(&runner.on_text(&mut session, &nothing)).is_empty());
        let holes: Vec<Event> = std::iter::from_fn(|| events.try_recv().ok())
            .filter(|e| matches!(e, Event::Discontinuity { .. }))
            .collect();
        assert_eq!(holes.len(), 1, "{holes:?}");
        assert!(sends(&runner.on_text(&mut session, &nothing)).is_empty());
        assert!(!std::iter::from_fn(|| events.try_recv().ok())
            .any(|e| matches!(e, Event::Discontinuity { .. })));
        // A pong with the same counts asks nothing; one that counts more asks from the hole.
        let pong = |count: u64| {
            format!(
                r#"{{"type":"pong","region":"us-east-1","ts":1,"topic":"chat:lobby","versions":{{"us-east-1":{count}}}}}"#
            )
        };
        assert!(sends(&runner.on_text(&mut session, &pong(3))).is_empty());
        assert_eq!(
            sends(&runner.on_text(&mut session, &pong(4))),
            vec![r#"{"action":"getState","topic":"chat:lobby","since":{"us-east-1":1}}"#]
        );
        // The heartbeat names the room.
        tokio::time::advance(Duration::from_secs(30)).await;
        assert!(sends(&runner.on_heartbeat_due(&mut session))
            .contains(&r#"{"action":"heartbeat","topic":"chat:lobby"}"#.to_owned()));
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_is_replayed_with_its_op_id_and_settles_on_a_copy_of_its_own_payload() {
        let (mut runner, mut session, mut events) = room_runner();
        runner.on_text(
            &mut session,
            &room_state("{}", &[], true, r#"{"userId":"bo","ops":[]}"#),
        );
        let (reply, _answer) = oneshot::channel();
        let steps = runner.on_session_command(Some(Command::Write {
            topic: Topic::parse("chat:lobby").unwrap(),
            op_id: OpId::new("bo-msg-0001").unwrap(),
            op: serde_json::json!({ "text": "hi" }),
            reply,
        }));
        let write =
            r#"{"action":"write","topic":"chat:lobby","opId":"bo-msg-0001","op":{"text":"hi"}}"#;
        assert_eq!(sends(&steps), vec![write]);
        // The session ends unanswered: the next one replays it, same op id.
        let opening = sends(&runner.session_opening());
        assert!(opening.contains(&write.to_owned()), "{opening:?}");
        // Answered unknown: doubtful until a state shows a copy with its payload.
        let unknown = r#"{"type":"writeResult","opId":"bo-msg-0001","status":"unknown","reason":null,"region":"us-east-1"}"#;
        runner.on_text(&mut session, unknown);
        while events.try_recv().is_ok() {}
        let other_payload = room_state(
            r#"{"us-east-1":1}"#,
            &[copy_json(
                "bo",
                "bo-msg-0001",
                "us-east-1",
                1,
                "another text",
            )],
            true,
            r#"{"userId":"bo","ops":[]}"#,
        );
        let steps = runner.on_text(&mut session, &other_payload);
        assert_eq!(
            sends(&steps),
            vec![write],
            "not shown with its payload: sent again"
        );
        assert!(!std::iter::from_fn(|| events.try_recv().ok())
            .any(|e| matches!(e, Event::WriteSettled { .. })));
        runner.on_text(&mut session, unknown);
        let own = room_state(
            r#"{"us-east-1":2}"#,
            &[copy_json("bo", "bo-msg-0001", "us-east-1", 2, "hi")],
            true,
            r#"{"userId":"bo","ops":[]}"#,
        );
        runner.on_text(&mut session, &own);
        let settled: Vec<(String, bool)> = std::iter::from_fn(|| events.try_recv().ok())
            .filter_map(|e| match e {
                Event::WriteSettled { op_id, stands, .. } => Some((op_id.to_string(), stands)),
                _ => None,
            })
            .collect();
        assert_eq!(settled, vec![("bo-msg-0001".to_owned(), true)]);
    }

    fn settlements(events: &mut mpsc::UnboundedReceiver<Event>) -> Vec<(String, bool)> {
        std::iter::from_fn(|| events.try_recv().ok())
            .filter_map(|e| match e {
                Event::BidSettled { bid_id, stands, .. } => {
                    Some((bid_id.as_str().to_owned(), stands))
                }
                _ => None,
            })
            .collect()
    }

    fn state_with(auction: &str, you: &str) -> String {
        format!(
            r#"{{"type":"state","region":"us-west-2","auction":{{"id":"{auction}","item":"x","highBid":null,"bidCount":1,"version":1,"versions":{{"us-east-1":1}}}},"you":{{"userId":"alice","lastBid":null,"bids":[],{you}}}}}"#
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_doubtful_bid_settles_on_a_copy_of_its_own_amount_in_its_own_auction() {
        let (mut runner, mut session, mut events) = doubtful_bid().await;
        // Another auction's state, naming a standing copy with the same bidId: nothing.
        let other = state_with(
            "lot-2",
            r#""settled":[{"bidId":"alice-000000001","stands":true,"copies":[{"region":"us-east-1","amount":150000}]}]"#,
        );
        assert!(sends(&runner.on_text(&mut session, &other)).is_empty());
        assert!(settlements(&mut events).is_empty());
        // Its auction, a copy of the bidId with another amount: not this bid (sent again).
        let reused = state_with(
            "lot-1",
            r#""settled":[{"bidId":"alice-000000001","stands":true,"copies":[{"region":"us-east-1","amount":150001}]}]"#,
        );
        assert_eq!(sends(&runner.on_text(&mut session, &reused)).len(), 1);
        assert!(settlements(&mut events).is_empty());
        let unknown = r#"{"type":"bidResult","bidId":"alice-000000001","status":"unknown","reason":null,"region":"us-west-2"}"#;
        runner.on_text(&mut session, unknown);
        // A listed bid (`you.bids`) with another amount does not settle it either.
        let listed_other = STATE.replace(
            r#""bids":[]"#,
            r#""bids":[{"bidId":"alice-000000001","amount":1,"at":1,"regions":["us-east-1"]}]"#,
        );
        assert_eq!(sends(&runner.on_text(&mut session, &listed_other)).len(), 1);
        assert!(settlements(&mut events).is_empty());
        runner.on_text(&mut session, unknown);
        let named = state_with(
            "lot-1",
            r#""settled":[{"bidId":"alice-000000001","stands":true,"copies":[{"region":"us-east-1","amount":150000}]}]"#,
        );
        assert!(sends(&runner.on_text(&mut session, &named)).is_empty());
        assert_eq!(
            settlements(&mut events),
            [("alice-000000001".to_owned(), true)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_doubtful_bid_listed_with_its_amount_in_you_bids_settles() {
        let (mut runner, mut session, mut events) = doubtful_bid().await;
        let listed = STATE.replace(
            r#""bids":[]"#,
            r#""bids":[{"bidId":"alice-000000001","amount":150000,"at":1,"regions":["us-east-1"]}]"#,
        );
        assert!(sends(&runner.on_text(&mut session, &listed)).is_empty());
        assert_eq!(
            settlements(&mut events),
            [("alice-000000001".to_owned(), true)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_push_of_my_doubtful_bid_as_the_high_bid_settles_it() {
        let (mut runner, mut session, mut events) = doubtful_bid().await;
        let push = |bidder: &str, amount: u64, version: u64| {
            format!(
                r#"{{"type":"bidUpdate","region":"us-east-1","auctionId":"lot-1","highBid":{{"bidId":"alice-000000001","bidder":"{bidder}","amount":{amount},"at":5}},"bidCount":{version},"version":{version},"versions":{{"us-east-1":{version}}}}}"#
            )
        };
        runner.on_text(&mut session, &push("mallory", 150_000, 1));
        runner.on_text(&mut session, &push("alice", 150_001, 2));
        assert!(
            settlements(&mut events).is_empty(),
            "another bidder, another amount"
        );
        runner.on_text(&mut session, &push("alice", 150_000, 3));
        assert_eq!(
            settlements(&mut events),
            [("alice-000000001".to_owned(), true)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_region_without_quorum_ends_the_session_with_a_redirect() {
        let (mut runner, _events) = runner();
        let mut session = Session::new(&runner.config);
        let no_quorum = r#"{"type":"error","code":"no_quorum","message":"m","region":"us-east-1"}"#;
        assert_eq!(
            runner.on_text(&mut session, no_quorum),
            vec![Step::End(DisconnectReason::Redirected {
                from: "us-east-1".into()
            })]
        );
        assert_eq!(
            runner.on_session_command(None),
            vec![Step::End(DisconnectReason::ClientClosed)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn after_a_session_the_next_connect_is_decided_without_io() {
        let (runner, _client, mut events) = ClientBuilder::new("ws://auction.test")
            .max_attempts(Some(2))
            .seed(7)
            .parts();
        let mut runner = runner;
        // A broken session: backoff from the first window (base 2 s).
        match runner.on_disconnect(DisconnectReason::HeartbeatFailures(2)) {
            Next::After(delay) => assert!(delay <= Duration::from_secs(2), "{delay:?}"),
            other => panic!("expected a backoff, got {other:?}"),
        }
        assert!(matches!(events.try_recv(), Ok(Event::Disconnected { .. })));
        assert!(matches!(
            events.try_recv(),
            Ok(Event::Reconnecting { attempt: 1, .. })
        ));
        // A server-directed move reconnects at once and starts the count over.
        assert_eq!(
            runner.on_disconnect(DisconnectReason::Moved {
                to: "us-west-2".into()
            }),
            Next::Now
        );
        assert_eq!(runner.attempt, 0);
        // Two failures later the client gives up (max_attempts 2).
        assert!(matches!(
            runner.on_disconnect(DisconnectReason::Silent),
            Next::After(_)
        ));
        assert!(matches!(
            runner.on_disconnect(DisconnectReason::Silent),
            Next::After(_)
        ));
        assert_eq!(runner.on_disconnect(DisconnectReason::Silent), Next::Stop);
        let gave_up = std::iter::from_fn(|| events.try_recv().ok())
            .any(|e| matches!(e, Event::GaveUp { .. }));
        assert!(gave_up);
        // The application closed it: stop, no backoff.
        assert_eq!(
            runner.on_disconnect(DisconnectReason::ClientClosed),
            Next::Stop
        );
    }

    fn room_push(versions: &str, ops: &[String]) -> String {
        format!(
            r#"{{"type":"topicUpdate","region":"us-east-1","topic":"chat:lobby","versions":{versions},"view":{{}},"ops":[{}]}}"#,
            ops.join(",")
        )
    }

    const BO: &str = r#"{"userId":"bo","ops":[]}"#;
    const WRITE_HI: &str =
        r#"{"action":"write","topic":"chat:lobby","opId":"bo-msg-0001","op":{"text":"hi"}}"#;

    /// A room runner whose write of "hi" (`bo-msg-0001`) was answered `unknown`.
    fn doubtful_write() -> (Runner, Session, mpsc::UnboundedReceiver<Event>) {
        let (mut runner, mut session, mut events) = room_runner();
        runner.on_text(&mut session, &room_state("{}", &[], true, BO));
        let (reply, _answer) = oneshot::channel();
        runner.on_session_command(Some(Command::Write {
            topic: Topic::parse("chat:lobby").unwrap(),
            op_id: OpId::new("bo-msg-0001").unwrap(),
            op: serde_json::json!({ "text": "hi" }),
            reply,
        }));
        let unknown = r#"{"type":"writeResult","opId":"bo-msg-0001","status":"unknown","reason":null,"region":"us-east-1"}"#;
        runner.on_text(&mut session, unknown);
        while events.try_recv().is_ok() {}
        (runner, session, events)
    }

    fn write_settlements(events: &mut mpsc::UnboundedReceiver<Event>) -> Vec<(String, bool)> {
        std::iter::from_fn(|| events.try_recv().ok())
            .filter_map(|e| match e {
                Event::WriteSettled { op_id, stands, .. } => Some((op_id.to_string(), stands)),
                _ => None,
            })
            .collect()
    }

    fn settled_you(op_id: &str, text: &str) -> String {
        let digest = Digest::of(&serde_json::json!({ "text": text })).unwrap();
        format!(
            r#"{{"userId":"bo","ops":[],"settled":[{{"opId":"{op_id}","stands":true,"copies":[{{"region":"us-east-1","digest":"{digest}"}}]}}]}}"#
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_doubtful_write_settles_on_its_own_op_id_with_its_own_payload_only() {
        // Named in `you.settled` with a copy of another payload, or another op id with its
        // payload: still doubtful, sent again.
        for you in [
            settled_you("bo-msg-0001", "another text"),
            settled_you("bo-msg-0002", "hi"),
        ] {
            let (mut runner, mut session, mut events) = doubtful_write();
            let steps = runner.on_text(&mut session, &room_state("{}", &[], true, &you));
            assert_eq!(sends(&steps), vec![WRITE_HI], "{you}");
            assert!(write_settlements(&mut events).is_empty(), "{you}");
        }
        // Its own op id with a copy of its payload: it stands.
        let (mut runner, mut session, mut events) = doubtful_write();
        let you = settled_you("bo-msg-0001", "hi");
        assert!(
            sends(&runner.on_text(&mut session, &room_state("{}", &[], true, &you))).is_empty()
        );
        assert_eq!(
            write_settlements(&mut events),
            vec![("bo-msg-0001".to_owned(), true)]
        );
        // Or shown among the caller's own copies.
        let (mut runner, mut session, mut events) = doubtful_write();
        let own = copy_json("bo", "bo-msg-0001", "us-east-1", 1, "hi");
        let you = format!(r#"{{"userId":"bo","ops":[{own}]}}"#);
        runner.on_text(&mut session, &room_state("{}", &[], true, &you));
        assert_eq!(
            write_settlements(&mut events),
            vec![("bo-msg-0001".to_owned(), true)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_push_of_my_own_copy_settles_my_write_and_anothers_copy_does_not() {
        let (mut runner, mut session, mut events) = doubtful_write();
        let theirs = copy_json("ann", "bo-msg-0001", "us-east-1", 1, "hi");
        runner.on_text(&mut session, &room_push(r#"{"us-east-1":1}"#, &[theirs]));
        assert!(write_settlements(&mut events).is_empty());
        let mine = copy_json("bo", "bo-msg-0001", "us-east-1", 2, "hi");
        runner.on_text(&mut session, &room_push(r#"{"us-east-1":2}"#, &[mine]));
        assert_eq!(
            write_settlements(&mut events),
            vec![("bo-msg-0001".to_owned(), true)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_push_is_shown_and_only_one_past_a_hole_asks_for_it() {
        let (mut runner, mut session, mut events) = room_runner();
        let first = copy_json("ann", "ann-msg-0001", "us-east-1", 1, "one");
        runner.on_text(
            &mut session,
            &room_state(r#"{"us-east-1":1}"#, &[first], true, BO),
        );
        while events.try_recv().is_ok() {}
        // The next position: shown, nothing asked.
        let second = copy_json("ann", "ann-msg-0002", "us-east-1", 2, "two");
        let steps = runner.on_text(&mut session, &room_push(r#"{"us-east-1":2}"#, &[second]));
        assert!(sends(&steps).is_empty(), "{steps:?}");
        let updated: Vec<usize> = std::iter::from_fn(|| events.try_recv().ok())
            .filter_map(|e| match e {
                Event::TopicUpdated { added, .. } => Some(added.len()),
                _ => None,
            })
            .collect();
        assert_eq!(updated, vec![1]);
        // Position 4 with 3 missing: asked for from the frontier.
        let fourth = copy_json("ann", "ann-msg-0004", "us-east-1", 4, "four");
        let steps = runner.on_text(&mut session, &room_push(r#"{"us-east-1":4}"#, &[fourth]));
        assert_eq!(
            sends(&steps),
            vec![r#"{"action":"getState","topic":"chat:lobby","since":{"us-east-1":2}}"#]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_redirected_write_ends_the_session_toward_another_region() {
        let (mut runner, mut session, _events) = room_runner();
        runner.on_text(&mut session, &room_state("{}", &[], true, BO));
        let (reply, _answer) = oneshot::channel();
        runner.on_session_command(Some(Command::Write {
            topic: Topic::parse("chat:lobby").unwrap(),
            op_id: OpId::new("bo-msg-0001").unwrap(),
            op: serde_json::json!({ "text": "hi" }),
            reply,
        }));
        let redirect = r#"{"type":"writeResult","opId":"bo-msg-0001","status":"redirect","reason":"no_quorum","region":"us-east-1"}"#;
        assert_eq!(
            runner.on_text(&mut session, redirect),
            vec![Step::End(DisconnectReason::Redirected {
                from: "us-east-1".into()
            })]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn heartbeats_take_turns_naming_each_auction_and_room_watched() {
        let (mut runner, _client, _events) = ClientBuilder::new("ws://x")
            .subscribe(AuctionId::new("lot-1").unwrap())
            .join(Topic::parse("chat:lobby").unwrap())
            .parts();
        let named: Vec<String> = (0..4).map(|_| runner.next_heartbeat().to_json()).collect();
        let auction = r#"{"action":"heartbeat","auctionId":"lot-1"}"#;
        let room = r#"{"action":"heartbeat","topic":"chat:lobby"}"#;
        assert_eq!(named, [auction, room, auction, room]);
        let (mut alone, _client, _events) = ClientBuilder::new("ws://x").parts();
        assert_eq!(
            alone.next_heartbeat().to_json(),
            r#"{"action":"heartbeat"}"#
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_session_that_lasts_its_stable_time_resets_the_attempts() {
        let (mut runner, mut session, _events) = room_runner();
        runner.attempt = 5;
        let stable_after = runner.config.stable_after;
        tokio::time::advance(stable_after - Duration::from_millis(1)).await;
        runner.on_text(&mut session, &room_state("{}", &[], true, BO));
        runner.on_heartbeat_due(&mut session);
        assert_eq!(runner.attempt, 5, "not yet stable");
        tokio::time::advance(Duration::from_millis(1)).await;
        runner.on_text(&mut session, &room_state("{}", &[], true, BO));
        runner.on_heartbeat_due(&mut session);
        assert_eq!(runner.attempt, 0, "stable: the backoff starts over");
        runner.attempt = 3;
        runner.on_heartbeat_due(&mut session);
        assert_eq!(runner.attempt, 3, "counted stable once per session");
    }

    #[test]
    fn a_seeded_clients_ids_are_a_stream_apart_from_its_timers_for_any_seed() {
        use rand::RngCore;
        for seed in [0, 7, BID_ID_STREAM, u64::MAX] {
            let (mut runner, client, _events) = ClientBuilder::new("ws://x").seed(seed).parts();
            let timers: Vec<u64> = (0..4).map(|_| runner.rng.next_u64()).collect();
            let ids: Vec<u64> = {
                let mut ids = client.ids.lock().unwrap();
                (0..4).map(|_| ids.next_u64()).collect()
            };
            assert_ne!(timers, ids, "seed {seed:#x}");
            let (mut again, _, _) = ClientBuilder::new("ws://x").seed(seed).parts();
            assert_eq!(timers[0], again.rng.next_u64(), "seeded: the same stream");
        }
    }
}
