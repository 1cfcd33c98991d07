#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! Drills end to end, with assertions on the report. The drills whose figures are checked
//! against bars run as deterministic simulations (AWS time, a function of the seed), so a busy
//! machine cannot change a verdict (every scenario's own failover checks are in
//! `simulated_drills.rs`, on the same runs as its other checks); the control API, the
//! operator's view and forged moves run on real sockets at time scale 60, with no timing bar.

use wsdr_lab::runs::drill;
use wsdr_lab::RegionId;
use wsdr_lab::{DrillConfig, LabConfig, Scenario, TimeScale};

/// A time-scaled lab with the defaults, once its name answers the primary.
async fn steady_lab() -> std::sync::Arc<wsdr_lab::World> {
    let lab = std::sync::Arc::new(
        wsdr_lab::World::builder()
            .config(LabConfig::default())
            .start()
            .await
            .unwrap(),
    );
    let scale = lab.config().scale;
    assert!(
        wsdr_lab::sim::users::wait_for(scale.secs(600.0), || lab.resolve() == RegionId::Primary)
            .await
    );
    lab
}

fn config(scenario: Scenario) -> DrillConfig {
    DrillConfig {
        scenario,
        users: 10,
        seed: 7,
        lab: LabConfig {
            scale: TimeScale::new(60.0),
            ..LabConfig::default()
        },
        ..DrillConfig::default()
    }
}

#[tokio::test]
async fn control_api_reports_status_and_injects_faults() {
    use std::sync::Arc;
    let lab = Arc::new(
        wsdr_lab::World::builder()
            .config(LabConfig::default())
            .start()
            .await
            .unwrap(),
    );
    let addr = wsdr_lab::world::control::serve(lab.clone(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let (status, body) = wsdr_lab::world::control::post_json(
        addr,
        "/api/fault",
        r#"{"kind":"throttle","region":0}"#,
    )
    .await
    .unwrap();
    assert_eq!(status, 200, "{body}");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["regions"][0]["throttled"], true);
    assert_eq!(json["regions"][1]["throttled"], false);
    let (status, _) =
        wsdr_lab::world::control::post_json(addr, "/api/fault", r#"{"kind":"melt","region":0}"#)
            .await
            .unwrap();
    assert_eq!(status, 400);
    let (status, body) =
        wsdr_lab::world::control::post_json(addr, "/api/fault", r#"{"kind":"partition"}"#)
            .await
            .unwrap();
    assert_eq!(status, 200);
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(json["replication"]
        .as_array()
        .unwrap()
        .iter()
        .all(|l| l["cut"] == true));
    let (status, body) =
        wsdr_lab::world::control::post_json(addr, "/api/fault", r#"{"kind":"heal"}"#)
            .await
            .unwrap();
    assert_eq!(status, 200);
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["regions"][0]["throttled"], false);
}

/// What an operator watches: per-Region panels, the fault in force with users restored,
/// key events that outlive the noise, `/metrics`, and a control token off loopback.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_sees_regions_users_the_fault_and_metrics() {
    use std::sync::Arc;
    use wsdr_lab::sim::users::{Behaviour, Population};
    use wsdr_lab::world::control::ControlClient;
    let lab = Arc::new(
        wsdr_lab::World::builder()
            .config(LabConfig {
                timeline_cap: Some(200),
                ..LabConfig::default()
            })
            .start()
            .await
            .unwrap(),
    );
    let token = wsdr_lab::world::control::new_control_token();
    let addr = wsdr_lab::world::control::serve_with_token(
        lab.clone(),
        "127.0.0.1:0".parse().unwrap(),
        Some(token.clone()),
    )
    .await
    .unwrap();
    let anonymous = ControlClient::new(addr, None);
    let operator = ControlClient::new(addr, Some(token));
    for path in ["/api/status", "/api/token?sub=a", "/metrics"] {
        assert_eq!(anonymous.get(path).await.unwrap().0, 401, "{path}");
    }
    assert_eq!(
        anonymous
            .post_json("/api/fault", r#"{"kind":"heal"}"#)
            .await
            .unwrap()
            .0,
        401
    );
    assert_eq!(
        anonymous.get("/").await.unwrap().0,
        200,
        "the page itself is open"
    );

    let auction = wsdr_protocol::AuctionId::new("lot-1").unwrap();
    let users =
        Population::through_front_door(&lab, 4, &auction, Behaviour::honest(5.0), 3, |_| false)
            .unwrap();
    let scale = lab.config().scale;
    assert!(wsdr_lab::sim::users::wait_for(scale.secs(300.0), || users.all_connected()).await);
    // A Region by name, as `wsdr fault --region us-east-1` sends it.
    let (code, body) = operator
        .post_json("/api/fault", r#"{"kind":"throttle","region":"us-east-1"}"#)
        .await
        .unwrap();
    assert_eq!(code, 200, "{body}");
    let (code, body) = operator
        .post_json("/api/fault", r#"{"kind":"throttle","region":"eu-west-9"}"#)
        .await
        .unwrap();
    assert_eq!(code, 400);
    assert!(body.contains("us-east-1 and us-west-2"), "{body}");
    let restored_everyone = wsdr_lab::sim::users::wait_for(scale.secs(900.0), || {
        lab.status()
            .fault
            .and_then(|f| f.restored)
            .is_some_and(|n| n == 4)
    })
    .await;
    assert!(restored_everyone, "{:?}", lab.status().fault);

    let (code, body) = operator.get("/api/status").await.unwrap();
    assert_eq!(code, 200);
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["users"]["total"], 4);
    assert!(status["fault"]["since_aws_s"].as_f64().unwrap() > 0.0);
    assert!(status["fault"]["rto_so_far_aws_s"].as_f64().unwrap() > 0.0);
    let primary = &status["regions"][0];
    assert_eq!(primary["alarm"], "ALARM");
    assert_eq!(primary["health_check_healthy"], false);
    assert!(
        primary["canary"]
            .as_array()
            .unwrap()
            .iter()
            .any(|ok| ok == false),
        "the primary's own canary datapoints: {primary}"
    );
    let secondary = &status["regions"][1];
    assert!(secondary["canary"]
        .as_array()
        .unwrap()
        .iter()
        .all(|ok| ok == true));
    // The key events survive a timeline trimmed to 200 entries.
    let kinds: Vec<&str> = status["key_events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    for kind in ["fault", "alarm", "health_unhealthy", "dns_flip"] {
        assert!(kinds.contains(&kind), "{kind} in {kinds:?}");
    }
    assert!(lab.timeline().entries().len() <= 200);

    let (code, metrics) = operator.get("/metrics").await.unwrap();
    assert_eq!(code, 200);
    for line in [
        r#"wsdr_route53_dns_answer{region="us-west-2"} 1"#,
        r#"wsdr_route53_health_check_status{region="us-east-1"} 0"#,
        r#"wsdr_cloudwatch_alarm_state{region="us-east-1",state="ALARM"} 1"#,
        r#"wsdr_app_websocket_health{region="us-east-1"} 0"#,
        "wsdr_lab_fault_active 1",
        "wsdr_lab_last_fault_users_restored 4",
        "wsdr_lab_users 4",
    ] {
        assert!(
            metrics.contains(line),
            "{line}
{metrics}"
        );
    }
    let accepted = |region: &str| -> f64 {
        let prefix = format!("wsdr_app_bids_accepted_total{{region=\"{region}\"}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .and_then(|v| v.parse().ok())
            .unwrap()
    };
    assert!(
        accepted("us-east-1") + accepted("us-west-2") > 0.0,
        "{metrics}"
    );
    users.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_that_never_returns_loses_exactly_its_unreplicated_bids() {
    // A minute of replication lag (AWS) at the fault: the primary takes its backlog with it.
    let mut config = config(Scenario::NeverReturns);
    config.lab.replication_lag = wsdr_lab::AwsDuration::from_secs(60);
    let report = drill::run_simulated(config).await.unwrap();
    let table = report.table();
    assert_eq!(report.restored, 10, "{table}");
    assert_eq!(
        report.lost_acknowledged_bids, 0,
        "nothing else may be missing\n{table}"
    );
    assert!(
        report.acknowledged_bids_lost_with_region > 0,
        "a minute of backlog holds acknowledged bids\n{table}"
    );
    assert_eq!(report.duplicate_bids, 0, "{table}");
    assert!(report.high_bid_consistent, "{table}");
    assert!(
        report.failback_ms.is_none(),
        "a lost Region takes no traffic back"
    );
    assert!(report.passed(), "{table}");
}

/// The lab runs on tokio's clock alone: a drill at time scale 1 (AWS seconds, the reference
/// design's own timers) runs in paused time, where tokio jumps to the next timer whenever
/// every task waits. Ten AWS minutes of drill pass in a few seconds of CPU.
#[tokio::test(start_paused = true)]
async fn a_drill_at_aws_speed_runs_in_paused_time() {
    let started = tokio::time::Instant::now();
    let report = drill::run(DrillConfig {
        scenario: Scenario::Throttle,
        users: 5,
        seed: 3,
        lab: LabConfig {
            scale: TimeScale::new(1.0),
            ..LabConfig::default()
        },
        ..DrillConfig::default()
    })
    .await
    .unwrap();
    assert!(report.passed(), "{}", report.table());
    assert_eq!(report.restored, 5, "{}", report.table());
    // The reference design's detection (three one-minute periods) took AWS minutes of the
    // paused clock: only virtual time can pass that fast.
    let detection = report.detection_ms.expect("the fault was detected");
    assert!(detection >= 120_000.0, "{}", report.table());
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(300),
        "the drill spanned {:?} of lab time",
        started.elapsed()
    );
}

/// A planned evacuation (no fault): the primary leaves DNS, every connection is told to move
/// and does, nobody sees an error, nothing is throttled; then the same in reverse. Users
/// who know the Regions' own endpoints go straight there; the others follow the name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planned_evacuation_moves_everyone_without_an_error_and_back() {
    for client_fallback in [false, true] {
        let report = drill::run_simulated(DrillConfig {
            client_fallback,
            ..config(Scenario::Evacuate)
        })
        .await
        .unwrap();
        let name = format!("evacuate, client fallback {client_fallback}");
        assert!(
            report.passed(),
            "{name}: {:?}\n{}",
            report.failed_checks,
            report.table()
        );
        assert_eq!(report.restored, 10, "{name}");
        assert_eq!(report.users_seeing_errors, 0, "{name}");
        assert_eq!(report.throttled_handshakes_during_move, 0, "{name}");
        assert_eq!(report.users_back_on_primary, Some(10), "{name}");
        assert_eq!(report.detection_ms, None, "{name}: no fault, no alarm");
        assert_eq!(report.lost_acknowledged_bids, 0, "{name}");
        assert!(report
            .timeline
            .iter()
            .any(|e| e.detail.contains("taken out of DNS")));
    }
}

/// A slow primary: the users' heartbeats pass, the canary's probes do not. The failover
/// decision moves the name, and the evacuator moves the sessions that would otherwise stay on
/// the slow primary (without it, none moves: `wsdr drill --scenario slow` fails 0/N).
/// Simulated: at AWS time the probes' timeouts need no real-time floor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_evacuator_moves_sessions_that_a_slow_primary_keeps() {
    let report = drill::run_simulated(DrillConfig {
        evacuate_on_failover: true,
        ..config(Scenario::Slow)
    })
    .await
    .unwrap();
    assert!(
        report.passed(),
        "{:?}\n{}",
        report.failed_checks,
        report.table()
    );
    assert_eq!(report.restored, 10);
    assert_eq!(report.users_seeing_errors, 0, "a move is not an error");
    assert!(report.evacuate_on_failover);
    assert!(report
        .timeline
        .iter()
        .any(|e| e.detail.starts_with("evacuating us-east-1")));
}

/// A `moveTo` naming an endpoint the clients were never given, or the Region already
/// serving them, moves nobody: users stay connected, with no reconnect and no error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_or_pointless_move_redirects_nobody() {
    use std::sync::Arc;
    use wsdr_lab::sim::users::{wait_for, Behaviour, Population};
    let lab = steady_lab().await;
    let scale = lab.config().scale;
    let auction = wsdr_protocol::AuctionId::new("lot-1").unwrap();
    // Half the users know the Regions' own endpoints, half only the global name.
    let users =
        Population::through_front_door(&lab, 6, &auction, Behaviour::honest(10.0), 5, |i| {
            i % 2 == 0
        })
        .unwrap();
    assert!(wait_for(scale.secs(300.0), || users.all_connected()).await);
    let primary = &lab.region(RegionId::Primary);
    let notifier = primary.connections_notifier();
    let connections: Arc<dyn wsdr_core::Connections> = primary.registry.clone();
    for plan in [
        wsdr_core::Evacuation {
            endpoint: Some("ws://127.0.0.1:1/prod".into()),
            min_window: std::time::Duration::ZERO,
            ..wsdr_core::Evacuation::new("us-east-1", "us-west-2")
        },
        // The secondary's name with the primary's own endpoint: a mismatch.
        wsdr_core::Evacuation {
            endpoint: Some(lab.region(RegionId::Primary).url()),
            min_window: std::time::Duration::ZERO,
            ..wsdr_core::Evacuation::new("us-east-1", "us-west-2")
        },
        // A move to where they already are.
        wsdr_core::Evacuation {
            min_window: std::time::Duration::ZERO,
            ..wsdr_core::Evacuation::new("us-east-1", "us-east-1")
        },
    ] {
        let report = wsdr_core::evacuate(&connections, &notifier, &plan, primary.clock_now_ms())
            .await
            .unwrap();
        // Every connection listed was told: the six users, and any canary probe connected
        // at that moment (the canary's rounds run on their own clock).
        assert!(report.complete, "{plan:?}: {report:?}");
        assert!(report.posts.delivered >= 6, "{plan:?}: {report:?}");
        assert_eq!(
            report.posts.delivered + report.posts.gone,
            report.connections,
            "{plan:?}"
        );
    }
    tokio::time::sleep(scale.secs(120.0)).await;
    for record in users.records() {
        assert!(record.connected, "{record:?}");
        assert_eq!(record.trace.moves, 0, "nobody changed endpoint");
        assert!(record.trace.disconnects.is_empty(), "nobody reconnected");
        assert_eq!(record.trace.unplanned_disconnects, 0);
    }
    users.close().await;
}

/// A planned evacuation towards a Region DNS will not answer (it is unhealthy too) moves
/// nobody and leaves the evacuated Region in DNS, with an error that says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evacuation_to_an_unhealthy_region_moves_nobody_and_restores_dns() {
    use wsdr_lab::sim::users::wait_for;
    use wsdr_lab::Fault;
    let lab = wsdr_lab::World::builder()
        .config(LabConfig::default())
        .start()
        .await
        .unwrap();
    let scale = lab.config().scale;
    lab.inject(Fault::Down(RegionId::Secondary));
    assert!(wait_for(scale.secs(900.0), || !lab.healthy(RegionId::Secondary)).await);
    let err = lab
        .evacuate(RegionId::Primary, true, "maintenance")
        .await
        .unwrap_err();
    assert!(format!("{err:#}").contains("nobody was moved"), "{err:#}");
    assert!(
        lab.in_service(RegionId::Primary),
        "the primary is back in DNS"
    );
    assert_eq!(lab.resolve(), RegionId::Primary);
}

/// An evacuation whose push path is throttled keeps telling: at 50% `@connections`
/// throttling every connection is told (retried rounds); with every post refused nobody
/// is, and the evacuation says it is incomplete rather than done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evacuation_under_push_throttling_tells_everyone_or_says_it_did_not() {
    use wsdr_lab::sim::users::{wait_for, Behaviour, Population};
    use wsdr_lab::Fault;
    let lab = steady_lab().await;
    let scale = lab.config().scale;
    let auction = wsdr_protocol::AuctionId::new("lot-1").unwrap();
    let users =
        Population::through_front_door(&lab, 24, &auction, Behaviour::honest(10.0), 5, |_| true)
            .unwrap();
    assert!(wait_for(scale.secs(300.0), || users.all_connected()).await);
    let listed = lab.region(RegionId::Primary).registry.len();
    assert!(listed >= 24, "{listed} connections listed");
    lab.inject(Fault::ConnectionsThrottle {
        region: RegionId::Primary,
        percent: 100,
    });
    let refused = lab
        .move_sessions(RegionId::Primary, None, "maintenance")
        .await
        .unwrap();
    assert!(!refused.complete, "{refused:?}");
    assert_eq!(refused.untold, refused.connections, "{refused:?}");
    assert_eq!(refused.posts.delivered, 0);
    assert!(refused.rounds > 0, "it kept trying: {refused:?}");
    lab.inject(Fault::ConnectionsThrottle {
        region: RegionId::Primary,
        percent: 50,
    });
    let report = lab
        .move_sessions(RegionId::Primary, None, "maintenance")
        .await
        .unwrap();
    assert!(report.complete, "{report:?}");
    assert_eq!(report.untold, 0);
    assert_eq!(
        report.posts.delivered + report.posts.gone,
        report.connections,
        "{report:?}"
    );
    assert!(report.posts.retries > 0, "the throttle bit: {report:?}");
    assert!(
        wait_for(scale.secs(300.0), || users.records().iter().all(|r| r
            .trace
            .moves
            >= 1
            && r.connected))
        .await,
        "every user moved: {:?}",
        users.records()
    );
    users.close().await;
}

/// The fast path beside the alarm, in one run: the fast verdict (probe rounds every 5 s at
/// two vantage points) fails the primary over within seconds, its health endpoint answers
/// 503, the endpoint health check (every 10 s) moves DNS, and the alarm's check is timed
/// alongside. With a 20 s TTL, DNS-only users are back within a minute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoint_health_checks_move_dns_minutes_before_the_alarm() {
    use wsdr_lab::world::fast::HealthCheckKind;
    let report = drill::run_simulated(DrillConfig {
        lab: LabConfig {
            dns_ttl: wsdr_lab::AwsDuration::from_secs(20),
            health_check: HealthCheckKind::Endpoint,
            ..LabConfig::default()
        },
        ..config(Scenario::Throttle)
    })
    .await
    .unwrap();
    let table = report.table();
    assert!(report.passed(), "{:?}\n{table}", report.failed_checks);
    assert_eq!(report.health_check, HealthCheckKind::Endpoint);
    let aws_s = |ms: Option<f64>| ms.expect("timed") * report.time_scale / 1000.0;
    let times = report.health_checks.clone().expect("both kinds timed");
    let fast = aws_s(times.endpoint.detection_ms);
    // Three failed rounds of 5 s at both vantage points; bounded by a few rounds more.
    assert!(
        (10.0..=40.0).contains(&fast),
        "fast verdict at {fast} s\n{table}"
    );
    let endpoint = aws_s(times.endpoint.unhealthy_ms);
    let alarm = aws_s(times.alarm.unhealthy_ms);
    assert!(endpoint >= fast, "{table}");
    assert!(
        endpoint + 60.0 < alarm,
        "endpoint {endpoint} s, alarm {alarm} s\n{table}"
    );
    assert!(
        report.rto_aws_s.p99.expect("restored") < 60.0,
        "RTO p99 under a minute\n{table}"
    );
    assert_eq!(report.lost_acknowledged_bids, 0, "{table}");
    assert_eq!(report.duplicate_bids, 0, "{table}");
}

/// One vantage point that cannot see a healthy Region (a broken network path, a broken
/// watcher) never fails it over: its own verdict turns, the PRIMARY record's check stays
/// healthy on the other view, and DNS never moves; both failing does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_blind_vantage_point_never_fails_a_healthy_region_over() {
    use wsdr_lab::world::timeline::Kind;
    let lab = wsdr_lab::World::builder()
        .config(LabConfig {
            scale: TimeScale::new(60.0),
            ..LabConfig::wsdr_defaults()
        })
        .start()
        .await
        .unwrap();
    let count = |lab: &wsdr_lab::World, kind: Kind| {
        lab.timeline()
            .entries()
            .iter()
            .filter(|e| e.kind == kind)
            .count()
    };
    for blind in [0, 1] {
        lab.set_blind(RegionId::Primary, blind, true);
        // Two AWS minutes: 24 rounds with this view failing every one.
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        assert_eq!(
            count(&lab, Kind::EndpointUnhealthy),
            0,
            "view {blind} alone decided"
        );
        assert_eq!(
            count(&lab, Kind::DnsFlip),
            0,
            "view {blind} alone moved DNS"
        );
        lab.set_blind(RegionId::Primary, blind, false);
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    }
    assert_eq!(
        count(&lab, Kind::FastFailover),
        1,
        "the blind watcher's own verdict did turn (and came back)"
    );
    lab.set_blind(RegionId::Primary, 0, true);
    lab.set_blind(RegionId::Primary, 1, true);
    let failed_over = async {
        while count(&lab, Kind::EndpointUnhealthy) == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(3), failed_over)
        .await
        .expect("both views failing: the PRIMARY record's check follows");
}

/// A status never contradicts itself: when it shows the name answering the secondary, the DNS
/// flip that made it so is among its key events. With no users, the world's own resolver
/// clients still look the name up, so the control room does not show an answer from before
/// the failover; and reading the status changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_that_shows_the_new_answer_shows_the_flip_too() {
    use wsdr_lab::world::timeline::Kind;
    let lab = wsdr_lab::World::builder()
        .config(LabConfig {
            scale: TimeScale::new(60.0),
            ..LabConfig::default()
        })
        .start()
        .await
        .unwrap();
    // Steady: the alarm evaluated OK and the name answers the primary.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    while lab.status().dns_answer.as_deref() != Some("us-east-1") || !lab.status().primary_healthy {
        assert!(tokio::time::Instant::now() < deadline, "never steady");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    lab.inject(wsdr_lab::Fault::Throttle(RegionId::Primary));
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let status = lab.status();
        if status.dns_answer.as_deref() == Some("us-west-2") {
            assert!(
                status.key_events.iter().any(|e| e.kind == Kind::DnsFlip),
                "{:?}",
                status.key_events
            );
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never failed over");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The judge down (the secondary, where the watcher decides and serves its verdict on the
/// primary): the PRIMARY record's check stays healthy on the primary's own view, the
/// SECONDARY record's (the secondary's API endpoint) turns unhealthy, and the name stays on
/// the primary for as long as the judge is gone: nobody is sent to the Region that is down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_judge_that_is_down_leaves_the_name_on_the_primary() {
    use wsdr_lab::sim::users::wait_for;
    use wsdr_lab::world::timeline::Kind;
    let lab = wsdr_lab::World::builder()
        .config(LabConfig::wsdr_defaults())
        .start()
        .await
        .unwrap();
    let scale = lab.config().scale;
    lab.inject(wsdr_lab::Fault::Down(RegionId::Secondary));
    assert!(
        wait_for(scale.secs(120.0), || !lab.healthy(RegionId::Secondary)).await,
        "the secondary's endpoint unreachable: its record is unhealthy"
    );
    // Three more AWS minutes: the name never leaves the primary, whose record stays healthy.
    let deadline = tokio::time::Instant::now() + scale.secs(180.0);
    while tokio::time::Instant::now() < deadline {
        assert_eq!(lab.resolve(), RegionId::Primary);
        assert!(lab.healthy(RegionId::Primary));
        tokio::time::sleep(scale.secs(5.0)).await;
    }
    let flips = lab
        .timeline()
        .entries()
        .iter()
        .filter(|e| e.kind == Kind::DnsFlip)
        .count();
    assert_eq!(flips, 0, "the name never moved");
}

/// Each view is served where it was decided. With replication into the primary stalled and
/// the primary degraded, its own canary still fails it in its own replica (nothing crosses
/// the path between the Regions to get there), the judge fails it in the judge's, and both
/// health functions say so: the name moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_degraded_primary_fails_itself_without_replication() {
    use wsdr_lab::sim::users::wait_for;
    let lab = wsdr_lab::World::builder()
        .config(LabConfig::wsdr_defaults())
        .start()
        .await
        .unwrap();
    let scale = lab.config().scale;
    lab.inject(wsdr_lab::Fault::OneWay {
        from: RegionId::Secondary,
    });
    lab.inject(wsdr_lab::Fault::Throttle(RegionId::Primary));
    assert!(
        wait_for(scale.secs(120.0), || lab.resolve() == RegionId::Secondary).await,
        "the name moved"
    );
    let get = |region: RegionId, path: &'static str| {
        let client = wsdr_lab::world::control::ControlClient::new(lab.region(region).addr, None)
            .on_network(lab.config().environment.network.clone());
        async move { client.get(path).await.unwrap() }
    };
    assert_eq!(
        get(RegionId::Secondary, "/health/primary").await,
        (200, "verdict=fail-over\n".to_owned())
    );
    assert_eq!(
        get(RegionId::Primary, "/health/self").await,
        (200, "verdict=fail-over\n".to_owned()),
        "decided and served in the primary's own replica"
    );
    assert_eq!(
        get(RegionId::Secondary, "/health/self").await,
        (200, "verdict=serve\n".to_owned())
    );
    assert_eq!(lab.inside_verdict(RegionId::Primary), Some(false));
}

/// The issuer (one user pool, as docs/DEPLOY.md deploys it) lives in the primary's Region and
/// is lost with it. The users hold valid tokens, but the secondary's authorizer sandboxes
/// cold-start while the issuer cannot be reached: without a snapshot of its keys every
/// reconnect is denied and nobody is restored (the reference design); with the snapshot in
/// each Region's configuration (wsdr's default) everyone is, with no 403.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_the_issuers_region_denies_nobody_when_each_region_keeps_its_keys() {
    use wsdr_lab::world::identity::IdentityConfig;
    let with = |identity: IdentityConfig| {
        let mut config = config(Scenario::NeverReturns);
        config.lab.identity = identity;
        config
    };
    let reference = drill::run_simulated(with(IdentityConfig::reference()))
        .await
        .unwrap();
    let table = reference.table();
    assert_eq!(reference.restored, 0, "{table}");
    assert!(reference.denied_handshakes_during_move > 0, "{table}");
    assert!(
        reference.failed_checks.iter().any(|c| c.contains("denied")),
        "{:?}",
        reference.failed_checks
    );
    let wsdr = drill::run_simulated(with(IdentityConfig::wsdr_defaults()))
        .await
        .unwrap();
    let table = wsdr.table();
    assert_eq!(wsdr.restored, 10, "{table}");
    assert_eq!(wsdr.denied_handshakes_during_move, 0, "{table}");
    assert!(wsdr.passed(), "{:?}", wsdr.failed_checks);
}

/// A failover herd larger than the secondary's new-connection quota (`herd`: the primary
/// down, the secondary admitting 1% of its quota): for minutes the secondary refuses most
/// handshakes with 429, its canary's among them. A 429 is the quota of a Region that is up,
/// so the secondary's verdict stays "serve" and DNS never returns to the dead primary;
/// everyone is restored as the quota lets them in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_herd_over_the_secondarys_quota_never_sends_dns_back_to_the_dead_primary() {
    let report = drill::run_simulated(DrillConfig {
        users: 60,
        lab: LabConfig {
            // 1% of 50 handshakes per second: 60 users take two minutes to get in.
            connect_rate: 50.0,
            ..LabConfig::wsdr_defaults()
        },
        ..config(Scenario::Herd)
    })
    .await
    .unwrap();
    let table = report.table();
    assert!(
        report.throttled_handshakes_during_move > 60,
        "the herd met the quota\n{table}"
    );
    assert_eq!(report.dns_flips_during_fault, 1, "{table}");
    assert_eq!(report.dns_answers_to_failed_primary, 0, "{table}");
    assert_eq!(report.restored, 60, "{table}");
    assert!(report.passed(), "{:?}\n{table}", report.failed_checks);
}

/// The primary down and 2,000 other clients reconnecting to the secondary at once
/// (`secrets-storm`): the connect quota's burst lets 500 handshakes in at the first
/// instant, each finds every authorizer sandbox busy or starting, and every new sandbox
/// reads its two keys from the secondary's Secrets Manager. With one `GetSecretValue` per key
/// (quota 10,000/s) no read is throttled and no `$connect` gets a 500; with the one
/// `BatchGetSecretValue` the authorizer made before (quota 100/s), sandboxes fail their init
/// and the drill fails for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storm_of_authorizer_cold_starts_never_meets_the_secrets_quota() {
    use wsdr_lab::world::secrets::{SecretCall, SecretReads};
    let with = |call: SecretCall| {
        let wsdr = LabConfig::wsdr_defaults();
        DrillConfig {
            lab: LabConfig {
                identity: wsdr_lab::world::identity::IdentityConfig {
                    secrets: SecretReads { keys: 2, call },
                    ..wsdr.identity.clone()
                },
                ..wsdr
            },
            ..config(Scenario::SecretsStorm)
        }
    };
    let storm = drill::run_simulated(with(SecretCall::GetEach))
        .await
        .unwrap();
    let table = storm.table();
    let figures = &storm.authorizer;
    assert!(
        figures.peak_cold_starts_per_second > 100,
        "a storm: more sandboxes a second than BatchGetSecretValue's quota\n{figures:?}"
    );
    assert_eq!(figures.secrets_throttled, 0, "{figures:?}");
    assert_eq!(figures.handshakes_failed, 0, "{figures:?}");
    assert_eq!(figures.herd_connected, 2_000, "{figures:?}");
    assert_eq!(storm.restored, 10, "{table}");
    assert!(storm.passed(), "{:?}\n{table}", storm.failed_checks);
    let batch = drill::run_simulated(with(SecretCall::Batch)).await.unwrap();
    let figures = &batch.authorizer;
    assert!(figures.secrets_throttled > 0, "{figures:?}");
    assert!(figures.handshakes_failed > 0, "{figures:?}");
    assert_fails_with(&batch, "new authorizer sandboxes failed their init");
}

/// The watcher falls silent for ten minutes a minute after the primary is lost
/// (`watcher-silent`). Its verdict goes stale, which the judge answers as no evidence for the
/// primary (`verdict=stale`), and the PRIMARY record's check rests on the primary's own view,
/// which gets no answer from a Region that is down: DNS stays on the secondary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_watcher_never_sends_dns_back_to_the_dead_primary() {
    let report = drill::run_simulated(DrillConfig {
        lab: LabConfig::wsdr_defaults(),
        ..config(Scenario::WatcherSilent)
    })
    .await
    .unwrap();
    let table = report.table();
    assert_eq!(report.dns_flips_during_fault, 1, "{table}");
    assert_eq!(report.dns_answers_to_failed_primary, 0, "{table}");
    assert_eq!(report.restored, 10, "{table}");
    assert!(report.passed(), "{:?}\n{table}", report.failed_checks);
}

/// The watcher falls silent while the primary serves, and the primary dies later: the
/// watcher's last "serve" goes stale and is no evidence for the primary, so the PRIMARY
/// record rests on the primary's own view, which a dead Region cannot give: DNS moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_watcher_is_no_evidence_for_a_primary_that_dies() {
    use wsdr_lab::sim::users::wait_for;
    let lab = wsdr_lab::World::builder()
        .config(LabConfig::wsdr_defaults())
        .start()
        .await
        .unwrap();
    let scale = lab.config().scale;
    // The watcher has said serve for a while.
    assert!(
        wait_for(scale.secs(60.0), || lab.fast_verdict(RegionId::Primary)
            == Some(true))
        .await
    );
    tokio::time::sleep(scale.secs(20.0)).await;
    lab.inject(wsdr_lab::Fault::WatcherSilent(
        wsdr_lab::AwsDuration::from_secs(900),
    ));
    tokio::time::sleep(scale.secs(90.0)).await;
    assert_eq!(
        lab.resolve(),
        RegionId::Primary,
        "a silent watcher alone moves nobody"
    );
    lab.inject(wsdr_lab::Fault::Down(RegionId::Primary));
    assert!(
        wait_for(scale.secs(120.0), || lab.resolve() == RegionId::Secondary).await,
        "the primary died while the watcher was silent: the name must still move"
    );
}

/// The network between the two Regions cut, both Regions healthy and reached by their users
/// (`inter-region-partition`). The watcher's view of the primary crosses that path and fails
/// it; the primary's own view reaches Route 53's checkers from outside both Regions and keeps
/// the PRIMARY record healthy, so nobody is moved. With the judge alone behind the record
/// (the reference composition on endpoint checks) the healthy primary is failed over, and the
/// drill fails for it. What holds by shape either way: no acknowledged bid lost, nothing
/// doubled, the Regions converge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_between_the_regions_moves_nobody_and_loses_nothing() {
    for consistency in [
        wsdr_core::Consistency::Eventual,
        wsdr_core::Consistency::Strong,
    ] {
        let report = drill::run_simulated(DrillConfig {
            lab: LabConfig {
                consistency,
                ..LabConfig::wsdr_defaults()
            },
            ..config(Scenario::InterRegionPartition)
        })
        .await
        .unwrap();
        let table = report.table();
        assert_eq!(report.dns_flips_during_fault, 0, "failed over\n{table}");
        assert!(report.passed(), "{:?}\n{table}", report.failed_checks);
        assert_eq!(report.lost_acknowledged_bids, 0, "{table}");
        assert_eq!(report.duplicate_bids, 0, "{table}");
        assert!(report.converged, "{table}");
        if consistency == wsdr_core::Consistency::Strong {
            assert_eq!(report.accepted_below_other_region, 0, "{table}");
        }
    }
    let judge_alone = drill::run_simulated(DrillConfig {
        lab: LabConfig {
            composition: wsdr_lab::world::config::Composition::Reference,
            ..LabConfig::wsdr_defaults()
        },
        ..config(Scenario::InterRegionPartition)
    })
    .await
    .unwrap();
    assert_fails_with(
        &judge_alone,
        "a partition between two healthy Regions moved DNS",
    );
}

/// The health functions flooded from the internet with random paths a minute after the
/// primary is lost (`health-flood`: 90% of the requests reaching a health function refused
/// with 429). Whatever the flood does to the checks that read the functions, wsdr's records
/// cannot point at the dead primary: the PRIMARY record's check needs one view that says
/// serve, and the SECONDARY record's reads the secondary's API endpoint. With the judge's
/// answers behind both records (the reference composition), both turn unhealthy and DNS
/// answers the dead primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooded_health_function_never_sends_dns_back_to_the_dead_primary() {
    let with = |composition| DrillConfig {
        lab: LabConfig {
            composition,
            ..LabConfig::wsdr_defaults()
        },
        ..config(Scenario::HealthFlood)
    };
    let wsdr = drill::run_simulated(with(wsdr_lab::world::config::Composition::Wsdr))
        .await
        .unwrap();
    let table = wsdr.table();
    assert_eq!(wsdr.dns_flips_during_fault, 1, "{table}");
    assert!(wsdr.passed(), "{:?}\n{table}", wsdr.failed_checks);
    let judge_only = drill::run_simulated(with(wsdr_lab::world::config::Composition::Reference))
        .await
        .unwrap();
    let table = judge_only.table();
    assert!(judge_only.dns_answers_to_failed_primary > 0, "{table}");
    assert_fails_with(&judge_only, "answered the failed primary again");
}

/// The drill failed, and one of its failed checks says `words`.
fn assert_fails_with(report: &wsdr_lab::runs::report::Report, words: &str) {
    assert!(
        report.failed_checks.iter().any(|c| c.contains(words)),
        "no failed check says {words:?}: {:?}",
        report.failed_checks
    );
}
