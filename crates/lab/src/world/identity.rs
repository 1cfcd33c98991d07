//! The users' identity provider, in a Region, failing with it; and each Region's authorizer
//! as Lambda runs it: sandboxes that cold-start, each fetching the issuer's keys again.
//!
//! As docs/DEPLOY.md deploys it by default, the issuer is one Cognito user pool in the
//! primary's Region: its sign-in and its JWKS are served from that Region. When that Region
//! is lost, a user keeps the token the app already holds (one hour), but no sandbox of the
//! other Region's authorizer can fetch the keys to verify it: without a snapshot of the keys
//! in the authorizer's own configuration (`JWT_JWKS_SNAPSHOT`), every reconnect is denied
//! while the canaries (their own HS256 issuer) report the Region healthy.
//!
//! Harder than AWS, on purpose: a sandbox lives [`IdentityConfig::sandbox_lifetime`] (AWS
//! keeps a sandbox for minutes to hours, and a failover herd starts many new ones), so a
//! Region's authorizer has always cold-started again by the time a herd arrives after the
//! issuer's Region is lost.

use crate::world::region_id::RegionId;
use crate::world::scale::AwsDuration;
use authorizer::{Authorizer, FetchJwks, FetchResult};
use jsonwebtoken::jwk::JwkSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

/// The lab issuer's signing key and its JWKS (crates/lab/keys/README.md).
const SIGNING_KEY: &[u8] = include_bytes!("../../keys/idp-es256-private.pem");
const JWKS: &str = include_str!("../../keys/idp-jwks.json");
const KID: &str = "lab-idp-1";

/// Where the users' issuer lives and how the authorizers keep its keys.
#[derive(Debug, Clone, PartialEq)]
pub struct IdentityConfig {
    /// The Region whose loss takes the issuer (sign-in and JWKS) with it.
    pub home: RegionId,
    /// Each Region's authorizer holds a snapshot of the issuer's JWKS in its own
    /// configuration (wsdr's default), used when the issuer cannot be reached.
    pub snapshot: bool,
    /// How long an authorizer sandbox lives before the next `$connect` cold-starts one.
    pub sandbox_lifetime: AwsDuration,
}

impl IdentityConfig {
    /// The reference design's: the issuer in the primary, keys fetched from it only.
    pub fn reference() -> Self {
        Self {
            home: RegionId::Primary,
            snapshot: false,
            sandbox_lifetime: AwsDuration::from_secs(60),
        }
    }

    /// wsdr's defaults: the same issuer, and a snapshot of its keys in each Region.
    pub fn wsdr_defaults() -> Self {
        Self {
            snapshot: true,
            ..Self::reference()
        }
    }
}

/// Whether a Region is up (`None`: the world is gone), asked by the issuer about its own;
/// set once the Regions have started. The world sets it with weak references: each
/// Region's authorizer holds the issuer, and the issuer must not keep the Regions alive.
pub type Reach = Arc<OnceLock<Box<dyn Fn(RegionId) -> Option<bool> + Send + Sync>>>;

/// The users' issuer: mints ES256 tokens and serves its JWKS while its Region is up.
pub struct IdentityProvider {
    home: RegionId,
    key: jsonwebtoken::EncodingKey,
    jwks: JwkSet,
    regions: Reach,
}

impl std::fmt::Debug for IdentityProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdentityProvider")
            .field("home", &self.home)
            .finish_non_exhaustive()
    }
}

impl IdentityProvider {
    pub fn new(home: RegionId, regions: Reach) -> anyhow::Result<Self> {
        Ok(Self {
            home,
            key: jsonwebtoken::EncodingKey::from_ec_pem(SIGNING_KEY)
                .map_err(|e| anyhow::anyhow!("the lab issuer's key: {e}"))?,
            jwks: serde_json::from_str(JWKS)?,
            regions,
        })
    }

    /// The Region it lives in.
    pub fn home(&self) -> RegionId {
        self.home
    }

    /// Whether its Region is up (down or lost: no sign-in, no JWKS).
    pub fn is_reachable(&self) -> bool {
        match self.regions.get().map(|is_up| is_up(self.home)) {
            Some(Some(up)) => up,
            // The world is gone: nothing to reach.
            Some(None) => false,
            None => true,
        }
    }

    /// The JWKS text, as the snapshot each Region's authorizer may hold.
    pub fn jwks_text(&self) -> String {
        JWKS.to_owned()
    }

    /// A signed ES256 token for `claims`, if the issuer's Region is up (a sign-in).
    /// The error is an [`IssuerUnreachable`] while its Region is down.
    pub fn sign_in(&self, claims: &serde_json::Value) -> anyhow::Result<String> {
        if !self.is_reachable() {
            return Err(IssuerUnreachable(self.home).into());
        }
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some(KID.to_owned());
        jsonwebtoken::encode(&header, claims, &self.key)
            .map_err(|e| anyhow::anyhow!("cannot sign a lab token: {e}"))
    }
}

/// The issuer's Region is down or lost: no token can be issued.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the identity provider's Region ({0}) is down: no sign-in")]
pub struct IssuerUnreachable(pub RegionId);

impl FetchJwks for IdentityProvider {
    fn fetch<'a>(
        &'a self,
        _url: &'a str,
    ) -> Pin<Box<dyn Future<Output = FetchResult> + Send + 'a>> {
        Box::pin(async move {
            if self.is_reachable() {
                Ok(self.jwks.clone())
            } else {
                Err(format!("the issuer's Region ({}) is down", self.home))
            }
        })
    }
}

/// What a cold start needs: the configuration, the issuer to fetch keys from, the token
/// clock, and how long a sandbox lives (lab time).
struct ColdStart {
    config: authorizer::Config,
    issuer: Arc<IdentityProvider>,
    now_secs: authorizer::NowSecs,
    lifetime: std::time::Duration,
}

/// One Region's authorizer function: its current sandbox, cold-started again once it is
/// older than the lifetime.
pub struct AuthorizerFunction {
    sandboxes: Sandboxes,
}

enum Sandboxes {
    /// One sandbox for ever.
    Warm(Arc<Authorizer>),
    ColdStarting {
        cold_start: ColdStart,
        current: tokio::sync::Mutex<Option<(tokio::time::Instant, Arc<Authorizer>)>>,
    },
}

impl std::fmt::Debug for AuthorizerFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let lifetime = match &self.sandboxes {
            Sandboxes::Warm(_) => None,
            Sandboxes::ColdStarting { cold_start, .. } => Some(cold_start.lifetime),
        };
        f.debug_struct("AuthorizerFunction")
            .field("lifetime", &lifetime)
            .finish_non_exhaustive()
    }
}

impl AuthorizerFunction {
    /// `now_secs`: the clock token times are judged by; `lifetime`: a sandbox's, lab time.
    pub fn new(
        config: authorizer::Config,
        issuer: Arc<IdentityProvider>,
        now_secs: authorizer::NowSecs,
        lifetime: std::time::Duration,
    ) -> Self {
        Self {
            sandboxes: Sandboxes::ColdStarting {
                cold_start: ColdStart {
                    config,
                    issuer,
                    now_secs,
                    lifetime,
                },
                current: tokio::sync::Mutex::new(None),
            },
        }
    }

    /// One sandbox that never cold-starts again (benchmarks of a Region on its own).
    pub fn warm(sandbox: Arc<Authorizer>) -> Self {
        Self {
            sandboxes: Sandboxes::Warm(sandbox),
        }
    }

    /// The sandbox the next invocation runs in: a cold start (keys fetched from the issuer,
    /// the snapshot if that fails) when there is none or it is too old.
    pub async fn sandbox(&self) -> Arc<Authorizer> {
        let (cold, current) = match &self.sandboxes {
            Sandboxes::Warm(sandbox) => return sandbox.clone(),
            Sandboxes::ColdStarting {
                cold_start,
                current,
            } => (cold_start, current),
        };
        let now = tokio::time::Instant::now();
        let mut current = current.lock().await;
        if let Some((born, sandbox)) = current.as_ref() {
            if now.duration_since(*born) < cold.lifetime {
                return sandbox.clone();
            }
        }
        let sandbox = Arc::new(
            Authorizer::with_jwks_fetcher(&cold.config, cold.issuer.clone())
                .await
                .with_clock(cold.now_secs.clone()),
        );
        *current = Some((now, sandbox.clone()));
        sandbox
    }
}
