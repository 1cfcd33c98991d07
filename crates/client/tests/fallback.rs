#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! Client-assisted failover against two fake Regions and a stand-in for DNS, on paused time:
//! fall over without waiting for DNS, adopt the global name once it agrees, return only after
//! a healthy streak, never ping-pong, never leave a healthy Region for one lost probe.

mod common;

use common::{FakeRegion, Kill, Mode};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;
use wsdr_client::{ClientBuilder, Event, Fallback, RegionalEndpoint, StaticToken};
use wsdr_protocol::AuctionId;

struct World {
    east: FakeRegion,
    west: FakeRegion,
    /// What the global name resolves to.
    dns: Arc<Mutex<String>>,
}

impl World {
    async fn start() -> Self {
        let east = FakeRegion::start("us-east-1").await;
        let west = FakeRegion::start("us-west-2").await;
        let dns = Arc::new(Mutex::new(east.url.clone()));
        World { east, west, dns }
    }

    fn point_dns_at(&self, region: &FakeRegion) {
        *self.dns.lock().unwrap() = region.url.clone();
    }

    fn client(&self) -> (wsdr_client::Client, UnboundedReceiver<Event>) {
        let dns = self.dns.clone();
        ClientBuilder::new("ws://global.invalid/prod")
            .url_provider(Arc::new(move || dns.lock().unwrap().clone()))
            .token_provider(Arc::new(StaticToken("t0k3n".into())))
            .subscribe(AuctionId::new("lot-1").unwrap())
            .fallback(Fallback::new(vec![
                RegionalEndpoint {
                    region: "us-east-1".into(),
                    url: self.east.url.clone(),
                },
                RegionalEndpoint {
                    region: "us-west-2".into(),
                    url: self.west.url.clone(),
                },
            ]))
            .seed(11)
            .start()
    }
}

/// Every event within `within` of paused time.
async fn collect(
    events: &mut UnboundedReceiver<Event>,
    within: Duration,
) -> Vec<(Duration, Event)> {
    let start = Instant::now();
    let deadline = start + within;
    let mut seen = Vec::new();
    while let Ok(Some(event)) = tokio::time::timeout_at(deadline, events.recv()).await {
        seen.push((start.elapsed(), event));
    }
    seen
}

fn restores(seen: &[(Duration, Event)]) -> Vec<(Duration, String)> {
    seen.iter()
        .filter_map(|(at, e)| match e {
            Event::StateRestored { region, .. } => Some((*at, region.clone())),
            _ => None,
        })
        .collect()
}

fn moves(seen: &[(Duration, Event)]) -> Vec<(Duration, bool)> {
    seen.iter()
        .filter_map(|(at, e)| match e {
            Event::EndpointChanged { regional, .. } => Some((*at, *regional)),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn degraded_primary_is_left_for_the_secondary_before_dns_moves_then_dns_is_adopted() {
    let world = World::start().await;
    let (_client, mut events) = world.client();
    let first = collect(&mut events, Duration::from_secs(5)).await;
    assert_eq!(restores(&first)[0].1, "us-east-1");

    // The primary answers, but with API Gateway's internal-error frames; DNS stays put.
    world.east.set_mode(Mode::GatewayErrors);
    let seen = collect(&mut events, Duration::from_secs(180)).await;
    let west = restores(&seen)
        .into_iter()
        .find(|(_, r)| r == "us-west-2")
        .expect("the client reached the secondary on its own");
    // Heartbeat rule (<= 60 s), a second failure on the global name, one jittered retry.
    assert!(
        west.0 <= Duration::from_secs(100),
        "restored after {:?}",
        west.0
    );
    assert_eq!(moves(&seen), vec![(moves(&seen)[0].0, true)]);
    assert!(
        !restores(&seen)
            .iter()
            .any(|(at, r)| r == "us-east-1" && *at > west.0),
        "no return to the degraded primary while DNS still points at it"
    );

    // DNS flips: the next probe sees the global name lead to us-west-2 and adopts it without
    // a reconnect.
    world.point_dns_at(&world.west);
    let later = collect(&mut events, Duration::from_secs(130)).await;
    assert_eq!(moves(&later).len(), 1);
    assert!(!moves(&later)[0].1, "back on the global name");
    assert!(
        !later
            .iter()
            .any(|(_, e)| matches!(e, Event::Disconnected { .. })),
        "adopting the global name does not disturb the session"
    );
}

#[tokio::test(start_paused = true)]
async fn healthy_primary_with_one_lost_probe_keeps_the_client() {
    let world = World::start().await;
    let (_client, mut events) = world.client();
    collect(&mut events, Duration::from_secs(5)).await;
    // Silent for less than one heartbeat interval: exactly one heartbeat goes unanswered.
    tokio::time::sleep(Duration::from_secs(20)).await;
    world.east.set_mode(Mode::Silent);
    tokio::time::sleep(Duration::from_secs(20)).await;
    world.east.set_mode(Mode::Normal);
    let seen = collect(&mut events, Duration::from_secs(600)).await;
    assert!(moves(&seen).is_empty(), "moved: {seen:?}");
    assert!(
        !seen
            .iter()
            .any(|(_, e)| matches!(e, Event::Disconnected { .. })),
        "one lost probe is not a failure: {seen:?}"
    );
    assert_eq!(world.west.handshakes(), 0);
}

#[tokio::test(start_paused = true)]
async fn flapping_primary_does_not_make_the_client_ping_pong() {
    let world = World::start().await;
    let (_client, mut events) = world.client();
    collect(&mut events, Duration::from_secs(5)).await;
    // Broken 90 s, fine 60 s, four times; DNS never moves (the worst case for a client).
    let mut seen = Vec::new();
    for _ in 0..4 {
        world.east.set_mode(Mode::GatewayErrors);
        world.east.kill_all(Kill::Abrupt);
        seen.extend(collect(&mut events, Duration::from_secs(90)).await);
        world.east.set_mode(Mode::Normal);
        seen.extend(collect(&mut events, Duration::from_secs(60)).await);
    }
    let during = moves(&seen);
    assert_eq!(
        during.len(),
        1,
        "one fallback and no return while the primary flaps: {during:?}"
    );
    // Then the primary stays healthy: the client returns once, after its streak.
    let after = collect(&mut events, Duration::from_secs(400)).await;
    let returned = moves(&after);
    assert_eq!(returned.len(), 1, "{returned:?}");
    assert!(!returned[0].1);
    // Healthy since 60 s before the loop ended; three probes a minute apart take >= 120 s.
    assert!(
        returned[0].0 + Duration::from_secs(60) >= Duration::from_secs(120),
        "returned after {:?}",
        returned[0].0
    );
    assert_eq!(restores(&after).last().unwrap().1, "us-east-1");
}

#[tokio::test(start_paused = true)]
async fn refused_primary_falls_over_within_seconds() {
    let world = World::start().await;
    let (_client, mut events) = world.client();
    collect(&mut events, Duration::from_secs(5)).await;
    // The primary down: sockets dropped, handshakes refused.
    world.east.refuse(Some(500));
    world.east.kill_all(Kill::Abrupt);
    let seen = collect(&mut events, Duration::from_secs(30)).await;
    let west = restores(&seen)
        .into_iter()
        .find(|(_, r)| r == "us-west-2")
        .expect("on the secondary");
    assert!(west.0 <= Duration::from_secs(8), "after {:?}", west.0);
}

/// Backoff is per endpoint: once the fallback rule moves the client to the other Region's
/// endpoint, its first connect there draws from the first window (at most the 2 s base), not
/// from the doubled window the failing endpoint had earned.
#[tokio::test(start_paused = true)]
async fn the_first_connect_to_a_new_endpoint_draws_from_the_first_window() {
    let world = World::start().await;
    let (_client, mut events) = world.client();
    collect(&mut events, Duration::from_secs(5)).await;
    world.east.refuse(Some(500));
    world.east.kill_all(Kill::Abrupt);
    let seen = collect(&mut events, Duration::from_secs(30)).await;
    let moved_at = seen
        .iter()
        .position(|(_, e)| matches!(e, Event::EndpointChanged { regional: true, .. }))
        .expect("the fallback moved the client");
    let retries_before: Vec<u32> = seen[..moved_at]
        .iter()
        .filter_map(|(_, e)| match e {
            Event::Reconnecting { attempt, .. } => Some(*attempt),
            _ => None,
        })
        .collect();
    // The broken session, then the refused connect (the second failure) moves the client.
    assert_eq!(retries_before, vec![1], "one retry on the primary first");
    let (attempt, delay) = seen[moved_at..]
        .iter()
        .find_map(|(_, e)| match e {
            Event::Reconnecting { attempt, delay } => Some((*attempt, *delay)),
            _ => None,
        })
        .expect("a retry on the new endpoint");
    assert_eq!(attempt, 1, "the backoff restarted for the new endpoint");
    assert!(delay <= Duration::from_secs(2), "{delay:?}");
}
