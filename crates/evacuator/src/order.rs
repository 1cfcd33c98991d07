//! A fail-over order's journey through the evacuator: `wsdr_core::failover_order` (the lab
//! runs the same function), with the evacuator's moves as its [`SessionMover`]. Re-exported
//! here under the names the evacuator's adapters implement.

pub use wsdr_core::failover_order::{
    Declined, OrderChecks as Checks, SessionMover, STALE_CLAIM_MS,
};
pub use wsdr_core::OrderLog;
