//! What the `wsdr` command line checks before it starts anything: every value a run depends
//! on is refused up front with a message that says what is wrong and what would work, so a
//! run never ends in a PASS that measured nothing or an error about a file after the work.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;

/// A time scale: a finite number above 0 (1 lab second stands for this many AWS seconds).
pub fn time_scale(value: &str) -> Result<f64, String> {
    let scale: f64 = value
        .trim()
        .parse()
        .map_err(|_| format!("`{value}` is not a number"))?;
    if scale.is_finite() && scale > 0.0 {
        Ok(scale)
    } else {
        Err(format!(
            "`{value}`: the time scale must be above 0 (1 = AWS speed, 60 = one lab second per AWS minute)"
        ))
    }
}

/// A count of at least 1.
pub fn at_least_one(value: &str) -> Result<usize, String> {
    match value.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_owned()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{value}` is not a whole number")),
    }
}

/// Seconds above 0.
pub fn positive_secs(value: &str) -> Result<f64, String> {
    match value.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 => Ok(s),
        Ok(_) => Err(format!("`{value}`: must be above 0")),
        Err(_) => Err(format!("`{value}` is not a number")),
    }
}

/// A listen or lab address: `host:port`, where host may be a name (`localhost:8787`).
pub fn address(value: &str) -> Result<SocketAddr, String> {
    let mut addrs = value
        .to_socket_addrs()
        .map_err(|e| format!("`{value}`: expected host:port such as 127.0.0.1:8787 ({e})"))?;
    // Prefer IPv4: the lab binds 127.0.0.1 by default and `localhost` may list ::1 first.
    let all: Vec<SocketAddr> = addrs.by_ref().collect();
    all.iter()
        .find(|a| a.is_ipv4())
        .or(all.first())
        .copied()
        .ok_or_else(|| format!("`{value}` resolves to no address"))
}

/// A Region as the CLI takes it: `0`/`primary`, `1`/`secondary`, or its name
/// (`us-east-1`), which the lab resolves against its own Regions.
pub fn region(value: &str) -> Result<crate::world::control::RegionRef, String> {
    use crate::world::control::RegionRef;
    let value = value.trim();
    match value {
        "0" | "primary" => Ok(RegionRef::Index(0)),
        "1" | "secondary" => Ok(RegionRef::Index(1)),
        name if looks_like_region(name) => Ok(RegionRef::Name(name.to_owned())),
        other => Err(format!(
            "`{other}`: expected 0 or primary, 1 or secondary, or a Region name such as us-east-1"
        )),
    }
}

fn looks_like_region(name: &str) -> bool {
    let parts: Vec<&str> = name.split('-').collect();
    parts.len() >= 3
        && parts[0].len() == 2
        && parts[0].bytes().all(|b| b.is_ascii_lowercase())
        && parts[1..parts.len() - 1]
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase()))
        && parts[parts.len() - 1].parse::<u8>().is_ok_and(|n| n > 0)
}

/// Make sure `path` can be written before a run produces it: create its directory and open
/// it for writing (leaving any existing content). The error names the path.
pub fn ensure_writable(path: &Path, what: &str) -> anyhow::Result<()> {
    use anyhow::Context;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| {
            format!(
                "cannot create the directory of the {what} {}",
                path.display()
            )
        })?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot write the {what} {}", path.display()))?;
    Ok(())
}

/// An address is safe to serve the control API on without a credential only if nothing but
/// this machine can reach it.
pub fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::control::RegionRef;

    #[test]
    fn time_scales_must_be_finite_and_above_zero() {
        assert_eq!(time_scale("60"), Ok(60.0));
        assert_eq!(time_scale("0.5"), Ok(0.5));
        for bad in ["0", "-1", "nan", "inf", "fast", ""] {
            assert!(time_scale(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn counts_and_seconds_must_be_positive() {
        assert_eq!(at_least_one("3"), Ok(3));
        assert!(at_least_one("0").is_err());
        assert!(at_least_one("-2").is_err());
        assert_eq!(positive_secs("1.5"), Ok(1.5));
        assert!(positive_secs("0").is_err());
    }

    #[test]
    fn addresses_may_name_the_host() {
        assert_eq!(
            address("localhost:8787").map(|a| (a.ip().is_loopback(), a.port())),
            Ok((true, 8787))
        );
        assert_eq!(
            address("127.0.0.1:0").map(|a| a.port()),
            Ok(0),
            "port 0: any free port"
        );
        assert!(address("8787").is_err());
        assert!(is_loopback(&"127.0.0.1:1".parse().expect("addr")));
        assert!(!is_loopback(&"0.0.0.0:1".parse().expect("addr")));
    }

    #[test]
    fn regions_by_index_role_or_name() {
        assert_eq!(region("0"), Ok(RegionRef::Index(0)));
        assert_eq!(region("secondary"), Ok(RegionRef::Index(1)));
        assert_eq!(region("us-east-1"), Ok(RegionRef::Name("us-east-1".into())));
        assert_eq!(
            region("ap-southeast-2"),
            Ok(RegionRef::Name("ap-southeast-2".into()))
        );
        for bad in ["2", "east", "us-east", "US-EAST-1", "us-east-0", ""] {
            assert!(region(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_unwritable_path_is_named() {
        let dir = std::env::temp_dir().join(format!("wsdr-cli-{}", std::process::id()));
        let ok = dir.join("sub/report.json");
        assert!(ensure_writable(&ok, "report").is_ok());
        assert!(ok.exists());
        // A path under a regular file cannot be created.
        let bad = ok.join("report.json");
        let err = ensure_writable(&bad, "report").expect_err("under a file");
        assert!(
            format!("{err:#}").contains(&bad.display().to_string()),
            "{err:#}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// `--consistency` of `wsdr drill` and `wsdr chaos`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ConsistencyArg {
    /// Global Tables MREC: two Regions, each deciding against what it has seen.
    Eventual,
    /// Global Tables MRSC: the two Regions' replicas and a witness; bids ordered once.
    Strong,
}

impl From<ConsistencyArg> for wsdr_core::Consistency {
    fn from(arg: ConsistencyArg) -> Self {
        match arg {
            ConsistencyArg::Eventual => wsdr_core::Consistency::Eventual,
            ConsistencyArg::Strong => wsdr_core::Consistency::Strong,
        }
    }
}

/// `--clock` of `wsdr chaos`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ClockArg {
    /// A deterministic simulation: a run is a function of its seed and replays exactly.
    Simulated,
    /// The time-scaled real world (real sockets and sleeps; `--time-scale` applies).
    Real,
}

impl From<ClockArg> for crate::runs::chaos::Clock {
    fn from(arg: ClockArg) -> Self {
        match arg {
            ClockArg::Simulated => crate::runs::chaos::Clock::Simulated,
            ClockArg::Real => crate::runs::chaos::Clock::Real,
        }
    }
}

/// `--function-url-permissions`: what the health functions' URLs grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum UrlPermissionsArg {
    /// `lambda:InvokeFunctionUrl` and `lambda:InvokeFunction` (wsdr's template).
    Both,
    /// `lambda:InvokeFunctionUrl` alone (the earlier design's: every request refused).
    UrlOnly,
}

impl From<UrlPermissionsArg> for crate::world::route53::UrlPermissions {
    fn from(arg: UrlPermissionsArg) -> Self {
        match arg {
            UrlPermissionsArg::Both => Self::BOTH,
            UrlPermissionsArg::UrlOnly => Self::URL_ONLY,
        }
    }
}

/// A chaos schedule given on the command line (one value, a JSON list).
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleArg(pub Vec<crate::runs::chaos::Step>);

/// `--schedule`: a chaos schedule as JSON (`[{"fault":"down","secs":60.0}, ...]`).
pub fn schedule(text: &str) -> Result<ScheduleArg, String> {
    serde_json::from_str(text).map(ScheduleArg).map_err(|e| {
        format!("{e}: a JSON list of steps, as a run's report prints them (e.g. [{{\"fault\":\"down\",\"secs\":60.0}}])")
    })
}
