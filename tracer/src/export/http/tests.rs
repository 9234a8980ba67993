//! The server on a loopback port: formats, limits, hostile clients, failed encodings,
//! the probes.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::{TcpListener, TcpStream},
    sync::{oneshot, watch},
};

use super::{Exporter, Limits, TestFault, serve};
use crate::export::metrics::tests::{frame, sample, snapshot};
use tracer_core::snapshot::{Probe, SeriesKey};

/// A server on an ephemeral loopback port, exporting a frame with one series; it
/// stops when the returned sender is dropped.
async fn server(limits: Limits) -> (SocketAddr, oneshot::Sender<()>) {
    let mut s = snapshot();
    s.cgroups.insert(1, "/a".into());
    s.record(SeriesKey::new(Probe::VfsRmdir, 1), 5_000);
    let (tx, rx) = watch::channel(Some(Arc::new(frame(s))));
    serving(Arc::new(Exporter::new(rx)), limits, Some(tx)).await
}

/// A server of `exporter` on an ephemeral loopback port, holding `sender` (if any) as
/// long as it runs; it stops when the returned sender is dropped.
async fn serving(
    exporter: Arc<Exporter>,
    limits: Limits,
    sender: Option<watch::Sender<Option<Arc<crate::live::Frame>>>>,
) -> (SocketAddr, oneshot::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(async move {
        // The sender lives as long as the server: the frame stays published.
        let _sender = sender;
        let _ = serve(listener, exporter, limits, async {
            let _ = stopped.await;
        })
        .await;
    });
    (addr, stop)
}

fn limits() -> Limits {
    Limits {
        max_connections: 8,
        header_read_timeout: Duration::from_millis(300),
        request_timeout: Duration::from_secs(2),
        max_header_bytes: 8 * 1024,
    }
}

/// Send `request` and read until the server closes: the raw response, or what came
/// before an error. Bounded so a broken server fails the test instead of hanging it.
async fn exchange(addr: SocketAddr, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let _ = stream.write_all(request).await;
    read_all(&mut stream).await
}

async fn exchange_bytes(addr: SocketAddr, request: &[u8]) -> Vec<u8> {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let _ = stream.write_all(request).await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut out)).await;
    out
}

async fn read_all(stream: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

fn status(response: &str) -> Option<u16> {
    response.split_whitespace().nth(1)?.parse().ok()
}

fn header<'a>(response: &'a str, name: &str) -> Option<&'a str> {
    let head = response.split("\r\n\r\n").next()?;
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn body(response: &str) -> &str {
    response.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

/// The latest frame's node-wide `tracer_latency_seconds_count` and `tracer_source_up`, as
/// a scrape now answers.
async fn scraped(exporter: &Arc<Exporter>) -> (Option<f64>, Option<f64>) {
    let body = exporter.scrape(super::Format::Text, false).await.unwrap();
    let text = String::from_utf8_lossy(&body);
    let labels = [("probe", "vfs_rmdir"), ("caller", "none")];
    (
        sample(&text, "tracer_latency_seconds_count", &labels),
        sample(&text, "tracer_source_up", &[]),
    )
}

#[tokio::test]
async fn a_scrape_after_a_quiet_spell_gets_the_latest_refresh_not_the_last_scraped() {
    let (tx, rx) = watch::channel(None);
    let exporter = Arc::new(Exporter::new(rx));
    // A readiness probe before the first refresh: the source is not up yet.
    assert_eq!(scraped(&exporter).await, (None, Some(0.0)));
    // Refreshes 1 to 3 with 1, 2 and 3 calls, nobody scraping meanwhile.
    for seq in 1..=3u32 {
        let mut s = snapshot();
        s.cgroups.insert(1, "/a".into());
        for _ in 0..seq {
            s.record(SeriesKey::new(Probe::VfsRmdir, 1), 5_000);
        }
        let mut f = frame(s);
        f.seq = u64::from(seq);
        tx.send_replace(Some(Arc::new(f)));
    }
    assert_eq!(
        scraped(&exporter).await,
        (Some(3.0), Some(1.0)),
        "the next scrape shows refresh 3, not the probe's answer"
    );
}

/// A frame of refresh `seq` with `calls` calls of `vfs_rmdir` in `/a`.
fn refresh(seq: u64, calls: u32) -> Arc<crate::live::Frame> {
    let mut s = snapshot();
    s.cgroups.insert(1, "/a".into());
    for _ in 0..calls {
        s.record(SeriesKey::new(Probe::VfsRmdir, 1), 5_000);
    }
    let mut f = frame(s);
    f.seq = seq;
    Arc::new(f)
}

/// The slots the cache holds bodies in: which formats the last encoding made.
fn encoded_slots(exporter: &Exporter) -> Vec<usize> {
    let cache = exporter.cache();
    (0..super::SLOTS)
        .filter(|&i| cache.bodies[i].is_some())
        .collect()
}

#[tokio::test]
async fn a_format_asked_once_is_not_encoded_at_every_refresh_after() {
    use super::{Format, slot};
    let (tx, rx) = watch::channel(Some(refresh(1, 1)));
    let exporter = Arc::new(Exporter::new(rx));
    // A person's text scrape, then Prometheus' gzipped OpenMetrics, on refresh 1.
    exporter.scrape(Format::Text, false).await.unwrap();
    exporter.scrape(Format::OpenMetrics, true).await.unwrap();
    // Refresh 5 (too far from refresh 1 for its bytes to answer: the scrape waits for the
    // encoding): Prometheus scrapes again, and only its format is encoded.
    tx.send_replace(Some(refresh(5, 2)));
    let om = exporter.scrape(Format::OpenMetrics, true).await.unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&om[..]), &mut text).unwrap();
    let labels = [("probe", "vfs_rmdir"), ("caller", "none")];
    assert_eq!(
        sample(&text, "tracer_latency_seconds_count", &labels),
        Some(2.0)
    );
    assert_eq!(
        encoded_slots(&exporter),
        [slot(Format::OpenMetrics, true)],
        "the text format, asked once on refresh 1, is not encoded for refresh 5"
    );
    // Asked again, text is encoded afresh: refresh 5, not refresh 1's bytes.
    assert_eq!(scraped(&exporter).await, (Some(2.0), Some(1.0)));
}

#[tokio::test]
async fn a_panic_while_encoding_answers_500_once_and_the_next_scrape_is_fresh() {
    a_failed_encoding_answers_500_once_and_the_next_scrape_is_fresh(TestFault::Panic).await;
}

#[tokio::test]
async fn an_encoding_error_answers_500_once_and_the_next_scrape_is_fresh() {
    a_failed_encoding_answers_500_once_and_the_next_scrape_is_fresh(TestFault::Error).await;
}

async fn a_failed_encoding_answers_500_once_and_the_next_scrape_is_fresh(fault: TestFault) {
    let (tx, rx) = watch::channel(Some(refresh(1, 1)));
    // A panic's backtrace on a loaded host can take longer than the second a scrape
    // waits by default before it takes older bytes, which would answer 200.
    let exporter = Arc::new(Exporter::new(rx).waiting_up_to(Duration::from_mins(1)));
    let (addr, _stop) = serving(exporter.clone(), limits(), None).await;
    let get = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    let ok = exchange(addr, get).await;
    assert_eq!(status(&ok), Some(200), "{ok}");
    assert_eq!(
        sample(body(&ok), "tracer_scrape_errors_total", &[]),
        Some(0.0)
    );

    // Refresh 5 is published (too far from refresh 1 for refresh 1's bytes to answer
    // for it: the scrape waits for its encoding), and that encoding panics.
    tx.send_replace(Some(refresh(5, 2)));
    exporter.fail_next_encoding(fault);
    let failed = exchange(addr, get).await;
    assert_eq!(status(&failed), Some(500), "{failed}");
    assert!(
        body(&failed).contains("encoding the metrics failed"),
        "{failed}"
    );

    // The next scrape encodes refresh 5 afresh: neither refresh 1's bytes nor a hang.
    let labels = [("probe", "vfs_rmdir"), ("caller", "none")];
    let next = exchange(addr, get).await;
    assert_eq!(status(&next), Some(200), "{next}");
    assert_eq!(
        sample(body(&next), "tracer_latency_seconds_count", &labels),
        Some(2.0),
        "refresh 5, encoded again"
    );
    assert_eq!(sample(body(&next), "tracer_source_up", &[]), Some(1.0));
    assert_eq!(
        sample(body(&next), "tracer_scrape_errors_total", &[]),
        Some(1.0),
        "the failed encoding is counted"
    );

    // And later refreshes are encoded as before.
    tx.send_replace(Some(refresh(9, 3)));
    let later = tokio::time::timeout(Duration::from_secs(5), scraped(&exporter))
        .await
        .expect("a scrape after the panic hangs");
    assert_eq!(later, (Some(3.0), Some(1.0)));
}

#[tokio::test]
async fn metrics_in_the_format_asked_and_an_index_page() {
    let (addr, _stop) = server(limits()).await;
    let text = exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(status(&text), Some(200), "{text}");
    assert_eq!(
        header(&text, "content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let labels = [("probe", "vfs_rmdir"), ("caller", "none")];
    assert_eq!(
        sample(body(&text), "tracer_latency_seconds_count", &labels),
        Some(1.0)
    );

    let om = exchange(
        addr,
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text;version=1.0.0,text/plain;q=0.5\r\n\r\n",
    )
    .await;
    assert_eq!(
        header(&om, "content-type"),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    assert!(body(&om).ends_with("# EOF\n"), "{om}");

    let zipped = exchange_bytes(
        addr,
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n",
    )
    .await;
    let split = zipped.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head_text = String::from_utf8_lossy(&zipped[..split]).to_lowercase();
    assert!(head_text.contains("content-encoding: gzip"), "{head_text}");
    let mut unzipped = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::GzDecoder::new(&zipped[split + 4..]),
        &mut unzipped,
    )
    .unwrap();
    assert_eq!(unzipped, body(&text), "gzip holds the same exposition");

    let head = exchange(addr, b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!((status(&head), body(&head)), (Some(200), ""), "{head}");

    let index = exchange(addr, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(status(&index), Some(200));
    assert!(body(&index).contains("href=\"/metrics\""), "{index}");
}

#[tokio::test]
async fn other_paths_are_404_other_methods_405_bodies_413() {
    let (addr, _stop) = server(limits()).await;
    let r = exchange(addr, b"GET /metricsz HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(status(&r), Some(404), "{r}");
    let r = exchange(
        addr,
        b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
    )
    .await;
    assert_eq!(status(&r), Some(405), "{r}");
    assert_eq!(header(&r, "allow"), Some("GET, HEAD"));
    let r = exchange(addr, b"DELETE / HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(status(&r), Some(405), "{r}");
    let r = exchange(
        addr,
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
    )
    .await;
    assert_eq!(status(&r), Some(413), "{r}");
}

#[tokio::test]
async fn a_client_that_shuts_its_sending_side_still_gets_the_answer() {
    let (addr, _stop) = server(limits()).await;
    for request in [
        &b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"[..],
        b"GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n",
    ] {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(request).await.unwrap();
        stream.shutdown().await.unwrap();
        let r = read_all(&mut stream).await;
        assert!(matches!(status(&r), Some(200 | 404)), "{r:?}");
    }
}

#[tokio::test]
async fn a_refused_body_still_being_sent_does_not_hide_the_answer() {
    let (addr, _stop) = server(limits()).await;
    // The client sends its body in parts while the answer is already on its way, as
    // an upload does; it reads only once it has sent everything.
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 300000\r\n\r\n")
        .await
        .unwrap();
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let _ = stream.write_all(&vec![b'b'; 100_000]).await;
    }
    let r = read_all(&mut stream).await;
    assert_eq!(status(&r), Some(405), "{r:?}");
}

#[tokio::test]
async fn oversized_headers_are_refused() {
    let (addr, _stop) = server(limits()).await;
    let mut req = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ".to_vec();
    req.extend(std::iter::repeat_n(b'a', 16 * 1024));
    req.extend(b"\r\n\r\n");
    let r = exchange(addr, &req).await;
    assert_eq!(status(&r), Some(431), "{r}");
    // The server is still there for others.
    let ok = exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(status(&ok), Some(200));
}

#[tokio::test]
async fn a_slow_drip_client_is_dropped_while_others_are_served() {
    let (addr, _stop) = server(limits()).await;
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET /metrics HTTP/1.1\r\n").await.unwrap();
    // One header byte every 100 ms would take 6 s to finish; the server allows 300 ms.
    let drip = tokio::spawn(async move {
        for i in 0..60 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if slow.write_all(b"X").await.is_err() {
                return Some(i);
            }
        }
        None
    });
    tokio::time::sleep(Duration::from_millis(150)).await;
    let ok = exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(status(&ok), Some(200), "served while the drip goes on");
    let cut_after = drip.await.unwrap();
    assert!(
        cut_after.is_some(),
        "the slow client was never disconnected"
    );
}

/// A request of parts a client could send, well-formed or not.
fn request() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
    use proptest::{collection::vec, prelude::*, sample::select};
    let method = prop_oneof![
        4 => select(vec!["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "CONNECT", "get", ""]).prop_map(str::to_owned),
        1 => "[A-Z]{1,12}",
        1 => any::<String>(),
    ];
    let target = prop_oneof![
        4 => select(vec!["/metrics", "/", "/metrics?x=1", "//metrics", "/metrics/", "*", "http://x/metrics", "/%00", "/../metrics"]).prop_map(str::to_owned),
        1 => "/[ -~]{0,40}",
        1 => "/a{9000}",
    ];
    let version = prop_oneof![
        4 => Just("HTTP/1.1"),
        1 => select(vec!["HTTP/1.0", "HTTP/2.0", "HTTP/9.9", "", "HTTP/1.1 x"]),
    ];
    let header = prop_oneof![
        6 => select(vec![
            "Host: x",
            "Accept: application/openmetrics-text;version=1.0.0,text/plain;q=0.5",
            "Accept: */*;q=nan",
            "Accept-Encoding: gzip",
            "Accept-Encoding: gzip;q=0, identity",
            "Accept-Encoding: gzip;q=-1e999",
            "Content-Length: 0",
            "Content-Length: 5",
            "Content-Length: -1",
            "Content-Length: 99999999999999999999999",
            "Content-Length: abc",
            "Transfer-Encoding: chunked",
            "Connection: keep-alive",
            "Expect: 100-continue",
        ])
        .prop_map(str::to_owned),
        1 => select(vec!["no colon here", ": empty name", "Bad Name: x"]).prop_map(str::to_owned),
        2 => "[A-Za-z-]{1,10}: [ -~]{0,30}",
        1 => "X-Long: [a-z]{7000}",
    ];
    let structured = (
        method,
        target,
        version,
        vec(header, 0..5),
        any::<bool>(),
        proptest::option::weighted(0.2, vec(any::<u8>(), 0..64)),
    )
        .prop_map(|(m, t, v, headers, crlf, body)| {
            let nl = if crlf { "\r\n" } else { "\n" };
            let mut r = format!("{m} {t} {v}{nl}");
            for h in headers {
                r.push_str(&h);
                r.push_str(nl);
            }
            r.push_str(nl);
            let mut bytes = r.into_bytes();
            bytes.extend(body.unwrap_or_default());
            bytes
        });
    prop_oneof![4 => structured, 1 => vec(any::<u8>(), 0..256)]
}

/// Fuzzing with a fixed budget: requests of every shape, each sent whole and the
/// sending side closed, so the server sees all of it. Nothing but a GET or HEAD of
/// `/metrics` or `/` gets a 200, nothing gets a 500, no exchange hangs, and a normal
/// scrape is still answered afterwards. Prints the inputs tried and the statuses seen.
#[test]
fn fuzzed_requests_get_a_clear_status_or_a_close() {
    use std::io::Write as _;

    use proptest::test_runner::{Config, TestRunner};

    let rt = tokio::runtime::Runtime::new().unwrap();
    let (addr, _stop) = rt.block_on(server(limits()));
    let statuses = std::cell::RefCell::new(std::collections::BTreeMap::<String, u32>::new());
    let mut runner = TestRunner::new(Config {
        cases: 1_000,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&request(), |req| {
        let response = rt.block_on(async {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            let _ = stream.write_all(&req).await;
            let _ = stream.shutdown().await;
            let mut out = Vec::new();
            tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut out))
                .await
                .map(|_| out)
        });
        let Ok(response) = response else {
            return Err(proptest::test_runner::TestCaseError::fail(
                "no answer within 10 s",
            ));
        };
        let text = String::from_utf8_lossy(&response);
        let code = status(&text);
        let key = code.map_or_else(|| "closed".to_owned(), |c| c.to_string());
        if std::env::var_os("TRACER_FUZZ_SHOW").is_some() {
            eprintln!(
                "{key} <- {:?}",
                String::from_utf8_lossy(&req[..req.len().min(120)])
            );
        }
        *statuses.borrow_mut().entry(key).or_default() += 1;
        let head = String::from_utf8_lossy(&req);
        let line = head.lines().next().unwrap_or("");
        if code == Some(200) {
            let mut words = line.split(' ');
            let (m, t) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
            // An absolute-form target (`http://host/metrics`, as sent to proxies) names
            // the same path.
            let t = t
                .split_once("://")
                .map_or(t, |(_, rest)| rest.find('/').map_or("/", |i| &rest[i..]));
            // Neither the query nor a fragment (which clients never send, and the
            // request-target's parser drops) is part of the path.
            let path = t.split(['?', '#']).next().unwrap_or("");
            proptest::prop_assert!(
                matches!(m, "GET" | "HEAD") && matches!(path, "/" | "/metrics"),
                "200 for {line:?}"
            );
        }
        proptest::prop_assert!(code.is_none_or(|c| c != 500), "500 for {line:?}");
        Ok(())
    });
    let seen: Vec<String> = statuses
        .borrow()
        .iter()
        .map(|(k, n)| format!("{k} x{n}"))
        .collect();
    // Past the harness' capture: the count is the point of a fuzz run.
    let _ = writeln!(
        std::io::stderr().lock(),
        "fuzz: HTTP requests: {} inputs, statuses {}",
        statuses.borrow().values().sum::<u32>(),
        seen.join(", ")
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    let ok = rt.block_on(exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"));
    assert_eq!(status(&ok), Some(200), "a scrape after the fuzzing");
}

#[tokio::test]
async fn connections_past_the_limit_are_closed_at_once() {
    let (addr, _stop) = server(Limits {
        max_connections: 2,
        header_read_timeout: Duration::from_secs(30),
        ..limits()
    })
    .await;
    let idle: Vec<TcpStream> = vec![
        TcpStream::connect(addr).await.unwrap(),
        TcpStream::connect(addr).await.unwrap(),
    ];
    let refused = exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(status(&refused), None, "answered past the limit: {refused}");
    drop(idle);
    // The server sees the idle connections close; a slot frees up for the next client.
    let mut served = None;
    for _ in 0..100 {
        let r = exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
        if status(&r) == Some(200) {
            served = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        served.is_some(),
        "no client served after the idle ones left"
    );
}
