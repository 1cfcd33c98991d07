//! A run's record, in the lab's own types: every bid a user made and every answer it got
//! (with the Region that gave it and the AWS instant), every state restore and lost session,
//! the users' final views and what each surviving Region holds at the end.
//!
//! The simulated users write it ([`crate::sim::users`]), the judge reads the Regions into it
//! ([`crate::sim::judge`]), and two pure functions read only it: the checker
//! ([`crate::sim::history`]: violations) and a drill's measure ([`crate::runs::measure`]:
//! its figures). Nothing in here knows the world.
//!
//! The JSON of these types is what the chaos reports' evidence and the history digests have
//! always been taken over (ids as strings, amounts as numbers, instants as milliseconds);
//! Regions are written by their role (`primary`, `secondary`).

use crate::world::region_id::RegionId;
use crate::world::scale::AwsInstant;
use serde::ser::SerializeTuple;
use serde::{Serialize, Serializer};
use std::collections::{BTreeMap, BTreeSet};
use wsdr_core::UserId;
use wsdr_protocol::{Amount, AuctionId, BidId};

/// How a Region answered one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    Accepted,
    Duplicate,
    Rejected,
    /// The Region could not tell whether it recorded the bid.
    Unknown,
    /// Queued while offline and dropped unsent by the client (too old): never sent anywhere.
    Expired,
    /// Strong mode: the Region could not reach its table's quorum and decided nothing
    /// (`redirect`); the client sends the bid to another Region.
    Redirected,
}

impl Answer {
    /// `accepted` or `duplicate`: the bid is recorded.
    pub fn acknowledges(self) -> bool {
        matches!(self, Answer::Accepted | Answer::Duplicate)
    }
}

/// One answer to a bid, as its client got it.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub at: AwsInstant,
    pub answer: Answer,
    /// The Region that answered (`None`: the client dropped the bid unsent).
    pub region: Option<RegionId>,
    /// The client had reconnected since the invoke: the answer may be to a replay,
    /// possibly in the other Region.
    pub reconnected: bool,
}

/// Written as the `[at_ms, answer, region, reconnected]` tuple the evidence always had.
impl Serialize for Reply {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut tuple = serializer.serialize_tuple(4)?;
        tuple.serialize_element(&self.at)?;
        tuple.serialize_element(&self.answer)?;
        tuple.serialize_element(&self.region)?;
        tuple.serialize_element(&self.reconnected)?;
        tuple.end()
    }
}

/// One bid as a client made it.
#[derive(Debug, Clone, Serialize)]
pub struct Op {
    pub user: UserId,
    /// The auction the bid was for.
    pub auction: AuctionId,
    pub bid_id: BidId,
    pub amount: Amount,
    #[serde(rename = "invoked_ms")]
    pub invoked: AwsInstant,
    pub answers: Vec<Reply>,
}

/// What the client can know of a bid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Some answer was `accepted` or `duplicate`: the bid must be in every Region.
    Ok,
    /// Exactly one answer, `rejected`, with no reconnect before it (never replayed), or
    /// dropped unsent: the bid must be in no Region.
    Fail,
    /// Anything else: either is fine.
    Unknown,
}

impl Op {
    pub fn outcome(&self) -> Outcome {
        if self.answers.iter().any(|a| a.answer.acknowledges()) {
            Outcome::Ok
        } else if self.answers.iter().any(|a| a.answer == Answer::Expired)
            || matches!(self.answers.as_slice(), [only] if only.answer == Answer::Rejected && !only.reconnected)
        {
            Outcome::Fail
        } else {
            Outcome::Unknown
        }
    }

    /// Its key: (bidder, bidId).
    pub fn key(&self) -> BidKey {
        (self.user.clone(), self.bid_id.clone())
    }

    /// Whether this is the operation behind `bid`.
    pub fn made(&self, bid: &BidRef) -> bool {
        self.user == bid.bidder && self.bid_id == bid.bid_id && self.amount == bid.amount
    }
}

/// The key of an operation and of a bid record: bidIds are scoped to their bidder, so a
/// hostile user reusing someone else's bidId makes a different operation and record.
pub type BidKey = (UserId, BidId);

/// One bid, named whole: who, which bidId, how much.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BidRef {
    pub bidder: UserId,
    pub bid_id: BidId,
    pub amount: Amount,
}

impl BidRef {
    pub fn key(&self) -> BidKey {
        (self.bidder.clone(), self.bid_id.clone())
    }
}

/// Written as the `[bidder, bidId, amount]` tuple the reports always had.
impl Serialize for BidRef {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut tuple = serializer.serialize_tuple(3)?;
        tuple.serialize_element(&self.bidder)?;
        tuple.serialize_element(&self.bid_id)?;
        tuple.serialize_element(&self.amount)?;
        tuple.end()
    }
}

/// One logical bid as a Region holds it: the copies of (bidder, bidId, amount) folded, with
/// the earliest copy's `at` (the rank uses it for equal amounts).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Record {
    pub amount: Amount,
    /// The earliest copy's stamp (the writing Region's clock, ms).
    pub at: u64,
}

/// One surviving Region's final state of the auction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FinalState {
    pub region: RegionId,
    /// (bidder, bid id) -> the logical bids recorded under it (one per amount).
    #[serde(serialize_with = "bids_as_pairs")]
    pub bids: BTreeMap<BidKey, Vec<Record>>,
    /// Bid copies in the store (a bid accepted in both Regions has two).
    pub copies: usize,
    /// The high bid the Region serves.
    pub high: Option<BidRef>,
    /// The bid count the Region serves (the sum of its summaries).
    pub bid_count: u64,
    /// The winner's own bidder, asking the Region (`getState` naming the winning bidId),
    /// finds it standing with its amount, in `you.settled` and in `you.bids`; `true` when
    /// there is no winner. A winner the Region shows but its bidder cannot read is a lie.
    pub winner_readable: bool,
}

/// A map keyed by a pair is written as a list of `[[bidder, bidId], records]` pairs.
fn bids_as_pairs<S: Serializer>(
    bids: &BTreeMap<BidKey, Vec<Record>>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(bids.iter())
}

impl FinalState {
    /// The winner the ledger's rule picks from the records alone: highest amount, then the
    /// earliest copy, then bidder, then bidId (docs/DATA_MODEL.md).
    pub fn expected_high(&self) -> Option<BidRef> {
        self.bids
            .iter()
            .flat_map(|((bidder, id), records)| records.iter().map(move |r| (bidder, id, r)))
            .max_by(|(b1, i1, r1), (b2, i2, r2)| {
                r1.amount
                    .cmp(&r2.amount)
                    .then_with(|| r2.at.cmp(&r1.at))
                    .then_with(|| b2.cmp(b1))
                    .then_with(|| i2.cmp(i1))
            })
            .map(|(bidder, id, r)| BidRef {
                bidder: bidder.clone(),
                bid_id: id.clone(),
                amount: r.amount,
            })
    }

    /// Whether the Region holds `key` with `amount`.
    pub fn holds(&self, key: &BidKey, amount: Amount) -> bool {
        self.bids
            .get(key)
            .is_some_and(|records| records.iter().any(|r| r.amount == amount))
    }

    /// The user's own bids as this Region must list them: (at, bidId, amount), newest first
    /// (then by bidId, descending), at most [`wsdr_protocol::limits::OWN_BIDS_MAX`].
    pub fn own_bids(&self, user: &UserId) -> Vec<(u64, BidId, Amount)> {
        let mut bids: Vec<(u64, BidId, Amount)> = self
            .bids
            .iter()
            .filter(|((bidder, _), _)| bidder == user)
            .flat_map(|((_, id), records)| {
                records.iter().map(move |r| (r.at, id.clone(), r.amount))
            })
            .collect();
        bids.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.cmp(&a.1)));
        bids.truncate(wsdr_protocol::limits::OWN_BIDS_MAX);
        bids
    }
}

/// One of a user's own bids as a state listed it: (bidId, amount).
pub type OwnBid = (BidId, Amount);

/// What a user saw after the final resync.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UserEnd {
    pub user: UserId,
    /// The auction the user follows.
    pub auction: AuctionId,
    pub connected: bool,
    /// The high bid amount in the state the user was last served.
    pub high_seen: Option<Amount>,
    /// The high bid its pushes (and its own reconnects' resyncs) had brought it just before
    /// the forced final resync; `None` if it was not connected with a view then.
    pub high_before_resync: Option<Option<Amount>>,
    /// Pushes its client reported that were strictly older than the view it already had.
    pub views_backwards: u32,
    /// Pushes its client reported with a lower high bid than the one it showed before
    /// (with no state read between): a late push replaced a newer view.
    pub highs_lowered: u32,
    /// The Region that served its final state, and the user's own bids in that state
    /// (`you.bids`, newest first) and `you.lastBid`.
    pub served_by: Option<RegionId>,
    pub own_bids: Vec<OwnBid>,
    pub last_bid: Option<OwnBid>,
}

/// A state restore: a `getState` answer after a (re)connect or a resync.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Restore {
    pub at: AwsInstant,
    pub region: RegionId,
}

/// One user's sessions over a run, as its app lived them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct UserTrace {
    /// Every state restore, in order.
    pub restores: Vec<Restore>,
    /// Every lost session (a closed app counts), in order.
    pub disconnects: Vec<AwsInstant>,
    /// Every connection that ended, whether or not it had restored a state (a connection
    /// that a `no_quorum` or a `redirect` ended before any state counts here, not above).
    pub connections_ended: Vec<AwsInstant>,
    /// Sessions that ended for a reason the user would see as an error: anything but a
    /// server-directed move, a planned return, or the user closing the app.
    pub unplanned_disconnects: u32,
    /// Endpoint changes made by client-assisted failover.
    pub moves: usize,
    /// Times the app was closed with a bid unanswered.
    pub closed_mid_bid: u32,
}

impl UserTrace {
    /// The first restore in `region` at or after `after`.
    pub fn first_restore(&self, region: RegionId, after: AwsInstant) -> Option<AwsInstant> {
        self.restores
            .iter()
            .find(|r| r.at >= after && r.region == region)
            .map(|r| r.at)
    }

    /// Each span the user was served by a Region: from a restore to its next disconnect or
    /// restore (`None`: still served at the end).
    pub fn served(&self) -> impl Iterator<Item = (RegionId, AwsInstant, Option<AwsInstant>)> + '_ {
        self.restores.iter().enumerate().map(|(i, restore)| {
            let next_restore = self.restores.get(i + 1).map(|r| r.at);
            let disconnect = self.disconnects.iter().copied().find(|d| *d >= restore.at);
            let end = match (disconnect, next_restore) {
                (Some(d), Some(r)) => Some(d.min(r)),
                (d, r) => d.or(r),
            };
            (restore.region, restore.at, end)
        })
    }
}

/// Bid copies a Region that never came back took with it: the only losses the checker
/// accepts (docs/DATA_MODEL.md, "what no acknowledged bid is lost means").
pub type Lost = BTreeSet<BidRef>;

/// A run's record, ready to be judged.
#[derive(Debug, Clone)]
pub struct RunTrace {
    /// Every bid every user made, with its answers.
    pub ops: Vec<Op>,
    /// Each user's sessions, in the users' order.
    pub users: Vec<UserTrace>,
    /// Each user's final view, in the users' order.
    pub ends: Vec<UserEnd>,
    /// The surviving Regions' final states (read after the users' final views).
    pub regions: Vec<FinalState>,
    /// Replication drained and the Regions equal at the end.
    pub converged: bool,
    /// Bid copies lost with Regions that never came back.
    pub lost: Lost,
    /// Summary versions lost with those Regions (each may leave the survivor counting fewer
    /// bids than it holds copies).
    pub lost_summaries: usize,
}

impl RunTrace {
    /// Acknowledged operations whose bid is gone from every surviving Region because its only
    /// copies were lost with a Region that never came back: the measured RPO, in bids.
    pub fn lost_acknowledged(&self) -> usize {
        self.ops
            .iter()
            .filter(|op| op.outcome() == Outcome::Ok)
            .filter(|op| {
                self.lost.contains(&BidRef {
                    bidder: op.user.clone(),
                    bid_id: op.bid_id.clone(),
                    amount: op.amount,
                })
            })
            .filter(|op| {
                self.regions
                    .iter()
                    .all(|state| !state.holds(&op.key(), op.amount))
            })
            .count()
    }

    /// Operations by their outcome.
    pub fn count(&self, outcome: Outcome) -> usize {
        self.ops.iter().filter(|o| o.outcome() == outcome).count()
    }
}
