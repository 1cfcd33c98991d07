//! Test vectors: malformed and hostile client frames with the error code each must get.

use crate::limits::{MAX_AMOUNT, MAX_MESSAGE_BYTES};
use crate::ErrorCode;

/// `(name, frame, expected code)` for every hostile frame class the protocol promises to
/// reject. Public so that every layer (parser, domain, Lambda handler, lab) runs the same list.
pub fn hostile_frames() -> Vec<(&'static str, Vec<u8>, ErrorCode)> {
    use ErrorCode::*;
    let bid = |amount: &str| {
        format!(r#"{{"action":"bid","auctionId":"a1","amount":{amount},"bidId":"bid-0001"}}"#)
            .into_bytes()
    };
    let mut deep = String::new();
    for _ in 0..100 {
        deep.push('[');
    }
    let mut oversize = br#"{"action":"heartbeat","pad":""#.to_vec();
    oversize.extend(std::iter::repeat_n(b'x', MAX_MESSAGE_BYTES));
    oversize.extend(br#""}"#);
    vec![
        ("empty", b"".to_vec(), BadJson),
        ("whitespace", b"   ".to_vec(), BadJson),
        ("not json", b"hello".to_vec(), BadJson),
        ("truncated", br#"{"action":"heartbeat""#.to_vec(), BadJson),
        ("invalid utf8", vec![b'{', 0xff, 0xfe, b'}'], BadJson),
        ("array", br#"[{"action":"heartbeat"}]"#.to_vec(), BadJson),
        ("string", br#""heartbeat""#.to_vec(), BadJson),
        ("number", b"42".to_vec(), BadJson),
        ("null", b"null".to_vec(), BadJson),
        (
            "trailing garbage",
            br#"{"action":"heartbeat"} x"#.to_vec(),
            BadJson,
        ),
        (
            "deep nesting",
            format!(r#"{{"action":"heartbeat","x":{deep}"#).into_bytes(),
            BadJson,
        ),
        ("nesting bomb", deep.into_bytes(), BadJson),
        (
            "raw control char",
            b"{\"action\":\"heart\x01beat\"}".to_vec(),
            BadJson,
        ),
        ("oversize", oversize, TooLarge),
        (
            "missing action",
            br#"{"auctionId":"a1"}"#.to_vec(),
            UnknownAction,
        ),
        ("empty object", b"{}".to_vec(), UnknownAction),
        (
            "unknown action",
            br#"{"action":"sell"}"#.to_vec(),
            UnknownAction,
        ),
        (
            "action case",
            br#"{"action":"Heartbeat"}"#.to_vec(),
            UnknownAction,
        ),
        (
            "route key as action",
            br#"{"action":"$connect"}"#.to_vec(),
            UnknownAction,
        ),
        (
            "action not string",
            br#"{"action":1}"#.to_vec(),
            InvalidField,
        ),
        ("action null", br#"{"action":null}"#.to_vec(), InvalidField),
        (
            "getState no auction",
            br#"{"action":"getState"}"#.to_vec(),
            InvalidField,
        ),
        (
            "getState auction number",
            br#"{"action":"getState","auctionId":7}"#.to_vec(),
            InvalidField,
        ),
        (
            "getState auction empty",
            br#"{"action":"getState","auctionId":""}"#.to_vec(),
            InvalidField,
        ),
        (
            "getState auction too long",
            format!(
                r#"{{"action":"getState","auctionId":"{}"}}"#,
                "a".repeat(65)
            )
            .into_bytes(),
            InvalidField,
        ),
        (
            "escaped control char in id",
            br#"{"action":"getState","auctionId":"a\u0000b"}"#.to_vec(),
            InvalidField,
        ),
        (
            "newline in id",
            br#"{"action":"getState","auctionId":"a\nb"}"#.to_vec(),
            InvalidField,
        ),
        (
            "unicode in id",
            r#"{"action":"getState","auctionId":"аукцион"}"#.as_bytes().to_vec(),
            InvalidField,
        ),
        ("float amount", bid("10.5"), InvalidField),
        ("integral float amount", bid("10.0"), InvalidField),
        ("exponent amount", bid("1e3"), InvalidField),
        ("negative amount", bid("-5"), InvalidField),
        ("zero amount", bid("0"), InvalidField),
        (
            "over max amount",
            bid(&(MAX_AMOUNT + 1).to_string()),
            InvalidField,
        ),
        (
            "u64 overflow amount",
            bid("18446744073709551616"),
            InvalidField,
        ),
        (
            "huge amount",
            bid("1000000000000000000000000000000"),
            InvalidField,
        ),
        ("string amount", bid(r#""100""#), InvalidField),
        ("null amount", bid("null"), InvalidField),
        ("bool amount", bid("true"), InvalidField),
        ("object amount", bid(r#"{"value":100}"#), InvalidField),
        (
            "missing amount",
            br#"{"action":"bid","auctionId":"a1","bidId":"bid-0001"}"#.to_vec(),
            InvalidField,
        ),
        (
            "missing bidId",
            br#"{"action":"bid","auctionId":"a1","amount":5}"#.to_vec(),
            InvalidField,
        ),
        (
            "short bidId",
            br#"{"action":"bid","auctionId":"a1","amount":5,"bidId":"short"}"#.to_vec(),
            InvalidField,
        ),
        (
            "long bidId",
            format!(
                r#"{{"action":"bid","auctionId":"a1","amount":5,"bidId":"{}"}}"#,
                "b".repeat(65)
            )
            .into_bytes(),
            InvalidField,
        ),
        (
            "bidId with space",
            br#"{"action":"bid","auctionId":"a1","amount":5,"bidId":"bid 00001"}"#.to_vec(),
            InvalidField,
        ),
        (
            "duplicate amount",
            br#"{"action":"bid","auctionId":"a1","amount":5,"amount":50000,"bidId":"bid-0001"}"#
                .to_vec(),
            InvalidField,
        ),
        (
            "duplicate action",
            br#"{"action":"heartbeat","action":"bid"}"#.to_vec(),
            InvalidField,
        ),
    ]
}
