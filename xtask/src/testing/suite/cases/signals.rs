//! Nothing left behind: `tracer capture`, `tracer top --frames` and `tracer serve` each get
//! SIGINT, SIGTERM, SIGHUP (not serve, which carries on: see `lifecycle`) and SIGKILL once
//! attached (under `--attach kprobe`; SIGKILL under fentry too; on arm64 SIGKILL alone, under
//! both). Afterwards bpftool must list as many programs, links and maps as before the
//! first run, tracefs' `kprobe_events`/`uprobe_events` must be as before, and no capture
//! cgroup may remain, except after SIGKILL, where the next capture must name it while its
//! command still runs and remove it once the command is gone. Each run must attach as many
//! objects as the first of its kind (the next run attaches normally), and a last capture
//! must count exactly.

use std::time::Duration;

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

/// What the signal cases send back: the runs' lines, each run's stderr, the captures after
/// a SIGKILL, and the run after them all.
const READS: [&str; 9] = [
    "signals.base",
    "signals",
    "capture_*_*.err",
    "top_*_*.err",
    "serve_*_*.err",
    "stale_busy_*.err",
    "stale_clean_*.err",
    "signals_next.json",
    "signals_next.log",
];

/// Each signal to each of the three commands, once attached.
pub const SIGNALS: VmCase = VmCase {
    name: "signals::signals",
    heading: "signals (INT, TERM, HUP, KILL) to capture, top --frames and serve",
    on: On::Every,
    arm64: On::Only(&[(6, 12)]),
    workload: r#"
base=$(objects)
echo "stats_base=$(stats) base=$base kprobe_events=$(events $tracing/kprobe_events) uprobe_events=$(events $tracing/uprobe_events)" > /tmp/signals.base
: > /tmp/signals
t0=$(cut -d' ' -f1 /proc/uptime)
# arm64 takes the same paths out as amd64 but one: what a SIGKILL leaves is the kernel's
# to clean up, and the kernel's side is what differs by architecture.
arch=$(uname -m)
for how in kprobe fentry; do
    # fentry: SIGKILL alone (the other signals take the same path out as under kprobe).
    sigs="INT TERM HUP KILL"
    [ $how = fentry ] || [ $arch != x86_64 ] && sigs=KILL
    for sig in $sigs; do
        sigcase capture_${how}_$sig $sig '[ -e /tmp/h.ready ]' \
            capture --attach $how -- sh -c 'touch /tmp/h.ready; exec sleep 60'
        stale=$(ls -d $cg/tracer-capture-* 2>/dev/null | head -n 1)
        if [ $sig = KILL ] && [ -n "$stale" ]; then
            # The command outlives a killed tracer, in its cgroup: the next run says so and
            # leaves the cgroup; once the command is gone, the run after removes it.
            tracer capture --attach $how -- true > /dev/null 2> /tmp/stale_busy_$how.err
            kill $(cat $stale/cgroup.procs) 2>/dev/null
            sleep 0.3
            tracer capture --attach $how -- true > /dev/null 2> /tmp/stale_clean_$how.err
            echo "stale_$how $(leftovers)" >> /tmp/signals
            emit stale_busy_$how.err /tmp/stale_busy_$how.err
            emit stale_clean_$how.err /tmp/stale_clean_$how.err
        fi
        sigcase top_${how}_$sig $sig 'grep -q "refresh 1/" /tmp/top_'${how}_$sig'.out' \
            top --attach $how --frames 1000 --interval 1s --view probes
        # SIGKILL after a minute of serving (kprobe, amd64: the windows of the rates and of
        # the findings are a minute long): no statistics switch held meanwhile either.
        served='wget -q -O /dev/null http://127.0.0.1:29110/metrics 2>/dev/null'
        [ $sig = KILL ] && [ $how = kprobe ] && [ $arch = x86_64 ] && served="$served && sleep 60"
        # serve carries on after SIGHUP (the lifecycle case checks it).
        [ $sig = HUP ] || sigcase serve_${how}_$sig $sig "$served" \
            serve --attach $how --interval 1s
    done
done
# The next run attaches normally: exact counts of 20 mkdir + rmdir.
mkdir -p /tmp/next
timeout 150 tracer capture --attach kprobe --format json -o /tmp/signals_next.json -- \
    sh -c 'cd /tmp/next && i=0; while [ $i -lt 20 ]; do mkdir d$i && rmdir d$i || exit 1; i=$((i+1)); done' \
    > /tmp/signals_next.log 2>&1
echo "exit $?" >> /tmp/signals_next.log
echo "seconds $(cut -d' ' -f1 /proc/uptime) $t0" >> /tmp/signals.base
emit signals.base /tmp/signals.base
emit signals /tmp/signals
# Each run's stderr, where it said anything.
for how in kprobe fentry; do
    for sig in INT TERM HUP KILL; do
        for command in capture top serve; do
            f=${command}_${how}_$sig.err
            [ -s /tmp/$f ] && emit ${command}_${how}_$sig.err /tmp/$f
        done
    done
done
emit signals_next.log /tmp/signals_next.log
[ -f /tmp/signals_next.json ] && emit signals_next.json /tmp/signals_next.json
"#,
    judge,
    timeout: Duration::from_mins(10),
    ..VmCase::BASE
};

/// The signal cases' verdicts: one per run the guest ended by a signal, and the run after
/// them all.
fn judge(j: &Judge<'_>) {
    let files = j.files(&READS);
    let base_text = match files.read("signals.base") {
        Ok(t) => t,
        Err(e) => {
            j.record(
                "",
                "signals: the guest sent its results",
                &Err(Fail::Wrong(e)),
            );
            return;
        }
    };
    let base_run = SignalRun::parse(&format!("base {}", base_text.lines().next().unwrap_or("")))
        .unwrap_or_default();
    let Some(base) = objects(base_run.get("base")) else {
        j.record(
            "",
            "signals: bpftool lists the kernel's BPF objects",
            &Err(wrong!("no baseline: {base_text}")),
        );
        return;
    };
    let base_events = (base_run.get("kprobe_events"), base_run.get("uprobe_events"));
    let base_stats = base_run.get("stats_base");
    let runs: Vec<SignalRun> = files
        .read("signals")
        .unwrap_or_default()
        .lines()
        .filter_map(SignalRun::parse)
        .collect();
    let mut first: BTreeMap<(String, String), usize> = BTreeMap::new();
    for (i, run) in runs.iter().enumerate() {
        if let Some(how) = run.name.strip_prefix("stale_") {
            j.record(
                "",
                &format!("signals [{how}]: after SIGKILL of capture, the next runs name, then remove, its cgroup"),
                &stale_case(&files, how, Some(run)),
            );
            continue;
        }
        let Some((command, how, sig)) = run.command_and_signal() else {
            continue;
        };
        let key = (command.to_owned(), how.to_owned());
        let earlier = first.get(&key).map(|&j| &runs[j]);
        let verdict = signal_case(run, earlier, base, base_events, base_stats)
            .map_err(|e| e.map(|e| files.with_log(&format!("{}.err", run.name), e)));
        first.entry(key).or_insert(i);
        let shown = if command == "top" {
            "top --frames"
        } else {
            command
        };
        j.record(
            "",
            &format!("signals [{how}]: SIG{sig} to {shown} leaves no program, link, map, kprobe event, cgroup or BPF statistics switch"),
            &verdict,
        );
    }
    if runs.is_empty() {
        j.record(
            "",
            "signals: the cases ran",
            &Err(Fail::Wrong(base_text.clone())),
        );
    }
    let next = files
        .get("signals_next.json")
        .ok_or_else(|| files.with_log("signals_next.log", "no capture file".into()))
        .and_then(|p| tracer_core::capture_file::load(p).map_err(|e| format!("{e:#}")))
        .map_err(Fail::from)
        .and_then(|s: Snapshot| {
            Ok(format!(
                "{}, {}",
                exact(&s, Probe::SysRmdir, 20)?,
                exact(&s, Probe::VfsRmdir, 20)?
            ))
        });
    j.record(
        "",
        "signals: the run after them all attaches and counts 20 mkdir + rmdir exactly",
        &next,
    );
    if let Some(secs) = seconds(&base_text) {
        println!(
            "{}: the signal cases took {secs:.0} s of the boot",
            j.kernel()
        );
    }
}

/// One line of the guest's `signals` file: a run of tracer ended by a signal.
#[derive(Debug, Default)]
struct SignalRun {
    /// `capture_kprobe_INT` and the like; `stale_kprobe` for the runs after a SIGKILL.
    name: String,
    words: BTreeMap<String, String>,
}

impl SignalRun {
    fn parse(line: &str) -> Option<Self> {
        let mut it = line.split_whitespace();
        let name = it.next()?.to_owned();
        let words = it
            .filter_map(|w| w.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        Some(Self { name, words })
    }

    fn get(&self, key: &str) -> &str {
        self.words.get(key).map_or("", String::as_str)
    }

    /// The command and the signal, from `COMMAND_MODE_SIG`.
    fn command_and_signal(&self) -> Option<(&str, &str, &str)> {
        let mut parts = self.name.split('_');
        Some((parts.next()?, parts.next()?, parts.next()?))
    }
}

/// `P,L,M` as three numbers.
fn objects(s: &str) -> Option<[u64; 3]> {
    let v: Vec<u64> = s.split(',').filter_map(|x| x.parse().ok()).collect();
    v.try_into().ok()
}

/// The exit status a shell reports for `command` ended by `sig`: tracer's own for the
/// signals it handles, 128+N for those that kill it.
fn expected_rc(command: &str, sig: &str) -> Option<i32> {
    let n = match sig {
        "INT" => 2,
        "TERM" => 15,
        "HUP" => 1,
        "KILL" => 9,
        _ => return None,
    };
    Some(match (command, sig) {
        // serve stops cleanly on SIGINT and SIGTERM (SIGHUP does not stop it).
        ("serve", "INT" | "TERM") => 0,
        _ => 128 + n,
    })
}

/// What is left after a run, against the baseline before the first: `Ok` with a summary.
fn nothing_left(run: &SignalRun, base: [u64; 3], base_events: (&str, &str)) -> Verdict {
    let after = objects(run.get("after")).ok_or_else(|| format!("no objects in {run:?}"))?;
    let mut wrong = Vec::new();
    if after != base {
        wrong.push(format!(
            "bpftool lists {}/{}/{} programs/links/maps, {}/{}/{} before tracer ran",
            after[0], after[1], after[2], base[0], base[1], base[2]
        ));
    }
    for (file, before) in [
        ("kprobe_events", base_events.0),
        ("uprobe_events", base_events.1),
    ] {
        if run.get(file) != before {
            wrong.push(format!(
                "{file} has {} lines, {before} before",
                run.get(file)
            ));
        }
    }
    if wrong.is_empty() {
        Ok(format!(
            "after: {}/{}/{} programs/links/maps as before, kprobe_events {}, uprobe_events {}",
            after[0],
            after[1],
            after[2],
            run.get("kprobe_events"),
            run.get("uprobe_events")
        ))
    } else {
        Err(Fail::Wrong(wrong.join("; ")))
    }
}

/// The kernel's BPF statistics while a run went on and after it, against `base` (`S,F`: the
/// sysctl, and the `BPF_ENABLE_STATS` fds held): `top` and `serve`, which run for days,
/// never turn them on (every BPF program of the host would pay for it); `capture` holds
/// one fd for its span; none is left after any run, SIGKILL included.
fn stats_switch(command: &str, run: &SignalRun, base: &str) -> Verdict {
    let parse = |s: &str| -> Option<(u64, u64)> {
        let (a, b) = s.split_once(',')?;
        Some((a.parse().ok()?, b.parse().ok()?))
    };
    let (sysctl, fds) = parse(base).ok_or_else(|| format!("no statistics baseline: {base:?}"))?;
    let during = parse(run.get("stats_during"))
        .ok_or_else(|| format!("no statistics reading while it ran: {run:?}"))?;
    let want_fds = if command == "capture" { fds + 1 } else { fds };
    if during != (sysctl, want_fds) {
        return Err(wrong!(
            "while it ran: kernel.bpf_stats_enabled {}, {} BPF_ENABLE_STATS fds; expected {sysctl} and {want_fds}",
            during.0,
            during.1
        ));
    }
    let after = parse(run.get("stats")).ok_or_else(|| format!("no statistics after: {run:?}"))?;
    if after != (sysctl, fds) {
        return Err(wrong!(
            "after: kernel.bpf_stats_enabled {}, {} BPF_ENABLE_STATS fds; {sysctl} and {fds} before",
            after.0,
            after.1
        ));
    }
    Ok(format!(
        "{} statistics fds while running, none after",
        during.1
    ))
}

/// One signal case: exit status, objects while it ran (more than before, as many as the
/// first run of the same command and mode), the statistics switch (see [`stats_switch`]),
/// nothing left after, and no capture cgroup except the one a SIGKILL of `capture` cannot
/// remove.
fn signal_case(
    run: &SignalRun,
    first: Option<&SignalRun>,
    base: [u64; 3],
    base_events: (&str, &str),
    base_stats: &str,
) -> Verdict {
    let (command, _, sig) = run
        .command_and_signal()
        .ok_or_else(|| format!("bad case name {}", run.name))?;
    let want = expected_rc(command, sig).ok_or_else(|| format!("unknown signal {sig}"))?;
    let rc = run.get("rc");
    if rc != want.to_string() {
        return Err(wrong!("exit status {rc}, expected {want}"));
    }
    let during = objects(run.get("during"))
        .ok_or_else(|| format!("no object count while it ran: {run:?}"))?;
    if during[0] <= base[0] || during[1] <= base[1] {
        return Err(wrong!(
            "while it ran bpftool listed {}/{} programs/links, no more than before ({}/{}): it did not attach",
            during[0],
            during[1],
            base[0],
            base[1]
        ));
    }
    if let Some(first) = first
        && first.get("during") != run.get("during")
    {
        return Err(wrong!(
            "attached {} programs/links/maps, the first run of it {}",
            run.get("during"),
            first.get("during")
        ));
    }
    let stats = stats_switch(command, run, base_stats)?;
    let left = nothing_left(run, base, base_events)?;
    let cgroups: Vec<&str> = run
        .get("cgroups")
        .split(',')
        .filter(|c| !c.is_empty())
        .collect();
    let own = format!("tracer-capture-{}", run.get("pid"));
    let cgroup_note = match (command, sig, cgroups.as_slice()) {
        (_, _, []) if !(command == "capture" && sig == "KILL") => "no capture cgroup".to_owned(),
        ("capture", "KILL", [one]) if *one == own => {
            format!("{one} left (SIGKILL: its command still runs in it)")
        }
        _ => return Err(wrong!("capture cgroups left: {cgroups:?} ({left})")),
    };
    Ok(format!(
        "exit {rc}; while running {} programs/links/maps; {stats}; {left}; {cgroup_note}",
        run.get("during")
    ))
}

/// After a SIGKILL of `capture`: the next capture named the cgroup left and what kept it,
/// the one after removed it, and none is left.
fn stale_case(files: &Results<'_>, how: &str, run: Option<&SignalRun>) -> Verdict {
    let run = run.ok_or("no line for the runs after SIGKILL")?;
    let busy = files.read(&format!("stale_busy_{how}.err"))?;
    let clean = files.read(&format!("stale_clean_{how}.err"))?;
    let busy_line = busy
        .lines()
        .find(|l| l.contains("left by an earlier run"))
        .ok_or_else(|| format!("the next capture said nothing of the cgroup left: {busy}"))?;
    if !(busy_line.contains("cannot be removed yet") && busy_line.contains("processes still in it"))
    {
        return Err(wrong!("the next capture said: {busy_line}"));
    }
    let clean_line = clean
        .lines()
        .find(|l| l.contains("left by an earlier run"))
        .ok_or_else(|| format!("the capture after the command ended said nothing: {clean}"))?;
    if !clean_line.contains("removed cgroup") {
        return Err(wrong!("once empty: {clean_line}"));
    }
    if !run.get("cgroups").is_empty() {
        return Err(wrong!("left after: {}", run.get("cgroups")));
    }
    Ok(format!(
        "next run: \"{busy_line}\"; the one after: \"{clean_line}\""
    ))
}

/// `seconds END START` (from /proc/uptime) as the difference.
pub fn seconds(text: &str) -> Option<f64> {
    let line = text.lines().find_map(|l| l.strip_prefix("seconds "))?;
    let mut it = line.split_whitespace().map(str::parse::<f64>);
    let (end, start) = (it.next()?.ok()?, it.next()?.ok()?);
    Some(end - start)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(line: &str) -> SignalRun {
        SignalRun::parse(line).unwrap()
    }

    #[test]
    fn a_clean_exit_passes_and_anything_left_fails() {
        let base = [1, 0, 2];
        let ev = ("0", "0");
        let ok = run(
            "capture_kprobe_INT INT rc=130 pid=77 during=40,30,25 stats_during=0,1 stats=0,0 after=1,0,2 kprobe_events=0 uprobe_events=0 cgroups=",
        );
        assert!(signal_case(&ok, None, base, ev, "0,0").is_ok());
        let left = run(
            "capture_kprobe_TERM TERM rc=143 pid=78 during=40,30,25 stats_during=0,1 stats=0,0 after=1,1,2 kprobe_events=0 uprobe_events=0 cgroups=",
        );
        assert!(
            signal_case(&left, Some(&ok), base, ev, "0,0")
                .unwrap_err()
                .to_string()
                .contains("1/1/2")
        );
        let event = run(
            "top_kprobe_HUP HUP rc=129 pid=79 during=40,30,25 stats_during=0,0 stats=0,0 after=1,0,2 kprobe_events=2 uprobe_events=0 cgroups=",
        );
        assert!(
            signal_case(&event, None, base, ev, "0,0")
                .unwrap_err()
                .to_string()
                .contains("kprobe_events")
        );
        let cgroup = run(
            "capture_kprobe_HUP HUP rc=129 pid=80 during=40,30,25 stats_during=0,1 stats=0,0 after=1,0,2 kprobe_events=0 uprobe_events=0 cgroups=tracer-capture-80,",
        );
        assert!(signal_case(&cgroup, None, base, ev, "0,0").is_err());
        let killed = run(
            "capture_kprobe_KILL KILL rc=137 pid=81 during=40,30,25 stats_during=0,1 stats=0,0 after=1,0,2 kprobe_events=0 uprobe_events=0 cgroups=tracer-capture-81,",
        );
        assert!(signal_case(&killed, Some(&ok), base, ev, "0,0").is_ok());
    }

    #[test]
    fn a_run_that_attached_less_than_the_first_fails() {
        let base = [0, 0, 0];
        let first = run(
            "serve_kprobe_INT INT rc=0 pid=1 during=40,30,25 stats_during=0,0 stats=0,0 after=0,0,0 kprobe_events=0 uprobe_events=0 cgroups=",
        );
        let fewer = run(
            "serve_kprobe_KILL KILL rc=137 pid=2 during=38,28,25 stats_during=0,0 stats=0,0 after=0,0,0 kprobe_events=0 uprobe_events=0 cgroups=",
        );
        assert!(signal_case(&fewer, Some(&first), base, ("0", "0"), "0,0").is_err());
        let none = run(
            "serve_kprobe_TERM TERM rc=0 pid=3 during=0,0,0 stats_during=0,0 stats=0,0 after=0,0,0 kprobe_events=0 uprobe_events=0 cgroups=",
        );
        assert!(
            signal_case(&none, None, base, ("0", "0"), "0,0")
                .unwrap_err()
                .to_string()
                .contains("did not attach")
        );
        let wrong_rc = run(
            "serve_kprobe_TERM TERM rc=143 pid=3 during=40,30,25 stats_during=0,0 stats=0,0 after=0,0,0 kprobe_events=0 uprobe_events=0 cgroups=",
        );
        assert!(signal_case(&wrong_rc, None, base, ("0", "0"), "0,0").is_err());
    }

    #[test]
    fn a_statistics_switch_held_by_serve_or_left_behind_fails() {
        let base = [0, 0, 0];
        let ev = ("0", "0");
        let line = |name: &str, during: &str, after: &str| {
            run(&format!(
                "{name} KILL rc=137 pid=5 during=40,30,25 stats_during={during} stats={after} after=0,0,0 kprobe_events=0 uprobe_events=0 cgroups="
            ))
        };
        assert!(
            signal_case(
                &line("serve_kprobe_KILL", "0,0", "0,0"),
                None,
                base,
                ev,
                "0,0"
            )
            .is_ok()
        );
        let held = signal_case(
            &line("serve_kprobe_KILL", "0,1", "0,0"),
            None,
            base,
            ev,
            "0,0",
        );
        assert!(
            held.unwrap_err()
                .to_string()
                .contains("1 BPF_ENABLE_STATS fds")
        );
        let top = signal_case(
            &line("top_kprobe_KILL", "0,1", "0,0"),
            None,
            base,
            ev,
            "0,0",
        );
        assert!(top.is_err(), "top holds none either");
        let left = signal_case(
            &line("serve_kprobe_KILL", "0,0", "1,0"),
            None,
            base,
            ev,
            "0,0",
        );
        assert!(left.unwrap_err().to_string().contains("after"));
        // capture holds one for its span, and only then.
        let capture = |during: &str| {
            run(&format!(
                "capture_kprobe_KILL KILL rc=137 pid=81 during=40,30,25 stats_during={during} stats=0,0 after=0,0,0 kprobe_events=0 uprobe_events=0 cgroups=tracer-capture-81,"
            ))
        };
        assert!(signal_case(&capture("0,1"), None, base, ev, "0,0").is_ok());
        assert!(signal_case(&capture("0,0"), None, base, ev, "0,0").is_err());
    }
}
