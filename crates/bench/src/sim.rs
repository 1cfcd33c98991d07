//! The reconnection storm without sockets, for populations one machine cannot hold: every
//! client runs the clients' own policy code (`wsdr_client::Backoff::delay_for`,
//! `wsdr_client::moves::decide`) and an evacuation follows the evacuator's own schedule
//! (`wsdr_core::SlotPlan`), in virtual time, against the destination's new-connection quota as
//! the lab enforces it (a token bucket of one second's worth, starting full).
//!
//! What it leaves out: sockets, CPU and the handshake itself (a connection that gets a token
//! is restored `RESTORE_LATENCY` later). At 10,000 users the socket run measures the same storm
//! with all of that in, which is how the simulation is checked (`make bench`, section 2).

use crate::storm::Policy;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

/// From a token to the user's state restored: the upgrade and one `getState` round trip.
const RESTORE_LATENCY: f64 = 0.010;

/// The outcome, in the socket run's terms.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SimResult {
    pub policy: Policy,
    pub users: usize,
    pub quota_per_s: f64,
    pub floor_s: f64,
    pub p50_s: f64,
    pub p99_s: f64,
    pub p100_s: f64,
    pub throttled_429: u64,
}

/// A client's next handshake, ordered by time (virtual seconds, as integer nanoseconds so the
/// heap orders exactly).
type Due = Reverse<(u64, usize)>;

fn nanos(seconds: f64) -> u64 {
    (seconds * 1e9).round().max(0.0) as u64
}

/// N users on a primary that is lost at t = 0 (or evacuated from t = 0) while the name points
/// at the secondary, whose quota is `quota_per_s`.
pub fn run(users: usize, policy: Policy, quota_per_s: f64, seed: u64) -> SimResult {
    let backoff = policy.backoff();
    let mut rng = SmallRng::seed_from_u64(seed);
    // The hint the primary advertises (Advertised): its census over the quota.
    let hint = (policy == Policy::Advertised)
        .then(|| wsdr_core::herd_window(users, quota_per_s, Duration::ZERO));
    let mut attempts = vec![0u32; users];
    let mut due: BinaryHeap<Due> = BinaryHeap::with_capacity(users);
    if policy == Policy::Evacuated {
        let plan = wsdr_core::Evacuation {
            destination_quota_per_s: quota_per_s,
            ..wsdr_core::Evacuation::new("us-east-1", "us-west-2")
        };
        let slots = wsdr_core::SlotPlan::new(users, &plan);
        for user in 0..users {
            let index = user / slots.per_slot;
            let size = slots.per_slot.min(users - index * slots.per_slot);
            // The slot's frames go out when the posts before them are done.
            let posted_at = slots.posted_by(index * slots.per_slot);
            let (delay, window) = slots.frame_timing(index, size, posted_at);
            let request = wsdr_client::moves::MoveRequest {
                serving_region: "us-east-1",
                to: "us-west-2",
                endpoint: None,
                delay,
                window,
            };
            let after = wsdr_client::moves::decide(request, "wss://global", &[], &mut rng)
                .map(|order| order.after)
                .unwrap_or_default();
            // A moved client reconnects at once (attempt 0) when its moment comes.
            due.push(Reverse((nanos((posted_at + after).as_secs_f64()), user)));
        }
    } else {
        for (user, attempt) in attempts.iter_mut().enumerate() {
            let delay = backoff.delay_for(0, false, hint, &mut rng);
            *attempt = 1;
            due.push(Reverse((nanos(delay.as_secs_f64()), user)));
        }
    }
    // The lab's own quota rule (a full bucket at the outage).
    let mut bucket = wsdr_lab::world::quota::QuotaBucket::full(quota_per_s, 0.0);
    let mut restored: Vec<f64> = Vec::with_capacity(users);
    let mut throttled = 0u64;
    while let Some(Reverse((at, user))) = due.pop() {
        let now = at as f64 / 1e9;
        if bucket.take(now, quota_per_s, quota_per_s) {
            restored.push(now + RESTORE_LATENCY);
            continue;
        }
        // 429: the client's own rule for a refused handshake.
        throttled += 1;
        let attempt = attempts[user];
        let delay = backoff.delay_for(attempt, true, hint, &mut rng);
        attempts[user] = attempt.saturating_add(1);
        due.push(Reverse((nanos(now + delay.as_secs_f64()), user)));
    }
    restored.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let rank = ((q * users as f64).ceil() as usize).clamp(1, users.max(1));
        restored.get(rank - 1).copied().unwrap_or(f64::INFINITY)
    };
    SimResult {
        policy,
        users,
        quota_per_s,
        floor_s: users as f64 / quota_per_s,
        p50_s: at(0.50),
        p99_s: at(0.99),
        p100_s: at(1.0),
        throttled_429: throttled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nobody_beats_the_quota_and_everybody_gets_in() {
        for policy in [
            Policy::Reference,
            Policy::Wsdr,
            Policy::NoJitter,
            Policy::Advertised,
            Policy::Evacuated,
        ] {
            let r = run(5_000, policy, 500.0, 1);
            // One second of burst, then 500 per second: 5,000 need at least 9 s.
            assert!(r.p100_s >= 9.0, "{policy:?}: {r:?}");
            assert!(r.p100_s.is_finite(), "{policy:?}: {r:?}");
            assert!(
                r.p50_s <= r.p99_s && r.p99_s <= r.p100_s,
                "{policy:?}: {r:?}"
            );
        }
    }

    #[test]
    fn the_advertised_window_and_the_slots_spare_the_quota() {
        let guess = run(10_000, Policy::Wsdr, 500.0, 2);
        let hint = run(10_000, Policy::Advertised, 500.0, 2);
        let moved = run(10_000, Policy::Evacuated, 500.0, 2);
        assert!(guess.throttled_429 > 5_000, "{guess:?}");
        assert!(hint.throttled_429 < 500, "{hint:?}");
        assert!(moved.throttled_429 < 500, "{moved:?}");
        assert!(hint.p99_s <= 1.05 * hint.floor_s, "{hint:?}");
        assert!(moved.p99_s <= 1.05 * moved.floor_s, "{moved:?}");
    }
}
