#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
//!
//! ## Modules
//!
//! The client side of wsdr's failover, reusable by any Rust app, the lab's simulated users and
//! the benchmarks.
//!
//! - [`transport`] opens one WebSocket and says precisely why it could not (DNS, TCP, TLS,
//!   handshake refused with a status, timeout); the canary shares it.
//! - [`ClientBuilder`] starts a reconnecting client: application heartbeat with the
//!   "2 consecutive non-pong replies = broken" rule, exponential backoff with full jitter,
//!   `getState` after every reconnect, and replay of unconfirmed bids by `bidId`.
//! - [`Fallback`] adds client-assisted failover: the Regions' own endpoints when the global
//!   name's Region keeps failing, and a hysteresis back to the global name.

mod backoff;
mod client;
pub mod codes;
pub mod exchange;
mod fallback;
pub mod give_up;
pub mod heartbeat;
pub mod moves;
pub mod offline;
pub mod ops;
pub mod topics;
pub mod transport;

pub use backoff::Backoff;
pub use client::{
    Client, ClientBuilder, ClientConfig, ClientError, DisconnectReason, Event, OfflineBids,
    StaticToken, SystemWallClock, TokenError, TokenFn, TokenProvider, WallClock,
};
pub use codes::ReasonCode;
pub use fallback::{Decision, EndpointPolicy, Fallback, ProbeResult, RegionalEndpoint, Target};
/// The boxed future a [`TokenProvider`] returns.
pub use futures::future::BoxFuture;
pub use transport::{connect, ConnectError, ConnectOptions, TokenPlacement, WsStream};
/// The protocol crate itself, for the rest of its types.
pub use wsdr_protocol as protocol;
/// The protocol types the client's API speaks, so that an app needs no other wsdr crate.
pub use wsdr_protocol::{Amount, AuctionId, AuctionView, BidId, BidStatus, HighBidView, YouView};
