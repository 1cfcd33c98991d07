//! Bids made while disconnected ([`crate::OfflineBids::Queue`]): the two rules, pure, as both
//! clients apply them (the browser client's `offlineBidExpired` and `BidBook.add`; the shared
//! vectors are `conformance/offline_bids.json`).

use std::time::Duration;

/// Whether a bid queued `age` ago is too old to send when a session opens: dropped unsent
/// ([`crate::Event::BidExpired`]), never sent late. An age equal to the limit is still sent.
pub fn expired(age: Duration, max_age: Duration) -> bool {
    age > max_age
}

/// Whether one more bid may wait, with `queued` bids already waiting and room for `max`.
pub fn admits(queued: usize, max: usize) -> bool {
    queued < max
}
