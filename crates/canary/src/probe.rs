//! One probe: connect, heartbeat, getState, each bounded by the probe's deadline.

use std::time::Duration;
use tokio::time::Instant;
use wsdr_client::exchange::{self, ExchangeError};
use wsdr_client::{connect, ConnectError, ConnectOptions, WsStream};
use wsdr_protocol::{AuctionId, ClientMessage, ServerMessage};

/// What to probe.
#[derive(Debug, Clone)]
pub struct ProbeTarget {
    /// The Region's own execute-api URL (`wss://{apiId}.execute-api.{region}.amazonaws.com/{stage}`),
    /// never the failover name: the canary judges one Region.
    pub url: String,
    /// The Region the `pong` must name.
    pub expected_region: String,
    /// The auction read by the `getState` round trip.
    pub auction_id: AuctionId,
    /// Bound on the whole probe.
    pub timeout: Duration,
}

/// A healthy probe.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeSuccess {
    /// Connect to pong, in milliseconds.
    pub heartbeat_ms: f64,
    /// Connect to state, in milliseconds.
    pub total_ms: f64,
}

/// Which exchange a probe was waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Connect,
    Pong,
    State,
}

/// Why a probe failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeFailure {
    /// DNS, TCP, TLS, or a refused handshake (401/403/429/5xx; a 429 counts as up:
    /// [`ProbeFailure::is_up_and_busy`]).
    #[error("connect: {0}")]
    Connect(ConnectError),
    #[error("timed out waiting for {0:?}")]
    Timeout(Stage),
    /// API Gateway answered instead of our Lambda (integration failed or throttled).
    #[error("API Gateway error frame: {0}")]
    GatewayError(String),
    #[error("unexpected reply: {0}")]
    WrongReply(String),
    #[error("reply from {got}, expected {expected}")]
    WrongRegion { expected: String, got: String },
    #[error("connection closed before a reply")]
    Closed,
}

impl ProbeFailure {
    /// The Region's API answered the handshake with 429: its new-connection quota is spent
    /// (a reconnect herd arriving, a flood), so the Region is up and busy, not down. Every
    /// verdict counts it as a healthy probe: failing a busy Region over would send its herd
    /// back to the Region it is fleeing (Route 53 answers the primary when the secondary is
    /// unhealthy too), and the clients already read 429 as "a healthy Region's quota".
    pub fn is_up_and_busy(&self) -> bool {
        matches!(
            self,
            ProbeFailure::Connect(ConnectError::Refused { status: 429 })
        )
    }
}

/// A probe's outcome as the verdicts count it: a success, or a 429 (up and busy).
pub fn counts_as_up(outcome: &Result<ProbeSuccess, ProbeFailure>) -> bool {
    match outcome {
        Ok(_) => true,
        Err(failure) => failure.is_up_and_busy(),
    }
}

/// Run one probe against `target`, authenticating with `options.token`.
pub async fn probe(
    target: &ProbeTarget,
    options: &ConnectOptions,
) -> Result<ProbeSuccess, ProbeFailure> {
    let started = Instant::now();
    let deadline = started + target.timeout;
    let mut options = options.clone();
    options.timeout = target.timeout;
    let mut ws = match tokio::time::timeout_at(deadline, connect(&target.url, &options)).await {
        Ok(Ok(ws)) => ws,
        Ok(Err(ConnectError::Timeout(_))) | Err(_) => {
            return Err(ProbeFailure::Timeout(Stage::Connect))
        }
        Ok(Err(e)) => return Err(ProbeFailure::Connect(e)),
    };
    let result = exchange(&mut ws, target, started, deadline).await;
    // Close politely but never wait on it: the verdict is already made.
    let _ = tokio::time::timeout(Duration::from_millis(200), ws.close(None)).await;
    result
}

async fn exchange(
    ws: &mut WsStream,
    target: &ProbeTarget,
    started: Instant,
    deadline: Instant,
) -> Result<ProbeSuccess, ProbeFailure> {
    // The heartbeat round trip the client's probe of the global name uses too.
    let region = wsdr_client::exchange::heartbeat(ws, deadline)
        .await
        .map_err(|e| failure(e, Stage::Pong))?;
    check_region(target, region)?;
    let heartbeat_ms = started.elapsed().as_secs_f64() * 1000.0;
    exchange::send(
        ws,
        &ClientMessage::GetState {
            auction_id: target.auction_id.clone(),
            bid_ids: Vec::new(),
        },
    )
    .await
    .map_err(|e| failure(e, Stage::State))?;
    match exchange::next_message(ws, deadline)
        .await
        .map_err(|e| failure(e, Stage::State))?
    {
        ServerMessage::State { region, .. } => check_region(target, region)?,
        other => return Err(ProbeFailure::WrongReply(exchange::describe(&other))),
    }
    Ok(ProbeSuccess {
        heartbeat_ms,
        total_ms: started.elapsed().as_secs_f64() * 1000.0,
    })
}

/// An exchange's failure, named by the stage the probe was in.
fn failure(error: ExchangeError, stage: Stage) -> ProbeFailure {
    match error {
        ExchangeError::Timeout => ProbeFailure::Timeout(stage),
        ExchangeError::Closed => ProbeFailure::Closed,
        ExchangeError::GatewayError(message) => ProbeFailure::GatewayError(message),
        ExchangeError::WrongReply(what) => ProbeFailure::WrongReply(what),
    }
}

fn check_region(target: &ProbeTarget, region: String) -> Result<(), ProbeFailure> {
    if region == target.expected_region {
        Ok(())
    } else {
        Err(ProbeFailure::WrongRegion {
            expected: target.expected_region.clone(),
            got: region,
        })
    }
}
