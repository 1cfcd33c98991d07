//! Root certificates at cold start. rustls-native-certs (behind the AWS SDK's HTTPS client
//! and the canary's WebSocket client) loads the system's CA bundle file *and* every file of
//! the certificate directory. On Amazon Linux 2023 the directory holds the bundle again (and
//! its "trust" variant), so it is parsed twice or more (aws/aws-lambda-dotnet#1661 measured
//! the same double load); on Debian the directory holds one file per CA, and loading them
//! was 6.5 ms of ws-handler's 11 ms cold start here (`wsdr-bench lambda-ready ws-handler
//! --env SSL_CERT_DIR=/empty`). With `SSL_CERT_FILE` set, only that file is read: the same
//! roots, one parse.

/// The system CA bundle: Amazon Linux, RHEL and Fedora first (the Lambda runtime), then
/// Debian and Ubuntu.
pub const CA_BUNDLES: &[&str] = &[
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/certs/ca-certificates.crt",
];

/// The bundle to point `SSL_CERT_FILE` at: none when the environment already chooses
/// (`SSL_CERT_FILE` or `SSL_CERT_DIR` set) or no candidate exists (the platform's own probe
/// then runs as before).
pub fn choose_bundle<'a>(
    candidates: &[&'a str],
    env: impl Fn(&str) -> Option<String>,
    exists: impl Fn(&str) -> bool,
) -> Option<&'a str> {
    if env("SSL_CERT_FILE").is_some() || env("SSL_CERT_DIR").is_some() {
        return None;
    }
    candidates.iter().copied().find(|path| exists(path))
}

/// Point root loading at the one system bundle (see the module). Call first in `main`,
/// before any thread starts: it sets a process environment variable.
pub fn prefer_one_ca_bundle() -> Option<&'static str> {
    let chosen = choose_bundle(
        CA_BUNDLES,
        |name| std::env::var(name).ok(),
        |path| std::path::Path::new(path).is_file(),
    );
    if let Some(path) = chosen {
        std::env::set_var("SSL_CERT_FILE", path);
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_existing_bundle_is_chosen_unless_the_environment_chooses() {
        let none = |_: &str| None;
        let only_debian = |p: &str| p == "/etc/ssl/certs/ca-certificates.crt";
        assert_eq!(
            choose_bundle(CA_BUNDLES, none, |_| true),
            Some("/etc/pki/tls/certs/ca-bundle.crt")
        );
        assert_eq!(
            choose_bundle(CA_BUNDLES, none, only_debian),
            Some("/etc/ssl/certs/ca-certificates.crt")
        );
        assert_eq!(choose_bundle(CA_BUNDLES, none, |_| false), None);
        let file_set = |n: &str| (n == "SSL_CERT_FILE").then(|| "/my/bundle.pem".to_owned());
        assert_eq!(choose_bundle(CA_BUNDLES, file_set, |_| true), None);
        let dir_set = |n: &str| (n == "SSL_CERT_DIR").then(|| "/my/certs".to_owned());
        assert_eq!(choose_bundle(CA_BUNDLES, dir_set, |_| true), None);
    }
}
