//! One request/answer on an open socket, bounded by a deadline: the heartbeat round trip the
//! client's probe of the global name and the canary's probe share.

use crate::transport::WsStream;
use futures::{SinkExt, StreamExt};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use wsdr_protocol::{parse_server_frame, ClientMessage, ServerFrame, ServerMessage};

/// Why an exchange got no usable answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExchangeError {
    /// Nothing usable arrived before the deadline.
    #[error("no answer before the deadline")]
    Timeout,
    /// The socket closed first.
    #[error("connection closed before a reply")]
    Closed,
    /// API Gateway answered instead of our Lambda (integration failed or throttled).
    #[error("API Gateway error frame: {0}")]
    GatewayError(String),
    /// A frame that does not answer the request.
    #[error("unexpected reply: {0}")]
    WrongReply(String),
}

/// Send one frame.
pub async fn send(ws: &mut WsStream, message: &ClientMessage) -> Result<(), ExchangeError> {
    ws.send(Message::text(message.to_json()))
        .await
        .map_err(|_| ExchangeError::Closed)
}

/// The next frame of ours before `deadline`, skipping control frames and what the server
/// pushes unasked (`bidUpdate`, `moveTo`).
pub async fn next_message(
    ws: &mut WsStream,
    deadline: Instant,
) -> Result<ServerMessage, ExchangeError> {
    loop {
        let frame = match tokio::time::timeout_at(deadline, ws.next()).await {
            Err(_) => return Err(ExchangeError::Timeout),
            Ok(None) | Ok(Some(Err(_))) => return Err(ExchangeError::Closed),
            Ok(Some(Ok(frame))) => frame,
        };
        let text = match frame {
            Message::Text(text) => text,
            Message::Close(_) => return Err(ExchangeError::Closed),
            Message::Binary(_) => return Err(ExchangeError::WrongReply("binary frame".into())),
            _ => continue,
        };
        match parse_server_frame(&text) {
            Ok(ServerFrame::GatewayError { message }) => {
                return Err(ExchangeError::GatewayError(message))
            }
            Ok(ServerFrame::Message(message)) if message.is_unsolicited() => continue,
            Ok(ServerFrame::Message(message)) => return Ok(message),
            Err(e) => return Err(ExchangeError::WrongReply(e.message)),
        }
    }
}

/// A heartbeat and its pong: the Region that answered.
pub async fn heartbeat(ws: &mut WsStream, deadline: Instant) -> Result<String, ExchangeError> {
    send(
        ws,
        &ClientMessage::Heartbeat {
            auction_id: None,
            topic: None,
        },
    )
    .await?;
    match next_message(ws, deadline).await? {
        ServerMessage::Pong { region, .. } => Ok(region),
        other => Err(ExchangeError::WrongReply(describe(&other))),
    }
}

/// A frame in a few words, for failure messages.
pub fn describe(message: &ServerMessage) -> String {
    match message {
        ServerMessage::Error { code, message, .. } => format!("error frame {code}: {message}"),
        other => format!(
            "{} frame",
            other.to_json().split('"').nth(3).unwrap_or("unknown")
        ),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_frame_is_described_by_its_type_or_its_error() {
        let pong =
            match parse_server_frame(r#"{"type":"pong","region":"us-east-1","ts":1}"#).unwrap() {
                ServerFrame::Message(message) => message,
                other => panic!("{other:?}"),
            };
        assert_eq!(describe(&pong), "pong frame");
        let error = match parse_server_frame(
            r#"{"type":"error","code":"bad_json","message":"no action","region":"r"}"#,
        )
        .unwrap()
        {
            ServerFrame::Message(message) => message,
            other => panic!("{other:?}"),
        };
        assert_eq!(describe(&error), "error frame bad_json: no action");
    }
}
