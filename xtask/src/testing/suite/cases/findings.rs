//! What tracer finds wrong: ordinary work (a build's files, an idle spell, a few umounts)
//! gives no finding on any kernel, while the counts show the work was done; the findings
//! of a capture are the ones `tracer capture` wrote into its file, with the kernel's
//! settings read in the guest.

use tracer_core::{
    findings::{Assessment, FactStatus, Presence},
    snapshot::{Probe, Snapshot},
};

use crate::testing::{
    harness::{Fail, Verdict, wrong},
    suite::{
        capture::attached,
        case::{Fixture, On, VmCase},
    },
};

/// Directories and files of the build-like part: `DIRS` directories of `FILES` sources,
/// each compiled to an object written under a temporary name and renamed.
const DIRS: u64 = 10;
const FILES: u64 = 30;
/// tmpfs mounted and unmounted after the idle spell.
const UMOUNTS: u64 = 5;

/// Ordinary work under one capture: no rule may fire.
pub const ORDINARY: VmCase = VmCase {
    name: "findings::ordinary",
    heading: "ordinary work (a build's files, 2 s idle, 5 umounts): no finding",
    on: On::Every,
    workload: r"
if [ -d /mnt/ext2 ]; then
    capture ordinary '
        mkdir /mnt/ext2/build && cd /mnt/ext2/build || exit 1
        i=0; while [ $i -lt 10 ]; do
            mkdir d$i; j=0
            while [ $j -lt 30 ]; do
                echo source > d$i/f$j.c; echo object > d$i/f$j.o.tmp; mv d$i/f$j.o.tmp d$i/f$j.o
                j=$((j+1))
            done
            i=$((i+1))
        done
        cd / && rm -r /mnt/ext2/build || exit 1
        sleep 2
        i=0; while [ $i -lt 5 ]; do
            mkdir -p /mnt/o/$i && mount -t tmpfs none /mnt/o/$i && umount /mnt/o/$i || exit 1
            i=$((i+1))
        done' --attach kprobe
fi
",
    judge: |j| {
        j.assessed(
            "kprobe",
            "ordinary work: the build's 11 rmdirs and the 5 umounts counted, and no finding",
            "ordinary",
            ordinary,
        );
    },
    fixtures: &[Fixture::Ext2],
    ..VmCase::BASE
};

/// The work done (its counts in its own cgroup), the findings made for this kernel, and none.
fn ordinary(s: &Snapshot, assessed: &Assessment, version: (u32, u32)) -> Verdict {
    let own = s.command.as_ref().and_then(|c| c.cgroup);
    let count = |probe: Probe| -> Result<u64, Fail> {
        attached(s, probe)?;
        Ok(
            s.total_where(|k| k.probe == probe && (own.is_none() || Some(k.cgroup) == own))
                .count(),
        )
    };
    // rm -r removes the DIRS directories and the build directory itself.
    let (rmdirs, umounts) = (count(Probe::VfsRmdir)?, count(Probe::SysUmount)?);
    if (rmdirs, umounts) != (DIRS + 1, UMOUNTS) {
        return Err(wrong!(
            "vfs_rmdir = {rmdirs}, umount(2) = {umounts}: expected {} and {UMOUNTS}",
            DIRS + 1
        ));
    }
    let release = assessed.kernel.release.as_deref().unwrap_or("none");
    if assessed.kernel.version.map(|v| (v.major, v.minor)) != Some(version) {
        return Err(wrong!(
            "the findings were made for kernel {release}, not the guest's {}.{}",
            version.0,
            version.1
        ));
    }
    if let Some(f) = assessed.findings.first() {
        let all: Vec<&str> = assessed.findings.iter().map(|f| f.id.as_str()).collect();
        return Err(wrong!(
            "{} finding(s) on ordinary work: {all:?}; the first: {}",
            all.len(),
            f.summary
        ));
    }
    let wall = s.command.as_ref().map_or(0, |c| c.wall_ns);
    #[expect(clippy::cast_precision_loss, reason = "seconds for display")]
    let wall_s = wall as f64 / 1e9;
    Ok(format!(
        "vfs_rmdir = {rmdirs}, umount(2) = {umounts}, {} files written, in {wall_s:.1} s on {release}: no finding",
        2 * DIRS * FILES
    ))
}

/// The status of the kernel fact `id` a finding carries.
pub fn fact<'a>(facts: &'a [FactStatus], id: &str) -> Result<&'a FactStatus, String> {
    facts
        .iter()
        .find(|f| f.id == id)
        .ok_or_else(|| format!("the finding names no kernel fact {id}"))
}

/// What the findings' sources say of a change not in any release through 7.3: absent up
/// to there, not known past it.
pub fn absent_through_7_3(version: (u32, u32)) -> Presence {
    if version <= (7, 3) {
        Presence::No
    } else {
        Presence::Unknown
    }
}
