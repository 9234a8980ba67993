//! The HTTP side of `tracer serve`: hyper's HTTP/1 server on tokio, a few pages, hard
//! limits.
//!
//! `GET`/`HEAD` of `/metrics`, of the probes `/-/ready` and `/-/healthy` (Prometheus' own
//! paths for them) and of an index page `/`; any other path is 404, any other method 405,
//! a request with a body 413. A client cannot hold the server or its memory: request
//! headers are capped (`max_header_bytes`, hyper answers 431 past it) and must arrive
//! within `header_read_timeout` (a slow drip is cut off); each connection serves one
//! request (no keep-alive), so `request_timeout` bounds a whole exchange, reading the
//! response included; and at most `max_connections` are open, a connection past that
//! being closed as soon as it is accepted.
//!
//! With `--web.config.file` ([`web`]), connections speak TLS and requests carry basic auth,
//! all but the probes' (a kubelet's probe carries no credentials, and they say no more than
//! up or down). The TLS handshake counts against the header timeout: a client has
//! `header_read_timeout` from accept for its handshake and request headers together. A
//! client speaking plain HTTP to a TLS port is told so in plain HTTP (400), as Go's servers
//! do, and the connection closed.
//!
//! A frame is encoded once (and gzipped once for the clients that take gzip, as
//! Prometheus does), when first scraped, and every scrape of it gets the same bytes; while
//! a newer frame is being encoded, scrapes get the previous one's (at most one refresh
//! old). So many scrapers cost one encoding per refresh, and none waits on it. A live
//! loop that stopped refreshing publishes no new frame: its last one is encoded again
//! with `tracer_source_up 0`.
//!
//! An encoding that fails or panics does not stop the exporter: a panic is caught, the
//! scrapes waiting on it are answered 500, `tracer_scrape_errors_total` counts it, and the
//! next scrape encodes afresh (the `busy` flag is cleared however the encoding ends).

use std::{
    convert::Infallible,
    future::Future,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use http_body_util::Full;
use hyper::{
    Method, Request, Response, StatusCode,
    body::{Body as _, Bytes, Incoming},
    header,
    server::conn::http1,
    service::service_fn,
};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::{
    net::TcpListener,
    sync::{Notify, Semaphore, watch},
};

use super::metrics::{self, Context, Format, ProcSelf};
use crate::live::{Frame, Health, Liveness};

pub mod web;

/// Limits that keep a slow or hostile client from holding the server or its memory.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Open connections at most; more are closed at once.
    pub max_connections: usize,
    /// Time a client has to send its request line and headers.
    pub header_read_timeout: Duration,
    /// Time a whole exchange may take, from accept to the response's last byte.
    pub request_timeout: Duration,
    /// Largest request head (request line and headers), bytes; hyper's floor is 8 KiB.
    pub max_header_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 2048,
            header_read_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            max_header_bytes: 8 * 1024,
        }
    }
}

/// The frames to export, and the encodings of the latest one encoded.
#[derive(Debug)]
pub struct Exporter {
    frames: watch::Receiver<Option<Arc<Frame>>>,
    cache: std::sync::Mutex<Cache>,
    /// Woken when an encoding lands in the cache, or fails.
    encoded: Notify,
    /// Encodings that failed (an error or a panic): `tracer_scrape_errors_total`.
    failed_encodings: AtomicU64,
    /// The live loop's health, where the frames come from one.
    health: Option<Arc<Health>>,
    /// How long a scrape waits for the latest frame's encoding ([`STALE_AFTER`]).
    stale_after: Duration,
    /// Test hook: how the next encoding fails.
    #[cfg(test)]
    fail_next_encoding: std::sync::Mutex<Option<TestFault>>,
}

/// How a test makes an encoding fail.
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TestFault {
    /// It panics.
    Panic,
    /// It returns an error.
    Error,
}

/// A scrape could not be answered: the encoding it waited for failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncodingFailed;

#[derive(Debug, Default)]
struct Cache {
    /// The frame `bodies` encode.
    frame: Option<Arc<Frame>>,
    /// Indexed by [`slot`].
    bodies: [Option<Bytes>; SLOTS],
    /// The slots scrapes asked for since the last encoding began: only those are encoded
    /// with the next frame, so a format asked once (a person's `curl`, the other
    /// Prometheus of a pair that has moved on) is not encoded at every refresh after.
    asked: [bool; SLOTS],
    /// What `/proc/self` said when `frame` was first encoded: its other encodings say
    /// the same.
    proc: Option<ProcSelf>,
    /// Whether `bodies` say the source is down whatever `frame` says (it stopped
    /// refreshing after publishing `frame`).
    source_down: bool,
    /// An encoding is under way.
    busy: bool,
    /// Encodings that failed so far: a scrape that sees it change while it waits was
    /// waiting on one of them.
    failures: u64,
}

/// Clears `busy` and wakes the waiting scrapes when an encoding ends, whether it
/// published its bytes, failed, or unwound: a scrape never waits on an encoding that
/// will not land.
struct EndOfEncoding<'a>(&'a Exporter);

impl Drop for EndOfEncoding<'_> {
    fn drop(&mut self) {
        self.0.cache().busy = false;
        self.0.encoded.notify_waiters();
    }
}

/// Cached encodings: each format, plain and gzipped.
const SLOTS: usize = 6;

/// The formats, in the order of their slots.
const FORMATS: [Format; 3] = [Format::OpenMetrics, Format::Text, Format::Protobuf];

fn slot(format: Format, gzip: bool) -> usize {
    let f = match format {
        Format::OpenMetrics => 0,
        Format::Text => 1,
        Format::Protobuf => 2,
    };
    f * 2 + usize::from(gzip)
}

/// Whether an `Accept-Encoding` header takes gzip (Prometheus sends `gzip`).
fn accepts_gzip(header: Option<&str>) -> bool {
    header.is_some_and(|h| {
        h.split(',').any(|coding| {
            let mut parts = coding.split(';').map(str::trim);
            let name = parts.next().unwrap_or("");
            let q = parts
                .filter_map(|p| p.strip_prefix("q="))
                .find_map(|q| q.parse::<f64>().ok())
                .unwrap_or(1.0);
            name.eq_ignore_ascii_case("gzip") && q > 0.0
        })
    })
}

/// gzip at the fastest level: a scrape of 500 cgroups is about 10 MB of text that
/// compresses some twentyfold, and it is compressed once per refresh. A higher level
/// saves bytes on every scrape but lands later: level 6 made 12.5 MB 0.49 MB rather than
/// 0.63 MB in about three times the time, and on a loaded host scrapes then waited for
/// late encodings up to [`STALE_AFTER`] (results/serve/runs.md, 2026-12-06).
pub(crate) fn gzip(body: &[u8]) -> Bytes {
    use std::io::Write as _;
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(body.len() / 8),
        flate2::Compression::fast(),
    );
    // Writing into a Vec cannot fail.
    match enc.write_all(body).and_then(|()| enc.finish()) {
        Ok(v) => Bytes::from(v),
        Err(_) => Bytes::new(),
    }
}

impl Exporter {
    /// Export the frames published on `frames`; the source is up while the latest frame
    /// has no error.
    #[must_use]
    pub fn new(frames: watch::Receiver<Option<Arc<Frame>>>) -> Self {
        Self {
            frames,
            cache: std::sync::Mutex::new(Cache::default()),
            encoded: Notify::new(),
            failed_encodings: AtomicU64::new(0),
            health: None,
            stale_after: STALE_AFTER,
            #[cfg(test)]
            fail_next_encoding: std::sync::Mutex::new(None),
        }
    }

    /// Wait this long for the latest frame's encoding: the tests of a failing encoding
    /// wait for its outcome, however slowly a loaded host runs it.
    #[cfg(test)]
    #[must_use]
    pub fn waiting_up_to(self, stale_after: Duration) -> Self {
        Self {
            stale_after,
            ..self
        }
    }

    /// Export the frames of a live loop whose health is `health`: also down once it stops
    /// refreshing.
    #[must_use]
    pub fn with_health(frames: watch::Receiver<Option<Arc<Frame>>>, health: Arc<Health>) -> Self {
        Self {
            health: Some(health),
            ..Self::new(frames)
        }
    }

    /// The source's health now: from the loop's, else from the latest frame.
    #[must_use]
    pub fn liveness(&self) -> Liveness {
        if let Some(h) = &self.health {
            return h.at(std::time::Instant::now());
        }
        match self.frames.borrow().as_deref() {
            None => Liveness::Starting,
            Some(f) => match &f.error {
                Some(e) => Liveness::Dead(e.clone()),
                None => Liveness::Up,
            },
        }
    }

    /// Make the next encoding fail as `fault` says.
    #[cfg(test)]
    pub fn fail_next_encoding(&self, fault: TestFault) {
        *self
            .fail_next_encoding
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(fault);
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The latest frame in `format` (gzipped when `gzip`).
    ///
    /// A frame is encoded once, when the first scrape after it was published asks, in the
    /// background, in each format asked since the previous encoding began: until that
    /// encoding lands, scrapes get the previous refresh's bytes instead of all waiting on
    /// it. Bytes older than that are not served: a scrape waits
    /// for the latest frame's encoding when what is cached is older, or is the "no frame
    /// yet" answer while a frame exists (the cache is only as recent as the last scrape,
    /// and one scrape every 15 s, or a probe before the first refresh, would otherwise
    /// be answered with data a scrape interval old, or `tracer_source_up 0`). That wait
    /// is bounded by [`STALE_AFTER`]: on a starved host a late answer with older bytes
    /// beats a scrape that times out.
    ///
    /// # Errors
    /// When an encoding this scrape waited for failed (the next scrape tries again).
    pub async fn scrape(
        self: &Arc<Self>,
        format: Format,
        gzip: bool,
    ) -> Result<Bytes, EncodingFailed> {
        let want = slot(format, gzip);
        let asked = tokio::time::Instant::now();
        // Down is said at once: bytes saying up are not served for a source that is not.
        let source_down = self.liveness().trouble().is_some();
        let mut failures_before = None;
        loop {
            // Made before looking, so an encoding that lands meanwhile still wakes it.
            let landed = self.encoded.notified();
            let nothing_cached = {
                let latest = self.frames.borrow().clone();
                let mut cache = self.cache();
                if *failures_before.get_or_insert(cache.failures) != cache.failures {
                    return Err(EncodingFailed);
                }
                let current = cache.source_down == source_down
                    && match (&cache.frame, &latest) {
                        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                        (None, None) => true,
                        _ => false,
                    };
                let recent = current
                    || (cache.source_down == source_down
                        && fresh_enough(cache.frame.as_deref(), latest.as_deref()));
                let cached = cache.bodies[want].clone();
                let past_bound = asked.elapsed() >= self.stale_after;
                let have = cached.clone().filter(|_| recent || past_bound);
                cache.asked[want] = true;
                if !cache.busy && (!current || have.is_none()) {
                    let wanted = std::mem::take(&mut cache.asked);
                    cache.busy = true;
                    let proc = if current { cache.proc } else { None };
                    self.encode_later(latest, wanted, proc, source_down);
                }
                if let Some(body) = have {
                    return Ok(body);
                }
                cached.is_none()
            };
            if nothing_cached {
                landed.await;
            } else {
                // Older bytes are there: wait for the encoding until STALE_AFTER, then
                // take them.
                let _ = tokio::time::timeout_at(asked + self.stale_after, landed).await;
            }
        }
    }

    /// Encode `frame` in the `wanted` slots on a blocking thread, then publish. An
    /// encoding that fails or panics (the panic is caught) leaves the cache as it was; the
    /// failure is counted, and the scrapes waiting on it are answered [`EncodingFailed`].
    fn encode_later(
        self: &Arc<Self>,
        frame: Option<Arc<Frame>>,
        wanted: [bool; SLOTS],
        proc: Option<ProcSelf>,
        source_down: bool,
    ) {
        let me = self.clone();
        tokio::task::spawn_blocking(move || {
            let _end = EndOfEncoding(&me);
            let ctx = Context {
                scrape_errors: me.failed_encodings.load(Ordering::Relaxed),
                proc: proc.unwrap_or_else(ProcSelf::read),
                source_down,
                started_unix_ns: crate::process::start_unix_ns(),
            };
            let encoded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                #[cfg(test)]
                if let Some(fault) = me
                    .fail_next_encoding
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .take()
                {
                    assert!(fault != TestFault::Panic, "test hook: this encoding panics");
                    return Err(metrics::EncodeError(
                        "test hook: this encoding fails".into(),
                    ));
                }
                encode(frame.as_ref(), wanted, &ctx)
            }));
            let mut cache = me.cache();
            match encoded {
                Ok(Ok(bodies)) => {
                    cache.frame = frame;
                    cache.bodies = bodies;
                    cache.proc = Some(ctx.proc);
                    cache.source_down = source_down;
                    return;
                }
                Ok(Err(e)) => log::error!("{e}; the next scrape tries again"),
                // The panic message went to stderr through the panic hook.
                Err(_) => log::error!("encoding the metrics panicked; the next scrape tries again"),
            }
            me.failed_encodings.fetch_add(1, Ordering::Relaxed);
            cache.failures += 1;
        });
    }
}

/// How long a scrape waits for the latest frame's encoding before older bytes answer it.
pub const STALE_AFTER: Duration = Duration::from_secs(1);

/// Whether bytes encoding `cached` may answer a scrape while `latest` is being encoded:
/// only when `cached` is the refresh just before it.
fn fresh_enough(cached: Option<&Frame>, latest: Option<&Frame>) -> bool {
    match (cached, latest) {
        (Some(c), Some(l)) => c.seq.saturating_add(1) >= l.seq,
        (None, None) => true,
        _ => false,
    }
}

/// The encodings of `frame` in the `wanted` slots, in `ctx`.
fn encode(
    frame: Option<&Arc<Frame>>,
    wanted: [bool; SLOTS],
    ctx: &Context,
) -> Result<[Option<Bytes>; SLOTS], metrics::EncodeError> {
    let mut out: [Option<Bytes>; SLOTS] = Default::default();
    for format in FORMATS {
        let (plain, zipped) = (slot(format, false), slot(format, true));
        if !(wanted[plain] || wanted[zipped]) {
            continue;
        }
        let body = Bytes::from(metrics::encode(frame.cloned(), format, ctx)?);
        if wanted[zipped] {
            out[zipped] = Some(gzip(&body));
        }
        if wanted[plain] {
            out[plain] = Some(body);
        }
    }
    Ok(out)
}

const INDEX: &str = "<!DOCTYPE html>\n<html><head><title>tracer</title></head><body>\n\
<h1>tracer</h1>\n<p>Grace-period waits, shrinker teardown and dcache pruning under inode \
locks, per probe, caller and cgroup.</p>\n<p><a href=\"/metrics\">/metrics</a> \
<a href=\"/-/ready\">/-/ready</a> <a href=\"/-/healthy\">/-/healthy</a></p>\n\
</body></html>\n";

fn respond(status: StatusCode, content_type: &str, body: Bytes) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    if let Ok(v) = header::HeaderValue::from_str(content_type) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}

fn plain(status: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    respond(
        status,
        "text/plain; charset=utf-8",
        Bytes::from_static(text.as_bytes()),
    )
}

fn not_allowed() -> Response<Full<Bytes>> {
    let mut r = plain(
        StatusCode::METHOD_NOT_ALLOWED,
        "method not allowed: GET or HEAD\n",
    );
    r.headers_mut()
        .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
    r
}

/// The web config a request is checked against: the server's, and what it said when the
/// connection was accepted.
type Gate = Option<(Arc<web::WebConfig>, Arc<web::Loaded>)>;

async fn handle(
    exporter: Arc<Exporter>,
    gate: Gate,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path();
    let probe_path = path == READY || path == HEALTHY;
    if let Some((web, loaded)) = gate.as_ref().filter(|(_, l)| l.needs_auth())
        && !probe_path
    {
        let authorization = req.headers().get(header::AUTHORIZATION);
        if !web
            .allows(loaded, authorization.map(header::HeaderValue::as_bytes))
            .await
        {
            let mut r = plain(StatusCode::UNAUTHORIZED, "unauthorized\n");
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Basic realm=\"tracer\""),
            );
            return Ok(r);
        }
    }
    let page = match req.uri().path() {
        "/metrics" => Page::Metrics,
        "/" => Page::Index,
        READY => Page::Ready,
        HEALTHY => Page::Healthy,
        _ => return Ok(plain(StatusCode::NOT_FOUND, "not found: try /metrics\n")),
    };
    if !matches!(*req.method(), Method::GET | Method::HEAD) {
        return Ok(not_allowed());
    }
    // Never read: the connection closes after this response, body unread.
    if !req.body().is_end_stream() {
        return Ok(plain(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request bodies are not accepted\n",
        ));
    }
    Ok(match page {
        Page::Index => respond(
            StatusCode::OK,
            "text/html; charset=utf-8",
            Bytes::from_static(INDEX.as_bytes()),
        ),
        Page::Ready => probe(true, &exporter.liveness()),
        Page::Healthy => probe(false, &exporter.liveness()),
        Page::Metrics => {
            let accept = req
                .headers()
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok());
            let format = Format::negotiate(accept);
            let zip = accepts_gzip(
                req.headers()
                    .get(header::ACCEPT_ENCODING)
                    .and_then(|v| v.to_str().ok()),
            );
            let Ok(body) = exporter.scrape(format, zip).await else {
                return Ok(plain(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "encoding the metrics failed (see tracer's log); the next scrape tries again\n",
                ));
            };
            let mut r = respond(StatusCode::OK, format.content_type(), body);
            let headers = r.headers_mut();
            headers.insert(
                header::VARY,
                header::HeaderValue::from_static("Accept, Accept-Encoding"),
            );
            if zip {
                headers.insert(
                    header::CONTENT_ENCODING,
                    header::HeaderValue::from_static("gzip"),
                );
            }
            r
        }
    })
}

enum Page {
    Index,
    Metrics,
    Ready,
    Healthy,
}

/// The readiness probe's path: 200 while the source refreshes (recording started and
/// frames published on time), 503 before the first, while refreshes are late, and once it
/// is dead.
pub const READY: &str = "/-/ready";
/// The liveness probe's path: 200 unless the source is dead (failed, or silent long enough
/// to be taken for hung), then 503, until tracer exits to be restarted.
pub const HEALTHY: &str = "/-/healthy";

/// The readiness probe's answer (`ready`), else the liveness probe's, the reason in its
/// body.
fn probe(ready: bool, liveness: &Liveness) -> Response<Full<Bytes>> {
    let ok = match liveness {
        Liveness::Up => true,
        Liveness::Starting | Liveness::Stalled(_) => !ready,
        Liveness::Dead(_) => false,
    };
    let text = match liveness {
        Liveness::Up => "up: the source refreshes\n".to_owned(),
        Liveness::Starting => "starting: no refresh yet\n".to_owned(),
        Liveness::Stalled(why) => format!("late: {why}\n"),
        Liveness::Dead(why) => format!("down: {why}\n"),
    };
    let status = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    respond(status, "text/plain; charset=utf-8", Bytes::from(text))
}

/// Serve `exporter` on `listener` until `shutdown` completes.
///
/// # Errors
/// Never for a client's doing; only when accepting fails for good.
pub async fn serve(
    listener: TcpListener,
    exporter: Arc<Exporter>,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    serve_with(listener, exporter, limits, None, shutdown).await
}

/// Serve `exporter` on `listener` until `shutdown` completes, with TLS and basic auth as
/// `web` says (none without it).
///
/// # Errors
/// Never for a client's doing; only when accepting fails for good.
pub async fn serve_with(
    listener: TcpListener,
    exporter: Arc<Exporter>,
    limits: Limits,
    web: Option<Arc<web::WebConfig>>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let connections = Arc::new(Semaphore::new(limits.max_connections));
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_header_bytes.max(8 * 1024))
        .keep_alive(false)
        // A client may shut its sending side once the request is out (`nc -N`, some
        // HTTP/1.0 clients): without this, hyper takes that for the client leaving and
        // drops the answer. The header and request timeouts still bound such a client.
        .half_close(true);
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            () = &mut shutdown => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of file descriptors, a connection reset before accept: the next
                // accept may succeed; pause so a persistent error does not spin.
                Err(e) => {
                    log::warn!("accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = connections.clone().try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let exporter = exporter.clone();
        let builder = builder.clone();
        let web = web.clone();
        let limits = limits.clone();
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + limits.header_read_timeout;
            // Errors are the client's (a reset, a bad request, a timeout): nothing to do.
            let _ = tokio::time::timeout(
                limits.request_timeout,
                connection(stream, exporter, builder, web, deadline),
            )
            .await;
            drop(permit);
        });
    }
}

/// Serve one connection, its TLS handshake and request headers done by `deadline`.
async fn connection(
    stream: tokio::net::TcpStream,
    exporter: Arc<Exporter>,
    mut builder: http1::Builder,
    web: Option<Arc<web::WebConfig>>,
    deadline: tokio::time::Instant,
) {
    let loaded = web.as_ref().map(|w| w.current());
    let tls = loaded.as_ref().and_then(|l| l.tls.clone());
    let gate: Gate = web.zip(loaded);
    let service = service_fn(move |req| handle(exporter.clone(), gate.clone(), req));
    let Some(tls) = tls else {
        let _ = builder
            .serve_connection(TokioIo::new(stream), service)
            .await;
        return;
    };
    // A TLS record starts with its type, 22 for a handshake; an HTTP request with a
    // letter.
    let mut first = [0u8; 1];
    match tokio::time::timeout_at(deadline, stream.peek(&mut first)).await {
        Ok(Ok(1)) if first[0] == 22 => {}
        Ok(Ok(1)) => return plain_to_tls(stream).await,
        _ => return,
    }
    let Ok(Ok(stream)) = tokio::time::timeout_at(
        deadline,
        tokio_rustls::TlsAcceptor::from(tls).accept(stream),
    )
    .await
    else {
        return;
    };
    // What is left of the header timeout once the handshake is done.
    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
    builder.header_read_timeout(left.max(Duration::from_millis(1)));
    let _ = builder
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// Tell a client that sent plain HTTP to a TLS port what to do, without reading its
/// request.
async fn plain_to_tls(mut stream: tokio::net::TcpStream) {
    use tokio::io::AsyncWriteExt as _;
    const BODY: &str = "this port speaks TLS: use https://\n";
    let response = format!(
        "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{BODY}",
        BODY.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

#[cfg(test)]
mod tests;
