//! The laws an app on the kit keeps, and a harness its own tests call to check them
//! (docs/KIT.md, "What the app must keep"). The kit's guarantees hold by the shape of the
//! data only if the app's parts are functions of what they are given:
//!
//! - **ops read back**: an op parses, and its stored form parses to the same stored form
//!   (so a replay's digest is the first send's);
//! - **seeds and summaries read back**: the stored seed decodes, and every summary, stored and
//!   read again, is the same summary (a Region reads back what it wrote, the other Region
//!   what replication brought);
//! - **folds and decisions are pure**: the same summary, copy and op fold to the same summary,
//!   and the same decision comes of the same inputs, however often asked;
//! - **the view is order-free**: it is a function of the set of Regions' summaries, whatever
//!   order they arrived in (every Region shows the same once converged);
//! - **carried ops are folded ops**: an op a summary carries whole is a copy that Region
//!   folded, with its author, op id, payload and position;
//! - **a log delivers something**: a `Delivery::Log` carries at least one op in a read and in
//!   a push.
//!
//! The harness folds a sample of ops in two Regions, alternately, as they would be accepted,
//! and checks each law on the way; it returns the first law broken, with what broke it.

use crate::items::{StoredOp, StoredSummary};
use crate::model::UserId;
use crate::topics::{Delivery, TopicApp};
use serde_json::Value as Json;
use wsdr_protocol::{Digest, OpId, Topic};

/// A law an app broke, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    pub law: &'static str,
    pub detail: String,
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.law, self.detail)
    }
}

fn broken(law: &'static str, detail: impl Into<String>) -> Broken {
    Broken {
        law,
        detail: detail.into(),
    }
}

/// The two Regions the sample is accepted in.
const REGIONS: [&str; 2] = ["region-a", "region-b"];

/// Check every law on `app` with one topic's stored seed and a sample of ops, each
/// `(author, op)` as a client would write it. The ops are accepted alternately in two Regions
/// (the first in `region-a`), each Region folding its own in order, every one the app's
/// decision allowed; the sample should hold ops the app accepts.
pub fn check<A: TopicApp>(
    app: &A,
    topic: &Topic,
    stored_meta: &Json,
    sample: &[(&str, Json)],
) -> Result<(), Broken> {
    let meta = app.meta(topic, stored_meta).map_err(|e| {
        broken(
            "seeds read back",
            format!("the stored seed does not decode: {e}"),
        )
    })?;
    if let Delivery::Log {
        tail, push_tail, ..
    } = app.delivery()
    {
        if tail == 0 || push_tail == 0 {
            return Err(broken(
                "a log delivers something",
                format!("tail {tail}, push tail {push_tail}: both must be at least 1"),
            ));
        }
    }
    let mut summaries = [app.empty_summary(), app.empty_summary()];
    let mut counts = [0u64; 2];
    let mut folded: [Vec<StoredOp>; 2] = [Vec::new(), Vec::new()];
    round_trip(app, topic, REGIONS[0], 0, &summaries[0])?;
    for (i, (author, json)) in sample.iter().enumerate() {
        let op = app.parse_op(json).map_err(|e| {
            broken(
                "ops read back",
                format!("op {i} does not parse: {}", e.message),
            )
        })?;
        let stored = app.op_json(&op);
        let again = app.parse_op(&stored).map_err(|e| {
            broken(
                "ops read back",
                format!(
                    "op {i}'s stored form {stored} does not parse: {}",
                    e.message
                ),
            )
        })?;
        if app.op_json(&again) != stored {
            return Err(broken(
                "ops read back",
                format!(
                    "op {i}'s stored form {stored} reads back as {}",
                    app.op_json(&again)
                ),
            ));
        }
        let digest = Digest::of(&stored).map_err(|e| {
            broken(
                "ops read back",
                format!("op {i}'s stored form has no canonical JSON: {}", e.message),
            )
        })?;
        let r = i % 2;
        let decided = app.decide(&meta, &summaries, &op);
        let twice = app.decide(&meta, &summaries, &op);
        if decided.is_err() != twice.is_err()
            || decided
                .err()
                .zip(twice.err())
                .is_some_and(|(a, b)| app.reject_code(a) != app.reject_code(b))
        {
            return Err(broken(
                "decisions are pure",
                format!("op {i} was decided two ways on the same summaries"),
            ));
        }
        if decided.is_err() {
            continue;
        }
        counts[r] += 1;
        let author = UserId::new(*author)
            .map_err(|e| broken("ops read back", format!("op {i}'s author: {e}")))?;
        let copy = StoredOp {
            topic: topic.clone(),
            author,
            op_id: OpId::new(format!("law-op-{i:06}"))
                .map_err(|e| broken("ops read back", e.message))?,
            region: REGIONS[r].to_owned(),
            // Any distinct times will do: no law reads them.
            at: i as u64,
            position: counts[r],
            digest,
            op: stored,
        };
        let next = app
            .fold(&summaries[r], &copy, &op)
            .map_err(|e| broken("folds are pure", format!("op {i} does not fold: {e}")))?;
        let again = app
            .fold(&summaries[r], &copy, &op)
            .map_err(|e| broken("folds are pure", format!("op {i} does not fold: {e}")))?;
        if app.summary_json(&next) != app.summary_json(&again) {
            return Err(broken(
                "folds are pure",
                format!("op {i} folded two ways into the same summary"),
            ));
        }
        round_trip(app, topic, REGIONS[r], counts[r], &next)?;
        folded[r].push(copy);
        summaries[r] = next;
        for held in app.carried(topic, &summaries[r]) {
            let is_folded = folded[r].iter().any(|c| {
                c.author == held.author
                    && c.op_id == held.op_id
                    && c.digest == held.digest
                    && c.region == held.region
                    && c.position == held.position
            });
            if !is_folded {
                return Err(broken(
                    "carried ops are folded ops",
                    format!(
                        "after op {i}, {}'s summary carries {} by {} (position {}), which it did not fold",
                        REGIONS[r], held.op_id, held.author, held.position
                    ),
                ));
            }
        }
        let seen = |order: [usize; 2]| -> Vec<(StoredSummary, A::Summary)> {
            order
                .iter()
                .filter(|&&k| counts[k] > 0)
                .map(|&k| {
                    let stored = StoredSummary {
                        region: REGIONS[k].to_owned(),
                        accepted: counts[k],
                        app: app.summary_json(&summaries[k]),
                    };
                    let read = app.summary(topic, &stored);
                    (stored, read)
                })
                .filter_map(|(stored, read)| read.ok().map(|s| (stored, s)))
                .collect()
        };
        let (forwards, backwards) = (seen([0, 1]), seen([1, 0]));
        if app.view(&meta, &forwards) != app.view(&meta, &backwards) {
            return Err(broken(
                "the view is order-free",
                format!(
                    "after op {i}, the view of the two Regions' summaries depends on their order"
                ),
            ));
        }
    }
    Ok(())
}

/// A summary stored and read back is the same summary.
fn round_trip<A: TopicApp>(
    app: &A,
    topic: &Topic,
    region: &str,
    accepted: u64,
    summary: &A::Summary,
) -> Result<(), Broken> {
    let stored = StoredSummary {
        region: region.to_owned(),
        accepted,
        app: app.summary_json(summary),
    };
    let read = app.summary(topic, &stored).map_err(|e| {
        broken(
            "summaries read back",
            format!("{region}'s summary after {accepted} ops does not read back: {e}"),
        )
    })?;
    if app.summary_json(&read) != stored.app {
        return Err(broken(
            "summaries read back",
            format!(
                "{region}'s summary after {accepted} ops, {}, reads back as {}",
                stored.app,
                app.summary_json(&read)
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The harness finds each kind of lawless app: a counter whose parts break one law each.
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::write::App;
    use crate::TopicKey;
    use serde_json::json;
    use wsdr_protocol::{ErrorCode, Namespace, ProtocolError};

    /// Which law the counter breaks.
    #[derive(Clone, Copy, PartialEq)]
    enum Flaw {
        None,
        ViewByOrder,
        SummaryLosesCount,
        CarriesAStranger,
        OpReadsBackOtherwise,
        FoldByClock,
        DecideByClock,
        EmptyLog,
    }

    /// An app counting ops per Region: its summary is `{"n": count, "last": op}`.
    struct Counter(Flaw);

    impl App for Counter {
        type Meta = ();
        type Op = i64;
        type Summary = (u64, Option<StoredOp>);
        type Reject = ();
        fn op_json(&self, op: &i64) -> Json {
            if self.0 == Flaw::OpReadsBackOtherwise {
                json!({ "n": op + 1 })
            } else {
                json!({ "n": op })
            }
        }
        fn summary(&self, _: &TopicKey, stored: &StoredSummary) -> crate::Result<Self::Summary> {
            let n = stored.app["n"].as_u64().unwrap_or(0);
            let n = if self.0 == Flaw::SummaryLosesCount {
                n.saturating_sub(1)
            } else {
                n
            };
            Ok((n, None))
        }
        fn summary_json(&self, summary: &Self::Summary) -> Json {
            json!({ "n": summary.0 })
        }
        fn empty_summary(&self) -> Self::Summary {
            (0, None)
        }
        fn admit(&self, _: &(), _: u64) -> Result<(), ()> {
            Ok(())
        }
        fn decide(&self, _: &(), _: &[Self::Summary], op: &i64) -> Result<(), ()> {
            static CLOCK: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let odd = CLOCK.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 2 == 1;
            if *op < 0 || (self.0 == Flaw::DecideByClock && odd) {
                Err(())
            } else {
                Ok(())
            }
        }
        fn carried(&self, topic: &TopicKey, summary: &Self::Summary) -> Vec<StoredOp> {
            match (self.0, &summary.1) {
                (Flaw::CarriesAStranger, Some(last)) => vec![StoredOp {
                    author: UserId::new("stranger").unwrap(),
                    topic: topic.clone(),
                    ..last.clone()
                }],
                (_, Some(last)) => vec![last.clone()],
                _ => Vec::new(),
            }
        }
        fn fold(
            &self,
            own: &Self::Summary,
            copy: &StoredOp,
            _: &i64,
        ) -> crate::Result<Self::Summary> {
            static CLOCK: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let extra = if self.0 == Flaw::FoldByClock {
                CLOCK.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 2
            } else {
                0
            };
            Ok((own.0 + 1 + extra, Some(copy.clone())))
        }
    }

    impl TopicApp for Counter {
        fn namespace(&self) -> Namespace {
            Namespace::new("counter").unwrap()
        }
        fn parse_op(&self, op: &Json) -> std::result::Result<i64, ProtocolError> {
            op["n"]
                .as_i64()
                .ok_or_else(|| ProtocolError::new(ErrorCode::InvalidField, "an op is {\"n\": int}"))
        }
        fn meta(&self, _: &TopicKey, _: &Json) -> crate::Result<()> {
            Ok(())
        }
        fn reject_code(&self, _: ()) -> &'static str {
            "negative"
        }
        fn view(&self, _: &(), seen: &[(StoredSummary, Self::Summary)]) -> Json {
            if self.0 == Flaw::ViewByOrder {
                json!(seen
                    .iter()
                    .map(|(s, _)| s.region.clone())
                    .collect::<Vec<_>>())
            } else {
                json!(seen.iter().map(|(_, s)| s.0).sum::<u64>())
            }
        }
        fn delivery(&self) -> Delivery {
            let tail = if self.0 == Flaw::EmptyLog { 0 } else { 5 };
            Delivery::Log {
                tail,
                push_tail: 5,
                push_window_ms: 1_000,
            }
        }
    }

    fn sample() -> Vec<(&'static str, Json)> {
        vec![
            ("ann", json!({ "n": 1 })),
            ("bo", json!({ "n": 2 })),
            ("ann", json!({ "n": -1 })),
            ("cy", json!({ "n": 3 })),
        ]
    }

    fn law_of(flaw: Flaw) -> Option<&'static str> {
        let topic = Topic::parse("counter:c").unwrap();
        check(&Counter(flaw), &topic, &json!({}), &sample())
            .err()
            .map(|b| b.law)
    }

    #[test]
    fn the_view_is_judged_once_two_regions_hold_summaries_and_a_break_reads_as_law_and_detail() {
        let topic = Topic::parse("counter:c").unwrap();
        let broken = check(&Counter(Flaw::ViewByOrder), &topic, &json!({}), &sample()).unwrap_err();
        // After op 0 only region-a has a summary: no order to depend on yet.
        assert!(
            broken.detail.starts_with("after op 1,"),
            "{}",
            broken.detail
        );
        assert_eq!(
            broken.to_string(),
            format!("the view is order-free: {}", broken.detail)
        );
    }

    #[test]
    fn a_lawful_app_passes_and_each_broken_law_is_named() {
        assert_eq!(law_of(Flaw::None), None);
        assert_eq!(law_of(Flaw::ViewByOrder), Some("the view is order-free"));
        assert_eq!(law_of(Flaw::SummaryLosesCount), Some("summaries read back"));
        assert_eq!(
            law_of(Flaw::CarriesAStranger),
            Some("carried ops are folded ops")
        );
        assert_eq!(law_of(Flaw::OpReadsBackOtherwise), Some("ops read back"));
        assert_eq!(law_of(Flaw::FoldByClock), Some("folds are pure"));
        assert_eq!(law_of(Flaw::DecideByClock), Some("decisions are pure"));
        assert_eq!(law_of(Flaw::EmptyLog), Some("a log delivers something"));
    }
}
