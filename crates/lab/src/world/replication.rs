//! Global Tables (MREC) replication between the two Regions' stores: each local write is
//! shipped on its own after a configurable lag and applied with per-item last-writer-wins.
//! Nothing orders two different items (AWS: "items are replicated individually"; a
//! transaction's items are not replicated together): each write waits its own share of the
//! lag, between half and one and a half times it, so a bid's summary often arrives before
//! its copy. Versions of one item that arrive out of turn are settled by last writer wins.
//! A link can be cut (partition, or the source Region down); what it holds then is the data
//! at risk (the RPO window) until it heals.

use crate::world::fault::Fault;
use crate::world::owner::Owner;
use crate::world::region_id::RegionId;
use crate::world::scale::{AwsDuration, TimeScale};
use crate::world::store::ReplicaStore;
use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::time::Instant;
use wsdr_core::items::{Item, ItemKey};
use wsdr_core::memory::Change;

/// Called with each replicated write the target applied (the lab pushes replicated bids
/// with it, as the stream handler does in AWS).
pub type AppliedHook = Arc<dyn Fn(&Change) + Send + Sync>;

/// How soon a link tries again after its target refused a write.
const RETRY_AFTER_REFUSAL: Duration = Duration::from_millis(2);

/// What one delivery pass ended with.
enum Delivered {
    /// Nothing more is due; the next write falls due then (`None`: nothing queued, or cut).
    Idle(Option<Instant>),
    /// The target refused a write.
    Refused,
}

/// One direction of replication.
#[derive(Clone)]
pub struct Link {
    /// The Region whose writes it ships.
    from: RegionId,
    /// The lag it returns to when healed, and the scale that makes AWS time lab time.
    normal_lag: AwsDuration,
    scale: TimeScale,
    /// Each write with when it was queued and its share of the lag (0.5 to 1.5).
    pending: Arc<Mutex<VecDeque<(Instant, f64, Change)>>>,
    lag_us: Arc<AtomicU64>,
    cut: Arc<AtomicBool>,
    applied: Arc<AtomicU64>,
    on_applied: Arc<OnceLock<AppliedHook>>,
    /// Woken when something the worker waits on changes: a new write, the lag, a heal.
    changed: Arc<tokio::sync::Notify>,
    /// Copies named as high bids by summaries this link delivered, not delivered themselves
    /// (yet): what a Region lost now would leave the other holding a summary ahead of its copy.
    named_not_shipped: Arc<Mutex<BTreeSet<ItemKey>>>,
    /// Strong mode: what the link carries was committed on the table's quorum before it was
    /// queued, so the target's replica, and its own stream, hold it whatever becomes of the
    /// source Region; only the target being cut off delays it.
    quorum_writes: Arc<AtomicBool>,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("lag_us", &self.lag_us)
            .field("cut", &self.cut)
            .finish_non_exhaustive()
    }
}

/// What a link holds that the other side has not seen.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct InFlight {
    pub items: usize,
    pub oldest_ms: f64,
}

impl Link {
    /// Start shipping `from`'s writes to `to`; each write's share of the lag is drawn from
    /// `entropy`.
    pub fn start(
        from_region: RegionId,
        from: &dyn ReplicaStore,
        to: Arc<dyn ReplicaStore>,
        lag: AwsDuration,
        scale: TimeScale,
        owner: &Owner,
        entropy: Arc<dyn wsdr_core::Entropy>,
    ) -> Self {
        let link = Self {
            from: from_region,
            normal_lag: lag,
            scale,
            pending: Arc::default(),
            lag_us: Arc::new(AtomicU64::new(scale.lab(lag).as_micros() as u64)),
            cut: Arc::default(),
            applied: Arc::default(),
            on_applied: Arc::default(),
            changed: Arc::default(),
            named_not_shipped: Arc::default(),
            quorum_writes: Arc::default(),
        };
        let mut feed = from.change_feed();
        let (queue, changed) = (link.pending.clone(), link.changed.clone());
        owner.spawn(async move {
            while let Some(change) = feed.recv().await {
                let share = crate::world::env::uniform(entropy.as_ref(), 0.5, 1.5);
                queue.lock().unwrap_or_else(|p| p.into_inner()).push_back((
                    Instant::now(),
                    share,
                    change,
                ));
                changed.notify_one();
            }
        });
        let worker = link.clone();
        owner.spawn(async move {
            loop {
                // Sleep until the next write is due, or something changes; nothing polls, so
                // an idle link costs nothing however long the run.
                let wake = match worker.deliver(to.as_ref()).await {
                    Delivered::Idle(next) => next,
                    // The target refused (DynamoDB Local busy): try again shortly.
                    Delivered::Refused => Some(Instant::now() + RETRY_AFTER_REFUSAL),
                };
                let changed = worker.changed.notified();
                match wake {
                    Some(at) => {
                        tokio::select! {
                            biased;
                            () = changed => {}
                            () = tokio::time::sleep_until(at) => {}
                        }
                    }
                    None => changed.await,
                }
            }
        });
        link
    }

    /// Apply every write that has waited out its share of the lag, in any order between
    /// items. A write the target could not take (DynamoDB Local busy) stays queued.
    async fn deliver(&self, to: &dyn ReplicaStore) -> Delivered {
        loop {
            if self.cut.load(Ordering::SeqCst) {
                return Delivered::Idle(None);
            }
            let lag = Duration::from_micros(self.lag_us.load(Ordering::Relaxed));
            let (next, due) = {
                let queue = self.pending.lock().unwrap_or_else(|p| p.into_inner());
                let now = Instant::now();
                let next = queue
                    .iter()
                    .position(|(at, share, _)| *at + lag.mul_f64(*share) <= now)
                    .and_then(|i| queue.get(i).map(|(_, _, change)| (i, change.clone())));
                let due = queue
                    .iter()
                    .map(|(at, share, _)| *at + lag.mul_f64(*share))
                    .min();
                (next, due)
            };
            let Some((index, next)) = next else {
                return Delivered::Idle(due);
            };
            let applied = match to.apply_replicated(&next).await {
                Err(_) => return Delivered::Refused,
                Ok(applied) => applied,
            };
            self.note_shipped(&next);
            if applied {
                if let Some(hook) = self.on_applied.get() {
                    hook(&next);
                }
            }
            {
                // Only this worker removes items, and new ones go to the back: `index`
                // still names `next`.
                let mut queue = self.pending.lock().unwrap_or_else(|p| p.into_inner());
                queue.remove(index);
            }
            self.applied.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Keep [`Self::summary_ahead_of_its_copy`] true to what was shipped.
    fn note_shipped(&self, change: &Change) {
        let mut named = self
            .named_not_shipped
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        match &change.item {
            Item::Summary { topic, summary } => {
                // The op the summary carries whole: the auction's high bid (the app's
                // `carried`, read through the auction's codec until the lab runs any app).
                let high = wsdr_auction::store::auction_of(topic)
                    .and_then(|auction| {
                        wsdr_auction::store::region_summary_of(&auction, summary).ok()
                    })
                    .and_then(|summary| summary.high);
                if let Some(high) = high {
                    named.insert(wsdr_auction::store::op_of(&high).key());
                }
            }
            Item::Op { .. } => {
                named.remove(&change.item.key());
            }
            _ => {}
        }
    }

    /// This link has delivered a summary whose high bid's copy it still holds: the other
    /// side shows a winner whose copy item it does not have (watch-and-strike faults use it).
    pub fn summary_ahead_of_its_copy(&self) -> bool {
        let named = self
            .named_not_shipped
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if named.is_empty() {
            return false;
        }
        let queue = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        queue.iter().any(|(_, _, change)| {
            matches!(change.item, Item::Op { .. }) && named.contains(&change.item.key())
        })
    }

    /// Strong mode: mark this link as carrying writes already committed on the quorum.
    pub fn carry_quorum_writes(&self) {
        self.quorum_writes.store(true, Ordering::SeqCst);
    }

    /// The link holds a committed write its target's stream has not shown yet (strong mode:
    /// a head written by the source): what a Region lost now would leave for the other's
    /// stream alone to push.
    pub fn holds_a_head(&self) -> bool {
        let queue = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        queue
            .iter()
            .any(|(_, _, change)| matches!(change.item, Item::Head { .. }))
    }

    /// Set (once) what to call for each applied write.
    pub fn on_applied(&self, hook: AppliedHook) {
        let _ = self.on_applied.set(hook);
    }

    /// Apply what `fault` means for this direction of replication; `gone`: the Regions lost
    /// for good, with this fault applied. Returns the writes a Region lost for good took
    /// with it, if this link was shipping them.
    pub fn inject(&self, fault: &Fault, gone: &[RegionId]) -> Vec<Change> {
        let quorum_writes = self.quorum_writes.load(Ordering::SeqCst);
        match *fault {
            // Strong mode: the source Region down or lost takes nothing with it; its committed
            // writes are on the quorum, and the target's stream shows them on time.
            Fault::Down(r) | Fault::NeverReturns(r) if quorum_writes && r == self.from => {}
            // A Region down ships nothing; what it holds waits for it.
            Fault::Down(r) if r == self.from => self.set_cut(true),
            Fault::OneWay { from } if from == self.from => self.set_cut(true),
            // The Region's replication both ways (eventual), or its table member (strong,
            // in the cluster): in both modes the pushes between the Regions stop too.
            Fault::Partition | Fault::Isolate(_) => self.set_cut(true),
            Fault::Lag(lag) => self.set_lag(self.scale.lab(lag)),
            // Both directions end with it; what it had not shipped is gone.
            Fault::NeverReturns(r) => {
                self.set_cut(true);
                if r == self.from {
                    return self.discard();
                }
            }
            Fault::Heal => {
                // A link from or to a Region that never returned stays cut (strong mode: only
                // to one; what a lost source committed still reaches the target's stream).
                let to = self.from.other();
                self.set_cut(
                    gone.iter()
                        .any(|g| (*g == self.from && !quorum_writes) || *g == to),
                );
                self.set_lag(self.scale.lab(self.normal_lag));
            }
            _ => {}
        }
        Vec::new()
    }

    fn set_lag(&self, lag: Duration) {
        self.lag_us.store(lag.as_micros() as u64, Ordering::Relaxed);
        self.changed.notify_one();
    }

    pub fn lag(&self) -> Duration {
        Duration::from_micros(self.lag_us.load(Ordering::Relaxed))
    }

    /// Drop everything not yet delivered and return it: the writes a Region that never comes
    /// back takes with it (the measured RPO).
    pub fn discard(&self) -> Vec<Change> {
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
            .map(|(_, _, change)| change)
            .collect()
    }

    fn set_cut(&self, cut: bool) {
        self.cut.store(cut, Ordering::SeqCst);
        self.changed.notify_one();
    }

    pub fn is_cut(&self) -> bool {
        self.cut.load(Ordering::SeqCst)
    }

    pub fn in_flight(&self) -> InFlight {
        let queue = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        InFlight {
            items: queue.len(),
            oldest_ms: queue
                .front()
                .map_or(0.0, |(at, _, _)| at.elapsed().as_secs_f64() * 1000.0),
        }
    }

    pub fn applied(&self) -> u64 {
        self.applied.load(Ordering::Relaxed)
    }
}
