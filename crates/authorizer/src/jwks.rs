//! A JWKS cache: refreshed when a token names an unknown `kid`, at most once per
//! `min_refresh`, shared across invocations of a warm Lambda.
//!
//! An issuer lives in one Region (a plain Cognito user pool's keys are served from its
//! Region), and a failover herd cold-starts authorizer sandboxes in the *other* Region at
//! the moment the issuer's Region may be gone. So the cache can hold a **snapshot** of the
//! issuer's keys kept beside the function in its own Region (`JWT_JWKS_SNAPSHOT`, in the
//! function's configuration). With a snapshot, a cold start **starts from the snapshot's
//! keys** and fetches the live set in the background: no sandbox of a herd waits on a dead
//! issuer before its first `$connect` (docs/DEPLOY.md, "The issuer's keys"). The live JWKS
//! wins once it answers (a key the issuer withdrew stops verifying, and a live key the
//! snapshot lacks is logged, `JWKS snapshot is behind the issuer`, so a rotation is
//! redeployed); until it answers, the snapshot's keys verify. Without a snapshot the cold
//! start fetches before it serves, as there is nothing else to verify with.

use crate::deny::DenyReason;
use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Mutex, RwLock};
use tokio::time::Instant;

/// A fetch's outcome: the set, or why there is none (logged, never shown to a client).
pub type FetchResult = Result<JwkSet, String>;

/// Where a JWKS is fetched from: the issuer's URL over HTTPS in a Lambda ([`HttpJwks`]); the
/// lab's identity provider in its Region.
pub trait FetchJwks: Send + Sync + std::fmt::Debug {
    fn fetch<'a>(&'a self, url: &'a str) -> Pin<Box<dyn Future<Output = FetchResult> + Send + 'a>>;
}

/// How long a JWKS fetch may take to connect, and in all. A dead Region's endpoint can
/// swallow SYNs rather than refuse them; half a second is many round trips between any two
/// Regions, and the whole fetch stays well inside the authorizer's 10 s budget.
pub const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(2);

/// The issuer's JWKS over HTTPS, bounded by [`CONNECT_TIMEOUT`] and [`FETCH_TIMEOUT`].
#[derive(Debug, Default)]
pub struct HttpJwks {
    #[cfg(feature = "jwks")]
    http: reqwest::Client,
}

impl HttpJwks {
    pub fn new() -> Self {
        Self {
            #[cfg(feature = "jwks")]
            http: reqwest::Client::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .timeout(FETCH_TIMEOUT)
                .build()
                .unwrap_or_default(),
        }
    }
}

impl FetchJwks for HttpJwks {
    fn fetch<'a>(&'a self, url: &'a str) -> Pin<Box<dyn Future<Output = FetchResult> + Send + 'a>> {
        Box::pin(async move {
            #[cfg(feature = "jwks")]
            {
                let response = self
                    .http
                    .get(url)
                    .send()
                    .await
                    .map_err(|e| format!("request failed: {e}"))?;
                if !response.status().is_success() {
                    return Err(format!("HTTP {}", response.status()));
                }
                response
                    .json()
                    .await
                    .map_err(|e| format!("not a JWKS: {e}"))
            }
            #[cfg(not(feature = "jwks"))]
            {
                Err(format!(
                    "cannot fetch {url}: this build has no HTTPS client (authorizer's `jwks` feature is off)"
                ))
            }
        })
    }
}

type Keys = HashMap<String, (DecodingKey, Algorithm)>;

/// The keys of a set the authorizer can use: signing keys with a `kid`, RSA as RS256 and
/// P-256 as ES256 (a declared `alg` must agree with the key's own type).
pub fn usable_keys(set: &JwkSet) -> Keys {
    let mut keys = HashMap::new();
    for jwk in &set.keys {
        let Some(kid) = jwk.common.key_id.clone() else {
            continue;
        };
        if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
            continue;
        }
        let alg = match (&jwk.algorithm, jwk.common.key_algorithm) {
            (AlgorithmParameters::RSA(_), None | Some(KeyAlgorithm::RS256)) => Algorithm::RS256,
            (AlgorithmParameters::EllipticCurve(_), None | Some(KeyAlgorithm::ES256)) => {
                Algorithm::ES256
            }
            _ => continue,
        };
        if let Ok(key) = DecodingKey::from_jwk(jwk) {
            keys.insert(kid, (key, alg));
        }
    }
    keys
}

#[derive(Default)]
struct Cached {
    keys: Keys,
    /// When the last fetch was tried (rate limit), and whether it failed.
    fetched_at: Option<Instant>,
    last_fetch_failed: bool,
}

/// JWKS keys by `kid`.
pub struct JwksCache {
    url: String,
    fetcher: Arc<dyn FetchJwks>,
    snapshot: Keys,
    min_refresh: Duration,
    cached: RwLock<Cached>,
    refreshing: Mutex<()>,
}

impl std::fmt::Debug for JwksCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwksCache")
            .field("url", &self.url)
            .field("snapshot_keys", &self.snapshot.len())
            .field("min_refresh", &self.min_refresh)
            .finish_non_exhaustive()
    }
}

impl JwksCache {
    /// A cache of `url`'s keys fetched over HTTPS, with no snapshot.
    pub fn new(url: impl Into<String>, min_refresh: Duration) -> Self {
        Self::with_fetcher(url, min_refresh, Arc::new(HttpJwks::new()), None)
    }

    /// A cache of `url`'s keys fetched by `fetcher`, falling back on `snapshot`'s keys when
    /// the issuer cannot be reached.
    pub fn with_fetcher(
        url: impl Into<String>,
        min_refresh: Duration,
        fetcher: Arc<dyn FetchJwks>,
        snapshot: Option<&JwkSet>,
    ) -> Self {
        let snapshot = snapshot.map(usable_keys).unwrap_or_default();
        Self {
            url: url.into(),
            fetcher,
            // A cold start serves the snapshot's keys from its first request.
            cached: RwLock::new(Cached {
                keys: snapshot.clone(),
                ..Cached::default()
            }),
            snapshot,
            min_refresh,
            refreshing: Mutex::new(()),
        }
    }

    /// At cold start. With a snapshot: fetch the live set in the background and return at
    /// once (the snapshot's keys serve meanwhile; the task ends with its one fetch). Without
    /// one: fetch now, as nothing else can verify. A failure is logged, not fatal: the next
    /// unknown `kid` retries.
    pub async fn prime(self: &Arc<Self>) {
        if self.snapshot.is_empty() {
            let _guard = self.refreshing.lock().await;
            if let Err(error) = self.refresh().await {
                tracing::warn!(%error, "JWKS fetch at cold start failed");
            }
            return;
        }
        let cache = Arc::clone(self);
        tokio::spawn(async move {
            let _guard = cache.refreshing.lock().await;
            // An unknown `kid` may have fetched first.
            if cache.cached.read().await.fetched_at.is_some() {
                return;
            }
            if let Err(error) = cache.refresh().await {
                tracing::warn!(%error, "JWKS fetch at cold start failed: the snapshot's keys serve");
            }
        });
    }

    /// The key for `kid`, usable with `alg`; refreshes once (rate-limited) if `kid` is
    /// unknown, and reads the snapshot when that refresh fails.
    pub async fn key(&self, kid: &str, alg: Algorithm) -> Result<DecodingKey, DenyReason> {
        if let Some(found) = self.lookup(kid, alg).await? {
            return Ok(found);
        }
        let _guard = self.refreshing.lock().await;
        // Another invocation may have refreshed while we waited.
        if let Some(found) = self.lookup(kid, alg).await? {
            return Ok(found);
        }
        let (recently, failed) = {
            let cached = self.cached.read().await;
            (
                cached
                    .fetched_at
                    .is_some_and(|t| t.elapsed() < self.min_refresh),
                cached.last_fetch_failed,
            )
        };
        if recently {
            // The issuer was not reached: say so (it is alarmed on).
            return Err(if failed {
                DenyReason::KeysUnavailable
            } else {
                DenyReason::UnknownKid
            });
        }
        if let Err(error) = self.refresh().await {
            tracing::warn!(%error, "JWKS refresh failed");
            if !self.fall_back_on_snapshot().await {
                return Err(DenyReason::KeysUnavailable);
            }
            return match self.lookup(kid, alg).await? {
                Some(found) => Ok(found),
                // The issuer cannot be reached and the snapshot does not hold the key.
                None => Err(DenyReason::KeysUnavailable),
            };
        }
        self.lookup(kid, alg).await?.ok_or(DenyReason::UnknownKid)
    }

    async fn lookup(&self, kid: &str, alg: Algorithm) -> Result<Option<DecodingKey>, DenyReason> {
        match self.cached.read().await.keys.get(kid) {
            None => Ok(None),
            Some((key, key_alg)) if *key_alg == alg => Ok(Some(key.clone())),
            Some(_) => Err(DenyReason::KeyAlgorithmMismatch),
        }
    }

    /// Add the snapshot's keys the cache lacks (the live keys, if any, stay). False when
    /// there is no snapshot.
    async fn fall_back_on_snapshot(&self) -> bool {
        if self.snapshot.is_empty() {
            return false;
        }
        let mut cached = self.cached.write().await;
        let mut added = 0;
        for (kid, key) in &self.snapshot {
            if !cached.keys.contains_key(kid) {
                cached.keys.insert(kid.clone(), key.clone());
                added += 1;
            }
        }
        if added > 0 {
            tracing::warn!(
                keys = added,
                "JWKS from the snapshot: the issuer cannot be reached"
            );
        }
        true
    }

    /// Fetch the live set; on failure the keys held stay (the snapshot's, or the last live
    /// set's). Callers hold `refreshing`.
    async fn refresh(&self) -> Result<(), String> {
        // Stamp the attempt first: a failing IdP is also rate-limited.
        self.cached.write().await.fetched_at = Some(Instant::now());
        let set = match self.fetcher.fetch(&self.url).await {
            Ok(set) => set,
            Err(error) => {
                self.cached.write().await.last_fetch_failed = true;
                return Err(error);
            }
        };
        let keys = usable_keys(&set);
        if !self.snapshot.is_empty() {
            for kid in keys.keys().filter(|kid| !self.snapshot.contains_key(*kid)) {
                tracing::warn!(kid = %kid, "JWKS snapshot is behind the issuer");
            }
        }
        tracing::info!(keys = keys.len(), "JWKS refreshed");
        let mut cached = self.cached.write().await;
        cached.keys = keys;
        cached.last_fetch_failed = false;
        Ok(())
    }
}
