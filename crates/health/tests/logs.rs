#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! A stale verdict is logged as `verdict stale` (the `VerdictStaleAlarm`'s metric filter reads
//! it: its writer is silent), a fresh one is not. Its own test binary: a thread-local
//! subscriber must not race other tests for tracing's callsite cache.

use health::{Config, Health};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wsdr_core::memory::{ManualClock, MemoryHealthLedger};
use wsdr_core::{HealthLedger, VerdictSource};

/// A `MakeWriter` collecting every log line.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_stale_verdict_is_logged_for_its_alarm_and_a_fresh_one_is_not() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let ledger = Arc::new(MemoryHealthLedger::default());
    let clock = Arc::new(ManualClock::new(1_000_000));
    let config = Config {
        api_id: "api-1".into(),
        primary_api_id: None,
        state_table: "state".into(),
        stale_after: Duration::from_secs(60),
    };
    ledger
        .put_verdict("api-1", VerdictSource::Inside, true, 1_000_000)
        .await
        .unwrap();
    let health = Health::new(config, ledger, clock.clone());
    assert!(format!("{health:?}").starts_with("Health { config: Config"));
    health.answer("GET", "/self").await;
    let log = || String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(!log().contains("verdict stale"), "{}", log());
    clock.advance(61_000);
    health.answer("GET", "/self").await;
    assert!(log().contains("verdict stale"), "{}", log());
}
