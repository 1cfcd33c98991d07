//! What every kind of simulated user (drills, chaos, load) shares: tokens from the lab's
//! issuer, the lab's clients with every timer scaled, the Regions' own endpoints, and a
//! bounded wait.

use crate::world::lab::Lab;
use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use wsdr_client::{Backoff, ClientBuilder, Fallback, OfflineBids, RegionalEndpoint, TokenProvider};
use wsdr_protocol::AuctionId;

/// A fresh lab token for `sub` at every connect.
#[derive(Debug)]
pub struct LabTokens {
    pub lab: Arc<Lab>,
    pub sub: String,
}

impl TokenProvider for LabTokens {
    fn token(&self, _refresh: bool) -> BoxFuture<'_, Result<String, String>> {
        Box::pin(async move { Ok(self.lab.user_token(&self.sub)) })
    }
}

/// A simulated user's client through the front door, with the reference timers divided by
/// the lab's time scale; with `fallback`, it also knows the Regions' own endpoints.
pub fn user_client(
    lab: &Arc<Lab>,
    sub: &str,
    auction: &AuctionId,
    seed: u64,
    fallback: bool,
) -> ClientBuilder {
    let scale = lab.config.scale;
    let mut builder = ClientBuilder::new(lab.front_door_url())
        .token_provider(Arc::new(LabTokens {
            lab: lab.clone(),
            sub: sub.to_owned(),
        }))
        .subscribe(auction.clone())
        .heartbeat(scale.secs(30.0), scale.secs(35.0))
        .backoff(Backoff::default().scaled(scale.factor()))
        .stable_after(scale.secs(30.0))
        .connect_timeout(scale.secs(10.0).max(Duration::from_millis(500)))
        .offline_bids(OfflineBids::Queue {
            max: 4,
            max_age: scale.secs(30.0),
        })
        .seed(seed);
    if fallback {
        builder = builder.fallback(Fallback::new(regional_endpoints(lab)).scaled(scale.factor()));
    }
    builder
}

/// Each Region's own endpoint, in preference order.
pub fn regional_endpoints(lab: &Lab) -> Vec<RegionalEndpoint> {
    lab.config
        .regions
        .iter()
        .zip(&lab.regions)
        .map(|(name, region)| RegionalEndpoint {
            region: name.clone(),
            url: region.url(),
        })
        .collect()
}

/// Poll `check` every 5 ms until it holds or `within` passes; its last answer.
///
/// `within` counts only time the lab was given: when the process is starved of CPU (a loaded
/// CI machine, steal time), a lab second at a high time scale passes without the lab running,
/// and a liveness deadline would measure the machine, not the system. So each poll that wakes
/// late adds its lateness back to the deadline, up to ten times `within` in all.
pub async fn wait_for(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    const POLL: Duration = Duration::from_millis(5);
    // Timer slack on a healthy machine; lateness beyond it is time the lab did not get.
    const SLACK: Duration = Duration::from_millis(2);
    let start = Instant::now();
    let hard_stop = start + within.saturating_mul(10);
    let mut deadline = start + within;
    loop {
        if check() {
            return true;
        }
        let polled = Instant::now();
        if polled >= deadline {
            return false;
        }
        tokio::time::sleep(POLL).await;
        let late = Instant::now().saturating_duration_since(polled + POLL);
        if late > SLACK {
            deadline = (deadline + late).min(hard_stop);
        }
    }
}
