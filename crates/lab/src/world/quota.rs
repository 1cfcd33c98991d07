//! A token bucket: the shape of every AWS request quota the lab enforces (API Gateway's new
//! connections, Secrets Manager's reads).

/// A token bucket for a quota: `rate` tokens a second of the caller's time, at most `depth`
/// held (one AWS second's worth: the burst does not grow with the lab's time scale). Time is the caller's (seconds since any origin it keeps), so the storm simulation
/// (`wsdr-bench sim`) spends tokens by exactly the rule the lab enforces.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuotaBucket {
    tokens: f64,
    at_s: f64,
}

impl QuotaBucket {
    /// A full bucket (`depth` tokens) at time `at_s`.
    pub fn full(depth: f64, at_s: f64) -> Self {
        Self {
            tokens: depth,
            at_s,
        }
    }

    /// Refill to `now_s` at `rate`, holding at most `depth`, then take a token if there is one.
    pub fn take(&mut self, now_s: f64, rate: f64, depth: f64) -> bool {
        self.tokens = (self.tokens + (now_s - self.at_s).max(0.0) * rate).min(depth);
        self.at_s = now_s;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Hold at most `depth` tokens (the quota lowered).
    pub fn cap(&mut self, depth: f64) {
        self.tokens = self.tokens.min(depth);
    }
}
