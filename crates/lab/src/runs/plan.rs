//! One schedule for everything that is done to a world: a [`Plan`] is a list of (instant,
//! [`Action`]), instants in AWS time from the plan's start. Chaos steps and drill scenarios
//! compile to plans, and [`play`] is the one place a plan meets a world.

use crate::world::scale::AwsDuration;
use crate::world::timeline::Kind;
use crate::world::{Fault, RegionId, World};

/// What a plan does at one instant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Action {
    /// Break something, or heal everything.
    Inject(Fault),
    /// A planned evacuation of a Region: out of DNS, then every connection told to move
    /// (it takes time: DNS must answer the other Region first).
    Evacuate(RegionId),
    /// A Region back in DNS after a planned evacuation.
    Restore(RegionId),
    /// Watch and strike: lose `region` for good (`never-returns`) at the first moment its
    /// replication has delivered a summary whose high bid's copy it still holds (the other
    /// Region then shows a winner whose copy never arrives), or, in strong mode, holds a
    /// committed head the other's stream has not shown (a bid acknowledged just before the
    /// loss, which only the survivor's own stream can push), or when `within` has passed.
    LoseWhenSummaryAhead {
        region: RegionId,
        within: AwsDuration,
    },
}

impl Action {
    /// The name a report counts it under (a fault's kind, or `evacuate`); `None` for what
    /// breaks nothing (heal, restore).
    pub fn fault_name(&self) -> Option<&'static str> {
        match self {
            Action::Inject(Fault::Heal) | Action::Restore(_) => None,
            Action::Inject(fault) => Some(fault.kind().name()),
            Action::Evacuate(_) => Some("evacuate"),
            Action::LoseWhenSummaryAhead { .. } => {
                Some(crate::world::FaultKind::NeverReturns.name())
            }
        }
    }
}

/// Actions at instants (AWS time from the plan's start, in order), and the plan's length.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    actions: Vec<(AwsDuration, Action)>,
    length: AwsDuration,
}

impl Plan {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add `action` at `at` (not before the plan's last action); the plan lasts at least
    /// until then.
    pub fn at(mut self, at: AwsDuration, action: Action) -> Self {
        let at = self.actions.last().map_or(at, |(last, _)| at.max(*last));
        self.actions.push((at, action));
        self.length = self.length.max(at);
        self
    }

    /// Inject `fault` at `at`.
    pub fn inject(self, at: AwsDuration, fault: Fault) -> Self {
        self.at(at, Action::Inject(fault))
    }

    /// The plan lasts at least `length`.
    pub fn lasting(mut self, length: AwsDuration) -> Self {
        self.length = self.length.max(length);
        self
    }

    /// This plan, then `next` starting when this one ends.
    pub fn then(mut self, next: Plan) -> Self {
        let offset = self.length;
        self.actions
            .extend(next.actions.into_iter().map(|(at, a)| (offset + at, a)));
        self.length = offset + next.length;
        self
    }

    pub fn actions(&self) -> &[(AwsDuration, Action)] {
        &self.actions
    }

    pub fn length(&self) -> AwsDuration {
        self.length
    }

    /// What the plan breaks, by name, one entry per action that breaks something.
    pub fn fault_names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.actions.iter().filter_map(|(_, a)| a.fault_name())
    }
}

/// The timeline's note when a watch-and-strike loss struck on what it watched for.
pub const STRUCK_SUMMARY_AHEAD: &str =
    "a summary has arrived ahead of its copy, or a head is unshown: striking now";

/// Play `plan` on `world` from now until its end. An action that takes time (an evacuation
/// waits for DNS) holds the rest of the plan back by as long as it took, so every step of a
/// plan keeps its length.
pub async fn play(world: &World, plan: &Plan) {
    let scale = world.scale();
    let start = tokio::time::Instant::now();
    let mut held = std::time::Duration::ZERO;
    for (at, action) in plan.actions() {
        tokio::time::sleep_until(start + scale.lab(*at) + held).await;
        let began = tokio::time::Instant::now();
        apply(world, *action).await;
        held += began.elapsed();
    }
    tokio::time::sleep_until(start + scale.lab(plan.length()) + held).await;
}

async fn apply(world: &World, action: Action) {
    match action {
        Action::Inject(fault) => world.inject(fault),
        Action::Evacuate(from) => {
            if let Err(error) = world.evacuate(from, true, "maintenance").await {
                world
                    .timeline()
                    .record(Kind::Note, format!("evacuation failed: {error:#}"));
            }
        }
        Action::Restore(region) => world.set_in_service(region, true),
        Action::LoseWhenSummaryAhead { region, within } => {
            let link = world.link(region);
            let struck = crate::world::clock::wait_for(world.scale().lab(within), || {
                link.summary_ahead_of_its_copy() || link.holds_a_head()
            })
            .await;
            world.timeline().record(
                Kind::Note,
                if struck {
                    STRUCK_SUMMARY_AHEAD
                } else {
                    "no summary ahead of its copy in the window: striking anyway"
                },
            );
            world.inject(Fault::NeverReturns(region));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_chain_end_to_start() {
        let secs = AwsDuration::from_secs;
        let first = Plan::new()
            .inject(secs(0), Fault::Throttle(RegionId::Primary))
            .inject(secs(90), Fault::Heal);
        let second = Plan::new()
            .inject(secs(0), Fault::Partition)
            .lasting(secs(30));
        let both = first.then(second);
        assert_eq!(both.length(), secs(120));
        assert_eq!(
            both.actions().iter().map(|(at, _)| *at).collect::<Vec<_>>(),
            vec![secs(0), secs(90), secs(90)]
        );
        assert_eq!(
            both.fault_names().collect::<Vec<_>>(),
            vec!["throttle", "partition"]
        );
    }

    #[test]
    fn an_action_never_goes_before_the_one_it_follows() {
        let secs = AwsDuration::from_secs;
        let plan = Plan::new()
            .inject(secs(50), Fault::Partition)
            .inject(secs(10), Fault::Heal);
        assert_eq!(plan.actions()[1].0, secs(50));
    }
}
