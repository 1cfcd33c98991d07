//! Open one WebSocket to a wsdr endpoint and say exactly why it could not open, if it could
//! not: DNS, TCP, TLS, a refused handshake (with its status), or a timeout.
//!
//! ```sh
//! cargo run -p wsdr-client --example connect -- wss://auction.example.com "$TOKEN"
//! ```

use wsdr_client::{connect, ConnectOptions};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let Some(url) = args.next() else {
        eprintln!("usage: connect <url> [token]");
        std::process::exit(2);
    };
    let options = ConnectOptions {
        token: args.next(),
        ..ConnectOptions::default()
    };
    match connect(&url, &options).await {
        Ok(_socket) => println!("connected to {url}"),
        Err(error) => {
            println!(
                "could not connect: {error} (retryable: {})",
                error.is_retryable()
            );
            std::process::exit(1);
        }
    }
}
