//! Shared by the benchmarks: percentiles, tokens, regions, child processes.

use std::sync::Arc;
use std::time::Duration;
use wsdr_lab::world::region::{Quotas, Region};
use wsdr_lab::world::timeline::Timeline;

pub fn wall_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or(0.0)
}

/// Nearest-rank percentile of a sorted slice.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let index = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[index]
}

pub const ISSUER: &str = "https://bench.wsdr.local";
pub const AUDIENCE: &str = "wsdr";
pub const SECRET: &str = "bench-secret-0123456789abcdef0123456789";

pub fn token(sub: &str) -> String {
    let now = (wall_ms() / 1000.0) as u64;
    let claims = serde_json::json!({"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "exp": now + 3600});
    jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes())
        .and_then(|k| jsonwebtoken::encode(&jsonwebtoken::Header::default(), &claims, &k))
        .unwrap_or_default()
}

pub async fn authorizer() -> anyhow::Result<Arc<authorizer::Authorizer>> {
    let env = [
        ("JWT_ISSUER", ISSUER),
        ("JWT_AUDIENCE", AUDIENCE),
        ("JWT_HS256_SECRET", SECRET),
    ];
    let config = authorizer::Config::from_lookup(|k| {
        env.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    })?;
    Ok(Arc::new(authorizer::Authorizer::new(&config).await))
}

/// One emulated Region with the auction seeded.
pub async fn region(
    id: wsdr_lab::RegionId,
    name: &str,
    quotas: Quotas,
) -> anyhow::Result<Arc<Region>> {
    let clock = wsdr_lab::world::clock::RegionClock::new(wsdr_lab::world::clock::LabClock::new());
    let store = Arc::new(wsdr_core::memory::MemoryStateStore::new(
        name,
        clock.clone(),
    ));
    let environment = wsdr_lab::world::env::Environment::real();
    // An eventual table with no faults injected and no service time (the real lab's).
    let table = wsdr_lab::world::store::RegionTable::Eventual(Arc::new(
        wsdr_lab::world::store::FaultyStore::new(id, store as _, environment.entropy.clone(), None),
    ));
    // The Region runs until the benchmark process ends: its owner is never cancelled.
    let region = Region::start(
        id,
        name,
        table,
        Arc::new(wsdr_lab::world::identity::AuthorizerFunction::warm(
            authorizer().await?,
        )),
        quotas,
        clock,
        wsdr_lab::world::env::Shared {
            scale: wsdr_lab::TimeScale::new(1.0),
            timeline: Timeline::new(None),
            owner: wsdr_lab::world::owner::Owner::new(),
            environment,
        },
    )
    .await?;
    region
        .service()
        .ensure_auction(&wsdr_auction::Auction {
            id: wsdr_protocol::AuctionId::new("lot-1")?,
            item: "bench".into(),
            starting_price: wsdr_protocol::Amount::new(1)?,
            min_increment: 1,
            closes_at: None,
        })
        .await?;
    Ok(region)
}

pub fn quotas(connect_rate: f64, post_latency: Duration, concurrency: usize) -> Quotas {
    Quotas {
        connect_rate,
        connect_burst: connect_rate,
        post_latency,
        fanout: wsdr_core::FanoutConfig {
            concurrency,
            ..Default::default()
        },
        idle_timeout: Duration::from_secs(3600),
        max_duration: Duration::from_secs(7200),
        max_frame_bytes: 32 * 1024,
        max_message_bytes: 128 * 1024,
        herd_hint: None,
        consistency: wsdr_core::Consistency::Eventual,
        stale_after_ms: wsdr_core::STALE_AFTER_MS,
        function_url: wsdr_lab::world::route53::UrlPermissions::BOTH,
        push: wsdr_core::PushSettings::default(),
        push_jobs: wsdr_lab::world::push_jobs::PushJobQueue::Wsdr.settings(),
    }
}

/// Clients run in a child process (this binary, another subcommand): one process may hold
/// at most 20,000 open files here, and 10,000 connections need 10,000 on each side.
pub struct Child {
    /// Kept so the child is killed when this is dropped (`kill_on_drop`).
    _process: tokio::process::Child,
    pub stdin: tokio::process::ChildStdin,
    pub lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl Child {
    pub fn spawn(args: &[String]) -> anyhow::Result<Self> {
        use tokio::io::AsyncBufReadExt;
        let mut process = tokio::process::Command::new(std::env::current_exe()?)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdin = process
            .stdin
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stdin"))?;
        let stdout = process
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
        Ok(Self {
            _process: process,
            stdin,
            lines: tokio::io::BufReader::new(stdout).lines(),
        })
    }

    /// The next line starting with `prefix`, within `within`.
    pub async fn expect(&mut self, prefix: &str, within: Duration) -> anyhow::Result<String> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let line = tokio::time::timeout_at(deadline, self.lines.next_line())
                .await
                .map_err(|_| anyhow::anyhow!("child did not say `{prefix}` within {within:?}"))??
                .ok_or_else(|| anyhow::anyhow!("child exited before `{prefix}`"))?;
            if let Some(rest) = line.strip_prefix(prefix) {
                return Ok(rest.trim().to_owned());
            }
        }
    }

    pub async fn say(&mut self, line: &str) -> anyhow::Result<()> {
        use tokio::io::AsyncWriteExt;
        self.stdin.write_all(format!("{line}\n").as_bytes()).await?;
        self.stdin.flush().await?;
        Ok(())
    }
}
