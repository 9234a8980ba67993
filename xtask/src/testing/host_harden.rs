//! Host cases of hardening: `tracer serve` under abuse on loopback.
//!
//! A synthetic load is served while hostile clients take turns: 1,000 idle connections,
//! slow-drip request heads, clients that send a request and never read the answer,
//! oversized heads and bodies, and requests for other paths and methods. Throughout, a
//! scraper asks for `/metrics` as Prometheus does; every one of its scrapes must be
//! answered in full (the latencies are printed, not asserted). Each hostile request must
//! get its status (431, 413, 404, 405) or be cut off, and once they are gone the server's
//! open file descriptors (`/proc/PID/fd`) must be back to what they were before; its
//! resident memory before and after is printed.

use std::{
    io::{Read as _, Write as _},
    net::{SocketAddr, TcpStream},
    path::Path,
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use super::{
    harness::{Fail, Tally, Verdict, wrong},
    prometheus::free_port,
    scraper::Scraper,
};
// The server's default limits (`--header-timeout`, `--request-timeout`): the case runs
// with them.
use super::host_tls::{HEADER_TIMEOUT, REQUEST_TIMEOUT};
use crate::bench::serve_load as bench_serve;

const SCOPE: &str = "host harden";
/// Idle connections held open at once.
const IDLE: usize = 1_000;
/// Kill and reap the server whatever happens.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Open file descriptors of the server.
    fn fds(&self) -> Result<usize, String> {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .map(Iterator::count)
            .map_err(|e| format!("/proc/{}/fd: {e}", self.pid()))
    }

    /// Resident memory of the server, MiB.
    fn rss_mib(&self) -> Result<f64, String> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .map_err(|e| e.to_string())?;
        let kib: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .ok_or("no VmRSS")?;
        Ok(kib / 1024.0)
    }
}

fn start(tracer: &Path) -> Result<Server, String> {
    let port = free_port().map_err(|e| e.to_string())?;
    let addr: SocketAddr = format!("127.0.0.1:{port}")
        .parse()
        .map_err(|e| format!("{e}"))?;
    let child = Command::new(tracer)
        .args(["serve", "--synthetic", "100", "--listen"])
        .arg(addr.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting tracer serve: {e}"))?;
    let server = Server { child, addr };
    let start = Instant::now();
    while bench_serve::scrape(addr).is_err() {
        if start.elapsed() > Duration::from_secs(30) {
            return Err("tracer serve never answered a scrape".into());
        }
        thread::sleep(Duration::from_millis(200));
    }
    Ok(server)
}

/// The scraper beside the hostile clients, as Prometheus 2.x scrapes.
fn scraper(addr: SocketAddr) -> Scraper {
    Scraper::start("scrapes", move || {
        bench_serve::scrape(addr).map(|(took, _)| took)
    })
}

/// Send `request` whole, close the sending side, read the answer: its status, or `None`
/// when the server closed without one.
fn exchange(addr: SocketAddr, request: &[u8]) -> Result<Option<u16>, String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(15)))
        .map_err(|e| e.to_string())?;
    // A server that answers early (413 on a large body) may close before all is sent.
    let _ = s.write_all(request);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut answer = Vec::new();
    // A reset after the answer (its body unread, the server closed) still leaves the answer.
    let _ = s.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer[..answer.len().min(64)]).into_owned();
    Ok(text.split_whitespace().nth(1).and_then(|c| c.parse().ok()))
}

/// Whether the server has closed `s`: a read returns end of file or a reset, within `limit`.
fn closed_within(s: &TcpStream, limit: Duration) -> bool {
    let _ = s.set_read_timeout(Some(limit));
    let mut buf = [0u8; 4096];
    let mut reader = s;
    loop {
        match reader.read(&mut buf) {
            Ok(0) | Err(_) => return true,
            // The answer to a request (the slow reader's): read on to the close.
            Ok(_) => {}
        }
    }
}

/// 1,000 connections that send nothing: held until the server cuts them at its header
/// timeout, while the scraper goes on.
fn idle(server: &Server) -> Verdict {
    let background = scraper(server.addr);
    let mut conns = Vec::with_capacity(IDLE);
    let mut fds_held = 0;
    for i in 0..IDLE {
        conns.push(TcpStream::connect(server.addr).map_err(|e| format!("connect: {e}"))?);
        if i % 100 == 99 {
            fds_held = fds_held.max(server.fds()?);
        }
    }
    let start = Instant::now();
    // Accepting the last of them takes the server a moment.
    for _ in 0..5 {
        thread::sleep(Duration::from_millis(100));
        fds_held = fds_held.max(server.fds()?);
    }
    let cut = conns
        .iter()
        .filter(|s| closed_within(s, HEADER_TIMEOUT * 5))
        .count();
    let waited = start.elapsed();
    let scrapes = background.finish()?;
    if cut != IDLE {
        return Err(wrong!("{cut} of {IDLE} idle connections cut"));
    }
    Ok(format!(
        "{IDLE} idle connections: the server had up to {fds_held} fds open, all cut {:.1} s after the last connected; {scrapes}",
        waited.as_secs_f64()
    ))
}

/// 50 clients sending a request head one byte every 200 ms, and 50 that send a whole
/// request and never read the answer: each cut off by the server.
fn slow(server: &Server) -> Verdict {
    let background = scraper(server.addr);
    let mut drips: Vec<TcpStream> = Vec::new();
    let mut readers: Vec<TcpStream> = Vec::new();
    for _ in 0..50 {
        let mut d = TcpStream::connect(server.addr).map_err(|e| format!("connect: {e}"))?;
        d.write_all(b"GET /metrics HTTP/1.1\r\n")
            .map_err(|e| format!("send: {e}"))?;
        drips.push(d);
        let mut r = TcpStream::connect(server.addr).map_err(|e| format!("connect: {e}"))?;
        r.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .map_err(|e| format!("send: {e}"))?;
        readers.push(r);
    }
    let start = Instant::now();
    let mut dripping = drips.len();
    let mut drip_cut_at = None;
    // Bounded: the server allows HEADER_TIMEOUT; give it five times that.
    while dripping > 0 && start.elapsed() < HEADER_TIMEOUT * 5 {
        thread::sleep(Duration::from_millis(200));
        dripping = drips
            .iter_mut()
            .map(|d| d.write_all(b"X").is_ok())
            .filter(|ok| *ok)
            .count();
        if dripping == 0 {
            drip_cut_at = Some(start.elapsed());
        }
    }
    // The silent readers: the server gave up on them at its request timeout.
    let readers_cut = readers
        .iter()
        .filter(|r| closed_within(r, REQUEST_TIMEOUT * 3))
        .count();
    let scrapes = background.finish()?;
    let Some(drip_cut_at) = drip_cut_at else {
        return Err(wrong!("{dripping} of 50 slow-drip clients never cut off"));
    };
    if readers_cut != readers.len() {
        return Err(wrong!("{readers_cut} of 50 non-reading clients cut off"));
    }
    Ok(format!(
        "50 slow-drip clients cut after {:.1} s, 50 non-reading clients cut; {scrapes}",
        drip_cut_at.as_secs_f64()
    ))
}

/// Oversized heads, bodies, other paths and methods: each gets its status.
fn hostile_requests(server: &Server) -> Verdict {
    let background = scraper(server.addr);
    let big_header = {
        let mut r = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ".to_vec();
        r.extend(std::iter::repeat_n(b'a', 64 * 1024));
        r.extend(b"\r\n\r\n");
        r
    };
    let many_headers = {
        let mut r = b"GET /metrics HTTP/1.1\r\n".to_vec();
        for i in 0..2_000 {
            r.extend(format!("X-H{i}: v\r\n").as_bytes());
        }
        r.extend(b"\r\n");
        r
    };
    let big_body = {
        let mut r =
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 104857600\r\n\r\n".to_vec();
        r.extend(std::iter::repeat_n(b'b', 1 << 20));
        r
    };
    let cases: Vec<(&str, Vec<u8>, &[u16])> = vec![
        ("64 KiB header", big_header, &[431]),
        ("2,000 headers", many_headers, &[431]),
        ("a 100 MB body announced, 1 MiB sent", big_body, &[413]),
        (
            "POST with a body",
            b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello".to_vec(),
            &[405],
        ),
        (
            "chunked body",
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n".to_vec(),
            &[413],
        ),
        ("another path", b"GET /admin HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), &[404]),
        ("a path past 8 KiB", {
            let mut r = b"GET /".to_vec();
            r.extend(std::iter::repeat_n(b'p', 10_000));
            r.extend(b" HTTP/1.1\r\nHost: x\r\n\r\n");
            r
        }, &[414, 431]),
        ("DELETE", b"DELETE /metrics HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), &[405]),
        ("OPTIONS", b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), &[404, 405]),
        ("not HTTP", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03".to_vec(), &[400]),
    ];
    let mut wrong = Vec::new();
    let mut sent = 0;
    // Each ten times: what one client does, many do.
    for (what, request, want) in &cases {
        for _ in 0..10 {
            sent += 1;
            match exchange(server.addr, request) {
                Ok(Some(code)) if want.contains(&code) => {}
                Ok(got) => wrong.push(format!("{what}: {got:?}, wanted {want:?}")),
                Err(e) => wrong.push(format!("{what}: {e}")),
            }
        }
    }
    let scrapes = background.finish()?;
    if !wrong.is_empty() {
        wrong.dedup();
        return Err(wrong!(
            "{} of {sent} answered wrong: {}",
            wrong.len(),
            wrong.join("; ")
        ));
    }
    Ok(format!(
        "{sent} hostile requests each got its status; {scrapes}"
    ))
}

/// Wait until the server's descriptors are back to `baseline` (they close as the server
/// notices each client gone), at most `limit`.
fn fds_settle(server: &Server, baseline: usize, limit: Duration) -> Result<usize, String> {
    let start = Instant::now();
    loop {
        let now = server.fds()?;
        if now <= baseline || start.elapsed() > limit {
            return Ok(now);
        }
        thread::sleep(Duration::from_millis(200));
    }
}

/// `tracer ARGS` as user nobody with only `caps` (ambient, so they survive the exec), via
/// util-linux's setpriv. The binary is copied where nobody can run it.
fn as_nobody(tracer: &Path, caps: &str, args: &[&str]) -> Result<Command, String> {
    let copy = std::env::temp_dir().join(format!("tracer-harden-{}", std::process::id()));
    std::fs::copy(tracer, &copy).map_err(|e| format!("copying tracer: {e}"))?;
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
    if !caps.is_empty() {
        cmd.arg(format!("--inh-caps={caps}"))
            .arg(format!("--ambient-caps={caps}"));
    }
    cmd.arg(&copy).args(args);
    Ok(cmd)
}

/// Without root or capabilities: exit 1 and one message naming `CAP_BPF` and `CAP_PERFMON`;
/// with only them: the tracepoints fail naming `CAP_DAC_READ_SEARCH`, which tracefs needs.
fn without_privileges(tracer: &Path) -> Verdict {
    let out = as_nobody(tracer, "", &["capture", "-d", "1s"])?
        .output()
        .map_err(|e| format!("setpriv: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    if out.status.code() != Some(1)
        || lines.len() != 1
        || !(stderr.contains("CAP_BPF") && stderr.contains("CAP_PERFMON"))
    {
        return Err(wrong!("exit {:?}: {stderr}", out.status.code()));
    }
    let out = as_nobody(
        tracer,
        "+bpf,+perfmon",
        &["capture", "-d", "1s", "--probes", "rmdir"],
    )?
    .output()
    .map_err(|e| format!("setpriv: {e}"))?;
    let partial = String::from_utf8_lossy(&out.stderr);
    if !(partial.contains("CAP_DAC_READ_SEARCH") && partial.contains("cannot be read")) {
        return Err(wrong!(
            "with CAP_BPF and CAP_PERFMON only, exit {:?}, no word of CAP_DAC_READ_SEARCH: {partial}",
            out.status.code()
        ));
    }
    Ok(format!(
        "none: exit 1, \"{}\"; CAP_BPF+CAP_PERFMON only: names CAP_DAC_READ_SEARCH",
        lines[0]
    ))
}

/// As nobody with `CAP_BPF`, `CAP_PERFMON` and `CAP_DAC_READ_SEARCH`, `tracer serve` attaches
/// the syscall tracepoints, then holds no capability in any thread and still counts.
fn serve_least_privilege(tracer: &Path) -> Verdict {
    let port = free_port().map_err(|e| e.to_string())?;
    let addr: SocketAddr = format!("127.0.0.1:{port}")
        .parse()
        .map_err(|e| format!("{e}"))?;
    let log = std::env::temp_dir().join(format!("tracer-harden-serve-{port}.log"));
    let stderr = std::fs::File::create(&log).map_err(|e| e.to_string())?;
    let child = as_nobody(
        tracer,
        "+bpf,+perfmon,+dac_read_search",
        &["serve", "--probes", "rmdir", "--listen", &addr.to_string()],
    )?
    .stdout(Stdio::null())
    .stderr(stderr)
    .spawn()
    .map_err(|e| format!("setpriv: {e}"))?;
    let server = Server { child, addr };
    let start = Instant::now();
    while bench_serve::scrape(addr).is_err() {
        if start.elapsed() > Duration::from_secs(30) {
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(wrong!("never answered: {said}"));
        }
        thread::sleep(Duration::from_millis(200));
    }
    let said = std::fs::read_to_string(&log).unwrap_or_default();
    // setpriv execs tracer: the child's pid is tracer's.
    let mut held = Vec::new();
    let tasks =
        std::fs::read_dir(format!("/proc/{}/task", server.pid())).map_err(|e| e.to_string())?;
    for task in tasks.flatten() {
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        for field in ["CapEff:", "CapPrm:"] {
            let v = status
                .lines()
                .find_map(|l| l.strip_prefix(field))
                .map_or("?", str::trim);
            if !v.trim_start_matches('0').is_empty() {
                held.push(format!("{field} {v}"));
            }
        }
    }
    let threads =
        std::fs::read_dir(format!("/proc/{}/task", server.pid())).map_or(0, Iterator::count);
    // Counting still works without the capabilities: rmdir calls made now show up.
    let dir = std::env::temp_dir().join(format!("tracer-harden-rmdir-{port}"));
    for _ in 0..20 {
        let _ = std::fs::create_dir(&dir);
        let _ = std::fs::remove_dir(&dir);
    }
    let counted = count_rmdirs(addr, Duration::from_secs(10));
    let _ = std::fs::remove_file(&log);
    if !held.is_empty() {
        return Err(wrong!("still held: {}; said: {said}", held.join(", ")));
    }
    if counted < 20 {
        return Err(wrong!("only {counted} rmdir calls counted after dropping"));
    }
    Ok(format!(
        "{threads} threads hold no capability; {counted} rmdir calls counted after; said \"{}\"",
        said.lines().next().unwrap_or("").trim()
    ))
}

/// The rmdir calls `tracer serve` at `addr` has counted, once at least 20 (or `limit`).
fn count_rmdirs(addr: SocketAddr, limit: Duration) -> u64 {
    let start = Instant::now();
    loop {
        let n = exchange_body(addr)
            .lines()
            .filter(|l| l.starts_with("tracer_latency_seconds_count{probe=\"rmdir\""))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>();
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "a count"
        )]
        let n = n as u64;
        if n >= 20 || start.elapsed() > limit {
            return n;
        }
        thread::sleep(Duration::from_millis(300));
    }
}

/// The text exposition at `addr`, or nothing.
fn exchange_body(addr: SocketAddr) -> String {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(5)) else {
        return String::new();
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: text/plain\r\n\r\n");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// `--btf PATH`: a file that is not BTF (as on a kernel without `CONFIG_DEBUG_INFO_BTF`)
/// makes the probes that need struct offsets say so, naming the file, while the syscall
/// probes run; the kernel's own BTF given as a file gives no such warning.
fn btf_file(tracer: &Path) -> Verdict {
    let junk = std::env::temp_dir().join(format!("tracer-harden-{}.btf", std::process::id()));
    std::fs::write(&junk, b"not BTF at all").map_err(|e| e.to_string())?;
    let run = |btf: &Path| {
        Command::new(tracer)
            .args([
                "capture",
                "-d",
                "1s",
                "--probes",
                "rmdir,inode_lock_wait",
                "--btf",
            ])
            .arg(btf)
            .output()
            .map_err(|e| format!("running tracer: {e}"))
    };
    let bad = run(&junk);
    let _ = std::fs::remove_file(&junk);
    let bad = bad?;
    let said = String::from_utf8_lossy(&bad.stderr);
    let report = String::from_utf8_lossy(&bad.stdout);
    let rmdir_attached = report
        .lines()
        .any(|l| l.trim_start().starts_with("rmdir") && l.contains("attached"));
    if !(bad.status.success()
        && said.contains(&junk.display().to_string())
        && said.contains("inode_lock_wait: needs the kernel's BTF")
        && rmdir_attached)
    {
        return Err(wrong!("exit {:?}: {said}", bad.status.code()));
    }
    let good = run(Path::new("/sys/kernel/btf/vmlinux"))?;
    let said_good = String::from_utf8_lossy(&good.stderr);
    if said_good.contains("struct offsets") {
        return Err(wrong!("with the kernel's own BTF: {said_good}"));
    }
    Ok(
        "not BTF: the offset probes say so naming the file, rmdir attached; \
        /sys/kernel/btf/vmlinux as --btf: no warning"
            .to_owned(),
    )
}

/// The cases, against the tracer binary at `tracer`.
pub fn host_cases(tracer: &Path, tally: &mut Tally) {
    if crate::util::is_root() && Path::new("/sys/kernel/btf/vmlinux").exists() {
        tally.record(SCOPE, "--btf PATH", &btf_file(tracer));
    }
    if crate::util::is_root() {
        tally.record(
            SCOPE,
            "without privileges: one message, exit 1",
            &without_privileges(tracer),
        );
        tally.record(
            SCOPE,
            "serve as nobody with CAP_BPF, CAP_PERFMON, CAP_DAC_READ_SEARCH drops them all",
            &serve_least_privilege(tracer),
        );
        let _ = std::fs::remove_file(
            std::env::temp_dir().join(format!("tracer-harden-{}", std::process::id())),
        );
    }
    bench_serve::raise_fd_limit();
    super::host_tls::harden_cases(tracer, tally);
    let server = match start(tracer) {
        Ok(s) => s,
        Err(e) => {
            tally.record(
                SCOPE,
                "tracer serve --synthetic starts",
                &Err(Fail::Wrong(e)),
            );
            return;
        }
    };
    // A few scrapes first: the encoder's buffers and the runtime's threads are made.
    for _ in 0..5 {
        let _ = bench_serve::scrape(server.addr);
    }
    let (fds_before, rss_before) = (server.fds(), server.rss_mib());
    tally.record(
        SCOPE,
        "1,000 idle connections, scraped meanwhile",
        &idle(&server),
    );
    tally.record(
        SCOPE,
        "slow-drip and non-reading clients, scraped meanwhile",
        &slow(&server),
    );
    tally.record(
        SCOPE,
        "oversized heads and bodies, other paths and methods",
        &hostile_requests(&server),
    );
    let rss_first = server.rss_mib();
    // Once more: memory the allocator keeps for reuse stays level, a leak grows again.
    tally.record(SCOPE, "1,000 idle connections again", &idle(&server));
    let verdict = match fds_before {
        Err(e) => Err(e),
        Ok(before) => fds_settle(&server, before, REQUEST_TIMEOUT * 3).and_then(|after| {
            let rss = match (rss_before.as_ref(), rss_first.as_ref(), server.rss_mib()) {
                (Ok(a), Ok(b), Ok(c)) => format!(
                    "RSS before, after one round, after a second round of idle connections \
                     {a:.1}/{b:.1}/{c:.1} MiB"
                ),
                _ => "RSS unreadable".to_owned(),
            };
            if after <= before {
                Ok(format!("open fds before/after {before}/{after}, {rss}"))
            } else {
                Err(format!(
                    "open fds before/after {before}/{after}: not freed; {rss}"
                ))
            }
        }),
    };
    tally.record(SCOPE, "what the clients held is freed", &verdict);
}
