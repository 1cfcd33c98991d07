//! A fail-over order's journey through the evacuator: run once per order, and re-checked
//! before each phase, since an order is only a trigger. The judge's verdict may have come
//! back, the primary's own view may say it serves (then Route 53 keeps the PRIMARY record
//! healthy: the primary is not failed over), DNS may not answer the destination yet, or the
//! same order may be delivered twice (a stream batch retried, an SQS message received again).
//! Each check reads where the decision is made: the judge's verdict in this Region's replica,
//! the primary's own view at its health function (as Route 53's checkers reach it), DNS as a
//! resolver answers (docs/DEPLOY.md, "Moving the sessions").

use async_trait::async_trait;
use wsdr_core::VerdictAnswer;

/// What the evacuator re-checks before each phase of an order.
#[async_trait]
pub trait Checks: Send + Sync {
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

pub use wsdr_core::OrderLog;

/// Why an order moved nobody (the answer's `nothing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Declined {
    /// This order ran already (or is running in another invocation).
    AlreadyRun,
    /// The judge's verdict on the primary no longer says fail over (fresh).
    VerdictMovedOn,
    /// The primary's own view says it serves: its record stays healthy.
    PrimaryServes,
    /// DNS does not answer the destination (or cannot be told): a move through the global
    /// name would send users back to the primary.
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

/// How long a claimed order that never finished stays claimed: the function's timeout (a
/// run that outlived it died), after which a redelivery may take it over.
pub const STALE_CLAIM_MS: u64 = 300_000;
