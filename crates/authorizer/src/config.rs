use crate::Error;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::Algorithm;
use std::str::FromStr;
use std::time::Duration;
use wsdr_lambda::env::EnvError;

/// Where an issuer's keys come from.
#[derive(Clone)]
pub enum KeySource {
    /// HS256 shared secret (bytes).
    Secret(Vec<u8>),
    /// RS256/ES256 keys from the `url` JWKS, and, when the issuer cannot be reached, from
    /// `snapshot`: a copy of that JWKS kept in the function's own Region.
    Jwks {
        url: String,
        snapshot: Option<JwkSet>,
    },
}

impl std::fmt::Debug for KeySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeySource::Secret(_) => f.write_str("Secret(<redacted>)"),
            KeySource::Jwks { url, snapshot } => f
                .debug_struct("Jwks")
                .field("url", url)
                .field("snapshot_keys", &snapshot.as_ref().map(|s| s.keys.len()))
                .finish(),
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

/// `JWT_JWKS_SNAPSHOT`: a JWKS, as JSON or as the base64url of that JSON (what a
/// `sam deploy` parameter carries without quoting), with at least one key the authorizer can
/// use (a snapshot that verifies nothing would only hide a mistake until the outage it is
/// for).
fn parse_snapshot(text: &str) -> Result<JwkSet, Error> {
    let invalid = |reason: String| EnvError::Invalid {
        name: "JWT_JWKS_SNAPSHOT",
        reason,
    };
    let text = text.trim();
    let json = if text.starts_with('{') {
        text.as_bytes().to_vec()
    } else {
        base64url_decode(text)
            .ok_or_else(|| invalid("neither JSON nor base64url of a JWKS".into()))?
    };
    let set: JwkSet =
        serde_json::from_slice(&json).map_err(|e| invalid(format!("not a JWKS: {e}")))?;
    if crate::jwks::usable_keys(&set).is_empty() {
        return Err(invalid("holds no RS256 or ES256 signing key with a kid".into()).into());
    }
    Ok(set)
}

/// Base64url, padded or not; `None` on any other character.
fn base64url_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.trim_end_matches('=').bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

impl Config {
    pub fn from_env() -> Result<Self, Error> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Variables: `JWT_ISSUER`, `JWT_AUDIENCE`, `JWT_JWKS_URL` (with `JWT_JWKS_SNAPSHOT`, a
    /// copy of that JWKS used when the issuer cannot be reached) and/or `JWT_HS256_SECRET`,
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
            let snapshot = env
                .get("JWT_JWKS_SNAPSHOT")
                .filter(|s| !s.trim().is_empty())
                .map(|text| parse_snapshot(&text))
                .transpose()?;
            issuers.push(TrustedIssuer {
                issuer: issuer.clone(),
                audience: audience.clone(),
                algorithms: asymmetric,
                keys: KeySource::Jwks { url, snapshot },
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::collections::HashMap;

    fn from(pairs: &[(&str, &str)]) -> Result<Config, Error> {
        let env: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Config::from_lookup(|name| env.get(name).cloned())
    }

    fn with_secrets(user: &str, canary: &str) -> Result<Config, Error> {
        from(&[
            ("JWT_ISSUER", "https://auth.example.com"),
            ("JWT_AUDIENCE", "wsdr"),
            ("JWT_HS256_SECRET", user),
            ("CANARY_HS256_SECRET", canary),
        ])
    }

    #[test]
    fn hs256_secrets_of_32_bytes_are_taken_and_of_31_refused() {
        let (short, enough) = ("s".repeat(31), "s".repeat(32));
        let config = with_secrets(&enough, &enough).unwrap();
        assert_eq!(config.issuers.len(), 2);
        for (user, canary, refused) in [
            (&short, &enough, "JWT_HS256_SECRET"),
            (&enough, &short, "CANARY_HS256_SECRET"),
        ] {
            let error = with_secrets(user, canary).unwrap_err().to_string();
            assert!(error.contains(refused), "{error}");
            assert!(error.contains("at least 32 bytes"), "{error}");
        }
    }

    #[test]
    fn a_configurations_debug_names_its_keys_and_never_shows_a_secret() {
        let secret = "a-user-secret-that-must-never-be-logged";
        let canary = "a-canary-secret-that-is-never-logged-either";
        let shown = format!("{:?}", with_secrets(secret, canary).unwrap());
        assert!(
            !shown.contains(secret) && !shown.contains(canary),
            "{shown}"
        );
        assert_eq!(shown.matches("Secret(<redacted>)").count(), 2, "{shown}");

        let snapshot = KeySource::Jwks {
            url: "https://auth.example.com/jwks.json".into(),
            snapshot: None,
        };
        assert_eq!(
            format!("{snapshot:?}"),
            r#"Jwks { url: "https://auth.example.com/jwks.json", snapshot_keys: None }"#
        );
    }

    #[test]
    fn base64url_reads_its_own_two_characters_with_or_without_padding_and_no_others() {
        // 0xfb 0xff: six bits 62 ('-'), 63 ('_'), then the last four bits padded ('8').
        assert_eq!(base64url_decode("-_8"), Some(vec![0xfb, 0xff]));
        assert_eq!(base64url_decode("-_8="), Some(vec![0xfb, 0xff]));
        assert_eq!(base64url_decode("TWFu"), Some(b"Man".to_vec()));
        // Standard base64's `+` and `/` are not base64url.
        assert_eq!(base64url_decode("+/8"), None);
    }
}
