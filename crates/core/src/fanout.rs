//! Broadcast one frame to many connections with bounded concurrency.
//!
//! API Gateway's `@connections` is one HTTP call per target. A one-by-one loop makes a
//! broadcast to N connections take N round trips; unbounded concurrency trips the
//! management API's rate limit (LimitExceededException, 429). This keeps a fixed number of
//! posts in flight, retries throttled ones with exponential backoff and full jitter, and on
//! 410 Gone removes *that target's* connection record (never the sender's).

use crate::model::ConnectionId;
use crate::ports::{Connections, Entropy, Notifier, Pause, ThreadEntropy, TokioPause};
use crate::Error;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;

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
    /// Where the retry jitter comes from (default: the thread's RNG).
    pub jitter: Arc<dyn Entropy>,
    /// How a retry waits (default: tokio's clock).
    pub pause: Arc<dyn Pause>,
}

impl Default for FanoutConfig {
    fn default() -> Self {
        Self {
            concurrency: 64,
            max_retries: 4,
            retry_base: Duration::from_millis(50),
            retry_cap: Duration::from_secs(1),
            jitter: Arc::new(ThreadEntropy),
            pause: Arc::new(TokioPause),
        }
    }
}

/// What a broadcast did, for logs and metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
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
///
/// Each post is its own task (a window of `concurrency` at a time): the SDK's per-call work
/// (building, signing, parsing) then runs on every core the host has rather than inside the
/// caller's one task. Dropping the returned future aborts the posts still in flight.
pub async fn broadcast(
    notifier: &Arc<dyn Notifier>,
    connections: &Arc<dyn Connections>,
    targets: &[ConnectionId],
    payload: &[u8],
    config: &FanoutConfig,
) -> FanoutReport {
    broadcast_naming_untold(notifier, connections, targets, payload, config)
        .await
        .0
}

/// [`broadcast`], also naming the targets that were not reached (`failed`), so that a
/// caller that must reach everyone (an evacuation) can try them again.
pub async fn broadcast_naming_untold(
    notifier: &Arc<dyn Notifier>,
    connections: &Arc<dyn Connections>,
    targets: &[ConnectionId],
    payload: &[u8],
    config: &FanoutConfig,
) -> (FanoutReport, Vec<ConnectionId>) {
    let mut untold = Vec::new();
    let mut report = FanoutReport {
        targets: targets.len(),
        ..FanoutReport::default()
    };
    let limit = config.concurrency.max(1);
    let payload: Arc<[u8]> = Arc::from(payload);
    let config = Arc::new(config.clone());
    // Which task posts to which target, so that a post that panicked is named too.
    let mut posting: HashMap<tokio::task::Id, ConnectionId> = HashMap::new();
    let spawn = |in_flight: &mut JoinSet<Delivery>,
                 posting: &mut HashMap<tokio::task::Id, ConnectionId>,
                 target: &ConnectionId| {
        let (notifier, connections) = (notifier.clone(), connections.clone());
        let (task_target, payload, config) = (target.clone(), payload.clone(), config.clone());
        let task = in_flight.spawn(async move {
            deliver(
                notifier.as_ref(),
                connections.as_ref(),
                &task_target,
                &payload,
                &config,
            )
            .await
        });
        posting.insert(task.id(), target.clone());
    };
    let mut pending = targets.iter();
    let mut in_flight = JoinSet::new();
    for target in pending.by_ref().take(limit) {
        spawn(&mut in_flight, &mut posting, target);
    }
    while let Some(joined) = in_flight.join_next_with_id().await {
        if let Some(target) = pending.next() {
            spawn(&mut in_flight, &mut posting, target);
        }
        // A post that panicked counts as failed; the broadcast goes on.
        let (id, delivery) = match joined {
            Ok((id, delivery)) => (id, delivery),
            Err(error) => (error.id(), Delivery::Failed { retries: 0 }),
        };
        let target = posting.remove(&id);
        if let (Delivery::Failed { .. }, Some(target)) = (&delivery, target) {
            untold.push(target);
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
    (report, untold)
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
                let delay = full_jitter(
                    config.jitter.as_ref(),
                    config.retry_base,
                    config.retry_cap,
                    retries as u32,
                );
                retries += 1;
                config.pause.pause(delay).await;
            }
            Err(error) => {
                tracing::warn!(connection_id = %target, %error, retries, "post to connection failed");
                return Delivery::Failed { retries };
            }
        }
    }
}

/// A delay drawn uniformly from `[0, min(cap, base * 2^attempt)]`.
pub fn full_jitter(entropy: &dyn Entropy, base: Duration, cap: Duration, attempt: u32) -> Duration {
    let ceiling = base
        .saturating_mul(2u32.saturating_pow(attempt.min(31)))
        .min(cap);
    let ceiling_ms = ceiling.as_millis() as u64;
    Duration::from_millis(entropy.below(ceiling_ms.saturating_add(1)))
}
