//! One canary run: several probes folded into one datapoint, then published.

use crate::probe::{probe, ProbeFailure, ProbeSuccess, ProbeTarget};
use crate::token::mint_canary_token;
use crate::{Config, Error};
use serde::Serialize;
use std::sync::Arc;
use wsdr_client::ConnectOptions;
use wsdr_core::{Clock, FastVerdict, HealthDatapoint, HealthLedger, Metrics};

/// What one run saw and published.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub healthy: bool,
    pub probes: usize,
    pub successes: usize,
    pub failures: Vec<String>,
    pub latency_ms: Option<f64>,
    /// A watcher's failover verdict for this minute (true = serve the Region).
    pub verdict: Option<bool>,
}

/// Majority of the planned probes, decided as early as possible: `Some(verdict)` once the
/// remaining probes cannot change it. With 3 planned, one lost probe cannot fail a Region
/// (2 of 3 succeed), and a dead Region is failed after 2 probes without waiting for the third.
pub fn fold(outcomes: &[bool], planned: u32) -> Option<bool> {
    let needed = planned as usize / 2 + 1;
    let successes = outcomes.iter().filter(|ok| **ok).count();
    let failures = outcomes.len() - successes;
    if successes >= needed {
        Some(true)
    } else if failures > planned as usize - needed {
        Some(false)
    } else {
        None
    }
}

/// The canary: its configuration and where datapoints go. Built once per cold start.
pub struct Canary {
    config: Config,
    metrics: Arc<dyn Metrics>,
    clock: Arc<dyn Clock>,
    /// Where fast rounds and verdicts are recorded (with `config.fast`).
    ledger: Option<Arc<dyn HealthLedger>>,
    /// The fast verdict, kept across warm invocations (a cold start resumes the recorded one).
    fast_verdict: tokio::sync::Mutex<Option<FastVerdict>>,
    /// Where probes connect: TCP, or a simulation's in-memory network.
    network: wsdr_net::Network,
}

/// What one invocation's fast rounds did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FastReport {
    pub rounds: usize,
    pub failed_rounds: usize,
    /// The verdict after the last round, when this canary decides.
    pub serves: Option<bool>,
    /// Records that could not be written or read (each logged).
    pub ledger_errors: usize,
}

impl std::fmt::Debug for Canary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Canary")
            .field("target", &self.config.target_url)
            .finish_non_exhaustive()
    }
}

impl Canary {
    pub fn new(config: Config, metrics: Arc<dyn Metrics>, clock: Arc<dyn Clock>) -> Self {
        Self {
            config,
            metrics,
            clock,
            ledger: None,
            fast_verdict: tokio::sync::Mutex::new(None),
            network: wsdr_net::Network::Tcp,
        }
    }

    /// Probe over `network` instead of the operating system's TCP (the lab's simulations).
    pub fn with_network(mut self, network: wsdr_net::Network) -> Self {
        self.network = network;
        self
    }

    /// Record fast rounds and verdicts here (needed for `config.fast` to run).
    pub fn with_health_ledger(mut self, ledger: Arc<dyn HealthLedger>) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// The fast rounds of one invocation: a probe every `interval` for `window`, each
    /// recorded under this canary's source; when it decides, each round also folds into its
    /// fast verdict (this vantage point's alone: docs/DEPLOY.md, "Who decides"), recorded
    /// every round and, on a change, as a change. Nothing to do without `config.fast` and a
    /// ledger.
    pub async fn fast_rounds(&self) -> FastReport {
        let (Some(fast), Some(ledger)) = (&self.config.fast, &self.ledger) else {
            return FastReport::default();
        };
        let api_id = &self.config.api_id;
        let source = fast.source;
        let mut report = FastReport::default();
        let mut guard = self.fast_verdict.lock().await;
        if guard.is_none() && fast.decides {
            // A cold start resumes the recorded verdict: a restart never writes "serve" over
            // a failover its previous instance decided.
            let recorded = match ledger.verdict(api_id, source).await {
                Ok(v) => v,
                Err(error) => {
                    tracing::warn!(%error, "fast verdict unreadable at start");
                    report.ledger_errors += 1;
                    None
                }
            };
            *guard = Some(
                FastVerdict::new(fast.fail_after, fast.recover_after, 1)
                    .resuming(wsdr_core::resumed_verdict(recorded)),
            );
        }
        let started = tokio::time::Instant::now();
        let rounds =
            ((fast.window.as_secs_f64() / fast.interval.as_secs_f64()).floor() as u32).max(1);
        for round in 0..rounds {
            tokio::time::sleep_until(started + fast.interval * round).await;
            let ok = crate::probe::counts_as_up(&self.probe_once().await);
            report.rounds += 1;
            if !ok {
                report.failed_rounds += 1;
            }
            let now = self.clock.now_ms();
            if let Err(error) = ledger.put_round(api_id, source, ok, now).await {
                tracing::warn!(%error, "fast round not recorded");
                report.ledger_errors += 1;
            }
            let Some(verdict) = guard.as_mut() else {
                continue;
            };
            if let Some(serve) = verdict.round(&[Some(ok)]) {
                tracing::warn!(serve, api_id = %api_id, ?source, "fast verdict changed");
                // The change on its own record: the judge's is the fail-over order.
                if let Err(error) = ledger.put_change(api_id, source, serve, now).await {
                    tracing::warn!(%error, "fast verdict change not recorded");
                    report.ledger_errors += 1;
                }
            }
            report.serves = Some(verdict.serves());
            if let Err(error) = ledger
                .put_verdict(api_id, source, verdict.serves(), now)
                .await
            {
                tracing::warn!(%error, "fast verdict not recorded");
                report.ledger_errors += 1;
            }
        }
        report
    }

    /// One probe with a fresh token: each of the minute's probes and each fast round.
    pub async fn probe_once(&self) -> Result<ProbeSuccess, ProbeFailure> {
        let target = ProbeTarget {
            url: self.config.target_url.clone(),
            expected_region: self.config.expected_region.clone(),
            auction_id: self.config.auction_id.clone(),
            timeout: self.config.probe_timeout,
        };
        let token = self
            .token()
            .map_err(|error| ProbeFailure::WrongReply(format!("no token: {error}")))?;
        let options = ConnectOptions {
            token: Some(token),
            placement: self.config.placement,
            network: self.network.clone(),
            connect_to: self.config.target_connect_to.clone(),
            ..ConnectOptions::default()
        };
        probe(&target, &options).await
    }

    /// Probe, fold, publish. `Err` only when the datapoint could not be published.
    pub async fn run_once(&self) -> Result<RunReport, Error> {
        let started_ms = self.clock.now_ms();
        let mut outcomes: Vec<Result<ProbeSuccess, ProbeFailure>> = Vec::new();
        let mut verdict = None;
        for attempt in 0..self.config.probes_per_run {
            if attempt > 0 {
                tokio::time::sleep(self.config.probe_spacing).await;
            }
            let outcome = self.probe_once().await;
            match &outcome {
                Ok(s) => tracing::info!(
                    attempt,
                    heartbeat_ms = s.heartbeat_ms,
                    total_ms = s.total_ms,
                    "probe ok"
                ),
                Err(failure) => tracing::warn!(attempt, %failure, "probe failed"),
            }
            outcomes.push(outcome);
            let oks: Vec<bool> = outcomes.iter().map(crate::probe::counts_as_up).collect();
            verdict = fold(&oks, self.config.probes_per_run);
            if verdict.is_some() {
                break;
            }
        }
        let healthy = verdict.unwrap_or(false);
        let latencies: Vec<f64> = outcomes
            .iter()
            .filter_map(|o| o.as_ref().ok().map(|s| s.heartbeat_ms))
            .collect();
        let latency_ms =
            (!latencies.is_empty()).then(|| latencies.iter().sum::<f64>() / latencies.len() as f64);
        let point = HealthDatapoint {
            api_id: self.config.api_id.clone(),
            healthy,
            latency_ms,
            timestamp_ms: started_ms,
        };
        self.metrics.put_health(&point).await?;
        tracing::info!(healthy, probes = outcomes.len(), "datapoint published");
        let verdict = match self.config.verdict {
            Some(rule) => Some(self.publish_verdict(rule, healthy, started_ms).await?),
            None => None,
        };
        Ok(RunReport {
            healthy,
            probes: outcomes.len(),
            successes: latencies.len(),
            failures: outcomes
                .iter()
                .filter_map(|o| o.as_ref().err().map(ToString::to_string))
                .collect(),
            latency_ms,
            verdict,
        })
    }

    /// The watcher's verdict: its own last N - 1 datapoints read back, this one appended,
    /// the failover rule applied, the verdict published. Nothing is published when the
    /// history cannot be read: the verdict alarm then sees missing data, and the health
    /// check keeps its last status (a broken observer must not move traffic).
    async fn publish_verdict(
        &self,
        rule: wsdr_core::FailoverRule,
        healthy: bool,
        now_ms: u64,
    ) -> Result<bool, Error> {
        let mut minutes = self
            .metrics
            .recent_health(&self.config.api_id, rule.window.saturating_sub(1), now_ms)
            .await?;
        minutes.push(Some(healthy));
        let serve = rule.serves(&minutes);
        self.metrics
            .put_verdict(&wsdr_core::VerdictDatapoint {
                api_id: self.config.api_id.clone(),
                serve,
                timestamp_ms: now_ms,
            })
            .await?;
        tracing::info!(serve, ?minutes, "verdict published");
        Ok(serve)
    }

    /// The Lambda entry point (EventBridge scheduled event). A failed publish fails the
    /// invocation, which CloudWatch sees as missing data: breaching.
    pub async fn handle(
        &self,
        _event: lambda_runtime::LambdaEvent<aws_lambda_events::eventbridge::EventBridgeEvent>,
    ) -> Result<RunReport, lambda_runtime::Error> {
        // The minute's datapoint and, with the fast path, the minute's fast rounds, together.
        let (run, fast) = tokio::join!(self.run_once(), self.fast_rounds());
        if fast.rounds > 0 {
            tracing::info!(
                rounds = fast.rounds,
                failed = fast.failed_rounds,
                serves = ?fast.serves,
                ledger_errors = fast.ledger_errors,
                "fast rounds done"
            );
        }
        run.map_err(|e| {
            tracing::error!(error = %e, "canary run failed");
            lambda_runtime::Error::from(e.to_string())
        })
    }

    fn token(&self) -> Result<String, Error> {
        mint_canary_token(
            &self.config.secret,
            &self.config.issuer,
            &self.config.audience,
            &self.config.expected_region,
            self.clock.now_ms() / 1000,
        )
    }
}
