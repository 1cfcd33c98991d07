#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! A simulated run is a function of its seed: the same seed gives the same history digest
//! alone, beside other runs, beside a busy thread, and in either consistency mode. Anything
//! a run read from the machine (the real clock, the thread RNG, a hash map's order, the OS
//! scheduler) would show up here as a different digest.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use wsdr_core::Consistency;
use wsdr_lab::runs::chaos::{self, ChaosConfig, Clock};

fn config(consistency: Consistency) -> ChaosConfig {
    ChaosConfig {
        clock: Clock::Simulated,
        keep_history: true,
        consistency,
        ..ChaosConfig::default()
    }
}

async fn digest(seed: u64, consistency: Consistency) -> (String, usize, Vec<String>) {
    let run = chaos::replay(seed, config(consistency)).await.unwrap();
    assert!(
        run.violations.is_empty(),
        "seed {seed}: {}",
        chaos::describe(&run)
    );
    (run.digest, run.bids_invoked, run.history)
}

/// The first line where two histories part.
fn first_difference(a: &[String], b: &[String]) -> String {
    a.iter()
        .zip(b)
        .find(|(x, y)| x != y)
        .map(|(x, y)| format!("\n  {x}\n  {y}"))
        .unwrap_or_else(|| format!("lengths {} and {}", a.len(), b.len()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simulated_run_replays_to_the_same_digest_whatever_runs_beside_it() {
    // Seed 1's schedule evacuates under `@connections` throttling: its posts' retries must
    // draw from the run's seed too.
    let mut eventual_digests = Vec::new();
    for (seed, consistency) in [
        (7, Consistency::Eventual),
        (11, Consistency::Strong),
        (1, Consistency::Eventual),
    ] {
        let (alone, bids, history) = digest(seed, consistency).await;
        assert!(bids > 0, "the run made no bids");
        // The same seed twice at once, each on its own thread.
        let (a, b) = tokio::join!(digest(seed, consistency), digest(seed, consistency));
        // And once beside a thread that keeps a core busy.
        let busy = Arc::new(AtomicBool::new(true));
        let spinner = {
            let busy = busy.clone();
            std::thread::spawn(move || {
                let mut n = 0u64;
                while busy.load(Ordering::Relaxed) {
                    n = n.wrapping_add(1);
                }
                n
            })
        };
        let loaded = digest(seed, consistency).await;
        busy.store(false, Ordering::Relaxed);
        let _ = spinner.join();
        for (label, other) in [
            ("beside itself", &a),
            ("beside itself", &b),
            ("beside a busy core", &loaded),
        ] {
            assert_eq!(
                alone,
                other.0,
                "{consistency} seed {seed} {label}: {}",
                first_difference(&history, &other.2)
            );
        }
        if consistency == Consistency::Eventual {
            eventual_digests.push(alone);
        }
    }
    // Different seeds, different histories.
    assert_ne!(eventual_digests[0], eventual_digests[1]);
}

/// A campaign in parts runs the runs the whole would: `first_run` names the first index, and
/// run i is the run of `run_seed(seed, i)` whatever part it is in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_in_parts_runs_the_runs_of_the_whole() {
    let part = chaos::campaign(ChaosConfig {
        runs: 1,
        first_run: 3,
        ..config(Consistency::Eventual)
    })
    .await
    .unwrap();
    assert_eq!((part.runs, part.first_run), (1, 3));
    // The part's one run is run 3 of seed 1's campaign, as replayed alone.
    let alone = chaos::replay(chaos::run_seed(1, 3), config(Consistency::Eventual))
        .await
        .unwrap();
    assert_eq!(part.bids_invoked, alone.bids_invoked);
    assert_eq!(part.faults_injected, alone.faults);
    assert!(part.bids_invoked > 0);
}
