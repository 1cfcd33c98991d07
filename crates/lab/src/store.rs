//! The state store behind each emulated Region: the embedded in-memory adapter (default) or
//! DynamoDB Local through the real `wsdr-aws` adapter (`--dynamodb`). Either way the lab's
//! replicator ships each Region's writes to the other with Global Tables' per-item
//! last-writer-wins rule.

use async_trait::async_trait;
use std::sync::Arc;
use tokio::sync::mpsc;
#[cfg(feature = "dynamodb")]
use wsdr_aws::DynamoStateStore;
use wsdr_core::memory::{Change, MemoryStateStore};
use wsdr_core::{BidRecord, StateStore};
use wsdr_protocol::AuctionId;

/// A Region's store as the lab sees it: the port the handler uses, plus replication hooks.
#[async_trait]
pub trait ReplicaStore: StateStore {
    /// This Region's own writes, as replication ships them.
    fn change_feed(&self) -> mpsc::UnboundedReceiver<Change>;
    /// Apply the other Region's write (per-item last writer wins). Errors are for retrying.
    async fn apply_replicated(&self, change: &Change) -> wsdr_core::Result<bool>;
    /// Every item with its stamp, in a deterministic order (the convergence check).
    async fn dump(&self) -> wsdr_core::Result<Vec<Change>>;
    /// Every bid of an auction.
    async fn all_bids(&self, auction: &AuctionId) -> wsdr_core::Result<Vec<BidRecord>>;
}

#[async_trait]
impl ReplicaStore for MemoryStateStore {
    fn change_feed(&self) -> mpsc::UnboundedReceiver<Change> {
        MemoryStateStore::change_feed(self)
    }

    async fn apply_replicated(&self, change: &Change) -> wsdr_core::Result<bool> {
        Ok(MemoryStateStore::apply_replicated(self, change.clone()))
    }

    async fn dump(&self) -> wsdr_core::Result<Vec<Change>> {
        Ok(MemoryStateStore::dump(self))
    }

    async fn all_bids(&self, auction: &AuctionId) -> wsdr_core::Result<Vec<BidRecord>> {
        Ok(MemoryStateStore::all_bids(self, auction))
    }
}

#[cfg(feature = "dynamodb")]
#[async_trait]
impl ReplicaStore for DynamoStateStore {
    fn change_feed(&self) -> mpsc::UnboundedReceiver<Change> {
        DynamoStateStore::change_feed(self)
    }

    async fn apply_replicated(&self, change: &Change) -> wsdr_core::Result<bool> {
        DynamoStateStore::apply_replicated(self, change).await
    }

    async fn dump(&self) -> wsdr_core::Result<Vec<Change>> {
        Ok(DynamoStateStore::dump(self)
            .await?
            .into_iter()
            .map(|(_, _, change)| change)
            .collect())
    }

    async fn all_bids(&self, auction: &AuctionId) -> wsdr_core::Result<Vec<BidRecord>> {
        DynamoStateStore::all_bids(self, auction).await
    }
}

/// Where the lab keeps state.
#[derive(Debug, Clone, Default)]
pub enum StoreKind {
    #[default]
    Memory,
    /// DynamoDB Local at this endpoint: one table per Region, created by the lab.
    Dynamo { endpoint: String },
}

/// The two Regions' stores.
pub async fn open(
    kind: &StoreKind,
    regions: &[String; 2],
) -> anyhow::Result<[Arc<dyn ReplicaStore>; 2]> {
    match kind {
        StoreKind::Memory => {
            let clock = Arc::new(wsdr_core::SystemClock);
            Ok([
                Arc::new(MemoryStateStore::new(&regions[0], clock.clone())),
                Arc::new(MemoryStateStore::new(&regions[1], clock)),
            ])
        }
        #[cfg(not(feature = "dynamodb"))]
        StoreKind::Dynamo { endpoint } => Err(anyhow::anyhow!(
            "DynamoDB Local at {endpoint} asked for, but this build has no DynamoDB support: \
             build the lab with its `dynamodb` feature (the default; `make demo` turns it off)"
        )),
        #[cfg(feature = "dynamodb")]
        StoreKind::Dynamo { endpoint } => {
            // One lab, one set of tables: several labs may share a DynamoDB Local.
            let lab_id = format!("{:08x}", rand::random::<u32>());
            let mut stores: Vec<Arc<dyn ReplicaStore>> = Vec::new();
            for region in regions {
                let client = wsdr_aws::local::dynamo_client(endpoint, region);
                let table = format!("wsdr-lab-{lab_id}-{region}");
                wsdr_aws::schema::create_state_table(&client, &table).await?;
                stores.push(Arc::new(
                    DynamoStateStore::new(client, table).with_change_feed(region.clone()),
                ));
            }
            let [a, b]: [Arc<dyn ReplicaStore>; 2] = stores
                .try_into()
                .map_err(|_| anyhow::anyhow!("two Regions expected"))?;
            Ok([a, b])
        }
    }
}
