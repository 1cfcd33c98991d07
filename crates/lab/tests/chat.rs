#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! The chat room through the lab: real clients (`wsdr_client`, joined to `chat:lobby`) on the
//! two Regions' handlers, tables, replication and push paths. A message reaches the other
//! Region's watchers; during a split each Region takes its own users' messages, and once it
//! heals every client shows the same room in the same order.

use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;
use wsdr_chat::conversation;
use wsdr_client::{ClientBuilder, Event, StaticToken};
use wsdr_lab::RegionId;
use wsdr_lab::{Fault, LabConfig, TimeScale, World};
use wsdr_protocol::{BidStatus, OpView, Topic};

fn lobby() -> Topic {
    Topic::parse("chat:lobby").unwrap()
}

/// A user on one Region's own URL, in the lobby, with a one-second heartbeat.
fn member(lab: &World, region: RegionId, sub: &str) -> (wsdr_client::Client, Member) {
    let (client, events) = ClientBuilder::new(lab.region(region).url())
        .token_provider(Arc::new(StaticToken(lab.user_token(sub).unwrap())))
        .join(lobby())
        .heartbeat(Duration::from_secs(1), Duration::from_secs(3))
        .seed(7)
        .start();
    (
        client,
        Member {
            events,
            held: Vec::new(),
        },
    )
}

/// What a client shows: every copy its events brought.
struct Member {
    events: UnboundedReceiver<Event>,
    held: Vec<OpView>,
}

impl Member {
    fn texts(&self) -> Vec<String> {
        conversation(&self.held)
            .into_iter()
            .map(|m| m.text)
            .collect()
    }

    /// Read events until `done` holds for what the client shows, or `within` passes.
    async fn until(&mut self, within: Duration, done: impl Fn(&[String]) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if done(&self.texts()) {
                return true;
            }
            let Ok(Some(event)) = tokio::time::timeout_at(deadline, self.events.recv()).await
            else {
                return false;
            };
            match event {
                Event::TopicRestored { added, .. } | Event::TopicUpdated { added, .. } => {
                    self.held.extend(added);
                }
                _ => {}
            }
        }
    }

    /// The final word on the write in flight: its answer, or, when that is `unknown` (a busy
    /// machine's timeout: the client settles it and sends it again), its settlement.
    async fn answer(&mut self) -> BidStatus {
        loop {
            match tokio::time::timeout(Duration::from_secs(20), self.events.recv()).await {
                Ok(Some(Event::WriteResult {
                    status: BidStatus::Unknown,
                    ..
                })) => continue,
                Ok(Some(Event::WriteResult { status, .. })) => return status,
                Ok(Some(Event::WriteSettled { stands: true, .. })) => return BidStatus::Accepted,
                Ok(Some(
                    Event::TopicRestored { added, .. } | Event::TopicUpdated { added, .. },
                )) => {
                    self.held.extend(added);
                }
                Ok(Some(_)) => continue,
                other => panic!("no answer: {other:?}"),
            }
        }
    }
}

async fn say(client: &wsdr_client::Client, member: &mut Member, text: &str) {
    client
        .write(lobby(), serde_json::json!({ "text": text }))
        .await
        .unwrap();
    let status = member.answer().await;
    assert!(
        matches!(status, BidStatus::Accepted | BidStatus::Duplicate),
        "{text}: {status:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_room_converges_across_regions_and_a_split_in_one_order() {
    let lab = World::builder()
        .config(LabConfig {
            scale: TimeScale::new(60.0),
            ..LabConfig::default()
        })
        .start()
        .await
        .unwrap();
    let within = Duration::from_secs(10);
    let (ann, mut ann_sees) = member(&lab, RegionId::Primary, "ann");
    let (bo, mut bo_sees) = member(&lab, RegionId::Secondary, "bo");
    say(&ann, &mut ann_sees, "hello from the primary").await;
    assert!(
        bo_sees
            .until(within, |t| t == ["hello from the primary"])
            .await,
        "replicated and pushed in the other Region: {:?}",
        bo_sees.texts()
    );
    // A split: each Region takes its own user's message.
    lab.inject(Fault::Partition);
    say(&ann, &mut ann_sees, "ann during the split").await;
    say(&bo, &mut bo_sees, "bo during the split").await;
    assert!(ann_sees.until(within, |t| t.len() == 2).await);
    assert!(bo_sees.until(within, |t| t.len() == 2).await);
    assert_ne!(
        ann_sees.texts(),
        bo_sees.texts(),
        "each sees only its Region's"
    );
    // Healed: the late copies insert at their place, the same order everywhere.
    lab.inject(Fault::Heal);
    assert!(
        ann_sees.until(within, |t| t.len() == 3).await,
        "{:?}",
        ann_sees.texts()
    );
    assert!(
        bo_sees.until(within, |t| t.len() == 3).await,
        "{:?}",
        bo_sees.texts()
    );
    assert_eq!(ann_sees.texts(), bo_sees.texts());
    assert_eq!(conversation(&ann_sees.held), conversation(&bo_sees.held));
    ann.close();
    bo.close();
}

/// Strong mode (an MRSC table): every message is one write of the room's head, so both
/// Regions' users write one log (`global`), in one order, whichever Region took each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_strong_mode_both_regions_write_one_log() {
    let lab = World::builder()
        .config(LabConfig {
            scale: TimeScale::new(60.0),
            consistency: wsdr_core::Consistency::Strong,
            ..LabConfig::default()
        })
        .start()
        .await
        .unwrap();
    let within = Duration::from_secs(10);
    let (ann, mut ann_sees) = member(&lab, RegionId::Primary, "ann");
    let (bo, mut bo_sees) = member(&lab, RegionId::Secondary, "bo");
    for round in 0..3 {
        say(&ann, &mut ann_sees, &format!("ann {round}")).await;
        say(&bo, &mut bo_sees, &format!("bo {round}")).await;
    }
    assert!(
        ann_sees.until(within, |t| t.len() == 6).await,
        "{:?}",
        ann_sees.texts()
    );
    assert!(
        bo_sees.until(within, |t| t.len() == 6).await,
        "{:?}",
        bo_sees.texts()
    );
    assert_eq!(ann_sees.texts(), bo_sees.texts());
    let mut positions: Vec<(String, u64)> = ann_sees
        .held
        .iter()
        .map(|op| (op.log.clone(), op.position))
        .collect();
    positions.sort();
    positions.dedup();
    assert_eq!(
        positions,
        (1..=6)
            .map(|p| ("global".to_owned(), p))
            .collect::<Vec<_>>(),
        "one gapless log"
    );
    ann.close();
    bo.close();
}
