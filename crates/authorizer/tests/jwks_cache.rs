#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The JWKS cache's own contract, on paused time: when an unknown `kid` may fetch again, what
//! serves when the issuer stops answering, and which algorithm a key is for.

mod common;

use authorizer::{DenyReason, FetchJwks, FetchResult, JwksCache};
use common::*;
use jsonwebtoken::Algorithm;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const MIN_REFRESH: Duration = Duration::from_secs(60);

/// An issuer answering at once with the keys named, or failing while it is down.
#[derive(Debug)]
struct Issuer {
    kids: Mutex<Option<Vec<&'static str>>>,
    fetches: AtomicUsize,
}

impl Issuer {
    fn serving(kids: &[&'static str]) -> Arc<Self> {
        Arc::new(Self {
            kids: Mutex::new(Some(kids.to_vec())),
            fetches: AtomicUsize::new(0),
        })
    }
    fn down(&self) {
        *self.kids.lock().unwrap() = None;
    }
    fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }
}

impl FetchJwks for Issuer {
    fn fetch<'a>(
        &'a self,
        _url: &'a str,
    ) -> Pin<Box<dyn Future<Output = FetchResult> + Send + 'a>> {
        Box::pin(async move {
            self.fetches.fetch_add(1, Ordering::SeqCst);
            match self.kids.lock().unwrap().clone() {
                Some(kids) => Ok(set_of(&kids)),
                None => Err("connection refused".into()),
            }
        })
    }
}

fn cache(issuer: &Arc<Issuer>, snapshot: Option<&[&str]>) -> JwksCache {
    let snapshot = snapshot.map(set_of);
    JwksCache::with_fetcher(
        "https://auth.example.com/jwks.json",
        MIN_REFRESH,
        issuer.clone(),
        snapshot.as_ref(),
    )
}

#[tokio::test(start_paused = true)]
async fn an_unknown_kid_fetches_again_exactly_min_refresh_after_the_last_fetch() {
    let issuer = Issuer::serving(&["rsa-1"]);
    let cache = cache(&issuer, None);
    assert!(cache.key("rsa-1", Algorithm::RS256).await.is_ok());
    assert_eq!(issuer.fetches(), 1);

    tokio::time::advance(MIN_REFRESH - Duration::from_millis(1)).await;
    assert_eq!(
        cache.key("rsa-9", Algorithm::RS256).await.err(),
        Some(DenyReason::UnknownKid)
    );
    assert_eq!(issuer.fetches(), 1, "within min_refresh of the last fetch");

    tokio::time::advance(Duration::from_millis(1)).await;
    assert_eq!(
        cache.key("rsa-9", Algorithm::RS256).await.err(),
        Some(DenyReason::UnknownKid)
    );
    assert_eq!(
        issuer.fetches(),
        2,
        "min_refresh after it, the kid is looked up"
    );
}

#[tokio::test(start_paused = true)]
async fn a_key_the_issuer_withdrew_serves_again_from_the_snapshot_once_the_issuer_is_down() {
    // The snapshot holds rsa-1; the issuer rotated to rsa-2 and withdrew rsa-1.
    let issuer = Issuer::serving(&["rsa-2"]);
    let cache = cache(&issuer, Some(&["rsa-1"]));
    assert!(
        cache.key("rsa-1", Algorithm::RS256).await.is_ok(),
        "cold start"
    );
    assert!(
        cache.key("rsa-2", Algorithm::RS256).await.is_ok(),
        "fetched"
    );
    assert_eq!(
        cache.key("rsa-1", Algorithm::RS256).await.err(),
        Some(DenyReason::UnknownKid),
        "the issuer answered without it"
    );

    // The issuer's Region is lost: the next lookup's fetch fails, and the snapshot's keys the
    // cache lacks serve beside the live ones it holds.
    issuer.down();
    tokio::time::advance(MIN_REFRESH).await;
    assert!(cache.key("rsa-1", Algorithm::RS256).await.is_ok());
    assert_eq!(issuer.fetches(), 2);
    assert!(cache.key("rsa-2", Algorithm::RS256).await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn without_a_snapshot_an_issuer_that_is_down_leaves_an_unknown_kid_unavailable() {
    let issuer = Issuer::serving(&["rsa-1"]);
    let cache = cache(&issuer, None);
    assert!(cache.key("rsa-1", Algorithm::RS256).await.is_ok());
    issuer.down();
    tokio::time::advance(MIN_REFRESH).await;
    assert_eq!(
        cache.key("rsa-2", Algorithm::RS256).await.err(),
        Some(DenyReason::KeysUnavailable)
    );
    assert!(
        cache.key("rsa-1", Algorithm::RS256).await.is_ok(),
        "the keys held stay"
    );
}

#[tokio::test(start_paused = true)]
async fn a_key_serves_only_the_algorithm_of_its_type() {
    let issuer = Issuer::serving(&["rsa-1", "ec-1"]);
    let cache = cache(&issuer, None);
    assert!(cache.key("rsa-1", Algorithm::RS256).await.is_ok());
    assert_eq!(
        cache.key("rsa-1", Algorithm::ES256).await.err(),
        Some(DenyReason::KeyAlgorithmMismatch)
    );
    assert!(cache.key("ec-1", Algorithm::ES256).await.is_ok());
    assert_eq!(
        cache.key("ec-1", Algorithm::RS256).await.err(),
        Some(DenyReason::KeyAlgorithmMismatch)
    );
}
