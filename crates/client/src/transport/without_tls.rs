//! A build without the `tls` feature (the lab's): `wss://` is a configuration error, never a
//! connection tried.

use super::{ConnectError, Handshake, Stream};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

/// A `wss://` URL: refused, not retryable.
pub(super) fn wss() -> Result<(), ConnectError> {
    Err(no_tls())
}

/// A build without TLS can never reach a `wss://` URL: a configuration error, not one worth
/// retrying (`InvalidUrl` is not retryable; `Tls` would be).
fn no_tls() -> ConnectError {
    ConnectError::InvalidUrl(
        "wss:// needs TLS, and this build has none (wsdr-client's `tls` feature is off)".into(),
    )
}

/// Never reached: [`wss`] refuses the URL first.
pub(super) async fn tls_handshake(
    _request: tokio_tungstenite::tungstenite::handshake::client::Request,
    _stream: Stream,
    _config: WebSocketConfig,
) -> Result<Handshake, ConnectError> {
    Err(no_tls())
}
