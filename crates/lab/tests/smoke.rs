#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! `wsdr smoke` against a running lab: the same command a user runs after a deploy, pointed at
//! the lab's Regions and global name, passes; and it fails when a Region's endpoint is
//! answered by another Region or a token is refused.

use std::sync::Arc;
use wsdr_lab::smoke::{Settings, Step, Target};
use wsdr_lab::{LabConfig, RegionId, World};

async fn lab() -> (Arc<World>, std::net::SocketAddr) {
    let lab = Arc::new(
        World::builder()
            .config(LabConfig::wsdr_defaults())
            .start()
            .await
            .unwrap(),
    );
    let control = wsdr_lab::world::control::serve(lab.clone(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    (lab, control)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_smoke_command_passes_against_the_lab_and_names_each_answering_region() {
    let (_lab, control) = lab().await;
    // The lab runs on this test's runtime; the command, a separate process, waits beside it.
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_wsdr"))
            .args(["smoke", "--lab", &format!("http://{control}")])
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("us-east-1's own endpoint"), "{stdout}");
    assert!(stdout.contains("us-west-2's own endpoint"), "{stdout}");
    assert!(
        stdout.contains("the global name is served by us-east-1"),
        "{stdout}"
    );
    assert_eq!(
        stdout.matches("accepted").count(),
        3,
        "one bid per target\n{stdout}"
    );
    assert!(stdout.trim_end().ends_with("PASS"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_endpoint_answered_by_another_region_or_a_refused_token_fails() {
    let (lab, _control) = lab().await;
    let primary = lab.region(RegionId::Primary).url();
    let settings = Settings {
        token: lab.user_token("smoke-test").unwrap(),
        auction: wsdr_protocol::AuctionId::new("lot-1").unwrap(),
        raise: 100,
        timeout: std::time::Duration::from_secs(5),
    };
    // The primary's endpoint claimed to be the secondary's.
    let wrong = Target::parse(&format!("us-west-2={primary}")).unwrap();
    let outcomes = wsdr_lab::smoke::run(&[wrong], &settings).await;
    let failures = outcomes[0].failures();
    assert_eq!(failures.len(), 3, "{failures:?}");
    assert!(failures[0].contains("answered by us-east-1, expected us-west-2"));
    // A token the authorizer refuses: the handshake fails, nothing else is tried.
    let refused = Settings {
        token: "not-a-token".into(),
        ..settings
    };
    let target = Target::parse(&format!("us-east-1={primary}")).unwrap();
    let outcomes = wsdr_lab::smoke::run(&[target], &refused).await;
    assert!(matches!(&outcomes[0].heartbeat, Step::Failed(why) if why.contains("connect")));
    assert!(!outcomes[0].failures().is_empty());
}
