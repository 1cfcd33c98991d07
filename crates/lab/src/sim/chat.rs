//! The chat room in the lab's campaigns (`wsdr chaos --app chat`): simulated members, each a
//! person with an app (a [`wsdr_client::Client`] joined to `chat:lobby` through the front
//! door), who post on a timer, now and then reuse one of their own op ids for another text,
//! post under an op id they saw from someone else, or close the app with a post unanswered;
//! the end of a run (replication drained, every member's final read) and the chat room's own
//! rules over what the members show. The kit's rules over the ops themselves are
//! [`crate::sim::topic_rules`]'s.

use crate::sim::history::{excuse, Answer, Excuse, Excused, Violation};
use crate::sim::judge::{lost_copies, region_copies, settle};
use crate::sim::topic_rules::{self, op_key, OpKey, RegionCopies, TopicTrace, Write, WriteReply};
use crate::sim::trace::Restore;
use crate::sim::users::app_client;
use crate::world::clock::wait_for;
use crate::world::owner::Owner;
use crate::world::region_id::RegionId;
use crate::world::scale::{AwsDuration, AwsInstant};
use crate::world::World;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use wsdr_client::{Client, Event};
use wsdr_core::UserId;
use wsdr_protocol::{BidStatus, Digest, OpId, OpView, Topic};

/// The room every campaign's members talk in (seeded in both Regions).
pub fn lobby() -> Topic {
    // A constant that parses: `chat` and `lobby` are valid names.
    Topic::parse("chat:lobby").unwrap_or_else(|_| unreachable!("chat:lobby is a valid topic"))
}

/// How a simulated member behaves. Durations are AWS seconds.
#[derive(Debug, Clone)]
pub struct ChatBehaviour {
    /// The first post comes uniformly within this many seconds of posting starting.
    pub first_within: f64,
    /// Seconds between posts: uniform in `[every.0, every.1)`.
    pub every: (f64, f64),
    /// The chance a post reuses one of the member's own op ids with another text.
    pub reuses_own: f64,
    /// The chance a post is sent under an op id another member's copy carried.
    pub steals: f64,
    /// The chance the member closes the app right after posting, before its answer, and
    /// opens it again `reopen_after` seconds later as a new app that holds nothing.
    pub closes_mid_write: f64,
    pub reopen_after: (f64, f64),
}

impl ChatBehaviour {
    /// The campaign's mix.
    pub fn hostile() -> Self {
        Self {
            first_within: 10.0,
            every: (3.0, 15.0),
            reuses_own: 0.05,
            steals: 0.05,
            closes_mid_write: 0.03,
            reopen_after: (2.0, 20.0),
        }
    }

    /// A drill's members: a post about every `every` seconds (uniform in half to one and a
    /// half times it), each under a new op id, never closing the app mid-post.
    pub fn honest(every: f64) -> Self {
        Self {
            first_within: every,
            every: (every * 0.5, every * 1.5),
            reuses_own: 0.0,
            steals: 0.0,
            closes_mid_write: 0.0,
            reopen_after: (2.0, 20.0),
        }
    }
}

/// What one member's app holds and has lived so far.
#[derive(Debug, Clone, Default)]
struct MemberRecord {
    /// Connected, with an answer to its read since.
    connected: bool,
    /// An answer to a read arrived since the last forced resync or disconnect.
    resynced: bool,
    reconnects: u64,
    /// Every copy this app got, by log and position (a new app starts empty).
    held: BTreeMap<(String, u64), OpView>,
    /// The Region that answered its last read.
    served_by: Option<RegionId>,
    /// Holes reported to the app (`Event::Discontinuity`).
    discontinuities: usize,
    /// Its own op ids finally answered so far (the ones it may reuse), and one another
    /// member's copy carried.
    own: Vec<OpId>,
    others: Option<OpId>,
    /// The payload of its latest write under each op id: the one an answer is about (an op
    /// id is reused only once answered, so two of its writes never wait at once).
    latest: BTreeMap<OpId, Digest>,
    /// op id -> `reconnects` at its invoke.
    invoked_at: BTreeMap<OpId, u64>,
    closed_mid_write: usize,
    restores: Vec<Restore>,
    disconnects: Vec<AwsInstant>,
}

impl MemberRecord {
    fn session_lost(&mut self, at: AwsInstant) {
        if self.connected {
            self.disconnects.push(at);
        }
        self.connected = false;
        self.resynced = false;
        self.reconnects += 1;
    }
}

struct Member {
    user: UserId,
    record: Mutex<MemberRecord>,
    client: Mutex<Option<Client>>,
}

/// Every member of a run, and the writes they made.
pub struct Members {
    lab: Arc<World>,
    members: Vec<Member>,
    /// By (author, op id, payload digest): a reused op id is another write.
    writes: Mutex<BTreeMap<(UserId, OpId, Digest), Write>>,
    posting: watch::Sender<bool>,
    owner: Owner,
    online: AtomicUsize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Members {
    /// `n` members (`member-0`..) in the lobby through the front door, posting at once;
    /// `fallback(i)`: member `i`'s client also knows the Regions' own endpoints.
    pub fn through_front_door(
        lab: &Arc<World>,
        n: usize,
        behaviour: ChatBehaviour,
        seed: u64,
        fallback: impl Fn(usize) -> bool + Send + Sync + 'static,
    ) -> anyhow::Result<Arc<Self>> {
        let members = (0..n)
            .map(|i| {
                Ok(Member {
                    user: UserId::new(format!("member-{i}"))
                        .map_err(|e| anyhow::anyhow!("a simulated member: {e}"))?,
                    record: Mutex::default(),
                    client: Mutex::new(None),
                })
            })
            .collect::<anyhow::Result<_>>()?;
        let (posting, _) = watch::channel(true);
        let room = Arc::new(Self {
            lab: lab.clone(),
            members,
            writes: Mutex::default(),
            posting,
            owner: Owner::new(),
            online: AtomicUsize::new(0),
        });
        let fallback = Arc::new(fallback);
        for index in 0..room.members.len() {
            let task = run_member(
                room.clone(),
                index,
                behaviour.clone(),
                seed,
                fallback(index),
            );
            room.owner.spawn(task);
        }
        let view: Arc<dyn crate::world::UsersView> = room.clone();
        lab.attach_users(&view);
        Ok(room)
    }

    pub fn set_posting(&self, on: bool) {
        self.posting.send_replace(on);
    }

    pub fn all_connected(&self) -> bool {
        self.members.iter().all(|m| lock(&m.record).connected)
    }

    /// Every write so far, with its answers.
    pub fn writes(&self) -> Vec<Write> {
        lock(&self.writes).values().cloned().collect()
    }

    /// Apps closed with a post unanswered.
    pub fn closed_mid_write(&self) -> usize {
        self.members
            .iter()
            .map(|m| lock(&m.record).closed_mid_write)
            .sum()
    }

    /// Holes reported to the members' apps.
    pub fn discontinuities(&self) -> usize {
        self.members
            .iter()
            .map(|m| lock(&m.record).discontinuities)
            .sum()
    }

    pub async fn close(&self) {
        self.owner.cancel();
        for member in &self.members {
            if let Some(client) = lock(&member.client).take() {
                client.close();
            }
        }
        self.owner.wait().await;
    }
}

impl std::fmt::Debug for Members {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Members")
            .field("members", &self.members.len())
            .finish_non_exhaustive()
    }
}

impl Drop for Members {
    fn drop(&mut self) {
        self.owner.cancel();
    }
}

impl crate::world::UsersView for Members {
    fn total(&self) -> usize {
        self.members.len()
    }

    fn online(&self) -> usize {
        self.online.load(Ordering::Relaxed)
    }

    fn restored_since(&self, since: AwsInstant, region: RegionId) -> Vec<f64> {
        self.members
            .iter()
            .filter_map(|m| {
                lock(&m.record)
                    .restores
                    .iter()
                    .find(|r| r.region == region && r.at.secs_since(since) >= 0.0)
                    .map(|r| r.at.secs_since(since))
            })
            .collect()
    }
}

/// One member's life: open the app, post while posting is on, follow what it reports; now
/// and then close it mid-post and reopen it later.
async fn run_member(
    room: Arc<Members>,
    index: usize,
    behaviour: ChatBehaviour,
    seed: u64,
    fallback: bool,
) {
    let member = &room.members[index];
    let lab = room.lab.clone();
    let aws = |secs: f64| lab.lab_time(AwsDuration::from_secs_f64(secs));
    let mut rng = SmallRng::seed_from_u64(seed ^ 0xc4a7 ^ ((index as u64) << 32));
    let mut posting = room.posting.subscribe();
    let mut session: u64 = 0;
    let mut said: u64 = 0;
    loop {
        let session_seed = seed
            .wrapping_mul(1_000_033)
            .wrapping_add(index as u64)
            .wrapping_add(session << 48);
        session += 1;
        let (client, mut events) = app_client(&lab, member.user.as_str(), session_seed, fallback)
            .join(lobby())
            .start();
        // A reopened app is a new client: it holds nothing of the room yet.
        lock(&member.record).held.clear();
        *lock(&member.client) = Some(client.clone());
        let mut next = Instant::now() + aws(rng.random_range(0.0..behaviour.first_within));
        loop {
            let on = *posting.borrow();
            tokio::select! {
                biased;
                changed = posting.changed() => {
                    if changed.is_err() { return; }
                    if *posting.borrow() {
                        next = Instant::now() + aws(rng.random_range(0.0..behaviour.first_within));
                    }
                }
                _ = tokio::time::sleep_until(next), if on => {
                    next = Instant::now() + aws(rng.random_range(behaviour.every.0..behaviour.every.1));
                    said += 1;
                    let text = format!("{} #{said}", member.user.as_str());
                    let op = serde_json::json!({ "text": text });
                    let Ok(digest) = Digest::of(&op) else { continue };
                    let chosen = {
                        let record = lock(&member.record);
                        if rng.random_bool(behaviour.reuses_own) && !record.own.is_empty() {
                            Some(record.own[rng.random_range(0..record.own.len())].clone())
                        } else if rng.random_bool(behaviour.steals) {
                            // Another member's op id this member never wrote under (its own
                            // use of an op id is a reuse, above, once answered).
                            record.others.clone().filter(|id| !record.latest.contains_key(id))
                        } else {
                            None
                        }
                    };
                    let sent = match chosen {
                        Some(op_id) => client.write_with_id(lobby(), op, op_id).await,
                        None => client.write(lobby(), op).await,
                    };
                    let Ok(op_id) = sent else { continue };
                    lock(&room.writes).insert(
                        (member.user.clone(), op_id.clone(), digest),
                        Write {
                            author: member.user.clone(),
                            op_id: op_id.clone(),
                            digest,
                            invoked: room.lab.now(),
                            answers: Vec::new(),
                        },
                    );
                    let mut record = lock(&member.record);
                    let reconnects = record.reconnects;
                    record.invoked_at.insert(op_id.clone(), reconnects);
                    record.own.retain(|id| *id != op_id);
                    record.latest.insert(op_id, digest);
                    if rng.random_bool(behaviour.closes_mid_write) {
                        record.closed_mid_write += 1;
                        if record.connected {
                            room.online.fetch_sub(1, Ordering::Relaxed);
                        }
                        record.session_lost(room.lab.now());
                        break;
                    }
                }
                event = events.recv() => {
                    let Some(event) = event else { break };
                    on_event(&room, index, event);
                }
            }
        }
        client.close();
        lock(&member.client).take();
        let reopen = rng.random_range(behaviour.reopen_after.0..behaviour.reopen_after.1);
        tokio::time::sleep(aws(reopen)).await;
    }
}

fn on_event(room: &Members, index: usize, event: Event) {
    let member = &room.members[index];
    let at = room.lab.now();
    let mut record = lock(&member.record);
    let hold = |record: &mut MemberRecord, added: Vec<OpView>| {
        for copy in added {
            if copy.author != member.user.as_str() {
                record.others = Some(copy.op_id.clone());
            }
            record.held.insert((copy.log.clone(), copy.position), copy);
        }
    };
    match event {
        Event::TopicRestored { region, added, .. } => {
            if !record.connected {
                room.online.fetch_add(1, Ordering::Relaxed);
            }
            record.connected = true;
            record.resynced = true;
            let served_by = room.lab.region_named(&region);
            if let Some(region) = served_by {
                record.restores.push(Restore { at, region });
            }
            record.served_by = served_by;
            hold(&mut record, added);
        }
        Event::TopicUpdated { added, .. } => hold(&mut record, added),
        Event::Discontinuity { .. } => record.discontinuities += 1,
        Event::Disconnected { .. } => {
            if record.connected {
                room.online.fetch_sub(1, Ordering::Relaxed);
            }
            record.session_lost(at);
        }
        Event::WriteResult {
            op_id,
            status,
            reason,
            region,
        } => {
            let replayed = record
                .invoked_at
                .get(&op_id)
                .is_none_or(|at| *at != record.reconnects);
            // Final answers only: an `unknown` or `redirect` write stays in the client's book
            // (resent, or settled by a read), so its op id is not reused yet.
            let final_answer = matches!(
                status,
                BidStatus::Accepted | BidStatus::Duplicate | BidStatus::Rejected
            );
            if final_answer && !record.own.contains(&op_id) {
                record.own.push(op_id.clone());
            }
            let Some(digest) = record.latest.get(&op_id).copied() else {
                return;
            };
            drop(record);
            let region = room.lab.region_named(&region);
            if let Some(write) = lock(&room.writes).get_mut(&(member.user.clone(), op_id, digest)) {
                write.answers.push(WriteReply {
                    at,
                    answer: answer_of(status),
                    reason,
                    region,
                    reconnected: replayed,
                });
            }
        }
        Event::WriteExpired { op_id } => {
            let Some(digest) = record.latest.get(&op_id).copied() else {
                return;
            };
            drop(record);
            if let Some(write) = lock(&room.writes).get_mut(&(member.user.clone(), op_id, digest)) {
                write.answers.push(WriteReply {
                    at,
                    answer: Answer::Expired,
                    reason: None,
                    region: None,
                    reconnected: true,
                });
            }
        }
        _ => {}
    }
}

fn answer_of(status: BidStatus) -> Answer {
    match status {
        BidStatus::Accepted => Answer::Accepted,
        BidStatus::Duplicate => Answer::Duplicate,
        BidStatus::Rejected => Answer::Rejected,
        BidStatus::Unknown => Answer::Unknown,
        BidStatus::Redirect => Answer::Redirected,
    }
}

/// What a member showed at the end: the copies its app held, from which Region.
#[derive(Debug, Clone, Serialize)]
pub struct MemberEnd {
    pub user: UserId,
    pub connected: bool,
    pub region: Option<RegionId>,
    pub held: Vec<OpView>,
}

/// A chat run's end: the kit's trace and the members' final views.
#[derive(Debug, Clone, Serialize)]
pub struct ChatTrace {
    pub topic: TopicTrace,
    pub members: Vec<MemberEnd>,
    pub converged: bool,
    pub discontinuities: usize,
    pub closed_mid_write: usize,
}

impl ChatTrace {
    /// Acknowledged messages lost with Regions that never came back (the measured RPO): a
    /// copy lost with one, and none held by a surviving Region.
    pub fn lost_acknowledged(&self) -> usize {
        let lost: BTreeSet<_> = self.topic.lost.iter().map(topic_rules::op_key).collect();
        let survivors: BTreeSet<_> = self
            .topic
            .regions
            .iter()
            .flat_map(|r| r.copies.iter().map(topic_rules::op_key))
            .collect();
        self.topic
            .writes
            .iter()
            .filter(|w| w.acknowledged())
            .map(topic_rules::Write::key)
            .filter(|key| lost.contains(key) && !survivors.contains(key))
            .count()
    }

    /// The run's history as JSON lines, in a fixed order (every write, the lab's timeline,
    /// the Regions' final copies, the members' ends, the violations): what a run's digest is
    /// taken over, chaos run and drill alike.
    pub fn history(
        &self,
        timeline: &[crate::world::timeline::Entry],
        violations: &[Violation],
    ) -> Vec<String> {
        use crate::runs::chaos::history_line as line;
        let mut lines: Vec<String> = self.topic.writes.iter().map(|w| line("write", w)).collect();
        lines.extend(timeline.iter().map(|e| line("timeline", e)));
        lines.extend(self.topic.regions.iter().map(|r| line("final", r)));
        lines.extend(self.members.iter().map(|m| line("member", m)));
        lines.extend(violations.iter().map(|v| line("violation", v)));
        lines
    }
}

/// What a chat run ended with, and what the kit's and the room's rules made of it.
#[derive(Debug)]
pub struct ChatJudgement {
    pub trace: ChatTrace,
    pub violations: Vec<Violation>,
    pub excused: Excused,
}

/// End the run and judge it: stop posting, let answers arrive (`drain`, lab time) and
/// replication drain, read the Regions until they hold still, force a read on every member
/// and wait (five AWS minutes at most) until each holds its Region's copies from the first
/// it holds to the newest, read again (and again, while a late write moved them), and check.
pub async fn judge(lab: &World, room: &Members, drain: Duration) -> anyhow::Result<ChatJudgement> {
    let topic = lobby();
    room.set_posting(false);
    tokio::time::sleep(drain).await;
    let converged = settle(lab).await;
    // A write still in flight when posting stopped can commit after any read: a client
    // resends an `unknown` write until it settles, and after a strong-mode Region regains its
    // quorum a backlog of such writes commits one by one, seconds apart. The members' final
    // views are judged against a state that held still through them: each round reads the
    // Regions until they hold still for five AWS seconds (at most five minutes), makes every
    // member read, waits for them to hold it, and reads again (bounded: twenty rounds).
    let mut regions = Vec::new();
    for _ in 0..20 {
        regions = region_copies(lab, &topic).await?;
        for _ in 0..60 {
            tokio::time::sleep(lab.lab_time(AwsDuration::from_secs(5))).await;
            let again = region_copies(lab, &topic).await?;
            if again == regions {
                break;
            }
            regions = again;
        }
        for member in &room.members {
            lock(&member.record).resynced = false;
            if let Some(client) = lock(&member.client).as_ref() {
                let _ = client.resync();
            }
        }
        let held = &regions;
        wait_for(lab.lab_time(AwsDuration::from_secs(300)), || {
            room.members.iter().all(|m| {
                let r = lock(&m.record);
                r.connected
                    && r.resynced
                    && held
                        .iter()
                        .find(|region| Some(region.region) == r.served_by)
                        .is_some_and(|region| missing_by_log(&r.held, &region.copies).is_empty())
            })
        })
        .await;
        let after = region_copies(lab, &topic).await?;
        if after == regions {
            break;
        }
        regions = after;
    }
    let members: Vec<MemberEnd> = room
        .members
        .iter()
        .map(|m| {
            let r = lock(&m.record);
            MemberEnd {
                user: m.user.clone(),
                connected: r.connected && r.resynced,
                region: r.served_by,
                held: r.held.values().cloned().collect(),
            }
        })
        .collect();
    let strong = lab.cluster().is_some();
    let lost = lost_copies(lab, &topic);
    let trace = ChatTrace {
        topic: TopicTrace {
            writes: room.writes(),
            regions,
            lost,
            strong,
        },
        members,
        converged,
        discontinuities: room.discontinuities(),
        closed_mid_write: room.closed_mid_write(),
    };
    room.close().await;
    let (mut violations, mut excused) = topic_rules::check(&trace.topic);
    if !converged {
        violations.push(Violation::NotConverged);
    }
    if strong {
        let served: Vec<RegionCopies> = trace
            .members
            .iter()
            .filter_map(|m| {
                Some(RegionCopies {
                    region: m.region?,
                    copies: m.held.clone(),
                })
            })
            .collect();
        violations.extend(topic_rules::one_global_log(&served));
    }
    let (app, app_excused) = check_members(&trace);
    violations.extend(app);
    for (name, n) in app_excused {
        excuse(&mut excused, name, n);
    }
    if strong {
        violations.extend(topic_rules::acknowledged_without_quorum(
            &trace.topic.writes,
            |region, from, to| lab.lacked_quorum_throughout(region, from, to),
        ));
    }
    Ok(ChatJudgement {
        trace,
        violations,
        excused,
    })
}

/// Per log of `region`: how many of its copies a member holding `held` lacks, at or past the
/// first position it holds there (all of them when it holds none), and its newest.
fn missing_by_log(
    held: &BTreeMap<(String, u64), OpView>,
    region: &[OpView],
) -> BTreeMap<String, usize> {
    let mut lowest: BTreeMap<&str, u64> = BTreeMap::new();
    for (log, position) in held.keys() {
        let low = lowest.entry(log.as_str()).or_insert(*position);
        *low = (*low).min(*position);
    }
    let mut missing: BTreeMap<String, usize> = BTreeMap::new();
    for copy in region {
        let from = lowest.get(copy.log.as_str()).copied().unwrap_or(0);
        let has = held
            .get(&(copy.log.clone(), copy.position))
            .is_some_and(|h| op_key(h) == op_key(copy));
        if copy.position >= from && !has {
            *missing.entry(copy.log.clone()).or_default() += 1;
        }
    }
    missing
}

/// The chat room's own rules over its members' final views (docs/RELIABILITY.md, "Chat
/// rules"): each member connected; holding its Region's copies from the first it holds to
/// the newest; showing nothing no Region holds (a copy lost with a Region that never came
/// back after the member got it excused); each message once; and the messages it holds
/// whole in its Region's order.
pub fn check_members(trace: &ChatTrace) -> (Vec<Violation>, Excused) {
    let mut violations = Vec::new();
    let mut excused = Excused::new();
    let lost: BTreeSet<OpKey> = trace.topic.lost.iter().map(op_key).collect();
    for member in &trace.members {
        let Some(region) = trace
            .topic
            .regions
            .iter()
            .find(|r| member.connected && Some(r.region) == member.region)
        else {
            violations.push(Violation::UserNotConnected {
                user: member.user.clone(),
            });
            continue;
        };
        let held: BTreeMap<(String, u64), OpView> = member
            .held
            .iter()
            .map(|c| ((c.log.clone(), c.position), c.clone()))
            .collect();
        for (log, missing) in missing_by_log(&held, &region.copies) {
            violations.push(Violation::MemberLogIncomplete {
                user: member.user.clone(),
                region: region.region,
                log,
                missing,
            });
        }
        let in_region: BTreeSet<(OpKey, &str, u64)> = region
            .copies
            .iter()
            .map(|c| (op_key(c), c.log.as_str(), c.position))
            .collect();
        for copy in &member.held {
            if in_region.contains(&(op_key(copy), copy.log.as_str(), copy.position)) {
                continue;
            }
            if lost.contains(&op_key(copy)) {
                excuse(&mut excused, Excuse::ShownCopyLostWithRegion, 1);
            } else {
                violations.push(Violation::MemberShowsUnheldCopy {
                    user: member.user.clone(),
                    author: copy.author.clone(),
                    op_id: copy.op_id.clone(),
                });
            }
        }
        let shown = wsdr_chat::conversation(&member.held);
        let mut once = BTreeSet::new();
        for message in &shown {
            if !once.insert((
                message.author.clone(),
                message.op_id.clone(),
                message.digest,
            )) {
                violations.push(Violation::MemberShowsTwice {
                    user: member.user.clone(),
                    author: message.author.clone(),
                    op_id: message.op_id.clone(),
                });
            }
        }
        // Order: among the messages whose every copy in the Region the member holds, the
        // member's order is the Region's (a message missing a copy may sit elsewhere until
        // its earliest copy arrives: the order is a function of the copies held).
        let mut copies_of: BTreeMap<OpKey, (usize, usize)> = BTreeMap::new();
        for copy in &region.copies {
            copies_of.entry(op_key(copy)).or_default().0 += 1;
        }
        for copy in &member.held {
            if let Some(counts) = copies_of.get_mut(&op_key(copy)) {
                counts.1 += 1;
            }
        }
        let whole = |key: &OpKey| copies_of.get(key).is_some_and(|(all, held)| all == held);
        let key_of = |m: &wsdr_chat::Message| (m.author.clone(), m.op_id.clone(), m.digest);
        let theirs: Vec<OpKey> = wsdr_chat::conversation(&region.copies)
            .iter()
            .map(key_of)
            .filter(|k| whole(k))
            .collect();
        let ours: Vec<OpKey> = shown.iter().map(key_of).filter(|k| whole(k)).collect();
        if theirs != ours {
            violations.push(Violation::MemberOrderDiffers {
                user: member.user.clone(),
                region: region.region,
            });
        }
    }
    (violations, excused)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn copy(author: &str, id: &str, log: &str, position: u64, at: u64) -> OpView {
        let op = serde_json::json!({ "text": format!("{author} {id}") });
        OpView {
            author: author.into(),
            op_id: OpId::new(format!("op-id-{id}")).unwrap(),
            region: log.into(),
            position,
            log: log.into(),
            at,
            digest: Digest::of(&op).unwrap(),
            op,
        }
    }

    fn trace(region: Vec<OpView>, held: Vec<OpView>) -> ChatTrace {
        ChatTrace {
            topic: TopicTrace {
                regions: vec![RegionCopies {
                    region: RegionId::Primary,
                    copies: region,
                }],
                ..TopicTrace::default()
            },
            members: vec![MemberEnd {
                user: UserId::new("ann").unwrap(),
                connected: true,
                region: Some(RegionId::Primary),
                held,
            }],
            converged: true,
            discontinuities: 0,
            closed_mid_write: 0,
        }
    }

    #[test]
    fn a_member_holds_every_copy_from_its_first_to_the_newest() {
        let region = vec![
            copy("a", "m1", "e", 1, 10),
            copy("a", "m2", "e", 2, 20),
            copy("b", "n1", "w", 1, 15),
            copy("a", "m3", "e", 3, 30),
        ];
        // From position 2 on, with every log: complete (a window, not the whole history).
        let whole = vec![region[1].clone(), region[2].clone(), region[3].clone()];
        assert_eq!(check_members(&trace(region.clone(), whole)).0, vec![]);
        // A hole at 2, and the other log never read.
        let holed = vec![region[0].clone(), region[3].clone()];
        let violations = check_members(&trace(region.clone(), holed)).0;
        assert_eq!(
            violations
                .iter()
                .filter_map(|v| match v {
                    Violation::MemberLogIncomplete { log, missing, .. } =>
                        Some((log.as_str(), *missing)),
                    _ => None,
                })
                .collect::<Vec<_>>(),
            [("e", 1), ("w", 1)]
        );
        // Not at the newest.
        let behind = vec![region[0].clone(), region[1].clone(), region[2].clone()];
        assert_eq!(check_members(&trace(region, behind)).0.len(), 1);
    }

    #[test]
    fn a_member_shows_nothing_its_region_lacks_unless_it_was_lost_with_a_region() {
        let region = vec![copy("a", "m1", "e", 1, 10)];
        let invented = vec![region[0].clone(), copy("b", "n1", "w", 1, 5)];
        let mut t = trace(region.clone(), invented.clone());
        let (violations, _) = check_members(&t);
        assert!(violations
            .iter()
            .any(|v| matches!(v, Violation::MemberShowsUnheldCopy { .. })));
        t.topic.lost = vec![invented[1].clone()];
        let (violations, excused) = check_members(&t);
        assert!(!violations
            .iter()
            .any(|v| matches!(v, Violation::MemberShowsUnheldCopy { .. })));
        assert_eq!(excused.get(&Excuse::ShownCopyLostWithRegion), Some(&1));
    }

    #[test]
    fn a_member_missing_a_messages_earlier_copy_is_not_held_to_its_place_but_a_whole_one_is() {
        // m1 was replayed across a failover: copies in both logs; its earliest is w's.
        let region = vec![
            copy("a", "m1", "e", 1, 50),
            copy("b", "n1", "e", 2, 40),
            copy("a", "m1", "w", 1, 5),
        ];
        // The member got e's log only: m1 shows after n1 by its late copy. Not whole: fine.
        let partial = vec![region[0].clone(), region[1].clone()];
        let (violations, _) = check_members(&trace(region.clone(), partial));
        assert!(!violations
            .iter()
            .any(|v| matches!(v, Violation::MemberOrderDiffers { .. })));
        // Whole, and in the one order: fine; the same copies, so the same order by design.
        assert_eq!(
            check_members(&trace(region.clone(), region.clone())).0,
            vec![]
        );
        // A member whose client has not started: not connected.
        let mut absent = trace(region.clone(), region);
        absent.members[0].connected = false;
        assert!(matches!(
            check_members(&absent).0[..],
            [Violation::UserNotConnected { .. }]
        ));
    }
}
