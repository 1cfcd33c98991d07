//! Move every user off a Region of a running `wsdr lab`: take it out of DNS, wait for the
//! name to answer the other Region, then tell each connection to move (`moveTo`) paced
//! to the destination's quota. `wsdr service --in` puts it back afterwards.

use std::process::ExitCode;
use wsdr_lab::cli;

#[derive(clap::Args)]
pub struct Args {
    /// The Region to empty: 0 or primary, 1 or secondary, or its name.
    #[arg(long, value_parser = cli::region)]
    region: wsdr_lab::world::control::RegionRef,
    /// Do not touch DNS first (a failover already decided: the name answers elsewhere).
    #[arg(long)]
    unplanned: bool,
    /// Why, as the clients will see it.
    #[arg(long)]
    reason: Option<String>,
    #[command(flatten)]
    lab: super::LabAddress,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Args {
        region,
        unplanned,
        reason,
        lab,
    } = args;
    let body =
        serde_json::json!({"region": region, "planned": !unplanned, "reason": reason}).to_string();
    Ok(super::control_call(lab, "/api/evacuate", &body, "evacuate").await)
}
