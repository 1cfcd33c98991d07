#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! No token text ever reaches the logs. Its own test binary: a thread-local subscriber must
//! not race other tests for tracing's callsite cache.

mod common;

use authorizer::Authorizer;
use common::*;
use jsonwebtoken::Algorithm;

#[tokio::test(flavor = "current_thread")]
async fn no_token_text_reaches_the_logs() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .json()
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let (url, _) = jwks_server(&["rsa-1", "ec-1"]).await;
    let authorizer = Authorizer::new(&config(&url, &[])).await;
    let mut tokens: Vec<String> = attacks().into_iter().map(|(_, t, _)| t).collect();
    tokens.push(sign(
        Algorithm::RS256,
        Some("rsa-1"),
        &rsa(RSA_PRIVATE),
        &claims(),
    ));
    tokens.push(sign(
        Algorithm::HS256,
        None,
        &hs(SECRET.as_bytes()),
        &claims(),
    ));
    for token in &tokens {
        authorizer.authorize(&request_with_query(token)).await;
        authorizer.authorize(&request_with_subprotocol(token)).await;
    }
    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(
        logs.contains("deny") && logs.contains("allow"),
        "the outcomes are logged: {logs}"
    );
    assert!(
        logs.contains("signature does not verify"),
        "the reasons are logged"
    );
    for token in tokens.iter().filter(|t| t.len() > 16) {
        for segment in token.split('.').filter(|s| s.len() >= 12) {
            assert!(!logs.contains(segment), "a token segment reached the logs");
        }
    }
    assert!(!logs.contains(SECRET) && !logs.contains(CANARY_SECRET));
}
