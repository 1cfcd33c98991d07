#![cfg(feature = "simulation")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! A client built for a simulation connects over the network it was given (the lab's
//! in-memory one), never the operating system's TCP.

use futures::{SinkExt, StreamExt};
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;
use wsdr_client::{ClientBuilder, Event};

#[tokio::test]
async fn a_client_given_a_network_connects_over_it() {
    let network = wsdr_net::Network::memory();
    let mut listener = network.bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                if let Ok(mut ws) = tokio_tungstenite::accept_async(socket).await {
                    // Every frame (the client's heartbeat) answered with a pong.
                    while let Some(Ok(_)) = ws.next().await {
                        let pong = r#"{"type":"pong","region":"mem-1","ts":1}"#;
                        if ws.send(Message::text(pong)).await.is_err() {
                            break;
                        }
                    }
                }
            });
        }
    });
    let (client, mut events) = ClientBuilder::new(format!("ws://{address}/prod"))
        .network(network)
        .connect_timeout(Duration::from_secs(2))
        .heartbeat(Duration::from_millis(100), Duration::from_secs(1))
        .max_attempts(Some(1))
        .start();
    let connected = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(event) = events.recv().await {
            match event {
                Event::Connected { region } => return region == "mem-1",
                Event::Disconnected { .. } => return false,
                _ => {}
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    client.close();
    assert!(connected, "connected over the in-memory network");
}
