//! A fake Region: a WebSocket server on 127.0.0.1:0 that speaks the wsdr protocol and can
//! be told to misbehave (silence, API Gateway error frames, slow pongs, lost acks, refused
//! handshakes, dropped sockets, another Region's label).
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::result_large_err
)]

use futures::{SinkExt, StreamExt};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::broadcast;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    Normal,
    Silent,
    GatewayErrors,
    SlowPong(Duration),
    /// Record bids but never answer them (the Region dies before the ack).
    LoseBidResults,
    /// Answer every bid `rejected / too_low` without recording it (a Region that has seen a
    /// higher bid and not yet the first copy of a replayed one).
    RejectBids,
    /// Answer every bid `unknown` without recording it (a store failure during the write).
    UnknownBids,
}

#[derive(Debug, Clone, Copy)]
pub enum Kill {
    Abrupt,
    Code(u16),
}

pub struct Inner {
    pub region: String,
    pub mode: Mode,
    pub refuse: Option<u16>,
    /// bidId -> (amount, times received)
    pub bids: HashMap<String, (u64, u32)>,
    pub high: Option<(u64, String)>,
    pub handshakes: u32,
    pub tokens: Vec<String>,
    /// (bidId, amount) listed in `you.bids` of every `state` (copies seen by replication).
    pub listed: Vec<(String, u64)>,
    pub get_states: u32,
    /// The auction's version vector: sent in `state` frames and in pongs to heartbeats
    /// that name the auction.
    pub versions: Option<serde_json::Value>,
    /// Every `getState` frame received, as sent.
    pub get_state_frames: Vec<serde_json::Value>,
    /// Each close frame received: its code (`None`: a close frame without one).
    pub closes: Vec<Option<u16>>,
    /// Each handshake's `Sec-WebSocket-Protocol` offer, if any.
    pub protocols: Vec<String>,
    /// Heartbeats received.
    pub heartbeats: u32,
}

#[derive(Clone)]
pub struct FakeRegion {
    pub url: String,
    pub inner: Arc<Mutex<Inner>>,
    kill: broadcast::Sender<Kill>,
    push: broadcast::Sender<String>,
}

impl FakeRegion {
    pub async fn start(region: &str) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}/prod", listener.local_addr().unwrap());
        let inner = Arc::new(Mutex::new(Inner {
            region: region.into(),
            mode: Mode::Normal,
            refuse: None,
            bids: HashMap::new(),
            high: None,
            handshakes: 0,
            tokens: Vec::new(),
            listed: Vec::new(),
            get_states: 0,
            versions: None,
            get_state_frames: Vec::new(),
            closes: Vec::new(),
            protocols: Vec::new(),
            heartbeats: 0,
        }));
        let (kill, _) = broadcast::channel(16);
        let (push, _) = broadcast::channel(16);
        let region = FakeRegion {
            url,
            inner,
            kill,
            push,
        };
        let server = region.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                // No Nagle: with it, a second small frame waits for a (delayed) ACK in real
                // time, and paused tokio time would race ahead meanwhile.
                let _ = stream.set_nodelay(true);
                let server = server.clone();
                tokio::spawn(async move { server.serve(stream).await });
            }
        });
        region
    }

    pub fn set_mode(&self, mode: Mode) {
        self.inner.lock().unwrap().mode = mode;
    }

    pub fn set_region(&self, region: &str) {
        self.inner.lock().unwrap().region = region.into();
    }

    pub fn refuse(&self, status: Option<u16>) {
        self.inner.lock().unwrap().refuse = status;
    }

    pub fn kill_all(&self, how: Kill) {
        let _ = self.kill.send(how);
    }

    /// Send this frame to every open connection (as `@connections` would).
    pub fn push_all(&self, frame: &str) {
        let _ = self.push.send(frame.to_owned());
    }

    pub fn times_received(&self, bid_id: &str) -> u32 {
        self.inner
            .lock()
            .unwrap()
            .bids
            .get(bid_id)
            .map_or(0, |b| b.1)
    }

    /// From now on `state` frames list this bid among the user's standing bids.
    pub fn list_bid(&self, bid_id: &str, amount: u64) {
        self.inner
            .lock()
            .unwrap()
            .listed
            .push((bid_id.to_owned(), amount));
    }

    /// The auction's version vector and high bid from now on (another Region's bid
    /// arrived, say), without pushing anything.
    pub fn set_view(&self, versions: serde_json::Value, high: Option<(u64, &str)>) {
        let mut state = self.inner.lock().unwrap();
        state.versions = Some(versions);
        state.high = high.map(|(amount, id)| (amount, id.to_owned()));
    }

    pub fn get_state_frames(&self) -> Vec<serde_json::Value> {
        self.inner.lock().unwrap().get_state_frames.clone()
    }

    pub fn get_states(&self) -> u32 {
        self.inner.lock().unwrap().get_states
    }

    pub fn closes(&self) -> Vec<Option<u16>> {
        self.inner.lock().unwrap().closes.clone()
    }

    pub fn handshakes(&self) -> u32 {
        self.inner.lock().unwrap().handshakes
    }

    async fn serve(&self, stream: tokio::net::TcpStream) {
        let mut killed = self.kill.subscribe();
        let mut pushed = self.push.subscribe();
        let inner = self.inner.clone();
        let callback =
            move |request: &Request, response: Response| -> Result<Response, ErrorResponse> {
                let mut state = inner.lock().unwrap();
                state.handshakes += 1;
                if let Some(q) = request.uri().query() {
                    state.tokens.push(q.to_owned());
                }
                let offer = request
                    .headers()
                    .get("Sec-WebSocket-Protocol")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                if let Some(status) = state.refuse {
                    let mut refusal = ErrorResponse::new(None);
                    *refusal.status_mut() = StatusCode::from_u16(status).unwrap();
                    return Err(refusal);
                }
                let mut response = response;
                if let Some(offer) = offer {
                    // API Gateway answers a subprotocol offer with the first one offered.
                    let first = offer
                        .split(',')
                        .next()
                        .unwrap_or_default()
                        .trim()
                        .to_owned();
                    response
                        .headers_mut()
                        .insert("Sec-WebSocket-Protocol", first.parse().unwrap());
                    state.protocols.push(offer);
                }
                Ok(response)
            };
        let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(stream, callback).await else {
            return;
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        loop {
            tokio::select! {
                how = killed.recv() => {
                    if let Ok(Kill::Code(code)) = how {
                        let _ = ws.send(Message::Close(Some(CloseFrame { code: CloseCode::from(code), reason: "".into() }))).await;
                    }
                    return; // dropping both halves closes the TCP connection
                }
                Ok(frame) = pushed.recv() => {
                    if ws.send(Message::text(frame)).await.is_err() { return; }
                }
                Some(out) = rx.recv() => {
                    if ws.send(Message::text(out)).await.is_err() { return; }
                }
                frame = ws.next() => {
                    if let Some(Ok(Message::Close(close))) = &frame {
                        self.inner.lock().unwrap().closes.push(close.as_ref().map(|f| u16::from(f.code)));
                    }
                    let Some(Ok(Message::Text(text))) = frame else { return };
                    if let Some(reply) = self.answer(&text, &tx) {
                        if ws.send(Message::text(reply)).await.is_err() { return; }
                    }
                }
            }
        }
    }

    fn answer(
        &self,
        text: &str,
        tx: &tokio::sync::mpsc::UnboundedSender<String>,
    ) -> Option<String> {
        let frame: serde_json::Value = serde_json::from_str(text).ok()?;
        let mut state = self.inner.lock().unwrap();
        if frame["action"] == "heartbeat" {
            state.heartbeats += 1;
        }
        let region = state.region.clone();
        let gateway =
            r#"{"message": "Internal server error", "connectionId": "abc=", "requestId": "r1"}"#
                .to_owned();
        match (state.mode, frame["action"].as_str()?) {
            (Mode::Silent, _) => None,
            (Mode::GatewayErrors, _) => Some(gateway),
            (Mode::SlowPong(delay), "heartbeat") => {
                let tx = tx.clone();
                let pong = format!(r#"{{"type":"pong","region":"{region}","ts":1}}"#);
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let _ = tx.send(pong);
                });
                None
            }
            (_, "heartbeat") => Some(match (frame["auctionId"].as_str(), &state.versions) {
                (Some(auction), Some(versions)) => format!(
                    r#"{{"type":"pong","region":"{region}","ts":1,"auctionId":"{auction}","versions":{versions}}}"#
                ),
                _ => format!(r#"{{"type":"pong","region":"{region}","ts":1}}"#),
            }),
            (_, "getState") => {
                let high = match &state.high {
                    Some((amount, id)) => {
                        format!(r#"{{"amount":{amount},"bidder":"u","bidId":"{id}","at":1}}"#)
                    }
                    None => "null".into(),
                };
                let count = state.bids.len();
                state.get_states += 1;
                state.get_state_frames.push(frame.clone());
                let versions = state
                    .versions
                    .clone()
                    .unwrap_or_else(|| serde_json::json!({}));
                let bids: Vec<String> = state
                    .listed
                    .iter()
                    .map(|(id, amount)| {
                        format!(
                            r#"{{"bidId":"{id}","amount":{amount},"at":1,"regions":["us-west-2"]}}"#
                        )
                    })
                    .collect();
                let bids = bids.join(",");
                Some(format!(
                    r#"{{"type":"state","region":"{region}","auction":{{"id":"lot-1","item":"x","highBid":{high},"bidCount":{count},"version":{count},"versions":{versions}}},"you":{{"userId":"u","lastBid":null,"bids":[{bids}]}}}}"#
                ))
            }
            (mode @ (Mode::RejectBids | Mode::UnknownBids), "bid") => {
                let id = frame["bidId"].as_str()?.to_owned();
                state.bids.entry(id.clone()).or_insert((0, 0)).1 += 1;
                let (status, reason) = if mode == Mode::RejectBids {
                    ("rejected", r#""too_low""#)
                } else {
                    ("unknown", "null")
                };
                Some(format!(
                    r#"{{"type":"bidResult","bidId":"{id}","status":"{status}","reason":{reason},"region":"{region}"}}"#
                ))
            }
            (mode, "bid") => {
                let id = frame["bidId"].as_str()?.to_owned();
                let amount = frame["amount"].as_u64()?;
                let entry = state.bids.entry(id.clone()).or_insert((amount, 0));
                entry.1 += 1;
                let status = if entry.1 == 1 {
                    "accepted"
                } else {
                    "duplicate"
                };
                if state.high.as_ref().is_none_or(|(h, _)| amount > *h) {
                    state.high = Some((amount, id.clone()));
                }
                if mode == Mode::LoseBidResults {
                    return None;
                }
                Some(format!(
                    r#"{{"type":"bidResult","bidId":"{id}","status":"{status}","reason":null,"region":"{region}"}}"#
                ))
            }
            _ => None,
        }
    }
}

/// Wait (on paused time) for the first client event matching `pick`, with a bound.
pub async fn until<T>(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<wsdr_client::Event>,
    within: Duration,
    mut pick: impl FnMut(&wsdr_client::Event) -> Option<T>,
) -> T {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let event = tokio::time::timeout_at(deadline, events.recv())
            .await
            .unwrap_or_else(|_| panic!("no matching event within {within:?}"))
            .expect("client stopped");
        if let Some(found) = pick(&event) {
            return found;
        }
    }
}
