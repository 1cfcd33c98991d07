//! A function's secrets, read from Secrets Manager once at cold start (never resolved into
//! its environment, where anyone who can read the function's configuration reads them too,
//! and where a rotation needs a redeploy). Each stack names the secret, not its ARN: a
//! replicated secret has the same name in every Region, and the SDK reads this Region's.

use crate::classify::classify;
use aws_sdk_secretsmanager::Client;
use wsdr_core::{Error, Result};

/// Reads secret strings by name (or ARN). Built once per cold start.
#[derive(Debug, Clone)]
pub struct Secrets {
    client: Client,
}

impl Secrets {
    pub fn new(client: Client) -> Self {
        Self { client }
    }

    pub fn from_sdk(sdk: &aws_types::SdkConfig) -> Self {
        Self::new(Client::new(sdk))
    }

    /// The current `SecretString` of `id`; a secret stored as binary is an error.
    pub async fn secret_string(&self, id: &str) -> Result<String> {
        let answer = self
            .client
            .get_secret_value()
            .secret_id(id)
            .send()
            .await
            .map_err(|e| match classify(&e) {
                Error::Gone => Error::Internal(format!("secret {id}: unexpected 410")),
                Error::Transient(reason) => Error::Transient(format!("secret {id}: {reason}")),
                Error::Internal(reason) => Error::Internal(format!("secret {id}: {reason}")),
                other => other,
            })?;
        answer
            .secret_string()
            .map(str::to_owned)
            .ok_or_else(|| Error::Internal(format!("secret {id} has no SecretString")))
    }
}

/// A lookup that answers `name` with the secret named by `<name>_ID` (read now, once) when
/// the plain variable is unset: `CANARY_HS256_SECRET` from `CANARY_HS256_SECRET_ID`. The
/// plain variable still wins, for local runs and the lab.
pub async fn resolve_secret_vars(
    secrets: &Secrets,
    names: &[&str],
    env: impl Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>> {
    let mut resolved = Vec::new();
    for name in names {
        if env(name).is_some_and(|v| !v.trim().is_empty()) {
            continue;
        }
        let id_var = format!("{name}_ID");
        if let Some(id) = env(&id_var).filter(|v| !v.trim().is_empty()) {
            resolved.push(((*name).to_owned(), secrets.secret_string(&id).await?));
        }
    }
    Ok(resolved)
}

/// The process environment, with some variables filled from Secrets Manager.
#[derive(Default)]
pub struct SecretEnv {
    resolved: Vec<(String, String)>,
}

impl std::fmt::Debug for SecretEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names only: the values are secrets.
        let names: Vec<&str> = self.resolved.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("SecretEnv")
            .field("resolved", &names)
            .finish()
    }
}

impl SecretEnv {
    /// A variable: the value read from Secrets Manager, else the process environment.
    pub fn get(&self, name: &str) -> Option<String> {
        self.resolved
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var(name).ok())
    }
}

fn set(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.trim().is_empty())
}

/// Whether any of `names` must be read from Secrets Manager (its `<name>_ID` is set and the
/// plain variable is not): when not, a function builds no SDK configuration for it.
pub fn needed(names: &[&str]) -> bool {
    names
        .iter()
        .any(|name| !set(name) && set(&format!("{name}_ID")))
}

/// The environment, with the secrets named by `<name>_ID` read from Secrets Manager for the
/// `names` whose plain variable is unset. For a Lambda's `main`, once per cold start.
#[cfg(feature = "https")]
pub async fn env_with_secrets(sdk: &aws_types::SdkConfig, names: &[&str]) -> Result<SecretEnv> {
    if !needed(names) {
        return Ok(SecretEnv::default());
    }
    let resolved =
        resolve_secret_vars(&Secrets::from_sdk(sdk), names, |k| std::env::var(k).ok()).await?;
    Ok(SecretEnv { resolved })
}
