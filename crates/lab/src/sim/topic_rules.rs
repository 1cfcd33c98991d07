//! The kit's rules, for any app whose ops the lab's users write to a topic (the chat room's
//! campaign; docs/RELIABILITY.md, "Kit rules"). They judge ops as the kit stores them, never
//! what an app makes of them: an acknowledged op is held by every surviving Region with its
//! own payload, every copy is one its author wrote, a write that failed for sure is held
//! nowhere, the Regions hold the same copies, every log is gapless, a rejection is final and
//! earned, and strong mode acknowledges nothing without its quorum. The auction's campaigns
//! and drills are judged by them too, over its bids as ops ([`crate::sim::judge`]). An app's own rules (the chat room's order, its members' views) are
//! beside its simulated users ([`crate::sim::chat`]).
//!
//! Pure: the trace in, violations and excuses out.

use crate::sim::history::{excuse, Answer, Excuse, Excused, Violation};
use crate::world::region_id::RegionId;
use crate::world::scale::AwsInstant;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use wsdr_core::UserId;
use wsdr_protocol::{Digest, OpId, OpView};

/// One write to a topic, as its author's app made it and heard of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Write {
    pub author: UserId,
    pub op_id: OpId,
    /// The digest of the payload this write carried (a reused op id is another write).
    pub digest: Digest,
    pub invoked: AwsInstant,
    pub answers: Vec<WriteReply>,
}

impl Write {
    /// An `accepted` or `duplicate` answer came: the op is recorded.
    pub fn acknowledged(&self) -> bool {
        self.answers.iter().any(|a| a.answer.acknowledges())
    }

    /// Neither acknowledged nor rejected for sure: every answer `unknown`, none, or lost.
    pub fn unknown(&self) -> bool {
        !self.acknowledged() && !self.answers.iter().any(|a| a.answer == Answer::Rejected)
    }

    /// Who wrote which op with which payload: the key its copies carry.
    pub fn key(&self) -> OpKey {
        (
            self.author.as_str().to_owned(),
            self.op_id.clone(),
            self.digest,
        )
    }

    /// Failed for sure, so no Region may hold it: expired unsent from the offline queue, or
    /// rejected by its only answer, on the connection it was sent on. A rejection after a
    /// reconnect may answer a replay of a send that committed before the drop (its first
    /// answer lost): that write is not known to have failed.
    pub fn failed(&self) -> bool {
        !self.acknowledged()
            && (self.answers.iter().any(|a| a.answer == Answer::Expired)
                || matches!(self.answers.as_slice(),
                    [only] if only.answer == Answer::Rejected && !only.reconnected))
    }
}

/// One answer to a write, as its client got it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WriteReply {
    pub at: AwsInstant,
    pub answer: Answer,
    pub reason: Option<String>,
    /// The Region that answered (`None`: the client dropped the write unsent).
    pub region: Option<RegionId>,
    /// The client had reconnected since the invoke: the answer may be to a replay.
    pub reconnected: bool,
}

/// What one surviving Region holds of the topic at the end of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RegionCopies {
    pub region: RegionId,
    /// Every copy, as the wire shows it (its `log` named).
    pub copies: Vec<OpView>,
}

/// A run's writes and the Regions' final copies of one topic.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TopicTrace {
    pub writes: Vec<Write>,
    pub regions: Vec<RegionCopies>,
    /// Copies Regions that never came back took with them (never replicated): the only
    /// losses the rules accept.
    pub lost: Vec<OpView>,
    /// Strong mode: one global log, and nothing acknowledged without a quorum.
    pub strong: bool,
}

/// Who wrote which op with which payload: the identity of a message across its copies.
pub type OpKey = (String, OpId, Digest);

pub fn op_key(copy: &OpView) -> OpKey {
    (copy.author.clone(), copy.op_id.clone(), copy.digest)
}

/// The rejection reasons a write to a topic may get (docs/PROTOCOL.md, `writeResult`): final
/// ones only (sending the op again cannot change them).
pub const FINAL_WRITE_REJECTIONS: &[&str] =
    &["op_id_reused", "too_long", "unknown_topic", "forbidden"];

/// Every kit rule over `trace`.
pub fn check(trace: &TopicTrace) -> (Vec<Violation>, Excused) {
    let (mut violations, excused) = check_copies(trace);
    violations.extend(rejections_final_and_earned(&trace.writes));
    (violations, excused)
}

/// The kit's rules over the copies the Regions hold (every rule but the rejections', which
/// needs each rejection's reason).
pub fn check_copies(trace: &TopicTrace) -> (Vec<Violation>, Excused) {
    let mut violations = Vec::new();
    let mut excused = Excused::new();
    violations.extend(acknowledged_present(trace, &mut excused));
    violations.extend(every_copy_written_by_its_author(trace));
    violations.extend(failed_writes_absent(trace));
    violations.extend(regions_equal(&trace.regions));
    for region in &trace.regions {
        violations.extend(logs_gapless(region, &trace.lost, &mut excused));
    }
    (violations, excused)
}

/// An acknowledged write is held by every surviving Region with its own payload, unless its
/// only copies were lost with a Region that never came back (the RPO, excused by name).
pub fn acknowledged_present(trace: &TopicTrace, excused: &mut Excused) -> Vec<Violation> {
    let lost: BTreeSet<OpKey> = trace.lost.iter().map(op_key).collect();
    let mut found = Vec::new();
    for region in &trace.regions {
        let held: BTreeSet<OpKey> = region.copies.iter().map(op_key).collect();
        for write in trace.writes.iter().filter(|w| w.acknowledged()) {
            let key = write.key();
            if held.contains(&key) {
                continue;
            }
            if lost.contains(&key) {
                excuse(excused, Excuse::LostWithRegion, 1);
            } else {
                found.push(Violation::AcknowledgedOpMissing {
                    author: write.author.clone(),
                    op_id: write.op_id.clone(),
                    region: region.region,
                });
            }
        }
    }
    found
}

/// Nobody writes as another, and nothing is invented or altered: every copy a Region holds
/// is a write its author's app made, with that write's payload.
pub fn every_copy_written_by_its_author(trace: &TopicTrace) -> Vec<Violation> {
    let written: BTreeSet<OpKey> = trace.writes.iter().map(Write::key).collect();
    trace
        .regions
        .iter()
        .flat_map(|region| {
            region
                .copies
                .iter()
                .filter(|copy| !written.contains(&op_key(copy)))
                .map(|copy| Violation::OpNotWritten {
                    author: copy.author.clone(),
                    op_id: copy.op_id.clone(),
                    region: region.region,
                })
        })
        .collect()
}

/// A write that failed for sure is held by no Region: an answer that says "rejected" never
/// turns out false.
pub fn failed_writes_absent(trace: &TopicTrace) -> Vec<Violation> {
    let failed: BTreeSet<OpKey> = trace
        .writes
        .iter()
        .filter(|w| w.failed())
        .map(Write::key)
        .collect();
    trace
        .regions
        .iter()
        .flat_map(|region| {
            let failed = &failed;
            region
                .copies
                .iter()
                .filter(move |copy| failed.contains(&op_key(copy)))
                .map(|copy| Violation::FailedOpPresent {
                    author: copy.author.clone(),
                    op_id: copy.op_id.clone(),
                    region: region.region,
                })
        })
        .collect()
}

/// A rejection is final, and earned: its reason is one sending again cannot change, and
/// `op_id_reused` only answers an author who did write that op id with another payload.
pub fn rejections_final_and_earned(writes: &[Write]) -> Vec<Violation> {
    let mut payloads: BTreeMap<(&UserId, &OpId), BTreeSet<Digest>> = BTreeMap::new();
    for write in writes {
        payloads
            .entry((&write.author, &write.op_id))
            .or_default()
            .insert(write.digest);
    }
    let mut found = Vec::new();
    for write in writes {
        for reply in write
            .answers
            .iter()
            .filter(|a| a.answer == Answer::Rejected)
        {
            let reason = reply.reason.clone().unwrap_or_default();
            let earned = match reason.as_str() {
                "op_id_reused" => payloads
                    .get(&(&write.author, &write.op_id))
                    .is_some_and(|digests| digests.len() > 1),
                other => FINAL_WRITE_REJECTIONS.contains(&other),
            };
            if !earned {
                found.push(Violation::OpRejectedWrongly {
                    author: write.author.clone(),
                    op_id: write.op_id.clone(),
                    reason,
                });
            }
        }
    }
    found
}

/// Every surviving Region holds the same copies (replication drained).
pub fn regions_equal(regions: &[RegionCopies]) -> Vec<Violation> {
    let Some((first, rest)) = regions.split_first() else {
        return Vec::new();
    };
    let keys = |r: &RegionCopies| -> BTreeSet<(OpKey, String, String, u64)> {
        r.copies
            .iter()
            .map(|c| (op_key(c), c.region.clone(), c.log.clone(), c.position))
            .collect()
    };
    let theirs = keys(first);
    rest.iter()
        .filter_map(|other| {
            let ours = keys(other);
            let differ = theirs.symmetric_difference(&ours).count();
            (differ > 0).then_some(Violation::CopiesDiffer {
                region: other.region,
                copies: differ,
            })
        })
        .collect()
}

/// Each log a Region holds is one count: one copy per position, and every position from 1 to
/// the highest held, except positions whose copy was lost with a Region that never came back
/// (excused by name). A log's positions are written in the same transaction as its count, so
/// a gap is a lost copy or a broken store.
pub fn logs_gapless(
    region: &RegionCopies,
    lost: &[OpView],
    excused: &mut Excused,
) -> Vec<Violation> {
    let lost: BTreeSet<(&str, u64)> = lost.iter().map(|c| (c.log.as_str(), c.position)).collect();
    let mut logs: BTreeMap<&str, BTreeMap<u64, BTreeSet<OpKey>>> = BTreeMap::new();
    for copy in &region.copies {
        logs.entry(copy.log.as_str())
            .or_default()
            .entry(copy.position)
            .or_default()
            .insert(op_key(copy));
    }
    let mut found = Vec::new();
    for (log, positions) in logs {
        for (position, ops) in &positions {
            if ops.len() > 1 {
                found.push(Violation::PositionTakenTwice {
                    region: region.region,
                    log: log.to_owned(),
                    position: *position,
                });
            }
        }
        let top = positions.keys().next_back().copied().unwrap_or(0);
        for position in 1..=top {
            if positions.contains_key(&position) {
                continue;
            }
            if lost.contains(&(log, position)) {
                excuse(excused, Excuse::PositionLostWithRegion, 1);
            } else {
                found.push(Violation::LogGap {
                    region: region.region,
                    log: log.to_owned(),
                    position,
                });
            }
        }
    }
    found
}

/// Strong mode: every copy a Region serves is in the one global log (`served`: the copies
/// the users' apps got, by the Region that served them; the lab's own reading of a store
/// names the log itself, so only what the service sent can break this).
pub fn one_global_log(served: &[RegionCopies]) -> Vec<Violation> {
    served
        .iter()
        .flat_map(|region| {
            region
                .copies
                .iter()
                .filter(|copy| copy.log != wsdr_core::model::LEDGER)
                .map(|copy| Violation::OpOutsideGlobalLog {
                    author: copy.author.clone(),
                    op_id: copy.op_id.clone(),
                    region: region.region,
                })
        })
        .collect()
}

/// Strong mode: no write acknowledged by a Region that had no quorum for the whole time
/// between its invoke and that answer (answers to replays after a reconnect aside: their
/// send time is unknown here).
pub fn acknowledged_without_quorum(
    writes: &[Write],
    lacked: impl Fn(RegionId, AwsInstant, AwsInstant) -> bool,
) -> Vec<Violation> {
    let mut found = Vec::new();
    for write in writes {
        for reply in &write.answers {
            if reply.reconnected || !reply.answer.acknowledges() {
                continue;
            }
            let Some(region) = reply.region else { continue };
            if lacked(region, write.invoked, reply.at) {
                found.push(Violation::OpAcknowledgedWithoutQuorum {
                    author: write.author.clone(),
                    op_id: write.op_id.clone(),
                    region,
                });
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn copy(author: &str, id: &str, text: &str, log: &str, position: u64) -> OpView {
        let op = serde_json::json!({ "text": text });
        OpView {
            author: author.into(),
            op_id: OpId::new(format!("op-id-{id}")).unwrap(),
            region: log.into(),
            position,
            log: log.into(),
            at: position,
            digest: Digest::of(&op).unwrap(),
            op,
        }
    }

    fn write(author: &str, id: &str, text: &str, answers: &[(Answer, Option<&str>)]) -> Write {
        Write {
            author: UserId::new(author).unwrap(),
            op_id: OpId::new(format!("op-id-{id}")).unwrap(),
            digest: Digest::of(&serde_json::json!({ "text": text })).unwrap(),
            invoked: AwsInstant::START,
            answers: answers
                .iter()
                .map(|(answer, reason)| WriteReply {
                    at: AwsInstant::START,
                    answer: *answer,
                    reason: reason.map(str::to_owned),
                    region: Some(RegionId::Primary),
                    reconnected: false,
                })
                .collect(),
        }
    }

    fn region(id: RegionId, copies: Vec<OpView>) -> RegionCopies {
        RegionCopies { region: id, copies }
    }

    #[test]
    fn an_acknowledged_op_is_held_with_its_own_payload_or_excused_only_when_lost() {
        let writes = vec![write("ann", "m1", "hi", &[(Answer::Accepted, None)])];
        let held = TopicTrace {
            writes: writes.clone(),
            regions: vec![region(
                RegionId::Secondary,
                vec![copy("ann", "m1", "hi", "e", 1)],
            )],
            ..TopicTrace::default()
        };
        assert_eq!(check(&held).0, vec![]);
        // Held with another payload: missing (and the other payload is no write of hers).
        let altered = TopicTrace {
            regions: vec![region(
                RegionId::Secondary,
                vec![copy("ann", "m1", "bye", "e", 1)],
            )],
            ..held.clone()
        };
        let (violations, _) = check(&altered);
        assert!(violations
            .iter()
            .any(|v| matches!(v, Violation::AcknowledgedOpMissing { .. })));
        assert!(violations
            .iter()
            .any(|v| matches!(v, Violation::OpNotWritten { .. })));
        // Gone with a Region that never came back: excused, counted.
        let lost = TopicTrace {
            regions: vec![region(RegionId::Secondary, vec![])],
            lost: vec![copy("ann", "m1", "hi", "e", 1)],
            ..held
        };
        let (violations, excused) = check(&lost);
        assert_eq!(violations, vec![]);
        assert_eq!(excused.get(&Excuse::LostWithRegion), Some(&1));
    }

    #[test]
    fn a_write_that_failed_for_sure_is_held_by_no_region() {
        let trace = |answers: &[(Answer, Option<&str>)], reconnected: bool| {
            let mut w = write("ann", "m1", "hi", answers);
            for reply in &mut w.answers {
                reply.reconnected = reconnected;
            }
            TopicTrace {
                writes: vec![w],
                regions: vec![region(
                    RegionId::Primary,
                    vec![copy("ann", "m1", "hi", "e", 1)],
                )],
                ..TopicTrace::default()
            }
        };
        // Rejected by its only answer on the connection it was sent on, or expired unsent.
        for answers in [
            &[(Answer::Rejected, Some("too_long"))][..],
            &[(Answer::Expired, None)][..],
        ] {
            assert_eq!(
                failed_writes_absent(&trace(answers, false)),
                vec![Violation::FailedOpPresent {
                    author: "ann".to_owned(),
                    op_id: OpId::new("op-id-m1").unwrap(),
                    region: RegionId::Primary
                }],
                "{answers:?}"
            );
        }
        // A rejection after a reconnect may answer a replay of a send that committed; a
        // rejection beside an acknowledgement, or a second answer, is no certain failure.
        for (answers, reconnected) in [
            (&[(Answer::Rejected, Some("too_long"))][..], true),
            (
                &[
                    (Answer::Rejected, Some("too_long")),
                    (Answer::Duplicate, None),
                ][..],
                false,
            ),
            (
                &[
                    (Answer::Unknown, None),
                    (Answer::Rejected, Some("too_long")),
                ][..],
                false,
            ),
        ] {
            assert_eq!(
                failed_writes_absent(&trace(answers, reconnected)),
                vec![],
                "{answers:?}"
            );
        }
        // Another payload under the same op id is another write.
        let mut other = trace(&[(Answer::Rejected, Some("op_id_reused"))], false);
        other.writes[0].digest = Digest::of(&serde_json::json!({ "text": "other" })).unwrap();
        assert_eq!(failed_writes_absent(&other), vec![]);
    }

    #[test]
    fn op_id_reused_is_earned_only_by_an_author_who_reused_it() {
        let honest = write(
            "ann",
            "m1",
            "hi",
            &[(Answer::Rejected, Some("op_id_reused"))],
        );
        assert_eq!(
            rejections_final_and_earned(std::slice::from_ref(&honest)).len(),
            1
        );
        let reused = write("ann", "m1", "other", &[(Answer::Accepted, None)]);
        assert_eq!(rejections_final_and_earned(&[honest, reused]), vec![]);
        let retryable = write("bo", "m2", "x", &[(Answer::Rejected, Some("throttled"))]);
        assert_eq!(rejections_final_and_earned(&[retryable]).len(), 1);
        let long = write("bo", "m3", "x", &[(Answer::Rejected, Some("too_long"))]);
        assert_eq!(rejections_final_and_earned(&[long]), vec![]);
    }

    #[test]
    fn regions_differ_by_any_copy_and_a_log_has_no_gap_nor_a_position_twice() {
        let a = region(RegionId::Primary, vec![copy("ann", "m1", "hi", "e", 1)]);
        let b = region(
            RegionId::Secondary,
            vec![
                copy("ann", "m1", "hi", "e", 1),
                copy("bo", "n1", "yo", "w", 1),
            ],
        );
        assert_eq!(
            regions_equal(&[a.clone(), b.clone()]),
            vec![Violation::CopiesDiffer {
                region: RegionId::Secondary,
                copies: 1
            }]
        );
        assert_eq!(regions_equal(&[a.clone(), a.clone()]), vec![]);
        let gap = region(
            RegionId::Primary,
            vec![
                copy("ann", "m1", "hi", "e", 1),
                copy("ann", "m3", "x", "e", 3),
            ],
        );
        let mut excused = Excused::new();
        assert_eq!(
            logs_gapless(&gap, &[], &mut excused),
            vec![Violation::LogGap {
                region: RegionId::Primary,
                log: "e".into(),
                position: 2
            }]
        );
        assert_eq!(
            logs_gapless(&gap, &[copy("ann", "m2", "y", "e", 2)], &mut excused),
            vec![]
        );
        assert_eq!(excused.get(&Excuse::PositionLostWithRegion), Some(&1));
        let twice = region(
            RegionId::Primary,
            vec![
                copy("ann", "m1", "hi", "e", 1),
                copy("bo", "n1", "yo", "e", 1),
            ],
        );
        assert_eq!(
            logs_gapless(&twice, &[], &mut excused),
            vec![Violation::PositionTakenTwice {
                region: RegionId::Primary,
                log: "e".into(),
                position: 1
            }]
        );
    }

    #[test]
    fn strong_mode_holds_every_copy_in_the_global_log() {
        let regional = region(RegionId::Primary, vec![copy("ann", "m1", "hi", "e", 1)]);
        assert_eq!(one_global_log(std::slice::from_ref(&regional)).len(), 1);
        let global = region(
            RegionId::Primary,
            vec![copy("ann", "m1", "hi", "global", 1)],
        );
        assert_eq!(one_global_log(&[global]), vec![]);
        let writes = [write("ann", "m1", "hi", &[(Answer::Accepted, None)])];
        assert_eq!(
            acknowledged_without_quorum(&writes, |_, _, _| true).len(),
            1
        );
        assert_eq!(
            acknowledged_without_quorum(&writes, |_, _, _| false),
            vec![]
        );
    }
}
