#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The protocol's values and the rules clients compute with them: version vectors, the high
//! bid's order, the next bid's floor, a settled bid's standing, the wire names of error
//! codes, the limits API Gateway sets.

use wsdr_protocol::limits::{BID_ID_MAX_LEN, MAX_AMOUNT, MAX_FRAME_BYTES, MAX_MESSAGE_BYTES};
use wsdr_protocol::{
    dominates, higher_bid, merge_versions, minimum_next_bid, Amount, AuctionId, AuctionView, BidId,
    ErrorCode, HighBidView, ServerMessage, SettledBidView, SettledCopyView, Versions,
};

fn versions(pairs: &[(&str, u64)]) -> Versions {
    pairs.iter().map(|(r, n)| ((*r).to_owned(), *n)).collect()
}

fn amount(n: u64) -> Amount {
    Amount::new(n).unwrap()
}

#[test]
fn a_view_dominates_another_when_it_has_seen_every_count_of_it() {
    let a = versions(&[("e", 3), ("w", 1)]);
    assert!(dominates(&a, &versions(&[("e", 3)])));
    assert!(dominates(&a, &versions(&[("e", 2), ("w", 1)])));
    assert!(dominates(&a, &Versions::new()));
    assert!(!dominates(&a, &versions(&[("e", 4)])));
    assert!(
        !dominates(&a, &versions(&[("x", 1)])),
        "a Region it never saw"
    );
    assert!(dominates(&a, &versions(&[("x", 0)])));
    let mut merged = versions(&[("e", 3), ("w", 1)]);
    merge_versions(&mut merged, &versions(&[("e", 2), ("w", 5), ("x", 1)]));
    assert_eq!(merged, versions(&[("e", 3), ("w", 5), ("x", 1)]));
}

fn high(n: u64, at: u64, bidder: &str, bid_id: &str) -> HighBidView {
    HighBidView {
        amount: amount(n),
        bidder: bidder.into(),
        bid_id: BidId::new(bid_id).unwrap(),
        at,
    }
}

#[test]
fn the_high_bid_is_the_higher_amount_then_the_earlier_then_the_smaller_bidder_and_id() {
    let base = high(100, 5, "bob", "bid-00002");
    assert!(high(101, 9, "zed", "bid-00009").outranks(&base));
    assert!(high(100, 4, "zed", "bid-00009").outranks(&base), "earlier");
    assert!(
        high(100, 5, "amy", "bid-00009").outranks(&base),
        "smaller bidder"
    );
    assert!(
        high(100, 5, "bob", "bid-00001").outranks(&base),
        "smaller id"
    );
    assert!(!base.outranks(&base.clone()), "never itself");
    assert!(!high(99, 1, "amy", "bid-00001").outranks(&base));
    let other = high(120, 9, "cy", "bid-00003");
    assert_eq!(
        higher_bid(Some(base.clone()), Some(other.clone())),
        Some(other.clone())
    );
    assert_eq!(
        higher_bid(Some(other.clone()), Some(base.clone())),
        Some(other.clone())
    );
    assert_eq!(higher_bid(Some(base.clone()), None), Some(base.clone()));
    assert_eq!(higher_bid(None, Some(base.clone())), Some(base));
    assert_eq!(higher_bid(None, None), None);
}

#[test]
fn the_next_bid_must_reach_the_starting_price_then_beat_the_high_bid_by_the_increment() {
    assert_eq!(minimum_next_bid(amount(100), 10, None), Some(amount(100)));
    assert_eq!(
        minimum_next_bid(amount(100), 10, Some(amount(150))),
        Some(amount(160))
    );
    assert_eq!(
        minimum_next_bid(amount(100), 0, Some(amount(150))),
        Some(amount(151)),
        "an increment of 0 is 1: a tie never wins"
    );
    assert_eq!(
        minimum_next_bid(amount(100), 10, Some(amount(MAX_AMOUNT))),
        None
    );
    let view = |starting: Option<u64>, increment: Option<u64>, high_bid: Option<u64>| AuctionView {
        id: AuctionId::new("lot-1").unwrap(),
        item: "lamp".into(),
        high_bid: high_bid.map(|n| high(n, 1, "bob", "bid-00001")),
        bid_count: 0,
        version: 0,
        versions: Versions::new(),
        starting_price: starting.map(amount),
        min_increment: increment,
        min_next_bid: None,
    };
    assert_eq!(
        view(Some(100), Some(5), Some(200)).minimum_next_bid(),
        Some(amount(205))
    );
    assert_eq!(
        view(Some(100), Some(5), None).minimum_next_bid(),
        Some(amount(100))
    );
    assert_eq!(
        view(None, Some(5), None).minimum_next_bid(),
        None,
        "no rules sent"
    );
}

#[test]
fn a_settled_bid_stands_with_an_amount_only_in_a_copy_that_holds_it() {
    let settled = |stands: bool, amount_field: Option<u64>, copies: &[u64]| SettledBidView {
        bid_id: BidId::new("bid-00001").unwrap(),
        stands,
        amount: amount_field.map(amount),
        regions: Vec::new(),
        copies: copies
            .iter()
            .map(|n| SettledCopyView {
                region: "us-east-1".into(),
                amount: amount(*n),
            })
            .collect(),
    };
    assert!(settled(true, Some(5), &[5]).stands_with(amount(5)));
    assert!(!settled(false, Some(5), &[5]).stands_with(amount(5)));
    assert!(
        settled(true, None, &[5, 7]).stands_with(amount(7)),
        "either copy"
    );
    assert!(
        !settled(true, Some(5), &[7]).stands_with(amount(5)),
        "the copies decide"
    );
    assert!(
        settled(true, Some(5), &[]).stands_with(amount(5)),
        "an older server's answer"
    );
    assert!(!settled(true, Some(6), &[]).stands_with(amount(5)));
}

#[test]
fn error_codes_have_one_wire_name_each_and_amounts_print_as_numbers() {
    let codes = [
        (ErrorCode::BadJson, "bad_json"),
        (ErrorCode::UnknownAction, "unknown_action"),
        (ErrorCode::InvalidField, "invalid_field"),
        (ErrorCode::TooLarge, "too_large"),
        (ErrorCode::Unauthorized, "unauthorized"),
        (ErrorCode::Internal, "internal"),
        (ErrorCode::NoQuorum, "no_quorum"),
    ];
    for (code, name) in codes {
        assert_eq!(code.as_str(), name);
        assert_eq!(code.to_string(), name);
    }
    assert_eq!(amount(1234).to_string(), "1234");
}

#[test]
fn ids_reach_their_longest_and_the_messages_api_gateways_sizes() {
    assert!(BidId::new("b".repeat(BID_ID_MAX_LEN)).is_ok());
    assert!(BidId::new("b".repeat(BID_ID_MAX_LEN + 1)).is_err());
    // API Gateway's WebSocket quotas: a message of 128 KB, a frame of 32 KB.
    assert_eq!(MAX_MESSAGE_BYTES, 131_072);
    assert_eq!(MAX_FRAME_BYTES, 32_768);
    // A move order's delay is left out when it is 0 (clients read absent as 0).
    let frame = |after_ms: u64| {
        ServerMessage::MoveTo {
            region: "us-east-1".into(),
            to: "us-west-2".into(),
            endpoint: None,
            window_ms: 1_000,
            after_ms,
            reason: String::new(),
        }
        .to_json()
    };
    assert!(!frame(0).contains("afterMs"));
    assert!(frame(5).contains(r#""afterMs":5"#));
}
