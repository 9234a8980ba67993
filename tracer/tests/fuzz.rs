//! Fuzzing with a fixed budget: every parser that reads what a user or a file hands tracer.
//!
//! Each test feeds its parser a fixed number of generated inputs (random text, and
//! mutations of valid input, which reach deeper than random bytes do) and checks that it
//! returns, without panicking, either a value or an error that says what was wrong. Each
//! prints how many inputs it tried and the slowest one's time, so a parser that turns
//! quadratic shows up as a figure, not as a timed assertion.
//!
//! The capture-file reader gets the most: what it accepts is then rendered as a report,
//! written back to a capture file and read again (it must come back equal), and compared
//! with itself, as `tracer report`, `tracer capture -o` and `tracer compare` would.

use std::{
    cell::RefCell,
    io::Write as _,
    path::Path,
    time::{Duration, Instant},
};

use clap::Args as _;
use proptest::{
    prelude::*,
    test_runner::{Config, TestRunner},
};
use serde_json::Value;
use tracer::{
    export::parse_listen,
    live::{Source as _, replay::ReplaySource},
    output::OutputArgs,
};
use tracer_core::{
    capture_file, report,
    snapshot::{CommandRun, Probe, Snapshot},
    units::{parse_duration, parse_nonzero_duration},
};
use tracer_host::btf::Btf;
use tracer_loader::attach::ProbeSelection;
use tracer_model as model;

/// Counts inputs and keeps the slowest one's time.
struct Tally {
    name: &'static str,
    tried: u64,
    slowest: Duration,
}

impl Tally {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            tried: 0,
            slowest: Duration::ZERO,
        }
    }

    fn time<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        self.tried += 1;
        self.slowest = self.slowest.max(start.elapsed());
        out
    }

    /// Straight to the standard error handle: the test harness captures `eprintln!`, and
    /// the count is the point of a fuzz run.
    fn print(&self) {
        let _ = writeln!(
            std::io::stderr().lock(),
            "fuzz: {}: {} inputs, no panic, slowest {:.2} ms",
            self.name,
            self.tried,
            self.slowest.as_secs_f64() * 1e3
        );
    }
}

/// `cases` times `TRACER_FUZZ_SCALE` (default 1): the budget of `cargo test` is fixed, a
/// longer hunt is one variable away.
fn runner(cases: u32) -> TestRunner {
    let scale = std::env::var("TRACER_FUZZ_SCALE")
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
        .unwrap_or(1)
        .max(1);
    TestRunner::new(Config {
        cases: cases.saturating_mul(scale),
        // No regression files written into the source tree; a failure prints its input.
        failure_persistence: None,
        ..Config::default()
    })
}

/// Run `check` on `cases` inputs from `strategy`; print the tally.
fn fuzz<S: Strategy>(
    name: &'static str,
    cases: u32,
    strategy: &S,
    check: impl FnMut(S::Value) -> Result<(), TestCaseError>,
) where
    S::Value: std::fmt::Debug,
{
    let tally = RefCell::new(Tally::new(name));
    let check = RefCell::new(check);
    let result = runner(cases).run(strategy, |input| {
        tally.borrow_mut().time(|| (check.borrow_mut())(input))
    });
    tally.borrow().print();
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
}

/// Text a user could type: mostly the characters durations, lists and addresses are
/// made of, with some of anything.
fn typed() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[-+0-9.eEnsumhi :,=\\[\\]a-z_µ]{0,24}",
        1 => any::<String>(),
        1 => "[0-9]{15,40}(ns|us|ms|s|m|h)?",
    ]
}

#[test]
fn durations() {
    fuzz("durations", 5_000, &typed(), |s| {
        match parse_duration(&s) {
            Ok(d) => {
                // Whatever is accepted is digits with at most a unit.
                let t = s.trim();
                prop_assert!(
                    t.starts_with(|c: char| c.is_ascii_digit() || c == '.'),
                    "{s:?} -> {d:?}"
                );
            }
            Err(e) => {
                let e = e.to_string();
                prop_assert!(
                    e.contains(&format!("{:?}", s.trim())) || e.starts_with("no duration"),
                    "the error for {s:?} does not quote it: {e}"
                );
            }
        }
        if let Ok(d) = parse_nonzero_duration(&s) {
            prop_assert!(!d.is_zero());
        }
        Ok(())
    });
}

#[test]
fn probe_lists() {
    let names: Vec<&str> = ProbeSelection::all()
        .probes()
        .iter()
        .map(|p| p.name())
        .collect();
    let word = prop_oneof![
        3 => proptest::sample::select(names.clone()).prop_map(str::to_owned),
        1 => "[a-z_ ]{0,12}",
    ];
    let list = proptest::collection::vec(word, 0..6).prop_map(|w| w.join(","));
    fuzz("probe lists", 5_000, &list, |s| {
        match s.parse::<ProbeSelection>().map_err(|e| e.to_string()) {
            Ok(list) => {
                prop_assert!(!list.probes().is_empty());
                for p in list.probes() {
                    prop_assert!(Probe::from_name(p.name()).is_some());
                }
            }
            Err(e) => prop_assert!(
                e.starts_with("unknown probe") || e.contains("names no probe"),
                "{s:?}: {e}"
            ),
        }
        Ok(())
    });
}

#[test]
fn model_parameters() {
    let pairs: Vec<(&'static str, &'static str)> = model::Scenario::ALL
        .into_iter()
        .flat_map(|s| s.defaults().keys().into_iter().map(move |k| (s.name(), k)))
        .collect();
    let input = (
        proptest::sample::select(pairs),
        prop_oneof![typed(), "[0-9_]{1,30}(ns|us|ms|s|%)?"],
    );
    fuzz("--set values", 5_000, &input, |((scenario, key), value)| {
        let s: model::Scenario = scenario.parse().expect("listed");
        let mut p = s.defaults();
        if let Err(e) = p.set(key, &value) {
            let e = e.to_string();
            prop_assert!(
                e.contains(key),
                "the error for {key}={value:?} does not name it: {e}"
            );
        }
        Ok(())
    });
}

#[test]
fn listen_addresses() {
    let addr = prop_oneof![
        typed(),
        "(localhost|127\\.0\\.0\\.1|\\[::1\\]|::1|[0-9.]{1,16}):[0-9]{0,7}",
    ];
    fuzz("--listen addresses", 5_000, &addr, |s| {
        if let Err(e) = parse_listen(&s) {
            prop_assert!(e.contains("e.g.") || e.contains("port"), "{s:?}: {e}");
        }
        Ok(())
    });
}

/// The options of a subcommand, and the values a user might give them.
fn argv_of(cmd: &clap::Command) -> impl Strategy<Value = Vec<String>> + use<> {
    let mut words: Vec<String> = cmd
        .get_arguments()
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .collect();
    words.extend(
        [
            "-5s",
            "0",
            "1",
            "1e308",
            "nan",
            "",
            "umount-storm",
            "expedited",
            "mounts=5",
            "vfs_rmdir,",
            "127.0.0.1:0",
            "--",
            "-d",
            "-o",
            "json",
            "10ms",
            "probes,cgroups",
        ]
        .map(str::to_owned),
    );
    let word = prop_oneof![
        4 => proptest::sample::select(words),
        1 => typed(),
    ];
    proptest::collection::vec(word, 0..8)
}

/// Parse `argv` as `A`'s subcommand; what clap accepts must build the arguments.
fn parse_as<A: clap::Args + clap::FromArgMatches>(
    cmd: &clap::Command,
    argv: &[String],
) -> Result<(), TestCaseError> {
    let name = cmd.get_name().to_owned();
    let matches = cmd
        .clone()
        .try_get_matches_from(std::iter::once(name).chain(argv.iter().cloned()));
    if let Ok(m) = matches {
        prop_assert!(A::from_arg_matches(&m).is_ok(), "{argv:?}");
    }
    Ok(())
}

#[test]
fn command_lines() {
    let capture = tracer::capture::Args::augment_args(clap::Command::new("capture"));
    let top = tracer::tui::Args::augment_args(clap::Command::new("top"));
    let serve = tracer::export::Args::augment_args(clap::Command::new("serve"));
    let model_cmd = OutputArgs::augment_args(tracer::model::Args::augment_args(
        clap::Command::new("model"),
    ));
    for cmd in [&capture, &top, &serve, &model_cmd] {
        cmd.clone().debug_assert();
    }
    let tally = RefCell::new(Tally::new("command lines (capture, top, serve, model)"));
    for (cmd, parse) in [
        (
            &capture,
            parse_as::<tracer::capture::Args> as fn(&_, &_) -> _,
        ),
        (&top, parse_as::<tracer::tui::Args>),
        (&serve, parse_as::<tracer::export::Args>),
        (&model_cmd, parse_as::<tracer::model::Args>),
    ] {
        let result = runner(1_000).run(&argv_of(cmd), |argv| {
            tally.borrow_mut().time(|| parse(cmd, &argv))
        });
        if let Err(e) = result {
            tally.borrow().print();
            panic!("{}: {e}", cmd.get_name());
        }
    }
    tally.borrow().print();
}

/// A capture file with every part a capture can have: series with callers and cgroups,
/// counters, losses, attach states (from a model run), a command, slow calls, dentry
/// state and BPF cost.
fn seed_capture() -> String {
    let run = model::Run::named("negative-dentry-rmdir", None, &["negatives=2000"])
        .expect("a scenario and parameter it has");
    let mut snap = model::run(&run).expect("the scenario runs");
    let cgroup = snap.cgroups.keys().next().copied().unwrap_or(1);
    snap.command = Some(CommandRun {
        argv: vec!["rm".into(), "-rf".into(), "/data/old".into()],
        wall_ns: 1_500_000_000,
        exit_code: Some(0),
        signal: None,
        cgroup: Some(cgroup),
    });
    snap.slow_calls.push(tracer_core::snapshot::SlowCall {
        at_unix_ns: 1_700_000_000_000_000_000,
        pid: 42,
        tid: 43,
        comm: "rm".into(),
        cgroup,
        probe: Probe::VfsRmdir,
        caller: Some(Probe::SysRmdir),
        latency_ns: 120_000_000,
        pruned_under_lock_ns: Some(100_000_000),
    });
    snap.dentry_state = tracer_core::snapshot::DentryState::parse("100 50 45 0 20 0")
        .ok()
        .zip(tracer_core::snapshot::DentryState::parse("90 40 45 0 10 0").ok());
    snap.bpf = Some(tracer_core::snapshot::BpfUsage {
        run_ns: 5_000_000,
        runs: 10_000,
    });
    capture_file::to_string(&snap)
}

/// Values a mutation puts in place of a node.
fn replacement(kind: u8) -> Value {
    match kind % 14 {
        0 => Value::Null,
        1 => Value::Bool(true),
        2 => (-1).into(),
        3 => 0.into(),
        4 => u64::MAX.into(),
        5 => serde_json::json!(1e308),
        6 => serde_json::json!(-1.5),
        7 => "".into(),
        8 => "vfs_rmdir".into(),
        9 => serde_json::json!([]),
        10 => serde_json::json!({}),
        11 => serde_json::json!([[u64::MAX, u64::MAX]]),
        12 => 1.into(),
        _ => "x".repeat(300).into(),
    }
}

/// Apply mutation `op` to the `target`-th node of `v` (pre-order), counting down.
fn mutate(v: &mut Value, target: &mut usize, op: u8) -> bool {
    if *target == 0 {
        match (op / 14, &mut *v) {
            // Drop a key, or an element: a field or an entry goes missing.
            (1, Value::Object(m)) if !m.is_empty() => {
                let key = m.keys().next().cloned().unwrap_or_default();
                m.remove(&key);
            }
            (1, Value::Array(a)) if !a.is_empty() => {
                a.pop();
            }
            // Repeat an element: duplicate series, calls, cgroups.
            (2, Value::Array(a)) if !a.is_empty() => {
                let first = a[0].clone();
                a.push(first);
            }
            // Same type, odd value: these get past the schema to what is built from it.
            (3.., Value::Number(_)) => {
                *v = [
                    0u64,
                    1,
                    u64::MAX,
                    u64::MAX / 2 + 1,
                    1 << 53,
                    u64::from(u32::MAX),
                    1_000_000_000_000_000_000,
                ][usize::from(op % 7)]
                .into();
            }
            (3.., Value::String(_)) => {
                *v = ["", "vfs_rmdir", "none", "/", "a\"b\\c\nd", "\u{0}", "é"]
                    [usize::from(op % 7)]
                .into();
            }
            _ => *v = replacement(op),
        }
        return true;
    }
    *target -= 1;
    match v {
        Value::Array(a) => a.iter_mut().any(|x| mutate(x, target, op)),
        Value::Object(m) => m.values_mut().any(|x| mutate(x, target, op)),
        _ => false,
    }
}

fn nodes(v: &Value) -> usize {
    1 + match v {
        Value::Array(a) => a.iter().map(nodes).sum(),
        Value::Object(m) => m.values().map(nodes).sum(),
        _ => 0,
    }
}

/// What `tracer report`, `tracer capture -o` and `tracer compare` do with a loaded
/// capture: render it, write it and read it back (equal), compare it with itself.
fn use_loaded(snap: &Snapshot, text: &str) -> Result<(), TestCaseError> {
    let _ = report::render(snap, report::Format::Text, true);
    let written = capture_file::to_string(snap);
    let again = capture_file::from_str(&written);
    prop_assert!(
        again.as_ref().ok() == Some(snap),
        "written back and read again, it differs: {again:?}\nfrom {text}"
    );
    let _ = report::compare(snap, snap, false);
    // `tracer top --replay` and `tracer serve --replay`: played through in a few steps.
    let mut replay = ReplaySource::new(snap.clone(), Path::new("fuzzed.json"), 1000.0);
    for _ in 0..3 {
        let _ = replay.poll(Duration::from_secs(1));
    }
    Ok(())
}

#[test]
fn capture_files() {
    let seed = seed_capture();
    let value: Value = serde_json::from_str(&seed).expect("the seed is JSON");
    let count = nodes(&value);
    if let Err(e) = capture_file::from_str(&seed) {
        panic!("the seed capture does not load: {e}");
    }

    let loaded = std::cell::Cell::new(0u64);
    let mutations = proptest::collection::vec((0..count, 0u8..98), 1..4);
    fuzz("capture files (mutated)", 3_000, &mutations, |ops| {
        let mut v = value.clone();
        for (target, op) in ops {
            mutate(&mut v, &mut { target }, op);
        }
        let text = v.to_string();
        match capture_file::from_str(&text) {
            Ok(snap) => {
                loaded.set(loaded.get() + 1);
                use_loaded(&snap, &text)?;
            }
            Err(e) => prop_assert!(!e.to_string().is_empty()),
        }
        Ok(())
    });

    let _ = writeln!(
        std::io::stderr().lock(),
        "fuzz: capture files (mutated): {} of them loaded, then rendered, written back and compared",
        loaded.get()
    );

    // Cut short, a byte changed: the file as a full disk or a bad copy leaves it.
    let damage = (0..seed.len(), any::<u8>(), any::<bool>());
    fuzz(
        "capture files (damaged)",
        2_000,
        &damage,
        |(at, byte, cut)| {
            let mut bytes = seed.clone().into_bytes();
            if cut {
                bytes.truncate(at);
            } else {
                bytes[at] = byte;
            }
            let text = String::from_utf8_lossy(&bytes);
            if let Ok(snap) = capture_file::from_str(&text) {
                use_loaded(&snap, &text)?;
            }
            Ok(())
        },
    );

    fuzz("capture files (random text)", 5_000, &typed(), |text| {
        let framed = format!("{{\"format\": \"tracer-capture\", \"version\": 2, {text}}}");
        for t in [text.as_str(), framed.as_str()] {
            if let Ok(snap) = capture_file::from_str(t) {
                use_loaded(&snap, t)?;
            }
        }
        Ok(())
    });
}

#[test]
fn btf_blobs() {
    // A header that points at its own type and string sections, then anything.
    let blob = proptest::collection::vec(any::<u8>(), 0..512).prop_map(|body| {
        let mut b = vec![0x9f, 0xeb, 1, 0];
        let len = u32::try_from(body.len()).unwrap_or(0);
        for word in [24, 0, len / 2, len / 2, len - len / 2] {
            b.extend(u32::to_le_bytes(word));
        }
        b.extend(body);
        b
    });
    fuzz("BTF blobs", 5_000, &blob, |data| {
        if let Ok(btf) = Btf::parse(&data) {
            ask(&btf);
        }
        Ok(())
    });
    // Well-formed types of every kind, whose names, member types and ids point anywhere
    // (cycles, ids past the last, `void`), in a string section holding the names asked for.
    let strings = b"\0dentry\0d_inode\0d_hash\0pprev\0vfs_rmdir\0DCACHE_OP_DELETE\0";
    let name = 0..u32::try_from(strings.len()).unwrap() + 4;
    let word = prop_oneof![0..12u32, any::<u32>()];
    let one = (
        1..=19u32,
        0..4u32,
        any::<bool>(),
        name.clone(),
        word.clone(),
    );
    let types = proptest::collection::vec(
        (
            one,
            proptest::collection::vec((name, word.clone(), word), 4),
        ),
        1..12,
    );
    let typed_blob = types.prop_map(move |types| {
        let mut words: Vec<u32> = Vec::new();
        for ((kind, vlen, flag, name, size_or_type), fill) in types {
            words.extend([
                name,
                (u32::from(flag) << 31) | (kind << 24) | vlen,
                size_or_type,
            ]);
            // The words that follow each kind (the kernel's Documentation/bpf/btf.rst).
            let trailing = match kind {
                1 | 14 | 17 => 1,
                3 => 3,
                4 | 5 | 15 | 19 => 3 * vlen,
                6 | 13 => 2 * vlen,
                _ => 0,
            };
            let fill = fill.iter().flat_map(|&(a, b, c)| [a, b, c]).cycle();
            words.extend(fill.take(trailing as usize));
        }
        let types: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let mut b = vec![0x9f, 0xeb, 1, 0];
        let (t, s) = (types.len(), strings.len());
        for w in [24, 0, t, t, s] {
            b.extend(u32::try_from(w).unwrap().to_le_bytes());
        }
        b.extend(types);
        b.extend(strings);
        b
    });
    fuzz("BTF blobs, well-formed types", 5_000, &typed_blob, |data| {
        let btf = Btf::parse(&data).map_err(|e| TestCaseError::fail(e.to_string()))?;
        ask(&btf);
        Ok(())
    });
}

/// What the loader asks of the kernel's BTF.
fn ask(btf: &Btf) {
    let _ = btf.offset_of("dentry", "d_inode");
    let _ = btf.offset_of("dentry", "d_hash.pprev");
    let _ = btf.enum_value("DCACHE_OP_DELETE");
    let _ = btf.parameters("vfs_rmdir");
}
