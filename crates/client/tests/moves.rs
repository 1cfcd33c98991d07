#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! Server-directed moves against fake Regions, on paused tokio time: a move is followed once
//! per session, to a known destination, without a failure; a replayed or pointless one is not.

mod common;

use common::{until, FakeRegion};
use std::sync::Arc;
use std::time::Duration;
use wsdr_client::{
    ClientBuilder, DisconnectReason, Event, Fallback, RegionalEndpoint, StaticToken,
};
use wsdr_protocol::AuctionId;

fn move_to(from: &str, to: &str, window_ms: u64) -> String {
    format!(
        r#"{{"type":"moveTo","region":"{from}","to":"{to}","windowMs":{window_ms},"reason":"test"}}"#
    )
}

#[tokio::test(start_paused = true)]
async fn a_move_is_followed_once_and_a_replay_or_a_pointless_one_is_not() {
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
    let (_client, mut events) = ClientBuilder::new(east.url.clone())
        .token_provider(Arc::new(StaticToken("t".into())))
        .subscribe(AuctionId::new("lot-1").unwrap())
        .fallback(Fallback::new(regions))
        .seed(3)
        .start();
    let restored = |region: &'static str| {
        move |e: &Event| match e {
            Event::StateRestored { region: r, .. } if r == region => Some(()),
            _ => None,
        }
    };
    until(&mut events, Duration::from_secs(5), restored("us-east-1")).await;

    // Pointless: to the Region already serving. Nothing happens within a long wait.
    east.push_all(&move_to("us-east-1", "us-east-1", 0));
    // Real, then replayed within the same session: one move only.
    east.push_all(&move_to("us-east-1", "us-west-2", 10_000));
    east.push_all(&move_to("us-east-1", "us-west-2", 10_000));
    let mut scheduled = 0;
    let reason = until(&mut events, Duration::from_secs(15), |e| match e {
        Event::MoveScheduled { to, after, .. } => {
            assert_eq!(to, "us-west-2");
            assert!(*after <= Duration::from_secs(10));
            scheduled += 1;
            None
        }
        Event::Disconnected { reason } => Some(reason.clone()),
        _ => None,
    })
    .await;
    assert_eq!(scheduled, 1, "the replayed frame scheduled nothing");
    assert_eq!(
        reason,
        DisconnectReason::Moved {
            to: "us-west-2".into()
        }
    );
    until(&mut events, Duration::from_secs(5), restored("us-west-2")).await;
    assert_eq!(
        west.handshakes(),
        1,
        "straight to the destination, no backoff"
    );

    // On the new Region nothing moves it again: no disconnect for two minutes.
    let quiet_until = tokio::time::Instant::now() + Duration::from_secs(120);
    while let Ok(Some(event)) = tokio::time::timeout_at(quiet_until, events.recv()).await {
        assert!(
            !matches!(event, Event::Disconnected { .. }),
            "moved again: {event:?}"
        );
    }
}
