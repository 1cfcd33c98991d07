//! How late this machine ran the lab's timers during a real-time run.
//!
//! A real-time drill waits AWS time divided by the time scale, so every scheduling stall of
//! this machine (another build, a busy browser) is multiplied by the scale and read as AWS
//! seconds. A real-time run's figures are therefore reported with the stalls measured beside
//! them, and never decide a verdict: the deterministic simulation does (docs/LAB.md,
//! "Verdicts a busy machine cannot change").

use crate::runs::stats::Percentiles;
use serde::Serialize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A timer that asks to wake every `tick` and records how late each wake-up came.
#[derive(Debug)]
pub struct StallMeter {
    tick: Duration,
    late_ms: Arc<Mutex<Vec<f64>>>,
    task: tokio::task::JoinHandle<()>,
}

/// Wake-ups later than this count as a stall (tokio's timer has a 1 ms granularity).
const STALL_THRESHOLD_MS: f64 = 5.0;

impl StallMeter {
    /// Start measuring on the current runtime (the one the lab runs on, so that what starves
    /// the lab starves the meter).
    pub fn start(tick: Duration) -> Self {
        let late_ms = Arc::new(Mutex::new(Vec::new()));
        let samples = late_ms.clone();
        let task = tokio::spawn(async move {
            loop {
                let asked = tokio::time::Instant::now();
                tokio::time::sleep(tick).await;
                let late = asked.elapsed().saturating_sub(tick).as_secs_f64() * 1000.0;
                if let Ok(mut samples) = samples.lock() {
                    samples.push(late);
                }
            }
        });
        Self {
            tick,
            late_ms,
            task,
        }
    }

    /// Stop and summarise; `time_scale` turns the stalled lab time into AWS seconds.
    pub fn stop(self, time_scale: f64) -> Stalls {
        self.task.abort();
        let late = self.late_ms.lock().map(|l| l.clone()).unwrap_or_default();
        Stalls::of(self.tick, &late, time_scale)
    }
}

/// What the meter saw.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Stalls {
    /// The meter's period, real milliseconds.
    pub tick_ms: f64,
    pub wakeups: usize,
    /// How late wake-ups came, real milliseconds.
    pub late_ms: Percentiles,
    /// Wake-ups more than 5 ms late.
    pub stalls: usize,
    /// Their lateness added up, real milliseconds: lab time the machine did not give the lab.
    pub stalled_ms: f64,
    /// The same as AWS seconds at the run's time scale: how much of a figure like an RTO
    /// this machine could have added.
    pub stalled_aws_s: f64,
}

impl Stalls {
    pub fn of(tick: Duration, late_ms: &[f64], time_scale: f64) -> Self {
        let stalled: Vec<f64> = late_ms
            .iter()
            .copied()
            .filter(|l| *l > STALL_THRESHOLD_MS)
            .collect();
        let stalled_ms: f64 = stalled.iter().sum();
        Self {
            tick_ms: tick.as_secs_f64() * 1000.0,
            wakeups: late_ms.len(),
            late_ms: Percentiles::of(late_ms),
            stalls: stalled.len(),
            stalled_ms,
            stalled_aws_s: stalled_ms * time_scale / 1000.0,
        }
    }

    /// One line for the console.
    pub fn line(&self) -> String {
        let ms = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.1} ms"));
        format!(
            "scheduling stalls: {} of {} wake-ups over {STALL_THRESHOLD_MS:.0} ms late (p99 {}, max {}), {:.0} ms stalled = {:.1} s AWS",
            self.stalls,
            self.wakeups,
            ms(self.late_ms.p99),
            ms(self.late_ms.max),
            self.stalled_ms,
            self.stalled_aws_s
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_late_wakeups_count_as_stalls_and_scale_to_aws_time() {
        let stalls = Stalls::of(Duration::from_millis(10), &[0.5, 1.0, 6.0, 100.0], 20.0);
        assert_eq!(stalls.wakeups, 4);
        assert_eq!(stalls.stalls, 2);
        assert_eq!(stalls.stalled_ms, 106.0);
        assert!((stalls.stalled_aws_s - 2.12).abs() < 1e-9);
        assert_eq!(stalls.late_ms.max, Some(100.0));
    }

    #[tokio::test]
    async fn a_blocked_runtime_is_measured_as_a_stall() {
        let meter = StallMeter::start(Duration::from_millis(5));
        tokio::time::sleep(Duration::from_millis(12)).await;
        // Hold the (current-thread) runtime, as a CPU stall would: the meter cannot wake.
        std::thread::sleep(Duration::from_millis(60));
        tokio::time::sleep(Duration::from_millis(12)).await;
        let stalls = meter.stop(20.0);
        assert!(stalls.stalls >= 1, "{stalls:?}");
        assert!(stalls.stalled_ms >= 40.0, "{stalls:?}");
        assert!(stalls.stalled_aws_s >= 0.8, "{stalls:?}");
    }
}
