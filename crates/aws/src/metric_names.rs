//! The canary's metric names: configuration, needed with or without CloudWatch (the lab
//! keeps its own metrics store under the same names).

/// Names of the canary's metrics (all from configuration).
#[derive(Debug, Clone)]
pub struct MetricNames {
    /// `METRIC_NAMESPACE`, default `App`.
    pub namespace: String,
    /// `HEALTH_METRIC_NAME`, default `WebSocketHealth`.
    pub health: String,
    /// `LATENCY_METRIC_NAME`, default `ProbeLatency`.
    pub latency: String,
    /// `VERDICT_METRIC_NAME`, default `FailoverVerdict`: a watcher's failover verdict.
    pub verdict: String,
}

impl Default for MetricNames {
    fn default() -> Self {
        Self {
            namespace: "App".into(),
            health: "WebSocketHealth".into(),
            latency: "ProbeLatency".into(),
            verdict: "FailoverVerdict".into(),
        }
    }
}
