//! Move every user off a Region of a running `wsdr lab`: take it out of DNS, wait for the
//! name to answer the other Region, then tell each connection to move (`moveTo`) paced
//! to the destination's quota. `wsdr service --in` puts it back afterwards. Exit status 3:
//! the evacuation is incomplete (some connections were never told before its deadline).

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
    // An evacuation waits for DNS (a few TTLs) before it answers.
    let address = lab.lab;
    let client = wsdr_lab::world::control::ControlClient::new(lab.lab, lab.control_token)
        .with_timeout(std::time::Duration::from_secs(900));
    match client.post_json("/api/evacuate", &body).await {
        Ok((503, answer)) if incomplete(&answer).is_some() => {
            println!("{answer}");
            let (untold, connections) = incomplete(&answer).unwrap_or_default();
            eprintln!(
                "wsdr evacuate: INCOMPLETE: {untold} of {connections} connections were never told to move (their posts kept failing until the deadline)"
            );
            Ok(ExitCode::from(3))
        }
        Ok((200, answer)) => {
            println!("{answer}");
            Ok(ExitCode::SUCCESS)
        }
        Ok((status, answer)) => {
            eprintln!(
                "wsdr evacuate: the lab at {address} refused it (HTTP {status}): {answer}{}",
                super::token_hint(status)
            );
            Ok(ExitCode::FAILURE)
        }
        Err(error) => {
            eprintln!("wsdr evacuate: {error:#}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// An incomplete evacuation's answer: (untold, connections).
fn incomplete(answer: &str) -> Option<(u64, u64)> {
    let answer: serde_json::Value = serde_json::from_str(answer).ok()?;
    if answer.get("complete")?.as_bool()? {
        return None;
    }
    Some((
        answer.get("untold")?.as_u64()?,
        answer.pointer("/report/connections")?.as_u64()?,
    ))
}
