//! Connect, place one bid, print its result and the Region that decided it.
//!
//! ```sh
//! cargo run -p wsdr-client --example bid -- wss://auction.example.com "$TOKEN" lot-1 125000
//! ```
//!
//! The amount is in minor units (125000 = $1,250.00). The bid id is made by the client, so a
//! bid resent after a reconnect is recorded once (`duplicate` on the second answer).

use std::sync::Arc;
use std::time::Duration;
use wsdr_client::{ClientBuilder, Event, StaticToken};
use wsdr_protocol::{Amount, AuctionId};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, token, auction, amount] = args.as_slice() else {
        eprintln!("usage: bid <url> <token> <auction> <amount in minor units>");
        std::process::exit(2);
    };
    let auction = AuctionId::new(auction.as_str())?;
    let amount = Amount::new(amount.parse()?)?;
    let (client, mut events) = ClientBuilder::new(url.as_str())
        .token_provider(Arc::new(StaticToken(token.clone())))
        .subscribe(auction.clone())
        .start();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut sent = None;
    while let Ok(Some(event)) = tokio::time::timeout_at(deadline, events.recv()).await {
        match event {
            Event::StateRestored { region, .. } if sent.is_none() => {
                println!("connected; state from {region}");
                sent = Some(client.bid(auction.clone(), amount).await?);
            }
            Event::BidResult {
                bid_id,
                status,
                reason,
                region,
            } if Some(&bid_id) == sent.as_ref() => {
                println!("{status:?} by {region} {}", reason.unwrap_or_default());
                client.close();
                return Ok(());
            }
            Event::GaveUp { reason, .. } => return Err(reason.into()),
            _ => {}
        }
    }
    Err("no answer within 30 s".into())
}
