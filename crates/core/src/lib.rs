//! The wsdr domain: a real-time auction whose state survives a Regional failover.
//!
//! The service ([`AuctionService`]) speaks to the world only through ports ([`ports`]):
//! a state store (replicated between Regions), a regional connection registry, a notifier
//! that pushes frames to connections, and a clock. The `memory` adapters (feature `memory`)
//! implement every port for tests and the lab; `wsdr-aws` implements them on DynamoDB and API
//! Gateway.
//! Nothing here depends on an AWS crate.
//!
//! State is keyed by the user (the JWT `sub`), never by the connection id. Every Region's copy
//! of a bid is its own item keyed by (auction, bidder, bidId, Region), and each Region keeps
//! its own summary item (a counter and a max register) that no other Region writes: bids are
//! idempotent, no write can replace another user's bid, and two Regions that both accept bids
//! during a split converge to the same high bid (see docs/DATA_MODEL.md).

pub mod auction_store;
mod error;
pub mod evacuate;
pub mod failover_order;
pub mod fanout;
pub mod items;
pub mod laws;
#[cfg(any(test, feature = "memory"))]
pub mod memory;
pub mod model;
pub mod ports;
pub mod push;
pub mod read;
mod service;
pub mod topics;
pub mod verdict;
pub mod write;

pub use auction_store::{BidCommit, LedgerStore, StateStore};
pub use error::Error;
pub use evacuate::{evacuate, herd_window, Evacuation, EvacuationReport, SlotPlan};
pub use failover_order::{
    run_order, Declined, OrderChecks, OrderOutcome, OrderPorts, OrderTimes, SessionMover,
};
pub use fanout::{FanoutConfig, FanoutReport};
pub use items::{StoredHead, StoredOp, StoredSummary, TopicKey};
pub use model::{
    held_bids, Auction, AuctionSnapshot, BidRecord, ConnectionId, Consistency, LastBid, LedgerHead,
    Principal, RegionSummary, UserId, LEDGER,
};
pub use ports::{
    Advance, Census, Clock, CommitOutcome, Connections, Entropy, HeadStore, HealthDatapoint,
    HealthLedger, Metrics, Notifier, OpCommit, OpStore, OrderLog, Pause, SeededEntropy,
    SystemClock, ThreadEntropy, TokioPause, VerdictDatapoint,
};
pub use push::{
    PushJob, PushLeases, PushQueue, PushSettings, PushWorker, Pusher, SubscriberPage,
    SUBSCRIBER_SHARDS,
};
pub use service::{AuctionService, BidReason, HerdHint, Reply};
pub use verdict::{
    resumed_verdict, FailoverRule, FastVerdict, HealthRoute, Judged, VerdictAnswer, VerdictSource,
    SEARCH_STRING, STALE_AFTER_MS,
};

/// Result of every fallible domain operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How long a connection record lives without a `$disconnect`: API Gateway's 2-hour maximum
/// connection duration plus half an hour of slack (records then expire by TTL).
pub const DEFAULT_CONNECTION_TTL_MS: u64 = 150 * 60 * 1000;
