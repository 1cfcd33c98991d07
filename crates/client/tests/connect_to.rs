#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
// The handshake callback's error type is tungstenite's, not ours.
#![allow(clippy::result_large_err)]
//! `ConnectOptions::connect_to`: dial another address, keep the URL's name (the `Host` header
//! here; SNI and the certificate check under TLS), as the watcher's probe of the primary's
//! custom domain does.

use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use wsdr_client::transport::{connect, ConnectError, ConnectOptions};

/// A WebSocket server on loopback that records the `Host` header of each upgrade.
async fn server() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hosts = Arc::new(Mutex::new(Vec::new()));
    let seen = hosts.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let record = |request: &Request, response: Response| {
                    let host = request
                        .headers()
                        .get("host")
                        .and_then(|h| h.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    seen.lock().unwrap().push(host);
                    Ok(response)
                };
                let _ = tokio_tungstenite::accept_hdr_async(stream, record).await;
            });
        }
    });
    (port, hosts)
}

#[tokio::test]
async fn a_name_no_resolver_knows_is_reached_at_the_address_given() {
    let (port, hosts) = server().await;
    // A name under `.invalid` resolves nowhere (RFC 6761); the test never looks it up: the
    // only address dialled is the loopback one given.
    let url = format!("ws://auction.wsdr.invalid:{port}/prod");
    let options = ConnectOptions {
        connect_to: Some(format!("127.0.0.1:{port}")),
        ..ConnectOptions::default()
    };
    connect(&url, &options).await.unwrap();
    assert_eq!(
        hosts.lock().unwrap().as_slice(),
        [format!("auction.wsdr.invalid:{port}")],
        "the URL's name travels, not the address dialled"
    );
}

#[tokio::test]
async fn a_malformed_address_is_a_configuration_error() {
    let options = ConnectOptions {
        connect_to: Some("host:notaport".into()),
        ..ConnectOptions::default()
    };
    let error = connect("ws://auction.example.com/prod", &options)
        .await
        .unwrap_err();
    assert!(matches!(error, ConnectError::InvalidUrl(_)), "{error:?}");
}
