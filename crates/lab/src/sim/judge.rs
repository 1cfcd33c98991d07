//! The end of every run that bids on one auction (drills and chaos): stop bidding, let
//! answers arrive and replication drain, take every user's final view, read what the Regions
//! hold, and run the checker.

use crate::sim::history::{
    check, final_states, lost_with_regions, settle, FinalState, Lost, Op, UserEnd, Violation,
};
use crate::sim::users::{Population, UserRecord};
use crate::world::lab::Lab;
use std::time::Duration;
use wsdr_protocol::AuctionId;

/// What a run ended with, and what the checker made of it.
#[derive(Debug)]
pub struct Judgement {
    pub converged: bool,
    /// The surviving Regions' final states (read after the users' final views).
    pub regions: Vec<FinalState>,
    pub ends: Vec<UserEnd>,
    pub ops: Vec<Op>,
    pub records: Vec<UserRecord>,
    /// Bid copies lost with Regions that never came back.
    pub lost: Lost,
    pub violations: Vec<Violation>,
}

/// End the run and judge it. `drain` (lab time) lets outstanding answers arrive before
/// replication is drained; pushes get a minute (AWS) to bring every connected user the
/// converged high bid before the forced final resync, which gets five.
pub async fn judge(
    lab: &Lab,
    users: &Population,
    auction: &AuctionId,
    drain: Duration,
) -> anyhow::Result<Judgement> {
    let scale = lab.config.scale;
    users.set_bidding(false);
    tokio::time::sleep(drain).await;
    let converged = settle(lab).await;
    // A bid still in flight when bidding stopped can commit after the drain: strong mode's
    // decisions take several cross-Region requests and retry pauses (up to 128 ms AWS each,
    // divided by the time scale like every AWS duration). Wait for the stores to stay
    // unchanged for 400 ms of lab time (longer than a pause at any scale and, in the
    // real-time lab, than the machine's own hiccups; bounded) before taking the final views.
    let mut regions = final_states(lab, auction).await?;
    for _ in 0..25 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        let again = final_states(lab, auction).await?;
        if again == regions {
            break;
        }
        regions = again;
    }
    let converged_high = regions.first().and_then(|r| r.high.as_ref().map(|h| h.2));
    let mut ends = users
        .final_views(|_| converged_high, scale.secs(60.0), scale.secs(300.0))
        .await;
    // Read again: a late replay could have landed during the final views.
    let regions = final_states(lab, auction).await?;
    // A bid still in flight when bidding stopped (strong mode's decisions are slower) may
    // commit after the push window was judged against the first read: pushes then had no
    // target to reach. The forced resync's views are still checked against the final state.
    let final_high = regions.first().and_then(|r| r.high.as_ref().map(|h| h.2));
    if final_high != converged_high {
        for end in &mut ends {
            end.high_before_resync = None;
        }
    }
    let ops = users.ops();
    let records = users.records();
    users.close().await;
    // A Region lost for good is not checked: what it took with it is the RPO, and the
    // checker is told exactly which bid copies those are.
    let lost = lost_with_regions(lab);
    let mut violations = check(&ops, &regions, converged, &ends, &lost);
    crate::sim::history::excuse_lost_summaries(
        &mut violations,
        crate::sim::history::lost_summaries(lab),
    );
    Ok(Judgement {
        converged,
        regions,
        ends,
        ops,
        records,
        lost,
        violations,
    })
}
