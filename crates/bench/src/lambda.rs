//! The Lambda binaries as Lambda runs them: bootstrap size (zipped), time from process start
//! to ready (its first `GET /runtime/invocation/next` on a local Runtime API) and peak RSS
//! after serving invocations.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, Mutex};

#[derive(Debug, Clone, serde::Serialize)]
pub struct LambdaCost {
    pub function: String,
    pub binary: String,
    pub bytes: u64,
    pub zipped_bytes: u64,
    pub ready_ms: f64,
    pub invocations: usize,
    pub peak_rss_kb: u64,
}

struct RuntimeApi {
    events: Mutex<mpsc::Receiver<String>>,
    first_next: Mutex<Option<Instant>>,
    answered: mpsc::UnboundedSender<()>,
}

async fn next(State(api): State<Arc<RuntimeApi>>) -> Response {
    api.first_next.lock().await.get_or_insert_with(Instant::now);
    let Some(event) = api.events.lock().await.recv().await else {
        // No more events: hold the request, as Lambda does between invocations.
        std::future::pending::<()>().await;
        return StatusCode::NO_CONTENT.into_response();
    };
    let mut headers = HeaderMap::new();
    let id = format!("{:032x}", rand::random::<u128>());
    let deadline = (crate::common::wall_ms() as u64 + 30_000).to_string();
    for (k, v) in [
        ("lambda-runtime-aws-request-id", id.as_str()),
        ("lambda-runtime-deadline-ms", deadline.as_str()),
        (
            "lambda-runtime-invoked-function-arn",
            "arn:aws:lambda:us-east-1:000000000000:function:bench",
        ),
        (
            "lambda-runtime-trace-id",
            "Root=1-00000000-000000000000000000000000",
        ),
    ] {
        if let Ok(v) = HeaderValue::from_str(v) {
            headers.insert(k, v);
        }
    }
    (StatusCode::OK, headers, event).into_response()
}

async fn answered(
    State(api): State<Arc<RuntimeApi>>,
    Path(_id): Path<String>,
    _body: Bytes,
) -> StatusCode {
    let _ = api.answered.send(());
    StatusCode::ACCEPTED
}

/// The secret every `GetSecretValue` answers with (the bench's HS256 key).
pub const SECRET_VALUE: &str = crate::common::SECRET;

/// CloudWatch's `PutMetricData` (awsQuery) and Secrets Manager's `GetSecretValue` and
/// `BatchGetSecretValue` (awsJson1.1, told apart by `X-Amz-Target`), all at `/`.
async fn aws_sink(headers: HeaderMap, body: Bytes) -> Response {
    let target = headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let secret = |name: &str| {
        serde_json::json!({
            "ARN": format!("arn:aws:secretsmanager:us-east-1:000000000000:secret:{name}-AbCdEf"),
            "Name": name,
            "SecretString": SECRET_VALUE,
            "VersionId": "00000000-0000-0000-0000-000000000000",
            "VersionStages": ["AWSCURRENT"],
        })
    };
    let request: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let answer = match target {
        "secretsmanager.GetSecretValue" => secret(request["SecretId"].as_str().unwrap_or_default()),
        "secretsmanager.BatchGetSecretValue" => {
            let values: Vec<serde_json::Value> = request["SecretIdList"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|id| id.as_str().map(secret))
                .collect();
            serde_json::json!({ "SecretValues": values, "Errors": [] })
        }
        _ => return (StatusCode::OK, [("content-type", "text/xml")], "<PutMetricDataResponse xmlns=\"http://monitoring.amazonaws.com/doc/2010-08-01/\"><ResponseMetadata><RequestId>bench</RequestId></ResponseMetadata></PutMetricDataResponse>").into_response(),
    };
    (
        StatusCode::OK,
        [("content-type", "application/x-amz-json-1.1")],
        answer.to_string(),
    )
        .into_response()
}

fn peak_rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn zipped_size(path: &FsPath) -> u64 {
    let dir = std::env::temp_dir().join(format!("wsdr-zip-{:x}", rand::random::<u32>()));
    let _ = std::fs::create_dir_all(&dir);
    let staged = dir.join("bootstrap");
    let zip = dir.join("bootstrap.zip");
    let ok = std::fs::copy(path, &staged).is_ok()
        && std::process::Command::new("zip")
            .arg("-q9j")
            .arg(&zip)
            .arg(&staged)
            .status()
            .is_ok_and(|s| s.success());
    let size = if ok {
        std::fs::metadata(&zip).map(|m| m.len()).unwrap_or(0)
    } else {
        0
    };
    let _ = std::fs::remove_dir_all(&dir);
    size
}

/// One way to start a function: (label, host binary, extra environment).
pub type Start = (String, PathBuf, Vec<(&'static str, String)>);

/// Cold starts of several functions, interleaved so that each sees the same machine and
/// page-cache conditions: one warm-up round (not counted: it pages every binary in), then
/// `rounds` rounds, each starting with a different function. Ready times in ms, per
/// function in the order given.
pub async fn ready_rounds(functions: &[Start], rounds: usize) -> anyhow::Result<Vec<Vec<f64>>> {
    let mut times = vec![Vec::with_capacity(rounds); functions.len()];
    for round in 0..=rounds {
        for k in 0..functions.len() {
            let i = (round + k) % functions.len();
            let (name, binary, env) = &functions[i];
            let (ready, _) = run(name, binary, env, Vec::new()).await?;
            if round > 0 {
                times[i].push(ready);
            }
        }
    }
    Ok(times)
}

/// The median of a sample (NaN when empty).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// Run one function binary against a local Runtime API with `events`, then measure its
/// size, one cold start's ready time and its peak RSS after the invocations.
pub async fn measure(
    function: &str,
    host_binary: &FsPath,
    env: &[(&str, String)],
    events: Vec<String>,
) -> anyhow::Result<LambdaCost> {
    let count = events.len();
    let (ready, rss) = run(function, host_binary, env, events).await?;
    let deployed = PathBuf::from(format!("target/lambda/{function}/bootstrap"));
    let (binary, shipped) = if deployed.exists() {
        ("arm64 (cargo lambda)".to_owned(), deployed)
    } else {
        (
            format!("host {} release", std::env::consts::ARCH),
            host_binary.to_path_buf(),
        )
    };
    Ok(LambdaCost {
        function: function.into(),
        binary,
        bytes: std::fs::metadata(&shipped).map(|m| m.len()).unwrap_or(0),
        zipped_bytes: zipped_size(&shipped),
        ready_ms: ready,
        invocations: count,
        peak_rss_kb: rss,
    })
}

/// Start the binary, serve it `events`, and return (ready ms, peak RSS kB).
async fn run(
    function: &str,
    host_binary: &FsPath,
    env: &[(&str, String)],
    events: Vec<String>,
) -> anyhow::Result<(f64, u64)> {
    let (tx, rx) = mpsc::channel(events.len().max(1));
    let count = events.len();
    for e in events {
        tx.send(e).await?;
    }
    drop(tx);
    let (answered_tx, mut answered_rx) = mpsc::unbounded_channel();
    let api = Arc::new(RuntimeApi {
        events: Mutex::new(rx),
        first_next: Mutex::new(None),
        answered: answered_tx,
    });
    let router = Router::new()
        .route("/2018-06-01/runtime/invocation/next", get(next))
        .route(
            "/2018-06-01/runtime/invocation/{id}/response",
            post(answered),
        )
        .route("/2018-06-01/runtime/invocation/{id}/error", post(answered))
        .route("/", post(aws_sink))
        .with_state(api.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, router).await });
    let mut command = tokio::process::Command::new(host_binary);
    command
        .env_clear()
        .env("AWS_LAMBDA_RUNTIME_API", addr.to_string())
        .env("AWS_LAMBDA_FUNCTION_NAME", function)
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "bench")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "bench")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "bench")
        .env("AWS_SECRET_ACCESS_KEY", "bench")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_ENDPOINT_URL_CLOUDWATCH", format!("http://{addr}"))
        .env("AWS_ENDPOINT_URL_SECRETS_MANAGER", format!("http://{addr}"))
        .env("RUST_LOG", "error")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    for (k, v) in env {
        command.env(k, v);
    }
    let started = Instant::now();
    let mut child = command.spawn()?;
    let pid = child.id().unwrap_or(0);
    for _ in 0..count {
        tokio::time::timeout(Duration::from_secs(30), answered_rx.recv()).await?;
    }
    if count == 0 {
        // Only the start: wait for the first poll of the Runtime API.
        let deadline = Instant::now() + Duration::from_secs(10);
        while api.first_next.lock().await.is_none() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }
    let ready = api
        .first_next
        .lock()
        .await
        .map(|t| t.duration_since(started).as_secs_f64() * 1000.0)
        .unwrap_or(f64::NAN);
    let rss = peak_rss_kb(pid);
    let _ = child.kill().await;
    let _ = child.wait().await;
    Ok((ready, rss))
}
