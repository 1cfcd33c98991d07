#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The reconnecting client against fake Regions with faults, on paused tokio time: detection
//! within heartbeat interval x threshold, reconnect, state restored, unconfirmed bid
//! replayed exactly once.

mod common;

use common::{until, FakeRegion, Kill, Mode};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;
use wsdr_client::{
    Backoff, ClientBuilder, ClientError, DisconnectReason, Event, OfflineBids, StaticToken,
    WallClock,
};
use wsdr_protocol::{Amount, AuctionId, BidStatus};

fn builder(region: &FakeRegion) -> ClientBuilder {
    ClientBuilder::new(region.url.clone())
        .token_provider(Arc::new(StaticToken("t0k3n".into())))
        .subscribe(AuctionId::new("lot-1").unwrap())
        .seed(7)
}

async fn restored(
    events: &mut UnboundedReceiver<Event>,
    within: Duration,
) -> (String, Option<Duration>) {
    until(events, within, |e| match e {
        Event::StateRestored { region, outage, .. } => Some((region.clone(), *outage)),
        _ => None,
    })
    .await
}

async fn disconnected(events: &mut UnboundedReceiver<Event>, within: Duration) -> DisconnectReason {
    until(events, within, |e| match e {
        Event::Disconnected { reason } => Some(reason.clone()),
        _ => None,
    })
    .await
}

#[tokio::test(start_paused = true)]
async fn first_connect_restores_state_and_names_the_region() {
    let region = FakeRegion::start("us-east-1").await;
    let (_client, mut events) = builder(&region).start();
    let region_name = until(&mut events, Duration::from_secs(5), |e| match e {
        Event::Connected { region } => Some(region.clone()),
        _ => None,
    })
    .await;
    assert_eq!(region_name, "us-east-1");
    assert_eq!(
        restored(&mut events, Duration::from_secs(5)).await,
        ("us-east-1".into(), None)
    );
    assert!(region.inner.lock().unwrap().tokens[0].contains("token=t0k3n"));
}

#[tokio::test(start_paused = true)]
async fn degraded_backend_is_detected_within_interval_times_threshold() {
    let region = FakeRegion::start("us-east-1").await;
    let (_client, mut events) = builder(&region)
        .backoff(Backoff {
            base: Duration::from_millis(100),
            ..Backoff::default()
        })
        .start();
    restored(&mut events, Duration::from_secs(5)).await;
    region.set_mode(Mode::GatewayErrors);
    let started = Instant::now();
    let reason = disconnected(&mut events, Duration::from_secs(61)).await;
    assert_eq!(reason, DisconnectReason::HeartbeatFailures(2));
    assert!(
        started.elapsed() <= Duration::from_secs(60),
        "took {:?}",
        started.elapsed()
    );
    // Pongs are back: the client reconnects and resyncs.
    region.set_mode(Mode::Normal);
    let (_, outage) = restored(&mut events, Duration::from_secs(30)).await;
    assert!(outage.is_some());
}

#[tokio::test(start_paused = true)]
async fn silent_socket_is_closed_after_the_heartbeat_timeout() {
    let region = FakeRegion::start("us-east-1").await;
    let (_client, mut events) = builder(&region).start();
    restored(&mut events, Duration::from_secs(5)).await;
    region.set_mode(Mode::Silent);
    let started = Instant::now();
    assert_eq!(
        disconnected(&mut events, Duration::from_secs(70)).await,
        DisconnectReason::Silent
    );
    // Two heartbeats unanswered: the one at 30 s (judged at 60 s) and the confirmation
    // probe sent then (judged timeout - interval = 5 s later).
    let took = started.elapsed();
    assert!(
        took <= Duration::from_secs(65),
        "silent socket lived {took:?}"
    );
    let before = region.handshakes();
    region.set_mode(Mode::Normal);
    restored(&mut events, Duration::from_secs(30)).await;
    assert_eq!(
        region.handshakes(),
        before + 1,
        "a new connection was opened"
    );
}

#[tokio::test(start_paused = true)]
async fn slow_but_timely_pongs_keep_the_connection() {
    let region = FakeRegion::start("us-east-1").await;
    region.set_mode(Mode::SlowPong(Duration::from_secs(10)));
    let (_client, mut events) = builder(&region).start();
    restored(&mut events, Duration::from_secs(5)).await;
    let stayed = tokio::time::timeout(Duration::from_secs(300), async {
        loop {
            if let Some(Event::Disconnected { .. }) = events.recv().await {
                return;
            }
        }
    })
    .await;
    assert!(stayed.is_err(), "a pong 10 s late is still a pong");
}

#[tokio::test(start_paused = true)]
async fn dropped_socket_reconnects_with_backoff_and_region_switch_is_seen() {
    let region = FakeRegion::start("us-east-1").await;
    let (_client, mut events) = builder(&region).start();
    restored(&mut events, Duration::from_secs(5)).await;
    // "DNS" now points the same name at the other Region.
    region.set_region("us-west-2");
    region.kill_all(Kill::Abrupt);
    assert_eq!(
        disconnected(&mut events, Duration::from_secs(5)).await,
        DisconnectReason::Closed { code: None }
    );
    let (attempt, delay) = until(&mut events, Duration::from_secs(5), |e| match e {
        Event::Reconnecting { attempt, delay } => Some((*attempt, *delay)),
        _ => None,
    })
    .await;
    assert_eq!(attempt, 1);
    assert!(
        delay <= Duration::from_secs(2),
        "first retry window is base = 2 s"
    );
    let (new_region, outage) = restored(&mut events, Duration::from_secs(5)).await;
    assert_eq!(new_region, "us-west-2");
    assert!(outage.unwrap() <= Duration::from_secs(3));
}

#[tokio::test(start_paused = true)]
async fn unconfirmed_bid_is_replayed_exactly_once_after_reconnect() {
    let region = FakeRegion::start("us-east-1").await;
    let (client, mut events) = builder(&region).start();
    restored(&mut events, Duration::from_secs(5)).await;
    region.set_mode(Mode::LoseBidResults);
    let bid_id = client
        .bid(AuctionId::new("lot-1").unwrap(), Amount::new(500).unwrap())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(region.times_received(bid_id.as_str()), 1);
    region.set_mode(Mode::Normal);
    region.kill_all(Kill::Abrupt);
    let (status, result_region) = until(&mut events, Duration::from_secs(30), |e| match e {
        Event::BidResult {
            bid_id: id,
            status,
            region,
            ..
        } if *id == bid_id => Some((*status, region.clone())),
        _ => None,
    })
    .await;
    assert_eq!(
        status,
        BidStatus::Duplicate,
        "the server had it: the replay is deduplicated"
    );
    assert_eq!(result_region, "us-east-1");
    assert_eq!(
        region.times_received(bid_id.as_str()),
        2,
        "original + exactly one replay"
    );
    // Once confirmed, later reconnects do not send it again.
    region.kill_all(Kill::Abrupt);
    restored(&mut events, Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(region.times_received(bid_id.as_str()), 2);
}

#[tokio::test(start_paused = true)]
async fn refused_handshakes_retry_on_5xx_and_429_but_give_up_on_401_without_new_token() {
    let region = FakeRegion::start("us-east-1").await;
    region.refuse(Some(503));
    let (_client, mut events) = builder(&region)
        .backoff(Backoff {
            base: Duration::from_millis(200),
            ..Backoff::default()
        })
        .start();
    let reason = disconnected(&mut events, Duration::from_secs(5)).await;
    assert!(matches!(
        reason,
        DisconnectReason::ConnectFailed(wsdr_client::ConnectError::Refused { status: 503 })
    ));
    region.refuse(Some(429));
    until(&mut events, Duration::from_secs(10), |e| {
        matches!(
            e,
            Event::Disconnected {
                reason: DisconnectReason::ConnectFailed(wsdr_client::ConnectError::Refused {
                    status: 429
                })
            }
        )
        .then_some(())
    })
    .await;
    region.refuse(None);
    restored(&mut events, Duration::from_secs(30)).await;

    let refusing = FakeRegion::start("us-east-1").await;
    refusing.refuse(Some(401));
    let (_c, mut events) = builder(&refusing).start();
    let reason = until(&mut events, Duration::from_secs(30), |e| match e {
        Event::GaveUp { reason, code, .. } => {
            assert_eq!(*code, wsdr_client::ReasonCode::TokenDenied, "{reason}");
            Some(reason.clone())
        }
        _ => None,
    })
    .await;
    assert!(reason.contains("token"), "{reason}");
    assert_eq!(refusing.handshakes(), 1, "no retry with the refused token");
}

#[tokio::test(start_paused = true)]
async fn going_away_close_reconnects_in_the_smallest_window() {
    let region = FakeRegion::start("us-east-1").await;
    let (_client, mut events) = builder(&region)
        .backoff(Backoff {
            base: Duration::from_secs(1),
            ..Backoff::default()
        })
        .start();
    restored(&mut events, Duration::from_secs(5)).await;
    for _ in 0..3 {
        region.kill_all(Kill::Code(1001));
        assert_eq!(
            disconnected(&mut events, Duration::from_secs(5)).await,
            DisconnectReason::Closed { code: Some(1001) }
        );
        let (attempt, delay) = until(&mut events, Duration::from_secs(5), |e| match e {
            Event::Reconnecting { attempt, delay } => Some((*attempt, *delay)),
            _ => None,
        })
        .await;
        assert_eq!(
            attempt, 1,
            "1001 (the 2-hour limit) is not a failure: the counter restarts"
        );
        assert!(delay <= Duration::from_secs(1));
        restored(&mut events, Duration::from_secs(5)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn offline_bids_are_queued_then_sent_or_expire_or_are_rejected() {
    let region = FakeRegion::start("us-east-1").await;
    region.refuse(Some(503));
    let policy = OfflineBids::Queue {
        max: 2,
        max_age: Duration::from_secs(60),
    };
    let (client, mut events) = builder(&region)
        .offline_bids(policy)
        .backoff(Backoff {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(1),
            ..Backoff::default()
        })
        .start();
    disconnected(&mut events, Duration::from_secs(5)).await;
    let lot = AuctionId::new("lot-1").unwrap();
    let first = client
        .bid(lot.clone(), Amount::new(100).unwrap())
        .await
        .unwrap();
    let _second = client
        .bid(lot.clone(), Amount::new(200).unwrap())
        .await
        .unwrap();
    assert_eq!(
        client.bid(lot.clone(), Amount::new(300).unwrap()).await,
        Err(ClientError::QueueFull)
    );
    region.refuse(None);
    until(&mut events, Duration::from_secs(10), |e| matches!(e, Event::BidResult { bid_id, status: BidStatus::Accepted, .. } if *bid_id == first).then_some(())).await;
    assert_eq!(region.times_received(first.as_str()), 1);

    // A bid queued longer than max_age is dropped, not sent late.
    region.refuse(Some(503));
    region.kill_all(Kill::Abrupt);
    disconnected(&mut events, Duration::from_secs(5)).await;
    let stale = client
        .bid(lot.clone(), Amount::new(900).unwrap())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(61)).await;
    region.refuse(None);
    let expired = until(&mut events, Duration::from_secs(10), |e| match e {
        Event::BidExpired { bid_id } => Some(bid_id.clone()),
        _ => None,
    })
    .await;
    assert_eq!(expired, stale);
    assert_eq!(region.times_received(stale.as_str()), 0);

    let rejecting = FakeRegion::start("us-east-1").await;
    rejecting.refuse(Some(503));
    let (client, mut events) = builder(&rejecting)
        .offline_bids(OfflineBids::Reject)
        .start();
    disconnected(&mut events, Duration::from_secs(5)).await;
    assert_eq!(
        client.bid(lot, Amount::new(1).unwrap()).await,
        Err(ClientError::NotConnected)
    );
}

/// A wall clock the test moves by hand, to fake a laptop that slept.
struct JumpyWall(AtomicU64);
impl WallClock for JumpyWall {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

#[tokio::test(start_paused = true)]
async fn laptop_sleep_is_noticed_by_the_wall_clock_and_the_socket_really_closed() {
    let region = FakeRegion::start("us-east-1").await;
    let wall = Arc::new(JumpyWall(AtomicU64::new(1_000_000)));
    let (_client, mut events) = builder(&region).wall_clock(wall.clone()).start();
    restored(&mut events, Duration::from_secs(5)).await;
    // The machine slept 10 minutes: wall time jumped, monotonic time did not.
    wall.0.fetch_add(600_000, Ordering::SeqCst);
    let before = region.handshakes();
    let reason = disconnected(&mut events, Duration::from_secs(31)).await;
    assert_eq!(reason, DisconnectReason::Silent);
    restored(&mut events, Duration::from_secs(10)).await;
    assert_eq!(region.handshakes(), before + 1);
}

#[tokio::test(start_paused = true)]
async fn max_attempts_ends_in_gave_up() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("ws://{}/prod", listener.local_addr().unwrap());
    drop(listener);
    let (_client, mut events) = ClientBuilder::new(dead)
        .max_attempts(Some(3))
        .seed(1)
        .start();
    let mut reconnects = 0;
    loop {
        match events.recv().await.unwrap() {
            Event::Reconnecting { .. } => {
                reconnects += 1;
                // Bounded: a client that never gives up fails here instead of looping.
                assert!(reconnects <= 3, "a reconnect past max_attempts");
            }
            Event::GaveUp { code, .. } => {
                assert_eq!(code, wsdr_client::ReasonCode::AttemptsExhausted);
                break;
            }
            _ => {}
        }
    }
    assert_eq!(reconnects, 3);
}

/// A token provider says whether to try again: `Unavailable` is retried with the backoff
/// (the identity provider was down for two connects, then the client connects), `Denied`
/// ends the client at once with a reason (the user signed out: no retry loop).
#[tokio::test(start_paused = true)]
async fn a_token_provider_says_whether_to_try_again() {
    use wsdr_client::{TokenError, TokenProvider};
    struct Flaky {
        calls: AtomicU64,
        deny: bool,
    }
    impl TokenProvider for Flaky {
        fn token(
            &self,
            _refresh: bool,
        ) -> futures::future::BoxFuture<'_, Result<String, TokenError>> {
            let call = self.calls.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                match (self.deny, call) {
                    (true, _) => Err(TokenError::Denied("signed out".into())),
                    (false, 0 | 1) => Err(TokenError::Unavailable("idp timeout".into())),
                    (false, _) => Ok("t0k3n".into()),
                }
            })
        }
    }
    let region = FakeRegion::start("us-east-1").await;
    let flaky = Arc::new(Flaky {
        calls: AtomicU64::new(0),
        deny: false,
    });
    let (_client, mut events) = builder(&region).token_provider(flaky.clone()).start();
    let (served_by, _) = restored(&mut events, Duration::from_secs(30)).await;
    assert_eq!(served_by, "us-east-1");
    assert_eq!(
        flaky.calls.load(Ordering::SeqCst),
        3,
        "two retries, then a token"
    );

    let denied = Arc::new(Flaky {
        calls: AtomicU64::new(0),
        deny: true,
    });
    let (_client, mut events) = builder(&region).token_provider(denied.clone()).start();
    let reason = until(&mut events, Duration::from_secs(30), |e| match e {
        Event::GaveUp { reason, code, .. } => {
            assert_eq!(*code, wsdr_client::ReasonCode::TokenDenied, "{reason}");
            Some(reason.clone())
        }
        _ => None,
    })
    .await;
    assert!(reason.contains("signed out"), "{reason}");
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(denied.calls.load(Ordering::SeqCst), 1, "never asked again");
}

/// A closure is a token provider (`ClientBuilder::token_fn`): it is asked for each connect,
/// and the client connects with what it returns.
#[tokio::test(start_paused = true)]
async fn a_closure_is_a_token_provider() {
    let region = FakeRegion::start("us-east-1").await;
    let calls = Arc::new(AtomicU64::new(0));
    let counted = calls.clone();
    let (_client, mut events) = builder(&region)
        .token_fn(move |_refresh| {
            counted.fetch_add(1, Ordering::SeqCst);
            async { Ok("t0k3n".to_owned()) }
        })
        .start();
    let (served_by, _) = restored(&mut events, Duration::from_secs(30)).await;
    assert_eq!(served_by, "us-east-1");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}
