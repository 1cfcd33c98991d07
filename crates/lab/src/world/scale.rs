//! One knob for all of the lab's time: every AWS duration is divided by the scale.

use std::time::Duration;

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
    pub fn lab(self, aws: Duration) -> Duration {
        Duration::from_secs_f64(aws.as_secs_f64() / self.0)
    }

    /// The lab duration of `secs` AWS seconds.
    pub fn secs(self, secs: f64) -> Duration {
        Duration::from_secs_f64(secs / self.0)
    }

    /// The AWS-equivalent of a lab duration.
    pub fn aws(self, lab: Duration) -> Duration {
        Duration::from_secs_f64(lab.as_secs_f64() * self.0)
    }
}

/// The domain's pauses (retry pauses, fan-out backoff) are AWS durations: the lab waits them
/// divided by its time scale, like every other AWS duration.
#[derive(Debug, Clone, Copy)]
pub struct ScaledPause(pub TimeScale);

#[async_trait::async_trait]
impl wsdr_core::Pause for ScaledPause {
    async fn pause(&self, aws: Duration) {
        tokio::time::sleep(self.0.lab(aws)).await;
    }
}
