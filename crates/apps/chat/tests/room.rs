#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! A chat room on the kit, in two Regions that replicate in memory as Global Tables MREC does
//! (items one by one, in any order, when the test says): every message once, the same order
//! everywhere once converged, history by position, and a hole reported, not hidden.

use serde_json::{json, Value as Json};
use std::sync::Arc;
use tokio::sync::mpsc::UnboundedReceiver;
use wsdr_chat::{conversation, Chat, Room, HISTORY};
use wsdr_core::items::{Change, Item};
use wsdr_core::memory::{ManualClock, MemoryConnections, MemoryStateStore};
use wsdr_core::topics::{AppService, TopicService};
use wsdr_core::{ConnectionId, Principal, UserId};
use wsdr_protocol::{BidStatus, OpId, OpView, ServerMessage, Topic, TopicName, Versions};

struct Region {
    name: &'static str,
    store: Arc<MemoryStateStore>,
    service: AppService<Chat>,
    feed: UnboundedReceiver<Change>,
}

fn region(name: &'static str, clock: Arc<ManualClock>) -> Region {
    let store = Arc::new(MemoryStateStore::new(name, clock.clone()));
    let feed = store.change_feed();
    let chat = Chat::in_namespace(Chat::namespace().unwrap());
    let service = AppService::new(
        chat,
        store.clone(),
        Arc::new(MemoryConnections::default()),
        clock,
        name,
    )
    .with_seeds([(
        TopicName::new("lobby").unwrap(),
        Room {
            title: "Lobby".into(),
            max_chars: 20,
        }
        .to_json(),
    )]);
    Region {
        name,
        store,
        service,
        feed,
    }
}

fn lobby() -> Topic {
    Topic::parse("chat:lobby").unwrap()
}

fn user(name: &str) -> Principal {
    Principal::User(UserId::new(name).unwrap())
}

fn op_id(n: u32) -> OpId {
    OpId::new(format!("msg-{n:05}")).unwrap()
}

async fn post(region: &Region, who: &str, id: u32, text: &str) -> (BidStatus, Option<String>) {
    match region
        .service
        .write(&user(who), &lobby(), &op_id(id), &json!({ "text": text }))
        .await
    {
        ServerMessage::WriteResult { status, reason, .. } => (status, reason),
        other => panic!("not a writeResult: {other:?}"),
    }
}

struct State {
    versions: Versions,
    ops: Vec<OpView>,
    complete: bool,
    view: Json,
}

async fn state(region: &Region, who: &str, since: Option<&Versions>) -> State {
    let connection = ConnectionId::new(format!("{who}=")).unwrap();
    match region
        .service
        .state(&connection, &user(who), &lobby(), &[], since)
        .await
        .unwrap()
    {
        ServerMessage::TopicState {
            versions,
            ops,
            complete,
            view,
            region: served,
            ..
        } => {
            assert_eq!(served, region.name);
            State {
                versions,
                ops,
                complete,
                view,
            }
        }
        other => panic!("not a topicState: {other:?}"),
    }
}

/// Ship everything `from` wrote so far to `to`, but the items `keep` refuses: those are lost
/// (a Region that never returns takes its backlog).
fn replicate(from: &mut Region, to: &Region, keep: impl Fn(&Item) -> bool) {
    while let Ok(change) = from.feed.try_recv() {
        if keep(&change.item) {
            to.store.apply_replicated(change);
        }
    }
}

fn texts(ops: &[OpView]) -> Vec<String> {
    conversation(ops).into_iter().map(|m| m.text).collect()
}

#[tokio::test]
async fn a_message_is_recorded_once_refused_by_the_rules_and_a_bad_one_touches_nothing() {
    let clock = Arc::new(ManualClock::new(1_000));
    let east = region("us-east-1", clock.clone());
    assert_eq!(
        post(&east, "ann", 1, "hello").await,
        (BidStatus::Accepted, None)
    );
    assert_eq!(
        post(&east, "ann", 1, "hello").await,
        (BidStatus::Duplicate, None)
    );
    assert_eq!(
        post(&east, "ann", 1, "hullo").await,
        (BidStatus::Rejected, Some("op_id_reused".into()))
    );
    // Another author's same op id is another message: ids are scoped to their author.
    assert_eq!(
        post(&east, "bo", 1, "hi ann").await,
        (BidStatus::Accepted, None)
    );
    assert_eq!(
        post(&east, "bo", 2, "a message well past twenty characters").await,
        (BidStatus::Rejected, Some("too_long".into()))
    );
    for bad in [
        json!({ "text": "" }),
        json!({ "text": 5 }),
        json!({ "text": "a", "x": 1 }),
        json!("hi"),
    ] {
        let answer = east
            .service
            .write(&user("bo"), &lobby(), &op_id(3), &bad)
            .await;
        assert!(
            matches!(answer, ServerMessage::Error { .. }),
            "{bad}: {answer:?}"
        );
    }
    let probe = Principal::Probe(UserId::new("canary:probe").unwrap());
    assert!(matches!(
        east.service.write(&probe, &lobby(), &op_id(4), &json!({ "text": "x" })).await,
        ServerMessage::WriteResult { status: BidStatus::Rejected, reason: Some(r), .. } if r == "forbidden"
    ));
    let unknown = Topic::parse("chat:nowhere").unwrap();
    assert!(matches!(
        east.service.write(&user("bo"), &unknown, &op_id(5), &json!({ "text": "x" })).await,
        ServerMessage::WriteResult { status: BidStatus::Rejected, reason: Some(r), .. } if r == "unknown_topic"
    ));
    let seen = state(&east, "cy", None).await;
    assert_eq!(texts(&seen.ops), ["hello", "hi ann"]);
    assert_eq!(seen.versions, Versions::from([("us-east-1".into(), 2)]));
    assert!(seen.complete);
    assert_eq!(seen.view, json!({ "title": "Lobby", "maxChars": 20 }));
}

#[tokio::test]
async fn two_regions_show_one_order_once_converged_and_a_replayed_message_once() {
    let clock = Arc::new(ManualClock::new(1_000));
    let mut east = region("us-east-1", clock.clone());
    let mut west = region("us-west-2", clock.clone());
    // A split: each Region takes its own users' messages.
    for (i, (region, who, text)) in [
        (&east, "ann", "e1"),
        (&west, "bo", "w1"),
        (&east, "ann", "e2"),
        (&west, "bo", "w2"),
    ]
    .into_iter()
    .enumerate()
    {
        clock.advance(10);
        assert_eq!(
            post(region, who, i as u32, text).await.0,
            BidStatus::Accepted
        );
    }
    // Ann's client never heard back for e2 and replays it into the other Region: a second
    // copy, shown once.
    clock.advance(10);
    assert_eq!(post(&west, "ann", 2, "e2").await.0, BidStatus::Accepted);
    assert_eq!(texts(&state(&east, "cy", None).await.ops), ["e1", "e2"]);
    // The split heals: every item, in whatever order replication brings it.
    replicate(&mut east, &west, |_| true);
    replicate(&mut west, &east, |_| true);
    let (e, w) = (
        state(&east, "cy", None).await,
        state(&west, "cy", None).await,
    );
    assert_eq!(e.versions, w.versions);
    assert_eq!(
        e.versions,
        Versions::from([("us-east-1".into(), 2), ("us-west-2".into(), 3)])
    );
    // One order everywhere, by the copies alone: the late ones inserted at their place.
    assert_eq!(texts(&e.ops), ["e1", "w1", "e2", "w2"]);
    assert_eq!(conversation(&e.ops), conversation(&w.ops));
    assert!(e.complete && w.complete);
}

#[tokio::test]
async fn history_after_a_reconnect_is_read_by_position_and_a_hole_is_reported() {
    let clock = Arc::new(ManualClock::new(1_000));
    let mut east = region("us-east-1", clock.clone());
    let west = region("us-west-2", clock.clone());
    for i in 1..=6 {
        clock.advance(10);
        post(&east, "ann", i, &format!("m{i}")).await;
    }
    // A client that held east's first two messages reads the rest from its position.
    let since = Versions::from([("us-east-1".into(), 2)]);
    let after = state(&east, "ann", Some(&since)).await;
    assert_eq!(texts(&after.ops), ["m3", "m4", "m5", "m6"]);
    assert_eq!(
        after.ops.iter().map(|o| o.position).collect::<Vec<_>>(),
        [3, 4, 5, 6]
    );
    assert!(after.complete);
    // West receives the summary (which carries m6 whole) and m1, m2, m4, but never m3, m5 or
    // m6's own item: east is lost with them.
    let lost = |item: &Item| match item {
        Item::Op { op, .. } => !["m3", "m5", "m6"].contains(&op.op["text"].as_str().unwrap()),
        _ => true,
    };
    replicate(&mut east, &west, lost);
    let survivor = state(&west, "bo", None).await;
    assert_eq!(survivor.versions, Versions::from([("us-east-1".into(), 6)]));
    assert_eq!(
        texts(&survivor.ops),
        ["m1", "m2", "m4", "m6"],
        "m6 is carried by the summary"
    );
    assert!(
        !survivor.complete,
        "a hole at positions 3 and 5 is reported"
    );
    let resumed = state(
        &west,
        "bo",
        Some(&Versions::from([("us-east-1".into(), 4)])),
    )
    .await;
    assert_eq!(texts(&resumed.ops), ["m6"]);
    assert!(!resumed.complete, "position 5 is still missing");
    let caught_up = state(
        &west,
        "bo",
        Some(&Versions::from([("us-east-1".into(), 5)])),
    )
    .await;
    assert!(caught_up.complete);
}

#[tokio::test]
async fn without_since_a_state_carries_each_regions_newest_messages() {
    let clock = Arc::new(ManualClock::new(1_000));
    let east = region("us-east-1", clock.clone());
    let total = HISTORY as u32 + 7;
    for i in 1..=total {
        clock.advance(1);
        post(&east, "ann", i, &format!("m{i}")).await;
    }
    let newest = state(&east, "bo", None).await;
    assert_eq!(newest.ops.len(), HISTORY);
    assert_eq!(newest.ops.first().map(|o| o.position), Some(8));
    assert_eq!(
        newest.ops.last().map(|o| o.position),
        Some(u64::from(total))
    );
    assert!(newest.complete, "the newest window has no hole");
}

/// Strong mode: one table every Region reads with strong consistency and one head per room,
/// so one log (`global`) orders every message, whichever Region took it.
#[tokio::test]
async fn in_strong_mode_every_region_writes_one_log_in_one_order() {
    let clock = Arc::new(ManualClock::new(1_000));
    let table = Arc::new(MemoryStateStore::new("us-east-1", clock.clone()));
    let seeded = |name: &'static str| {
        AppService::strong(
            Chat::in_namespace(Chat::namespace().unwrap()),
            table.clone(),
            Arc::new(MemoryConnections::default()),
            clock.clone(),
            name,
        )
        .with_seeds([(
            TopicName::new("lobby").unwrap(),
            Room {
                title: "Lobby".into(),
                max_chars: 20,
            }
            .to_json(),
        )])
    };
    let (east, west) = (seeded("us-east-1"), seeded("us-west-2"));
    for (i, service) in [&east, &west, &east].into_iter().enumerate() {
        let answer = service
            .write(
                &user("ann"),
                &lobby(),
                &op_id(i as u32),
                &json!({ "text": format!("s{i}") }),
            )
            .await;
        assert!(
            matches!(
                answer,
                ServerMessage::WriteResult {
                    status: BidStatus::Accepted,
                    ..
                }
            ),
            "{answer:?}"
        );
    }
    let connection = ConnectionId::new("c=").unwrap();
    let since = Versions::from([("global".into(), 1)]);
    let ServerMessage::TopicState {
        versions,
        ops,
        complete,
        you,
        ..
    } = west
        .state(
            &connection,
            &user("ann"),
            &lobby(),
            &[op_id(2)],
            Some(&since),
        )
        .await
        .unwrap()
    else {
        panic!("not a topicState");
    };
    assert_eq!(versions, Versions::from([("global".into(), 3)]));
    assert_eq!(
        ops.iter()
            .map(|o| (o.region.as_str(), o.position, o.log.as_str()))
            .collect::<Vec<_>>(),
        [("us-west-2", 2, "global"), ("us-east-1", 3, "global")]
    );
    assert!(
        complete,
        "the newest message is the head's, held before its copy is written"
    );
    assert!(you.settled[0].stands);
    assert!(you.ops.iter().all(|o| o.log == "global"));
}

/// A deployment of the room alone, as docs/KIT.md writes it: the kit's gateway with the chat
/// room as its one app serves every frame of the envelope, pushes the room's `topicUpdate`,
/// and refuses the auction's frames (no app of it has them).
#[tokio::test]
async fn a_deployment_of_the_room_alone_needs_no_auction() {
    use wsdr_core::memory::RecordingNotifier;
    use wsdr_core::push::PushSource;
    use wsdr_core::topics::Apps;
    use wsdr_core::Gateway;
    let clock = Arc::new(ManualClock::new(1_000));
    let store = Arc::new(MemoryStateStore::new("r1", clock.clone()));
    let connections = Arc::new(MemoryConnections::default());
    let room = AppService::new(
        Chat::in_namespace(Chat::namespace().unwrap()),
        store,
        connections.clone(),
        clock.clone(),
        "r1",
    )
    .with_seeds([(
        TopicName::new("lobby").unwrap(),
        Room {
            title: "Lobby".into(),
            max_chars: 20,
        }
        .to_json(),
    )]);
    let gateway = Gateway::new(
        connections.clone(),
        Arc::new(RecordingNotifier::default()),
        clock,
        "r1",
    )
    .with_apps(Apps::default().with(Arc::new(room)));
    let ann = UserId::new("ann").unwrap();
    let conn = ConnectionId::new("c1").unwrap();
    gateway.connect(&conn, &ann).await.unwrap();
    assert!(connections.contains(&conn));
    let frame = |json: &'static str| {
        let (gateway, conn, ann) = (gateway.clone(), conn.clone(), ann.clone());
        async move {
            gateway
                .handle_frame(&conn, ann, json.as_bytes())
                .await
                .message
        }
    };
    let written =
        frame(r#"{"action":"write","topic":"chat:lobby","opId":"msg-00001","op":{"text":"hi"}}"#)
            .await;
    assert!(
        matches!(
            written,
            ServerMessage::WriteResult {
                status: BidStatus::Accepted,
                ..
            }
        ),
        "{written:?}"
    );
    let state = frame(r#"{"action":"getState","topic":"chat:lobby"}"#).await;
    let ServerMessage::TopicState { ops, view, .. } = state else {
        panic!("{state:?}")
    };
    assert_eq!(ops.len(), 1);
    assert_eq!(view["title"], "Lobby");
    let bid = frame(r#"{"action":"bid","auctionId":"a1","amount":5,"bidId":"bid-00001"}"#).await;
    assert!(
        matches!(&bid, ServerMessage::Error { code, .. } if code.as_str() == "unknown_action"),
        "{bid:?}"
    );
    let push: Json =
        serde_json::from_str(&PushSource::push_frame(&gateway, &lobby()).await.unwrap()).unwrap();
    assert_eq!(push["type"], "topicUpdate");
    assert_eq!(push["ops"].as_array().map(Vec::len), Some(1));
}
