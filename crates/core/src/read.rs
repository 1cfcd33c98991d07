//! The kit's read path, for any app: what a Region holds of a topic for one reader, read in
//! one round of requests. Global Tables replicates items one by one, so a summary can arrive
//! before the copy of an op it carries whole (the auction's high bid), and that copy may
//! never arrive (its Region lost for good); in strong mode the head's newest op may have no
//! copy yet. An op the summaries (or the head) carry is held all the same: the reader's own
//! ops and the ops it asks to settle read the same set the view is made from, so a Region
//! never shows an op it then says it does not hold.

use crate::items::{StoredOp, StoredSummary, TopicKey};
use crate::model::UserId;
use crate::ports::{HeadStore, OpStore};
use crate::write::{newest_per_region, App};
use std::sync::Arc;
use wsdr_protocol::OpId;

/// What a Region holds of one topic for one reader.
#[derive(Debug, Clone, PartialEq)]
pub struct Holding<S> {
    /// Every Region's newest summary this Region holds (strong mode: the head's one), with
    /// the app's part read back.
    pub summaries: Vec<(StoredSummary, S)>,
    /// Strong mode: the head's newest op (its copy may not be written yet).
    pub newest: Option<StoredOp>,
    /// The reader's own ops this Region holds: the newest copies (at most the limit asked),
    /// and every op of theirs that a summary or the head carries whole.
    pub own: Vec<StoredOp>,
    /// Each named op id with every copy of it this Region holds, carried ones included.
    pub named: Vec<(OpId, Vec<StoredOp>)>,
}

/// How a reader reads summaries: fixed when it is built, as the writer's path.
#[derive(Clone)]
enum Path {
    Regional(Arc<dyn OpStore>),
    Head(Arc<dyn HeadStore>),
}

/// The kit's read path for one app in one Region.
pub struct Reader<A> {
    app: Arc<A>,
    path: Path,
}

impl<A> Clone for Reader<A> {
    fn clone(&self) -> Self {
        Self {
            app: self.app.clone(),
            path: self.path.clone(),
        }
    }
}

impl<A> std::fmt::Debug for Reader<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("on_the_head", &matches!(self.path, Path::Head(_)))
            .finish_non_exhaustive()
    }
}

impl<A: App> Reader<A> {
    /// A reader of each Region's summaries (eventual mode).
    pub fn regional(app: Arc<A>, store: Arc<dyn OpStore>) -> Self {
        Self {
            app,
            path: Path::Regional(store),
        }
    }

    /// A reader of each topic's head (strong mode).
    pub fn on_head(app: Arc<A>, store: Arc<dyn HeadStore>) -> Self {
        Self {
            app,
            path: Path::Head(store),
        }
    }

    fn store(&self) -> &dyn OpStore {
        match &self.path {
            Path::Regional(store) => store.as_ref(),
            Path::Head(store) => store.as_ref(),
        }
    }

    /// The topic's summaries as this Region reads them (strong mode: the head's), and the
    /// head's newest op.
    pub async fn summaries(
        &self,
        topic: &TopicKey,
    ) -> crate::Result<(Vec<(StoredSummary, A::Summary)>, Option<StoredOp>)> {
        let (stored, newest) = match &self.path {
            Path::Regional(store) => (newest_per_region(&store.summaries(topic).await?), None),
            Path::Head(store) => match store.head(topic).await? {
                Some(head) => (vec![head.summary], head.last.map(|last| last.op)),
                None => (Vec::new(), None),
            },
        };
        let summaries = stored
            .into_iter()
            .map(|s| {
                let app = self.app.summary(topic, &s)?;
                Ok((s, app))
            })
            .collect::<crate::Result<Vec<_>>>()?;
        Ok((summaries, newest))
    }

    /// What this Region holds of `topic` for `reader`: the summaries, the reader's newest
    /// `own_limit` copies, and every copy of each op id in `named` (a point read each), all
    /// in one round, with the ops the summaries and the head carry added where they are the
    /// reader's.
    pub async fn hold(
        &self,
        topic: &TopicKey,
        reader: &UserId,
        named: &[OpId],
        own_limit: usize,
    ) -> crate::Result<Holding<A::Summary>> {
        let store = self.store();
        let (summaries, own, found) = tokio::join!(
            self.summaries(topic),
            store.newest_by_author(topic, reader, own_limit),
            futures::future::try_join_all(
                named.iter().map(|op_id| store.copies(topic, reader, op_id))
            ),
        );
        let (summaries, newest) = summaries?;
        let carried: Vec<StoredOp> = summaries
            .iter()
            .flat_map(|(_, app)| self.app.carried(topic, app))
            .chain(newest.clone())
            .filter(|op| op.author == *reader)
            .collect();
        let named = named
            .iter()
            .cloned()
            .zip(found?)
            .map(|(op_id, copies)| {
                let carried_here = carried.iter().filter(|op| op.op_id == op_id);
                let held = held_ops(copies, carried_here);
                (op_id, held)
            })
            .collect();
        Ok(Holding {
            own: held_ops(own?, carried.iter()),
            summaries,
            newest,
            named,
        })
    }
}

/// Copies and carried ops, one entry per (author, op id, Region) as the copies' own key: a
/// carried op is added only where its copy is not held.
pub fn held_ops<'a>(
    copies: impl IntoIterator<Item = StoredOp>,
    carried: impl IntoIterator<Item = &'a StoredOp>,
) -> Vec<StoredOp> {
    let mut held: Vec<StoredOp> = copies.into_iter().collect();
    for op in carried {
        let known = held
            .iter()
            .any(|c| c.author == op.author && c.op_id == op.op_id && c.region == op.region);
        if !known {
            held.push(op.clone());
        }
    }
    held
}

#[cfg(test)]
mod tests {
    //! The read path with an app that is not the auction: a board whose summary carries its
    //! newest post whole.
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use crate::items::{Item, StoredHead};
    use crate::memory::{ManualClock, MemoryStateStore};
    use crate::ports::{Advance, SeededEntropy, TokioPause};
    use crate::write::{Write, Writer, Written};
    use serde_json::{json, Value as Json};
    use wsdr_protocol::{Digest, Namespace, TopicName};

    struct Board;

    impl App for Board {
        type Meta = ();
        type Op = String;
        type Summary = Option<StoredOp>;
        type Reject = ();

        fn op_json(&self, text: &String) -> Json {
            json!({ "text": text })
        }
        fn summary(&self, topic: &TopicKey, s: &StoredSummary) -> crate::Result<Self::Summary> {
            let newest = &s.app["newest"];
            if newest.is_null() {
                return Ok(None);
            }
            Ok(Some(StoredOp {
                topic: topic.clone(),
                author: UserId::new(newest["author"].as_str().unwrap())?,
                op_id: OpId::new(newest["opId"].as_str().unwrap()).unwrap(),
                region: newest["region"].as_str().unwrap().to_owned(),
                at: newest["at"].as_u64().unwrap(),
                position: newest["position"].as_u64().unwrap(),
                digest: Digest::parse(newest["digest"].as_str().unwrap()).unwrap(),
                op: newest["op"].clone(),
            }))
        }
        fn summary_json(&self, newest: &Self::Summary) -> Json {
            json!({ "newest": newest.as_ref().map(|c| json!({
                "author": c.author.as_str(), "opId": c.op_id.as_str(), "region": c.region,
                "at": c.at, "position": c.position, "digest": c.digest.to_string(), "op": c.op,
            })) })
        }
        fn empty_summary(&self) -> Self::Summary {
            None
        }
        fn admit(&self, _: &(), _: u64) -> Result<(), ()> {
            Ok(())
        }
        fn decide(&self, _: &(), _: &[Self::Summary], _: &String) -> Result<(), ()> {
            Ok(())
        }
        fn carried(&self, _: &TopicKey, newest: &Self::Summary) -> Vec<StoredOp> {
            newest.iter().cloned().collect()
        }
        fn fold(
            &self,
            _: &Self::Summary,
            copy: &StoredOp,
            _: &String,
        ) -> crate::Result<Self::Summary> {
            Ok(Some(copy.clone()))
        }
    }

    fn board() -> TopicKey {
        TopicKey::new(
            Namespace::new("board").unwrap(),
            TopicName::new("b-1").unwrap(),
        )
    }

    fn store(region: &str) -> Arc<MemoryStateStore> {
        Arc::new(MemoryStateStore::new(
            region,
            Arc::new(ManualClock::new(1_000)),
        ))
    }

    async fn post(store: Arc<MemoryStateStore>, region: &str, who: &str, id: &str) {
        let writer = Writer::regional(
            Arc::new(Board),
            store,
            region,
            Arc::new(ManualClock::new(1_000)),
            Arc::new(SeededEntropy::new(1)),
            Arc::new(TokioPause),
        );
        let written = writer
            .write(&Write {
                meta: &(),
                topic: &board(),
                author: &UserId::new(who).unwrap(),
                op_id: &OpId::new(id).unwrap(),
                op: &"hello".to_owned(),
            })
            .await;
        assert_eq!(written, Written::Accepted);
    }

    #[tokio::test(start_paused = true)]
    async fn a_post_its_summary_carries_is_held_before_its_copy_arrives() {
        let (east, west) = (store("us-east-1"), store("us-west-2"));
        let mut feed = east.change_feed();
        post(east.clone(), "us-east-1", "ann", "post-0001").await;
        // Replication delivers the summary, and the copy not (yet, or ever).
        while let Ok(change) = feed.try_recv() {
            if matches!(change.item, Item::Summary { .. }) {
                west.apply_replicated(change);
            }
        }
        assert!(west.all_ops(&board()).is_empty());
        let reader = Reader::regional(Arc::new(Board), west.clone());
        let ann = UserId::new("ann").unwrap();
        let post_id = OpId::new("post-0001").unwrap();
        let held = reader
            .hold(&board(), &ann, std::slice::from_ref(&post_id), 10)
            .await
            .unwrap();
        assert_eq!(held.summaries.len(), 1);
        assert_eq!(held.own.len(), 1, "ann's own post, carried");
        assert_eq!(held.own[0].region, "us-east-1");
        assert_eq!(held.named, vec![(post_id.clone(), held.own.clone())]);
        // Another reader's own list does not take ann's post.
        let bob = UserId::new("bob").unwrap();
        let theirs = reader
            .hold(&board(), &bob, std::slice::from_ref(&post_id), 10)
            .await
            .unwrap();
        assert!(theirs.own.is_empty());
        assert_eq!(theirs.named, vec![(post_id, Vec::new())]);
        // In the Region that wrote it, copy and carried op are one entry.
        let reader = Reader::regional(Arc::new(Board), east.clone());
        let held = reader.hold(&board(), &ann, &[], 10).await.unwrap();
        assert_eq!(held.own.len(), 1);
    }

    #[test]
    fn a_carried_op_is_added_unless_its_own_copy_is_held() {
        let op = |author: &str, op_id: &str, region: &str| StoredOp {
            topic: board(),
            author: UserId::new(author).unwrap(),
            op_id: OpId::new(op_id).unwrap(),
            region: region.into(),
            at: 1,
            position: 1,
            digest: Digest::of(&json!({})).unwrap(),
            op: json!({}),
        };
        let copies = vec![op("ann", "post-0001", "us-east-1")];
        let carried = [
            // The same copy: already held.
            op("ann", "post-0001", "us-east-1"),
            // The same op id accepted in the other Region: another copy.
            op("ann", "post-0001", "us-west-2"),
            // Another author's op under the same id and Region: theirs.
            op("bob", "post-0001", "us-east-1"),
            // Another op of the same author in the same Region.
            op("ann", "post-0002", "us-east-1"),
        ];
        let held = held_ops(copies, carried.iter());
        assert_eq!(held.len(), 4, "{held:?}");
        assert_eq!(held[1..], carried[1..]);
        let reader = Reader::regional(Arc::new(Board), store("us-east-1"));
        assert!(format!("{reader:?}").contains("on_the_head: false"));
    }

    #[tokio::test(start_paused = true)]
    async fn the_heads_newest_op_is_held_before_its_copy_is_written() {
        let table = store("mrsc");
        let ann = UserId::new("ann").unwrap();
        let op = json!({ "text": "first" });
        let newest = StoredOp {
            topic: board(),
            author: ann.clone(),
            op_id: OpId::new("post-0001").unwrap(),
            region: "us-west-2".into(),
            at: 1_000,
            position: 1,
            digest: Digest::of(&op).unwrap(),
            op,
        };
        let head = StoredHead {
            summary: StoredSummary {
                region: crate::model::LEDGER.into(),
                accepted: 1,
                app: Board.summary_json(&None),
            },
            last: Some(crate::items::LastOp {
                op: newest.clone(),
                write_id: "w-1".into(),
            }),
        };
        // The head moved; the copy was never settled.
        assert_eq!(
            HeadStore::advance(table.as_ref(), &board(), 0, &head)
                .await
                .unwrap(),
            Advance::Advanced
        );
        let reader = Reader::on_head(Arc::new(Board), table.clone());
        let held = reader
            .hold(&board(), &ann, std::slice::from_ref(&newest.op_id), 10)
            .await
            .unwrap();
        assert_eq!(held.newest.as_ref(), Some(&newest));
        assert_eq!(held.own, vec![newest.clone()]);
        assert_eq!(held.named, vec![(newest.op_id.clone(), vec![newest])]);
        assert_eq!(held.summaries[0].0.accepted, 1);
    }
}
