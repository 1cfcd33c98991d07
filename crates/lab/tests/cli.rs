#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The `wsdr` binary refuses bad input up front, with the exit code and a message that says
//! what would work; none of these runs a drill or starts a lab.

use std::process::{Command, Output};

fn wsdr(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wsdr"))
        .args(args)
        .env_remove("WSDR_LAB_CONTROL_TOKEN")
        .output()
        .expect("run wsdr")
}

fn refused(args: &[&str], code: i32, says: &[&str]) {
    let out = wsdr(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(code), "{args:?}\n{stderr}{stdout}");
    for text in says {
        assert!(stderr.contains(text), "{args:?}: `{text}` in\n{stderr}");
    }
    assert!(
        !stdout.contains("drill report") && !stderr.contains("backtrace"),
        "{args:?} ran anyway or printed a backtrace:\n{stdout}{stderr}"
    );
}

#[test]
fn a_drill_needs_users_and_a_time_scale_above_zero() {
    refused(&["drill", "--users", "0"], 2, &["--users", "at least 1"]);
    refused(&["drill", "--time-scale", "0"], 2, &["must be above 0"]);
    refused(&["drill", "--time-scale=-3"], 2, &["must be above 0"]);
    refused(&["chaos", "--runs", "0"], 2, &["at least 1"]);
    refused(&["chaos", "--parallel", "0"], 2, &["at least 1"]);
    refused(&["load", "--connections", "0"], 2, &["at least 1"]);
    refused(&["lab", "--time-scale", "0"], 2, &["must be above 0"]);
}

#[test]
fn a_schedule_or_a_shrink_needs_a_replay_and_a_schedule_must_parse() {
    refused(&["chaos", "--shrink"], 2, &["--replay"]);
    refused(&["chaos", "--schedule", "[]"], 2, &["--replay"]);
    refused(
        &[
            "chaos",
            "--replay",
            "7",
            "--schedule",
            "[{\"fault\":\"meteor\"}]",
        ],
        2,
        &["a JSON list of steps"],
    );
    refused(
        &[
            "drill",
            "--clock",
            "simulated",
            "--dynamodb",
            "http://127.0.0.1:9",
        ],
        1,
        &["in-memory tables"],
    );
}

#[test]
fn unwritable_report_and_chart_paths_are_refused_before_the_drill() {
    let dir = std::env::temp_dir().join(format!("wsdr-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("a-file");
    std::fs::write(&file, "x").unwrap();
    let under_file = file.join("report.json");
    let under = under_file.to_str().unwrap();
    refused(&["drill", "--report", under], 1, &[under, "report"]);
    refused(
        &[
            "drill",
            "--chart",
            under,
            "--report",
            dir.join("ok.json").to_str().unwrap(),
        ],
        1,
        &[under, "chart"],
    );
    refused(&["chaos", "--report", under], 1, &[under]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fault_kinds_and_regions_are_checked_by_the_cli() {
    refused(
        &["fault", "melt"],
        2,
        &["melt", "throttle", "never-returns"],
    );
    refused(
        &["fault", "throttle", "--region", "2"],
        2,
        &["primary", "us-east-1"],
    );
    refused(&["fault", "throttle", "--region", "eu"], 2, &["secondary"]);
    refused(
        &["fault", "ack-lost", "--percent", "101"],
        2,
        &["--percent"],
    );
}

#[test]
fn evacuate_and_service_check_their_region() {
    refused(&["evacuate"], 2, &["--region"]);
    refused(&["evacuate", "--region", "moon"], 2, &["us-east-1"]);
    refused(&["service", "--region", "primary"], 2, &["--in or --out"]);
    refused(
        &["evacuate", "--region", "primary", "--lab", "127.0.0.1:1"],
        1,
        &["127.0.0.1:1", "wsdr lab"],
    );
}

#[test]
fn no_lab_running_names_the_address_and_the_fix() {
    // Port 1 on loopback: nothing listens there.
    refused(
        &[
            "fault",
            "throttle",
            "--region",
            "us-east-1",
            "--lab",
            "127.0.0.1:1",
        ],
        1,
        &["127.0.0.1:1", "wsdr lab"],
    );
}

#[test]
fn the_control_api_stays_on_loopback_unless_asked() {
    refused(
        &["lab", "--listen", "0.0.0.0:0"],
        2,
        &["refusing", "--allow-remote", "127.0.0.1:8787"],
    );
    refused(&["lab", "--listen", "8787"], 2, &["host:port"]);
}

#[test]
fn version_and_help_on_every_flag() {
    let out = wsdr(&["--version"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("wsdr {}", env!("CARGO_PKG_VERSION"))
    );
    for command in [
        "drill", "chaos", "load", "lab", "fault", "evacuate", "service", "probe",
    ] {
        let out = wsdr(&[command, "--help"]);
        assert!(out.status.success(), "{command} --help");
        let help = String::from_utf8_lossy(&out.stdout).into_owned();
        let lines: Vec<&str> = help.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let flag = line.trim_start();
            let is_flag = flag.starts_with("--")
                || (flag.len() > 2 && flag.as_bytes()[0] == b'-' && flag.as_bytes()[2] == b',');
            if !is_flag || flag.starts_with("-h, --help") || flag.starts_with("-V") {
                continue;
            }
            // Help on the same line (after two spaces) or on the next, indented; a bare
            // `[default: ..]` is not help.
            let words = |text: &str| !text.trim().is_empty() && !text.trim().starts_with('[');
            let inline = flag.split_once("  ").is_some_and(|(_, text)| words(text));
            let below = lines
                .get(i + 1)
                .is_some_and(|next| next.starts_with("          ") && words(next));
            assert!(
                inline || below,
                "`wsdr {command}`: no help for `{flag}`\n{help}"
            );
        }
    }
}
