//! Evacuating a Region: tell every connection it holds to move (`moveTo`), through that
//! Region's own push path (`@connections` in AWS), paced so that the herd arrives at the
//! destination at the rate its new-connection quota admits.
//!
//! Who runs it decides nothing here: a planned evacuation (maintenance, a game day) runs it
//! after taking the Region out of DNS; an unplanned one after the failover verdict. It needs
//! the evacuated Region's connection list and push path to still work, which holds when the
//! Region's API Gateway works and its handler does not (the reference design's game day: the
//! Lambda throttled). When the Region's table or API is gone, there is nobody to tell: the
//! clients' heartbeat rule and DNS move them instead (docs/PROTOCOL.md, `moveTo`).

use crate::fanout::{broadcast_naming_untold, FanoutConfig, FanoutReport};
use crate::{ConnectionId, Connections, Notifier, Result};
use std::sync::Arc;
use std::time::Duration;
use wsdr_protocol::ServerMessage;

/// What to evacuate, where to, and how fast.
#[derive(Debug, Clone)]
pub struct Evacuation {
    /// The Region being evacuated (named in the frame as the serving Region).
    pub from_region: String,
    pub to_region: String,
    /// The destination's own endpoint, if clients should use it rather than the global name.
    pub endpoint: Option<String>,
    /// Why, for the clients' logs ("maintenance", "failover").
    pub reason: String,
    /// New connections per second the destination admits (API Gateway: 500/s by default).
    pub destination_quota_per_s: f64,
    /// The shortest window, whatever the head count (a small herd still spreads a little).
    pub min_window: Duration,
    /// `@connections` posts per second at most (the push path's own limit).
    pub posts_per_s: f64,
    /// Posts in flight, retries and 410 handling, as for bid fan-out.
    pub fanout: FanoutConfig,
    /// How long, from the start, connections whose posts failed are told again (each round
    /// after `retry_every`): until each is told, gone, or this passes. What is left untold
    /// then is reported ([`EvacuationReport::untold`]), never taken for told.
    pub deadline: Duration,
    /// The wait between two rounds of telling the untold again.
    pub retry_every: Duration,
}

impl Evacuation {
    /// An evacuation with the defaults: the destination's default quota (500/s), a 2 s
    /// minimum window, 2,000 posts per second (a fifth of API Gateway's default account
    /// throttle of 10,000 requests per second, which `@connections` calls share, and under
    /// the 2,500 of the Regions with a lower default).
    pub fn new(from_region: impl Into<String>, to_region: impl Into<String>) -> Self {
        Self {
            from_region: from_region.into(),
            to_region: to_region.into(),
            endpoint: None,
            reason: "evacuation".into(),
            destination_quota_per_s: 500.0,
            min_window: Duration::from_secs(2),
            posts_per_s: 2_000.0,
            fanout: FanoutConfig::default(),
            deadline: Duration::from_secs(60),
            retry_every: Duration::from_secs(1),
        }
    }
}

/// The window over which `connections` clients must spread their reconnects so that they
/// arrive at `quota_per_s` or less: `connections / quota`, at least `min`.
pub fn herd_window(connections: usize, quota_per_s: f64, min: Duration) -> Duration {
    if !(quota_per_s.is_finite() && quota_per_s > 0.0) {
        return min;
    }
    Duration::from_secs_f64(connections as f64 / quota_per_s).max(min)
}

/// How an evacuation cuts its herd: one-second slots of the destination's quota, and the
/// posting pace. Pure, so that a simulation can follow the same schedule as [`evacuate`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SlotPlan {
    /// The herd window: connections / quota, at least the plan's minimum.
    pub window: Duration,
    /// One slot's length (1 s, or the whole window when shorter).
    pub slot: Duration,
    /// Connections per slot.
    pub per_slot: usize,
    /// `@connections` posts per second at most.
    pub posts_per_s: f64,
}

impl SlotPlan {
    pub fn new(connections: usize, plan: &Evacuation) -> Self {
        let window = herd_window(connections, plan.destination_quota_per_s, plan.min_window);
        let slot = Duration::from_secs(1).min(window);
        // Connections per slot: the whole herd spread evenly over the window.
        let per_slot = if window.is_zero() {
            connections.max(1)
        } else {
            ((connections as f64 * slot.as_secs_f64() / window.as_secs_f64()).ceil() as usize)
                .max(1)
        };
        let posts_per_s = if plan.posts_per_s.is_finite() && plan.posts_per_s >= 1.0 {
            plan.posts_per_s
        } else {
            1.0
        };
        Self {
            window,
            slot,
            per_slot,
            posts_per_s,
        }
    }

    /// When slot `index` opens, from the evacuation's start.
    pub fn opens(&self, index: usize) -> Duration {
        self.slot.mul_f64(index as f64)
    }

    /// The `afterMs` and `windowMs` a slot's frame carries when it is posted `elapsed` after
    /// the start, for a slot of `size` connections.
    pub fn frame_timing(
        &self,
        index: usize,
        size: usize,
        elapsed: Duration,
    ) -> (Duration, Duration) {
        let delay = self.opens(index).saturating_sub(elapsed);
        let share = size as f64 / self.per_slot as f64;
        (delay, self.slot.mul_f64(share))
    }

    /// When the posts of the first `posted` connections are done, at the posting pace.
    pub fn posted_by(&self, posted: usize) -> Duration {
        Duration::from_secs_f64(posted as f64 / self.posts_per_s)
    }
}

/// What an evacuation did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct EvacuationReport {
    /// Live connections listed in the evacuated Region.
    pub connections: usize,
    /// The herd window: from the first frame to the last slot's close, ms.
    pub window_ms: u64,
    /// Slots the herd was split into (one second's worth of the quota each).
    pub slots: usize,
    /// The posts over every round, as a fan-out reports them: `delivered` and `gone` count
    /// connections, `failed` those still untold at the end, `retries` every retried post.
    pub posts: FanoutReport,
    /// Connections never told to move (their posts failed until the deadline): an
    /// evacuation with any is incomplete.
    pub untold: usize,
    /// Rounds of telling the untold again after the first pass.
    pub rounds: usize,
    /// Every connection was told or is gone.
    pub complete: bool,
}

/// The `moveTo` frame an evacuation sends to one slot: wait `delay`, then reconnect at a
/// uniformly random moment within `window`.
pub fn move_frame(plan: &Evacuation, delay: Duration, window: Duration) -> String {
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    ServerMessage::MoveTo {
        region: plan.from_region.clone(),
        to: plan.to_region.clone(),
        endpoint: plan.endpoint.clone(),
        window_ms: ms(window),
        after_ms: ms(delay),
        reason: plan.reason.clone(),
    }
    .to_json()
}

/// List the Region's connections and tell each to move.
///
/// The herd is cut into one-second slots of `quota` connections each (the last one
/// shorter); slot `i` is told to wait until second `i` of the evacuation and then reconnect
/// uniformly within its second. Frames go out faster than the quota admits (2,000 posts per
/// second against 500 connections), so every client hears of the move early, yet arrivals
/// follow the quota exactly instead of piling up at the end of the window, as they would if
/// every client drew its moment from the whole window counted from its own frame. A
/// connection that is gone (410) is removed, as in fan-out.
///
/// A connection whose posts all failed (a throttled push path) is told again every
/// `retry_every`, its frame still naming its own slot, until it is told, gone, or the
/// plan's `deadline` passes; the report counts what is left ([`EvacuationReport::untold`]).
pub async fn evacuate(
    connections: &Arc<dyn Connections>,
    notifier: &Arc<dyn Notifier>,
    plan: &Evacuation,
    now_ms: u64,
) -> Result<EvacuationReport> {
    let targets = connections.all(now_ms).await?;
    let slots_plan = SlotPlan::new(targets.len(), plan);
    let started = tokio::time::Instant::now();
    let teller = Teller {
        connections,
        notifier,
        plan,
        slots: slots_plan,
        started,
    };
    let mut posts = FanoutReport {
        targets: targets.len(),
        ..FanoutReport::default()
    };
    // Untold connections with the slot each belongs to.
    let mut untold: Vec<(usize, ConnectionId)> = Vec::new();
    let mut posted = 0usize;
    let mut slots = 0usize;
    let mut groups = targets.chunks(slots_plan.per_slot).enumerate().peekable();
    while let Some((index, group)) = groups.next() {
        let failed = teller.tell(index, group, &mut posts).await;
        untold.extend(failed.into_iter().map(|c| (index, c)));
        posted += group.len();
        slots += 1;
        if groups.peek().is_some() {
            // The push path's own pace: `posts_per_s` at most.
            tokio::time::sleep_until(started + slots_plan.posted_by(posted)).await;
        }
    }
    let mut rounds = 0usize;
    while !untold.is_empty() && started.elapsed() + plan.retry_every <= plan.deadline {
        tokio::time::sleep(plan.retry_every).await;
        rounds += 1;
        let mut still = Vec::new();
        // Group by slot again: one frame per slot, each naming its slot's own timing.
        let mut by_slot: Vec<(usize, Vec<ConnectionId>)> = Vec::new();
        for (index, connection) in untold.drain(..) {
            match by_slot.last_mut() {
                Some((last, group)) if *last == index => group.push(connection),
                _ => by_slot.push((index, vec![connection])),
            }
        }
        for (index, group) in by_slot {
            let failed = teller.tell(index, &group, &mut posts).await;
            still.extend(failed.into_iter().map(|c| (index, c)));
        }
        untold = still;
    }
    if !untold.is_empty() {
        tracing::error!(
            untold = untold.len(),
            connections = targets.len(),
            rounds,
            "evacuation incomplete: connections never told to move before the deadline"
        );
    }
    posts.failed = untold.len();
    Ok(EvacuationReport {
        connections: targets.len(),
        window_ms: u64::try_from(slots_plan.window.as_millis()).unwrap_or(u64::MAX),
        slots,
        posts,
        untold: untold.len(),
        rounds,
        complete: untold.is_empty(),
    })
}

/// What telling one group needs: the push path, the plan, its slots, the start.
struct Teller<'a> {
    connections: &'a Arc<dyn Connections>,
    notifier: &'a Arc<dyn Notifier>,
    plan: &'a Evacuation,
    slots: SlotPlan,
    started: tokio::time::Instant,
}

impl Teller<'_> {
    /// Post slot `index`'s frame to `group` (timed from the start), add what happened to
    /// `posts` (delivered, gone, retries; the caller counts what stays untold), and return
    /// the connections not reached.
    async fn tell(
        &self,
        index: usize,
        group: &[ConnectionId],
        posts: &mut FanoutReport,
    ) -> Vec<ConnectionId> {
        let (delay, window) = self
            .slots
            .frame_timing(index, group.len(), self.started.elapsed());
        let frame = move_frame(self.plan, delay, window);
        let (report, untold) = broadcast_naming_untold(
            self.notifier,
            self.connections,
            group,
            frame.as_bytes(),
            &self.plan.fanout,
        )
        .await;
        posts.delivered += report.delivered;
        posts.gone += report.gone;
        posts.retries += report.retries;
        untold
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{MemoryConnections, RecordingNotifier};
    use crate::{ConnectionId, UserId};

    #[test]
    fn the_herd_window_is_the_head_count_over_the_quota() {
        let min = Duration::from_secs(2);
        assert_eq!(herd_window(10_000, 500.0, min), Duration::from_secs(20));
        assert_eq!(
            herd_window(100, 500.0, min),
            min,
            "a small herd: the minimum"
        );
        assert_eq!(
            herd_window(100, 0.0, min),
            min,
            "no quota known: the minimum"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn every_live_connection_is_told_once_paced_per_second() {
        let registry = Arc::new(MemoryConnections::default());
        let user = UserId::new("u").expect("user");
        for i in 0..25 {
            registry
                .register(
                    &ConnectionId::new(format!("c{i}")).expect("id"),
                    &user,
                    1_000,
                )
                .await
                .expect("register");
        }
        let notifier = Arc::new(RecordingNotifier::default());
        let connections: Arc<dyn Connections> = registry.clone();
        let push: Arc<dyn Notifier> = notifier.clone();
        let plan = Evacuation {
            posts_per_s: 10.0,
            destination_quota_per_s: 5.0,
            ..Evacuation::new("us-east-1", "us-west-2")
        };
        let started = tokio::time::Instant::now();
        let report = bounded(evacuate(&connections, &push, &plan, 2_000))
            .await
            .expect("evacuated");
        assert_eq!(report.connections, 25);
        assert_eq!(report.posts.delivered, 25);
        assert_eq!(report.posts.targets, 25);
        // Everyone told in the first pass: no round of telling again.
        assert_eq!(report.rounds, 0);
        assert!(report.complete);
        // 25 connections at 5 per second of quota: a 5 s window.
        assert_eq!(report.window_ms, 5_000);
        // Five slots of five, posted at 10 per second: the last goes out after 2 s.
        assert_eq!(report.slots, 5);
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        let sent = notifier.sent();
        assert_eq!(sent.len(), 25);
        let frames: Vec<serde_json::Value> = sent
            .iter()
            .map(|(_, bytes)| serde_json::from_slice(bytes).expect("a JSON frame"))
            .collect();
        let frame = &frames[0];
        assert_eq!(frame["type"], "moveTo");
        assert_eq!(frame["region"], "us-east-1");
        assert_eq!(frame["to"], "us-west-2");
        assert_eq!(frame["windowMs"], 1_000);
        assert!(
            frame.get("afterMs").is_none(),
            "the first slot opens at once"
        );
        assert!(frame.get("endpoint").is_none());
        // Slot i (posted at i/2 s) opens at second i of the evacuation: each client's
        // earliest moment, post time + delay, is the slot's start, so arrivals follow the
        // quota (5 per second) whatever the posting pace.
        for (i, frame) in frames.iter().enumerate() {
            let slot = (i / 5) as u64;
            let posted_ms = slot * 500;
            let after = frame["afterMs"].as_u64().unwrap_or(0);
            assert_eq!(posted_ms + after, slot * 1_000, "frame {i}: {frame}");
            assert_eq!(frame["windowMs"], 1_000);
        }
    }

    /// An evacuation that never ends (a post retried forever, a round past its deadline)
    /// fails the test in paused time instead of hanging it.
    async fn bounded<T>(evacuation: impl std::future::Future<Output = T>) -> T {
        tokio::time::timeout(Duration::from_secs(3_600), evacuation)
            .await
            .expect("the evacuation ends")
    }

    async fn registry_of(n: usize) -> (Arc<MemoryConnections>, Vec<ConnectionId>) {
        let registry = Arc::new(MemoryConnections::default());
        let user = UserId::new("u").expect("user");
        let mut ids = Vec::new();
        for i in 0..n {
            let id = ConnectionId::new(format!("c{i}")).expect("id");
            registry
                .register(&id, &user, 1_000)
                .await
                .expect("register");
            ids.push(id);
        }
        (registry, ids)
    }

    #[tokio::test(start_paused = true)]
    async fn a_throttled_push_path_is_tried_again_until_every_connection_is_told() {
        let (registry, ids) = registry_of(96).await;
        let notifier = Arc::new(RecordingNotifier::default());
        // Half the connections throttled for more posts than one broadcast retries (4).
        for id in ids.iter().step_by(2) {
            notifier.throttle(id, 12);
        }
        let connections: Arc<dyn Connections> = registry.clone();
        let push: Arc<dyn Notifier> = notifier.clone();
        let plan = Evacuation::new("us-east-1", "us-west-2");
        let report = bounded(evacuate(&connections, &push, &plan, 2_000))
            .await
            .expect("evacuated");
        assert!(report.complete, "{report:?}");
        assert_eq!(report.untold, 0);
        assert_eq!(report.posts.delivered, 96);
        assert_eq!(report.posts.failed, 0);
        assert!(report.rounds >= 2, "{report:?}");
        let told: std::collections::BTreeSet<_> =
            notifier.sent().into_iter().map(|(c, _)| c).collect();
        assert_eq!(told.len(), 96, "every connection heard of the move");
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_never_reached_by_the_deadline_makes_the_evacuation_incomplete() {
        let (registry, ids) = registry_of(10).await;
        let notifier = Arc::new(RecordingNotifier::default());
        notifier.throttle(&ids[3], u32::MAX);
        let connections: Arc<dyn Connections> = registry.clone();
        let push: Arc<dyn Notifier> = notifier.clone();
        let plan = Evacuation {
            deadline: Duration::from_secs(20),
            ..Evacuation::new("us-east-1", "us-west-2")
        };
        let started = tokio::time::Instant::now();
        let report = bounded(evacuate(&connections, &push, &plan, 2_000))
            .await
            .expect("evacuated");
        assert!(!report.complete, "{report:?}");
        assert_eq!(report.untold, 1);
        assert_eq!(report.posts.failed, 1);
        assert_eq!(report.posts.delivered, 9);
        assert!(
            started.elapsed() <= plan.deadline + Duration::from_secs(10),
            "tries stop near the deadline: {:?}",
            started.elapsed()
        );
        assert!(report.rounds >= 10, "it kept trying: {report:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_told_again_connection_still_gets_its_own_slot() {
        // 10 connections, 5 per second: the second slot's member, told again after its
        // slot opened, is told to move at once within its slot's second.
        let (registry, ids) = registry_of(10).await;
        let notifier = Arc::new(RecordingNotifier::default());
        notifier.throttle(&ids[7], 6);
        let connections: Arc<dyn Connections> = registry.clone();
        let push: Arc<dyn Notifier> = notifier.clone();
        let plan = Evacuation {
            destination_quota_per_s: 5.0,
            ..Evacuation::new("us-east-1", "us-west-2")
        };
        let report = bounded(evacuate(&connections, &push, &plan, 2_000))
            .await
            .expect("evacuated");
        assert!(report.complete);
        let (_, frame) = notifier
            .sent()
            .into_iter()
            .find(|(c, _)| c == &ids[7])
            .expect("told at last");
        let frame: serde_json::Value = serde_json::from_slice(&frame).expect("json");
        assert!(
            frame.get("afterMs").is_none(),
            "its slot has opened: {frame}"
        );
        assert!(frame["windowMs"].as_u64().unwrap_or(0) <= 1_000, "{frame}");
    }

    #[tokio::test(start_paused = true)]
    async fn connections_told_again_in_one_round_each_keep_their_own_slot_and_gone_ones_go() {
        // 30 connections at 5 per second: six slots, the last opening at 5 s. The first
        // slot's first connection and the last slot's third are throttled once more than a
        // broadcast retries (4): both are told again a second later, in one round.
        let (registry, ids) = registry_of(30).await;
        let notifier = Arc::new(RecordingNotifier::default());
        notifier.throttle(&ids[0], 5);
        notifier.throttle(&ids[1], 5);
        notifier.throttle(&ids[27], 5);
        notifier.mark_gone(&ids[10]);
        let connections: Arc<dyn Connections> = registry.clone();
        let push: Arc<dyn Notifier> = notifier.clone();
        let plan = Evacuation {
            destination_quota_per_s: 5.0,
            ..Evacuation::new("us-east-1", "us-west-2")
        };
        let report = bounded(evacuate(&connections, &push, &plan, 2_000))
            .await
            .expect("evacuated");
        assert!(report.complete, "{report:?}");
        assert_eq!(report.rounds, 1);
        assert_eq!(report.posts.gone, 1);
        assert_eq!(report.posts.delivered, 29);
        assert_eq!(
            report.posts.retries, 12,
            "four retries each in the first pass"
        );
        assert!(
            !registry.contains(&ids[10]),
            "the gone connection's record is removed"
        );
        let frame_of = |id: &ConnectionId| -> serde_json::Value {
            let (_, frame) = notifier
                .sent()
                .into_iter()
                .find(|(c, _)| c == id)
                .expect("told");
            serde_json::from_slice(&frame).expect("json")
        };
        // Told again after the first pass's retries and a second: the first slot has
        // opened, the last (at 5 s) has not: its frame waits for it.
        assert!(frame_of(&ids[0]).get("afterMs").is_none());
        // The first slot's two are told together: their window is two fifths of its second.
        assert_eq!(frame_of(&ids[0])["windowMs"], 400);
        assert_eq!(frame_of(&ids[1])["windowMs"], 400);
        let last = frame_of(&ids[27])["afterMs"].as_u64().unwrap_or(0);
        assert!(
            (1_000..5_000).contains(&last),
            "its own slot, at 5 s: {last}"
        );
    }
}
