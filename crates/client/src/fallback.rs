//! Client-assisted failover: when the Region behind the global name keeps failing, go to the
//! next Region's own endpoint without waiting for DNS; drift back to the global name once it
//! is trustworthy again. A pure state machine, so the policy is tested without sockets.
//!
//! Why a client may do this at all: bids are idempotent (client-made `bidId`) and the high
//! bid is derived under a total order, so clients split between Regions for a while cost
//! freshness, never correctness (docs/CLIENT.md, "Client-assisted failover").

use std::time::Duration;

/// One Region's own endpoint (a regional custom name or the execute-api URL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionalEndpoint {
    /// The Region's name, as the server names it in every frame (`us-west-2`).
    pub region: String,
    /// Its URL (`wss://usw2.auction.example.com`).
    pub url: String,
}

/// The fallback policy's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Fallback {
    /// The Regions' own endpoints, in order of preference.
    pub regions: Vec<RegionalEndpoint>,
    /// Consecutive failures on one endpoint before the next is tried (default 2). A failure
    /// is a connect that did not succeed or a session that ended broken (heartbeat rule,
    /// silence, socket error, abnormal close) before state was restored again. One lost
    /// heartbeat is not a failure: the heartbeat rule already needs two.
    pub after_failures: u32,
    /// While on a regional endpoint, how often the global name is probed (default 60 s).
    pub recheck: Duration,
    /// Consecutive healthy probes of the global name, answered by another Region, before
    /// the client moves back to it (default 3: three minutes of health at the default
    /// recheck, longer than a flapping Region stays up). Each fallback that follows a
    /// return doubles it, up to 8x, so a Region that fails only under load cannot make
    /// clients ping-pong.
    pub return_after: u32,
}

impl Fallback {
    /// Fall back to `regions` (in order of preference) with the default settings.
    pub fn new(regions: Vec<RegionalEndpoint>) -> Self {
        Self {
            regions,
            after_failures: 2,
            recheck: Duration::from_secs(60),
            return_after: 3,
        }
    }

    /// The same policy with every timer divided by `factor` (the lab's time scale).
    pub fn scaled(mut self, factor: f64) -> Self {
        let factor = if factor.is_finite() && factor > 0.0 {
            factor
        } else {
            1.0
        };
        self.recheck = self.recheck.div_f64(factor);
        self
    }
}

/// Where the next connect goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The global name (Route 53 decides the Region).
    Global,
    /// The configured Region endpoint at this index.
    Regional(usize),
}

/// What a probe of the global name found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeResult {
    /// A pong, from this Region.
    Healthy(String),
    /// No pong: refused, timed out, an error frame, or a closed socket.
    Failed,
}

/// What the client should do after a probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Keep the current endpoint.
    Stay,
    /// The global name now leads to the Region the client is on: use the global name from
    /// the next connect on, without disturbing the current session.
    AdoptGlobal,
    /// The global name has been healthy long enough: close this session and reconnect
    /// through it.
    Return,
}

/// The policy's state for one client: which endpoint the next connect uses.
///
/// ```
/// use wsdr_client::{EndpointPolicy, Fallback, RegionalEndpoint, Target};
///
/// let regions = vec![
///     RegionalEndpoint { region: "us-east-1".into(), url: "wss://use1.example.com".into() },
///     RegionalEndpoint { region: "us-west-2".into(), url: "wss://usw2.example.com".into() },
/// ];
/// let mut policy = EndpointPolicy::new(Fallback::new(regions));
/// let global = "wss://auction.example.com";
/// policy.on_restored("us-east-1");
/// // Two failures in a row through the global name: the other Region's own endpoint.
/// assert_eq!(policy.on_failure(), None);
/// assert_eq!(policy.on_failure(), Some(Target::Regional(1)));
/// assert_eq!(policy.url(global), "wss://usw2.example.com");
/// ```
#[derive(Debug, Clone)]
pub struct EndpointPolicy {
    config: Fallback,
    target: Target,
    failures: u32,
    /// The Region that last restored state (learned from the server's frames).
    last_region: Option<String>,
    healthy_probes: u32,
    /// How many times the client fell back after having returned (drives the hysteresis).
    returns: u32,
}

impl EndpointPolicy {
    /// A client on the global name, no failures yet.
    pub fn new(config: Fallback) -> Self {
        Self {
            config,
            target: Target::Global,
            failures: 0,
            last_region: None,
            healthy_probes: 0,
            returns: 0,
        }
    }

    /// The settings.
    pub fn config(&self) -> &Fallback {
        &self.config
    }

    /// Where the next connect goes.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Whether the client is on a Region's own endpoint.
    pub fn on_fallback(&self) -> bool {
        matches!(self.target, Target::Regional(_))
    }

    /// Send the next connect to `target` because the server said so (`moveTo`): a planned
    /// move, not a failure, so the failure count starts over. Moving to a Region's own
    /// endpoint starts the recheck of the global name as a fallback would.
    pub fn move_to(&mut self, target: Target) {
        let target = match target {
            Target::Regional(i) if i >= self.config.regions.len() => Target::Global,
            other => other,
        };
        self.target = target;
        self.failures = 0;
        self.healthy_probes = 0;
    }

    /// Strong mode: `region` cannot decide anything (no quorum). Go at once to the first
    /// other Region's own endpoint, in preference order. Returns the new target, or `None`
    /// if the policy knows no other Region.
    pub fn redirect_from(&mut self, region: &str) -> Option<Target> {
        let index = self
            .config
            .regions
            .iter()
            .position(|e| e.region != region)?;
        if self.target == Target::Global {
            self.returns = self.returns.saturating_add(1);
        }
        self.target = Target::Regional(index);
        self.failures = 0;
        self.healthy_probes = 0;
        Some(self.target.clone())
    }

    /// The URL of the next connect; `global` is what the global name resolves to now.
    pub fn url(&self, global: &str) -> String {
        match self.target {
            Target::Regional(i) => self
                .config
                .regions
                .get(i)
                .map(|e| e.url.clone())
                .unwrap_or_else(|| global.to_owned()),
            Target::Global => global.to_owned(),
        }
    }

    /// State was restored from `region`: the endpoint works.
    pub fn on_restored(&mut self, region: &str) {
        self.failures = 0;
        self.last_region = Some(region.to_owned());
    }

    /// A connect failed or a session ended broken. Returns the new target when the policy
    /// moves.
    pub fn on_failure(&mut self) -> Option<Target> {
        self.failures = self.failures.saturating_add(1);
        if self.failures < self.config.after_failures.max(1) || self.config.regions.is_empty() {
            return None;
        }
        self.failures = 0;
        self.healthy_probes = 0;
        let next = self.next_target();
        if next == self.target {
            return None;
        }
        if matches!(next, Target::Regional(_)) && self.target == Target::Global {
            // Falling back (again): the longer the client has to see the global name healthy
            // before returning.
            self.returns = self.returns.saturating_add(1);
        }
        self.target = next.clone();
        Some(next)
    }

    /// The next endpoint after the failing one: the first Region other than the failing
    /// Region, in preference order; after the last one, the global name again.
    fn next_target(&self) -> Target {
        let failing_region = match &self.target {
            Target::Regional(i) => self.config.regions.get(*i).map(|e| e.region.clone()),
            Target::Global => self.last_region.clone(),
        };
        let start = match self.target {
            Target::Regional(i) => i + 1,
            Target::Global => 0,
        };
        (start..self.config.regions.len())
            .find(|&i| Some(&self.config.regions[i].region) != failing_region.as_ref())
            .map(Target::Regional)
            .unwrap_or(Target::Global)
    }

    /// The probes needed before returning: `return_after`, doubled per earlier fallback
    /// beyond the first, at most 8x.
    pub fn probes_needed(&self) -> u32 {
        let doublings = self.returns.saturating_sub(1).min(3);
        self.config
            .return_after
            .max(1)
            .saturating_mul(1 << doublings)
    }

    /// A probe of the global name came back, while the client is on `current_region`.
    pub fn on_probe(&mut self, result: ProbeResult, current_region: Option<&str>) -> Decision {
        if !self.on_fallback() {
            return Decision::Stay;
        }
        match result {
            ProbeResult::Failed => {
                self.healthy_probes = 0;
                Decision::Stay
            }
            ProbeResult::Healthy(region) if Some(region.as_str()) == current_region => {
                self.use_global();
                Decision::AdoptGlobal
            }
            ProbeResult::Healthy(_) => {
                self.healthy_probes += 1;
                if self.healthy_probes >= self.probes_needed() {
                    self.use_global();
                    Decision::Return
                } else {
                    Decision::Stay
                }
            }
        }
    }

    fn use_global(&mut self) {
        self.target = Target::Global;
        self.failures = 0;
        self.healthy_probes = 0;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn policy() -> EndpointPolicy {
        EndpointPolicy::new(Fallback::new(vec![
            RegionalEndpoint {
                region: "east".into(),
                url: "ws://east".into(),
            },
            RegionalEndpoint {
                region: "west".into(),
                url: "ws://west".into(),
            },
        ]))
    }

    #[test]
    fn a_redirect_moves_at_once_to_another_region() {
        let mut p = policy();
        assert_eq!(p.redirect_from("east"), Some(Target::Regional(1)));
        assert_eq!(p.url("ws://global"), "ws://west");
        assert_eq!(p.redirect_from("west"), Some(Target::Regional(0)));
        let mut none = EndpointPolicy::new(Fallback::new(Vec::new()));
        assert_eq!(none.redirect_from("east"), None);
        assert_eq!(none.url("ws://global"), "ws://global");
    }

    #[test]
    fn one_failure_never_moves_two_move_to_the_other_region() {
        let mut p = policy();
        p.on_restored("east");
        assert_eq!(p.on_failure(), None);
        assert_eq!(p.url("ws://global"), "ws://global");
        assert_eq!(p.on_failure(), Some(Target::Regional(1)));
        assert_eq!(p.url("ws://global"), "ws://west");
    }

    #[test]
    fn a_restore_between_failures_resets_the_count() {
        let mut p = policy();
        p.on_restored("east");
        for _ in 0..10 {
            assert_eq!(p.on_failure(), None);
            p.on_restored("east");
        }
        assert_eq!(p.target(), &Target::Global);
    }

    #[test]
    fn failing_fallback_rotates_then_comes_back_to_global() {
        let mut p = policy();
        // Never connected: the first Region is tried first.
        p.on_failure();
        assert_eq!(p.on_failure(), Some(Target::Regional(0)));
        p.on_failure();
        assert_eq!(p.on_failure(), Some(Target::Regional(1)));
        p.on_failure();
        assert_eq!(p.on_failure(), Some(Target::Global));
    }

    #[test]
    fn dns_agreeing_adopts_global_at_once_and_others_need_a_streak() {
        let mut p = policy();
        p.on_restored("east");
        p.on_failure();
        p.on_failure();
        p.on_restored("west");
        assert_eq!(
            p.on_probe(ProbeResult::Healthy("east".into()), Some("west")),
            Decision::Stay
        );
        assert_eq!(
            p.on_probe(ProbeResult::Failed, Some("west")),
            Decision::Stay,
            "a failed probe resets the streak"
        );
        assert_eq!(
            p.on_probe(ProbeResult::Healthy("west".into()), Some("west")),
            Decision::AdoptGlobal
        );
        assert_eq!(p.target(), &Target::Global);
    }

    #[test]
    fn returning_needs_a_longer_streak_after_each_fallback() {
        let mut p = policy();
        p.on_restored("east");
        let mut needed = Vec::new();
        for _ in 0..5 {
            p.on_failure();
            p.on_failure();
            assert!(p.on_fallback());
            p.on_restored("west");
            let mut probes = 0;
            loop {
                probes += 1;
                assert!(probes <= 100, "no return after 100 healthy probes");
                if p.on_probe(ProbeResult::Healthy("east".into()), Some("west")) == Decision::Return
                {
                    break;
                }
            }
            needed.push(probes);
            p.on_restored("east");
        }
        assert_eq!(needed, vec![3, 6, 12, 24, 24]);
    }

    #[test]
    fn only_a_finite_positive_factor_scales_the_recheck() {
        let recheck = |factor: f64| Fallback::new(Vec::new()).scaled(factor).recheck;
        assert_eq!(recheck(60.0), Duration::from_secs(1));
        for no_factor in [0.0, -2.0, f64::NAN, f64::INFINITY] {
            assert_eq!(recheck(no_factor), Duration::from_secs(60), "{no_factor}");
        }
    }

    #[test]
    fn a_move_to_an_endpoint_the_policy_lacks_goes_to_the_global_name() {
        let mut p = policy();
        p.move_to(Target::Regional(1));
        assert_eq!(p.target(), &Target::Regional(1));
        p.move_to(Target::Regional(2));
        assert_eq!(p.target(), &Target::Global);
        assert!(!p.on_fallback());
    }

    #[test]
    fn only_leaving_the_global_name_counts_as_a_fallback() {
        // Failing over from one Region's endpoint to another's is no new fallback: the streak
        // needed to return stays the first one's.
        let mut p = policy();
        p.on_failure();
        assert_eq!(p.on_failure(), Some(Target::Regional(0)));
        p.on_failure();
        assert_eq!(p.on_failure(), Some(Target::Regional(1)));
        assert_eq!(p.probes_needed(), 3, "one fallback, through two Regions");
        let mut p = policy();
        p.on_restored("east");
        p.on_failure();
        assert_eq!(p.on_failure(), Some(Target::Regional(1)));
        assert_eq!(p.probes_needed(), 3);
        p.on_failure();
        assert_eq!(p.on_failure(), Some(Target::Global));
        p.on_failure();
        assert_eq!(
            p.on_failure(),
            Some(Target::Regional(1)),
            "the last Region served was east"
        );
        assert_eq!(p.probes_needed(), 6, "left the global name twice");
        // A redirect counts when it leaves the global name, not between Regions.
        let mut p = policy();
        p.redirect_from("east");
        assert_eq!(p.probes_needed(), 3);
        p.redirect_from("west");
        assert_eq!(p.probes_needed(), 3, "between Regions: no new fallback");
        p.move_to(Target::Global);
        p.redirect_from("east");
        assert_eq!(p.probes_needed(), 6, "left the global name twice");
    }
}
