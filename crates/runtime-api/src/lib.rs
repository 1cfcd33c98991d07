//! AWS Lambda's Runtime API on loopback, for tests of a function's `main`: its wiring (the
//! configuration it reads, the clients it builds, the handler it hands to the runtime) is
//! what `cargo test` of its library never runs.
//!
//! [`Function::start`] runs the function's own binary as the Lambda service does (a process
//! with `AWS_LAMBDA_RUNTIME_API` and the function's variables in an otherwise empty
//! environment: nothing of the host's AWS configuration leaks in), and [`Function::invoke`]
//! hands it one event through `GET /runtime/invocation/next` and returns what it posted back:
//! its response, its error, its initialisation error, or its exit when it answered nothing.
//! The protocol, as AWS documents it:
//! <https://docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html>.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::Value as Json;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, Mutex};
use tokio::task::JoinHandle;

/// The Runtime API's version prefix.
const PREFIX: &str = "/2018-06-01/runtime";
/// How long an invocation may take before [`Function::invoke`] gives up on it: a bound for a
/// function that hangs, far above what any of wsdr's functions take on loopback peers (never
/// reached by a passing test).
pub const INVOKE_BOUND: Duration = Duration::from_secs(60);

/// Why a function could not be run or asked.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the runtime API could not listen on loopback: {0}")]
    Listen(std::io::Error),
    #[error("the function's binary {binary} did not start: {source}")]
    Spawn {
        binary: String,
        source: std::io::Error,
    },
    #[error("the function took no event and posted nothing within {0:?}")]
    Hung(Duration),
    #[error("the function's runtime API stopped")]
    Stopped,
}

/// What a function did with one event.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// `POST /runtime/invocation/{id}/response`: its result, parsed as JSON (a body that is
    /// no JSON is a string).
    Response(Json),
    /// `POST /runtime/invocation/{id}/error`: the handler's error.
    Error(Json),
    /// `POST /runtime/init/error`: it failed before it took the event.
    InitError(Json),
    /// It exited without posting anything.
    Exited(Option<i32>),
}

/// One function's process and the runtime API it polls.
#[derive(Debug)]
pub struct Function {
    child: Child,
    events: mpsc::Sender<Json>,
    answers: mpsc::Receiver<Answer>,
    server: JoinHandle<()>,
    output: JoinHandle<String>,
    exited: Option<ExitStatus>,
}

#[derive(Clone)]
struct Api {
    events: Arc<Mutex<mpsc::Receiver<Json>>>,
    answers: mpsc::Sender<Answer>,
    next_id: Arc<std::sync::atomic::AtomicU64>,
}

fn body_json(body: &Bytes) -> Json {
    serde_json::from_slice(body)
        .unwrap_or_else(|_| Json::String(String::from_utf8_lossy(body).into_owned()))
}

async fn next(State(api): State<Api>) -> Response {
    let Some(event) = api.events.lock().await.recv().await else {
        return StatusCode::GONE.into_response();
    };
    let id = api
        .next_id
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let deadline = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|now| now + INVOKE_BOUND)
        .unwrap_or_default()
        .as_millis();
    let mut headers = HeaderMap::new();
    for (name, value) in [
        ("lambda-runtime-aws-request-id", format!("request-{id}")),
        ("lambda-runtime-deadline-ms", deadline.to_string()),
        (
            "lambda-runtime-invoked-function-arn",
            "arn:aws:lambda:us-east-1:123456789012:function:under-test".to_string(),
        ),
    ] {
        if let Ok(value) = value.parse() {
            headers.insert(name, value);
        }
    }
    (headers, event.to_string()).into_response()
}

async fn answered(api: &Api, answer: Answer) -> StatusCode {
    match api.answers.send(answer).await {
        Ok(()) => StatusCode::ACCEPTED,
        Err(_) => StatusCode::GONE,
    }
}

async fn response(State(api): State<Api>, Path(_id): Path<String>, body: Bytes) -> StatusCode {
    answered(&api, Answer::Response(body_json(&body))).await
}

async fn error(State(api): State<Api>, Path(_id): Path<String>, body: Bytes) -> StatusCode {
    answered(&api, Answer::Error(body_json(&body))).await
}

async fn init_error(State(api): State<Api>, body: Bytes) -> StatusCode {
    answered(&api, Answer::InitError(body_json(&body))).await
}

async fn read_all(pipe: Option<impl tokio::io::AsyncRead + Unpin>) -> String {
    let mut text = String::new();
    if let Some(mut pipe) = pipe {
        let _ = pipe.read_to_string(&mut text).await;
    }
    text
}

impl Function {
    /// Runs `binary` (a test's `env!("CARGO_BIN_EXE_<name>")`) against a runtime API of its
    /// own on `127.0.0.1:0`, with `env` and the variables Lambda sets; nothing else of the
    /// host's environment. Its stdout and stderr (its logs) are kept for [`Function::stop`].
    pub async fn start(binary: &str, env: &[(&str, &str)]) -> Result<Self, Error> {
        let (events_in, events_out) = mpsc::channel(16);
        let (answers_in, answers_out) = mpsc::channel(16);
        let api = Api {
            events: Arc::new(Mutex::new(events_out)),
            answers: answers_in,
            next_id: Arc::default(),
        };
        let app = Router::new()
            .route(&format!("{PREFIX}/invocation/next"), get(next))
            .route(
                &format!("{PREFIX}/invocation/{{id}}/response"),
                post(response),
            )
            .route(&format!("{PREFIX}/invocation/{{id}}/error"), post(error))
            .route(&format!("{PREFIX}/init/error"), post(init_error))
            .with_state(api);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(Error::Listen)?;
        let address = listener.local_addr().map_err(Error::Listen)?;
        let server = tokio::spawn(async move {
            // Ends when the test drops the function (the task is aborted).
            let _ = axum::serve(listener, app).await;
        });
        let mut child = Command::new(binary)
            .env_clear()
            .envs(env.iter().copied())
            .env("AWS_LAMBDA_RUNTIME_API", address.to_string())
            .env("AWS_LAMBDA_FUNCTION_NAME", "under-test")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| {
                server.abort();
                Error::Spawn {
                    binary: binary.to_string(),
                    source,
                }
            })?;
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        // Both read at once: a pipe left full would stop the function.
        let output = tokio::spawn(async move {
            let (out, err) = tokio::join!(read_all(stdout), read_all(stderr));
            out + &err
        });
        Ok(Self {
            child,
            events: events_in,
            answers: answers_out,
            server,
            output,
            exited: None,
        })
    }

    /// Hands the function `event` and returns what it posted back, or its exit if it ended
    /// first. Gives up after [`INVOKE_BOUND`].
    pub async fn invoke(&mut self, event: Json) -> Result<Answer, Error> {
        if let Some(status) = self.exited {
            return Ok(Answer::Exited(status.code()));
        }
        self.events.send(event).await.map_err(|_| Error::Stopped)?;
        let waited = tokio::time::timeout(INVOKE_BOUND, async {
            tokio::select! {
                // An answer first, even one posted just before the process ended.
                biased;
                answer = self.answers.recv() => answer.ok_or(Error::Stopped),
                status = self.child.wait() => {
                    match self.answers.try_recv() {
                        Ok(answer) => Ok(answer),
                        Err(_) => {
                            let status = status.map_err(|_| Error::Stopped)?;
                            self.exited = Some(status);
                            Ok(Answer::Exited(status.code()))
                        }
                    }
                }
            }
        })
        .await;
        waited.map_err(|_| Error::Hung(INVOKE_BOUND))?
    }

    /// Ends the function (killed if it still runs) and returns what it logged.
    pub async fn stop(mut self) -> String {
        let _ = self.child.kill().await;
        self.server.abort();
        match tokio::time::timeout(INVOKE_BOUND, &mut self.output).await {
            Ok(Ok(text)) => text,
            _ => String::new(),
        }
    }
}

impl Drop for Function {
    fn drop(&mut self) {
        self.server.abort();
        self.output.abort();
    }
}
