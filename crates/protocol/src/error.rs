use serde::{Deserialize, Serialize};

/// The stable, documented error codes of `{"type":"error","code":..}` frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// Not UTF-8, not JSON, not a JSON object, or nested too deep.
    BadJson,
    /// `action` missing or not one this API knows.
    UnknownAction,
    /// A field is missing, of the wrong type, out of range, or given twice.
    InvalidField,
    /// Payload over [`crate::limits::MAX_MESSAGE_BYTES`].
    TooLarge,
    /// The caller has no identity (no authorizer context).
    Unauthorized,
    /// Something failed on our side; details are in the server log, not the frame.
    Internal,
    /// Strong mode only: this Region is cut off from the table's quorum and can answer
    /// nothing consistent; connect to another Region (docs/PROTOCOL.md).
    NoQuorum,
}

impl ErrorCode {
    /// The code as it appears on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadJson => "bad_json",
            ErrorCode::UnknownAction => "unknown_action",
            ErrorCode::InvalidField => "invalid_field",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Internal => "internal",
            ErrorCode::NoQuorum => "no_quorum",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A client frame that cannot be accepted. `message` is safe to show the client: it names
/// the problem, never echoes the offending bytes at length.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ProtocolError {
    pub code: ErrorCode,
    pub message: String,
}

impl ProtocolError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn bad_json(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadJson, message)
    }

    pub(crate) fn invalid_field(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidField, message)
    }
}
