//! Summaries of samples, shared by every report.

use serde::Serialize;

/// p50/p99/max of a sample (nearest rank); all None for an empty sample.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Percentiles {
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
}

impl Percentiles {
    pub fn of(values: &[f64]) -> Self {
        let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        sorted.sort_by(f64::total_cmp);
        let rank = |q: f64| -> Option<f64> {
            if sorted.is_empty() {
                return None;
            }
            let index = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
            Some(sorted[index])
        };
        Self {
            p50: rank(0.50),
            p99: rank(0.99),
            max: sorted.last().copied(),
        }
    }
}
