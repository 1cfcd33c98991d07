//! A busy chat room in virtual time (`wsdr-bench busy-room`): the real write path of the kit
//! (`AppService<Chat>`), the real push path (`wsdr_core::push`, the same leases, shards, pages
//! and budget as the auction's) and the real history read (`getState{since}`), against the
//! models of [`crate::hot`] (the state table's 4-12 ms, the shard pages' 5-15 ms, the stream's
//! 250 ms polls, SQS and the workers' mapping, the account's `@connections` bucket).
//!
//! Every watcher is a client holding the room's log: a push brings the newest
//! [`wsdr_chat::PUSH_TAIL`] messages; a push whose count passes what the watcher holds makes
//! it ask `getState{since: its frontier}` (a round trip of 10-30 ms each way, the real
//! service's read), as both clients do. The figure that matters: for each message, from its
//! answer to the moment the *last* watcher holds it (every watcher, not a percentile of
//! them), and what the pulls cost. A run is a function of its seed.

use crate::hot::{
    ModelConnections, ModelLeases, ModelQueue, VirtualClock, ACCOUNT_BURST, ACCOUNT_RPS,
};
use async_trait::async_trait;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use wsdr_auction::AuctionService;
use wsdr_core::memory::{MemoryConnections, MemoryStateStore};
use wsdr_core::push::{InProcessLeases, LocalPushQueue, PushPorts, PushSettings, Pusher};
use wsdr_core::topics::{AppService, Apps, TopicService};
use wsdr_core::{
    Clock, ConnectionId, Connections, Entropy, Notifier, Principal, SeededEntropy, UserId,
};
use wsdr_lab::world::mapping::{MappingSettings, QueueMapping};
use wsdr_lab::world::store::{FaultyStore, ReplicaStore};
use wsdr_lab::RegionId;
use wsdr_protocol::{OpId, ServerMessage, Topic, TopicName, Versions};

const REGION: &str = "us-east-1";

/// One run's load.
#[derive(Debug, Clone)]
pub struct RoomParams {
    pub watchers: usize,
    pub messages_per_s: f64,
    /// AWS seconds of posting.
    pub seconds: f64,
    pub seed: u64,
    pub push: PushSettings,
}

/// What one run measured (virtual time).
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RoomResult {
    pub watchers: usize,
    pub messages_per_s: f64,
    pub accepted: usize,
    /// Writes answered `unknown` (the room's count kept moving through every attempt): a
    /// client sends them again.
    pub unknown: usize,
    pub write_p99_ms: f64,
    /// Per message: from its answer to the last watcher holding it. p99 and max.
    pub every_watcher_p99_ms: f64,
    pub every_watcher_max_ms: f64,
    /// (watcher, message) pairs never held by the run's end.
    pub never_held: u64,
    pub pushes: u64,
    pub widened_pushes: u64,
    pub widest_spacing_ms: u64,
    pub max_posts_per_s: usize,
    pub budget_per_s: f64,
    pub throttled: u64,
    pub largest_push_bytes: usize,
    /// `getState{since}` reads the watchers made, per second, and the copies they carried.
    pub pulls_per_s: f64,
    pub pulled_copies_per_s: f64,
}

/// One watcher's log: its frontier and the positions held past it.
#[derive(Debug, Default)]
struct Held {
    frontier: u64,
    above: BTreeSet<u64>,
    pulling: bool,
}

/// Every watcher's log, and for each position the last time a watcher first held it.
#[derive(Debug, Default)]
struct Logs {
    watchers: Vec<Held>,
    /// By position (index 0 unused): (watchers holding it, latest first-hold time, s).
    holders: Vec<(u32, f64)>,
    pulls: u64,
    pulled_copies: u64,
}

impl Logs {
    fn hold(&mut self, watcher: usize, position: u64, at: f64) {
        let held = &mut self.watchers[watcher];
        if position <= held.frontier || !held.above.insert(position) {
            return;
        }
        while held.above.remove(&(held.frontier + 1)) {
            held.frontier += 1;
        }
        let index = position as usize;
        if self.holders.len() <= index {
            self.holders.resize(index + 1, (0, 0.0));
        }
        let slot = &mut self.holders[index];
        slot.0 += 1;
        slot.1 = slot.1.max(at);
    }
}

/// A frame's count of the room's log and the positions it carries.
#[derive(Debug, Clone, Default)]
struct Carried {
    count: u64,
    positions: Vec<u64>,
}

fn carried(frame: &serde_json::Value) -> Carried {
    Carried {
        count: frame["versions"][REGION].as_u64().unwrap_or(0),
        positions: frame["ops"]
            .as_array()
            .map(|ops| {
                ops.iter()
                    .filter_map(|op| op["position"].as_u64())
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// The account's bucket and each post's service time (as [`crate::hot`]'s), delivering each
/// push to its watcher's log; a push whose count passes the watcher's frontier starts a pull.
struct RoomNotifier {
    entropy: Arc<dyn Entropy>,
    start: Instant,
    bucket: Mutex<(f64, f64, Vec<f64>, u64)>,
    puller: Mutex<Option<Arc<Puller>>>,
    /// The last frame parsed (the pusher posts one frame to every watcher of a chunk).
    parsed: Mutex<(u64, Carried)>,
    largest: std::sync::atomic::AtomicUsize,
}

fn fingerprint(payload: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    payload.len().hash(&mut h);
    payload[..payload.len().min(512)].hash(&mut h);
    payload[payload.len().saturating_sub(512)..].hash(&mut h);
    h.finish()
}

#[async_trait]
impl Notifier for RoomNotifier {
    async fn send(&self, connection: &ConnectionId, payload: &[u8]) -> wsdr_core::Result<()> {
        let now = self.start.elapsed().as_secs_f64();
        let admitted = {
            let mut b = self.bucket.lock().unwrap_or_else(|p| p.into_inner());
            b.0 = (b.0 + (now - b.1) * ACCOUNT_RPS).min(ACCOUNT_BURST);
            b.1 = now;
            b.2.push(now);
            if b.0 >= 1.0 {
                b.0 -= 1.0;
                true
            } else {
                b.3 += 1;
                false
            }
        };
        if !admitted {
            return Err(wsdr_core::Error::Throttled(
                "429 from the account bucket".into(),
            ));
        }
        let latency = 8_000 + self.entropy.below(12_001);
        tokio::time::sleep(Duration::from_micros(latency)).await;
        self.largest
            .fetch_max(payload.len(), std::sync::atomic::Ordering::Relaxed);
        let key = fingerprint(payload);
        let frame = {
            let mut parsed = self.parsed.lock().unwrap_or_else(|p| p.into_inner());
            if parsed.0 != key {
                let value: serde_json::Value =
                    serde_json::from_slice(payload).unwrap_or(serde_json::Value::Null);
                *parsed = (key, carried(&value));
            }
            parsed.1.clone()
        };
        let watcher = connection.as_str()[1..]
            .parse::<usize>()
            .unwrap_or(usize::MAX);
        let puller = self
            .puller
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(puller) = puller {
            puller.deliver(watcher, &frame);
        }
        Ok(())
    }
}

/// The watchers' clients asking for what a push did not bring.
struct Puller {
    chat: Arc<dyn TopicService>,
    logs: Arc<Mutex<Logs>>,
    entropy: Arc<dyn Entropy>,
    start: Instant,
    topic: Topic,
    watcher: UserId,
}

impl Puller {
    fn deliver(self: &Arc<Self>, watcher: usize, frame: &Carried) {
        let at = self.start.elapsed().as_secs_f64();
        let mut logs = self.logs.lock().unwrap_or_else(|p| p.into_inner());
        if watcher >= logs.watchers.len() {
            return;
        }
        for position in &frame.positions {
            logs.hold(watcher, *position, at);
        }
        let held = &mut logs.watchers[watcher];
        if frame.count > held.frontier && !held.pulling {
            held.pulling = true;
            let since = held.frontier;
            drop(logs);
            let puller = self.clone();
            tokio::spawn(async move { puller.pull(watcher, since).await });
        }
    }

    /// One watcher's `getState{since}`, asked again while an answer brings copies and says
    /// there are more (at most 20 answers: bounded).
    async fn pull(self: Arc<Self>, watcher: usize, mut since: u64) {
        let connection = match ConnectionId::new(format!("w{watcher:07}")) {
            Ok(c) => c,
            Err(_) => return,
        };
        for _ in 0..20 {
            let there = 10_000 + self.entropy.below(20_001);
            tokio::time::sleep(Duration::from_micros(there)).await;
            let from = Versions::from([(REGION.to_owned(), since)]);
            let answer = self
                .chat
                .state(
                    &connection,
                    &Principal::User(self.watcher.clone()),
                    &self.topic,
                    &[],
                    Some(&from),
                )
                .await;
            let back = 10_000 + self.entropy.below(20_001);
            tokio::time::sleep(Duration::from_micros(back)).await;
            let at = self.start.elapsed().as_secs_f64();
            let mut logs = self.logs.lock().unwrap_or_else(|p| p.into_inner());
            logs.pulls += 1;
            let Ok(ServerMessage::TopicState { ops, complete, .. }) = answer else {
                break;
            };
            logs.pulled_copies += ops.len() as u64;
            for op in &ops {
                logs.hold(watcher, op.position, at);
            }
            let frontier = logs.watchers[watcher].frontier;
            if complete || ops.is_empty() || frontier == since {
                break;
            }
            since = frontier;
        }
        let mut logs = self.logs.lock().unwrap_or_else(|p| p.into_inner());
        logs.watchers[watcher].pulling = false;
    }
}

/// One run, on a fresh paused runtime of its own.
pub fn run(params: &RoomParams) -> anyhow::Result<RoomResult> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()?;
    runtime.block_on(run_paused(params.clone()))
}

async fn run_paused(params: RoomParams) -> anyhow::Result<RoomResult> {
    let start = Instant::now();
    let clock = Arc::new(VirtualClock {
        start,
        base_ms: 1_767_225_600_000,
    });
    let entropy: Arc<dyn Entropy> = Arc::new(SeededEntropy::new(params.seed));
    let memory = Arc::new(MemoryStateStore::new(REGION, clock.clone()));
    let feed = memory.change_feed();
    let replica: Arc<dyn ReplicaStore> = memory.clone();
    let store = Arc::new(FaultyStore::new(
        RegionId::Primary,
        replica,
        entropy.clone(),
        Some((Duration::from_millis(4), Duration::from_millis(12))),
    ));
    let connections = Arc::new(ModelConnections {
        inner: MemoryConnections::default(),
        entropy: entropy.clone(),
    });
    let logs = Arc::new(Mutex::new(Logs {
        watchers: (0..params.watchers).map(|_| Held::default()).collect(),
        ..Logs::default()
    }));
    let notifier = Arc::new(RoomNotifier {
        entropy: entropy.clone(),
        start,
        bucket: Mutex::new((ACCOUNT_BURST, 0.0, Vec::new(), 0)),
        puller: Mutex::new(None),
        parsed: Mutex::new((0, Carried::default())),
        largest: Default::default(),
    });
    let chat = wsdr_chat::Chat::in_namespace(wsdr_chat::Chat::namespace()?);
    let room = wsdr_chat::Room {
        title: "A busy room".into(),
        max_chars: 500,
    };
    let chat: Arc<dyn TopicService> = Arc::new(
        AppService::new(
            chat,
            store.clone(),
            connections.clone(),
            clock.clone(),
            REGION,
        )
        .with_entropy(entropy.clone())
        .with_seeds([(TopicName::new("busy")?, room.to_json())]),
    );
    // The handler as deployed: the auction's front door with the room's app behind it (its
    // push frames come from the app).
    let service = AuctionService::new(
        store,
        connections.clone(),
        notifier.clone(),
        clock.clone(),
        REGION,
    )
    .with_entropy(entropy.clone())
    .with_apps(Apps::default().with(chat.clone()));
    let topic = Topic::parse("chat:busy")?;
    let watcher = UserId::new("watcher")?;
    *notifier.puller.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(Puller {
        chat: chat.clone(),
        logs: logs.clone(),
        entropy: entropy.clone(),
        start,
        topic: topic.clone(),
        watcher: watcher.clone(),
    }));
    let now = clock.now_ms();
    for i in 0..params.watchers {
        connections
            .inner
            .subscribe(
                &ConnectionId::new(format!("w{i:07}"))?,
                &watcher,
                &topic,
                now,
            )
            .await?;
    }
    let leases = Arc::new(ModelLeases {
        inner: InProcessLeases::default(),
        entropy: entropy.clone(),
        writes: Default::default(),
    });
    let queue = Arc::new(ModelQueue {
        jobs: LocalPushQueue::new(clock.clone(), Arc::new(wsdr_core::TokioPause)),
        entropy: entropy.clone(),
        requests: Default::default(),
    });
    let workers = params.push.workers.max(1);
    let instance = |posts_per_second: f64| {
        Arc::new(Pusher::queued(
            service.clone(),
            params.push,
            clock.clone(),
            Arc::new(wsdr_core::TokioPause),
            PushPorts {
                leases: leases.clone(),
                queue: queue.clone(),
                posts_per_second,
            },
        ))
    };
    let pusher = instance(params.push.budget_per_second);
    let stream = crate::hot::spawn_stream(feed, pusher.clone(), Arc::default());
    let mapping = QueueMapping::new(
        MappingSettings::aws(workers),
        clock.clone(),
        Arc::new(wsdr_core::TokioPause),
    );
    let mut worker_tasks = vec![tokio::spawn(mapping.clone().scale())];
    let mut worker_instances = Vec::new();
    for _ in 0..workers {
        let worker = instance(params.push.budget_per_worker());
        worker_instances.push(worker.clone());
        let (queue, entropy, mapping) = (queue.clone(), entropy.clone(), mapping.clone());
        worker_tasks.push(tokio::spawn(async move {
            loop {
                let job = queue.jobs.next().await;
                let handoff = 10_000 + entropy.below(30_001);
                tokio::time::sleep(Duration::from_micros(handoff)).await;
                let invocation = mapping.invoke().await;
                let _ = worker.run(&job).await;
                drop(invocation);
            }
        }));
    }

    // The messages: one every 1/rate s, each its own invocation, 120 characters each.
    let total = (params.messages_per_s * params.seconds).round() as usize;
    let mut writes = tokio::task::JoinSet::new();
    for k in 0..total {
        tokio::time::sleep_until(start + Duration::from_secs_f64(k as f64 / params.messages_per_s))
            .await;
        let (chat, topic) = (chat.clone(), topic.clone());
        writes.spawn(async move {
            let author = UserId::new(format!("member{}", k % 50)).ok()?;
            let op_id = OpId::new(format!("busy-msg-{k:08}")).ok()?;
            let text = format!("{k:08} {}", "x".repeat(111));
            let began = Instant::now();
            let reply = chat
                .write(
                    &Principal::User(author),
                    &topic,
                    &op_id,
                    &serde_json::json!({ "text": text }),
                )
                .await;
            let took = began.elapsed().as_secs_f64();
            let answered = Instant::now().duration_since(start).as_secs_f64();
            let status = match &reply {
                ServerMessage::WriteResult { status, .. } => Some(*status),
                _ => None,
            };
            let accepted = status == Some(wsdr_protocol::WriteStatus::Accepted);
            let unknown = status == Some(wsdr_protocol::WriteStatus::Unknown);
            Some((took, unknown, accepted.then_some((op_id, answered))))
        });
    }
    let mut took = Vec::new();
    let mut unknown = 0;
    let mut answered: HashMap<OpId, f64> = HashMap::new();
    while let Some(joined) = writes.join_next().await {
        if let Ok(Some((t, was_unknown, outcome))) = joined {
            took.push(t);
            unknown += usize::from(was_unknown);
            answered.extend(outcome);
        }
    }
    let settle = Duration::from_secs(30) + params.push.spacing(params.watchers);
    tokio::time::sleep(settle).await;
    stream.abort();
    for task in &worker_tasks {
        task.abort();
    }

    let mut totals = pusher.totals();
    for worker in &worker_instances {
        totals.add(&worker.totals());
    }
    let copies = memory.all_ops(&topic);
    let logs = std::mem::take(&mut *logs.lock().unwrap_or_else(|p| p.into_inner()));
    let mut latencies = Vec::new();
    let mut never_held = 0u64;
    for copy in &copies {
        let Some(at) = answered.get(&copy.op_id) else {
            continue;
        };
        let (holders, last) = logs
            .holders
            .get(copy.position as usize)
            .copied()
            .unwrap_or((0, 0.0));
        never_held += params.watchers as u64 - u64::from(holders).min(params.watchers as u64);
        if holders as usize >= params.watchers {
            latencies.push(((last - at) * 1000.0).max(0.0));
        }
    }
    latencies.sort_by(f64::total_cmp);
    took.sort_by(f64::total_cmp);
    let bucket = std::mem::take(&mut *notifier.bucket.lock().unwrap_or_else(|p| p.into_inner()));
    let mut calls = bucket.2;
    calls.sort_by(f64::total_cmp);
    let (mut max_in_second, mut first) = (0, 0);
    for (i, t) in calls.iter().enumerate() {
        while calls[first] <= t - 1.0 {
            first += 1;
        }
        max_in_second = max_in_second.max(i + 1 - first);
    }
    let elapsed = params.seconds + settle.as_secs_f64();
    Ok(RoomResult {
        watchers: params.watchers,
        messages_per_s: params.messages_per_s,
        accepted: answered.len(),
        unknown,
        write_p99_ms: crate::common::percentile(&took, 0.99) * 1000.0,
        every_watcher_p99_ms: crate::common::percentile(&latencies, 0.99),
        every_watcher_max_ms: latencies.last().copied().unwrap_or(f64::NAN),
        never_held,
        pushes: totals.pushes,
        widened_pushes: totals.widening.widened_pushes,
        widest_spacing_ms: totals.widening.widest_spacing_ms,
        max_posts_per_s: max_in_second,
        budget_per_s: params.push.budget_per_second,
        throttled: bucket.3,
        largest_push_bytes: notifier.largest.load(std::sync::atomic::Ordering::Relaxed),
        pulls_per_s: logs.pulls as f64 / elapsed,
        pulled_copies_per_s: logs.pulled_copies as f64 / elapsed,
    })
}

/// The BENCHMARKS.md section: every (watchers, rate) run.
pub fn section(
    watchers: &[usize],
    rates: &[f64],
    seconds: f64,
    seed: u64,
) -> anyhow::Result<String> {
    use std::fmt::Write as _;
    let push = PushSettings::default();
    let mut md = String::new();
    let mut results = Vec::new();
    for &n in watchers {
        for &rate in rates {
            let r = run(&RoomParams {
                watchers: n,
                messages_per_s: rate,
                seconds,
                seed,
                push,
            })?;
            eprintln!("{}", serde_json::to_string(&r)?);
            results.push(r);
        }
    }
    writeln!(
        md,
        "| watchers | messages/s | accepted (unknown) | write p99 | every watcher holds it: p99 / max | never held | pushes (widened) | widest spacing | busiest second of posts (budget {:.0}) | 429s | largest push | history reads/s (copies read/s) |",
        push.budget_per_second
    )?;
    writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|---|")?;
    for r in &results {
        writeln!(
            md,
            "| {} | {} | {} ({}) | {:.0} ms | {:.0} / {:.0} ms | {} | {} ({}) | {} ms | {} | {} | {:.1} KB | {:.1} ({:.0}) |",
            r.watchers,
            r.messages_per_s,
            r.accepted,
            r.unknown,
            r.write_p99_ms,
            r.every_watcher_p99_ms,
            r.every_watcher_max_ms,
            r.never_held,
            r.pushes,
            r.widened_pushes,
            r.widest_spacing_ms,
            r.max_posts_per_s,
            r.throttled,
            r.largest_push_bytes as f64 / 1024.0,
            r.pulls_per_s,
            r.pulled_copies_per_s,
        )?;
    }
    let over_budget = results
        .iter()
        .filter(|r| r.max_posts_per_s as f64 > r.budget_per_s)
        .count();
    let incomplete = results.iter().filter(|r| r.never_held > 0).count();
    writeln!(md)?;
    writeln!(
        md,
        "- `@connections` posts above the budget in any second: **{over_budget} runs** of {} (target 0: {}).",
        results.len(),
        crate::verdict(over_budget == 0)
    )?;
    writeln!(
        md,
        "- Every watcher held every message by the run's end: **{} runs** of {} (target: all: {}).",
        results.len() - incomplete,
        results.len(),
        crate::verdict(incomplete == 0)
    )?;
    for r in &results {
        // A message waits at most for the next push to start (the spacing, the stream's
        // poll, the job's hand-off and a cold worker), for that push to reach every watcher
        // (the audience at the budget), and for one history read when the push did not
        // carry it: the spacing + audience / budget + 1.5 s.
        let posting_ms = r.watchers as f64 / r.budget_per_s * 1000.0;
        let bound = r.widest_spacing_ms as f64 + posting_ms + 1_500.0;
        writeln!(
            md,
            "- {} watchers at {}/s: the last watcher held each message within {:.0} ms (max); the bound, the widest spacing ({} ms) + audience / budget ({:.0} ms) + 1.5 s = {:.0} ms: {}.",
            r.watchers,
            r.messages_per_s,
            r.every_watcher_max_ms,
            r.widest_spacing_ms,
            posting_ms,
            bound,
            crate::verdict(r.every_watcher_max_ms <= bound)
        )?;
    }
    Ok(md)
}
