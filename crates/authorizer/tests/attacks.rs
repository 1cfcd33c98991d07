#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The attack suite: every hostile token is denied, every valid one allowed. The JWKS is
//! served by a local HTTP server (port 0).

mod common;

use authorizer::{Authorizer, DenyReason, Verifier};
use aws_lambda_events::apigw::ApiGatewayCustomAuthorizerRequestTypeRequest;
use common::*;
use jsonwebtoken::{Algorithm, EncodingKey};
use serde_json::{json, Value};
use std::sync::atomic::Ordering;

#[tokio::test]
async fn every_attack_is_denied_with_its_reason() {
    let (url, _) = jwks_server(&["rsa-1", "ec-1"]).await;
    let verifier = Verifier::new(&config(&url, &[])).await;
    let authorizer = Authorizer::new(&config(&url, &[])).await;
    for (name, token, reason) in attacks() {
        assert_eq!(verifier.verify(&token).await, Err(reason), "{name}");
        let response = authorizer.authorize(&request_with_query(&token)).await;
        assert!(!response.is_allow(), "{name} was allowed");
        assert_eq!(response.policy_document.statement[0].effect, "Deny");
        assert!(
            response.context.is_empty(),
            "{name}: a Deny carries no context"
        );
    }
}

#[tokio::test]
async fn hs256_is_refused_when_only_asymmetric_algorithms_are_allowed() {
    let (url, _) = jwks_server(&["rsa-1"]).await;
    let verifier = Verifier::new(&config(
        &url,
        &[("JWT_ALGORITHMS", "RS256"), ("CANARY_HS256_SECRET", "")],
    ))
    .await;
    let confused = sign(Algorithm::HS256, Some("rsa-1"), &hs(RSA_PUBLIC), &claims());
    assert_eq!(
        verifier.verify(&confused).await,
        Err(DenyReason::AlgorithmNotAllowed)
    );
}

#[tokio::test]
async fn valid_tokens_of_every_algorithm_are_allowed_on_the_exact_method_arn() {
    let (url, _) = jwks_server(&["rsa-1", "ec-1"]).await;
    let authorizer = Authorizer::new(&config(&url, &[])).await;
    let canary_claims = json!({ "sub": "canary:us-east-1", "iss": "wsdr-canary", "aud": AUDIENCE, "exp": now() + 60 });
    let cases = [
        (
            "RS256",
            sign(
                Algorithm::RS256,
                Some("rsa-1"),
                &rsa(RSA_PRIVATE),
                &claims(),
            ),
            "user-alice",
            false,
        ),
        (
            "ES256",
            sign(
                Algorithm::ES256,
                Some("ec-1"),
                &EncodingKey::from_ec_pem(EC_PRIVATE).unwrap(),
                &claims(),
            ),
            "user-alice",
            false,
        ),
        (
            "HS256",
            sign(Algorithm::HS256, None, &hs(SECRET.as_bytes()), &claims()),
            "user-alice",
            false,
        ),
        (
            "expired within leeway",
            sign(
                Algorithm::HS256,
                None,
                &hs(SECRET.as_bytes()),
                &with_claim("exp", (now() - 2).into()),
            ),
            "user-alice",
            false,
        ),
        (
            "canary",
            sign(
                Algorithm::HS256,
                None,
                &hs(CANARY_SECRET.as_bytes()),
                &canary_claims,
            ),
            "canary:us-east-1",
            true,
        ),
    ];
    for (name, token, sub, canary) in cases {
        for request in [request_with_query(&token), request_with_subprotocol(&token)] {
            let response = authorizer.authorize(&request).await;
            assert!(response.is_allow(), "{name} denied");
            assert_eq!(response.principal_id, sub, "{name}");
            assert_eq!(response.context["sub"], sub);
            assert_eq!(response.context["canary"], canary.to_string());
            let statement = &response.policy_document.statement[0];
            assert_eq!(
                (statement.action.as_str(), statement.resource.as_str()),
                ("execute-api:Invoke", METHOD_ARN)
            );
            let size = serde_json::to_string(&response).unwrap().len();
            assert!(size < 8 * 1024, "authorizer result is {size} bytes");
        }
    }
}

#[tokio::test]
async fn missing_token_is_denied() {
    let (url, _) = jwks_server(&["rsa-1"]).await;
    let authorizer = Authorizer::new(&config(&url, &[])).await;
    let mut v: Value = serde_json::from_str(REQUEST).unwrap();
    v.as_object_mut().unwrap().remove("queryStringParameters");
    v.as_object_mut()
        .unwrap()
        .remove("multiValueQueryStringParameters");
    let request: ApiGatewayCustomAuthorizerRequestTypeRequest = serde_json::from_value(v).unwrap();
    assert!(!authorizer.authorize(&request).await.is_allow());
    // Only our protocol name offered, no token beside it.
    let mut only_name = request_with_subprotocol("x");
    only_name
        .headers
        .insert("sec-websocket-protocol", "wsdr".parse().unwrap());
    assert!(!authorizer.authorize(&only_name).await.is_allow());
}

#[tokio::test]
async fn rotated_jwks_key_is_picked_up_on_unknown_kid() {
    let (url, jwks) = jwks_server(&["rsa-1"]).await;
    let verifier = Verifier::new(&config(&url, &[])).await;
    assert_eq!(
        jwks.hits.load(Ordering::SeqCst),
        1,
        "fetched once at cold start"
    );
    let old = sign(
        Algorithm::RS256,
        Some("rsa-1"),
        &rsa(RSA_PRIVATE),
        &claims(),
    );
    let new = sign(
        Algorithm::RS256,
        Some("rsa-2"),
        &rsa(RSA2_PRIVATE),
        &claims(),
    );
    assert!(verifier.verify(&old).await.is_ok());
    assert_eq!(
        jwks.hits.load(Ordering::SeqCst),
        1,
        "known kid: served from cache"
    );
    *jwks.served.lock().unwrap() = vec!["rsa-2".into()];
    assert!(
        verifier.verify(&new).await.is_ok(),
        "new kid triggers a refresh"
    );
    assert_eq!(jwks.hits.load(Ordering::SeqCst), 2);
    assert_eq!(
        verifier.verify(&old).await,
        Err(DenyReason::UnknownKid),
        "the retired key is gone"
    );
}

#[tokio::test]
async fn unknown_kids_cannot_hammer_the_jwks_endpoint() {
    let (url, jwks) = jwks_server(&["rsa-1"]).await;
    let verifier = Verifier::new(&config(&url, &[("JWKS_MIN_REFRESH_SECONDS", "3600")])).await;
    for i in 0..25 {
        let token = sign(
            Algorithm::RS256,
            Some(&format!("random-{i}")),
            &rsa(RSA_PRIVATE),
            &claims(),
        );
        assert_eq!(verifier.verify(&token).await, Err(DenyReason::UnknownKid));
    }
    assert_eq!(
        jwks.hits.load(Ordering::SeqCst),
        1,
        "refresh is rate-limited"
    );
}

#[tokio::test]
async fn jwks_down_at_cold_start_recovers_on_next_unknown_kid() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}/jwks.json", listener.local_addr().unwrap());
    drop(listener);
    let verifier = Verifier::new(&config(&dead, &[])).await;
    let token = sign(
        Algorithm::RS256,
        Some("rsa-1"),
        &rsa(RSA_PRIVATE),
        &claims(),
    );
    assert_eq!(
        verifier.verify(&token).await,
        Err(DenyReason::KeysUnavailable)
    );
}

/// docs/AUTH.md: `sub` is 1..255 characters. A 107-character CJK subject (321 bytes) is a
/// user; 256 characters of it are not.
#[tokio::test]
async fn a_subject_is_measured_in_characters_not_bytes() {
    let (url, _) = jwks_server(&["rsa-1"]).await;
    let verifier = Verifier::new(&config(&url, &[])).await;
    let token = |sub: String| {
        sign(
            Algorithm::RS256,
            Some("rsa-1"),
            &rsa(RSA_PRIVATE),
            &with_claim("sub", sub.into()),
        )
    };
    let cjk = "競".repeat(107);
    assert!(cjk.len() > 255, "more bytes than characters");
    let identity = verifier.verify(&token(cjk.clone())).await.expect("allowed");
    assert_eq!(identity.sub, cjk);
    assert!(wsdr_core::UserId::new(cjk).is_ok(), "the domain agrees");
    let longest = "競".repeat(255);
    assert!(verifier.verify(&token(longest.clone())).await.is_ok());
    assert!(wsdr_core::UserId::new(longest).is_ok());
    let too_long = "競".repeat(256);
    assert_eq!(
        verifier.verify(&token(too_long.clone())).await,
        Err(DenyReason::MissingSub)
    );
    assert!(wsdr_core::UserId::new(too_long).is_err());
}

#[tokio::test]
async fn a_token_of_the_size_limit_is_read_and_one_byte_more_is_too_large() {
    let verifier = Verifier::new(&config("http://127.0.0.1:9/jwks.json", &[])).await;
    let at_limit = "x".repeat(authorizer::MAX_TOKEN_BYTES);
    assert_eq!(verifier.verify(&at_limit).await, Err(DenyReason::Malformed));
    assert_eq!(
        verifier.verify(&format!("{at_limit}x")).await,
        Err(DenyReason::TooLarge)
    );
}

#[tokio::test]
async fn token_times_are_judged_by_the_clock_the_verifier_is_given() {
    let (url, _) = jwks_server(&["rsa-1"]).await;
    let mut verifier = Verifier::new(&config(&url, &[])).await;
    let issued = now();
    let mut claims = claims();
    claims["nbf"] = json!(issued);
    claims["exp"] = json!(issued + 300);
    let token = sign(Algorithm::RS256, Some("rsa-1"), &rsa(RSA_PRIVATE), &claims);
    assert!(verifier.verify(&token).await.is_ok());
    // The leeway is 5 s: valid through exp + 5 and from nbf - 5, to the second.
    let at = |secs: i64| -> authorizer::NowSecs { std::sync::Arc::new(move || secs as u64) };
    verifier.set_clock(at(issued + 305));
    assert!(verifier.verify(&token).await.is_ok());
    verifier.set_clock(at(issued + 306));
    assert_eq!(verifier.verify(&token).await, Err(DenyReason::Expired));
    verifier.set_clock(at(issued - 5));
    assert!(verifier.verify(&token).await.is_ok());
    verifier.set_clock(at(issued - 6));
    assert_eq!(verifier.verify(&token).await, Err(DenyReason::NotYetValid));
}

#[tokio::test]
async fn a_verifiers_debug_names_its_issuers_and_never_a_secret() {
    let verifier = Verifier::new(&config("http://127.0.0.1:9/jwks.json", &[])).await;
    let shown = format!("{verifier:?}");
    assert!(shown.starts_with("Verifier { issuers: ["), "{shown}");
    assert!(
        shown.contains(ISSUER) && shown.contains("leeway_secs: 5"),
        "{shown}"
    );
    assert!(
        !shown.contains(SECRET) && !shown.contains(CANARY_SECRET),
        "{shown}"
    );
}

/// An issuer serving keys no signature can verify against: an RSA key of a one-byte modulus
/// and a P-256 key whose point is not on the curve.
#[derive(Debug)]
struct BrokenKeyIssuer;

impl authorizer::FetchJwks for BrokenKeyIssuer {
    fn fetch<'a>(
        &'a self,
        _url: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = authorizer::FetchResult> + Send + 'a>>
    {
        Box::pin(async {
            serde_json::from_value(json!({ "keys": [
                { "kty": "RSA", "kid": "tiny", "use": "sig", "alg": "RS256", "n": "AQ", "e": "AQAB" },
                { "kty": "EC", "kid": "bad-ec", "use": "sig", "crv": "P-256", "x": "AQ", "y": "AQ" }
            ] }))
            .map_err(|e| e.to_string())
        })
    }
}

#[tokio::test]
async fn broken_keys_in_the_issuers_set_verify_nothing_each_with_its_reason() {
    let config = config("https://auth.example.com/jwks.json", &[]);
    let verifier = Verifier::with_fetcher(&config, std::sync::Arc::new(BrokenKeyIssuer)).await;
    let token = sign(Algorithm::RS256, Some("tiny"), &rsa(RSA_PRIVATE), &claims());
    assert_eq!(verifier.verify(&token).await, Err(DenyReason::BadSignature));
    // The point is refused as a key: the key, not the signature, is at fault.
    let token = sign(
        Algorithm::ES256,
        Some("bad-ec"),
        &EncodingKey::from_ec_pem(EC_PRIVATE).unwrap(),
        &claims(),
    );
    assert_eq!(
        verifier.verify(&token).await,
        Err(DenyReason::KeyAlgorithmMismatch)
    );
}
