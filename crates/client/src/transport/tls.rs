//! `wss://` with the `tls` feature: rustls on ring, the roots it trusts.

use super::{ConnectError, Handshake, Stream};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

/// A `wss://` URL is one this build can reach.
pub(super) fn wss() -> Result<(), ConnectError> {
    Ok(())
}

/// The roots a `wss://` server's certificate must chain to: the operating system's with the
/// `native-roots` feature, else the Mozilla set compiled in (webpki-roots).
fn root_store() -> Result<rustls::RootCertStore, String> {
    #[cfg(feature = "native-roots")]
    {
        let loaded = rustls_native_certs::load_native_certs();
        let mut roots = rustls::RootCertStore::empty();
        let (added, _unparsable) = roots.add_parsable_certificates(loaded.certs);
        if added == 0 {
            return Err(format!(
                "no usable root certificate in the operating system's store ({} errors reading it)",
                loaded.errors.len()
            ));
        }
        Ok(roots)
    }
    #[cfg(not(feature = "native-roots"))]
    Ok(rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    })
}

/// TLS over `stream`, then the upgrade: rustls on ring with [`root_store`]'s roots, the
/// configuration built once.
pub(super) async fn tls_handshake(
    request: tokio_tungstenite::tungstenite::handshake::client::Request,
    stream: Stream,
    config: WebSocketConfig,
) -> Result<Handshake, ConnectError> {
    use std::sync::{Arc, OnceLock};
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    let tls = CONFIG.get_or_init(|| {
        let roots = root_store()?;
        // ring: no C toolchain beyond ring's own small build (aws-lc-rs, rustls' default, needs
        // cmake-class tooling and minutes of compile). rustls 0.23.48 deprecates it for lacking
        // post-quantum key exchange; classical ECDHE is what API Gateway negotiates.
        #[allow(deprecated)]
        let provider = rustls::crypto::ring::default_provider();
        rustls::ClientConfig::builder_with_provider(Arc::new(provider))
            .with_safe_default_protocol_versions()
            .map(|b| Arc::new(b.with_root_certificates(roots).with_no_client_auth()))
            .map_err(|e| e.to_string())
    });
    let connector = tokio_tungstenite::Connector::Rustls(tls.clone().map_err(ConnectError::Tls)?);
    Ok(tokio_tungstenite::client_async_tls_with_config(
        request,
        stream,
        Some(config),
        Some(connector),
    )
    .await)
}

#[cfg(all(test, feature = "native-roots"))]
mod native_roots_tests {
    #[test]
    fn the_operating_system_s_roots_are_read() {
        let roots = super::root_store().expect("this machine has a CA store");
        assert!(roots.len() > 10, "{} roots", roots.len());
    }
}
