//! The wsdr kit: the machinery that lets any WebSocket app's state survive a Regional
//! failover. Apps ride it (`crates/apps/`: the auction, the chat room); it never names one.
//!
//! The front door ([`Gateway`]) and each app's service ([`topics::AppService`]) speak to the
//! world only through ports ([`ports`]): a store of ops and summaries (replicated between
//! Regions), a regional connection registry, a notifier that pushes frames to connections,
//! and a clock. The `memory` adapters (feature `memory`) implement every port for tests and
//! the lab; `wsdr-aws` implements them on DynamoDB and API Gateway. Nothing here depends on
//! an AWS crate.
//!
//! State is keyed by the user (the JWT `sub`), never by the connection id. Every Region's copy
//! of an op is its own item keyed by (topic, author, op id, Region), and each Region keeps its
//! own summary item that no other Region writes: ops are idempotent, no write can replace
//! another user's op, and two Regions that both accept ops during a split converge (see
//! docs/DATA_MODEL.md and docs/KIT.md).

mod error;
pub mod evacuate;
pub mod failover_order;
pub mod fanout;
mod gateway;
pub mod items;
pub mod laws;
#[cfg(any(test, feature = "memory"))]
pub mod memory;
pub mod model;
pub mod ports;
pub mod push;
pub mod read;
#[cfg(test)]
mod test_apps;
pub mod topics;
pub mod verdict;
pub mod write;

pub use error::Error;
pub use evacuate::{evacuate, herd_window, Evacuation, EvacuationReport, SlotPlan};
pub use failover_order::{
    run_order, Declined, OrderChecks, OrderOutcome, OrderPorts, OrderTimes, SessionMover,
};
pub use fanout::{FanoutConfig, FanoutReport};
pub use gateway::{AppFrames, Gateway, HerdHint, Reply};
pub use items::{StoredHead, StoredOp, StoredSummary, TopicKey};
pub use model::{ConnectionId, Consistency, Principal, UserId, LEDGER};
pub use ports::{
    Advance, Census, Clock, CommitOutcome, Connections, Entropy, HeadStore, HealthDatapoint,
    HealthLedger, Metrics, Notifier, OpCommit, OpStore, OrderLog, Pause, SeededEntropy,
    SystemClock, ThreadEntropy, TokioPause, VerdictDatapoint,
};
pub use push::{
    PushJob, PushLeases, PushQueue, PushSettings, PushWorker, Pusher, SubscriberPage,
    SUBSCRIBER_SHARDS,
};
pub use verdict::{
    resumed_verdict, FailoverRule, FastVerdict, HealthRoute, Judged, VerdictAnswer, VerdictSource,
    SEARCH_STRING, STALE_AFTER_MS,
};

/// Result of every fallible domain operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How long a connection record lives without a `$disconnect`: API Gateway's 2-hour maximum
/// connection duration plus half an hour of slack (records then expire by TTL).
pub const DEFAULT_CONNECTION_TTL_MS: u64 = 150 * 60 * 1000;
