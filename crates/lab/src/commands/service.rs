//! Take a Region of a running `wsdr lab` out of DNS, or put it back in.

use std::process::ExitCode;
use wsdr_lab::cli;

#[derive(clap::Args)]
pub struct Args {
    /// The Region: 0 or primary, 1 or secondary, or its name.
    #[arg(long, value_parser = cli::region)]
    region: wsdr_lab::world::control::RegionRef,
    /// Put it back in DNS.
    #[arg(long = "in", conflicts_with = "out")]
    back_in: bool,
    /// Take it out of DNS.
    #[arg(long)]
    out: bool,
    #[command(flatten)]
    lab: super::LabAddress,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Args {
        region,
        back_in,
        out,
        lab,
    } = args;
    if back_in == out {
        eprintln!("wsdr service: say --in or --out");
        return Ok(ExitCode::from(2));
    }
    let body = serde_json::json!({"region": region, "in_service": back_in}).to_string();
    Ok(super::control_call(lab, "/api/service", &body, "service").await)
}
