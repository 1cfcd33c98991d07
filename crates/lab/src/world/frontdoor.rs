//! The one global name: a front door that sends each new connection to the Region the
//! resolver answers (Route 53 failover records behind a caching resolver). Established
//! connections stay where they are, as they do with DNS.

use crate::world::health::Resolver;
use crate::world::owner::Owner;
use crate::world::region_id::PerRegion;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use wsdr_net::Network;

/// Start the front door on `network`; returns its address.
pub async fn start(
    resolver: Arc<Resolver>,
    targets: PerRegion<SocketAddr>,
    owner: &Owner,
    network: &Network,
) -> anyhow::Result<SocketAddr> {
    let mut listener = network.bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
    let addr = listener.local_addr()?;
    let connections = owner.clone();
    let network = network.clone();
    owner.spawn(async move {
        loop {
            let inbound = match listener.accept().await {
                Ok((inbound, _)) => inbound,
                Err(error) => {
                    // EMFILE and the like pass: keep accepting, as the Regions' listeners do
                    // (the owner ends this task when the world stops).
                    tracing::debug!(%error, "front door: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                }
            };
            let target = targets[resolver.answer()];
            let network = network.clone();
            connections.spawn(async move {
                let Ok(outbound) = network.connect_addr(target).await else {
                    return;
                };
                splice(inbound, outbound).await;
            });
        }
    });
    Ok(addr)
}

/// How long a connection's Region side may keep it open after its client ended it.
const LINGER: Duration = Duration::from_secs(2);

/// Bytes both ways until the Region ends the connection, or until [`LINGER`] after the client
/// did. A plain two-way copy waits for both ends to close: a client gone while its Region
/// could not accept (every descriptor in use) left both legs open for ever, so the process
/// never got its descriptors back and the global name stopped answering anyone.
async fn splice(inbound: wsdr_net::Stream, outbound: wsdr_net::Stream) {
    use tokio::io::AsyncWriteExt;
    let (mut client_reads, mut client_writes) = tokio::io::split(inbound);
    let (mut region_reads, mut region_writes) = tokio::io::split(outbound);
    let up = async {
        let _ = tokio::io::copy(&mut client_reads, &mut region_writes).await;
        let _ = region_writes.shutdown().await;
    };
    let down = async {
        let _ = tokio::io::copy(&mut region_reads, &mut client_writes).await;
        let _ = client_writes.shutdown().await;
    };
    tokio::pin!(up, down);
    tokio::select! {
        () = &mut down => {}
        () = &mut up => {
            let _ = tokio::time::timeout(LINGER, down).await;
        }
    }
}
