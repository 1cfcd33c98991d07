//! wsdr lab: the whole two-Region system on one machine, so anyone can run a failover drill
//! and read its RTO/RPO without an AWS account. See docs/LAB.md.
//!
//! Three layers, each using only the ones above it:
//! - [`world`]: what AWS runs. Each Region is an emulated API Gateway WebSocket endpoint and
//!   `@connections` API in front of the real authorizer and ws-handler crates, on a store
//!   (in memory or DynamoDB Local) whose writes carry the Region's own clock; replication gives
//!   the stores Global Tables' MREC semantics; the real canary feeds an alarm with CloudWatch
//!   semantics, a health check and a caching resolver behind one front-door address; faults.
//! - [`sim`]: the people. One simulated user (honest, awkward or hostile) and one history
//!   checker, shared by every run.
//! - [`runs`]: what is run on the world with the people, and what it reports: drills, chaos
//!   campaigns, load.
//!
//! Everything runs on tokio's clock, so a test can run a drill in paused time.

pub mod cli;
pub mod console;
pub mod smoke;
pub mod world;

pub mod sim {
    //! Simulated users and the checker that judges what they were told.
    pub mod attackers;
    pub mod chat;
    pub mod history;
    pub mod judge;
    pub mod topic_rules;
    pub mod trace;
    pub mod users;
}

pub mod runs {
    //! Drills, chaos campaigns and load runs, and their reports.
    pub mod chaos;
    pub(crate) mod chaos_apps;
    pub mod chart;
    pub mod chat_drill;
    pub mod drill;
    pub mod load;
    pub mod measure;
    pub mod plan;
    pub mod rehearse;
    pub mod report;
    pub mod scenario;
    pub mod sim;
    pub mod stalls;
    pub mod stats;
}

// The names every run starts from; everything else is reached through its layer
// (`wsdr_lab::world::control`, `wsdr_lab::runs::chaos`, `wsdr_lab::sim::history`).
pub use runs::drill::{DrillConfig, Scenario};
pub use runs::report::Report;
pub use world::scale::TimeScale;
pub use world::{AwsDuration, Fault, FaultKind, LabConfig, PerRegion, RegionId, World};
