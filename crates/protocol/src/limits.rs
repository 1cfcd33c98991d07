//! Limits of the protocol. API Gateway's own quotas are the outer bound; ours are tighter
//! where a tighter bound makes hostile input cheap to reject.

/// API Gateway WebSocket message payload quota (128 KB). Checked before any parsing.
pub const MAX_MESSAGE_BYTES: usize = 128 * 1024;
/// API Gateway WebSocket frame quota (32 KB); a message may span several frames.
pub const MAX_FRAME_BYTES: usize = 32 * 1024;
/// Largest bid in minor units: 10^12 (ten billion in a two-decimal currency). Far above any
/// real auction, far below `u64::MAX`, so sums and increments cannot overflow.
pub const MAX_AMOUNT: u64 = 1_000_000_000_000;
/// A client-made bid id is 8 to 64 characters of `[A-Za-z0-9_-]` (a UUID fits).
pub const BID_ID_MIN_LEN: usize = 8;
/// See [`BID_ID_MIN_LEN`].
pub const BID_ID_MAX_LEN: usize = 64;
/// An auction id is 1 to 64 characters of `[A-Za-z0-9_.:-]`.
pub const AUCTION_ID_MAX_LEN: usize = 64;
/// Deepest JSON nesting accepted in a client frame. Real frames are flat (depth 1); this
/// rejects nesting bombs before a recursive parser sees them.
pub const MAX_NESTING_DEPTH: usize = 8;

/// Most own bids a `state` frame lists (`you.bids`), newest first: ~100 bytes each keeps the
/// frame well inside API Gateway's 32 KB frame size.
pub const OWN_BIDS_MAX: usize = 100;

/// Most bidIds one `getState` may ask about (`bidIds`): each costs the server one point read,
/// so a request stays bounded whatever the caller has bid.
pub const SETTLE_BIDS_MAX: usize = 32;

/// The subject prefix of every probe (canary) identity and of no user's: the authorizer
/// admits canary-issuer tokens only with it and user-issuer tokens only without it, so a
/// subject names exactly one principal across both issuers.
pub const PROBE_SUBJECT_PREFIX: &str = "canary:";

/// The most logs (Regions, or strong mode's one) a `getState`'s `since` may name: a deployment
/// has two or three Regions; the rest is room for Regions added later.
pub const MAX_SINCE_LOGS: usize = 8;
