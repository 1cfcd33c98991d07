#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! HealthRecords against DynamoDB Local: the fast verdicts' records beside the auction items,
//! each source under its own partition key.

mod common;

use wsdr_aws::HealthRecords;
use wsdr_core::HealthLedger;
use wsdr_core::VerdictSource::{Inside, Judge};

#[tokio::test]
async fn verdicts_and_changes_round_trip_per_api_and_source() {
    let client = common::client();
    let table = common::state_table(&client).await;
    let records = HealthRecords::new(client.clone(), &table);
    assert_eq!(records.verdict("api1", Inside).await.unwrap(), None);
    records
        .put_round("api1", Inside, false, 1_000)
        .await
        .unwrap();
    records
        .put_verdict("api1", Inside, false, 2_000)
        .await
        .unwrap();
    records
        .put_verdict("api1", Inside, true, 3_000)
        .await
        .unwrap();
    records
        .put_verdict("api1", Judge, false, 2_500)
        .await
        .unwrap();
    assert_eq!(
        records.verdict("api1", Inside).await.unwrap(),
        Some((true, 3_000)),
        "the latest verdict"
    );
    assert_eq!(
        records.verdict("api1", Judge).await.unwrap(),
        Some((false, 2_500)),
        "the judge's verdict is its own item"
    );
    assert_eq!(records.verdict("api2", Inside).await.unwrap(), None);
    assert_eq!(records.last_change("api1", Judge).await.unwrap(), None);
    records
        .put_change("api1", Judge, false, 2_000)
        .await
        .unwrap();
    assert_eq!(
        records.last_change("api1", Judge).await.unwrap(),
        Some((false, 2_000))
    );
    assert_eq!(records.last_change("api1", Inside).await.unwrap(), None);
    assert_eq!(
        records.verdict("api1", Judge).await.unwrap(),
        Some((false, 2_500)),
        "a change is its own item"
    );
    // Each source's items under its own partition key: what dynamodb:LeadingKeys scopes.
    for (source, pk) in [(Inside, "HEALTH#api1"), (Judge, "JUDGE#api1")] {
        assert_eq!(wsdr_aws::health::pk("api1", source), pk);
        let item = client
            .get_item()
            .table_name(&table)
            .key("pk", aws_sdk_dynamodb::types::AttributeValue::S(pk.into()))
            .key(
                "sk",
                aws_sdk_dynamodb::types::AttributeValue::S("VERDICT".into()),
            )
            .send()
            .await
            .unwrap()
            .item;
        assert!(item.is_some(), "{pk} VERDICT");
    }
}

/// A probe round is its own item beside the verdict (`ROUND`, for an operator's diagnosis),
/// the newest round only.
#[tokio::test]
async fn a_round_is_recorded_under_its_source_as_the_newest_round() {
    let client = common::client();
    let table = common::state_table(&client).await;
    let records = HealthRecords::new(client.clone(), &table);
    records.put_round("api1", Judge, true, 1_000).await.unwrap();
    records
        .put_round("api1", Judge, false, 2_000)
        .await
        .unwrap();
    let item = client
        .get_item()
        .table_name(&table)
        .key(
            "pk",
            aws_sdk_dynamodb::types::AttributeValue::S("JUDGE#api1".into()),
        )
        .key(
            "sk",
            aws_sdk_dynamodb::types::AttributeValue::S("ROUND".into()),
        )
        .send()
        .await
        .unwrap()
        .item
        .expect("the round's item");
    assert_eq!(item["ok"].as_bool().unwrap(), &false);
    assert_eq!(item["atMs"].as_n().unwrap(), "2000");
    assert_eq!(
        records.verdict("api1", Judge).await.unwrap(),
        None,
        "a round is no verdict"
    );
}
