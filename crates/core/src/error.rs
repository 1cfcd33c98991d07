/// The one error type of the domain and of every port. Variants say what the caller must do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The target connection no longer exists (API Gateway 410): forget it, do not retry.
    #[error("connection is gone")]
    Gone,
    /// The backend asked us to slow down (429, LimitExceeded, throughput exceeded): retry later.
    #[error("throttled: {0}")]
    Throttled(String),
    /// A passing failure (timeout, 5xx, connection reset): safe to retry.
    #[error("transient failure: {0}")]
    Transient(String),
    /// Bad input that got past validation (for example an identity that is not a valid id).
    #[error("bad request: {0}")]
    BadRequest(String),
    /// A bug or a misconfiguration; retrying will not help.
    #[error("internal error: {0}")]
    Internal(String),
    /// A strongly consistent (MRSC) table could not reach its quorum from this Region: the
    /// request did not take effect here, and no retry in this Region will help until the
    /// Region rejoins. Send the request to another Region.
    #[error("no quorum: {0}")]
    NoQuorum(String),
    /// A strongly consistent (MRSC) table refused a write because a request in another
    /// Region was modifying the same item (`ReplicatedWriteConflictException`). Nothing was
    /// written; retry.
    #[error("replicated write conflict: {0}")]
    WriteConflict(String),
}

impl Error {
    /// Whether an operation that failed this way may succeed if tried again.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::Throttled(_) | Error::Transient(_) | Error::WriteConflict(_)
        )
    }
}
