//! A local WebSocket "Region" for the canary's tests (port 0): it behaves well, refuses the
//! handshake, never answers, answers with API Gateway's internal-error frame, answers slowly,
//! names the wrong Region, or answers heartbeats but fails getState.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::result_large_err
)]

use futures::{SinkExt, StreamExt};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::tungstenite::Message;

#[derive(Clone, Copy, Debug)]
pub enum Behavior {
    Good,
    Refuse(u16),
    Silent,
    GatewayError,
    Slow(Duration),
    WrongRegion,
    HeartbeatOnly,
    /// The first N connections are dropped at once, later ones are good.
    DropFirst(usize),
}

pub struct Server {
    pub url: String,
    pub connections: Arc<AtomicUsize>,
    pub tokens: Arc<Mutex<Vec<String>>>,
    /// Each handshake's `Sec-WebSocket-Protocol` offer (the subprotocol placement's token).
    pub protocols: Arc<Mutex<Vec<String>>>,
}

pub const STATE: &str = r#"{"type":"state","region":"us-east-1","auction":{"id":"canary","item":"probe","highBid":null,"bidCount":0,"version":0},"you":{"userId":"canary:us-east-1","lastBid":null}}"#;

/// A Region on loopback TCP.
pub async fn server(behavior: Behavior) -> Server {
    server_on(&wsdr_net::Network::Tcp, behavior).await
}

/// A Region on `network` (an in-memory one runs on paused time).
pub async fn server_on(network: &wsdr_net::Network, behavior: Behavior) -> Server {
    let mut listener = network.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let url = format!("ws://{}/prod", listener.local_addr().unwrap());
    let connections = Arc::new(AtomicUsize::new(0));
    let tokens = Arc::new(Mutex::new(Vec::new()));
    let protocols = Arc::new(Mutex::new(Vec::new()));
    let (count, seen, offers) = (connections.clone(), tokens.clone(), protocols.clone());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let n = count.fetch_add(1, Ordering::SeqCst);
            let (seen, offers) = (seen.clone(), offers.clone());
            tokio::spawn(async move {
                if let Behavior::DropFirst(k) = behavior {
                    if n < k {
                        return; // TCP accepted, then closed: the handshake fails
                    }
                }
                let callback = |request: &Request,
                                mut response: Response|
                 -> Result<Response, ErrorResponse> {
                    let offer = request.headers().get("sec-websocket-protocol");
                    if let Some(offer) = offer {
                        offers
                            .lock()
                            .unwrap()
                            .push(offer.to_str().unwrap().to_owned());
                        // API Gateway's answer to an offer: the protocol's name.
                        response
                            .headers_mut()
                            .insert("sec-websocket-protocol", "wsdr".parse().unwrap());
                    }
                    if let Some(q) = request.uri().query() {
                        seen.lock()
                            .unwrap()
                            .push(q.trim_start_matches("token=").to_owned());
                    }
                    if let Behavior::Refuse(status) = behavior {
                        let mut refusal = ErrorResponse::new(Some("refused".into()));
                        *refusal.status_mut() = StatusCode::from_u16(status).unwrap();
                        return Err(refusal);
                    }
                    Ok(response)
                };
                let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(stream, callback).await else {
                    return;
                };
                while let Some(Ok(Message::Text(text))) = ws.next().await {
                    let reply = match (behavior, text.contains("heartbeat")) {
                        (Behavior::Silent, _) => continue,
                        (Behavior::GatewayError, _) => r#"{"message": "Internal server error", "connectionId":"abc=", "requestId":"r1"}"#.to_owned(),
                        (Behavior::Slow(d), true) => {
                            tokio::time::sleep(d).await;
                            r#"{"type":"pong","region":"us-east-1","ts":1}"#.to_owned()
                        }
                        (Behavior::WrongRegion, true) => r#"{"type":"pong","region":"us-west-2","ts":1}"#.to_owned(),
                        (Behavior::HeartbeatOnly, false) => r#"{"type":"error","code":"internal","message":"try again","region":"us-east-1"}"#.to_owned(),
                        (_, true) => r#"{"type":"pong","region":"us-east-1","ts":1}"#.to_owned(),
                        (_, false) => STATE.to_owned(),
                    };
                    if ws.send(Message::text(reply)).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    Server {
        url,
        connections,
        tokens,
        protocols,
    }
}
