//! The apps a chaos run can put its people on (`wsdr chaos --app`): the one thing that differs
//! between an auction's run and a chat room's. The campaign's loop ([`super::chaos`]: a
//! steady lab, the schedule, the heal, everyone back, the judge, the failover's own rules) is
//! the same for every app; an app says how its people start, when they are all back, how its
//! run is judged (the kit's rules over its ops, [`crate::sim::topic_rules`], and its own), and
//! what its report holds.

use crate::runs::chaos::{
    attack_before_the_users, attack_wait, digest_of, faults_by_kind, run_report,
    strong_mode_violations, struck_summary_ahead, App, ChaosConfig, RunReport, Step,
};
use crate::runs::plan::Plan;
use crate::sim::chat::{ChatBehaviour, ChatJudgement, ChatTrace, Members};
use crate::sim::history::{Excused, Violation};
use crate::sim::judge::{judge, Judgement};
use crate::sim::trace::RunTrace;
use crate::sim::users::{Behaviour, Population};
use crate::world::owner::Holdings;
use crate::world::scale::AwsDuration;
use crate::world::World;
use std::sync::Arc;
use std::time::Duration;
use wsdr_protocol::AuctionId;

/// What a run's report is made with, besides what its app judged.
pub(crate) struct RunContext<'a> {
    pub run: usize,
    pub seed: u64,
    pub config: &'a ChaosConfig,
    pub schedule: Vec<Step>,
    pub plan: &'a Plan,
    pub lab: &'a World,
}

/// An app whose people a chaos run puts through its schedule.
#[async_trait::async_trait]
pub(crate) trait CampaignApp: Sized + Send + Sync {
    /// What the judge made of the run (the app's trace and its violations), for the report.
    type Judged: Send;

    /// The people (half with client-assisted failover) and any attackers on a steady lab,
    /// warmed up: the schedule starts next.
    async fn start(lab: &Arc<World>, config: &ChaosConfig, seed: u64) -> anyhow::Result<Self>;

    /// Every person connected again (the loop waits for it after the heal).
    fn all_connected(&self) -> bool;

    /// End the run (stop, let answers arrive for `drain`, replication settle, final reads)
    /// and judge it by the kit's rules and the app's own.
    async fn judge(self, lab: &World, drain: Duration) -> anyhow::Result<Self::Judged>;

    /// The run's report, digest included, from what was judged and the failover's own
    /// violations (added after the app's).
    fn report(judged: Self::Judged, failover: Vec<Violation>, run: RunContext<'_>) -> RunReport;
}

/// The auction's run: eight bidders on `lot-1` through the front door, and the attackers
/// (a prolific user, racers, a bid id reused across a split, an impostor).
pub(crate) struct AuctionRun {
    auction: AuctionId,
    users: Arc<Population>,
    attacks: Vec<Violation>,
}

#[async_trait::async_trait]
impl CampaignApp for AuctionRun {
    type Judged = (RunTrace, Vec<Violation>, Excused);

    async fn start(lab: &Arc<World>, config: &ChaosConfig, seed: u64) -> anyhow::Result<Self> {
        let scale = lab.config().scale;
        let auction = AuctionId::new("lot-1")?;
        let mut attacks = attack_before_the_users(lab, scale, config.clock).await?;
        let users = Population::through_front_door(
            lab,
            config.users,
            &auction,
            Behaviour::hostile(),
            seed,
            |i| i % 2 == 1,
        )?;
        tokio::time::sleep(scale.lab(AwsDuration::from_secs(30))).await;
        // The impostor, once users have bids to steal: user 0 is the victim.
        attacks.extend(
            crate::sim::attackers::impostor(
                lab,
                users.spec(0).sub(),
                &auction,
                attack_wait(scale, config.clock),
            )
            .await,
        );
        Ok(Self {
            auction,
            users,
            attacks,
        })
    }

    fn all_connected(&self) -> bool {
        self.users.all_connected()
    }

    async fn judge(self, lab: &World, drain: Duration) -> anyhow::Result<Self::Judged> {
        // Outstanding answers, replication drained, final views, the checker.
        let Judgement {
            trace,
            kit,
            mut violations,
            mut excused,
        } = judge(lab, &self.users, &self.auction, drain).await?;
        violations.extend(self.attacks);
        violations.extend(self.users.retryable_rejections());
        violations.extend(strong_mode_violations(
            lab,
            &trace,
            &kit,
            &self.auction,
            &mut excused,
        ));
        Ok((trace, violations, excused))
    }

    fn report(
        (trace, mut violations, excused): Self::Judged,
        failover: Vec<Violation>,
        run: RunContext<'_>,
    ) -> RunReport {
        violations.extend(failover);
        run_report(
            run.run,
            run.seed,
            run.config,
            run.schedule,
            run.plan,
            run.lab,
            trace,
            violations,
            &excused,
        )
    }
}

/// The chat room's run: eight members post in `chat:lobby` through the front door.
pub(crate) struct ChatRun {
    members: Arc<Members>,
}

#[async_trait::async_trait]
impl CampaignApp for ChatRun {
    type Judged = (ChatTrace, Vec<Violation>, Excused);

    async fn start(lab: &Arc<World>, config: &ChaosConfig, seed: u64) -> anyhow::Result<Self> {
        let members =
            Members::through_front_door(lab, config.users, ChatBehaviour::hostile(), seed, |i| {
                i % 2 == 1
            })?;
        tokio::time::sleep(lab.config().scale.lab(AwsDuration::from_secs(30))).await;
        Ok(Self { members })
    }

    fn all_connected(&self) -> bool {
        self.members.all_connected()
    }

    async fn judge(self, lab: &World, drain: Duration) -> anyhow::Result<Self::Judged> {
        let ChatJudgement {
            trace,
            violations,
            excused,
        } = crate::sim::chat::judge(lab, &self.members, drain).await?;
        Ok((trace, violations, excused))
    }

    fn report(
        (trace, mut violations, excused): Self::Judged,
        failover: Vec<Violation>,
        run: RunContext<'_>,
    ) -> RunReport {
        violations.extend(failover);
        let RunContext {
            run,
            seed,
            config,
            schedule,
            plan,
            lab,
        } = run;
        let writes = &trace.topic.writes;
        let rpo_lost_acknowledged = trace.lost_acknowledged();
        let mut history = vec![format!(
            "schedule {}",
            serde_json::to_string(&schedule).unwrap_or_default()
        )];
        history.extend(trace.history(&lab.timeline().entries(), &violations));
        let digest = digest_of(&history);
        RunReport {
            run,
            seed,
            consistency: config.consistency.to_string(),
            timers: config.timers.name().to_owned(),
            app: App::Chat.name().to_owned(),
            users: config.users,
            clock: config.clock,
            digest: digest.hex(),
            history: if config.keep_history {
                history
            } else {
                Vec::new()
            },
            faults: plan.fault_names().count(),
            schedule,
            bids_invoked: 0,
            bids_acknowledged: 0,
            bids_unknown: 0,
            ops_invoked: writes.len(),
            ops_acknowledged: writes.iter().filter(|w| w.acknowledged()).count(),
            ops_unknown: writes.iter().filter(|w| w.unknown()).count(),
            discontinuities: trace.discontinuities,
            violations,
            evidence: Vec::new(),
            holdings_after: Holdings::default(),
            faults_by_kind: faults_by_kind(plan),
            rpo_lost_acknowledged,
            lost_copies: trace.topic.lost.len(),
            closed_mid_bid: trace.closed_mid_write,
            excused: excused
                .iter()
                .map(|(e, n)| (e.name().to_owned(), *n))
                .collect(),
            struck_summary_ahead: struck_summary_ahead(lab),
        }
    }
}
