//! Apps of the kit's own tests: the kit's service, front door and push path tested with no
//! app crate.
#![allow(clippy::unwrap_used)]

use crate::items::{StoredOp, StoredSummary, TopicKey};
use crate::topics::{Delivery, TopicApp};
use crate::write::App;
use crate::Result;
use serde_json::{json, Value as Json};
use wsdr_protocol::{ErrorCode, Namespace, ProtocolError};

/// A tally: an op is `{"n": u}`, a Region's summary sums its ops, the view is the sum over
/// Regions; delivered as its latest state.
pub(crate) struct Tally;

impl App for Tally {
    type Meta = ();
    type Op = u64;
    type Summary = u64;
    type Reject = ();

    fn op_json(&self, n: &u64) -> Json {
        json!({ "n": n })
    }
    fn summary(&self, _: &TopicKey, stored: &StoredSummary) -> Result<u64> {
        Ok(stored.app["sum"].as_u64().unwrap_or(0))
    }
    fn summary_json(&self, sum: &u64) -> Json {
        json!({ "sum": sum })
    }
    fn empty_summary(&self) -> u64 {
        0
    }
    fn admit(&self, _: &(), _: u64) -> std::result::Result<(), ()> {
        Ok(())
    }
    fn decide(&self, _: &(), _: &[u64], _: &u64) -> std::result::Result<(), ()> {
        Ok(())
    }
    fn carried(&self, _: &TopicKey, _: &u64) -> Vec<StoredOp> {
        Vec::new()
    }
    fn fold(&self, sum: &u64, _: &StoredOp, n: &u64) -> Result<u64> {
        Ok(sum + n)
    }
}

impl TopicApp for Tally {
    fn namespace(&self) -> Namespace {
        Namespace::new("tally").unwrap()
    }
    fn parse_op(&self, op: &Json) -> std::result::Result<u64, ProtocolError> {
        op["n"]
            .as_u64()
            .ok_or_else(|| ProtocolError::new(ErrorCode::InvalidField, "n"))
    }
    fn meta(&self, _: &TopicKey, _: &Json) -> Result<()> {
        Ok(())
    }
    fn reject_code(&self, _: ()) -> &'static str {
        "refused"
    }
    fn view(&self, _: &(), seen: &[(StoredSummary, u64)]) -> Json {
        json!({ "sum": seen.iter().map(|(_, sum)| sum).sum::<u64>() })
    }
    fn delivery(&self) -> Delivery {
        Delivery::Latest
    }
}
