#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The lab models what template.yaml deploys: wherever the template sets a value the lab
//! models, this test reads both and fails when they differ (docs/LAB.md, "The AWS behaviours
//! the failover relies on").

use serde_yaml::Value;
use wsdr_lab::world::fast::FastConfig;
use wsdr_lab::world::route53::PRIMARY_VIEWS_NEEDED;
use wsdr_lab::LabConfig;

fn template() -> Value {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../template.yaml"))
        .unwrap();
    serde_yaml::from_str(&text).unwrap()
}

/// A value with its CloudFormation tag (`!Ref`, `!If`, ...) taken off.
fn untagged(value: &Value) -> &Value {
    match value {
        Value::Tagged(tagged) => &tagged.value,
        other => other,
    }
}

fn at<'a>(value: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(value, |v, key| {
        let v = untagged(v);
        v.get(*key)
            .unwrap_or_else(|| panic!("template.yaml has no {key} in {path:?}"))
    })
}

fn number(value: &Value) -> u64 {
    match untagged(value) {
        Value::Number(n) => n.as_u64().unwrap(),
        Value::String(s) => s.parse().unwrap(),
        other => panic!("not a number: {other:?}"),
    }
}

fn default(template: &Value, parameter: &str) -> u64 {
    number(at(template, &["Parameters", parameter, "Default"]))
}

/// An endpoint-mode health check's configuration (`!If [EndpointChecks, <this>, <alarm>]`),
/// or the check's configuration when it has one kind.
fn endpoint_config<'a>(template: &'a Value, check: &str) -> &'a Value {
    let config = at(
        template,
        &["Resources", check, "Properties", "HealthCheckConfig"],
    );
    match config {
        Value::Tagged(tagged) if tagged.tag == "If" => {
            let branches = tagged.value.as_sequence().unwrap();
            assert_eq!(branches[0].as_str(), Some("EndpointChecks"), "{check}");
            &branches[1]
        }
        other => other,
    }
}

#[test]
fn the_lab_models_the_templates_settings() {
    let t = template();
    let wsdr = LabConfig::wsdr_defaults();
    let fast = FastConfig::default();
    // The records' TTL (CNAME records, wsdr's default).
    assert_eq!(default(&t, "DnsTtl"), wsdr.dns_ttl.as_secs_f64() as u64);
    // The fast rounds.
    assert_eq!(
        default(&t, "FastProbeIntervalSeconds"),
        fast.probe_interval.as_secs_f64() as u64
    );
    // The checks: every endpoint check's interval, threshold and search string.
    for check in [
        "PrimaryVerdictCheck",
        "PrimarySelfCheck",
        "SecondaryVerdictCheck",
        "SecondaryHealthCheck",
    ] {
        let config = endpoint_config(&t, check);
        assert_eq!(
            number(at(config, &["RequestInterval"])),
            fast.check_interval.as_secs_f64() as u64,
            "{check}"
        );
        assert_eq!(
            number(at(config, &["FailureThreshold"])),
            u64::from(fast.failure_threshold),
            "{check}"
        );
        match untagged(at(config, &["Type"])).as_str() {
            Some("HTTPS_STR_MATCH") => assert_eq!(
                untagged(at(config, &["SearchString"])).as_str(),
                Some(wsdr_core::SEARCH_STRING),
                "{check}"
            ),
            Some("TCP") => assert_eq!(check, "SecondaryHealthCheck"),
            other => panic!("{check}: a check of type {other:?} the lab does not model"),
        }
    }
    // The composition: the PRIMARY record's calculated check over the two views.
    let primary = at(
        &t,
        &[
            "Resources",
            "PrimaryHealthCheck",
            "Properties",
            "HealthCheckConfig",
        ],
    );
    assert_eq!(
        untagged(at(primary, &["Type"])).as_str(),
        Some("CALCULATED")
    );
    assert_eq!(
        number(at(primary, &["HealthThreshold"])) as usize,
        PRIMARY_VIEWS_NEEDED
    );
    assert_eq!(
        at(primary, &["ChildHealthChecks"])
            .as_sequence()
            .unwrap()
            .len(),
        2
    );
    // The verdicts' stale bound (the health function's default) is the lab's.
    assert_eq!(wsdr.stale_after_ms, wsdr_core::STALE_AFTER_MS);
    let health =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../health/src/lib.rs"))
            .unwrap();
    assert!(health.contains("wsdr_core::STALE_AFTER_MS / 1000"));
    // The minute rule's M and N, the connect quota.
    assert_eq!(
        default(&t, "FailoverDatapoints") as usize,
        wsdr.failover_datapoints
    );
    assert_eq!(
        default(&t, "FailbackHealthyDatapoints") as usize,
        wsdr.failback_datapoints
    );
    assert_eq!(
        default(&t, "NewConnectionQuotaPerSecond") as f64,
        wsdr.connect_rate
    );
    // The push path.
    assert_eq!(default(&t, "PushWorkers") as usize, wsdr.push.workers);
    assert_eq!(
        default(&t, "PushWindowMs"),
        wsdr.push.window.as_millis() as u64
    );
    assert_eq!(
        default(&t, "PushBudgetPerSecond") as f64,
        wsdr.push.budget_per_second
    );
    assert_eq!(default(&t, "PushPageSize") as usize, wsdr.push.page);
    // The fail-over orders: the evacuator's DNS deadline with endpoint checks
    // (`!If [AutoEvacuateWait, !If [EndpointChecks, "<this>", ...], ...]`), its reserved
    // concurrency, the queue's visibility timeout and receives.
    let evacuator = at(&t, &["Resources", "PrimaryEvacuatorFunction", "Properties"]);
    let wait = at(
        evacuator,
        &["Environment", "Variables", "FAILOVER_WAIT_SECONDS"],
    );
    let auto = &untagged(wait).as_sequence().unwrap()[1];
    let endpoint_wait = &untagged(auto).as_sequence().unwrap()[1];
    assert_eq!(number(endpoint_wait), wsdr.order_dns_deadline.as_secs());
    assert_eq!(
        number(at(evacuator, &["ReservedConcurrentExecutions"])) as usize,
        wsdr_lab::world::orders::PRIMARY_EVACUATOR_CONCURRENCY
    );
    let queue = at(&t, &["Resources", "FastFailovers", "Properties"]);
    assert_eq!(
        number(at(queue, &["VisibilityTimeout"])),
        wsdr_lab::world::orders::ORDER_VISIBILITY.as_secs()
    );
    assert_eq!(
        number(at(queue, &["RedrivePolicy", "maxReceiveCount"])),
        u64::from(wsdr_lab::world::orders::ORDER_MAX_RECEIVES)
    );
    // The push jobs' queue and its workers' reservation (world/push_jobs.rs).
    let jobs = at(&t, &["Resources", "PushJobs", "Properties"]);
    let settings = wsdr_lab::world::push_jobs::PushJobQueue::Wsdr.settings();
    assert_eq!(
        number(at(jobs, &["VisibilityTimeout"])),
        settings.visibility.as_secs()
    );
    assert_eq!(
        number(at(jobs, &["MessageRetentionPeriod"])),
        settings.retention.as_secs()
    );
    assert_eq!(
        number(at(jobs, &["RedrivePolicy", "maxReceiveCount"])),
        u64::from(settings.max_receives)
    );
    let workers = at(&t, &["Resources", "PushWorkerFunction", "Properties"]);
    let reserved = format!("{:?}", at(workers, &["ReservedConcurrentExecutions"]));
    assert_eq!(
        settings.workers_reserved,
        reserved.contains("PushWorkers"),
        "the workers' reservation: {reserved}"
    );
}
