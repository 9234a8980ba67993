//! `--web.config.file` on a loopback port: TLS, basic auth, the probes without it, a
//! config changed under a running server, and the files refused at start.

use std::{net::SocketAddr, path::Path, sync::Arc, time::Duration};

use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, pem::PemObject as _};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::{TcpListener, TcpStream},
    sync::{oneshot, watch},
};

use super::super::{Exporter, Limits, serve_with};
use super::WebConfig;
use crate::export::metrics::tests::{frame, sample, snapshot};
use tracer_core::snapshot::{Probe, SeriesKey};

/// A directory of its own under the system's temporary one, removed when dropped.
struct Dir(std::path::PathBuf);

impl Dir {
    fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("tracer-web-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }
    fn write(&self, name: &str, text: &str) -> std::path::PathBuf {
        let p = self.0.join(name);
        // A new file renamed over the old, as an editor or a Secret's update does: a
        // reader never sees half of it.
        let tmp = self.0.join(format!(".{name}.new"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &p).unwrap();
        p
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A certificate for localhost and 127.0.0.1, and its key, as PEM.
fn certificate() -> (String, String) {
    let c =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    (c.cert.pem(), c.signing_key.serialize_pem())
}

/// A cost-4 hash (the least bcrypt takes): the tests check what is accepted, not its cost.
fn hash(password: &str) -> String {
    bcrypt::hash(password, 4).unwrap()
}

/// A directory with a certificate (tls.crt, tls.key) and a web config (web.yml) with TLS
/// and the user `prom` whose password is `password`.
fn tls_dir(name: &str, password: &str) -> (Dir, String) {
    let dir = Dir::new(name);
    let (cert, key) = certificate();
    dir.write("tls.crt", &cert);
    dir.write("tls.key", &key);
    dir.write("web.yml", &config(password));
    (dir, cert)
}

fn config(password: &str) -> String {
    format!(
        "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n\
         basic_auth_users:\n  prom: '{}'\n",
        hash(password)
    )
}

fn limits() -> Limits {
    Limits {
        max_connections: 8,
        header_read_timeout: Duration::from_millis(500),
        request_timeout: Duration::from_secs(5),
        max_header_bytes: 8 * 1024,
    }
}

/// A server of a frame with one series, with the web config at `path`.
async fn server(path: &Path) -> (SocketAddr, Arc<WebConfig>, oneshot::Sender<()>) {
    let mut s = snapshot();
    s.cgroups.insert(1, "/a".into());
    s.record(SeriesKey::new(Probe::VfsRmdir, 1), 5_000);
    let (tx, rx) = watch::channel(Some(Arc::new(frame(s))));
    let web = Arc::new(WebConfig::load(path).unwrap());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let served = Arc::clone(&web);
    tokio::spawn(async move {
        let _tx = tx;
        let _ = serve_with(
            listener,
            Arc::new(Exporter::new(rx)),
            limits(),
            Some(served),
            async {
                let _ = stopped.await;
            },
        )
        .await;
    });
    (addr, web, stop)
}

fn client(ca_pem: &str, identity: Option<(&str, &str)>) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    #[expect(deprecated, reason = "the provider the server uses")]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match identity {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()],
                PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// GET `path` over TLS, with `user:password` if given: the raw response, empty when the
/// handshake failed.
async fn get(
    addr: SocketAddr,
    connector: &tokio_rustls::TlsConnector,
    path: &str,
    credentials: Option<&str>,
) -> String {
    use base64::Engine as _;
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let Ok(mut tls) = connector.connect(name, tcp).await else {
        return String::new();
    };
    let auth = credentials.map_or(String::new(), |c| {
        format!(
            "Authorization: Basic {}\r\n",
            base64::engine::general_purpose::STANDARD.encode(c)
        )
    });
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{auth}\r\n");
    let _ = tls.write_all(request.as_bytes()).await;
    let mut out = Vec::new();
    // A server that closes without close_notify is an error here: what came is kept.
    let _ = tokio::time::timeout(Duration::from_secs(10), tls.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

fn status(response: &str) -> Option<u16> {
    response.split_whitespace().nth(1)?.parse().ok()
}

#[tokio::test]
async fn metrics_need_tls_and_the_password_and_the_probes_need_neither_credentials() {
    let (dir, ca) = tls_dir("auth", "s3cret");
    let (addr, _web, _stop) = server(&dir.0.join("web.yml")).await;
    let c = client(&ca, None);
    let ok = get(addr, &c, "/metrics", Some("prom:s3cret")).await;
    assert_eq!(status(&ok), Some(200), "{ok}");
    let labels = [("probe", "vfs_rmdir"), ("cgroup", "/a")];
    assert_eq!(
        sample(&ok, "tracer_cgroup_calls_total", &labels),
        Some(1.0),
        "{ok}"
    );
    let none = get(addr, &c, "/metrics", None).await;
    assert_eq!(status(&none), Some(401), "{none}");
    assert!(
        none.to_ascii_lowercase()
            .contains("www-authenticate: basic realm=\"tracer\""),
        "{none}"
    );
    assert_eq!(
        status(&get(addr, &c, "/metrics", Some("prom:wrong")).await),
        Some(401)
    );
    assert_eq!(
        status(&get(addr, &c, "/metrics", Some("root:s3cret")).await),
        Some(401)
    );
    assert_eq!(status(&get(addr, &c, "/", None).await), Some(401));
    // The kubelet's probes carry no credentials.
    assert_eq!(status(&get(addr, &c, "/-/healthy", None).await), Some(200));
    assert_eq!(status(&get(addr, &c, "/-/ready", None).await), Some(200));
}

#[tokio::test]
async fn plain_http_to_the_tls_port_is_told_to_use_https() {
    let (dir, _) = tls_dir("plain", "s3cret");
    let (addr, _web, _stop) = server(&dir.0.join("web.yml")).await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await;
    let out = String::from_utf8_lossy(&out);
    assert_eq!(status(&out), Some(400), "{out}");
    assert!(out.contains("use https://"), "{out}");
    assert!(!out.contains("tracer_"), "{out}");
}

#[tokio::test]
async fn a_handshake_that_never_ends_is_cut_at_the_header_timeout() {
    let (dir, _) = tls_dir("slow", "s3cret");
    let (addr, _web, _stop) = server(&dir.0.join("web.yml")).await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    // The start of a TLS record, then nothing.
    s.write_all(&[22, 3, 1, 0, 200, 1]).await.unwrap();
    let mut out = Vec::new();
    // Cut at the header timeout (500 ms), well before the request timeout (5 s); 4 s
    // leaves a loaded host room and still tells the two apart.
    let read = tokio::time::timeout(Duration::from_secs(4), s.read_to_end(&mut out)).await;
    assert!(read.is_ok(), "the connection was still open after 4 s");
    assert!(out.is_empty());
}

#[tokio::test]
async fn a_changed_password_takes_effect_without_a_restart_and_verified_ones_are_remembered() {
    let (dir, ca) = tls_dir("change", "old");
    let (addr, web, _stop) = server(&dir.0.join("web.yml")).await;
    let c = client(&ca, None);
    for _ in 0..3 {
        assert_eq!(
            status(&get(addr, &c, "/metrics", Some("prom:old")).await),
            Some(200)
        );
    }
    // Three scrapes with credentials that passed: one bcrypt check.
    assert_eq!(web.bcrypt_checks(), 1);
    for _ in 0..2 {
        assert_eq!(
            status(&get(addr, &c, "/metrics", Some("prom:bad")).await),
            Some(401)
        );
    }
    assert_eq!(
        web.bcrypt_checks(),
        3,
        "wrong passwords are checked every time"
    );

    dir.write("web.yml", &config("new"));
    assert_eq!(
        status(&get(addr, &c, "/metrics", Some("prom:old")).await),
        Some(401)
    );
    assert_eq!(
        status(&get(addr, &c, "/metrics", Some("prom:new")).await),
        Some(200)
    );

    // A file that no longer parses: the last good one stays.
    dir.write("web.yml", "basic_auth_users: [unclosed\n");
    assert_eq!(
        status(&get(addr, &c, "/metrics", Some("prom:new")).await),
        Some(200)
    );
    assert_eq!(
        status(&get(addr, &c, "/metrics", Some("prom:old")).await),
        Some(401)
    );
    // Nor may a change turn TLS off under the listener's clients.
    dir.write(
        "web.yml",
        &format!("basic_auth_users:\n  prom: '{}'\n", hash("plain")),
    );
    assert_eq!(
        status(&get(addr, &c, "/metrics", Some("prom:new")).await),
        Some(200)
    );
}

#[tokio::test]
async fn a_replaced_certificate_is_served_without_a_restart() {
    let (dir, old_ca) = tls_dir("rotate", "pw");
    let (addr, _web, _stop) = server(&dir.0.join("web.yml")).await;
    assert_eq!(
        status(&get(addr, &client(&old_ca, None), "/-/healthy", None).await),
        Some(200)
    );
    let (cert, key) = certificate();
    dir.write("tls.key", &key);
    dir.write("tls.crt", &cert);
    assert_eq!(
        status(&get(addr, &client(&cert, None), "/-/healthy", None).await),
        Some(200)
    );
    assert_eq!(
        get(addr, &client(&old_ca, None), "/-/healthy", None).await,
        ""
    );
}

#[tokio::test]
async fn client_certificates_are_verified_against_the_client_ca() {
    let (dir, ca) = tls_dir("mtls", "pw");
    let (client_cert, client_key) = certificate();
    dir.write("client-ca.crt", &client_cert);
    dir.write(
        "web.yml",
        "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n  \
         client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: client-ca.crt\n",
    );
    let (addr, _web, _stop) = server(&dir.0.join("web.yml")).await;
    let with = client(&ca, Some((&client_cert, &client_key)));
    assert_eq!(status(&get(addr, &with, "/metrics", None).await), Some(200));
    let (other_cert, other_key) = certificate();
    let stranger = client(&ca, Some((&other_cert, &other_key)));
    assert_eq!(status(&get(addr, &stranger, "/metrics", None).await), None);
    assert_eq!(
        status(&get(addr, &client(&ca, None), "/metrics", None).await),
        None
    );
}

/// The one-line error `WebConfig::load` gives for a web config of `text`, beside a
/// certificate and key.
fn refusal(name: &str, text: &str) -> String {
    let dir = Dir::new(name);
    let (cert, key) = certificate();
    dir.write("tls.crt", &cert);
    dir.write("tls.key", &key);
    let e = WebConfig::load(&dir.write("web.yml", text))
        .unwrap_err()
        .to_string();
    assert!(!e.contains('\n'), "not one line: {e}");
    e
}

#[test]
fn files_that_cannot_be_used_are_refused_on_one_line_saying_why() {
    let e = refusal(
        "unknown",
        "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n  cipher_suites: [x]\n",
    );
    assert!(e.contains("cipher_suites"), "{e}");
    let e = refusal("nokey", "tls_server_config:\n  cert_file: tls.crt\n");
    assert!(e.contains("cert_file without key_file"), "{e}");
    let e = refusal(
        "missing",
        "tls_server_config:\n  cert_file: nope.crt\n  key_file: tls.key\n",
    );
    assert!(e.contains("nope.crt"), "{e}");
    let e = refusal(
        "swapped",
        "tls_server_config:\n  cert_file: tls.key\n  key_file: tls.crt\n",
    );
    assert!(e.contains("cert_file"), "{e}");
    let e = refusal("hash", "basic_auth_users:\n  prom: s3cret\n");
    assert!(e.contains("prom's password is not a bcrypt hash"), "{e}");
    let e = refusal(
        "unverified",
        "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n  client_auth_type: RequireAnyClientCert\n",
    );
    assert!(e.contains("RequireAnyClientCert is not served"), "{e}");
    let e = refusal(
        "old",
        "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n  min_version: TLS10\n",
    );
    assert!(e.contains("only TLS12 and TLS13"), "{e}");
    let e = refusal("yaml", "basic_auth_users: [unclosed\n");
    assert!(e.starts_with("--web.config.file "), "{e}");
    let e = WebConfig::load(Path::new("/nonexistent/web.yml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("/nonexistent/web.yml: cannot read it"), "{e}");
}

#[test]
fn a_file_of_comments_alone_asks_for_nothing_and_a_node_exporter_file_parses() {
    let dir = Dir::new("empty");
    let web = WebConfig::load(&dir.write("web.yml", "# nothing yet\n")).unwrap();
    assert!(!web.tls());
    assert!(!web.current().needs_auth());
    let web = WebConfig::load(&dir.write(
        "web.yml",
        &format!(
            "http_server_config:\n  http2: false\nbasic_auth_users:\n  prom: {}\n",
            hash("x")
        ),
    ))
    .unwrap();
    assert!(web.current().needs_auth());
}

#[test]
fn the_hash_checked_for_unknown_users_is_a_cost_10_bcrypt_hash() {
    let parts: bcrypt::HashParts = super::DUMMY_HASH.parse().unwrap();
    assert_eq!(parts.get_cost(), 10);
}
