//! wsdr's first app: a real-time auction on the kit.
//!
//! A bid is an op of the auction's topic (`auction:<id>`): every Region's copy of it is its own
//! item keyed by (auction, bidder, bidId, Region), and each Region's summary (a counter and a
//! max register, its highest bid) is written in the same transaction and by no other Region:
//! bids are idempotent, no write can replace another user's bid, and two Regions that both
//! accept bids during a split converge to the same high bid (docs/DATA_MODEL.md). In strong
//! mode every bid is one conditional write of the auction's ledger head.
//!
//! The kit stores, replicates, settles and pushes; this crate holds the auction's values
//! ([`model`]), its rules as the kit's app ([`store::AuctionApp`]), and its own frames beside
//! the kit's envelope ([`AuctionService`]), which old clients speak.

pub mod model;
mod service;
pub mod store;

pub use model::{
    held_bids, Auction, AuctionSnapshot, BidRecord, LastBid, LedgerHead, RegionSummary,
};
pub use service::{AuctionService, BidReason};
#[cfg(feature = "memory")]
pub use store::BidsHeld;
pub use store::{bids_in, topic, AuctionApp, BidCommit, LedgerStore, StateStore};
pub use wsdr_core::{Error, Result};
