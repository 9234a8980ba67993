//! The kernel programs' own voice: a map shrunk by a test knob until an event cannot be
//! kept, and what the programs say about it (once), what the report counts, what
//! `--verbose` explains, and that what still fitted is counted exactly.

use tracer_core::snapshot::{AttachMethod, Counter, Loss, OTHER_CGROUP, Probe, Snapshot};

use crate::testing::{
    harness::{Fail, Verdict, wrong},
    suite::{
        capture::{attached_with_all, exact, load_capture, own_cgroup},
        case::{Fixture, MODES, On, VmCase},
        results::{Results, capture_files},
    },
};

/// `RMDIR_LOCKS` of one entry under 20 mkdir + rmdir.
pub const RMDIR_LOCKS: VmCase = VmCase {
    name: "voice::rmdir_locks",
    heading: "the kernel programs' own voice: RMDIR_LOCKS of 1 entry, 20 mkdir + rmdir, --verbose",
    on: On::Every,
    workload: r"
# Each rmdir registers its parent's lock, and its victim's finds the one slot taken.
mkdir -p /tmp/voice
export TRACER_MAP_ENTRIES=RMDIR_LOCKS=1
capture voice 'cd /tmp/voice && i=0; while [ $i -lt 20 ]; do mkdir d$i && rmdir d$i || exit 1; i=$((i+1)); done' --verbose
unset TRACER_MAP_ENTRIES
",
    judge: |j| {
        let reads = capture_files("voice");
        j.verdict(
            "auto",
            "RMDIR_LOCKS of 1 entry, 20 rmdirs: --verbose shows the kernel programs' message once, rmdir_lock_drops = 20 in the report and its explanation",
            &reads.iter().map(String::as_str).collect::<Vec<_>>(),
            voice,
        );
    },
    ..VmCase::BASE
};

/// `HIST` and `COUNTERS` of one entry under 20 unlinks on ext2, then 30 on tmpfs.
pub const COUNTERS: VmCase = VmCase {
    name: "voice::counters",
    heading: "the kernel programs' own voice: HIST and COUNTERS of 1 entry, 20 unlinks on ext2 then 30 on tmpfs, --verbose",
    on: On::Every,
    workload: r#"
# d_delete's outcome is counted in its call's HIST key: with one entry, nearly every call
# and its outcome find the map full.
voice_files='i=0; while [ $i -lt 20 ]; do touch /mnt/ext2/kept/v$i || exit 1; i=$((i+1)); done; i=0; while [ $i -lt 30 ]; do touch /tmp/vc/v$i || exit 1; i=$((i+1)); done'
voice_unlinks='i=0; while [ $i -lt 20 ]; do rm /mnt/ext2/kept/v$i || exit 1; i=$((i+1)); done; i=0; while [ $i -lt 30 ]; do rm /tmp/vc/v$i || exit 1; i=$((i+1)); done'
mkdir -p /tmp/vc
for how in kprobe fentry; do
    if [ -d /mnt/ext2/kept ] && sh -c "$voice_files"; then
        export TRACER_MAP_ENTRIES=HIST=1,COUNTERS=1
        capture voice_counters_$how "$voice_unlinks" --attach $how --verbose
        unset TRACER_MAP_ENTRIES
    fi
done
"#,
    judge: |j| {
        for (mode, method) in MODES {
            let stem = format!("voice_counters_{mode}");
            let reads = capture_files(&stem);
            j.verdict(
                mode,
                "HIST and COUNTERS of 1 entry, 20 unlinks on ext2 then 30 on tmpfs: d_delete = 50, 20 negative and 30 dropped dentries, each cgroup's (the workload's, `other`) as many as its d_delete calls, those that found HIST full under `other`, nothing lost",
                &reads.iter().map(String::as_str).collect::<Vec<_>>(),
                |r| voice_counters(r, &stem, method),
            );
        }
    },
    fixtures: &[Fixture::Ext2],
    ..VmCase::BASE
};

/// Rmdirs in the `voice` workload: each one's victim lock finds the one slot of
/// `RMDIR_LOCKS` taken by its parent's.
const VOICE_RMDIRS: u64 = 20;

/// `TRACER_MAP_ENTRIES=RMDIR_LOCKS=1 tracer capture --verbose` of 20 mkdir+rmdir: the
/// kernel programs say once, on stderr, why their locks could not be registered (no free
/// slot), and the loss the report counts is one per rmdir, the same number the `--verbose`
/// explanation gives.
pub fn voice(files: &Results<'_>) -> Verdict {
    let s = load_capture(files, "voice")?;
    exact(&s, Probe::VfsRmdir, VOICE_RMDIRS)?;
    let said = said_once(
        files,
        "voice.log",
        "could not be registered (both its slots are taken by other removals' locks)",
    )?;
    let lost = explained(files, "voice.log", &s, Loss::RmdirLockDrops, VOICE_RMDIRS)?;
    Ok(format!(
        "the kernel said {said:?}; rmdir_lock_drops = {lost} in the report and in --verbose"
    ))
}

/// Unlinks in the `voice_counters` workload on ext2: each leaves a negative dentry.
const VOICE_KEPT: u64 = 20;

/// Unlinks after them on tmpfs: each drops its dentry.
const VOICE_DROPPED: u64 = 30;

/// `TRACER_MAP_ENTRIES=HIST=1,COUNTERS=1 tracer capture --verbose` of 20 unlinks on ext2,
/// then 30 on tmpfs: every `d_delete` is timed and its outcome counted, in the cgroup its
/// call is in (the workload's, or `other` for the calls that found `HIST` full), so each
/// cgroup has as many outcomes as `d_delete` calls; nothing is lost and the kernel programs
/// say nothing.
pub fn voice_counters(files: &Results<'_>, file: &str, method: AttachMethod) -> Verdict {
    let s = load_capture(files, file)?;
    attached_with_all(&s, method, Probe::DDelete)?;
    exact(&s, Probe::DDelete, VOICE_KEPT + VOICE_DROPPED)?;
    let (negative, dropped) = (
        s.counter_total(Counter::NegativeDentries),
        s.counter_total(Counter::DroppedDentries),
    );
    if (negative, dropped) != (VOICE_KEPT, VOICE_DROPPED) {
        return Err(wrong!(
            "negative_dentries = {negative}, dropped_dentries = {dropped} in all; expected \
             {VOICE_KEPT} and {VOICE_DROPPED}"
        ));
    }
    let own = own_cgroup(&s)?;
    let mut seen = Vec::new();
    for (name, cgroup) in [("the workload's cgroup", own), ("`other`", OTHER_CGROUP)] {
        let calls = s
            .total_where(|k| k.probe == Probe::DDelete && k.cgroup == cgroup)
            .count();
        let get = |c| s.counters.get(&(c, cgroup)).copied().unwrap_or(0);
        let (n, d) = (
            get(Counter::NegativeDentries),
            get(Counter::DroppedDentries),
        );
        if n + d != calls {
            return Err(wrong!(
                "{name}: d_delete = {calls}, but negative_dentries = {n} and dropped_dentries \
                 = {d}: an outcome is not where its call is"
            ));
        }
        seen.push(format!(
            "{name}: d_delete = {calls}, {n} negative, {d} dropped"
        ));
    }
    let folded = s.probes.get(&Probe::DDelete).map_or(0, |st| st.folded);
    let other = s
        .total_where(|k| k.probe == Probe::DDelete && k.cgroup == OTHER_CGROUP)
        .count();
    if folded == 0 || folded != other {
        return Err(wrong!(
            "d_delete folded = {folded}, d_delete under `other` = {other}: HIST of one entry \
             must fold calls, each under `other`; {}",
            seen.join("; ")
        ));
    }
    if let Some(n) = s.losses.get(&Loss::CounterDrops) {
        return Err(wrong!(
            "counter_drops = {n}: an event past capacity was lost"
        ));
    }
    let log = files.read(&format!("{file}.log"))?;
    if let Some(l) = log.lines().find(|l| l.contains("tracer::kernel]")) {
        return Err(wrong!(
            "the kernel programs spoke of a loss there is not: {l}"
        ));
    }
    Ok(format!("{}; no loss", seen.join("; ")))
}

/// The one message the kernel programs (target `tracer::kernel`) wrote in `log`, which
/// must contain `want`.
fn said_once(files: &Results<'_>, log: &str, want: &str) -> Verdict {
    let text = files.read(log)?;
    let said: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("tracer::kernel]"))
        .collect();
    if said.len() != 1 || !said[0].contains(want) {
        return Err(Fail::Wrong(files.with_log(
            log,
            format!("expected the kernel programs to say once {want:?}, they said {said:?}"),
        )));
    }
    Ok(said[0].trim().to_owned())
}

/// The report counts `want` of `loss`, and `--verbose` explains that many in `log`.
fn explained(
    files: &Results<'_>,
    log: &str,
    s: &Snapshot,
    loss: Loss,
    want: u64,
) -> Result<u64, String> {
    let counted = s.losses.get(&loss).copied().unwrap_or(0);
    if counted != want {
        return Err(format!(
            "the report counts {} = {counted}, expected {want}",
            loss.name()
        ));
    }
    let explanation = format!("loss {} x{counted}:", loss.name());
    if !files.read(log)?.lines().any(|l| l.contains(&explanation)) {
        return Err(files.with_log(
            log,
            format!("--verbose does not explain the loss with {explanation:?}"),
        ));
    }
    Ok(counted)
}
