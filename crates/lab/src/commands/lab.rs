//! Start the lab and keep it running; faults through the control API.

use std::process::ExitCode;
use std::sync::Arc;
use wsdr_lab::cli;
use wsdr_lab::{LabConfig, TimeScale, World};

#[derive(clap::Args)]
pub struct Args {
    /// One lab second stands for this many AWS seconds (above 0).
    #[arg(long, default_value = "60", value_parser = cli::time_scale)]
    time_scale: f64,
    /// Keep each Region's state in DynamoDB Local at this endpoint.
    #[arg(long)]
    dynamodb: Option<String>,
    /// Control room and control API address (host:port; `localhost:8787` works).
    #[arg(long, default_value = "127.0.0.1:8787", value_parser = cli::address)]
    listen: std::net::SocketAddr,
    /// Serve the control API on a non-loopback address. It can mint user tokens and
    /// inject faults, so it then requires the control token printed at start.
    #[arg(long)]
    allow_remote: bool,
    /// Simulated users bidding through the global name while the lab runs (0: none).
    #[arg(long, default_value_t = 0)]
    users: usize,
    /// Mean AWS seconds between one simulated user's bids (above 0).
    #[arg(long, default_value = "20", value_parser = cli::positive_secs)]
    bid_every: f64,
    /// The state table's mode: `eventual` (MREC) or `strong` (MRSC with a witness).
    #[arg(long, value_enum, default_value = "eventual")]
    consistency: cli::ConsistencyArg,
    /// The reference design's failover settings (the verdict alarm behind the records, 60 s
    /// TTL, no fast path) instead of wsdr's defaults (the fast verdict decided and served in
    /// the secondary, endpoint checks every 10 s, 20 s TTL).
    #[arg(long)]
    reference: bool,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Args {
        time_scale,
        dynamodb,
        listen,
        allow_remote,
        users,
        bid_every,
        consistency,
        reference,
    } = args;
    let settings = if reference {
        LabConfig::reference()
    } else {
        LabConfig::wsdr_defaults()
    };
    let control_token = if cli::is_loopback(&listen) {
        None
    } else if allow_remote {
        Some(wsdr_lab::world::control::new_control_token())
    } else {
        eprintln!(
            "wsdr lab: refusing to serve the control API on {listen}: anyone who reaches it can mint user tokens and inject faults. \
             Use a loopback address (127.0.0.1:8787, localhost:8787), or add --allow-remote to require a control token."
        );
        return Ok(ExitCode::from(2));
    };
    let lab = Arc::new(
        World::builder()
            .config(LabConfig {
                scale: TimeScale::new(time_scale),
                echo: true,
                store: super::store_kind(dynamodb),
                // An environment variable, not a flag: secrets stay out of `ps`.
                canary_secret: std::env::var("WSDR_LAB_CANARY_SECRET").ok(),
                // Runs for hours: the timeline keeps the recent past and every key event.
                timeline_cap: Some(50_000),
                consistency: consistency.into(),
                ..settings
            })
            .start()
            .await?,
    );
    let control =
        wsdr_lab::world::control::serve_with_token(lab.clone(), listen, control_token.clone())
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e:#} (is another `wsdr lab` running? try --listen 127.0.0.1:0)"))?;
    println!(
        "wsdr lab {} running (time scale {time_scale})",
        env!("CARGO_PKG_VERSION")
    );
    println!("  global name (front door): {}", lab.front_door_url());
    for (_, region) in lab.regions() {
        println!("  {}: {}", region.name, region.url());
    }
    match &control_token {
        Some(token) => {
            println!("  control room: http://{control}/?token={token}");
            println!("  control API needs: Authorization: Bearer {token} (wsdr fault --control-token, or WSDR_LAB_CONTROL_TOKEN)");
        }
        None => println!("  control room: http://{control}/"),
    }
    println!("  control API: http://{control}/api/status ; POST http://{control}/api/fault {{\"kind\":\"throttle\",\"region\":0}}");
    println!("  metrics (Prometheus): http://{control}/metrics");
    let auction = wsdr_protocol::AuctionId::new("lot-1")?;
    let population = if users > 0 {
        println!("  {users} simulated users bidding on lot-1 through the global name");
        Some(wsdr_lab::sim::users::Population::through_front_door(
            &lab,
            users,
            &auction,
            wsdr_lab::sim::users::Behaviour::honest(bid_every),
            1,
            |_| false,
        )?)
    } else {
        None
    };
    tokio::signal::ctrl_c().await?;
    if let Some(population) = population {
        population.close().await;
    }
    Ok(ExitCode::SUCCESS)
}
