use crate::Error;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde::Serialize;

#[derive(Serialize)]
struct CanaryClaims<'a> {
    sub: String,
    iss: &'a str,
    aud: &'a str,
    iat: u64,
    exp: u64,
}

/// A 60-second HS256 token of the canary issuer, `sub = canary:<region>` (docs/AUTH.md).
pub fn mint_canary_token(
    secret: &[u8],
    issuer: &str,
    audience: &str,
    region: &str,
    now_secs: u64,
) -> Result<String, Error> {
    let key = EncodingKey::from_secret(secret).map_err(|e| Error::Token(e.to_string()))?;
    let claims = CanaryClaims {
        sub: format!("canary:{region}"),
        iss: issuer,
        aud: audience,
        iat: now_secs,
        exp: now_secs + 60,
    };
    encode(&Header::new(Algorithm::HS256), &claims, &key).map_err(|e| Error::Token(e.to_string()))
}
