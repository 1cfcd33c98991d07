//! `wsdr rehearse`: the failover decision proves itself without moving a user
//! (`wsdr_rehearse`; docs/DEPLOY.md, "Rehearse"). Against a running `wsdr lab` (the default)
//! or, with `--aws`, against a deployment (`make rehearse` passes the stacks' outputs).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use wsdr_lab::cli;

#[derive(clap::Args)]
pub struct Args {
    /// Rehearse in AWS instead of a running lab (every `--primary-region` ... below).
    #[arg(long)]
    aws: bool,
    /// The pre-flight and one write of each rehearsal verdict; nothing is awaited.
    #[arg(long)]
    dry_run: bool,
    /// Where the JSON report goes.
    #[arg(long, default_value = "target/wsdr/rehearsal.json")]
    report: PathBuf,
    #[command(flatten)]
    lab: super::LabAddress,
    #[arg(long, requires = "aws")]
    primary_region: Option<String>,
    #[arg(long, requires = "aws")]
    secondary_region: Option<String>,
    /// The state table (one name in both Regions).
    #[arg(long, requires = "aws")]
    state_table: Option<String>,
    #[arg(long, requires = "aws")]
    primary_api_id: Option<String>,
    /// A health check id by its template name, e.g. `PrimaryVerdictCheck=<id>`; repeat for
    /// PrimaryVerdictCheck, PrimarySelfCheck, SecondaryHealthCheck, RehearsalVerdictCheck and
    /// RehearsalSelfCheck.
    #[arg(long = "check", requires = "aws", value_parser = check_id)]
    checks: Vec<(String, String)>,
    /// The rehearsal pair's test name, and the regional domain names its records point at.
    #[arg(long, requires = "aws")]
    rehearsal_name: Option<String>,
    #[arg(long, requires = "aws")]
    primary_target: Option<String>,
    #[arg(long, requires = "aws")]
    secondary_target: Option<String>,
    /// Local peers instead of AWS's endpoints (DynamoDB Local; a Route 53 peer).
    #[arg(long, requires = "aws")]
    dynamodb_endpoint: Option<String>,
    #[arg(long, requires = "aws")]
    route53_endpoint: Option<String>,
}

fn check_id(text: &str) -> Result<(String, String), String> {
    let (name, id) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}`: expected NAME=ID"))?;
    if name.is_empty() || id.is_empty() {
        return Err(format!("`{text}`: expected NAME=ID"));
    }
    Ok((name.to_owned(), id.to_owned()))
}

fn required(value: Option<String>, flag: &str) -> anyhow::Result<String> {
    value
        .filter(|v| !v.trim().is_empty())
        .ok_or_else(|| anyhow::anyhow!("--aws needs {flag}"))
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    cli::ensure_writable(&args.report, "report")?;
    let report = if args.aws {
        let config = wsdr_rehearse::aws::AwsConfig {
            primary_region: required(args.primary_region, "--primary-region")?,
            secondary_region: required(args.secondary_region, "--secondary-region")?,
            state_table: required(args.state_table, "--state-table")?,
            primary_api_id: required(args.primary_api_id, "--primary-api-id")?,
            checks: args.checks.into_iter().collect::<BTreeMap<_, _>>(),
            rehearsal_name: if args.dry_run {
                args.rehearsal_name.unwrap_or_default()
            } else {
                required(args.rehearsal_name, "--rehearsal-name")?
            },
            primary_target: args.primary_target.unwrap_or_default(),
            secondary_target: args.secondary_target.unwrap_or_default(),
            dynamodb_endpoint: args.dynamodb_endpoint,
            route53_endpoint: args.route53_endpoint,
        };
        let target = wsdr_rehearse::aws::AwsTarget::connect(config).await?;
        let settings = wsdr_rehearse::Settings {
            dry_run: args.dry_run,
            ..wsdr_rehearse::Settings::aws()
        };
        wsdr_rehearse::rehearse(&target, &settings).await?
    } else {
        let target = wsdr_lab::runs::rehearse::LabTarget::new(args.lab.client());
        let settings = target.settings(args.dry_run).await?;
        wsdr_rehearse::rehearse(&target, &settings).await?
    };
    wsdr_lab::runs::report::write_pretty_json(&args.report, &report)?;
    let secs = |s: Option<f64>| s.map_or("-".to_owned(), |s| format!("{s:.1} s"));
    for (check, healthy) in &report.preflight {
        println!(
            "  {check:<24} {}",
            if *healthy { "healthy" } else { "UNHEALTHY" }
        );
    }
    if let Some(over) = report.fail_over {
        println!(
            "  fail over: detected after {}, the test name moved after {}",
            secs(over.detection_s),
            secs(over.flip_s)
        );
    }
    if let Some(back) = report.fail_back {
        println!(
            "  back:      detected after {}, the test name moved after {}",
            secs(back.detection_s),
            secs(back.flip_s)
        );
    }
    for failure in &report.failures {
        eprintln!("  FAIL: {failure}");
    }
    println!(
        "rehearsal {}{} (AWS seconds); report {}",
        if report.passed() { "PASS" } else { "FAIL" },
        if report.dry_run { ", dry run" } else { "" },
        args.report.display()
    );
    Ok(if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
