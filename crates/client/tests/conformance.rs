#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The conformance vectors (`conformance/*.json` at the repository root) against the Rust
//! client's rules: the heartbeat rule, the backoff window, client-assisted failover and
//! server-directed moves. The browser client runs the same files (web/test/conformance.test.js):
//! a rule changed in one client and not the other fails here or there.

use rand::RngCore;
use serde_json::Value;
use std::time::Duration;
use wsdr_client::heartbeat::{Broken, Heartbeat};
use wsdr_client::moves::{decide, Destination, Ignored, MoveRequest};
use wsdr_client::{Backoff, RegionalEndpoint};
use wsdr_client::{Decision, EndpointPolicy, Fallback, ProbeResult, Target};

fn vectors(rule: &str) -> Vec<Value> {
    let path = format!(
        "{}/../../conformance/{rule}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let file: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(file["rule"], rule);
    file["cases"].as_array().unwrap().clone()
}

fn ms(value: &Value) -> Duration {
    Duration::from_millis(value.as_u64().unwrap_or_else(|| panic!("ms: {value}")))
}

fn opt_ms(value: &Value) -> Option<Duration> {
    (!value.is_null()).then(|| ms(value))
}

fn as_ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

#[test]
fn heartbeat_vectors() {
    let cases = vectors("heartbeat");
    assert!(cases.len() >= 10);
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let c = &case["config"];
        let mut hb = Heartbeat::new(
            ms(&c["interval_ms"]),
            ms(&c["timeout_ms"]),
            c["threshold"].as_u64().unwrap() as u32,
        );
        for (i, step) in case["steps"].as_array().unwrap().iter().enumerate() {
            let at = format!("{name}, step {i}");
            if step.get("pong").is_some() {
                hb.on_pong();
            } else if step.get("error_frame").is_some() {
                let next = hb.on_error_frame();
                let expect = &step["expect"];
                assert_eq!(next.map(as_ms), expect["next_ms"].as_u64(), "{at}");
                assert_eq!(
                    hb.broken().is_some(),
                    expect["broken"].as_bool().unwrap(),
                    "{at}"
                );
            } else if let Some(due) = step.get("due") {
                let got = hb.on_due(ms(&due["silence_ms"]), ms(&due["wall_silence_ms"]));
                let expect = &step["expect"];
                match (got, expect["broken"].as_str()) {
                    (Ok(next), None) => {
                        assert_eq!(as_ms(next), expect["next_ms"].as_u64().unwrap(), "{at}")
                    }
                    (Err(Broken::Silent), Some("silent")) => {}
                    (Err(Broken::Failures(_)), Some("failures")) => {}
                    (got, want) => panic!("{at}: got {got:?}, want {want:?}"),
                }
            } else {
                panic!("{at}: unknown step {step}");
            }
        }
    }
}

#[test]
fn backoff_vectors() {
    let cases = vectors("backoff");
    assert!(cases.len() >= 10);
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let c = &case["config"];
        let backoff = Backoff {
            base: ms(&c["base_ms"]),
            cap: ms(&c["cap_ms"]),
            floor: ms(&c["floor_ms"]),
            herd_window: opt_ms(&c["herd_window_ms"]),
            jitter: c["jitter"].as_bool().unwrap(),
            herd_hint: c["herd_hint"].as_bool().unwrap(),
        };
        let (low, high) = backoff.window(
            case["attempt"].as_u64().unwrap() as u32,
            case["throttled"].as_bool().unwrap(),
            opt_ms(&case["advertised_ms"]),
        );
        let expect = &case["expect"];
        assert_eq!(
            (as_ms(low), as_ms(high)),
            (
                expect["low_ms"].as_u64().unwrap(),
                expect["high_ms"].as_u64().unwrap()
            ),
            "{name}"
        );
    }
}

fn regions(value: &Value) -> Vec<RegionalEndpoint> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|r| RegionalEndpoint {
            region: r["region"].as_str().unwrap().into(),
            url: r["url"].as_str().unwrap().into(),
        })
        .collect()
}

fn target_index(target: &Target) -> Option<u64> {
    match target {
        Target::Global => None,
        Target::Regional(i) => Some(*i as u64),
    }
}

#[test]
fn fallback_vectors() {
    const GLOBAL: &str = "wss://auction.example.com";
    let cases = vectors("fallback");
    assert!(cases.len() >= 10);
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let c = &case["config"];
        let mut policy = EndpointPolicy::new(Fallback {
            after_failures: c["after_failures"].as_u64().unwrap() as u32,
            return_after: c["return_after"].as_u64().unwrap() as u32,
            ..Fallback::new(regions(&c["regions"]))
        });
        for (i, step) in case["steps"].as_array().unwrap().iter().enumerate() {
            let at = format!("{name}, step {i}");
            if let Some(region) = step.get("restored") {
                policy.on_restored(region.as_str().unwrap());
            } else if step.get("failure").is_some() {
                let moved = policy.on_failure();
                let expect = &step["expect"];
                assert_eq!(moved.is_some(), expect["moved"].as_bool().unwrap(), "{at}");
                assert_eq!(
                    target_index(policy.target()),
                    expect["target"].as_u64(),
                    "{at}"
                );
            } else if let Some(probe) = step.get("probe") {
                let result = match probe.as_str() {
                    Some(region) => ProbeResult::Healthy(region.into()),
                    None => ProbeResult::Failed,
                };
                let decision = policy.on_probe(result, step["current"].as_str());
                let name = match decision {
                    Decision::Stay => "stay",
                    Decision::AdoptGlobal => "adopt-global",
                    Decision::Return => "return",
                };
                assert_eq!(name, step["expect"].as_str().unwrap(), "{at}");
            } else if let Some(region) = step.get("redirect_from") {
                let target = policy.redirect_from(region.as_str().unwrap());
                let expect = &step["expect"];
                assert_eq!(
                    target.as_ref().and_then(target_index),
                    expect["target"].as_u64(),
                    "{at}"
                );
                if let Some(redirected) = expect.get("redirected") {
                    assert_eq!(target.is_some(), redirected.as_bool().unwrap(), "{at}");
                }
            } else if let Some(index) = step.get("move_to") {
                policy.move_to(match index.as_u64() {
                    Some(i) => Target::Regional(i as usize),
                    None => Target::Global,
                });
            } else if let Some(url) = step.get("expect_url") {
                assert_eq!(policy.url(GLOBAL), url.as_str().unwrap(), "{at}");
            } else {
                panic!("{at}: unknown step {step}");
            }
        }
    }
}

/// An RNG that returns one value forever: all zero bits draw 0.0, all one bits the largest
/// value below 1.0, the two ends of a uniform window.
struct Fixed(u64);

impl RngCore for Fixed {
    fn next_u32(&mut self) -> u32 {
        self.0 as u32
    }
    fn next_u64(&mut self) -> u64 {
        self.0
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        dest.fill(self.0 as u8);
    }
}

#[test]
fn moves_vectors() {
    let cases = vectors("moves");
    assert!(cases.len() >= 10);
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let frame = &case["frame"];
        let regions = regions(&case["regions"]);
        let request = MoveRequest {
            serving_region: case["serving_region"].as_str().unwrap(),
            to: frame["to"].as_str().unwrap(),
            endpoint: frame["endpoint"].as_str(),
            delay: ms(frame.get("after_ms").unwrap_or(&Value::from(0))),
            window: ms(&frame["window_ms"]),
        };
        assert_eq!(
            case["max_window_ms"].as_u64(),
            Some(as_ms(wsdr_client::moves::MAX_WINDOW)),
            "{name}: the vectors' cap is the client's"
        );
        let global = case["global_url"].as_str().unwrap();
        let expect = &case["expect"];
        let earliest = decide(request, global, &regions, &mut Fixed(0));
        let latest = decide(request, global, &regions, &mut Fixed(u64::MAX));
        match (earliest, latest, expect["ignored"].as_str()) {
            (Err(why), Err(_), Some(kind)) => {
                let got = match why {
                    Ignored::AlreadyThere => "already-there",
                    Ignored::UnknownEndpoint(_) => "unknown-endpoint",
                    Ignored::EndpointOfAnotherRegion { .. } => "endpoint-of-another-region",
                };
                assert_eq!(got, kind, "{name}");
            }
            (Ok(first), Ok(last), None) => {
                assert_eq!(first.to, expect["to"].as_str().unwrap(), "{name}");
                let target = match first.destination {
                    Destination::Global => None,
                    Destination::Regional(i) => Some(i as u64),
                };
                assert_eq!(target, expect["target"].as_u64(), "{name}");
                assert_eq!(
                    as_ms(first.after),
                    expect["after_min_ms"].as_u64().unwrap(),
                    "{name}"
                );
                // The top of the window, to the millisecond (a draw just below 1.0).
                let top = expect["after_max_ms"].as_u64().unwrap();
                assert!(
                    top - as_ms(last.after) <= 1,
                    "{name}: latest {:?}, window top {top} ms",
                    last.after
                );
            }
            (first, _, want) => panic!("{name}: got {first:?}, want {want:?}"),
        }
    }
}

#[test]
fn minimum_bid_vectors() {
    let cases = vectors("minimum_bid");
    assert!(cases.len() >= 5);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let amount = |v: &Value| v.as_u64().map(|a| wsdr_client::Amount::new(a).unwrap());
        let view = wsdr_client::AuctionView {
            id: wsdr_client::AuctionId::new("lot-1").unwrap(),
            item: "lot".into(),
            high_bid: amount(&case["high"]).map(|amount| wsdr_client::HighBidView {
                amount,
                bidder: "bob".into(),
                bid_id: wsdr_client::BidId::new("bob-00000001").unwrap(),
                at: 1,
            }),
            bid_count: 1,
            version: 1,
            versions: Default::default(),
            starting_price: amount(&case["starting_price"]),
            min_increment: case["min_increment"].as_u64(),
            min_next_bid: None,
        };
        assert_eq!(
            view.minimum_next_bid().map(wsdr_client::Amount::get),
            case["expect"].as_u64(),
            "{name}"
        );
    }
    // A server that sent no rules: no minimum to show.
    let bare: wsdr_client::AuctionView = serde_json::from_str(
        r#"{"id":"lot-1","item":"lot","highBid":null,"bidCount":0,"version":0,"versions":{}}"#,
    )
    .unwrap();
    assert_eq!(bare.minimum_next_bid(), None);
}

#[test]
fn offline_bids_vectors() {
    use wsdr_client::offline::{admits, expired};
    let cases = vectors("offline_bids");
    assert!(cases.len() >= 5);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let max = case["max"].as_u64().unwrap() as usize;
        let max_age = ms(&case["max_age_ms"]);
        let ages: Vec<Duration> = case["ages_ms"].as_array().unwrap().iter().map(ms).collect();
        if let Some(expect) = case["expect_expired"].as_array() {
            for (age, expect) in ages.iter().zip(expect) {
                assert_eq!(
                    expired(*age, max_age),
                    expect.as_bool().unwrap(),
                    "{name}: {age:?}"
                );
            }
        }
        if let Some(expect) = case["expect_admitted"].as_array() {
            let mut queued = 0;
            for (i, expect) in expect.iter().enumerate() {
                let admitted = admits(queued, max);
                assert_eq!(admitted, expect.as_bool().unwrap(), "{name}: bid {i}");
                if admitted {
                    queued += 1;
                }
            }
        }
    }
}

#[test]
fn give_up_vectors() {
    use wsdr_client::give_up::{after_failures, on_token_error};
    use wsdr_client::TokenError;
    let cases = vectors("give_up");
    assert!(cases.len() >= 6);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        if let Some(kind) = case["token_error"].as_str() {
            let error = match kind {
                "denied" => TokenError::Denied("signed out".into()),
                "unavailable" => TokenError::Unavailable("timeout".into()),
                other => panic!("{name}: unknown token error {other}"),
            };
            assert_eq!(
                on_token_error(&error),
                case["expect_gives_up"].as_bool().unwrap(),
                "{name}"
            );
            continue;
        }
        let max = case["max_attempts"].as_u64().map(|m| m as u32);
        // The retry after the `attempt`-th failure in a row asks the rule first.
        let gave_up_at = (0..=case["failures"].as_u64().unwrap() as u32)
            .take_while(|attempt| *attempt < case["failures"].as_u64().unwrap() as u32)
            .find(|attempt| after_failures(*attempt, max));
        assert_eq!(
            gave_up_at.map(u64::from),
            case["expect_gave_up_at"].as_u64(),
            "{name}"
        );
    }
}

/// The numbers of why a session ended and why a client gave up: the Rust table is the
/// vectors' table, and each disconnect the client can report maps to its case.
#[test]
fn reason_code_vectors() {
    use wsdr_client::transport::ConnectError;
    use wsdr_client::{DisconnectReason, ReasonCode};
    let cases = vectors("reason_codes");
    assert_eq!(cases.len(), ReasonCode::ALL.len(), "one case per code");
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let number = case["code"].as_u64().unwrap() as u16;
        let code =
            ReasonCode::from_number(number).unwrap_or_else(|| panic!("{name}: no code {number}"));
        assert_eq!(code.name(), name, "{number}");
        assert_eq!(
            code.is_terminal(),
            case["terminal"].as_bool().unwrap(),
            "{name}"
        );
        // What the client reports for the situation, where the Rust client has it.
        let reported = match name {
            "heartbeat_failures" => Some(DisconnectReason::HeartbeatFailures(2)),
            "silent" => Some(DisconnectReason::Silent),
            "server_closed" => Some(DisconnectReason::Closed { code: Some(1006) }),
            "connect_failed" => Some(DisconnectReason::ConnectFailed(ConnectError::Refused {
                status: 503,
            })),
            "connect_timeout" => Some(DisconnectReason::ConnectFailed(ConnectError::Timeout(
                Duration::from_secs(10),
            ))),
            "socket_error" => Some(DisconnectReason::Error("send failed".into())),
            "token_unavailable" => Some(DisconnectReason::TokenUnavailable("timeout".into())),
            "client_closed" => Some(DisconnectReason::ClientClosed),
            "returning" => Some(DisconnectReason::Returning),
            "moved" => Some(DisconnectReason::Moved {
                to: "us-west-2".into(),
            }),
            "redirected" => Some(DisconnectReason::Redirected {
                from: "us-east-1".into(),
            }),
            // No Rust disconnect is these: the browser's reconnect() and offline event, and
            // the two ends (GaveUp's code, checked by the reconnect tests).
            "reconnect_asked" | "offline" | "attempts_exhausted" | "token_denied" => None,
            other => panic!("a case the Rust client does not know: {other}"),
        };
        if let Some(reason) = reported {
            assert_eq!(reason.code(), code, "{name}");
        }
    }
}

/// An op's digest: the same canonical form and hash as the browser client and the server
/// (one implementation, `wsdr_protocol::digest`, serves the Rust client and the server).
#[test]
fn digest_vectors() {
    use wsdr_protocol::{canonical_json, Digest};
    let path = format!(
        "{}/../../conformance/digest.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(file["rule"], "digest");
    let value_of = |case: &Value| match case.get("raw") {
        Some(raw) => serde_json::from_str::<Value>(raw.as_str().unwrap()).unwrap(),
        None => case["value"].clone(),
    };
    let cases = file["cases"].as_array().unwrap();
    assert!(cases.len() >= 15);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let value = value_of(case);
        assert_eq!(canonical_json(&value).unwrap(), case["canonical"], "{name}");
        assert_eq!(
            Digest::of(&value).unwrap().to_string(),
            case["digest"].as_str().unwrap(),
            "{name}"
        );
    }
    let refused = file["refused"].as_array().unwrap();
    assert!(refused.len() >= 4);
    for case in refused {
        let name = case["name"].as_str().unwrap();
        assert!(canonical_json(&value_of(case)).is_err(), "{name}");
    }
}

/// A copy as the vectors name it, `[log, position]`; the rest is the client's to fill.
fn topic_copy(named: &Value) -> wsdr_protocol::OpView {
    let (log, position) = (named[0].as_str().unwrap(), named[1].as_u64().unwrap());
    let op = serde_json::json!({ "text": format!("{log} {position}") });
    wsdr_protocol::OpView {
        author: "a".into(),
        op_id: wsdr_protocol::OpId::new(format!("op-{log}-{position:04}")).unwrap(),
        region: log.into(),
        position,
        log: log.into(),
        at: position,
        digest: wsdr_protocol::Digest::of(&op).unwrap(),
        op,
    }
}

fn versions_of(value: &Value) -> wsdr_protocol::Versions {
    serde_json::from_value(value.clone()).unwrap()
}

#[test]
fn topic_log_vectors() {
    use wsdr_client::topics::{Answer, Merged, TopicLog};
    let cases = vectors("topic_log");
    assert!(cases.len() >= 8);
    for case in cases {
        let mut log = TopicLog::new(wsdr_protocol::Topic::parse("chat:lobby").unwrap());
        let mut last = Merged::default();
        for (i, step) in case["steps"].as_array().unwrap().iter().enumerate() {
            let at = format!("{}, step {i}", case["name"]);
            if let Some(counted) = step.get("counted") {
                log.counted(&versions_of(counted));
            }
            if let Some(merge) = step.get("merge") {
                let ops = merge["ops"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(topic_copy)
                    .collect();
                last = log.merge(&versions_of(&merge["versions"]), Value::Null, ops);
            }
            if let Some(added) = step.get("expect_added") {
                let got: Vec<Value> = last
                    .added
                    .iter()
                    .map(|op| serde_json::json!([op.log, op.position]))
                    .collect();
                assert_eq!(&Value::from(got), added, "{at}: added");
            }
            if let Some(behind) = step.get("expect_behind") {
                assert_eq!(Some(last.behind), behind.as_bool(), "{at}: behind");
            }
            if let Some(complete) = step.get("answered") {
                let answer = match log.answered(&last, complete.as_bool().unwrap()) {
                    Answer::Done => Value::from("done"),
                    Answer::AskAgain => Value::from("again"),
                    Answer::Hole(frontier) => serde_json::json!({ "hole": frontier }),
                };
                assert_eq!(&answer, &step["expect_answer"], "{at}: answer");
            }
            if let Some(frontier) = step.get("expect_frontier") {
                assert_eq!(log.frontier(), versions_of(frontier), "{at}: frontier");
            }
            if let Some(holes) = step.get("expect_holes") {
                let got: std::collections::BTreeMap<String, (u64, u64)> =
                    serde_json::from_value(holes.clone()).unwrap();
                assert_eq!(log.holes(), got, "{at}: holes");
            }
            if let Some(worth) = step.get("expect_worth_asking") {
                assert_eq!(
                    Some(log.worth_asking()),
                    worth.as_bool(),
                    "{at}: worth asking"
                );
            }
            if let Some(since) = step.get("expect_request_since") {
                let wsdr_protocol::ClientMessage::GetTopic { since: got, .. } =
                    log.request(Vec::new())
                else {
                    panic!("{at}: not a getState");
                };
                let want = (!since.is_null()).then(|| versions_of(since));
                assert_eq!(got, want, "{at}: since");
            }
        }
    }
}
