//! The failover decision as one rule over a Region's recent health, computed by the watcher
//! canary itself and published as a verdict (`App/FailoverVerdict`), so that what moves DNS
//! is certain: a Route 53 `CLOUDWATCH_METRIC` health check evaluates the alarm's *data
//! stream* with the alarm configuration it stored at creation (no `DatapointsToAlarm`, no
//! `TreatMissingData`), so an M-of-N rule in the alarm itself is not what Route 53 applies.
//! A one-period alarm on the verdict is the same whether Route 53 reads its state or its data.

/// Fail the Region over when at least `failover_after` (M) of the last `window` (N) minutes
/// were unhealthy; serve it again once fewer than M of the last N were, that is N - M + 1
/// healthy minutes in a row after the last bad one at the earliest. With M = 2 and N = 6:
/// two bad minutes fail over, five good ones in a row fail back, a Region bad every third
/// minute stays failed over.
///
/// A minute without a datapoint is no evidence either way: only the watcher itself writes
/// these datapoints, so a missing one means the watcher did not run or could not publish,
/// which says nothing about the Region it watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailoverRule {
    pub failover_after: u32,
    pub window: u32,
}

impl FailoverRule {
    /// A rule with 1 <= M <= N, or why not.
    pub fn new(failover_after: u32, window: u32) -> Result<Self, String> {
        if failover_after == 0 || window == 0 {
            return Err("M and N must be at least 1".into());
        }
        if failover_after > window {
            return Err(format!(
                "M = {failover_after} unhealthy minutes cannot fit in a window of N = {window}"
            ));
        }
        Ok(Self {
            failover_after,
            window,
        })
    }

    /// Whether the Region should serve, from its minutes oldest first (the last is the
    /// current one); only the last `window` count.
    pub fn serves(&self, minutes: &[Option<bool>]) -> bool {
        let recent = &minutes[minutes.len().saturating_sub(self.window as usize)..];
        let unhealthy = recent.iter().filter(|m| **m == Some(false)).count();
        unhealthy < self.failover_after as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minutes(s: &str) -> Vec<Option<bool>> {
        s.chars()
            .map(|c| match c {
                '1' => Some(true),
                '0' => Some(false),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn two_bad_minutes_fail_over_five_good_ones_fail_back() {
        let rule = FailoverRule::new(2, 6).unwrap_or_else(|e| panic!("{e}"));
        assert!(rule.serves(&minutes("111111")));
        assert!(
            rule.serves(&minutes("111110")),
            "one bad minute is not enough"
        );
        assert!(!rule.serves(&minutes("111100")));
        assert!(!rule.serves(&minutes("100111")), "still failed over");
        assert!(!rule.serves(&minutes("001111")));
        assert!(
            rule.serves(&minutes("011111")),
            "five good minutes in a row after the last bad"
        );
    }

    #[test]
    fn a_region_bad_every_third_minute_never_fails_back() {
        let rule = FailoverRule::new(2, 6).unwrap_or_else(|e| panic!("{e}"));
        let flapping = minutes("110110110110110");
        for end in 6..=flapping.len() {
            assert!(!rule.serves(&flapping[..end]), "minute {end}");
        }
    }

    #[test]
    fn missing_minutes_are_no_evidence_either_way() {
        let rule = FailoverRule::new(2, 6).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            rule.serves(&minutes("......")),
            "a silent watcher fails nobody over"
        );
        assert!(rule.serves(&minutes("...0..")));
        assert!(!rule.serves(&minutes("0....0")));
        assert!(rule.serves(&minutes("")));
    }

    #[test]
    fn only_the_window_counts() {
        let rule = FailoverRule::new(2, 3).unwrap_or_else(|e| panic!("{e}"));
        assert!(rule.serves(&minutes("0000111")));
        assert!(!rule.serves(&minutes("1111001")));
    }

    #[test]
    fn impossible_rules_are_refused() {
        assert!(FailoverRule::new(0, 6).is_err());
        assert!(FailoverRule::new(5, 4).is_err());
        assert!(FailoverRule::new(1, 1).is_ok());
    }
}
