//! One knob for all of the lab's time, and the one place AWS time becomes lab time.
//!
//! Every duration AWS would measure (a TTL, a quota's second, a probe's timeout, a fault's
//! length) is an [`AwsDuration`]; the lab waits it through [`TimeScale::lab`], which divides
//! it by the scale. Lab durations are plain [`Duration`]s, and [`TimeScale::aws`] turns one
//! back into AWS time for a report. A simulation runs at scale 1, where the two agree.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A duration in AWS time: what it would take on AWS, whatever the lab's time scale.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct AwsDuration(Duration);

impl AwsDuration {
    pub const ZERO: AwsDuration = AwsDuration(Duration::ZERO);

    pub const fn from_secs(secs: u64) -> Self {
        Self(Duration::from_secs(secs))
    }

    pub const fn from_millis(ms: u64) -> Self {
        Self(Duration::from_millis(ms))
    }

    /// `secs` AWS seconds (negative or not finite: zero).
    pub fn from_secs_f64(secs: f64) -> Self {
        Self(Duration::try_from_secs_f64(secs).unwrap_or(Duration::ZERO))
    }

    /// The same length, as a plain `Duration` (what an AWS API or a Lambda would be told).
    pub const fn get(self) -> Duration {
        self.0
    }

    pub fn as_secs(self) -> u64 {
        self.0.as_secs()
    }

    pub fn as_secs_f64(self) -> f64 {
        self.0.as_secs_f64()
    }

    pub fn as_millis(self) -> u128 {
        self.0.as_millis()
    }

    pub fn max(self, other: Self) -> Self {
        Self(self.0.max(other.0))
    }
}

impl From<Duration> for AwsDuration {
    /// A `Duration` read as AWS time (a setting given in AWS terms).
    fn from(aws: Duration) -> Self {
        Self(aws)
    }
}

impl std::ops::Add for AwsDuration {
    type Output = Self;
    fn add(self, other: Self) -> Self {
        Self(self.0 + other.0)
    }
}

impl std::ops::Mul<u32> for AwsDuration {
    type Output = Self;
    fn mul(self, n: u32) -> Self {
        Self(self.0 * n)
    }
}

/// Serde forms of an [`AwsDuration`] for records whose field names carry their unit
/// (`secs`, `lag_ms`, `keep_secs`): the Rust side holds one type, the JSON keeps the
/// spelling that recorded schedules and outside tools already read and write.
pub mod serde_as {
    use super::AwsDuration;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Seconds, as a number with a fraction (`"secs": 60.0`).
    pub mod secs {
        use super::*;
        pub fn serialize<S: Serializer>(d: &AwsDuration, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_f64(d.as_secs_f64())
        }
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<AwsDuration, D::Error> {
            let secs = f64::deserialize(d)?;
            if !secs.is_finite() || secs < 0.0 {
                return Err(serde::de::Error::custom(format!(
                    "a duration in seconds must be a finite number >= 0, not {secs}"
                )));
            }
            Ok(AwsDuration::from_secs_f64(secs))
        }
    }

    /// Whole seconds (`"keep_secs": 300`).
    pub mod whole_secs {
        use super::*;
        pub fn serialize<S: Serializer>(d: &AwsDuration, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_u64(d.as_secs())
        }
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<AwsDuration, D::Error> {
            Ok(AwsDuration::from_secs(u64::deserialize(d)?))
        }
    }

    /// Whole milliseconds (`"lag_ms": 500`).
    pub mod millis {
        use super::*;
        pub fn serialize<S: Serializer>(d: &AwsDuration, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        }
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<AwsDuration, D::Error> {
            Ok(AwsDuration::from_millis(u64::deserialize(d)?))
        }
    }
}

/// An instant in AWS time: AWS milliseconds since the lab started (what a run records; a
/// simulated run is at scale 1, where it is also the lab's own time). Written as a number
/// of milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AwsInstant(f64);

impl AwsInstant {
    pub const START: AwsInstant = AwsInstant(0.0);
    /// Later than every instant a run records (an open-ended interval's end).
    pub const NEVER: AwsInstant = AwsInstant(f64::MAX);

    /// `ms` AWS milliseconds after the lab started.
    pub const fn from_ms(ms: f64) -> Self {
        Self(ms)
    }

    /// AWS milliseconds since the lab started.
    pub const fn ms(self) -> f64 {
        self.0
    }

    /// The AWS time from `earlier` to this instant, in milliseconds (negative when
    /// `earlier` is later).
    pub fn ms_since(self, earlier: AwsInstant) -> f64 {
        self.0 - earlier.0
    }

    /// The AWS time from `earlier` to this instant, in seconds.
    pub fn secs_since(self, earlier: AwsInstant) -> f64 {
        self.ms_since(earlier) / 1000.0
    }

    pub fn min(self, other: Self) -> Self {
        Self(self.0.min(other.0))
    }

    pub fn max(self, other: Self) -> Self {
        Self(self.0.max(other.0))
    }

    /// Total order (instants are finite).
    pub fn total_cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl std::ops::Add<AwsDuration> for AwsInstant {
    type Output = Self;
    fn add(self, d: AwsDuration) -> Self {
        Self(self.0 + d.as_secs_f64() * 1000.0)
    }
}

/// `--time-scale S`: one lab second stands for S AWS seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeScale(f64);

impl TimeScale {
    pub fn new(scale: f64) -> Self {
        Self(if scale.is_finite() && scale >= 1.0 {
            scale
        } else {
            1.0
        })
    }

    pub fn factor(self) -> f64 {
        self.0
    }

    /// The lab duration of an AWS duration.
    pub fn lab(self, aws: AwsDuration) -> Duration {
        Duration::from_secs_f64(aws.as_secs_f64() / self.0)
    }

    /// The lab duration of `secs` AWS seconds.
    pub fn secs(self, secs: f64) -> Duration {
        self.lab(AwsDuration::from_secs_f64(secs))
    }

    /// The AWS-equivalent of a lab duration.
    pub fn aws(self, lab: Duration) -> AwsDuration {
        AwsDuration(Duration::from_secs_f64(lab.as_secs_f64() * self.0))
    }

    /// Lab milliseconds (a timeline's time) as AWS milliseconds, for a report.
    pub fn aws_ms(self, lab_ms: f64) -> f64 {
        lab_ms * self.0
    }

    /// Lab milliseconds as AWS seconds, for a report.
    pub fn aws_secs(self, lab_ms: f64) -> f64 {
        lab_ms * self.0 / 1000.0
    }

    /// A rate per AWS second as a rate per lab second (the lab's time runs `factor` times
    /// faster, so as many more events fit in each of its seconds).
    pub fn per_lab_second(self, per_aws_second: f64) -> f64 {
        per_aws_second * self.0
    }

    /// The AWS instant of a lab instant (lab milliseconds since the lab started).
    pub fn instant(self, lab_ms: f64) -> AwsInstant {
        AwsInstant(lab_ms * self.0)
    }

    /// The lab milliseconds since the lab started of an AWS instant (the reports' `*_ms`
    /// fields, which have always been lab time).
    pub fn lab_ms_of(self, at: AwsInstant) -> f64 {
        at.0 / self.0
    }

    /// AWS milliseconds as lab milliseconds, rounded (a clock skew).
    pub fn lab_ms(self, aws_ms: i64) -> i64 {
        (aws_ms as f64 / self.0).round() as i64
    }
}

/// The domain's pauses (retry pauses, fan-out backoff) are AWS durations: the lab waits them
/// divided by its time scale, like every other AWS duration.
#[derive(Debug, Clone, Copy)]
pub struct ScaledPause(pub TimeScale);

/// AWS milliseconds since the clock was made, on the lab's (tokio's) clock times the scale:
/// what the pushers' conflation runs on, so that its window is an AWS duration at any scale.
#[derive(Debug, Clone, Copy)]
pub struct ScaledClock {
    start: tokio::time::Instant,
    scale: TimeScale,
}

impl ScaledClock {
    pub fn new(scale: TimeScale) -> Self {
        Self {
            start: tokio::time::Instant::now(),
            scale,
        }
    }

    /// The lab duration until `aws_ms` on this clock (zero if it passed).
    pub fn until(&self, aws_ms: u64) -> Duration {
        let now = wsdr_core::Clock::now_ms(self);
        self.scale.lab(AwsDuration::from(Duration::from_millis(
            aws_ms.saturating_sub(now),
        )))
    }
}

impl wsdr_core::Clock for ScaledClock {
    fn now_ms(&self) -> u64 {
        (self.start.elapsed().as_secs_f64() * self.scale.factor() * 1000.0) as u64
    }
}

#[async_trait::async_trait]
impl wsdr_core::Pause for ScaledPause {
    async fn pause(&self, aws: Duration) {
        tokio::time::sleep(self.0.lab(AwsDuration::from(aws))).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aws_time_becomes_lab_time_divided_by_the_scale() {
        let scale = TimeScale::new(60.0);
        assert_eq!(
            scale.lab(AwsDuration::from_secs(60)),
            Duration::from_secs(1)
        );
        assert_eq!(scale.secs(30.0), Duration::from_millis(500));
        assert_eq!(
            scale.aws(Duration::from_secs(2)),
            AwsDuration::from_secs(120)
        );
        assert_eq!(scale.lab_ms(-600), -10);
        assert_eq!(scale.per_lab_second(500.0), 30_000.0);
        assert_eq!(scale.aws_secs(500.0), 30.0);
        assert_eq!(scale.aws_ms(2.0), 120.0);
    }

    #[test]
    fn a_scale_below_one_or_not_finite_is_aws_speed() {
        for bad in [0.0, -3.0, f64::NAN, f64::INFINITY] {
            assert_eq!(TimeScale::new(bad).factor(), 1.0);
        }
        assert_eq!(AwsDuration::from_secs_f64(-1.0), AwsDuration::ZERO);
    }
}
