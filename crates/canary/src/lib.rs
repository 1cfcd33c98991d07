//! The wsdr canary: traffic-independent failure detection for one Region.
//!
//! Every minute (EventBridge) it opens a WebSocket to its own Region's execute-api URL with a
//! canary token, sends `{"action":"heartbeat"}` and expects a `pong` naming the Region, then
//! a `getState` round trip (a backend that answers heartbeats but cannot reach its table is
//! caught). Several probes per run are folded into one datapoint, `App/WebSocketHealth` = 1
//! or 0, published to CloudWatch. The run fails only if it cannot publish, so a canary that
//! cannot report shows as missing data, which the alarm treats as breaching.
//!
//! [`probe`] is a plain library function returning a typed outcome: the CLI (`wsdr probe`)
//! and the lab call it too.

mod config;
mod probe;
mod run;
mod token;

pub use config::{Config, FastRounds};
pub use probe::{probe, ProbeFailure, ProbeSuccess, ProbeTarget, Stage};

/// The probe stages, by name (`probe_stage::Pong`).
pub mod probe_stage {
    pub use crate::probe::Stage::*;
}
pub use run::{fold, Canary, FastReport, RunReport};
pub use token::mint_canary_token;

/// Errors of the canary: configuration at cold start, publishing at run time.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("environment variable {0} is required")]
    MissingVar(&'static str),
    #[error("environment variable {name} is invalid: {reason}")]
    InvalidVar { name: &'static str, reason: String },
    #[error("could not mint the canary token: {0}")]
    Token(String),
    /// The datapoint could not be published: the invocation must fail.
    #[error("could not publish the health datapoint: {0}")]
    Publish(#[from] wsdr_core::Error),
}

impl From<wsdr_aws::env::EnvError> for Error {
    fn from(error: wsdr_aws::env::EnvError) -> Self {
        match error {
            wsdr_aws::env::EnvError::Missing(name) => Error::MissingVar(name),
            wsdr_aws::env::EnvError::Invalid { name, reason } => Error::InvalidVar { name, reason },
        }
    }
}
