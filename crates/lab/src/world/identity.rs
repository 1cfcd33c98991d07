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
use crate::world::scale::{AwsDuration, TimeScale};
use crate::world::secrets::{InitFailed, SecretReads, SecretsManager};
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
    /// A cold start's own time, apart from its secret reads (an assumption: a Rust
    /// function's init on provided.al2023 is a few hundred milliseconds at most).
    pub init_time: AwsDuration,
    /// One invocation's time in its sandbox: a `$connect` that arrives while every sandbox
    /// is busy or starting starts another (Lambda does not queue synchronous invocations).
    pub invocation_time: AwsDuration,
    /// What a cold start reads from its Region's Secrets Manager.
    pub secrets: SecretReads,
}

impl IdentityConfig {
    /// The reference design's: the issuer in the primary, keys fetched from it only.
    pub fn reference() -> Self {
        Self {
            home: RegionId::Primary,
            snapshot: false,
            sandbox_lifetime: AwsDuration::from_secs(60),
            init_time: AwsDuration::from_millis(250),
            invocation_time: AwsDuration::from_millis(20),
            secrets: SecretReads::WSDR,
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
    /// How long a JWKS fetch hangs on the issuer's down Region before it fails (lab time):
    /// the whole fetch bound of `authorizer::HttpJwks`, as an endpoint that accepts and
    /// never answers costs it; a Region that refuses at once would be kinder.
    dead_fetch: std::time::Duration,
}

impl std::fmt::Debug for IdentityProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdentityProvider")
            .field("home", &self.home)
            .finish_non_exhaustive()
    }
}

impl IdentityProvider {
    pub fn new(home: RegionId, regions: Reach, scale: TimeScale) -> anyhow::Result<Self> {
        Ok(Self {
            home,
            dead_fetch: scale.lab(AwsDuration::from_secs_f64(
                authorizer::FETCH_TIMEOUT.as_secs_f64(),
            )),
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
                tokio::time::sleep(self.dead_fetch).await;
                Err(format!(
                    "the issuer's Region ({}) is down: no answer in {:?}",
                    self.home,
                    authorizer::FETCH_TIMEOUT
                ))
            }
        })
    }
}

/// What a cold start needs: the configuration, the issuer to fetch keys from, the token
/// clock, the Region's Secrets Manager, and the sandbox's times (lab time).
pub struct ColdStart {
    pub config: authorizer::Config,
    pub issuer: Arc<IdentityProvider>,
    pub now_secs: authorizer::NowSecs,
    pub secrets: Arc<SecretsManager>,
    pub reads: SecretReads,
    /// The backoffs' jitter (the world's entropy).
    pub entropy: Arc<dyn wsdr_core::Entropy>,
    pub lifetime: std::time::Duration,
    pub init: std::time::Duration,
    pub invocation: std::time::Duration,
    pub scale: TimeScale,
    /// When the function was created (its seconds are counted from here).
    pub started: tokio::time::Instant,
}

/// One Region's authorizer function: sandboxes as Lambda keeps them. An invocation takes an
/// idle sandbox younger than the lifetime, or cold-starts one (its secret reads, then its
/// keys from the issuer); it holds the sandbox for the invocation's time.
pub struct AuthorizerFunction {
    sandboxes: Sandboxes,
}

enum Sandboxes {
    /// One sandbox for ever, free at once (benchmarks of a Region on its own).
    Warm(Arc<Authorizer>),
    Pool {
        cold_start: Box<ColdStart>,
        /// Idle sandboxes and when each was born: the most recently used last.
        idle: std::sync::Mutex<Vec<(tokio::time::Instant, Arc<Authorizer>)>>,
        stats: std::sync::Mutex<SandboxStats>,
    },
}

/// What a Region's authorizer function did.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct SandboxStats {
    pub invocations: u64,
    pub cold_starts: u64,
    /// Cold starts whose secret reads were all throttled: API Gateway answered 500.
    pub init_failures: u64,
    /// The most cold starts begun in one AWS second (from the function's start).
    pub peak_cold_starts_per_second: u64,
    /// Requests its cold starts made to the Region's Secrets Manager, and those throttled.
    pub secrets_requests: u64,
    pub secrets_throttled: u64,
    /// (AWS second, cold starts begun in it) of the second being counted.
    #[serde(skip)]
    current_second: (u64, u64),
}

impl SandboxStats {
    fn cold_start_at(&mut self, aws_second: u64) {
        self.cold_starts += 1;
        if self.current_second.0 != aws_second {
            self.current_second = (aws_second, 0);
        }
        self.current_second.1 += 1;
        self.peak_cold_starts_per_second =
            self.peak_cold_starts_per_second.max(self.current_second.1);
    }
}

impl std::fmt::Debug for ColdStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ColdStart")
            .field("reads", &self.reads)
            .field("lifetime", &self.lifetime)
            .field("init", &self.init)
            .field("invocation", &self.invocation)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for AuthorizerFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let lifetime = match &self.sandboxes {
            Sandboxes::Warm(_) => None,
            Sandboxes::Pool { cold_start, .. } => Some(cold_start.lifetime),
        };
        f.debug_struct("AuthorizerFunction")
            .field("lifetime", &lifetime)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl AuthorizerFunction {
    pub fn new(cold_start: ColdStart) -> Self {
        Self {
            sandboxes: Sandboxes::Pool {
                cold_start: Box::new(cold_start),
                idle: std::sync::Mutex::default(),
                stats: std::sync::Mutex::default(),
            },
        }
    }

    /// One sandbox that never cold-starts again (benchmarks of a Region on its own).
    pub fn warm(sandbox: Arc<Authorizer>) -> Self {
        Self {
            sandboxes: Sandboxes::Warm(sandbox),
        }
    }

    /// What the function did so far (a warm function counts nothing).
    pub fn stats(&self) -> SandboxStats {
        match &self.sandboxes {
            Sandboxes::Warm(_) => SandboxStats::default(),
            Sandboxes::Pool {
                stats, cold_start, ..
            } => {
                let secrets = cold_start.secrets.counts();
                SandboxStats {
                    secrets_requests: secrets.requests,
                    secrets_throttled: secrets.throttled,
                    ..lock(stats).clone()
                }
            }
        }
    }

    /// One invocation, as API Gateway makes it for a `$connect`: the authorizer's answer,
    /// or the init failure of the sandbox it had to start.
    pub async fn invoke(
        &self,
        request: &aws_lambda_events::apigw::ApiGatewayCustomAuthorizerRequestTypeRequest,
    ) -> Result<authorizer::AuthorizerResponse, InitFailed> {
        let (cold, idle, stats) = match &self.sandboxes {
            Sandboxes::Warm(sandbox) => return Ok(sandbox.authorize(request).await),
            Sandboxes::Pool {
                cold_start,
                idle,
                stats,
            } => (cold_start, idle, stats),
        };
        lock(stats).invocations += 1;
        let reused = {
            let now = tokio::time::Instant::now();
            let mut idle = lock(idle);
            // Lambda retires sandboxes: one past its lifetime serves nobody again.
            idle.retain(|(born, _)| now.duration_since(*born) < cold.lifetime);
            idle.pop()
        };
        let (born, sandbox) = match reused {
            Some(sandbox) => sandbox,
            None => Self::cold_start(cold, stats).await?,
        };
        let answer = sandbox.authorize(request).await;
        tokio::time::sleep(cold.invocation).await;
        lock(idle).push((born, sandbox));
        Ok(answer)
    }

    /// A new sandbox: its secret reads (retried as `wsdr-secrets` retries them), the rest of
    /// its init, then its keys from the issuer (the snapshot if that fails).
    async fn cold_start(
        cold: &ColdStart,
        stats: &std::sync::Mutex<SandboxStats>,
    ) -> Result<(tokio::time::Instant, Arc<Authorizer>), InitFailed> {
        let born = tokio::time::Instant::now();
        let since_start = born.duration_since(cold.started);
        lock(stats).cold_start_at(cold.scale.aws(since_start).as_secs());
        if let Err(failed) = cold
            .secrets
            .read_keys(cold.reads, cold.entropy.as_ref())
            .await
        {
            lock(stats).init_failures += 1;
            return Err(failed);
        }
        tokio::time::sleep(cold.init).await;
        let sandbox = Arc::new(
            Authorizer::with_jwks_fetcher(&cold.config, cold.issuer.clone())
                .await
                .with_clock(cold.now_secs.clone()),
        );
        Ok((born, sandbox))
    }
}
