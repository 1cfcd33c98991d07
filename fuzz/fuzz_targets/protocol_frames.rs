//! Frame parsing: any bytes a client or a server may send. The parsers are total: they return
//! an error frame's reason, never panic, and what they accept serializes back to JSON that
//! parses to the same message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wsdr_protocol::{parse_client_message, parse_server_frame, ServerFrame};

fuzz_target!(|data: &[u8]| {
    if let Ok(message) = parse_client_message(data) {
        let again = parse_client_message(message.to_json().as_bytes());
        assert_eq!(again.ok(), Some(message), "client message round trip");
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(ServerFrame::Message(message)) = parse_server_frame(text) {
            let again = parse_server_frame(&message.to_json());
            assert_eq!(again.ok(), Some(ServerFrame::Message(message)), "server frame round trip");
        }
    }
});
