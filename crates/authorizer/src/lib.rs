//! The wsdr JWT authorizer: an API Gateway REQUEST authorizer for the WebSocket `$connect`
//! route, deployed in both Regions so a client that fails over re-authenticates anywhere.
//!
//! - Token from the query string (`?token=`) or from `Sec-WebSocket-Protocol: wsdr, <token>`
//!   (browsers cannot set other headers on a WebSocket; the handler echoes `wsdr`).
//! - Keys: an HS256 shared secret (local, dev, and the canary's own issuer) and RS256/ES256
//!   keys from a JWKS, chosen by `kid`, fetched at cold start and refreshed (rate-limited) on
//!   an unknown `kid`; when the issuer cannot be reached (its Region lost), from a snapshot of
//!   its JWKS kept in the function's own configuration (`JWT_JWKS_SNAPSHOT`).
//! - Checks signature, `exp`, `nbf`, `iss`, `aud`, `sub`, and that the header's `alg` is in
//!   the allowed list *and* matches the key's family: the token never picks its own key type.
//! - Allows `execute-api:Invoke` on the exact `$connect` method ARN, with `principalId` = `sub`
//!   and a context carrying `sub`. Any failure is a Deny whose log line names the reason and
//!   never the token.

mod config;
mod deny;
mod handler;
mod jwks;
mod policy;
mod verify;

pub use config::{Config, KeySource, TrustedIssuer};
pub use deny::DenyReason;
pub use handler::{token_from_request, Authorizer};
pub use jwks::{
    usable_keys, FetchJwks, FetchResult, HttpJwks, JwksCache, CONNECT_TIMEOUT, FETCH_TIMEOUT,
};
pub use policy::{AuthorizerResponse, PolicyDocument, Statement};
pub use verify::{system_now_secs, Identity, NowSecs, Verifier, MAX_TOKEN_BYTES};

/// Errors of the cold start (configuration). Request failures are [`DenyReason`]s.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting missing or malformed (the one configuration error of every Lambda).
    #[error(transparent)]
    Config(#[from] wsdr_lambda::env::EnvError),
}
