//! The chaos campaign's history checker: every client operation as it was invoked and
//! answered, checked against both Regions' final state.
//!
//! An operation's outcome is what the client can know:
//! - **ok**: some answer was `accepted` or `duplicate`: the bid must be in both Regions;
//! - **fail**: exactly one answer, `rejected`, and no reconnect between the invoke and the
//!   answer (so the bid was never replayed elsewhere), or the client dropped it unsent
//!   (expired in the offline queue): the bid must be in neither Region;
//! - **unknown**: anything else (no answer, or a rejection after a replay): either is fine.

use serde::Serialize;
use std::collections::BTreeMap;

/// How a Region answered one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    Accepted,
    Duplicate,
    Rejected,
    /// Queued while offline and dropped unsent by the client (too old): never sent anywhere.
    Expired,
}

/// One bid as a client made it.
#[derive(Debug, Clone, Serialize)]
pub struct Op {
    pub user: String,
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
            || (self.answers.len() == 1 && !self.answers[0].3)
        {
            Outcome::Fail
        } else {
            Outcome::Unknown
        }
    }
}

/// One Region's final state of the auction.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FinalState {
    pub region: String,
    /// bid id -> (bidder, amount)
    pub bids: BTreeMap<String, (String, u64)>,
    /// (bid id, amount) of the high bid.
    pub high: Option<(String, u64)>,
    pub bid_count: u64,
}

/// What a user saw after the final resync.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UserEnd {
    pub user: String,
    pub connected: bool,
    /// The high bid amount in the state the user was last served.
    pub high_seen: Option<u64>,
}

/// A broken guarantee.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Violation {
    AcknowledgedBidMissing {
        bid_id: String,
        region: String,
    },
    AcknowledgedBidAltered {
        bid_id: String,
        region: String,
    },
    /// A record no operation explains (or not its user and amount): applied twice or invented.
    UnexplainedRecord {
        bid_id: String,
        region: String,
    },
    RejectedBidPresent {
        bid_id: String,
        region: String,
    },
    /// The high bid is not the highest recorded bid, or the bid count is not the records'.
    HighBidWrong {
        region: String,
        expected: Option<u64>,
        actual: Option<u64>,
    },
    /// A recorded bid above every acknowledged one that no unanswered operation explains.
    HighAboveAcknowledged {
        region: String,
        amount: u64,
    },
    BidCountWrong {
        region: String,
        count: u64,
        records: usize,
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
}

impl Violation {
    /// The bid the violation is about, if any (to print the minimal history).
    pub fn bid_id(&self) -> Option<&str> {
        match self {
            Violation::AcknowledgedBidMissing { bid_id, .. }
            | Violation::AcknowledgedBidAltered { bid_id, .. }
            | Violation::UnexplainedRecord { bid_id, .. }
            | Violation::RejectedBidPresent { bid_id, .. } => Some(bid_id),
            _ => None,
        }
    }
}

/// Check a history against both Regions' final states and the users' last views.
pub fn check(
    ops: &[Op],
    regions: &[FinalState],
    converged: bool,
    users: &[UserEnd],
) -> Vec<Violation> {
    let mut violations = Vec::new();
    let by_id: BTreeMap<&str, &Op> = ops.iter().map(|op| (op.bid_id.as_str(), op)).collect();
    let max_acknowledged = ops
        .iter()
        .filter(|op| op.outcome() == Outcome::Ok)
        .map(|op| op.amount)
        .max();
    for state in regions {
        let region = state.region.clone();
        for op in ops {
            let record = state.bids.get(&op.bid_id);
            match (op.outcome(), record) {
                (Outcome::Ok, None) => violations.push(Violation::AcknowledgedBidMissing {
                    bid_id: op.bid_id.clone(),
                    region: region.clone(),
                }),
                (Outcome::Ok, Some((bidder, amount)))
                    if *bidder != op.user || *amount != op.amount =>
                {
                    violations.push(Violation::AcknowledgedBidAltered {
                        bid_id: op.bid_id.clone(),
                        region: region.clone(),
                    })
                }
                (Outcome::Fail, Some(_)) => violations.push(Violation::RejectedBidPresent {
                    bid_id: op.bid_id.clone(),
                    region: region.clone(),
                }),
                _ => {}
            }
        }
        for (bid_id, (bidder, amount)) in &state.bids {
            let explained = by_id
                .get(bid_id.as_str())
                .is_some_and(|op| op.user == *bidder && op.amount == *amount);
            if !explained {
                violations.push(Violation::UnexplainedRecord {
                    bid_id: bid_id.clone(),
                    region: region.clone(),
                });
            }
        }
        let max_recorded = state.bids.values().map(|b| b.1).max();
        let actual = state.high.as_ref().map(|h| h.1);
        if actual != max_recorded {
            violations.push(Violation::HighBidWrong {
                region: region.clone(),
                expected: max_recorded,
                actual,
            });
        }
        if let (Some(high), Some(acked)) = (max_recorded, max_acknowledged) {
            if high > acked {
                // Only an operation whose answer the client never got may stand above every
                // acknowledged bid.
                let explained = state.bids.iter().any(|(id, b)| {
                    b.1 == high
                        && by_id
                            .get(id.as_str())
                            .is_some_and(|op| op.outcome() == Outcome::Unknown)
                });
                if !explained {
                    violations.push(Violation::HighAboveAcknowledged {
                        region: region.clone(),
                        amount: high,
                    });
                }
            }
        }
        if state.bid_count != state.bids.len() as u64 {
            violations.push(Violation::BidCountWrong {
                region: region.clone(),
                count: state.bid_count,
                records: state.bids.len(),
            });
        }
    }
    if !converged || regions.windows(2).any(|w| w[0].bids != w[1].bids) {
        violations.push(Violation::NotConverged);
    }
    let actual = regions.first().and_then(|r| r.high.as_ref().map(|h| h.1));
    for user in users {
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
    }
    violations
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn op(user: &str, id: &str, amount: u64, answers: &[(Answer, bool)]) -> Op {
        Op {
            user: user.into(),
            bid_id: id.into(),
            amount,
            invoked_ms: 0.0,
            answers: answers
                .iter()
                .map(|(a, replayed)| (1.0, *a, "r".to_owned(), *replayed))
                .collect(),
        }
    }

    fn state(region: &str, bids: &[(&str, &str, u64)]) -> FinalState {
        let bids: BTreeMap<String, (String, u64)> = bids
            .iter()
            .map(|(id, u, a)| (id.to_string(), (u.to_string(), *a)))
            .collect();
        let high = bids
            .iter()
            .max_by_key(|(_, b)| b.1)
            .map(|(id, b)| (id.clone(), b.1));
        FinalState {
            region: region.into(),
            bid_count: bids.len() as u64,
            bids,
            high,
        }
    }

    fn user(high: Option<u64>) -> UserEnd {
        UserEnd {
            user: "u".into(),
            connected: true,
            high_seen: high,
        }
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
        assert_eq!(check(&ops, &[s, west], true, &[user(Some(120))]), vec![]);
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
        let v = check(&ops, &[east, west], true, &[user(Some(100))]);
        assert!(v.contains(&Violation::AcknowledgedBidMissing {
            bid_id: "b1".into(),
            region: "w".into()
        }));
        assert!(v.contains(&Violation::RejectedBidPresent {
            bid_id: "b2".into(),
            region: "e".into()
        }));
        assert!(v.contains(&Violation::UnexplainedRecord {
            bid_id: "zz".into(),
            region: "e".into()
        }));
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
        let v = check(&ops, &[east], true, &[]);
        assert!(v
            .iter()
            .any(|x| matches!(x, Violation::HighBidWrong { .. })));
        assert!(v
            .iter()
            .any(|x| matches!(x, Violation::BidCountWrong { .. })));
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
    }
}
