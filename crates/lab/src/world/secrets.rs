//! Secrets Manager in one Region, as far as a cold-starting authorizer meets it: its
//! documented request quotas, per Region and account, and the retries of `wsdr-secrets`.
//!
//! Quotas (Secrets Manager quotas page): `GetSecretValue` 10,000 requests per second
//! (shared with `DescribeSecret`), `BatchGetSecretValue` 100 per second, neither adjustable
//! by the caller's traffic. AWS does not publish a burst: the lab's bucket holds one second
//! of the rate and refills continuously (an assumption, stated in docs/LAB.md). A refused
//! request is a `ThrottlingException`; the reader retries it as `wsdr-secrets` does (full
//! jitter, doubling ceilings, a fixed number of attempts) and an init whose reads all fail
//! fails the sandbox: API Gateway answers that `$connect` with 500.

use crate::world::quota::QuotaBucket;
use crate::world::scale::{AwsDuration, TimeScale};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// `GetSecretValue` requests per second per Region (with `DescribeSecret`).
pub const GET_SECRET_VALUE_PER_SECOND: f64 = 10_000.0;
/// `BatchGetSecretValue` requests per second per Region.
pub const BATCH_GET_SECRET_VALUE_PER_SECOND: f64 = 100.0;
/// `wsdr-secrets`' attempts per read and first backoff ceiling (a test holds them equal to
/// its source).
const ATTEMPTS: u32 = 3;
const BACKOFF_BASE: std::time::Duration = std::time::Duration::from_millis(50);

/// How an authorizer's cold start reads its keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SecretCall {
    /// One `GetSecretValue` per key, all at once (what `wsdr-secrets` does).
    GetEach,
    /// One `BatchGetSecretValue` for every key (what the authorizer did before: its quota
    /// is 100 per second, so a reconnect herd that starts more sandboxes than that a
    /// second is throttled at init).
    Batch,
}

/// What a cold start reads from its Region's Secrets Manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SecretReads {
    /// Keys read at init: the canary issuer's HS256 secret and, for HS256 user tokens,
    /// the users' (two, the most the authorizer reads).
    pub keys: u32,
    pub call: SecretCall,
}

impl SecretReads {
    /// wsdr's authorizer: two keys, one `GetSecretValue` each.
    pub const WSDR: Self = Self {
        keys: 2,
        call: SecretCall::GetEach,
    };
}

/// The secrets a sandbox could not read: its init fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("ThrottlingException after {attempts} attempts: the authorizer's init failed")]
pub struct InitFailed {
    pub attempts: u32,
}

/// One Region's Secrets Manager: a bucket per operation.
#[derive(Debug)]
pub struct SecretsManager {
    get: Mutex<QuotaBucket>,
    batch: Mutex<QuotaBucket>,
    /// The buckets' time origin.
    born: tokio::time::Instant,
    scale: TimeScale,
    requests: AtomicU64,
    throttled: AtomicU64,
}

/// Requests a Region's Secrets Manager answered and refused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SecretsCounts {
    pub requests: u64,
    pub throttled: u64,
}

impl SecretsManager {
    pub fn new(scale: TimeScale) -> Arc<Self> {
        Arc::new(Self {
            get: Mutex::new(QuotaBucket::full(GET_SECRET_VALUE_PER_SECOND, 0.0)),
            batch: Mutex::new(QuotaBucket::full(BATCH_GET_SECRET_VALUE_PER_SECOND, 0.0)),
            born: tokio::time::Instant::now(),
            scale,
            requests: AtomicU64::new(0),
            throttled: AtomicU64::new(0),
        })
    }

    pub fn counts(&self) -> SecretsCounts {
        SecretsCounts {
            requests: self.requests.load(Ordering::Relaxed),
            throttled: self.throttled.load(Ordering::Relaxed),
        }
    }

    /// One request of `call`: answered, or refused with `ThrottlingException`.
    fn request(&self, call: SecretCall) -> bool {
        self.requests.fetch_add(1, Ordering::Relaxed);
        // The quotas are per AWS second: the bucket runs on AWS time at any time scale.
        let now_s = self.scale.aws(self.born.elapsed()).as_secs_f64();
        let (bucket, rate) = match call {
            SecretCall::GetEach => (&self.get, GET_SECRET_VALUE_PER_SECOND),
            SecretCall::Batch => (&self.batch, BATCH_GET_SECRET_VALUE_PER_SECOND),
        };
        let answered = bucket
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take(now_s, rate, rate);
        if !answered {
            self.throttled.fetch_add(1, Ordering::Relaxed);
        }
        answered
    }

    /// A cold start's reads, retried as `wsdr-secrets` retries them; each backoff's jitter
    /// is drawn from `entropy` (the world's).
    pub async fn read_keys(
        &self,
        reads: SecretReads,
        entropy: &dyn wsdr_core::Entropy,
    ) -> Result<(), InitFailed> {
        let calls = match reads.call {
            SecretCall::GetEach => reads.keys,
            SecretCall::Batch => 1,
        };
        // All at once, each with its own retries; the first that gives up fails the init
        // (`Secrets::secret_strings`).
        futures::future::try_join_all((0..calls).map(|_| self.read_one(reads.call, entropy)))
            .await
            .map(|_| ())
    }

    async fn read_one(
        &self,
        call: SecretCall,
        entropy: &dyn wsdr_core::Entropy,
    ) -> Result<(), InitFailed> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            if self.request(call) {
                return Ok(());
            }
            if attempt >= ATTEMPTS {
                return Err(InitFailed { attempts: attempt });
            }
            let ceiling = BACKOFF_BASE * 2u32.pow(attempt - 1);
            let jitter = crate::world::env::uniform(entropy, 0.0, 1.0);
            let delay = AwsDuration::from_secs_f64(ceiling.as_secs_f64() * jitter);
            tokio::time::sleep(self.scale.lab(delay)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every draw in the middle of its range.
    #[derive(Debug)]
    struct Half;

    impl wsdr_core::Entropy for Half {
        fn below(&self, bound: u64) -> u64 {
            bound / 2
        }
    }

    /// Read from the crate's source, not linked: the lab's lean build (`make demo`) has no
    /// TLS stack to compile for it.
    #[test]
    fn the_lab_retries_as_the_authorizers_reader_does() {
        const READER: &str = include_str!("../../../secrets/src/lib.rs");
        let attempts = format!("pub const ATTEMPTS: u32 = {ATTEMPTS};");
        let base = format!(
            "pub const BACKOFF_BASE: Duration = Duration::from_millis({});",
            BACKOFF_BASE.as_millis()
        );
        assert!(
            READER.contains(&attempts),
            "wsdr-secrets no longer says `{attempts}`"
        );
        assert!(
            READER.contains(&base),
            "wsdr-secrets no longer says `{base}`"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_batch_read_meets_its_quota_long_before_get_secret_value_does() {
        let secrets = SecretsManager::new(TimeScale::new(1.0));
        let half = Half;
        let batch = SecretReads {
            keys: 2,
            call: SecretCall::Batch,
        };
        // 150 sandboxes cold-starting at once: 100 in the bucket, then the other 50 retry
        // twice (25 and 50 ms later at half the ceiling) against the 7.5 tokens that refill.
        let reads = (0..150).map(|_| secrets.read_keys(batch, &half));
        let failed = futures::future::join_all(reads)
            .await
            .iter()
            .filter(|r| r.is_err())
            .count();
        assert_eq!(failed, 43);
        let secrets = SecretsManager::new(TimeScale::new(1.0));
        let reads = (0..2_000).map(|_| secrets.read_keys(SecretReads::WSDR, &half));
        let results = futures::future::join_all(reads).await;
        assert!(results.iter().all(Result::is_ok));
        assert_eq!(secrets.counts().throttled, 0);
    }
}
