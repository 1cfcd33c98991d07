//! Take a Region of a running `wsdr lab` out of DNS, or put it back in.

use super::*;

#[derive(clap::Args)]
pub struct Args {
    /// The Region: 0 or primary, 1 or secondary, or its name.
    #[arg(long, value_parser = cli::region)]
    region: wsdr_lab::control::RegionRef,
    /// Put it back in DNS.
    #[arg(long = "in", conflicts_with = "out")]
    back_in: bool,
    /// Take it out of DNS.
    #[arg(long)]
    out: bool,
    /// The lab's control API (host:port).
    #[arg(long, default_value = "127.0.0.1:8787", value_parser = cli::address)]
    lab: std::net::SocketAddr,
    /// The control token a lab started with --allow-remote printed (or
    /// WSDR_LAB_CONTROL_TOKEN).
    #[arg(long, env = "WSDR_LAB_CONTROL_TOKEN", hide_env_values = true)]
    control_token: Option<String>,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Args {
        region,
        back_in,
        out,
        lab,
        control_token,
    } = args;
    if back_in == out {
        eprintln!("wsdr service: say --in or --out");
        return Ok(ExitCode::from(2));
    }
    let body = serde_json::json!({"region": region, "in_service": back_in}).to_string();
    Ok(super::control_call(lab, control_token, "/api/service", &body, "service").await)
}
