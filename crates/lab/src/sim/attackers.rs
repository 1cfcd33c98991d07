//! The hostile clients the chaos campaign runs beside its users, each the attack of an
//! outside review that once broke a documented guarantee:
//! - an **impostor** holding the (leaked) canary secret mints a canary-issuer token naming a
//!   real user and tries to read their bids and bid as them; and, with a real probe subject,
//!   tries the same as a probe;
//! - a **prolific** user bids hundreds of times (more copies than one page of any list), and
//!   its newest bid must still be its `lastBid`, its `bids` the newest, and every named bid
//!   settle by its `you.settled`;
//! - a **split reuser** sends one bidId with two amounts, one to each Region while they
//!   cannot reach each other: after the heal, each Region's settlement of that bidId must
//!   name both copies, each with its own Region and amount, and no single amount.
//!
//! Each returns the violations it saw; a connection refused where it must be refused is a
//! pass, not an error.

use crate::sim::history::Violation;
use crate::world::scale::AwsDuration;
use crate::world::{RegionId, World};
use std::time::Duration;
use tokio::time::Instant;
use wsdr_client::exchange::{next_message, send};
use wsdr_client::{connect, ConnectError, ConnectOptions, WsStream};
use wsdr_protocol::{Amount, AuctionId, BidId, BidStatus, ClientMessage, ServerMessage};

/// Connect with a token the world minted (a token it could not mint is a failed handshake).
async fn try_open(
    lab: &World,
    url: &str,
    token: anyhow::Result<String>,
) -> Result<WsStream, ConnectError> {
    let token = token.map_err(|e| ConnectError::Protocol(format!("no token: {e:#}")))?;
    connect(
        url,
        &ConnectOptions {
            token: Some(token),
            network: lab.config().environment.network.clone(),
            ..ConnectOptions::default()
        },
    )
    .await
}

async fn open(lab: &World, url: &str, token: anyhow::Result<String>) -> Option<WsStream> {
    try_open(lab, url, token).await.ok()
}

/// Send one frame and wait (bounded) for its answer.
async fn ask(
    ws: &mut WsStream,
    message: &ClientMessage,
    within: Duration,
) -> Option<ServerMessage> {
    send(ws, message).await.ok()?;
    next_message(ws, Instant::now() + within).await.ok()
}

/// Send one bid and wait (bounded) for the answer.
async fn bid(
    ws: &mut WsStream,
    auction: &AuctionId,
    bid_id: BidId,
    amount: Amount,
    within: Duration,
) -> Option<ServerMessage> {
    let message = ClientMessage::Bid {
        auction_id: auction.clone(),
        amount,
        bid_id,
    };
    ask(ws, &message, within).await
}

/// The impostor's attacks on every Region: a canary-issuer token naming `victim` must be
/// refused at the handshake; a real probe subject may connect, read public state, and
/// nothing of anyone's bids, and its bid must be rejected.
pub async fn impostor(
    lab: &World,
    victim: &str,
    auction: &AuctionId,
    within: Duration,
) -> Vec<Violation> {
    let mut found = Vec::new();
    for (id, region) in lab.regions() {
        let url = region.url();
        let name = region.name.clone();
        // The authorizer must refuse it (403). A 401 is the handler's `$connect` refusing an
        // identity the authorizer let through: the second line of defence held, the first
        // did not (docs/AUTH.md says the authorizer refuses). Other failures say nothing.
        let attempt = try_open(lab, &url, lab.probe_token(victim)).await;
        if matches!(attempt, Err(ConnectError::Refused { status: 401 })) {
            found.push(Violation::ImpostorAdmitted {
                region: id,
                sub: victim.to_owned(),
            });
        }
        if let Ok(mut ws) = attempt {
            found.push(Violation::ImpostorAdmitted {
                region: id,
                sub: victim.to_owned(),
            });
            let state = ClientMessage::GetState {
                auction_id: auction.clone(),
                bid_ids: Vec::new(),
            };
            if let Some(ServerMessage::State { you, .. }) = ask(&mut ws, &state, within).await {
                if !you.bids.is_empty() {
                    found.push(Violation::ProbeActedAsUser {
                        region: id,
                        what: format!("read {} of {victim}'s bids", you.bids.len()),
                    });
                }
            }
        }
        let probe = format!("{}attacker", wsdr_protocol::limits::PROBE_SUBJECT_PREFIX);
        let Some(mut ws) = open(lab, &url, lab.probe_token(&probe)).await else {
            continue; // the Region is down: nothing to attack
        };
        let state = ClientMessage::GetState {
            auction_id: auction.clone(),
            bid_ids: Vec::new(),
        };
        if let Some(ServerMessage::State { you, .. }) = ask(&mut ws, &state, within).await {
            if !you.bids.is_empty() || you.user_id != probe {
                found.push(Violation::ProbeActedAsUser {
                    region: id,
                    what: format!(
                        "a probe's state names {} with {} bids",
                        you.user_id,
                        you.bids.len()
                    ),
                });
            }
        }
        let Ok(bid_id) = BidId::new(format!("probe-bid-{}", name.replace('-', ""))) else {
            continue;
        };
        let Ok(amount) = Amount::new(wsdr_protocol::limits::MAX_AMOUNT) else {
            continue;
        };
        if let Some(ServerMessage::BidResult { status, .. }) =
            bid(&mut ws, auction, bid_id, amount, within).await
        {
            if status != BidStatus::Rejected {
                found.push(Violation::ProbeActedAsUser {
                    region: id,
                    what: format!("a probe's bid was answered {status:?}"),
                });
            }
        }
    }
    found
}

/// The prolific user: `bids` bids in a row on `auction` (which nobody else bids on) in the
/// first Region, each one above the last, then a `getState` naming its first, a middle and
/// its last bid, and one it never made. Only acknowledged bids are judged; a Region that
/// stops answering ends the attack early.
pub async fn prolific(
    lab: &World,
    sub: &str,
    auction: &AuctionId,
    bids: usize,
    within: Duration,
) -> Vec<Violation> {
    let region = &lab.region(RegionId::Primary);
    let Some(user) = subject(sub) else {
        return Vec::new();
    };
    let Some(mut ws) = open(lab, &region.url(), lab.user_token(sub)).await else {
        return Vec::new();
    };
    let mut acknowledged: Vec<(BidId, u64)> = Vec::new();
    for i in 0..bids {
        // bidIds in no relation to time: the table's own order is bidId order.
        let Ok(bid_id) = BidId::new(format!(
            "pro-{:016x}",
            (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        )) else {
            continue;
        };
        let amount = acknowledged.last().map_or(1, |(_, a)| a + 1);
        let Ok(value) = Amount::new(amount) else {
            break;
        };
        match bid(&mut ws, auction, bid_id.clone(), value, within).await {
            Some(ServerMessage::BidResult {
                status: BidStatus::Accepted | BidStatus::Duplicate,
                ..
            }) => acknowledged.push((bid_id, amount)),
            Some(_) => {}
            None => break,
        }
    }
    let (Some(first), Some(last)) = (acknowledged.first(), acknowledged.last()) else {
        return Vec::new();
    };
    let middle = &acknowledged[acknowledged.len() / 2];
    let Ok(never) = BidId::new("pro-never-sent") else {
        return Vec::new();
    };
    let named = vec![
        first.0.clone(),
        middle.0.clone(),
        last.0.clone(),
        never.clone(),
    ];
    let state = ClientMessage::GetState {
        auction_id: auction.clone(),
        bid_ids: named.clone(),
    };
    let Some(ServerMessage::State { you, .. }) = ask(&mut ws, &state, within).await else {
        return Vec::new();
    };
    let mut found = Vec::new();
    // The truth is the Region's own copies, in the order the port defines (newest `at`
    // first, then bidId): bids made within one lab millisecond tie on `at`.
    let Ok(states) = crate::sim::judge::final_states(lab, auction).await else {
        return found;
    };
    let seen = crate::sim::trace::UserEnd {
        user: user.clone(),
        auction: auction.clone(),
        connected: true,
        high_seen: None,
        high_before_resync: None,
        views_backwards: 0,
        highs_lowered: 0,
        served_by: Some(RegionId::Primary),
        own_bids: you
            .bids
            .iter()
            .map(|b| (b.bid_id.clone(), b.amount))
            .collect(),
        last_bid: you.last_bid.as_ref().map(|b| (b.bid_id.clone(), b.amount)),
    };
    crate::sim::history::check_own_bids(&seen, &states, &mut found);
    for id in &named {
        let expected = acknowledged
            .iter()
            .find(|(a, _)| a == id)
            .map(|(_, amount)| *amount);
        let answer = you.settled.iter().find(|s| &s.bid_id == id);
        let right = match (expected, answer) {
            (Some(amount), Some(s)) => Amount::new(amount).is_ok_and(|a| s.stands_with(a)),
            (None, Some(s)) => !s.stands,
            (_, None) => false,
        };
        if !right {
            found.push(Violation::SettledWrong {
                user: user.clone(),
                region: RegionId::Primary,
                bid_id: id.clone(),
            });
        }
    }
    found
}

/// Two users racing on `auction` (which the others do not bid on), one connected to each
/// Region's own endpoint, `per_region` bids each, amounts from one rising counter: in strong
/// mode both Regions write the same ledger head and the same copies at once. Every answer
/// must be a decision or a resendable `unknown`: a `rejected` whose reason sending again
/// could change is a bid the clients would drop. A watcher in each Region follows the lot:
/// no push may lower the high bid it shows; then (strong mode) a bid whose push cannot leave
/// its Region must still reach the other Region's watcher within a heartbeat, and (both
/// modes, healed) a bid must reach it as a push.
pub async fn racers(
    lab: &World,
    auction: &AuctionId,
    per_region: usize,
    within: Duration,
) -> Vec<Violation> {
    // Round i of each racer bids the same amount: on the eventual table both Regions accept
    // it (each checks only its own copy), so the lot holds equal amounts from two Regions and
    // the ledger's tie rule (the earliest copy wins) decides the winner. On the strong table
    // the second is `too_low`.
    const FIRST_AMOUNT: u64 = 1_000_000;
    let next = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(
        FIRST_AMOUNT + per_region as u64,
    ));
    let race = |region: RegionId| async move {
        let index = region.index();
        let sub = format!("racer-{index}");
        let mut found = Vec::new();
        let Some(racer) = subject(&sub) else {
            return found;
        };
        let Some(mut ws) = open(lab, &lab.region(region).url(), lab.user_token(&sub)).await else {
            return found;
        };
        for i in 0..per_region {
            let amount = FIRST_AMOUNT + i as u64;
            let (Ok(bid_id), Ok(value)) = (
                BidId::new(format!("race-{index}-{i:04}")),
                Amount::new(amount),
            ) else {
                continue;
            };
            match bid(&mut ws, auction, bid_id.clone(), value, within).await {
                Some(ServerMessage::BidResult {
                    status: BidStatus::Rejected,
                    reason,
                    ..
                }) if !reason
                    .as_deref()
                    .is_some_and(|r| crate::sim::users::FINAL_REJECTIONS.contains(&r)) =>
                {
                    found.push(Violation::RetryableRejected {
                        bidder: racer.clone(),
                        bid_id,
                        region,
                        reason: reason.unwrap_or_default(),
                    });
                }
                Some(_) => {}
                None => break,
            }
        }
        found
    };
    let mut watchers = Vec::new();
    for region in RegionId::ALL {
        match Watcher::start(lab, auction, region) {
            Ok(watcher) => watchers.push(watcher),
            Err(error) => {
                tracing::warn!(%error, %region, "no watcher: the race runs unwatched");
                return Vec::new();
            }
        }
    }
    // Some pushes are throttled and retried with backoff, so they arrive late and out of
    // order, as `@connections` under load delivers them.
    for region in RegionId::ALL {
        lab.inject(crate::world::Fault::ConnectionsThrottle {
            region,
            percent: 40,
        });
    }
    let (mut found, b) = tokio::join!(race(RegionId::Primary), race(RegionId::Secondary));
    found.extend(b);
    lab.inject(crate::world::Fault::Heal);
    // Before any higher bid: the top of the lot is the last round's tie.
    found.extend(ties_decided_by_the_rule(lab, auction).await);
    let amount = || next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    if lab.cluster().is_some() {
        // Strong mode: the path between the Regions cut (the witness keeps a quorum on both
        // sides), so the push cannot leave the first Region; the other Region's watcher must
        // still show the bid within a heartbeat and a round trip: its pong says it is behind.
        lab.inject(crate::world::Fault::Partition);
        found.extend(
            bid_reaches(
                lab,
                auction,
                &mut watchers[1],
                "race-unpushed",
                amount(),
                within,
            )
            .await,
        );
        lab.inject(crate::world::Fault::Heal);
    }
    // Healed, nothing throttled: the bid reaches a subscriber in the other Region as a push
    // (replicated, then announced there), not only by a pong's resync.
    found.extend(pushed_across(lab, auction, amount(), within).await);
    for (i, watcher) in watchers.iter_mut().enumerate() {
        watcher.drain();
        let lowered = watcher.highs_lowered();
        if let (true, Some(user)) = (lowered > 0, subject(&format!("watcher-{i}"))) {
            found.push(Violation::HighWentDown {
                user,
                times: lowered,
            });
        }
        watcher.client.close();
    }
    found
}

/// Once replication has drained, every Region serves the high bid the ledger's rule picks
/// from its own copies (amount, then the earliest copy, then bidder, then bidId), and all
/// serve the same: the racers left equal amounts from both Regions on the lot.
async fn ties_decided_by_the_rule(lab: &World, auction: &AuctionId) -> Vec<Violation> {
    lab.wait_for(crate::world::AwsDuration::from_secs(120), || {
        lab.in_flight().items == 0
    })
    .await;
    let Ok(states) = crate::sim::judge::final_states(lab, auction).await else {
        return Vec::new();
    };
    let mut found: Vec<Violation> = states
        .iter()
        .filter(|state| state.high != state.expected_high())
        .map(|state| Violation::HighBidWrong {
            region: state.region,
            expected: state.expected_high(),
            actual: state.high.clone(),
        })
        .collect();
    if states.windows(2).any(|w| w[0].high != w[1].high) {
        found.push(Violation::WinnersDiffer);
    }
    found
}

/// Bid `amount` as `racer-0` in the first Region, with a bare subscriber in the second: a
/// socket that sent `getState` and nothing else (no heartbeat, so no pong can resync it).
/// Only a pushed `bidUpdate` can show it the bid.
async fn pushed_across(
    lab: &World,
    auction: &AuctionId,
    amount: u64,
    within: Duration,
) -> Vec<Violation> {
    let Some(mut subscriber) = open(
        lab,
        &lab.region(RegionId::Secondary).url(),
        lab.user_token("watcher-bare"),
    )
    .await
    else {
        return Vec::new();
    };
    let subscribe = ClientMessage::GetState {
        auction_id: auction.clone(),
        bid_ids: Vec::new(),
    };
    if !matches!(
        ask(&mut subscriber, &subscribe, within).await,
        Some(ServerMessage::State { .. })
    ) {
        return Vec::new();
    }
    if !racer_bid(lab, auction, "race-pushed", amount, within).await {
        return Vec::new();
    }
    // The push goes out once the bid's summary is replicated: milliseconds. The socket sends
    // nothing, so the lab's idle timeout (10 min AWS) ends the wait at the latest.
    let deadline = Instant::now() + within;
    while let Ok(Some(Ok(frame))) =
        tokio::time::timeout_at(deadline, futures::StreamExt::next(&mut subscriber)).await
    {
        let Ok(text) = frame.into_text() else {
            continue;
        };
        if let Ok(wsdr_protocol::ServerFrame::Message(ServerMessage::BidUpdate {
            high_bid: Some(high),
            ..
        })) = wsdr_protocol::parse_server_frame(&text)
        {
            if high.amount.get() == amount {
                return Vec::new();
            }
        }
    }
    missed("watcher-bare", amount)
}

/// A client following one auction on one Region's own endpoint, and every event it gave.
struct Watcher {
    client: wsdr_client::Client,
    events: tokio::sync::mpsc::UnboundedReceiver<wsdr_client::Event>,
    log: Vec<wsdr_client::Event>,
}

impl Watcher {
    /// With the users' heartbeat.
    fn start(lab: &World, auction: &AuctionId, region: RegionId) -> anyhow::Result<Self> {
        let scale = lab.config().scale;
        let index = region.index();
        let token = lab.user_token(&format!("watcher-{index}"))?;
        let (client, events) = wsdr_client::ClientBuilder::new(lab.region(region).url())
            .token_provider(std::sync::Arc::new(wsdr_client::StaticToken(token)))
            .subscribe(auction.clone())
            .heartbeat(
                scale.lab(AwsDuration::from_secs(30)),
                scale.lab(AwsDuration::from_secs(35)),
            )
            .network(lab.config().environment.network.clone())
            .seed(index as u64 + 7)
            .start();
        Ok(Self {
            client,
            events,
            log: Vec::new(),
        })
    }

    fn drain(&mut self) {
        while let Ok(event) = self.events.try_recv() {
            self.log.push(event);
        }
    }

    /// Wait until an event shows `amount` as the high bid.
    async fn shows(&mut self, amount: u64, deadline: Instant) -> bool {
        loop {
            let Ok(Some(event)) = tokio::time::timeout_at(deadline, self.events.recv()).await
            else {
                return false;
            };
            let high = match &event {
                wsdr_client::Event::StateRestored { auction, .. } => {
                    auction.high_bid.as_ref().map(|h| h.amount.get())
                }
                wsdr_client::Event::StateUpdated { high_bid, .. } => {
                    high_bid.as_ref().map(|h| h.amount.get())
                }
                _ => None,
            };
            self.log.push(event);
            if high == Some(amount) {
                return true;
            }
        }
    }

    /// Pushes (since the last state) that showed a lower high bid than the one shown before
    /// them: what a client that lets a late push replace its view shows.
    fn highs_lowered(&self) -> u32 {
        let mut shown: Option<u64> = None;
        let mut lowered = 0;
        for event in &self.log {
            match event {
                wsdr_client::Event::StateRestored { auction, .. } => {
                    shown = auction.high_bid.as_ref().map(|h| h.amount.get());
                }
                wsdr_client::Event::StateUpdated { high_bid, .. } => {
                    let high = high_bid.as_ref().map(|h| h.amount.get());
                    if high < shown {
                        lowered += 1;
                    }
                    shown = high;
                }
                _ => {}
            }
        }
        lowered
    }
}

/// Bid `amount` as `racer-0` in the first Region; if accepted, the watcher must show it
/// within a heartbeat interval (30 s AWS) plus room for a round trip and a busy machine.
async fn bid_reaches(
    lab: &World,
    auction: &AuctionId,
    watcher: &mut Watcher,
    bid_id: &str,
    amount: u64,
    within: Duration,
) -> Vec<Violation> {
    watcher.drain();
    let accepted = racer_bid(lab, auction, bid_id, amount, within).await;
    // The bound is a heartbeat (30 s AWS) and a round trip; at least 5 s of real time: at
    // time scale 300, 45 s AWS is 150 ms, which a loaded machine can miss (without the pong's
    // resync it is never shown: the partition holds until after the wait).
    let deadline = Instant::now()
        + lab
            .lab_time(crate::world::AwsDuration::from_secs(45))
            .max(Duration::from_secs(5));
    if !accepted || watcher.shows(amount, deadline).await {
        return Vec::new();
    }
    missed("watcher-1", amount)
}

/// One bid of `amount` as `racer-0` in the first Region, on its own connection: whether it
/// was accepted.
async fn racer_bid(
    lab: &World,
    auction: &AuctionId,
    bid_id: &str,
    amount: u64,
    within: Duration,
) -> bool {
    let (Ok(bid_id), Ok(amount)) = (BidId::new(bid_id), Amount::new(amount)) else {
        return false;
    };
    let Some(mut ws) = open(
        lab,
        &lab.region(RegionId::Primary).url(),
        lab.user_token("racer-0"),
    )
    .await
    else {
        return false;
    };
    matches!(
        bid(&mut ws, auction, bid_id, amount, within).await,
        Some(ServerMessage::BidResult {
            status: BidStatus::Accepted,
            ..
        })
    )
}

/// The split reuser on `auction` (eventual mode: on the strong table one ledger orders both
/// bids and the second is refused, so nothing is to be seen there). With replication cut
/// both ways, bidId `reused-0001` goes to the primary with one amount and to the secondary
/// with another; both Regions accept it (each checks its own copy only). After the heal and
/// the drain, `getState` naming the bidId in each Region must answer `stands`, no single
/// `amount`, and `copies` equal to the two copies by Region. Heals what it broke.
pub async fn split_reuser(lab: &World, auction: &AuctionId, within: Duration) -> Vec<Violation> {
    let mut found = Vec::new();
    if lab.cluster().is_some() {
        return found;
    }
    let sub = "split-reuser";
    let (Ok(bid_id), Ok(low), Ok(high), Some(user)) = (
        BidId::new("reused-0001"),
        Amount::new(500_000),
        Amount::new(700_000),
        subject(sub),
    ) else {
        return found;
    };
    let wrong = |region: RegionId| Violation::SettledWrong {
        user: user.clone(),
        region,
        bid_id: bid_id.clone(),
    };
    let mut sockets = Vec::new();
    for region in [RegionId::Primary, RegionId::Secondary] {
        match open(lab, &lab.region(region).url(), lab.user_token(sub)).await {
            Some(ws) => sockets.push((region, ws)),
            None => return found,
        }
    }
    lab.inject(crate::world::Fault::Partition);
    let mut accepted = Vec::new();
    for ((region, ws), amount) in sockets.iter_mut().zip([low, high]) {
        if let Some(ServerMessage::BidResult {
            status: BidStatus::Accepted,
            ..
        }) = bid(ws, auction, bid_id.clone(), amount, within).await
        {
            accepted.push((lab.region(*region).name.clone(), amount));
        }
    }
    lab.inject(crate::world::Fault::Heal);
    let drained = crate::world::clock::wait_for(within, || lab.in_flight().items == 0).await;
    if !drained || accepted.len() != 2 {
        // Nothing to judge (a Region busy or the lot refused): the split never happened.
        return found;
    }
    accepted.sort();
    for (region, ws) in &mut sockets {
        let message = ClientMessage::GetState {
            auction_id: auction.clone(),
            bid_ids: vec![bid_id.clone()],
        };
        let Some(ServerMessage::State { you, .. }) = ask(ws, &message, within).await else {
            found.push(wrong(*region));
            continue;
        };
        let right = you.settled.iter().any(|s| {
            let copies: Vec<(String, Amount)> = s
                .copies
                .iter()
                .map(|c| (c.region.clone(), c.amount))
                .collect();
            s.bid_id == bid_id && s.stands && s.amount.is_none() && copies == accepted
        });
        if !right {
            found.push(wrong(*region));
        }
    }
    found
}

/// A subject the attackers bid or watch as, as the checker names users (each is a literal
/// that is a valid `sub`: `None` only if one were not, and the attack then does not run).
fn subject(sub: &str) -> Option<wsdr_core::UserId> {
    wsdr_core::UserId::new(sub).ok()
}

/// A subscriber that was never shown `amount` by a push.
fn missed(user: &str, amount: u64) -> Vec<Violation> {
    let (Some(user), Ok(amount)) = (subject(user), Amount::new(amount)) else {
        return Vec::new();
    };
    vec![Violation::PushMissed {
        user,
        pushed: None,
        actual: Some(amount),
    }]
}
