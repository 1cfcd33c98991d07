#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! What the JWKS cache logs for its operators: `JWKS snapshot is behind the issuer` (the
//! `JwksSnapshotBehind` alarm's metric filter reads it) for each live key the snapshot lacks,
//! and only with a snapshot; the snapshot's keys brought back when the issuer is down. Its own
//! test binary: a thread-local subscriber must not race other tests for tracing's callsite
//! cache.

mod common;

use authorizer::{FetchJwks, FetchResult, JwksCache};
use common::*;
use jsonwebtoken::Algorithm;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// An issuer serving rsa-1 and rsa-2 until it is down.
#[derive(Debug, Default)]
struct Issuer {
    down: AtomicBool,
}

impl FetchJwks for Issuer {
    fn fetch<'a>(
        &'a self,
        _url: &'a str,
    ) -> Pin<Box<dyn Future<Output = FetchResult> + Send + 'a>> {
        Box::pin(async move {
            if self.down.load(Ordering::SeqCst) {
                Err("connection refused".into())
            } else {
                Ok(set_of(&["rsa-1", "rsa-2"]))
            }
        })
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_snapshot_behind_line_names_each_live_key_it_lacks_and_only_with_a_snapshot() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let min_refresh = Duration::from_secs(60);

    // Without a snapshot, nothing is behind.
    let issuer = Arc::new(Issuer::default());
    let cache = JwksCache::with_fetcher("https://idp", min_refresh, issuer.clone(), None);
    assert!(cache.key("rsa-1", Algorithm::RS256).await.is_ok());
    let logs = captured.take();
    assert!(logs.contains("JWKS refreshed"), "{logs}");
    assert!(
        !logs.contains("JWKS snapshot is behind the issuer"),
        "{logs}"
    );

    // A snapshot of rsa-1 is behind an issuer serving rsa-1 and rsa-2: rsa-2 is named, alone.
    let snapshot = set_of(&["rsa-1"]);
    let issuer = Arc::new(Issuer::default());
    let cache =
        JwksCache::with_fetcher("https://idp", min_refresh, issuer.clone(), Some(&snapshot));
    assert!(cache.key("rsa-2", Algorithm::RS256).await.is_ok());
    let logs = captured.take();
    let behind: Vec<&str> = logs
        .lines()
        .filter(|line| line.contains("JWKS snapshot is behind the issuer"))
        .collect();
    assert_eq!(behind.len(), 1, "{logs}");
    assert!(behind[0].contains("kid=rsa-2"), "{logs}");

    // The issuer is down: the snapshot's keys the cache holds already are not brought back...
    issuer.down.store(true, Ordering::SeqCst);
    tokio::time::advance(min_refresh).await;
    assert!(cache.key("rsa-9", Algorithm::RS256).await.is_err());
    let logs = captured.take();
    assert!(logs.contains("JWKS refresh failed"), "{logs}");
    assert!(
        !logs.contains("JWKS from the snapshot"),
        "nothing added: {logs}"
    );

    // ...while a snapshot's key the live set had dropped is, and counted.
    let issuer = Arc::new(Issuer::default());
    let snapshot = set_of(&["rsa-1", "ec-1"]);
    let cache =
        JwksCache::with_fetcher("https://idp", min_refresh, issuer.clone(), Some(&snapshot));
    assert!(
        cache.key("rsa-2", Algorithm::RS256).await.is_ok(),
        "the live set, without ec-1"
    );
    issuer.down.store(true, Ordering::SeqCst);
    tokio::time::advance(min_refresh).await;
    captured.take();
    assert!(cache.key("ec-1", Algorithm::ES256).await.is_ok());
    let logs = captured.take();
    let back: Vec<&str> = logs
        .lines()
        .filter(|line| line.contains("JWKS from the snapshot: the issuer cannot be reached"))
        .collect();
    assert_eq!(back.len(), 1, "{logs}");
    assert!(back[0].contains("keys=1"), "{logs}");
}
