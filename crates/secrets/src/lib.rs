//! A function's secrets, read from Secrets Manager once at cold start, without the AWS SDK.
//!
//! Secrets are never resolved into a function's environment (anyone who can read the
//! function's configuration reads them there too, and a rotation needs a redeploy). Each stack
//! names the secret, not its ARN: a replicated secret has the same name in every Region, and
//! the function reads its own Region's.
//!
//! Why not the SDK: the authorizer, which every reconnecting user meets during a failover
//! storm, calls no other AWS API. Loading the SDK's configuration and building its Secrets
//! Manager client before the first poll made its cold start 2.4x a bare `lambda_runtime`
//! function (BENCHMARKS.md). A `GetSecretValue` is one POST of a JSON body
//! (<https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_GetSecretValue.html>),
//! signed with Signature Version 4 ([`sigv4`]) using the credentials Lambda puts in the
//! function's environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`;
//! <https://docs.aws.amazon.com/lambda/latest/dg/configuration-envvars.html#configuration-envvars-runtime>).
//! The Parameters and Secrets Lambda Extension would also avoid the SDK, at the price of a
//! second process started in every init (docs/DEPLOY.md weighs the two).

pub mod sigv4;

pub mod transport;

pub use rustls::crypto::CryptoProvider;
use serde::Deserialize;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use transport::Endpoint;

/// What can go wrong reading a secret.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The environment does not say where or as whom to ask.
    #[error("secrets configuration: {0}")]
    Config(String),
    /// Secrets Manager refused the request (not found, access denied, bad signature): asking
    /// again will not help.
    #[error("secret {id}: {code}: {message}")]
    Refused {
        id: String,
        code: String,
        message: String,
    },
    /// Throttled, a server error or no answer, after every attempt.
    #[error("secret {id}: {reason} (after {attempts} attempts)")]
    Unavailable {
        id: String,
        reason: String,
        attempts: u32,
    },
    /// An answer that is not a usable secret string.
    #[error("secret {id}: {reason}")]
    Malformed { id: String, reason: String },
}

pub type Result<T> = std::result::Result<T, Error>;

/// `GetSecretValue`'s `X-Amz-Target`.
const GET: &str = "secretsmanager.GetSecretValue";
/// The signing name of Secrets Manager.
const SERVICE: &str = "secretsmanager";
/// Attempts per secret: throttling and server errors are retried with full-jitter backoff.
pub const ATTEMPTS: u32 = 3;
/// The first retry's backoff ceiling; doubled for each later one.
pub const BACKOFF_BASE: Duration = Duration::from_millis(50);

/// Reads secret strings by name (or ARN) from one Region's Secrets Manager. Built once per
/// cold start.
#[derive(Debug, Clone)]
pub struct Secrets {
    endpoint: Endpoint,
    region: String,
    credentials: sigv4::Credentials,
}

impl Secrets {
    /// From a lookup of environment variables: `AWS_REGION` (else `AWS_DEFAULT_REGION`), the
    /// credentials, and an endpoint override in `AWS_ENDPOINT_URL_SECRETS_MANAGER` or
    /// `AWS_ENDPOINT_URL` (the SDKs' own variables; a local peer in tests and the bench).
    /// TLS uses `crypto`: the provider the calling binary already links.
    pub fn from_lookup(
        env: impl Fn(&str) -> Option<String>,
        crypto: Arc<CryptoProvider>,
    ) -> Result<Self> {
        let get = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let region = get("AWS_REGION")
            .or_else(|| get("AWS_DEFAULT_REGION"))
            .ok_or_else(|| Error::Config("AWS_REGION is not set".into()))?;
        let credentials = sigv4::Credentials {
            access_key_id: get("AWS_ACCESS_KEY_ID").ok_or_else(|| {
                Error::Config(
                    "AWS_ACCESS_KEY_ID is not set (Lambda sets it from the function's role)".into(),
                )
            })?,
            secret_access_key: get("AWS_SECRET_ACCESS_KEY")
                .ok_or_else(|| Error::Config("AWS_SECRET_ACCESS_KEY is not set".into()))?,
            session_token: get("AWS_SESSION_TOKEN"),
        };
        let endpoint =
            match get("AWS_ENDPOINT_URL_SECRETS_MANAGER").or_else(|| get("AWS_ENDPOINT_URL")) {
                Some(url) => url,
                None => default_endpoint(
                    &region,
                    flag(get("AWS_USE_FIPS_ENDPOINT")),
                    flag(get("AWS_USE_DUALSTACK_ENDPOINT")),
                ),
            };
        let endpoint = Endpoint::parse(endpoint.trim(), crypto)
            .map_err(|e| Error::Config(format!("Secrets Manager endpoint `{endpoint}`: {e}")))?;
        Ok(Self {
            endpoint,
            region,
            credentials,
        })
    }

    /// From the process environment.
    pub fn from_env(crypto: Arc<CryptoProvider>) -> Result<Self> {
        Self::from_lookup(|name| std::env::var(name).ok(), crypto)
    }

    /// The endpoint asked.
    pub fn endpoint(&self) -> String {
        self.endpoint.to_string()
    }

    /// The current `SecretString` of `id`; a secret stored as binary is an error.
    pub async fn secret_string(&self, id: &str) -> Result<String> {
        let mut values = self.secret_strings(&[id]).await?;
        values.pop().ok_or_else(|| Error::Malformed {
            id: id.to_owned(),
            reason: "no answer".into(),
        })
    }

    /// The current `SecretString` of each of `ids`, in order: one `GetSecretValue` each, all
    /// at once. Never `BatchGetSecretValue`: its quota is 100 requests per second per Region
    /// and not adjustable, so a reconnect herd that starts more than 100 sandboxes a second
    /// would be throttled at init, while `GetSecretValue`'s is 10,000 (docs/DEPLOY.md,
    /// "Secrets on the reconnect path"). Throttling, server errors and lost connections are
    /// retried per secret with full-jitter backoff; any other refusal ends the call.
    pub async fn secret_strings(&self, ids: &[&str]) -> Result<Vec<String>> {
        let mut reads = tokio::task::JoinSet::new();
        for (index, id) in ids.iter().enumerate() {
            let (secrets, id) = (self.clone(), (*id).to_owned());
            reads.spawn(async move { (index, secrets.read_one(&id).await) });
        }
        let mut values: Vec<Option<String>> = vec![None; ids.len()];
        while let Some(joined) = reads.join_next().await {
            let (index, value) = joined.map_err(|e| Error::Unavailable {
                id: ids.join(","),
                reason: format!("the read task failed: {e}"),
                attempts: 0,
            })?;
            if let Some(slot) = values.get_mut(index) {
                *slot = Some(value?);
            }
        }
        Ok(values.into_iter().flatten().collect())
    }

    /// One `GetSecretValue`, with its retries.
    async fn read_one(&self, id: &str) -> Result<String> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let outcome = match self.endpoint.post(self.signed(id)?).await {
                Ok(answer) => interpret(id, answer),
                Err(lost) => Err(Attempt::Retry(lost)),
            };
            let reason = match outcome {
                Ok(value) => return Ok(value),
                Err(Attempt::Final(error)) => return Err(error),
                Err(Attempt::Retry(reason)) => reason,
            };
            if attempt >= ATTEMPTS {
                return Err(Error::Unavailable {
                    id: id.to_owned(),
                    reason,
                    attempts: attempt,
                });
            }
            let delay = full_jitter(backoff_ceiling(attempt));
            tracing::warn!(secret = id, %reason, attempt, ?delay, "secret read retried");
            tokio::time::sleep(delay).await;
        }
    }

    /// A signed `GetSecretValue` of `id`.
    fn signed(&self, id: &str) -> Result<transport::Post> {
        let target = GET;
        let body = serde_json::json!({ "SecretId": id }).to_string();
        let host = self.endpoint.authority();
        let request = sigv4::JsonRequest {
            host: &host,
            path: self.endpoint.path(),
            target,
            body: body.as_bytes(),
        };
        let signed = sigv4::sign(
            &request,
            &self.credentials,
            &self.region,
            SERVICE,
            SystemTime::now(),
        )
        .map_err(|reason| Error::Config(format!("secret {id}: {reason}")))?;
        let mut headers = vec![
            ("content-type".to_owned(), sigv4::CONTENT_TYPE.to_owned()),
            ("x-amz-target".to_owned(), target.to_owned()),
        ];
        headers.extend(signed);
        Ok(transport::Post { headers, body })
    }
}

/// What an answer to `GetSecretValue` of `id` says.
fn interpret(id: &str, answer: transport::Answer) -> std::result::Result<String, Attempt> {
    if !answer.status.is_success() {
        return Err(failure(id, answer));
    }
    let value: SecretValue = serde_json::from_str(&answer.body).map_err(|e| {
        Attempt::Final(Error::Malformed {
            id: id.to_owned(),
            reason: format!("unreadable answer: {e}"),
        })
    })?;
    secret_string(id, value)
}

fn secret_string(id: &str, value: SecretValue) -> std::result::Result<String, Attempt> {
    value.secret_string.ok_or_else(|| {
        Attempt::Final(Error::Malformed {
            id: id.to_owned(),
            reason: "no SecretString (a binary secret?)".into(),
        })
    })
}

/// Throttling and server errors are worth another attempt; nothing else is.
fn retryable(status: Option<http::StatusCode>, code: &str) -> bool {
    status.is_some_and(|s| s.is_server_error() || s == http::StatusCode::TOO_MANY_REQUESTS)
        || code.contains("Throttling")
        || code == "InternalServiceError"
}

/// A refused request: `__type` (which may carry a namespace,
/// `com.amazonaws...#ThrottlingException`) and the message.
fn failure(id: &str, answer: transport::Answer) -> Attempt {
    let failure: Failure = serde_json::from_str(&answer.body).unwrap_or_default();
    let code = failure
        .kind
        .rsplit('#')
        .next()
        .unwrap_or_default()
        .to_owned();
    let message = failure
        .message
        .unwrap_or_else(|| answer.body.chars().take(200).collect());
    if retryable(Some(answer.status), &code) {
        return Attempt::Retry(format!("{} {code}: {message}", answer.status));
    }
    Attempt::Final(Error::Refused {
        id: id.to_owned(),
        code: if code.is_empty() {
            answer.status.to_string()
        } else {
            code
        },
        message,
    })
}

enum Attempt {
    Retry(String),
    Final(Error),
}

#[derive(Deserialize, Clone)]
struct SecretValue {
    #[serde(rename = "SecretString")]
    secret_string: Option<String>,
}

#[derive(Deserialize, Default)]
struct Failure {
    #[serde(rename = "__type", default)]
    kind: String,
    #[serde(alias = "Message")]
    message: Option<String>,
}

/// Secrets Manager's Regional endpoint (<https://docs.aws.amazon.com/general/latest/gr/asm.html>).
/// Secrets Manager's endpoint in `region`, as the SDKs pick it: the partition's DNS suffix
/// (China, the ISO partitions), `secretsmanager-fips` with `AWS_USE_FIPS_ENDPOINT=true`, and
/// the dual-stack suffix with `AWS_USE_DUALSTACK_ENDPOINT=true` (AWS General Reference,
/// "AWS Secrets Manager endpoints and quotas"; the SDKs' shared configuration settings).
fn default_endpoint(region: &str, fips: bool, dual_stack: bool) -> String {
    let suffix = match (region, dual_stack) {
        (r, false) if r.starts_with("cn-") => "amazonaws.com.cn",
        (r, true) if r.starts_with("cn-") => "api.amazonwebservices.com.cn",
        (r, _) if r.starts_with("us-isob-") => "sc2s.sgov.gov",
        (r, _) if r.starts_with("us-iso-") => "c2s.ic.gov",
        (_, true) => "api.aws",
        (_, false) => "amazonaws.com",
    };
    let service = if fips {
        "secretsmanager-fips"
    } else {
        "secretsmanager"
    };
    format!("https://{service}.{region}.{suffix}")
}

/// An SDK boolean setting from the environment (`true`/`false`, any case).
fn flag(value: Option<String>) -> bool {
    value.is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// The longest pause after failed attempt `attempt` (1, 2, ...): [`BACKOFF_BASE`], doubled
/// for each attempt after the first.
fn backoff_ceiling(attempt: u32) -> Duration {
    BACKOFF_BASE * 2u32.pow(attempt.saturating_sub(1))
}

/// A delay drawn uniformly from `[0, ceiling)`: cold starts that all met the same throttle
/// do not retry in step. The clock's nanoseconds are randomness enough for that.
fn full_jitter(ceiling: Duration) -> Duration {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    ceiling.mul_f64(jitter_fraction(nanos))
}

/// A fraction in `[0, 1)` spread from `seed` (a multiplicative hash, in millionths).
fn jitter_fraction(seed: u32) -> f64 {
    f64::from(seed.wrapping_mul(2_654_435_761) % 1_000_000) / 1_000_000.0
}

/// The `names` whose secrets are to be read: `<name>_ID` set and the plain variable unset.
pub fn to_read(names: &[&str], env: &impl Fn(&str) -> Option<String>) -> Vec<(String, String)> {
    let set = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    names
        .iter()
        .filter(|name| set(name).is_none())
        .filter_map(|name| {
            set(&format!("{name}_ID")).map(|id| ((*name).to_owned(), id.trim().to_owned()))
        })
        .collect()
}

/// A lookup that answers `name` with the secret named by `<name>_ID` when the plain variable
/// is unset: `CANARY_HS256_SECRET` from `CANARY_HS256_SECRET_ID`. The plain variable still
/// wins, for local runs and the lab. The secrets are read on one connection.
pub async fn resolve_secret_vars(
    secrets: &Secrets,
    names: &[&str],
    env: impl Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>> {
    let wanted = to_read(names, &env);
    let ids: Vec<&str> = wanted.iter().map(|(_, id)| id.as_str()).collect();
    let values = secrets.secret_strings(&ids).await?;
    Ok(wanted
        .into_iter()
        .zip(values)
        .map(|((name, _), value)| (name, value))
        .collect())
}

/// An environment's lookup: a variable's value by name.
type Lookup = Box<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// A function's environment (a lookup: the process's in a Lambda's `main`), with some
/// variables filled from Secrets Manager.
pub struct SecretEnv {
    resolved: Vec<(String, String)>,
    env: Lookup,
}

impl std::fmt::Debug for SecretEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names only: the values are secrets.
        let names: Vec<&str> = self.resolved.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("SecretEnv")
            .field("resolved", &names)
            .finish_non_exhaustive()
    }
}

impl SecretEnv {
    /// `env`, with the secrets named by `<name>_ID` read from Secrets Manager for the `names`
    /// whose plain variable is unset. For a Lambda's `main` (`env` the process's), once per
    /// cold start; no client is built when nothing is to be read. TLS uses `crypto` (see
    /// [`Secrets::from_lookup`]).
    pub async fn read(
        names: &[&str],
        env: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
        crypto: Arc<CryptoProvider>,
    ) -> Result<Self> {
        let resolved = if to_read(names, &env).is_empty() {
            Vec::new()
        } else {
            let secrets = Secrets::from_lookup(&env, crypto)?;
            resolve_secret_vars(&secrets, names, &env).await?
        };
        Ok(Self {
            resolved,
            env: Box::new(env),
        })
    }

    /// A variable: the value read from Secrets Manager, else the environment's.
    pub fn get(&self, name: &str) -> Option<String> {
        self.resolved
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .or_else(|| (self.env)(name))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::collections::HashMap;

    fn ring() -> Arc<CryptoProvider> {
        Arc::new(rustls::crypto::ring::default_provider())
    }

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn fips_dual_stack_and_the_partition_pick_the_endpoint_as_the_sdks_do() {
        let endpoint = |region: &str, extra: &[(&str, &str)]| {
            let mut pairs = vec![
                ("AWS_REGION", region),
                ("AWS_ACCESS_KEY_ID", "AKID"),
                ("AWS_SECRET_ACCESS_KEY", "secret"),
            ];
            pairs.extend_from_slice(extra);
            Secrets::from_lookup(lookup(&pairs), ring())
                .unwrap()
                .endpoint()
        };
        let fips = [("AWS_USE_FIPS_ENDPOINT", "true")];
        let dual = [("AWS_USE_DUALSTACK_ENDPOINT", "TRUE")];
        let both = [fips[0], dual[0]];
        assert_eq!(
            endpoint("us-east-1", &fips),
            "https://secretsmanager-fips.us-east-1.amazonaws.com/"
        );
        assert_eq!(
            endpoint("us-west-2", &dual),
            "https://secretsmanager.us-west-2.api.aws/"
        );
        assert_eq!(
            endpoint("us-gov-west-1", &both),
            "https://secretsmanager-fips.us-gov-west-1.api.aws/"
        );
        assert_eq!(
            endpoint("cn-northwest-1", &dual),
            "https://secretsmanager.cn-northwest-1.api.amazonwebservices.com.cn/"
        );
        assert_eq!(
            endpoint("us-iso-east-1", &[]),
            "https://secretsmanager.us-iso-east-1.c2s.ic.gov/"
        );
        assert_eq!(
            endpoint("us-isob-east-1", &[]),
            "https://secretsmanager.us-isob-east-1.sc2s.sgov.gov/"
        );
        assert_eq!(
            endpoint("us-east-1", &[("AWS_USE_FIPS_ENDPOINT", "false")]),
            "https://secretsmanager.us-east-1.amazonaws.com/"
        );
    }

    #[test]
    fn the_regional_endpoint_unless_overridden() {
        let base = [
            ("AWS_REGION", "eu-west-1"),
            ("AWS_ACCESS_KEY_ID", "AKID"),
            ("AWS_SECRET_ACCESS_KEY", "secret"),
        ];
        let secrets = Secrets::from_lookup(lookup(&base), ring()).unwrap();
        assert_eq!(
            secrets.endpoint(),
            "https://secretsmanager.eu-west-1.amazonaws.com/"
        );
        let china = Secrets::from_lookup(
            lookup(&[
                ("AWS_REGION", "cn-north-1"),
                ("AWS_ACCESS_KEY_ID", "AKID"),
                ("AWS_SECRET_ACCESS_KEY", "secret"),
            ]),
            ring(),
        )
        .unwrap();
        assert_eq!(
            china.endpoint(),
            "https://secretsmanager.cn-north-1.amazonaws.com.cn/"
        );
        let mut local = base.to_vec();
        local.push(("AWS_ENDPOINT_URL", "http://127.0.0.1:9"));
        local.push(("AWS_ENDPOINT_URL_SECRETS_MANAGER", "http://127.0.0.1:4566"));
        assert_eq!(
            Secrets::from_lookup(lookup(&local), ring())
                .unwrap()
                .endpoint(),
            "http://127.0.0.1:4566/",
            "the service's own variable wins over the general one"
        );
    }

    #[test]
    fn missing_settings_name_the_variable() {
        let error = Secrets::from_lookup(
            lookup(&[
                ("AWS_ACCESS_KEY_ID", "AKID"),
                ("AWS_SECRET_ACCESS_KEY", "secret"),
            ]),
            ring(),
        )
        .unwrap_err();
        assert!(error.to_string().contains("AWS_REGION"), "{error}");
        let error =
            Secrets::from_lookup(lookup(&[("AWS_REGION", "us-east-1")]), ring()).unwrap_err();
        assert!(error.to_string().contains("AWS_ACCESS_KEY_ID"), "{error}");
        let error = Secrets::from_lookup(
            lookup(&[
                ("AWS_REGION", "us-east-1"),
                ("AWS_ACCESS_KEY_ID", "AKID"),
                ("AWS_SECRET_ACCESS_KEY", "secret"),
                ("AWS_ENDPOINT_URL_SECRETS_MANAGER", "not a url"),
            ]),
            ring(),
        )
        .unwrap_err();
        assert!(error.to_string().contains("not a url"), "{error}");
    }

    #[test]
    fn only_ids_without_a_plain_value_are_read() {
        let env = lookup(&[
            ("CANARY_HS256_SECRET_ID", " wsdr/canary "),
            ("JWT_HS256_SECRET", "set-in-plain-for-a-local-run"),
            ("JWT_HS256_SECRET_ID", "never-read"),
            ("EMPTY_SECRET_ID", " "),
        ]);
        assert_eq!(
            to_read(
                &[
                    "CANARY_HS256_SECRET",
                    "JWT_HS256_SECRET",
                    "EMPTY_SECRET",
                    "UNSET"
                ],
                &env
            ),
            vec![("CANARY_HS256_SECRET".to_owned(), "wsdr/canary".to_owned())]
        );
    }

    #[test]
    fn jitter_stays_under_its_ceiling() {
        for _ in 0..100 {
            assert!(full_jitter(Duration::from_millis(50)) < Duration::from_millis(50));
        }
    }

    #[test]
    fn jitter_waits_more_than_nothing() {
        // A zero draw needs the clock's nanoseconds to hash to a multiple of a million: about
        // one in a million.
        assert!((0..100).any(|_| full_jitter(Duration::from_secs(1)) > Duration::ZERO));
    }

    #[test]
    fn jitter_fractions_spread_seeds_over_zero_to_one() {
        // 2,654,435,761 × seed, wrapped to 32 bits, in millionths.
        assert_eq!(jitter_fraction(0), 0.0);
        assert_eq!(jitter_fraction(1), 0.435_761);
        assert_eq!(jitter_fraction(2), 0.904_226); // 5,308,871,522 - 2^32 = 1,013,904,226
        assert_eq!(jitter_fraction(999_999_999), jitter_fraction(999_999_999));
    }

    #[test]
    fn each_retry_may_wait_twice_as_long_as_the_one_before() {
        assert_eq!(backoff_ceiling(1), BACKOFF_BASE);
        assert_eq!(backoff_ceiling(2), BACKOFF_BASE * 2);
        assert_eq!(backoff_ceiling(3), BACKOFF_BASE * 4);
    }
}
