//! `tracer serve`'s life as a service manager and an operator see it: a port already taken
//! ends it in under a second with one line and nothing attached; SIGHUP leaves it serving;
//! a live loop that panics (the test knob `TRACER_TEST_PANIC_LIVE_AT`) is down for the
//! scrapes and the readiness probe within two intervals, then tracer exits non-zero. And
//! `tracer capture`'s "recording" line: a workload started on it is counted whole.

use std::collections::BTreeMap;

use tracer_core::snapshot::{Probe, Snapshot};

use crate::testing::{
    harness::{Fail, Verdict, wrong},
    suite::{
        capture::exact,
        case::{Judge, On, VmCase},
        results::Results,
    },
};

/// What the lifecycle cases send back.
const READS: [&str; 8] = [
    "lifecycle",
    "lc_taken.err",
    "lc_hup.err",
    "lc_panic.err",
    "lc_panic.scrapes",
    "lc_rec.log",
    "lc_rec.json",
    "lc_rec.err",
];

/// mkdir + rmdir pairs the workload started on the "recording" line makes.
const REC_PAIRS: u64 = 100;

/// The lifecycle cases, after the signal cases (`objects` and `leftovers` are the
/// prelude's).
pub const LIFECYCLE: VmCase = VmCase {
    name: "lifecycle::lifecycle",
    heading: "serve's lifecycle (a taken port, SIGHUP, a dead loop) and capture's recording line",
    on: On::Every,
    workload: r#"
base=$(objects)
: > /tmp/lifecycle
up() { cut -d' ' -f1 /proc/uptime; }
# A port already taken: serve must end at once, with one line and nothing attached.
nc -l -p 29120 > /dev/null 2>&1 &
holder=$!
sleep 1
t0=$(up)
tracer serve --listen 127.0.0.1:29120 > /dev/null 2> /tmp/lc_taken.err
rc=$?
echo "taken rc=$rc t0=$t0 t1=$(up) base=$base $(leftovers)" >> /tmp/lifecycle
kill $holder 2>/dev/null
emit lc_taken.err /tmp/lc_taken.err
# SIGHUP: still serving after it; SIGTERM then ends it cleanly.
tracer serve --listen 127.0.0.1:29121 --interval 1s > /dev/null 2> /tmp/lc_hup.err &
p=$!
i=0; while [ $i -lt 1200 ] && ! wget -q -O /dev/null http://127.0.0.1:29121/-/ready 2>/dev/null; do sleep 0.1; i=$((i+1)); done
kill -HUP $p
sleep 3
alive=no; kill -0 $p 2>/dev/null && alive=yes
ready=no; wget -q -O /dev/null http://127.0.0.1:29121/-/ready 2>/dev/null && ready=yes
scraped=$(wget -q -O - http://127.0.0.1:29121/metrics 2>/dev/null | grep -c '^tracer_source_up 1')
kill -TERM $p
wait $p
rc=$?
i=0; while [ $i -lt 100 ] && [ "$(objects)" != "$base" ]; do sleep 0.1; i=$((i+1)); done
echo "hup alive=$alive ready=$ready up_after=$scraped rc=$rc base=$base $(leftovers)" >> /tmp/lifecycle
emit lc_hup.err /tmp/lc_hup.err
# A loop that panics at its third refresh: each scrape and probe, with its time.
TRACER_TEST_PANIC_LIVE_AT=3 tracer serve --listen 127.0.0.1:29122 --interval 1s > /dev/null 2> /tmp/lc_panic.err &
p=$!
: > /tmp/lc_panic.scrapes
while kill -0 $p 2>/dev/null; do
    m=$(wget -q -O - http://127.0.0.1:29122/metrics 2>/dev/null | grep '^tracer_source_up ' | cut -d' ' -f2)
    r=503; wget -q -O /dev/null http://127.0.0.1:29122/-/ready 2>/dev/null && r=200
    echo "$(up) up=${m:-none} ready=$r" >> /tmp/lc_panic.scrapes
    sleep 0.2
done
wait $p
rc=$?
echo "panic rc=$rc exited=$(up)" >> /tmp/lifecycle
emit lc_panic.err /tmp/lc_panic.err
emit lc_panic.scrapes /tmp/lc_panic.scrapes
# A system-wide capture in the background; the workload starts on its "recording" line,
# in a cgroup of its own: every call of it must be counted.
mkdir -p $cg/lc_rec /tmp/lc_rec
tracer capture --duration 30s --format json -o /tmp/lc_rec.json > /dev/null 2> /tmp/lc_rec.err &
c=$!
i=0; while [ $i -lt 1800 ] && ! grep -q 'recording since' /tmp/lc_rec.err; do sleep 0.1; i=$((i+1)); done
sh -c 'echo $$ > '$cg'/lc_rec/cgroup.procs; cd /tmp/lc_rec && i=0; while [ $i -lt 100 ]; do mkdir d$i && rmdir d$i || exit 1; i=$((i+1)); done'
echo "workload $?" > /tmp/lc_rec.log
wait $c
echo "exit $?" >> /tmp/lc_rec.log
rmdir $cg/lc_rec
emit lifecycle /tmp/lifecycle
emit lc_rec.log /tmp/lc_rec.log
emit lc_rec.err /tmp/lc_rec.err
[ -f /tmp/lc_rec.json ] && emit lc_rec.json /tmp/lc_rec.json
"#,
    judge,
    ..VmCase::BASE
};

/// The lifecycle verdicts.
fn judge(j: &Judge<'_>) {
    j.verdict(
        "",
        "serve with its port taken: exits 1 in under a second, one line, nothing attached",
        &READS,
        |r| {
            line(r, "taken")
                .map_err(Fail::from)
                .and_then(|l| taken(r, &l))
        },
    );
    j.verdict(
        "",
        "serve after SIGHUP: still serving and ready; SIGTERM then ends it, exit 0, nothing left",
        &READS,
        |r| {
            line(r, "hup")
                .map_err(Fail::from)
                .and_then(|l| hangup(r, &l))
        },
    );
    j.verdict(
        "",
        "serve whose live loop panics: tracer_source_up 0 and /-/ready 503 within two intervals, then exit 1",
        &READS,
        |r| line(r, "panic").map_err(Fail::from).and_then(|l| panicked(r, &l)),
    );
    j.verdict(
        "",
        "capture in the background: a workload started on its recording line is counted whole",
        &READS,
        recording,
    );
}

/// The guest's `lifecycle` line of case `name`, as key=value words.
fn line(files: &Results<'_>, name: &str) -> Result<BTreeMap<String, String>, String> {
    let text = files.read("lifecycle")?;
    let l = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .ok_or_else(|| format!("no {name} line in: {text}"))?;
    Ok(l.split_whitespace()
        .filter_map(|w| w.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect())
}

fn word<'a>(l: &'a BTreeMap<String, String>, key: &str) -> &'a str {
    l.get(key).map_or("", String::as_str)
}

fn secs(l: &BTreeMap<String, String>, key: &str) -> Result<f64, String> {
    word(l, key)
        .parse()
        .map_err(|_| format!("no time {key} in {l:?}"))
}

/// As many BPF objects after as before (`P,L,M`).
fn nothing_attached(l: &BTreeMap<String, String>) -> Result<(), String> {
    let (base, after) = (word(l, "base"), word(l, "after"));
    if base.is_empty() || base != after {
        return Err(format!(
            "bpftool lists {after} programs,links,maps after, {base} before"
        ));
    }
    Ok(())
}

fn taken(files: &Results<'_>, l: &BTreeMap<String, String>) -> Verdict {
    let took = secs(l, "t1")? - secs(l, "t0")?;
    let err = files.read("lc_taken.err").unwrap_or_default();
    let lines: Vec<&str> = err.lines().filter(|s| !s.trim().is_empty()).collect();
    if word(l, "rc") != "1" {
        return Err(wrong!("exit {}, expected 1: {err}", word(l, "rc")));
    }
    if took >= 1.0 {
        return Err(wrong!("took {took:.2} s, expected under 1 s: {err}"));
    }
    if lines.len() != 1 || !lines[0].contains("Address already in use") {
        return Err(wrong!(
            "{} lines, expected one naming the address in use: {err}",
            lines.len()
        ));
    }
    nothing_attached(l)?;
    Ok(format!(
        "{took:.2} s, \"{}\", {} objects as before",
        lines[0],
        word(l, "after")
    ))
}

fn hangup(files: &Results<'_>, l: &BTreeMap<String, String>) -> Verdict {
    let err = files.read("lc_hup.err").unwrap_or_default();
    let wrong = if word(l, "alive") != "yes" {
        Some("it ended on SIGHUP")
    } else if word(l, "ready") != "yes" {
        Some("/-/ready did not answer 200 after SIGHUP")
    } else if word(l, "up_after") != "1" {
        Some("the scrape after SIGHUP did not say tracer_source_up 1")
    } else if word(l, "rc") != "0" {
        Some("SIGTERM did not end it with exit 0")
    } else if !err.contains("SIGHUP") {
        Some("it did not log the SIGHUP")
    } else {
        None
    };
    if let Some(w) = wrong {
        return Err(wrong!("{w}: {l:?}\n{err}"));
    }
    nothing_attached(l)?;
    let said = err.lines().find(|s| s.contains("SIGHUP")).unwrap_or("");
    Ok(format!(
        "serving on after it (\"{said}\"), exit 0 on SIGTERM, nothing left"
    ))
}

/// One scrape of the panicking serve: (uptime, `tracer_source_up`, /-/ready's status).
fn scrapes(text: &str) -> Vec<(f64, String, String)> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let t = w.next()?.parse().ok()?;
            let up = w.next()?.strip_prefix("up=")?.to_owned();
            let ready = w.next()?.strip_prefix("ready=")?.to_owned();
            Some((t, up, ready))
        })
        .collect()
}

/// The refresh interval of the case's serve.
const INTERVAL_S: f64 = 1.0;

fn panicked(files: &Results<'_>, l: &BTreeMap<String, String>) -> Verdict {
    let err = files.read("lc_panic.err").unwrap_or_default();
    let seen = scrapes(&files.read("lc_panic.scrapes")?);
    let last_up = seen
        .iter()
        .rfind(|(_, up, ready)| up == "1" && ready == "200")
        .map(|s| s.0)
        .ok_or_else(|| format!("never up and ready before the panic: {seen:?}"))?;
    let down = seen
        .iter()
        .find(|(t, up, ready)| *t > last_up && up == "0" && ready == "503")
        .map(|s| s.0)
        .ok_or_else(|| format!("never up 0 and not ready after being up: {seen:?}\n{err}"))?;
    if down - last_up > 2.0 * INTERVAL_S {
        return Err(wrong!(
            "down {:.1} s after the last up scrape, more than two intervals",
            down - last_up
        ));
    }
    let rc = word(l, "rc");
    if rc == "0" || rc.is_empty() {
        return Err(wrong!("exit {rc}, expected non-zero: {err}"));
    }
    let exited = secs(l, "exited")? - down;
    if !err.contains("panicked") {
        return Err(wrong!("stderr does not say the loop panicked: {err}"));
    }
    Ok(format!(
        "down {:.1} s after the last up scrape, exit {rc} {exited:.1} s later",
        down - last_up
    ))
}

fn recording(files: &Results<'_>) -> Verdict {
    let log = files.read("lc_rec.log")?;
    let err = files.read("lc_rec.err").unwrap_or_default();
    if !log.contains("workload 0") || !log.contains("exit 0") {
        return Err(wrong!("{log}\n{err}"));
    }
    let said = err
        .lines()
        .find(|l| l.contains("recording since"))
        .ok_or_else(|| format!("no recording line: {err}"))?;
    let path = files
        .get("lc_rec.json")
        .ok_or_else(|| format!("no capture file: {log}\n{err}"))?;
    let s: Snapshot = tracer_core::capture_file::load(path).map_err(|e| format!("{e:#}"))?;
    let mut own = s.clone();
    own.series
        .retain(|k, _| s.cgroup_name(k.cgroup) == "/lc_rec");
    Ok(format!(
        "{}, {} in its cgroup after \"{said}\"",
        exact(&own, Probe::SysRmdir, REC_PAIRS)?,
        exact(&own, Probe::VfsRmdir, REC_PAIRS)?
    ))
}
