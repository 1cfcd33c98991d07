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

    /// A WebSocket server on 127.0.0.1:0 that answers the first frame it reads with `replies`,
    /// in order, then holds the socket open.
    async fn server(replies: Vec<Message>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}/prod", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            let Ok(mut ws) = tokio_tungstenite::accept_async(socket).await else {
                return;
            };
            let _ = ws.next().await;
            for reply in replies {
                let _ = ws.send(reply).await;
            }
            tokio::time::sleep(std::time::Duration::from_secs(30)).await;
        });
        url
    }

    async fn heartbeat_against(replies: Vec<Message>) -> Result<String, ExchangeError> {
        let url = server(replies).await;
        let mut ws = crate::transport::connect(&url, &Default::default())
            .await
            .unwrap();
        heartbeat(&mut ws, Instant::now() + std::time::Duration::from_secs(5)).await
    }

    #[tokio::test]
    async fn a_heartbeat_skips_pushes_and_control_frames_to_its_pong() {
        let replies = vec![
            Message::Ping(Vec::new().into()),
            Message::text(
                r#"{"type":"moveTo","region":"us-east-1","to":"us-west-2","windowMs":0,"afterMs":0,"reason":"evacuation"}"#,
            ),
            Message::text(r#"{"type":"pong","region":"us-west-2","ts":1}"#),
        ];
        assert_eq!(heartbeat_against(replies).await, Ok("us-west-2".into()));
    }

    #[tokio::test]
    async fn a_binary_frame_or_a_close_ends_the_exchange_at_once() {
        assert_eq!(
            heartbeat_against(vec![Message::Binary(vec![1, 2].into())]).await,
            Err(ExchangeError::WrongReply("binary frame".into()))
        );
        assert_eq!(
            heartbeat_against(vec![Message::Close(None)]).await,
            Err(ExchangeError::Closed)
        );
        assert!(matches!(
            heartbeat_against(vec![Message::text(
                r#"{"message":"Internal server error","connectionId":"c","requestId":"r"}"#
            )])
            .await,
            Err(ExchangeError::GatewayError(_))
        ));
    }
}
