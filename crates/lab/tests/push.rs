#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The push path through the lab: bids answered before any push, conflated to the newest
//! state per spacing, delivered to a watcher that never heartbeats.

use futures::{SinkExt, StreamExt};
use std::sync::Arc;
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;
use wsdr_lab::{LabConfig, RegionId, TimeScale, World};

/// A bare subscriber: one `getState`, then only listening (no heartbeat, so no pong ever
/// resyncs it: what it shows comes from pushes alone).
async fn bare_watcher(
    lab: &World,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    let url = format!(
        "{}?token={}",
        lab.region(RegionId::Primary).url(),
        lab.user_token("watcher").unwrap()
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    socket
        .send(Message::text(
            r#"{"action":"getState","auctionId":"lot-1"}"#,
        ))
        .await
        .unwrap();
    loop {
        let frame = socket.next().await.unwrap().unwrap();
        if frame
            .to_text()
            .unwrap_or_default()
            .contains(r#""type":"state""#)
        {
            return socket;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_within_the_window_reaches_a_silent_watcher_as_one_newest_push() {
    // A 60 s AWS window at time scale 60: one lab second, far longer than the burst takes.
    let lab = Arc::new(
        World::builder()
            .config(LabConfig {
                scale: TimeScale::new(60.0),
                push: wsdr_core::PushSettings {
                    window: Duration::from_secs(60),
                    ..wsdr_core::PushSettings::default()
                },
                ..LabConfig::default()
            })
            .start()
            .await
            .unwrap(),
    );
    let mut watcher = bare_watcher(&lab).await;
    let url = format!(
        "{}?token={}",
        lab.region(RegionId::Primary).url(),
        lab.user_token("bidder").unwrap()
    );
    let (mut bidder, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let bids = 8u64;
    for i in 0..bids {
        let amount = 200_000 + i * 10_000;
        bidder
            .send(Message::text(format!(
                r#"{{"action":"bid","auctionId":"lot-1","amount":{amount},"bidId":"burst-bid-{i:04}"}}"#
            )))
            .await
            .unwrap();
        // Each answer comes back before the next bid is sent.
        loop {
            let frame = bidder.next().await.unwrap().unwrap();
            let text = frame.to_text().unwrap_or_default().to_owned();
            if text.contains(r#""type":"bidResult""#) {
                assert!(text.contains(r#""status":"accepted""#), "{text}");
                break;
            }
        }
    }
    let newest = 200_000 + (bids - 1) * 10_000;
    // The watcher's pushes until one shows the newest bid: at most the first change's
    // push and the trailing one (plus the replicated summary's, if its lag fell apart).
    let mut updates = 0;
    let shown = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let frame = watcher.next().await.unwrap().unwrap();
            let frame: serde_json::Value =
                serde_json::from_str(frame.to_text().unwrap_or_default()).unwrap_or_default();
            if frame["type"] == "bidUpdate" {
                updates += 1;
                if frame["highBid"]["amount"] == newest {
                    return;
                }
            }
        }
    })
    .await;
    assert!(
        shown.is_ok(),
        "the watcher never got the newest bid ({updates} pushes): a change within the window must get its trailing push"
    );
    assert!(
        updates < bids,
        "{updates} pushes for {bids} bids: not conflated"
    );
    let totals = lab.region(RegionId::Primary).push_totals();
    assert!(totals.pushes < bids, "{totals:?}");
    assert_eq!(totals.failed_jobs, 0, "{totals:?}");
}
