//! The root-only unit tests of the loader and the live source, run as root in the guest:
//! each crate's libtest binary (built static by `cargo test --no-run`, the kernel programs
//! embedded, [`crate::tracer_build::guest_tests`]) with `--ignored`, which runs the tests
//! marked `#[ignore = "root-only: ..."]` and only those. Their libtest output becomes one
//! verdict a test and one a binary, with the count.
//!
//! By hand, with a name filter: `cargo xtask vm --kernel 6.12 --guest-tests --
//! /guest-tests/tracer_loader --ignored forget`.

use crate::testing::{
    harness::{Fail, Verdict, wrong},
    suite::case::{On, VmCase},
};

/// Where the test binaries are in the guest, by libtest name (`/guest-tests/tracer_loader`).
pub const GUEST_DIR: &str = "/guest-tests";

/// Each binary listed, then run, one test at a time (they attach the same programs).
pub const ROOT_ONLY: VmCase = VmCase {
    name: "guest::root_only",
    heading: "root-only tests of the loader and the live source (libtest --ignored)",
    on: On::Only(&[(6, 12)]),
    workload: r#"
for t in tracer_loader tracer; do
    /guest-tests/$t --list --ignored > /tmp/guest_$t.list 2>&1
    emit guest_$t.list /tmp/guest_$t.list
    /guest-tests/$t --ignored --test-threads=1 > /tmp/guest_$t.out 2>&1
    echo "exit $?" >> /tmp/guest_$t.out
    emit guest_$t.out /tmp/guest_$t.out
done
"#,
    judge: |j| {
        for (bin, what) in [("tracer_loader", "loader"), ("tracer", "live source")] {
            let (list, out) = (format!("guest_{bin}.list"), format!("guest_{bin}.out"));
            let files = j.files(&[&list, &out]);
            let outcome = files
                .read(&list)
                .and_then(|l| files.read(&out).map(|o| judge_run(&l, &o)));
            match outcome {
                Ok((tests, overall)) => {
                    for (name, verdict) in tests {
                        j.record("", &format!("root-only test {bin}::{name}"), &verdict);
                    }
                    j.record(
                        "",
                        &format!("root-only {what} tests in the guest"),
                        &overall,
                    );
                }
                Err(e) => j.record(
                    "",
                    &format!("root-only {what} tests in the guest"),
                    &Err(Fail::Wrong(e)),
                ),
            }
        }
    },
    ..VmCase::BASE
};

/// The verdict on each test `--list --ignored` printed (`list`), from the run's output
/// (`out`, ending in `exit N`), and on the whole binary: every listed test passed, at least
/// one was listed, and the binary exited 0.
fn judge_run(list: &str, out: &str) -> (Vec<(String, Verdict)>, Verdict) {
    let names: Vec<&str> = list
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .collect();
    let tests: Vec<(String, Verdict)> = names
        .iter()
        .map(|name| ((*name).to_owned(), outcome(out, name)))
        .collect();
    let exit = out
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("exit "))
        .unwrap_or("missing");
    let passed = tests.iter().filter(|(_, v)| v.is_ok()).count();
    let overall = if names.is_empty() {
        Err(wrong!(
            "no root-only test listed (`--list --ignored` printed: {})",
            first_lines(list, 5)
        ))
    } else if passed < names.len() || exit != "0" {
        Err(wrong!(
            "{passed} of {} passed, exit {exit}{}",
            names.len(),
            summary(out).map_or_else(String::new, |s| format!(" ({s})"))
        ))
    } else {
        Ok(format!("{passed} passed"))
    };
    (tests, overall)
}

/// What libtest said of test `name` in `out`: `ok`, else why it failed (its panic's place
/// and message), or that it never reported (the binary died first).
fn outcome(out: &str, name: &str) -> Verdict {
    let head = format!("test {name} ... ");
    let Some(at) = out.find(&head) else {
        return Err("never reported: the binary died before it, or it was not run".into());
    };
    // A child's output may come between the name and the result.
    let after = &out[at + head.len()..];
    let result = after
        .split_whitespace()
        .find(|w| matches!(*w, "ok" | "FAILED" | "ignored"))
        .unwrap_or("no result");
    match result {
        "ok" => Ok("ok".into()),
        "FAILED" => Err(Fail::Wrong(failure(out, name))),
        other => Err(wrong!("{other} (with --ignored)")),
    }
}

/// The panic of failed test `name`, from its `---- NAME stdout ----` section: where, and
/// the message's first lines.
fn failure(out: &str, name: &str) -> String {
    let head = format!("---- {name} stdout ----");
    let Some(at) = out.find(&head) else {
        return "FAILED (no output section)".into();
    };
    let lines: Vec<&str> = out[at + head.len()..]
        .lines()
        .map(str::trim)
        .skip_while(|l| l.is_empty())
        .take_while(|l| !l.starts_with("note: ") && !l.starts_with("---- "))
        .filter(|l| !l.is_empty())
        .take(4)
        .collect();
    format!("FAILED: {}", lines.join(" / "))
}

/// libtest's `test result: ...` line.
fn summary(out: &str) -> Option<&str> {
    out.lines().find_map(|l| l.strip_prefix("test result: "))
}

fn first_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().take(n).collect();
    if lines.is_empty() {
        "nothing".into()
    } else {
        lines.join(" / ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIST: &str =
        "forget::kernel::a: test\nread::rings::kernel::b: test\n\n2 tests, 0 benchmarks\n";

    #[test]
    fn every_listed_test_passing_passes_with_the_count() {
        let out = "\nrunning 2 tests\ntest forget::kernel::a ... ok\ntest read::rings::kernel::b ... ok\n\ntest result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 40 filtered out; finished in 3.10s\n\nexit 0\n";
        let (tests, overall) = judge_run(LIST, out);
        assert_eq!(overall, Ok("2 passed".into()));
        assert_eq!(tests.len(), 2);
        assert!(tests.iter().all(|(_, v)| v.is_ok()));
    }

    #[test]
    fn a_failed_test_fails_with_its_panic_and_the_binary_with_its_count() {
        let out = "\nrunning 2 tests\ntest forget::kernel::a ... ok\ntest read::rings::kernel::b ... FAILED\n\nfailures:\n\n---- read::rings::kernel::b stdout ----\n\nthread 'read::rings::kernel::b' panicked at tracer-loader/src/read/rings.rs:345:9:\nassertion `left == right` failed: made and removed\n  left: 1\n right: 2\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n\n\nfailures:\n    read::rings::kernel::b\n\ntest result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 40 filtered out; finished in 2.00s\n\nexit 101\n";
        let (tests, overall) = judge_run(LIST, out);
        assert_eq!(tests[0].1, Ok("ok".into()));
        let why = tests[1].1.clone().unwrap_err();
        assert!(
            why.to_string().contains("rings.rs:345:9")
                && why.to_string().contains("made and removed"),
            "{why}"
        );
        assert!(why.to_string().contains("left: 1 / right: 2"), "{why}");
        let why = overall.unwrap_err();
        assert!(
            why.to_string()
                .starts_with("1 of 2 passed, exit 101 (FAILED. 1 passed; 1 failed"),
            "{why}"
        );
    }

    #[test]
    fn a_binary_that_dies_or_lists_nothing_fails() {
        // Killed in the second test: no result for it, no summary.
        let out = "\nrunning 2 tests\ntest forget::kernel::a ... ok\ntest read::rings::kernel::b ... \nexit 139\n";
        let (tests, overall) = judge_run(LIST, out);
        assert!(tests[1].1.is_err());
        assert_eq!(overall, Err("1 of 2 passed, exit 139".into()));
        // Never started: every test unreported.
        let (tests, overall) = judge_run(LIST, "sh: /guest-tests/tracer: not found\nexit 127\n");
        assert!(tests.iter().all(|(_, v)| {
            v.as_ref()
                .unwrap_err()
                .to_string()
                .contains("never reported")
        }));
        assert!(overall.is_err());
        // Nothing marked root-only.
        let (_, overall) = judge_run("\n0 tests, 0 benchmarks\n", "exit 0\n");
        assert!(
            overall
                .unwrap_err()
                .to_string()
                .starts_with("no root-only test listed")
        );
        // A child's output between the name and the result.
        let out =
            "test forget::kernel::a ... rmdir: x\nok\ntest read::rings::kernel::b ... ok\nexit 0\n";
        assert_eq!(judge_run(LIST, out).1, Ok("2 passed".into()));
    }

    /// Every `#[ignore]` of the workspace marks a root-only test of a crate whose binary
    /// the guest runs: no test is left that nothing runs, or that only prints.
    #[test]
    fn every_ignored_test_is_root_only_and_run_in_the_guest() {
        let root = crate::util::workspace_root();
        let mut stray = Vec::new();
        let mut root_only = 0;
        for krate in std::fs::read_dir(&root).unwrap().filter_map(Result::ok) {
            let name = krate.file_name().to_string_lossy().into_owned();
            if !krate.path().join("Cargo.toml").is_file() {
                continue;
            }
            let guest = crate::tracer_build::GUEST_TEST_CRATES.contains(&name.as_str());
            for file in rust_files(&krate.path()) {
                let text = std::fs::read_to_string(&file).unwrap();
                for (n, line) in text.lines().enumerate() {
                    let line = line.trim();
                    if !line.starts_with("#[ignore") {
                        continue;
                    }
                    if guest && line.starts_with("#[ignore = \"root-only: ") {
                        root_only += 1;
                    } else {
                        stray.push(format!("{}:{}: {line}", file.display(), n + 1));
                    }
                }
            }
        }
        assert!(stray.is_empty(), "ignored, and run by nothing: {stray:#?}");
        assert!(root_only >= 7, "{root_only} root-only tests found");
    }

    fn rust_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap().filter_map(Result::ok) {
            let path = entry.path();
            if path.is_dir() && !path.ends_with("target") {
                out.extend(rust_files(&path));
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
        out
    }
}
