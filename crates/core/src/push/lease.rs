//! One push in flight per topic: the lease.
//!
//! The stream's reader and the workers are different invocations (different instances, in
//! AWS), so what the old in-memory conflator knew ("a push of this topic is running; a change
//! waits for it") lives in one item per topic, changed only by atomic conditional updates:
//!
//! | field | meaning |
//! |---|---|
//! | `generation` | which push holds the lease (each start adds one) |
//! | `jobs` | the push's jobs not yet done (a continuation keeps its job's place) |
//! | `started_ms` | when it started |
//! | `audience` | the posts its jobs made so far |
//! | `pending` | a change arrived while it was in flight |
//! | `next_ms` | the earliest the next push may start (its spacing) |
//!
//! - [`PushLeases::begin`]: start a push if none is in flight and the spacing has passed; if one
//!   is in flight, set `pending` (its last job starts the trailing push); otherwise say when.
//! - [`PushLeases::record`]: a job posted `targets` more; the job that takes `jobs` to zero learns
//!   it was the last (exactly one does: each decrement is atomic and returns the new values).
//! - [`PushLeases::close`]: the last job sets the spacing and learns whether a change waits.
//!
//! A push whose jobs are lost (a worker's retries exhausted) would hold the lease forever: a
//! lease older than [`LEASE_STALE`] is taken over by the next change. Jobs are delivered at
//! least once (SQS): a job run twice decrements twice, which ends the push's count early (its
//! trailing push starts a little sooner); no post is lost by it, and clients merge duplicates.

use super::locked;
use crate::Result;
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use wsdr_protocol::Topic;

/// A lease held longer than this is taken over by the next change: its push's jobs are
/// presumed lost. Longer than any push at the budget (100,000 watchers at 5,000 a second take
/// 20 s) and than the queue's retries of a job.
pub const LEASE_STALE: Duration = Duration::from_secs(120);

/// What [`PushLeases::begin`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Begin {
    /// This caller holds the lease for push `generation`: read the state, queue its jobs.
    Started { generation: u64 },
    /// A push is in flight; the change is marked, and its last job starts a trailing push.
    Marked,
    /// No push is in flight, but the last one's spacing ends at this instant (ms).
    NotBefore(u64),
}

/// The totals of a push whose last job just recorded itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finished {
    pub started_ms: u64,
    /// Posts its jobs made.
    pub audience: u64,
}

/// The per-topic leases of one Region's pushes (a DynamoDB item each in AWS, in the
/// Regional connections table; [`InProcessLeases`] in one process).
#[async_trait]
pub trait PushLeases: Send + Sync {
    /// Start a push of `topic` at `now_ms` with [`crate::push::SUBSCRIBER_SHARDS`] jobs, if
    /// none is in flight (or the one in flight is older than [`LEASE_STALE`]) and the spacing
    /// has passed; the new push's spacing is at least `window_ms` until it closes.
    async fn begin(&self, topic: &Topic, now_ms: u64, window_ms: u64) -> Result<Begin>;

    /// A job of push `generation` posted `targets` more; `job_done`: it left no continuation.
    /// `Some` for the job whose record made the push's outstanding jobs zero; `None` otherwise,
    /// and for a push the lease has moved past.
    async fn record(
        &self,
        topic: &Topic,
        generation: u64,
        targets: u64,
        job_done: bool,
    ) -> Result<Option<Finished>>;

    /// Push `generation` ended: the next may start at `next_ms`. Whether a change is waiting
    /// for it (the caller then starts the trailing push).
    async fn close(&self, topic: &Topic, generation: u64, next_ms: u64) -> Result<bool>;

    /// Push `generation` could not be queued: free the lease (a retried start takes it again).
    async fn release(&self, topic: &Topic, generation: u64) -> Result<()>;
}

/// One topic's lease.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lease {
    pub generation: u64,
    pub jobs: u64,
    pub started_ms: u64,
    pub audience: u64,
    pub pending: bool,
    pub next_ms: u64,
}

/// The lease rules on plain data: what [`InProcessLeases`] runs, and the DynamoDB adapter's
/// conditions state in its own terms.
#[derive(Debug, Default)]
pub struct LeaseBook {
    leases: HashMap<Topic, Lease>,
}

impl LeaseBook {
    pub fn lease(&self, topic: &Topic) -> Option<Lease> {
        self.leases.get(topic).copied()
    }

    pub fn begin(&mut self, topic: &Topic, now_ms: u64, window_ms: u64) -> Begin {
        self.forget_idle(now_ms);
        let lease = self.leases.entry(topic.clone()).or_default();
        let stale = now_ms
            >= lease
                .started_ms
                .saturating_add(LEASE_STALE.as_millis() as u64);
        if lease.jobs > 0 && !stale {
            lease.pending = true;
            return Begin::Marked;
        }
        if lease.jobs == 0 && now_ms < lease.next_ms {
            return Begin::NotBefore(lease.next_ms);
        }
        *lease = Lease {
            generation: lease.generation + 1,
            jobs: u64::from(super::SUBSCRIBER_SHARDS),
            started_ms: now_ms,
            audience: 0,
            pending: false,
            next_ms: now_ms.saturating_add(window_ms),
        };
        Begin::Started {
            generation: lease.generation,
        }
    }

    pub fn record(
        &mut self,
        topic: &Topic,
        generation: u64,
        targets: u64,
        job_done: bool,
    ) -> Option<Finished> {
        let lease = self.leases.get_mut(topic)?;
        if lease.generation != generation || lease.jobs == 0 {
            return None;
        }
        lease.audience += targets;
        if !job_done {
            return None;
        }
        lease.jobs -= 1;
        (lease.jobs == 0).then_some(Finished {
            started_ms: lease.started_ms,
            audience: lease.audience,
        })
    }

    pub fn close(&mut self, topic: &Topic, generation: u64, next_ms: u64) -> bool {
        match self.leases.get_mut(topic) {
            Some(lease) if lease.generation == generation && lease.jobs == 0 => {
                lease.next_ms = next_ms;
                lease.pending
            }
            _ => false,
        }
    }

    pub fn release(&mut self, topic: &Topic, generation: u64) {
        if let Some(lease) = self.leases.get_mut(topic) {
            if lease.generation == generation {
                lease.jobs = 0;
                lease.next_ms = 0;
            }
        }
    }

    /// Bounded memory in a long-lived process: leases with nothing in flight or waiting whose
    /// spacing ended a minute ago hold nothing a fresh lease would not.
    fn forget_idle(&mut self, now_ms: u64) {
        if self.leases.len() < 10_000 {
            return;
        }
        self.leases
            .retain(|_, l| l.jobs > 0 || l.pending || now_ms < l.next_ms.saturating_add(60_000));
    }
}

/// [`PushLeases`] in one process (the lab's Regions, tests, a pusher that runs its own jobs).
#[derive(Debug, Default)]
pub struct InProcessLeases(Mutex<LeaseBook>);

impl InProcessLeases {
    pub fn lease(&self, topic: &Topic) -> Option<Lease> {
        locked(&self.0).lease(topic)
    }
}

#[async_trait]
impl PushLeases for InProcessLeases {
    async fn begin(&self, topic: &Topic, now_ms: u64, window_ms: u64) -> Result<Begin> {
        Ok(locked(&self.0).begin(topic, now_ms, window_ms))
    }

    async fn record(
        &self,
        topic: &Topic,
        generation: u64,
        targets: u64,
        job_done: bool,
    ) -> Result<Option<Finished>> {
        Ok(locked(&self.0).record(topic, generation, targets, job_done))
    }

    async fn close(&self, topic: &Topic, generation: u64, next_ms: u64) -> Result<bool> {
        Ok(locked(&self.0).close(topic, generation, next_ms))
    }

    async fn release(&self, topic: &Topic, generation: u64) -> Result<()> {
        locked(&self.0).release(topic, generation);
        Ok(())
    }
}

/// The lease contract, for every adapter's tests: the same steps against any [`PushLeases`]
/// (the in-process book here, DynamoDB Local in `wsdr-aws`). The first broken rule, if any.
#[doc(hidden)]
pub async fn check_contract(leases: &dyn PushLeases, topic: &Topic) -> Result<(), String> {
    fn expect<T: PartialEq + std::fmt::Debug>(step: &str, got: T, want: T) -> Result<(), String> {
        if got == want {
            Ok(())
        } else {
            Err(format!("{step}: got {got:?}, want {want:?}"))
        }
    }
    fn started(step: &str, begin: Result<Begin>) -> Result<u64, String> {
        match begin {
            Ok(Begin::Started { generation }) => Ok(generation),
            other => Err(format!("{step}: got {other:?}, want a start")),
        }
    }
    let e = |error: crate::Error| error.to_string();
    let shards = u64::from(super::SUBSCRIBER_SHARDS);
    let g1 = started(
        "a first change starts a push",
        leases.begin(topic, 1_000, 200).await,
    )?;
    expect(
        "a change while it is in flight is marked",
        leases.begin(topic, 1_050, 200).await.map_err(e)?,
        Begin::Marked,
    )?;
    for shard in 0..shards - 1 {
        let finished = leases.record(topic, g1, 10, true).await.map_err(e)?;
        expect(&format!("job {shard} is not the last"), finished, None)?;
    }
    expect(
        "a continuation counts its posts, not a job",
        leases.record(topic, g1, 5, false).await.map_err(e)?,
        None,
    )?;
    expect(
        "the next generation's record changes nothing",
        leases.record(topic, g1 + 1, 99, true).await.map_err(e)?,
        None,
    )?;
    expect(
        "the last job learns it was the last, with the push's totals",
        leases.record(topic, g1, 10, true).await.map_err(e)?,
        Some(Finished {
            started_ms: 1_000,
            audience: 10 * shards + 5,
        }),
    )?;
    expect(
        "a record after the last (a duplicate delivery) changes nothing",
        leases.record(topic, g1, 10, true).await.map_err(e)?,
        None,
    )?;
    expect(
        "the close learns that a change waits",
        leases.close(topic, g1, 1_400).await.map_err(e)?,
        true,
    )?;
    expect(
        "before the spacing ends: not yet, and when",
        leases.begin(topic, 1_300, 200).await.map_err(e)?,
        Begin::NotBefore(1_400),
    )?;
    let g2 = started(
        "the trailing push starts once the spacing ends",
        leases.begin(topic, 1_400, 200).await,
    )?;
    expect("each start adds one to the generation", g2, g1 + 1)?;
    expect(
        "a change during the trailing push is marked",
        leases.begin(topic, 1_450, 200).await.map_err(e)?,
        Begin::Marked,
    )?;
    expect(
        "a close of an old generation says nothing waits",
        leases.close(topic, g1, 9_999).await.map_err(e)?,
        false,
    )?;
    expect(
        "a close before the push's last job says nothing waits",
        leases.close(topic, g2, 9_999).await.map_err(e)?,
        false,
    )?;
    let stale = 1_400 + LEASE_STALE.as_millis() as u64;
    expect(
        "a lease in flight is not taken over before it is stale",
        leases.begin(topic, stale - 1, 200).await.map_err(e)?,
        Begin::Marked,
    )?;
    let g3 = started(
        "a stale lease is taken over",
        leases.begin(topic, stale, 200).await,
    )?;
    expect("each start adds one to the generation", g3, g2 + 1)?;
    for _ in 0..shards {
        expect(
            "the old push's records no longer count",
            leases.record(topic, g2, 1, true).await.map_err(e)?,
            None,
        )?;
    }
    leases.release(topic, g3).await.map_err(e)?;
    let g4 = started(
        "a released lease is free at once",
        leases.begin(topic, stale, 200).await,
    )?;
    for _ in 0..shards {
        leases.record(topic, g4, 1, true).await.map_err(e)?;
    }
    expect(
        "a close with no change marked says nothing waits",
        leases.close(topic, g4, stale + 200).await.map_err(e)?,
        false,
    )?;
    if let Ok(other) = Topic::parse(&format!("{topic}-other")) {
        started(
            "another topic's lease is its own",
            leases.begin(&other, stale, 200).await,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_in_process_book_keeps_the_lease_contract() {
        let leases = InProcessLeases::default();
        check_contract(&leases, &Topic::parse("auction:a1").unwrap())
            .await
            .unwrap();
    }

    /// A lease port that breaks one rule of the contract, on the in-process book.
    struct Broken {
        book: InProcessLeases,
        rule: &'static str,
    }

    #[async_trait]
    impl PushLeases for Broken {
        async fn begin(&self, topic: &Topic, now_ms: u64, window_ms: u64) -> Result<Begin> {
            match (self.rule, self.book.begin(topic, now_ms, window_ms).await?) {
                ("never marks", Begin::Marked) => Ok(Begin::Started { generation: 99 }),
                ("skips a generation", Begin::Started { generation }) if generation > 1 => {
                    Ok(Begin::Started {
                        generation: generation + 1,
                    })
                }
                (_, begin) => Ok(begin),
            }
        }

        async fn record(
            &self,
            topic: &Topic,
            generation: u64,
            targets: u64,
            job_done: bool,
        ) -> Result<Option<Finished>> {
            let finished = self
                .book
                .record(topic, generation, targets, job_done)
                .await?;
            Ok(if self.rule == "never finishes" {
                None
            } else {
                finished
            })
        }

        async fn close(&self, topic: &Topic, generation: u64, next_ms: u64) -> Result<bool> {
            self.book.close(topic, generation, next_ms).await
        }

        async fn release(&self, topic: &Topic, generation: u64) -> Result<()> {
            if self.rule == "never releases" {
                return Ok(());
            }
            self.book.release(topic, generation).await
        }
    }

    #[tokio::test]
    async fn the_contract_fails_a_port_that_breaks_any_of_its_rules() {
        let topic = Topic::parse("auction:a1").unwrap();
        for (rule, step) in [
            ("never marks", "a change while it is in flight is marked"),
            ("never finishes", "the last job learns it was the last"),
            (
                "skips a generation",
                "each start adds one to the generation",
            ),
            ("never releases", "a released lease is free at once"),
        ] {
            let broken = Broken {
                book: InProcessLeases::default(),
                rule,
            };
            let error = check_contract(&broken, &topic).await.expect_err(rule);
            assert!(error.starts_with(step), "{rule}: {error}");
        }
    }

    #[test]
    fn a_lease_shows_its_push_from_start_to_close() {
        let leases = InProcessLeases::default();
        let a = Topic::parse("auction:a").unwrap();
        assert_eq!(leases.lease(&a), None);
        let mut book = locked(&leases.0);
        assert_eq!(book.begin(&a, 1_000, 200), Begin::Started { generation: 1 });
        let shards = u64::from(crate::push::SUBSCRIBER_SHARDS);
        let fresh = Lease {
            generation: 1,
            jobs: shards,
            started_ms: 1_000,
            audience: 0,
            pending: false,
            next_ms: 1_200,
        };
        assert_eq!(book.lease(&a), Some(fresh));
        assert_eq!(book.record(&a, 1, 7, true), None);
        assert_eq!(book.begin(&a, 1_010, 200), Begin::Marked);
        drop(book);
        assert_eq!(
            leases.lease(&a),
            Some(Lease {
                jobs: shards - 1,
                audience: 7,
                pending: true,
                ..fresh
            })
        );
    }

    /// A book of `count` topics, each begun at 0 with a window of 1 s, every job recorded and
    /// the push closed with its spacing ending at 1 s; "in-flight" begun but never recorded,
    /// "waiting" marked during its push.
    fn book_of(count: usize) -> LeaseBook {
        let mut book = LeaseBook::default();
        let shards = u64::from(crate::push::SUBSCRIBER_SHARDS);
        for i in 0..count - 2 {
            let t = Topic::parse(&format!("auction:t{i}")).unwrap();
            assert_eq!(book.begin(&t, 0, 1_000), Begin::Started { generation: 1 });
            for _ in 0..shards {
                book.record(&t, 1, 1, true);
            }
            assert!(!book.close(&t, 1, 1_000));
        }
        let in_flight = Topic::parse("auction:in-flight").unwrap();
        book.begin(&in_flight, 0, 1_000);
        let waiting = Topic::parse("auction:waiting").unwrap();
        book.begin(&waiting, 0, 1_000);
        book.begin(&waiting, 1, 1_000);
        for _ in 0..shards {
            book.record(&waiting, 1, 1, true);
        }
        assert!(book.close(&waiting, 1, 1_000));
        assert_eq!(book.leases.len(), count);
        book
    }

    #[test]
    fn ten_thousand_leases_forget_the_idle_ones_a_minute_after_their_spacing() {
        let a_minute_after = 1_000 + 60_000;
        let new = Topic::parse("auction:new").unwrap();
        // Under ten thousand: nothing is forgotten, however old.
        let mut book = book_of(9_999);
        book.begin(&new, 10 * a_minute_after, 1_000);
        assert_eq!(book.leases.len(), 10_000);
        // Ten thousand, a minute after their spacing less a millisecond: all kept.
        let mut book = book_of(10_000);
        book.begin(&new, a_minute_after - 1, 1_000);
        assert_eq!(book.leases.len(), 10_001);
        // At the minute: the idle ones go; the one in flight and the one waiting stay.
        let mut book = book_of(10_000);
        book.begin(&new, a_minute_after, 1_000);
        let mut kept: Vec<String> = book.leases.keys().map(|t| t.to_string()).collect();
        kept.sort();
        assert_eq!(
            kept,
            ["auction:in-flight", "auction:new", "auction:waiting"]
        );
    }

    #[test]
    fn a_record_after_the_push_closed_or_with_no_lease_is_ignored() {
        let mut book = LeaseBook::default();
        let a = Topic::parse("auction:a").unwrap();
        assert_eq!(book.record(&a, 1, 5, true), None);
        assert!(!book.close(&a, 1, 10));
    }
}
