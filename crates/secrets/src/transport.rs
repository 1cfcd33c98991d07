//! One HTTP/1.1 exchange per request, over TLS for `https` endpoints (plain for a loopback
//! peer): hyper's connection API and rustls, which every Lambda links already. No pool, no
//! proxy support: a function reads its secrets once, at cold start, straight from the
//! Regional endpoint; the evacuator GETs one health function's answer per check.

use bytes::Bytes;
use http::{StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rustls::crypto::CryptoProvider;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long one request may take in all (Lambda's init phase has ten seconds).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

/// Where requests go: scheme, host, port and path of the endpoint.
#[derive(Clone)]
pub struct Endpoint {
    tls: Option<tokio_rustls::TlsConnector>,
    host: String,
    port: u16,
    /// The port as written in the URL, if any (it is part of the signed `Host`).
    explicit_port: Option<u16>,
    path: String,
    uri: Uri,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.uri.to_string())
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.uri.to_string())
    }
}

impl Endpoint {
    /// `https://host[:port][/path]` (TLS with `crypto`) or `http://...` (a local peer).
    pub fn parse(url: &str, crypto: Arc<CryptoProvider>) -> Result<Self, String> {
        let uri: Uri = url.parse().map_err(|e| format!("{e}"))?;
        let host = uri.host().ok_or("no host")?.to_owned();
        let (tls, default_port) = match uri.scheme_str() {
            Some("https") => (Some(tls_connector(crypto)?), 443),
            Some("http") => (None, 80),
            _ => return Err("the scheme must be https or http".into()),
        };
        let explicit_port = uri.port_u16().filter(|port| *port != default_port);
        let path = match uri.path() {
            "" => "/".to_owned(),
            path => path.to_owned(),
        };
        Ok(Self {
            tls,
            port: uri.port_u16().unwrap_or(default_port),
            host,
            explicit_port,
            path,
            uri,
        })
    }

    /// `host[:port]`, as sent and signed in `Host`.
    pub fn authority(&self) -> String {
        match self.explicit_port {
            Some(port) => format!("{}:{port}", self.host),
            None => self.host.clone(),
        }
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// POSTs one request on a new connection: the answer, or why there is none (worth
    /// retrying: the request may not have arrived).
    pub async fn post(&self, post: Post) -> Result<Answer, String> {
        tokio::time::timeout(REQUEST_TIMEOUT, self.exchange(post))
            .await
            .map_err(|_| format!("no answer within {REQUEST_TIMEOUT:?}"))?
    }

    /// GETs the endpoint's path on a new connection, bounded by `within` in all.
    pub async fn get(&self, within: Duration) -> Result<Answer, String> {
        self.get_with(within, &[]).await
    }

    /// GETs the endpoint's path with these headers (a signature's), bounded by `within`.
    pub async fn get_with(
        &self,
        within: Duration,
        headers: &[(String, String)],
    ) -> Result<Answer, String> {
        let mut request = http::Request::get(self.path.as_str()).header("host", self.authority());
        for (name, value) in headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let request = request
            .body(Full::new(Bytes::new()))
            .map_err(|e| format!("request: {e}"))?;
        tokio::time::timeout(within, self.send_on_new_connection(request))
            .await
            .map_err(|_| format!("no answer within {within:?}"))?
    }

    async fn exchange(&self, post: Post) -> Result<Answer, String> {
        let mut request = http::Request::post(self.path.as_str()).header("host", self.authority());
        for (name, value) in &post.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let request = request
            .body(Full::new(Bytes::from(post.body)))
            .map_err(|e| format!("request: {e}"))?;
        self.send_on_new_connection(request).await
    }

    async fn send_on_new_connection(
        &self,
        request: http::Request<Full<Bytes>>,
    ) -> Result<Answer, String> {
        let tcp = tokio::time::timeout(
            CONNECT_TIMEOUT,
            TcpStream::connect((self.host.as_str(), self.port)),
        )
        .await
        .map_err(|_| format!("connecting to {} timed out", self.authority()))?
        .map_err(|e| format!("connecting to {}: {e}", self.authority()))?;
        let _ = tcp.set_nodelay(true);
        match &self.tls {
            None => send(tcp, request).await,
            Some(connector) => {
                let name = rustls::pki_types::ServerName::try_from(self.host.clone())
                    .map_err(|e| format!("server name {}: {e}", self.host))?;
                let stream = connector
                    .connect(name, tcp)
                    .await
                    .map_err(|e| format!("TLS with {}: {e}", self.host))?;
                send(stream, request).await
            }
        }
    }
}

async fn send<S>(stream: S, request: http::Request<Full<Bytes>>) -> Result<Answer, String>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("HTTP handshake: {e}"))?;
    // The connection is driven in this task, beside the exchange, not spawned: a spawned task
    // runs on another worker thread, whose first allocations at cold start cost more than the
    // request (the thread's malloc arena).
    let exchange = async {
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| format!("no answer: {e}"))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("answer cut short: {e}"))?
            .to_bytes();
        Ok(Answer {
            status,
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    };
    tokio::pin!(connection, exchange);
    tokio::select! {
        biased;
        answer = &mut exchange => answer,
        closed = &mut connection => match closed {
            // A peer that closes after answering (`Connection: close`): the answer is read.
            Ok(()) => exchange.await,
            Err(e) => Err(format!("connection: {e}")),
        },
    }
}

/// One request: its headers (beside `Host`) and its body.
#[derive(Debug)]
pub struct Post {
    pub headers: Vec<(String, String)>,
    pub body: String,
}

/// One answer: its status and its body.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub body: String,
}

/// TLS trusting the Mozilla root store compiled into webpki-roots (Amazon Trust Services'
/// roots among them): nothing is read from disk or parsed at cold start.
fn tls_connector(crypto: Arc<CryptoProvider>) -> Result<tokio_rustls::TlsConnector, String> {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let config = rustls::ClientConfig::builder_with_provider(crypto)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS configuration: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn endpoint(url: &str) -> Endpoint {
        Endpoint::parse(url, Arc::new(rustls::crypto::ring::default_provider())).unwrap()
    }

    #[test]
    fn the_signed_host_names_a_port_only_when_it_is_not_the_schemes_own() {
        assert_eq!(
            endpoint("https://sm.example.com:443/").authority(),
            "sm.example.com"
        );
        assert_eq!(endpoint("http://127.0.0.1:80").authority(), "127.0.0.1");
        assert_eq!(
            endpoint("https://sm.example.com:8443").authority(),
            "sm.example.com:8443"
        );
        assert_eq!(
            endpoint("http://127.0.0.1:4566").authority(),
            "127.0.0.1:4566"
        );
    }

    #[test]
    fn the_signed_path_is_the_urls_or_the_root() {
        assert_eq!(endpoint("https://sm.example.com").path(), "/");
        assert_eq!(endpoint("http://127.0.0.1:4566/prefix").path(), "/prefix");
    }

    #[test]
    fn an_endpoint_shows_as_its_url_both_ways() {
        let shown = endpoint("https://secretsmanager.eu-west-1.amazonaws.com/");
        assert_eq!(
            format!("{shown}"),
            "https://secretsmanager.eu-west-1.amazonaws.com/"
        );
        assert_eq!(
            format!("{shown:?}"),
            "https://secretsmanager.eu-west-1.amazonaws.com/"
        );
    }
}
