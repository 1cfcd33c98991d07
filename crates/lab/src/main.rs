//! `wsdr`: the lab, failover drills, and a one-shot probe.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use wsdr_lab::report::Comparison;
use wsdr_lab::{drill, DrillConfig, Lab, LabConfig, Scenario, TimeScale};

#[derive(Parser)]
#[command(
    name = "wsdr",
    about = "Multi-Region disaster recovery for API Gateway WebSocket APIs: lab and drills"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a failover drill and report RTO/RPO; exits non-zero unless nothing was lost.
    Drill {
        #[arg(long, value_enum, default_value = "throttle")]
        scenario: Scenario,
        #[arg(long, default_value_t = 50)]
        users: usize,
        /// One lab second stands for this many AWS seconds.
        #[arg(long, default_value_t = 60.0)]
        time_scale: f64,
        #[arg(long, default_value = "target/wsdr/drill-report.json")]
        report: PathBuf,
        /// The timeline chart (SVG).
        #[arg(long, default_value = "target/wsdr/drill-timeline.svg")]
        chart: PathBuf,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// DNS TTL of the failover record, AWS seconds.
        #[arg(long, default_value_t = 60)]
        dns_ttl: u64,
        /// Replication lag, AWS milliseconds.
        #[arg(long, default_value_t = 800)]
        lag_ms: u64,
        /// Keep each Region's state in DynamoDB Local at this endpoint (e.g.
        /// http://127.0.0.1:8000) instead of memory; replicated the same way.
        #[arg(long)]
        dynamodb: Option<String>,
        /// Run the scenario twice with the same seed, DNS-only then with client-assisted
        /// failover (users also know the Regions' own endpoints), and compare.
        #[arg(long)]
        client_fallback: bool,
    },
    /// A chaos campaign: randomized fault schedules while users bid, each run checked by the
    /// history checker; exits non-zero on any violation (docs/RELIABILITY.md).
    Chaos {
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, default_value_t = 50)]
        runs: usize,
        #[arg(long, default_value_t = 8)]
        users: usize,
        #[arg(long, default_value_t = 300.0)]
        time_scale: f64,
        #[arg(long, default_value = "target/wsdr/chaos-report.json")]
        report: PathBuf,
        /// Runs in flight at once, each with its own lab (seeds do not depend on it).
        #[arg(long, default_value_t = 1)]
        parallel: usize,
    },
    /// Many concurrent connections bidding for a while: lost bids, memory growth, stuck
    /// connections (docs/RELIABILITY.md).
    Load {
        #[arg(long, default_value_t = 5000)]
        connections: usize,
        #[arg(long, default_value_t = 60.0)]
        secs: f64,
        /// Mean seconds between one user's bids.
        #[arg(long, default_value_t = 30.0)]
        bid_every: f64,
        #[arg(long, default_value = "target/wsdr/load-report.json")]
        report: PathBuf,
    },
    /// Start the lab and keep it running; faults through the control API.
    Lab {
        #[arg(long, default_value_t = 60.0)]
        time_scale: f64,
        /// Keep each Region's state in DynamoDB Local at this endpoint.
        #[arg(long)]
        dynamodb: Option<String>,
        /// Control API address.
        #[arg(long, default_value = "127.0.0.1:8787")]
        listen: std::net::SocketAddr,
    },
    /// Inject a fault into a running `wsdr lab` through its control API.
    Fault {
        /// down, throttle, partition, lag, never-returns, ack-lost, store-throttle,
        /// store-outage, connections-throttle, disconnect-dropped, skew, one-way, sticky-dns,
        /// slow, heal (docs/LAB.md)
        kind: String,
        /// 0 = primary, 1 = secondary
        #[arg(long, default_value_t = 0)]
        region: usize,
        /// AWS milliseconds: `lag`, `skew` (may be negative), `sticky-dns`, `slow`.
        #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
        ms: i64,
        /// Share affected (0 to 100): `ack-lost`, `store-throttle`, `connections-throttle`.
        #[arg(long)]
        percent: Option<u8>,
        /// `one-way`: the Region whose outgoing replication is cut.
        #[arg(long)]
        from: Option<usize>,
        #[arg(long, default_value = "127.0.0.1:8787")]
        lab: std::net::SocketAddr,
    },
    /// Probe one WebSocket endpoint once (heartbeat + getState), like the canary.
    Probe {
        url: String,
        #[arg(long)]
        region: String,
        #[arg(long)]
        token: Option<String>,
        #[arg(long, default_value = "canary")]
        auction: String,
        #[arg(long, default_value_t = 5)]
        timeout_secs: u64,
    },
}

fn store_kind(dynamodb: Option<String>) -> wsdr_lab::store::StoreKind {
    match dynamodb {
        Some(endpoint) => wsdr_lab::store::StoreKind::Dynamo { endpoint },
        None => wsdr_lab::store::StoreKind::Memory,
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            // The emulated Lambdas' own logs (their CloudWatch Logs) are off by default:
            // injected faults make them log errors by design. RUST_LOG=ws_handler=info,... shows them.
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                "error,wsdr_core=off,ws_handler=off,authorizer=off,canary=off".into()
            }),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Drill {
            scenario,
            users,
            time_scale,
            report,
            chart,
            seed,
            dns_ttl,
            lag_ms,
            dynamodb,
            client_fallback,
        } => {
            let started = std::time::Instant::now();
            let config = DrillConfig {
                scenario,
                users,
                seed,
                lab: LabConfig {
                    scale: TimeScale::new(time_scale),
                    dns_ttl: Duration::from_secs(dns_ttl),
                    replication_lag: Duration::from_millis(lag_ms),
                    echo: true,
                    store: store_kind(dynamodb),
                    ..LabConfig::default()
                },
                progress: true,
                ..DrillConfig::default()
            };
            println!("wsdr drill: scenario {scenario:?}, {users} users, time scale {time_scale} (1 lab s = {time_scale} AWS s)");
            let result = drill::run(config.clone()).await?;
            println!();
            print!("{}", result.table());
            result.write_svg(&chart)?;
            let passed = if client_fallback {
                println!("\nwsdr drill: the same scenario and seed, with client-assisted failover");
                let assisted = drill::run(DrillConfig {
                    client_fallback: true,
                    ..config
                })
                .await?;
                println!();
                print!("{}", assisted.table());
                let assisted_chart = chart.with_file_name(format!(
                    "{}-client-fallback.svg",
                    chart
                        .file_stem()
                        .and_then(|s| s.to_str())
                        .unwrap_or("drill-timeline")
                ));
                assisted.write_svg(&assisted_chart)?;
                let comparison = Comparison::new(result, assisted);
                println!();
                print!("{}", comparison.table());
                comparison.write_json(&report)?;
                comparison.passed()
            } else {
                result.write_json(&report)?;
                result.passed()
            };
            println!(
                "  report: {}  chart: {}  (wall time {:.1} s)",
                report.display(),
                chart.display(),
                started.elapsed().as_secs_f64()
            );
            if !passed {
                std::process::exit(1);
            }
        }
        Command::Chaos {
            seed,
            runs,
            users,
            time_scale,
            report,
            parallel,
        } => {
            println!(
                "wsdr chaos: seed {seed}, {runs} runs, {users} users each, time scale {time_scale}, {parallel} at once"
            );
            let result = wsdr_lab::chaos::campaign(wsdr_lab::chaos::ChaosConfig {
                seed,
                runs,
                users,
                scale: TimeScale::new(time_scale),
                progress: true,
                parallel,
            })
            .await?;
            if let Some(dir) = report.parent() {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::write(&report, serde_json::to_vec_pretty(&result)?)?;
            println!(
                "chaos: {} runs, {} faults injected, {} bids ({} acknowledged, {} unknown), {} violations, {:.1} s wall; report {}",
                result.runs,
                result.faults_injected,
                result.bids_invoked,
                result.bids_acknowledged,
                result.bids_unknown,
                result.violations,
                result.wall_seconds,
                report.display()
            );
            let kinds: Vec<String> = result
                .faults_by_kind
                .iter()
                .map(|(kind, n)| format!("{kind} {n}"))
                .collect();
            println!("faults by kind: {}", kinds.join(", "));
            println!(
                "users: apps closed mid-bid {} (their bids unanswered: unknown to the checker)",
                result.closed_mid_bid
            );
            println!(
                "measured RPO: {} acknowledged bids lost with Regions that never returned",
                result.rpo_lost_acknowledged
            );
            println!(
                "held: descriptors {} -> {} (peak {}), tasks {} -> {} (peak {})",
                result.holdings_start.descriptors,
                result.holdings_end.descriptors,
                result.holdings_peak.descriptors,
                result.holdings_start.tasks,
                result.holdings_end.tasks,
                result.holdings_peak.tasks
            );
            if result.violations > 0 {
                std::process::exit(1);
            }
        }
        Command::Load {
            connections,
            secs,
            bid_every,
            report,
        } => {
            println!("wsdr load: {connections} connections bidding for {secs} s");
            let result = wsdr_lab::load::run(wsdr_lab::load::LoadConfig {
                connections,
                secs,
                bid_every_secs: bid_every,
                ..Default::default()
            })
            .await?;
            if let Some(dir) = report.parent() {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::write(&report, serde_json::to_vec_pretty(&result)?)?;
            println!("{}", serde_json::to_string_pretty(&result)?);
            if !result.passed {
                std::process::exit(1);
            }
        }
        Command::Lab {
            time_scale,
            dynamodb,
            listen,
        } => {
            let lab = Arc::new(
                Lab::start(LabConfig {
                    scale: TimeScale::new(time_scale),
                    echo: true,
                    store: store_kind(dynamodb),
                    // An environment variable, not a flag: secrets stay out of `ps`.
                    canary_secret: std::env::var("WSDR_LAB_CANARY_SECRET").ok(),
                    ..LabConfig::default()
                })
                .await?,
            );
            let control = wsdr_lab::control::serve(lab.clone(), listen).await?;
            println!("wsdr lab running (time scale {time_scale})");
            println!("  global name (front door): {}", lab.front_door_url());
            for region in &lab.regions {
                println!("  {}: {}", region.name, region.url());
            }
            println!("  control room: http://{control}/");
            println!("  control API: http://{control}/api/status ; POST http://{control}/api/fault {{\"kind\":\"throttle\",\"region\":0}}");
            tokio::signal::ctrl_c().await?;
        }
        Command::Fault {
            kind,
            region,
            ms,
            percent,
            from,
            lab,
        } => {
            let request = wsdr_lab::control::FaultRequest {
                kind: kind.clone(),
                region,
                ms,
                percent,
                from,
            };
            if let Err(error) = wsdr_lab::control::parse_fault(&request) {
                eprintln!("wsdr fault: {error}");
                std::process::exit(2);
            }
            let body = serde_json::json!({"kind": kind, "region": region, "ms": ms, "percent": percent, "from": from}).to_string();
            let (status, answer) = wsdr_lab::control::post_json(lab, "/api/fault", &body).await?;
            println!("{answer}");
            if status != 200 {
                std::process::exit(1);
            }
        }
        Command::Probe {
            url,
            region,
            token,
            auction,
            timeout_secs,
        } => {
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
                    println!("unhealthy: {failure}");
                    std::process::exit(1);
                }
            }
        }
    }
    Ok(())
}
