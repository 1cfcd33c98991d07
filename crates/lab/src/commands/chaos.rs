//! A chaos campaign: randomized fault schedules while users bid, each run checked by the
//! history checker; exits non-zero on any violation (docs/RELIABILITY.md).

use std::path::PathBuf;
use std::process::ExitCode;
use wsdr_lab::cli;
use wsdr_lab::TimeScale;

#[derive(clap::Args)]
pub struct Args {
    /// The campaign's seed: run 0 uses it, run i a seed drawn from it and i (`run_seed`).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Runs in the campaign (at least 1).
    #[arg(long, default_value = "50", value_parser = cli::at_least_one)]
    runs: usize,
    /// Start at this run's index: `--first-run 2000 --runs 2000` runs runs 2000..3999 of the
    /// seed's campaign, the same runs a campaign of 4,000 would end with (a long campaign in
    /// parts).
    #[arg(long, default_value_t = 0)]
    first_run: usize,
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
    /// Runs in flight at once, each with its own lab (seeds do not depend on it; a run's
    /// result is the same at any value). Default: this machine's cores.
    #[arg(long, value_parser = cli::at_least_one)]
    parallel: Option<usize>,
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
    /// The failover decision's timers: `wsdr` (the template's defaults: endpoint checks on
    /// both views, 20 s TTL) or `reference` (the reference design's one-minute alarms).
    #[arg(long, value_enum, default_value = "wsdr")]
    timers: wsdr_lab::runs::chaos::Timers,
    /// The users' app: `auction` (users bid on one lot, attackers on theirs) or `chat`
    /// (members post in one room); the same lab, faults and failover.
    #[arg(long, value_enum, default_value = "auction")]
    app: wsdr_lab::runs::chaos::App,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Args {
        seed,
        runs,
        first_run,
        users,
        time_scale,
        report,
        parallel,
        consistency,
        timers,
        clock,
        replay,
        history,
        schedule,
        shrink,
        app,
    } = args;
    let parallel = parallel.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let config = wsdr_lab::runs::chaos::ChaosConfig {
        seed,
        runs,
        first_run,
        users,
        scale: TimeScale::new(time_scale),
        clock: clock.into(),
        keep_history: history,
        progress: true,
        parallel,
        consistency: consistency.into(),
        timers,
        app,
        schedule: schedule.map(|s| s.0),
    };
    if let Some(seed) = replay {
        let run = if shrink {
            wsdr_lab::runs::chaos::shrink(seed, config).await?
        } else {
            wsdr_lab::runs::chaos::replay(seed, config).await?
        };
        if history {
            for line in &run.history {
                println!("{line}");
            }
        }
        println!(
            "replay seed {seed}: digest {}, {} faults, {} {} ({} acknowledged, {} unknown), {} violations{}",
            run.digest,
            run.faults,
            run.ops_invoked,
            app.op_noun(),
            run.ops_acknowledged,
            run.ops_unknown,
            run.violations.len(),
            if app == wsdr_lab::runs::chaos::App::Chat {
                format!(", {} holes reported to apps", run.discontinuities)
            } else {
                String::new()
            }
        );
        if !run.violations.is_empty() {
            if shrink {
                println!(
                    "shrunk to {} step(s): {}",
                    run.schedule.len(),
                    serde_json::to_string(&run.schedule)?
                );
            }
            eprintln!("{}", wsdr_lab::runs::chaos::describe(&run));
            return Ok(ExitCode::from(1));
        }
        return Ok(ExitCode::SUCCESS);
    }
    cli::ensure_writable(&report, "report")?;
    let clock_note = match config.clock {
        wsdr_lab::runs::chaos::Clock::Simulated => "simulated clock".to_owned(),
        wsdr_lab::runs::chaos::Clock::Real => format!("real clock, time scale {time_scale}"),
    };
    println!(
        "wsdr chaos: seed {seed}, {runs} runs{}, {users} users each, {clock_note}, {parallel} at once, {} consistency, {} timers, app {}",
        if first_run > 0 {
            format!(" (runs {first_run}..{})", first_run + runs - 1)
        } else {
            String::new()
        },
        wsdr_core::Consistency::from(consistency),
        timers.name(),
        app.name()
    );
    let result = wsdr_lab::runs::chaos::campaign(config).await?;
    wsdr_lab::runs::report::write_pretty_json(&report, &result)?;
    println!(
        "chaos: {} runs, {} faults injected, {} {} ({} acknowledged, {} unknown), {} violations, {:.1} s wall; report {}",
        result.runs,
        result.faults_injected,
        result.ops_invoked,
        app.op_noun(),
        result.ops_acknowledged,
        result.ops_unknown,
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
        "users: apps closed mid-{} {} (unanswered: unknown to the checker){}",
        if app == wsdr_lab::runs::chaos::App::Chat {
            "post"
        } else {
            "bid"
        },
        result.closed_mid_bid,
        if app == wsdr_lab::runs::chaos::App::Chat {
            format!("; holes reported to apps {}", result.discontinuities)
        } else {
            String::new()
        }
    );
    println!(
        "measured RPO: {} acknowledged {} lost with Regions that never returned",
        result.rpo_lost_acknowledged,
        app.op_noun()
    );
    println!(
        "excused: {} (docs/RELIABILITY.md, the guarantee table's exceptions)",
        result
            .excused
            .iter()
            .map(|(name, n)| format!("{name} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "watch and strike: {} of {} never-returns struck on what they watch for (a summary ahead of its copy; strong mode: a committed head the survivor's stream has not shown)",
        result.struck_summary_ahead,
        result
            .faults_by_kind
            .get("never-returns")
            .copied()
            .unwrap_or(0)
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
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
