//! What a world runs on: the network its endpoints listen on, where its random choices come
//! from, and the epoch its clock starts at. The interactive lab runs on the real ones; a
//! simulation (crate::runs::sim) on an in-memory network, a seeded stream of draws and a
//! fixed epoch, so that a run is a function of its seed.

use std::sync::Arc;
use wsdr_core::{Entropy, SeededEntropy, ThreadEntropy};
use wsdr_net::Network;

/// 2026-01-01T00:00:00Z: every simulated run's clock starts here.
pub const SIMULATION_EPOCH_MS: u64 = 1_767_225_600_000;

#[derive(Debug, Clone)]
pub struct Environment {
    pub network: Network,
    pub entropy: Arc<dyn Entropy>,
    /// The lab clock's epoch ms at start (`None`: the system clock's).
    pub epoch_ms: Option<u64>,
    /// The run's seed, when there is one (clients and users derive theirs from it).
    pub seed: Option<u64>,
}

impl Default for Environment {
    fn default() -> Self {
        Self::real()
    }
}

impl Environment {
    /// Loopback TCP, the thread's RNG, the system clock.
    pub fn real() -> Self {
        Self {
            network: Network::Tcp,
            entropy: Arc::new(ThreadEntropy),
            epoch_ms: None,
            seed: None,
        }
    }

    /// An in-memory network, draws from `seed`, the simulation epoch.
    pub fn simulated(seed: u64) -> Self {
        Self {
            network: Network::memory(),
            entropy: Arc::new(SeededEntropy::new(seed ^ 0x776f_726c_6421)),
            epoch_ms: Some(SIMULATION_EPOCH_MS),
            seed: Some(seed),
        }
    }

    pub fn is_simulated(&self) -> bool {
        self.network.is_memory()
    }
}

/// What every part of one world shares: its timeline, the owner of its tasks, and what it
/// runs on.
#[derive(Debug, Clone)]
pub struct Shared {
    /// One lab second is this many AWS seconds.
    pub scale: crate::world::scale::TimeScale,
    pub timeline: crate::world::timeline::Timeline,
    pub owner: crate::world::owner::Owner,
    pub environment: Environment,
}

/// True with probability `percent`/100.
pub fn chance(entropy: &dyn Entropy, percent: u8) -> bool {
    percent > 0 && entropy.below(100) < u64::from(percent)
}

/// A number drawn uniformly from `[low, high)`.
pub fn uniform(entropy: &dyn Entropy, low: f64, high: f64) -> f64 {
    const STEPS: u64 = 1 << 53;
    low + (high - low) * (entropy.below(STEPS) as f64 / STEPS as f64)
}

/// An id shaped like API Gateway's connection and request ids (`L0SM9cOFvHcCIhw=`).
pub fn gateway_id(entropy: &dyn Entropy) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut id: String = (0..15)
        .map(|_| ALPHABET[entropy.below(ALPHABET.len() as u64) as usize] as char)
        .collect();
    id.push('=');
    id
}

/// `digits` hex digits of draws (secrets, lab ids).
pub fn hex(entropy: &dyn Entropy, digits: usize) -> String {
    (0..digits)
        .map(|_| char::from_digit(entropy.below(16) as u32, 16).unwrap_or('0'))
        .collect()
}
