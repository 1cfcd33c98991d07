//! The roots the SDK's HTTPS client trusts. The SDK's default client loads the system's CA
//! bundle (about 140 roots) while the client is built, inside the Lambda's init: on this
//! machine that parse was a third of the ws-handler's and the canary's time to ready
//! (BENCHMARKS.md, section 7). The Lambdas call only AWS service endpoints, whose
//! certificates chain to Amazon Trust Services, so by default they trust exactly the five
//! roots Amazon Trust Services recommends for a custom trust store
//! (<https://www.amazontrust.com/repository/>), compiled in: five certificates to parse
//! instead of a bundle to read.
//!
//! `WSDR_TLS_ROOTS=system` trusts what the SDK's own client trusts (the system bundle, and the
//! proxy settings `HTTPS_PROXY`/`NO_PROXY` from the environment): for an endpoint override behind
//! a private CA, or a TLS-inspecting proxy.

use aws_smithy_runtime_api::client::http::SharedHttpClient;

/// Amazon Root CA 1-4 and Starfield Services Root Certificate Authority - G2, PEM.
pub const AMAZON_TRUST_SERVICES_ROOTS: &str = include_str!("../certs/amazon-trust-services.pem");

/// The variable that chooses the roots.
pub const ROOTS_VAR: &str = "WSDR_TLS_ROOTS";

/// Which roots the SDK's HTTPS client trusts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Roots {
    /// The five Amazon Trust Services roots, compiled in (the default).
    AmazonTrustServices,
    /// The SDK's default client: the system bundle and proxy settings from the environment.
    System,
}

impl Roots {
    /// The choice in `WSDR_TLS_ROOTS`: unset or `amazon` for the compiled-in roots, `system`
    /// for the system's.
    pub fn from_env_value(value: Option<&str>) -> Result<Self, crate::Error> {
        match value.map(str::trim) {
            None | Some("") | Some("amazon") => Ok(Self::AmazonTrustServices),
            Some("system") => Ok(Self::System),
            Some(other) => Err(crate::Error::Config(format!(
                "{ROOTS_VAR}=`{other}`: expected `amazon` (the default) or `system`"
            ))),
        }
    }
}

/// The SDK's own hyper/rustls client (ring: the one crypto provider the whole workspace
/// links, so no build compiles aws-lc's C and C++ as well), trusting `roots`: the compiled-in
/// Amazon Trust Services roots, or the system's with the proxy settings from the environment
/// (`HTTPS_PROXY`, `NO_PROXY`), as the SDK's default client reads them.
pub fn https_client(roots: Roots) -> Result<SharedHttpClient, crate::Error> {
    use aws_smithy_http_client::proxy::ProxyConfig;
    use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode, TlsContext, TrustStore};
    use aws_smithy_http_client::{Builder, ConnectorBuilder};
    let trust = match roots {
        Roots::AmazonTrustServices => {
            TrustStore::empty().with_pem_certificate(AMAZON_TRUST_SERVICES_ROOTS.as_bytes())
        }
        Roots::System => TrustStore::default(),
    };
    let context = TlsContext::builder()
        .with_trust_store(trust)
        .build()
        .map_err(|e| crate::Error::Config(format!("TLS context: {e}")))?;
    Ok(match roots {
        Roots::AmazonTrustServices => Builder::new()
            .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
            .tls_context(context)
            .build_https(),
        Roots::System => Builder::new().build_with_connector_fn(move |settings, components| {
            let mut connector = ConnectorBuilder::default()
                .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
                .tls_context(context.clone());
            connector.set_connector_settings(settings.cloned());
            if let Some(components) = components {
                connector.set_sleep_impl(components.sleep_impl());
            }
            connector.set_proxy_config(Some(ProxyConfig::from_env()));
            connector.build()
        }),
    })
}

/// [`https_client`] with the Amazon Trust Services roots.
pub fn amazon_https_client() -> Result<SharedHttpClient, crate::Error> {
    https_client(Roots::AmazonTrustServices)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_root_choices_build_the_sdk_client() {
        for roots in [Roots::AmazonTrustServices, Roots::System] {
            assert!(https_client(roots).is_ok(), "{roots:?}");
        }
    }
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::CertificateDer;

    fn roots() -> Vec<CertificateDer<'static>> {
        CertificateDer::pem_slice_iter(AMAZON_TRUST_SERVICES_ROOTS.as_bytes())
            .collect::<Result<_, _>>()
            .expect("the compiled-in roots are valid PEM")
    }

    #[test]
    fn the_five_compiled_in_roots_are_trust_anchors_of_mozillas_program() {
        let roots = roots();
        assert_eq!(roots.len(), 5);
        for der in &roots {
            let anchor = webpki::anchor_from_trusted_cert(der).expect("a usable trust anchor");
            let in_mozilla = webpki_roots::TLS_SERVER_ROOTS.iter().any(|known| {
                known.subject == anchor.subject
                    && known.subject_public_key_info == anchor.subject_public_key_info
            });
            assert!(in_mozilla, "root not in webpki-roots: {:?}", anchor.subject);
        }
        let mut store = rustls::RootCertStore::empty();
        assert_eq!(store.add_parsable_certificates(roots), (5, 0));
    }

    #[test]
    fn the_roots_setting_is_checked() {
        use Roots::*;
        assert_eq!(Roots::from_env_value(None).ok(), Some(AmazonTrustServices));
        assert_eq!(
            Roots::from_env_value(Some(" ")).ok(),
            Some(AmazonTrustServices)
        );
        assert_eq!(
            Roots::from_env_value(Some("amazon")).ok(),
            Some(AmazonTrustServices)
        );
        assert_eq!(Roots::from_env_value(Some("system")).ok(), Some(System));
        let err = Roots::from_env_value(Some("mozilla")).expect_err("unknown value");
        assert!(
            err.to_string().contains("WSDR_TLS_ROOTS=`mozilla`"),
            "{err}"
        );
    }

    /// The SDK parses the trust store when it builds the connector, and `expect`s on a bad
    /// certificate: one real call through the client runs that path (against a loopback
    /// port that closes every connection, so the call fails, but as a dispatch error).
    #[cfg(feature = "dynamodb")]
    #[tokio::test]
    async fn a_call_through_the_client_builds_its_connector() {
        use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                drop(socket);
            }
        });
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .endpoint_url(format!("https://127.0.0.1:{port}"))
            .http_client(amazon_https_client().expect("client"))
            .retry_config(aws_sdk_dynamodb::config::retry::RetryConfig::disabled())
            .credentials_provider(Credentials::new("k", "s", None, None, "test"))
            .build();
        let client = aws_sdk_dynamodb::Client::from_conf(config);
        let err = client
            .list_tables()
            .send()
            .await
            .expect_err("nothing serves TLS there");
        assert!(
            matches!(err, aws_sdk_dynamodb::error::SdkError::DispatchFailure(_)),
            "{err:?}"
        );
    }
}
