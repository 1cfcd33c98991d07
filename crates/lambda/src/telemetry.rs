//! Logging setup shared by the Lambda binaries.

/// JSON logs when Lambda asks for them (`AWS_LAMBDA_LOG_FORMAT=JSON`), plain text otherwise;
/// level from `RUST_LOG` (default `info`). Never logs event bodies or tokens: callers log
/// fields (`connection_id`, `route`, `region`, `request_id`, `user`).
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let json = std::env::var("AWS_LAMBDA_LOG_FORMAT").is_ok_and(|v| v.eq_ignore_ascii_case("json"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .without_time(); // CloudWatch stamps every line
    if json {
        builder.json().with_current_span(true).init();
    } else {
        builder.init();
    }
}
