#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! ApiGatewayNotifier against a local HTTP server that answers like API Gateway's
//! `@connections` API (200, 410 GoneException, 429 LimitExceededException).

use aws_credential_types::Credentials;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use std::sync::{Arc, Mutex};
use wsdr_aws::ApiGatewayNotifier;
use wsdr_core::{ConnectionId, Error, Notifier};

#[derive(Debug, Clone)]
struct Seen {
    path: String,
    content_type: Option<String>,
    signed: bool,
    body: Vec<u8>,
}

type Log = Arc<Mutex<Vec<Seen>>>;

async fn post_to_connection(
    State(log): State<Log>,
    Path((stage, id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, String) {
    log.lock().unwrap().push(Seen {
        path: format!("/{stage}/@connections/{id}"),
        content_type: headers
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned()),
        signed: headers
            .get("authorization")
            .is_some_and(|v| v.to_str().unwrap().starts_with("AWS4-HMAC-SHA256")),
        body: body.to_vec(),
    });
    match id.as_str() {
        i if i.starts_with("gone") => (StatusCode::GONE, r#"{"message":null}"#.into()),
        i if i.starts_with("busy") => (
            StatusCode::TOO_MANY_REQUESTS,
            r#"{"message":"Rate exceeded"}"#.into(),
        ),
        i if i.starts_with("boom") => (
            StatusCode::INTERNAL_SERVER_ERROR,
            r#"{"message":"Internal"}"#.into(),
        ),
        _ => (StatusCode::OK, String::new()),
    }
}

async fn server() -> (String, Log) {
    let log: Log = Arc::default();
    let app = Router::new()
        .route("/{stage}/@connections/{id}", post(post_to_connection))
        .with_state(log.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/prod"), log)
}

fn notifier(url: &str) -> ApiGatewayNotifier {
    let sdk = wsdr_aws::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new("us-east-1"))
        // The loopback peer speaks plain HTTP (a deployed SdkConfig carries the HTTPS client).
        .http_client(wsdr_aws::local::plain_http_client())
        .credentials_provider(
            aws_credential_types::provider::SharedCredentialsProvider::new(Credentials::new(
                "AKIDLOCAL",
                "secret",
                None,
                None,
                "test",
            )),
        )
        .build();
    ApiGatewayNotifier::new(&sdk, url)
}

#[tokio::test]
async fn post_sends_the_exact_signed_request_to_the_callback_url() {
    let (url, log) = server().await;
    let n = notifier(&url);
    n.send(
        &ConnectionId::new("L0SM9cOFvHcCIhw=").unwrap(),
        br#"{"type":"bidUpdate"}"#,
    )
    .await
    .unwrap();
    let seen = log.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/prod/@connections/L0SM9cOFvHcCIhw=");
    assert_eq!(seen[0].body, br#"{"type":"bidUpdate"}"#);
    assert!(seen[0].signed, "requests must be SigV4-signed");
    assert_eq!(
        seen[0].content_type.as_deref(),
        Some("application/octet-stream")
    );
}

#[tokio::test]
async fn gone_throttled_and_server_errors_are_classified() {
    let (url, log) = server().await;
    let n = notifier(&url);
    let send = |id: &'static str| {
        let n = n.clone();
        async move { n.send(&ConnectionId::new(id).unwrap(), b"x").await }
    };
    assert_eq!(send("gone-1").await, Err(Error::Gone));
    assert!(matches!(send("busy-1").await, Err(Error::Throttled(_))));
    assert!(matches!(send("boom-1").await, Err(Error::Transient(_))));
    // Exactly one request each: the fan-out, not the SDK, owns retries.
    assert_eq!(log.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn unreachable_endpoint_is_transient() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/prod", listener.local_addr().unwrap());
    drop(listener);
    let error = notifier(&url)
        .send(&ConnectionId::new("c1").unwrap(), b"x")
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Transient(_)), "{error:?}");
}
