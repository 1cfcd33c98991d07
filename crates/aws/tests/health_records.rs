#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! HealthRecords against DynamoDB Local: the fast verdict's records beside the auction items.

mod common;

use wsdr_aws::HealthRecords;
use wsdr_core::HealthLedger;

#[tokio::test]
async fn rounds_and_verdicts_round_trip_per_api_and_vantage_point() {
    let client = common::client();
    let table = common::state_table(&client).await;
    let records = HealthRecords::new(client, &table);
    assert_eq!(records.verdict("api1").await.unwrap(), None);
    assert_eq!(records.round("api1", "inside").await.unwrap(), None);
    records
        .put_round("api1", "inside", false, 1_000)
        .await
        .unwrap();
    records
        .put_round("api1", "outside", true, 1_200)
        .await
        .unwrap();
    assert_eq!(
        records.round("api1", "inside").await.unwrap(),
        Some((false, 1_000))
    );
    assert_eq!(
        records.round("api1", "outside").await.unwrap(),
        Some((true, 1_200))
    );
    assert_eq!(records.round("api2", "inside").await.unwrap(), None);
    records.put_verdict("api1", false, 2_000).await.unwrap();
    records.put_verdict("api1", true, 3_000).await.unwrap();
    assert_eq!(
        records.verdict("api1").await.unwrap(),
        Some((true, 3_000)),
        "the latest verdict"
    );
    assert_eq!(records.last_change("api1").await.unwrap(), None);
    records.put_change("api1", false, 2_000).await.unwrap();
    assert_eq!(
        records.last_change("api1").await.unwrap(),
        Some((false, 2_000))
    );
    assert_eq!(
        records.verdict("api1").await.unwrap(),
        Some((true, 3_000)),
        "a change is its own item"
    );
}
