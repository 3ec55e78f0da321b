//! The HTTP clients' TLS: servers are verified against the system's root certificates, as
//! reqwest does by default, but the roots are loaded at the first TLS handshake instead of when
//! a client is built. reqwest's own set-up reads and parses every certificate under
//! `/etc/ssl/certs` in `build()` (~10% of a headless handoff's CPU), though a local model is
//! plain `http://127.0.0.1` and never needs them.

use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use rustls_platform_verifier::Verifier;

/// A client builder with the lazily verifying TLS (reqwest's own TLS set-up if the crypto
/// provider is somehow missing, which only costs the early load).
pub(crate) fn client_builder() -> reqwest::ClientBuilder {
    crate::install_crypto_provider();
    let builder = reqwest::Client::builder();
    match tls_config() {
        Some(config) => builder.tls_backend_preconfigured(config),
        None => builder,
    }
}

/// What reqwest's `build()` makes for rustls (every protocol version of the provider, SNI, ALPN
/// h2 then http/1.1, no client certificate), with the verifier made lazy.
fn tls_config() -> Option<rustls::ClientConfig> {
    let provider = CryptoProvider::get_default()?.clone();
    let verifier = LazyVerifier { provider: provider.clone(), verifier: OnceLock::new() };
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(rustls::ALL_VERSIONS)
        .ok()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Some(config)
}

/// rustls-platform-verifier's [`Verifier`] (what reqwest uses), built on the first certificate
/// to verify. A system without root certificates fails that handshake with the verifier's error
/// ("No CA certificates were loaded from the system"), not every client build.
#[derive(Debug)]
struct LazyVerifier {
    provider: Arc<CryptoProvider>,
    verifier: OnceLock<Result<Verifier, rustls::Error>>,
}

impl LazyVerifier {
    fn get(&self) -> Result<&Verifier, rustls::Error> {
        self.verifier
            .get_or_init(|| Verifier::new(self.provider.clone()))
            .as_ref()
            .map_err(Clone::clone)
    }
}

impl ServerCertVerifier for LazyVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.get()?.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.get()?.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.get()?.verify_tls13_signature(message, cert, dss)
    }

    /// Asked for the ClientHello, before any certificate: the provider's schemes, which is what
    /// the built verifier answers, so no roots are loaded for it.
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}
