//! Key shapes of the state table that readers outside the adapter need (the stream handler
//! learns from a record's keys alone what changed). No SDK here.
//!
//! | item | pk | sk |
//! |---|---|---|
//! | auction | `AUCTION#<auctionId>` | `META` |
//! | bid copy | `BIDS#<auctionId>#<bidder>` | `<bidId>#<region>` |
//! | summary | `SUMMARY#<auctionId>` | `<region>` |
//!
//! An auction id has no `#` and the bidder segment is percent-encoded ([`bidder_segment`]),
//! so every key splits one way only.

use wsdr_protocol::AuctionId;

/// Partition key prefix of an auction's own item.
pub const AUCTION_PREFIX: &str = "AUCTION#";
/// Partition key prefix of one auction's per-Region summaries (one partition per auction).
pub const SUMMARY_PREFIX: &str = "SUMMARY#";
/// Partition key prefix of one bidder's bid copies in one auction (one partition per
/// auction and bidder, so a hot auction's bids spread over many partitions).
pub const BIDS_PREFIX: &str = "BIDS#";
/// The sort key of a strong-mode auction's ledger head, in the auction's summary partition
/// (`SUMMARY#<auctionId>`): upper case, so no Region name can be it.
pub const LEDGER_SK: &str = "LEDGER";

/// The bidder (a `sub`) as a key segment: `%` and `#` percent-encoded (a `sub` has no control
/// characters, and after this no `#`).
pub fn bidder_segment(sub: &str) -> String {
    sub.replace('%', "%25").replace('#', "%23")
}

/// The auction id of an auction item's partition key (`AUCTION#<id>`), if it is one.
pub fn auction_of_key(pk: &str) -> Option<AuctionId> {
    pk.strip_prefix(AUCTION_PREFIX)
        .and_then(|id| AuctionId::new(id).ok())
}

/// The (auction, Region) of a summary's keys (`SUMMARY#<auctionId>`, `<region>`), if they are
/// a summary's: the stream handler learns from the keys alone that a Region's summary changed.
pub fn summary_of_keys<'a>(pk: &str, sk: &'a str) -> Option<(AuctionId, &'a str)> {
    let auction = pk
        .strip_prefix(SUMMARY_PREFIX)
        .and_then(|id| AuctionId::new(id).ok())?;
    (!sk.is_empty()).then_some((auction, sk))
}

/// The auction id of a bid copy's partition key (`BIDS#<auctionId>#<bidder>`).
pub fn auction_of_bids_key(pk: &str) -> Option<AuctionId> {
    let rest = pk.strip_prefix(BIDS_PREFIX)?;
    let (auction, _bidder) = rest.split_once('#')?;
    AuctionId::new(auction).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_split_one_way_only() {
        assert_eq!(bidder_segment("a#b%c"), "a%23b%25c");
        let (auction, region) = summary_of_keys("SUMMARY#lot-1", "us-east-1").unwrap();
        assert_eq!((auction.as_str(), region), ("lot-1", "us-east-1"));
        assert!(summary_of_keys("AUCTION#lot-1", "META").is_none());
        assert!(summary_of_keys("SUMMARY#lot-1", "").is_none());
        assert_eq!(
            auction_of_bids_key("BIDS#lot-1#a%23b").unwrap().as_str(),
            "lot-1"
        );
        assert!(auction_of_bids_key("BIDS#lot-1").is_none());
    }
}
