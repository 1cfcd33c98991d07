#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The state table's stream sample (`events/dynamodb-stream.json`) through the real handler:
//! every summary (this Region's and the other's) is pushed to this Region's subscribers,
//! conflated per auction; other items push nothing.

use std::sync::Arc;
use ws_handler::App;
use wsdr_auction::{Auction, AuctionService};
use wsdr_core::memory::{MemoryConnections, MemoryStateStore, RecordingNotifier};
use wsdr_core::{ConnectionId, SystemClock, UserId};
use wsdr_protocol::{Amount, AuctionId};

const STREAM: &str = include_str!("../../../events/dynamodb-stream.json");

async fn app(region: &str) -> (App, Arc<RecordingNotifier>) {
    let notifier = Arc::new(RecordingNotifier::default());
    let service = AuctionService::new(
        Arc::new(MemoryStateStore::new(region, Arc::new(SystemClock))),
        Arc::new(MemoryConnections::default()),
        notifier.clone(),
        Arc::new(SystemClock),
        region,
    );
    service
        .ensure_auction(&Auction {
            id: AuctionId::new("lot-1").unwrap(),
            item: "Stratocaster".into(),
            starting_price: Amount::new(100_000).unwrap(),
            min_increment: 1_000,
            closes_at: None,
        })
        .await
        .unwrap();
    // carol watches lot-1 here.
    service
        .get_state(
            &ConnectionId::new("carol-conn").unwrap(),
            &UserId::new("carol").unwrap(),
            &AuctionId::new("lot-1").unwrap(),
        )
        .await
        .unwrap();
    (
        App::new(service, "wsdr", wsdr_core::PushSettings::default()),
        notifier,
    )
}

fn lambda_event(payload: serde_json::Value) -> lambda_runtime::LambdaEvent<serde_json::Value> {
    lambda_runtime::LambdaEvent::new(payload, lambda_runtime::Context::default())
}

#[tokio::test]
async fn another_regions_summary_in_the_stream_is_pushed_to_subscribers() {
    let (app, notifier) = app("us-west-2").await;
    let event: serde_json::Value = serde_json::from_str(STREAM).unwrap();
    let typed: aws_lambda_events::dynamodb::Event = serde_json::from_str(STREAM).unwrap();
    assert_eq!(
        ws_handler::stream::summary_keys(&typed).len(),
        2,
        "both records are summaries"
    );
    let answer = app.handle_any(lambda_event(event)).await.unwrap();
    assert_eq!(answer, serde_json::json!({ "batchItemFailures": [] }));
    let sent = notifier.sent();
    assert_eq!(
        sent.len(),
        1,
        "one push for lot-1: both Regions' summaries conflated"
    );
    assert_eq!(sent[0].0.as_str(), "carol-conn");
    let frame: serde_json::Value = serde_json::from_slice(&sent[0].1).unwrap();
    assert_eq!(frame["type"], "bidUpdate");
    assert_eq!(frame["auctionId"], "lot-1");
    assert_eq!(frame["region"], "us-west-2");
}

#[tokio::test]
async fn other_items_push_nothing_and_this_regions_own_summary_is_pushed() {
    let (app, notifier) = app("us-east-1").await;
    let mut event: serde_json::Value = serde_json::from_str(STREAM).unwrap();
    // A bid copy alone: nothing to push.
    event["Records"][0]["dynamodb"]["Keys"]["pk"]["S"] = "OPS#auction#lot-1#alice".into();
    event["Records"][0]["dynamodb"]["Keys"]["sk"]["S"] = "bid-alice-0002#us-west-2".into();
    let mut copy_only = event.clone();
    copy_only["Records"].as_array_mut().unwrap().truncate(1);
    app.handle_any(lambda_event(copy_only)).await.unwrap();
    assert!(notifier.sent().is_empty());
    // This Region's own summary: its bid is pushed from the stream (the bid's answer did
    // not wait for it).
    event["Records"][1]["dynamodb"]["Keys"]["sk"]["S"] = "us-east-1".into();
    app.handle_any(lambda_event(event)).await.unwrap();
    assert_eq!(notifier.sent().len(), 1);
}

#[tokio::test]
async fn api_gateway_events_still_route_through_handle_any() {
    let (app, _) = app("us-east-1").await;
    let heartbeat: serde_json::Value =
        serde_json::from_str(include_str!("../../../events/heartbeat.json")).unwrap();
    let answer = app.handle_any(lambda_event(heartbeat)).await.unwrap();
    assert_eq!(answer["statusCode"], 200);
    assert!(answer["body"].as_str().unwrap().contains("\"pong\""));
}

#[test]
fn a_strong_mode_ledger_head_names_its_auction() {
    let mut event: serde_json::Value = serde_json::from_str(STREAM).unwrap();
    let record = &mut event["Records"][0]["dynamodb"];
    record["Keys"]["pk"]["S"] = "SUMMARY#auction#lot-9".into();
    record["Keys"]["sk"]["S"] = "LEDGER".into();
    let event: aws_lambda_events::dynamodb::Event = serde_json::from_value(event).unwrap();
    let auctions = ws_handler::stream::summary_keys(&event);
    assert_eq!(auctions[0].to_string(), "auction:lot-9");
}

/// The SQS sample (`events/push-jobs.json`): one job of lot-1's push, for the shard of the
/// sample connection `carol-conn`, run by the push workers' path.
#[tokio::test]
async fn the_push_job_sample_runs_through_handle_any() {
    let (app, notifier) = app("us-east-1").await;
    let event: serde_json::Value =
        serde_json::from_str(include_str!("../../../events/push-jobs.json")).unwrap();
    assert!(ws_handler::stream::is_push_job_event(&event));
    let answer = app.handle_any(lambda_event(event)).await.unwrap();
    assert_eq!(answer, serde_json::json!({ "batchItemFailures": [] }));
    let carol = ConnectionId::new("carol-conn").unwrap();
    assert_eq!(
        wsdr_core::push::shard_of(&carol),
        7,
        "the sample names carol's shard"
    );
    let sent = notifier.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, carol);
    let frame: serde_json::Value = serde_json::from_slice(&sent[0].1).unwrap();
    assert_eq!(
        (frame["type"].as_str(), frame["auctionId"].as_str()),
        (Some("bidUpdate"), Some("lot-1"))
    );
}
