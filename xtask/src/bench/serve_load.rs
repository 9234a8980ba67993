//! `cargo xtask bench serve`: `tracer serve` under 50 concurrent scrapers for 60 s, fed a
//! synthetic load of 500 cgroups on 10 probes (all kept by name), while hostile clients
//! push at it: slow-drip requests, oversized headers and 1,000 idle connections. Prints
//! scrape latency p50/p99, failed scrapes, the server's CPU and the series a scrape holds;
//! the last line is `serve: p99 X ms, p50 Y ms, errors Z, cpu W%, series S`.

use std::{
    io::{Read as _, Write as _},
    net::{SocketAddr, TcpStream},
    path::Path,
    process::{Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

/// Concurrent scrapers.
pub const SCRAPERS: usize = 50;
/// Idle connections held open (reopened when the server closes them).
pub const IDLE: usize = 1_000;
/// Cgroups of the synthetic load, all exported by name.
pub const CGROUPS: usize = 500;
/// The goal for the scrape latency p99.
const GOAL_P99_MS: f64 = 50.0;
/// What Prometheus 2.x sends.
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// Options of `bench serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Seconds of load.
    #[arg(long, default_value_t = 60)]
    pub seconds: u64,
    /// Cgroups replaced per second in the synthetic load.
    #[arg(long, default_value_t = 10.0)]
    pub churn: f64,
    /// A tracer binary to run (default: set up and build the static one).
    #[arg(long)]
    pub tracer: Option<std::path::PathBuf>,
}

/// Kill and reap the server when done, whatever happens.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// CPU seconds (user + system) of a process, from /proc/PID/stat.
fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').context("malformed stat")?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11).context("no utime")?.parse::<f64>()?
        + f.get(12).context("no stime")?.parse::<f64>()?;
    // SAFETY: sysconf reads a constant.
    #[expect(clippy::cast_precision_loss, reason = "clock ticks per second")]
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ok(ticks / hz)
}

/// Raise this process's open-file limit: 1,000 idle connections and the scrapers need it.
pub(crate) fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write only the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut lim) == 0 {
            lim.rlim_cur = lim.rlim_max.min(8_192).max(lim.rlim_cur);
            let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &raw const lim);
        }
    }
}

/// One scrape as Prometheus makes it (`OpenMetrics`, gzip): the time to the last byte and
/// the body, or why it failed.
pub(crate) fn scrape(addr: SocketAddr) -> Result<(Duration, Vec<u8>), String> {
    let start = Instant::now();
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(10))
        .map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nAccept: {PROMETHEUS_ACCEPT}\r\nAccept-Encoding: gzip\r\n\r\n"
    )
    .map_err(|e| format!("send: {e}"))?;
    let mut answer = Vec::with_capacity(1 << 20);
    s.read_to_end(&mut answer)
        .map_err(|e| format!("read: {e}"))?;
    let took = start.elapsed();
    if !answer.starts_with(b"HTTP/1.1 200") {
        let head = String::from_utf8_lossy(&answer[..answer.len().min(40)]).into_owned();
        return Err(format!("answer: {head:?}"));
    }
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("answer: no end of headers")?;
    let head = String::from_utf8_lossy(&answer[..split]).to_ascii_lowercase();
    let length: Option<usize> = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok());
    let body = answer.split_off(split + 4);
    // Complete: as long as announced (checking the gzip stream on every scrape would
    // measure the client; one scrape is unzipped and checked whole before the run).
    if length != Some(body.len()) || !head.contains("content-encoding: gzip") {
        return Err(format!("truncated: {} bytes of {length:?}", body.len()));
    }
    Ok((took, body))
}

pub(crate) fn percentile(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "an index into a short vector"
    )]
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

/// Run the benchmark against the tracer binary at `tracer`.
///
/// # Errors
/// When the server cannot be started or never serves the load.
pub fn run(tracer: &Path, args: &ServeArgs) -> anyhow::Result<std::process::ExitCode> {
    raise_fd_limit();
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
    let child = Command::new(tracer)
        .args(["serve", "--synthetic"])
        .arg(CGROUPS.to_string())
        .args(["--churn", &args.churn.to_string()])
        .args(["--max-cgroups"])
        .arg(CGROUPS.to_string())
        // A removed cgroup keeps its slot for the hold: at the default minute, the 10
        // cgroups replaced a second would hold every slot, and the live ones go to `other`.
        .args(["--hold", "1s"])
        .args(["--listen", &addr.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {} serve", tracer.display()))?;
    let server = Server(child);
    let pid = server.0.id();
    let load = Load::wait_for(addr)?;
    println!(
        "serve: tracer serve --synthetic {CGROUPS} --max-cgroups {CGROUPS} --hold 1s: {} latency histograms; a scrape is {} bytes, {} gzipped; {} series (classic), {} with native histograms",
        load.histograms, load.bytes, load.zipped, load.samples, load.native_series
    );
    let hostile = Hostile::start(addr);
    thread::sleep(Duration::from_secs(1));

    let cpu_before = cpu_seconds(pid)?;
    let wall = Instant::now();
    let (mut times, errors) = scrape_for(addr, wall + Duration::from_secs(args.seconds));
    let elapsed = wall.elapsed().as_secs_f64();
    let cpu = (cpu_seconds(pid)? - cpu_before) / elapsed * 100.0;
    let hostile = hostile.stop();
    drop(server);

    times.sort();
    let (p50, p99) = (percentile(&times, 0.5), percentile(&times, 0.99));
    println!(
        "serve: {} scrapes by {SCRAPERS} scrapers in {elapsed:.1} s ({:.0}/s), max {:.1} ms",
        times.len(),
        f64::from(u32::try_from(times.len()).unwrap_or(u32::MAX)) / elapsed,
        percentile(&times, 1.0)
    );
    println!(
        "serve: hostile clients: {} slow drips cut off, {} oversized requests refused (431), {} idle connections closed by the server and reopened",
        hostile[0], hostile[1], hostile[2]
    );
    let mut kinds: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for e in &errors {
        *kinds
            .entry(e.split(':').next().unwrap_or("error"))
            .or_default() += 1;
    }
    if !errors.is_empty() {
        println!(
            "serve: failed scrapes by kind: {kinds:?}; first: {}",
            errors[0]
        );
    }
    println!(
        "serve: goal p99 under {GOAL_P99_MS} ms: {}",
        if p99 < GOAL_P99_MS {
            "held"
        } else {
            "NOT held"
        }
    );
    println!(
        "serve: p99 {p99:.1} ms, p50 {p50:.1} ms, errors {}, cpu {cpu:.0}%, series {}",
        errors.len(),
        load.samples
    );
    Ok(std::process::ExitCode::SUCCESS)
}

/// What a scrape of the full load holds.
struct Load {
    /// Latency histograms.
    histograms: usize,
    /// Series to a Prometheus without native histograms (every sample).
    samples: usize,
    /// Series to one with them (a histogram's buckets, sum and count are one).
    native_series: usize,
    bytes: usize,
    zipped: usize,
}

impl Load {
    /// Wait for the load to fill: every cgroup on every probe.
    fn wait_for(addr: SocketAddr) -> anyhow::Result<Load> {
        let start = Instant::now();
        loop {
            if let Ok((_, body)) = scrape(addr) {
                let mut text = String::new();
                flate2::read::GzDecoder::new(&body[..])
                    .read_to_string(&mut text)
                    .context("unzipping a scrape")?;
                let n = text
                    .lines()
                    .filter(|l| l.starts_with("tracer_latency_seconds_count{"))
                    .count();
                // Nearly every cgroup by name (a removed one holds its slot for the hold,
                // 1 s, as the 10 a second replaced do); under churn the newest have not
                // called every probe yet (a label set has the series of the calls filed
                // under it since it came).
                let tracked = text
                    .lines()
                    .find_map(|l| l.strip_prefix("tracer_cgroups_tracked "))
                    .and_then(|n| n.parse::<usize>().ok())
                    .is_some_and(|n| n >= CGROUPS * 95 / 100);
                if tracked && n >= CGROUPS * 10 * 99 / 100 && text.ends_with("# EOF\n") {
                    let samples = text.lines().filter(|l| !l.starts_with('#')).count();
                    let latency = text
                        .lines()
                        .filter(|l| l.starts_with("tracer_latency_seconds_"))
                        .count();
                    return Ok(Load {
                        histograms: n,
                        samples,
                        native_series: samples - latency + n,
                        bytes: text.len(),
                        zipped: body.len(),
                    });
                }
            }
            if start.elapsed() > Duration::from_mins(1) {
                bail!("tracer serve never exported {CGROUPS} cgroups x 10 probes (99% of them)");
            }
            thread::sleep(Duration::from_millis(500));
        }
    }
}

/// The hostile clients, pushing at the server until stopped: slow drips, oversized
/// headers, idle connections.
struct Hostile {
    stop: Arc<AtomicBool>,
    /// Slow drips the server cut off, oversized requests it refused (431), idle
    /// connections it closed (and that were opened again).
    counts: [Arc<AtomicU64>; 3],
    threads: Vec<thread::JoinHandle<()>>,
}

impl Hostile {
    fn start(addr: SocketAddr) -> Hostile {
        let stop = Arc::new(AtomicBool::new(false));
        let counts: [Arc<AtomicU64>; 3] = std::array::from_fn(|_| Arc::new(AtomicU64::new(0)));
        let mut threads = Vec::new();
        // Slow drip: a header byte a second; count the server cutting it off.
        for _ in 0..10 {
            let (stop, cut) = (stop.clone(), counts[0].clone());
            threads.push(thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let Ok(mut s) = TcpStream::connect(addr) else {
                        thread::sleep(Duration::from_millis(100));
                        continue;
                    };
                    let _ = s.write_all(b"GET /metrics HTTP/1.1\r\n");
                    while !stop.load(Ordering::Relaxed) {
                        thread::sleep(Duration::from_secs(1));
                        if s.write_all(b"X").is_err() {
                            cut.fetch_add(1, Ordering::Relaxed);
                            break;
                        }
                    }
                }
            }));
        }
        // Oversized headers: 64 KiB of one header, again and again.
        let (stop_big, refused) = (stop.clone(), counts[1].clone());
        threads.push(thread::spawn(move || {
            let mut req = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ".to_vec();
            req.extend(std::iter::repeat_n(b'a', 64 * 1024));
            req.extend(b"\r\n\r\n");
            while !stop_big.load(Ordering::Relaxed) {
                if let Ok(mut s) = TcpStream::connect(addr) {
                    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                    let _ = s.write_all(&req);
                    let mut answer = [0u8; 12];
                    if s.read_exact(&mut answer).is_ok() && answer.starts_with(b"HTTP/1.1 431") {
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                }
                thread::sleep(Duration::from_millis(50));
            }
        }));
        // 1,000 idle connections, reopened as the server closes them.
        let (stop_idle, reopened) = (stop.clone(), counts[2].clone());
        threads.push(thread::spawn(move || {
            let mut conns: Vec<Option<TcpStream>> = (0..IDLE).map(|_| None).collect();
            while !stop_idle.load(Ordering::Relaxed) {
                for c in &mut conns {
                    // Open and silent: a read would block. Closed (or answered): not.
                    let alive = c.as_mut().is_some_and(|s| {
                        let mut b = [0u8; 1];
                        matches!(s.read(&mut b), Err(ref e) if e.kind() == std::io::ErrorKind::WouldBlock)
                    });
                    if !alive {
                        if c.is_some() {
                            reopened.fetch_add(1, Ordering::Relaxed);
                        }
                        *c = TcpStream::connect(addr)
                            .ok()
                            .filter(|s| s.set_nonblocking(true).is_ok());
                    }
                }
                thread::sleep(Duration::from_millis(200));
            }
        }));
        Hostile {
            stop,
            counts,
            threads,
        }
    }

    /// Stop them: what each kind saw.
    fn stop(self) -> [u64; 3] {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.threads {
            let _ = h.join();
        }
        self.counts.map(|c| c.load(Ordering::Relaxed))
    }
}

/// [`SCRAPERS`] scrapers at once until `deadline`: each scrape's time, each failure.
fn scrape_for(addr: SocketAddr, deadline: Instant) -> (Vec<Duration>, Vec<String>) {
    let scrapers: Vec<_> = (0..SCRAPERS)
        .map(|_| {
            thread::spawn(move || {
                let mut times = Vec::new();
                let mut errors = Vec::new();
                while Instant::now() < deadline {
                    match scrape(addr) {
                        Ok((t, _)) => times.push(t),
                        Err(e) => errors.push(e),
                    }
                }
                (times, errors)
            })
        })
        .collect();
    let mut times = Vec::new();
    let mut errors = Vec::new();
    for s in scrapers {
        let (t, e) = s.join().unwrap_or_default();
        times.extend(t);
        errors.extend(e);
    }
    (times, errors)
}
