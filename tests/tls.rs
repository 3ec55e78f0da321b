//! The providers' TLS (crates/core/src/provider/tls.rs): the system's root certificates are loaded at
//! the first handshake, not when a client is built. An https server is still verified against
//! them, and a plain-http server needs none.
//!
//! The roots come from rustls-native-certs, which reads `SSL_CERT_FILE`/`SSL_CERT_DIR` instead
//! of the system's store when they are set: that is how the test trusts its own CA, or none.
//! `tests/fixtures/tls/`: `ca.pem` (the test CA, its key thrown away) signed `localhost.pem`
//! (localhost, 127.0.0.1; `localhost.key`), both valid until 2076; made with openssl:
//! `genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`, `req -x509 … -addext
//! basicConstraints=critical,CA:TRUE`, `x509 -req … -extfile` (serverAuth, the SANs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use handoff_mock::{MockReply, MockServer};
use handoff_nvim::core::message::Message;
use handoff_nvim::core::provider::{
    probe, Api, ChatRequest, Provider, ProviderConfig, ProviderError, StreamEvent,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_util::sync::CancellationToken;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tls").join(name)
}

/// An https server on loopback with the fixture's localhost certificate, answering every
/// request with an empty 200. Returns its port.
fn https_server() -> u16 {
    let certs = CertificateDer::pem_file_iter(fixture("localhost.pem"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(fixture("localhost.key")).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            let config = config.clone();
            std::thread::spawn(move || {
                let _ = tcp.set_read_timeout(Some(std::time::Duration::from_secs(5)));
                let conn = rustls::ServerConnection::new(config).unwrap();
                let mut tls = rustls::StreamOwned::new(conn, tcp);
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                // A client that refused the certificate ends the handshake: read fails.
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf) {
                        Ok(n) if n > 0 => request.extend_from_slice(&buf[..n]),
                        _ => return,
                    }
                }
                let _ = tls.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                );
                tls.conn.send_close_notify();
                let _ = tls.flush();
            });
        }
    });
    port
}

/// Where rustls-native-certs looks for roots; `None` removes the variable.
fn roots(file: Option<&Path>, dir: Option<&Path>) {
    match file {
        Some(f) => std::env::set_var("SSL_CERT_FILE", f),
        None => std::env::remove_var("SSL_CERT_FILE"),
    }
    match dir {
        Some(d) => std::env::set_var("SSL_CERT_DIR", d),
        None => std::env::remove_var("SSL_CERT_DIR"),
    }
}

/// A provider's request to `config`: how it failed, or `None` when it got an answer (the https
/// server's empty 200 ends the stream early, which is not a connection error).
async fn connect_error(config: &ProviderConfig) -> Option<String> {
    let request = ChatRequest { messages: vec![Message::user("hi").into()], ..ChatRequest::default() };
    let mut config = config.clone();
    config.max_retries = 0;
    match Provider::new(config).stream(&request, &CancellationToken::new(), &mut |_| {}).await {
        Err(e @ (ProviderError::Connect { .. } | ProviderError::Client(_))) => Some(e.to_string()),
        _ => None,
    }
}

/// One test, so the environment changes happen in order, never while another test reads it.
#[tokio::test]
async fn https_is_verified_against_the_system_roots_and_plain_http_needs_none() {
    handoff_nvim::install_crypto_provider();
    let port = https_server();
    let https = ProviderConfig::new(Api::Openai, format!("https://localhost:{port}/v1"), "m");

    // The test CA as the system's roots: the server is trusted.
    roots(Some(&fixture("ca.pem")), None);
    assert_eq!(connect_error(&https).await, None);
    let r = probe(&https).await;
    assert!(r.detail().ends_with("answered HTTP 200"), "{}", r.detail());

    // This machine's own roots, which do not hold the test CA: the certificate is refused.
    roots(None, None);
    let error = connect_error(&https).await.expect("an untrusted certificate was accepted");
    assert!(error.contains("certificate"), "{error}");
    assert!(!probe(&https).await.ok());

    // No root certificate at all: https fails at the handshake, saying why...
    let missing = fixture("missing.pem");
    roots(Some(&missing), Some(&missing));
    let error = connect_error(&https).await.expect("TLS without roots");
    assert!(error.contains("No CA certificates were loaded from the system"), "{error}");

    // ... while plain http, which never needs them, works: the probe and a provider's request
    // (reqwest's own set-up loaded the roots in `build()`, and failed there for every URL).
    let server = MockServer::start().await.unwrap();
    let http = ProviderConfig::new(Api::Openai, server.openai_base_url(), "mock-model");
    let r = probe(&http).await;
    assert!(r.ok(), "{}", r.detail());
    server.push(MockReply::text("hello"));
    let request = ChatRequest { messages: vec![Message::user("hi").into()], ..ChatRequest::default() };
    let mut text = String::new();
    let result = Provider::new(http)
        .stream(&request, &CancellationToken::new(), &mut |e| {
            if let StreamEvent::TextDelta(t) = e {
                text.push_str(&t);
            }
        })
        .await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(text, "hello");
    roots(None, None);
}
