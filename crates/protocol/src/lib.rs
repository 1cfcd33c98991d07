//! The wsdr wire protocol: what clients send, what servers answer, and the limits both sides
//! enforce. Pure data and parsing, no I/O, so the Lambda handler, the client, the canary and
//! the lab all agree byte for byte. See `docs/PROTOCOL.md`.
//!
//! Parsing is total: [`parse_client_message`] turns *any* byte string into either a
//! [`ClientMessage`] or a [`ProtocolError`] with a stable [`ErrorCode`], never a panic.

mod client;
pub mod digest;
mod error;
pub mod hostile;
mod ids;
pub mod limits;
mod server;

pub use client::{parse_client_message, ClientMessage};
pub use digest::{bid_digest, canonical_json, Digest};
pub use error::{ErrorCode, ProtocolError};
pub use ids::{Amount, AuctionId, BidId, Namespace, OpId, Topic, TopicName};
pub use server::{
    dominates, higher_bid, merge_versions, minimum_next_bid, parse_server_frame, AuctionView,
    BidStatus, HighBidView, LastBidView, OpView, OwnBidView, ServerFrame, ServerMessage,
    SettledBidView, SettledCopyView, SettledOpCopyView, SettledOpView, TopicYouView, Versions,
    WriteStatus, YouView, GATEWAY_INTERNAL_ERROR,
};
