#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! Every sample event in `events/` through the real handler, on in-memory adapters.

mod common;

use common::*;
use std::sync::Arc;
use ws_handler::App;
use wsdr_auction::BidsHeld;
use wsdr_auction::{Auction, AuctionService};
use wsdr_core::memory::{MemoryConnections, MemoryStateStore, RecordingNotifier};
use wsdr_core::{ConnectionId, SystemClock};
use wsdr_protocol::{Amount, AuctionId};

struct World {
    app: App,
    connections: Arc<MemoryConnections>,
    store: Arc<MemoryStateStore>,
}

async fn world() -> World {
    let store = Arc::new(MemoryStateStore::new("us-east-1", Arc::new(SystemClock)));
    let connections = Arc::new(MemoryConnections::default());
    let service = AuctionService::new(
        store.clone(),
        connections.clone(),
        Arc::new(RecordingNotifier::default()),
        Arc::new(SystemClock),
        "us-east-1",
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
    World {
        app: App::new(service, "wsdr", wsdr_core::PushSettings::default()),
        connections,
        store,
    }
}

#[tokio::test]
async fn connect_event_registers_the_connection_for_the_sub() {
    let w = world().await;
    let response = w.app.respond(event(CONNECT)).await;
    assert_eq!(response.status_code, 200);
    assert!(
        response.headers.get("sec-websocket-protocol").is_none(),
        "no subprotocol was offered"
    );
    assert!(w
        .connections
        .contains(&ConnectionId::new("d2s0Tdm8IAMCJqg=").unwrap()));
}

#[tokio::test]
async fn connect_with_subprotocol_token_echoes_only_the_protocol_name() {
    let w = world().await;
    let response = w.app.respond(event(CONNECT_SUBPROTOCOL)).await;
    assert_eq!(response.status_code, 200);
    assert_eq!(
        response.headers.get("sec-websocket-protocol").unwrap(),
        "wsdr"
    );
}

#[tokio::test]
async fn an_offer_that_does_not_name_the_protocol_gets_no_protocol_back() {
    let w = world().await;
    let mut e = event(CONNECT_SUBPROTOCOL);
    for value in [
        e.headers.get_mut("Sec-WebSocket-Protocol"),
        e.multi_value_headers.get_mut("Sec-WebSocket-Protocol"),
    ]
    .into_iter()
    .flatten()
    {
        *value = "chat, eyJhbGciOi-REDACTED".parse().unwrap();
    }
    let response = w.app.respond(e).await;
    assert_eq!(response.status_code, 200);
    assert!(
        response.headers.get("sec-websocket-protocol").is_none(),
        "{:?}",
        response.headers
    );
}

#[tokio::test]
async fn connect_without_authorizer_identity_is_refused() {
    let w = world().await;
    let mut e = event(CONNECT);
    e.request_context.authorizer.fields.clear();
    assert_eq!(w.app.respond(e).await.status_code, 401);
    assert!(w.connections.is_empty());
}

#[tokio::test]
async fn disconnect_event_removes_the_connection() {
    let w = world().await;
    w.app.respond(event(CONNECT)).await;
    assert_eq!(w.app.respond(event(DISCONNECT)).await.status_code, 200);
    assert!(w.connections.is_empty());
}

#[tokio::test]
async fn heartbeat_event_answers_pong_naming_the_region() {
    let w = world().await;
    let b = body(&w.app.respond(event(HEARTBEAT)).await);
    assert_eq!(b["type"], "pong");
    assert_eq!(b["region"], "us-east-1");
    assert!(b["ts"].as_u64().unwrap() > 1_700_000_000_000);
}

#[tokio::test]
async fn bid_then_get_state_events_show_the_bid_keyed_by_sub() {
    let w = world().await;
    let b = body(&w.app.respond(event(BID)).await);
    assert_eq!(b["type"], "bidResult");
    assert_eq!(b["status"], "accepted");
    assert_eq!(b["bidId"], "3f2b8c1e-9d4a-4b7e-a1c2-0e5f6a7b8c9d");
    // Replaying the same event is idempotent.
    assert_eq!(
        body(&w.app.respond(event(BID)).await)["status"],
        "duplicate"
    );
    let state = body(
        &w.app
            .respond(event_as(GET_STATE, "another-conn=", "user-alice", None))
            .await,
    );
    assert_eq!(state["type"], "state");
    assert_eq!(state["auction"]["highBid"]["amount"], 150_000);
    assert_eq!(state["auction"]["highBid"]["bidder"], "user-alice");
    assert_eq!(state["you"]["userId"], "user-alice");
    assert_eq!(state["you"]["lastBid"]["amount"], 150_000);
}

#[tokio::test]
async fn default_route_answers_unknown_action() {
    let w = world().await;
    let b = body(&w.app.respond(event(DEFAULT)).await);
    assert_eq!(b["type"], "error");
    assert_eq!(b["code"], "unknown_action");
    assert_eq!(b["region"], "us-east-1");
}

#[tokio::test]
async fn user_comes_from_the_authorizer_never_from_the_message() {
    let w = world().await;
    let forged = r#"{"action":"bid","auctionId":"lot-1","amount":200000,"bidId":"forged-0001","sub":"user-bob","userId":"user-bob"}"#;
    w.app
        .respond(event_as(BID, "c=", "user-alice", Some(forged)))
        .await;
    let bids = w.store.all_bids(&AuctionId::new("lot-1").unwrap());
    assert_eq!(bids.len(), 1);
    assert_eq!(bids[0].bidder.as_str(), "user-alice");
}

#[tokio::test]
async fn message_without_identity_gets_unauthorized_frame() {
    let w = world().await;
    let mut e = event(BID);
    e.request_context.authorizer.fields.clear();
    let b = body(&w.app.respond(e).await);
    assert_eq!(b["code"], "unauthorized");
    assert!(w
        .store
        .all_bids(&AuctionId::new("lot-1").unwrap())
        .is_empty());
}

#[tokio::test]
async fn binary_frame_gets_bad_json_frame() {
    let w = world().await;
    let mut e = event(HEARTBEAT);
    e.is_base64_encoded = true;
    assert_eq!(body(&w.app.respond(e).await)["code"], "bad_json");
}

#[tokio::test]
async fn hostile_frames_through_the_handler_get_error_frames_and_change_nothing() {
    let w = world().await;
    let before = w.store.dump();
    for (name, frame, code) in wsdr_protocol::hostile::hostile_frames() {
        let b = body(
            &w.app
                .respond(message("$default", "c=", "user-mallory", &frame))
                .await,
        );
        assert_eq!(b["type"], "error", "{name}");
        let expected = serde_json::to_value(code).unwrap();
        // Invalid UTF-8 cannot reach a Lambda as a text body; lossy decoding keeps it bad.
        assert_eq!(b["code"], expected, "{name}");
    }
    assert_eq!(w.store.dump(), before);
}

/// A message event whose authorizer context carries `sub` and the `canary` flag as the
/// authorizer writes them (strings).
fn as_identity(
    route: &str,
    sub: &str,
    canary: &str,
    body: &str,
) -> aws_lambda_events::apigw::ApiGatewayWebsocketProxyRequest {
    let mut value =
        serde_json::to_value(message(route, "probe-conn=", sub, body.as_bytes())).unwrap();
    value["requestContext"]["authorizer"]["canary"] = canary.into();
    serde_json::from_value(value).unwrap()
}

#[tokio::test]
async fn a_canary_identity_naming_a_victim_reads_and_writes_nothing() {
    let w = world().await;
    let placed = body(&w.app.respond(event(BID)).await);
    assert_eq!(placed["status"], "accepted", "{placed}");
    let bids_before = w.store.all_bids(&AuctionId::new("lot-1").unwrap());
    // A canary-issuer identity that names the victim: no principal at all.
    for (route, frame) in [
        ("getState", r#"{"action":"getState","auctionId":"lot-1"}"#),
        (
            "bid",
            r#"{"action":"bid","auctionId":"lot-1","amount":900000,"bidId":"bid-spoofed-1"}"#,
        ),
    ] {
        let reply = body(
            &w.app
                .respond(as_identity(route, "user-alice", "true", frame))
                .await,
        );
        assert_eq!(reply["type"], "error", "{route}: {reply}");
        assert_eq!(reply["code"], "unauthorized", "{route}: {reply}");
    }
    // The canary's own identity: heartbeat and the auction's public state, nobody's bids.
    let state = body(
        &w.app
            .respond(as_identity(
                "getState",
                "canary:us-east-1",
                "true",
                r#"{"action":"getState","auctionId":"lot-1","bidIds":["bid-00000001"]}"#,
            ))
            .await,
    );
    assert_eq!(state["type"], "state", "{state}");
    assert_eq!(state["you"]["bids"], serde_json::json!([]));
    assert!(state["you"].get("settled").is_none(), "{state}");
    let refused = body(
        &w.app
            .respond(as_identity(
                "bid",
                "canary:us-east-1",
                "true",
                r#"{"action":"bid","auctionId":"lot-1","amount":900000,"bidId":"bid-probe-01"}"#,
            ))
            .await,
    );
    assert_eq!(
        (refused["status"].as_str(), refused["reason"].as_str()),
        (Some("rejected"), Some("forbidden"))
    );
    // A probe subject without the flag is no principal either.
    let reply = body(
        &w.app
            .respond(as_identity(
                "getState",
                "canary:us-east-1",
                "false",
                r#"{"action":"getState","auctionId":"lot-1"}"#,
            ))
            .await,
    );
    assert_eq!(reply["code"], "unauthorized", "{reply}");
    assert_eq!(
        w.store.all_bids(&AuctionId::new("lot-1").unwrap()),
        bids_before,
        "nothing written"
    );
}
