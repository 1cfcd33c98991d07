//! The client side of wsdr's failover.
//!
//! [`transport`] opens one WebSocket and says precisely why it could not (DNS, TCP, TLS,
//! handshake refused with a status, timeout); the canary and the reconnecting client share it.

pub mod transport;

pub use transport::{connect, ConnectError, ConnectOptions, TokenPlacement, WsStream};
