//! `tracer serve`: the live source's frames as Prometheus metrics over HTTP.
//!
//! A sink of the live source, like `tracer top`: the loop refreshes a [`Frame`] every
//! interval and a scrape encodes the latest one ([`metrics`]), served by [`http`] with
//! limits on what a client may hold.

pub mod http;
pub mod metrics;

use std::{net::SocketAddr, process::ExitCode, sync::Arc, time::Duration};

use anyhow::Context as _;
use tokio::sync::watch;

use crate::live::{self, Frame, LiveArgs};

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
pub struct Args {
    /// The source, as for `tracer top`.
    #[command(flatten)]
    pub live: LiveArgs,
    /// The HTTP side.
    #[command(flatten)]
    pub http: HttpArgs,
}

/// Run `tracer serve` until Ctrl-C, SIGTERM or SIGHUP; the probes detach on the way out.
///
/// # Errors
/// When the source cannot be opened or the address cannot be bound.
pub fn main(args: &Args) -> anyhow::Result<ExitCode> {
    let (source, mut opts) = live::open(&args.live, "tracer serve")?;
    // What the source cannot do (a probe not attached, cgroups named by walking the tree,
    // ...): said once here, as `tracer top` shows it in its header.
    for warning in &source.info().warnings {
        eprintln!("tracer serve: warning: {warning}");
    }
    // Before any other thread exists: capabilities are per thread, and the live loop and
    // the runtime's workers inherit what this one keeps.
    match tracer_loader::host::caps::drop_all_but_needed() {
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
    let served = runtime.block_on(serve_frames(handle.frames.clone(), &args.http));
    handle.stop();
    served.map(|()| ExitCode::SUCCESS)
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

/// Serve `frames` on `listen` until Ctrl-C, SIGTERM or SIGHUP.
///
/// # Errors
/// When the address cannot be bound.
pub async fn serve_frames(
    frames: watch::Receiver<Option<Arc<Frame>>>,
    args: &HttpArgs,
) -> anyhow::Result<()> {
    raise_fd_limit(args.max_connections);
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let local = listener.local_addr().unwrap_or(args.listen);
    eprintln!("tracer serve: metrics at http://{local}/metrics");
    if !local.ip().is_loopback() {
        eprintln!(
            "tracer serve: listening beyond loopback, without TLS or authentication: \
             put a TLS or authenticating proxy in front (see docs/metrics.md)"
        );
    }
    tokio::spawn(say_source_error(frames.clone()));
    let exporter = Arc::new(http::Exporter::new(frames));
    http::serve(listener, exporter, args.limits(), shutdown_signal())
        .await
        .context("serving HTTP")
}

/// Say on stderr why the source stopped, once: scrapes then show `tracer_source_up 0`, and
/// the operator reading the log must learn the reason there.
async fn say_source_error(mut frames: watch::Receiver<Option<Arc<Frame>>>) {
    while frames.changed().await.is_ok() {
        let error = frames
            .borrow_and_update()
            .as_ref()
            .and_then(|f| f.error.clone());
        if let Some(e) = error {
            eprintln!("tracer serve: the source stopped refreshing: {e}");
            return;
        }
    }
}

/// Resolves on Ctrl-C, SIGTERM or SIGHUP (the session that started it closed): each ends
/// `tracer serve` cleanly, its probes detached on the way out.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let on = |kind: SignalKind| async move {
        match signal(kind) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = on(SignalKind::terminate()) => {}
        () = on(SignalKind::hangup()) => {}
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
