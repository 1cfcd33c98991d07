//! `wsdr`: the lab, failover drills, chaos campaigns, and a one-shot probe. Each command is a
//! module of `commands`; this file parses the command line and turns the outcome into the
//! process's exit code.

mod commands;

use clap::Parser;
use std::process::ExitCode;

/// A simulated chaos run is mostly small allocations (the SDK's requests, frames, JSON);
/// glibc's malloc was a fifth of its profile.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "wsdr",
    version,
    about = "Multi-Region disaster recovery for API Gateway WebSocket APIs: lab and drills"
)]
struct Cli {
    /// How log and timeline events are written (stderr): text for people, json for tools.
    #[arg(long, global = true, value_enum, default_value = "text")]
    log_format: wsdr_lab::console::LogFormat,
    #[command(subcommand)]
    command: commands::Command,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    wsdr_lab::console::init(cli.log_format);
    match cli.command.run().await {
        Ok(code) => code,
        Err(error) => {
            // The chain in one line, never a backtrace: these are the user's errors to act on.
            eprintln!("wsdr: {error:#}");
            ExitCode::FAILURE
        }
    }
}
