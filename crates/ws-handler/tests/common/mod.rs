//! Helpers shared by the handler tests: events from `events/`, DynamoDB Local tables, and a
//! local `@connections` endpoint that answers like API Gateway.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use aws_lambda_events::apigw::{ApiGatewayProxyResponse, ApiGatewayWebsocketProxyRequest};
use aws_lambda_events::encodings::Body;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use rand::Rng;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

pub const CONNECT: &str = include_str!("../../../../events/connect.json");
pub const CONNECT_SUBPROTOCOL: &str = include_str!("../../../../events/connect-subprotocol.json");
pub const DISCONNECT: &str = include_str!("../../../../events/disconnect.json");
pub const HEARTBEAT: &str = include_str!("../../../../events/heartbeat.json");
pub const GET_STATE: &str = include_str!("../../../../events/getState.json");
pub const BID: &str = include_str!("../../../../events/bid.json");
pub const DEFAULT: &str = include_str!("../../../../events/default.json");

pub fn event(json: &str) -> ApiGatewayWebsocketProxyRequest {
    serde_json::from_str(json).expect("sample event parses")
}

/// A sample event re-addressed: another connection, user and body.
pub fn event_as(
    json: &str,
    connection: &str,
    sub: &str,
    body: Option<&str>,
) -> ApiGatewayWebsocketProxyRequest {
    let mut value: serde_json::Value = serde_json::from_str(json).unwrap();
    value["requestContext"]["connectionId"] = connection.into();
    value["requestContext"]["authorizer"]["sub"] = sub.into();
    value["requestContext"]["authorizer"]["principalId"] = sub.into();
    if let Some(body) = body {
        value["body"] = body.into();
    }
    serde_json::from_value(value).unwrap()
}

pub fn message(
    route: &str,
    connection: &str,
    sub: &str,
    body: &[u8],
) -> ApiGatewayWebsocketProxyRequest {
    let mut e = event_as(
        DEFAULT,
        connection,
        sub,
        Some(&String::from_utf8_lossy(body)),
    );
    e.request_context.route_key = Some(route.into());
    e
}

pub fn body(response: &ApiGatewayProxyResponse) -> serde_json::Value {
    match &response.body {
        Some(Body::Text(text)) => serde_json::from_str(text).expect("body is JSON"),
        other => panic!("expected a text body, got {other:?}"),
    }
}

pub fn dynamo_endpoint() -> String {
    std::env::var("DYNAMODB_ENDPOINT").unwrap_or_else(|_| {
        panic!("DYNAMODB_ENDPOINT is not set: run these tests with `make test`, which starts DynamoDB Local")
    })
}

/// SDK configuration for DynamoDB Local: placeholder credentials, the local endpoint.
pub fn local_sdk() -> wsdr_aws::SdkConfig {
    wsdr_aws::SdkConfig::builder()
        .behavior_version(wsdr_aws::BehaviorVersion::latest())
        .region(wsdr_aws::Region::new("us-east-1"))
        .endpoint_url(dynamo_endpoint())
        .http_client(wsdr_aws::local::plain_http_client())
        .credentials_provider(wsdr_aws::SharedCredentialsProvider::new(
            wsdr_aws::Credentials::new("local", "local", None, None, "test"),
        ))
        .build()
}

pub fn sqs_endpoint() -> String {
    std::env::var("SQS_ENDPOINT").unwrap_or_else(|_| {
        panic!(
            "SQS_ENDPOINT is not set: run these tests with `make test`, which starts the SQS peer"
        )
    })
}

/// SQS's own endpoint in an SDK configuration whose global one is DynamoDB Local: what
/// `AWS_ENDPOINT_URL_SQS` gives a configuration loaded from the environment.
#[derive(Debug)]
struct SqsEndpoint(String);

impl aws_types::service_config::LoadServiceConfig for SqsEndpoint {
    fn load_config(&self, key: aws_types::service_config::ServiceConfigKey<'_>) -> Option<String> {
        (key.service_id() == "SQS" && key.env() == "AWS_ENDPOINT_URL").then(|| self.0.clone())
    }
}

/// [`local_sdk`] with SQS at the local SQS peer.
pub fn local_sdk_with_sqs() -> wsdr_aws::SdkConfig {
    local_sdk()
        .into_builder()
        .service_config(SqsEndpoint(sqs_endpoint()))
        .build()
}

pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{:016x}", rand::rng().random::<u64>())
}

/// A local `@connections` endpoint: records posts; ids in `gone` answer 410.
#[derive(Clone, Default)]
pub struct CallbackServer {
    pub posts: Arc<Mutex<Vec<(String, String)>>>,
    pub gone: Arc<Mutex<HashSet<String>>>,
}

impl CallbackServer {
    pub async fn start(&self) -> String {
        async fn post_to(
            State(s): State<CallbackServer>,
            Path((_stage, id)): Path<(String, String)>,
            body: Bytes,
        ) -> StatusCode {
            if s.gone.lock().unwrap().contains(&id) {
                return StatusCode::GONE;
            }
            s.posts
                .lock()
                .unwrap()
                .push((id, String::from_utf8_lossy(&body).into_owned()));
            StatusCode::OK
        }
        let app = Router::new()
            .route("/{stage}/@connections/{id}", post(post_to))
            .with_state(self.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}/prod")
    }

    pub fn posted_to(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .posts
            .lock()
            .unwrap()
            .iter()
            .map(|(id, _)| id.clone())
            .collect();
        ids.sort();
        ids
    }
}
