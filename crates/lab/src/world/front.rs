//! The health front wsdr deployed before its checks went direct (template.yaml up to commit
//! 791cbca): a CloudFront distribution whose cache policy kept each path's answer 2 s, in
//! front of the secondary's health function (a function URL with origin access control),
//! which answered `/primary` and `/secondary` with 200 "serve" or 503 "fail over", a stale
//! verdict as its last known status for 6 hours, no verdict as "serve", and `/secondary`
//! "serve (holding)" while the primary was failed over. Modelled here by the rules AWS
//! documents, so that a drill run with `--health-front cloudfront` shows what that design did
//! (docs/LAB.md; docs/DEPLOY.md, "Why the checks go direct"):
//!
//! - "If your minimum TTL is greater than 0, CloudFront will cache content for at least the
//!   duration specified in the cache policy's minimum TTL, even if the Cache-Control:
//!   no-cache, no-store, or private directives are present" (CloudFront API,
//!   `CachePolicyConfig`): every 200 is kept 2 s, `no-store` or not.
//! - The object is in the edge cache but expired, and the origin answers 5xx: "CloudFront
//!   serves the object even though it has expired. For the duration of the error caching
//!   minimum TTL, CloudFront continues to respond to viewer requests by serving the object
//!   from the edge cache"; "If the origin doesn't respond ... CloudFront continues to serve
//!   cached content"; for a 4xx, "CloudFront returns the status code, not the requested
//!   object" ("How CloudFront processes and caches HTTP 4xx and 5xx status codes from your
//!   origin").
//! - Not in the edge cache and a 5xx: the error is cached for `ErrorCachingMinTTL` (2 s for
//!   500, 502, 503, 504 in that template; 404 for CloudFront's default 10 s).
//! - The cache key is the path: every other path misses, and reaches the function.
//!
//! Each Route 53 checker reaches its own edge (the lab's assumption: edges are many, and a
//! checker's requests land on one). Objects are never evicted (CloudFront evicts only what is
//! not requested often; the checkers ask every edge every 10 s).

use crate::world::region_id::RegionId;
use crate::world::route53::Reply;
use std::collections::HashMap;

/// The distribution's cache TTL (MinTTL = DefaultTTL = MaxTTL), AWS ms.
pub const CACHE_TTL_MS: u64 = 2_000;
/// `ErrorCachingMinTTL` for 500, 502, 503 and 504, AWS ms.
pub const ERROR_TTL_5XX_MS: u64 = 2_000;
/// CloudFront's default error caching (404 and the others the template did not list), AWS ms.
pub const ERROR_TTL_DEFAULT_MS: u64 = 10_000;

/// What the old health function answered (status, body) from the judge's copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OldVerdicts {
    /// The verdict on the primary that design served: both views folded (its watcher's probe
    /// and the primary's own rounds, which reached the judge by replication), with its age.
    pub primary: Option<(bool, u64)>,
    /// The secondary's own verdict, with its age.
    pub secondary: Option<(bool, u64)>,
}

/// The old rule: a verdict younger than 6 hours is answered (stale or not); older, or none
/// ever, answers serve.
const OLD_HOLD_MS: u64 = 6 * 3_600_000;

fn old_serves(verdict: Option<(bool, u64)>) -> bool {
    match verdict {
        Some((serve, age)) if age <= OLD_HOLD_MS => serve,
        _ => true,
    }
}

/// The old function's answer to `path`.
pub fn old_function_answer(path: &str, verdicts: OldVerdicts) -> (u16, &'static str) {
    match path {
        "/primary" => {
            if old_serves(verdicts.primary) {
                (200, "serve")
            } else {
                (503, "fail over")
            }
        }
        "/secondary" | "/" => {
            if old_serves(verdicts.secondary) {
                (200, "serve")
            } else if !old_serves(verdicts.primary) {
                (200, "serve (holding: the primary is failed over)")
            } else {
                (503, "fail over")
            }
        }
        _ => (404, "use /primary or /secondary"),
    }
}

/// One path's entry at one edge.
#[derive(Debug, Clone)]
enum Entry {
    /// A 2xx object, fetched at `at`; served stale until `stale_until` after a 5xx.
    Object {
        status: u16,
        body: String,
        at: u64,
        stale_until: u64,
    },
    /// A cached error, until `until`.
    Error {
        status: u16,
        body: String,
        until: u64,
    },
}

/// What reached the origin for one fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The function did not answer (its Region down: CloudFront's origin timeout, a 5xx).
    NoAnswer,
    /// The function URL refused the signed request (403: its permissions) or throttled it
    /// (429).
    Refused(u16),
    /// The function's answer.
    Answer(u16, &'static str),
}

/// The distribution's edges, one per Route 53 checker.
#[derive(Debug, Default)]
pub struct Edges {
    edges: HashMap<usize, HashMap<String, Entry>>,
}

impl Edges {
    /// A viewer request for `path` at edge `edge`, at `now_ms` (AWS ms): served from the
    /// edge, or fetched with `fetch` (called at most once) as CloudFront's rules say.
    pub fn request(
        &mut self,
        edge: usize,
        path: &str,
        now_ms: u64,
        fetch: impl FnOnce() -> Origin,
    ) -> Reply {
        let cache = self.edges.entry(edge).or_default();
        match cache.get(path) {
            Some(Entry::Object {
                status,
                body,
                at,
                stale_until,
            }) if now_ms < at + CACHE_TTL_MS || now_ms < *stale_until => {
                return Reply::Http {
                    status: *status,
                    body: body.clone(),
                };
            }
            Some(Entry::Error {
                status,
                body,
                until,
            }) if now_ms < *until => {
                return Reply::Http {
                    status: *status,
                    body: body.clone(),
                };
            }
            _ => {}
        }
        let (status, body) = match fetch() {
            Origin::NoAnswer => (504, "origin timeout".to_owned()),
            Origin::Refused(status) => (status, "refused".to_owned()),
            Origin::Answer(status, body) => (status, body.to_owned()),
        };
        let expired = cache.get(path).cloned();
        match (status, expired) {
            (200..=299, _) => {
                cache.insert(
                    path.to_owned(),
                    Entry::Object {
                        status,
                        body: body.clone(),
                        at: now_ms,
                        stale_until: 0,
                    },
                );
                Reply::Http { status, body }
            }
            // An expired object and a 5xx (a timeout is one): the object, for the error TTL.
            (
                500..=599,
                Some(Entry::Object {
                    status: cached,
                    body: cached_body,
                    at,
                    ..
                }),
            ) => {
                cache.insert(
                    path.to_owned(),
                    Entry::Object {
                        status: cached,
                        body: cached_body.clone(),
                        at,
                        stale_until: now_ms + ERROR_TTL_5XX_MS,
                    },
                );
                Reply::Http {
                    status: cached,
                    body: cached_body,
                }
            }
            (500..=599, _) => {
                cache.insert(
                    path.to_owned(),
                    Entry::Error {
                        status,
                        body: body.clone(),
                        until: now_ms + ERROR_TTL_5XX_MS,
                    },
                );
                Reply::Http { status, body }
            }
            // CloudFront caches a 404 (its default error TTL); other 4xx pass through.
            (404, _) => {
                cache.insert(
                    path.to_owned(),
                    Entry::Error {
                        status,
                        body: body.clone(),
                        until: now_ms + ERROR_TTL_DEFAULT_MS,
                    },
                );
                Reply::Http { status, body }
            }
            _ => Reply::Http { status, body },
        }
    }
}

/// Which Region's health function the front's origin is (the judge's).
pub const ORIGIN: RegionId = RegionId::Secondary;

#[cfg(test)]
mod tests {
    use super::*;

    fn get(edges: &mut Edges, now: u64, origin: Origin) -> (u16, String) {
        match edges.request(0, "/primary", now, || origin) {
            Reply::Http { status, body } => (status, body),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_200_is_kept_for_the_min_ttl_whatever_the_origin_says_after() {
        let mut edges = Edges::default();
        assert_eq!(
            get(&mut edges, 0, Origin::Answer(200, "serve")).0,
            200,
            "fetched"
        );
        assert_eq!(
            get(&mut edges, 1_999, Origin::Answer(503, "fail over")),
            (200, "serve".into()),
            "still fresh: the origin is not asked"
        );
    }

    #[test]
    fn an_expired_200_is_served_stale_while_the_origin_answers_5xx_or_nothing() {
        let mut edges = Edges::default();
        get(&mut edges, 0, Origin::Answer(200, "serve"));
        // Expired, and the verdict is now 503 "fail over": the stale 200 is what viewers get.
        assert_eq!(
            get(&mut edges, 2_000, Origin::Answer(503, "fail over")),
            (200, "serve".into())
        );
        assert_eq!(
            get(&mut edges, 3_999, Origin::Answer(200, "other")),
            (200, "serve".into()),
            "for the error caching TTL"
        );
        // Every later fetch meets another 5xx: stale again, for as long as it lasts.
        for t in (4_000..600_000).step_by(10_000) {
            assert_eq!(
                get(&mut edges, t, Origin::Answer(503, "fail over")),
                (200, "serve".into())
            );
            assert_eq!(get(&mut edges, t + 5_000, Origin::NoAnswer).0, 200);
        }
    }

    #[test]
    fn a_4xx_passes_through_and_a_5xx_without_an_object_is_cached() {
        let mut edges = Edges::default();
        get(&mut edges, 0, Origin::Answer(200, "serve"));
        assert_eq!(get(&mut edges, 2_000, Origin::Refused(429)).0, 429);
        let mut edges = Edges::default();
        assert_eq!(get(&mut edges, 0, Origin::Answer(503, "fail over")).0, 503);
        assert_eq!(
            get(&mut edges, 1_999, Origin::Answer(200, "serve")).0,
            503,
            "the error is kept for its TTL"
        );
        assert_eq!(get(&mut edges, 2_000, Origin::Answer(200, "serve")).0, 200);
    }

    #[test]
    fn the_old_function_held_a_stale_failover_and_the_secondary_for_six_hours() {
        let failed = OldVerdicts {
            primary: Some((false, 3_600_000)),
            secondary: Some((false, 10)),
        };
        assert_eq!(old_function_answer("/primary", failed), (503, "fail over"));
        assert_eq!(old_function_answer("/secondary", failed).0, 200, "holding");
        let none = OldVerdicts {
            primary: None,
            secondary: None,
        };
        assert_eq!(old_function_answer("/primary", none), (200, "serve"));
        assert_eq!(old_function_answer("/x", none).0, 404);
    }
}
