//! The chaos campaign's history checker: every client operation as it was invoked and
//! answered, checked against both Regions' final state.
//!
//! An operation's outcome is what the client can know:
//! - **ok**: some answer was `accepted` or `duplicate`: the bid must be in both Regions;
//! - **fail**: exactly one answer, `rejected`, and no reconnect between the invoke and the
//!   answer (so the bid was never replayed elsewhere), or the client dropped it unsent
//!   (expired in the offline queue): the bid must be in neither Region;
//! - **unknown**: anything else (no answer, or a rejection after a replay): either is fine.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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

/// One bid as a client made it.
#[derive(Debug, Clone, Serialize)]
pub struct Op {
    pub user: String,
    /// The auction the bid was for.
    pub auction: String,
    pub bid_id: String,
    pub amount: u64,
    /// Lab ms at invoke.
    pub invoked_ms: f64,
    /// (lab ms, answer, Region, the client had reconnected since the invoke).
    pub answers: Vec<(f64, Answer, String, bool)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    Fail,
    Unknown,
}

impl Op {
    pub fn outcome(&self) -> Outcome {
        if self
            .answers
            .iter()
            .any(|a| matches!(a.1, Answer::Accepted | Answer::Duplicate))
        {
            Outcome::Ok
        } else if self.answers.iter().any(|a| a.1 == Answer::Expired)
            || (self.answers.len() == 1
                && self.answers[0].1 == Answer::Rejected
                && !self.answers[0].3)
        {
            Outcome::Fail
        } else {
            Outcome::Unknown
        }
    }
}

/// The key of an operation and of a bid record: bidIds are scoped to their bidder, so a
/// hostile user reusing someone else's bidId makes a different operation and record.
pub type BidKey = (String, String);

/// One logical bid as a Region holds it: the copies of (bidder, bidId, amount) folded, with
/// the earliest copy's `at` (the rank uses it for equal amounts).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Record {
    pub amount: u64,
    pub at: u64,
}

/// One Region's final state of the auction.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FinalState {
    pub region: String,
    /// (bidder, bid id) -> the logical bids recorded under it (one per amount).
    pub bids: BTreeMap<BidKey, Vec<Record>>,
    /// Bid copies in the store (a bid accepted in both Regions has two).
    pub copies: usize,
    /// (bidder, bid id, amount) of the high bid the Region serves.
    pub high: Option<(String, String, u64)>,
    /// The bid count the Region serves (the sum of its summaries).
    pub bid_count: u64,
    /// The winner's own bidder, asking the Region (`getState` naming the winning bidId),
    /// finds it standing with its amount, in `you.settled` and in `you.bids`; `true` when
    /// there is no winner. A winner the Region shows but its bidder cannot read is a lie.
    pub winner_readable: bool,
}

impl FinalState {
    /// The winner the ledger's rule picks from the records alone: highest amount, then the
    /// earliest copy, then bidder, then bidId (docs/DATA_MODEL.md).
    pub fn expected_high(&self) -> Option<(String, String, u64)> {
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
            .map(|(bidder, id, r)| (bidder.clone(), id.clone(), r.amount))
    }
}

/// What a user saw after the final resync.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UserEnd {
    pub user: String,
    /// The auction the user follows.
    pub auction: String,
    pub connected: bool,
    /// The high bid amount in the state the user was last served.
    pub high_seen: Option<u64>,
    /// The high bid its pushes (and its own reconnects' resyncs) had brought it just before
    /// the forced final resync; `None` if it was not connected with a view then.
    pub high_before_resync: Option<Option<u64>>,
    /// Pushes its client reported that were strictly older than the view it already had.
    pub views_backwards: u32,
    /// Pushes its client reported with a lower high bid than the one it showed before
    /// (with no state read between): a late push replaced a newer view.
    #[serde(default)]
    pub highs_lowered: u32,
    /// The Region that served its final state, and the user's own bids in that state
    /// (`you.bids`: (bidId, amount), newest first) and `you.lastBid`.
    pub served_by: Option<String>,
    pub own_bids: Vec<(String, u64)>,
    pub last_bid: Option<(String, u64)>,
}

/// A broken guarantee.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Violation {
    AcknowledgedBidMissing {
        bidder: String,
        bid_id: String,
        region: String,
    },
    /// Under the acknowledged (bidder, bidId) the Region holds another amount, or more than
    /// the operations explain.
    AcknowledgedBidAltered {
        bidder: String,
        bid_id: String,
        region: String,
    },
    /// A record no operation explains (no operation of that bidder with that bidId and
    /// amount): applied twice, invented, or written over by someone else.
    UnexplainedRecord {
        bidder: String,
        bid_id: String,
        region: String,
    },
    RejectedBidPresent {
        bidder: String,
        bid_id: String,
        region: String,
    },
    /// Strong mode: in the table's own order, bids taken at or below a bid taken before
    /// them (one Region accepted below what another had already acknowledged).
    AcceptedBelowEarlierBid {
        count: usize,
    },
    /// Strong mode: a Region answered `accepted` or `duplicate` for a bid it received and
    /// answered while it had no quorum the whole time.
    AcknowledgedWithoutQuorum {
        bidder: String,
        bid_id: String,
        region: String,
    },
    /// The high bid the Region serves is not the one the ledger's rule picks from its
    /// records (amount, then earliest copy, then bidder, then bidId): a wrong amount, or the
    /// wrong winner among equal amounts.
    HighBidWrong {
        region: String,
        expected: Option<(String, String, u64)>,
        actual: Option<(String, String, u64)>,
    },
    /// The Regions serve different high bids after convergence.
    WinnersDiffer,
    /// A Region serves a winner that its bidder's `getState` does not find standing.
    WinnerUnreadable {
        region: String,
    },
    /// A planned evacuation ended with connections never told to move (its push path was
    /// throttled, not gone: telling again until the deadline reaches them).
    EvacuationIncomplete {
        untold: usize,
        connections: usize,
    },
    /// A recorded bid above every acknowledged one that no unanswered operation explains.
    HighAboveAcknowledged {
        region: String,
        amount: u64,
    },
    /// The summaries' bid count is not the number of bid copies in the store.
    BidCountWrong {
        region: String,
        count: u64,
        copies: usize,
    },
    NotConverged,
    UserNotConnected {
        user: String,
    },
    UserStale {
        user: String,
        seen: Option<u64>,
        actual: Option<u64>,
    },
    /// A connected subscriber was never brought the final high bid by a push: only the forced
    /// final resync showed it (a replicated bid not pushed, a broadcast lost).
    PushMissed {
        user: String,
        pushed: Option<u64>,
        actual: Option<u64>,
    },
    /// A client reported a view older than one it had already reported.
    ViewWentBackwards {
        user: String,
        times: u32,
    },
    /// The user's own bids (`you.bids`) in its final state are not the ones the serving
    /// Region holds for it: some missing, or someone else's (bidId, amount) among them.
    OwnBidsWrong {
        user: String,
        region: String,
        missing: Vec<String>,
        unexplained: Vec<String>,
    },
    /// A canary-issuer token naming a user's subject was admitted by a Region's authorizer
    /// (docs/AUTH.md: canary tokens are `canary:*` principals only).
    ImpostorAdmitted {
        region: String,
        sub: String,
    },
    /// A probe identity read a user's bids, or had a bid accepted (`what` says which).
    ProbeActedAsUser {
        region: String,
        what: String,
    },
    /// A bid answered `rejected` for a reason that is not final (a retryable failure): the
    /// clients drop a rejected bid, so it may have been one that would have won.
    RetryableRejected {
        bidder: String,
        bid_id: String,
        region: String,
        reason: String,
    },
    /// A client showed a lower high bid after a push than before it.
    HighWentDown {
        user: String,
        times: u32,
    },
    /// Strong mode: a Region answered `redirect` ("decided nothing") for a bid that its own
    /// head write accepted.
    RedirectedButDecided {
        bidder: String,
        bid_id: String,
        region: String,
    },
    /// `you.settled` in a `getState` naming a bid is not what the Region holds for it.
    SettledWrong {
        user: String,
        region: String,
        bid_id: String,
    },
    /// `you.lastBid` is not the user's latest bid in the serving Region's records.
    LastBidWrong {
        user: String,
        region: String,
        expected: Option<(String, u64)>,
        actual: Option<(String, u64)>,
    },
}

impl Violation {
    /// The bid the violation is about, if any (to print the minimal history).
    pub fn bid(&self) -> Option<(&str, &str)> {
        match self {
            Violation::AcknowledgedBidMissing { bidder, bid_id, .. }
            | Violation::AcknowledgedBidAltered { bidder, bid_id, .. }
            | Violation::UnexplainedRecord { bidder, bid_id, .. }
            | Violation::RejectedBidPresent { bidder, bid_id, .. }
            | Violation::AcknowledgedWithoutQuorum { bidder, bid_id, .. }
            | Violation::RetryableRejected { bidder, bid_id, .. }
            | Violation::RedirectedButDecided { bidder, bid_id, .. } => Some((bidder, bid_id)),
            _ => None,
        }
    }
}

/// Acknowledgements no Region may have given: the Region had no quorum for the whole time
/// between the bid's invoke and that answer (`lacked(region, from_ms, to_ms)`). Only answers
/// without a reconnect since the invoke count: the bid was sent to that Region then.
pub fn acknowledged_without_quorum(
    ops: &[Op],
    regions: &crate::world::PerRegion<String>,
    lacked: impl Fn(crate::world::RegionId, f64, f64) -> bool,
) -> Vec<Violation> {
    let mut found = Vec::new();
    for op in ops {
        for (at, answer, region, reconnected) in &op.answers {
            if *reconnected || !matches!(answer, Answer::Accepted | Answer::Duplicate) {
                continue;
            }
            let Some((id, _)) = regions.iter().find(|(_, name)| *name == region) else {
                continue;
            };
            if lacked(id, op.invoked_ms, *at) {
                found.push(Violation::AcknowledgedWithoutQuorum {
                    bidder: op.user.clone(),
                    bid_id: op.bid_id.clone(),
                    region: region.clone(),
                });
            }
        }
    }
    found
}

/// Strong mode: `redirect` answers from a Region whose own head write accepted that very bid
/// (`accepted_by`: (bidder, bidId, accepting Region) of every head write the table took). A
/// redirect says nothing was decided there; a write that may have committed is `unknown`.
pub fn redirected_but_decided(
    ops: &[Op],
    accepted_by: &[(String, String, String)],
) -> Vec<Violation> {
    let taken: std::collections::BTreeSet<(&str, &str, &str)> = accepted_by
        .iter()
        .map(|(b, i, r)| (b.as_str(), i.as_str(), r.as_str()))
        .collect();
    let mut found = Vec::new();
    for op in ops {
        for (_, answer, region, _) in &op.answers {
            if *answer == Answer::Redirected
                && taken.contains(&(op.user.as_str(), op.bid_id.as_str(), region.as_str()))
            {
                found.push(Violation::RedirectedButDecided {
                    bidder: op.user.clone(),
                    bid_id: op.bid_id.clone(),
                    region: region.clone(),
                });
            }
        }
    }
    found
}

/// Bids taken at or below an earlier one, in the order a strongly consistent table took
/// them ((amount, Region) each): in strong mode each accepted bid must beat every earlier one.
pub fn below_an_earlier_bid(in_order: &[(u64, String)]) -> usize {
    let mut best: Option<u64> = None;
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
}

impl Excuse {
    /// Every excuse, in the docs' order.
    pub const ALL: [Excuse; 4] = [
        Excuse::LostWithRegion,
        Excuse::CountedCopiesLostWithRegion,
        Excuse::CopiesWhoseSummaryWasLost,
        Excuse::HighCopyWhoseSummaryWasLost,
    ];

    /// The name the summary and the reports count it under.
    pub fn name(self) -> &'static str {
        match self {
            Excuse::LostWithRegion => "lost_with_region",
            Excuse::CountedCopiesLostWithRegion => "counted_copies_lost_with_region",
            Excuse::CopiesWhoseSummaryWasLost => "copies_whose_summary_was_lost",
            Excuse::HighCopyWhoseSummaryWasLost => "high_copy_whose_summary_was_lost",
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

/// Bid copies (bidder, bid id, amount) a Region that never came back took with it: the only
/// losses the checker accepts (docs/DATA_MODEL.md, "what no acknowledged bid is lost means").
pub type Lost = std::collections::BTreeSet<(String, String, u64)>;

/// Acknowledged operations whose bid is gone from every surviving Region because its only
/// copies were lost with a Region that never came back: the measured RPO, in bids.
pub fn lost_acknowledged(ops: &[Op], regions: &[FinalState], lost: &Lost) -> usize {
    ops.iter()
        .filter(|op| op.outcome() == Outcome::Ok)
        .filter(|op| lost.contains(&(op.user.clone(), op.bid_id.clone(), op.amount)))
        .filter(|op| {
            regions.iter().all(|state| {
                !state
                    .bids
                    .get(&(op.user.clone(), op.bid_id.clone()))
                    .is_some_and(|records| records.iter().any(|r| r.amount == op.amount))
            })
        })
        .count()
}

/// Every acknowledged bid is held by `state` with its own amount (unless its copies were lost
/// with a Region that never came back), and no rejected bid is.
fn acknowledged_and_rejected(
    ops: &[Op],
    state: &FinalState,
    lost: &Lost,
    excused: &mut Excused,
) -> Vec<Violation> {
    let mut violations = Vec::new();
    let region = state.region.clone();
    for op in ops {
        let key = (op.user.clone(), op.bid_id.clone());
        let records = state.bids.get(&key).map(Vec::as_slice).unwrap_or_default();
        let own = records.iter().any(|r| r.amount == op.amount);
        let violation = |make: fn(String, String, String) -> Violation| {
            make(op.user.clone(), op.bid_id.clone(), region.clone())
        };
        let lost_for_good = lost.contains(&(op.user.clone(), op.bid_id.clone(), op.amount));
        match op.outcome() {
            Outcome::Ok if !own && lost_for_good => excuse(excused, Excuse::LostWithRegion, 1),
            Outcome::Ok if !own => violations.push(if records.is_empty() {
                violation(|bidder, bid_id, region| Violation::AcknowledgedBidMissing {
                    bidder,
                    bid_id,
                    region,
                })
            } else {
                violation(|bidder, bid_id, region| Violation::AcknowledgedBidAltered {
                    bidder,
                    bid_id,
                    region,
                })
            }),
            Outcome::Fail if own => violations.push(violation(|bidder, bid_id, region| {
                Violation::RejectedBidPresent {
                    bidder,
                    bid_id,
                    region,
                }
            })),
            _ => {}
        }
    }
    violations
}

/// Check a history against the surviving Regions' final states and the users' last views.
/// `lost` holds the bid copies a Region lost for good took with it (empty unless a
/// `never-returns` fault struck): exactly those may be missing, nothing else.
pub fn check(
    ops: &[Op],
    regions: &[FinalState],
    converged: bool,
    users: &[UserEnd],
    lost: &Lost,
) -> Vec<Violation> {
    check_counting_excuses(ops, regions, converged, users, lost).0
}

/// [`check`], with what it forgave counted by name.
pub fn check_counting_excuses(
    ops: &[Op],
    regions: &[FinalState],
    converged: bool,
    users: &[UserEnd],
    lost: &Lost,
) -> (Vec<Violation>, Excused) {
    let mut excused = Excused::new();
    let mut violations = Vec::new();
    let mut by_key: BTreeMap<BidKey, Vec<&Op>> = BTreeMap::new();
    for op in ops {
        by_key
            .entry((op.user.clone(), op.bid_id.clone()))
            .or_default()
            .push(op);
    }
    let max_acknowledged = ops
        .iter()
        .filter(|op| op.outcome() == Outcome::Ok)
        .map(|op| op.amount)
        .max();
    for state in regions {
        let region = state.region.clone();
        violations.extend(acknowledged_and_rejected(ops, state, lost, &mut excused));
        for ((bidder, bid_id), records) in &state.bids {
            let key = (bidder.clone(), bid_id.clone());
            let ops_here = by_key.get(&key).map(Vec::as_slice).unwrap_or_default();
            for record in records {
                if !ops_here.iter().any(|op| op.amount == record.amount) {
                    violations.push(Violation::UnexplainedRecord {
                        bidder: bidder.clone(),
                        bid_id: bid_id.clone(),
                        region: region.clone(),
                    });
                }
            }
        }
        // The winner is a function of the bids the Region holds, with no excuse: a summary
        // that arrived before its copy carries its high bid whole (wsdr_core::held_bids).
        let expected = state.expected_high();
        if !state.winner_readable {
            violations.push(Violation::WinnerUnreadable {
                region: region.clone(),
            });
        }
        if state.high != expected {
            violations.push(Violation::HighBidWrong {
                region: region.clone(),
                expected,
                actual: state.high.clone(),
            });
        }
        let max_recorded = state.high.as_ref().map(|h| h.2);
        if let (Some(high), Some(acked)) = (max_recorded, max_acknowledged) {
            if high > acked {
                // Only an operation whose answer the client never got may stand above every
                // acknowledged bid.
                let explained = state.bids.iter().any(|(key, records)| {
                    records.iter().any(|r| r.amount == high)
                        && by_key.get(key).is_some_and(|ops| {
                            ops.iter()
                                .any(|op| op.amount == high && op.outcome() == Outcome::Unknown)
                        })
                });
                if !explained {
                    violations.push(Violation::HighAboveAcknowledged {
                        region: region.clone(),
                        amount: high,
                    });
                }
            }
        }
        let count_ok = if lost.is_empty() {
            state.bid_count == state.copies as u64
        } else {
            // Counted by a lost Region's summary, copies never delivered: at most the lost ones.
            let within = (state.copies as u64..=(state.copies + lost.len()) as u64)
                .contains(&state.bid_count);
            if within {
                excuse(
                    &mut excused,
                    Excuse::CountedCopiesLostWithRegion,
                    (state.bid_count - state.copies as u64) as usize,
                );
            }
            within
        };
        if !count_ok {
            violations.push(Violation::BidCountWrong {
                region: region.clone(),
                count: state.bid_count,
                copies: state.copies,
            });
        }
    }
    if !converged || regions.windows(2).any(|w| w[0].bids != w[1].bids) {
        violations.push(Violation::NotConverged);
    }
    if regions.windows(2).any(|w| w[0].high != w[1].high) {
        violations.push(Violation::WinnersDiffer);
    }
    let actual = regions.first().and_then(|r| r.high.as_ref().map(|h| h.2));
    for user in users {
        if user.views_backwards > 0 {
            violations.push(Violation::ViewWentBackwards {
                user: user.user.clone(),
                times: user.views_backwards,
            });
        }
        if user.highs_lowered > 0 {
            violations.push(Violation::HighWentDown {
                user: user.user.clone(),
                times: user.highs_lowered,
            });
        }
        if let Some(pushed) = user.high_before_resync {
            if pushed != actual {
                violations.push(Violation::PushMissed {
                    user: user.user.clone(),
                    pushed,
                    actual,
                });
            }
        }
        if !user.connected {
            violations.push(Violation::UserNotConnected {
                user: user.user.clone(),
            });
        } else if user.high_seen != actual {
            violations.push(Violation::UserStale {
                user: user.user.clone(),
                seen: user.high_seen,
                actual,
            });
        }
        if user.connected {
            check_own_bids(user, regions, &mut violations);
        }
    }
    (violations, excused)
}

/// The user's own bids as `region` must list them: (at, bidId, amount), newest first (then
/// by bidId, descending), at most [`wsdr_protocol::limits::OWN_BIDS_MAX`].
pub fn own_bids_in(state: &FinalState, user: &str) -> Vec<(u64, String, u64)> {
    let mut bids: Vec<(u64, String, u64)> = state
        .bids
        .iter()
        .filter(|((bidder, _), _)| bidder == user)
        .flat_map(|((_, id), records)| records.iter().map(move |r| (r.at, id.clone(), r.amount)))
        .collect();
    bids.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.cmp(&a.1)));
    bids.truncate(wsdr_protocol::limits::OWN_BIDS_MAX);
    bids
}

/// `you.bids` and `you.lastBid` of the user's final state against the serving Region's
/// records (a Region lost for good served nobody's final state).
pub fn check_own_bids(user: &UserEnd, regions: &[FinalState], violations: &mut Vec<Violation>) {
    let Some(state) = user
        .served_by
        .as_ref()
        .and_then(|name| regions.iter().find(|r| &r.region == name))
    else {
        return;
    };
    let expected = own_bids_in(state, &user.user);
    let held: std::collections::BTreeSet<(&str, u64)> = expected
        .iter()
        .map(|(_, id, a)| (id.as_str(), *a))
        .collect();
    let listed: std::collections::BTreeSet<(&str, u64)> = user
        .own_bids
        .iter()
        .map(|(id, a)| (id.as_str(), *a))
        .collect();
    if held != listed {
        violations.push(Violation::OwnBidsWrong {
            user: user.user.clone(),
            region: state.region.clone(),
            missing: held
                .difference(&listed)
                .map(|(id, _)| (*id).to_owned())
                .collect(),
            unexplained: listed
                .difference(&held)
                .map(|(id, _)| (*id).to_owned())
                .collect(),
        });
    }
    // Equal `at` and bidId (one bidId, two amounts) may come in either order.
    let latest: Vec<(String, u64)> = expected
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
            region: state.region.clone(),
            expected: latest.first().cloned(),
            actual: user.last_bid.clone(),
        });
    }
}

/// Drop what a lost Region's undelivered summaries explain (see [`lost_summaries`] and
/// docs/DATA_MODEL.md, "After a Region is lost for good"): a `bid_count_wrong` below the
/// copies by at most that many, and a `high_bid_wrong` whose served high is *below* the one
/// the records pick (the higher copy arrived without the summary that would name it). With
/// no summary lost, nothing is excused.
pub fn excuse_lost_summaries(
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
                (Some(e), Some(a)) => a.2 < e.2,
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

    #[test]
    fn a_count_below_the_copies_is_excused_only_by_lost_summaries() {
        let wrong = |count, copies| Violation::BidCountWrong {
            region: "us-west-2".into(),
            count,
            copies,
        };
        let mut v = vec![wrong(114, 115), wrong(110, 115), wrong(116, 115)];
        excuse_lost_summaries(&mut v, 1, &mut Excused::new());
        assert_eq!(v, vec![wrong(110, 115), wrong(116, 115)]);
        let mut none = vec![wrong(114, 115)];
        excuse_lost_summaries(&mut none, 0, &mut Excused::new());
        assert_eq!(none.len(), 1);
        let high = |expected: u64, actual: u64| Violation::HighBidWrong {
            region: "us-west-2".into(),
            expected: Some(("a".into(), "b1".into(), expected)),
            actual: Some(("b".into(), "b2".into(), actual)),
        };
        let mut highs = vec![high(500, 400), high(400, 500)];
        excuse_lost_summaries(&mut highs, 2, &mut Excused::new());
        assert_eq!(
            highs,
            vec![high(400, 500)],
            "only a served high below the records'"
        );
    }

    fn op(user: &str, id: &str, amount: u64, answers: &[(Answer, bool)]) -> Op {
        Op {
            user: user.into(),
            auction: "lot-1".into(),
            bid_id: id.into(),
            amount,
            invoked_ms: 0.0,
            answers: answers
                .iter()
                .map(|(a, replayed)| (1.0, *a, "r".to_owned(), *replayed))
                .collect(),
        }
    }

    /// A Region holding (bid id, bidder, amount) records, each with `at` = its position, and
    /// serving the high bid the rule picks.
    fn state(region: &str, bids: &[(&str, &str, u64)]) -> FinalState {
        let mut map: BTreeMap<BidKey, Vec<Record>> = BTreeMap::new();
        for (at, (id, u, a)) in bids.iter().enumerate() {
            map.entry((u.to_string(), id.to_string()))
                .or_default()
                .push(Record {
                    amount: *a,
                    at: at as u64,
                });
        }
        let mut s = FinalState {
            region: region.into(),
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
            user: "u".into(),
            auction: "lot-1".into(),
            connected: true,
            high_seen: high,
            high_before_resync: Some(high),
            views_backwards: 0,
            highs_lowered: 0,
            served_by: None,
            own_bids: Vec::new(),
            last_bid: None,
        }
    }

    /// User `u`, served by `region`, listing `own` as its bids (newest first).
    fn bidder(region: &str, high: Option<u64>, own: &[(&str, u64)]) -> UserEnd {
        UserEnd {
            served_by: Some(region.into()),
            own_bids: own.iter().map(|(id, a)| (id.to_string(), *a)).collect(),
            last_bid: own.first().map(|(id, a)| (id.to_string(), *a)),
            ..user(high)
        }
    }

    #[test]
    fn own_bids_and_last_bid_that_match_the_serving_region_pass() {
        let ops = [
            op("u", "b1", 100, &[(Answer::Accepted, false)]),
            op("u", "b2", 120, &[(Answer::Accepted, false)]),
        ];
        let s = state("e", &[("b1", "u", 100), ("b2", "u", 120)]);
        let u = bidder("e", Some(120), &[("b2", 120), ("b1", 100)]);
        assert_eq!(check(&ops, &[s], true, &[u], &Lost::new()), vec![]);
    }

    #[test]
    fn own_bids_missing_or_foreign_are_reported() {
        let ops = [
            op("u", "b1", 100, &[(Answer::Accepted, false)]),
            op("u", "b2", 120, &[(Answer::Accepted, false)]),
            op("v", "b9", 90, &[(Answer::Accepted, false)]),
        ];
        let s = state("e", &[("b9", "v", 90), ("b1", "u", 100), ("b2", "u", 120)]);
        // b1 left out, someone else's b9 listed as the user's own.
        let u = bidder("e", Some(120), &[("b2", 120), ("b9", 90)]);
        let v = check(&ops, &[s], true, &[u], &Lost::new());
        assert!(
            v.contains(&Violation::OwnBidsWrong {
                user: "u".into(),
                region: "e".into(),
                missing: vec!["b1".into()],
                unexplained: vec!["b9".into()],
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
        let s = state("e", &[("b1", "u", 100), ("b2", "u", 120)]);
        let mut u = bidder("e", Some(120), &[("b2", 120), ("b1", 100)]);
        u.last_bid = Some(("b1".into(), 100));
        let v = check(
            &ops,
            std::slice::from_ref(&s),
            true,
            std::slice::from_ref(&u),
            &Lost::new(),
        );
        assert_eq!(
            v,
            vec![Violation::LastBidWrong {
                user: "u".into(),
                region: "e".into(),
                expected: Some(("b2".into(), 120)),
                actual: Some(("b1".into(), 100)),
            }]
        );
        u.last_bid = None;
        assert_eq!(check(&ops, &[s], true, &[u], &Lost::new()).len(), 1);
    }

    #[test]
    fn a_clean_history_passes() {
        let ops = [
            op("a", "b1", 100, &[(Answer::Accepted, false)]),
            op("b", "b2", 90, &[(Answer::Rejected, false)]),
            op("b", "b3", 120, &[]),
        ];
        let s = state("e", &[("b1", "a", 100), ("b3", "b", 120)]);
        let west = FinalState {
            region: "w".into(),
            ..s.clone()
        };
        assert_eq!(
            check(&ops, &[s, west], true, &[user(Some(120))], &Lost::new()),
            vec![]
        );
    }

    #[test]
    fn each_broken_guarantee_is_reported() {
        let ops = [
            op("a", "b1", 100, &[(Answer::Accepted, false)]),
            op("b", "b2", 150, &[(Answer::Rejected, false)]),
        ];
        // b1 missing in w, b2 (rejected) present, an invented record, a stale user.
        let east = state("e", &[("b1", "a", 100), ("b2", "b", 150), ("zz", "c", 1)]);
        let west = state("w", &[]);
        let v = check(&ops, &[east, west], true, &[user(Some(100))], &Lost::new());
        assert!(v.contains(&Violation::AcknowledgedBidMissing {
            bidder: "a".into(),
            bid_id: "b1".into(),
            region: "w".into()
        }));
        assert!(v.contains(&Violation::RejectedBidPresent {
            bidder: "b".into(),
            bid_id: "b2".into(),
            region: "e".into()
        }));
        assert!(v.contains(&Violation::UnexplainedRecord {
            bidder: "c".into(),
            bid_id: "zz".into(),
            region: "e".into()
        }));
        assert!(v.contains(&Violation::WinnersDiffer));
        assert!(v.contains(&Violation::HighAboveAcknowledged {
            region: "e".into(),
            amount: 150
        }));
        assert!(v.contains(&Violation::NotConverged));
        assert!(v.iter().any(|x| matches!(x, Violation::UserStale { .. })));
    }

    #[test]
    fn a_wrong_high_bid_or_count_is_reported() {
        let ops = [op("a", "b1", 100, &[(Answer::Accepted, false)])];
        let mut east = state("e", &[("b1", "a", 100)]);
        east.high = None;
        east.bid_count = 2;
        let v = check(&ops, &[east], true, &[], &Lost::new());
        assert!(v
            .iter()
            .any(|x| matches!(x, Violation::HighBidWrong { .. })));
        assert!(v
            .iter()
            .any(|x| matches!(x, Violation::BidCountWrong { .. })));
    }

    #[test]
    fn an_acknowledgement_from_a_region_without_quorum_throughout_is_reported() {
        use crate::world::{PerRegion, RegionId};
        let regions = PerRegion::new("e".to_owned(), "w".to_owned());
        let mut acked = op("a", "b1", 100, &[(Answer::Accepted, false)]);
        acked.invoked_ms = 10.0;
        acked.answers[0].0 = 20.0;
        acked.answers[0].2 = "e".into();
        // "e" lacked quorum from 5 to 30 ms.
        let lacked =
            |r: RegionId, from: f64, to: f64| r == RegionId::Primary && from >= 5.0 && to < 30.0;
        assert_eq!(
            acknowledged_without_quorum(std::slice::from_ref(&acked), &regions, lacked).len(),
            1
        );
        // Invoked before the loss: it may have been decided with the quorum.
        acked.invoked_ms = 1.0;
        assert!(acknowledged_without_quorum(&[acked.clone()], &regions, lacked).is_empty());
        // A redirect, or an answer after a reconnect, is not such an acknowledgement.
        acked.invoked_ms = 10.0;
        acked.answers[0].1 = Answer::Redirected;
        assert!(acknowledged_without_quorum(&[acked.clone()], &regions, lacked).is_empty());
        acked.answers[0] = (20.0, Answer::Accepted, "e".into(), true);
        assert!(acknowledged_without_quorum(&[acked], &regions, lacked).is_empty());
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
        let overwritten = state("e", &[("b1", "mallory", 200)]);
        let v = check(&ops, &[overwritten], true, &[], &Lost::new());
        assert!(v.contains(&Violation::AcknowledgedBidMissing {
            bidder: "alice".into(),
            bid_id: "b1".into(),
            region: "e".into()
        }));
        // Keyed by (bidder, bidId), both records stand and nothing is reported.
        let kept = state("e", &[("b1", "alice", 500), ("b1", "mallory", 200)]);
        assert_eq!(check(&ops, &[kept], true, &[], &Lost::new()), vec![]);
    }

    #[test]
    fn an_acknowledged_bid_with_another_amount_under_its_key_is_altered() {
        let ops = [op("alice", "b1", 500, &[(Answer::Accepted, false)])];
        let altered = state("e", &[("b1", "alice", 300)]);
        let v = check(&ops, &[altered], true, &[], &Lost::new());
        assert!(v
            .iter()
            .any(|x| matches!(x, Violation::AcknowledgedBidAltered { .. })));
    }

    #[test]
    fn the_wrong_winner_among_equal_amounts_is_reported() {
        let ops = [
            op("alice", "b1", 500, &[(Answer::Accepted, false)]),
            op("bob", "b2", 500, &[(Answer::Accepted, false)]),
        ];
        // alice's copy is the earlier one: she must win; a Region serving bob is wrong even
        // though the amount is right.
        let mut east = state("e", &[("b1", "alice", 500), ("b2", "bob", 500)]);
        assert_eq!(east.high, Some(("alice".into(), "b1".into(), 500)));
        east.high = Some(("bob".into(), "b2".into(), 500));
        let v = check(&ops, &[east], true, &[], &Lost::new());
        assert!(v
            .iter()
            .any(|x| matches!(x, Violation::HighBidWrong { .. })));
    }

    #[test]
    fn regions_serving_different_winners_are_reported() {
        let ops = [op("alice", "b1", 500, &[(Answer::Accepted, false)])];
        let east = state("e", &[("b1", "alice", 500)]);
        let mut west = east.clone();
        west.region = "w".into();
        west.high = None;
        let v = check(&ops, &[east, west], true, &[], &Lost::new());
        assert!(v.contains(&Violation::WinnersDiffer));
    }

    #[test]
    fn a_count_that_is_not_the_copies_is_reported() {
        let ops = [op("alice", "b1", 500, &[(Answer::Accepted, false)])];
        let mut east = state("e", &[("b1", "alice", 500)]);
        east.copies = 2; // a second copy the summaries never counted
        let v = check(&ops, &[east], true, &[], &Lost::new());
        assert!(v
            .iter()
            .any(|x| matches!(x, Violation::BidCountWrong { .. })));
    }

    #[test]
    fn a_subscriber_whose_pushes_never_brought_the_high_bid_is_reported() {
        let ops = [op("a", "b1", 100, &[(Answer::Accepted, false)])];
        let east = state("e", &[("b1", "a", 100)]);
        let mut u = user(Some(100));
        u.high_before_resync = Some(None); // connected, but no push ever showed the bid
        let v = check(&ops, std::slice::from_ref(&east), true, &[u], &Lost::new());
        assert!(v.iter().any(|x| matches!(x, Violation::PushMissed { .. })));
        // Not connected before the resync: nothing to say about its pushes.
        let mut away = user(Some(100));
        away.high_before_resync = None;
        assert_eq!(check(&ops, &[east], true, &[away], &Lost::new()), vec![]);
    }

    #[test]
    fn a_view_going_backwards_is_reported() {
        let ops = [op("a", "b1", 100, &[(Answer::Accepted, false)])];
        let east = state("e", &[("b1", "a", 100)]);
        let mut u = user(Some(100));
        u.views_backwards = 2;
        let v = check(&ops, &[east], true, &[u], &Lost::new());
        assert!(v.contains(&Violation::ViewWentBackwards {
            user: "u".into(),
            times: 2
        }));
    }

    #[test]
    fn a_user_left_disconnected_or_stale_is_reported() {
        let ops = [op("a", "b1", 100, &[(Answer::Accepted, false)])];
        let east = state("e", &[("b1", "a", 100)]);
        let mut gone = user(Some(100));
        gone.connected = false;
        let stale = user(Some(90));
        let v = check(&ops, &[east], true, &[gone, stale], &Lost::new());
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
        let survivor = state("w", &[]);
        let lost: Lost = [("a".to_owned(), "b1".to_owned(), 100)]
            .into_iter()
            .collect();
        let v = check(&ops, std::slice::from_ref(&survivor), true, &[], &lost);
        // b1 is excused (its only copy was lost), b2 is not.
        assert_eq!(
            v,
            vec![Violation::AcknowledgedBidMissing {
                bidder: "b".into(),
                bid_id: "b2".into(),
                region: "w".into()
            }]
        );
        assert_eq!(lost_acknowledged(&ops, &[survivor], &lost), 1);
    }

    #[test]
    fn a_high_bid_above_every_acknowledged_one_is_reported_unless_unanswered() {
        let ops = [
            op("a", "b1", 100, &[(Answer::Accepted, false)]),
            op("b", "b2", 150, &[]), // never answered: may stand
        ];
        let east = state("e", &[("b1", "a", 100), ("b2", "b", 150)]);
        assert_eq!(
            check(&ops, &[east], true, &[user(Some(150))], &Lost::new()),
            vec![]
        );
        let invented = [op("a", "b1", 100, &[(Answer::Accepted, false)])];
        let east = state("e", &[("b1", "a", 100), ("b2", "b", 150)]);
        let v = check(&invented, &[east], true, &[], &Lost::new());
        assert!(v
            .iter()
            .any(|x| matches!(x, Violation::HighAboveAcknowledged { .. })));
    }
}
