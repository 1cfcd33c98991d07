//! Inject a fault into a running `wsdr lab` through its control API.

use std::process::ExitCode;
use wsdr_lab::cli;

#[derive(clap::Args)]
pub struct Args {
    /// What to break (or `heal`).
    #[arg(value_enum)]
    kind: wsdr_lab::FaultKind,
    /// The Region: 0 or primary, 1 or secondary, or its name (us-east-1).
    #[arg(long, default_value = "0", value_parser = cli::region)]
    region: wsdr_lab::world::control::RegionRef,
    /// AWS milliseconds: `lag`, `skew` (may be negative), `sticky-dns`, `slow`.
    #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
    ms: i64,
    /// Share affected (0 to 100): `ack-lost`, `store-throttle`, `connections-throttle`.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=100))]
    percent: Option<u8>,
    /// `one-way`: the Region whose outgoing replication is cut (as --region).
    #[arg(long, value_parser = cli::region)]
    from: Option<wsdr_lab::world::control::RegionRef>,
    /// `reconnect-herd`: how many clients reconnect at once (default 2000).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(wsdr_lab::world::fault::MAX_HERD_CLIENTS)))]
    clients: Option<u32>,
    #[command(flatten)]
    lab: super::LabAddress,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Args {
        kind,
        region,
        ms,
        percent,
        from,
        clients,
        lab,
    } = args;
    let body = serde_json::to_string(&wsdr_lab::world::fault::FaultRequest {
        ms,
        percent,
        from,
        clients,
        ..wsdr_lab::world::fault::FaultRequest::new(kind, region)
    })?;
    Ok(super::control_call(lab, "/api/fault", &body, "fault").await)
}
