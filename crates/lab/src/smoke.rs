//! The smoke test after a deploy (`wsdr smoke`, `make smoke`): for each endpoint, one user
//! connection that sends `heartbeat`, `getState` and one bid, and says which Region answered
//! each. A Region's own endpoint must be answered by that Region; the global name by either
//! (it says which). The same code runs against `wsdr lab`'s URLs in the tests, so it is known
//! to work before anyone points it at AWS.

use std::time::Duration;
use tokio::time::Instant;
use wsdr_client::exchange::{self, ExchangeError};
use wsdr_client::{ConnectOptions, WsStream};
use wsdr_protocol::{Amount, AuctionId, BidId, BidStatus, ClientMessage, ServerMessage};

/// One endpoint to try.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `wss://...` (AWS) or `ws://...` (the lab).
    pub url: String,
    /// The Region that must answer (a Region's own endpoint); `None` for the global name.
    pub expected_region: Option<String>,
}

impl Target {
    /// `us-east-1=wss://...` (a Region's own endpoint) or a bare URL (the global name).
    pub fn parse(text: &str) -> Result<Self, String> {
        let (expected_region, url) = match text.split_once('=') {
            Some((region, url)) if !region.contains('/') => (Some(region.to_owned()), url),
            _ => (None, text),
        };
        if !(url.starts_with("wss://") || url.starts_with("ws://")) {
            return Err(format!("`{url}`: a ws:// or wss:// URL"));
        }
        Ok(Self {
            url: url.to_owned(),
            expected_region,
        })
    }
}

/// What the smoke test needs besides the targets.
#[derive(Debug, Clone)]
pub struct Settings {
    /// A user token for `$connect`.
    pub token: String,
    pub auction: AuctionId,
    /// The bid: this much above the high bid (or this much, with no bid yet), minor units.
    pub raise: u64,
    /// Each step's bound.
    pub timeout: Duration,
}

/// What one step saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Answered by this Region, in this many ms.
    Answered {
        region: String,
        ms: u64,
        note: String,
    },
    Failed(String),
}

impl Step {
    fn region(&self) -> Option<&str> {
        match self {
            Step::Answered { region, .. } => Some(region),
            Step::Failed(_) => None,
        }
    }
}

/// One target's outcome.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub target: Target,
    pub heartbeat: Step,
    pub get_state: Step,
    pub bid: Step,
}

impl Outcome {
    /// Every step answered, a Region's own endpoint by that Region, the bid accepted.
    pub fn failures(&self) -> Vec<String> {
        let mut failures = Vec::new();
        for (name, step) in [
            ("heartbeat", &self.heartbeat),
            ("getState", &self.get_state),
            ("bid", &self.bid),
        ] {
            match step {
                Step::Failed(why) => failures.push(format!("{} {name}: {why}", self.target.url)),
                Step::Answered { region, .. } => {
                    if let Some(expected) = &self.target.expected_region {
                        if region != expected {
                            failures.push(format!(
                                "{} {name}: answered by {region}, expected {expected}",
                                self.target.url
                            ));
                        }
                    }
                }
            }
        }
        failures
    }
}

/// Run the smoke test against each target in turn.
pub async fn run(targets: &[Target], settings: &Settings) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    for target in targets {
        outcomes.push(one(target, settings).await);
    }
    outcomes
}

async fn one(target: &Target, settings: &Settings) -> Outcome {
    let failed = |why: String| Outcome {
        target: target.clone(),
        heartbeat: Step::Failed(why.clone()),
        get_state: Step::Failed("not tried".into()),
        bid: Step::Failed("not tried".into()),
    };
    let options = ConnectOptions {
        token: Some(settings.token.clone()),
        timeout: settings.timeout,
        ..ConnectOptions::default()
    };
    let mut ws = match wsdr_client::connect(&target.url, &options).await {
        Ok(ws) => ws,
        Err(error) => return failed(format!("connect: {error}")),
    };
    let started = Instant::now();
    let heartbeat = match exchange::heartbeat(&mut ws, started + settings.timeout).await {
        Ok(region) => Step::Answered {
            region,
            ms: millis(started),
            note: "pong".into(),
        },
        Err(error) => Step::Failed(error.to_string()),
    };
    let (get_state, high) = get_state(&mut ws, settings).await;
    let bid = match high {
        Some(high) => bid(&mut ws, settings, high).await,
        None => Step::Failed("no state, no bid".into()),
    };
    let _closed = ws.close(None).await;
    Outcome {
        target: target.clone(),
        heartbeat,
        get_state,
        bid,
    }
}

/// `getState`, and the auction's high bid (0 without one).
async fn get_state(ws: &mut WsStream, settings: &Settings) -> (Step, Option<u64>) {
    let started = Instant::now();
    let request = ClientMessage::GetState {
        auction_id: settings.auction.clone(),
        bid_ids: Vec::new(),
    };
    match ask(ws, &request, started + settings.timeout).await {
        Ok(ServerMessage::State {
            region, auction, ..
        }) => {
            let high = auction.high_bid.map_or(0, |h| h.amount.get());
            (
                Step::Answered {
                    region,
                    ms: millis(started),
                    note: format!("high bid {high}, {} bids", auction.bid_count),
                },
                Some(high),
            )
        }
        Ok(other) => (
            Step::Failed(format!("answered {}", exchange::describe(&other))),
            None,
        ),
        Err(error) => (Step::Failed(error.to_string()), None),
    }
}

/// How many bids the smoke test places at most: each rejected `too_low` or
/// `below_starting_price` (the state names no starting price) is followed by one for twice
/// the amount, each with a fresh bid id.
const MAX_BIDS: u32 = 16;

/// One accepted bid above `high`.
async fn bid(ws: &mut WsStream, settings: &Settings, high: u64) -> Step {
    let started = Instant::now();
    let mut amount = high.saturating_add(settings.raise.max(1));
    let mut last = String::new();
    for attempt in 1..=MAX_BIDS {
        match bid_once(ws, settings, amount, started).await {
            BidAnswer::TooLow(why) => {
                last = why;
                amount = amount.saturating_mul(2);
            }
            BidAnswer::Decided(Step::Answered { region, ms, note }) => {
                return Step::Answered {
                    region,
                    ms,
                    note: format!("{note} after {attempt} bid(s)"),
                }
            }
            BidAnswer::Decided(failed) => return failed,
        }
    }
    Step::Failed(format!(
        "no bid accepted in {MAX_BIDS} tries (last: {last})"
    ))
}

/// What one bid got.
enum BidAnswer {
    /// Accepted, or a failure to report as it is.
    Decided(Step),
    /// Rejected as too low: worth a higher bid.
    TooLow(String),
}

/// One bid of `amount`.
async fn bid_once(
    ws: &mut WsStream,
    settings: &Settings,
    amount: u64,
    started: Instant,
) -> BidAnswer {
    let amount = match Amount::new(amount) {
        Ok(amount) => amount,
        Err(error) => return BidAnswer::Decided(Step::Failed(format!("no valid amount: {error}"))),
    };
    let bid_id = match BidId::new(format!("smoke-{:016x}", rand::random::<u64>())) {
        Ok(id) => id,
        Err(error) => return BidAnswer::Decided(Step::Failed(format!("bid id: {error}"))),
    };
    let request = ClientMessage::Bid {
        auction_id: settings.auction.clone(),
        amount,
        bid_id: bid_id.clone(),
    };
    match ask(ws, &request, Instant::now() + settings.timeout).await {
        Ok(ServerMessage::BidResult {
            bid_id: answered,
            status: BidStatus::Accepted,
            region,
            ..
        }) if answered == bid_id => BidAnswer::Decided(Step::Answered {
            region,
            ms: millis(started),
            note: format!("accepted {}", amount.get()),
        }),
        Ok(ServerMessage::BidResult {
            status: BidStatus::Rejected,
            reason: Some(reason),
            ..
        }) if reason == "too_low" || reason == "below_starting_price" => {
            BidAnswer::TooLow(format!("bid of {} rejected {reason}", amount.get()))
        }
        Ok(ServerMessage::BidResult { status, reason, .. }) => {
            BidAnswer::Decided(Step::Failed(format!(
                "bid of {} answered {status:?} ({})",
                amount.get(),
                reason.unwrap_or_default()
            )))
        }
        Ok(other) => BidAnswer::Decided(Step::Failed(format!(
            "answered {}",
            exchange::describe(&other)
        ))),
        Err(error) => BidAnswer::Decided(Step::Failed(error.to_string())),
    }
}

async fn ask(
    ws: &mut WsStream,
    request: &ClientMessage,
    deadline: Instant,
) -> Result<ServerMessage, ExchangeError> {
    exchange::send(ws, request).await?;
    exchange::next_message(ws, deadline).await
}

fn millis(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// The console's table: one line per target, which Region answered each step.
pub fn table(outcomes: &[Outcome]) -> String {
    let cell = |step: &Step| match step {
        Step::Answered { region, ms, note } => format!("{region} ({ms} ms; {note})"),
        Step::Failed(why) => format!("FAILED: {why}"),
    };
    let mut out = String::new();
    for outcome in outcomes {
        let what = match &outcome.target.expected_region {
            Some(region) => format!("{region}'s own endpoint"),
            None => "the global name".to_owned(),
        };
        out.push_str(&format!("{} ({what})\n", outcome.target.url));
        out.push_str(&format!("  heartbeat  {}\n", cell(&outcome.heartbeat)));
        out.push_str(&format!("  getState   {}\n", cell(&outcome.get_state)));
        out.push_str(&format!("  bid        {}\n", cell(&outcome.bid)));
        if outcome.target.expected_region.is_none() {
            if let Some(region) = outcome.heartbeat.region() {
                out.push_str(&format!("  the global name is served by {region}\n"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_names_its_region_or_is_the_global_name() {
        let regional =
            Target::parse("us-east-1=wss://abc.execute-api.us-east-1.amazonaws.com/prod")
                .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(regional.expected_region.as_deref(), Some("us-east-1"));
        assert_eq!(
            regional.url,
            "wss://abc.execute-api.us-east-1.amazonaws.com/prod"
        );
        let global = Target::parse("wss://auction.example.com").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(global.expected_region, None);
        // A query string's `=` is part of the URL, not a Region.
        let query = Target::parse("wss://a.example.com/?x=1").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(query.expected_region, None);
        assert!(Target::parse("https://auction.example.com").is_err());
        assert!(Target::parse("us-east-1=auction.example.com").is_err());
    }
}
