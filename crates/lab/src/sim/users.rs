//! The simulated users every run shares (drills, chaos, load): one user model, honest or
//! hostile by its [`Behaviour`], recording every bid it makes and every answer it gets as
//! history operations ([`Op`]) for the one checker ([`crate::sim::history`]).
//!
//! A user is a person with an app: the app is a [`wsdr_client::Client`]; the person bids on a
//! timer, may reuse someone else's bidId, may close the app right after sending a bid (before
//! its answer) and open it again a little later, as a new session that knows nothing of it.

use crate::sim::history::Violation;
use crate::sim::trace::{Answer, BidKey, Op, OwnBid, Reply, Restore, UserEnd, UserTrace};
use crate::world::owner::Owner;
use crate::world::region_id::RegionId;
use crate::world::scale::{AwsDuration, AwsInstant};
use crate::world::timeline::Kind;
use crate::world::World;
use futures::future::BoxFuture;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use wsdr_client::{
    Backoff, Client, ClientBuilder, Event, Fallback, OfflineBids, RegionalEndpoint, TokenProvider,
};
use wsdr_core::UserId;
use wsdr_protocol::{Amount, AuctionId, BidId, BidStatus, Versions};

/// A user's tokens as an app keeps them ([`World::app_token`]): stored across restarts of
/// the app, reused until refused or nearly expired.
#[derive(Debug)]
pub struct LabTokens {
    pub lab: Arc<World>,
    pub sub: String,
}

impl LabTokens {
    pub fn new(lab: Arc<World>, sub: &str) -> Self {
        Self {
            lab,
            sub: sub.to_owned(),
        }
    }
}

impl TokenProvider for LabTokens {
    fn token(&self, refresh: bool) -> BoxFuture<'_, Result<String, wsdr_client::TokenError>> {
        Box::pin(async move {
            self.lab
                .app_token(&self.sub, refresh)
                .map_err(|e| wsdr_client::TokenError::Unavailable(e.into()))
        })
    }
}

/// A simulated user's client through the front door, with the reference timers divided by
/// the lab's time scale; with `fallback`, it also knows the Regions' own endpoints.
pub fn user_client(
    lab: &Arc<World>,
    sub: &str,
    auction: &AuctionId,
    seed: u64,
    fallback: bool,
) -> ClientBuilder {
    app_client(lab, sub, seed, fallback).subscribe(auction.clone())
}

/// A simulated person's app of any kind (an auction's, a chat room's): the client through
/// the front door with the reference timers divided by the lab's time scale, watching
/// nothing yet; with `fallback`, it also knows the Regions' own endpoints.
pub fn app_client(lab: &Arc<World>, sub: &str, seed: u64, fallback: bool) -> ClientBuilder {
    let scale = lab.config().scale;
    let mut builder = ClientBuilder::new(lab.front_door_url())
        .token_provider(Arc::new(LabTokens::new(lab.clone(), sub)))
        .heartbeat(
            scale.lab(AwsDuration::from_secs(30)),
            scale.lab(AwsDuration::from_secs(35)),
        )
        .backoff(Backoff::default().scaled(scale.factor()))
        .stable_after(scale.lab(AwsDuration::from_secs(30)))
        .connect_timeout(
            scale
                .lab(AwsDuration::from_secs(10))
                .max(Duration::from_millis(500)),
        )
        .offline_bids(OfflineBids::Queue {
            max: 4,
            max_age: scale.lab(AwsDuration::from_secs(30)),
        })
        .wall_clock(Arc::new(LabWallClock(lab.clock())))
        .network(lab.config().environment.network.clone())
        .seed(seed);
    if fallback {
        builder = builder.fallback(Fallback::new(regional_endpoints(lab)).scaled(scale.factor()));
    }
    builder
}

/// The lab's clock as a client's wall clock (a simulated run's starts at a fixed epoch).
struct LabWallClock(crate::world::clock::LabClock);

impl wsdr_client::WallClock for LabWallClock {
    fn now_ms(&self) -> u64 {
        wsdr_core::Clock::now_ms(&self.0)
    }
}

/// Each Region's own endpoint, in preference order.
pub fn regional_endpoints(lab: &World) -> Vec<RegionalEndpoint> {
    lab.regions()
        .map(|(_, region)| RegionalEndpoint {
            region: region.name.clone(),
            url: region.url(),
        })
        .collect()
}

// Kept here too: outside tools and tests have used `wsdr_lab::sim::users::wait_for`.
pub use crate::world::clock::wait_for;

/// How a simulated user behaves. Durations are AWS seconds (divided by the run's time scale).
#[derive(Debug, Clone)]
pub struct Behaviour {
    /// The first bid comes uniformly within this many seconds of bidding starting.
    pub first_bid_within: f64,
    /// Seconds between bids: uniform in `[bid_every.0, bid_every.1)`.
    pub bid_every: (f64, f64),
    /// The amount bid over when no high bid is known.
    pub floor: u64,
    /// A bid raises the high bid seen by `increment` times a step drawn from `steps`.
    pub increment: u64,
    pub steps: (u64, u64),
    /// The chance a bid is at or just below the high bid seen (mostly a rejection).
    pub below_high: f64,
    /// The chance an amount is not a multiple of the increment.
    pub awkward: f64,
    /// The chance a bid reuses the bidId of another user's bid seen in a push (same Region
    /// or, after a failover, the other one).
    pub hostile: f64,
    /// The chance the user closes the app right after sending a bid, before its answer, and
    /// opens it again `reopen_after` seconds later as a new session.
    pub closes_mid_bid: f64,
    pub reopen_after: (f64, f64),
    /// Record restores, endpoint moves and disconnects in the lab's timeline (drills).
    pub narrate: bool,
}

impl Behaviour {
    /// An honest user who bids every `every` seconds (±50%), always above the high bid seen.
    pub fn honest(every: f64) -> Self {
        Self {
            first_bid_within: every,
            bid_every: (0.5 * every, 1.5 * every),
            floor: 100_000,
            increment: 1_000,
            steps: (1, 20),
            below_high: 0.0,
            awkward: 0.0,
            hostile: 0.0,
            closes_mid_bid: 0.0,
            reopen_after: (2.0, 20.0),
            narrate: false,
        }
    }

    /// The chaos campaign's mix: the minimum next bid often (so both Regions take equal
    /// amounts during a split), rejections, odd amounts, stolen bidIds, apps closed mid-bid.
    pub fn hostile() -> Self {
        Self {
            first_bid_within: 10.0,
            bid_every: (3.0, 15.0),
            steps: (1, 4),
            below_high: 0.15,
            awkward: 0.3,
            hostile: 0.1,
            closes_mid_bid: 0.03,
            ..Self::honest(10.0)
        }
    }
}

/// What one user has seen so far.
#[derive(Debug, Clone, Default)]
pub struct UserRecord {
    /// Connected, with a state restored since.
    pub connected: bool,
    pub high_seen: Option<Amount>,
    /// Sessions lost so far (a closed app counts).
    pub reconnects: u64,
    /// bid id -> `reconnects` at its invoke: an answer after a reconnect may answer a replay,
    /// in another Region.
    invoked_at: HashMap<BidId, u64>,
    /// A `getState` answer arrived since the last [`Population::resync_all`] or disconnect.
    pub resynced: bool,
    /// The bidId of the last high bid pushed to this user by someone else.
    pub others_bid_id: Option<BidId>,
    /// The version vector of the last view the client reported.
    pub versions: Versions,
    /// Pushes the client reported that were strictly older than the view it had.
    pub views_backwards: u32,
    /// The high bid amount the client last showed (a state's, then each push's), and how
    /// many pushes showed a lower one than that.
    shown_high: Option<Amount>,
    pub highs_lowered: u32,
    /// (connected with a view, high bid seen) just before the forced final resync.
    pub before_resync: Option<(bool, Option<Amount>)>,
    /// Its sessions, as the run's trace records them.
    pub trace: UserTrace,
    /// The Region that served the last state, and the user's own bids in it (newest
    /// first), and `lastBid`.
    pub served_by: Option<RegionId>,
    pub own_bids: Vec<OwnBid>,
    pub last_bid: Option<OwnBid>,
}

impl UserRecord {
    fn replayed_since_invoke(&self, bid_id: &BidId) -> bool {
        self.invoked_at
            .get(bid_id)
            .is_none_or(|at| *at != self.reconnects)
    }

    fn session_lost(&mut self, at: AwsInstant) {
        if self.connected {
            self.trace.disconnects.push(at);
        }
        self.trace.connections_ended.push(at);
        self.connected = false;
        self.resynced = false;
        self.reconnects += 1;
    }
}

/// Who a user is: its `sub` and the auction it follows.
#[derive(Debug, Clone)]
pub struct UserSpec {
    /// Its `sub`: who the Regions key its bids by.
    pub user: UserId,
    pub auction: AuctionId,
}

impl UserSpec {
    /// `name` following `auction`, if `name` is a valid `sub`.
    pub fn new(name: impl Into<String>, auction: &AuctionId) -> anyhow::Result<Self> {
        Ok(Self {
            user: UserId::new(name).map_err(|e| anyhow::anyhow!("a simulated user: {e}"))?,
            auction: auction.clone(),
        })
    }

    /// Its `sub`, as its tokens carry it.
    pub fn sub(&self) -> &str {
        self.user.as_str()
    }
}

/// Builds a user's client for a session: (user, index, session seed).
pub type ClientFactory = Arc<dyn Fn(&UserSpec, usize, u64) -> ClientBuilder + Send + Sync>;

struct SimUser {
    spec: UserSpec,
    record: Mutex<UserRecord>,
    /// The open app, if any (closed apps are `None` until reopened).
    client: Mutex<Option<Client>>,
}

/// Every simulated user of a run, and the history they made.
pub struct Population {
    lab: Arc<World>,
    users: Vec<SimUser>,
    /// Keyed by (bidder, bidId): a bidId is scoped to its bidder.
    ops: Mutex<BTreeMap<BidKey, Op>>,
    bidding: watch::Sender<bool>,
    owner: Owner,
    online: AtomicUsize,
    peak: AtomicUsize,
    /// Rejections whose reason was not final, as violations.
    retryable_rejections: Mutex<Vec<Violation>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Population {
    /// Start every user; they bid once `bidding` is on ([`Population::set_bidding`]).
    pub fn start(
        lab: Arc<World>,
        specs: Vec<UserSpec>,
        behaviour: Behaviour,
        seed: u64,
        clients: ClientFactory,
        bidding: bool,
    ) -> Arc<Self> {
        let (bidding, _) = watch::channel(bidding);
        let population = Arc::new(Self {
            lab,
            users: specs
                .into_iter()
                .map(|spec| SimUser {
                    spec,
                    record: Mutex::default(),
                    client: Mutex::new(None),
                })
                .collect(),
            ops: Mutex::default(),
            bidding,
            owner: Owner::new(),
            online: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            retryable_rejections: Mutex::default(),
        });
        for index in 0..population.users.len() {
            let task = run_user(
                population.clone(),
                index,
                behaviour.clone(),
                seed,
                clients.clone(),
            );
            population.owner.spawn(task);
        }
        population
    }

    /// `n` users (`user-0`..) bidding on `auction` through the front door, bidding at once;
    /// `fallback(i)` says whether user `i`'s client also knows the Regions' own endpoints.
    pub fn through_front_door(
        lab: &Arc<World>,
        n: usize,
        auction: &AuctionId,
        behaviour: Behaviour,
        seed: u64,
        fallback: impl Fn(usize) -> bool + Send + Sync + 'static,
    ) -> anyhow::Result<Arc<Self>> {
        let specs = (0..n)
            .map(|i| UserSpec::new(format!("user-{i}"), auction))
            .collect::<anyhow::Result<_>>()?;
        let clients: ClientFactory = {
            let lab = lab.clone();
            Arc::new(move |spec: &UserSpec, index: usize, seed: u64| {
                user_client(&lab, spec.sub(), &spec.auction, seed, fallback(index))
            })
        };
        let population = Self::start(lab.clone(), specs, behaviour, seed, clients, true);
        let view: Arc<dyn crate::world::UsersView> = population.clone();
        lab.attach_users(&view);
        Ok(population)
    }

    pub fn len(&self) -> usize {
        self.users.len()
    }

    /// The users restored in `region` at or after `since`: how long after, AWS seconds.
    fn restores_since(&self, since: AwsInstant, region: RegionId) -> Vec<f64> {
        self.users
            .iter()
            .filter_map(|user| {
                lock(&user.record)
                    .trace
                    .first_restore(region, since)
                    .map(|at| at.secs_since(since))
            })
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    pub fn set_bidding(&self, on: bool) {
        self.bidding.send_replace(on);
    }

    pub fn record(&self, index: usize) -> UserRecord {
        lock(&self.users[index].record).clone()
    }

    pub fn records(&self) -> Vec<UserRecord> {
        (0..self.users.len()).map(|i| self.record(i)).collect()
    }

    pub fn spec(&self, index: usize) -> &UserSpec {
        &self.users[index].spec
    }

    /// Users connected with a state restored, now.
    pub fn online(&self) -> usize {
        self.online.load(Ordering::Relaxed)
    }

    /// The most users online at once.
    pub fn peak_online(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    pub fn all_connected(&self) -> bool {
        self.users.iter().all(|u| lock(&u.record).connected)
    }

    /// Every bid made so far, with its answers.
    /// Bids rejected for a reason that is not final, as violations.
    pub fn retryable_rejections(&self) -> Vec<Violation> {
        lock(&self.retryable_rejections).clone()
    }

    pub fn ops(&self) -> Vec<Op> {
        lock(&self.ops).values().cloned().collect()
    }

    /// The users' final views: give pushes `push_window` to bring every connected user
    /// `high_of(auction)`, note what they had, then force a `getState` on every user and wait
    /// up to `resync_window` for the answers (a user that dropped meanwhile reconnects and
    /// asks for the state itself).
    pub async fn final_views(
        &self,
        high_of: impl Fn(&AuctionId) -> Option<Amount>,
        push_window: Duration,
        resync_window: Duration,
    ) -> Vec<UserEnd> {
        wait_for(push_window, || {
            self.users.iter().all(|u| {
                let r = lock(&u.record);
                !(r.connected && r.resynced) || r.high_seen == high_of(&u.spec.auction)
            })
        })
        .await;
        for user in &self.users {
            let mut r = lock(&user.record);
            r.before_resync = Some((r.connected && r.resynced, r.high_seen));
            r.resynced = false;
        }
        for user in &self.users {
            if let Some(client) = lock(&user.client).as_ref() {
                let _ = client.resync();
            }
        }
        wait_for(resync_window, || {
            self.users.iter().all(|u| {
                let r = lock(&u.record);
                r.connected && r.resynced
            })
        })
        .await;
        self.users
            .iter()
            .map(|u| {
                let r = lock(&u.record);
                let (was_connected, pushed) = r.before_resync.unwrap_or((false, None));
                UserEnd {
                    user: u.spec.user.clone(),
                    auction: u.spec.auction.clone(),
                    connected: r.connected && r.resynced,
                    high_seen: r.high_seen,
                    high_before_resync: was_connected.then_some(pushed),
                    views_backwards: r.views_backwards,
                    highs_lowered: r.highs_lowered,
                    served_by: r.served_by,
                    own_bids: r.own_bids.clone(),
                    last_bid: r.last_bid.clone(),
                }
            })
            .collect()
    }

    /// Close every app and wait for the users' tasks to end.
    pub async fn close(&self) {
        self.owner.cancel();
        for user in &self.users {
            if let Some(client) = lock(&user.client).take() {
                client.close();
            }
        }
        self.owner.wait().await;
    }

    fn now(&self) -> AwsInstant {
        self.lab.now()
    }

    fn went_online(&self) {
        let now = self.online.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak.fetch_max(now, Ordering::Relaxed);
    }

    fn went_offline(&self) {
        let _ = self
            .online
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }
}

impl std::fmt::Debug for Population {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Population")
            .field("users", &self.users.len())
            .field("online", &self.online())
            .finish_non_exhaustive()
    }
}

impl Drop for Population {
    fn drop(&mut self) {
        self.owner.cancel();
    }
}

/// One user's life: open the app, bid on a timer while bidding is on, follow what the
/// client reports; now and then close the app mid-bid and reopen it later.
async fn run_user(
    population: Arc<Population>,
    index: usize,
    behaviour: Behaviour,
    seed: u64,
    clients: ClientFactory,
) {
    let user = &population.users[index];
    let bidder = user.spec.user.clone();
    let auction = user.spec.auction.clone();
    let timeline = population.lab.timeline().clone();
    let mut rng = SmallRng::seed_from_u64(seed ^ ((index as u64) << 32));
    let mut bidding = population.bidding.subscribe();
    let lab = population.lab.clone();
    let aws = |secs: f64| lab.lab_time(AwsDuration::from_secs_f64(secs));
    let mut session: u64 = 0;
    loop {
        let session_seed = seed
            .wrapping_mul(1_000_003)
            .wrapping_add(index as u64)
            .wrapping_add(session << 48);
        session += 1;
        let (client, mut events) = clients(&user.spec, index, session_seed).start();
        {
            // A reopened app is a new client: it has shown nothing yet, so what a client
            // promises about the views it shows (G7's and G8's rules: never a view older,
            // never a lower high bid, than one it showed) starts over with it. Its first
            // view may be a push that arrives before its `getState` answer.
            let mut record = lock(&user.record);
            record.shown_high = None;
            record.versions = Default::default();
        }
        *lock(&user.client) = Some(client.clone());
        let mut next_bid = Instant::now() + aws(rng.random_range(0.0..behaviour.first_bid_within));
        // A session ends when the person closes the app or the client stops.
        loop {
            let on = *bidding.borrow();
            tokio::select! {
                biased;
                changed = bidding.changed() => {
                    if changed.is_err() { return; }
                    if *bidding.borrow() {
                        next_bid = Instant::now() + aws(rng.random_range(0.0..behaviour.first_bid_within));
                    }
                }
                _ = tokio::time::sleep_until(next_bid), if on => {
                    next_bid = Instant::now() + aws(rng.random_range(behaviour.bid_every.0..behaviour.bid_every.1));
                    let Some((amount, stolen)) = next_amount(&population, index, &behaviour, &mut rng) else { continue };
                    let sent = match stolen {
                        Some(id) => client.bid_with_id(auction.clone(), amount, id).await,
                        None => client.bid(auction.clone(), amount).await,
                    };
                    let Ok(bid_id) = sent else { continue };
                    lock(&population.ops).insert((bidder.clone(), bid_id.clone()), Op {
                        user: bidder.clone(),
                        auction: auction.clone(),
                        bid_id: bid_id.clone(),
                        amount,
                        invoked: population.now(),
                        answers: Vec::new(),
                    });
                    let mut record = lock(&user.record);
                    let reconnects = record.reconnects;
                    record.invoked_at.insert(bid_id, reconnects);
                    if rng.random_bool(behaviour.closes_mid_bid) {
                        // The person closes the app with the bid on the wire: its answer
                        // goes nowhere, and the next session never heard of it.
                        record.trace.closed_mid_bid += 1;
                        if record.connected {
                            population.went_offline();
                        }
                        record.session_lost(population.now());
                        break;
                    }
                }
                event = events.recv() => {
                    let Some(event) = event else { break };
                    on_event(&population, index, event, behaviour.narrate, &timeline);
                }
            }
        }
        client.close();
        lock(&user.client).take();
        let reopen = rng.random_range(behaviour.reopen_after.0..behaviour.reopen_after.1);
        tokio::time::sleep(aws(reopen)).await;
    }
}

/// The next bid's amount, and a bidId stolen from another user (hostile users, sometimes).
fn next_amount(
    population: &Population,
    index: usize,
    behaviour: &Behaviour,
    rng: &mut SmallRng,
) -> Option<(Amount, Option<BidId>)> {
    let user = &population.users[index];
    let high = lock(&user.record)
        .high_seen
        .map_or(behaviour.floor, Amount::get);
    let step = rng.random_range(behaviour.steps.0..behaviour.steps.1.max(behaviour.steps.0 + 1));
    let mut amount = if rng.random_bool(behaviour.below_high) {
        high.saturating_sub(behaviour.increment * rng.random_range(0..3))
            .max(behaviour.floor)
    } else {
        high.max(behaviour.floor) + behaviour.increment * step
    };
    if rng.random_bool(behaviour.awkward) {
        amount += rng.random_range(1..behaviour.increment.max(2));
    }
    let amount = Amount::new(amount).ok()?;
    let stolen = if rng.random_bool(behaviour.hostile) {
        let seen = lock(&user.record).others_bid_id.clone();
        seen.filter(|id| !lock(&population.ops).contains_key(&(user.spec.user.clone(), id.clone())))
    } else {
        None
    };
    Some((amount, stolen))
}

/// The rejection reasons that are final (docs/PROTOCOL.md, `bidResult`).
pub const FINAL_REJECTIONS: &[&str] = &[
    "unknown_auction",
    "auction_closed",
    "below_starting_price",
    "too_low",
    "bid_id_reused",
    "forbidden",
];

/// The checker's word for a bid's status.
fn answer_of(status: BidStatus) -> Answer {
    match status {
        BidStatus::Accepted => Answer::Accepted,
        BidStatus::Duplicate => Answer::Duplicate,
        BidStatus::Rejected => Answer::Rejected,
        BidStatus::Unknown => Answer::Unknown,
        BidStatus::Redirect => Answer::Redirected,
    }
}

fn on_event(
    population: &Population,
    index: usize,
    event: Event,
    narrate: bool,
    timeline: &crate::world::timeline::Timeline,
) {
    let user = &population.users[index];
    let sub = user.spec.sub();
    let at = population.now();
    let region_of = |name: &str| population.lab.region_named(name);
    let mut record = lock(&user.record);
    match event {
        Event::StateRestored {
            region,
            auction,
            you,
            ..
        } => {
            // A getState answer, whether asked by a resync or by the client itself after a
            // reconnect: either is a fresh view.
            if !record.connected {
                population.went_online();
            }
            record.connected = true;
            record.resynced = true;
            record.high_seen = auction.high_bid.map(|h| h.amount);
            record.shown_high = record.high_seen;
            record.versions = auction.versions;
            let served_by = region_of(&region);
            if let Some(region) = served_by {
                record.trace.restores.push(Restore { at, region });
            }
            record.own_bids = you
                .bids
                .iter()
                .map(|b| (b.bid_id.clone(), b.amount))
                .collect();
            record.last_bid = you.last_bid.map(|b| (b.bid_id, b.amount));
            record.served_by = served_by;
            drop(record);
            if narrate {
                timeline.record_in(
                    Kind::ClientRestored,
                    &region,
                    format!("{sub} restored from {region}"),
                );
            }
        }
        Event::StateUpdated {
            high_bid, versions, ..
        } => {
            if let Some(h) = high_bid.as_ref().filter(|h| h.bidder.as_str() != sub) {
                record.others_bid_id = Some(h.bid_id.clone());
            }
            // The client must never report a view older than the one it has.
            if record.versions != versions && wsdr_protocol::dominates(&record.versions, &versions)
            {
                record.views_backwards += 1;
            }
            wsdr_protocol::merge_versions(&mut record.versions, &versions);
            let seen = high_bid.map(|h| h.amount);
            // Nor show a lower high bid than it showed: high bids are max registers.
            if seen < record.shown_high {
                record.highs_lowered += 1;
            }
            record.shown_high = seen;
            record.high_seen = record.high_seen.max(seen);
        }
        Event::Disconnected { reason } => {
            if !matches!(
                reason,
                wsdr_client::DisconnectReason::Moved { .. }
                    | wsdr_client::DisconnectReason::Returning
                    | wsdr_client::DisconnectReason::ClientClosed
            ) {
                record.trace.unplanned_disconnects += 1;
            }
            // The Region that had this user, if it was connected with a state (the chart's
            // connections per Region).
            let lost_from = record.connected.then_some(record.served_by).flatten();
            if record.connected {
                population.went_offline();
            }
            record.session_lost(at);
            drop(record);
            if narrate {
                let detail = format!("{sub}: {reason:?}");
                match lost_from {
                    Some(region) => timeline.record_in(
                        Kind::ClientDisconnected,
                        population.lab.name(region),
                        detail,
                    ),
                    None => timeline.record(Kind::ClientDisconnected, detail),
                }
            }
        }
        Event::EndpointChanged {
            url,
            regional,
            reason,
        } => {
            record.trace.moves += 1;
            drop(record);
            if narrate {
                let to = if regional {
                    url
                } else {
                    "the global name".to_owned()
                };
                timeline.record(Kind::ClientMoved, format!("{sub} -> {to} ({reason})"));
            }
        }
        Event::BidExpired { bid_id } => {
            drop(record);
            if let Some(op) = lock(&population.ops).get_mut(&(user.spec.user.clone(), bid_id)) {
                op.answers.push(Reply {
                    at,
                    answer: Answer::Expired,
                    region: None,
                    reconnected: true,
                });
            }
        }
        Event::BidResult {
            bid_id,
            status,
            region,
            reason,
        } => on_bid_result(
            population,
            user,
            &mut record,
            at,
            bid_id,
            status,
            &region,
            reason,
        ),
        _ => {}
    }
}

/// A bid's answer: into the op's replies, and a retryable rejection is a violation.
#[allow(clippy::too_many_arguments)]
fn on_bid_result(
    population: &Population,
    user: &SimUser,
    record: &mut UserRecord,
    at: AwsInstant,
    bid_id: BidId,
    status: BidStatus,
    region: &str,
    reason: Option<String>,
) {
    let region_of = |name: &str| population.lab.region_named(name);
    let replayed = record.replayed_since_invoke(&bid_id);
    let answered_by = region_of(region);
    // A rejection is final for the clients: only a reason that sending the bid again
    // cannot change may come with one.
    if status == BidStatus::Rejected
        && !reason
            .as_deref()
            .is_some_and(|r| FINAL_REJECTIONS.contains(&r))
    {
        if let Some(region) = answered_by {
            lock(&population.retryable_rejections).push(Violation::RetryableRejected {
                bidder: user.spec.user.clone(),
                bid_id: bid_id.clone(),
                region,
                reason: reason.clone().unwrap_or_default(),
            });
        }
    }
    let answer = answer_of(status);
    let mut ops = lock(&population.ops);
    if let Some(op) = ops.get_mut(&(user.spec.user.clone(), bid_id)) {
        op.answers.push(Reply {
            at,
            answer,
            region: answered_by,
            reconnected: replayed,
        });
        if answer.acknowledges() {
            record.high_seen = record.high_seen.max(Some(op.amount));
        }
    }
}

impl crate::world::UsersView for Population {
    fn total(&self) -> usize {
        self.users.len()
    }

    fn online(&self) -> usize {
        Population::online(self)
    }

    fn restored_since(&self, since: AwsInstant, region: RegionId) -> Vec<f64> {
        self.restores_since(since, region)
    }
}
