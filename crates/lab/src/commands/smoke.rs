//! After a deploy: one user on each endpoint sends heartbeat, getState and one bid, and the
//! command prints which Region answered each (docs/DEPLOY.md, "Smoke test").

use std::process::ExitCode;
use std::time::Duration;
use wsdr_lab::smoke::{Settings, Target};

#[derive(clap::Args)]
pub struct Args {
    /// An endpoint: `REGION=wss://...` for a Region's own endpoint (that Region must answer),
    /// or a bare `wss://...` for the global name (either may; the command says which).
    #[arg(long = "target", value_parser = |s: &str| Target::parse(s))]
    targets: Vec<Target>,
    /// Against a running `wsdr lab` (its control address, e.g. http://127.0.0.1:8787): its
    /// Regions' own endpoints and its global name are the targets, and it mints the token.
    #[arg(long, conflicts_with_all = ["token", "targets"])]
    lab: Option<String>,
    /// A user token from your identity provider (or WSDR_SMOKE_TOKEN).
    #[arg(long, env = "WSDR_SMOKE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Mint an HS256 user token with the secret in this environment variable (the stacks'
    /// UserHs256SecretName; docs/AUTH.md), with --issuer and --audience.
    #[arg(long, conflicts_with = "token")]
    hs256_secret_env: Option<String>,
    #[arg(long, requires = "hs256_secret_env")]
    issuer: Option<String>,
    #[arg(long, requires = "hs256_secret_env")]
    audience: Option<String>,
    /// The user the token names.
    #[arg(long, default_value = "smoke-test")]
    sub: String,
    /// The auction to read and bid on.
    #[arg(long, default_value = "lot-1")]
    auction: String,
    /// The bid: this much above the high bid, minor units.
    #[arg(long, default_value_t = 100)]
    raise: u64,
    /// Each step's bound, seconds.
    #[arg(long, default_value_t = 10)]
    timeout_secs: u64,
}

pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (targets, token) = match &args.lab {
        Some(control) => from_lab(control, &args.sub).await?,
        None => (args.targets.clone(), token(&args)?),
    };
    if targets.is_empty() {
        eprintln!("wsdr smoke: give at least one --target (or --lab)");
        return Ok(ExitCode::from(2));
    }
    let settings = Settings {
        token,
        auction: wsdr_protocol::AuctionId::new(args.auction.clone())?,
        raise: args.raise,
        timeout: Duration::from_secs(args.timeout_secs.max(1)),
    };
    let outcomes = wsdr_lab::smoke::run(&targets, &settings).await;
    print!("{}", wsdr_lab::smoke::table(&outcomes));
    let failures: Vec<String> = outcomes.iter().flat_map(|o| o.failures()).collect();
    if failures.is_empty() {
        println!("PASS");
        Ok(ExitCode::SUCCESS)
    } else {
        println!("FAIL: {}", failures.join("; "));
        Ok(ExitCode::from(1))
    }
}

/// The token: given, or minted with the HS256 secret as the authorizer checks it.
fn token(args: &Args) -> anyhow::Result<String> {
    if let Some(token) = &args.token {
        return Ok(token.clone());
    }
    let (Some(variable), Some(issuer), Some(audience)) =
        (&args.hs256_secret_env, &args.issuer, &args.audience)
    else {
        anyhow::bail!(
            "give --token (or WSDR_SMOKE_TOKEN), or --hs256-secret-env with --issuer and --audience, or --lab"
        );
    };
    let secret = std::env::var(variable)
        .map_err(|_| anyhow::anyhow!("the environment variable {variable} is not set"))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let claims = serde_json::json!({
        "sub": args.sub, "iss": issuer, "aud": audience, "iat": now, "exp": now + 600,
    });
    wsdr_lab::world::mint(&secret, &claims)
}

/// A running lab's Regions and global name, and a token it minted.
async fn from_lab(control: &str, sub: &str) -> anyhow::Result<(Vec<Target>, String)> {
    let address = control
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse::<std::net::SocketAddr>()
        .map_err(|e| anyhow::anyhow!("--lab {control}: an http://IP:PORT address ({e})"))?;
    let client = wsdr_lab::world::control::ControlClient::new(address, None);
    let (status, body) = client.get("/api/status").await?;
    anyhow::ensure!(status == 200, "GET /api/status answered {status}: {body}");
    let lab: serde_json::Value = serde_json::from_str(&body)?;
    let mut targets = Vec::new();
    for region in lab["regions"].as_array().into_iter().flatten() {
        if let (Some(name), Some(url)) = (region["name"].as_str(), region["url"].as_str()) {
            targets.push(Target::parse(&format!("{name}={url}")).map_err(anyhow::Error::msg)?);
        }
    }
    if let Some(global) = lab["front_door"].as_str() {
        targets.push(Target::parse(global).map_err(anyhow::Error::msg)?);
    }
    let (status, body) = client.get(&format!("/api/token?sub={sub}")).await?;
    anyhow::ensure!(status == 200, "GET /api/token answered {status}: {body}");
    let token: serde_json::Value = serde_json::from_str(&body)?;
    let token = token["token"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("GET /api/token: no token in {body}"))?
        .to_owned();
    Ok((targets, token))
}
