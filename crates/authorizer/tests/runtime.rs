#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The authorizer's own binary under a local Lambda Runtime API: `main`'s wiring (its
//! configuration from the environment, the handler it hands the runtime) answers an event as
//! the deployed function does. `cargo test` of the library never runs `main`.

mod common;

use common::*;
use jsonwebtoken::Algorithm;
use serde_json::Value;
use wsdr_runtime_api::{Answer, Function};

const BINARY: &str = env!("CARGO_BIN_EXE_authorizer");

fn environment() -> Vec<(&'static str, &'static str)> {
    vec![
        ("JWT_ISSUER", ISSUER),
        ("JWT_AUDIENCE", AUDIENCE),
        ("JWT_ALGORITHMS", "HS256"),
        ("JWT_HS256_SECRET", SECRET),
        ("CANARY_HS256_SECRET", CANARY_SECRET),
        ("AWS_LAMBDA_LOG_FORMAT", "JSON"),
    ]
}

fn event(token: &str) -> Value {
    serde_json::to_value(request_with_query(token)).unwrap()
}

#[tokio::test]
async fn the_binary_allows_a_valid_token_for_its_subject_and_denies_a_forged_one() {
    let mut function = Function::start(BINARY, &environment()).await.unwrap();
    let valid = sign(Algorithm::HS256, None, &hs(SECRET.as_bytes()), &claims());
    let answer = function.invoke(event(&valid)).await.unwrap();
    let Answer::Response(policy) = &answer else {
        panic!("no policy: {answer:?}\n{}", function.stop().await);
    };
    assert_eq!(policy["principalId"], "user-alice", "{policy}");
    assert_eq!(policy["policyDocument"]["Statement"][0]["Effect"], "Allow");
    assert_eq!(
        policy["policyDocument"]["Statement"][0]["Resource"],
        METHOD_ARN
    );

    // The same process, a second event: a token signed with another secret.
    let forged = sign(
        Algorithm::HS256,
        None,
        &hs(b"another-secret-0123456789abcdef01234"),
        &claims(),
    );
    let answer = function.invoke(event(&forged)).await.unwrap();
    let Answer::Response(policy) = &answer else {
        panic!("no policy: {answer:?}");
    };
    assert_eq!(policy["policyDocument"]["Statement"][0]["Effect"], "Deny");
    assert_ne!(policy["principalId"], "user-alice");

    // Lambda's JSON log format: every line a JSON object, the TLS roots' choice among them.
    let logs = function.stop().await;
    let lines: Vec<Value> = logs
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
        .collect();
    let roots = lines
        .iter()
        .find(|line| {
            line["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("TLS roots"))
        })
        .unwrap_or_else(|| panic!("{logs}"));
    // The function's environment names no bundle: the first that exists is chosen.
    match wsdr_lambda::certs::CA_BUNDLES
        .iter()
        .find(|bundle| std::path::Path::new(bundle).is_file())
    {
        Some(bundle) => assert_eq!(roots["fields"]["bundle"], *bundle, "{logs}"),
        None => assert!(roots["fields"]["bundle"].is_null(), "{logs}"),
    }
    assert!(
        lines
            .iter()
            .any(|line| line["level"] == "INFO" && line.to_string().contains("allow")),
        "{logs}"
    );
}

#[tokio::test]
async fn the_binary_without_its_issuer_fails_its_start_and_answers_nothing() {
    let environment: Vec<_> = environment()
        .into_iter()
        .filter(|(name, _)| *name != "JWT_ISSUER")
        .collect();
    let mut function = Function::start(BINARY, &environment).await.unwrap();
    let valid = sign(Algorithm::HS256, None, &hs(SECRET.as_bytes()), &claims());
    let answer = function.invoke(event(&valid)).await.unwrap();
    let logs = function.stop().await;
    assert!(
        matches!(answer, Answer::Exited(Some(code)) if code != 0),
        "{answer:?}\n{logs}"
    );
    assert!(logs.contains("JWT_ISSUER"), "{logs}");
}
