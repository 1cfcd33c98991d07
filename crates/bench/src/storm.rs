//! Reconnection storm: N users on the primary, the primary goes down and the name points at
//! the secondary at once, whose new-connection quota is 500/s (AWS time). How long until
//! 50/99/100% of users have their state back, how many handshakes were throttled (429), and
//! how that compares with the floor N / 500 s, for three reconnect policies.

use crate::common::{percentile, quotas, region, token, wall_ms, Child};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use wsdr_client::{Backoff, ClientBuilder, Event, StaticToken};
use wsdr_protocol::AuctionId;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
pub enum Policy {
    /// The reference design: full jitter, base 2 s, cap 20 s.
    Reference,
    /// The same, plus a 20 s herd window after a 429 (the client's own guess at the herd; wsdr's
    /// policy without a server hint).
    Wsdr,
    /// wsdr's default: the server advertises the herd window (its connection census over the
    /// destination's quota, in `state` and every `pong`), and the first retry after the loss
    /// is drawn from it.
    Advertised,
    /// Exponential without jitter (what full jitter replaces).
    NoJitter,
    /// wsdr's default clients, moved by the server instead of cut off: the primary stays
    /// up, the name moves, and an evacuation tells every connection to move (`moveTo`) within
    /// the herd window the quota needs (N / 500 s).
    Evacuated,
}

impl Policy {
    pub fn backoff(self) -> Backoff {
        match self {
            Policy::Reference => Backoff::reference(),
            Policy::Wsdr => Backoff {
                herd_hint: false,
                ..Backoff::default()
            },
            Policy::Advertised | Policy::Evacuated => Backoff::default(),
            Policy::NoJitter => Backoff {
                jitter: false,
                ..Backoff::reference()
            },
        }
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct StormResult {
    pub policy: Policy,
    pub users: usize,
    pub quota_per_s: f64,
    pub floor_s: f64,
    pub restored: usize,
    pub p50_s: f64,
    pub p99_s: f64,
    pub p100_s: f64,
    pub throttled_429: u64,
    pub gave_up: usize,
}

pub async fn run(users: usize, policy: Policy, scale: f64) -> anyhow::Result<StormResult> {
    let quota = 500.0;
    let mut primary_quotas = quotas(1e9, Duration::ZERO, 64);
    if policy == Policy::Advertised {
        primary_quotas.herd_hint = Some(wsdr_core::HerdHint {
            destination_quota_per_s: quota * scale,
            max_census_age: Duration::from_secs_f64(300.0 / scale),
            // Re-read at once: the bench takes one census and needs the next pong to carry it.
            reuse_for: Duration::ZERO,
        });
    }
    let primary = region(wsdr_lab::RegionId::Primary, "us-east-1", primary_quotas).await?;
    let secondary = region(
        wsdr_lab::RegionId::Secondary,
        "us-west-2",
        quotas(1e9, Duration::ZERO, 64),
    )
    .await?;
    let args = vec![
        "storm-clients".to_owned(),
        primary.url(),
        secondary.url(),
        users.to_string(),
        format!("{policy:?}"),
        scale.to_string(),
        token("storm-user"),
    ];
    let mut child = Child::spawn(&args)?;
    child.expect("ready", Duration::from_secs(600)).await?;
    if policy == Policy::Advertised {
        // The census the schedule would take, then one heartbeat round for every client to
        // hear the hint in a pong.
        wsdr_core::Connections::take_census(primary.registry.as_ref(), primary.clock_now_ms())
            .await?;
        child.say("hint").await?;
        child.expect("hinted", Duration::from_secs(600)).await?;
    }
    secondary.set_connect_rate(quota * scale, quota);
    let before = secondary.counters().throttled_429;
    let outage = wall_ms();
    if policy == Policy::Evacuated {
        // The name moves first (a planned move takes the Region out of DNS), then every
        // connection is told to move, paced by the window the destination's quota needs.
        child.say("flip").await?;
        let plan = wsdr_core::Evacuation {
            destination_quota_per_s: quota * scale,
            min_window: Duration::from_secs_f64(2.0 / scale),
            posts_per_s: 2_000.0 * scale,
            ..wsdr_core::Evacuation::new("us-east-1", "us-west-2")
        };
        let connections: Arc<dyn wsdr_core::Connections> = primary.registry.clone();
        let now = primary.clock_now_ms();
        wsdr_core::evacuate(&connections, &primary.connections_notifier(), &plan, now).await?;
    } else {
        // Down: every socket dropped, new handshakes refused.
        primary.inject(&wsdr_lab::Fault::Down(wsdr_lab::RegionId::Primary));
        child.say("flip").await?;
    }
    let summary = child.expect("done", Duration::from_secs(900)).await?;
    let mut parts = summary.split_whitespace();
    let gave_up: usize = parts.next().and_then(|g| g.parse().ok()).unwrap_or(0);
    let mut aws_s: Vec<f64> = parts
        .filter_map(|t| t.parse::<f64>().ok())
        .map(|t| (t - outage) * scale / 1000.0)
        .collect();
    aws_s.sort_by(f64::total_cmp);
    let restored = aws_s.len();
    // Percentiles of the whole population: a user never restored counts as infinitely late.
    let of_all = |q: f64| {
        let rank = ((q * users as f64).ceil() as usize).clamp(1, users);
        if rank <= restored {
            aws_s[rank - 1]
        } else {
            f64::INFINITY
        }
    };
    let _ = percentile;
    Ok(StormResult {
        policy,
        users,
        quota_per_s: quota,
        floor_s: users as f64 / quota,
        restored,
        p50_s: of_all(0.50),
        p99_s: of_all(0.99),
        p100_s: of_all(1.0),
        throttled_429: secondary.counters().throttled_429 - before,
        gave_up,
    })
}

/// Child: N reconnecting clients whose "DNS" flips to the secondary on the parent's word.
pub async fn clients(
    primary: String,
    secondary: String,
    users: usize,
    policy: Policy,
    scale: f64,
    token: String,
) -> anyhow::Result<()> {
    use tokio::io::AsyncBufReadExt;
    let flipped = Arc::new(AtomicBool::new(false));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, bool, f64)>();
    let secondary_name = "us-west-2".to_owned();
    for i in 0..users {
        let flipped = flipped.clone();
        let (primary, secondary) = (primary.clone(), secondary.clone());
        let provider = Arc::new(move || {
            if flipped.load(Ordering::SeqCst) {
                secondary.clone()
            } else {
                primary.clone()
            }
        });
        let (client, mut events) = ClientBuilder::new(String::new())
            .url_provider(provider)
            .token_provider(Arc::new(StaticToken(token.clone())))
            .subscribe(AuctionId::new("lot-1")?)
            .heartbeat(
                Duration::from_secs_f64(30.0 / scale),
                Duration::from_secs_f64(35.0 / scale),
            )
            .backoff(policy.backoff().scaled(scale))
            .connect_timeout(Duration::from_secs(10))
            .seed(i as u64 + 1)
            .start();
        let tx = tx.clone();
        let secondary_name = secondary_name.clone();
        tokio::spawn(async move {
            let _client = client;
            while let Some(event) = events.recv().await {
                match event {
                    Event::StateRestored { region, .. } => {
                        let _ = tx.send((i, region == secondary_name, wall_ms()));
                    }
                    Event::GaveUp { .. } => {
                        let _ = tx.send((i, false, f64::NAN));
                    }
                    _ => {}
                }
            }
        });
    }
    drop(tx);
    let mut ready = vec![false; users];
    let mut count = 0;
    while count < users {
        let Some((i, _, _)) = rx.recv().await else {
            break;
        };
        if !ready[i] {
            ready[i] = true;
            count += 1;
        }
    }
    println!("ready");
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = stdin.next_line().await? {
        match line.trim() {
            "flip" => break,
            "hint" => {
                // Every client heartbeats once per interval: after one interval (and a
                // margin) each has had a pong since the census.
                tokio::time::sleep(Duration::from_secs_f64(31.0 / scale)).await;
                println!("hinted");
            }
            _ => {}
        }
    }
    flipped.store(true, Ordering::SeqCst);
    let mut restored: Vec<Option<f64>> = vec![None; users];
    let mut gave_up = 0;
    let mut done = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(600.0 / scale);
    while done < users {
        let Ok(Some((i, in_secondary, at))) = tokio::time::timeout_at(deadline, rx.recv()).await
        else {
            break;
        };
        if at.is_nan() {
            gave_up += 1;
            done += 1;
        } else if in_secondary && restored[i].is_none() {
            restored[i] = Some(at);
            done += 1;
        }
    }
    let times: Vec<String> = restored
        .into_iter()
        .flatten()
        .map(|t| format!("{t:.3}"))
        .collect();
    println!("done {gave_up} {}", times.join(" "));
    Ok(())
}
