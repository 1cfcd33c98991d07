#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! Authorizer output -> handler input -> state keyed by the token's `sub`, the way API Gateway
//! passes the authorizer's context to the `$connect` and message routes.

mod common;

use authorizer::Authorizer;
use aws_lambda_events::apigw::ApiGatewayWebsocketProxyRequest;
use common::*;
use jsonwebtoken::Algorithm;
use serde_json::{json, Value};
use std::sync::Arc;
use wsdr_auction::{Auction, AuctionService};
use wsdr_core::memory::{MemoryConnections, MemoryStateStore, RecordingNotifier};
use wsdr_core::SystemClock;
use wsdr_protocol::{Amount, AuctionId};

const CONNECT: &str = include_str!("../../../events/connect.json");
const BID: &str = include_str!("../../../events/bid.json");
const GET_STATE: &str = include_str!("../../../events/getState.json");

/// What API Gateway does: `requestContext.authorizer` = the context plus `principalId`.
fn with_authorizer(
    event: &str,
    connection: &str,
    response: &Value,
) -> ApiGatewayWebsocketProxyRequest {
    let mut e: Value = serde_json::from_str(event).unwrap();
    let mut context = response["context"].clone();
    context["principalId"] = response["principalId"].clone();
    e["requestContext"]["authorizer"] = context;
    e["requestContext"]["connectionId"] = connection.into();
    serde_json::from_value(e).unwrap()
}

#[tokio::test]
async fn authorizer_context_flows_into_state_keyed_by_sub() {
    let (url, _) = jwks_server(&["rsa-1"]).await;
    let authorizer = Authorizer::new(&config(&url, &[])).await;
    let token = sign(
        Algorithm::RS256,
        Some("rsa-1"),
        &rsa(RSA_PRIVATE),
        &json!({
            "sub": "0f3c9a7e-cognito-sub", "iss": ISSUER, "aud": AUDIENCE, "exp": now() + 300
        }),
    );
    let response =
        serde_json::to_value(authorizer.authorize(&request_with_query(&token)).await).unwrap();
    assert_eq!(
        response["policyDocument"]["Statement"][0]["Effect"],
        "Allow"
    );

    let store = Arc::new(MemoryStateStore::new("us-west-2", Arc::new(SystemClock)));
    let service = AuctionService::new(
        store.clone(),
        Arc::new(MemoryConnections::default()),
        Arc::new(RecordingNotifier::default()),
        Arc::new(SystemClock),
        "us-west-2",
    );
    service
        .ensure_auction(&Auction {
            id: AuctionId::new("lot-1").unwrap(),
            item: "x".into(),
            starting_price: Amount::new(1).unwrap(),
            min_increment: 1,
            closes_at: None,
        })
        .await
        .unwrap();
    let app = ws_handler::App::new(service, "wsdr", wsdr_core::PushSettings::default());

    assert_eq!(
        app.respond(with_authorizer(CONNECT, "first=", &response))
            .await
            .status_code,
        200
    );
    app.respond(with_authorizer(BID, "first=", &response)).await;
    // A new connection (after a failover, say) of the same user sees the same state.
    let reply = app
        .respond(with_authorizer(GET_STATE, "second=", &response))
        .await;
    let Some(aws_lambda_events::encodings::Body::Text(text)) = reply.body else {
        panic!("no body")
    };
    let state: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(state["you"]["userId"], "0f3c9a7e-cognito-sub");
    assert_eq!(state["you"]["lastBid"]["amount"], 150_000);
    assert_eq!(
        state["auction"]["highBid"]["bidder"],
        "0f3c9a7e-cognito-sub"
    );
    assert_eq!(state["region"], "us-west-2");
}
