//! `tracer top` in a real terminal on this host: tmux runs it on the model and on a
//! replayed capture, send-keys drives it, capture-pane reads what a user would see, and
//! after `q`, SIGTERM and SIGHUP the terminal must be usable again.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::atomic::{AtomicU32, Ordering},
    thread,
    time::{Duration, Instant},
};

use super::harness::{Fail, Tally, Verdict, wrong};

const SCOPE: &str = "host";
/// Longest wait for a screen to show what a step expects.
const WAIT: Duration = Duration::from_secs(20);

/// One tmux server of our own (its own socket), one pane running `sh`.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(width: u16, height: u16) -> Result<Self, String> {
        // A socket per server: a server being killed must not take the next one's start.
        static SERVERS: AtomicU32 = AtomicU32::new(0);
        let t = Self {
            socket: format!(
                "tracer-top-test-{}-{}",
                std::process::id(),
                SERVERS.fetch_add(1, Ordering::Relaxed)
            ),
        };
        t.run(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "top",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
            "sh",
        ])?;
        Ok(t)
    }

    fn run(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run tmux: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "tmux {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Keys by tmux name (`Tab`, `Enter`, `Escape`, or one character).
    fn keys(&self, keys: &[&str]) -> Result<(), String> {
        for k in keys {
            self.run(&["send-keys", "-t", "top", k])?;
            // One key at a time, as a person types: each gets its own redraw.
            thread::sleep(Duration::from_millis(150));
        }
        Ok(())
    }

    /// Text typed as is.
    fn type_text(&self, text: &str) -> Result<(), String> {
        self.run(&["send-keys", "-t", "top", "-l", text])?;
        thread::sleep(Duration::from_millis(150));
        Ok(())
    }

    fn screen(&self) -> Result<String, String> {
        self.run(&["capture-pane", "-p", "-t", "top"])
    }

    fn format(&self, fmt: &str) -> Result<String, String> {
        Ok(self
            .run(&["display-message", "-p", "-t", "top", fmt])?
            .trim()
            .to_owned())
    }

    /// Poll the screen until `ok` holds, for at most [`WAIT`]; the screen it held on.
    fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) -> Result<String, String> {
        let start = Instant::now();
        loop {
            let s = self.screen()?;
            if ok(&s) {
                return Ok(s);
            }
            if start.elapsed() > WAIT {
                return Err(format!(
                    "after {} s the screen does not show {what}:\n{s}",
                    WAIT.as_secs()
                ));
            }
            thread::sleep(Duration::from_millis(200));
        }
    }

    /// The pid of the program the pane's shell runs in the foreground.
    fn child_pid(&self) -> Result<u32, String> {
        let shell = self.format("#{pane_pid}")?;
        let children = fs::read_to_string(format!("/proc/{shell}/task/{shell}/children"))
            .map_err(|e| format!("children of the pane's shell {shell}: {e}"))?;
        children
            .split_whitespace()
            .next()
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| format!("the pane's shell {shell} runs nothing"))
    }

    /// After tracer left: the shell is back in the main screen, the cursor shown, echo
    /// on, and `$?` is `want`.
    fn terminal_restored(&self, want: i32) -> Verdict {
        let start = Instant::now();
        while self.format("#{alternate_on}")? != "0" || self.child_pid().is_ok() {
            if start.elapsed() > WAIT {
                return Err(wrong!(
                    "tracer still runs or the alternate screen is still on:\n{}",
                    self.screen()?
                ));
            }
            thread::sleep(Duration::from_millis(100));
        }
        let cursor = self.format("#{cursor_flag}")?;
        self.run(&[
            "send-keys",
            "-t",
            "top",
            "echo \"exit=$?\"; stty -a",
            "Enter",
        ])?;
        let s = self
            .wait_for("stty's settings", |s| s.contains("icanon"))
            .map_err(|why| {
                format!(
                    "cursor_flag {cursor}; the shell runs no command (still in raw mode?): {why}"
                )
            })?;
        let words: Vec<&str> = s.split_whitespace().collect();
        let exit = format!("exit={want}");
        let mut wrong = Vec::new();
        if cursor != "1" {
            wrong.push(format!("cursor hidden (cursor_flag {cursor})"));
        }
        if !words.contains(&"echo") {
            wrong.push("echo off".to_owned());
        }
        if !words.contains(&"icanon") {
            wrong.push("still in raw mode (-icanon)".to_owned());
        }
        if !words.contains(&exit.as_str()) {
            wrong.push(format!("not {exit}"));
        }
        if wrong.is_empty() {
            Ok(format!("{exit}, cursor shown, echo and icanon on"))
        } else {
            Err(wrong!("{}:\n{s}", wrong.join(", ")))
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// The row whose first word is `name`, and its calls/s (the second word).
fn calls_per_s(screen: &str, name: &str) -> Option<f64> {
    screen.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        (w.next() == Some(name))
            .then(|| w.next()?.parse().ok())
            .flatten()
    })
}

fn has_row(screen: &str, name: &str) -> bool {
    screen
        .lines()
        .any(|l| l.split_whitespace().next() == Some(name))
}

/// Every `tracer top` case on this host.
pub fn top_cases(tracer: &Path, tally: &mut Tally) {
    let version = Command::new("tmux").arg("-V").output();
    if !version.is_ok_and(|o| o.status.success()) {
        tally.skip(
            SCOPE,
            "tracer top in tmux",
            "tmux is not installed (`cargo xtask setup` installs it)",
        );
        return;
    }
    tally.record(
        SCOPE,
        "top without a terminal: exit 2, says to use --frames",
        &no_terminal(tracer),
    );
    model_cases(tracer, tally);
    replay_case(tracer, tally);
    sighup_case(tracer, tally);
}

/// `tracer top --model umount-storm` with standard input and output not a terminal.
fn no_terminal(tracer: &Path) -> Verdict {
    let out = Command::new(tracer)
        .args(["top", "--model", "umount-storm"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run tracer: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(2) if stderr.contains("--frames") => Ok(format!("exit 2: {}", stderr.trim())),
        code => Err(wrong!("exit {code:?}: {}", stderr.trim())),
    }
}

/// One step of the model session: what it checks, and how.
type Step = fn(&Tmux, &Path) -> Verdict;

/// The steps of one session on the model, in order; once one fails the rest cannot start
/// from the screen they expect, and fail saying so.
const MODEL_STEPS: [(&str, Step); 7] = [
    (
        "top --model umount-storm: Probes shows calls/s of namespace_unlock and its RCU wait",
        start_on_model,
    ),
    (
        "top: Tab to Cgroups, s sorts by grace-period p99 (header marked)",
        sort_cgroups,
    ),
    (
        "top: / filters the probes by name, Esc clears it",
        filter_probes,
    ),
    (
        "top: Enter opens the Detail of the selected probe (histogram, model column)",
        detail,
    ),
    ("top: ? shows the keys, any key closes them", help),
    ("top: p pauses the view while refreshes keep coming", pause),
    (
        "top: q quits; the terminal is usable again (cursor shown, echo on, exit 0)",
        quit,
    ),
];

fn model_cases(tracer: &Path, tally: &mut Tally) {
    let tmux = Tmux::start(100, 30);
    let mut failed = None;
    for (case, step) in MODEL_STEPS {
        let verdict = match (&tmux, &failed) {
            (Err(why), _) => Err(Fail::Wrong(why.clone())),
            (Ok(_), Some(earlier)) => Err(wrong!("not run: `{earlier}` failed")),
            (Ok(t), None) => step(t, tracer),
        };
        if verdict.is_err() && failed.is_none() {
            failed = Some(case);
        }
        tally.record(SCOPE, case, &verdict);
    }
}

fn start_on_model(t: &Tmux, tracer: &Path) -> Verdict {
    t.run(&[
        "send-keys",
        "-t",
        "top",
        &format!("{} top --model umount-storm", tracer.display()),
        "Enter",
    ])?;
    let s = t.wait_for("namespace_unlock with calls/s", |s| {
        s.contains("LIVE #") && calls_per_s(s, "namespace_unlock").is_some_and(|r| r > 0.0)
    })?;
    let rate = calls_per_s(&s, "namespace_unlock").unwrap_or(0.0);
    if !s.contains("← namespace_unlock") {
        return Err(wrong!("no grace-period wait under namespace_unlock:\n{s}"));
    }
    Ok(format!("namespace_unlock {rate}/s, with its caller rows"))
}

fn sort_cgroups(t: &Tmux, _: &Path) -> Verdict {
    t.keys(&["Tab"])?;
    t.wait_for("the Cgroups view in path order", |s| s.contains("cgroup▲"))?;
    t.keys(&["s"])?;
    let s = t.wait_for("gp p99 marked as the sort column", |s| {
        s.contains("gp p99▼")
    })?;
    if has_row(&s, "/") {
        Ok("header `gp p99▼`, root cgroup row `/`".into())
    } else {
        Err(wrong!("no `/` row:\n{s}"))
    }
}

fn filter_probes(t: &Tmux, _: &Path) -> Verdict {
    t.keys(&["1", "/"])?;
    t.type_text("namespace")?;
    t.keys(&["Enter"])?;
    let s = t.wait_for("only the rows about namespace_unlock", |s| {
        s.contains("filter: namespace") && !has_row(s, "umount")
    })?;
    if !has_row(&s, "namespace_unlock") || has_row(&s, "deactivate_locked_super") {
        return Err(wrong!("filtered rows wrong:\n{s}"));
    }
    t.keys(&["Escape"])?;
    t.wait_for("every row back after Esc", |s| has_row(s, "umount"))?;
    Ok("`namespace` leaves namespace_unlock and the wait under it; Esc brings umount back".into())
}

fn detail(t: &Tmux, _: &Path) -> Verdict {
    t.keys(&["Enter"])?;
    let s = t.wait_for("the Detail view", |s| {
        s.contains("· all callers · all cgroups") && s.contains("latency, last 60 s")
    })?;
    if !s.contains("model predicts") || !s.contains('█') {
        return Err(wrong!("no histogram bars or no model column:\n{s}"));
    }
    let title = s
        .lines()
        .find(|l| l.contains("· all callers"))
        .unwrap_or_default()
        .trim()
        .to_owned();
    t.keys(&["Escape"])?;
    t.wait_for("the Probes view again", |s| s.contains("calls/s"))?;
    Ok(format!("`{title}`, histogram bars and model column"))
}

fn help(t: &Tmux, _: &Path) -> Verdict {
    t.keys(&["?"])?;
    t.wait_for("the help", |s| s.contains("keys — any key closes"))?;
    t.keys(&["x"])?;
    t.wait_for("the help gone", |s| !s.contains("keys — any key closes"))?;
    Ok("help shown, then closed".into())
}

fn pause(t: &Tmux, _: &Path) -> Verdict {
    t.keys(&["p"])?;
    let s = t.wait_for("PAUSED", |s| s.contains("PAUSED at #"))?;
    let shown = paused_at(&s).ok_or_else(|| format!("no frame number:\n{s}"))?;
    let s = t.wait_for("a newer frame arriving while paused", |s| {
        s.contains(&format!("PAUSED at #{shown} (latest #")) && latest(s).is_some_and(|l| l > shown)
    })?;
    let newest = latest(&s).unwrap_or(0);
    t.keys(&["p"])?;
    t.wait_for("LIVE again", |s| s.contains("LIVE #"))?;
    Ok(format!(
        "view held at #{shown} while #{newest} arrived; p resumed"
    ))
}

fn quit(t: &Tmux, _: &Path) -> Verdict {
    t.keys(&["q"])?;
    t.terminal_restored(0)
}

/// `PAUSED at #N`.
fn paused_at(screen: &str) -> Option<u64> {
    let rest = screen.split("PAUSED at #").nth(1)?;
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// `(latest #M)`.
fn latest(screen: &str) -> Option<u64> {
    let rest = screen.split("(latest #").nth(1)?;
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// A capture file written by the model, replayed by `top`, which then gets SIGTERM.
fn replay_case(tracer: &Path, tally: &mut Tally) {
    const CASE: &str =
        "top --replay a capture file: shows its rmdirs; SIGTERM restores the terminal, exit 143";
    let file = std::env::temp_dir().join(format!("tracer-top-replay-{}.json", std::process::id()));
    let verdict = replay(tracer, &file);
    let _ = fs::remove_file(&file);
    tally.record(SCOPE, CASE, &verdict);
}

fn replay(tracer: &Path, file: &PathBuf) -> Verdict {
    let out = Command::new(tracer)
        .args(["model", "negative-dentry-rmdir", "--format", "json", "-o"])
        .arg(file)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run tracer model: {e}"))?;
    if !out.status.success() {
        return Err(wrong!(
            "tracer model failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let t = Tmux::start(100, 30)?;
    t.run(&[
        "send-keys",
        "-t",
        "top",
        &format!("{} top --replay {}", tracer.display(), file.display()),
        "Enter",
    ])?;
    let s = t.wait_for("vfs_rmdir calls from the replayed capture", |s| {
        s.contains("LIVE #") && has_row(s, "vfs_rmdir")
    })?;
    if !s.contains("replay") {
        return Err(wrong!("the header does not say it is a replay:\n{s}"));
    }
    let pid = t.child_pid()?;
    let killed = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    if !killed.is_ok_and(|s| s.success()) {
        return Err(wrong!("cannot send SIGTERM to {pid}"));
    }
    t.terminal_restored(143)
        .map(|seen| format!("vfs_rmdir rows shown; after SIGTERM: {seen}"))
}

/// The terminal going away (tmux killed: SIGHUP to the pane's processes) ends `top`.
fn sighup_case(tracer: &Path, tally: &mut Tally) {
    const CASE: &str = "top: SIGHUP (its terminal closed) ends it";
    let verdict = (|| -> Verdict {
        let t = Tmux::start(100, 30)?;
        t.run(&[
            "send-keys",
            "-t",
            "top",
            &format!("{} top --model umount-storm", tracer.display()),
            "Enter",
        ])?;
        t.wait_for("the first refresh", |s| s.contains("LIVE #"))?;
        let pid = t.child_pid()?;
        drop(t);
        let start = Instant::now();
        while Path::new(&format!("/proc/{pid}")).exists() {
            if start.elapsed() > WAIT {
                return Err(wrong!(
                    "tracer {pid} still runs {} s after SIGHUP",
                    WAIT.as_secs()
                ));
            }
            thread::sleep(Duration::from_millis(100));
        }
        Ok(format!("tracer {pid} exited"))
    })();
    tally.record(SCOPE, CASE, &verdict);
}
