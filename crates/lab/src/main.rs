//! `wsdr`: the lab, failover drills, and a one-shot probe.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use wsdr_lab::cli;
use wsdr_lab::report::Comparison;
use wsdr_lab::{drill, DrillConfig, Lab, LabConfig, Scenario, TimeScale};

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
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a failover drill and report RTO/RPO; exits non-zero unless nothing was lost.
    Drill {
        /// What breaks (see `wsdr drill --help` for each; docs/LAB.md).
        #[arg(long, value_enum, default_value = "throttle")]
        scenario: Scenario,
        /// Simulated users bidding through the global name (at least 1).
        #[arg(long, default_value = "50", value_parser = cli::at_least_one)]
        users: usize,
        /// One lab second stands for this many AWS seconds (above 0).
        #[arg(long, default_value = "60", value_parser = cli::time_scale)]
        time_scale: f64,
        /// Where the JSON report goes (docs/DRILL_REPORT.md); checked before the drill runs.
        #[arg(long, default_value = "target/wsdr/drill-report.json")]
        report: PathBuf,
        /// The drill chart (SVG); checked before the drill runs.
        #[arg(long, default_value = "target/wsdr/drill-timeline.svg")]
        chart: PathBuf,
        /// Seed of the users' randomness: the same seed, the same users.
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
        /// Once the failover decision has moved the name, tell the sessions still on the
        /// primary to move (`moveTo` through its @connections endpoint). On by default.
        #[arg(long, overrides_with = "no_evacuate_on_failover")]
        evacuate_on_failover: bool,
        /// Turn server-directed moves off (for a side-by-side comparison).
        #[arg(long, overrides_with = "evacuate_on_failover")]
        no_evacuate_on_failover: bool,
        /// What the failover records' health checks read: the verdict alarm (one-minute
        /// periods) or each Region's health endpoint (the fast verdict, polled every 10 s).
        /// With `endpoint` the alarm path is timed beside it in the same run.
        #[arg(long, value_enum, default_value = "alarm")]
        health_check: wsdr_lab::world::fast::HealthCheckKind,
        /// Run the fast path (fast verdict, health endpoints, endpoint checks) beside the
        /// alarm, to time both, even when the alarm decides.
        #[arg(long)]
        fast_path: bool,
        /// The state table's mode: `eventual` (two Regions, MREC) or `strong` (MRSC: the
        /// two Regions' replicas and a witness; bids ordered once, a Region without quorum
        /// redirects).
        #[arg(long, value_enum, default_value = "eventual")]
        consistency: cli::ConsistencyArg,
        /// Run the scenario in both modes with the same seed and compare (RTO, bid latency,
        /// bids accepted below another Region's, acknowledged bids lost, winners).
        #[arg(long, conflicts_with = "client_fallback")]
        compare_consistency: bool,
        /// Strong mode: what one strongly consistent request costs across Regions, AWS
        /// milliseconds (AWS publishes no figure; the default is an assumption).
        #[arg(long, default_value_t = 30)]
        strong_cost_ms: u64,
        /// `real` (default): the time-scaled real world, narrated as it happens; `simulated`:
        /// a deterministic simulation at AWS time (`--time-scale` ignored), a function of
        /// the seed and settings, done in seconds (the report's `digest` replays).
        #[arg(long, value_enum, default_value = "real")]
        clock: cli::ClockArg,
    },
    /// A chaos campaign: randomized fault schedules while users bid, each run checked by the
    /// history checker; exits non-zero on any violation (docs/RELIABILITY.md).
    Chaos {
        /// Seed of run 1; run i uses seed + i - 1.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Runs in the campaign (at least 1).
        #[arg(long, default_value = "50", value_parser = cli::at_least_one)]
        runs: usize,
        /// Users per run (at least 1).
        #[arg(long, default_value = "8", value_parser = cli::at_least_one)]
        users: usize,
        /// With `--clock real`: one lab second stands for this many AWS seconds (above 0).
        /// A simulated run is always at scale 1: its clock costs nothing.
        #[arg(long, default_value = "300", value_parser = cli::time_scale)]
        time_scale: f64,
        /// Where the JSON report goes; checked before the campaign runs.
        #[arg(long, default_value = "target/wsdr/chaos-report.json")]
        report: PathBuf,
        /// Runs in flight at once, each with its own lab (seeds do not depend on it).
        #[arg(long, default_value = "1", value_parser = cli::at_least_one)]
        parallel: usize,
        /// `simulated` (default): each run is a deterministic simulation, a function of its
        /// seed; `real`: the time-scaled real world, as `wsdr lab` runs.
        #[arg(long, value_enum, default_value = "simulated")]
        clock: cli::ClockArg,
        /// Replay the one run whose seed is given (as a run's line or a violation prints
        /// it) and print its digest; `--seed` and `--runs` are then ignored.
        #[arg(long)]
        replay: Option<u64>,
        /// With `--replay`: print the run's full history (the lines its digest is taken
        /// over). In a campaign: keep each run's history in the report.
        #[arg(long)]
        history: bool,
        /// With `--replay`: play this schedule (JSON, as a run's report or a violation prints
        /// it) instead of the one the seed draws; everything else still follows the seed.
        #[arg(long, requires = "replay", value_parser = cli::schedule)]
        schedule: Option<cli::ScheduleArg>,
        /// With `--replay`: if the run fails, drop faults one at a time while it still fails,
        /// and print the fewest that do, with the command that replays them.
        #[arg(long, requires = "replay")]
        shrink: bool,
        /// The state table's mode: `eventual` (two Regions, MREC) or `strong` (MRSC: the
        /// two Regions' replicas and a witness).
        #[arg(long, value_enum, default_value = "eventual")]
        consistency: cli::ConsistencyArg,
    },
    /// Many concurrent connections bidding for a while: lost bids, memory growth, stuck
    /// connections (docs/RELIABILITY.md).
    Load {
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
    },
    /// Start the lab and keep it running; faults through the control API.
    Lab {
        /// One lab second stands for this many AWS seconds (above 0).
        #[arg(long, default_value = "60", value_parser = cli::time_scale)]
        time_scale: f64,
        /// Keep each Region's state in DynamoDB Local at this endpoint.
        #[arg(long)]
        dynamodb: Option<String>,
        /// Control room and control API address (host:port; `localhost:8787` works).
        #[arg(long, default_value = "127.0.0.1:8787", value_parser = cli::address)]
        listen: std::net::SocketAddr,
        /// Serve the control API on a non-loopback address. It can mint user tokens and
        /// inject faults, so it then requires the control token printed at start.
        #[arg(long)]
        allow_remote: bool,
        /// Simulated users bidding through the global name while the lab runs (0: none).
        #[arg(long, default_value_t = 0)]
        users: usize,
        /// Mean AWS seconds between one simulated user's bids (above 0).
        #[arg(long, default_value = "20", value_parser = cli::positive_secs)]
        bid_every: f64,
        /// The state table's mode: `eventual` (MREC) or `strong` (MRSC with a witness).
        #[arg(long, value_enum, default_value = "eventual")]
        consistency: cli::ConsistencyArg,
    },
    /// Inject a fault into a running `wsdr lab` through its control API.
    Fault {
        /// What to break (or `heal`).
        #[arg(value_enum)]
        kind: cli::FaultKind,
        /// The Region: 0 or primary, 1 or secondary, or its name (us-east-1).
        #[arg(long, default_value = "0", value_parser = cli::region)]
        region: wsdr_lab::control::RegionRef,
        /// AWS milliseconds: `lag`, `skew` (may be negative), `sticky-dns`, `slow`.
        #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
        ms: i64,
        /// Share affected (0 to 100): `ack-lost`, `store-throttle`, `connections-throttle`.
        #[arg(long, value_parser = clap::value_parser!(u8).range(0..=100))]
        percent: Option<u8>,
        /// `one-way`: the Region whose outgoing replication is cut (as --region).
        #[arg(long, value_parser = cli::region)]
        from: Option<wsdr_lab::control::RegionRef>,
        /// The lab's control API (host:port).
        #[arg(long, default_value = "127.0.0.1:8787", value_parser = cli::address)]
        lab: std::net::SocketAddr,
        /// The control token a lab started with --allow-remote printed (or
        /// WSDR_LAB_CONTROL_TOKEN).
        #[arg(long, env = "WSDR_LAB_CONTROL_TOKEN", hide_env_values = true)]
        control_token: Option<String>,
    },
    /// Move every user off a Region of a running `wsdr lab`: take it out of DNS, wait for the
    /// name to answer the other Region, then tell each connection to move (`moveTo`) paced
    /// to the destination's quota. `wsdr service --in` puts it back afterwards.
    Evacuate {
        /// The Region to empty: 0 or primary, 1 or secondary, or its name.
        #[arg(long, value_parser = cli::region)]
        region: wsdr_lab::control::RegionRef,
        /// Do not touch DNS first (a failover already decided: the name answers elsewhere).
        #[arg(long)]
        unplanned: bool,
        /// Why, as the clients will see it.
        #[arg(long)]
        reason: Option<String>,
        /// The lab's control API (host:port).
        #[arg(long, default_value = "127.0.0.1:8787", value_parser = cli::address)]
        lab: std::net::SocketAddr,
        /// The control token a lab started with --allow-remote printed (or
        /// WSDR_LAB_CONTROL_TOKEN).
        #[arg(long, env = "WSDR_LAB_CONTROL_TOKEN", hide_env_values = true)]
        control_token: Option<String>,
    },
    /// Take a Region of a running `wsdr lab` out of DNS, or put it back in.
    Service {
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
    },
    /// Probe one WebSocket endpoint once (heartbeat + getState), like the canary.
    Probe {
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
    },
}

fn store_kind(dynamodb: Option<String>) -> wsdr_lab::store::StoreKind {
    match dynamodb {
        Some(endpoint) => wsdr_lab::store::StoreKind::Dynamo { endpoint },
        None => wsdr_lab::store::StoreKind::Memory,
    }
}

#[tokio::main]
async fn main() {
    if let Err(error) = run().await {
        // The chain in one line, never a backtrace: these are the user's errors to act on.
        eprintln!("wsdr: {error:#}");
        std::process::exit(1);
    }
}

async fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    wsdr_lab::console::init(cli.log_format);
    match cli.command {
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
            evacuate_on_failover: _,
            no_evacuate_on_failover,
            health_check,
            fast_path,
            consistency,
            compare_consistency,
            strong_cost_ms,
            clock,
        } => {
            let simulated = clock == cli::ClockArg::Simulated;
            anyhow::ensure!(
                !(simulated && dynamodb.is_some()),
                "a simulated drill runs on the lab's in-memory tables: DynamoDB Local is a real \
                 peer on a real clock (drop --dynamodb or --clock simulated)"
            );
            let run_drill = |config: DrillConfig| async move {
                if simulated {
                    drill::run_simulated(config).await
                } else {
                    drill::run(config).await
                }
            };
            let evacuate_on_failover = !no_evacuate_on_failover;
            cli::ensure_writable(&report, "report")?;
            cli::ensure_writable(&chart, "chart")?;
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
                    health_check,
                    fast: fast_path.then(Default::default),
                    consistency: if compare_consistency {
                        wsdr_core::Consistency::Eventual
                    } else {
                        consistency.into()
                    },
                    strong_request_cost: Duration::from_millis(strong_cost_ms),
                    ..LabConfig::default()
                },
                progress: true,
                evacuate_on_failover,
                ..DrillConfig::default()
            };
            if simulated {
                println!(
                    "wsdr drill: scenario {}, {users} users, simulated clock (AWS time; seed {seed})",
                    scenario.name()
                );
            } else {
                println!(
                    "wsdr drill: scenario {}, {users} users, time scale {time_scale} (1 lab s = {time_scale} AWS s)",
                    scenario.name()
                );
            }
            let result = run_drill(config.clone()).await?;
            println!();
            print!("{}", result.table());
            result.write_svg(&chart)?;
            let failed = if compare_consistency {
                println!("\nwsdr drill: the same scenario and seed, strong consistency (MRSC)");
                let mut strong_config = config.clone();
                strong_config.lab.consistency = wsdr_core::Consistency::Strong;
                let strong = run_drill(strong_config).await?;
                println!();
                print!("{}", strong.table());
                let comparison = wsdr_lab::runs::report::ConsistencyComparison {
                    scenario,
                    eventual: result,
                    strong,
                };
                println!();
                print!("{}", comparison.table());
                comparison.write_json(&report)?;
                both_runs_failures(
                    &comparison.eventual.failed_checks,
                    &comparison.strong.failed_checks,
                    "strong",
                )
            } else if client_fallback {
                println!("\nwsdr drill: the same scenario and seed, with client-assisted failover");
                let assisted = run_drill(DrillConfig {
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
                // The chart path gets both runs on one chart.
                comparison.write_svg(&chart)?;
                both_runs_failures(
                    &comparison.dns_only.failed_checks,
                    &comparison.client_assisted.failed_checks,
                    "client-assisted",
                )
            } else {
                result.write_json(&report)?;
                result.failed_checks.clone()
            };
            println!(
                "  report: {}  chart: {}  (wall time {:.1} s)",
                report.display(),
                chart.display(),
                started.elapsed().as_secs_f64()
            );
            if failed.is_empty() {
                println!("PASS");
            } else {
                println!("FAIL: {}", failed.join("; "));
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
            consistency,
            clock,
            replay,
            history,
            schedule,
            shrink,
        } => {
            let config = wsdr_lab::chaos::ChaosConfig {
                seed,
                runs,
                users,
                scale: TimeScale::new(time_scale),
                clock: clock.into(),
                keep_history: history,
                progress: true,
                parallel,
                consistency: consistency.into(),
                schedule: schedule.map(|s| s.0),
            };
            if let Some(seed) = replay {
                let run = if shrink {
                    wsdr_lab::chaos::shrink(seed, config).await?
                } else {
                    wsdr_lab::chaos::replay(seed, config).await?
                };
                if history {
                    for line in &run.history {
                        println!("{line}");
                    }
                }
                println!(
                    "replay seed {seed}: digest {}, {} faults, {} bids ({} acknowledged, {} unknown), {} violations",
                    run.digest,
                    run.faults,
                    run.bids_invoked,
                    run.bids_acknowledged,
                    run.bids_unknown,
                    run.violations.len()
                );
                if !run.violations.is_empty() {
                    if shrink {
                        println!(
                            "shrunk to {} step(s): {}",
                            run.schedule.len(),
                            serde_json::to_string(&run.schedule)?
                        );
                    }
                    eprintln!("{}", wsdr_lab::chaos::describe(&run));
                    std::process::exit(1);
                }
                return Ok(());
            }
            cli::ensure_writable(&report, "report")?;
            let clock_note = match config.clock {
                wsdr_lab::chaos::Clock::Simulated => "simulated clock".to_owned(),
                wsdr_lab::chaos::Clock::Real => format!("real clock, time scale {time_scale}"),
            };
            println!(
                "wsdr chaos: seed {seed}, {runs} runs, {users} users each, {clock_note}, {parallel} at once, {} consistency",
                wsdr_core::Consistency::from(consistency)
            );
            let result = wsdr_lab::chaos::campaign(config).await?;
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
            cli::ensure_writable(&report, "report")?;
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
            allow_remote,
            users,
            bid_every,
            consistency,
        } => {
            let control_token = if cli::is_loopback(&listen) {
                None
            } else if allow_remote {
                Some(wsdr_lab::control::new_control_token())
            } else {
                eprintln!(
                    "wsdr lab: refusing to serve the control API on {listen}: anyone who reaches it can mint user tokens and inject faults. \
                     Use a loopback address (127.0.0.1:8787, localhost:8787), or add --allow-remote to require a control token."
                );
                std::process::exit(2);
            };
            let lab = Arc::new(
                Lab::start(LabConfig {
                    scale: TimeScale::new(time_scale),
                    echo: true,
                    store: store_kind(dynamodb),
                    // An environment variable, not a flag: secrets stay out of `ps`.
                    canary_secret: std::env::var("WSDR_LAB_CANARY_SECRET").ok(),
                    // Runs for hours: the timeline keeps the recent past and every key event.
                    timeline_cap: Some(50_000),
                    consistency: consistency.into(),
                    ..LabConfig::default()
                })
                .await?,
            );
            let control =
                wsdr_lab::control::serve_with_token(lab.clone(), listen, control_token.clone())
                    .await
                    .map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e:#} (is another `wsdr lab` running? try --listen 127.0.0.1:0)"))?;
            println!(
                "wsdr lab {} running (time scale {time_scale})",
                env!("CARGO_PKG_VERSION")
            );
            println!("  global name (front door): {}", lab.front_door_url());
            for region in &lab.regions {
                println!("  {}: {}", region.name, region.url());
            }
            match &control_token {
                Some(token) => {
                    println!("  control room: http://{control}/?token={token}");
                    println!("  control API needs: Authorization: Bearer {token} (wsdr fault --control-token, or WSDR_LAB_CONTROL_TOKEN)");
                }
                None => println!("  control room: http://{control}/"),
            }
            println!("  control API: http://{control}/api/status ; POST http://{control}/api/fault {{\"kind\":\"throttle\",\"region\":0}}");
            println!("  metrics (Prometheus): http://{control}/metrics");
            let auction = wsdr_protocol::AuctionId::new("lot-1")?;
            let population = (users > 0).then(|| {
                println!("  {users} simulated users bidding on lot-1 through the global name");
                wsdr_lab::users::Population::through_front_door(
                    &lab,
                    users,
                    &auction,
                    wsdr_lab::users::Behaviour::honest(bid_every),
                    1,
                    |_| false,
                )
            });
            tokio::signal::ctrl_c().await?;
            if let Some(population) = population {
                population.close().await;
            }
        }
        Command::Fault {
            kind,
            region,
            ms,
            percent,
            from,
            lab,
            control_token,
        } => {
            let body = serde_json::json!({
                "kind": kind.api_name(),
                "region": region,
                "ms": ms,
                "percent": percent,
                "from": from,
            })
            .to_string();
            control_call(lab, control_token, "/api/fault", &body, "fault").await;
        }
        Command::Evacuate {
            region,
            unplanned,
            reason,
            lab,
            control_token,
        } => {
            let body =
                serde_json::json!({"region": region, "planned": !unplanned, "reason": reason})
                    .to_string();
            control_call(lab, control_token, "/api/evacuate", &body, "evacuate").await;
        }
        Command::Service {
            region,
            back_in,
            out,
            lab,
            control_token,
        } => {
            if back_in == out {
                eprintln!("wsdr service: say --in or --out");
                std::process::exit(2);
            }
            let body = serde_json::json!({"region": region, "in_service": back_in}).to_string();
            control_call(lab, control_token, "/api/service", &body, "service").await;
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
                    let text = failure.to_string();
                    let hint = if text.contains("403") || text.contains("401") {
                        "\n  the endpoint refused the handshake: pass a user token with --token (against the lab: GET http://127.0.0.1:8787/api/token?sub=you)"
                    } else {
                        ""
                    };
                    println!("unhealthy: {text}{hint}");
                    std::process::exit(1);
                }
            }
        }
    }
    Ok(())
}

/// One control API call from the CLI: print the answer, or say what went wrong and exit 1.
async fn control_call(
    lab: std::net::SocketAddr,
    token: Option<String>,
    path: &str,
    body: &str,
    command: &str,
) {
    // An evacuation waits for DNS (a few TTLs) before it answers.
    let client = wsdr_lab::control::ControlClient::new(lab, token)
        .with_timeout(std::time::Duration::from_secs(900));
    match client.post_json(path, body).await {
        Ok((200, answer)) => println!("{answer}"),
        Ok((status, answer)) => {
            let hint = if status == 401 {
                " (this lab wants its control token: --control-token or WSDR_LAB_CONTROL_TOKEN)"
            } else {
                ""
            };
            eprintln!(
                "wsdr {command}: the lab at {lab} refused it (HTTP {status}): {answer}{hint}"
            );
            std::process::exit(1);
        }
        Err(error) => {
            eprintln!("wsdr {command}: {error:#}");
            std::process::exit(1);
        }
    }
}

/// The failed checks of a compared pair of drills: the first run's as they are, the second's
/// prefixed with its name.
fn both_runs_failures(first: &[String], second: &[String], second_name: &str) -> Vec<String> {
    first
        .iter()
        .cloned()
        .chain(second.iter().map(|c| format!("{second_name}: {c}")))
        .collect()
}
