#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
use rand::{Rng, SeedableRng};
use wsdr_protocol::hostile::hostile_frames;
use wsdr_protocol::limits::{MAX_AMOUNT, MAX_MESSAGE_BYTES};
use wsdr_protocol::{
    parse_client_message, parse_server_frame, ClientMessage, ErrorCode, ServerFrame, ServerMessage,
};

#[test]
fn hostile_frames_give_documented_error_codes() {
    let frames = hostile_frames();
    assert!(frames.len() >= 25, "the suite must keep at least 25 cases");
    for (name, frame, code) in frames {
        match parse_client_message(&frame) {
            Ok(message) => panic!("{name}: accepted as {message:?}"),
            Err(error) => {
                assert_eq!(error.code, code, "{name}: {error}");
                assert!(!error.message.is_empty(), "{name}: empty message");
                assert!(error.message.len() < 200, "{name}: message echoes too much");
            }
        }
    }
}

#[test]
fn valid_frames_parse_to_messages() {
    assert_eq!(
        parse_client_message(br#"{"action":"heartbeat"}"#).unwrap(),
        ClientMessage::Heartbeat {
            auction_id: None,
            topic: None,
        }
    );
    let state =
        parse_client_message(br#" {"action":"getState","auctionId":"lot-42:a.b"} "#).unwrap();
    assert!(
        matches!(state, ClientMessage::GetState { ref auction_id, .. } if auction_id.as_str() == "lot-42:a.b")
    );
    let bid = parse_client_message(
        br#"{"action":"bid","auctionId":"a1","amount":1000000000000,"bidId":"3f2b8c1e-9d4a-4b7e-a1c2-0e5f6a7b8c9d","extra":{"ignored":[1,2]}}"#,
    )
    .unwrap();
    match bid {
        ClientMessage::Bid { amount, bid_id, .. } => {
            assert_eq!(amount.get(), MAX_AMOUNT);
            assert_eq!(bid_id.as_str().len(), 36);
        }
        other => panic!("not a bid: {other:?}"),
    }
}

#[test]
fn message_at_the_size_limit_is_accepted() {
    let head = br#"{"action":"heartbeat","pad":""#;
    let tail = br#""}"#;
    let mut frame = head.to_vec();
    frame.extend(std::iter::repeat_n(
        b'x',
        MAX_MESSAGE_BYTES - head.len() - tail.len(),
    ));
    frame.extend(tail);
    assert_eq!(frame.len(), MAX_MESSAGE_BYTES);
    assert_eq!(
        parse_client_message(&frame).unwrap(),
        ClientMessage::Heartbeat {
            auction_id: None,
            topic: None,
        }
    );
    frame.insert(frame.len() - 2, b'x');
    assert_eq!(
        parse_client_message(&frame).unwrap_err().code,
        ErrorCode::TooLarge
    );
}

#[test]
fn client_messages_round_trip_through_json() {
    let frames = [
        r#"{"action":"heartbeat"}"#,
        r#"{"action":"getState","auctionId":"a1"}"#,
        r#"{"action":"bid","auctionId":"a1","amount":250,"bidId":"bid-0001"}"#,
    ];
    for frame in frames {
        let message = parse_client_message(frame.as_bytes()).unwrap();
        assert_eq!(message.to_json(), frame);
        assert_eq!(
            parse_client_message(message.to_json().as_bytes()).unwrap(),
            message
        );
    }
}

#[test]
fn random_bytes_never_panic_the_parser() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let alphabet = br#"{}[]":,0123456789-.eEatcionbdhrsu \\"#;
    for _ in 0..20_000 {
        let len = rng.random_range(0..64);
        let frame: Vec<u8> = (0..len)
            .map(|_| {
                if rng.random_bool(0.9) {
                    alphabet[rng.random_range(0..alphabet.len())]
                } else {
                    rng.random()
                }
            })
            .collect();
        let _ = parse_client_message(&frame);
    }
}

#[test]
fn server_frames_parse_ours_and_gateway_errors() {
    let pong = parse_server_frame(r#"{"type":"pong","region":"us-east-1","ts":5}"#).unwrap();
    assert_eq!(
        pong,
        ServerFrame::Message(ServerMessage::Pong {
            region: "us-east-1".into(),
            ts: 5,
            herd_window_ms: None,
            auction_id: None,
            topic: None,
            versions: None,
        })
    );
    let gateway = parse_server_frame(
        r#"{"message": "Internal server error", "connectionId":"abc=", "requestId":"r1"}"#,
    )
    .unwrap();
    assert_eq!(
        gateway,
        ServerFrame::GatewayError {
            message: "Internal server error".into()
        }
    );
    assert!(parse_server_frame("not json").is_err());
    assert!(parse_server_frame(r#"{"type":"nope"}"#).is_err());
    assert!(parse_server_frame(r#"{"x":1}"#).is_err());
}

#[test]
fn pushes_and_move_orders_are_unsolicited_answers_are_not() {
    let frames = [
        (r#"{"type":"pong","region":"r","ts":5}"#, false),
        (
            r#"{"type":"bidResult","bidId":"bid-00000001","status":"accepted","region":"r"}"#,
            false,
        ),
        (
            r#"{"type":"error","code":"bad_json","message":"m","region":"r"}"#,
            false,
        ),
        (
            r#"{"type":"bidUpdate","region":"r","auctionId":"lot-1","highBid":null,"bidCount":0,"version":0}"#,
            true,
        ),
        (
            r#"{"type":"moveTo","region":"r","to":"us-west-2","windowMs":1000,"reason":"drain"}"#,
            true,
        ),
    ];
    for (text, unsolicited) in frames {
        let ServerFrame::Message(message) = parse_server_frame(text).unwrap() else {
            panic!("{text}: not a message");
        };
        assert_eq!(message.is_unsolicited(), unsolicited, "{text}");
    }
}

#[test]
fn server_messages_serialize_with_documented_field_names() {
    let frame = parse_server_frame(
        r#"{"type":"state","region":"us-west-2","auction":{"id":"a1","item":"Lamp","highBid":{"amount":300,"bidder":"u1","bidId":"bid-0001","at":9},"bidCount":2,"version":2},"you":{"userId":"u1","lastBid":null}}"#,
    )
    .unwrap();
    let ServerFrame::Message(message) = frame else {
        panic!("not ours")
    };
    assert_eq!(message.region(), "us-west-2");
    let json: serde_json::Value = serde_json::from_str(&message.to_json()).unwrap();
    assert_eq!(json["auction"]["highBid"]["bidId"], "bid-0001");
    assert_eq!(json["you"]["lastBid"], serde_json::Value::Null);
    let result = ServerMessage::BidResult {
        bid_id: "bid-0001".parse().unwrap(),
        status: wsdr_protocol::BidStatus::Duplicate,
        reason: None,
        region: "r".into(),
    };
    assert_eq!(
        result.to_json(),
        r#"{"type":"bidResult","bidId":"bid-0001","status":"duplicate","reason":null,"region":"r"}"#
    );
}

#[test]
fn a_write_frame_carries_a_topic_an_op_id_and_an_op_with_a_canonical_form() {
    let write = parse_client_message(
        br#"{"action":"write","topic":"chat:room:7","opId":"op-00000001","op":{"text":"hi","n":[1,2]}}"#,
    )
    .unwrap();
    match &write {
        ClientMessage::Write { topic, op_id, op } => {
            assert_eq!(topic.namespace.as_str(), "chat");
            assert_eq!(topic.name.as_str(), "room:7");
            assert_eq!(op_id.as_str(), "op-00000001");
            assert_eq!(op["text"], "hi");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(write.action(), "write");
    // The frame a client builds parses back to itself.
    assert_eq!(
        parse_client_message(write.to_json().as_bytes()).unwrap(),
        write
    );
    for (frame, what) in [
        (
            r#"{"action":"write","topic":"room-7","opId":"op-00000001","op":{}}"#,
            "no namespace",
        ),
        (
            r#"{"action":"write","topic":"a#b:c","opId":"op-00000001","op":{}}"#,
            "a # in the namespace",
        ),
        (
            r#"{"action":"write","topic":"chat:","opId":"op-00000001","op":{}}"#,
            "no name",
        ),
        (
            r#"{"action":"write","topic":"chat:r","opId":"short","op":{}}"#,
            "a short op id",
        ),
        (
            r#"{"action":"write","topic":"chat:r","opId":"op-00000001"}"#,
            "no op",
        ),
        (
            r#"{"action":"write","topic":"chat:r","opId":"op-00000001","op":{"x":0.5}}"#,
            "a fraction",
        ),
        (
            r#"{"action":"write","topic":"chat:r","opId":"op-00000001","op":9007199254740993}"#,
            "past 2^53",
        ),
        (
            r#"{"action":"write","topic":7,"opId":"op-00000001","op":{}}"#,
            "a number for a topic",
        ),
    ] {
        match parse_client_message(frame.as_bytes()) {
            Err(error) => assert_eq!(error.code, ErrorCode::InvalidField, "{what}: {error}"),
            Ok(message) => panic!("{what}: accepted as {message:?}"),
        }
    }
}

fn parse(frame: &str) -> Result<ClientMessage, wsdr_protocol::ProtocolError> {
    parse_client_message(frame.as_bytes())
}

fn refused(frame: &str) -> bool {
    matches!(parse(frame), Err(e) if e.code == ErrorCode::InvalidField)
}

/// `getState` naming a topic (any app's): op ids to settle, `since` per log, and the limits
/// that keep it cheap; a frame names its topic one way only.
#[test]
fn a_topic_read_names_op_ids_and_positions_within_their_limits() {
    let read = parse(
        r#"{"action":"getState","topic":"chat:lobby","opIds":["msg-00001","msg-00002","msg-00001"],"since":{"us-east-1":41,"global":0}}"#,
    )
    .unwrap();
    let ClientMessage::GetTopic {
        topic,
        op_ids,
        since,
    } = read
    else {
        panic!("not a topic read: {read:?}");
    };
    assert_eq!(topic.to_string(), "chat:lobby");
    assert_eq!(
        op_ids.iter().map(|o| o.as_str()).collect::<Vec<_>>(),
        ["msg-00001", "msg-00002"],
        "repeats folded"
    );
    assert_eq!(
        since,
        Some(
            [("global".to_owned(), 0), ("us-east-1".to_owned(), 41)]
                .into_iter()
                .collect()
        )
    );
    assert!(matches!(
        parse(r#"{"action":"getState","topic":"chat:lobby"}"#),
        Ok(ClientMessage::GetTopic { since: None, ref op_ids, .. }) if op_ids.is_empty()
    ));
    // One way to name it.
    assert!(refused(
        r#"{"action":"getState","topic":"chat:lobby","auctionId":"lot-1"}"#
    ));
    assert!(refused(
        r#"{"action":"getState","topic":"chat:lobby","bidIds":["msg-00001"]}"#
    ));
    // `since`: at most 8 logs, each named (1 to 64 characters) with a position >= 0.
    let logs = |n: usize| {
        (0..n)
            .map(|i| format!(r#""r{i}":1"#))
            .collect::<Vec<_>>()
            .join(",")
    };
    assert!(parse(&format!(
        r#"{{"action":"getState","topic":"c:r","since":{{{}}}}}"#,
        logs(8)
    ))
    .is_ok());
    assert!(refused(&format!(
        r#"{{"action":"getState","topic":"c:r","since":{{{}}}}}"#,
        logs(9)
    )));
    let named =
        |name: &str| format!(r#"{{"action":"getState","topic":"c:r","since":{{"{name}":1}}}}"#);
    assert!(parse(&named(&"r".repeat(64))).is_ok());
    assert!(refused(&named(&"r".repeat(65))));
    assert!(refused(&named("")));
    assert!(refused(&named("a\\u0007b")));
    for bad in [
        r#""since":{"r":-1}"#,
        r#""since":{"r":1.5}"#,
        r#""since":{"r":"1"}"#,
        r#""since":[1]"#,
    ] {
        assert!(
            refused(&format!(r#"{{"action":"getState","topic":"c:r",{bad}}}"#)),
            "{bad}"
        );
    }
    // Op ids: at most 32, each valid.
    let ids = |n: usize| {
        (0..n)
            .map(|i| format!(r#""msg-{i:05}""#))
            .collect::<Vec<_>>()
            .join(",")
    };
    assert!(parse(&format!(
        r#"{{"action":"getState","topic":"c:r","opIds":[{}]}}"#,
        ids(32)
    ))
    .is_ok());
    assert!(refused(&format!(
        r#"{{"action":"getState","topic":"c:r","opIds":[{}]}}"#,
        ids(33)
    )));
    assert!(refused(
        r#"{"action":"getState","topic":"c:r","opIds":"msg-00001"}"#
    ));
    assert!(refused(
        r#"{"action":"getState","topic":"c:r","opIds":[5]}"#
    ));
    // The auction's own read still names bids.
    assert!(matches!(
        parse(r#"{"action":"getState","auctionId":"lot-1","bidIds":["bid-00001"]}"#),
        Ok(ClientMessage::GetState { ref bid_ids, .. }) if bid_ids.len() == 1
    ));
}

/// A heartbeat names the topic (or the auction) it watches, never both.
#[test]
fn a_heartbeat_names_a_topic_or_an_auction() {
    assert!(matches!(
        parse(r#"{"action":"heartbeat","topic":"chat:lobby"}"#),
        Ok(ClientMessage::Heartbeat { auction_id: None, topic: Some(ref t) }) if t.to_string() == "chat:lobby"
    ));
    assert!(matches!(
        parse(r#"{"action":"heartbeat","topic":null}"#),
        Ok(ClientMessage::Heartbeat {
            auction_id: None,
            topic: None
        })
    ));
    assert!(refused(
        r#"{"action":"heartbeat","topic":"chat:lobby","auctionId":"lot-1"}"#
    ));
    assert!(refused(r#"{"action":"heartbeat","topic":"lobby"}"#));
    assert!(refused(r#"{"action":"heartbeat","topic":5}"#));
}

/// Nesting is counted outside strings only (escapes included), up to exactly the limit; the
/// refusal says why.
#[test]
fn nesting_is_refused_one_level_past_the_limit_and_counted_outside_strings_only() {
    let write = |op: &str| {
        format!(r#"{{"action":"write","topic":"chat:x","opId":"op-00000001","op":{op}}}"#)
    };
    // The frame's own object is level 1, `op` level 2: seven more arrays reach 9.
    let at_limit = write("[[[[[[[1]]]]]]]");
    assert!(parse(&at_limit).is_ok(), "8 levels");
    let past = parse(&write("[[[[[[[[1]]]]]]]]")).unwrap_err();
    assert_eq!(past.code, ErrorCode::BadJson);
    assert!(
        past.message.contains("nested deeper than 8"),
        "{}",
        past.message
    );
    // Brackets inside strings, escaped quotes among them, count for nothing ...
    assert!(parse(&write(r#"{"s":"[[[[[[[[[[ \" {{{{{{{{{{ \\"}"#)).is_ok());
    // ... and the nesting after a string (one with escapes) counts again.
    let after = write(r#"{"s":"a \\ \" b","t":[[[[[[[1]]]]]]]}"#);
    assert_eq!(parse(&after).unwrap_err().code, ErrorCode::BadJson);
    // Closing brackets bring the count down: many siblings are no depth.
    let siblings = write(&format!("[{}]", vec!["[[1]]"; 20].join(",")));
    assert!(parse(&siblings).is_ok());
}

/// What a refusal echoes of the client's text: at most 32 characters, control characters
/// escaped, an ellipsis when cut.
#[test]
fn an_unknown_action_is_echoed_cut_to_32_characters_and_escaped() {
    let named = |action: &str| {
        let frame = serde_json::json!({ "action": action }).to_string();
        let error = parse(&frame).unwrap_err();
        assert_eq!(error.code, ErrorCode::UnknownAction);
        error.message
    };
    let exactly = "a".repeat(32);
    assert_eq!(named(&exactly), format!("unknown action `{exactly}`"));
    assert_eq!(
        named(&"b".repeat(40)),
        format!("unknown action `{}…`", "b".repeat(32))
    );
    assert_eq!(named("x\ny"), "unknown action `x\\ny`");
}

/// Each wrong amount is refused with its own reason.
#[test]
fn each_wrong_amount_says_what_is_wrong_with_it() {
    let reason = |amount: &str| {
        let frame =
            format!(r#"{{"action":"bid","auctionId":"a1","amount":{amount},"bidId":"bid-0001"}}"#);
        let error = parse(&frame).unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidField, "{amount}");
        error.message
    };
    assert!(reason("-5").contains("greater than 0"));
    assert!(reason("1.5").contains("not a fraction"));
    assert!(reason("18446744073709551616").contains("within range"));
    assert!(reason("1e3").contains("within range"));
    assert!(reason("\"5\"").contains("integer number of minor units"));
}

#[test]
fn a_heartbeat_may_name_an_auction_and_a_frame_must_be_an_object() {
    assert_eq!(
        parse(r#"{"action":"heartbeat","auctionId":"lot-1"}"#).unwrap(),
        ClientMessage::Heartbeat {
            auction_id: Some(wsdr_protocol::AuctionId::new("lot-1").unwrap()),
            topic: None,
        }
    );
    let error = parse("[1,2]").unwrap_err();
    assert_eq!(error.code, ErrorCode::BadJson);
    assert!(error.message.contains("a JSON object"), "{}", error.message);
}
