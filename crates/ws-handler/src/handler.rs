//! Event in, response out. Dispatch on `requestContext.routeKey`.

use aws_lambda_events::apigw::{ApiGatewayProxyResponse, ApiGatewayWebsocketProxyRequest};
use aws_lambda_events::encodings::Body;
use aws_lambda_events::http::{HeaderMap, HeaderValue};
use std::sync::Arc;
use tracing::Instrument;
use wsdr_core::push::{PushSettings, Pusher};
use wsdr_core::{ConnectionId, Gateway, Principal};
use wsdr_protocol::{ErrorCode, ProtocolError};

/// Authorizer context key that carries the user id (the token's `sub`).
pub const SUB_CONTEXT_KEY: &str = "sub";
/// Authorizer context key that says the identity is a probe's (the canary issuer's).
pub const CANARY_CONTEXT_KEY: &str = "canary";

/// The handler: the deployment's front door (every app it serves), what `$connect` needs,
/// and the instance's pusher (the stream's path).
#[derive(Debug, Clone)]
pub struct App {
    service: Gateway,
    subprotocol: String,
    pusher: Arc<Pusher>,
    /// Where the stream's reader forwards the fast verdict's fail-over changes (the
    /// secondary's, as deployed with fast failovers; none elsewhere).
    failover_orders: Option<Arc<dyn FailoverOrders>>,
}

/// Where the stream's reader forwards the fast verdict's fail-over changes: the evacuator's
/// queue in AWS (`wsdr_aws::SqsFailoverOrders`, wired in `app_from_aws`).
pub trait FailoverOrders: Send + Sync + std::fmt::Debug {
    /// Send one order (a stream record's JSON); an error fails the stream batch.
    fn send(
        &self,
        body: String,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send + '_>>;
}

impl App {
    /// A handler whose pusher runs on the system clock and tokio's sleep, with `push`.
    pub fn new(service: impl Into<Gateway>, subprotocol: &str, push: PushSettings) -> Self {
        let service = service.into();
        let pusher = Pusher::new(
            service.clone(),
            push,
            Arc::new(wsdr_core::SystemClock),
            Arc::new(wsdr_core::TokioPause),
        );
        Self::with_pusher(service, subprotocol, pusher)
    }

    /// A handler with a pusher built elsewhere (the lab's, on its scaled clock).
    pub fn with_pusher(service: impl Into<Gateway>, subprotocol: &str, pusher: Pusher) -> Self {
        Self {
            service: service.into(),
            subprotocol: subprotocol.to_owned(),
            pusher: Arc::new(pusher),
            failover_orders: None,
        }
    }

    /// This handler forwards the fast verdict's fail-over changes its stream batches carry to
    /// `orders` (the evacuator's queue).
    pub fn with_failover_orders(mut self, orders: Arc<dyn FailoverOrders>) -> Self {
        self.failover_orders = Some(orders);
        self
    }

    pub fn failover_orders(&self) -> Option<&dyn FailoverOrders> {
        self.failover_orders.as_deref()
    }

    pub fn service(&self) -> &Gateway {
        &self.service
    }

    pub fn pusher(&self) -> &Pusher {
        &self.pusher
    }

    /// One API Gateway WebSocket event to its integration response. Never fails: an `Err`
    /// would make API Gateway send its generic internal-error frame, whereas every failure
    /// here has a precise answer.
    pub async fn respond(
        &self,
        request: ApiGatewayWebsocketProxyRequest,
    ) -> ApiGatewayProxyResponse {
        let context = &request.request_context;
        let route = context.route_key.clone().unwrap_or_default();
        let span = tracing::info_span!(
            "request",
            route = %route,
            connection_id = context.connection_id.as_deref().unwrap_or("-"),
            request_id = context.request_id.as_deref().unwrap_or("-"),
            region = self.service.region(),
            user = tracing::field::Empty,
        );
        self.route(&request, &route).instrument(span).await
    }

    async fn route(
        &self,
        request: &ApiGatewayWebsocketProxyRequest,
        route: &str,
    ) -> ApiGatewayProxyResponse {
        let context = &request.request_context;
        let Some(connection) = context
            .connection_id
            .as_deref()
            .and_then(|c| ConnectionId::new(c).ok())
        else {
            tracing::warn!("event without a usable connection id");
            return status(400);
        };
        if route == "$disconnect" {
            if let Err(error) = self.service.disconnect(&connection).await {
                // Best effort: the record expires by TTL anyway.
                tracing::warn!(%error, "could not remove connection record");
            }
            return status(200);
        }
        let user = principal_from_context(request);
        if let Some(user) = &user {
            tracing::Span::current().record("user", user.subject().as_str());
        }
        if route == "$connect" {
            return self.connect(request, &connection, user.as_ref()).await;
        }
        let Some(user) = user else {
            tracing::warn!("message without an authorizer identity");
            return self.frame(&self.service.error_frame(&ProtocolError::new(
                ErrorCode::Unauthorized,
                "this connection has no identity; reconnect with a valid token",
            )));
        };
        let body = match (&request.body, request.is_base64_encoded) {
            (_, true) => {
                return self.frame(&self.service.error_frame(&ProtocolError::new(
                    ErrorCode::BadJson,
                    "binary frames are not supported; send JSON text",
                )))
            }
            (Some(body), false) => body.as_bytes(),
            (None, false) => b"",
        };
        let reply = self.service.handle_frame(&connection, user, body).await;
        self.frame(&reply.message)
    }

    async fn connect(
        &self,
        request: &ApiGatewayWebsocketProxyRequest,
        connection: &ConnectionId,
        user: Option<&Principal>,
    ) -> ApiGatewayProxyResponse {
        let Some(user) = user else {
            // Only reachable if the route has no authorizer: refuse rather than serve anonymously.
            tracing::warn!("$connect without an authorizer identity");
            return status(401);
        };
        if let Err(error) = self.service.connect(connection, user.subject()).await {
            // Refuse the handshake: the client retries with backoff, and the canary sees a
            // Region whose tables are unreachable.
            tracing::error!(%error, "could not register connection");
            return status(500);
        }
        let mut response = status(200);
        if let Some(offered) = offered_subprotocols(&request.headers) {
            if offered.iter().any(|p| *p == self.subprotocol) {
                if let Ok(value) = HeaderValue::from_str(&self.subprotocol) {
                    response.headers.insert("Sec-WebSocket-Protocol", value);
                }
            }
        }
        response
    }

    fn frame(&self, message: &wsdr_protocol::ServerMessage) -> ApiGatewayProxyResponse {
        let mut response = status(200);
        response.body = Some(Body::Text(message.to_json()));
        response
    }
}

fn status(code: i64) -> ApiGatewayProxyResponse {
    let mut response = ApiGatewayProxyResponse::default();
    response.status_code = code;
    response
}

/// The principal from the REQUEST authorizer's context: `sub` (else `principalId`) and the
/// `canary` flag. A context whose flag and subject disagree names nobody (logged): the
/// frame is answered `unauthorized`, never served as a guess.
fn principal_from_context(request: &ApiGatewayWebsocketProxyRequest) -> Option<Principal> {
    let fields = &request.request_context.authorizer.fields;
    let sub = [SUB_CONTEXT_KEY, "principalId"]
        .iter()
        .find_map(|key| fields.get(*key).and_then(|v| v.as_str()))?;
    // API Gateway hands context values on as strings; a boolean is accepted too.
    let probe = fields
        .get(CANARY_CONTEXT_KEY)
        .is_some_and(|v| v.as_str() == Some("true") || v.as_bool() == Some(true));
    match Principal::from_authorizer(sub, probe) {
        Ok(principal) => Some(principal),
        Err(error) => {
            tracing::warn!(%error, "authorizer context names no principal");
            None
        }
    }
}

/// The subprotocols a client offered (`Sec-WebSocket-Protocol: wsdr, <token>`).
fn offered_subprotocols(headers: &HeaderMap) -> Option<Vec<&str>> {
    let value = headers.get("sec-websocket-protocol")?.to_str().ok()?;
    Some(value.split(',').map(str::trim).collect())
}
