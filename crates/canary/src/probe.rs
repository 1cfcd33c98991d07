//! One probe: connect, heartbeat, getState, each bounded by the probe's deadline.

use futures::{SinkExt, StreamExt};
use std::time::Duration;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use wsdr_client::{connect, ConnectError, ConnectOptions, WsStream};
use wsdr_protocol::{parse_server_frame, AuctionId, ClientMessage, ServerFrame, ServerMessage};

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
    /// DNS, TCP, TLS, or a refused handshake (401/403/429/5xx).
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
    send(ws, &ClientMessage::Heartbeat).await?;
    match next_frame(ws, deadline, Stage::Pong).await? {
        ServerMessage::Pong { region, .. } => check_region(target, region)?,
        other => return Err(ProbeFailure::WrongReply(describe(&other))),
    }
    let heartbeat_ms = started.elapsed().as_secs_f64() * 1000.0;
    send(
        ws,
        &ClientMessage::GetState {
            auction_id: target.auction_id.clone(),
        },
    )
    .await?;
    match next_frame(ws, deadline, Stage::State).await? {
        ServerMessage::State { region, .. } => check_region(target, region)?,
        other => return Err(ProbeFailure::WrongReply(describe(&other))),
    }
    Ok(ProbeSuccess {
        heartbeat_ms,
        total_ms: started.elapsed().as_secs_f64() * 1000.0,
    })
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

fn describe(message: &ServerMessage) -> String {
    match message {
        ServerMessage::Error { code, message, .. } => format!("error frame {code}: {message}"),
        other => format!(
            "{} frame",
            other.to_json().split('"').nth(3).unwrap_or("unknown")
        ),
    }
}

async fn send(ws: &mut WsStream, message: &ClientMessage) -> Result<(), ProbeFailure> {
    ws.send(Message::text(message.to_json()))
        .await
        .map_err(|_| ProbeFailure::Closed)
}

/// The next frame of ours, skipping control frames and pushed `bidUpdate`s.
async fn next_frame(
    ws: &mut WsStream,
    deadline: Instant,
    stage: Stage,
) -> Result<ServerMessage, ProbeFailure> {
    loop {
        let frame = match tokio::time::timeout_at(deadline, ws.next()).await {
            Err(_) => return Err(ProbeFailure::Timeout(stage)),
            Ok(None) | Ok(Some(Err(_))) => return Err(ProbeFailure::Closed),
            Ok(Some(Ok(frame))) => frame,
        };
        let text = match frame {
            Message::Text(text) => text,
            Message::Close(_) => return Err(ProbeFailure::Closed),
            Message::Binary(_) => return Err(ProbeFailure::WrongReply("binary frame".into())),
            _ => continue,
        };
        match parse_server_frame(&text) {
            Ok(ServerFrame::GatewayError { message }) => {
                return Err(ProbeFailure::GatewayError(message))
            }
            Ok(ServerFrame::Message(ServerMessage::BidUpdate { .. })) => continue,
            Ok(ServerFrame::Message(message)) => return Ok(message),
            Err(e) => return Err(ProbeFailure::WrongReply(e.message)),
        }
    }
}
