//! The one global name: a front door that sends each new connection to the Region the
//! resolver answers (Route 53 failover records behind a caching resolver). Established
//! connections stay where they are, as they do with DNS.

use crate::world::health::Resolver;
use crate::world::owner::Owner;
use crate::world::region_id::PerRegion;
use std::net::SocketAddr;
use std::sync::Arc;
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
            let mut inbound = match listener.accept().await {
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
                let Ok(mut outbound) = network.connect_addr(target).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            });
        }
    });
    Ok(addr)
}
