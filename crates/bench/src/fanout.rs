//! One accepted bid pushed to N subscribed lab connections through the real `@connections`
//! path (the Region's stream -> the pusher -> aws-sdk-apigatewaymanagement -> the lab's
//! endpoint -> each socket).

use crate::common::{percentile, quotas, region, token, wall_ms, Child};
use futures::{SinkExt, StreamExt};
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

#[derive(Debug, Clone, serde::Serialize)]
pub struct FanoutResult {
    pub n: usize,
    pub concurrency: usize,
    pub post_latency_ms: f64,
    pub delivered: usize,
    pub last_delivery_ms: f64,
    pub p50_delivery_ms: f64,
    pub posts_per_s: f64,
}

/// Parent: a Region, N subscribers in a child process, one bid, time to the last delivery.
pub async fn run(
    n: usize,
    concurrency: usize,
    post_latency: Duration,
) -> anyhow::Result<FanoutResult> {
    let region = region(
        wsdr_lab::RegionId::Primary,
        "us-east-1",
        quotas(1e9, post_latency, concurrency),
    )
    .await?;
    let mut child = Child::spawn(&[
        "fanout-clients".into(),
        region.url(),
        n.to_string(),
        token("subscriber"),
    ])?;
    child.expect("ready", Duration::from_secs(300)).await?;
    let url = format!("{}?token={}", region.url(), token("bidder"));
    let (mut bidder, _) = tokio_tungstenite::connect_async(url).await?;
    perf_control("enable");
    let started = wall_ms();
    bidder
        .send(Message::text(
            r#"{"action":"bid","auctionId":"lot-1","amount":500,"bidId":"bench-bid-0001"}"#,
        ))
        .await?;
    // The bidder's own result arrives first (no push on the bid's path).
    while let Some(Ok(frame)) = bidder.next().await {
        if frame.to_text().is_ok_and(|t| t.contains("bidResult")) {
            break;
        }
    }
    let summary = child.expect("done", Duration::from_secs(600)).await?;
    perf_control("disable");
    let times: Vec<f64> = summary
        .split_whitespace()
        .filter_map(|t| t.parse().ok())
        .collect();
    let mut latencies: Vec<f64> = times.iter().map(|t| t - started).collect();
    latencies.sort_by(f64::total_cmp);
    let last = latencies.last().copied().unwrap_or(f64::NAN);
    Ok(FanoutResult {
        n,
        concurrency,
        post_latency_ms: post_latency.as_secs_f64() * 1000.0,
        delivered: latencies.len(),
        last_delivery_ms: last,
        p50_delivery_ms: percentile(&latencies, 0.5),
        posts_per_s: latencies.len() as f64 / (last / 1000.0),
    })
}

/// Child: N sockets subscribe with getState, say "ready", then report when each got the
/// `bidUpdate` (wall ms), as one "done" line.
pub async fn clients(url: String, n: usize, token: String) -> anyhow::Result<()> {
    let mut sockets = Vec::with_capacity(n);
    let full = format!("{url}?token={token}");
    let connecting = futures::stream::iter(0..n)
        .map(|_| {
            let full = full.clone();
            async move {
                let (mut ws, _) = tokio_tungstenite::connect_async(full).await?;
                ws.send(Message::text(
                    r#"{"action":"getState","auctionId":"lot-1"}"#,
                ))
                .await?;
                while let Some(frame) = ws.next().await {
                    if frame?
                        .to_text()
                        .is_ok_and(|t| t.contains(r#""type":"state""#))
                    {
                        break;
                    }
                }
                anyhow::Ok(ws)
            }
        })
        .buffer_unordered(200);
    futures::pin_mut!(connecting);
    while let Some(ws) = connecting.next().await {
        sockets.push(ws?);
    }
    println!("ready");
    let waits = sockets.into_iter().map(|mut ws| async move {
        while let Some(Ok(frame)) = ws.next().await {
            if frame.to_text().is_ok_and(|t| t.contains("bidUpdate")) {
                return Some(wall_ms());
            }
        }
        None
    });
    let times =
        tokio::time::timeout(Duration::from_secs(300), futures::future::join_all(waits)).await?;
    let line: Vec<String> = times
        .into_iter()
        .flatten()
        .map(|t| format!("{t:.3}"))
        .collect();
    println!("done {}", line.join(" "));
    Ok(())
}

/// Profiling aid: with `WSDR_BENCH_PERF_CTL` naming `perf record --control fifo:` 's fifo,
/// the profile covers only the broadcast (not the N connections being set up).
fn perf_control(command: &str) {
    if let Some(path) = std::env::var_os("WSDR_BENCH_PERF_CTL") {
        let _ = std::fs::write(path, format!("{command}\n"));
    }
}
