//! One emulated Region: API Gateway's WebSocket endpoint and `@connections` API in front of
//! the real authorizer and the real ws-handler, on the in-memory state store.
//!
//! Faithful: route selection on `action` with `$default`; the REQUEST authorizer on
//! `$connect` (403 on Deny); `$connect` integration failure = handshake 500; a throttled or
//! failed integration on a message = API Gateway's `{"message": "Internal server error"}`
//! frame with the socket left open; quotas (new connections per second -> 429, idle timeout,
//! maximum duration -> close 1001, 32 KB frames and 128 KB messages -> close 1009);
//! `@connections` POST/GET/DELETE with 410 for a gone connection, called by the handler's real
//! `aws-sdk-apigatewaymanagement` client on TCP (in process on the in-memory network: the
//! same function behind the HTTP route, the same answers).

use crate::world::clock::RegionClock;
use crate::world::env::gateway_id;
use crate::world::fault::Fault;
use crate::world::identity::AuthorizerFunction;
use crate::world::owner::Owner;
use crate::world::quota::QuotaBucket;
use crate::world::region_id::RegionId;
use crate::world::scale::{AwsDuration, TimeScale};
use crate::world::store::{RegionTable, ReplicaStore};
use aws_lambda_events::apigw::{
    ApiGatewayCustomAuthorizerRequestTypeRequest, ApiGatewayWebsocketProxyRequest,
};
use aws_lambda_events::encodings::Body;
use axum::body::Bytes;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use ws_handler::App;
use wsdr_auction::AuctionService;
use wsdr_core::memory::MemoryConnections;
use wsdr_core::Clock;
use wsdr_protocol::Topic;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// API Gateway limits, in lab time where they are times.
#[derive(Debug, Clone)]
pub struct Quotas {
    /// New connections per lab second (500/s in AWS, times the time scale).
    pub connect_rate: f64,
    /// New connections the quota lets through at once: one AWS second's worth (500), at any
    /// time scale.
    pub connect_burst: f64,
    /// Service time of one `@connections` call (0 in drills; benchmarks set an in-Region
    /// round trip so that one-by-one and concurrent fan-out compare as they would in AWS).
    pub post_latency: Duration,
    /// How the handler broadcasts.
    pub fanout: wsdr_core::FanoutConfig,
    pub idle_timeout: Duration,
    pub max_duration: Duration,
    pub max_frame_bytes: usize,
    pub max_message_bytes: usize,
    /// The herd window the handler advertises in `state` replies (lab units), if any.
    pub herd_hint: Option<wsdr_core::HerdHint>,
    /// How the handler decides bids (strong mode needs the MRSC table).
    pub consistency: wsdr_core::Consistency,
    /// How old a verdict may be and still count (AWS ms; `wsdr_core::STALE_AFTER_MS`).
    pub stale_after_ms: u64,
    /// Whether the health function's URL lets a caller in: `AuthType NONE` answers only a
    /// caller granted both `lambda:InvokeFunctionUrl` and `lambda:InvokeFunction` (403
    /// otherwise), as template.yaml's function URL permissions say.
    pub function_url: crate::world::route53::UrlPermissions,
    /// How the Region's pusher conflates, shards and budgets pushes (AWS units).
    pub push: wsdr_core::PushSettings,
    /// The push jobs' queue (visibility, retention, receives) and the workers' reservation.
    pub push_jobs: crate::world::push_jobs::QueueSettings,
}

/// Faults that can be injected into a Region ([`Region::inject`]).
#[derive(Debug, Default)]
struct Faults {
    /// Every socket dropped, new ones refused.
    down: AtomicBool,
    /// Down for good (`never-returns`): heal does not bring it back.
    gone: AtomicBool,
    /// The handler's reserved concurrency is 0: every integration fails.
    throttled: AtomicBool,
    /// `ack-lost`: this percentage of bids lose their connection right after the handler
    /// committed them, before the answer is written (the reply never arrives).
    ack_lost_percent: AtomicU8,
    /// `connections-throttle`: this percentage of `@connections` posts answer 429
    /// LimitExceededException.
    connections_throttle_percent: AtomicU8,
    /// `disconnect-dropped`: `$disconnect` is never invoked (API Gateway: best effort).
    disconnect_dropped: AtomicBool,
    /// `slow`: every integration takes this much longer (lab microseconds).
    slow_us: AtomicU64,
}

impl Faults {
    /// Clear every fault except `gone`.
    fn heal(&self) {
        let gone = self.gone.load(Ordering::SeqCst);
        self.down.store(gone, Ordering::SeqCst);
        self.throttled.store(false, Ordering::SeqCst);
        self.ack_lost_percent.store(0, Ordering::SeqCst);
        self.connections_throttle_percent.store(0, Ordering::SeqCst);
        self.disconnect_dropped.store(false, Ordering::SeqCst);
        self.slow_us.store(0, Ordering::SeqCst);
    }
}

/// Counters for reports and benchmarks.
#[derive(Debug, Default)]
struct Counters {
    handshakes: AtomicU64,
    accepted: AtomicU64,
    throttled_429: AtomicU64,
    refused_down: AtomicU64,
    integration_errors: AtomicU64,
    denied: AtomicU64,
    posts: AtomicU64,
    gone: AtomicU64,
    /// Bids whose connection the `ack-lost` fault cut after the commit.
    acks_lost: AtomicU64,
    /// Bids answered `accepted` (the lab's stand-in for the app's own bid metric).
    bids_accepted: AtomicU64,
    /// `$connect`s answered 500 because the authorizer's new sandbox failed its init.
    authorizer_errors: AtomicU64,
    /// A reconnect herd's clients (`reconnect-herd`): authorized, and given up.
    herd_connected: AtomicU64,
    herd_gave_up: AtomicU64,
}

/// A Region's counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CountersSnapshot {
    pub handshakes: u64,
    pub accepted: u64,
    pub throttled_429: u64,
    pub refused_down: u64,
    pub integration_errors: u64,
    pub denied: u64,
    pub posts: u64,
    pub gone: u64,
    pub acks_lost: u64,
    pub bids_accepted: u64,
    pub authorizer_errors: u64,
    pub herd_connected: u64,
    pub herd_gave_up: u64,
}

enum Outbound {
    Frame(String),
    Close(u16, &'static str),
    Abort,
}

struct Socket {
    tx: mpsc::UnboundedSender<Outbound>,
    connected_at: Instant,
    sub: String,
}

pub struct Region {
    /// This Region's stream: the auction of every summary its table commits or replication
    /// applies, read by its pusher.
    stream: mpsc::UnboundedSender<Topic>,
    /// The push jobs the Region's workers take (SQS in AWS).
    push_queue: Arc<wsdr_core::push::LocalPushQueue>,
    /// The queue's event source mapping: how many workers run at once, and their cold starts.
    push_mapping: Arc<crate::world::mapping::QueueMapping>,
    /// The queue's redelivery, retention and dead letters for throttled jobs
    /// (`concurrency-exhausted`).
    push_jobs: Arc<crate::world::push_jobs::JobQueue>,
    /// Its role in the deployment.
    pub id: RegionId,
    pub name: String,
    pub api_id: String,
    pub stage: String,
    pub addr: SocketAddr,
    pub store: Arc<dyn ReplicaStore>,
    pub registry: Arc<MemoryConnections>,
    faults: Faults,
    counters: Counters,
    /// This replica's copies of the fast verdicts (the `VERDICT` items of the state table),
    /// by the Region judged and who wrote them: each written in one Region, replicated out.
    verdicts: Mutex<HashMap<(RegionId, wsdr_core::VerdictSource), VerdictCopy>>,
    quotas: Quotas,
    app: App,
    /// The auction's own service on the same ports as the handler's front door (the
    /// checkers read bids through it).
    auction: AuctionService,
    authorizer: Arc<AuthorizerFunction>,
    /// By connection id: an ordered map, so that a Region going down drops its sockets in
    /// the same order in every replay.
    sockets: Mutex<BTreeMap<String, Socket>>,
    /// Each `bid` integration's own time, real microseconds on this machine (the handler
    /// against the lab's tables or DynamoDB Local): what a bid costs the handler, apart
    /// from the lab's scaled waits and CPU time spent elsewhere.
    bid_handler_us: Mutex<Vec<u64>>,
    /// Connection ids, request ids and the faults' coin flips.
    entropy: Arc<dyn wsdr_core::Entropy>,
    /// Where this Region's endpoints listen, and its `@connections` clients connect.
    network: wsdr_net::Network,
    bucket: Mutex<QuotaBucket>,
    /// The bucket's time origin.
    born: Instant,
    /// The lab's owner: this Region's server, sockets and pushes end with it.
    owner: Owner,
    /// This Region's clock (its handler's, and its table's write stamps): may be skewed.
    pub clock: Arc<RegionClock>,
    /// Turns the AWS time of faults into this Region's lab time.
    scale: TimeScale,
    /// (new connections per lab second, tokens held at most).
    connect_rate: Mutex<(f64, f64)>,
}

/// The topic a stream record names, if it is a summary or a ledger head (the template's
/// stream filter: partition key `SUMMARY#`).
fn stream_topic(change: &wsdr_core::items::Change) -> Option<Topic> {
    match &change.item {
        wsdr_core::items::Item::Summary { topic, .. }
        | wsdr_core::items::Item::Head { topic, .. } => Some(topic.clone()),
        _ => None,
    }
}

/// The chat app on this Region's table, beside the auction (docs/KIT.md): its room `lobby`
/// is created on first use.
fn chat_service(
    table: &RegionTable,
    registry: Arc<dyn wsdr_core::Connections>,
    clock: Arc<dyn wsdr_core::Clock>,
    name: &str,
    entropy: Arc<dyn wsdr_core::Entropy>,
    scale: crate::world::scale::TimeScale,
) -> Result<Arc<dyn wsdr_core::topics::TopicService>, wsdr_protocol::ProtocolError> {
    use wsdr_core::topics::AppService;
    let chat = wsdr_chat::Chat::in_namespace(wsdr_chat::Chat::namespace()?);
    let service = match table {
        RegionTable::Eventual(table) => AppService::new(chat, table.clone(), registry, clock, name),
        RegionTable::Strong(table) => {
            AppService::strong(chat, table.clone(), registry, clock, name)
        }
    };
    let lobby = wsdr_chat::Room {
        title: "Lobby".into(),
        max_chars: 500,
    };
    Ok(Arc::new(
        service
            .with_entropy(entropy)
            .with_pause(Arc::new(crate::world::scale::ScaledPause(scale)))
            .with_seeds([(wsdr_protocol::TopicName::new("lobby")?, lobby.to_json())]),
    ))
}

/// How often Lambda polls a DynamoDB stream shard (4 times a second), AWS ms.
const STREAM_POLL_MS: u64 = 250;

fn clock_now_ms(clock: &crate::world::scale::ScaledClock) -> u64 {
    wsdr_core::Clock::now_ms(clock)
}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region")
            .field("name", &self.name)
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Region {
    /// A write replicated into this Region: it enters this Region's stream, as a local
    /// write does ([`stream_topic`]).
    pub fn on_replicated(&self, change: &wsdr_core::items::Change) {
        if let Some(auction) = stream_topic(change) {
            let _ = self.stream.send(auction);
        }
    }

    /// What this Region's pusher has done (the drill report's push figures).
    pub fn push_totals(&self) -> wsdr_core::push::PushTotals {
        self.app.pusher().totals()
    }

    /// What the push job queue did with throttled jobs: late, dead-lettered, expired.
    pub fn push_job_stats(&self) -> crate::world::push_jobs::PushJobStats {
        self.push_jobs.stats()
    }

    /// What the push workers' event source mapping did: invocations, cold starts, how many
    /// ran at once.
    pub fn push_worker_stats(&self) -> crate::world::mapping::MappingStats {
        self.push_mapping.stats()
    }

    /// The stream's reader: this Region's own summary writes (its table's change feed) and
    /// the replicated ones ([`Region::on_replicated`]) feed the pusher, which pushes each
    /// auction when its spacing allows (the ws-handler's stream path, `App::on_summaries`,
    /// run as one long-lived reader).
    fn start_stream(
        &self,
        mut changes: mpsc::UnboundedReceiver<Topic>,
        clock: crate::world::scale::ScaledClock,
    ) {
        let mut own = self.store.change_feed();
        let stream = self.stream.clone();
        self.owner.spawn(async move {
            while let Some(change) = own.recv().await {
                if let Some(auction) = stream_topic(&change) {
                    if stream.send(auction).is_err() {
                        break;
                    }
                }
            }
        });
        let app = self.app.clone();
        self.owner.spawn(async move {
            while let Some(auction) = changes.recv().await {
                // Lambda reads a stream shard by polling it (4 times a second): a record
                // waits for the next poll, and the poll takes every record since (one batch).
                let poll_in = STREAM_POLL_MS - clock_now_ms(&clock) % STREAM_POLL_MS;
                tokio::time::sleep(clock.until(clock_now_ms(&clock) + poll_in)).await;
                let mut batch = vec![auction];
                while let Ok(more) = changes.try_recv() {
                    batch.push(more);
                }
                // As the ws-handler's `on_summaries`: topics of the Region's apps only.
                app.pusher()
                    .changed(batch.iter().filter(|topic| app.service().serves(topic)));
                // Starts pushes only: the jobs go to the queue the workers read.
                app.pusher().drain().await;
            }
        });
        // The workers: up to the queue's maximum concurrency, each taking the next job (SQS
        // and its event source mapping in AWS), as many at once as the mapping has scaled to,
        // each new environment after its cold start. A job whose lease or queue call failed
        // is handed back after a pause, as SQS redelivers it after its visibility timeout.
        self.owner.spawn(self.push_mapping.clone().scale());
        for _ in 0..self.quotas.push.workers.max(1) {
            let (app, queue) = (self.app.clone(), self.push_queue.clone());
            let mapping = self.push_mapping.clone();
            let jobs = self.push_jobs.clone();
            let owner = self.owner.clone();
            let pause = crate::world::scale::ScaledPause(self.scale);
            self.owner.spawn(async move {
                loop {
                    let work = queue.next().await;
                    if jobs.receive() == crate::world::push_jobs::Receive::Throttled {
                        // Lambda throttled the invocation: the message waits out its
                        // visibility timeout on the queue; the poller takes the next one.
                        owner.spawn(jobs.clone().redeliver(work, queue.clone()));
                        continue;
                    }
                    let invocation = mapping.invoke().await;
                    let failed = app.pusher().run(&work).await.is_err();
                    drop(invocation);
                    if failed {
                        wsdr_core::Pause::pause(&pause, std::time::Duration::from_secs(1)).await;
                        queue.hand_back(work);
                    }
                }
            });
        }
    }

    /// Bind a loopback port, build the real handler against this Region's `@connections`
    /// URL, and serve.
    pub async fn start(
        id: RegionId,
        name: &str,
        table: RegionTable,
        authorizer: Arc<AuthorizerFunction>,
        quotas: Quotas,
        clock: Arc<RegionClock>,
        shared: crate::world::env::Shared,
    ) -> anyhow::Result<Arc<Self>> {
        let crate::world::env::Shared {
            scale,
            timeline: _,
            owner,
            environment: env,
        } = shared;
        let env = &env;
        let listener = env
            .network
            .bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await?;
        let addr = listener.local_addr()?;
        let stage = "prod".to_owned();
        let callback = format!("http://{addr}/{stage}");
        let sdk = lab_sdk(name, &env.network, &clock);
        let registry = Arc::new(MemoryConnections::default());
        // On the in-memory network the Region's own handler posts to its own `@connections`
        // in process: the same answers (429 under throttling, 410 for a gone connection)
        // without an SDK request, signature and HTTP exchange per post, which were half of a
        // simulated run's CPU. TCP labs keep the real SDK client end to end.
        let home = Arc::new(std::sync::OnceLock::new());
        let path = if env.network.is_memory() {
            PushPath::InProcess(home.clone())
        } else {
            PushPath::Sdk(wsdr_aws::ApiGatewayNotifier::new(&sdk, &callback))
        };
        let notifier = Arc::new(SharedClientNotifier {
            path,
            permits: tokio::sync::Semaphore::new(MAX_POSTS_IN_FLIGHT),
        });
        // The mode is the table's type: an eventual table has no ledger to hand a strong
        // service.
        let store = table.replica();
        let service = match &table {
            RegionTable::Eventual(table) => AuctionService::new(
                table.clone(),
                registry.clone(),
                notifier,
                clock.clone(),
                name,
            ),
            RegionTable::Strong(table) => AuctionService::strong(
                table.clone(),
                registry.clone(),
                notifier,
                clock.clone(),
                name,
            ),
        }
        .with_entropy(env.entropy.clone())
        .with_pause(Arc::new(crate::world::scale::ScaledPause(scale)))
        .with_fanout(quotas.fanout.clone())
        .with_apps(wsdr_core::topics::Apps::default().with(chat_service(
            &table,
            registry.clone(),
            clock.clone(),
            name,
            env.entropy.clone(),
            scale,
        )?));
        let service = match quotas.herd_hint {
            Some(hint) => service.with_herd_hint(hint),
            None => service,
        };
        let conflation_clock = crate::world::scale::ScaledClock::new(scale);
        let push_clock: Arc<dyn wsdr_core::Clock> = Arc::new(conflation_clock);
        // The stream's reader and every worker share one pusher (one schedule at the whole
        // budget, which in AWS is `workers` instances at budget / workers each).
        let push_queue = Arc::new(wsdr_core::push::LocalPushQueue::new(
            push_clock.clone(),
            Arc::new(crate::world::scale::ScaledPause(scale)),
        ));
        let push_mapping = crate::world::mapping::QueueMapping::new(
            crate::world::mapping::MappingSettings::aws(quotas.push.workers),
            push_clock.clone(),
            Arc::new(crate::world::scale::ScaledPause(scale)),
        );
        let push_jobs = Arc::new(crate::world::push_jobs::JobQueue::new(
            quotas.push_jobs,
            push_clock.clone(),
            Arc::new(crate::world::scale::ScaledPause(scale)),
        ));
        let pusher = wsdr_core::push::Pusher::queued(
            service.clone(),
            quotas.push,
            push_clock,
            Arc::new(crate::world::scale::ScaledPause(scale)),
            wsdr_core::push::PushPorts {
                leases: Arc::new(wsdr_core::push::InProcessLeases::default()),
                queue: push_queue.clone(),
                posts_per_second: quotas.push.budget_per_second,
            },
        );
        let (stream, stream_rx) = mpsc::unbounded_channel();
        let region = Arc::new(Self {
            stream,
            push_queue,
            push_mapping,
            push_jobs,
            id,
            name: name.to_owned(),
            api_id: format!("lab{}", name.replace('-', "")),
            stage,
            addr,
            store,
            registry,
            faults: Faults::default(),
            counters: Counters::default(),
            verdicts: Mutex::default(),
            bucket: Mutex::new(QuotaBucket::full(quotas.connect_burst, 0.0)),
            born: Instant::now(),
            connect_rate: Mutex::new((quotas.connect_rate, quotas.connect_burst)),
            quotas,
            app: App::with_pusher(service.clone(), "wsdr", pusher),
            auction: service,
            authorizer,
            sockets: Mutex::default(),
            bid_handler_us: Mutex::default(),
            entropy: env.entropy.clone(),
            network: env.network.clone(),
            owner,
            clock,
            scale,
        });
        // Set once, before the Region serves or its handler runs.
        let _ = home.set(Arc::downgrade(&region));
        region.start_stream(stream_rx, conflation_clock);
        let router = Router::new()
            .route("/health", get(health_function_self))
            .route("/health/{*path}", get(health_function))
            .route("/{stage}", get(upgrade))
            .route(
                "/{stage}/@connections/{id}",
                post(post_to_connection)
                    .get(get_connection)
                    .delete(delete_connection),
            )
            .with_state(region.clone());
        region.owner.clone().spawn(async move {
            if let Err(error) = axum::serve(NetListener(listener), router).await {
                tracing::error!(%error, "region server stopped");
            }
        });
        Ok(region)
    }

    /// The Region's health function URL (the lab's stand-in for the `lambda_http` health
    /// function behind its function URL): `<this>/self`, and `<this>/primary` on the judge.
    pub fn health_url(&self) -> String {
        format!("http://{}/health", self.addr)
    }

    /// A push path to this Region's connections through its own `@connections` endpoint,
    /// with the real SDK client (what an evacuator outside the Region uses).
    pub fn connections_notifier(&self) -> Arc<dyn wsdr_core::Notifier> {
        Arc::new(wsdr_aws::ApiGatewayNotifier::new(
            &lab_sdk(&self.name, &self.network, &self.clock),
            &format!("http://{}/{}", self.addr, self.stage),
        ))
    }

    /// This Region's clock now (epoch ms), as its handler reads it.
    pub fn clock_now_ms(&self) -> u64 {
        wsdr_core::Clock::now_ms(self.clock.as_ref())
    }

    /// The Region's own WebSocket URL (its "execute-api" URL).
    pub fn url(&self) -> String {
        format!("ws://{}/{}", self.addr, self.stage)
    }

    pub fn service(&self) -> &AuctionService {
        &self.auction
    }

    pub fn live_sockets(&self) -> usize {
        lock(&self.sockets).len()
    }

    /// Drop every socket without a close frame (a Regional outage).
    pub fn drop_all_sockets(&self) {
        for socket in lock(&self.sockets).values() {
            let _ = socket.tx.send(Outbound::Abort);
        }
    }

    /// Apply what `fault` means for this Region (faults of other Regions and of the links
    /// between them mean nothing here).
    pub fn inject(&self, fault: &Fault) {
        let here = |region: RegionId| region == self.id;
        match *fault {
            Fault::Down(r) if here(r) => {
                self.faults.down.store(true, Ordering::SeqCst);
                self.drop_all_sockets();
            }
            Fault::NeverReturns(r) if here(r) => {
                self.faults.gone.store(true, Ordering::SeqCst);
                self.faults.down.store(true, Ordering::SeqCst);
                self.drop_all_sockets();
            }
            Fault::Throttle(r) if here(r) => self.faults.throttled.store(true, Ordering::SeqCst),
            Fault::AckLost { region, percent } if here(region) => self
                .faults
                .ack_lost_percent
                .store(percent.min(100), Ordering::SeqCst),
            Fault::ConnectionsThrottle { region, percent } if here(region) => self
                .faults
                .connections_throttle_percent
                .store(percent.min(100), Ordering::SeqCst),
            Fault::DisconnectDropped(r) if here(r) => {
                self.faults.disconnect_dropped.store(true, Ordering::SeqCst);
            }
            Fault::Skew { region, ms } if here(region) => {
                self.clock.set_skew_ms(self.scale.lab_ms(ms));
            }
            Fault::Slow { region, by } if here(region) => self
                .faults
                .slow_us
                .store(self.scale.lab(by).as_micros() as u64, Ordering::SeqCst),
            Fault::ConnectQuota { region, percent } if here(region) => {
                let share = f64::from(percent.min(100)) / 100.0;
                self.set_connect_rate(
                    self.quotas.connect_rate * share,
                    (self.quotas.connect_burst * share).max(1.0),
                );
            }
            Fault::ConcurrencyExhausted { region, lasting } if here(region) => {
                self.push_jobs.exhaust(lasting);
            }
            Fault::Heal => {
                self.faults.heal();
                self.push_jobs.heal();
                self.clock.reset();
                self.set_connect_rate(self.quotas.connect_rate, self.quotas.connect_burst);
            }
            _ => {}
        }
    }

    /// Refusing connections (down, or lost for good).
    pub fn is_down(&self) -> bool {
        self.faults.down.load(Ordering::SeqCst)
    }

    /// Lost for good (`never-returns`).
    pub fn is_gone(&self) -> bool {
        self.faults.gone.load(Ordering::SeqCst)
    }

    /// Its handler throttled (reserved concurrency 0).
    pub fn is_throttled(&self) -> bool {
        self.faults.throttled.load(Ordering::SeqCst)
    }

    /// Its counters now.
    pub fn counters(&self) -> CountersSnapshot {
        let read = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let c = &self.counters;
        CountersSnapshot {
            handshakes: read(&c.handshakes),
            accepted: read(&c.accepted),
            throttled_429: read(&c.throttled_429),
            refused_down: read(&c.refused_down),
            integration_errors: read(&c.integration_errors),
            denied: read(&c.denied),
            posts: read(&c.posts),
            gone: read(&c.gone),
            acks_lost: read(&c.acks_lost),
            bids_accepted: read(&c.bids_accepted),
            authorizer_errors: read(&c.authorizer_errors),
            herd_connected: read(&c.herd_connected),
            herd_gave_up: read(&c.herd_gave_up),
        }
    }

    /// Each `bid` integration's time so far, real milliseconds on this machine (no time
    /// scale applied: a handler's work is not AWS time).
    pub fn bid_handler_ms(&self) -> Vec<f64> {
        lock(&self.bid_handler_us)
            .iter()
            .map(|us| *us as f64 / 1000.0)
            .collect()
    }

    /// A version of `source`'s fast verdict on `judged` reaches this replica (`true` =
    /// serve): written here by its writer, or replicated in. Versions are the writer's
    /// sequence numbers; an older one arriving late changes nothing (last writer wins per
    /// item, and each item has one writer).
    pub fn record_verdict(
        &self,
        judged: RegionId,
        source: wsdr_core::VerdictSource,
        version: u64,
        serve: bool,
    ) {
        lock(&self.verdicts)
            .entry((judged, source))
            .or_default()
            .record(version, serve);
    }

    /// This replica's copy of `source`'s verdict on `judged`: (serve, age in AWS ms).
    pub fn verdict_copy(
        &self,
        judged: RegionId,
        source: wsdr_core::VerdictSource,
    ) -> Option<(bool, u64)> {
        lock(&self.verdicts)
            .get(&(judged, source))
            .and_then(|copy| copy.read(self.scale))
    }

    /// What the health function would answer about `source`'s verdict on `judged` from
    /// this replica now (the Region's own clock judges the age: the writer's Region).
    pub fn verdict_answer(
        &self,
        judged: RegionId,
        source: wsdr_core::VerdictSource,
    ) -> wsdr_core::VerdictAnswer {
        // The copy's age is the Region's own clock's reading (now - written).
        let copy = self.verdict_copy(judged, source);
        let age = copy.map_or(0, |(_, age)| age);
        wsdr_core::VerdictAnswer::of(
            Ok(copy.map(|(serve, _)| (serve, 0))),
            age,
            self.quotas.stale_after_ms,
        )
    }

    /// Whether this replica's copy of `source`'s verdict on `judged` says serve, fresh.
    pub fn verdict_serves(&self, judged: RegionId, source: wsdr_core::VerdictSource) -> bool {
        self.verdict_answer(judged, source).serves()
    }

    /// The health function's answer to `GET path` as a caller outside the Region gets it
    /// through the function URL: `None` when nothing answers (the Region down), a 403 when
    /// the URL's permissions let nobody in, else the function's own answer (the same routing
    /// and rule as `crates/health`: `wsdr_core::HealthRoute`, `wsdr_core::VerdictAnswer`).
    pub fn health_function(&self, path: &str) -> Option<(u16, &'static str)> {
        if self.is_down() {
            return None;
        }
        if !self.quotas.function_url.admits_anyone() {
            return Some((403, "{\"Message\":\"Forbidden\"}"));
        }
        // The judge (the secondary) knows the primary; the primary judges only itself.
        let judges_primary = self.id == RegionId::Secondary;
        Some(
            match wsdr_core::HealthRoute::of("GET", path, judges_primary) {
                wsdr_core::HealthRoute::MethodNotAllowed => (405, "GET only\n"),
                wsdr_core::HealthRoute::NotFound => (404, "use /self or /primary\n"),
                wsdr_core::HealthRoute::Verdict { judged, source } => {
                    let judged = match judged {
                        wsdr_core::Judged::ThisRegion => self.id,
                        wsdr_core::Judged::Primary => RegionId::Primary,
                    };
                    (200, self.verdict_answer(judged, source).body())
                }
            },
        )
    }

    /// Change the new-connection quota at run time: `rate` per lab second, `burst` tokens
    /// held at most (one AWS second's worth).
    pub fn set_connect_rate(&self, rate: f64, burst: f64) {
        *lock(&self.connect_rate) = (rate, burst);
        lock(&self.bucket).cap(burst);
    }

    fn take_token(&self) -> bool {
        let (rate, burst) = *lock(&self.connect_rate);
        let now_s = self.born.elapsed().as_secs_f64();
        lock(&self.bucket).take(now_s, rate, burst)
    }

    /// Other apps' clients reconnecting here all at once (`reconnect-herd`): each takes a
    /// new-connection token (429 without one) and invokes the authorizer, as a handshake
    /// does, retrying with full-jitter backoff (2 s doubling to 20 s, the client's) until
    /// authorized, denied, or out of attempts. They hold no socket: what they spend is the
    /// quota and the authorizer's sandboxes, and through those the secrets quota.
    pub fn reconnect_herd(self: &Arc<Self>, clients: u32, token: &str) {
        let query = HashMap::from([("token".to_owned(), token.to_owned())]);
        for _ in 0..clients {
            let region = self.clone();
            let query = query.clone();
            self.owner
                .spawn(async move { region.herd_client(&query).await });
        }
    }

    async fn herd_client(&self, query: &HashMap<String, String>) {
        const ATTEMPTS: u32 = 8;
        for attempt in 0..ATTEMPTS {
            if self.is_down() {
                return;
            }
            if !self.take_token() {
                self.counters.throttled_429.fetch_add(1, Ordering::Relaxed);
            } else if let Some(request) = authorizer_request(
                &HeaderMap::new(),
                query,
                &self.method_arn(),
                &self.stage,
                &self.api_id,
                &gateway_id(self.entropy.as_ref()),
            ) {
                match self.authorizer.invoke(&request).await {
                    Ok(decision) => {
                        let counter = if decision.is_allow() {
                            &self.counters.herd_connected
                        } else {
                            &self.counters.denied
                        };
                        counter.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    Err(_) => {
                        self.counters
                            .authorizer_errors
                            .fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            let ceiling = (2.0 * 2f64.powi(attempt as i32)).min(20.0);
            let wait = crate::world::env::uniform(self.entropy.as_ref(), 0.0, ceiling);
            tokio::time::sleep(self.scale.lab(AwsDuration::from_secs_f64(wait))).await;
        }
        self.counters.herd_gave_up.fetch_add(1, Ordering::Relaxed);
    }

    /// Its authorizer function's sandboxes and init failures so far.
    pub fn authorizer_stats(&self) -> crate::world::identity::SandboxStats {
        self.authorizer.stats()
    }

    fn method_arn(&self) -> String {
        format!(
            "arn:aws:execute-api:{}:000000000000:{}/{}/$connect",
            self.name, self.api_id, self.stage
        )
    }

    fn context(
        &self,
        route: &str,
        event_type: &str,
        connection_id: &str,
        authorizer: &Value,
    ) -> Value {
        let now = self.clock.now_ms();
        json!({
            "routeKey": route,
            "eventType": event_type,
            "messageDirection": "IN",
            "stage": self.stage,
            "connectedAt": now,
            "requestTimeEpoch": now,
            "requestId": gateway_id(self.entropy.as_ref()),
            "domainName": format!("{}.execute-api.{}.amazonaws.com", self.api_id, self.name),
            "connectionId": connection_id,
            "apiId": self.api_id,
            "identity": {"sourceIp": "127.0.0.1"},
            "authorizer": authorizer,
        })
    }

    async fn invoke(&self, event: Value) -> Option<(i64, Option<String>, HeaderMap)> {
        let slow = self.faults.slow_us.load(Ordering::Relaxed);
        if slow > 0 {
            tokio::time::sleep(Duration::from_micros(slow)).await;
        }
        let request: ApiGatewayWebsocketProxyRequest = serde_json::from_value(event).ok()?;
        let is_bid = request.request_context.route_key.as_deref() == Some("bid");
        let started = std::time::Instant::now();
        let response = self.app.respond(request).await;
        if is_bid {
            let took = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            lock(&self.bid_handler_us).push(took);
        }
        let body = match response.body {
            Some(Body::Text(text)) => Some(text),
            _ => None,
        };
        Some((response.status_code, body, response.headers))
    }

    /// One client frame: route selection, then the integration (or its failure).
    async fn on_message(
        &self,
        connection_id: &str,
        authorizer: &Value,
        text: &str,
    ) -> Option<String> {
        if self.faults.throttled.load(Ordering::SeqCst) {
            self.counters
                .integration_errors
                .fetch_add(1, Ordering::Relaxed);
            return Some(self.gateway_error(connection_id));
        }
        let route = route_key(text);
        let event = json!({
            "requestContext": self.context(route, "MESSAGE", connection_id, authorizer),
            "body": text,
            "isBase64Encoded": false,
        });
        match self.invoke(event).await {
            Some((200, body, _)) => {
                let accepted = || {
                    matches!(
                        body.as_deref()
                            .map(serde_json::from_str::<wsdr_protocol::ServerMessage>),
                        Some(Ok(wsdr_protocol::ServerMessage::BidResult {
                            status: wsdr_protocol::BidStatus::Accepted,
                            ..
                        }))
                    )
                };
                if route == "bid" && accepted() {
                    self.counters.bids_accepted.fetch_add(1, Ordering::Relaxed);
                }
                body
            }
            _ => {
                self.counters
                    .integration_errors
                    .fetch_add(1, Ordering::Relaxed);
                Some(self.gateway_error(connection_id))
            }
        }
    }
}

/// The SDK configuration of a lab Region's clients: its Region name, plain HTTP on the lab's
/// network, placeholder credentials (the lab's `@connections` endpoint checks none), and the
/// Region's clock for signing and the SDK's own timers.
fn lab_sdk(
    name: &str,
    network: &wsdr_net::Network,
    clock: &Arc<RegionClock>,
) -> wsdr_aws::SdkConfig {
    let clock = clock.clone();
    wsdr_aws::local::local_sdk_config(
        name,
        network.clone(),
        Some(Arc::new(move || clock.now_ms())),
    )
}

/// The lab's listener as axum serves it (either network).
struct NetListener(wsdr_net::Listener);

impl axum::serve::Listener for NetListener {
    type Io = wsdr_net::Stream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.0.accept().await {
                Ok(accepted) => return accepted,
                Err(error) => {
                    // A closed in-memory network never accepts again; TCP errors (EMFILE) pass.
                    tracing::debug!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.0.local_addr()
    }
}

/// API Gateway's route selection on `$request.body.action`: a known action's route, else
/// `$default` (not JSON, no `action`, an unknown one).
/// Whether a frame asks for a write: the auction's `bid` or the kit's `write` (any app).
fn carries_a_write(text: &str) -> bool {
    let action = serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v.get("action").and_then(Value::as_str).map(str::to_owned));
    matches!(action.as_deref(), Some("bid" | "write"))
}

pub fn route_key(text: &str) -> &'static str {
    let action = serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v.get("action").and_then(Value::as_str).map(str::to_owned));
    match action.as_deref() {
        Some("bid") => "bid",
        Some("getState") => "getState",
        Some("heartbeat") => "heartbeat",
        _ => "$default",
    }
}

/// The REQUEST authorizer's event, as API Gateway builds it from a `$connect` handshake:
/// headers that are not valid text are left out, as API Gateway does.
pub fn authorizer_request(
    headers: &HeaderMap,
    query: &HashMap<String, String>,
    method_arn: &str,
    stage: &str,
    api_id: &str,
    request_id: &str,
) -> Option<ApiGatewayCustomAuthorizerRequestTypeRequest> {
    let auth_event = json!({
        "type": "REQUEST",
        "methodArn": method_arn,
        "headers": header_map_value(headers),
        "queryStringParameters": query,
        "requestContext": {"routeKey": "$connect", "eventType": "CONNECT", "requestId": request_id, "stage": stage, "apiId": api_id},
    });
    serde_json::from_value(auth_event).ok()
}

/// Posts to `@connections` in flight per Region, all handler invocations together.
const MAX_POSTS_IN_FLIGHT: usize = 256;

/// In AWS every Lambda instance has its own SDK client, so the connections to `@connections`
/// are bounded by instances x the fan-out's concurrency. In the lab every invocation shares one
/// client in one process; without this bound, a busy lab opens an HTTP connection per post in
/// flight and runs out of file descriptors (seen at 5,000 users bidding).
struct SharedClientNotifier {
    path: PushPath,
    permits: tokio::sync::Semaphore,
}

/// How the Region's handler reaches its own `@connections` API.
enum PushPath {
    /// The real SDK client over the lab's network (TCP labs).
    Sdk(wsdr_aws::ApiGatewayNotifier),
    /// The Region's `@connections` logic called in process (simulated worlds): the Region
    /// is set right after it is built, before anything can post.
    InProcess(Arc<std::sync::OnceLock<std::sync::Weak<Region>>>),
}

#[async_trait::async_trait]
impl wsdr_core::Notifier for SharedClientNotifier {
    async fn send(
        &self,
        connection: &wsdr_core::ConnectionId,
        payload: &[u8],
    ) -> wsdr_core::Result<()> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| wsdr_core::Error::Internal("notifier closed".into()))?;
        match &self.path {
            PushPath::Sdk(notifier) => notifier.send(connection, payload).await,
            PushPath::InProcess(home) => {
                let region = home
                    .get()
                    .and_then(std::sync::Weak::upgrade)
                    .ok_or_else(|| {
                        wsdr_core::Error::Transient("the Region's endpoint is gone".into())
                    })?;
                // What `classify` makes of the HTTP answers below.
                match region.post(connection.as_str(), payload).await {
                    PostAnswer::Delivered => Ok(()),
                    PostAnswer::Throttled => Err(wsdr_core::Error::Throttled(
                        "LimitExceededException (HTTP 429): Rate exceeded".into(),
                    )),
                    PostAnswer::Gone => Err(wsdr_core::Error::Gone),
                }
            }
        }
    }
}

/// What `@connections` POST answers.
enum PostAnswer {
    Delivered,
    /// 429 `LimitExceededException`.
    Throttled,
    /// 410 `GoneException`.
    Gone,
}

impl Region {
    /// API Gateway's answer to a message whose integration failed.
    fn gateway_error(&self, connection_id: &str) -> String {
        json!({"message": "Internal server error", "connectionId": connection_id, "requestId": gateway_id(self.entropy.as_ref())}).to_string()
    }

    /// True with probability `percent`/100, drawn from this Region's entropy.
    fn chance(&self, percent: u8) -> bool {
        crate::world::env::chance(self.entropy.as_ref(), percent)
    }
}

async fn upgrade(
    State(region): State<Arc<Region>>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    region.counters.handshakes.fetch_add(1, Ordering::Relaxed);
    if region.faults.down.load(Ordering::SeqCst) {
        region.counters.refused_down.fetch_add(1, Ordering::Relaxed);
        return (StatusCode::SERVICE_UNAVAILABLE, "Region unavailable").into_response();
    }
    if !region.take_token() {
        region
            .counters
            .throttled_429
            .fetch_add(1, Ordering::Relaxed);
        return (
            StatusCode::TOO_MANY_REQUESTS,
            r#"{"message":"Limit Exceeded"}"#,
        )
            .into_response();
    }
    let connection_id = gateway_id(region.entropy.as_ref());
    // The REQUEST authorizer, as API Gateway calls it.
    let Some(auth_request) = authorizer_request(
        &headers,
        &query,
        &region.method_arn(),
        &region.stage,
        &region.api_id,
        &gateway_id(region.entropy.as_ref()),
    ) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let decision = match region.authorizer.invoke(&auth_request).await {
        Ok(decision) => decision,
        Err(failed) => {
            // The sandbox's init failed (its secret reads throttled): API Gateway answers a
            // failed authorizer with 500.
            tracing::debug!(%failed, "authorizer init failed");
            return internal_error(&region.counters.authorizer_errors);
        }
    };
    // The Region went down while its authorizer ran: nothing answers the handshake.
    if region.faults.down.load(Ordering::SeqCst) {
        region.counters.refused_down.fetch_add(1, Ordering::Relaxed);
        return (StatusCode::SERVICE_UNAVAILABLE, "Region unavailable").into_response();
    }
    if !decision.is_allow() {
        region.counters.denied.fetch_add(1, Ordering::Relaxed);
        return (StatusCode::FORBIDDEN, r#"{"message":"Forbidden"}"#).into_response();
    }
    let mut context: serde_json::Map<String, Value> = decision
        .context
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    context.insert(
        "principalId".into(),
        Value::String(decision.principal_id.clone()),
    );
    let authorizer = Value::Object(context);
    // The $connect integration.
    if region.faults.throttled.load(Ordering::SeqCst) {
        return internal_error(&region.counters.integration_errors);
    }
    let mut connect_event = json!({
        "requestContext": region.context("$connect", "CONNECT", &connection_id, &authorizer),
        "headers": header_map_value(&headers),
        "isBase64Encoded": false,
    });
    if !query.is_empty() {
        connect_event["queryStringParameters"] = json!(query);
    }
    match region.invoke(connect_event).await {
        Some((200, _, response_headers)) => {
            let echo = response_headers
                .get("sec-websocket-protocol")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let mut ws = ws
                .max_message_size(region.quotas.max_message_bytes)
                .max_frame_size(region.quotas.max_frame_bytes)
                // tungstenite zeroes this much of its buffer before every read (128 KiB by
                // default): most of a busy lab's CPU went there.
                .read_buffer_size(8 * 1024);
            if let Some(protocol) = echo {
                ws = ws.protocols([protocol]);
            }
            region.counters.accepted.fetch_add(1, Ordering::Relaxed);
            let sub = decision.principal_id.clone();
            ws.on_upgrade(move |socket| {
                serve_socket(region, socket, connection_id, authorizer, sub)
            })
        }
        Some((status, _, _)) => StatusCode::from_u16(status as u16)
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
            .into_response(),
        None => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// API Gateway's handshake answer when the authorizer or the `$connect` integration failed,
/// counted where `counter` says.
fn internal_error(counter: &AtomicU64) -> Response {
    counter.fetch_add(1, Ordering::Relaxed);
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        r#"{"message": "Internal server error"}"#,
    )
        .into_response()
}

fn header_map_value(headers: &HeaderMap) -> Value {
    Value::Object(
        headers
            .iter()
            .filter_map(|(k, v)| {
                Some((
                    k.as_str().to_owned(),
                    Value::String(v.to_str().ok()?.to_owned()),
                ))
            })
            .collect(),
    )
}

async fn serve_socket(
    region: Arc<Region>,
    socket: WebSocket,
    connection_id: String,
    authorizer: Value,
    sub: String,
) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let connected_at = Instant::now();
    {
        let mut sockets = lock(&region.sockets);
        // A handshake still in its authorizer or `$connect` when the Region went down never
        // becomes a connection: `drop_all_sockets` (after the flag is set, under this lock)
        // could not see it, so it must not enter the map now.
        if region.is_down() {
            return;
        }
        sockets.insert(
            connection_id.clone(),
            Socket {
                tx,
                connected_at,
                sub,
            },
        );
    }
    let (mut sink, mut stream) = socket.split();
    let mut last_active = Instant::now();
    let mut aborted = false;
    // API Gateway invokes the integration once per message, concurrently: two frames of one
    // connection can be handled at the same time and answered in either order. Each text
    // frame is handled in its own task; answers come back here to be written.
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<Option<Option<String>>>();
    loop {
        let idle = last_active + region.quotas.idle_timeout;
        let max = connected_at + region.quotas.max_duration;
        tokio::select! {
            biased;
            out = rx.recv() => match out {
                Some(Outbound::Frame(text)) => {
                    if sink.send(Message::Text(text.into())).await.is_err() { break; }
                }
                Some(Outbound::Close(code, reason)) => {
                    let _ = sink.send(Message::Close(Some(CloseFrame { code, reason: reason.into() }))).await;
                    break;
                }
                Some(Outbound::Abort) | None => { aborted = true; break; }
            },
            done = done_rx.recv() => match done {
                Some(Some(Some(reply))) => {
                    if sink.send(Message::Text(reply.into())).await.is_err() { break; }
                }
                Some(Some(None)) => {}
                // `ack-lost` cut the connection after a bid's commit.
                Some(None) | None => { aborted = true; break; }
            },
            frame = stream.next() => match frame {
                Some(Ok(Message::Text(text))) => {
                    last_active = Instant::now();
                    let (region, connection_id, authorizer, done) =
                        (region.clone(), connection_id.clone(), authorizer.clone(), done_tx.clone());
                    tokio::spawn(async move {
                        let reply = region.on_message(&connection_id, &authorizer, text.as_str()).await;
                        // `ack-lost`: the write (a bid, or any app's op) is committed, then the
                        // connection dies before the answer is written: the path where a replay
                        // lands in the other Region.
                        if carries_a_write(text.as_str())
                            && region.chance(region.faults.ack_lost_percent.load(Ordering::Relaxed))
                        {
                            region.counters.acks_lost.fetch_add(1, Ordering::Relaxed);
                            let _ = done.send(None);
                            return;
                        }
                        let _ = done.send(Some(reply));
                    });
                }
                Some(Ok(Message::Binary(_))) => {
                    last_active = Instant::now();
                    let reply = region.on_message(&connection_id, &authorizer, "\u{0}binary").await;
                    if let Some(reply) = reply {
                        if sink.send(Message::Text(reply.into())).await.is_err() { break; }
                    }
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => last_active = Instant::now(),
                Some(Ok(Message::Close(_))) | None => break,
                Some(Err(error)) => {
                    // Over the frame or message quota: API Gateway closes with 1009.
                    let too_big = error.to_string().to_lowercase().contains("too long")
                        || error.to_string().to_lowercase().contains("size");
                    if too_big {
                        let _ = sink.send(Message::Close(Some(CloseFrame { code: 1009, reason: "Message too big".into() }))).await;
                    }
                    break;
                }
            },
            () = region.owner.cancelled() => { aborted = true; break; }
            _ = tokio::time::sleep_until(idle) => {
                let _ = sink.send(Message::Close(Some(CloseFrame { code: 1001, reason: "Going away".into() }))).await;
                break;
            }
            _ = tokio::time::sleep_until(max) => {
                let _ = sink.send(Message::Close(Some(CloseFrame { code: 1001, reason: "Going away".into() }))).await;
                break;
            }
        }
    }
    lock(&region.sockets).remove(&connection_id);
    drop(sink);
    // $disconnect is best effort, as in AWS: not sent for a Region that went down, and lost
    // when the integration is throttled (records then expire by TTL).
    if !aborted
        && !region.faults.throttled.load(Ordering::SeqCst)
        && !region.faults.disconnect_dropped.load(Ordering::SeqCst)
    {
        let event = json!({"requestContext": region.context("$disconnect", "DISCONNECT", &connection_id, &authorizer), "isBase64Encoded": false});
        // API Gateway ignores what `$disconnect` answers; its failures are the handler's to log.
        let _ignored = region.invoke(event).await;
    }
}

async fn post_to_connection(
    State(region): State<Arc<Region>>,
    Path((_stage, id)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    match region.post(&id, &body).await {
        PostAnswer::Delivered => StatusCode::OK.into_response(),
        PostAnswer::Throttled => (
            StatusCode::TOO_MANY_REQUESTS,
            [("x-amzn-errortype", "LimitExceededException")],
            r#"{"message":"Rate exceeded"}"#,
        )
            .into_response(),
        PostAnswer::Gone => gone(),
    }
}

impl Region {
    /// `@connections` POST: one path for the HTTP endpoint and the in-process push.
    async fn post(&self, id: &str, body: &[u8]) -> PostAnswer {
        self.counters.posts.fetch_add(1, Ordering::Relaxed);
        if self.chance(
            self.faults
                .connections_throttle_percent
                .load(Ordering::Relaxed),
        ) {
            return PostAnswer::Throttled;
        }
        if !self.quotas.post_latency.is_zero() {
            tokio::time::sleep(self.quotas.post_latency).await;
        }
        let sent = lock(&self.sockets).get(id).map(|s| {
            s.tx.send(Outbound::Frame(String::from_utf8_lossy(body).into_owned()))
                .is_ok()
        });
        if sent == Some(true) {
            PostAnswer::Delivered
        } else {
            self.counters.gone.fetch_add(1, Ordering::Relaxed);
            PostAnswer::Gone
        }
    }
}

fn gone() -> Response {
    (
        StatusCode::GONE,
        [("x-amzn-errortype", "GoneException")],
        r#"{"message":null}"#,
    )
        .into_response()
}

async fn get_connection(
    State(region): State<Arc<Region>>,
    Path((_stage, id)): Path<(String, String)>,
) -> Response {
    let sockets = lock(&region.sockets);
    match sockets.get(&id) {
        Some(s) => axum::Json(json!({
            "connectedAt": s.connected_at.elapsed().as_millis() as u64,
            "identity": {"sourceIp": "127.0.0.1", "principalId": s.sub},
        }))
        .into_response(),
        None => gone(),
    }
}

async fn delete_connection(
    State(region): State<Arc<Region>>,
    Path((_stage, id)): Path<(String, String)>,
) -> Response {
    match lock(&region.sockets).get(&id) {
        Some(s) => {
            let _ = s.tx.send(Outbound::Close(1000, "Closed by the server"));
            StatusCode::NO_CONTENT.into_response()
        }
        None => gone(),
    }
}

/// A replica's copy of one fast verdict item: its version (the writer's sequence number),
/// the verdict, and when it was last written (lab time; its writer rewrites it every round).
#[derive(Debug, Default)]
struct VerdictCopy(Option<(u64, bool, tokio::time::Instant)>);

impl VerdictCopy {
    fn record(&mut self, version: u64, serve: bool) {
        if self.0.is_none_or(|(held, _, _)| version >= held) {
            self.0 = Some((version, serve, tokio::time::Instant::now()));
        }
    }

    /// The verdict and its age, AWS ms.
    fn read(&self, scale: TimeScale) -> Option<(bool, u64)> {
        self.0.map(|(_, serve, at)| {
            (
                serve,
                (at.elapsed().as_secs_f64() * scale.factor() * 1000.0) as u64,
            )
        })
    }
}

/// `GET /health`: this Region's own verdict (`/self`), the bare URL kept for outside tools.
async fn health_function_self(
    State(region): State<Arc<Region>>,
) -> (axum::http::StatusCode, &'static str) {
    health_answer(&region, "/self")
}

/// `GET /health/<path>`: the health function's answer to `/<path>` (`/health/self`,
/// `/health/primary` on the judge, the rehearsal paths), as Route 53's checkers get it.
/// `/health/secondary` is the judge's own (`/self` there), kept for outside tools.
async fn health_function(
    State(region): State<Arc<Region>>,
    Path(path): Path<String>,
) -> (axum::http::StatusCode, &'static str) {
    let path = match path.as_str() {
        "secondary" if region.id == RegionId::Secondary => "/self".to_owned(),
        other => format!("/{other}"),
    };
    health_answer(&region, &path)
}

fn health_answer(region: &Region, path: &str) -> (axum::http::StatusCode, &'static str) {
    match region.health_function(path) {
        Some((status, body)) => (
            axum::http::StatusCode::from_u16(status)
                .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR),
            body,
        ),
        None => (axum::http::StatusCode::SERVICE_UNAVAILABLE, "region down"),
    }
}

#[cfg(test)]
mod quota_tests {
    use super::QuotaBucket;

    #[test]
    fn the_bucket_holds_its_depth_and_refills_at_the_rate() {
        let mut bucket = QuotaBucket::full(2.0, 0.0);
        assert!(bucket.take(0.0, 2.0, 2.0));
        assert!(bucket.take(0.0, 2.0, 2.0));
        assert!(!bucket.take(0.0, 2.0, 2.0), "burst spent");
        assert!(bucket.take(0.5, 2.0, 2.0), "one token after half a second");
        assert!(!bucket.take(0.5, 2.0, 2.0));
        // A long pause refills the depth, no more.
        assert!(bucket.take(100.0, 2.0, 2.0));
        assert!(bucket.take(100.0, 2.0, 2.0));
        assert!(!bucket.take(100.0, 2.0, 2.0));
        bucket.cap(0.5);
        assert!(
            !bucket.take(100.5, 0.5, 0.5),
            "lowered quota: at most half a token held"
        );
    }

    #[test]
    fn a_faster_lab_clock_refills_faster_but_holds_no_more() {
        // Time scale 60: 500/s AWS is 30,000 per lab second, the burst still 500.
        let mut bucket = QuotaBucket::full(500.0, 0.0);
        let taken = (0..1_000)
            .filter(|_| bucket.take(10.0, 30_000.0, 500.0))
            .count();
        assert_eq!(taken, 500, "one AWS second's worth at once");
        // A sixtieth of a lab second later: one AWS second has passed, 500 more.
        let more = (0..1_000)
            .filter(|_| bucket.take(10.0 + 1.0 / 60.0, 30_000.0, 500.0))
            .count();
        assert_eq!(more, 500);
    }
}
