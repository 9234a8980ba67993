//! `tracer serve`: the live source's frames as Prometheus metrics over HTTP.
//!
//! A sink of the live source, like `tracer top`: the loop refreshes a [`Frame`] every
//! interval and a scrape encodes the latest one ([`metrics`]), served by [`http`] with
//! limits on what a client may hold.
//!
//! Its life, in order: the listener is bound (a taken port ends it before anything is
//! attached, and a port below 1024 is bound while the capabilities last); the probes
//! attach and recording starts (said on stderr); every capability is dropped; the loop
//! starts, and the service manager hears `READY=1` with the first refresh. SIGHUP is
//! logged and changes nothing (the flags are read once; a `--web.config.file` is read again
//! when it changes, [`http::web`]). A loop whose refreshes are late
//! is not up for the scrapes nor ready; one that fails, panics or stays silent long enough
//! to be taken for hung ([`live::hung_after`]) is dead, and the process exits non-zero
//! [`exit_grace`] later, so that systemd or the kubelet starts it afresh.

pub mod http;
pub mod metrics;

use std::{net::SocketAddr, process::ExitCode, sync::Arc, time::Duration};

use anyhow::Context as _;
use tokio::sync::watch;

use crate::live::{self, Frame, Health, LiveArgs, Liveness};

/// The default port: outside the exporter range of Prometheus' default port allocations
/// (9100-9999, all taken) and the server's own ports (9090-9094).
pub const DEFAULT_PORT: u16 = 29_110;

/// The default listen address: loopback only. Any other address is an explicit choice.
pub const DEFAULT_LISTEN: SocketAddr = SocketAddr::new(
    std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
    DEFAULT_PORT,
);

/// `tracer serve`: where the numbers come from, and how they are served.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Lifecycle: the port is bound first, then the probes attach \
    (\"recording since ...\" on stderr), then every capability is dropped. /-/ready answers 200 \
    while the source refreshes, /-/healthy unless it is dead. SIGINT and SIGTERM stop it \
    (exit 0); SIGHUP is logged and changes nothing. Late refreshes make /-/ready fail until \
    they come; a source that fails, or stays silent for ten intervals (at least 2 min), makes \
    tracer exit 1 shortly after, for systemd or the kubelet to restart it."
)]
pub struct Args {
    /// The source, as for `tracer top`.
    #[command(flatten)]
    pub live: LiveArgs,
    /// The HTTP side.
    #[command(flatten)]
    pub http: HttpArgs,
    /// Also export a latency histogram per cgroup (`tracer_cgroup_latency_seconds`, per
    /// probe, caller and cgroup): a pod's own percentiles, at 19 series per histogram in
    /// the text formats (one as a native histogram). Without it, a cgroup has counters
    /// (calls and their seconds, per probe) and the histograms are the node's.
    #[arg(long)]
    pub cgroup_histograms: bool,
}

/// Run `tracer serve` until SIGINT or SIGTERM, or until its source is down; the probes
/// detach on the way out.
///
/// # Errors
/// When the address cannot be bound, the source cannot be opened, or the source went
/// down (after [`exit_grace`]).
pub fn main(args: &Args) -> anyhow::Result<ExitCode> {
    raise_fd_limit(args.http.max_connections);
    // Before the port and the probes: a web config that cannot be used is one line and
    // exit 1 with nothing bound or attached.
    let web = args.http.web_config()?;
    metrics::Shape {
        cgroup_histograms: args.cgroup_histograms,
    }
    .set();
    // First: a port that is taken must not cost an attach (under `Restart=`, one every few
    // seconds), and a port below 1024 needs CAP_NET_BIND_SERVICE, dropped below.
    let listener = bind(args.http.listen)?;
    let (source, mut opts) = live::open(&args.live, "tracer serve")?;
    // What the source cannot do (a probe not attached, cgroups named by walking the tree,
    // ...): said once here, as `tracer top` shows it in its header.
    for warning in &source.info().warnings {
        eprintln!("tracer serve: warning: {warning}");
    }
    // Before any other thread exists: capabilities are per thread, and the live loop and
    // the runtime's workers inherit what this one keeps.
    match tracer_host::caps::drop_all_but_needed() {
        Ok(said) => eprintln!("tracer serve: {said}"),
        Err(e) => eprintln!("tracer serve: warning: capabilities not dropped: {e}"),
    }
    // /metrics exports totals only: the percentile windows would be work for nothing.
    opts.windows = false;
    let handle = live::spawn(source, opts).context("starting the live loop")?;
    // Scrapes are cheap (one encoding per refresh, shared): two workers are plenty, and
    // the live loop has its own thread.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let served = runtime.block_on(serve_frames(
        listener,
        handle.frames.clone(),
        Some(Arc::clone(&handle.health)),
        &args.http,
        web,
    ));
    // The watcher of the source's health goes first: detaching takes seconds without a
    // refresh, which is no news to anyone.
    drop(runtime);
    handle.stop();
    served.map(|()| ExitCode::SUCCESS)
}

/// Bind `addr`, saying what to do when that fails.
///
/// # Errors
/// The address is taken, not this host's, or a port below 1024 without the capability.
pub fn bind(addr: SocketAddr) -> anyhow::Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(addr).map_err(|e| {
        let hint = match e.kind() {
            std::io::ErrorKind::AddrInUse => format!(
                ": another process listens there (`ss -ltnp 'sport = {}'` says which); \
                 choose another port with --listen",
                addr.port()
            ),
            std::io::ErrorKind::PermissionDenied if addr.port() < 1024 => {
                ": a port below 1024 needs CAP_NET_BIND_SERVICE".to_owned()
            }
            std::io::ErrorKind::AddrNotAvailable => ": no interface of this host has it".to_owned(),
            _ => String::new(),
        };
        anyhow::anyhow!("cannot listen on {addr}: {e}{hint}")
    })?;
    listener
        .set_nonblocking(true)
        .with_context(|| format!("listening on {addr}"))?;
    Ok(listener)
}

/// Options of `tracer serve` about HTTP (the source's are the live ones).
#[derive(Debug, Clone, clap::Args)]
pub struct HttpArgs {
    /// Address and port to listen on. The default is loopback only; to be scraped from
    /// elsewhere, put tracer behind a TLS or authenticating proxy (see docs/metrics.md) or name
    /// another address here.
    #[arg(long, default_value_t = DEFAULT_LISTEN, value_parser = parse_listen, value_name = "ADDR:PORT")]
    pub listen: SocketAddr,
    /// Open connections at most (1 to 1000000); more are closed as soon as accepted.
    #[arg(long, default_value_t = http::Limits::default().max_connections,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    pub max_connections: usize,
    /// Time a client has to send its request headers (e.g. 5s).
    #[arg(long, default_value = "5s", value_parser = tracer_core::units::parse_nonzero_duration)]
    pub header_timeout: Duration,
    /// Time a whole request may take, reading the response included (e.g. 10s).
    #[arg(long, default_value = "10s", value_parser = tracer_core::units::parse_nonzero_duration)]
    pub request_timeout: Duration,
    /// TLS and basic auth, in the Prometheus exporter toolkit's web config format (as
    /// `node_exporter`'s): read at start, and again when it or a file it names changes. The
    /// probes /-/ready and /-/healthy need no credentials (docs/metrics.md).
    #[arg(long = "web.config.file", value_name = "FILE")]
    pub web_config_file: Option<std::path::PathBuf>,
}

/// Parse `--listen`: `IP:PORT` (`[IPv6]:PORT` for IPv6), or `localhost:PORT` for
/// loopback. Other host names are not resolved: which address a name gives can change,
/// and whether the endpoint is on loopback must not.
///
/// # Errors
/// When it is none of those, saying which part is wrong.
pub fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    const EXAMPLE: &str = "e.g. 127.0.0.1:29110, [::1]:29110 or 0.0.0.0:29110";
    let s = s.trim();
    if let Ok(addr) = s.parse::<SocketAddr>() {
        return Ok(addr);
    }
    if s.parse::<std::net::IpAddr>().is_ok() {
        return Err(format!("{s:?} has no port ({EXAMPLE})"));
    }
    let Some((host, port)) = s.rsplit_once(':') else {
        return Err(format!("{s:?} is not an address and port ({EXAMPLE})"));
    };
    let port: u16 = port
        .parse()
        .map_err(|_| format!("{port:?} is not a port number (0 to 65535)"))?;
    if host.eq_ignore_ascii_case("localhost") {
        return Ok(SocketAddr::new(DEFAULT_LISTEN.ip(), port));
    }
    Err(format!(
        "{host:?} is not an IP address; host names other than localhost are not resolved ({EXAMPLE})"
    ))
}

impl HttpArgs {
    /// The web config `--web.config.file` names, read; none without the flag.
    ///
    /// # Errors
    /// When it cannot be read or used, saying why on one line.
    pub fn web_config(&self) -> anyhow::Result<Option<Arc<http::web::WebConfig>>> {
        let Some(path) = &self.web_config_file else {
            return Ok(None);
        };
        Ok(Some(Arc::new(http::web::WebConfig::load(path)?)))
    }

    /// The limits these options set.
    #[must_use]
    pub fn limits(&self) -> http::Limits {
        http::Limits {
            max_connections: self.max_connections,
            header_read_timeout: self.header_timeout,
            request_timeout: self.request_timeout,
            ..http::Limits::default()
        }
    }
}

/// How long a source that is dead is still served as down (`tracer_source_up 0`, the
/// probes failing) before tracer exits: two intervals, from 5 s to a minute, so a scrape
/// or a look at the probes can see it, and the restart comes soon after.
#[must_use]
pub fn exit_grace(interval: Duration) -> Duration {
    interval
        .saturating_mul(2)
        .clamp(Duration::from_secs(5), Duration::from_mins(1))
}

/// Serve `frames` on `listener` until SIGINT or SIGTERM, or until the live loop whose
/// health is `health` has been dead for [`exit_grace`].
///
/// # Errors
/// When the listener cannot be used, or the source went down.
pub async fn serve_frames(
    listener: std::net::TcpListener,
    frames: watch::Receiver<Option<Arc<Frame>>>,
    health: Option<Arc<Health>>,
    args: &HttpArgs,
    web: Option<Arc<http::web::WebConfig>>,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::from_std(listener).context("listening")?;
    let local = listener.local_addr().unwrap_or(args.listen);
    let tls = web.as_ref().is_some_and(|w| w.tls());
    let scheme = if tls { "https" } else { "http" };
    eprintln!("tracer serve: metrics at {scheme}://{local}/metrics");
    if !local.ip().is_loopback() && !tls {
        eprintln!(
            "tracer serve: listening beyond loopback, without TLS: give --web.config.file, or \
             put a TLS-terminating proxy in front (see docs/metrics.md)"
        );
    }
    let exporter = Arc::new(match &health {
        Some(h) => http::Exporter::with_health(frames, Arc::clone(h)),
        None => http::Exporter::new(frames),
    });
    tokio::spawn(systemd_watchdog());
    let (down_tx, down_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(watch_source(Arc::clone(&exporter), health, local, down_tx));
    let stop = async move {
        tokio::select! {
            () = stop_signal() => None,
            Ok(why) = down_rx => Some(why),
        }
    };
    let (stopped_tx, stopped_rx) = tokio::sync::oneshot::channel();
    let stop = async move {
        let why = stop.await;
        let _ = stopped_tx.send(why);
    };
    http::serve_with(listener, exporter, args.limits(), web, stop)
        .await
        .context("serving HTTP")?;
    match stopped_rx.await {
        Ok(Some(why)) => Err(anyhow::anyhow!(
            "the live source is down ({why}): exiting, for the service manager to start tracer afresh"
        )),
        _ => Ok(()),
    }
}

/// Follow the source's health: tell the service manager `READY=1` with its first
/// refresh, say on stderr when its refreshes are late (and when they come again) and when
/// it is dead, and send on `down` once it has been dead for [`exit_grace`].
async fn watch_source(
    exporter: Arc<http::Exporter>,
    health: Option<Arc<Health>>,
    local: SocketAddr,
    down: tokio::sync::oneshot::Sender<String>,
) {
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut ready_said = false;
    let mut late_said = false;
    let mut dead_since: Option<tokio::time::Instant> = None;
    loop {
        tick.tick().await;
        let interval = health
            .as_ref()
            .map_or(live::DEFAULT_INTERVAL, |h| h.interval());
        let grace = exit_grace(interval);
        match exporter.liveness() {
            Liveness::Up => {
                if std::mem::take(&mut late_said) {
                    eprintln!("tracer serve: the source refreshes again");
                }
                if !ready_said {
                    ready_said = true;
                    let status = format!("serving http://{local}/metrics");
                    let _ = sd_notify::notify(&[
                        sd_notify::NotifyState::Ready,
                        sd_notify::NotifyState::Status(&status),
                    ]);
                }
            }
            Liveness::Starting => {}
            Liveness::Stalled(why) => {
                if !std::mem::replace(&mut late_said, true) {
                    eprintln!(
                        "tracer serve: the source is late: {why}; tracer_source_up is 0 and \
                         /-/ready fails until it refreshes (taken for hung after {})",
                        humantime::format_duration(live::hung_after(interval))
                    );
                }
            }
            Liveness::Dead(why) => {
                let since = *dead_since.get_or_insert_with(|| {
                    eprintln!(
                        "tracer serve: the source is down: {why}; tracer_source_up is 0 and \
                         /-/ready and /-/healthy fail; exiting in {}",
                        humantime::format_duration(grace)
                    );
                    tokio::time::Instant::now()
                });
                if since.elapsed() >= grace {
                    let _ = down.send(why);
                    return;
                }
            }
        }
    }
}

/// Where the unit asks for a watchdog (`WatchdogSec=`), ping it at half its timeout for
/// as long as the runtime runs: a wedged process is restarted by systemd. A dead source
/// is not the watchdog's to catch: [`watch_source`] ends tracer itself, with its reason.
async fn systemd_watchdog() {
    let Some(timeout) = sd_notify::watchdog_enabled() else {
        return;
    };
    let mut tick = tokio::time::interval((timeout / 2).max(Duration::from_millis(100)));
    loop {
        tick.tick().await;
        let _ = sd_notify::notify(&[sd_notify::NotifyState::Watchdog]);
    }
}

/// Resolves on SIGINT or SIGTERM. SIGHUP is no reason to stop (a log rotation script
/// sends it, and under `Restart=on-failure` a clean exit would leave the exporter down):
/// there is nothing to reload, the flags being read once, so it is said and ignored.
async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let on = |kind: SignalKind| async move {
        match signal(kind) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    let hangups = async {
        let Ok(mut hup) = signal(SignalKind::hangup()) else {
            return std::future::pending().await;
        };
        while hup.recv().await.is_some() {
            eprintln!(
                "tracer serve: SIGHUP: nothing to reload (the flags are read at start; \
                 restart tracer to change them); serving on"
            );
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = on(SignalKind::terminate()) => {}
        () = hangups => {}
    }
}

/// Each connection is a file descriptor: raise the soft limit (often 1024) toward the hard
/// one so `max_connections` can be open at once, as servers commonly do at start.
fn raise_fd_limit(max_connections: usize) {
    let want = u64::try_from(max_connections)
        .unwrap_or(u64::MAX)
        .saturating_add(256);
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write only the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut lim) != 0 || lim.rlim_cur >= want {
            return;
        }
        lim.rlim_cur = want.min(lim.rlim_max);
        if libc::setrlimit(libc::RLIMIT_NOFILE, &raw const lim) != 0 {
            log::warn!("could not raise the open-file limit to {want}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses_take_ip_and_port_or_localhost() {
        assert_eq!(
            parse_listen("127.0.0.1:9000"),
            Ok("127.0.0.1:9000".parse().unwrap())
        );
        assert_eq!(
            parse_listen("[::1]:9000"),
            Ok("[::1]:9000".parse().unwrap())
        );
        assert_eq!(
            parse_listen("localhost:9000"),
            Ok("127.0.0.1:9000".parse().unwrap())
        );
        assert!(
            parse_listen("10.0.0.1")
                .unwrap_err()
                .contains("has no port")
        );
        assert!(
            parse_listen("127.0.0.1:70000")
                .unwrap_err()
                .contains("not a port")
        );
        assert!(
            parse_listen("example:80")
                .unwrap_err()
                .contains("not resolved")
        );
    }
}
