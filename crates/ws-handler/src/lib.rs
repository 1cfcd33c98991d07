//! The wsdr WebSocket handler Lambda, one function behind every route of the API:
//! `$connect`, `$disconnect`, `bid`, `getState`, `heartbeat` and `$default`.
//!
//! `main.rs` only wires: [`Config::from_env`], the SDK clients ([`app_from_aws`]), then
//! [`App::handle_any`] for every event. The handler is testable in-process with any adapters.

mod config;
mod handler;
pub mod stream;

pub use config::{Config, SeedAuction};
pub use handler::{App, FailoverOrders};

#[cfg(feature = "aws")]
mod aws;
#[cfg(feature = "aws")]
pub use aws::app_from_aws;

/// Errors of the cold start. Requests themselves never fail (see [`App::respond`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting missing or malformed (the one configuration error of every Lambda).
    #[error(transparent)]
    Config(#[from] wsdr_lambda::env::EnvError),
    #[error("could not seed auction: {0}")]
    Seed(#[from] wsdr_core::Error),
}
