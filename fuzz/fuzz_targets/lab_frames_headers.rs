//! The lab's API Gateway emulation: handshake headers and query parameters into the REQUEST
//! authorizer's event, the token found in them, and a frame's route selection. Input: lines
//! `name: value` (headers), `?key=value` (query), and the rest is the frame.
#![no_main]

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;
use std::collections::HashMap;
use wsdr_lab::world::region::{authorizer_request, route_key};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut headers = HeaderMap::new();
    let mut query = HashMap::new();
    let mut frame = String::new();
    for line in text.split('\n') {
        if let Some(pair) = line.strip_prefix('?') {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            query.insert(k.to_owned(), v.to_owned());
        } else if let Some((name, value)) = line.split_once(": ") {
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_bytes(value.as_bytes()),
            ) {
                headers.append(name, value);
            }
        } else {
            frame.push_str(line);
        }
    }
    if let Some(request) = authorizer_request(&headers, &query, "arn:aws:execute-api:us-east-1:1:a/prod/$connect", "prod", "a") {
        let _ = authorizer::token_from_request(&request, "wsdr");
    }
    let route = route_key(&frame);
    assert!(matches!(route, "bid" | "getState" | "heartbeat" | "$default"));
});
