#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code may fail loudly
//! Full jitter, statistically: delays stay within [floor, min(cap, base * 2^attempt)] and are
//! spread uniformly (Kolmogorov-Smirnov against the uniform distribution, fixed seed).

use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::time::Duration;
use wsdr_client::Backoff;

/// The KS statistic of `samples` against uniform(low, high).
fn ks_uniform(mut samples: Vec<f64>, low: f64, high: f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    let n = samples.len() as f64;
    samples
        .iter()
        .enumerate()
        .map(|(i, x)| {
            let cdf = (x - low) / (high - low);
            let above = (i as f64 + 1.0) / n - cdf;
            let below = cdf - i as f64 / n;
            above.max(below)
        })
        .fold(0.0, f64::max)
}

#[test]
fn reference_policy_windows_double_up_to_the_cap() {
    let b = Backoff::default();
    let windows: Vec<u64> = (0..6).map(|a| b.ceiling(a).as_millis() as u64).collect();
    assert_eq!(windows, [2_000, 4_000, 8_000, 16_000, 20_000, 20_000]);
    assert_eq!(
        b.ceiling(200),
        Duration::from_secs(20),
        "no overflow on huge attempts"
    );
}

#[test]
fn delays_are_within_bounds_and_uniform() {
    let mut rng = SmallRng::seed_from_u64(2026);
    let n = 20_000;
    // Critical value of the one-sample KS test at alpha = 0.001: 1.95 / sqrt(n).
    let critical = 1.95 / (n as f64).sqrt();
    let mut worst: f64 = 0.0;
    for backoff in [
        Backoff::default(),
        Backoff {
            floor: Duration::from_millis(500),
            ..Backoff::default()
        },
    ] {
        for attempt in 0..6 {
            let low = backoff.floor.as_secs_f64();
            let high = backoff.ceiling(attempt).as_secs_f64();
            let samples: Vec<f64> = (0..n)
                .map(|_| backoff.delay(attempt, &mut rng).as_secs_f64())
                .collect();
            assert!(
                samples.iter().all(|s| (low..=high).contains(s)),
                "attempt {attempt}: out of bounds"
            );
            let d = ks_uniform(samples.clone(), low, high);
            worst = worst.max(d);
            assert!(
                d < critical,
                "attempt {attempt}: KS D = {d:.4} >= {critical:.4}"
            );
            let mean = samples.iter().sum::<f64>() / n as f64;
            assert!(
                (mean - (low + high) / 2.0).abs() < (high - low) * 0.02,
                "attempt {attempt}: mean {mean}"
            );
        }
    }
    eprintln!(
        "backoff: 12 windows x {n} delays, largest KS D = {worst:.4} (critical {critical:.4})"
    );
}

#[test]
fn the_ks_check_can_fail() {
    // A constant-interval policy (what full jitter replaces) is rejected by the same test.
    let samples: Vec<f64> = (0..20_000)
        .map(|i| if i % 2 == 0 { 2.0 } else { 1.9 })
        .collect();
    assert!(ks_uniform(samples, 0.0, 2.0) > 1.95 / (20_000f64).sqrt());
}

#[test]
fn a_429_widens_the_window_to_the_herd_window_and_the_reference_policy_does_not() {
    let mut rng = SmallRng::seed_from_u64(9);
    let wsdr = Backoff::default();
    let reference = Backoff::reference();
    let n = 5_000;
    let after_429: Vec<f64> = (0..n)
        .map(|_| wsdr.delay_after(0, true, &mut rng).as_secs_f64())
        .collect();
    assert!(after_429.iter().all(|d| *d <= 20.0));
    assert!(
        ks_uniform(after_429, 0.0, 20.0) < 1.95 / (n as f64).sqrt(),
        "uniform over the herd window"
    );
    let lone: Vec<f64> = (0..n)
        .map(|_| wsdr.delay_after(0, false, &mut rng).as_secs_f64())
        .collect();
    assert!(
        lone.iter().all(|d| *d <= 2.0),
        "a lone failure keeps the fast 2 s window"
    );
    let plain: Vec<f64> = (0..n)
        .map(|_| reference.delay_after(0, true, &mut rng).as_secs_f64())
        .collect();
    assert!(
        plain.iter().all(|d| *d <= 2.0),
        "the reference policy ignores 429"
    );
}
