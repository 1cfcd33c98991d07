//! hyper's client connector on a [`Network`] (feature `hyper`): the SDK's plain-HTTP client
//! and the lab's control client reach either network through it.

use crate::{DialError, Network, Stream};
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// hyper's connector on a [`Network`]: `http://host:port` only.
#[derive(Debug, Clone)]
pub struct Connector(Network);

impl Connector {
    pub fn new(network: Network) -> Self {
        Self(network)
    }
}

impl tower_service::Service<http::Uri> for Connector {
    type Response = NetIo;
    type Error = DialError;
    type Future = Pin<Box<dyn Future<Output = Result<NetIo, DialError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let network = self.0.clone();
        Box::pin(async move {
            let host = uri
                .host()
                .ok_or_else(|| DialError::Lookup(format!("{uri}: no host")))?;
            let port = uri.port_u16().unwrap_or(80);
            let stream = network.connect(host, port).await?;
            Ok(NetIo(TokioIo::new(stream)))
        })
    }
}

/// A connection on either network, as hyper reads and writes it.
#[derive(Debug)]
pub struct NetIo(TokioIo<Stream>);

impl Connection for NetIo {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl hyper::rt::Read for NetIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for NetIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
