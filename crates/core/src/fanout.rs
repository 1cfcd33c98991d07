//! Broadcast one frame to many connections with bounded concurrency.
//!
//! API Gateway's `@connections` is one HTTP call per target. A one-by-one loop makes a
//! broadcast to N connections take N round trips; unbounded concurrency trips the
//! management API's rate limit (LimitExceededException, 429). This keeps a fixed number of
//! posts in flight, retries throttled ones with exponential backoff and full jitter, and on
//! 410 Gone removes *that target's* connection record (never the sender's).

use crate::model::ConnectionId;
use crate::ports::{Connections, Notifier};
use crate::Error;
use futures::stream::{FuturesUnordered, StreamExt};
use rand::Rng;
use std::time::Duration;

/// How a broadcast behaves.
#[derive(Debug, Clone)]
pub struct FanoutConfig {
    /// Posts in flight at once (default 64).
    pub concurrency: usize,
    /// Retries of one throttled or transiently failed post (default 4).
    pub max_retries: u32,
    /// First retry waits up to this long (default 50 ms); doubles per retry (full jitter).
    pub retry_base: Duration,
    /// Upper bound of one retry wait (default 1 s).
    pub retry_cap: Duration,
}

impl Default for FanoutConfig {
    fn default() -> Self {
        Self {
            concurrency: 64,
            max_retries: 4,
            retry_base: Duration::from_millis(50),
            retry_cap: Duration::from_secs(1),
        }
    }
}

/// What a broadcast did, for logs and metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FanoutReport {
    pub targets: usize,
    pub delivered: usize,
    /// Targets that answered 410 and whose records were removed.
    pub gone: usize,
    /// Retries made after throttling or transient failures.
    pub retries: usize,
    /// Targets not reached after all retries, or that failed for good.
    pub failed: usize,
}

enum Delivery {
    Delivered { retries: usize },
    Gone { retries: usize },
    Failed { retries: usize },
}

/// Send `payload` to every target. Never fails as a whole: per-target failures are counted.
pub async fn broadcast(
    notifier: &dyn Notifier,
    connections: &dyn Connections,
    targets: &[ConnectionId],
    payload: &[u8],
    config: &FanoutConfig,
) -> FanoutReport {
    let mut report = FanoutReport {
        targets: targets.len(),
        ..FanoutReport::default()
    };
    // A hand-rolled window over FuturesUnordered rather than `stream::iter().map()
    // .buffer_unordered()`: the closure form makes the whole future fail the `Send` check
    // for callers that spawn it (a known higher-ranked lifetime limitation of rustc).
    let limit = config.concurrency.max(1);
    let mut pending = targets.iter();
    let mut in_flight = FuturesUnordered::new();
    for target in pending.by_ref().take(limit) {
        in_flight.push(deliver(notifier, connections, target, payload, config));
    }
    while let Some(delivery) = in_flight.next().await {
        if let Some(target) = pending.next() {
            in_flight.push(deliver(notifier, connections, target, payload, config));
        }
        match delivery {
            Delivery::Delivered { retries } => {
                report.delivered += 1;
                report.retries += retries;
            }
            Delivery::Gone { retries } => {
                report.gone += 1;
                report.retries += retries;
            }
            Delivery::Failed { retries } => {
                report.failed += 1;
                report.retries += retries;
            }
        }
    }
    report
}

async fn deliver(
    notifier: &dyn Notifier,
    connections: &dyn Connections,
    target: &ConnectionId,
    payload: &[u8],
    config: &FanoutConfig,
) -> Delivery {
    let mut retries = 0usize;
    loop {
        match notifier.send(target, payload).await {
            Ok(()) => return Delivery::Delivered { retries },
            Err(Error::Gone) => {
                if let Err(error) = connections.remove(target).await {
                    tracing::warn!(connection_id = %target, %error, "could not remove gone connection");
                }
                return Delivery::Gone { retries };
            }
            Err(error) if error.is_retryable() && retries < config.max_retries as usize => {
                let delay = full_jitter(config.retry_base, config.retry_cap, retries as u32);
                retries += 1;
                tokio::time::sleep(delay).await;
            }
            Err(error) => {
                tracing::warn!(connection_id = %target, %error, retries, "post to connection failed");
                return Delivery::Failed { retries };
            }
        }
    }
}

/// A delay drawn uniformly from `[0, min(cap, base * 2^attempt)]`.
pub fn full_jitter(base: Duration, cap: Duration, attempt: u32) -> Duration {
    let ceiling = base
        .saturating_mul(2u32.saturating_pow(attempt.min(31)))
        .min(cap);
    let ceiling_ms = ceiling.as_millis() as u64;
    Duration::from_millis(rand::rng().random_range(0..=ceiling_ms))
}
