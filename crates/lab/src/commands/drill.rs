//! Run a failover drill and report RTO/RPO; exits non-zero unless nothing was lost.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use wsdr_lab::cli;
use wsdr_lab::runs::report::Comparison;
use wsdr_lab::{AwsDuration, DrillConfig, LabConfig, Scenario, TimeScale};

#[derive(clap::Args)]
pub struct Args {
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
    /// DNS TTL of the failover records, AWS seconds (default: 20, wsdr's default; 60 with
    /// --reference).
    #[arg(long)]
    dns_ttl: Option<u64>,
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
    /// What the failover records' health checks read: `endpoint` (wsdr's default: the fast
    /// verdict, decided and served in the secondary, polled every 10 s; the alarm path is
    /// timed beside it in the same run) or `alarm` (the verdict alarm's one-minute periods;
    /// the default with --reference).
    #[arg(long, value_enum)]
    health_check: Option<wsdr_lab::world::fast::HealthCheckKind>,
    /// The reference design's settings: the verdict alarm behind the records, a 60 s TTL,
    /// nobody told to move (users follow DNS unless --client-fallback).
    #[arg(long)]
    reference: bool,
    /// The demo: the scenario three times with the same seed, on one time axis: the
    /// reference design (alarm, 60 s TTL, DNS-only users), wsdr's defaults with DNS-only
    /// users, and wsdr's defaults with wsdr clients (regional fallback, server-directed
    /// moves); one report, one chart, wsdr's RTO targets checked.
    #[arg(long, conflicts_with_all = ["client_fallback", "compare_consistency", "reference"])]
    compare_reference: bool,
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
    /// With --compare-reference --clock simulated (the demo): after the three simulated
    /// runs that decide the verdict, run wsdr's defaults with wsdr clients once more on real
    /// sockets at this time scale, narrated live, with this machine's scheduling stalls
    /// measured beside it. Its figures are shown and recorded (`real_time` in the report),
    /// never part of the verdict.
    #[arg(long, value_parser = cli::time_scale, requires = "compare_reference")]
    real_beside: Option<f64>,
    /// What Route 53's endpoint checks reach: `direct` (wsdr's: each Region's health
    /// function URL) or `cloudfront` (the front wsdr deployed before, modelled by CloudFront's
    /// documented rules: docs/LAB.md).
    #[arg(long, value_enum, default_value = "direct")]
    health_front: wsdr_lab::world::config::HealthFront,
    /// How the primary's evacuator handles fail-over orders: `wsdr` (each claimed once,
    /// re-checked, DNS asked until a deadline, a minute sweep) or `before` (every delivery
    /// ran, unchecked, after a fixed wait; no sweep).
    #[arg(long, value_enum, default_value = "wsdr")]
    orders: wsdr_lab::world::config::OrderHandling,
    /// The push jobs' queue and workers: `wsdr` (visibility 60 s, retention 1,200 s, workers
    /// reserved) or `before` (visibility 180 s, retention 300 s, workers unreserved: what
    /// the `push-herd` scenario fails on).
    #[arg(long, value_enum, default_value = "wsdr")]
    push_jobs: wsdr_lab::world::push_jobs::PushJobQueue,
    /// What the health functions' URLs grant: `both` (wsdr's: `lambda:InvokeFunctionUrl` and
    /// `lambda:InvokeFunction`) or `url-only` (what the earlier design granted its front:
    /// every request refused, 403).
    #[arg(long, value_enum, default_value = "both")]
    function_url_permissions: cli::UrlPermissionsArg,
    /// Which checks the failover records carry: `wsdr` (either view of the primary keeps
    /// its record; the secondary's API endpoint keeps the secondary's) or `reference` (one
    /// check per record on its Region's verdict; the default with --reference).
    #[arg(long, value_enum)]
    composition: Option<wsdr_lab::world::config::Composition>,
    /// How each new authorizer sandbox reads its two keys: `get-each` (wsdr's: one
    /// `GetSecretValue` each, quota 10,000/s) or `batch` (one `BatchGetSecretValue`, quota
    /// 100/s: what the `secrets-storm` scenario fails on).
    #[arg(long, value_enum, default_value = "get-each")]
    authorizer_secrets: wsdr_lab::world::secrets::SecretCall,
    /// The users' app: `auction` (users bid on `lot-1`; the drill report of
    /// docs/DRILL_REPORT.md) or `chat` (members post in `chat:lobby`, judged by the kit's
    /// rules and the room's; the chat drill's report, same file).
    #[arg(long, value_enum, default_value = "auction", conflicts_with_all = ["compare_reference", "compare_consistency", "client_fallback"])]
    app: wsdr_lab::runs::chaos::App,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Args {
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
        reference,
        compare_reference,
        fast_path,
        consistency,
        compare_consistency,
        strong_cost_ms,
        clock,
        real_beside,
        authorizer_secrets,
        health_front,
        orders,
        push_jobs,
        function_url_permissions,
        composition,
        app,
    } = args;
    let simulated = clock == cli::ClockArg::Simulated;
    anyhow::ensure!(
        !(simulated && dynamodb.is_some()),
        "a simulated drill runs on the lab's in-memory tables: DynamoDB Local is a real \
         peer on a real clock (drop --dynamodb or --clock simulated)"
    );
    let run_drill = |config: DrillConfig| async move {
        if simulated {
            wsdr_lab::runs::drill::run_simulated(config).await
        } else {
            wsdr_lab::runs::drill::run(config).await
        }
    };
    // The reference design tells nobody to move.
    let evacuate_on_failover = !no_evacuate_on_failover && !reference;
    let settings = if reference {
        LabConfig::reference()
    } else {
        LabConfig::wsdr_defaults()
    };
    let settings = LabConfig {
        composition: composition.unwrap_or(settings.composition),
        health_front,
        orders,
        push_jobs,
        function_url: function_url_permissions.into(),
        identity: wsdr_lab::world::identity::IdentityConfig {
            secrets: wsdr_lab::world::secrets::SecretReads {
                call: authorizer_secrets,
                ..settings.identity.secrets
            },
            ..settings.identity
        },
        ..settings
    };
    let health_check = health_check.unwrap_or(settings.health_check);
    let endpoint_checks = health_check == wsdr_lab::world::fast::HealthCheckKind::Endpoint;
    cli::ensure_writable(&report, "report")?;
    cli::ensure_writable(&chart, "chart")?;
    let started = std::time::Instant::now();
    let config = DrillConfig {
        scenario,
        users,
        seed,
        lab: LabConfig {
            scale: TimeScale::new(time_scale),
            dns_ttl: dns_ttl.map_or(settings.dns_ttl, AwsDuration::from_secs),
            replication_lag: AwsDuration::from_millis(lag_ms),
            echo: true,
            store: super::store_kind(dynamodb),
            health_check,
            fast: (fast_path || endpoint_checks).then(Default::default),
            consistency: if compare_consistency {
                wsdr_core::Consistency::Eventual
            } else {
                consistency.into()
            },
            strong_request_cost: AwsDuration::from_millis(strong_cost_ms),
            ..settings
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
    if app == wsdr_lab::runs::chaos::App::Chat {
        return chat_drill(config, simulated, &report, started).await;
    }
    if compare_reference {
        anyhow::ensure!(
            real_beside.is_none() || simulated,
            "--real-beside shows a real-time run beside a simulated verdict: add --clock simulated"
        );
        return compare_with_reference(config, real_beside, &report, &chart, started, run_drill)
            .await;
    }
    let result = run_drill(config.clone()).await?;
    println!();
    print!("{}", result.table());
    wsdr_lab::runs::chart::drill(&result, &chart)?;
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
        wsdr_lab::runs::chart::drill(&assisted, &assisted_chart)?;
        let comparison = Comparison::new(result, assisted);
        println!();
        print!("{}", comparison.table());
        comparison.write_json(&report)?;
        // The chart path gets both runs on one chart.
        wsdr_lab::runs::chart::comparison(&comparison, &chart)?;
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
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// The chat room's drill: its own report (no chart: the timeline chart is drawn from bids).
async fn chat_drill(
    config: DrillConfig,
    simulated: bool,
    report: &std::path::Path,
    started: std::time::Instant,
) -> anyhow::Result<ExitCode> {
    let result = if simulated {
        wsdr_lab::runs::chat_drill::run_simulated(config).await?
    } else {
        wsdr_lab::runs::chat_drill::run(config).await?
    };
    let secs = |v: Option<f64>| v.map_or("-".to_owned(), |s| format!("{s:.1} s"));
    println!();
    println!(
        "  chat room: {} members, {} messages ({} acknowledged, {} unknown), {} acknowledged lost, {} holes reported",
        result.members,
        result.messages_invoked,
        result.messages_acknowledged,
        result.messages_unknown,
        result.rpo_lost_acknowledged,
        result.discontinuities
    );
    println!(
        "  detected {}, DNS moved {}, members back in the secondary {} of {} (p50 {}, max {}), failed back {}",
        secs(result.detected_after_s),
        secs(result.dns_moved_after_s),
        result.members_restored_on_secondary,
        result.members,
        secs(result.restored_after_s.p50),
        secs(result.restored_after_s.max),
        result.failed_back
    );
    println!(
        "  converged {}, violations {}, excused {:?}, digest {}",
        result.converged,
        result.violations.len(),
        result.excused,
        result.digest
    );
    for violation in result.violations.iter().take(10) {
        println!("  violation: {}", serde_json::to_string(violation)?);
    }
    if let Some(dir) = report.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(report, serde_json::to_string_pretty(&result)?)?;
    println!(
        "  report: {}  (wall time {:.1} s)",
        report.display(),
        started.elapsed().as_secs_f64()
    );
    if result.passed {
        println!("PASS");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("FAIL");
        Ok(ExitCode::from(1))
    }
}

/// The demo: the reference design, then wsdr's defaults with DNS-only users, then with wsdr
/// clients; the same scenario and seed, one report, one chart.
async fn compare_with_reference<F, Fut>(
    wsdr: DrillConfig,
    real_beside: Option<f64>,
    report: &std::path::Path,
    chart: &std::path::Path,
    started: std::time::Instant,
    run_drill: F,
) -> anyhow::Result<ExitCode>
where
    F: Fn(DrillConfig) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<wsdr_lab::runs::report::Report>>,
{
    let reference_lab = LabConfig {
        scale: wsdr.lab.scale,
        replication_lag: wsdr.lab.replication_lag,
        echo: wsdr.lab.echo,
        store: wsdr.lab.store.clone(),
        consistency: wsdr.lab.consistency,
        strong_request_cost: wsdr.lab.strong_request_cost,
        ..LabConfig::reference()
    };
    let real_config = real_beside.map(|scale| DrillConfig {
        client_fallback: true,
        lab: LabConfig {
            scale: TimeScale::new(scale),
            ..wsdr.lab.clone()
        },
        ..wsdr.clone()
    });
    let runs = [
        (
            "the reference design: verdict alarm, 60 s TTL, DNS-only users",
            DrillConfig {
                lab: reference_lab,
                evacuate_on_failover: false,
                client_fallback: false,
                ..wsdr.clone()
            },
        ),
        (
            "wsdr's defaults: fast verdict decided in the secondary, 20 s TTL, DNS-only users",
            DrillConfig {
                client_fallback: false,
                ..wsdr.clone()
            },
        ),
        (
            "wsdr's defaults with wsdr clients (regional fallback, server-directed moves)",
            DrillConfig {
                client_fallback: true,
                ..wsdr
            },
        ),
    ];
    let mut reports = Vec::new();
    for (i, (what, config)) in runs.into_iter().enumerate() {
        println!("\nwsdr drill {}/3: {what}", i + 1);
        let result = run_drill(config).await?;
        println!();
        print!("{}", result.table());
        reports.push(result);
    }
    let [reference, dns_only, clients]: [wsdr_lab::runs::report::Report; 3] = reports
        .try_into()
        .map_err(|_| anyhow::anyhow!("three drills, three reports"))?;
    let mut comparison =
        wsdr_lab::runs::report::ReferenceComparison::new(reference, dns_only, clients);
    if let Some(config) = real_config {
        println!(
            "\nwsdr drill, beside the verdict: wsdr clients on real sockets at time scale {} \
             (figures depend on this machine's speed; the verdict does not)",
            config.lab.scale.factor()
        );
        let scale = config.lab.scale.factor();
        let meter = wsdr_lab::runs::stalls::StallMeter::start(Duration::from_millis(10));
        let result = wsdr_lab::runs::drill::run(config).await;
        let stalls = meter.stop(scale);
        match result {
            Ok(result) => {
                comparison.real_time =
                    Some(wsdr_lab::runs::report::RealTimeRun::new(result, stalls));
            }
            // Not the verdict either: a machine too busy to reach steady state says so.
            Err(error) => {
                println!(
                    "beside the verdict: the real-time run did not complete ({error:#}); {}",
                    stalls.line()
                );
                comparison.real_time_error = Some(format!("{error:#}"));
            }
        }
    }
    println!();
    print!("{}", comparison.table());
    comparison.write_json(report)?;
    wsdr_lab::runs::chart::reference_comparison(&comparison, chart)?;
    println!(
        "  report: {}  chart: {}  (wall time {:.1} s)",
        report.display(),
        chart.display(),
        started.elapsed().as_secs_f64()
    );
    let failed = comparison.failures();
    if failed.is_empty() {
        println!("PASS");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("FAIL: {}", failed.join("; "));
        Ok(ExitCode::from(1))
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
