//! One module per `wsdr` command: each has its arguments (`Args`) and its `run`, which says
//! how the process ends ([`ExitCode`]): 0 when everything passed, 1 when a run found what it
//! looks for (a failed check, a violation, an unhealthy endpoint), 2 when the command line
//! asked for something it must not do.

pub mod chaos;
pub mod drill;
pub mod evacuate;
pub mod fault;
pub mod lab;
pub mod load;
pub mod probe;
pub mod rehearse;
pub mod service;
pub mod smoke;

use std::process::ExitCode;
use wsdr_lab::cli;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Run a failover drill and report RTO/RPO; exits non-zero unless nothing was lost.
    Drill(drill::Args),
    /// A chaos campaign: randomized fault schedules while users bid, each run checked by the
    /// history checker; exits non-zero on any violation (docs/RELIABILITY.md).
    Chaos(chaos::Args),
    /// Many concurrent connections bidding for a while: lost bids, memory growth, stuck
    /// connections (docs/RELIABILITY.md).
    Load(load::Args),
    /// Start the lab and keep it running; faults through the control API.
    Lab(lab::Args),
    /// Inject a fault into a running `wsdr lab` through its control API.
    Fault(fault::Args),
    /// Move every user off a Region of a running `wsdr lab`: take it out of DNS, wait for the
    /// name to answer the other Region, then tell each connection to move (`moveTo`) paced
    /// to the destination's quota. `wsdr service --in` puts it back afterwards.
    Evacuate(evacuate::Args),
    /// Take a Region of a running `wsdr lab` out of DNS, or put it back in.
    Service(service::Args),
    /// The failover decision proves itself without moving a user: pre-flight of every check,
    /// then a rehearsal record pair forced to fail over and back, timed as a resolver sees it
    /// (a running lab, or `--aws`: docs/DEPLOY.md, "Rehearse").
    Rehearse(rehearse::Args),
    /// Probe one WebSocket endpoint once (heartbeat + getState), like the canary.
    Probe(probe::Args),
    /// After a deploy: one user on each endpoint (each Region's own, the global name) sends
    /// heartbeat, getState and one bid; prints which Region answered each (`make smoke`).
    Smoke(smoke::Args),
}

impl Command {
    pub async fn run(self) -> anyhow::Result<ExitCode> {
        match self {
            Command::Drill(args) => drill::run(args).await,
            Command::Chaos(args) => chaos::run(args).await,
            Command::Load(args) => load::run(args).await,
            Command::Lab(args) => lab::run(args).await,
            Command::Fault(args) => fault::run(args).await,
            Command::Evacuate(args) => evacuate::run(args).await,
            Command::Service(args) => service::run(args).await,
            Command::Rehearse(args) => rehearse::run(args).await,
            Command::Probe(args) => probe::run(args).await,
            Command::Smoke(args) => smoke::run(args).await,
        }
    }
}

fn store_kind(dynamodb: Option<String>) -> wsdr_lab::world::store::StoreKind {
    match dynamodb {
        Some(endpoint) => wsdr_lab::world::store::StoreKind::Dynamo { endpoint },
        None => wsdr_lab::world::store::StoreKind::Memory,
    }
}

/// Where a running `wsdr lab` listens, and its control token.
#[derive(clap::Args)]
pub struct LabAddress {
    /// The lab's control API (host:port).
    #[arg(long, default_value = "127.0.0.1:8787", value_parser = cli::address)]
    lab: std::net::SocketAddr,
    /// The control token a lab started with --allow-remote printed (or
    /// WSDR_LAB_CONTROL_TOKEN).
    #[arg(long, env = "WSDR_LAB_CONTROL_TOKEN", hide_env_values = true)]
    control_token: Option<String>,
}

impl LabAddress {
    /// A control API client for this lab.
    pub fn client(self) -> wsdr_lab::world::control::ControlClient {
        wsdr_lab::world::control::ControlClient::new(self.lab, self.control_token)
    }
}

/// What to add to a refusal: a 401 means the lab wants its control token.
fn token_hint(status: u16) -> &'static str {
    if status == 401 {
        " (this lab wants its control token: --control-token or WSDR_LAB_CONTROL_TOKEN)"
    } else {
        ""
    }
}

/// One control API call from the CLI: print the answer, or say what went wrong (exit 1).
async fn control_call(
    LabAddress {
        lab,
        control_token: token,
    }: LabAddress,
    path: &str,
    body: &str,
    command: &str,
) -> ExitCode {
    // An evacuation waits for DNS (a few TTLs) before it answers.
    let client = wsdr_lab::world::control::ControlClient::new(lab, token)
        .with_timeout(std::time::Duration::from_secs(900));
    match client.post_json(path, body).await {
        Ok((200, answer)) => {
            println!("{answer}");
            ExitCode::SUCCESS
        }
        Ok((status, answer)) => {
            let hint = token_hint(status);
            eprintln!(
                "wsdr {command}: the lab at {lab} refused it (HTTP {status}): {answer}{hint}"
            );
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("wsdr {command}: {error:#}");
            ExitCode::FAILURE
        }
    }
}
