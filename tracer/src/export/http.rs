//! The HTTP side of `tracer serve`: hyper's HTTP/1 server on tokio, two pages, hard limits.
//!
//! `GET`/`HEAD` of `/metrics` and of an index page `/`; any other path is 404, any other
//! method 405, a request with a body 413. A client cannot hold the server or its memory:
//! request headers are capped (`max_header_bytes`, hyper answers 431 past it) and must
//! arrive within `header_read_timeout` (a slow drip is cut off); each connection serves one
//! request (no keep-alive), so `request_timeout` bounds a whole exchange, reading the
//! response included; and at most `max_connections` are open, a connection past that
//! being closed as soon as it is accepted.
//!
//! A scrape encodes the latest frame once; the scrapes of the same frame that follow (or
//! wait while it is encoded) get the same bytes, so many scrapers cost one encoding per
//! refresh.

use std::{convert::Infallible, future::Future, sync::Arc, time::Duration};

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
    sync::{Mutex, Semaphore, watch},
};

use super::metrics::{Format, render};
use crate::live::Frame;

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

/// The frames to export, and the encodings of the latest one.
#[derive(Debug)]
pub struct Exporter {
    frames: watch::Receiver<Option<Arc<Frame>>>,
    cache: Mutex<Cache>,
}

#[derive(Debug, Default)]
struct Cache {
    frame: Option<Arc<Frame>>,
    /// Indexed by [`slot`].
    bodies: [Option<Bytes>; 2],
}

fn slot(format: Format) -> usize {
    match format {
        Format::OpenMetrics => 0,
        Format::Text => 1,
    }
}

impl Exporter {
    /// Export the frames published on `frames`.
    #[must_use]
    pub fn new(frames: watch::Receiver<Option<Arc<Frame>>>) -> Self {
        Self {
            frames,
            cache: Mutex::new(Cache::default()),
        }
    }

    /// The latest frame in `format`, encoded now unless this frame already was.
    pub async fn scrape(&self, format: Format) -> Bytes {
        let frame = self.frames.borrow().clone();
        // Held across the encoding: scrapes that arrive meanwhile wait for its bytes
        // instead of encoding the same frame again.
        let mut cache = self.cache.lock().await;
        let same = match (&cache.frame, &frame) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if !same {
            cache.frame.clone_from(&frame);
            cache.bodies = [None, None];
        }
        if let Some(body) = &cache.bodies[slot(format)] {
            return body.clone();
        }
        let body = tokio::task::spawn_blocking(move || render(frame, format))
            .await
            .map(Bytes::from)
            .unwrap_or_default();
        cache.bodies[slot(format)] = Some(body.clone());
        body
    }
}

const INDEX: &str = "<!DOCTYPE html>\n<html><head><title>tracer</title></head><body>\n\
<h1>tracer</h1>\n<p>Grace-period waits, shrinker teardown and dcache pruning under inode \
locks, per probe, caller and cgroup.</p>\n<p><a href=\"/metrics\">/metrics</a></p>\n\
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

async fn handle(
    exporter: Arc<Exporter>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let page = match req.uri().path() {
        "/metrics" => Page::Metrics,
        "/" => Page::Index,
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
        Page::Metrics => {
            let accept = req
                .headers()
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok());
            let format = Format::negotiate(accept);
            let body = exporter.scrape(format).await;
            respond(StatusCode::OK, format.content_type(), body)
        }
    })
}

enum Page {
    Index,
    Metrics,
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
    let connections = Arc::new(Semaphore::new(limits.max_connections));
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_header_bytes.max(8 * 1024))
        .keep_alive(false);
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
        let request_timeout = limits.request_timeout;
        tokio::spawn(async move {
            let service = service_fn(move |req| handle(exporter.clone(), req));
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            // Errors are the client's (a reset, a bad request, a timeout): nothing to do.
            let _ = tokio::time::timeout(request_timeout, conn).await;
            drop(permit);
        });
    }
}
