//! Watch a failover from a user's seat: connect through the global name (and, with
//! `--regions`, each Region's own endpoint for client-assisted failover), print every event
//! with the Region that served it, and keep bidding a little above the high bid.
//!
//! Against the lab (`make lab` in another terminal, then throttle the primary from the
//! control room at http://127.0.0.1:8787/):
//!
//! ```sh
//! TOKEN=$(curl -s 'http://127.0.0.1:8787/api/token?sub=alice' | sed 's/.*"token":"\([^"]*\)".*/\1/')
//! cargo run -p wsdr-client --example watch_failover -- ws://127.0.0.1:<front door>/prod "$TOKEN" \
//!     us-east-1=ws://127.0.0.1:<port>/prod us-west-2=ws://127.0.0.1:<port>/prod
//! ```
//!
//! (`wsdr lab` prints the front door's and each Region's URL at start.) Against AWS: the
//! custom domain's `wss://` URL, a user token from your identity provider, and the stacks'
//! `RegionalEndpointUrl` outputs. Time scale: the lab runs 60 AWS seconds per second, so
//! this example's timers are the client's defaults divided by `WSDR_TIME_SCALE` (default 1).

use std::sync::Arc;
use std::time::Duration;
use wsdr_client::{Backoff, ClientBuilder, Event, Fallback, RegionalEndpoint, StaticToken};
use wsdr_protocol::{Amount, AuctionId};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(url), Some(token)) = (args.next(), args.next()) else {
        eprintln!("usage: watch_failover <global url> <token> [region=url ...]");
        std::process::exit(2);
    };
    let regions: Vec<RegionalEndpoint> = args
        .filter_map(|pair| {
            let (region, url) = pair.split_once('=')?;
            Some(RegionalEndpoint {
                region: region.into(),
                url: url.into(),
            })
        })
        .collect();
    let scale: f64 = std::env::var("WSDR_TIME_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|s: &f64| *s >= 1.0)
        .unwrap_or(1.0);
    let auction = AuctionId::new("lot-1")?;
    let mut builder = ClientBuilder::new(url)
        .token_provider(Arc::new(StaticToken(token)))
        .subscribe(auction.clone())
        .heartbeat(
            Duration::from_secs_f64(30.0 / scale),
            Duration::from_secs_f64(35.0 / scale),
        )
        .backoff(Backoff::default().scaled(scale));
    if !regions.is_empty() {
        builder = builder.fallback(Fallback::new(regions).scaled(scale));
    }
    let (client, mut events) = builder.start();
    while let Some(event) = events.recv().await {
        match &event {
            Event::StateRestored {
                region,
                auction: view,
                outage,
                ..
            } => {
                let high = view.high_bid.as_ref().map_or(0, |h| h.amount.get());
                println!("state from {region}: high bid {high} (outage {outage:?})");
                // A bid after every restore: the same auction, whichever Region serves it.
                let amount = Amount::new(high + 100)?;
                match client.bid(auction.clone(), amount).await {
                    Ok(bid_id) => println!("  bid {} sent as {bid_id}", amount.get()),
                    Err(error) => println!("  bid not sent: {error}"),
                }
            }
            Event::BidResult { status, region, .. } => println!("bid {status:?} by {region}"),
            Event::GaveUp { reason, .. } => {
                println!("gave up: {reason}");
                break;
            }
            other => println!("{other:?}"),
        }
    }
    Ok(())
}
