//! Byte streams between addresses, on one of two networks:
//!
//! - [`Network::Tcp`]: the operating system's TCP (what every deployed client and the
//!   interactive lab use);
//! - [`Network::Memory`]: an in-memory network of listeners and [`tokio::io::DuplexStream`]
//!   pairs inside one process. It has no threads, no descriptors and no clock of its own, so a
//!   simulation that runs on tokio's paused clock in one thread stays a pure function of its
//!   inputs (docs/LAB.md, "Deterministic simulation").
//!
//! Code that opens or accepts connections takes a [`Network`] (default: TCP) and never names
//! `tokio::net` itself; that is the whole port.

#[cfg(feature = "hyper")]
pub mod hyper;

use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// Bytes each direction of an in-memory connection buffers before a writer waits (the
/// receive window of a loopback socket, roughly).
const MEMORY_BUFFER: usize = 64 * 1024;

/// The first port the in-memory network hands out.
const FIRST_MEMORY_PORT: u16 = 20_000;

/// Where connections go.
#[derive(Debug, Clone, Default)]
pub enum Network {
    /// The operating system's TCP.
    #[default]
    Tcp,
    /// An in-memory network (one per simulated world).
    Memory(MemoryNetwork),
}

impl Network {
    /// A new, empty in-memory network.
    pub fn memory() -> Self {
        Network::Memory(MemoryNetwork::default())
    }

    /// Listen on `addr` (port 0: any free port).
    pub async fn bind(&self, addr: SocketAddr) -> io::Result<Listener> {
        match self {
            Network::Tcp => Ok(Listener::Tcp(TcpListener::bind(addr).await?)),
            Network::Memory(net) => net.bind(addr).map(Listener::Memory),
        }
    }

    /// Open a connection to `host:port`: a DNS lookup and the first address that answers on
    /// TCP; on the in-memory network `host` must be an IP address a listener is bound to.
    /// `host` may be written as in a URL (an IPv6 address in brackets).
    pub async fn connect(&self, host: &str, port: u16) -> Result<Stream, DialError> {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        match self {
            Network::Tcp => {
                let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
                    .await
                    .map_err(|e| DialError::Lookup(format!("{host}: {e}")))?
                    .collect();
                let mut last = DialError::Lookup(format!("{host} has no address"));
                for address in addresses {
                    match TcpStream::connect(address).await {
                        Ok(stream) => {
                            // Small frames: without it a reply can wait for a delayed ACK.
                            let _ = stream.set_nodelay(true);
                            return Ok(Stream::Tcp(stream));
                        }
                        Err(e) => last = DialError::Connect(format!("{address}: {e}")),
                    }
                }
                Err(last)
            }
            Network::Memory(net) => {
                let ip: IpAddr = host.parse().map_err(|_| {
                    DialError::Lookup(format!(
                        "{host}: the in-memory network has no names, only addresses"
                    ))
                })?;
                net.connect(SocketAddr::new(ip, port)).map(Stream::Memory)
            }
        }
    }

    /// Open a connection to `addr`.
    pub async fn connect_addr(&self, addr: SocketAddr) -> Result<Stream, DialError> {
        self.connect(&addr.ip().to_string(), addr.port()).await
    }

    pub fn is_memory(&self) -> bool {
        matches!(self, Network::Memory(_))
    }
}

/// Why a connection could not be opened: the name did not resolve, or nothing answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DialError {
    Lookup(String),
    Connect(String),
}

impl std::fmt::Display for DialError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DialError::Lookup(detail) => write!(f, "name lookup failed: {detail}"),
            DialError::Connect(detail) => write!(f, "connect failed: {detail}"),
        }
    }
}

impl std::error::Error for DialError {}

/// A listener on either network.
#[derive(Debug)]
pub enum Listener {
    Tcp(TcpListener),
    Memory(MemoryListener),
}

impl Listener {
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            Listener::Tcp(l) => l.local_addr(),
            Listener::Memory(l) => Ok(l.addr),
        }
    }

    /// The next connection and its peer's address.
    pub async fn accept(&mut self) -> io::Result<(Stream, SocketAddr)> {
        match self {
            Listener::Tcp(l) => {
                let (stream, peer) = l.accept().await?;
                let _ = stream.set_nodelay(true);
                Ok((Stream::Tcp(stream), peer))
            }
            Listener::Memory(l) => l
                .incoming
                .recv()
                .await
                .map(|(stream, peer)| (Stream::Memory(stream), peer))
                .ok_or_else(|| io::Error::new(io::ErrorKind::NotConnected, "network closed")),
        }
    }
}

/// A connection on either network.
#[derive(Debug)]
pub enum Stream {
    Tcp(TcpStream),
    Memory(DuplexStream),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Memory(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Memory(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_flush(cx),
            Stream::Memory(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Memory(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

type Incoming = mpsc::UnboundedSender<(DuplexStream, SocketAddr)>;

/// An in-memory network: listeners by address, connections as duplex pairs. Ports are handed
/// out in order, so the same sequence of binds gives the same addresses.
#[derive(Debug, Clone, Default)]
pub struct MemoryNetwork {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug, Default)]
struct Inner {
    listeners: BTreeMap<SocketAddr, Incoming>,
    next_port: u16,
}

impl MemoryNetwork {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn next_port(inner: &mut Inner) -> u16 {
        if inner.next_port < FIRST_MEMORY_PORT {
            inner.next_port = FIRST_MEMORY_PORT;
        }
        let port = inner.next_port;
        inner.next_port = inner.next_port.wrapping_add(1);
        port
    }

    fn bind(&self, addr: SocketAddr) -> io::Result<MemoryListener> {
        let mut inner = self.lock();
        inner.listeners.retain(|_, tx| !tx.is_closed());
        let addr = if addr.port() == 0 {
            SocketAddr::new(addr.ip(), Self::next_port(&mut inner))
        } else {
            addr
        };
        if inner.listeners.contains_key(&addr) {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("{addr} is in use"),
            ));
        }
        let (tx, rx) = mpsc::unbounded_channel();
        inner.listeners.insert(addr, tx);
        Ok(MemoryListener { addr, incoming: rx })
    }

    fn connect(&self, addr: SocketAddr) -> Result<DuplexStream, DialError> {
        let mut inner = self.lock();
        let peer = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), Self::next_port(&mut inner));
        let refused = || DialError::Connect(format!("{addr}: connection refused"));
        let listener = inner.listeners.get(&addr).ok_or_else(refused)?;
        let (ours, theirs) = tokio::io::duplex(MEMORY_BUFFER);
        listener.send((theirs, peer)).map_err(|_| refused())?;
        Ok(ours)
    }
}

/// A listener on the in-memory network; dropping it frees its address.
#[derive(Debug)]
pub struct MemoryListener {
    addr: SocketAddr,
    incoming: mpsc::UnboundedReceiver<(DuplexStream, SocketAddr)>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn loopback() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 0))
    }

    async fn echo_once(network: Network) -> io::Result<Vec<u8>> {
        let mut listener = network.bind(loopback()).await?;
        let addr = listener.local_addr()?;
        let server = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await?;
            let mut buf = [0u8; 5];
            stream.read_exact(&mut buf).await?;
            stream.write_all(&buf).await?;
            io::Result::Ok(())
        });
        let mut client = network.connect_addr(addr).await.map_err(io::Error::other)?;
        client.write_all(b"hello").await?;
        let mut back = vec![0u8; 5];
        client.read_exact(&mut back).await?;
        server.await.map_err(io::Error::other)??;
        Ok(back)
    }

    #[tokio::test]
    async fn both_networks_carry_bytes_both_ways() -> io::Result<()> {
        assert_eq!(echo_once(Network::Tcp).await?, b"hello");
        assert_eq!(echo_once(Network::memory()).await?, b"hello");
        Ok(())
    }

    #[tokio::test]
    async fn memory_connect_to_an_unbound_address_is_refused() -> io::Result<()> {
        let network = Network::memory();
        let listener = network.bind(loopback()).await?;
        let addr = listener.local_addr()?;
        drop(listener);
        let refused = network.connect_addr(addr).await.err();
        assert!(
            matches!(refused, Some(DialError::Connect(_))),
            "{refused:?}"
        );
        let by_name = network.connect("localhost", addr.port()).await.err();
        assert!(matches!(by_name, Some(DialError::Lookup(_))), "{by_name:?}");
        Ok(())
    }

    #[tokio::test]
    async fn a_host_written_as_in_a_url_is_reached() -> io::Result<()> {
        let network = Network::memory();
        let listener = network
            .bind("[::1]:0".parse().map_err(io::Error::other)?)
            .await?;
        let port = listener.local_addr()?.port();
        assert!(network.connect("[::1]", port).await.is_ok());
        assert!(network.connect("::1", port).await.is_ok());
        Ok(())
    }

    #[tokio::test]
    async fn memory_ports_are_handed_out_in_order() -> io::Result<()> {
        let (a, b) = (Network::memory(), Network::memory());
        for network in [&a, &b] {
            let first = network.bind(loopback()).await?.local_addr()?;
            let second = network.bind(loopback()).await?.local_addr()?;
            assert_eq!(
                (first.port(), second.port()),
                (FIRST_MEMORY_PORT, FIRST_MEMORY_PORT + 1)
            );
        }
        Ok(())
    }
}
