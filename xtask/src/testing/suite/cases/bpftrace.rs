//! bpftrace, a peer, over the same workloads in the same boot: its counts must equal
//! tracer's (the SRCU workload's are judged with the SRCU case's).

use tracer_core::snapshot::{AttachState, Probe};

use crate::testing::{
    harness::{Fail, Verdict, wrong},
    suite::{
        capture::{parse_bpftrace, teardown_probes},
        case::{Fixture, MODES, On, VmCase},
        results::Results,
    },
};

/// The rmdir, unlink, tmpfs and SRCU workloads again, under bpftrace.
pub const BPFTRACE: VmCase = VmCase {
    name: "bpftrace::bpftrace",
    heading: "bpftrace on the same workloads",
    on: On::Every,
    workload: r#"
# The same workloads under bpftrace, in the same boot: its counts must equal tracer's.
teardown=unregister_shrinker
grep -q ' shrinker_free$' /proc/kallsyms && teardown=shrinker_free
if [ -x /usr/bin/bpftrace ]; then
    bt rmdir "$rmdir_workload" "kprobe:$rmdir_sym { @vfs_rmdir = count(); } kprobe:d_delete { @d_delete = count(); }"
    if [ -d /mnt/ext2/kept ]; then
        sh -c "$make_files"
        bt unlink "$unlink_workload" 'kprobe:d_delete { @d_delete = count(); }'
    fi
    bt tmpfs "$tmpfs_workload" "kprobe:$teardown { @$teardown = count(); } kprobe:synchronize_rcu_expedited { @synchronize_rcu_expedited = count(); }"
    if [ -x /usr/bin/inotifywait ]; then
        bt srcu "$srcu_workload" 'kprobe:synchronize_srcu { @synchronize_srcu = count(); } kprobe:fsnotify_mark_destroy_workfn { @fsnotify_mark_destroy_workfn = count(); } kprobe:fsnotify_connector_destroy_workfn { @fsnotify_connector_destroy_workfn = count(); }'
    fi
fi
"#,
    judge: |j| {
        for (mode, _) in MODES {
            let agrees = |name: &str, workload: &str, probes: &[Probe]| {
                let (bt, capture) = (format!("{workload}.bt"), format!("{workload}_{mode}"));
                j.verdict(mode, name, &[&bt, &format!("{capture}.json")], |r| {
                    agrees_with_bpftrace(r, workload, &capture, probes)
                });
            };
            agrees(
                "bpftrace, same boot: vfs_rmdir and d_delete of 200 rmdirs",
                "rmdir",
                &[Probe::VfsRmdir, Probe::DDelete],
            );
            agrees(
                "bpftrace, same boot: d_delete of 100 unlinks",
                "unlink",
                &[Probe::DDelete],
            );
            agrees(
                "bpftrace, same boot: shrinker teardowns and expedited waits of 50 umounts",
                "tmpfs",
                &[
                    teardown_probes(j.version()).0,
                    Probe::SynchronizeRcuExpedited,
                ],
            );
        }
    },
    fixtures: &[
        Fixture::RmdirDir,
        Fixture::Ext2,
        Fixture::TmpfsMountpoint,
        Fixture::WatchedDir,
    ],
    needs: &["counts::rmdir", "counts::tmpfs", "counts::unlink"],
    ..VmCase::BASE
};

/// tracer's counts of `probes` in capture `name` equal bpftrace's for the same workload.
pub fn agrees_with_bpftrace(
    files: &Results<'_>,
    bt_name: &str,
    name: &str,
    probes: &[Probe],
) -> Verdict {
    let text = files.read(&format!("{bt_name}.bt"))?;
    if !text.contains("exit 0") {
        return Err(wrong!(
            "bpftrace failed:\n    {}",
            text.trim().replace('\n', "\n    ")
        ));
    }
    let theirs = parse_bpftrace(&text);
    let path = files
        .get(&format!("{name}.json"))
        .ok_or_else(|| format!("no {name}.json"))?;
    let ours = tracer_core::capture_file::load(path).map_err(|e| format!("{e:#}"))?;
    let mut seen = Vec::new();
    for probe in probes {
        // A probe this attach mode cannot place here (fentry on a compiler clone) is no
        // disagreement: tracer said why.
        if let Some(AttachState::Failed { reason }) = ours.probes.get(probe).map(|st| &st.state)
            && reason.contains("compiler clone")
        {
            return Err(Fail::Cannot(format!("{}: {reason}", probe.name())));
        }
        let mine = ours.probe_total(*probe).count();
        let bt = theirs.get(probe.name()).copied().unwrap_or(0);
        if mine != bt {
            return Err(wrong!("{}: tracer {mine}, bpftrace {bt}", probe.name()));
        }
        seen.push(format!("{} = {mine}", probe.name()));
    }
    Ok(format!("both count {}", seen.join(", ")))
}
