//! A JWKS cache: fetched at cold start, refreshed when a token names an unknown `kid`, at
//! most once per `min_refresh`, shared across invocations of a warm Lambda.

use crate::deny::DenyReason;
use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use std::collections::HashMap;
use std::time::Duration;
use tokio::sync::{Mutex, RwLock};
use tokio::time::Instant;

#[derive(Debug, Default)]
struct Cached {
    keys: HashMap<String, (DecodingKey, Algorithm)>,
    fetched_at: Option<Instant>,
}

/// JWKS keys by `kid`.
#[derive(Debug)]
pub struct JwksCache {
    url: String,
    #[cfg(feature = "jwks")]
    http: reqwest::Client,
    min_refresh: Duration,
    cached: RwLock<Cached>,
    refreshing: Mutex<()>,
}

impl JwksCache {
    pub fn new(url: impl Into<String>, min_refresh: Duration) -> Self {
        Self {
            url: url.into(),
            #[cfg(feature = "jwks")]
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(3))
                .build()
                .unwrap_or_default(),
            min_refresh,
            cached: RwLock::default(),
            refreshing: Mutex::new(()),
        }
    }

    /// Fetch now (cold start). A failure is logged, not fatal: the next unknown `kid` retries.
    pub async fn prime(&self) {
        if let Err(error) = self.refresh().await {
            tracing::warn!(%error, "JWKS fetch at cold start failed");
        }
    }

    /// Number of usable keys cached.
    pub async fn len(&self) -> usize {
        self.cached.read().await.keys.len()
    }

    pub async fn is_empty(&self) -> bool {
        self.len().await == 0
    }

    /// The key for `kid`, usable with `alg`; refreshes once (rate-limited) if `kid` is unknown.
    pub async fn key(&self, kid: &str, alg: Algorithm) -> Result<DecodingKey, DenyReason> {
        if let Some(found) = self.lookup(kid, alg).await? {
            return Ok(found);
        }
        let _guard = self.refreshing.lock().await;
        // Another invocation may have refreshed while we waited.
        if let Some(found) = self.lookup(kid, alg).await? {
            return Ok(found);
        }
        let recently = self
            .cached
            .read()
            .await
            .fetched_at
            .is_some_and(|t| t.elapsed() < self.min_refresh);
        if recently {
            return Err(DenyReason::UnknownKid);
        }
        self.refresh().await.map_err(|error| {
            tracing::warn!(%error, "JWKS refresh failed");
            DenyReason::KeysUnavailable
        })?;
        self.lookup(kid, alg).await?.ok_or(DenyReason::UnknownKid)
    }

    async fn lookup(&self, kid: &str, alg: Algorithm) -> Result<Option<DecodingKey>, DenyReason> {
        match self.cached.read().await.keys.get(kid) {
            None => Ok(None),
            Some((key, key_alg)) if *key_alg == alg => Ok(Some(key.clone())),
            Some(_) => Err(DenyReason::KeyAlgorithmMismatch),
        }
    }

    async fn refresh(&self) -> Result<(), String> {
        // Stamp the attempt first: a failing IdP is also rate-limited.
        self.cached.write().await.fetched_at = Some(Instant::now());
        let set = self.fetch().await?;
        let mut keys = HashMap::new();
        for jwk in set.keys {
            let Some(kid) = jwk.common.key_id.clone() else {
                continue;
            };
            if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
                continue;
            }
            // The key's own type fixes its algorithm; a declared `alg` must agree with it.
            let alg = match (&jwk.algorithm, jwk.common.key_algorithm) {
                (AlgorithmParameters::RSA(_), None | Some(KeyAlgorithm::RS256)) => Algorithm::RS256,
                (AlgorithmParameters::EllipticCurve(_), None | Some(KeyAlgorithm::ES256)) => {
                    Algorithm::ES256
                }
                _ => continue,
            };
            if let Ok(key) = DecodingKey::from_jwk(&jwk) {
                keys.insert(kid, (key, alg));
            }
        }
        tracing::info!(keys = keys.len(), "JWKS refreshed");
        self.cached.write().await.keys = keys;
        Ok(())
    }

    #[cfg(feature = "jwks")]
    async fn fetch(&self) -> Result<JwkSet, String> {
        let response = self
            .http
            .get(&self.url)
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
    async fn fetch(&self) -> Result<JwkSet, String> {
        Err(format!(
            "cannot fetch {}: this build has no HTTPS client (authorizer's `jwks` feature is off)",
            self.url
        ))
    }
}
