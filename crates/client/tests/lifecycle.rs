#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! What the application asks of a running client, against fake Regions on paused tokio time:
//! close (the session ends and nothing reconnects), resync (the Region is asked again), writes
//! while offline (queued up to the limit), and which ends move a client with fallback.

mod common;

use common::{until, FakeRegion, Kill, Mode};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;
use wsdr_client::{
    Backoff, ClientBuilder, ClientError, ConnectError, DisconnectReason, Event, Fallback,
    OfflineBids, RegionalEndpoint, StaticToken, TokenPlacement,
};
use wsdr_protocol::{AuctionId, Topic};

fn builder(region: &FakeRegion) -> ClientBuilder {
    ClientBuilder::new(region.url.clone())
        .token_provider(Arc::new(StaticToken("t0k3n".into())))
        .subscribe(AuctionId::new("lot-1").unwrap())
        .backoff(Backoff {
            base: Duration::from_millis(100),
            cap: Duration::from_millis(100),
            ..Backoff::default()
        })
        .seed(7)
}

async fn restored(events: &mut UnboundedReceiver<Event>) -> (String, Option<Duration>) {
    until(events, Duration::from_secs(5), |e| match e {
        Event::StateRestored { region, outage, .. } => Some((region.clone(), *outage)),
        _ => None,
    })
    .await
}

/// A client restored on the global name (us-east-1), with us-west-2's own endpoint as its
/// fallback.
async fn on_global_with_west_as_fallback() -> (
    FakeRegion,
    FakeRegion,
    wsdr_client::Client,
    UnboundedReceiver<Event>,
) {
    let global = FakeRegion::start("us-east-1").await;
    let west = FakeRegion::start("us-west-2").await;
    let fallback = Fallback::new(vec![RegionalEndpoint {
        region: "us-west-2".into(),
        url: west.url.clone(),
    }]);
    let (client, mut events) = builder(&global).fallback(fallback).start();
    restored(&mut events).await;
    (global, west, client, events)
}

#[tokio::test(start_paused = true)]
async fn a_closed_client_ends_its_session_and_never_reconnects() {
    let region = FakeRegion::start("us-east-1").await;
    let (client, mut events) = builder(&region).start();
    restored(&mut events).await;
    client.close();
    let reason = until(&mut events, Duration::from_secs(5), |e| match e {
        Event::Disconnected { reason } => Some(reason.clone()),
        _ => None,
    })
    .await;
    assert_eq!(reason, DisconnectReason::ClientClosed);
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(region.handshakes(), 1);
    assert!(
        std::iter::from_fn(|| events.try_recv().ok())
            .all(|e| !matches!(e, Event::Connecting { .. })),
        "no reconnect after close"
    );
    assert_eq!(client.resync(), Err(ClientError::Stopped));
}

#[tokio::test(start_paused = true)]
async fn a_resync_asks_the_region_again_and_restores_without_an_outage() {
    let region = FakeRegion::start("us-east-1").await;
    let (client, mut events) = builder(&region).start();
    restored(&mut events).await;
    let asked = region.get_states();
    client.resync().unwrap();
    assert_eq!(restored(&mut events).await, ("us-east-1".into(), None));
    assert_eq!(region.get_states(), asked + 1);
}

#[tokio::test(start_paused = true)]
async fn writes_while_offline_are_queued_up_to_the_limit() {
    let region = FakeRegion::start("us-east-1").await;
    region.refuse(Some(503));
    let room = Topic::parse("chat:lobby").unwrap();
    let (client, mut events) = builder(&region)
        .join(room.clone())
        .offline_bids(OfflineBids::Queue {
            max: 2,
            max_age: Duration::from_secs(60),
        })
        .start();
    until(&mut events, Duration::from_secs(5), |e| {
        matches!(e, Event::Disconnected { .. }).then_some(())
    })
    .await;
    let text = |t: &str| serde_json::json!({ "text": t });
    client.write(room.clone(), text("one")).await.unwrap();
    client.write(room.clone(), text("two")).await.unwrap();
    assert_eq!(
        client.write(room.clone(), text("three")).await,
        Err(ClientError::QueueFull)
    );
    let (rejecting, _events) = builder(&region)
        .join(room.clone())
        .offline_bids(OfflineBids::Reject)
        .start();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        rejecting.write(room, text("one")).await,
        Err(ClientError::NotConnected)
    );
}

#[tokio::test(start_paused = true)]
async fn clean_closes_never_move_a_client_off_the_global_name_and_broken_sessions_do() {
    let (global, west, _client, mut events) = on_global_with_west_as_fallback().await;
    // A clean close (a deployment's, a Region draining), then a refused connect: one failure,
    // not the two that move the client.
    global.refuse(Some(503));
    global.kill_all(Kill::Code(1000));
    until(&mut events, Duration::from_secs(5), |e| {
        matches!(
            e,
            Event::Disconnected {
                reason: DisconnectReason::ConnectFailed(_)
            }
        )
        .then_some(())
    })
    .await;
    global.refuse(None);
    assert_eq!(restored(&mut events).await.0, "us-east-1");
    assert_eq!(west.handshakes(), 0);
    // A broken session, then a refused connect: two failures, and the other Region's own
    // endpoint.
    global.refuse(Some(503));
    global.kill_all(Kill::Abrupt);
    assert_eq!(restored(&mut events).await.0, "us-west-2");
    assert_eq!(west.handshakes(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_app_closing_sends_a_plain_close_and_a_broken_session_says_going_away() {
    let region = FakeRegion::start("us-east-1").await;
    let (client, mut events) = builder(&region).start();
    restored(&mut events).await;
    region.set_mode(Mode::GatewayErrors);
    until(&mut events, Duration::from_secs(120), |e| {
        matches!(
            e,
            Event::Disconnected {
                reason: DisconnectReason::HeartbeatFailures(_)
            }
        )
        .then_some(())
    })
    .await;
    region.set_mode(Mode::Normal);
    restored(&mut events).await;
    client.close();
    until(&mut events, Duration::from_secs(5), |e| {
        matches!(
            e,
            Event::Disconnected {
                reason: DisconnectReason::ClientClosed
            }
        )
        .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(region.closes(), [Some(1001), None]);
}

#[tokio::test(start_paused = true)]
async fn a_reconnect_waits_out_each_backoff_delay() {
    let region = FakeRegion::start("us-east-1").await;
    region.refuse(Some(503));
    let (_client, mut events) = builder(&region)
        .backoff(Backoff {
            base: Duration::from_secs(2),
            cap: Duration::from_secs(8),
            ..Backoff::default()
        })
        .max_attempts(Some(4))
        .start();
    let mut waits = Vec::new();
    let mut pending: Option<(Duration, Instant)> = None;
    loop {
        let event = tokio::time::timeout(Duration::from_secs(120), events.recv())
            .await
            .expect("the client gives up within two minutes")
            .expect("events");
        match event {
            Event::Reconnecting { delay, .. } => pending = Some((delay, Instant::now())),
            Event::Connecting { .. } => {
                if let Some((delay, since)) = pending.take() {
                    waits.push((delay, since.elapsed()));
                }
            }
            Event::GaveUp { .. } => break,
            _ => {}
        }
    }
    assert!(!waits.is_empty());
    assert!(waits.iter().any(|(delay, _)| !delay.is_zero()), "{waits:?}");
    for (delay, waited) in &waits {
        assert!(waited >= delay, "waited {waited:?} of {delay:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_move_waits_its_delay() {
    let east = FakeRegion::start("us-east-1").await;
    let west = FakeRegion::start("us-west-2").await;
    let regions = vec![
        RegionalEndpoint {
            region: "us-east-1".into(),
            url: east.url.clone(),
        },
        RegionalEndpoint {
            region: "us-west-2".into(),
            url: west.url.clone(),
        },
    ];
    let (_client, mut events) = builder(&east).fallback(Fallback::new(regions)).start();
    restored(&mut events).await;
    let pushed = Instant::now();
    east.push_all(
        r#"{"type":"moveTo","region":"us-east-1","to":"us-west-2","windowMs":0,"afterMs":3000,"reason":"test"}"#,
    );
    until(&mut events, Duration::from_secs(10), |e| {
        matches!(
            e,
            Event::Disconnected {
                reason: DisconnectReason::Moved { .. }
            }
        )
        .then_some(())
    })
    .await;
    let waited = pushed.elapsed();
    assert!(
        waited >= Duration::from_secs(3) && waited < Duration::from_secs(4),
        "{waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_token_offered_as_a_subprotocol_is_not_in_the_url() {
    let region = FakeRegion::start("us-east-1").await;
    let (_client, mut events) = builder(&region)
        .token_placement(TokenPlacement::Subprotocol)
        .start();
    restored(&mut events).await;
    let inner = region.inner.lock().unwrap();
    assert!(
        inner.tokens.iter().all(|q| !q.contains("t0k3n")),
        "{:?}",
        inner.tokens
    );
    assert_eq!(inner.protocols, ["wsdr, t0k3n"]);
}

#[tokio::test(start_paused = true)]
async fn a_connect_gives_up_at_its_own_timeout() {
    // A server that takes the connection and never answers the upgrade.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/prod", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let (_client, mut events) = ClientBuilder::new(url)
        .connect_timeout(Duration::from_secs(2))
        .max_attempts(Some(1))
        .start();
    let reason = until(&mut events, Duration::from_secs(60), |e| match e {
        Event::Disconnected { reason } => Some(reason.clone()),
        _ => None,
    })
    .await;
    assert_eq!(
        reason,
        DisconnectReason::ConnectFailed(ConnectError::Timeout(Duration::from_secs(2)))
    );
}

#[tokio::test(start_paused = true)]
async fn the_first_heartbeat_waits_one_interval() {
    let region = FakeRegion::start("us-east-1").await;
    let (_client, mut events) = builder(&region)
        .heartbeat(Duration::from_secs(30), Duration::from_secs(35))
        .start();
    restored(&mut events).await;
    tokio::time::sleep(Duration::from_secs(29)).await;
    assert_eq!(region.inner.lock().unwrap().heartbeats, 0);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(region.inner.lock().unwrap().heartbeats, 1);
}

#[tokio::test(start_paused = true)]
async fn on_a_fallback_the_global_name_is_probed_after_its_recheck_with_a_token() {
    let (global, _west, _client, mut events) = on_global_with_west_as_fallback().await;
    let connects = global.handshakes();
    global.refuse(Some(503));
    global.kill_all(Kill::Abrupt);
    assert_eq!(restored(&mut events).await.0, "us-west-2");
    tokio::time::sleep(Duration::from_secs(1)).await;
    // The broken session, then one refused connect: the fallback, and no probe yet.
    assert_eq!(global.handshakes(), connects + 1);
    global.refuse(None);
    let queries = global.inner.lock().unwrap().tokens.len();
    tokio::time::sleep(Duration::from_secs(57)).await;
    assert_eq!(
        global.handshakes(),
        connects + 1,
        "no probe before the recheck"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        global.handshakes(),
        connects + 2,
        "one probe at the recheck"
    );
    let inner = global.inner.lock().unwrap();
    assert_eq!(
        inner.tokens.len(),
        queries + 1,
        "the probe's URL has a query"
    );
    assert!(
        inner
            .tokens
            .last()
            .is_some_and(|q| q.contains("token=t0k3n")),
        "{:?}",
        inner.tokens
    );
}
