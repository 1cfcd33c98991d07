//! Probe one WebSocket endpoint once (heartbeat + getState), like the canary.

use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    /// The WebSocket URL (wss://... or, against the lab, ws://127.0.0.1:PORT).
    url: String,
    /// The Region the answer must name (e.g. us-east-1).
    #[arg(long)]
    region: String,
    /// A user token for `$connect` (from your identity provider; against the lab:
    /// GET http://127.0.0.1:8787/api/token?sub=you).
    #[arg(long)]
    token: Option<String>,
    /// The auction the probe reads with getState.
    #[arg(long, default_value = "canary")]
    auction: String,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 5)]
    timeout_secs: u64,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Args {
        url,
        region,
        token,
        auction,
        timeout_secs,
    } = args;
    let target = canary::ProbeTarget {
        url,
        expected_region: region,
        auction_id: wsdr_protocol::AuctionId::new(auction)?,
        timeout: Duration::from_secs(timeout_secs),
    };
    let options = wsdr_client::ConnectOptions {
        token,
        ..Default::default()
    };
    match canary::probe(&target, &options).await {
        Ok(ok) => println!(
            "healthy: pong in {:.1} ms, state in {:.1} ms",
            ok.heartbeat_ms, ok.total_ms
        ),
        Err(failure) => {
            let text = failure.to_string();
            let hint = if text.contains("403") || text.contains("401") {
                "\n  the endpoint refused the handshake: pass a user token with --token (against the lab: GET http://127.0.0.1:8787/api/token?sub=you)"
            } else {
                ""
            };
            println!("unhealthy: {text}{hint}");
            return Ok(ExitCode::from(1));
        }
    }
    Ok(ExitCode::SUCCESS)
}
