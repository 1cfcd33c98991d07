//! The wsdr WebSocket handler Lambda, one function behind every route of the API:
//! `$connect`, `$disconnect`, `bid`, `getState`, `heartbeat` and `$default`.
//!
//! `main.rs` only wires: [`Config::from_env`], the SDK clients ([`app_from_aws`]), then
//! [`App::handle`] for every event. The handler is testable in-process with any adapters.

mod config;
mod handler;
pub mod stream;

pub use config::{Config, SeedAuction};
pub use handler::App;

#[cfg(feature = "aws")]
mod aws;
#[cfg(feature = "aws")]
pub use aws::app_from_aws;

/// Errors of the cold start. Requests themselves never fail (see [`App::handle`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("environment variable {0} is required")]
    MissingVar(&'static str),
    #[error("environment variable {name} is invalid: {reason}")]
    InvalidVar { name: &'static str, reason: String },
    #[error("could not seed auction: {0}")]
    Seed(#[from] wsdr_core::Error),
}

impl From<wsdr_aws::env::EnvError> for Error {
    fn from(error: wsdr_aws::env::EnvError) -> Self {
        match error {
            wsdr_aws::env::EnvError::Missing(name) => Error::MissingVar(name),
            wsdr_aws::env::EnvError::Invalid { name, reason } => Error::InvalidVar { name, reason },
        }
    }
}
