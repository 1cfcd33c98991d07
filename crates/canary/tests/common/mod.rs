//! A local WebSocket "Region" for the canary's tests (port 0): it behaves well, refuses the
//! handshake, never answers, answers with API Gateway's internal-error frame, answers slowly,
//! names the wrong Region, or answers heartbeats but fails getState.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

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
}

pub const STATE: &str = r#"{"type":"state","region":"us-east-1","auction":{"id":"canary","item":"probe","highBid":null,"bidCount":0,"version":0},"you":{"userId":"canary:us-east-1","lastBid":null}}"#;

pub async fn server(behavior: Behavior) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/prod", listener.local_addr().unwrap());
    let connections = Arc::new(AtomicUsize::new(0));
    let tokens = Arc::new(Mutex::new(Vec::new()));
    let (count, seen) = (connections.clone(), tokens.clone());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            let n = count.fetch_add(1, Ordering::SeqCst);
            let seen = seen.clone();
            tokio::spawn(async move {
                if let Behavior::DropFirst(k) = behavior {
                    if n < k {
                        return; // TCP accepted, then closed: the handshake fails
                    }
                }
                let callback =
                    |request: &Request, response: Response| -> Result<Response, ErrorResponse> {
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
    }
}
