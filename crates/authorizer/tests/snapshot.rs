//! The JWKS snapshot: an issuer that cannot be reached (its Region lost) still verifies the
//! keys the snapshot holds, and nothing else; an issuer that answers always wins.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use authorizer::{DenyReason, Identity, Verifier};
use common::*;
use jsonwebtoken::Algorithm;
use serde_json::{json, Value};
use std::collections::HashMap;

/// A JWKS of the test keys named.
fn jwks_of(kids: &[&str]) -> String {
    let all: HashMap<String, Value> = serde_json::from_str(PUBLIC_JWKS).unwrap();
    json!({ "keys": kids.iter().map(|k| all[*k].clone()).collect::<Vec<_>>() }).to_string()
}

/// A JWKS URL nothing answers on.
fn unreachable_issuer() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "http://{}/.well-known/jwks.json",
        listener.local_addr().unwrap()
    );
    drop(listener);
    url
}

fn rsa_token(kid: &str, pem: &[u8]) -> String {
    sign(Algorithm::RS256, Some(kid), &rsa(pem), &claims())
}

#[tokio::test]
async fn an_unreachable_issuer_still_verifies_the_keys_of_its_snapshot() {
    let snapshot = jwks_of(&["rsa-1"]);
    let url = unreachable_issuer();
    let with = Verifier::new(&config(&url, &[("JWT_JWKS_SNAPSHOT", &snapshot)])).await;
    let identity = with
        .verify(&rsa_token("rsa-1", RSA_PRIVATE))
        .await
        .expect("the snapshot's key verifies");
    assert_eq!(identity.sub, "user-alice");
    // The same cold start without the snapshot denies every user.
    let without = Verifier::new(&config(&url, &[])).await;
    assert_eq!(
        without.verify(&rsa_token("rsa-1", RSA_PRIVATE)).await,
        Err(DenyReason::KeysUnavailable)
    );
}

#[tokio::test]
async fn a_key_the_snapshot_lacks_is_unavailable_and_a_forged_one_still_fails() {
    let snapshot = jwks_of(&["rsa-1"]);
    let verifier = Verifier::new(&config(
        &unreachable_issuer(),
        &[("JWT_JWKS_SNAPSHOT", &snapshot)],
    ))
    .await;
    assert_eq!(
        verifier.verify(&rsa_token("rsa-2", RSA2_PRIVATE)).await,
        Err(DenyReason::KeysUnavailable),
        "rsa-2 is in neither the (unreachable) issuer's answer nor the snapshot"
    );
    assert_eq!(
        verifier.verify(&rsa_token("rsa-1", RSA2_PRIVATE)).await,
        Err(DenyReason::BadSignature),
        "the snapshot's key is a key, not a pass"
    );
}

#[tokio::test]
async fn an_issuer_that_answers_wins_over_its_snapshot() {
    // The issuer rotated to rsa-2 and withdrew rsa-1; the snapshot is older.
    let (url, jwks) = jwks_server(&["rsa-2"]).await;
    let snapshot = jwks_of(&["rsa-1"]);
    let verifier = Verifier::new(&config(&url, &[("JWT_JWKS_SNAPSHOT", &snapshot)])).await;
    assert!(verifier
        .verify(&rsa_token("rsa-2", RSA2_PRIVATE))
        .await
        .is_ok());
    assert_eq!(
        verifier.verify(&rsa_token("rsa-1", RSA_PRIVATE)).await,
        Err(DenyReason::UnknownKid),
        "a key the live issuer withdrew is not revived by the snapshot while it answers"
    );
    assert!(jwks.hits.load(std::sync::atomic::Ordering::SeqCst) >= 1);
}

#[tokio::test]
async fn a_snapshot_that_verifies_nothing_is_a_configuration_error() {
    for (snapshot, says) in [
        ("not json", "neither JSON nor base64url"),
        ("e30", "not a JWKS"),
        (r#"{"keys": []}"#, "no RS256 or ES256"),
        (
            r#"{"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "x"}]}"#,
            "no RS256 or ES256",
        ),
    ] {
        let env: HashMap<&str, &str> = [
            ("JWT_ISSUER", ISSUER),
            ("JWT_AUDIENCE", AUDIENCE),
            ("JWT_JWKS_URL", "https://issuer.example/jwks.json"),
            ("JWT_JWKS_SNAPSHOT", snapshot),
        ]
        .into_iter()
        .collect();
        let error = authorizer::Config::from_lookup(|k| env.get(k).map(|v| v.to_string()))
            .expect_err(snapshot)
            .to_string();
        assert!(
            error.contains("JWT_JWKS_SNAPSHOT") && error.contains(says),
            "{snapshot}: {error}"
        );
    }
}

#[tokio::test]
async fn a_snapshot_in_base64url_reads_as_its_json() {
    let json = jwks_of(&["rsa-1"]);
    let encoded = b64(json.as_bytes());
    let verifier = Verifier::new(&config(
        &unreachable_issuer(),
        &[("JWT_JWKS_SNAPSHOT", &encoded)],
    ))
    .await;
    assert!(verifier
        .verify(&rsa_token("rsa-1", RSA_PRIVATE))
        .await
        .is_ok());
}

/// An issuer whose answer waits until the test lets it go (a dead Region that swallows the
/// request, then one that answers), counting the fetches it is asked for.
#[derive(Debug)]
struct HeldIssuer {
    jwks: String,
    release: tokio::sync::Semaphore,
    fetches: std::sync::atomic::AtomicUsize,
}

impl HeldIssuer {
    fn new(kids: &[&str]) -> std::sync::Arc<Self> {
        std::sync::Arc::new(Self {
            jwks: jwks_of(kids),
            release: tokio::sync::Semaphore::new(0),
            fetches: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    fn fetches(&self) -> usize {
        self.fetches.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl authorizer::FetchJwks for HeldIssuer {
    fn fetch<'a>(
        &'a self,
        _url: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = authorizer::FetchResult> + Send + 'a>>
    {
        Box::pin(async move {
            self.fetches
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _answer = self
                .release
                .acquire()
                .await
                .map_err(|e| format!("closed: {e}"))?;
            serde_json::from_str(&self.jwks).map_err(|e| e.to_string())
        })
    }
}

/// `verify` on paused time, bounded: a verifier that waits for an issuer that never answers
/// fails the test instead of hanging it.
async fn verify_bounded(verifier: &Verifier, token: &str) -> Result<Identity, DenyReason> {
    tokio::time::timeout(std::time::Duration::from_secs(60), verifier.verify(token))
        .await
        .expect("verify waited on the held issuer")
}

#[tokio::test(start_paused = true)]
async fn a_cold_start_with_a_snapshot_serves_before_the_issuer_answers_and_then_follows_it() {
    // The issuer rotated to rsa-2 and withdrew rsa-1; its answer is held back.
    let issuer = HeldIssuer::new(&["rsa-2"]);
    let snapshot = jwks_of(&["rsa-1"]);
    let config = config(
        "https://auth.example.com/jwks.json",
        &[("JWT_JWKS_SNAPSHOT", &snapshot)],
    );
    let cold_start = Verifier::with_fetcher(&config, issuer.clone());
    // The cold start returns while the fetch hangs: nobody waits on a dead issuer.
    let verifier = tokio::time::timeout(std::time::Duration::from_secs(5), cold_start)
        .await
        .expect("the cold start does not wait for the issuer");
    assert!(
        verify_bounded(&verifier, &rsa_token("rsa-1", RSA_PRIVATE))
            .await
            .is_ok(),
        "the snapshot's key verifies from the first request"
    );
    tokio::task::yield_now().await;
    assert_eq!(
        issuer.fetches(),
        1,
        "the live set is fetched in the background"
    );
    // The issuer answers: its set wins.
    issuer.release.add_permits(1);
    assert!(
        verify_bounded(&verifier, &rsa_token("rsa-2", RSA2_PRIVATE))
            .await
            .is_ok(),
        "an unknown kid waits for the fetch in flight and finds the live key"
    );
    assert_eq!(
        issuer.fetches(),
        1,
        "one fetch served the cold start and the unknown kid"
    );
    assert_eq!(
        verify_bounded(&verifier, &rsa_token("rsa-1", RSA_PRIVATE)).await,
        Err(DenyReason::UnknownKid),
        "a key the issuer withdrew stops verifying once it has answered"
    );
}

#[tokio::test]
async fn a_cold_start_without_a_snapshot_fetches_before_it_serves() {
    let issuer = HeldIssuer::new(&["rsa-1"]);
    let config = config("https://auth.example.com/jwks.json", &[]);
    let cold_start = Verifier::with_fetcher(&config, issuer.clone());
    tokio::pin!(cold_start);
    assert!(
        tokio::time::timeout(std::time::Duration::from_millis(50), &mut cold_start)
            .await
            .is_err(),
        "with nothing else to verify with, the cold start waits for the keys"
    );
    issuer.release.add_permits(1);
    let verifier = cold_start.await;
    assert!(verifier
        .verify(&rsa_token("rsa-1", RSA_PRIVATE))
        .await
        .is_ok());
    assert_eq!(issuer.fetches(), 1);
}

#[test]
fn a_key_caches_debug_names_its_issuer_and_counts_its_snapshots_keys() {
    let snapshot: jsonwebtoken::jwk::JwkSet =
        serde_json::from_str(&jwks_of(&["rsa-1", "rsa-2"])).unwrap();
    let cache = authorizer::JwksCache::with_fetcher(
        "https://auth.example.com/jwks.json",
        std::time::Duration::from_secs(60),
        HeldIssuer::new(&["rsa-1"]),
        Some(&snapshot),
    );
    assert_eq!(
        format!("{cache:?}"),
        r#"JwksCache { url: "https://auth.example.com/jwks.json", snapshot_keys: 2, min_refresh: 60s, .. }"#
    );
}
