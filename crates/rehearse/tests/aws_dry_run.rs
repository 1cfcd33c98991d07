#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The AWS path of `wsdr rehearse`, dry-run against the local peers: the rehearsal verdicts
//! written with `PutItem` (DynamoDB Local), the checks read with a signed
//! `GetHealthCheckStatus` (moto's Route 53, the SQS peer's server, which serves every service
//! it models). The same calls a rehearsal in an account makes, but the DNS flips.

use std::sync::Arc;
use wsdr_core::{HealthLedger, VerdictSource};
use wsdr_rehearse::aws::{AwsConfig, AwsTarget};

fn peer(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        panic!("{var} is not set: this test runs against the local peers (scripts/with-dynamodb-local.sh)")
    })
}

/// A health check made in moto's Route 53 (`CreateHealthCheck`): its id.
async fn create_check(route53: &str, reference: &str, path: &str) -> String {
    let crypto = Arc::new(rustls::crypto::ring::default_provider());
    let url = format!("{route53}/2013-04-01/healthcheck");
    let endpoint = wsdr_secrets::transport::Endpoint::parse(&url, crypto).unwrap();
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
         <CreateHealthCheckRequest xmlns=\"https://route53.amazonaws.com/doc/2013-04-01/\">\
         <CallerReference>{reference}</CallerReference><HealthCheckConfig>\
         <Type>HTTPS_STR_MATCH</Type><FullyQualifiedDomainName>health.example.com</FullyQualifiedDomainName>\
         <Port>443</Port><ResourcePath>{path}</ResourcePath><SearchString>verdict=serve</SearchString>\
         <RequestInterval>10</RequestInterval><FailureThreshold>1</FailureThreshold>\
         </HealthCheckConfig></CreateHealthCheckRequest>"
    );
    let answer = endpoint
        .post(wsdr_secrets::transport::Post {
            // moto's server routes a request by its signature's service (route53).
            headers: vec![
                ("content-type".into(), "text/xml".into()),
                (
                    "authorization".into(),
                    "AWS4-HMAC-SHA256 Credential=local/20261206/us-east-1/route53/aws4_request, SignedHeaders=host, Signature=0".into(),
                ),
            ],
            body,
        })
        .await
        .unwrap();
    assert!(
        answer.status.is_success(),
        "{}: {}",
        answer.status,
        answer.body
    );
    answer
        .body
        .split("<Id>")
        .nth(1)
        .and_then(|rest| rest.split("</Id>").next())
        .unwrap_or_else(|| panic!("no Id in {}", answer.body))
        .to_owned()
}

#[tokio::test]
async fn the_aws_path_checks_writes_and_reads_back_on_the_local_peers() {
    let (dynamodb, route53) = (peer("DYNAMODB_ENDPOINT"), peer("SQS_ENDPOINT"));
    let table = format!("rehearse-{}", std::process::id());
    let client = wsdr_aws::local::dynamo_client(&dynamodb, "us-east-1");
    wsdr_aws::schema::create_state_table(&client, &table)
        .await
        .unwrap();
    let run = std::process::id();
    let mut checks = std::collections::BTreeMap::new();
    for (name, path) in [
        ("PrimaryVerdictCheck", "/primary"),
        ("PrimarySelfCheck", "/self"),
        ("SecondaryHealthCheck", "/"),
        ("RehearsalVerdictCheck", "/rehearsal/primary"),
        ("RehearsalSelfCheck", "/rehearsal/self"),
    ] {
        let id = create_check(&route53, &format!("{name}-{run}"), path).await;
        checks.insert(name.to_owned(), id);
    }
    let config = AwsConfig {
        primary_region: "us-east-1".into(),
        secondary_region: "us-west-2".into(),
        state_table: table.clone(),
        primary_api_id: "abc123".into(),
        checks: checks.clone(),
        rehearsal_name: String::new(),
        primary_target: String::new(),
        secondary_target: String::new(),
        dynamodb_endpoint: Some(dynamodb.clone()),
        route53_endpoint: Some(route53.clone()),
    };
    let target = AwsTarget::connect(config.clone()).await.unwrap();
    let settings = wsdr_rehearse::Settings {
        dry_run: true,
        ..wsdr_rehearse::Settings::aws()
    };
    let report = wsdr_rehearse::rehearse(&target, &settings).await.unwrap();
    assert!(report.passed(), "{report:?}");
    assert_eq!(report.preflight.len(), 5, "{report:?}");
    // Each view's verdict is in its Region's replica, under its own key.
    let records = wsdr_aws::HealthRecords::new(client, &table);
    for source in [
        VerdictSource::RehearsalInside,
        VerdictSource::RehearsalJudge,
    ] {
        let (serve, _) = records.verdict("abc123", source).await.unwrap().unwrap();
        assert!(serve, "{source:?}");
    }
    assert_eq!(
        records
            .verdict("abc123", VerdictSource::Judge)
            .await
            .unwrap(),
        None,
        "no real verdict is touched"
    );
    // A check id Route 53 does not know is a clear error, not a healthy check.
    let mut unknown = config;
    unknown.checks.insert(
        "PrimaryVerdictCheck".into(),
        "00000000-0000-0000-0000-000000000000".into(),
    );
    let error = wsdr_rehearse::rehearse(&AwsTarget::connect(unknown).await.unwrap(), &settings)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("GetHealthCheckStatus"), "{error}");
}
