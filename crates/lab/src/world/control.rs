//! The lab's HTTP control API: status and fault injection (used by `wsdr fault`, the
//! control room page, and anyone with curl).
//!
//! With a control token (`wsdr lab --allow-remote`), `/api/*` and `/metrics` need it
//! (`Authorization: Bearer <token>` or `?token=`); on loopback there is none.
//!
//! - `GET  /` (and `/app.js`, `/wsdr-client.js`, `/style.css`): the live auction page and
//!   control room (`web/`, compiled into the binary so the lab serves it from anywhere)
//! - `GET  /api/status` -> [`crate::world::Status`] as JSON
//! - `GET  /metrics` -> the same in Prometheus text format ([`crate::world::prometheus`])
//! - `POST /api/evacuate` with `{"region": 0|1|"<name>", "planned": true, "reason": "..."}`:
//!   (planned) take the Region out of DNS and wait for the name to answer the other one, then
//!   tell every connection to move (`moveTo`) paced to the destination's quota; answers the
//!   evacuation report
//! - `POST /api/service` with `{"region": ..., "in_service": true|false}`: a Region out of
//!   DNS, or back in
//! - `GET  /api/config` -> what the page needs: global name, Regions' own endpoints, scale
//! - `GET  /api/token?sub=<user>` -> `{"token": ...}`: a lab user token (ES256, one hour) from
//!   the lab's identity provider, which lives in a Region (the primary's by default) and
//!   answers 503 while that Region is down, as a sign-in would fail
//! - `POST /api/fault` with `{"kind": <kind>, "region": 0|1|"primary"|"secondary"|"<Region name>", "ms": <AWS ms>,
//!   "percent": 0..100, "from": 0|1|"<Region name>"}`; kinds: `down`, `throttle`, `partition`, `lag` (ms), `never-returns`,
//!   `ack-lost` (percent), `store-throttle` (percent), `store-outage`, `connections-throttle`
//!   (percent), `disconnect-dropped`, `skew` (ms, may be negative), `one-way` (from),
//!   `sticky-dns` (ms: how long answers are kept), `slow` (ms), `isolate`, `connect-quota`
//!   (percent of the quota left), `watcher-silent` (ms), `inter-region-partition`,
//!   `health-flood` (percent refused), `orders-duplicated` (copies), `orders-lost`,
//!   `concurrency-exhausted` (ms, 0: until heal), `heal`
//!   (docs/LAB.md)
//! - `GET  /api/rehearsal` -> the rehearsal pair's state (`wsdr rehearse`): the test name's
//!   answer from its own resolver, its records' health, and every endpoint check's status by
//!   the template's name; 404 when the configuration deploys no rehearsal pair
//! - `POST /api/rehearsal/verdict` with `{"view": "self"|"judge", "serve": true|false}`: a
//!   rehearsal verdict written in its Region (503 while that Region is down)

pub use crate::world::fault::{FaultRequest, RegionRef};
use crate::world::World;
use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

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

pub fn router(lab: Arc<World>) -> Router {
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
        .route("/api/evacuate", post(evacuate))
        .route("/api/service", post(service))
        .route("/api/rehearsal", get(rehearsal))
        .route("/api/rehearsal/verdict", post(rehearsal_verdict))
        .route("/metrics", get(metrics))
        .with_state(lab)
}

/// Serve the control API on `addr` (use port 0 in tests), open to whoever reaches it: for
/// loopback addresses.
pub async fn serve(lab: Arc<World>, addr: SocketAddr) -> anyhow::Result<SocketAddr> {
    serve_with_token(lab, addr, None).await
}

/// A fresh control token: 128 random bits, hex.
pub fn new_control_token() -> String {
    use rand::Rng;
    let bytes: [u8; 16] = rand::rng().random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Serve the control API; with a token, every `/api/*` and `/metrics` request must carry it
/// (`Authorization: Bearer <token>`, or `?token=` for the page's first load and curl).
pub async fn serve_with_token(
    lab: Arc<World>,
    addr: SocketAddr,
    token: Option<String>,
) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = match token {
        Some(token) => {
            let token = Arc::new(token);
            router(lab).layer(axum::middleware::from_fn(
                move |request: axum::extract::Request, next: axum::middleware::Next| {
                    let token = token.clone();
                    async move { require_token(&token, request, next).await }
                },
            ))
        }
        None => router(lab),
    };
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            tracing::error!(%error, "the control API stopped serving");
        }
    });
    Ok(bound)
}

async fn require_token(
    token: &str,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let path = request.uri().path();
    if !(path.starts_with("/api/") || path == "/metrics") {
        return next.run(request).await;
    }
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    let query = request.uri().query().and_then(|q| {
        q.split('&')
            .find_map(|pair| pair.strip_prefix("token="))
            .map(str::to_owned)
    });
    let presented = bearer.or(query).unwrap_or_default();
    if same_secret(presented.as_bytes(), token.as_bytes()) {
        next.run(request).await
    } else {
        (
            StatusCode::UNAUTHORIZED,
            "this lab's control API needs the control token it printed at start (Authorization: Bearer <token>)",
        )
            .into_response()
    }
}

/// Compare without stopping at the first difference (no timing hint about the token).
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn config(State(lab): State<Arc<World>>) -> Response {
    let regions: Vec<serde_json::Value> = lab
        .regions()
        .map(|(_, region)| serde_json::json!({"region": region.name, "url": region.url()}))
        .collect();
    Json(serde_json::json!({
        "front_door": lab.front_door_url(),
        "regions": regions,
        "time_scale": lab.scale().factor(),
        "auction": "lot-1",
        // Strong mode: the table's third member (no URL: it serves nothing).
        "consistency": lab.config().consistency.as_str(),
        "table_members": lab.cluster().map(|c| c.status()),
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

async fn token(State(lab): State<Arc<World>>, Query(request): Query<TokenRequest>) -> Response {
    if !valid_sub(&request.sub) {
        return (
            StatusCode::BAD_REQUEST,
            "sub must be 1 to 64 characters of A-Z, a-z, 0-9, - and _",
        )
            .into_response();
    }
    match lab.user_token(&request.sub) {
        Ok(token) => Json(serde_json::json!({"token": token})).into_response(),
        // A sign-in while the issuer's Region is down: unavailable, as the issuer would be.
        Err(error) if error.is::<crate::world::identity::IssuerUnreachable>() => {
            (StatusCode::SERVICE_UNAVAILABLE, format!("{error:#}")).into_response()
        }
        Err(error) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{error:#}")).into_response(),
    }
}

/// `POST /api/evacuate`: tell every connection of a Region to move to the other one.
#[derive(Debug, Deserialize)]
pub struct EvacuateRequest {
    #[serde(default)]
    pub region: RegionRef,
    /// Take the Region out of DNS first and wait for the name to answer the other one
    /// (default true: a planned evacuation).
    #[serde(default = "planned_by_default")]
    pub planned: bool,
    #[serde(default)]
    pub reason: Option<String>,
}

fn planned_by_default() -> bool {
    true
}

async fn evacuate(State(lab): State<Arc<World>>, Json(request): Json<EvacuateRequest>) -> Response {
    let region = match request.region.resolve(lab.names()) {
        Ok(region) => region,
        Err(message) => return (StatusCode::BAD_REQUEST, message).into_response(),
    };
    let reason = request.reason.unwrap_or_else(|| {
        if request.planned {
            "maintenance"
        } else {
            "failover"
        }
        .to_owned()
    });
    match lab.evacuate(region, request.planned, &reason).await {
        // Incomplete (connections never told before the plan's deadline): 503 with the
        // same body, so that no caller takes it for done.
        Ok(report) => (
            if report.complete {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            },
            Json(serde_json::json!({
                "region": lab.name(region),
                "to": lab.name(region.other()),
                "planned": request.planned,
                "complete": report.complete,
                "untold": report.untold,
                "report": report,
            })),
        )
            .into_response(),
        Err(error) => (StatusCode::CONFLICT, format!("{error:#}")).into_response(),
    }
}

/// `POST /api/service`: take a Region out of DNS (`in_service: false`) or put it back.
#[derive(Debug, Deserialize)]
pub struct ServiceRequest {
    #[serde(default)]
    pub region: RegionRef,
    pub in_service: bool,
}

async fn service(State(lab): State<Arc<World>>, Json(request): Json<ServiceRequest>) -> Response {
    match request.region.resolve(lab.names()) {
        Ok(region) => {
            lab.set_in_service(region, request.in_service);
            Json(lab.status()).into_response()
        }
        Err(message) => (StatusCode::BAD_REQUEST, message).into_response(),
    }
}

async fn rehearsal(State(lab): State<Arc<World>>) -> Response {
    match lab.rehearsal() {
        Some(state) => Json(state).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            "this lab deploys no rehearsal pair (it needs endpoint checks, wsdr's composition and no front)",
        )
            .into_response(),
    }
}

/// A rehearsal verdict to write.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RehearsalVerdict {
    view: crate::world::rehearsal::View,
    serve: bool,
}

async fn rehearsal_verdict(
    State(lab): State<Arc<World>>,
    Json(request): Json<RehearsalVerdict>,
) -> Response {
    match lab.write_rehearsal_verdict(request.view, request.serve) {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(error) => (StatusCode::SERVICE_UNAVAILABLE, format!("{error:#}")).into_response(),
    }
}

async fn metrics(State(lab): State<Arc<World>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        crate::world::prometheus::render(&lab),
    )
        .into_response()
}

async fn status(State(lab): State<Arc<World>>) -> Response {
    Json(lab.status()).into_response()
}

async fn fault(State(lab): State<Arc<World>>, Json(request): Json<FaultRequest>) -> Response {
    match request.fault(lab.names()) {
        Ok(fault) => {
            lab.inject(fault);
            Json(lab.status()).into_response()
        }
        Err(message) => (StatusCode::BAD_REQUEST, message).into_response(),
    }
}

/// The control API's client (`wsdr fault`, `wsdr status`, tests): the hyper client already in
/// the lab's graph, plain HTTP. Every failure names the address and what to try.
#[derive(Debug, Clone)]
pub struct ControlClient {
    addr: SocketAddr,
    token: Option<String>,
    timeout: Duration,
    http: hyper_util::client::legacy::Client<
        wsdr_net::hyper::Connector,
        http_body_util::Full<bytes::Bytes>,
    >,
}

impl ControlClient {
    /// A client for the lab at `addr`; `token` is the control token a non-loopback lab
    /// prints at start (`--allow-remote`).
    pub fn new(addr: SocketAddr, token: Option<String>) -> Self {
        let http =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build(wsdr_net::hyper::Connector::new(wsdr_net::Network::Tcp));
        Self {
            addr,
            token,
            timeout: Duration::from_secs(10),
            http,
        }
    }

    /// Reach the lab over `network` (a simulated world's in-memory network).
    pub fn on_network(mut self, network: wsdr_net::Network) -> Self {
        self.http =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build(wsdr_net::hyper::Connector::new(network));
        self
    }

    /// How long to wait for an answer (default 10 s; an evacuation waits for DNS first).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    pub async fn get(&self, path: &str) -> anyhow::Result<(u16, String)> {
        self.send(axum::http::Method::GET, path, None).await
    }

    pub async fn post_json(&self, path: &str, body: &str) -> anyhow::Result<(u16, String)> {
        self.send(axum::http::Method::POST, path, Some(body)).await
    }

    async fn send(
        &self,
        method: axum::http::Method,
        path: &str,
        body: Option<&str>,
    ) -> anyhow::Result<(u16, String)> {
        use http_body_util::BodyExt;
        let url = format!("http://{}{path}", self.addr);
        let mut request = axum::http::Request::builder()
            .method(method)
            .uri(&url)
            .header(header::CONTENT_TYPE, "application/json");
        if let Some(token) = &self.token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = request.body(http_body_util::Full::new(bytes::Bytes::from(
            body.unwrap_or_default().to_owned(),
        )))?;
        let response = tokio::time::timeout(self.timeout, self.http.request(request))
            .await
            .map_err(|_| {
                anyhow::anyhow!(
                    "the lab's control API at {url} did not answer within {:.0} s (is the lab busy, or is something else listening on {}?)",
                    self.timeout.as_secs_f64(),
                    self.addr
                )
            })?
            .map_err(|e| {
                anyhow::anyhow!(
                    "cannot reach the lab's control API at {url}: {}. Is `wsdr lab` running? Start it with `wsdr lab`, or point at it with --lab HOST:PORT",
                    root_cause(&e)
                )
            })?;
        let status = response.status().as_u16();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| anyhow::anyhow!("reading the answer from {url}: {e}"))?
            .to_bytes();
        Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
    }
}

fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// One POST to the lab at `addr` (no control token): status and body.
pub async fn post_json(addr: SocketAddr, path: &str, body: &str) -> anyhow::Result<(u16, String)> {
    ControlClient::new(addr, None).post_json(path, body).await
}
