#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! `wsdr rehearse` against a running lab, through its control API: the same engine and the
//! same calls as against AWS (`wsdr_rehearse`), on the lab's rehearsal pair (the same checks,
//! checkers and health functions as the real records, on the `/rehearsal/*` paths).

use std::sync::Arc;
use wsdr_lab::runs::rehearse::LabTarget;
use wsdr_lab::world::control::ControlClient;
use wsdr_lab::world::RegionId;
use wsdr_lab::{LabConfig, TimeScale};

async fn lab(config: LabConfig) -> (Arc<wsdr_lab::World>, ControlClient) {
    let lab = Arc::new(
        wsdr_lab::World::builder()
            .config(LabConfig {
                // One AWS second is 33 ms: a rehearsal (about 200 AWS seconds) takes seconds.
                scale: TimeScale::new(30.0),
                ..config
            })
            .start()
            .await
            .unwrap(),
    );
    let addr = wsdr_lab::world::control::serve(lab.clone(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    (lab, ControlClient::new(addr, None))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rehearsal_fails_the_test_name_over_and_back_and_moves_nobody() {
    let (lab, client) = lab(LabConfig::wsdr_defaults()).await;
    let scale = lab.config().scale;
    assert!(
        wsdr_lab::sim::users::wait_for(scale.secs(600.0), || {
            lab.rehearsal().is_some_and(|r| {
                wsdr_rehearse::REQUIRED_CHECKS
                    .iter()
                    .all(|c| r.checks.get(*c) == Some(&true))
            })
        })
        .await,
        "the real checks report healthy"
    );
    let target = LabTarget::new(client);
    let settings = target.settings(false).await.unwrap();
    let report = wsdr_rehearse::rehearse(&target, &settings).await.unwrap();
    assert!(report.passed(), "{report:?}");
    for phase in [report.fail_over.unwrap(), report.fail_back.unwrap()] {
        let (detected, flipped) = (phase.detection_s.unwrap(), phase.flip_s.unwrap());
        // The record turns before the name: the name waits for the record and its TTL.
        assert!(detected <= flipped, "{phase:?}");
    }
    // The real name never moved: the rehearsal touches only its own pair.
    assert_eq!(lab.resolve(), RegionId::Primary);
    assert!(lab.healthy(RegionId::Primary));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_whose_checks_cannot_see_the_functions_is_not_green() {
    // The function URLs granting one permission of the two (the earlier design's): every
    // check request is refused, so no failover can happen. The pre-flight says so, and
    // rehearses nothing.
    let (lab, client) = lab(LabConfig {
        function_url: wsdr_lab::world::route53::UrlPermissions::URL_ONLY,
        ..LabConfig::wsdr_defaults()
    })
    .await;
    let scale = lab.config().scale;
    assert!(
        wsdr_lab::sim::users::wait_for(scale.secs(600.0), || {
            lab.rehearsal()
                .is_some_and(|r| r.checks.get("PrimaryVerdictCheck") == Some(&false))
        })
        .await
    );
    let target = LabTarget::new(client);
    let settings = target.settings(false).await.unwrap();
    let report = wsdr_rehearse::rehearse(&target, &settings).await.unwrap();
    assert!(!report.passed());
    assert!(
        report
            .failures
            .iter()
            .any(|f| f.contains("PrimaryVerdictCheck reports unhealthy")),
        "{:?}",
        report.failures
    );
    assert!(report.fail_over.is_none(), "nothing rehearsed");
}
