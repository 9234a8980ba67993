//! `cargo xtask bench serve`: this build's `tracer serve` against the previous release's
//! ([`PREVIOUS_RELEASE`], built from this repository's history), in one run, each fed a
//! synthetic load of 500 cgroups on 10 probes (all kept by name) and scraped by 50
//! concurrent scrapers while hostile clients push at it: slow-drip requests, oversized
//! headers and 1,000 idle connections. Two settings: each binary at its defaults, and the
//! per-cgroup histograms on (this build's `--cgroup-histograms`; the previous release had
//! them always). In each, every format a Prometheus asks for (text, `OpenMetrics`, protobuf,
//! and gzipped: `OpenMetrics` as Prometheus 2.x scrapes, protobuf as it scrapes with native
//! histograms on; Prometheus asks for gzip unless a job sets `enable_compression: false`),
//! the two binaries' turns
//! interleaved: series, bytes, p50 and p99 of each, and this build's over the previous
//! release's. Then, per setting and binary, a paced turn: a scrape every 2.5 s, each
//! waiting for its own frame's encoding, as a Prometheus scraping every 15 s does. The last
//! line is `serve: defaults p99 X ms (Yx the previous release, ...)` with the goals held or
//! not; the exit status is non-zero when one is not. The run's record, every turn's figures,
//! goes to `results/serve/DATE.json` ([`serve_record`]).

use std::{
    fmt::Write as _,
    io::{Read as _, Write as _},
    net::{SocketAddr, TcpStream},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use tracer_host::stat::{Stat, ticks_per_second};

use super::{
    records,
    serve_record::{self, Figures, FormatRecord, Paced, Record, SettingRecord, ratio_of},
};
use crate::{
    setup,
    tracer_build::{self, PREVIOUS_RELEASE},
};

/// Concurrent scrapers.
pub const SCRAPERS: usize = 50;
/// Idle connections held open (reopened when the server closes them).
pub const IDLE: usize = 1_000;
/// Cgroups of the synthetic load, all exported by name.
pub const CGROUPS: usize = 500;
/// Probes of the synthetic load.
const PROBES: usize = 10;
/// The goal at the defaults: this build's p99 at most this times the previous
/// release's.
const GOAL_DEFAULTS: f64 = 0.25;
/// The goal with the per-cgroup histograms on.
const GOAL_CGROUP_HISTOGRAMS: f64 = 0.8;
/// The format the goals are judged in: what Prometheus 2.x asks for, gzipped.
const JUDGED: Ask = Ask::OpenMetricsGzip;
/// What Prometheus 2.x sends.
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// Options of `bench serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Seconds of load per binary, setting and format (2 x 2 x 5 turns; then a paced turn of
    /// 20 scrapes 2.5 s apart, about 50 s, per binary and setting).
    #[arg(long, default_value_t = 60)]
    pub seconds: u64,
    /// Cgroups replaced per second in the synthetic load.
    #[arg(long, default_value_t = 10.0)]
    pub churn: f64,
    /// This build's tracer binary (default: set up and build the static one).
    #[arg(long)]
    pub tracer: Option<PathBuf>,
    /// The previous release's tracer binary (default: build it from its commit in this
    /// repository's history, once; kept under target/previous/COMMIT).
    #[arg(long)]
    pub previous: Option<PathBuf>,
    /// Run nothing: write docs/benchmarks.md's serve table again from the record
    /// (results/serve/*.json, which every run writes) its marker line names.
    #[arg(long, conflicts_with_all = ["seconds", "churn", "tracer", "previous"])]
    pub docs: bool,
}

/// A format a scrape asks for, as a Prometheus asks for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ask {
    /// The classic text format (`text/plain;version=0.0.4`).
    Text,
    /// What Prometheus 2.x asks for, without gzip.
    OpenMetrics,
    /// What Prometheus asks for with native histograms on (without gzip).
    Protobuf,
    /// What Prometheus 2.x asks for, with the `Accept-Encoding: gzip` it always sends.
    OpenMetricsGzip,
    /// What Prometheus asks for with native histograms on, with its `Accept-Encoding: gzip`.
    ProtobufGzip,
}

/// Every format, in the order they are measured and shown.
const ASKS: [Ask; 5] = [
    Ask::Text,
    Ask::OpenMetrics,
    Ask::Protobuf,
    Ask::OpenMetricsGzip,
    Ask::ProtobufGzip,
];

impl Ask {
    fn name(self) -> &'static str {
        match self {
            Ask::Text => "text",
            Ask::OpenMetrics => "openmetrics",
            Ask::Protobuf => "protobuf",
            Ask::OpenMetricsGzip => "openmetrics+gzip",
            Ask::ProtobufGzip => "protobuf+gzip",
        }
    }

    fn accept(self) -> &'static str {
        match self {
            Ask::Text => "text/plain;version=0.0.4",
            Ask::OpenMetrics | Ask::OpenMetricsGzip => PROMETHEUS_ACCEPT,
            Ask::Protobuf | Ask::ProtobufGzip => {
                "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"
            }
        }
    }

    fn gzip(self) -> bool {
        matches!(self, Ask::OpenMetricsGzip | Ask::ProtobufGzip)
    }

    /// The media type an answer must have: a server that answered another format would be
    /// measured for what was not asked.
    fn content_type(self) -> &'static str {
        match self {
            Ask::Text => "text/plain",
            Ask::OpenMetrics | Ask::OpenMetricsGzip => "application/openmetrics-text",
            Ask::Protobuf | Ask::ProtobufGzip => "application/vnd.google.protobuf",
        }
    }
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
    let stat = Stat::of(pid).with_context(|| format!("reading /proc/{pid}/stat"))?;
    #[expect(clippy::cast_precision_loss, reason = "clock ticks, for a figure")]
    let s = (stat.utime_ticks + stat.stime_ticks) as f64 / ticks_per_second() as f64;
    Ok(s)
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

/// One scrape as Prometheus 2.x makes it (`OpenMetrics`, gzip): the time to the last byte
/// and the body, or why it failed.
pub(crate) fn scrape(addr: SocketAddr) -> Result<(Duration, Vec<u8>), String> {
    scrape_as(addr, Ask::OpenMetricsGzip)
}

/// One scrape asking for `ask`: the time to the last byte and the body, or why it failed.
pub(crate) fn scrape_as(addr: SocketAddr, ask: Ask) -> Result<(Duration, Vec<u8>), String> {
    let start = Instant::now();
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(10))
        .map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    let encoding = if ask.gzip() {
        "Accept-Encoding: gzip\r\n"
    } else {
        ""
    };
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nAccept: {}\r\n{encoding}\r\n",
        ask.accept()
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
    let header = |name: &str| {
        head.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    let length: Option<usize> = header("content-length:").and_then(|v| v.parse().ok());
    let body = answer.split_off(split + 4);
    // Complete: as long as announced (checking the gzip stream on every scrape would
    // measure the client; one scrape of each format is decoded and checked whole before
    // its turn).
    if length != Some(body.len()) {
        return Err(format!("truncated: {} bytes of {length:?}", body.len()));
    }
    if (header("content-encoding:") == Some("gzip")) != ask.gzip()
        || !header("content-type:").is_some_and(|t| t.starts_with(ask.content_type()))
    {
        return Err(format!(
            "format: asked {}, answered {:?} {:?}",
            ask.name(),
            header("content-type:"),
            header("content-encoding:")
        ));
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

/// The series a scrape's body holds, as a Prometheus stores them: in the text formats every
/// sample line is one (a histogram's buckets, `_sum` and `_count` each); in the protobuf
/// format every metric is one (a histogram is one native histogram). None when the body is
/// not whole: an `OpenMetrics` one without its `# EOF`, a protobuf one cut inside a message.
fn series(ask: Ask, body: &[u8]) -> Option<usize> {
    let mut bytes = Vec::new();
    let body = if ask.gzip() {
        flate2::read::GzDecoder::new(body)
            .read_to_end(&mut bytes)
            .ok()?;
        &bytes
    } else {
        body
    };
    let text = match ask {
        Ask::Protobuf | Ask::ProtobufGzip => return protobuf_metrics(body),
        Ask::Text | Ask::OpenMetrics | Ask::OpenMetricsGzip => std::str::from_utf8(body).ok()?,
    };
    if ask != Ask::Text && !text.ends_with("# EOF\n") {
        return None;
    }
    crate::exposition::samples(text).ok().map(|s| s.len())
}

/// A protobuf varint at `*at`, moving `*at` past it.
fn varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at)?;
        *at += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The metrics (field 4, `metric`) of a length-delimited stream of
/// `io.prometheus.client.MetricFamily` messages; None when it does not parse whole.
fn protobuf_metrics(body: &[u8]) -> Option<usize> {
    let (mut at, mut metrics) = (0, 0);
    while at < body.len() {
        let len = usize::try_from(varint(body, &mut at)?).ok()?;
        let family = body.get(at..at.checked_add(len)?)?;
        at += len;
        let mut i = 0;
        while i < family.len() {
            let key = varint(family, &mut i)?;
            match key & 7 {
                0 => {
                    varint(family, &mut i)?;
                }
                1 => i += 8,
                2 => {
                    let n = usize::try_from(varint(family, &mut i)?).ok()?;
                    i = i.checked_add(n)?;
                    metrics += usize::from(key >> 3 == 4);
                }
                5 => i += 4,
                _ => return None,
            }
        }
        if i != family.len() {
            return None;
        }
    }
    Some(metrics)
}

/// Which binary a server runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Build {
    /// [`PREVIOUS_RELEASE`].
    Previous,
    /// This build.
    This,
}

/// What a run sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setting {
    /// Each binary at its defaults.
    Defaults,
    /// The per-cgroup histograms on: this build's `--cgroup-histograms`, the previous
    /// release's defaults (it had them always).
    CgroupHistograms,
}

impl Setting {
    fn name(self) -> &'static str {
        match self {
            Setting::Defaults => "defaults",
            Setting::CgroupHistograms => "cgroup histograms",
        }
    }

    /// The goal for this build's p99 over the previous release's.
    fn goal(self) -> f64 {
        match self {
            Setting::Defaults => GOAL_DEFAULTS,
            Setting::CgroupHistograms => GOAL_CGROUP_HISTOGRAMS,
        }
    }

    /// This build's flags beyond the load's.
    fn flags(self, build: Build) -> &'static [&'static str] {
        match (self, build) {
            (Setting::CgroupHistograms, Build::This) => &["--cgroup-histograms"],
            _ => &[],
        }
    }

    /// The family with a series per (probe, cgroup) that `build` exports in this setting
    /// (in the text format): the load is whole when nearly every pair has one.
    fn per_cgroup_family(self, build: Build) -> &'static str {
        match (build, self) {
            // 0.1.0: the one latency histogram, per (probe, caller, cgroup).
            (Build::Previous, _) => "tracer_latency_seconds_count{",
            (Build::This, Setting::Defaults) => "tracer_cgroup_calls_total{",
            (Build::This, Setting::CgroupHistograms) => "tracer_cgroup_latency_seconds_count{",
        }
    }
}

/// Start `tracer serve` on the synthetic load, on a free port of loopback.
fn start(tracer: &Path, flags: &[&str], churn: f64) -> anyhow::Result<(Server, SocketAddr)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
    let child = Command::new(tracer)
        .args(["serve", "--synthetic"])
        .arg(CGROUPS.to_string())
        .args(["--churn", &churn.to_string()])
        .args(["--max-cgroups"])
        .arg(CGROUPS.to_string())
        // A removed cgroup keeps its slot for the hold: at the default minute, the 10
        // cgroups replaced a second would hold every slot, and the live ones go to `other`.
        .args(["--hold", "1s"])
        .args(["--listen", &addr.to_string()])
        .args(flags)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {} serve", tracer.display()))?;
    Ok((Server(child), addr))
}

/// Wait for the load to fill: nearly every cgroup tracked by name, and nearly every
/// (probe, cgroup) with a series of `family` (a removed cgroup holds its slot for the
/// hold, 1 s, as the 10 a second replaced do; under churn the newest have not called every
/// probe yet).
fn wait_for(addr: SocketAddr, family: &str) -> anyhow::Result<()> {
    let start = Instant::now();
    loop {
        if let Ok((_, body)) = scrape_as(addr, Ask::Text) {
            let text = String::from_utf8_lossy(&body);
            let n = text.lines().filter(|l| l.starts_with(family)).count();
            let tracked = text
                .lines()
                .find_map(|l| l.strip_prefix("tracer_cgroups_tracked "))
                .and_then(|n| n.trim().parse::<usize>().ok())
                .is_some_and(|n| n >= CGROUPS * 95 / 100);
            if tracked && n >= CGROUPS * PROBES * 99 / 100 {
                return Ok(());
            }
        }
        if start.elapsed() > Duration::from_mins(1) {
            bail!(
                "{addr} never exported {CGROUPS} cgroups x {PROBES} probes (99% of them) in {family}..}}"
            );
        }
        thread::sleep(Duration::from_millis(500));
    }
}

/// One binary's turn in one setting and format: its figures, as the run's record keeps
/// them, and each failed scrape's message.
struct Turn {
    fig: Figures,
    errors: Vec<String>,
}

/// `seconds` of [`SCRAPERS`] scrapers asking for `ask` at the server `pid` serving at
/// `addr`, with the hostile clients pushing at it.
fn turn(addr: SocketAddr, pid: u32, ask: Ask, seconds: u64) -> anyhow::Result<Turn> {
    let (_, body) = scrape_as(addr, ask)
        .map_err(|e| anyhow::anyhow!("{addr}: a scrape in {}: {e}", ask.name()))?;
    let series = series(ask, &body)
        .with_context(|| format!("{addr}: a scrape in {} is not whole", ask.name()))?;
    let hostile = Hostile::start(addr);
    thread::sleep(Duration::from_secs(1));
    let cpu_before = cpu_seconds(pid)?;
    let wall = Instant::now();
    let (mut times, errors) = scrape_for(addr, ask, wall + Duration::from_secs(seconds));
    let elapsed = wall.elapsed().as_secs_f64();
    let cpu_percent = (cpu_seconds(pid)? - cpu_before) / elapsed * 100.0;
    let [slow_drips_cut, refused_431, idle_closed] = hostile.stop();
    times.sort();
    Ok(Turn {
        fig: Figures {
            series,
            bytes: body.len(),
            p50_ms: percentile(&times, 0.5),
            p99_ms: percentile(&times, 0.99),
            max_ms: percentile(&times, 1.0),
            scrapes: times.len(),
            per_second: f64::from(u32::try_from(times.len()).unwrap_or(u32::MAX)) / elapsed,
            failed: errors.len(),
            server_cpu_percent: cpu_percent,
            slow_drips_cut,
            refused_431,
            idle_closed,
        },
        errors,
    })
}

/// A setting's turns: per format, the previous release's and this build's.
type Turns = Vec<(Ask, Turn, Turn)>;

/// Both binaries in `setting`, served at once, their turns interleaved (which goes first
/// alternates by format), so a change in the host's load falls on both alike.
fn measure(
    binaries: [(Build, &Path); 2],
    setting: Setting,
    args: &ServeArgs,
) -> anyhow::Result<(Turns, [Paced; 2])> {
    let mut servers = Vec::new();
    for (build, path) in binaries {
        let flags = setting.flags(build);
        let (server, addr) = start(path, flags, args.churn)?;
        println!(
            "serve: {} {}: {} serve --synthetic {CGROUPS} --max-cgroups {CGROUPS} --hold 1s --churn {}{}{} on {addr}",
            setting.name(),
            build_name(build),
            path.display(),
            args.churn,
            if flags.is_empty() { "" } else { " " },
            flags.join(" ")
        );
        servers.push((server, addr, setting.per_cgroup_family(build)));
    }
    for (_, addr, family) in &servers {
        wait_for(*addr, family)?;
    }
    let mut turns = Vec::new();
    for (i, ask) in ASKS.into_iter().enumerate() {
        let mut pair: [Option<Turn>; 2] = [None, None];
        for k in [i % 2, 1 - i % 2] {
            let (server, addr, _) = &servers[k];
            let t = turn(*addr, server.0.id(), ask, args.seconds)?;
            println!(
                "serve: {} {} {}: {} series, {} bytes, p50 {:.1} ms, p99 {:.1} ms, {} scrapes, {} failed",
                setting.name(),
                build_name(binaries[k].0),
                ask.name(),
                t.fig.series,
                t.fig.bytes,
                t.fig.p50_ms,
                t.fig.p99_ms,
                t.fig.scrapes,
                t.errors.len()
            );
            pair[k] = Some(t);
        }
        let [Some(previous), Some(this)] = pair else {
            unreachable!("both turns ran")
        };
        turns.push((ask, previous, this));
    }
    let mut paced = Vec::new();
    for (k, (_, addr, _)) in servers.iter().enumerate() {
        let (p, first_failure) = paced_turn(*addr);
        println!(
            "serve: {} {} {}, one scrape a frame: p50 {:.1} ms, max {:.1} ms, {} scrapes, {} failed{}",
            setting.name(),
            build_name(binaries[k].0),
            JUDGED.name(),
            p.p50_ms,
            p.max_ms,
            p.scrapes,
            p.failed,
            first_failure.map_or_else(String::new, |e| format!(" (the first: {e})"))
        );
        paced.push(p);
    }
    let [previous, this] = <[Paced; 2]>::try_from(paced).expect("two binaries");
    Ok((turns, [previous, this]))
}

/// Scrapes of a paced turn.
const PACED: usize = 20;
/// Between the starts of two paced scrapes: more than two refreshes (1 s each), so what is
/// cached is older than the refresh before the latest and each scrape waits for its own
/// frame's encoding, as a Prometheus scraping every 15 s does (bytes of the refresh just
/// before answer at once). The back-to-back turns measure the other case, bytes already
/// encoded.
const PACE: Duration = Duration::from_millis(2_500);

/// [`PACED`] scrapes in the judged format, one every [`PACE`], the hostile clients pushing:
/// the figures, and the first failure's message if any failed.
fn paced_turn(addr: SocketAddr) -> (Paced, Option<String>) {
    let hostile = Hostile::start(addr);
    thread::sleep(Duration::from_secs(1));
    let mut times = Vec::new();
    let mut errors = Vec::new();
    for _ in 0..PACED {
        let start = Instant::now();
        match scrape_as(addr, JUDGED) {
            Ok((t, _)) => times.push(t),
            Err(e) => errors.push(e),
        }
        thread::sleep(PACE.saturating_sub(start.elapsed()));
    }
    hostile.stop();
    times.sort();
    let paced = Paced {
        scrapes: times.len(),
        p50_ms: percentile(&times, 0.5),
        max_ms: percentile(&times, 1.0),
        failed: errors.len(),
    };
    (paced, errors.into_iter().next())
}

fn build_name(build: Build) -> String {
    match build {
        Build::Previous => format!("tracer {}", PREVIOUS_RELEASE.version),
        Build::This => "this build".to_owned(),
    }
}

/// Set up and build what was not given, then run the benchmark.
///
/// # Errors
/// When a binary cannot be built, a server cannot be started or never serves the load.
pub fn main(args: &ServeArgs) -> anyhow::Result<std::process::ExitCode> {
    if args.docs {
        return serve_record::write_docs();
    }
    let tools = if args.tracer.is_none() || args.previous.is_none() {
        Some(setup::setup()?)
    } else {
        None
    };
    let previous = match (&args.previous, &tools) {
        (Some(p), _) => p.clone(),
        (None, Some(tools)) => tracer_build::previous(tools)?,
        (None, None) => unreachable!("set up when a binary is not given"),
    };
    let tracer = match (&args.tracer, &tools) {
        (Some(p), _) => p.clone(),
        (None, Some(tools)) => tracer_build::build(tools)?,
        (None, None) => unreachable!("set up when a binary is not given"),
    };
    run(&tracer, &previous, args)
}

/// Run the benchmark: this build's tracer at `tracer`, the previous release's at
/// `previous`.
///
/// # Errors
/// When a server cannot be started or never serves the load.
pub fn run(
    tracer: &Path,
    previous: &Path,
    args: &ServeArgs,
) -> anyhow::Result<std::process::ExitCode> {
    raise_fd_limit();
    let binaries = [(Build::Previous, previous), (Build::This, tracer)];
    let mut verdicts = Vec::new();
    let mut settings = Vec::new();
    for setting in [Setting::Defaults, Setting::CgroupHistograms] {
        let (turns, paced) = measure(binaries, setting, args)?;
        print_table(setting, &turns);
        let v = verdict(setting, &turns);
        let paced_ratio = paced[1].max_ms / paced[0].max_ms;
        settings.push(SettingRecord {
            setting: setting.name().to_owned(),
            judged: JUDGED.name().to_owned(),
            goal: setting.goal(),
            p99_ratio: v.ratio,
            held: v.held,
            formats: turns
                .into_iter()
                .map(|(ask, previous, this)| FormatRecord {
                    format: ask.name().to_owned(),
                    previous: previous.fig,
                    this: this.fig,
                })
                .collect(),
            paced,
        });
        verdicts.push((setting, v, paced_ratio));
    }
    let mut line = String::from("serve:");
    let mut held = true;
    for (i, (setting, v, paced_ratio)) in verdicts.iter().enumerate() {
        let _ = write!(
            line,
            "{} {} p99 {:.1} ms ({:.2}x the previous release, goal {}x: {}; one scrape a \
             frame: max {paced_ratio:.2}x)",
            if i == 0 { "" } else { "," },
            setting.name(),
            v.p99,
            v.ratio,
            setting.goal(),
            if v.held { "held" } else { "NOT held" }
        );
        held &= v.held;
    }
    if let Some((_, v, _)) = verdicts.first() {
        let _ = write!(
            line,
            ", series {} ({:.2}x), failed scrapes {}",
            v.series, v.series_ratio, v.failed
        );
    }
    println!("{line}");
    let command = std::env::args().skip(1).collect::<Vec<_>>().join(" ");
    let record = Record {
        bench: "serve".into(),
        date: records::today(),
        command: format!("cargo xtask {command}"),
        seconds: args.seconds,
        previous: format!("{} ({})", PREVIOUS_RELEASE.version, PREVIOUS_RELEASE.commit),
        settings,
    };
    let json = serde_json::to_string_pretty(&record)? + "\n";
    let path = records::write(&records::dir("serve"), &record.date, &json)?;
    let shown = path
        .strip_prefix(crate::util::workspace_root())
        .unwrap_or(&path);
    println!("the run's record: {}", shown.display());
    Ok(if held {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    })
}

/// How this build did in a setting, as Prometheus 2.x scrapes (`OpenMetrics`, gzip).
struct Verdict {
    p99: f64,
    ratio: f64,
    series: usize,
    series_ratio: f64,
    /// This build's failed scrapes, every format.
    failed: usize,
    /// The p99 ratio at most the goal, and no failed scrape of this build.
    held: bool,
}

fn verdict(setting: Setting, turns: &Turns) -> Verdict {
    let failed = turns.iter().map(|(_, _, t)| t.errors.len()).sum();
    let (_, previous, this) = turns
        .iter()
        .find(|(ask, _, _)| *ask == JUDGED)
        .expect("every format was measured");
    let ratio = this.fig.p99_ms / previous.fig.p99_ms;
    Verdict {
        p99: this.fig.p99_ms,
        ratio,
        series: this.fig.series,
        series_ratio: ratio_of(this.fig.series, previous.fig.series),
        failed,
        held: ratio <= setting.goal() && failed == 0,
    }
}

/// A setting's figures as a markdown table: per format, each binary's row and this
/// build's over the previous release's.
fn print_table(setting: Setting, turns: &Turns) {
    println!("serve: {}", setting.name());
    println!(
        "| format | binary | series | bytes | p50 | p99 | max | scrapes/s | failed | server CPU | slow drips cut | 431s | idle closed |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (ask, previous, this) in turns {
        for (build, t) in [(Build::Previous, previous), (Build::This, this)] {
            println!(
                "| {} | {} | {} | {} | {:.1} ms | {:.1} ms | {:.0} ms | {:.0} | {} | {:.0}% | {} | {} | {} |",
                ask.name(),
                build_name(build),
                t.fig.series,
                t.fig.bytes,
                t.fig.p50_ms,
                t.fig.p99_ms,
                t.fig.max_ms,
                t.fig.per_second,
                t.errors.len(),
                t.fig.server_cpu_percent,
                t.fig.slow_drips_cut,
                t.fig.refused_431,
                t.fig.idle_closed
            );
        }
        println!(
            "| {} | new/old | {:.3}x | {:.3}x | {:.2}x | {:.2}x | {:.2}x | {:.2}x | | {:.2}x | | | |",
            ask.name(),
            ratio_of(this.fig.series, previous.fig.series),
            ratio_of(this.fig.bytes, previous.fig.bytes),
            this.fig.p50_ms / previous.fig.p50_ms,
            this.fig.p99_ms / previous.fig.p99_ms,
            this.fig.max_ms / previous.fig.max_ms,
            this.fig.per_second / previous.fig.per_second,
            this.fig.server_cpu_percent / previous.fig.server_cpu_percent
        );
    }
    for (ask, previous, this) in turns {
        for (build, t) in [(Build::Previous, previous), (Build::This, this)] {
            if let Some(first) = t.errors.first() {
                let mut kinds: std::collections::BTreeMap<&str, usize> =
                    std::collections::BTreeMap::new();
                for e in &t.errors {
                    *kinds
                        .entry(e.split(':').next().unwrap_or("error"))
                        .or_default() += 1;
                }
                println!(
                    "serve: {} {} {}: failed scrapes by kind: {kinds:?}; first: {first}",
                    setting.name(),
                    build_name(build),
                    ask.name()
                );
            }
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

/// [`SCRAPERS`] scrapers at once asking for `ask` until `deadline`: each scrape's time, each failure.
fn scrape_for(addr: SocketAddr, ask: Ask, deadline: Instant) -> (Vec<Duration>, Vec<String>) {
    let scrapers: Vec<_> = (0..SCRAPERS)
        .map(|_| {
            thread::spawn(move || {
                let mut times = Vec::new();
                let mut errors = Vec::new();
                while Instant::now() < deadline {
                    match scrape_as(addr, ask) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A length-delimited protobuf field `field` holding `bytes`.
    fn delimited(field: u8, bytes: &[u8]) -> Vec<u8> {
        let mut v = vec![field << 3 | 2, u8::try_from(bytes.len()).expect("short")];
        v.extend(bytes);
        v
    }

    /// A `MetricFamily` named `name` of type `kind` with `metrics` metrics, each one
    /// counter of one label, as a delimited stream holds it (its length first).
    fn family(name: &str, kind: u8, metrics: usize) -> Vec<u8> {
        let mut f = delimited(1, name.as_bytes());
        f.extend([3 << 3, kind]);
        for i in 0..metrics {
            let label = [
                delimited(1, b"probe"),
                delimited(2, format!("p{i}").as_bytes()),
            ]
            .concat();
            // A counter's value is a double (wire type 1): 8 bytes.
            let counter = [vec![1 << 3 | 1], 42.0_f64.to_le_bytes().to_vec()].concat();
            f.extend(delimited(
                4,
                &[delimited(1, &label), delimited(3, &counter)].concat(),
            ));
        }
        let mut out = vec![u8::try_from(f.len()).expect("short")];
        out.extend(f);
        out
    }

    #[test]
    fn a_protobuf_scrape_counts_one_series_per_metric() {
        let body = [
            family("tracer_cgroup_calls_total", 0, 3),
            family("up", 1, 1),
        ]
        .concat();
        assert_eq!(series(Ask::Protobuf, &body), Some(4));
        // Cut inside the last message: not whole.
        assert_eq!(series(Ask::Protobuf, &body[..body.len() - 3]), None);
        // Gzipped, as Prometheus asks for it with native histograms on: the same count.
        let mut zipped = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        zipped.write_all(&body).expect("gzip");
        let zipped = zipped.finish().expect("gzip");
        assert_eq!(series(Ask::ProtobufGzip, &zipped), Some(4));
        // Not a gzip stream: not whole.
        assert_eq!(series(Ask::ProtobufGzip, &body), None);
    }

    #[test]
    fn a_text_scrape_counts_its_sample_lines_and_openmetrics_needs_its_eof() {
        let text = "# HELP up Up.\n# TYPE up gauge\nup 1\nx_bucket{le=\"1\"} 2\nx_count 2\n";
        assert_eq!(series(Ask::Text, text.as_bytes()), Some(3));
        assert_eq!(series(Ask::OpenMetrics, text.as_bytes()), None);
        let whole = format!("{text}# EOF\n");
        assert_eq!(series(Ask::OpenMetrics, whole.as_bytes()), Some(3));
        let mut zipped = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        zipped.write_all(whole.as_bytes()).expect("gzip");
        let zipped = zipped.finish().expect("gzip");
        assert_eq!(series(Ask::OpenMetricsGzip, &zipped), Some(3));
    }

    #[test]
    fn the_load_is_awaited_in_the_family_each_binary_exports_per_cgroup() {
        // 0.1.0 had only the one histogram, with a cgroup label, at every setting.
        for setting in [Setting::Defaults, Setting::CgroupHistograms] {
            assert_eq!(
                setting.per_cgroup_family(Build::Previous),
                "tracer_latency_seconds_count{"
            );
            assert!(setting.flags(Build::Previous).is_empty());
        }
        assert_eq!(
            Setting::Defaults.per_cgroup_family(Build::This),
            "tracer_cgroup_calls_total{"
        );
        assert_eq!(
            Setting::CgroupHistograms.flags(Build::This),
            ["--cgroup-histograms"]
        );
        assert_eq!(
            Setting::CgroupHistograms.per_cgroup_family(Build::This),
            "tracer_cgroup_latency_seconds_count{"
        );
    }
}
