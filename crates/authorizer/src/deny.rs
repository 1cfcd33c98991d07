//! Why a token was refused: one vocabulary for the verifier and the key cache (each
//! refuses for its own reasons), so neither imports the other.

/// Why a token was refused. Logged (never the token itself); the client sees only 403.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DenyReason {
    #[error("no token in the query string or Sec-WebSocket-Protocol")]
    MissingToken,
    #[error("token is larger than 8 KB")]
    TooLarge,
    #[error("token is not a well-formed JWT")]
    Malformed,
    #[error("token algorithm is not allowed")]
    AlgorithmNotAllowed,
    #[error("token has no kid, or one the JWKS does not hold")]
    UnknownKid,
    #[error("the key named by kid is for another algorithm")]
    KeyAlgorithmMismatch,
    #[error(
        "signing keys are unavailable (the issuer cannot be reached and no snapshot holds the key)"
    )]
    KeysUnavailable,
    #[error("signature does not verify")]
    BadSignature,
    #[error("token has expired")]
    Expired,
    #[error("token is not valid yet (nbf)")]
    NotYetValid,
    #[error("token issuer is not trusted")]
    WrongIssuer,
    #[error("token audience does not match")]
    WrongAudience,
    #[error("token has no usable sub")]
    MissingSub,
    /// A canary-issuer token whose `sub` is not `canary:*`: the canary secret names probe
    /// identities only, never a user.
    #[error("canary token names a subject outside canary:*")]
    CanarySubjectNotProbe,
    /// A user-issuer token whose `sub` is in the probes' reserved `canary:*` namespace: the
    /// two issuers' subjects can never be the same principal.
    #[error("user token names a subject in the reserved canary:* namespace")]
    ReservedSubject,
}
