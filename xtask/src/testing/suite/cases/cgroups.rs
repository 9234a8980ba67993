//! Cgroups as tracer reads them: the kernel's `cgroup_mkdir` record, and cgroups made and
//! removed while a capture runs.

use tracer_core::snapshot::{AttachMethod, GONE_CGROUP, Probe, Snapshot};

use crate::testing::{
    harness::{Verdict, wrong},
    suite::{
        capture::{attached_with, rmdirs_by_path},
        case::{MODES, On, VmCase},
        results::Results,
    },
};

/// The `cgroup:cgroup_mkdir` tracepoint's format file.
pub const CGROUP_FORMAT: VmCase = VmCase {
    name: "cgroups::cgroup_format",
    heading: "cgroup tracepoint layout",
    on: On::Every,
    workload: r"
emit cgroup_format $tracing/events/cgroup/cgroup_mkdir/format
",
    judge: |j| {
        j.verdict(
            "reference",
            "cgroup:cgroup_mkdir's record has root, id and path where tracer reads them",
            &["cgroup_format"],
            cgroup_format,
        );
    },
    ..VmCase::BASE
};

/// Three cgroups made, used and removed during one capture.
pub const CHURN: VmCase = VmCase {
    name: "cgroups::churn",
    heading: "cgroups made and removed during a capture (30, 40, 50 mkdir + rmdir), kprobe and fentry",
    on: On::Every,
    workload: r#"
mkdir -p /tmp/cca /tmp/ccb /tmp/ccc
# Each cgroup is made, used by one shell, and removed once that shell has exited.
churn='for spec in a:30 b:40 c:50; do n=${spec%%:*}; k=${spec#*:}; mkdir /sys/fs/cgroup/churn_$n && sh /tmp/half.sh churn_$n cc$n $k && rmdir /sys/fs/cgroup/churn_$n || exit 1; done'
for how in kprobe fentry; do
    capture churn_$how "$churn" --attach $how
done
"#,
    judge: |j| {
        for (mode, method) in MODES {
            j.capture(
                mode,
                "3 cgroups made and removed during a capture are named, 30/40/50 vfs_rmdir each",
                &format!("churn_{mode}"),
                |s, _| churn(s, method),
            );
        }
    },
    ..VmCase::BASE
};

/// The guest kernel's `cgroup:cgroup_mkdir` format file parses as tracer reads it.
pub fn cgroup_format(files: &Results<'_>) -> Verdict {
    let text = files.read("cgroup_format")?;
    let [root, id, path] =
        tracer_host::tracefs::cgroup_offsets(&text).map_err(|e| e.to_string())?;
    Ok(format!(
        "root at {root}, id (u64) at {id}, path (__data_loc) at {path}"
    ))
}

/// Three cgroups, each made, used by one shell for 30, 40 and 50 mkdir+rmdir, and removed
/// before the capture ends: each is named by its path with its own counts, nothing is "(gone)".
pub fn churn(s: &Snapshot, method: AttachMethod) -> Verdict {
    attached_with(s, Probe::VfsRmdir, method)?;
    let seen: Vec<String> =
        rmdirs_by_path(s, &[("/churn_a", 30), ("/churn_b", 40), ("/churn_c", 50)])?
            .iter()
            .map(|(path, want)| format!("{path} = {want}"))
            .collect();
    let gone = s.total_where(|k| k.cgroup == GONE_CGROUP).count();
    if gone > 0 {
        return Err(wrong!("{gone} calls reported from (gone) cgroups"));
    }
    Ok(format!(
        "vfs_rmdir and rmdir: {}; none (gone)",
        seen.join(", ")
    ))
}
