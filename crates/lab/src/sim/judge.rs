//! The end of every run that bids on one auction (drills and chaos): stop bidding, let
//! answers arrive and replication drain, take every user's final view, read what the Regions
//! hold, and run the checker. Everything that reads the world is here; the checker
//! (crate::sim::history) only judges what it is given.

use crate::sim::history::{check, Excused, Violation};
use crate::sim::topic_rules::{self, op_key, RegionCopies, TopicTrace, Write, WriteReply};
use crate::sim::trace::Op;
use crate::sim::trace::{BidKey, BidRef, FinalState, Lost, Record, RunTrace};
use crate::sim::users::Population;
use crate::world::scale::AwsDuration;
use crate::world::World;
use std::collections::BTreeMap;
use std::time::Duration;
use wsdr_protocol::{bid_digest, AuctionId, OpId, OpView, Topic};

/// What a run ended with (its trace), and what the checker made of it.
#[derive(Debug)]
pub struct Judgement {
    pub trace: RunTrace,
    /// The auction's bids as the kit's ops: their writes and every surviving Region's copies.
    pub kit: TopicTrace,
    /// The kit's rules' violations over `kit`, then the auction's own over `trace`.
    pub violations: Vec<Violation>,
    /// What either forgave, by name (never dropped in silence).
    pub excused: Excused,
}

/// End the run and judge it. `drain` (lab time) lets outstanding answers arrive before
/// replication is drained; pushes get a minute (AWS) to bring every connected user the
/// converged high bid before the forced final resync, which gets five.
pub async fn judge(
    lab: &World,
    users: &Population,
    auction: &AuctionId,
    drain: Duration,
) -> anyhow::Result<Judgement> {
    users.set_bidding(false);
    tokio::time::sleep(drain).await;
    let converged = settle(lab).await;
    // A bid still in flight when bidding stopped can commit after the drain: strong mode's
    // decisions take several cross-Region requests and retry pauses (up to 128 ms AWS each,
    // divided by the time scale like every AWS duration). Wait for the stores to stay
    // unchanged for 400 ms of lab time (longer than a pause at any scale and, in the
    // real-time lab, than the machine's own hiccups; bounded) before taking the final views.
    let mut regions = final_states(lab, auction).await?;
    for _ in 0..25 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        let again = final_states(lab, auction).await?;
        if again == regions {
            break;
        }
        regions = again;
    }
    let converged_high = regions
        .first()
        .and_then(|r| r.high.as_ref().map(|h| h.amount));
    let mut ends = users
        .final_views(
            |_| converged_high,
            lab.lab_time(AwsDuration::from_secs(60)),
            lab.lab_time(AwsDuration::from_secs(300)),
        )
        .await;
    // Read again: a late replay could have landed during the final views.
    let regions = final_states(lab, auction).await?;
    let kit = kit_trace(lab, &users.ops(), auction).await?;
    // A bid still in flight when bidding stopped (strong mode's decisions are slower) may
    // commit after the push window was judged against the first read: pushes then had no
    // target to reach. The forced resync's views are still checked against the final state.
    let final_high = regions
        .first()
        .and_then(|r| r.high.as_ref().map(|h| h.amount));
    if final_high != converged_high {
        for end in &mut ends {
            end.high_before_resync = None;
        }
    }
    let trace = RunTrace {
        ops: users.ops(),
        users: users.records().into_iter().map(|r| r.trace).collect(),
        ends,
        regions,
        converged,
        // A Region lost for good is not checked: what it took with it is the RPO, and the
        // checker is told exactly which bid copies those are.
        lost: lost_with_regions(lab),
        lost_summaries: lost_summaries(lab),
    };
    users.close().await;
    let (violations, excused) = check_bids(&trace, &kit);
    Ok(Judgement {
        trace,
        kit,
        violations,
        excused,
    })
}

/// The kit's rules over the bids as ops (those over the copies: the auction's clients do not
/// keep a rejection's reason, which `retryable_rejected` judges from the users' side), then
/// the auction's own; what both forgave, counted together.
pub fn check_bids(trace: &RunTrace, kit: &TopicTrace) -> (Vec<Violation>, Excused) {
    let (mut violations, mut excused) = topic_rules::check_copies(kit);
    let (own, own_excused) = check(trace);
    violations.extend(own);
    for (name, n) in own_excused {
        crate::sim::history::excuse(&mut excused, name, n);
    }
    (violations, excused)
}

/// An auction's bids as the kit sees them: `ops` (the auction's, or others', skipped) as
/// writes, every surviving Region's copies of its topic, and those lost with Regions that
/// never came back.
pub async fn kit_trace(lab: &World, ops: &[Op], auction: &AuctionId) -> anyhow::Result<TopicTrace> {
    let topic = wsdr_auction::store::topic(auction);
    Ok(TopicTrace {
        writes: ops
            .iter()
            .filter(|op| &op.auction == auction)
            .map(write_of)
            .collect(),
        regions: region_copies(lab, &topic).await?,
        lost: lost_copies(lab, &topic),
        strong: lab.cluster().is_some(),
    })
}

/// A bid as the kit's op: its bidder is its author, its bid id its op id, its payload's
/// digest the amount's.
pub(crate) fn write_of(op: &Op) -> Write {
    Write {
        author: op.user.clone(),
        op_id: OpId::from(&op.bid_id),
        digest: bid_digest(op.amount),
        invoked: op.invoked,
        answers: op
            .answers
            .iter()
            .map(|reply| WriteReply {
                at: reply.at,
                answer: reply.answer,
                reason: None,
                region: reply.region,
                reconnected: reply.reconnected,
            })
            .collect(),
    }
}

/// Let the lab settle before it is judged: replication drained and the Regions equal.
/// A client that reconnects late (a slow machine), or resends a bid it got no answer for, may
/// still write after the first drain, so this takes up to four bounded rounds of drain, five
/// AWS seconds' rest, compare. Whether the Regions converged.
pub async fn settle(lab: &crate::world::World) -> bool {
    for _ in 0..4 {
        let drained = lab
            .wait_for(AwsDuration::from_secs(600), || lab.in_flight().items == 0)
            .await;
        lab.sleep(AwsDuration::from_secs(5)).await;
        if drained && lab.converged().await {
            return true;
        }
    }
    false
}

/// What the lab's Regions hold for `auction` at the end of a run: one [`FinalState`] per
/// Region still alive (a Region lost for good is not read: what it took is in [`lost_with_regions`]).
pub async fn final_states(
    lab: &crate::world::World,
    auction: &wsdr_protocol::AuctionId,
) -> anyhow::Result<Vec<FinalState>> {
    let gone = lab.gone();
    let mut states = Vec::new();
    for (id, region) in lab.regions() {
        if gone.contains(&id) {
            continue;
        }
        // What the Region holds, as it serves it: its copies, and the bids its summaries
        // carry whole before (or without) their copy (wsdr_auction::held_bids).
        let summaries = wsdr_auction::StateStore::summaries(region.store.as_ref(), auction).await?;
        let copies = wsdr_auction::held_bids(
            region.store.all_bids(auction).await?,
            summaries.iter().filter_map(|s| s.high.as_ref()),
        );
        let mut bids: BTreeMap<BidKey, Vec<Record>> = BTreeMap::new();
        for copy in &copies {
            let records = bids
                .entry((copy.bidder.clone(), copy.bid_id.clone()))
                .or_default();
            match records.iter_mut().find(|r| r.amount == copy.amount) {
                Some(record) => record.at = record.at.min(copy.at),
                None => records.push(Record {
                    amount: copy.amount,
                    at: copy.at,
                }),
            }
        }
        for records in bids.values_mut() {
            records.sort_by_key(|r| r.amount);
        }
        let snapshot = wsdr_auction::AuctionSnapshot::merge(&summaries);
        let winner_readable = match &snapshot.high_bid {
            Some(high) => winner_reads_as_standing(region.service(), auction, high).await?,
            None => true,
        };
        states.push(FinalState {
            region: id,
            bids,
            copies: copies.len(),
            high: snapshot.high_bid.as_ref().map(|b| BidRef {
                bidder: b.bidder.clone(),
                bid_id: b.bid_id.clone(),
                amount: b.amount,
            }),
            bid_count: snapshot.bid_count,
            winner_readable,
        });
    }
    Ok(states)
}

/// Ask `service` as the winner's bidder, naming the winning bidId: the bid must stand with
/// its amount in `you.settled` and be listed in `you.bids`.
async fn winner_reads_as_standing(
    service: &wsdr_auction::AuctionService,
    auction: &wsdr_protocol::AuctionId,
    high: &wsdr_auction::BidRecord,
) -> anyhow::Result<bool> {
    let judge = wsdr_core::ConnectionId::new("judge-final-read")?;
    let answer = service
        .get_state_settling(
            &judge,
            &high.bidder,
            auction,
            std::slice::from_ref(&high.bid_id),
        )
        .await?;
    Ok(match answer {
        wsdr_protocol::ServerMessage::State { you, .. } => {
            you.settled
                .iter()
                .any(|s| s.bid_id == high.bid_id && s.stands_with(high.amount))
                && you
                    .bids
                    .iter()
                    .any(|b| b.bid_id == high.bid_id && b.amount == high.amount)
        }
        _ => false,
    })
}

/// The bid copies Regions that never came back took with them: the only losses the checker
/// accepts.
pub fn lost_with_regions(lab: &crate::world::World) -> Lost {
    lab.lost_writes()
        .into_iter()
        .filter_map(|change| match change.item {
            wsdr_core::items::Item::Op { op, .. } => {
                let bid = wsdr_auction::store::bid_of(&op).ok()?;
                Some(BidRef {
                    bidder: bid.bidder,
                    bid_id: bid.bid_id,
                    amount: bid.amount,
                })
            }
            _ => None,
        })
        .collect()
}

/// Summary versions Regions that never came back took with them. Nothing orders two items
/// (Global Tables replicates each on its own), so a lost Region's copy may have reached the
/// survivor while the summary version that counted it did not: the survivor then counts up
/// to this many fewer bids than it holds copies.
pub fn lost_summaries(lab: &crate::world::World) -> usize {
    lab.lost_writes()
        .iter()
        .filter(|change| matches!(change.item, wsdr_core::items::Item::Summary { .. }))
        .count()
}

/// Every copy each surviving Region holds of `topic`, as the wire shows it (any app's).
pub async fn region_copies(lab: &World, topic: &Topic) -> anyhow::Result<Vec<RegionCopies>> {
    let gone = lab.gone();
    let strong = lab.cluster().is_some();
    let mut regions = Vec::new();
    for (id, region) in lab.regions() {
        if gone.contains(&id) {
            continue;
        }
        let mut copies: Vec<OpView> = region
            .store
            .all_ops(topic)
            .await?
            .iter()
            .map(|op| wire_copy(op, strong))
            .collect();
        copies
            .sort_by(|a, b| (&a.log, a.position, op_key(a)).cmp(&(&b.log, b.position, op_key(b))));
        regions.push(RegionCopies { region: id, copies });
    }
    Ok(regions)
}

/// A stored copy as the wire shows it: in its Region's log, or strong mode's global one.
fn wire_copy(op: &wsdr_core::StoredOp, strong: bool) -> OpView {
    OpView {
        author: op.author.as_str().to_owned(),
        op_id: op.op_id.clone(),
        region: op.region.clone(),
        position: op.position,
        log: if strong {
            wsdr_core::model::LEDGER.to_owned()
        } else {
            op.region.clone()
        },
        at: op.at,
        digest: op.digest,
        op: op.op.clone(),
    }
}

/// The copies of `topic` Regions that never came back took with them (never replicated), as
/// the wire shows them.
pub fn lost_copies(lab: &World, topic: &Topic) -> Vec<OpView> {
    let strong = lab.cluster().is_some();
    lab.lost_writes()
        .into_iter()
        .filter_map(|change| match change.item {
            wsdr_core::items::Item::Op { op, .. } if &op.topic == topic => {
                Some(wire_copy(&op, strong))
            }
            _ => None,
        })
        .collect()
}
