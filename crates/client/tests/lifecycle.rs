#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! What the application asks of a running client, against fake Regions on paused tokio time:
//! close (the session ends and nothing reconnects), resync (the Region is asked again), writes
//! while offline (queued up to the limit), and which ends move a client with fallback.

mod common;

use common::{until, FakeRegion, Kill};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;
use wsdr_client::{
    Backoff, ClientBuilder, ClientError, DisconnectReason, Event, Fallback, OfflineBids,
    RegionalEndpoint, StaticToken,
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
    let global = FakeRegion::start("us-east-1").await;
    let west = FakeRegion::start("us-west-2").await;
    let fallback = Fallback::new(vec![RegionalEndpoint {
        region: "us-west-2".into(),
        url: west.url.clone(),
    }]);
    let (_client, mut events) = builder(&global).fallback(fallback).start();
    restored(&mut events).await;
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
