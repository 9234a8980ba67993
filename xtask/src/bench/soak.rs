//! `cargo xtask bench soak`: tracer for N minutes (real time) in a VM while 10,000
//! short-lived cgroups per 10 minutes are made and removed, each mounting a tmpfs,
//! creating, unlinking and removing a directory in it, and unmounting it (`vm/soak.sh`,
//! the cycles done by `soak-churn`, a static program of this workspace, with system calls).
//! `tracer serve` is scraped every second from this host through a forwarded port, `tracer
//! top --frames` runs beside it. Printed every minute: scrapes answered, the exporter's
//! resident memory and tracked cgroups (from its own metrics), the kernel maps' entries
//! and the two tracers' memory (from the guest). At the end tracer's counts plus its loss
//! counters are compared with the kernel's own kprobe event counts of the same functions
//! over the same run. Prints what it saw; decides nothing but the exit status of a run
//! that did not complete.

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    net::SocketAddr,
    path::{Path, PathBuf},
    process::ExitCode,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use anyhow::Context as _;

use crate::{
    exposition, kernel,
    testing::prometheus::{self, free_port},
    tracer_build, util, vm,
};

/// Cgroups made and removed per 10 minutes of soak.
const CGROUPS_PER_10_MIN: u64 = 10_000;
/// The port `tracer serve` listens on in the guest.
const GUEST_PORT: u16 = 29110;

/// `cargo xtask bench soak` options.
#[derive(Debug, clap::Args)]
#[command(mut_arg("timeout", |a| a.default_value("900").help(
    "Kill the VM after this many seconds past the soak's minutes (boot, the end, and room \
     for a slow machine)"
)))]
pub struct SoakArgs {
    /// Minutes of soak, real time (the VM's boot and the end add about 2).
    #[arg(long, default_value_t = 10)]
    minutes: u64,
    /// 5.10, 6.1, 6.12 or 7.3.
    #[arg(long, default_value = "6.12")]
    kernel: String,
    #[command(flatten)]
    qemu: vm::QemuArgs,
}

/// One scrape of the text format: the body of a complete 200 answer, or why not.
fn scrape(addr: SocketAddr) -> Result<String, String> {
    prometheus::get(&format!("http://{addr}/metrics"), "text/plain")
}

/// The sum of the samples of `metric` whose labels include every one of `labels`; 0 where
/// there is none.
fn sum(text: &str, metric: &str, labels: &[(&str, &str)]) -> f64 {
    exposition::sum(text, metric, labels).unwrap_or(0.0)
}

/// What the host's scraper saw.
#[derive(Default)]
struct Scrapes {
    tried: u64,
    ok: u64,
    /// Why the first few failed.
    failures: Vec<String>,
    /// Per minute since the first answer: (scrapes ok, tried, RSS MiB, cgroups tracked,
    /// folded), from the last answer of that minute.
    minutes: Vec<(u64, u64, f64, f64, f64)>,
}

/// Scrape every second from the first answer for `window`, or until `stop`.
fn scraper(addr: SocketAddr, window: Duration, stop: &AtomicBool, out: &Mutex<Scrapes>) {
    // The guest boots first: wait for its first answer (at most 10 minutes).
    let boot = Instant::now();
    let mut last = loop {
        if stop.load(Ordering::Relaxed) || boot.elapsed() > Duration::from_mins(10) {
            return;
        }
        // The first answer with a refresh in it (before the first, the frame is empty).
        if let Ok(body) = scrape(addr)
            && body.contains("\nprocess_resident_memory_bytes ")
        {
            break body;
        }
        thread::sleep(Duration::from_millis(500));
    };
    let start = Instant::now();
    let mut next = start;
    let mut minute = 0;
    let record = |last: &str, s: &mut Scrapes| {
        let row = (
            s.ok,
            s.tried,
            sum(last, "process_resident_memory_bytes", &[]) / 1_048_576.0,
            sum(last, "tracer_cgroups_tracked", &[]),
            sum(last, "tracer_cgroups_folded", &[]),
        );
        println!(
            "soak: minute {}: scrapes ok {}/{}, serve RSS {:.1} MiB, cgroups tracked {} (folded into other {})",
            s.minutes.len(),
            row.0,
            row.1,
            row.2,
            row.3,
            row.4
        );
        s.minutes.push(row);
    };
    if let Ok(mut s) = out.lock() {
        record(&last, &mut s);
    }
    while start.elapsed() < window && !stop.load(Ordering::Relaxed) {
        let result = scrape(addr);
        if let Ok(mut s) = out.lock() {
            s.tried += 1;
            match result {
                Ok(body) => {
                    s.ok += 1;
                    last = body;
                }
                Err(e) => {
                    if s.failures.len() < 5 {
                        s.failures
                            .push(format!("{:.0} s: {e}", start.elapsed().as_secs_f64()));
                    }
                }
            }
            let m = start.elapsed().as_secs() / 60;
            if m > minute {
                minute = m;
                record(&last, &mut s);
            }
        }
        next += Duration::from_secs(1);
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            thread::sleep(wait);
        }
    }
    if let Ok(mut s) = out.lock() {
        record(&last, &mut s);
    }
}

/// `key=value` words of a line.
fn words(line: &str) -> BTreeMap<&str, &str> {
    line.split_whitespace()
        .filter_map(|w| w.split_once('='))
        .collect()
}

/// A `minute=M NAME=N NAME=N ...` line of the guest's map sampler as `minute M: NAME N, ...`,
/// the maps of the same name (one per tracer process) summed.
fn map_totals(line: &str) -> String {
    let mut minute = "?";
    let mut totals: BTreeMap<&str, u64> = BTreeMap::new();
    for (k, v) in line.split_whitespace().filter_map(|w| w.split_once('=')) {
        if k == "minute" {
            minute = v;
        } else {
            *totals.entry(k).or_default() += v.parse::<u64>().unwrap_or(0);
        }
    }
    let list: Vec<String> = totals.iter().map(|(k, v)| format!("{k} {v}")).collect();
    format!("minute {minute}: {}", list.join(", "))
}

/// The cgroups the workers made and the longest worker's seconds, from their
/// `soak-churn W: N cgroups in S s` lines.
fn pace(churn: &str) -> Option<(u64, f64)> {
    let mut total = None;
    for line in churn.lines() {
        let (_, rest) = line.split_once(": ")?;
        let (n, rest) = rest.split_once(" cgroups in ")?;
        let secs: f64 = rest.strip_suffix(" s")?.parse().ok()?;
        let (made, longest) = total.get_or_insert((0, 0.0_f64));
        *made += n.parse::<u64>().ok()?;
        *longest = longest.max(secs);
    }
    total
}

/// Per probe: the kernel's own count, tracer's calls, its losses; and the sum of the
/// differences that no loss counter explains.
fn accounting(reference: &str, metrics: &str) -> (Vec<String>, u64) {
    let mut lines = Vec::new();
    let mut unaccounted = 0u64;
    for line in reference.lines() {
        let mut it = line.split_whitespace();
        let (Some(name), Some(Ok(kernel))) = (it.next(), it.next().map(str::parse::<u64>)) else {
            continue;
        };
        let probe = [("probe", name)];
        let counted = sum(metrics, "tracer_latency_seconds_count", &probe);
        let lost = sum(metrics, "tracer_probe_lost_calls_total", &probe);
        let in_flight = sum(metrics, "tracer_probe_unmatched_entries", &probe);
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "counts"
        )]
        let accounted = (counted + lost + in_flight).round() as u64;
        let off = kernel.abs_diff(accounted);
        unaccounted += off;
        lines.push(format!(
            "{name}: kernel {kernel}, tracer {counted} + lost {lost} + in flight {in_flight} = {accounted}, unaccounted {off}"
        ));
    }
    (lines, unaccounted)
}

/// Run the soak.
///
/// # Errors
/// When the VM cannot be started or its kernel is unknown.
pub fn run(tracer: &Path, kernels: &Path, args: &SoakArgs) -> anyhow::Result<ExitCode> {
    let minutes = args.minutes.max(1);
    let cgroups = CGROUPS_PER_10_MIN * minutes / 10;
    let kernel = kernel::resolve(&args.kernel, kernels)?;
    let (outcome, scrapes) = boot_and_scrape(tracer, &kernel, args, minutes, cgroups)?;
    let ran_ok = outcome.success();
    let files: BTreeMap<String, PathBuf> = outcome.files.into_iter().collect();
    let read = |name: &str| {
        files
            .get(name)
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default()
    };
    let samples = read("soak.samples");
    print_guest(&read, &samples, minutes, cgroups);
    let (lines, unaccounted) = accounting(&read("soak.ref"), &read("soak.final"));
    for l in &lines {
        println!("soak: {l}");
    }
    let serve_log = read("soak_serve.log");
    if let Some(status) = serve_log.lines().rev().find(|l| l.starts_with("exit ")) {
        println!("soak: tracer serve ended with {status} on SIGTERM");
    }
    let s = scrapes;
    for f in &s.failures {
        println!("soak: scrape failed at {f}");
    }
    // The exporter's own resident memory (its metric), at the first and last minute.
    let rss: Vec<f64> = s.minutes.iter().map(|m| m.2).collect();
    let entries: Vec<&str> = samples
        .lines()
        .filter_map(|l| words(l).get("map_entries").copied())
        .collect();
    let complete = ran_ok && !lines.is_empty() && s.tried > 0;
    if !complete {
        println!(
            "soak: the run did not complete: {}",
            outcome
                .failure
                .clone()
                .unwrap_or_else(|| "no kernel counts or no scrapes".into())
        );
    }
    println!(
        "soak: scrapes ok {}/{}, rss first/last {:.1}/{:.1} MiB, map entries first/last {}/{}, unaccounted events {unaccounted}",
        s.ok,
        s.tried,
        rss.first().unwrap_or(&0.0),
        rss.last().unwrap_or(&0.0),
        entries.first().unwrap_or(&"?"),
        entries.last().unwrap_or(&"?"),
    );
    Ok(if complete {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Boot `kernel` for the soak of `minutes` over `cgroups` cgroups, scraping its `tracer
/// serve` from here every second meanwhile: the VM's outcome and what the scrapes saw.
fn boot_and_scrape(
    tracer: &Path,
    kernel: &kernel::Kernel,
    args: &SoakArgs,
    minutes: u64,
    cgroups: u64,
) -> anyhow::Result<(vm::Outcome, Scrapes)> {
    let port = free_port()?;
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
    let out_dir = util::target_dir().join("soak").join(&kernel.name);
    let _ = std::fs::remove_dir_all(&out_dir);
    println!(
        "soak: {minutes} min on {}, {cgroups} cgroups made and removed, serve scraped every second at {addr}",
        kernel.name
    );
    let mut files = Vec::new();
    files.extend(vm::host_program("/usr/sbin/bpftool").context("bpftool (`cargo xtask setup`)")?);
    let churn = tracer_build::soak_churn()?;
    files.push((
        "/bin/soak-churn".to_owned(),
        0o755,
        std::fs::read(&churn).with_context(|| format!("reading {}", churn.display()))?,
    ));
    let spec = vm::Spec {
        kernel,
        tracer: Some(tracer),
        command: format!(
            "SOAK_MINUTES={minutes}\nSOAK_CGROUPS={cgroups}\n{}",
            include_str!("../../vm/soak.sh")
        ),
        files,
        timeout: Duration::from_secs(minutes * 60 + args.qemu.timeout),
        kvm: args.qemu.kvm,
        icount: false,
        max_cpus: None,
        interactive: false,
        forward: Some((port, GUEST_PORT)),
        out_dir,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let scrapes = Arc::new(Mutex::new(Scrapes::default()));
    let worker = {
        let (stop, scrapes) = (Arc::clone(&stop), Arc::clone(&scrapes));
        thread::spawn(move || scraper(addr, Duration::from_secs(minutes * 60), &stop, &scrapes))
    };
    let outcome = vm::boot(&spec);
    stop.store(true, Ordering::Relaxed);
    let _ = worker.join();
    let outcome = outcome?;
    let scrapes = std::mem::take(
        &mut *scrapes
            .lock()
            .map_err(|_| anyhow::anyhow!("the scraper panicked"))?,
    );
    Ok((outcome, scrapes))
}

/// What the guest saw, minute by minute, and its churn: the pace, the maps' entries by
/// name at the first and last minute, the steps that failed.
fn print_guest(read: &dyn Fn(&str) -> String, samples: &str, minutes: u64, cgroups: u64) {
    let mut report = String::new();
    for line in samples.lines() {
        let w = words(line);
        let kib = |k: &str| w.get(k).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) / 1024.0;
        let _ = writeln!(
            report,
            "soak: guest minute {}: cgroups made {}, serve RSS {:.1} MiB ({:.1} anonymous), top RSS {:.1} MiB, kernel map entries {} in {} maps",
            w.get("minute").unwrap_or(&"?"),
            w.get("cgroups_made").unwrap_or(&"?"),
            kib("serve_rss_kib"),
            kib("serve_anon_kib"),
            kib("top_rss_kib"),
            w.get("map_entries").unwrap_or(&"?"),
            w.get("maps").unwrap_or(&"?"),
        );
    }
    print!("{report}");
    let churn = read("soak.churn");
    for line in churn.lines() {
        println!("soak: {line}");
    }
    if let Some((made, seconds)) = pace(&churn) {
        #[expect(clippy::cast_precision_loss, reason = "counts and seconds")]
        let (rate, asked) = (
            made as f64 / seconds.max(0.1),
            cgroups as f64 / (minutes * 60) as f64,
        );
        println!(
            "soak: pace {rate:.1} cgroups/s ({made} of {cgroups} made in {seconds:.1} s; {asked:.1}/s asked)"
        );
    }
    // Which maps hold the entries (serve's and top's summed by name), first and last minute.
    let by_map = read("soak.maps");
    for line in [by_map.lines().next(), by_map.lines().last()]
        .into_iter()
        .flatten()
    {
        println!("soak: map entries by name, {}", map_totals(line));
    }
    let failed = read("soak.fail");
    if !failed.is_empty() {
        println!(
            "soak: {} workload steps failed, first: {}",
            failed.lines().count(),
            failed.lines().next().unwrap_or("")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_call_is_counted_lost_or_in_flight() {
        let metrics = "\
tracer_latency_seconds_count{probe=\"vfs_rmdir\",caller=\"none\",cgroup=\"/a\"} 90
tracer_latency_seconds_count{probe=\"vfs_rmdir\",caller=\"none\",cgroup=\"other\"} 5
tracer_probe_lost_calls_total{probe=\"vfs_rmdir\",kind=\"start_drops\"} 3
tracer_probe_unmatched_entries{probe=\"vfs_rmdir\"} 2
tracer_latency_seconds_count{probe=\"namespace_unlock\",caller=\"none\",cgroup=\"/a\"} 10
";
        let (lines, off) = accounting("vfs_rmdir 100\nnamespace_unlock 12\n", metrics);
        assert_eq!(off, 2, "{lines:?}");
        assert!(lines[0].ends_with("unaccounted 0"), "{lines:?}");
        assert!(lines[1].contains("kernel 12") && lines[1].ends_with("unaccounted 2"));
    }

    #[test]
    fn the_pace_is_every_worker_s_cgroups_over_the_longest_worker_s_time() {
        let churn = "soak-churn 1: 1000 cgroups in 119.9 s\nsoak-churn 0: 990 cgroups in 120.0 s\n";
        assert_eq!(pace(churn), Some((1990, 120.0)));
        assert_eq!(pace(""), None);
        assert_eq!(
            pace("soak-churn: mkdir /mnt/soak0: Permission denied\n"),
            None
        );
    }

    #[test]
    fn maps_of_the_same_name_are_summed() {
        assert_eq!(
            map_totals("minute=3 HIST=10 COUNTERS=2 HIST=5"),
            "minute 3: COUNTERS 2, HIST 15"
        );
    }
}
