//! A fail-over order's journey: run once per order, re-checked before each phase. An order is
//! only a trigger. Between the judge's change and the move, the judge's verdict may have come
//! back, the primary's own view may say it serves (then Route 53 keeps the PRIMARY record
//! healthy: the primary is not failed over), DNS may not answer the destination yet, or the
//! same order may arrive twice (a stream batch retried, an SQS message received again, the
//! minute sweep finding the change the stream already delivered). Each check reads where the
//! decision is made (docs/DEPLOY.md, "Moving the sessions").
//!
//! The evacuator Lambda runs this with its SDK adapters; the lab runs the same function with
//! its world's, so a drill's duplicated or lost orders meet the code users deploy.

use crate::ports::{Clock, OrderLog, Pause};
use crate::verdict::VerdictAnswer;
use crate::Result;
use async_trait::async_trait;
use std::time::Duration;

/// What an order is re-checked against before each phase.
#[async_trait]
pub trait OrderChecks: Send + Sync {
    /// The judge's verdict on the primary, as this Region's health function answers it.
    async fn judge_answer(&self) -> VerdictAnswer;
    /// The primary's own view at its health function: `Some(true)` when it answers a fresh
    /// serve, `Some(false)` for any other answer, `None` when nothing answers (the primary
    /// gone, or the path to it cut). Unchecked (alarm checks: no health function): `None`.
    async fn primary_self_serves(&self) -> Option<bool>;
    /// Whether the global name resolves to the destination now: `None` when it cannot be
    /// told (no lookup configured, or the lookup failed).
    async fn dns_answers_destination(&self) -> Option<bool>;
}

/// What moves the sessions: the two phases of an order.
#[async_trait]
pub trait SessionMover: Send + Sync {
    /// What a move reports.
    type Report: Send;
    /// The move naming the destination's own endpoint (only clients given that URL follow
    /// it, with no DNS involved), if one is configured. A failure is logged, not fatal: the
    /// move through the global name still reaches everyone.
    async fn move_direct(&self) -> Option<Result<Self::Report>>;
    /// The move through the global name (every client), once DNS answers the destination.
    async fn move_all(&self) -> Result<Self::Report>;
}

/// Why an order moved nobody.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Declined {
    /// This order ran already (or is running in another invocation).
    AlreadyRun,
    /// The judge's verdict on the primary no longer says fail over (fresh).
    VerdictMovedOn,
    /// The primary's own view says it serves: its record stays healthy.
    PrimaryServes,
    /// DNS did not answer the destination within the order's deadline (or cannot be told):
    /// a move through the global name would send users back to the primary.
    DnsNotMoved,
}

impl Declined {
    pub fn reason(self) -> &'static str {
        match self {
            Declined::AlreadyRun => "this order ran already: nothing to do",
            Declined::VerdictMovedOn => {
                "the judge's verdict on the primary no longer says fail over: nobody moved"
            }
            Declined::PrimaryServes => {
                "the primary's own view says it serves (its record stays healthy): nobody moved"
            }
            Declined::DnsNotMoved => {
                "the global name does not answer the destination: nobody moved through it"
            }
        }
    }
}

/// What an order did.
#[derive(Debug, Clone, PartialEq)]
pub enum OrderOutcome<R> {
    /// Nobody moved through the global name, and why (the direct move, if any, may have run).
    Declined(Declined),
    /// Everyone still there was told to move through the global name.
    Moved(R),
}

/// An order's timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OrderTimes {
    /// How often DNS is asked again while it does not answer the destination.
    pub dns_poll: Duration,
    /// How long after the direct move DNS may take to answer the destination (with no checks
    /// configured: how long to wait, then move).
    pub dns_deadline: Duration,
    /// How long a claimed order that never finished stays claimed: the function's timeout (a
    /// run that outlived it died), after which a redelivery may take it over.
    pub stale_claim_ms: u64,
}

/// How long a claimed order that never finished stays claimed by default: the evacuator's
/// timeout (template.yaml, 300 s).
pub const STALE_CLAIM_MS: u64 = 300_000;

impl OrderTimes {
    /// The evacuator's: DNS asked every 5 s, for at most `dns_deadline`.
    pub fn new(dns_deadline: Duration) -> Self {
        Self {
            dns_poll: Duration::from_secs(5),
            dns_deadline,
            stale_claim_ms: STALE_CLAIM_MS,
        }
    }
}

/// The ports an order runs with.
pub struct OrderPorts<'a, M: SessionMover + ?Sized> {
    /// Where each order's id is claimed, so that it runs once; `None`: every delivery runs.
    pub log: Option<&'a dyn OrderLog>,
    /// What each phase is re-checked against; `None`: nothing to re-check (then the order
    /// waits `dns_deadline` and moves).
    pub checks: Option<&'a dyn OrderChecks>,
    pub mover: &'a M,
    pub clock: &'a dyn Clock,
    pub pause: &'a dyn Pause,
}

impl<M: SessionMover + ?Sized> std::fmt::Debug for OrderPorts<'_, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OrderPorts")
            .field("log", &self.log.is_some())
            .field("checks", &self.checks.is_some())
            .finish_non_exhaustive()
    }
}

/// Run order `id` once: claim it, re-check, move directly, wait for DNS (asking again every
/// `dns_poll` until `dns_deadline`), re-check, move everyone through the global name. A run
/// that fails stays claimed until the claim is stale, so a redelivery takes it over then;
/// one that ends, whatever it decided, is finished: no redelivery runs it again.
pub async fn run_order<M: SessionMover + ?Sized>(
    id: &str,
    ports: &OrderPorts<'_, M>,
    times: &OrderTimes,
) -> Result<OrderOutcome<M::Report>> {
    if let Some(log) = ports.log {
        if !log
            .claim(id, ports.clock.now_ms(), times.stale_claim_ms)
            .await?
        {
            return Ok(OrderOutcome::Declined(Declined::AlreadyRun));
        }
    }
    let outcome = phases(ports, times).await;
    if let (Some(log), Ok(_)) = (ports.log, &outcome) {
        log.finish(id, ports.clock.now_ms()).await?;
    }
    outcome
}

async fn phases<M: SessionMover + ?Sized>(
    ports: &OrderPorts<'_, M>,
    times: &OrderTimes,
) -> Result<OrderOutcome<M::Report>> {
    if let Some(declined) = recheck(ports.checks, false).await {
        return Ok(OrderOutcome::Declined(declined));
    }
    if let Some(Err(error)) = ports.mover.move_direct().await {
        // The move through the global name still reaches everyone.
        tracing::warn!(%error, "direct move failed");
    }
    match ports.checks {
        None => ports.pause.pause(times.dns_deadline).await,
        Some(_) => {
            let mut waited = Duration::ZERO;
            loop {
                match recheck(ports.checks, true).await {
                    None => break,
                    Some(Declined::DnsNotMoved) if waited < times.dns_deadline => {
                        let step = times.dns_poll.min(times.dns_deadline - waited);
                        ports.pause.pause(step).await;
                        waited += step;
                    }
                    Some(declined) => return Ok(OrderOutcome::Declined(declined)),
                }
            }
        }
    }
    ports.mover.move_all().await.map(OrderOutcome::Moved)
}

/// The re-check before a phase (`global`: the move through the global name, which also needs
/// DNS to answer the destination). `None`: go on.
async fn recheck(checks: Option<&dyn OrderChecks>, global: bool) -> Option<Declined> {
    let checks = checks?;
    if checks.judge_answer().await != VerdictAnswer::FailOver {
        return Some(Declined::VerdictMovedOn);
    }
    if checks.primary_self_serves().await == Some(true) {
        return Some(Declined::PrimaryServes);
    }
    if global && checks.dns_answers_destination().await != Some(true) {
        return Some(Declined::DnsNotMoved);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryOrderLog;
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    #[derive(Debug, Default)]
    struct FakeClock(AtomicU64);
    impl Clock for FakeClock {
        fn now_ms(&self) -> u64 {
            self.0.load(Ordering::SeqCst)
        }
    }

    /// Each pause advances the fake clock and the world: DNS answers the destination once
    /// `dns_after` has passed.
    #[derive(Debug)]
    struct World {
        clock: Arc<FakeClock>,
        judge: Mutex<VerdictAnswer>,
        primary_serves: Mutex<Option<bool>>,
        dns_after_ms: u64,
        direct: AtomicUsize,
        all: AtomicUsize,
        pauses: AtomicUsize,
    }

    impl World {
        fn new(dns_after_ms: u64) -> Arc<Self> {
            Arc::new(Self {
                clock: Arc::default(),
                judge: Mutex::new(VerdictAnswer::FailOver),
                primary_serves: Mutex::new(None),
                dns_after_ms,
                direct: AtomicUsize::new(0),
                all: AtomicUsize::new(0),
                pauses: AtomicUsize::new(0),
            })
        }
    }

    #[async_trait]
    impl Pause for World {
        async fn pause(&self, duration: Duration) {
            // An order that never stops asking fails the test instead of hanging it.
            assert!(
                self.pauses.fetch_add(1, Ordering::SeqCst) < 10_000,
                "the order kept waiting"
            );
            self.clock
                .0
                .fetch_add(duration.as_millis() as u64, Ordering::SeqCst);
        }
    }

    #[async_trait]
    impl OrderChecks for World {
        async fn judge_answer(&self) -> VerdictAnswer {
            *self.judge.lock().unwrap_or_else(|p| p.into_inner())
        }
        async fn primary_self_serves(&self) -> Option<bool> {
            *self
                .primary_serves
                .lock()
                .unwrap_or_else(|p| p.into_inner())
        }
        async fn dns_answers_destination(&self) -> Option<bool> {
            Some(self.clock.now_ms() >= self.dns_after_ms)
        }
    }

    #[async_trait]
    impl SessionMover for World {
        type Report = u64;
        async fn move_direct(&self) -> Option<Result<u64>> {
            self.direct.fetch_add(1, Ordering::SeqCst);
            Some(Ok(self.clock.now_ms()))
        }
        async fn move_all(&self) -> Result<u64> {
            self.all.fetch_add(1, Ordering::SeqCst);
            Ok(self.clock.now_ms())
        }
    }

    fn ports<'a>(world: &'a World, log: &'a MemoryOrderLog) -> OrderPorts<'a, World> {
        OrderPorts {
            log: Some(log),
            checks: Some(world),
            mover: world,
            clock: world.clock.as_ref(),
            pause: world,
        }
    }

    #[tokio::test]
    async fn the_global_move_waits_for_dns_and_not_longer() {
        let world = World::new(37_000);
        let log = MemoryOrderLog::default();
        let times = OrderTimes::new(Duration::from_secs(120));
        let outcome = run_order("p@1", &ports(&world, &log), &times).await;
        // DNS answered at 37 s; asked every 5 s: the move at 40 s, not at the deadline.
        assert_eq!(outcome.ok(), Some(OrderOutcome::Moved(40_000)));
        assert_eq!(world.direct.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn dns_that_never_moves_moves_nobody_through_it() {
        let world = World::new(u64::MAX);
        let log = MemoryOrderLog::default();
        let times = OrderTimes::new(Duration::from_secs(120));
        let outcome = run_order("p@1", &ports(&world, &log), &times).await;
        assert_eq!(
            outcome.ok(),
            Some(OrderOutcome::Declined(Declined::DnsNotMoved))
        );
        assert_eq!(world.clock.now_ms(), 120_000, "gave up at the deadline");
        assert_eq!(world.all.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn every_delivery_of_one_order_after_the_first_moves_nobody() {
        let world = World::new(0);
        let log = MemoryOrderLog::default();
        let times = OrderTimes::new(Duration::from_secs(120));
        let first = run_order("p@1", &ports(&world, &log), &times).await;
        assert!(matches!(first, Ok(OrderOutcome::Moved(_))));
        for _ in 0..3 {
            assert_eq!(
                run_order("p@1", &ports(&world, &log), &times).await.ok(),
                Some(OrderOutcome::Declined(Declined::AlreadyRun))
            );
        }
        assert_eq!(world.direct.load(Ordering::SeqCst), 1);
        assert_eq!(world.all.load(Ordering::SeqCst), 1);
        // The next change is another order.
        assert!(matches!(
            run_order("p@2", &ports(&world, &log), &times).await,
            Ok(OrderOutcome::Moved(_))
        ));
    }

    #[tokio::test]
    async fn a_verdict_that_came_back_or_a_primary_that_serves_moves_nobody() {
        let log = MemoryOrderLog::default();
        let times = OrderTimes::new(Duration::from_secs(120));
        let world = World::new(0);
        *world.judge.lock().unwrap_or_else(|p| p.into_inner()) = VerdictAnswer::Serve;
        assert_eq!(
            run_order("p@1", &ports(&world, &log), &times).await.ok(),
            Some(OrderOutcome::Declined(Declined::VerdictMovedOn))
        );
        let world = World::new(0);
        *world
            .primary_serves
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(true);
        assert_eq!(
            run_order("p@2", &ports(&world, &log), &times).await.ok(),
            Some(OrderOutcome::Declined(Declined::PrimaryServes))
        );
        assert_eq!(
            world.direct.load(Ordering::SeqCst),
            0,
            "not even the direct move"
        );
    }

    #[tokio::test]
    async fn dns_is_asked_until_the_deadline_exactly_when_it_is_no_multiple_of_the_poll() {
        let world = World::new(u64::MAX);
        let log = MemoryOrderLog::default();
        let times = OrderTimes {
            dns_deadline: Duration::from_millis(122_000),
            ..OrderTimes::new(Duration::from_secs(120))
        };
        let outcome = run_order("p@1", &ports(&world, &log), &times).await;
        assert_eq!(
            outcome.ok(),
            Some(OrderOutcome::Declined(Declined::DnsNotMoved))
        );
        // Asked every 5 s, the last wait cut to the 2 s left.
        assert_eq!(world.clock.now_ms(), 122_000);
    }

    #[test]
    fn each_refusal_says_why_nobody_moved_and_the_ports_show_what_they_hold() {
        let reasons = [
            Declined::AlreadyRun,
            Declined::VerdictMovedOn,
            Declined::PrimaryServes,
            Declined::DnsNotMoved,
        ]
        .map(Declined::reason);
        assert!(reasons[0].contains("ran already"));
        assert!(reasons[1].contains("verdict"));
        assert!(reasons[2].contains("serves"));
        assert!(reasons[3].contains("global name"));
        let distinct: std::collections::BTreeSet<_> = reasons.iter().collect();
        assert_eq!(distinct.len(), 4);
        let world = World::new(0);
        let log = MemoryOrderLog::default();
        let shown = format!("{:?}", ports(&world, &log));
        assert!(
            shown.contains("OrderPorts") && shown.contains("log: true"),
            "{shown}"
        );
    }
}
