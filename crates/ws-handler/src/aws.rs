//! The production wiring (feature `aws`): DynamoDB tables and API Gateway `@connections`.

use crate::{App, Config, Error};
use std::sync::Arc;
use wsdr_auction::AuctionService;
use wsdr_aws::{
    ApiGatewayNotifier, DynamoConnections, DynamoPushLeases, DynamoStateStore, SdkConfig,
    SqsPushQueue,
};
use wsdr_chat::Chat;
use wsdr_core::push::{PushPorts, Pusher};
use wsdr_core::topics::{AppService, Apps};
use wsdr_core::{FanoutConfig, HerdHint, SystemClock, TokioPause};

/// Build the handler on DynamoDB and API Gateway: clients built once per cold start, then
/// the configured auctions created if absent (idempotent; safe in both Regions).
pub async fn app_from_aws(config: &Config, sdk: &SdkConfig) -> Result<App, Error> {
    let dynamo = wsdr_aws::dynamo_client(sdk);
    let state = DynamoStateStore::new(dynamo.clone(), &config.state_table);
    let connections = Arc::new(DynamoConnections::new(
        dynamo.clone(),
        &config.connections_table,
        config.connection_ttl,
    ));
    let notifier = Arc::new(ApiGatewayNotifier::new(sdk, &config.callback_url));
    let clock = Arc::new(SystemClock);
    // The table's mode fixes the services': only a strongly consistent table keeps a head.
    let chat =
        Chat::in_namespace(
            Chat::namespace().map_err(|e| wsdr_lambda::env::EnvError::Invalid {
                name: "chat namespace",
                reason: e.message,
            })?,
        );
    let rooms = config
        .seed_rooms
        .iter()
        .map(|(name, room)| (name.clone(), room.to_json()));
    let (service, chat) = match config.consistency {
        wsdr_core::Consistency::Eventual => {
            let state = Arc::new(state);
            (
                AuctionService::new(
                    state.clone(),
                    connections.clone(),
                    notifier,
                    clock.clone(),
                    &config.region_label,
                ),
                AppService::new(chat, state, connections, clock, &config.region_label),
            )
        }
        wsdr_core::Consistency::Strong => {
            let state = Arc::new(state.strongly_consistent());
            (
                AuctionService::strong(
                    state.clone(),
                    connections.clone(),
                    notifier,
                    clock.clone(),
                    &config.region_label,
                ),
                AppService::strong(chat, state, connections, clock, &config.region_label),
            )
        }
    };
    let service = service
        .with_apps(Apps::default().with(Arc::new(chat.with_seeds(rooms))))
        .with_fanout(FanoutConfig {
            concurrency: config.fanout_concurrency,
            ..FanoutConfig::default()
        })
        // Created on first use, not here: a cold start makes no network call.
        .with_seed_auctions(config.seed_auctions.clone());
    let service = match config.herd_hint_quota_per_s {
        Some(quota) => service.with_herd_hint(HerdHint {
            destination_quota_per_s: quota,
            ..HerdHint::default()
        }),
        None => service,
    };
    let push = config.push;
    let pusher = match &config.push_queue_url {
        // As deployed: one function reads the stream and starts pushes, another (the same
        // binary) runs their jobs, at most `workers` at once, each at its share of the budget.
        Some(url) => Pusher::queued(
            service.clone(),
            push,
            Arc::new(SystemClock),
            Arc::new(TokioPause),
            PushPorts {
                leases: Arc::new(DynamoPushLeases::new(dynamo, &config.connections_table)),
                queue: Arc::new(SqsPushQueue::new(wsdr_aws::sqs_client(sdk), url)),
                posts_per_second: push.budget_per_worker(),
            },
        ),
        None => Pusher::new(
            service.clone(),
            push,
            Arc::new(SystemClock),
            Arc::new(TokioPause),
        ),
    };
    let app = App::with_pusher(service, &config.subprotocol, pusher);
    Ok(match &config.fast_failover_queue_url {
        Some(url) => app.with_failover_orders(Arc::new(wsdr_aws::SqsFailoverOrders::new(
            wsdr_aws::sqs_client(sdk),
            url,
        ))),
        None => app,
    })
}

impl crate::FailoverOrders for wsdr_aws::SqsFailoverOrders {
    fn send(
        &self,
        body: String,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send + '_>> {
        Box::pin(async move {
            wsdr_aws::SqsFailoverOrders::send(self, body)
                .await
                .map_err(|e| e.to_string())
        })
    }
}
