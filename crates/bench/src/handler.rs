//! Handler cost: in-process latency per route, on the in-memory store and on DynamoDB Local.

use crate::common::percentile;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;
use ws_handler::App;
use wsdr_auction::{Auction, AuctionService, StateStore};
use wsdr_core::memory::{MemoryConnections, MemoryStateStore, RecordingNotifier};
use wsdr_core::SystemClock;
use wsdr_protocol::{Amount, AuctionId};

#[derive(Debug, Clone, serde::Serialize)]
pub struct RouteCost {
    pub store: String,
    pub route: String,
    pub iterations: usize,
    pub p50_us: f64,
    pub p99_us: f64,
}

fn event(route: &str, connection: &str, body: Option<String>) -> Value {
    json!({
        "requestContext": {
            "routeKey": route, "eventType": if route == "$connect" { "CONNECT" } else { "MESSAGE" },
            "connectionId": connection, "requestId": "r", "stage": "prod", "apiId": "bench",
            "connectedAt": 0, "requestTimeEpoch": 0,
            "authorizer": {"principalId": "bench-user", "sub": "bench-user"}
        },
        "body": body,
        "isBase64Encoded": false
    })
}

/// Builds the i-th event of a route.
type EventMaker = Box<dyn Fn(usize) -> Value>;

async fn measure(app: &App, store: &str, iterations: usize) -> anyhow::Result<Vec<RouteCost>> {
    let mut out = Vec::new();
    let routes: [(&str, EventMaker); 5] = [
        (
            "$connect",
            Box::new(|i| event("$connect", &format!("c{i}="), None)),
        ),
        (
            "heartbeat",
            Box::new(|i| {
                event(
                    "heartbeat",
                    &format!("c{i}="),
                    Some(r#"{"action":"heartbeat"}"#.into()),
                )
            }),
        ),
        // getState on lot-2 (the subscriptions stay off lot-1, so bids below fan out to nobody).
        (
            "getState",
            Box::new(|i| {
                event(
                    "getState",
                    &format!("c{i}="),
                    Some(r#"{"action":"getState","auctionId":"lot-2"}"#.into()),
                )
            }),
        ),
        (
            "bid",
            Box::new(|i| {
                event(
                    "bid",
                    &format!("c{i}="),
                    Some(format!(
                        r#"{{"action":"bid","auctionId":"lot-1","amount":{},"bidId":"bench-{i:08}"}}"#,
                        1000 + i
                    )),
                )
            }),
        ),
        (
            "$disconnect",
            Box::new(|i| event("$disconnect", &format!("c{i}="), None)),
        ),
    ];
    for (route, make) in routes.iter() {
        let mut samples = Vec::with_capacity(iterations);
        for i in 0..iterations {
            let request = serde_json::from_value(make(i))?;
            let started = Instant::now();
            let response = app.respond(request).await;
            samples.push(started.elapsed().as_secs_f64() * 1e6);
            anyhow::ensure!(
                response.status_code == 200,
                "{route} answered {}",
                response.status_code
            );
        }
        samples.sort_by(f64::total_cmp);
        out.push(RouteCost {
            store: store.into(),
            route: (*route).into(),
            iterations,
            p50_us: percentile(&samples, 0.5),
            p99_us: percentile(&samples, 0.99),
        });
    }
    Ok(out)
}

async fn seed(store: &dyn wsdr_core::OpStore) -> anyhow::Result<()> {
    for id in ["lot-1", "lot-2"] {
        store
            .put_auction_if_absent(&Auction {
                id: AuctionId::new(id)?,
                item: "bench".into(),
                starting_price: Amount::new(1)?,
                min_increment: 1,
                closes_at: None,
            })
            .await?;
    }
    Ok(())
}

pub async fn in_memory(iterations: usize) -> anyhow::Result<Vec<RouteCost>> {
    let service = AuctionService::new(
        Arc::new(MemoryStateStore::new("bench", Arc::new(SystemClock))),
        Arc::new(MemoryConnections::default()),
        Arc::new(RecordingNotifier::default()),
        Arc::new(SystemClock),
        "bench",
    );
    seed(service.store().as_ref()).await?;
    measure(
        &App::new(service, "wsdr", wsdr_core::PushSettings::default()),
        "in-memory",
        iterations,
    )
    .await
}

/// Against DynamoDB Local (DYNAMODB_ENDPOINT), through the real adapters and `app_from_aws`.
pub async fn dynamodb_local(endpoint: &str, iterations: usize) -> anyhow::Result<Vec<RouteCost>> {
    let client = wsdr_aws::local::dynamo_client(endpoint, "us-east-1");
    let suffix = format!("{:x}", rand::random::<u32>());
    let (state, connections) = (
        format!("bench-state-{suffix}"),
        format!("bench-connections-{suffix}"),
    );
    wsdr_aws::schema::create_state_table(&client, &state).await?;
    wsdr_aws::schema::create_connections_table(&client, &connections).await?;
    let env: HashMap<&str, String> = HashMap::from([
        ("STATE_TABLE", state),
        ("CONNECTIONS_TABLE", connections),
        ("WS_CALLBACK_URL", "http://127.0.0.1:9/prod".to_owned()),
        ("REGION_LABEL", "bench".to_owned()),
    ]);
    let config = ws_handler::Config::from_lookup(|k| env.get(k).cloned())?;
    let sdk = wsdr_aws::SdkConfig::builder()
        .behavior_version(wsdr_aws::BehaviorVersion::latest())
        .region(wsdr_aws::Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .http_client(wsdr_aws::local::plain_http_client())
        .credentials_provider(wsdr_aws::SharedCredentialsProvider::new(
            wsdr_aws::Credentials::new("l", "l", None, None, "bench"),
        ))
        .build();
    let app = ws_handler::app_from_aws(&config, &sdk).await?;
    seed(&wsdr_aws::DynamoStateStore::new(
        client.clone(),
        &config.state_table,
    ))
    .await?;
    measure(&app, "DynamoDB Local", iterations).await
}
