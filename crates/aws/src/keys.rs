//! Key shapes of the state table that readers outside the adapter need (the stream handler
//! learns from a record's keys alone what changed). No SDK here.

use wsdr_protocol::AuctionId;

/// Partition key of everything about one auction.
pub const AUCTION_PREFIX: &str = "AUCTION#";
/// Sort-key prefix of the per-Region summaries.
pub const SUMMARY_PREFIX: &str = "SUMMARY#";

/// The auction id of a state-table partition key (`AUCTION#<id>`), if it is one.
pub fn auction_of_key(pk: &str) -> Option<AuctionId> {
    pk.strip_prefix(AUCTION_PREFIX)
        .and_then(|id| AuctionId::new(id).ok())
}

/// The Region of a summary's sort key (`SUMMARY#<region>`), if it is one.
pub fn summary_region_of_key(sk: &str) -> Option<&str> {
    sk.strip_prefix(SUMMARY_PREFIX).filter(|r| !r.is_empty())
}
