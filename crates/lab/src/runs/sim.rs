//! Deterministic simulation: one run of the world on one thread, on tokio's paused clock,
//! over an in-memory network, with every draw from the run's seed.
//!
//! The engine is tokio's own: a current-thread runtime whose clock is paused
//! (`start_paused`). When every task waits, tokio moves the clock straight to the next
//! timer, so a run costs only its CPU time, and with one thread the order in which tasks
//! run follows from the order in which they were woken, which follows from the run's inputs.
//! What the world would otherwise take from outside is given to it: the network
//! ([`wsdr_net::Network::Memory`]), the randomness (the world's [`wsdr_core::SeededEntropy`],
//! the clients' seeds, and the AWS SDK's `fastrand` generator, seeded here for this thread),
//! and the wall clock's epoch (docs/LAB.md, "Deterministic simulation").
//!
//! The runtime enables no I/O driver: a simulated run that reached for a real socket fails
//! at once instead of quietly depending on the machine.

use std::future::Future;

/// Run `run` to completion in a fresh simulated world thread and return its result.
///
/// The thread is the run's own: nothing else is polled on it, and its thread-locals (the
/// SDK's generator) start from `seed`.
pub async fn simulate<T, F, Fut>(seed: u64, run: F) -> anyhow::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = anyhow::Result<T>>,
{
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name(format!("sim-{seed}"))
        // Deep async stacks (axum, hyper, the SDK) in a debug build.
        .stack_size(32 * 1024 * 1024)
        .spawn(move || {
            let _ = tx.send(simulate_here(seed, run));
        })?;
    rx.await
        .map_err(|_| anyhow::anyhow!("simulation thread for seed {seed} died"))?
}

/// Run `run` on the calling thread (which must not be inside a runtime).
pub fn simulate_here<T, F, Fut>(seed: u64, run: F) -> anyhow::Result<T>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = anyhow::Result<T>>,
{
    fastrand::seed(seed);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()?;
    runtime.block_on(run())
}

/// A 64-bit FNV-1a digest, as 16 hex digits: stable across builds, platforms and Rust
/// versions (std's hashers promise none of that).
#[derive(Debug, Clone, Copy)]
pub struct Digest(u64);

impl Default for Digest {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Digest {
    pub fn add(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    /// Add one line (its bytes, then a newline).
    pub fn line(&mut self, line: &str) {
        self.add(line.as_bytes());
        self.add(b"\n");
    }

    pub fn hex(&self) -> String {
        format!("{:016x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_matches_fnv1a_reference_values() {
        let mut empty = Digest::default();
        empty.add(b"");
        assert_eq!(empty.hex(), "cbf29ce484222325");
        let mut a = Digest::default();
        a.add(b"a");
        assert_eq!(a.hex(), "af63dc4c8601ec8c");
    }

    #[test]
    fn simulated_time_moves_without_real_time() -> anyhow::Result<()> {
        let started = std::time::Instant::now();
        let slept = simulate_here(1, || async {
            let at = tokio::time::Instant::now();
            tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
            Ok(at.elapsed())
        })?;
        assert_eq!(slept, std::time::Duration::from_secs(3600));
        assert!(started.elapsed() < std::time::Duration::from_secs(60));
        Ok(())
    }

    #[test]
    #[should_panic(expected = "IO is disabled")]
    fn a_simulated_run_cannot_reach_a_real_socket() {
        let _ = simulate_here(1, || async {
            Ok(tokio::net::TcpListener::bind("127.0.0.1:0").await.is_ok())
        });
    }
}
