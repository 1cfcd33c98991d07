//! Token verification. The token's header only *selects* among keys the configuration
//! trusts; it never supplies a key or an algorithm family of its own.

use crate::config::{Config, KeySource, TrustedIssuer};
use crate::deny::DenyReason;
use crate::jwks::{FetchJwks, HttpJwks, JwksCache};
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{decode, decode_header, Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::Arc;
use wsdr_protocol::limits::PROBE_SUBJECT_PREFIX;

/// Tokens longer than this are refused before any parsing (8 KB, as large as API Gateway's
/// whole authorizer result may be).
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// A verified caller: the principal is (issuer, subject). Subjects of the canary issuer are
/// exactly the `canary:*` ones, so a subject alone names at most one principal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub sub: String,
    pub issuer: String,
    pub canary: bool,
}

#[derive(Debug, Deserialize)]
struct Claims {
    #[serde(default)]
    sub: Option<String>,
    iss: String,
    /// Checked here against [`Verifier`]'s clock, not by jsonwebtoken (which reads the system
    /// clock): a simulation's tokens live on the simulation's clock.
    #[serde(default)]
    exp: Option<serde_json::Value>,
    #[serde(default)]
    nbf: Option<serde_json::Value>,
}

/// Seconds since the Unix epoch, as a [`Verifier`] reads them.
pub type NowSecs = std::sync::Arc<dyn Fn() -> u64 + Send + Sync>;

/// The system clock, in seconds.
pub fn system_now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A time claim as jsonwebtoken reads one: a non-negative integer, anything else malformed.
fn time_claim(value: Option<&serde_json::Value>) -> Result<Option<u64>, DenyReason> {
    match value {
        None => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or(DenyReason::Malformed),
    }
}

/// Verifies tokens against the configured issuers.
pub struct Verifier {
    issuers: Vec<TrustedIssuer>,
    jwks: HashMap<String, Arc<JwksCache>>,
    leeway_secs: u64,
    now_secs: NowSecs,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("issuers", &self.issuers)
            .field("jwks", &self.jwks)
            .field("leeway_secs", &self.leeway_secs)
            .finish_non_exhaustive()
    }
}

impl Verifier {
    /// Build the verifier (cold start): every JWKS fetched over HTTPS, in the background for
    /// an issuer with a snapshot ([`JwksCache::prime`]).
    pub async fn new(config: &Config) -> Self {
        Self::with_fetcher(config, Arc::new(HttpJwks::new())).await
    }

    /// Build the verifier, fetching every JWKS with `fetcher` (cold start).
    pub async fn with_fetcher(config: &Config, fetcher: Arc<dyn FetchJwks>) -> Self {
        let mut jwks = HashMap::new();
        for issuer in &config.issuers {
            if let KeySource::Jwks { url, snapshot } = &issuer.keys {
                let cache = Arc::new(JwksCache::with_fetcher(
                    url.clone(),
                    config.jwks_min_refresh,
                    fetcher.clone(),
                    snapshot.as_ref(),
                ));
                cache.prime().await;
                jwks.insert(url.clone(), cache);
            }
        }
        Self {
            issuers: config.issuers.clone(),
            jwks,
            leeway_secs: config.leeway.as_secs(),
            now_secs: Arc::new(system_now_secs),
        }
    }

    /// Judge `exp` and `nbf` by this clock instead of the system's (a simulation's clock).
    pub fn set_clock(&mut self, now_secs: NowSecs) {
        self.now_secs = now_secs;
    }

    /// Verify a token. Every path returns; nothing here can panic on input.
    pub async fn verify(&self, token: &str) -> Result<Identity, DenyReason> {
        if token.is_empty() {
            return Err(DenyReason::MissingToken);
        }
        if token.len() > MAX_TOKEN_BYTES {
            return Err(DenyReason::TooLarge);
        }
        let header = decode_header(token).map_err(|_| DenyReason::Malformed)?;
        let candidates: Vec<&TrustedIssuer> = self
            .issuers
            .iter()
            .filter(|i| i.algorithms.contains(&header.alg))
            .collect();
        if candidates.is_empty() {
            return Err(DenyReason::AlgorithmNotAllowed);
        }
        let mut last = DenyReason::BadSignature;
        for issuer in candidates {
            let key = match self
                .key_for(issuer, header.alg, header.kid.as_deref())
                .await
            {
                Ok(key) => key,
                Err(reason) => {
                    last = reason;
                    continue;
                }
            };
            match self.check(token, issuer, header.alg, &key) {
                Ok(identity) => return Ok(identity),
                // Another trusted issuer with the same algorithm may own this token.
                Err(reason @ (DenyReason::BadSignature | DenyReason::WrongIssuer)) => last = reason,
                Err(reason) => return Err(reason),
            }
        }
        Err(last)
    }

    async fn key_for(
        &self,
        issuer: &TrustedIssuer,
        alg: Algorithm,
        kid: Option<&str>,
    ) -> Result<DecodingKey, DenyReason> {
        match &issuer.keys {
            KeySource::Secret(secret) => {
                DecodingKey::from_secret(secret).map_err(|_| DenyReason::KeysUnavailable)
            }
            KeySource::Jwks { url, .. } => {
                let kid = kid.ok_or(DenyReason::UnknownKid)?;
                let cache = self.jwks.get(url).ok_or(DenyReason::KeysUnavailable)?;
                cache.key(kid, alg).await
            }
        }
    }

    fn check(
        &self,
        token: &str,
        issuer: &TrustedIssuer,
        alg: Algorithm,
        key: &DecodingKey,
    ) -> Result<Identity, DenyReason> {
        let mut validation = Validation::new(alg);
        validation.set_issuer(&[issuer.issuer.as_str()]);
        validation.set_audience(&[issuer.audience.as_str()]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        // Presence is required above; the times are judged below, by this verifier's clock,
        // with jsonwebtoken's own rule (expired when exp < now - leeway, not yet valid when
        // nbf > now + leeway).
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.leeway = self.leeway_secs;
        // No `ExpiredSignature` or `ImmatureSignature` comes back (the times are not validated
        // here), and no `InvalidAlgorithm`: the validation's algorithm is the header's, and a
        // key is only ever taken for its own algorithm (`JwksCache::key`, HS256's secret).
        let data = decode::<Claims>(token, key, &validation).map_err(|e| match e.kind() {
            ErrorKind::InvalidIssuer => DenyReason::WrongIssuer,
            ErrorKind::InvalidAudience => DenyReason::WrongAudience,
            ErrorKind::MissingRequiredClaim(claim) if claim == "sub" => DenyReason::MissingSub,
            ErrorKind::InvalidSignature => DenyReason::BadSignature,
            ErrorKind::InvalidKeyFormat
            | ErrorKind::InvalidRsaKey(_)
            | ErrorKind::InvalidEcdsaKey => DenyReason::KeyAlgorithmMismatch,
            _ => DenyReason::Malformed,
        })?;
        let now = (self.now_secs)();
        let exp = time_claim(data.claims.exp.as_ref())?.ok_or(DenyReason::Malformed)?;
        if exp < now.saturating_sub(self.leeway_secs) {
            return Err(DenyReason::Expired);
        }
        if let Some(nbf) = time_claim(data.claims.nbf.as_ref())? {
            if nbf > now.saturating_add(self.leeway_secs) {
                return Err(DenyReason::NotYetValid);
            }
        }
        let sub = data
            .claims
            .sub
            .filter(|s| {
                // Characters, as docs/AUTH.md states (a CJK subject is 3 bytes a character).
                !s.is_empty() && s.chars().count() <= 255 && !s.chars().any(char::is_control)
            })
            .ok_or(DenyReason::MissingSub)?;
        match (issuer.canary, sub.starts_with(PROBE_SUBJECT_PREFIX)) {
            (true, false) => return Err(DenyReason::CanarySubjectNotProbe),
            (false, true) => return Err(DenyReason::ReservedSubject),
            _ => {}
        }
        Ok(Identity {
            sub,
            issuer: data.claims.iss,
            canary: issuer.canary,
        })
    }
}
