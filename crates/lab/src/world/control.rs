//! The lab's HTTP control API: status and fault injection (used by `wsdr fault`, the
//! control room page, and anyone with curl).
//!
//! - `GET  /` (and `/app.js`, `/wsdr-client.js`, `/style.css`): the live auction page and
//!   control room (`web/`, compiled into the binary so the lab serves it from anywhere)
//! - `GET  /api/status` -> [`crate::world::lab::Status`] as JSON
//! - `GET  /api/config` -> what the page needs: global name, Regions' own endpoints, scale
//! - `GET  /api/token?sub=<user>` -> `{"token": ...}`: a lab user token (the lab's own issuer;
//!   nothing like it exists in a deployment, where tokens come from the app's identity provider)
//! - `POST /api/fault` with `{"kind": <kind>, "region": 0|1, "ms": <AWS ms>, "percent": 0..100,
//!   "from": 0|1}`; kinds: `down`, `throttle`, `partition`, `lag` (ms), `never-returns`,
//!   `ack-lost` (percent), `store-throttle` (percent), `store-outage`, `connections-throttle`
//!   (percent), `disconnect-dropped`, `skew` (ms, may be negative), `one-way` (from),
//!   `sticky-dns` (ms: how long answers are kept), `slow` (ms), `heal` (docs/LAB.md)

use crate::world::lab::{Fault, Lab};
use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Deserialize)]
pub struct FaultRequest {
    pub kind: String,
    #[serde(default)]
    pub region: usize,
    /// AWS milliseconds (`lag`, `skew` (signed), `sticky-dns`, `slow`).
    #[serde(default)]
    pub ms: i64,
    /// `ack-lost`, `store-throttle`, `connections-throttle`: share affected, 0 to 100
    /// (default 50).
    #[serde(default)]
    pub percent: Option<u8>,
    /// `one-way`: the Region whose outgoing replication is cut (default `region`).
    #[serde(default)]
    pub from: Option<usize>,
}

/// Parse a fault request; errors are for the HTTP 400 body.
pub fn parse_fault(request: &FaultRequest) -> Result<Fault, String> {
    let region = request.region;
    if region > 1 || request.from.is_some_and(|f| f > 1) {
        return Err("region must be 0 (primary) or 1 (secondary)".into());
    }
    let percent = match request.percent {
        Some(p) if p > 100 => return Err("percent must be 0 to 100".into()),
        Some(p) => p,
        None => 50,
    };
    let non_negative_ms =
        || u64::try_from(request.ms).map_err(|_| format!("`{}` needs ms >= 0", request.kind));
    match request.kind.as_str() {
        "down" => Ok(Fault::Down(region)),
        "throttle" => Ok(Fault::Throttle(region)),
        "partition" => Ok(Fault::Partition),
        "lag" => Ok(Fault::Lag(Duration::from_millis(non_negative_ms()?))),
        "never-returns" => Ok(Fault::NeverReturns(region)),
        "ack-lost" => Ok(Fault::AckLost { region, percent }),
        "store-throttle" => Ok(Fault::StoreThrottle { region, percent }),
        "store-outage" => Ok(Fault::StoreOutage(region)),
        "connections-throttle" => Ok(Fault::ConnectionsThrottle { region, percent }),
        "disconnect-dropped" => Ok(Fault::DisconnectDropped(region)),
        "skew" => Ok(Fault::Skew {
            region,
            ms: request.ms,
        }),
        "one-way" => Ok(Fault::OneWay {
            from: request.from.unwrap_or(region),
        }),
        "sticky-dns" => Ok(Fault::StickyDns(Duration::from_millis(non_negative_ms()?))),
        "slow" => Ok(Fault::Slow {
            region,
            ms: non_negative_ms()?,
        }),
        "heal" => Ok(Fault::Heal),
        other => Err(format!(
            "unknown fault `{other}`: {}, heal",
            crate::world::lab::FAULT_KINDS.join(", ")
        )),
    }
}

const INDEX_HTML: &str = include_str!("../../../../web/index.html");
const APP_JS: &str = include_str!("../../../../web/app.js");
const CLIENT_JS: &str = include_str!("../../../../web/wsdr-client.js");
const STYLE_CSS: &str = include_str!("../../../../web/style.css");

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

pub fn router(lab: Arc<Lab>) -> Router {
    Router::new()
        .route(
            "/",
            get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) }),
        )
        .route(
            "/app.js",
            get(|| async { asset("text/javascript", APP_JS) }),
        )
        .route(
            "/wsdr-client.js",
            get(|| async { asset("text/javascript", CLIENT_JS) }),
        )
        .route("/style.css", get(|| async { asset("text/css", STYLE_CSS) }))
        .route("/api/config", get(config))
        .route("/api/token", get(token))
        .route("/api/status", get(status))
        .route("/api/fault", post(fault))
        .with_state(lab)
}

/// Serve the control API on `addr` (use port 0 in tests).
pub async fn serve(lab: Arc<Lab>, addr: SocketAddr) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = router(lab);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(bound)
}

async fn config(State(lab): State<Arc<Lab>>) -> Response {
    let regions: Vec<serde_json::Value> = lab
        .config
        .regions
        .iter()
        .zip(&lab.regions)
        .map(|(name, region)| serde_json::json!({"region": name, "url": region.url()}))
        .collect();
    Json(serde_json::json!({
        "front_door": lab.front_door_url(),
        "regions": regions,
        "time_scale": lab.config.scale.factor(),
        "auction": "lot-1",
    }))
    .into_response()
}

#[derive(Debug, Deserialize)]
pub struct TokenRequest {
    pub sub: String,
}

/// A user id the lab will mint a token for: 1 to 64 of `[A-Za-z0-9_-]`.
pub fn valid_sub(sub: &str) -> bool {
    (1..=64).contains(&sub.len())
        && sub
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

async fn token(State(lab): State<Arc<Lab>>, Query(request): Query<TokenRequest>) -> Response {
    if !valid_sub(&request.sub) {
        return (
            StatusCode::BAD_REQUEST,
            "sub must be 1 to 64 characters of A-Z, a-z, 0-9, - and _",
        )
            .into_response();
    }
    Json(serde_json::json!({"token": lab.user_token(&request.sub)})).into_response()
}

async fn status(State(lab): State<Arc<Lab>>) -> Response {
    Json(lab.status()).into_response()
}

async fn fault(State(lab): State<Arc<Lab>>, Json(request): Json<FaultRequest>) -> Response {
    match parse_fault(&request) {
        Ok(fault) => {
            lab.fault(fault);
            Json(lab.status()).into_response()
        }
        Err(message) => (StatusCode::BAD_REQUEST, message).into_response(),
    }
}

/// A minimal HTTP/1.1 POST for `wsdr fault` (the lab's control API is plain HTTP on
/// loopback; no client library needed). Returns the status and the body.
pub async fn post_json(addr: SocketAddr, path: &str, body: &str) -> anyhow::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
    Ok((status, body))
}
