#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! Secrets read from a local Secrets Manager peer on loopback that checks each request's
//! signature with AWS's own signer (`aws-sigv4`) and refuses a wrong one as AWS does, answers
//! `GetSecretValue` by name, and can be told to throttle or fail.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use wsdr_secrets::{resolve_secret_vars, Error, SecretEnv, Secrets};

const SECRET_KEY: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";

struct Peer {
    secrets: HashMap<&'static str, serde_json::Value>,
    /// The first this-many requests are answered with `failure`.
    failing: u32,
    failure: (StatusCode, &'static str),
    calls: AtomicU32,
    /// The secret ids asked, request by request.
    asked: std::sync::Mutex<Vec<Vec<String>>>,
    /// Ids answered with a throttling error the first time they are asked (per secret in a
    /// batch, the whole request for one).
    throttle_once: std::sync::Mutex<Vec<&'static str>>,
}

fn reply(status: StatusCode, kind: &str, message: &str) -> (StatusCode, String) {
    (
        status,
        serde_json::json!({ "__type": kind, "message": message }).to_string(),
    )
}

/// Parses `YYYYMMDDTHHMMSSZ`.
fn parse_amz_date(value: &str) -> Option<SystemTime> {
    let n = |range: std::ops::Range<usize>| value.get(range)?.parse::<i64>().ok();
    let (year, month, day) = (n(0..4)?, n(4..6)?, n(6..8)?);
    let (h, m, s) = (n(9..11)?, n(11..13)?, n(13..15)?);
    // Days from civil (Howard Hinnant), the inverse of the signer's conversion.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let seconds = u64::try_from(days * 86_400 + h * 3600 + m * 60 + s).ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(seconds))
}

/// The `Authorization` AWS's signer computes for the request as received.
fn expected_authorization(headers: &HeaderMap, body: &[u8]) -> Option<String> {
    use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
    let header = |name: &str| headers.get(name)?.to_str().ok();
    let time = parse_amz_date(header("x-amz-date")?)?;
    let credential = header("authorization")?
        .split("Credential=")
        .nth(1)?
        .split('/')
        .collect::<Vec<_>>();
    let (key_id, region) = (credential.first()?, credential.get(2)?);
    let identity = aws_credential_types::Credentials::new(
        *key_id,
        SECRET_KEY,
        header("x-amz-security-token").map(str::to_owned),
        None,
        "peer",
    )
    .into();
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("secretsmanager")
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .ok()?
        .into();
    let url = format!("http://{}/", header("host")?);
    let signed = [
        ("content-type", header("content-type")?),
        ("x-amz-target", header("x-amz-target")?),
    ];
    let signable =
        SignableRequest::new("POST", &url, signed.into_iter(), SignableBody::Bytes(body)).ok()?;
    let (instructions, _) = sign(signable, &params).ok()?.into_parts();
    let authorization = instructions
        .headers()
        .find(|(name, _)| name.eq_ignore_ascii_case("authorization"))
        .map(|(_, value)| value.to_owned());
    authorization
}

async fn secrets_manager(
    State(peer): State<Arc<Peer>>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, String) {
    let call = peer.calls.fetch_add(1, Ordering::SeqCst);
    let given = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if expected_authorization(&headers, &body).as_deref() != Some(given) {
        return reply(
            StatusCode::BAD_REQUEST,
            "InvalidSignatureException",
            "The request signature we calculated does not match the signature you provided.",
        );
    }
    let target = headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let request: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    if call < peer.failing {
        return reply(peer.failure.0, peer.failure.1, "try again");
    }
    match target {
        "secretsmanager.GetSecretValue" => {
            let id = request["SecretId"].as_str().unwrap_or_default();
            peer.asked.lock().unwrap().push(vec![id.to_owned()]);
            {
                let mut throttle = peer.throttle_once.lock().unwrap();
                if let Some(at) = throttle.iter().position(|t| *t == id) {
                    throttle.remove(at);
                    return reply(StatusCode::BAD_REQUEST, "ThrottlingException", "slow down");
                }
            }
            match peer.secrets.get(id) {
                Some(answer) => (StatusCode::OK, answer.to_string()),
                None => reply(
                    StatusCode::BAD_REQUEST,
                    "ResourceNotFoundException",
                    "Secrets Manager can't find the specified secret.",
                ),
            }
        }
        "secretsmanager.BatchGetSecretValue" => {
            let ids: Vec<String> = request["SecretIdList"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|id| id.as_str().map(str::to_owned))
                .collect();
            peer.asked.lock().unwrap().push(ids.clone());
            let (mut values, mut errors) = (Vec::new(), Vec::new());
            for id in &ids {
                let mut throttle = peer.throttle_once.lock().unwrap();
                if let Some(at) = throttle.iter().position(|t| t == id) {
                    throttle.remove(at);
                    errors.push(serde_json::json!({ "SecretId": id, "ErrorCode": "ThrottlingException", "Message": "slow down" }));
                } else if let Some(value) = peer.secrets.get(id.as_str()) {
                    values.push(value.clone());
                } else {
                    errors.push(serde_json::json!({ "SecretId": id, "ErrorCode": "ResourceNotFoundException", "Message": "Secrets Manager can't find the specified secret." }));
                }
            }
            (
                StatusCode::OK,
                serde_json::json!({ "SecretValues": values, "Errors": errors }).to_string(),
            )
        }
        _ => reply(StatusCode::BAD_REQUEST, "UnknownOperationException", target),
    }
}

async fn start(failing: u32, failure: (StatusCode, &'static str)) -> (Arc<Peer>, String) {
    let secrets = HashMap::from([
        (
            "wsdr/canary",
            serde_json::json!({ "Name": "wsdr/canary", "SecretString": "0123456789abcdef0123456789abcdef" }),
        ),
        (
            "wsdr/jwt",
            serde_json::json!({ "Name": "wsdr/jwt", "SecretString": "fedcba9876543210fedcba9876543210" }),
        ),
        (
            "wsdr/binary",
            serde_json::json!({ "Name": "wsdr/binary", "SecretBinary": "AAEC" }),
        ),
    ]);
    let peer = Arc::new(Peer {
        secrets,
        failing,
        failure,
        calls: AtomicU32::new(0),
        asked: Default::default(),
        throttle_once: Default::default(),
    });
    let router = Router::new()
        .route("/", post(secrets_manager))
        .with_state(peer.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    (peer, format!("http://{addr}"))
}

/// One secret read, bounded: a read that retries forever fails the test instead of hanging
/// it (every read here ends, retries included, in well under a second; tests run two at a
/// time, so three such failures stay within the mutation run's 20 s).
async fn read(secrets: &Secrets, id: &str) -> Result<String, Error> {
    tokio::time::timeout(std::time::Duration::from_secs(5), secrets.secret_string(id))
        .await
        .expect("the read gave up within 5 s")
}

fn client(endpoint: &str, secret_key: &str) -> Secrets {
    let env: HashMap<&str, String> = HashMap::from([
        ("AWS_REGION", "eu-west-1".to_owned()),
        ("AWS_ACCESS_KEY_ID", "ASIAEXAMPLE".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", secret_key.to_owned()),
        (
            "AWS_SESSION_TOKEN",
            "IQoJb3JpZ2luX2Vj/session+token=".to_owned(),
        ),
        ("AWS_ENDPOINT_URL_SECRETS_MANAGER", endpoint.to_owned()),
    ]);
    Secrets::from_lookup(
        |name| env.get(name).cloned(),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .unwrap()
}

#[tokio::test]
async fn secrets_are_read_by_name_with_a_signature_aws_accepts() {
    let (peer, endpoint) = start(0, (StatusCode::OK, "")).await;
    let secrets = client(&endpoint, SECRET_KEY);
    let env = HashMap::from([
        ("CANARY_HS256_SECRET_ID", "wsdr/canary"),
        ("JWT_HS256_SECRET_ID", "wsdr/jwt"),
        ("PLAIN_SECRET", "set-in-plain"),
        ("PLAIN_SECRET_ID", "never-read"),
    ]);
    let resolved = resolve_secret_vars(
        &secrets,
        &[
            "CANARY_HS256_SECRET",
            "JWT_HS256_SECRET",
            "PLAIN_SECRET",
            "UNSET",
        ],
        |k| env.get(k).map(|v| (*v).to_owned()),
    )
    .await
    .unwrap();
    assert_eq!(
        resolved,
        vec![
            (
                "CANARY_HS256_SECRET".to_owned(),
                "0123456789abcdef0123456789abcdef".to_owned()
            ),
            (
                "JWT_HS256_SECRET".to_owned(),
                "fedcba9876543210fedcba9876543210".to_owned()
            ),
        ]
    );
    let mut asked = peer.asked.lock().unwrap().clone();
    asked.sort();
    assert_eq!(
        asked,
        vec![vec!["wsdr/canary".to_owned()], vec!["wsdr/jwt".to_owned()]],
        "one GetSecretValue each (BatchGetSecretValue's quota is 100 per second, not adjustable)"
    );
}

#[tokio::test]
async fn a_wrong_signature_is_refused_and_not_retried() {
    let (peer, endpoint) = start(0, (StatusCode::OK, "")).await;
    let secrets = client(&endpoint, "not-the-key-the-peer-knows");
    match read(&secrets, "wsdr/canary").await {
        Err(Error::Refused { code, .. }) => assert_eq!(code, "InvalidSignatureException"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(peer.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_missing_or_binary_secret_is_a_clear_error() {
    let (_peer, endpoint) = start(0, (StatusCode::OK, "")).await;
    let secrets = client(&endpoint, SECRET_KEY);
    let missing = read(&secrets, "wsdr/absent").await.unwrap_err();
    assert!(
        matches!(&missing, Error::Refused { code, .. } if code == "ResourceNotFoundException"),
        "{missing:?}"
    );
    assert!(missing.to_string().contains("wsdr/absent"), "{missing}");
    let binary = read(&secrets, "wsdr/binary").await.unwrap_err();
    assert!(matches!(binary, Error::Malformed { .. }), "{binary:?}");
}

#[tokio::test]
async fn throttling_and_server_errors_are_retried_then_given_up() {
    let (peer, endpoint) = start(2, (StatusCode::BAD_REQUEST, "ThrottlingException")).await;
    let secrets = client(&endpoint, SECRET_KEY);
    assert_eq!(
        read(&secrets, "wsdr/jwt").await.unwrap(),
        "fedcba9876543210fedcba9876543210"
    );
    assert_eq!(
        peer.calls.load(Ordering::SeqCst),
        3,
        "two throttled, one answered"
    );

    let (peer, endpoint) = start(
        u32::MAX,
        (StatusCode::INTERNAL_SERVER_ERROR, "InternalServiceError"),
    )
    .await;
    let secrets = client(&endpoint, SECRET_KEY);
    match read(&secrets, "wsdr/jwt").await {
        Err(Error::Unavailable { attempts, .. }) => assert_eq!(attempts, 3),
        other => panic!("expected unavailable, got {other:?}"),
    }
    assert_eq!(peer.calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn no_peer_is_unavailable_not_a_hang() {
    // A port nothing listens on: connection refused, retried, then reported.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let secrets = client(&endpoint, SECRET_KEY);
    assert!(matches!(
        read(&secrets, "wsdr/jwt").await,
        Err(Error::Unavailable { attempts: 3, .. })
    ));
}

#[tokio::test]
async fn an_https_endpoint_is_spoken_to_in_tls() {
    use tokio::io::AsyncReadExt;
    // A peer that records the first byte it receives and hangs up: a TLS ClientHello starts
    // with a handshake record (0x16), plain HTTP with `P` of `POST`.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // Each first byte is recorded before the peer hangs up, so before the client's attempt
    // ends: every attempt's byte is in once the client gives up (the test waits on no count).
    let first_bytes = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = first_bytes.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut byte = [0u8; 1];
            if socket.read_exact(&mut byte).await.is_ok() {
                seen.lock().unwrap().push(byte[0]);
            }
        }
    });
    let secrets = client(&format!("https://localhost:{}", addr.port()), SECRET_KEY);
    let error = read(&secrets, "wsdr/jwt").await.unwrap_err();
    assert!(
        matches!(&error, Error::Unavailable { reason, .. } if reason.contains("TLS")),
        "{error:?}"
    );
    assert_eq!(*first_bytes.lock().unwrap(), vec![0x16; 3]);
}

#[tokio::test]
async fn an_answer_followed_by_a_close_is_read() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // A peer that answers once and closes the connection at once (`Connection: close`).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut request = vec![0u8; 4096];
        let _ = socket.read(&mut request).await;
        let body = r#"{"SecretString":"closed-after-answering"}"#;
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/x-amz-json-1.1\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        socket.write_all(answer.as_bytes()).await.unwrap();
        socket.shutdown().await.unwrap();
    });
    let secrets = client(&format!("http://{addr}"), SECRET_KEY);
    assert_eq!(
        read(&secrets, "wsdr/jwt").await.unwrap(),
        "closed-after-answering"
    );
}

#[tokio::test]
async fn each_secret_is_its_own_request_and_only_the_throttled_one_is_retried() {
    let (peer, endpoint) = start(0, (StatusCode::OK, "")).await;
    peer.throttle_once.lock().unwrap().push("wsdr/jwt");
    let secrets = client(&endpoint, SECRET_KEY);
    let values = secrets
        .secret_strings(&["wsdr/canary", "wsdr/jwt"])
        .await
        .unwrap();
    assert_eq!(
        values,
        vec![
            "0123456789abcdef0123456789abcdef".to_owned(),
            "fedcba9876543210fedcba9876543210".to_owned()
        ],
        "in the order asked"
    );
    let mut asked = peer.asked.lock().unwrap().clone();
    asked.sort();
    assert_eq!(
        asked,
        vec![
            vec!["wsdr/canary".to_owned()],
            vec!["wsdr/jwt".to_owned()],
            vec!["wsdr/jwt".to_owned()]
        ],
        "one GetSecretValue each, and the throttled one again"
    );

    let missing = secrets
        .secret_strings(&["wsdr/canary", "wsdr/absent"])
        .await
        .unwrap_err();
    assert!(
        matches!(&missing, Error::Refused { id, code, .. } if id == "wsdr/absent" && code == "ResourceNotFoundException"),
        "{missing:?}"
    );
}

fn ring() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

#[tokio::test]
async fn a_secret_env_reads_the_secrets_whose_plain_variable_is_unset_and_answers_the_rest() {
    let (peer, endpoint) = start(0, (StatusCode::OK, "")).await;
    let env: HashMap<&str, String> = HashMap::from([
        ("AWS_REGION", "eu-west-1".to_owned()),
        ("AWS_ACCESS_KEY_ID", "ASIAEXAMPLE".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.to_owned()),
        ("AWS_ENDPOINT_URL_SECRETS_MANAGER", endpoint),
        ("JWT_HS256_SECRET_ID", "wsdr/jwt".to_owned()),
        ("CANARY_HS256_SECRET", "plain-canary-secret".to_owned()),
        ("CANARY_HS256_SECRET_ID", "wsdr/canary".to_owned()),
        ("JWT_ISSUER", "https://auth.example.com".to_owned()),
    ]);
    let secret_env = SecretEnv::read(
        &["CANARY_HS256_SECRET", "JWT_HS256_SECRET"],
        move |name| env.get(name).cloned(),
        ring(),
    )
    .await
    .unwrap();
    assert_eq!(
        secret_env.get("JWT_HS256_SECRET").as_deref(),
        Some("fedcba9876543210fedcba9876543210")
    );
    assert_eq!(
        secret_env.get("CANARY_HS256_SECRET").as_deref(),
        Some("plain-canary-secret"),
        "the plain variable wins"
    );
    assert_eq!(
        secret_env.get("JWT_ISSUER").as_deref(),
        Some("https://auth.example.com")
    );
    assert_eq!(secret_env.get("UNSET"), None);
    assert_eq!(
        *peer.asked.lock().unwrap(),
        vec![vec!["wsdr/jwt".to_owned()]]
    );
    let shown = format!("{secret_env:?}");
    assert_eq!(shown, r#"SecretEnv { resolved: ["JWT_HS256_SECRET"], .. }"#);
}

#[tokio::test]
async fn a_secret_env_with_nothing_to_read_builds_no_client() {
    // No Region, no credentials, no endpoint: a client could not be built, and none is.
    let secret_env = SecretEnv::read(
        &["CANARY_HS256_SECRET"],
        |name| (name == "CANARY_HS256_SECRET").then(|| "plain".to_owned()),
        ring(),
    )
    .await
    .unwrap();
    assert_eq!(
        secret_env.get("CANARY_HS256_SECRET").as_deref(),
        Some("plain")
    );
    assert_eq!(format!("{secret_env:?}"), "SecretEnv { resolved: [], .. }");
}

#[tokio::test]
async fn a_too_many_requests_or_any_server_error_is_retried_whatever_its_code() {
    for failure in [
        (StatusCode::TOO_MANY_REQUESTS, ""),
        (StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable"),
        (StatusCode::BAD_GATEWAY, ""),
    ] {
        let (peer, endpoint) = start(1, failure).await;
        let secrets = client(&endpoint, SECRET_KEY);
        assert_eq!(
            read(&secrets, "wsdr/jwt").await.unwrap(),
            "fedcba9876543210fedcba9876543210",
            "{failure:?}"
        );
        assert_eq!(peer.calls.load(Ordering::SeqCst), 2, "{failure:?}");
    }
}
