#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The canary's own binary under a local Lambda Runtime API: `main`'s wiring (its
//! configuration and CloudWatch client built from the environment, as Lambda gives them)
//! probes a local Region and puts its datapoint to a local CloudWatch, as the deployed function
//! does each minute. `cargo test` of the library never runs `main`.

mod common;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderName, Uri};
use axum::response::IntoResponse;
use axum::Router;
use common::{server, Behavior};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use wsdr_runtime_api::{Answer, Function};

const BINARY: &str = env!("CARGO_BIN_EXE_canary");
const SCHEDULED: &str = include_str!("../../../events/scheduled.json");

/// CloudWatch on loopback: every request's path and body, answered as the service answers
/// `PutMetricData` in its rpc-v2-cbor protocol (an empty CBOR map).
#[derive(Clone, Default)]
struct CloudWatch(Arc<Mutex<Vec<Request>>>);

/// A request's path and body.
type Request = (String, Vec<u8>);

impl CloudWatch {
    async fn start(&self) -> String {
        async fn any(State(seen): State<CloudWatch>, uri: Uri, body: Bytes) -> impl IntoResponse {
            seen.0
                .lock()
                .unwrap()
                .push((uri.path().to_owned(), body.to_vec()));
            (
                [
                    (HeaderName::from_static("smithy-protocol"), "rpc-v2-cbor"),
                    (header::CONTENT_TYPE, "application/cbor"),
                ],
                vec![0xa0_u8],
            )
        }
        let app = Router::new().fallback(any).with_state(self.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{address}")
    }

    fn puts(&self) -> Vec<Vec<u8>> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(path, _)| path.ends_with("/operation/PutMetricData"))
            .map(|(_, body)| body.clone())
            .collect()
    }
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

#[tokio::test]
async fn the_binary_probes_its_region_and_puts_the_minutes_health_datapoint() {
    let region = server(Behavior::Good).await;
    let cloudwatch = CloudWatch::default();
    let endpoint = cloudwatch.start().await;
    let mut function = Function::start(
        BINARY,
        &[
            ("AWS_REGION", "us-east-1"),
            ("AWS_ACCESS_KEY_ID", "local"),
            ("AWS_SECRET_ACCESS_KEY", "local"),
            ("AWS_ENDPOINT_URL_CLOUDWATCH", &endpoint),
            ("TARGET_URL", &region.url),
            ("EXPECTED_REGION", "us-east-1"),
            ("API_ID", "abc123def4"),
            (
                "CANARY_HS256_SECRET",
                "canary-secret-0123456789abcdef012345",
            ),
            ("JWT_AUDIENCE", "wsdr"),
            ("PROBES_PER_RUN", "1"),
            ("PROBE_TIMEOUT_SECONDS", "5"),
        ],
    )
    .await
    .unwrap();
    let event: Value = serde_json::from_str(SCHEDULED).unwrap();
    let answer = function.invoke(event).await.unwrap();
    let Answer::Response(report) = &answer else {
        panic!("no report: {answer:?}\n{}", function.stop().await);
    };
    function.stop().await;
    assert_eq!(report["healthy"], true, "{report}");
    assert_eq!(report["successes"], 1, "{report}");
    assert!(
        !region.tokens.lock().unwrap().is_empty(),
        "the probe carried a token"
    );
    let puts = cloudwatch.puts();
    assert!(
        puts.iter()
            .any(|body| contains(body, "WebSocketHealth") && contains(body, "abc123def4")),
        "no health datapoint for the API: {} puts",
        puts.len()
    );
}

#[tokio::test]
async fn the_binary_without_its_target_fails_its_start_and_answers_nothing() {
    let mut function = Function::start(BINARY, &[("AWS_REGION", "us-east-1")])
        .await
        .unwrap();
    let event: Value = serde_json::from_str(SCHEDULED).unwrap();
    let answer = function.invoke(event).await.unwrap();
    let logs = function.stop().await;
    assert!(
        matches!(answer, Answer::Exited(Some(code)) if code != 0),
        "{answer:?}\n{logs}"
    );
}
