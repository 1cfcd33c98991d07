use crate::Error;
use jsonwebtoken::Algorithm;
use std::str::FromStr;
use std::time::Duration;
use wsdr_lambda::env::EnvError;

/// Where an issuer's keys come from.
#[derive(Clone)]
pub enum KeySource {
    /// HS256 shared secret (bytes).
    Secret(Vec<u8>),
    /// RS256/ES256 keys from this JWKS URL.
    Jwks(String),
}

impl std::fmt::Debug for KeySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeySource::Secret(_) => f.write_str("Secret(<redacted>)"),
            KeySource::Jwks(url) => f.debug_tuple("Jwks").field(url).finish(),
        }
    }
}

/// One issuer whose tokens are accepted.
#[derive(Debug, Clone)]
pub struct TrustedIssuer {
    pub issuer: String,
    pub audience: String,
    pub algorithms: Vec<Algorithm>,
    pub keys: KeySource,
    /// Whether identities of this issuer are the canary's (marked in the context).
    pub canary: bool,
}

/// The authorizer's configuration, read once at cold start.
#[derive(Debug, Clone)]
pub struct Config {
    pub issuers: Vec<TrustedIssuer>,
    /// `JWT_LEEWAY_SECONDS` (default 5): clock skew tolerated on `exp` and `nbf`.
    pub leeway: Duration,
    /// `JWKS_MIN_REFRESH_SECONDS` (default 60): an unknown `kid` refetches the JWKS at most
    /// this often, so garbage `kid`s cannot hammer the identity provider.
    pub jwks_min_refresh: Duration,
    /// `SUBPROTOCOL` (default `wsdr`): the protocol name offered beside the token.
    pub subprotocol: String,
}

fn parse_algorithms(name: &'static str, value: &str) -> Result<Vec<Algorithm>, Error> {
    let algorithms = value
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(|a| {
            let alg = Algorithm::from_str(a).map_err(|_| EnvError::Invalid {
                name,
                reason: format!("unknown algorithm `{a}`"),
            })?;
            match alg {
                Algorithm::HS256 | Algorithm::RS256 | Algorithm::ES256 => Ok(alg),
                _ => Err(EnvError::Invalid {
                    name,
                    reason: format!("`{a}` is not supported (HS256, RS256, ES256)"),
                }),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    if algorithms.is_empty() {
        return Err(EnvError::Invalid {
            name,
            reason: "no algorithm listed".into(),
        }
        .into());
    }
    Ok(algorithms)
}

impl Config {
    pub fn from_env() -> Result<Self, Error> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Variables: `JWT_ISSUER`, `JWT_AUDIENCE`, `JWT_JWKS_URL` and/or `JWT_HS256_SECRET`,
    /// `JWT_ALGORITHMS` (default `RS256,ES256` with a JWKS, `HS256` with a secret),
    /// `CANARY_HS256_SECRET` + `CANARY_ISSUER` (default `wsdr-canary`), `JWT_LEEWAY_SECONDS`,
    /// `JWKS_MIN_REFRESH_SECONDS`, `SUBPROTOCOL`.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, Error> {
        let env = wsdr_lambda::env::Env::new(get);
        let seconds =
            |name: &'static str, default: u64| env.number(name, default).map(Duration::from_secs);
        let issuer = env.required("JWT_ISSUER")?;
        let audience = env.required("JWT_AUDIENCE")?;
        let jwks_url = env.get("JWT_JWKS_URL");
        let secret = env.get("JWT_HS256_SECRET");
        let default_algorithms = if jwks_url.is_some() {
            "RS256,ES256"
        } else {
            "HS256"
        };
        let algorithms = parse_algorithms(
            "JWT_ALGORITHMS",
            &env.get("JWT_ALGORITHMS")
                .unwrap_or_else(|| default_algorithms.into()),
        )?;
        let mut issuers = Vec::new();
        let asymmetric: Vec<Algorithm> = algorithms
            .iter()
            .copied()
            .filter(|a| *a != Algorithm::HS256)
            .collect();
        if !asymmetric.is_empty() {
            let url = jwks_url.clone().ok_or(EnvError::Invalid {
                name: "JWT_JWKS_URL",
                reason: "RS256/ES256 are allowed, so a JWKS URL is required".into(),
            })?;
            issuers.push(TrustedIssuer {
                issuer: issuer.clone(),
                audience: audience.clone(),
                algorithms: asymmetric,
                keys: KeySource::Jwks(url),
                canary: false,
            });
        }
        if algorithms.contains(&Algorithm::HS256) {
            let secret = secret.ok_or(EnvError::Invalid {
                name: "JWT_HS256_SECRET",
                reason: "HS256 is allowed, so a secret is required".into(),
            })?;
            if secret.len() < 32 {
                return Err(EnvError::Invalid {
                    name: "JWT_HS256_SECRET",
                    reason: "must be at least 32 bytes".into(),
                }
                .into());
            }
            issuers.push(TrustedIssuer {
                issuer: issuer.clone(),
                audience: audience.clone(),
                algorithms: vec![Algorithm::HS256],
                keys: KeySource::Secret(secret.into_bytes()),
                canary: false,
            });
        }
        if let Some(canary_secret) = env.get("CANARY_HS256_SECRET") {
            if canary_secret.len() < 32 {
                return Err(EnvError::Invalid {
                    name: "CANARY_HS256_SECRET",
                    reason: "must be at least 32 bytes".into(),
                }
                .into());
            }
            let canary_issuer = env
                .get("CANARY_ISSUER")
                .unwrap_or_else(|| "wsdr-canary".into());
            if canary_issuer == issuer {
                return Err(EnvError::Invalid {
                    name: "CANARY_ISSUER",
                    reason: "must differ from JWT_ISSUER".into(),
                }
                .into());
            }
            issuers.push(TrustedIssuer {
                issuer: canary_issuer,
                audience,
                algorithms: vec![Algorithm::HS256],
                keys: KeySource::Secret(canary_secret.into_bytes()),
                canary: true,
            });
        }
        Ok(Self {
            issuers,
            leeway: seconds("JWT_LEEWAY_SECONDS", 5)?,
            jwks_min_refresh: seconds("JWKS_MIN_REFRESH_SECONDS", 60)?,
            subprotocol: env.get("SUBPROTOCOL").unwrap_or_else(|| "wsdr".into()),
        })
    }
}
