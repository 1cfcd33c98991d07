//! The front door of a deployment: one per cold start, for every app it serves.
//!
//! The gateway owns what no app should write twice: `$connect`/`$disconnect` in the
//! connection registry, the kit's envelope (`write`, `getState` and `heartbeat` naming a
//! topic) routed to the app of the topic's namespace, the herd hint every `state` reply
//! carries, the error frames (a store failure is logged here and answered `internal`, a Region
//! cut off from its quorum `no_quorum`), and the push worker's registry, notifier and fan-out.
//! An app with frames of its own beside the envelope (the auction's `bid`, `getState` naming
//! an auction) plugs them in as [`AppFrames`]; the gateway never names an app.

use crate::fanout::FanoutConfig;
use crate::model::{ConnectionId, Principal, UserId};
use crate::ports::{Census, Clock, Connections, Entropy, Notifier, Pause};
use crate::topics::{Apps, TopicService};
use crate::Result;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wsdr_protocol::{
    BidStatus, ClientMessage, ErrorCode, OpId, ProtocolError, ServerMessage, Topic, Versions,
};

/// The answer to one client frame. Nothing a frame causes is pushed before it is answered
/// (pushes start from the state table's stream: [`crate::push`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub message: ServerMessage,
}

impl Reply {
    pub fn only(message: ServerMessage) -> Self {
        Self { message }
    }
}

/// An app's own frames, beside the kit's envelope: the frames a client of that app sent
/// before the envelope existed (the auction's `bid`, `getState` and `heartbeat` naming an
/// auction), and the frame its pushes carry if its clients read their own. One per
/// deployment.
#[async_trait::async_trait]
pub trait AppFrames: Send + Sync {
    /// Answer a frame the envelope does not carry. Errors are the gateway's to answer
    /// (logged, then `internal`, or `no_quorum`).
    async fn handle(
        &self,
        gateway: &Gateway,
        connection: &ConnectionId,
        caller: &Principal,
        message: ClientMessage,
    ) -> Result<Reply>;

    /// The frame a push of `topic` carries, if it is this app's and its clients read their
    /// own frame (`None`: the topic's app pushes its `topicUpdate`).
    async fn push_frame(&self, gateway: &Gateway, topic: &Topic) -> Option<Result<String>>;
}

/// What a Region advertises in its `state` replies so that its clients, if all cut off at
/// once, come back at the rate the other Region admits: the herd window, the Region's live
/// connections (its last census) over the destination's new-connection quota.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HerdHint {
    /// New connections per second the other Region admits (API Gateway: 500/s by default).
    pub destination_quota_per_s: f64,
    /// A census older than this is ignored (its schedule stopped): no hint rather than a
    /// wrong one.
    pub max_census_age: Duration,
    /// How long one instance reuses the census it read (one read per instance per period).
    pub reuse_for: Duration,
}

impl Default for HerdHint {
    fn default() -> Self {
        Self {
            destination_quota_per_s: 500.0,
            max_census_age: Duration::from_secs(300),
            reuse_for: Duration::from_secs(60),
        }
    }
}

/// The census an instance read, and when (its clock, ms).
#[derive(Debug, Default)]
struct CensusCache {
    read_at_ms: Option<u64>,
    census: Option<Census>,
}

/// The front door, over the kit's ports. Cheap to clone; build one per cold start.
#[derive(Clone)]
pub struct Gateway {
    connections: Arc<dyn Connections>,
    notifier: Arc<dyn Notifier>,
    clock: Arc<dyn Clock>,
    region: String,
    fanout: FanoutConfig,
    /// The herd hint to advertise, if any, and the census it was last computed from.
    herd: Option<(HerdHint, Arc<Mutex<CensusCache>>)>,
    /// Every app of the deployment, by namespace.
    apps: Apps,
    /// The frames of the deployment's app that has its own, if any.
    frames: Option<Arc<dyn AppFrames>>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("region", &self.region)
            .field("apps", &self.apps)
            .field("fanout", &self.fanout)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// A gateway serving no app yet ([`Gateway::with_apps`]).
    pub fn new(
        connections: Arc<dyn Connections>,
        notifier: Arc<dyn Notifier>,
        clock: Arc<dyn Clock>,
        region: impl Into<String>,
    ) -> Self {
        Self {
            connections,
            notifier,
            clock,
            region: region.into(),
            fanout: FanoutConfig::default(),
            herd: None,
            apps: Apps::default(),
            frames: None,
        }
    }

    /// Serve `apps`: frames naming their topics (`write`, `getState` and heartbeats with a
    /// `topic`) and their pushes go to the app of the topic's namespace. Replaces the apps
    /// served before.
    pub fn with_apps(mut self, apps: Apps) -> Self {
        self.apps = apps;
        self
    }

    /// Answer the frames outside the envelope with `frames` (one app's; replaces any before).
    pub fn with_frames(mut self, frames: Arc<dyn AppFrames>) -> Self {
        self.frames = Some(frames);
        self
    }

    /// Advertise a herd window in `state` replies, from the Region's connection census.
    pub fn with_herd_hint(mut self, hint: HerdHint) -> Self {
        self.herd = Some((hint, Arc::default()));
        self
    }

    /// Broadcast as `fanout` says, keeping this gateway's jitter and pauses.
    pub fn with_fanout(mut self, fanout: FanoutConfig) -> Self {
        self.fanout = FanoutConfig {
            jitter: self.fanout.jitter.clone(),
            pause: self.fanout.pause.clone(),
            ..fanout
        };
        self
    }

    /// Draw fan-out jitter from `entropy` (default: the thread's RNG).
    pub fn with_entropy(mut self, entropy: Arc<dyn Entropy>) -> Self {
        self.fanout.jitter = entropy;
        self
    }

    /// Wait fan-out backoff with `pause` (default: tokio's clock).
    pub fn with_pause(mut self, pause: Arc<dyn Pause>) -> Self {
        self.fanout.pause = pause;
        self
    }

    /// The Region label every frame carries.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// The clock every frame's time is read from.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The fan-out settings pushes are posted with.
    pub fn fanout(&self) -> &FanoutConfig {
        &self.fanout
    }

    /// The app of a topic's namespace, if this deployment has it.
    fn topic_service(&self, topic: &Topic) -> Option<&dyn TopicService> {
        self.apps.get(topic).map(|service| service.as_ref())
    }

    /// Whether a topic is one this deployment serves (its namespace is an app's): the push
    /// path starts pushes of those only.
    pub fn serves(&self, topic: &Topic) -> bool {
        self.topic_service(topic).is_some()
    }

    /// `$connect`: remember which user holds this connection.
    pub async fn connect(&self, connection: &ConnectionId, user: &UserId) -> Result<()> {
        self.connections
            .register(connection, user, self.clock.now_ms())
            .await
    }

    /// `$disconnect` (best effort: API Gateway may never send it; records also expire).
    pub async fn disconnect(&self, connection: &ConnectionId) -> Result<()> {
        self.connections.remove(connection).await
    }

    /// One raw client frame, as the routes get it. Never fails: bad input becomes an error
    /// frame, a store failure becomes an `internal` error frame (logged here with its cause,
    /// which the client never sees), and the connection stays open either way, as with API
    /// Gateway.
    pub async fn handle_frame(
        &self,
        connection: &ConnectionId,
        caller: impl Into<Principal>,
        frame: &[u8],
    ) -> Reply {
        let caller = caller.into();
        let message = match wsdr_protocol::parse_client_message(frame) {
            Ok(message) => message,
            Err(error) => return Reply::only(self.error_frame(&error)),
        };
        let action = message.action();
        let user = caller.subject().clone();
        match self.handle(connection, &caller, message).await {
            Ok(reply) => reply,
            Err(crate::Error::NoQuorum(cause)) => {
                tracing::warn!(%cause, action, "no quorum: the client is sent elsewhere");
                Reply::only(self.no_quorum_frame())
            }
            Err(error) => {
                tracing::error!(%error, action, connection_id = %connection, user = %user, "request failed");
                Reply::only(self.error_frame(&ProtocolError::new(
                    ErrorCode::Internal,
                    "the request could not be completed; try again",
                )))
            }
        }
    }

    /// One parsed client frame from `caller` on `connection`: the envelope's frames here, any
    /// other to the app that has its own frames.
    pub async fn handle(
        &self,
        connection: &ConnectionId,
        caller: &Principal,
        message: ClientMessage,
    ) -> Result<Reply> {
        match message {
            ClientMessage::Heartbeat {
                topic: Some(topic), ..
            } => Ok(Reply::only(self.heartbeat_on_topic(topic).await)),
            // A heartbeat naming an auction is the auction's own frame (its pong carries the
            // auction's versions); with no app of its own frames, a plain pong.
            ClientMessage::Heartbeat {
                auction_id: None, ..
            } => Ok(Reply::only(self.heartbeat().await)),
            ClientMessage::Heartbeat { .. } if self.frames.is_none() => {
                Ok(Reply::only(self.heartbeat().await))
            }
            ClientMessage::GetTopic {
                topic,
                op_ids,
                since,
            } => self
                .topic_state(connection, caller, &topic, &op_ids, since.as_ref())
                .await
                .map(Reply::only),
            ClientMessage::Write { topic, op_id, op } => {
                Ok(Reply::only(match self.topic_service(&topic) {
                    Some(service) => service.write(caller, &topic, &op_id, &op).await,
                    None => ServerMessage::WriteResult {
                        op_id,
                        status: BidStatus::Rejected,
                        reason: Some(UNKNOWN_TOPIC.to_owned()),
                        region: self.region.clone(),
                    },
                }))
            }
            other => match &self.frames {
                Some(frames) => frames.handle(self, connection, caller, other).await,
                None => Ok(Reply::only(self.error_frame(&ProtocolError::new(
                    ErrorCode::UnknownAction,
                    format!("`{}` is not served by this deployment", other.action()),
                )))),
            },
        }
    }

    /// `getState` naming a topic: the app's answer, with this Region's herd hint.
    async fn topic_state(
        &self,
        connection: &ConnectionId,
        caller: &Principal,
        topic: &Topic,
        op_ids: &[OpId],
        since: Option<&Versions>,
    ) -> Result<ServerMessage> {
        let Some(service) = self.topic_service(topic) else {
            return Ok(self.error_frame(&ProtocolError::new(
                ErrorCode::InvalidField,
                format!("no app of this deployment has the topic `{topic}`"),
            )));
        };
        let (state, herd) = tokio::join!(
            service.state(connection, caller, topic, op_ids, since),
            self.herd_window_ms(),
        );
        let mut state = state?;
        if let ServerMessage::TopicState { herd_window_ms, .. } = &mut state {
            *herd_window_ms = herd;
        }
        Ok(state)
    }

    /// `heartbeat` naming a topic: a pong with that topic's versions (without them if the
    /// read fails or no app has the topic: the pong is a liveness answer first).
    async fn heartbeat_on_topic(&self, topic: Topic) -> ServerMessage {
        let (herd_window_ms, versions) = tokio::join!(self.herd_window_ms(), async {
            let service = self.topic_service(&topic)?;
            match service.versions(&topic).await {
                Ok(versions) => Some(versions),
                Err(error) => {
                    tracing::warn!(%error, %topic, "pong without versions: summaries unreadable");
                    None
                }
            }
        });
        ServerMessage::Pong {
            region: self.region.clone(),
            ts: self.clock.now_ms(),
            herd_window_ms,
            auction_id: None,
            topic: versions.as_ref().map(|_| topic),
            versions,
        }
    }

    /// `heartbeat` naming nothing: a pong, with the herd hint when one is configured.
    pub async fn heartbeat(&self) -> ServerMessage {
        ServerMessage::Pong {
            region: self.region.clone(),
            ts: self.clock.now_ms(),
            herd_window_ms: self.herd_window_ms().await,
            auction_id: None,
            topic: None,
            versions: None,
        }
    }

    /// The error frame for a protocol error, in this Region.
    pub fn error_frame(&self, error: &ProtocolError) -> ServerMessage {
        ServerMessage::error(error, &self.region)
    }

    /// The error frame of a strong-mode Region cut off from its table's quorum: the client
    /// goes to another Region (docs/PROTOCOL.md).
    pub fn no_quorum_frame(&self) -> ServerMessage {
        self.error_frame(&ProtocolError::new(
            ErrorCode::NoQuorum,
            "this Region cannot reach its table's quorum; connect to another Region",
        ))
    }

    /// The herd window to advertise: from the census this instance last read (read again
    /// when older than `reuse_for`), if it is recent enough. A failed read is logged and
    /// means no hint: a `state` reply never fails for it. At most one census read per
    /// instance per `reuse_for`.
    pub async fn herd_window_ms(&self) -> Option<u64> {
        let (hint, cache) = self.herd.as_ref()?;
        let now = self.clock.now_ms();
        let reuse_ms = u64::try_from(hint.reuse_for.as_millis()).unwrap_or(u64::MAX);
        let cached = {
            let cache = cache
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            cache
                .read_at_ms
                .filter(|at| now.saturating_sub(*at) < reuse_ms)
                .map(|_| cache.census)
        };
        let census = match cached {
            Some(census) => census,
            None => {
                let census = match self.connections.census().await {
                    Ok(census) => census,
                    Err(error) => {
                        tracing::warn!(%error, "connection census unreadable: no herd hint");
                        None
                    }
                };
                let mut cache = cache
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                cache.read_at_ms = Some(now);
                cache.census = census;
                census
            }
        }?;
        let max_age_ms = u64::try_from(hint.max_census_age.as_millis()).unwrap_or(u64::MAX);
        if now.saturating_sub(census.counted_at_ms) > max_age_ms {
            return None;
        }
        let window = crate::herd_window(
            usize::try_from(census.connections).unwrap_or(usize::MAX),
            hint.destination_quota_per_s,
            Duration::ZERO,
        );
        u64::try_from(window.as_millis()).ok()
    }

    /// The registry, notifier and fan-out settings a push worker posts with.
    pub fn push_worker(&self, settings: crate::push::PushSettings) -> crate::push::PushWorker {
        crate::push::PushWorker {
            connections: self.connections.clone(),
            notifier: self.notifier.clone(),
            fanout: self.fanout.clone(),
            settings,
            pause: self.fanout.pause.clone(),
            pacer: Arc::new(crate::push::Pacer::new(
                settings.budget_per_second,
                self.clock.clone(),
                self.fanout.pause.clone(),
            )),
            frames: None,
        }
    }
}

/// `writeResult`'s reason for a topic no app of this deployment has.
const UNKNOWN_TOPIC: &str = "unknown_topic";

#[async_trait::async_trait]
impl crate::push::PushSource for Gateway {
    /// The frame of the app that pushes its own (the auction's `bidUpdate`), else the topic's
    /// app's `topicUpdate`.
    async fn push_frame(&self, topic: &Topic) -> Result<String> {
        if let Some(frames) = &self.frames {
            if let Some(frame) = frames.push_frame(self, topic).await {
                return frame;
            }
        }
        match self.apps.get(topic) {
            Some(service) => service.push_frame(topic).await,
            None => Err(crate::Error::Internal(format!(
                "a push of `{topic}`, which no app of this deployment has"
            ))),
        }
    }

    fn push_worker(&self, settings: crate::push::PushSettings) -> crate::push::PushWorker {
        Gateway::push_worker(self, settings)
    }
}

#[cfg(test)]
mod tests {
    //! The front door with an app of the kit's own tests (a tally: every Region's summary
    //! counts its ops, the view is the sum) and, for the frames outside the envelope, a
    //! recording `AppFrames`: routing by namespace, errors, pongs, the herd hint, pushes.
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use crate::memory::{ManualClock, MemoryConnections, MemoryStateStore, RecordingNotifier};
    use crate::push::PushSource;
    use crate::test_apps::Tally;
    use crate::topics::AppService;
    use serde_json::{json, Value as Json};
    use wsdr_protocol::TopicName;

    const T0: u64 = 1_000_000;

    /// The frames of an app with its own: answers every frame it is handed with a pong
    /// naming the action, fails on demand, and pushes its own frame for `own:*` topics.
    #[derive(Default)]
    struct OwnFrames {
        fail: Mutex<Option<crate::Error>>,
        handed: Mutex<Vec<&'static str>>,
    }

    #[async_trait::async_trait]
    impl AppFrames for OwnFrames {
        async fn handle(
            &self,
            gateway: &Gateway,
            _: &ConnectionId,
            _: &Principal,
            message: ClientMessage,
        ) -> Result<Reply> {
            self.handed.lock().unwrap().push(message.action());
            if let Some(error) = self.fail.lock().unwrap().take() {
                return Err(error);
            }
            Ok(Reply::only(ServerMessage::Pong {
                region: gateway.region().to_owned(),
                ts: gateway.clock().now_ms(),
                herd_window_ms: None,
                auction_id: None,
                topic: None,
                versions: None,
            }))
        }

        async fn push_frame(&self, _: &Gateway, topic: &Topic) -> Option<Result<String>> {
            (topic.namespace.as_str() == "own").then(|| Ok(format!("own frame of {topic}")))
        }
    }

    struct Door {
        gateway: Gateway,
        connections: Arc<MemoryConnections>,
        clock: Arc<ManualClock>,
    }

    fn door() -> Door {
        let clock = Arc::new(ManualClock::new(T0));
        let store = Arc::new(MemoryStateStore::new("r1", clock.clone()));
        let connections = Arc::new(MemoryConnections::new(3_600_000));
        let tally = AppService::new(Tally, store, connections.clone(), clock.clone(), "r1")
            .with_seeds([(TopicName::new("t").unwrap(), json!({}))]);
        let gateway = Gateway::new(
            connections.clone(),
            Arc::new(RecordingNotifier::default()),
            clock.clone(),
            "r1",
        )
        .with_apps(Apps::default().with(Arc::new(tally)));
        Door {
            gateway,
            connections,
            clock,
        }
    }

    fn ann() -> UserId {
        UserId::new("ann").unwrap()
    }

    fn conn(id: &str) -> ConnectionId {
        ConnectionId::new(id).unwrap()
    }

    async fn frame(gateway: &Gateway, json: &str) -> ServerMessage {
        gateway
            .handle_frame(&conn("c1"), ann(), json.as_bytes())
            .await
            .message
    }

    fn error_code(message: &ServerMessage) -> String {
        match message {
            ServerMessage::Error { code, region, .. } => {
                assert_eq!(region, "r1");
                code.as_str().to_owned()
            }
            other => panic!("not an error: {other:?}"),
        }
    }

    #[tokio::test]
    async fn the_envelope_goes_to_the_app_of_the_topics_namespace() {
        let Door { gateway, .. } = door();
        assert!(gateway.serves(&Topic::parse("tally:t").unwrap()));
        assert!(!gateway.serves(&Topic::parse("chat:t").unwrap()));
        let accepted = frame(
            &gateway,
            r#"{"action":"write","topic":"tally:t","opId":"op-00001","op":{"n":5}}"#,
        )
        .await;
        let ServerMessage::WriteResult { status, region, .. } = accepted else {
            panic!("{accepted:?}")
        };
        assert_eq!((status, region.as_str()), (BidStatus::Accepted, "r1"));
        let unknown = frame(
            &gateway,
            r#"{"action":"write","topic":"chat:t","opId":"op-00001","op":{"n":5}}"#,
        )
        .await;
        let ServerMessage::WriteResult { status, reason, .. } = unknown else {
            panic!("{unknown:?}")
        };
        assert_eq!(status, BidStatus::Rejected);
        assert_eq!(reason.as_deref(), Some("unknown_topic"));
        let state = frame(&gateway, r#"{"action":"getState","topic":"tally:t"}"#).await;
        let ServerMessage::TopicState {
            view,
            herd_window_ms,
            ..
        } = state
        else {
            panic!("{state:?}")
        };
        assert_eq!((view["sum"].as_u64(), herd_window_ms), (Some(5), None));
        let nobody = frame(&gateway, r#"{"action":"getState","topic":"chat:t"}"#).await;
        assert_eq!(error_code(&nobody), "invalid_field");
        assert_eq!(error_code(&frame(&gateway, "{").await), "bad_json");
    }

    #[tokio::test]
    async fn a_pong_names_the_topics_versions_only_when_an_app_has_it() {
        let Door { gateway, clock, .. } = door();
        frame(
            &gateway,
            r#"{"action":"write","topic":"tally:t","opId":"op-00001","op":{"n":1}}"#,
        )
        .await;
        clock.advance(5);
        let pong = |message: ServerMessage| match message {
            ServerMessage::Pong {
                topic,
                versions,
                auction_id,
                ts,
                region,
                ..
            } => {
                assert_eq!((ts, region.as_str(), auction_id), (T0 + 5, "r1", None));
                (topic.map(|t| t.to_string()), versions)
            }
            other => panic!("not a pong: {other:?}"),
        };
        let (topic, versions) =
            pong(frame(&gateway, r#"{"action":"heartbeat","topic":"tally:t"}"#).await);
        assert_eq!(topic.as_deref(), Some("tally:t"));
        assert_eq!(versions.unwrap().get("r1"), Some(&1));
        assert_eq!(
            pong(frame(&gateway, r#"{"action":"heartbeat","topic":"chat:t"}"#).await),
            (None, None)
        );
        assert_eq!(
            pong(frame(&gateway, r#"{"action":"heartbeat"}"#).await),
            (None, None)
        );
        // A heartbeat naming an auction, with no app of its own frames: a plain pong.
        assert_eq!(
            pong(frame(&gateway, r#"{"action":"heartbeat","auctionId":"a1"}"#).await),
            (None, None)
        );
    }

    #[tokio::test]
    async fn frames_outside_the_envelope_go_to_the_app_with_its_own_or_are_refused() {
        let Door { gateway, .. } = door();
        let bid = r#"{"action":"bid","auctionId":"a1","amount":5,"bidId":"bid-00001"}"#;
        assert_eq!(error_code(&frame(&gateway, bid).await), "unknown_action");
        let own = Arc::new(OwnFrames::default());
        let gateway = gateway.with_frames(own.clone());
        assert!(matches!(
            frame(&gateway, bid).await,
            ServerMessage::Pong { .. }
        ));
        frame(&gateway, r#"{"action":"heartbeat","auctionId":"a1"}"#).await;
        frame(&gateway, r#"{"action":"getState","auctionId":"a1"}"#).await;
        // The envelope's frames never reach it.
        frame(&gateway, r#"{"action":"heartbeat"}"#).await;
        frame(&gateway, r#"{"action":"getState","topic":"tally:t"}"#).await;
        assert_eq!(
            *own.handed.lock().unwrap(),
            vec!["bid", "heartbeat", "getState"]
        );
        // Its failures are the gateway's to answer.
        *own.fail.lock().unwrap() = Some(crate::Error::NoQuorum("cut off".into()));
        assert_eq!(error_code(&frame(&gateway, bid).await), "no_quorum");
        *own.fail.lock().unwrap() = Some(crate::Error::Transient("store".into()));
        assert_eq!(error_code(&frame(&gateway, bid).await), "internal");
    }

    #[tokio::test]
    async fn a_push_carries_the_own_frame_of_the_app_that_has_one_else_the_topic_update() {
        let Door { gateway, .. } = door();
        let tally = Topic::parse("tally:t").unwrap();
        let update: Json =
            serde_json::from_str(&PushSource::push_frame(&gateway, &tally).await.unwrap()).unwrap();
        assert_eq!(update["type"], "topicUpdate", "{update}");
        let own = Topic::parse("own:x").unwrap();
        assert!(PushSource::push_frame(&gateway, &own).await.is_err());
        let gateway = gateway.with_frames(Arc::new(OwnFrames::default()));
        assert_eq!(
            PushSource::push_frame(&gateway, &own).await.unwrap(),
            "own frame of own:x"
        );
        let update: Json =
            serde_json::from_str(&PushSource::push_frame(&gateway, &tally).await.unwrap()).unwrap();
        assert_eq!(update["type"], "topicUpdate");
        assert!(
            PushSource::push_frame(&gateway, &Topic::parse("chat:t").unwrap())
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn the_herd_hint_is_the_last_census_over_the_quota_read_once_per_period() {
        let Door {
            gateway,
            connections,
            clock,
        } = door();
        assert_eq!(gateway.herd_window_ms().await, None, "no hint configured");
        let gateway = gateway.with_herd_hint(HerdHint {
            destination_quota_per_s: 5.0,
            max_census_age: Duration::from_secs(300),
            reuse_for: Duration::from_secs(60),
        });
        for i in 0..50 {
            connections
                .register(&conn(&format!("c{i}")), &ann(), T0)
                .await
                .unwrap();
        }
        assert_eq!(gateway.herd_window_ms().await, None, "no census yet");
        connections.take_census(T0).await.unwrap();
        assert_eq!(gateway.herd_window_ms().await, None, "reused for a minute");
        clock.advance(59_999);
        assert_eq!(
            gateway.herd_window_ms().await,
            None,
            "still within the minute"
        );
        clock.advance(1);
        assert_eq!(gateway.herd_window_ms().await, Some(10_000));
        let state = frame(&gateway, r#"{"action":"getState","topic":"tally:t"}"#).await;
        let ServerMessage::TopicState { herd_window_ms, .. } = state else {
            panic!("{state:?}")
        };
        assert_eq!(herd_window_ms, Some(10_000));
        // The census stops: older than five minutes, no hint rather than a stale one.
        clock.advance(240_000);
        assert_eq!(
            gateway.herd_window_ms().await,
            Some(10_000),
            "exactly 5 minutes old"
        );
        clock.advance(1);
        assert_eq!(gateway.herd_window_ms().await, None);
    }

    #[tokio::test]
    async fn connections_are_registered_and_removed_and_the_fanout_keeps_its_randomness() {
        let Door {
            gateway,
            connections,
            ..
        } = door();
        gateway.connect(&conn("c9"), &ann()).await.unwrap();
        assert!(connections.contains(&conn("c9")));
        gateway.disconnect(&conn("c9")).await.unwrap();
        assert!(!connections.contains(&conn("c9")));
        assert_eq!(gateway.region(), "r1");
        // Settings given before the fan-out's are kept by it: its jitter is the gateway's
        // entropy (a seeded one in the lab), its pauses the gateway's.
        let entropy: Arc<dyn Entropy> = Arc::new(crate::ports::SeededEntropy::new(7));
        let pause: Arc<dyn Pause> = Arc::new(crate::ports::TokioPause);
        let gateway = gateway
            .with_entropy(entropy.clone())
            .with_pause(pause.clone())
            .with_fanout(FanoutConfig {
                concurrency: 7,
                ..FanoutConfig::default()
            });
        assert_eq!(gateway.fanout().concurrency, 7);
        assert!(Arc::ptr_eq(&gateway.fanout().jitter, &entropy));
        assert!(Arc::ptr_eq(&gateway.fanout().pause, &pause));
        let worker = gateway.push_worker(crate::push::PushSettings::default());
        assert_eq!(worker.fanout.concurrency, 7);
        assert!(format!("{gateway:?}").contains("r1"));
    }
}
