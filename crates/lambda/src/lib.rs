//! What every wsdr Lambda needs that is not an AWS adapter: its configuration read from the
//! environment ([`env`]), its logging ([`telemetry`]) and where its TLS roots come from
//! ([`certs`]). No AWS SDK here, so a function that
//! calls no AWS service (the authorizer) links none.

pub mod certs;
pub mod env;
pub mod telemetry;
