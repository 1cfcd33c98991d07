//! Many concurrent connections bidding for a while: lost bids, memory growth, stuck
//! connections (docs/RELIABILITY.md).

use std::path::PathBuf;
use std::process::ExitCode;
use wsdr_lab::cli;

#[derive(clap::Args)]
pub struct Args {
    /// Concurrent connections (at least 1).
    #[arg(long, default_value = "5000", value_parser = cli::at_least_one)]
    connections: usize,
    /// How long they bid, seconds (above 0).
    #[arg(long, default_value = "60", value_parser = cli::positive_secs)]
    secs: f64,
    /// Mean seconds between one user's bids (above 0).
    #[arg(long, default_value = "30", value_parser = cli::positive_secs)]
    bid_every: f64,
    /// Where the JSON report goes; checked before the run.
    #[arg(long, default_value = "target/wsdr/load-report.json")]
    report: PathBuf,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Args {
        connections,
        secs,
        bid_every,
        report,
    } = args;
    cli::ensure_writable(&report, "report")?;
    println!("wsdr load: {connections} connections bidding for {secs} s");
    let result = wsdr_lab::runs::load::run(wsdr_lab::runs::load::LoadConfig {
        connections,
        secs,
        bid_every_secs: bid_every,
        ..Default::default()
    })
    .await?;
    wsdr_lab::runs::report::write_pretty_json(&report, &result)?;
    println!("{}", serde_json::to_string_pretty(&result)?);
    if !result.passed {
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
