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

#[cfg(test)]
mod tests {
    //! One broadcast's outcomes by target: delivered, gone (its record removed), throttled and
    //! retried up to the limit, failed for good at once; and the retries' waits.
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use crate::memory::MemoryConnections;
    use crate::model::UserId;
    use crate::ports::SeededEntropy;
    use async_trait::async_trait;
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    /// Each target's answers in order (then `Ok`): a scripted `@connections`.
    #[derive(Default)]
    struct Script(Mutex<BTreeMap<String, Vec<Error>>>);

    #[async_trait]
    impl Notifier for Script {
        async fn send(&self, connection: &ConnectionId, _: &[u8]) -> crate::Result<()> {
            let mut script = self.0.lock().unwrap();
            match script.get_mut(connection.as_str()) {
                Some(answers) if !answers.is_empty() => Err(answers.remove(0)),
                _ => Ok(()),
            }
        }
    }

    fn id(name: &str) -> ConnectionId {
        ConnectionId::new(name).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn each_target_is_delivered_gone_retried_to_the_limit_or_failed_at_once() {
        let registry = Arc::new(MemoryConnections::default());
        for name in ["ok", "gone", "slow", "stuck", "broken", "ok2"] {
            registry
                .register(&id(name), &UserId::new("u").unwrap(), 1)
                .await
                .unwrap();
        }
        let throttled = |n: usize| (0..n).map(|_| Error::Throttled("429".into())).collect();
        let script = Script::default();
        {
            let mut answers = script.0.lock().unwrap();
            // Throttled once, then gone: its retry counts too.
            answers.insert(
                "gone".into(),
                vec![Error::Throttled("429".into()), Error::Gone],
            );
            // Throttled as many times as it may be retried: delivered on the last try.
            answers.insert("slow".into(), throttled(4));
            // One more than that: failed after its 4 retries.
            answers.insert("stuck".into(), throttled(5));
            // Not retryable: failed at once.
            answers.insert("broken".into(), vec![Error::Internal("no".into())]);
        }
        let notifier: Arc<dyn Notifier> = Arc::new(script);
        let connections: Arc<dyn Connections> = registry.clone();
        let targets: Vec<ConnectionId> = ["ok", "gone", "slow", "stuck", "broken", "ok2"]
            .into_iter()
            .map(id)
            .collect();
        let config = FanoutConfig {
            concurrency: 2,
            jitter: Arc::new(SeededEntropy::new(1)),
            ..FanoutConfig::default()
        };
        // A broadcast that never stops retrying fails here rather than hanging the test.
        let (report, mut untold) = tokio::time::timeout(
            Duration::from_secs(600),
            broadcast_naming_untold(&notifier, &connections, &targets, b"frame", &config),
        )
        .await
        .expect("the broadcast ends");
        untold.sort();
        assert_eq!(
            report,
            FanoutReport {
                targets: 6,
                delivered: 3,
                gone: 1,
                retries: 9,
                failed: 2,
            }
        );
        assert_eq!(untold, vec![id("broken"), id("stuck")]);
        assert!(
            !registry.contains(&id("gone")),
            "the gone target's record is removed"
        );
        assert!(registry.contains(&id("stuck")), "a failed target's is not");
        let alone = broadcast(&notifier, &connections, &[id("ok")], b"frame", &config).await;
        assert_eq!(alone.targets, 1);
        assert_eq!(alone.delivered, 1);
    }

    #[test]
    fn a_retry_waits_a_random_share_of_a_doubling_ceiling_up_to_its_cap() {
        let entropy = SeededEntropy::new(7);
        let (base, cap) = (Duration::from_millis(50), Duration::from_millis(1_000));
        for attempt in 0..8u32 {
            let ceiling = (50u64 << attempt).min(1_000);
            let draws: Vec<Duration> = (0..200)
                .map(|_| full_jitter(&entropy, base, cap, attempt))
                .collect();
            assert!(draws.iter().all(|d| d.as_millis() as u64 <= ceiling));
            assert!(
                draws.iter().any(|d| d.as_millis() as u64 > ceiling / 2),
                "attempt {attempt}: the upper half is drawn too"
            );
        }
    }

    #[test]
    fn throttling_transient_failures_and_write_conflicts_are_worth_retrying_nothing_else() {
        for retryable in [
            Error::Throttled("t".into()),
            Error::Transient("t".into()),
            Error::WriteConflict("w".into()),
        ] {
            assert!(retryable.is_retryable(), "{retryable}");
        }
        for final_error in [
            Error::Gone,
            Error::NoQuorum("q".into()),
            Error::BadRequest("b".into()),
            Error::Internal("i".into()),
        ] {
            assert!(!final_error.is_retryable(), "{final_error}");
        }
    }

    #[test]
    fn a_connection_record_outlives_api_gateways_longest_connection_by_half_an_hour() {
        let two_hours_and_a_half = Duration::from_secs(2 * 3600 + 30 * 60);
        assert_eq!(
            u128::from(crate::DEFAULT_CONNECTION_TTL_MS),
            two_hours_and_a_half.as_millis()
        );
    }
}
