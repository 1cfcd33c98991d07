//! Server-directed moves (`moveTo`): whether to follow one, where to, and when. A pure
//! decision, tested without sockets; the session loop only arms a timer with it.
//!
//! A client follows a move only to a destination it already knows: the global name it was
//! configured with, or one of the Regions' own endpoints it was given. A frame naming any
//! other URL is ignored, so a forged or mistaken frame cannot send users somewhere new. The
//! moment is the server's delay (the client's slot in the herd) plus a uniformly random
//! moment within the server's window, so a Region's whole population arrives at the
//! destination at the rate the server planned for.

use crate::fallback::RegionalEndpoint;
use rand::Rng;
use std::time::Duration;

/// The longest wait a client honours (delay and window together): an hour, the herd window
/// of 1.8 million connections at API Gateway's default 500 per second. The server's own
/// frames never need more; a wrong one cannot keep a user waiting longer.
pub const MAX_WINDOW: Duration = Duration::from_secs(3_600);

/// Where a move goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// The global name (DNS chooses the Region).
    Global,
    /// The configured Region endpoint at this index.
    Regional(usize),
}

/// A move the client will make.
#[derive(Debug, Clone, PartialEq)]
pub struct MoveOrder {
    /// The Region the server named.
    pub to: String,
    /// The endpoint the next connect uses.
    pub destination: Destination,
    /// When to close this session and reconnect, from now.
    pub after: Duration,
}

/// Why a move was not followed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ignored {
    /// The destination is the Region serving this session.
    AlreadyThere,
    /// The endpoint is none the client knows.
    UnknownEndpoint(String),
    /// The endpoint is a known Region's, but not the Region the frame names.
    EndpointOfAnotherRegion {
        /// The Region the endpoint belongs to.
        endpoint_region: String,
    },
}

/// The frame's fields, as received.
#[derive(Debug, Clone, Copy)]
pub struct MoveRequest<'a> {
    /// The Region serving this session (the frame's `region`).
    pub serving_region: &'a str,
    /// The Region to move to.
    pub to: &'a str,
    /// The endpoint to move to, if the frame names one (else the Region's configured one).
    pub endpoint: Option<&'a str>,
    /// `afterMs`: wait this long before the window opens.
    pub delay: Duration,
    /// `windowMs`: spread the move uniformly over this much time after the delay.
    pub window: Duration,
}

/// Decide on a `moveTo` frame given what the client knows: its global name and the Regions'
/// own endpoints (empty without client-assisted failover).
///
/// ```
/// use rand::{rngs::SmallRng, SeedableRng};
/// use std::time::Duration;
/// use wsdr_client::moves::{decide, Destination, Ignored, MoveRequest};
///
/// let mut rng = SmallRng::seed_from_u64(1);
/// let global = "wss://auction.example.com";
/// let request = MoveRequest {
///     serving_region: "us-east-1",
///     to: "us-west-2",
///     endpoint: None,
///     delay: Duration::from_secs(7),
///     window: Duration::from_secs(1),
/// };
/// let order = decide(request, global, &[], &mut rng).unwrap();
/// assert_eq!(order.destination, Destination::Global);
/// assert!(order.after >= Duration::from_secs(7) && order.after <= Duration::from_secs(8));
/// // An endpoint the client does not know is never followed (a forged move goes nowhere).
/// let forged = MoveRequest { endpoint: Some("wss://evil.example.net"), ..request };
/// assert!(matches!(decide(forged, global, &[], &mut rng), Err(Ignored::UnknownEndpoint(_))));
/// ```
pub fn decide(
    request: MoveRequest<'_>,
    global_url: &str,
    regions: &[RegionalEndpoint],
    rng: &mut impl Rng,
) -> Result<MoveOrder, Ignored> {
    if request.to == request.serving_region {
        return Err(Ignored::AlreadyThere);
    }
    let destination = match request.endpoint {
        Some(url) if url == global_url => Destination::Global,
        Some(url) => {
            let (index, known) = regions
                .iter()
                .enumerate()
                .find(|(_, e)| e.url == url)
                .ok_or_else(|| Ignored::UnknownEndpoint(url.to_owned()))?;
            if known.region != request.to {
                return Err(Ignored::EndpointOfAnotherRegion {
                    endpoint_region: known.region.clone(),
                });
            }
            Destination::Regional(index)
        }
        // No endpoint named: the destination Region's own endpoint if the client knows it
        // (it does not depend on DNS having changed), else the global name.
        None => regions
            .iter()
            .position(|e| e.region == request.to)
            .map_or(Destination::Global, Destination::Regional),
    };
    let delay = request.delay.min(MAX_WINDOW);
    let window = request.window.min(MAX_WINDOW - delay);
    let after = if window.is_zero() {
        delay
    } else {
        delay + window.mul_f64(rng.random::<f64>())
    };
    Ok(MoveOrder {
        to: request.to.to_owned(),
        destination,
        after,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    const GLOBAL: &str = "wss://auction.example.com";

    fn regions() -> Vec<RegionalEndpoint> {
        vec![
            RegionalEndpoint {
                region: "us-east-1".into(),
                url: "wss://use1.auction.example.com".into(),
            },
            RegionalEndpoint {
                region: "us-west-2".into(),
                url: "wss://usw2.auction.example.com".into(),
            },
        ]
    }

    fn request<'a>(to: &'a str, endpoint: Option<&'a str>, window_s: u64) -> MoveRequest<'a> {
        MoveRequest {
            serving_region: "us-east-1",
            to,
            endpoint,
            delay: Duration::ZERO,
            window: Duration::from_secs(window_s),
        }
    }

    #[test]
    fn a_named_known_region_goes_to_its_own_endpoint() {
        let mut rng = SmallRng::seed_from_u64(1);
        let order =
            decide(request("us-west-2", None, 20), GLOBAL, &regions(), &mut rng).expect("followed");
        assert_eq!(order.destination, Destination::Regional(1));
        assert!(order.after <= Duration::from_secs(20));
        let order = decide(
            request("us-west-2", Some("wss://usw2.auction.example.com"), 20),
            GLOBAL,
            &regions(),
            &mut rng,
        )
        .expect("followed");
        assert_eq!(order.destination, Destination::Regional(1));
    }

    #[test]
    fn without_region_endpoints_the_global_name_is_the_way() {
        let mut rng = SmallRng::seed_from_u64(1);
        let order =
            decide(request("us-west-2", None, 20), GLOBAL, &[], &mut rng).expect("followed");
        assert_eq!(order.destination, Destination::Global);
        let order = decide(
            request("us-west-2", Some(GLOBAL), 20),
            GLOBAL,
            &[],
            &mut rng,
        )
        .expect("followed");
        assert_eq!(order.destination, Destination::Global);
    }

    #[test]
    fn unknown_or_mismatched_destinations_are_ignored() {
        let mut rng = SmallRng::seed_from_u64(1);
        assert_eq!(
            decide(
                request("us-west-2", Some("wss://evil.example.net"), 20),
                GLOBAL,
                &regions(),
                &mut rng
            ),
            Err(Ignored::UnknownEndpoint("wss://evil.example.net".into()))
        );
        assert_eq!(
            decide(
                request("us-west-2", Some("wss://use1.auction.example.com"), 20),
                GLOBAL,
                &regions(),
                &mut rng
            ),
            Err(Ignored::EndpointOfAnotherRegion {
                endpoint_region: "us-east-1".into()
            })
        );
        assert_eq!(
            decide(request("us-east-1", None, 20), GLOBAL, &regions(), &mut rng),
            Err(Ignored::AlreadyThere)
        );
    }

    #[test]
    fn moments_spread_uniformly_over_the_window_and_the_window_is_capped() {
        let mut rng = SmallRng::seed_from_u64(7);
        let n = 10_000;
        let mut buckets = [0u32; 10];
        for _ in 0..n {
            let order =
                decide(request("us-west-2", None, 100), GLOBAL, &[], &mut rng).expect("followed");
            let bucket = (order.after.as_secs_f64() / 10.0) as usize;
            buckets[bucket.min(9)] += 1;
        }
        for count in buckets {
            // Each tenth of the window gets about a tenth of the moves.
            assert!((800..1200).contains(&count), "{buckets:?}");
        }
        let order =
            decide(request("us-west-2", None, 86_400), GLOBAL, &[], &mut rng).expect("followed");
        assert!(order.after <= MAX_WINDOW);
        let order = decide(request("us-west-2", None, 0), GLOBAL, &[], &mut rng).expect("followed");
        assert_eq!(order.after, Duration::ZERO);
    }

    #[test]
    fn the_delay_comes_before_the_window_and_both_together_are_capped() {
        let mut rng = SmallRng::seed_from_u64(3);
        for _ in 0..1_000 {
            let order = decide(
                MoveRequest {
                    delay: Duration::from_secs(12),
                    ..request("us-west-2", None, 1)
                },
                GLOBAL,
                &[],
                &mut rng,
            )
            .expect("followed");
            assert!(order.after >= Duration::from_secs(12), "{:?}", order.after);
            assert!(order.after <= Duration::from_secs(13), "{:?}", order.after);
        }
        let order = decide(
            MoveRequest {
                delay: Duration::from_secs(86_400),
                ..request("us-west-2", None, 86_400)
            },
            GLOBAL,
            &[],
            &mut rng,
        )
        .expect("followed");
        assert!(order.after <= MAX_WINDOW);
    }
}
