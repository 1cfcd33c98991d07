//! One WebSocket connection, with failures classified by the layer that failed.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderValue, Uri};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Error as WsError;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use wsdr_net::DialError;
#[cfg(feature = "simulation")]
use wsdr_net::Network;

/// An open WebSocket.
pub type WsStream = WebSocketStream<MaybeTlsStream<Stream>>;

/// The byte stream under a connection: TCP (or, with the `simulation` feature, a simulated
/// network's in-memory pipe). Its own type, so that no other crate's type is part of this
/// crate's API.
#[derive(Debug)]
pub struct Stream(wsdr_net::Stream);

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

/// Bytes one read from the socket may take.
const READ_BUFFER_BYTES: usize = 8 * 1024;

/// Why a connection could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectError {
    /// Not a `ws://` or `wss://` URL with a host.
    #[error("invalid URL: {0}")]
    InvalidUrl(String),
    /// The name did not resolve.
    #[error("DNS lookup failed: {0}")]
    Dns(String),
    /// No TCP connection to any address of the name.
    #[error("TCP connect failed: {0}")]
    Tcp(String),
    /// TLS failed (certificate, protocol).
    #[error("TLS handshake failed: {0}")]
    Tls(String),
    /// The server answered the upgrade with an HTTP status (401/403 need a new token,
    /// 429 and 5xx are worth retrying).
    #[error("handshake refused with HTTP {status}")]
    Refused {
        /// The HTTP status of the refusal.
        status: u16,
    },
    /// The whole connect took longer than its timeout.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The upgrade failed for another reason.
    #[error("WebSocket handshake failed: {0}")]
    Protocol(String),
}

impl ConnectError {
    /// Whether retrying with the same credentials can help (401/403 cannot).
    pub fn is_retryable(&self) -> bool {
        !matches!(
            self,
            ConnectError::Refused { status: 401 | 403 } | ConnectError::InvalidUrl(_)
        )
    }
}

/// How the token travels (see docs/AUTH.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TokenPlacement {
    /// `?token=<jwt>`.
    #[default]
    QueryString,
    /// `Sec-WebSocket-Protocol: wsdr, <jwt>`.
    Subprotocol,
}

/// Options of one connection attempt.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// The user's token, if any.
    pub token: Option<String>,
    /// Where the token travels.
    pub placement: TokenPlacement,
    /// The application protocol name offered beside a subprotocol token.
    pub subprotocol: String,
    /// Bound on DNS + TCP + TLS + upgrade together.
    pub timeout: Duration,
    /// Largest message accepted from the server.
    pub max_message_bytes: usize,
    /// Where connections go: TCP (default), or a simulation's in-memory network.
    #[cfg(feature = "simulation")]
    pub network: Network,
    /// Dial this `host[:port]` instead of the URL's, keeping the URL's name for TLS (SNI and
    /// the certificate check) and the `Host` header, like curl's `--connect-to`: a probe of
    /// one Region's custom domain (its certificate and API mapping) whatever DNS answers.
    pub connect_to: Option<String>,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            token: None,
            placement: TokenPlacement::default(),
            subprotocol: "wsdr".into(),
            timeout: Duration::from_secs(10),
            max_message_bytes: 1024 * 1024,
            #[cfg(feature = "simulation")]
            network: Network::Tcp,
            connect_to: None,
        }
    }
}

impl ConnectOptions {
    /// The network a connection is dialled on: the operating system's TCP, unless a
    /// simulation set another.
    fn dial_network(&self) -> wsdr_net::Network {
        #[cfg(feature = "simulation")]
        {
            self.network.clone()
        }
        #[cfg(not(feature = "simulation"))]
        {
            wsdr_net::Network::Tcp
        }
    }
}

type Handshake = Result<
    (
        WsStream,
        tokio_tungstenite::tungstenite::handshake::client::Response,
    ),
    WsError,
>;

#[cfg(feature = "tls")]
mod tls;
#[cfg(feature = "tls")]
use tls::{tls_handshake, wss};
#[cfg(not(feature = "tls"))]
mod without_tls;
#[cfg(not(feature = "tls"))]
use without_tls::{tls_handshake, wss};

fn percent_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `host[:port]` (the port defaulting to the URL's); `None` when malformed.
fn dial_address(address: &str, default_port: u16) -> Option<(String, u16)> {
    let (host, port) = match address.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => (host, port.parse().ok()?),
        _ => (address, default_port),
    };
    (!host.is_empty() && !host.contains('/')).then(|| (host.to_owned(), port))
}

/// Open a WebSocket to `url` (`ws://` or `wss://`).
pub async fn connect(url: &str, options: &ConnectOptions) -> Result<WsStream, ConnectError> {
    tokio::time::timeout(options.timeout, connect_inner(url, options))
        .await
        .map_err(|_| ConnectError::Timeout(options.timeout))?
}

async fn connect_inner(url: &str, options: &ConnectOptions) -> Result<WsStream, ConnectError> {
    let mut target = url.to_owned();
    if let (Some(token), TokenPlacement::QueryString) = (&options.token, options.placement) {
        let separator = if target.contains('?') { '&' } else { '?' };
        target = format!("{target}{separator}token={}", percent_encode(token));
    }
    let uri: Uri = target
        .parse()
        .map_err(|_| ConnectError::InvalidUrl(url.to_owned()))?;
    let secure = match uri.scheme_str() {
        Some("wss") => {
            wss()?;
            true
        }
        Some("ws") => false,
        _ => {
            return Err(ConnectError::InvalidUrl(format!(
                "{url}: scheme must be ws or wss"
            )))
        }
    };
    let host = uri
        .host()
        .ok_or_else(|| ConnectError::InvalidUrl(format!("{url}: no host")))?
        .to_owned();
    let port = uri.port_u16().unwrap_or(if secure { 443 } else { 80 });
    let (dial_host, dial_port) = match &options.connect_to {
        None => (host, port),
        Some(address) => dial_address(address, port).ok_or_else(|| {
            ConnectError::InvalidUrl(format!("connect_to {address}: not host[:port]"))
        })?,
    };

    let stream = options
        .dial_network()
        .connect(&dial_host, dial_port)
        .await
        .map(Stream)
        .map_err(|e| match e {
            DialError::Lookup(detail) => ConnectError::Dns(detail),
            DialError::Connect(detail) => ConnectError::Tcp(detail),
        })?;

    let mut request = uri
        .into_client_request()
        .map_err(|e| ConnectError::InvalidUrl(e.to_string()))?;
    if let (Some(token), TokenPlacement::Subprotocol) = (&options.token, options.placement) {
        let value = HeaderValue::from_str(&format!("{}, {token}", options.subprotocol))
            .map_err(|_| ConnectError::InvalidUrl("token is not a valid header value".into()))?;
        request
            .headers_mut()
            .insert("Sec-WebSocket-Protocol", value);
    }
    let config = WebSocketConfig::default()
        .max_message_size(Some(options.max_message_bytes))
        // tungstenite zeroes this much of its buffer before every read (128 KiB by
        // default); wsdr's frames are under 1 KiB, and a longer message still arrives over
        // several reads.
        .read_buffer_size(READ_BUFFER_BYTES);
    let handshake = if secure {
        tls_handshake(request, stream, config).await?
    } else {
        tokio_tungstenite::client_async_with_config(
            request,
            MaybeTlsStream::Plain(stream),
            Some(config),
        )
        .await
    };
    match handshake {
        Ok((ws, _response)) => Ok(ws),
        Err(WsError::Http(response)) => Err(ConnectError::Refused {
            status: response.status().as_u16(),
        }),
        Err(WsError::Tls(e)) => Err(ConnectError::Tls(e.to_string())),
        Err(WsError::Io(e)) if secure => Err(ConnectError::Tls(e.to_string())),
        Err(WsError::Io(e)) => Err(ConnectError::Tcp(e.to_string())),
        Err(e) => Err(ConnectError::Protocol(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn only_a_refused_token_or_a_bad_url_is_not_worth_retrying() {
        for error in [
            ConnectError::Refused { status: 401 },
            ConnectError::Refused { status: 403 },
            ConnectError::InvalidUrl("x".into()),
        ] {
            assert!(!error.is_retryable(), "{error:?}");
        }
        for error in [
            ConnectError::Refused { status: 429 },
            ConnectError::Refused { status: 502 },
            ConnectError::Dns("x".into()),
            ConnectError::Tcp("x".into()),
            ConnectError::Tls("x".into()),
            ConnectError::Timeout(Duration::from_secs(1)),
        ] {
            assert!(error.is_retryable(), "{error:?}");
        }
    }

    #[test]
    fn a_dial_address_is_a_host_and_an_optional_port() {
        let dial = |a: &str| dial_address(a, 443);
        assert_eq!(dial("10.0.0.7:8443"), Some(("10.0.0.7".into(), 8443)));
        assert_eq!(dial("10.0.0.7"), Some(("10.0.0.7".into(), 443)));
        // An IPv6 address's colons are no port.
        assert_eq!(dial("::1"), Some(("::1".into(), 443)));
        assert_eq!(dial("host/path:80"), None);
        assert_eq!(dial(":80"), None);
        assert_eq!(dial("host:port"), None);
    }

    #[tokio::test]
    async fn the_stream_passes_its_shutdown_on_so_the_peer_reads_the_end() {
        let (ours, mut theirs) = tokio::io::duplex(64);
        let mut stream = Stream(wsdr_net::Stream::Memory(ours));
        stream.write_all(b"bye").await.unwrap();
        stream.flush().await.unwrap();
        stream.shutdown().await.unwrap();
        let mut read = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), theirs.read_to_end(&mut read))
            .await
            .expect("the end arrives")
            .unwrap();
        assert_eq!(read, b"bye");
    }

    /// A TCP server on 127.0.0.1:0 that accepts one connection and closes it at once.
    async fn closing_server() -> u16 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            if let Ok((socket, _)) = listener.accept().await {
                drop(socket);
            }
        });
        port
    }

    fn to(port: u16) -> ConnectOptions {
        ConnectOptions {
            connect_to: Some(format!("127.0.0.1:{port}")),
            timeout: Duration::from_secs(5),
            ..ConnectOptions::default()
        }
    }

    #[tokio::test]
    async fn a_plain_socket_closed_mid_handshake_is_a_tcp_failure() {
        let port = closing_server().await;
        let error = connect("ws://region.test/prod", &to(port))
            .await
            .unwrap_err();
        assert!(matches!(error, ConnectError::Tcp(_)), "{error:?}");
    }

    #[cfg(feature = "tls")]
    #[tokio::test]
    async fn a_wss_url_speaks_tls_first_and_a_socket_closed_during_it_is_a_tls_failure() {
        let port = closing_server().await;
        let error = connect("wss://region.test/prod", &to(port))
            .await
            .unwrap_err();
        assert!(matches!(error, ConnectError::Tls(_)), "{error:?}");
    }

    #[cfg(feature = "tls")]
    #[tokio::test]
    async fn a_wss_url_never_falls_back_to_a_plain_upgrade() {
        // A plain WebSocket server: a wss:// URL must fail in TLS, not upgrade in the clear.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            if let Ok((socket, _)) = listener.accept().await {
                let _ = tokio_tungstenite::accept_async(socket).await;
            }
        });
        let error = connect("wss://region.test/prod", &to(port))
            .await
            .unwrap_err();
        assert!(matches!(error, ConnectError::Tls(_)), "{error:?}");
    }

    #[cfg(not(feature = "tls"))]
    #[tokio::test]
    async fn a_build_without_tls_refuses_wss_as_a_configuration_error() {
        let error = connect("wss://region.test/prod", &ConnectOptions::default())
            .await
            .unwrap_err();
        assert!(
            matches!(&error, ConnectError::InvalidUrl(m) if m.contains("`tls` feature")),
            "{error:?}"
        );
        assert!(!error.is_retryable());
    }

    #[cfg(feature = "simulation")]
    #[tokio::test]
    async fn a_simulations_network_is_the_one_dialled() {
        let network = wsdr_net::Network::memory();
        let mut listener = network.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            if let Ok((socket, _)) = listener.accept().await {
                let _ = tokio_tungstenite::accept_async(socket).await;
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
        });
        let url = format!("ws://{address}/prod");
        let options = ConnectOptions {
            network,
            timeout: Duration::from_secs(5),
            ..ConnectOptions::default()
        };
        connect(&url, &options)
            .await
            .expect("upgraded over the in-memory network, where nothing of TCP listens");
    }
}
