//! Host cases of `tracer serve --web.config.file`: TLS and basic auth.
//!
//! A certificate for localhost and 127.0.0.1 is made at test time (rcgen), and bcrypt
//! hashes by the bcrypt crate; nothing secret is kept in the repository. For `serve-check`,
//! a real Prometheus scrapes over TLS with basic auth and gets the series, while its jobs
//! without credentials, over plain HTTP, and with a password not yet in force are refused;
//! the password is then changed in the file under the running server and the two swap. A
//! malformed web config ends tracer with one line and exit 1, nothing bound or attached.
//! For `harden-check`, the hostile clients of [`super::host_harden`] over TLS: idle
//! connections that never start a handshake, handshakes and request heads dripped a byte
//! at a time, wrong passwords by the hundred, while a scraper with the right ones is
//! answered throughout.

use std::{
    io::{Read as _, Write as _},
    net::{SocketAddr, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::Arc,
    thread,
    time::{Duration, Instant},
};

use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject as _};

use super::{
    harness::{Fail, Tally, Verdict, wrong},
    prometheus::{Prometheus, free_port},
    scraper::Scraper,
};

const SERVE: &str = "host serve tls";
const HARDEN: &str = "host harden tls";
const USER: &str = "prometheus";
/// The server's default header timeout, which the handshake shares.
pub(super) const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// The server's default request timeout.
pub(super) const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A directory with a certificate, its key and a web config, removed when dropped.
struct Pki {
    dir: PathBuf,
    /// The certificate, which clients trust as their CA.
    cert: String,
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Pki {
    fn new(tag: &str, password: &str) -> Result<Self, String> {
        let dir = std::env::temp_dir().join(format!("tracer-tls-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let made = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
            .map_err(|e| format!("rcgen: {e}"))?;
        let pki = Self {
            dir,
            cert: made.cert.pem(),
        };
        pki.write("tls.crt", &pki.cert)?;
        pki.write("tls.key", &made.signing_key.serialize_pem())?;
        pki.set_password(password)?;
        Ok(pki)
    }

    /// Write `name` whole, then rename it in place: tracer never reads half a file.
    fn write(&self, name: &str, text: &str) -> Result<(), String> {
        let tmp = self.dir.join(format!(".{name}.new"));
        std::fs::write(&tmp, text).map_err(|e| format!("{}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, self.dir.join(name)).map_err(|e| format!("{name}: {e}"))
    }

    /// A web config with TLS and [`USER`] of `password` (a cost-10 hash, as `htpasswd -B`
    /// makes).
    fn set_password(&self, password: &str) -> Result<(), String> {
        let hash = bcrypt::hash(password, 10).map_err(|e| format!("bcrypt: {e}"))?;
        self.write(
            "web.yml",
            &format!(
                "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n\
                 basic_auth_users:\n  {USER}: '{hash}'\n"
            ),
        )
    }

    fn web_config(&self) -> PathBuf {
        self.dir.join("web.yml")
    }

    fn client(&self) -> Result<Arc<rustls::ClientConfig>, String> {
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(self.cert.as_bytes()) {
            roots
                .add(c.map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?;
        }
        #[expect(deprecated, reason = "the provider tracer serves with")]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        Ok(Arc::new(
            rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| e.to_string())?
                .with_root_certificates(roots)
                .with_no_client_auth(),
        ))
    }
}

/// A TLS connection to `addr` as localhost, its handshake done.
fn connect(
    addr: SocketAddr,
    client: &Arc<rustls::ClientConfig>,
) -> Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>, String> {
    let tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| format!("connect: {e}"))?;
    tcp.set_read_timeout(Some(Duration::from_secs(15)))
        .map_err(|e| e.to_string())?;
    let name = ServerName::try_from("localhost").map_err(|e| e.to_string())?;
    let conn =
        rustls::ClientConnection::new(Arc::clone(client), name).map_err(|e| e.to_string())?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    while tls.conn.is_handshaking() {
        tls.conn
            .complete_io(&mut tls.sock)
            .map_err(|e| format!("handshake: {e}"))?;
    }
    Ok(tls)
}

/// The `Authorization` header of [`USER`] with `password`, its line end included.
fn basic(password: &str) -> String {
    use base64::Engine as _;
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{password}"));
    format!("Authorization: Basic {token}\r\n")
}

/// `GET path` over TLS with `password` if any: the status and the body.
fn get(
    addr: SocketAddr,
    client: &Arc<rustls::ClientConfig>,
    path: &str,
    password: Option<&str>,
) -> Result<(u16, String), String> {
    let auth = password.map_or(String::new(), basic);
    exchange(
        addr,
        client,
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{auth}\r\n").as_bytes(),
    )
}

/// Send `request` over TLS and read the answer to the close.
fn exchange(
    addr: SocketAddr,
    client: &Arc<rustls::ClientConfig>,
    request: &[u8],
) -> Result<(u16, String), String> {
    let mut tls = connect(addr, client)?;
    // An early answer (431) may close before all is sent.
    let _ = tls.write_all(request).and_then(|()| tls.flush());
    let mut answer = Vec::new();
    let read = tls.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok());
    match (status, read) {
        (Some(s), _) => Ok((s, text)),
        (None, Err(e)) => Err(format!("read: {e}")),
        (None, Ok(_)) => Err("closed without an answer".into()),
    }
}

/// `tracer serve` of a model on a free port with the web config of `pki`, up once a scrape
/// with `password` shows its first refresh.
fn start(tracer: &Path, pki: &Pki, password: &str) -> Result<(Child, SocketAddr), String> {
    let port = free_port().map_err(|e| e.to_string())?;
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut child = Command::new(tracer)
        .args(["serve", "--model", "umount-storm", "--set", "mounts=200"])
        .arg("--listen")
        .arg(addr.to_string())
        .arg("--web.config.file")
        .arg(pki.web_config())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting tracer serve: {e}"))?;
    let client = pki.client()?;
    let start = Instant::now();
    loop {
        match get(addr, &client, "/metrics", Some(password)) {
            Ok((200, body)) if body.contains("\ntracer_source_up 1\n") => return Ok((child, addr)),
            got if start.elapsed() > Duration::from_secs(30) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("tracer serve over TLS never answered: {got:?}"));
            }
            _ => thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// Kill and reap whatever happens.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A malformed web config: exit 1, one line on stderr naming the file, the port never
/// bound, and the live source never opened (no "recording since").
fn malformed(tracer: &Path) -> Verdict {
    let pki = Pki::new("malformed", "x")?;
    pki.write(
        "web.yml",
        "tls_server_config:\n  cert_file: tls.crt\n  key_fil: tls.key\n",
    )?;
    let port = free_port().map_err(|e| e.to_string())?;
    let listen = format!("127.0.0.1:{port}");
    let mut child = Command::new(tracer)
        .args(["serve", "--listen", &listen, "--web.config.file"])
        .arg(pki.web_config())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("tracer serve: {e}"))?;
    let mut bound = false;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        bound |= TcpStream::connect(&listen).is_ok();
        if child.try_wait().map_err(|e| e.to_string())?.is_some() {
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    let lines: Vec<&str> = said.lines().collect();
    match (out.status.code(), lines.as_slice()) {
        (Some(1), [line])
            if line.contains("--web.config.file") && line.contains("key_fil") && !bound =>
        {
            Ok(format!("exit 1, port {port} never bound: {line}"))
        }
        (code, _) => Err(wrong!(
            "exit {code:?}, port bound: {bound}, {} lines on stderr: {}",
            lines.len(),
            said.trim()
        )),
    }
}

/// The `serve-check` cases over TLS with basic auth, against the tracer binary at `tracer`.
pub fn serve_cases(tracer: &Path, tally: &mut Tally) {
    tally.record(
        SERVE,
        "a malformed --web.config.file: one line, exit 1, nothing bound or attached",
        &malformed(tracer),
    );
    let started = Pki::new("serve", "old-password").and_then(|pki| {
        let (child, addr) = start(tracer, &pki, "old-password")?;
        Ok((pki, Killed(child), addr))
    });
    let (pki, mut child, addr) = match started {
        Ok(s) => s,
        Err(e) => {
            tally.record(
                SERVE,
                "tracer serve starts with TLS and basic auth",
                &Err(Fail::Wrong(e)),
            );
            return;
        }
    };
    let job = |name: &str, scheme: &str, password: Option<&str>| {
        let tls = if scheme == "https" {
            "    tls_config: {ca_file: ca.crt}\n"
        } else {
            ""
        };
        let auth = password.map_or(String::new(), |p| {
            format!("    basic_auth: {{username: {USER}, password: '{p}'}}\n")
        });
        format!(
            "  - job_name: {name}\n    scheme: {scheme}\n{tls}{auth}    static_configs:\n      - targets: ['{addr}']\n"
        )
    };
    let config = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n{}{}{}{}",
        job("auth", "https", Some("old-password")),
        job("new", "https", Some("new-password")),
        job("anonymous", "https", None),
        job("plain", "http", Some("old-password")),
    );
    let prometheus =
        match Prometheus::with_config("tls", &config, &[("ca.crt", pki.cert.as_str())], false) {
            Ok(p) => p,
            Err(e) => {
                tally.record(SERVE, "Prometheus scrapes over TLS", &Err(Fail::Wrong(e)));
                return;
            }
        };
    let limit = Duration::from_secs(30);
    let series = prometheus
        .settle("up{job=\"auth\"}", 1.0, limit)
        .and_then(|_| {
            let expr = "count(tracer_latency_seconds_count{job=\"auth\"})";
            let n = prometheus.settle(expr, 1.0, limit).or_else(|_| {
                prometheus
                    .query(expr)?
                    .first()
                    .map(|(_, v)| *v)
                    .ok_or_else(|| format!("{expr}: no series"))
            })?;
            Ok(format!("up 1, {expr} = {n}"))
        });
    tally.record(
        SERVE,
        "Prometheus 2.42 scrapes over TLS with basic auth and gets the series",
        &series,
    );
    for (job, why) in [
        ("anonymous", "without credentials"),
        ("plain", "over plain HTTP"),
        ("new", "with a password not (yet) in the file"),
    ] {
        let expr = format!("up{{job=\"{job}\"}}");
        let refused = prometheus
            .settle(&expr, 0.0, limit)
            .map(|v| format!("{expr} = {v}"));
        tally.record(SERVE, &format!("a scrape {why} is refused"), &refused);
    }
    let pid = child.0.id();
    let changed = pki.set_password("new-password").and_then(|()| {
        let new = prometheus.settle("up{job=\"new\"}", 1.0, limit)?;
        let old = prometheus.settle("up{job=\"auth\"}", 0.0, limit)?;
        match child.0.try_wait() {
            Ok(None) => Ok(format!(
                "same process {pid}: up{{job=\"new\"}} = {new}, up{{job=\"auth\"}} = {old}"
            )),
            other => Err(format!("tracer serve exited: {other:?}")),
        }
    });
    tally.record(
        SERVE,
        "a changed password takes effect without a restart, the old one refused",
        &changed,
    );
}

/// A scraper over TLS with `password`, beside the hostile clients: a scrape is answered
/// when it is a 200 with the metrics.
fn scraper(addr: SocketAddr, client: &Arc<rustls::ClientConfig>, password: &str) -> Scraper {
    let (client, password) = (Arc::clone(client), password.to_owned());
    Scraper::start("scrapes over TLS", move || {
        let asked = Instant::now();
        match get(addr, &client, "/metrics", Some(&password)) {
            Ok((200, body)) if body.contains("tracer_source_up") => Ok(asked.elapsed()),
            Ok((code, _)) => Err(format!("status {code}")),
            Err(e) => Err(e),
        }
    })
}

/// Whether the server closed `s` within `limit`: a read gives end of file or an error.
fn closed_within(s: &TcpStream, limit: Duration) -> bool {
    let _ = s.set_read_timeout(Some(limit));
    let mut buf = [0u8; 4096];
    let mut reader = s;
    loop {
        match reader.read(&mut buf) {
            Ok(0) | Err(_) => return true,
            Ok(_) => {}
        }
    }
}

/// 500 connections that never start a handshake, 50 handshakes dripped a byte every
/// 200 ms, 50 request heads dripped the same way after a handshake: all cut by the header
/// timeout; 50 clients that send a request and never read the answer, cut by the request
/// timeout; while the scraper goes on.
fn slow(addr: SocketAddr, client: &Arc<rustls::ClientConfig>) -> Verdict {
    let background = scraper(addr, client, "right");
    let idle: Vec<TcpStream> = (0..500)
        .map(|_| TcpStream::connect(addr).map_err(|e| format!("connect: {e}")))
        .collect::<Result<_, _>>()?;
    // The first bytes a client sends: its ClientHello.
    let name = ServerName::try_from("localhost").map_err(|e| e.to_string())?;
    let mut hello = Vec::new();
    rustls::ClientConnection::new(Arc::clone(client), name)
        .map_err(|e| e.to_string())?
        .write_tls(&mut hello)
        .map_err(|e| e.to_string())?;
    let mut handshakes: Vec<TcpStream> = (0..50)
        .map(|_| TcpStream::connect(addr).map_err(|e| format!("connect: {e}")))
        .collect::<Result<_, _>>()?;
    let mut heads = (0..50)
        .map(|_| {
            let mut t = connect(addr, client)?;
            t.write_all(b"GET /metrics HTTP/1.1\r\n")
                .and_then(|()| t.flush())
                .map_err(|e| format!("send: {e}"))?;
            Ok(t)
        })
        .collect::<Result<Vec<_>, String>>()?;
    // Whole requests whose answers are never read: cut at the request timeout.
    let readers = (0..50)
        .map(|_| {
            let mut t = connect(addr, client)?;
            t.write_all(
                format!("GET /metrics HTTP/1.1\r\nHost: x\r\n{}\r\n", basic("right")).as_bytes(),
            )
            .and_then(|()| t.flush())
            .map_err(|e| format!("send: {e}"))?;
            Ok(t)
        })
        .collect::<Result<Vec<_>, String>>()?;
    let start = Instant::now();
    let mut cut_at = None;
    for byte in hello.iter().cycle() {
        if start.elapsed() > HEADER_TIMEOUT * 5 {
            break;
        }
        thread::sleep(Duration::from_millis(200));
        let dripping = handshakes
            .iter_mut()
            .map(|s| s.write_all(&[*byte]).is_ok())
            .filter(|ok| *ok)
            .count()
            + heads
                .iter_mut()
                .map(|t| t.write_all(b"X").and_then(|()| t.flush()).is_ok())
                .filter(|ok| *ok)
                .count();
        if dripping == 0 {
            cut_at = Some(start.elapsed());
            break;
        }
    }
    let idle_cut = idle
        .iter()
        .filter(|s| closed_within(s, HEADER_TIMEOUT * 3))
        .count();
    let readers_cut = readers
        .iter()
        .filter(|t| closed_within(&t.sock, REQUEST_TIMEOUT * 3))
        .count();
    let scrapes = background.finish()?;
    if readers_cut != readers.len() {
        return Err(wrong!(
            "{readers_cut} of 50 non-reading clients cut; {scrapes}"
        ));
    }
    let Some(cut_at) = cut_at else {
        return Err(wrong!(
            "dripped handshakes or heads still open after {:?}",
            HEADER_TIMEOUT * 5
        ));
    };
    if idle_cut != idle.len() {
        return Err(wrong!(
            "{idle_cut} of 500 connections without a handshake cut"
        ));
    }
    Ok(format!(
        "500 without a handshake cut; 50 dripped handshakes and 50 dripped heads cut after {:.1} s; 50 non-reading clients cut; {scrapes}",
        cut_at.as_secs_f64()
    ))
}

/// 400 requests with wrong passwords from 8 clients at once, and hostile requests over TLS:
/// each gets its status, while the scraper (whose password passed once) goes on.
fn hostile(addr: SocketAddr, client: &Arc<rustls::ClientConfig>) -> Verdict {
    let background = scraper(addr, client, "right");
    let wrong: Vec<thread::JoinHandle<Vec<String>>> = (0..8)
        .map(|i| {
            let c = Arc::clone(client);
            thread::spawn(move || {
                (0..50)
                    .filter_map(|j| {
                        match get(addr, &c, "/metrics", Some(&format!("guess-{i}-{j}"))) {
                            Ok((401, _)) => None,
                            other => Some(format!("wrong password: {other:?}")),
                        }
                    })
                    .collect()
            })
        })
        .collect();
    let auth = basic("right");
    let mut big = format!("GET /metrics HTTP/1.1\r\nHost: x\r\n{auth}X-Big: ").into_bytes();
    big.extend(std::iter::repeat_n(b'a', 64 * 1024));
    big.extend(b"\r\n\r\n");
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        ("64 KiB header", big, 431),
        (
            "another path, no credentials",
            b"GET /admin HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            401,
        ),
        (
            "another path",
            format!("GET /admin HTTP/1.1\r\nHost: x\r\n{auth}\r\n").into_bytes(),
            404,
        ),
        (
            "POST",
            format!("POST /metrics HTTP/1.1\r\nHost: x\r\n{auth}Content-Length: 5\r\n\r\nhello")
                .into_bytes(),
            405,
        ),
        (
            "the readiness probe, no credentials",
            b"GET /-/ready HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            200,
        ),
    ];
    let mut faults: Vec<String> = Vec::new();
    for (what, request, want) in &cases {
        match exchange(addr, client, request) {
            Ok((code, _)) if code == *want => {}
            other => faults.push(format!("{what}: {other:?}, wanted {want}")),
        }
    }
    // Plain HTTP to the TLS port: told to use https, in plain HTTP.
    let plain = std::net::TcpStream::connect(addr).and_then(|mut s| {
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        Ok(out)
    });
    match plain {
        Ok(out) if out.starts_with("HTTP/1.1 400") && out.contains("https://") => {}
        other => faults.push(format!("plain HTTP: {other:?}")),
    }
    for t in wrong {
        faults.extend(
            t.join()
                .unwrap_or_else(|_| vec!["a client panicked".into()]),
        );
    }
    let scrapes = background.finish()?;
    faults.dedup();
    if faults.is_empty() {
        Ok(format!(
            "400 wrong passwords each 401, {} hostile requests and plain HTTP each got its status; {scrapes}",
            cases.len()
        ))
    } else {
        Err(wrong!("{}; {scrapes}", faults.join("; ")))
    }
}

/// The `harden-check` cases over TLS, against the tracer binary at `tracer`.
pub fn harden_cases(tracer: &Path, tally: &mut Tally) {
    let started = Pki::new("harden", "right").and_then(|pki| {
        let (child, addr) = start(tracer, &pki, "right")?;
        let client = pki.client()?;
        Ok((pki, Killed(child), addr, client))
    });
    let (_pki, server, addr, client) = match started {
        Ok(s) => s,
        Err(e) => {
            tally.record(
                HARDEN,
                "tracer serve starts with TLS and basic auth",
                &Err(Fail::Wrong(e)),
            );
            return;
        }
    };
    let fds = || {
        std::fs::read_dir(format!("/proc/{}/fd", server.0.id()))
            .map(Iterator::count)
            .map_err(|e| e.to_string())
    };
    let before = fds();
    tally.record(
        HARDEN,
        "over TLS: idle connections, dripped handshakes and heads, scraped meanwhile",
        &slow(addr, &client),
    );
    tally.record(
        HARDEN,
        "over TLS: wrong passwords by the hundred and hostile requests, scraped meanwhile",
        &hostile(addr, &client),
    );
    let freed = before.and_then(|before| {
        let start = Instant::now();
        loop {
            let now = fds()?;
            if now <= before {
                return Ok(format!("open fds before/after {before}/{now}"));
            }
            if start.elapsed() > Duration::from_secs(30) {
                return Err(format!("open fds before/after {before}/{now}: not freed"));
            }
            thread::sleep(Duration::from_millis(200));
        }
    });
    tally.record(HARDEN, "over TLS: what the clients held is freed", &freed);
}
