//! The one global name: a TCP front door that sends each new connection to the Region the
//! resolver answers (Route 53 failover records behind a caching resolver). Established
//! connections stay where they are, as they do with DNS.

use crate::world::health::Resolver;
use crate::world::owner::Owner;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};

/// Start the front door; returns its address.
pub async fn start(
    resolver: Arc<Resolver>,
    targets: [SocketAddr; 2],
    owner: &Owner,
) -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let connections = owner.clone();
    owner.spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let target = targets[resolver.answer()];
            connections.spawn(async move {
                let _ = inbound.set_nodelay(true);
                let Ok(mut outbound) = TcpStream::connect(target).await else {
                    return;
                };
                let _ = outbound.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            });
        }
    });
    Ok(addr)
}
