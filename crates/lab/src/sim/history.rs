//! The history checker: a run's trace ([`crate::sim::trace`]) in, broken guarantees out.
//! Every operation as it was invoked and answered is checked against the surviving Regions'
//! final states and the users' last views; each rule is named by the [`Violation`] it
//! reports, and each case it forgives by the [`Excuse`] it counts (docs/RELIABILITY.md, the
//! guarantee table).
//!
//! The auction's own rules live here: the winner each Region serves and its bid count, what
//! each bidder is shown (high bid, own bids, last bid, settlement), and strong mode's order.
//! What any app's ops must keep (an acknowledged op held by every surviving Region, every copy
//! written by its author, a failed one held nowhere, the Regions' copies equal, strong mode's
//! quorum) is the kit's, judged over the same bids as ops ([`crate::sim::topic_rules`]); this
//! module keeps the violation kinds and excuses both share. An operation's outcome is what
//! the client can know ([`Outcome`]).

use crate::sim::trace::{BidKey, BidRef, FinalState, Op, Outcome, OwnBid, RunTrace, UserEnd};
use crate::world::region_id::RegionId;
use crate::world::scale::AwsInstant;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use wsdr_core::UserId;
use wsdr_protocol::{Amount, BidId, OpId};

pub use crate::sim::trace::Answer;

/// A broken guarantee.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Violation {
    /// Strong mode: in the table's own order, bids taken at or below a bid taken before
    /// them (one Region accepted below what another had already acknowledged).
    AcceptedBelowEarlierBid {
        count: usize,
    },
    /// The high bid the Region serves is not the one the ledger's rule picks from its
    /// records (amount, then earliest copy, then bidder, then bidId): a wrong amount, or the
    /// wrong winner among equal amounts.
    HighBidWrong {
        region: RegionId,
        expected: Option<BidRef>,
        actual: Option<BidRef>,
    },
    /// The Regions serve different high bids after convergence.
    WinnersDiffer,
    /// A Region serves a winner that its bidder's `getState` does not find standing.
    WinnerUnreadable {
        region: RegionId,
    },
    /// A planned evacuation ended with connections never told to move (its push path was
    /// throttled, not gone: telling again until the deadline reaches them).
    EvacuationIncomplete {
        untold: usize,
        connections: usize,
    },
    /// A recorded bid above every acknowledged one that no unanswered operation explains.
    HighAboveAcknowledged {
        region: RegionId,
        amount: Amount,
    },
    /// The summaries' bid count is not the number of bid copies in the store.
    BidCountWrong {
        region: RegionId,
        count: u64,
        copies: usize,
    },
    NotConverged,
    /// One fail-over order moved everyone through the global name more than once (its
    /// deliveries each ran it).
    OrderRanTwice {
        order: String,
        moves: u64,
    },
    UserNotConnected {
        user: UserId,
    },
    UserStale {
        user: UserId,
        seen: Option<Amount>,
        actual: Option<Amount>,
    },
    /// A connected subscriber was never brought the final high bid by a push: only the forced
    /// final resync showed it (a replicated bid not pushed, a broadcast lost).
    PushMissed {
        user: UserId,
        pushed: Option<Amount>,
        actual: Option<Amount>,
    },
    /// A client reported a view older than one it had already reported.
    ViewWentBackwards {
        user: UserId,
        times: u32,
    },
    /// The user's own bids (`you.bids`) in its final state are not the ones the serving
    /// Region holds for it: some missing, or someone else's (bidId, amount) among them.
    OwnBidsWrong {
        user: UserId,
        region: RegionId,
        missing: Vec<BidId>,
        unexplained: Vec<BidId>,
    },
    /// A canary-issuer token naming a user's subject was admitted by a Region's authorizer
    /// (docs/AUTH.md: canary tokens are `canary:*` principals only).
    ImpostorAdmitted {
        region: RegionId,
        sub: String,
    },
    /// A probe identity read a user's bids, or had a bid accepted (`what` says which).
    ProbeActedAsUser {
        region: RegionId,
        what: String,
    },
    /// A bid answered `rejected` for a reason that is not final (a retryable failure): the
    /// clients drop a rejected bid, so it may have been one that would have won.
    RetryableRejected {
        bidder: UserId,
        bid_id: BidId,
        region: RegionId,
        reason: String,
    },
    /// A client showed a lower high bid after a push than before it.
    HighWentDown {
        user: UserId,
        times: u32,
    },
    /// Strong mode: a Region answered `redirect` ("decided nothing") for a bid that its own
    /// head write accepted.
    RedirectedButDecided {
        bidder: UserId,
        bid_id: BidId,
        region: RegionId,
    },
    /// `you.settled` in a `getState` naming a bid is not what the Region holds for it.
    SettledWrong {
        user: UserId,
        region: RegionId,
        bid_id: BidId,
    },
    /// `you.lastBid` is not the user's latest bid in the serving Region's records.
    LastBidWrong {
        user: UserId,
        region: RegionId,
        expected: Option<OwnBid>,
        actual: Option<OwnBid>,
    },
    // The kit's rules over any app's ops (crate::sim::topic_rules).
    /// An acknowledged op is not held with its payload by a surviving Region.
    AcknowledgedOpMissing {
        author: UserId,
        op_id: OpId,
        region: RegionId,
    },
    /// A Region holds a copy no write of its author made (another's, invented or altered).
    OpNotWritten {
        author: String,
        op_id: OpId,
        region: RegionId,
    },
    /// A Region holds a write that failed for sure (rejected by its only answer, or expired
    /// unsent): a rejection that turned out false.
    FailedOpPresent {
        author: String,
        op_id: OpId,
        region: RegionId,
    },
    /// A write rejected for a reason sending it again could change, or `op_id_reused` for
    /// an op id its author never reused.
    OpRejectedWrongly {
        author: UserId,
        op_id: OpId,
        reason: String,
    },
    /// The surviving Regions' copies of a topic differ by this many copies.
    CopiesDiffer {
        region: RegionId,
        copies: usize,
    },
    /// Two copies at one position of one log.
    PositionTakenTwice {
        region: RegionId,
        log: String,
        position: u64,
    },
    /// A position of a log with no copy, below one held, not lost with a Region.
    LogGap {
        region: RegionId,
        log: String,
        position: u64,
    },
    /// Strong mode: a copy outside the one global log.
    OpOutsideGlobalLog {
        author: String,
        op_id: OpId,
        region: RegionId,
    },
    /// Strong mode: an op acknowledged by a Region without quorum for the whole write.
    OpAcknowledgedWithoutQuorum {
        author: UserId,
        op_id: OpId,
        region: RegionId,
    },
    // A chat room's own rules (crate::sim::chat).
    /// After the final resync a member lacks copies its Region holds in a log it reads, at
    /// or past the first it holds, or the log's newest.
    MemberLogIncomplete {
        user: UserId,
        region: RegionId,
        log: String,
        missing: usize,
    },
    /// A member shows a copy no surviving Region holds (and none lost with a Region).
    MemberShowsUnheldCopy {
        user: UserId,
        author: String,
        op_id: OpId,
    },
    /// A member shows the messages it holds whole in another order than its Region.
    MemberOrderDiffers {
        user: UserId,
        region: RegionId,
    },
    /// A member shows one message twice.
    MemberShowsTwice {
        user: UserId,
        author: String,
        op_id: OpId,
    },
}

impl Violation {
    /// The bid the violation is about, if any (to print the minimal history): the auction's
    /// own rules name bids, the kit's name ops, which are the auction's bids by their bidder
    /// and bid id.
    pub fn bid(&self) -> Option<BidKey> {
        match self {
            Violation::RetryableRejected { bidder, bid_id, .. }
            | Violation::RedirectedButDecided { bidder, bid_id, .. } => {
                Some((bidder.clone(), bid_id.clone()))
            }
            Violation::AcknowledgedOpMissing { author, op_id, .. }
            | Violation::OpAcknowledgedWithoutQuorum { author, op_id, .. } => {
                Some((author.clone(), BidId::new(op_id.as_str()).ok()?))
            }
            Violation::OpNotWritten { author, op_id, .. }
            | Violation::FailedOpPresent { author, op_id, .. } => Some((
                UserId::new(author.as_str()).ok()?,
                BidId::new(op_id.as_str()).ok()?,
            )),
            _ => None,
        }
    }
}

/// Strong mode: `redirect` answers from a Region whose own head write had accepted that very
/// bid by then (`accepted_by`: (bidder, bidId, accepting Region, when it committed) of every
/// head write the table took). A redirect says this request decided nothing; a write that may have
/// committed is `unknown`. A redirect that answers a later send, on a connection opened after
/// the commit (the commit's answer lost with its connection, the bid sent again to a Region
/// that has since lost its quorum), is what PROTOCOL.md describes ("`duplicate` if the first
/// attempt did reach the quorum after all"): counted as
/// [`Excuse::RedirectedReplayOfADecidedBid`], never dropped.
pub fn redirected_but_decided(
    ops: &[Op],
    accepted_by: &[(UserId, BidId, RegionId, AwsInstant)],
    connections_ended: &BTreeMap<UserId, Vec<AwsInstant>>,
    excused: &mut Excused,
) -> Vec<Violation> {
    let committed: BTreeMap<(&UserId, &BidId, RegionId), AwsInstant> = accepted_by
        .iter()
        .map(|(user, bid, region, at)| ((user, bid, *region), *at))
        .collect();
    let mut found = Vec::new();
    for op in ops {
        for reply in &op.answers {
            let Some(region) = reply.region else {
                continue;
            };
            if reply.answer != Answer::Redirected {
                continue;
            }
            let Some(&at) = committed.get(&(&op.user, &op.bid_id, region)) else {
                continue;
            };
            // Decided after the redirect (by a later send, once the Region had its quorum
            // back): the redirect was true when it was given.
            if at > reply.at {
                continue;
            }
            let connection_ended_since = connections_ended
                .get(&op.user)
                // Strictly before the redirect arrived: the session the redirect itself ends
                // (the clients leave at once) ends at the redirect's own instant.
                .is_some_and(|ds| ds.iter().any(|d| *d >= at && *d < reply.at));
            if connection_ended_since {
                excuse(excused, Excuse::RedirectedReplayOfADecidedBid, 1);
            } else {
                found.push(Violation::RedirectedButDecided {
                    bidder: op.user.clone(),
                    bid_id: op.bid_id.clone(),
                    region,
                });
            }
        }
    }
    found
}

/// Bids taken at or below an earlier one, in the order a strongly consistent table took
/// them ((amount, Region) each): in strong mode each accepted bid must beat every earlier one.
pub fn below_an_earlier_bid(in_order: &[(Amount, RegionId)]) -> usize {
    let mut best: Option<Amount> = None;
    let mut below = 0;
    for (amount, _) in in_order {
        if best.is_some_and(|b| *amount <= b) {
            below += 1;
        }
        best = Some(best.map_or(*amount, |b| b.max(*amount)));
    }
    below
}

/// A case the checker forgives, by name: each is an exception the docs state word for word
/// (docs/RELIABILITY.md, the guarantee table), and each forgiven event is counted and printed
/// in the campaign's summary, never dropped in silence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Excuse {
    /// An acknowledged bid missing from a surviving Region because its only copies were
    /// lost with a Region that never came back (the RPO), counted once per surviving Region.
    LostWithRegion,
    /// A surviving Region counts more bids than it holds copies: a lost Region's summary
    /// arrived, copies it counted never did (counted once per Region, by the difference).
    CountedCopiesLostWithRegion,
    /// A surviving Region counts fewer bids than it holds copies: copies arrived, the
    /// summary versions that counted them were lost with their Region (by the difference).
    CopiesWhoseSummaryWasLost,
    /// A surviving Region's winner is below a copy it holds: that copy arrived, the summary
    /// version naming it was lost with its Region (once per Region).
    HighCopyWhoseSummaryWasLost,
    /// Strong mode: a Region without quorum answered `redirect` to a bid sent again on a
    /// connection opened after its own head write had accepted that bid (the first
    /// attempt's answer lost with its connection); the other Region answers `duplicate`.
    RedirectedReplayOfADecidedBid,
    /// A position of a log missing from a surviving Region because its copy was lost with a
    /// Region that never came back (topics: the kit's gapless-log rule).
    PositionLostWithRegion,
    /// A member shows a copy no surviving Region holds, lost with a Region that never came
    /// back after the member got it (a chat room's view rule): kept until the app reloads.
    ShownCopyLostWithRegion,
}

impl Excuse {
    /// Every excuse, in the docs' order.
    pub const ALL: [Excuse; 7] = [
        Excuse::LostWithRegion,
        Excuse::CountedCopiesLostWithRegion,
        Excuse::CopiesWhoseSummaryWasLost,
        Excuse::HighCopyWhoseSummaryWasLost,
        Excuse::RedirectedReplayOfADecidedBid,
        Excuse::PositionLostWithRegion,
        Excuse::ShownCopyLostWithRegion,
    ];

    /// The name the summary and the reports count it under.
    pub fn name(self) -> &'static str {
        match self {
            Excuse::LostWithRegion => "lost_with_region",
            Excuse::CountedCopiesLostWithRegion => "counted_copies_lost_with_region",
            Excuse::CopiesWhoseSummaryWasLost => "copies_whose_summary_was_lost",
            Excuse::HighCopyWhoseSummaryWasLost => "high_copy_whose_summary_was_lost",
            Excuse::RedirectedReplayOfADecidedBid => "redirected_replay_of_a_decided_bid",
            Excuse::PositionLostWithRegion => "position_lost_with_region",
            Excuse::ShownCopyLostWithRegion => "shown_copy_lost_with_region",
        }
    }
}

/// Forgiven events by excuse.
pub type Excused = BTreeMap<Excuse, usize>;

/// Count `n` events under `excuse` (nothing when `n` is 0).
pub fn excuse(excused: &mut Excused, excuse: Excuse, n: usize) {
    if n > 0 {
        *excused.entry(excuse).or_default() += n;
    }
}

/// The auction's own rules over a run's trace: the surviving Regions' final states and the
/// users' last views against every operation (the kit's rules over the same bids as ops are
/// [`crate::sim::topic_rules::check_copies`]). `trace.lost` holds the bid copies a Region lost
/// for good took with it (empty unless a `never-returns` fault struck): a count may lack only
/// those. What the checker forgave is counted by name.
pub fn check(trace: &RunTrace) -> (Vec<Violation>, Excused) {
    let mut excused = Excused::new();
    let mut violations = Vec::new();
    let mut by_key: BTreeMap<BidKey, Vec<&Op>> = BTreeMap::new();
    for op in &trace.ops {
        by_key.entry(op.key()).or_default().push(op);
    }
    let max_acknowledged = trace
        .ops
        .iter()
        .filter(|op| op.outcome() == Outcome::Ok)
        .map(|op| op.amount)
        .max();
    for state in &trace.regions {
        let region = state.region;
        // The winner is a function of the bids the Region holds, with no excuse: a summary
        // that arrived before its copy carries its high bid whole (wsdr_auction::held_bids).
        let expected = state.expected_high();
        if !state.winner_readable {
            violations.push(Violation::WinnerUnreadable { region });
        }
        if state.high != expected {
            violations.push(Violation::HighBidWrong {
                region,
                expected,
                actual: state.high.clone(),
            });
        }
        if let (Some(high), Some(acked)) = (state.high.as_ref(), max_acknowledged) {
            // Only an operation whose answer the client never got may stand above every
            // acknowledged bid.
            let explained = state.bids.iter().any(|(key, records)| {
                records.iter().any(|r| r.amount == high.amount)
                    && by_key.get(key).is_some_and(|ops| {
                        ops.iter()
                            .any(|op| op.amount == high.amount && op.outcome() == Outcome::Unknown)
                    })
            });
            if high.amount > acked && !explained {
                violations.push(Violation::HighAboveAcknowledged {
                    region,
                    amount: high.amount,
                });
            }
        }
        let copies = state.copies as u64;
        let count_ok = if trace.lost.is_empty() {
            state.bid_count == copies
        } else {
            // Counted by a lost Region's summary, copies never delivered: at most the lost ones.
            let within = (copies..=copies + trace.lost.len() as u64).contains(&state.bid_count);
            if within {
                excuse(
                    &mut excused,
                    Excuse::CountedCopiesLostWithRegion,
                    (state.bid_count - copies) as usize,
                );
            }
            within
        };
        if !count_ok {
            violations.push(Violation::BidCountWrong {
                region,
                count: state.bid_count,
                copies: state.copies,
            });
        }
    }
    let regions = &trace.regions;
    // Equal copies in every Region are the kit's rule (`copies_differ`); this one is the
    // lab's settling (replication drained, the Regions equal) within its bound.
    if !trace.converged {
        violations.push(Violation::NotConverged);
    }
    if regions.windows(2).any(|w| w[0].high != w[1].high) {
        violations.push(Violation::WinnersDiffer);
    }
    let actual = regions
        .first()
        .and_then(|r| r.high.as_ref().map(|h| h.amount));
    for user in &trace.ends {
        check_user(user, actual, regions, &mut violations);
    }
    excuse_lost_summaries(&mut violations, trace.lost_summaries, &mut excused);
    (violations, excused)
}

/// One user's final view against the converged high bid (`actual`) and its serving Region.
fn check_user(
    user: &UserEnd,
    actual: Option<Amount>,
    regions: &[FinalState],
    violations: &mut Vec<Violation>,
) {
    let who = || user.user.clone();
    if user.views_backwards > 0 {
        violations.push(Violation::ViewWentBackwards {
            user: who(),
            times: user.views_backwards,
        });
    }
    if user.highs_lowered > 0 {
        violations.push(Violation::HighWentDown {
            user: who(),
            times: user.highs_lowered,
        });
    }
    if let Some(pushed) = user.high_before_resync {
        if pushed != actual {
            violations.push(Violation::PushMissed {
                user: who(),
                pushed,
                actual,
            });
        }
    }
    if !user.connected {
        violations.push(Violation::UserNotConnected { user: who() });
        return;
    }
    if user.high_seen != actual {
        violations.push(Violation::UserStale {
            user: who(),
            seen: user.high_seen,
            actual,
        });
    }
    check_own_bids(user, regions, violations);
}

/// `you.bids` and `you.lastBid` of the user's final state against the serving Region's
/// records (a Region lost for good served nobody's final state).
pub fn check_own_bids(user: &UserEnd, regions: &[FinalState], violations: &mut Vec<Violation>) {
    let Some(state) = user
        .served_by
        .and_then(|region| regions.iter().find(|r| r.region == region))
    else {
        return;
    };
    let expected = state.own_bids(&user.user);
    let held: BTreeSet<(&BidId, Amount)> = expected.iter().map(|(_, id, a)| (id, *a)).collect();
    let listed: BTreeSet<(&BidId, Amount)> = user.own_bids.iter().map(|(id, a)| (id, *a)).collect();
    if held != listed {
        violations.push(Violation::OwnBidsWrong {
            user: user.user.clone(),
            region: state.region,
            missing: held
                .difference(&listed)
                .map(|(id, _)| (*id).clone())
                .collect(),
            unexplained: listed
                .difference(&held)
                .map(|(id, _)| (*id).clone())
                .collect(),
        });
    }
    // Equal `at` and bidId (one bidId, two amounts) may come in either order.
    let latest: Vec<OwnBid> = expected
        .iter()
        .take_while(|(at, id, _)| expected.first().is_some_and(|f| f.0 == *at && &f.1 == id))
        .map(|(_, id, amount)| (id.clone(), *amount))
        .collect();
    let right = match &user.last_bid {
        None => latest.is_empty(),
        Some(actual) => latest.contains(actual),
    };
    if !right {
        violations.push(Violation::LastBidWrong {
            user: user.user.clone(),
            region: state.region,
            expected: latest.first().cloned(),
            actual: user.last_bid.clone(),
        });
    }
}

/// Drop what a lost Region's undelivered summaries explain (docs/DATA_MODEL.md, "After a
/// Region is lost for good"): a `bid_count_wrong` below the copies by at most that many, and
/// a `high_bid_wrong` whose served high is *below* the one the records pick (the higher copy
/// arrived without the summary that would name it). With no summary lost, nothing is
/// excused.
fn excuse_lost_summaries(
    violations: &mut Vec<Violation>,
    lost_summaries: usize,
    excused: &mut Excused,
) {
    if lost_summaries == 0 {
        return;
    }
    violations.retain(|v| match v {
        Violation::BidCountWrong { count, copies, .. } => {
            let explained =
                *count < *copies as u64 && count + lost_summaries as u64 >= *copies as u64;
            if explained {
                excuse(
                    excused,
                    Excuse::CopiesWhoseSummaryWasLost,
                    (*copies as u64 - count) as usize,
                );
            }
            !explained
        }
        Violation::HighBidWrong {
            expected, actual, ..
        } => {
            let below = match (expected, actual) {
                (Some(e), Some(a)) => a.amount < e.amount,
                (Some(_), None) => true,
                _ => false,
            };
            if below {
                excuse(excused, Excuse::HighCopyWhoseSummaryWasLost, 1);
            }
            !below
        }
        _ => true,
    });
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::sim::topic_rules::{RegionCopies, TopicTrace};
    use crate::sim::trace::{Lost, Record, Reply};
    use wsdr_protocol::OpView;
    use RegionId::{Primary as E, Secondary as W};

    fn u(s: &str) -> UserId {
        UserId::new(s).unwrap()
    }

    fn b(s: &str) -> BidId {
        BidId::new(format!("{s}-bid-id")).unwrap()
    }

    fn a(n: u64) -> Amount {
        Amount::new(n).unwrap()
    }

    fn bid(user: &str, id: &str, amount: u64) -> BidRef {
        BidRef {
            bidder: u(user),
            bid_id: b(id),
            amount: a(amount),
        }
    }

    fn op(user: &str, id: &str, amount: u64, answers: &[(Answer, bool)]) -> Op {
        Op {
            user: u(user),
            auction: wsdr_protocol::AuctionId::new("lot-1").unwrap(),
            bid_id: b(id),
            amount: a(amount),
            invoked: AwsInstant::START,
            answers: answers
                .iter()
                .map(|(answer, reconnected)| Reply {
                    at: AwsInstant::from_ms(1.0),
                    answer: *answer,
                    region: Some(E),
                    reconnected: *reconnected,
                })
                .collect(),
        }
    }

    /// A Region holding (bid id, bidder, amount) records, each with `at` = its position, and
    /// serving the high bid the rule picks.
    fn state(region: RegionId, bids: &[(&str, &str, u64)]) -> FinalState {
        let mut map: BTreeMap<BidKey, Vec<Record>> = BTreeMap::new();
        for (at, (id, user, amount)) in bids.iter().enumerate() {
            map.entry((u(user), b(id))).or_default().push(Record {
                amount: a(*amount),
                at: at as u64,
            });
        }
        let mut s = FinalState {
            region,
            bid_count: bids.len() as u64,
            winner_readable: true,
            copies: bids.len(),
            bids: map,
            high: None,
        };
        s.high = s.expected_high();
        s
    }

    fn user(high: Option<u64>) -> UserEnd {
        UserEnd {
            user: u("u"),
            auction: wsdr_protocol::AuctionId::new("lot-1").unwrap(),
            connected: true,
            high_seen: high.map(a),
            high_before_resync: Some(high.map(a)),
            views_backwards: 0,
            highs_lowered: 0,
            served_by: None,
            own_bids: Vec::new(),
            last_bid: None,
        }
    }

    /// User `u`, served by `region`, listing `own` as its bids (newest first).
    fn bidder(region: RegionId, high: Option<u64>, own: &[(&str, u64)]) -> UserEnd {
        UserEnd {
            served_by: Some(region),
            own_bids: own.iter().map(|(id, n)| (b(id), a(*n))).collect(),
            last_bid: own.first().map(|(id, n)| (b(id), a(*n))),
            ..user(high)
        }
    }

    fn trace(ops: &[Op], regions: &[FinalState], ends: &[UserEnd], lost: &Lost) -> RunTrace {
        RunTrace {
            ops: ops.to_vec(),
            users: Vec::new(),
            ends: ends.to_vec(),
            regions: regions.to_vec(),
            converged: true,
            lost: lost.clone(),
            lost_summaries: 0,
        }
    }

    /// The same run as the kit sees it: each bid a write, each record a copy (all accepted
    /// by the primary, one log in `at` order), the lost bids the lost copies.
    fn kit_of(ops: &[Op], regions: &[FinalState], lost: &Lost) -> TopicTrace {
        let copy = |bidder: &UserId, bid_id: &BidId, amount: Amount, at: u64| OpView {
            author: bidder.as_str().to_owned(),
            op_id: OpId::from(bid_id),
            region: "primary".to_owned(),
            position: at + 1,
            log: "primary".to_owned(),
            at,
            digest: wsdr_protocol::bid_digest(amount),
            op: serde_json::json!({ "amount": amount.get() }),
        };
        TopicTrace {
            writes: ops.iter().map(crate::sim::judge::write_of).collect(),
            regions: regions
                .iter()
                .map(|state| RegionCopies {
                    region: state.region,
                    copies: state
                        .bids
                        .iter()
                        .flat_map(|((bidder, bid_id), records)| {
                            records.iter().map(|r| copy(bidder, bid_id, r.amount, r.at))
                        })
                        .collect(),
                })
                .collect(),
            lost: lost
                .iter()
                .map(|b| copy(&b.bidder, &b.bid_id, b.amount, 0))
                .collect(),
            strong: false,
        }
    }

    /// The kit's rules over the bids as ops and the auction's own, as a campaign judges.
    fn judged_all(run: &RunTrace) -> (Vec<Violation>, Excused) {
        let kit = kit_of(&run.ops, &run.regions, &run.lost);
        crate::sim::judge::check_bids(run, &kit)
    }

    fn judged(ops: &[Op], regions: &[FinalState], ends: &[UserEnd]) -> Vec<Violation> {
        judged_all(&trace(ops, regions, ends, &Lost::new())).0
    }

    fn op_id(id: &str) -> OpId {
        OpId::from(&b(id))
    }

    #[test]
    fn a_count_below_the_copies_is_excused_only_by_lost_summaries() {
        let wrong = |count, copies| Violation::BidCountWrong {
            region: W,
            count,
            copies,
        };
        let mut v = vec![wrong(114, 115), wrong(110, 115), wrong(116, 115)];
        let mut excused = Excused::new();
        excuse_lost_summaries(&mut v, 1, &mut excused);
        assert_eq!(v, vec![wrong(110, 115), wrong(116, 115)]);
        assert_eq!(excused.get(&Excuse::CopiesWhoseSummaryWasLost), Some(&1));
        let mut none = vec![wrong(114, 115)];
        excuse_lost_summaries(&mut none, 0, &mut Excused::new());
        assert_eq!(none.len(), 1);
        let high = |expected: u64, actual: u64| Violation::HighBidWrong {
            region: W,
            expected: Some(bid("a", "b1", expected)),
            actual: Some(bid("b", "b2", actual)),
        };
        let mut highs = vec![high(500, 400), high(400, 500)];
        excuse_lost_summaries(&mut highs, 2, &mut Excused::new());
        assert_eq!(
            highs,
            vec![high(400, 500)],
            "only a served high below the records'"
        );
    }

    #[test]
    fn own_bids_and_last_bid_that_match_the_serving_region_pass() {
        let ops = [
            op("u", "b1", 100, &[(Answer::Accepted, false)]),
            op("u", "b2", 120, &[(Answer::Accepted, false)]),
        ];
        let s = state(E, &[("b1", "u", 100), ("b2", "u", 120)]);
        let user = bidder(E, Some(120), &[("b2", 120), ("b1", 100)]);
        assert_eq!(judged(&ops, &[s], &[user]), vec![]);
    }

    #[test]
    fn own_bids_missing_or_foreign_are_reported() {
        let ops = [
            op("u", "b1", 100, &[(Answer::Accepted, false)]),
            op("u", "b2", 120, &[(Answer::Accepted, false)]),
            op("v", "b9", 90, &[(Answer::Accepted, false)]),
        ];
        let s = state(E, &[("b9", "v", 90), ("b1", "u", 100), ("b2", "u", 120)]);
        // b1 left out, someone else's b9 listed as the user's own.
        let user = bidder(E, Some(120), &[("b2", 120), ("b9", 90)]);
        let v = judged(&ops, &[s], &[user]);
        assert!(
            v.contains(&Violation::OwnBidsWrong {
                user: u("u"),
                region: E,
                missing: vec![b("b1")],
                unexplained: vec![b("b9")],
            }),
            "{v:?}"
        );
    }

    #[test]
    fn a_last_bid_that_is_not_the_latest_is_reported() {
        let ops = [
            op("u", "b1", 100, &[(Answer::Accepted, false)]),
            op("u", "b2", 120, &[(Answer::Accepted, false)]),
        ];
        let s = state(E, &[("b1", "u", 100), ("b2", "u", 120)]);
        let mut user = bidder(E, Some(120), &[("b2", 120), ("b1", 100)]);
        user.last_bid = Some((b("b1"), a(100)));
        assert_eq!(
            judged(&ops, std::slice::from_ref(&s), std::slice::from_ref(&user)),
            vec![Violation::LastBidWrong {
                user: u("u"),
                region: E,
                expected: Some((b("b2"), a(120))),
                actual: Some((b("b1"), a(100))),
            }]
        );
        user.last_bid = None;
        assert_eq!(judged(&ops, &[s], &[user]).len(), 1);
    }

    #[test]
    fn a_clean_history_passes() {
        let ops = [
            op("a", "b1", 100, &[(Answer::Accepted, false)]),
            op("b", "b2", 90, &[(Answer::Rejected, false)]),
            op("b", "b3", 120, &[]),
        ];
        let s = state(E, &[("b1", "a", 100), ("b3", "b", 120)]);
        let west = FinalState {
            region: W,
            ..s.clone()
        };
        assert_eq!(judged(&ops, &[s, west], &[user(Some(120))]), vec![]);
    }

    #[test]
    fn each_broken_guarantee_is_reported() {
        let ops = [
            op("a", "b1", 100, &[(Answer::Accepted, false)]),
            op("b", "b2", 150, &[(Answer::Rejected, false)]),
        ];
        // b1 missing in w, b2 (rejected) present, an invented record, a stale user.
        let east = state(E, &[("b1", "a", 100), ("b2", "b", 150), ("zz", "c", 1)]);
        let west = state(W, &[]);
        let v = judged(&ops, &[east, west], &[user(Some(100))]);
        assert!(v.contains(&Violation::AcknowledgedOpMissing {
            author: u("a"),
            op_id: op_id("b1"),
            region: W
        }));
        assert!(v.contains(&Violation::FailedOpPresent {
            author: "b".to_owned(),
            op_id: op_id("b2"),
            region: E
        }));
        assert!(v.contains(&Violation::OpNotWritten {
            author: "c".to_owned(),
            op_id: op_id("zz"),
            region: E
        }));
        assert!(v.contains(&Violation::WinnersDiffer));
        assert!(v.contains(&Violation::HighAboveAcknowledged {
            region: E,
            amount: a(150)
        }));
        assert!(v
            .iter()
            .any(|x| matches!(x, Violation::CopiesDiffer { region: W, .. })));
        assert!(v.iter().any(|x| matches!(x, Violation::UserStale { .. })));
    }

    #[test]
    fn a_wrong_high_bid_or_count_is_reported() {
        let ops = [op("a", "b1", 100, &[(Answer::Accepted, false)])];
        let mut east = state(E, &[("b1", "a", 100)]);
        east.high = None;
        east.bid_count = 2;
        let v = judged(&ops, &[east], &[]);
        assert!(v
            .iter()
            .any(|x| matches!(x, Violation::HighBidWrong { .. })));
        assert!(v
            .iter()
            .any(|x| matches!(x, Violation::BidCountWrong { .. })));
    }

    #[test]
    fn an_acknowledgement_from_a_region_without_quorum_throughout_is_reported() {
        let mut acked = op("a", "b1", 100, &[(Answer::Accepted, false)]);
        acked.invoked = AwsInstant::from_ms(10.0);
        acked.answers[0].at = AwsInstant::from_ms(20.0);
        // E lacked quorum from 5 to 30 ms.
        let lacked = |r: RegionId, from: AwsInstant, to: AwsInstant| {
            r == E && from.ms() >= 5.0 && to.ms() < 30.0
        };
        // The kit's rule, over the bid as an op.
        let without_quorum = |op: &Op| {
            crate::sim::topic_rules::acknowledged_without_quorum(
                &[crate::sim::judge::write_of(op)],
                lacked,
            )
        };
        assert_eq!(
            without_quorum(&acked),
            vec![Violation::OpAcknowledgedWithoutQuorum {
                author: u("a"),
                op_id: op_id("b1"),
                region: E
            }]
        );
        // Invoked before the loss: it may have been decided with the quorum.
        acked.invoked = AwsInstant::from_ms(1.0);
        assert!(without_quorum(&acked).is_empty());
        // A redirect, or an answer after a reconnect, is not such an acknowledgement.
        acked.invoked = AwsInstant::from_ms(10.0);
        acked.answers[0].answer = Answer::Redirected;
        assert!(without_quorum(&acked).is_empty());
        acked.answers[0].answer = Answer::Accepted;
        acked.answers[0].reconnected = true;
        assert!(without_quorum(&acked).is_empty());
    }

    #[test]
    fn a_redirect_for_a_bid_its_own_region_accepted_is_reported() {
        let redirected = op("a", "b1", 100, &[(Answer::Redirected, false)]);
        let committed = redirected.answers[0].at;
        let accepted_by = [(u("a"), b("b1"), E, committed)];
        let mut excused = Excused::new();
        let none = BTreeMap::new();
        assert_eq!(
            redirected_but_decided(
                std::slice::from_ref(&redirected),
                &accepted_by,
                &none,
                &mut excused
            ),
            vec![Violation::RedirectedButDecided {
                bidder: u("a"),
                bid_id: b("b1"),
                region: E
            }]
        );
        // Accepted by the other Region's write: the redirect decided nothing itself.
        let by_the_other = [(u("a"), b("b1"), W, committed)];
        assert!(redirected_but_decided(
            std::slice::from_ref(&redirected),
            &by_the_other,
            &none,
            &mut excused
        )
        .is_empty());
        assert!(excused.is_empty());
        // Committed after the redirect (a later send): the redirect was true.
        let later = [(
            u("a"),
            b("b1"),
            E,
            AwsInstant::from_ms(committed.ms() + 1.0),
        )];
        assert!(redirected_but_decided(
            std::slice::from_ref(&redirected),
            &later,
            &none,
            &mut excused
        )
        .is_empty());
        // The committing attempt's connection ended before the redirect: a later send,
        // redirected as the protocol allows, and counted by name.
        // A session the redirect itself ended (at its own instant) is no earlier connection.
        let at_the_redirect = BTreeMap::from([(u("a"), vec![committed])]);
        assert_eq!(
            redirected_but_decided(
                std::slice::from_ref(&redirected),
                &accepted_by,
                &at_the_redirect,
                &mut excused
            )
            .len(),
            1
        );
        let before = AwsInstant::from_ms(committed.ms() - 1.0);
        let accepted_earlier = [(u("a"), b("b1"), E, before)];
        let ended = BTreeMap::from([(u("a"), vec![before])]);
        assert!(
            redirected_but_decided(&[redirected], &accepted_earlier, &ended, &mut excused)
                .is_empty()
        );
        assert_eq!(
            excused.get(&Excuse::RedirectedReplayOfADecidedBid),
            Some(&1)
        );
    }

    #[test]
    fn bids_taken_at_or_below_an_earlier_one_are_counted() {
        let order = [
            (a(100), E),
            (a(120), W),
            (a(120), E),
            (a(110), W),
            (a(130), E),
        ];
        assert_eq!(below_an_earlier_bid(&order), 2);
    }

    #[test]
    fn a_rejection_after_a_replay_is_unknown_not_fail() {
        let replayed = op("a", "b1", 100, &[(Answer::Rejected, true)]);
        assert_eq!(replayed.outcome(), Outcome::Unknown);
        let twice = op(
            "a",
            "b1",
            100,
            &[(Answer::Rejected, false), (Answer::Rejected, true)],
        );
        assert_eq!(twice.outcome(), Outcome::Unknown);
        let acked_later = op(
            "a",
            "b1",
            100,
            &[(Answer::Rejected, false), (Answer::Duplicate, true)],
        );
        assert_eq!(acked_later.outcome(), Outcome::Ok);
        let never_sent = op("a", "b1", 100, &[(Answer::Expired, true)]);
        assert_eq!(never_sent.outcome(), Outcome::Fail);
        // Neither an unknown outcome nor a redirect decides anything.
        for answer in [Answer::Unknown, Answer::Redirected] {
            assert_eq!(
                op("a", "b1", 100, &[(answer, false)]).outcome(),
                Outcome::Unknown
            );
        }
    }

    #[test]
    fn a_bid_id_reused_by_another_user_that_replaced_the_victims_bid_is_reported() {
        // The first data model: mallory's bid under alice's bidId overwrote alice's record.
        let ops = [
            op("alice", "b1", 500, &[(Answer::Accepted, false)]),
            op("mallory", "b1", 200, &[(Answer::Accepted, false)]),
        ];
        let overwritten = state(E, &[("b1", "mallory", 200)]);
        let v = judged(&ops, &[overwritten], &[]);
        assert!(v.contains(&Violation::AcknowledgedOpMissing {
            author: u("alice"),
            op_id: op_id("b1"),
            region: E
        }));
        // Keyed by (bidder, bidId), both records stand and nothing is reported.
        let kept = state(E, &[("b1", "alice", 500), ("b1", "mallory", 200)]);
        assert_eq!(judged(&ops, &[kept], &[]), vec![]);
    }

    #[test]
    fn an_acknowledged_bid_with_another_amount_under_its_key_is_altered() {
        let ops = [op("alice", "b1", 500, &[(Answer::Accepted, false)])];
        let altered = state(E, &[("b1", "alice", 300)]);
        // Its own payload is held nowhere, and the copy under its key is one it never wrote.
        let v = judged(&ops, &[altered], &[]);
        assert!(v
            .iter()
            .any(|x| matches!(x, Violation::AcknowledgedOpMissing { .. })));
        assert!(v
            .iter()
            .any(|x| matches!(x, Violation::OpNotWritten { .. })));
    }

    #[test]
    fn the_wrong_winner_among_equal_amounts_is_reported() {
        let ops = [
            op("alice", "b1", 500, &[(Answer::Accepted, false)]),
            op("bob", "b2", 500, &[(Answer::Accepted, false)]),
        ];
        // alice's copy is the earlier one: she must win; a Region serving bob is wrong even
        // though the amount is right.
        let mut east = state(E, &[("b1", "alice", 500), ("b2", "bob", 500)]);
        assert_eq!(east.high, Some(bid("alice", "b1", 500)));
        east.high = Some(bid("bob", "b2", 500));
        let v = judged(&ops, &[east], &[]);
        assert!(v
            .iter()
            .any(|x| matches!(x, Violation::HighBidWrong { .. })));
    }

    #[test]
    fn regions_serving_different_winners_are_reported() {
        let ops = [op("alice", "b1", 500, &[(Answer::Accepted, false)])];
        let east = state(E, &[("b1", "alice", 500)]);
        let mut west = east.clone();
        west.region = W;
        west.high = None;
        let v = judged(&ops, &[east, west], &[]);
        assert!(v.contains(&Violation::WinnersDiffer));
    }

    #[test]
    fn a_winner_its_bidder_cannot_read_is_reported() {
        let ops = [op("alice", "b1", 500, &[(Answer::Accepted, false)])];
        let mut east = state(E, &[("b1", "alice", 500)]);
        east.winner_readable = false;
        assert_eq!(
            judged(&ops, &[east], &[]),
            vec![Violation::WinnerUnreadable { region: E }]
        );
    }

    #[test]
    fn a_count_that_is_not_the_copies_is_reported() {
        let ops = [op("alice", "b1", 500, &[(Answer::Accepted, false)])];
        let mut east = state(E, &[("b1", "alice", 500)]);
        east.copies = 2; // a second copy the summaries never counted
        let v = judged(&ops, &[east], &[]);
        assert!(v
            .iter()
            .any(|x| matches!(x, Violation::BidCountWrong { .. })));
    }

    #[test]
    fn a_subscriber_whose_pushes_never_brought_the_high_bid_is_reported() {
        let ops = [op("a", "b1", 100, &[(Answer::Accepted, false)])];
        let east = state(E, &[("b1", "a", 100)]);
        let mut pushed_nothing = user(Some(100));
        pushed_nothing.high_before_resync = Some(None); // connected, but no push showed it
        let v = judged(&ops, std::slice::from_ref(&east), &[pushed_nothing]);
        assert!(v.iter().any(|x| matches!(x, Violation::PushMissed { .. })));
        // Not connected before the resync: nothing to say about its pushes.
        let mut away = user(Some(100));
        away.high_before_resync = None;
        assert_eq!(judged(&ops, &[east], &[away]), vec![]);
    }

    #[test]
    fn a_view_going_backwards_is_reported() {
        let ops = [op("a", "b1", 100, &[(Answer::Accepted, false)])];
        let east = state(E, &[("b1", "a", 100)]);
        let mut backwards = user(Some(100));
        backwards.views_backwards = 2;
        let v = judged(&ops, &[east], &[backwards]);
        assert!(v.contains(&Violation::ViewWentBackwards {
            user: u("u"),
            times: 2
        }));
    }

    #[test]
    fn a_high_bid_shown_lower_after_a_push_is_reported() {
        let ops = [op("a", "b1", 100, &[(Answer::Accepted, false)])];
        let east = state(E, &[("b1", "a", 100)]);
        let mut lowered = user(Some(100));
        lowered.highs_lowered = 1;
        assert_eq!(
            judged(&ops, &[east], &[lowered]),
            vec![Violation::HighWentDown {
                user: u("u"),
                times: 1
            }]
        );
    }

    #[test]
    fn a_user_left_disconnected_or_stale_is_reported() {
        let ops = [op("a", "b1", 100, &[(Answer::Accepted, false)])];
        let east = state(E, &[("b1", "a", 100)]);
        let mut gone = user(Some(100));
        gone.connected = false;
        let stale = user(Some(90));
        let v = judged(&ops, &[east], &[gone, stale]);
        assert!(v
            .iter()
            .any(|x| matches!(x, Violation::UserNotConnected { .. })));
        assert!(v.iter().any(|x| matches!(x, Violation::UserStale { .. })));
    }

    #[test]
    fn only_the_copies_lost_with_a_region_may_be_missing() {
        let ops = [
            op("a", "b1", 100, &[(Answer::Accepted, false)]),
            op("b", "b2", 110, &[(Answer::Accepted, false)]),
        ];
        let survivor = state(W, &[]);
        let lost: Lost = [bid("a", "b1", 100)].into_iter().collect();
        let run = trace(&ops, std::slice::from_ref(&survivor), &[], &lost);
        let (v, excused) = judged_all(&run);
        // b1 is excused (its only copy was lost), and counted under its name; b2 is not.
        assert_eq!(
            v,
            vec![Violation::AcknowledgedOpMissing {
                author: u("b"),
                op_id: op_id("b2"),
                region: W
            }]
        );
        assert_eq!(excused.get(&Excuse::LostWithRegion), Some(&1));
        assert_eq!(run.lost_acknowledged(), 1);
    }

    #[test]
    fn a_high_bid_above_every_acknowledged_one_is_reported_unless_unanswered() {
        let ops = [
            op("a", "b1", 100, &[(Answer::Accepted, false)]),
            op("b", "b2", 150, &[]), // never answered: may stand
        ];
        let east = state(E, &[("b1", "a", 100), ("b2", "b", 150)]);
        assert_eq!(judged(&ops, &[east], &[user(Some(150))]), vec![]);
        let invented = [op("a", "b1", 100, &[(Answer::Accepted, false)])];
        let east = state(E, &[("b1", "a", 100), ("b2", "b", 150)]);
        let v = judged(&invented, &[east], &[]);
        assert!(v
            .iter()
            .any(|x| matches!(x, Violation::HighAboveAcknowledged { .. })));
    }

    #[test]
    fn a_final_state_is_written_as_json_the_digest_can_cover() {
        // A map keyed by a pair has no JSON object form: it is written as pairs.
        let s = state(E, &[("b1", "a", 100)]);
        let json = serde_json::to_string(&s).unwrap();
        assert!(
            json.contains(r#""bids":[[["a","b1-bid-id"],[{"amount":100,"at":0}]]]"#),
            "{json}"
        );
        assert!(json.contains(r#""high":["a","b1-bid-id",100]"#), "{json}");
        assert!(json.contains(r#""region":"primary""#), "{json}");
    }
}
