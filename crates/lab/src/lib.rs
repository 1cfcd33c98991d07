//! wsdr lab: the whole two-Region system on one machine, so anyone can run a failover drill
//! and read its RTO/RPO without an AWS account. See docs/LAB.md.
//!
//! Each Region is an emulated API Gateway WebSocket endpoint and `@connections` API in front
//! of the real authorizer and ws-handler crates, on an in-memory store; a replicator gives the
//! two stores Global Tables' MREC semantics; the real canary feeds an alarm with CloudWatch
//! semantics, a health check and a caching resolver behind one front-door address.

pub mod chaos;
pub mod clock;
pub mod control;
pub mod drill;
pub mod frontdoor;
pub mod health;
pub mod history;
pub mod lab;
pub mod load;
pub mod owner;
pub mod region;
pub mod replication;
pub mod report;
pub mod scale;
pub mod store;
pub mod timeline;
pub mod users;

pub use drill::{DrillConfig, Scenario};
pub use lab::{Fault, Lab, LabConfig};
pub use report::Report;
pub use scale::TimeScale;
