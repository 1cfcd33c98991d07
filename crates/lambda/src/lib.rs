//! What every wsdr Lambda needs that is not an AWS adapter: its configuration read from the
//! environment ([`env`]) and its logging ([`telemetry`]). No AWS SDK here, so a function that
//! calls no AWS service (the authorizer) links none.

pub mod env;
pub mod telemetry;
