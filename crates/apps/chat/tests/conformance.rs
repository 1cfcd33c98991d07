#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The chat room's order against the shared vectors (`conformance/conversation.json`), which
//! the browser client's `conversation` runs too (web/test/conformance.test.js): one order in
//! both, strings by code point.

use serde_json::Value;
use wsdr_chat::conversation;
use wsdr_protocol::{Digest, OpId, OpView};

#[test]
fn conversation_vectors() {
    let path = format!(
        "{}/../../../conformance/conversation.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(file["rule"], "conversation");
    let cases = file["cases"].as_array().unwrap();
    assert!(cases.len() >= 6);
    for case in cases {
        let copies: Vec<OpView> = case["copies"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let op = serde_json::json!({ "text": c["text"] });
                OpView {
                    author: c["author"].as_str().unwrap().into(),
                    op_id: OpId::new(c["opId"].as_str().unwrap()).unwrap(),
                    region: c["region"].as_str().unwrap().into(),
                    position: i as u64 + 1,
                    log: c["region"].as_str().unwrap().into(),
                    at: c["at"].as_u64().unwrap(),
                    digest: Digest::of(&op).unwrap(),
                    op,
                }
            })
            .collect();
        // The order is a function of the set: given forwards or backwards, the same.
        for given in [copies.clone(), copies.iter().rev().cloned().collect()] {
            let got: Vec<Value> = conversation(&given)
                .into_iter()
                .map(|m| serde_json::json!([m.author, m.op_id, m.text, m.region]))
                .collect();
            assert_eq!(Value::from(got), case["expect"], "{}", case["name"]);
        }
    }
}

/// The kit's laws (`wsdr_core::laws`): the room's ops, seed and summaries read back, its
/// folds and decisions are pure, its view is order-free, the newest message its summary
/// carries is one it folded, and its log delivers something.
#[test]
fn the_room_keeps_the_kits_laws() {
    use wsdr_chat::{Chat, Room};
    let chat = Chat::in_namespace(Chat::namespace().unwrap());
    let room = Room {
        title: "Lobby".into(),
        max_chars: 40,
    };
    let topic = wsdr_protocol::Topic::parse("chat:lobby").unwrap();
    let sample: Vec<(&str, Value)> = [
        "hello",
        "anyone?",
        "a message longer than the room's forty characters is refused",
        "ça va ? 👋",
        "ok",
    ]
    .iter()
    .enumerate()
    .map(|(i, text)| (["ann", "bo"][i % 2], serde_json::json!({ "text": text })))
    .collect();
    assert_eq!(
        wsdr_core::laws::check(&chat, &topic, &room.to_json(), &sample),
        Ok(())
    );
}
