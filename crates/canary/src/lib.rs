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
pub use probe::{counts_as_up, probe, ProbeFailure, ProbeSuccess, ProbeTarget, Stage};

/// The probe stages, by name (`probe_stage::Pong`).
pub mod probe_stage {
    pub use crate::probe::Stage::*;
}
pub use run::{fold, Canary, FastReport, RunReport};
pub use token::mint_canary_token;

/// Errors of the canary: configuration at cold start, publishing at run time.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting missing or malformed (the one configuration error of every Lambda).
    #[error(transparent)]
    Config(#[from] wsdr_lambda::env::EnvError),
    #[error("could not mint the canary token: {0}")]
    Token(String),
    /// The datapoint could not be published: the invocation must fail.
    #[error("could not publish the health datapoint: {0}")]
    Publish(#[from] wsdr_core::Error),
}
