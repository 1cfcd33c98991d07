//! What every wsdr Lambda needs that is not an AWS adapter: its configuration read from the
//! environment ([`env`]), its logging ([`telemetry`]) and where its TLS roots come from
//! ([`certs`]). No AWS SDK here, so a function that
//! calls no AWS service (the authorizer) links none.

pub mod certs;
pub mod env;
pub mod telemetry;

/// A Lambda's `main`: points TLS root loading at the one system CA bundle while the process
/// has a single thread ([`certs::prefer_one_ca_bundle`] sets an environment variable), sets
/// up logging ([`telemetry::init_tracing`]) and logs that choice, then runs `run` on a
/// multi-threaded tokio runtime.
pub fn start<F, E>(run: impl FnOnce() -> F) -> Result<(), E>
where
    F: std::future::Future<Output = Result<(), E>>,
    E: From<std::io::Error>,
{
    let bundle = certs::prefer_one_ca_bundle();
    telemetry::init_tracing();
    match bundle {
        Some(bundle) => tracing::info!(bundle, "TLS roots from one CA bundle"),
        None => tracing::info!("TLS roots where the environment points"),
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run())
}
