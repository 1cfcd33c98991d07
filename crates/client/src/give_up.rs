//! When a client stops for good ([`crate::Event::GaveUp`]), as both clients decide it (the
//! browser client's `givesUp` and `tokenErrorGivesUp`; the shared vectors are
//! `conformance/give_up.json`).

/// Whether the next retry is one too many: `attempt` reconnects already failed in a row,
/// `max` allowed (`None`: never give up; a real-time app keeps trying).
pub fn after_failures(attempt: u32, max: Option<u32>) -> bool {
    max.is_some_and(|max| attempt >= max)
}

/// Whether a token provider's error ends the client at once: `Denied` (no token will come:
/// the user signed out) does; `Unavailable` (the identity provider unreachable) is retried
/// with the backoff, like a failed connect.
pub fn on_token_error(error: &crate::TokenError) -> bool {
    matches!(error, crate::TokenError::Denied(_))
}
