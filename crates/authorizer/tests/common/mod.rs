//! Tokens, keys, requests and a local JWKS server shared by the authorizer tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use authorizer::{Config, DenyReason};
use aws_lambda_events::apigw::ApiGatewayCustomAuthorizerRequestTypeRequest;
use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub const ISSUER: &str = "https://auth.example.com";
pub const AUDIENCE: &str = "wsdr";
pub const SECRET: &str = "dev-secret-0123456789abcdef0123456789";
pub const CANARY_SECRET: &str = "canary-secret-0123456789abcdef012345";
pub const METHOD_ARN: &str = "arn:aws:execute-api:us-east-1:123456789012:abc123def4/prod/$connect";
pub const RSA_PRIVATE: &[u8] = include_bytes!("../keys/rsa-private.pem");
pub const RSA2_PRIVATE: &[u8] = include_bytes!("../keys/rsa2-private.pem");
pub const RSA_PUBLIC: &[u8] = include_bytes!("../keys/rsa-public.pem");
pub const EC_PRIVATE: &[u8] = include_bytes!("../keys/ec-private.pem");
pub const PUBLIC_JWKS: &str = include_str!("../keys/public-jwks.json");
pub const REQUEST: &str = include_str!("../../../../events/authorizer-request.json");

#[derive(Clone)]
pub struct Jwks {
    pub served: Arc<Mutex<Vec<String>>>,
    pub hits: Arc<AtomicUsize>,
}

pub async fn jwks_server(kids: &[&str]) -> (String, Jwks) {
    let state = Jwks {
        served: Arc::new(Mutex::new(kids.iter().map(|k| k.to_string()).collect())),
        hits: Arc::default(),
    };
    async fn serve(State(s): State<Jwks>) -> Json<Value> {
        s.hits.fetch_add(1, Ordering::SeqCst);
        let all: HashMap<String, Value> = serde_json::from_str(PUBLIC_JWKS).unwrap();
        let keys: Vec<Value> = s
            .served
            .lock()
            .unwrap()
            .iter()
            .map(|k| all[k].clone())
            .collect();
        Json(json!({ "keys": keys }))
    }
    let app = Router::new()
        .route("/.well-known/jwks.json", get(serve))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/.well-known/jwks.json"), state)
}

pub fn config(jwks_url: &str, extra: &[(&str, &str)]) -> Config {
    let mut env: HashMap<String, String> = [
        ("JWT_ISSUER", ISSUER),
        ("JWT_AUDIENCE", AUDIENCE),
        ("JWT_JWKS_URL", jwks_url),
        ("JWT_ALGORITHMS", "RS256,ES256,HS256"),
        ("JWT_HS256_SECRET", SECRET),
        ("CANARY_HS256_SECRET", CANARY_SECRET),
        ("JWKS_MIN_REFRESH_SECONDS", "0"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    for (k, v) in extra {
        env.insert(k.to_string(), v.to_string());
    }
    Config::from_lookup(|k| env.get(k).cloned()).unwrap()
}

pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

pub fn claims() -> Value {
    json!({ "sub": "user-alice", "iss": ISSUER, "aud": AUDIENCE, "exp": now() + 300, "iat": now() })
}

pub fn sign(alg: Algorithm, kid: Option<&str>, key: &EncodingKey, claims: &Value) -> String {
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_owned);
    encode(&header, claims, key).unwrap()
}

pub fn rsa(pem: &[u8]) -> EncodingKey {
    EncodingKey::from_rsa_pem(pem).unwrap()
}

pub fn hs(secret: &[u8]) -> EncodingKey {
    EncodingKey::from_secret(secret).unwrap()
}

pub fn b64(bytes: &[u8]) -> String {
    use std::fmt::Write;
    // Minimal base64url without padding, to hand-craft tokens no library would sign.
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, b)| acc | (*b as u32) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            write!(out, "{}", A[((n >> (18 - 6 * i)) & 63) as usize] as char).unwrap();
        }
    }
    out
}

pub fn with_claim(key: &str, value: Value) -> Value {
    let mut c = claims();
    c[key] = value;
    c
}

pub fn without_claim(key: &str) -> Value {
    let mut c = claims();
    c.as_object_mut().unwrap().remove(key);
    c
}

pub fn request_with_query(token: &str) -> ApiGatewayCustomAuthorizerRequestTypeRequest {
    let mut v: Value = serde_json::from_str(REQUEST).unwrap();
    v["queryStringParameters"]["token"] = token.into();
    v["multiValueQueryStringParameters"]["token"] = json!([token]);
    serde_json::from_value(v).unwrap()
}

pub fn request_with_subprotocol(token: &str) -> ApiGatewayCustomAuthorizerRequestTypeRequest {
    let mut v: Value = serde_json::from_str(REQUEST).unwrap();
    v.as_object_mut().unwrap().remove("queryStringParameters");
    v.as_object_mut()
        .unwrap()
        .remove("multiValueQueryStringParameters");
    v["headers"]["Sec-WebSocket-Protocol"] = format!("wsdr, {token}").into();
    serde_json::from_value(v).unwrap()
}

pub fn attacks() -> Vec<(&'static str, String, DenyReason)> {
    let valid = sign(
        Algorithm::RS256,
        Some("rsa-1"),
        &rsa(RSA_PRIVATE),
        &claims(),
    );
    let parts: Vec<&str> = valid.split('.').collect();
    let tampered_payload = b64(
        serde_json::to_string(&with_claim("sub", "user-mallory".into()))
            .unwrap()
            .as_bytes(),
    );
    let none_header = b64(br#"{"alg":"none","typ":"JWT"}"#);
    let oversized = sign(
        Algorithm::HS256,
        None,
        &hs(SECRET.as_bytes()),
        &with_claim("pad", "x".repeat(9_000).into()),
    );
    vec![
        (
            "alg none",
            format!("{none_header}.{}.", parts[1]),
            DenyReason::Malformed,
        ),
        (
            "alg none with signature",
            format!("{none_header}.{}.{}", parts[1], parts[2]),
            DenyReason::Malformed,
        ),
        (
            "HS256 signed with the RSA public key",
            sign(Algorithm::HS256, Some("rsa-1"), &hs(RSA_PUBLIC), &claims()),
            DenyReason::BadSignature,
        ),
        (
            "wrong RSA key for kid",
            sign(
                Algorithm::RS256,
                Some("rsa-1"),
                &rsa(RSA2_PRIVATE),
                &claims(),
            ),
            DenyReason::BadSignature,
        ),
        (
            "ES256 header on an RSA kid",
            sign(
                Algorithm::ES256,
                Some("rsa-1"),
                &EncodingKey::from_ec_pem(EC_PRIVATE).unwrap(),
                &claims(),
            ),
            DenyReason::KeyAlgorithmMismatch,
        ),
        (
            "wrong HS secret",
            sign(
                Algorithm::HS256,
                None,
                &hs(b"another-secret-0123456789abcdef0123"),
                &claims(),
            ),
            DenyReason::BadSignature,
        ),
        (
            "tampered payload",
            format!("{}.{}.{}", parts[0], tampered_payload, parts[2]),
            DenyReason::BadSignature,
        ),
        (
            "expired",
            sign(
                Algorithm::RS256,
                Some("rsa-1"),
                &rsa(RSA_PRIVATE),
                &with_claim("exp", (now() - 60).into()),
            ),
            DenyReason::Expired,
        ),
        (
            "nbf in the future",
            sign(
                Algorithm::RS256,
                Some("rsa-1"),
                &rsa(RSA_PRIVATE),
                &with_claim("nbf", (now() + 60).into()),
            ),
            DenyReason::NotYetValid,
        ),
        (
            "wrong iss",
            sign(
                Algorithm::RS256,
                Some("rsa-1"),
                &rsa(RSA_PRIVATE),
                &with_claim("iss", "https://evil.example.com".into()),
            ),
            DenyReason::WrongIssuer,
        ),
        (
            "wrong aud",
            sign(
                Algorithm::RS256,
                Some("rsa-1"),
                &rsa(RSA_PRIVATE),
                &with_claim("aud", "someone-else".into()),
            ),
            DenyReason::WrongAudience,
        ),
        (
            "unknown kid",
            sign(
                Algorithm::RS256,
                Some("rsa-9"),
                &rsa(RSA_PRIVATE),
                &claims(),
            ),
            DenyReason::UnknownKid,
        ),
        (
            "no kid for JWKS key",
            sign(Algorithm::RS256, None, &rsa(RSA_PRIVATE), &claims()),
            DenyReason::UnknownKid,
        ),
        (
            "missing sub",
            sign(
                Algorithm::RS256,
                Some("rsa-1"),
                &rsa(RSA_PRIVATE),
                &without_claim("sub"),
            ),
            DenyReason::MissingSub,
        ),
        (
            "empty sub",
            sign(
                Algorithm::RS256,
                Some("rsa-1"),
                &rsa(RSA_PRIVATE),
                &with_claim("sub", "".into()),
            ),
            DenyReason::MissingSub,
        ),
        (
            "missing exp",
            sign(
                Algorithm::RS256,
                Some("rsa-1"),
                &rsa(RSA_PRIVATE),
                &without_claim("exp"),
            ),
            DenyReason::Malformed,
        ),
        (
            "canary secret with the main issuer",
            sign(
                Algorithm::HS256,
                None,
                &hs(CANARY_SECRET.as_bytes()),
                &claims(),
            ),
            DenyReason::WrongIssuer,
        ),
        (
            "canary issuer naming a user's sub",
            sign(
                Algorithm::HS256,
                None,
                &hs(CANARY_SECRET.as_bytes()),
                &json!({ "sub": "user-alice", "iss": "wsdr-canary", "aud": AUDIENCE, "exp": now() + 60 }),
            ),
            DenyReason::CanarySubjectNotProbe,
        ),
        (
            "canary issuer naming a sub that only looks like a probe",
            sign(
                Algorithm::HS256,
                None,
                &hs(CANARY_SECRET.as_bytes()),
                &json!({ "sub": "Canary:us-east-1", "iss": "wsdr-canary", "aud": AUDIENCE, "exp": now() + 60 }),
            ),
            DenyReason::CanarySubjectNotProbe,
        ),
        (
            "user issuer naming a probe's sub",
            sign(
                Algorithm::RS256,
                Some("rsa-1"),
                &rsa(RSA_PRIVATE),
                &with_claim("sub", "canary:us-east-1".into()),
            ),
            DenyReason::ReservedSubject,
        ),
        ("oversized token", oversized, DenyReason::TooLarge),
        ("garbage", "this is not a jwt".into(), DenyReason::Malformed),
        (
            "three garbage segments",
            "a.b.c".into(),
            DenyReason::Malformed,
        ),
        ("empty token", String::new(), DenyReason::MissingToken),
    ]
}

/// A `MakeWriter` collecting every log line (for the log tests, each its own binary: a
/// thread-local subscriber must not race other tests for tracing's callsite cache).
#[derive(Clone, Default)]
pub struct Captured(pub Arc<Mutex<Vec<u8>>>);

impl Captured {
    /// The lines logged since the last call.
    pub fn take(&self) -> String {
        String::from_utf8(std::mem::take(&mut *self.0.lock().unwrap())).unwrap()
    }
}

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The test keys named, as a JWKS.
pub fn set_of(kids: &[&str]) -> jsonwebtoken::jwk::JwkSet {
    let all: HashMap<String, Value> = serde_json::from_str(PUBLIC_JWKS).unwrap();
    serde_json::from_value(
        json!({ "keys": kids.iter().map(|k| all[*k].clone()).collect::<Vec<_>>() }),
    )
    .unwrap()
}
