//! Nodes as clusters run them, with `tracer serve` run as `deploy/kubernetes/`'s `DaemonSet`
//! runs it: uid 0 whose capabilities are the `DaemonSet`'s alone (the bounding set),
//! `no_new_privs`, its arguments, and the host's cgroup tree at `/host/sys/fs/cgroup`.
//! Debian's `kernel.perf_event_paranoid=3`: every probe attached, or one line that names
//! the sysctl, the value needed and how to set it. `kernel.kptr_restrict=1`: with
//! `CAP_SYSLOG` the frame marks are set and nothing is warned (without it, tracer says
//! what to grant). systemd's hybrid layout (v1 hierarchies, cgroup2 at `unified`):
//! cgroups named from `unified`. cgroup v1 alone: serve starts, counts every call under
//! `/`, and says once what it cannot tell apart.

use std::path::Path;

use crate::{
    testing::{
        harness::{Verdict, wrong},
        manifests::daemonset,
        suite::{
            case::{Fixture, Judge, On, VmCase},
            results::Results,
        },
    },
    vm,
};

/// util-linux's setpriv: the bounding set and `no_new_privs` for one command.
const SETPRIV: &str = "/usr/bin/setpriv";

/// What tracer warns when the kernel programs get no frame marks.
const FRAME_WARNING: &str = "a caller frame left by a return the kernel missed";

/// mkdir + rmdir pairs each serve case's workload makes in a cgroup of its own.
const PAIRS: u64 = 100;

/// What the node cases send back.
const READS: [&str; 10] = [
    "nd_paranoid3.err",
    "nd_kptr.err",
    "nd_kptr.metrics",
    "nd_nosyslog.err",
    "nd_hybrid.err",
    "nd_hybrid.metrics",
    "nd_v1.err",
    "nd_v1.metrics",
    "nd_v1.mounts",
    "nd_hybrid.mounts",
];

/// What the node cases need in the guest: the `DaemonSet`'s capabilities as setpriv's list
/// and its arguments (one line), and setpriv with its libraries.
///
/// # Errors
/// When the `DaemonSet` or setpriv cannot be read.
pub fn guest_files() -> anyhow::Result<Vec<(String, u32, Vec<u8>)>> {
    let ds = daemonset().map_err(anyhow::Error::msg)?;
    let mut files = vec![
        (
            "/daemonset.caps".to_owned(),
            0o644,
            ds.setpriv_caps().into_bytes(),
        ),
        (
            "/daemonset.args".to_owned(),
            0o644,
            ds.args.join(" ").into_bytes(),
        ),
    ];
    if Path::new(SETPRIV).exists() {
        files.extend(vm::host_program(SETPRIV)?);
    }
    Ok(files)
}

/// The node cases, on one kernel (Debian's 6.1, whose config has cgroup v1).
pub const NODES: VmCase = VmCase {
    name: "nodes::nodes",
    heading: "nodes as clusters run them (the DaemonSet's serve: perf_event_paranoid=3, kptr_restrict=1, hybrid and v1-only cgroups)",
    on: On::Only(&[(6, 1)]),
    workload: r#"
nd=/tmp/nodes
mkdir -p $nd /host/sys/fs/cgroup
ds_caps=$(cat /daemonset.caps)
ds_args=$(cat /daemonset.args)
nosyslog=$(echo "$ds_caps" | sed 's/,+syslog//')
paranoid0=$(cat /proc/sys/kernel/perf_event_paranoid)
kptr0=$(cat /proc/sys/kernel/kptr_restrict)
# ds CAPS ARGS... &: tracer as the DaemonSet runs it: uid 0 whose bounding set is CAPS
# alone (what an exec as root then holds), no_new_privs. Run in the background only: the
# subshell execs setpriv, which execs tracer, so that $! is tracer's pid.
ds() { caps=$1; shift; exec /usr/bin/setpriv --bounding-set=-all,$caps --inh-caps=-all --no-new-privs tracer "$@"; }
# nd_serve TAG CAPS [PROCS...]: serve with the DaemonSet's args (refreshing every second)
# until ready, then 100 mkdir + rmdir from cgroup /nd_TAG (or from the cgroups whose
# cgroup.procs files PROCS are), a scrape 3 s later, and SIGTERM: its log in
# $nd/TAG.err (with the workload's status, the readiness then and the exit status), the
# scrape in $nd/TAG.metrics, and its peak resident memory (VmHWM) in the log.
nd_serve() {
    tag=$1
    caps=$2
    shift 2
    mkdir -p $cg/nd_$tag /tmp/nd_$tag
    procs=${*:-$cg/nd_$tag/cgroup.procs}
    ds "$caps" serve $ds_args --interval 1s > /dev/null 2> $nd/$tag.err &
    p=$!
    i=0
    while [ $i -lt 2400 ] && kill -0 $p 2>/dev/null && ! wget -q -O /dev/null http://127.0.0.1:29110/-/ready 2>/dev/null; do sleep 0.1; i=$((i+1)); done
    sh -c "for f in $procs; do echo \$\$ > \$f || exit 1; done; cd /tmp/nd_$tag && i=0; while [ \$i -lt 100 ]; do mkdir d\$i && rmdir d\$i || exit 1; i=\$((i+1)); done"
    w=$?
    sleep 3
    wget -q -O $nd/$tag.metrics http://127.0.0.1:29110/metrics
    r=503; wget -q -O /dev/null http://127.0.0.1:29110/-/ready 2>/dev/null && r=200
    grep VmHWM /proc/$p/status >> $nd/$tag.err
    kill $p 2>/dev/null
    wait $p
    echo "workload $w ready $r exit $?" >> $nd/$tag.err
    rmdir $cg/nd_$tag
}
if [ -x /usr/bin/setpriv ]; then
    # The host's cgroup2 tree, as the DaemonSet mounts it.
    mount -t cgroup2 none /host/sys/fs/cgroup
    # Debian's default: perf_event_open refused without CAP_SYS_ADMIN.
    echo 3 > /proc/sys/kernel/perf_event_paranoid
    ds "$ds_caps" serve $ds_args > /dev/null 2> $nd/p3.err &
    p=$!
    i=0
    while [ $i -lt 3000 ] && kill -0 $p 2>/dev/null && ! grep -q 'recording since' $nd/p3.err; do sleep 0.1; i=$((i+1)); done
    kill $p 2>/dev/null
    wait $p
    echo "exit $?" >> $nd/p3.err
    emit nd_paranoid3.err $nd/p3.err
    # As deploy/ sets the node: perf_event_paranoid 2, and addresses hidden from a process
    # without CAP_SYSLOG.
    echo 2 > /proc/sys/kernel/perf_event_paranoid
    echo 1 > /proc/sys/kernel/kptr_restrict
    nd_serve kptr "$ds_caps"
    emit nd_kptr.err $nd/kptr.err
    emit nd_kptr.metrics $nd/kptr.metrics
    nd_serve nosyslog "$nosyslog"
    emit nd_nosyslog.err $nd/nosyslog.err
    umount /host/sys/fs/cgroup
    # systemd's hybrid layout: v1 hierarchies (a named one: the controllers are cgroup2's
    # in this guest), cgroup2 at unified/.
    mount -t tmpfs tmpfs /host/sys/fs/cgroup
    mkdir /host/sys/fs/cgroup/systemd /host/sys/fs/cgroup/unified
    mount -t cgroup -o none,name=systemd cgroup /host/sys/fs/cgroup/systemd
    mount -t cgroup2 none /host/sys/fs/cgroup/unified
    grep ' /host/sys/fs/cgroup' /proc/self/mountinfo > $nd/hybrid.mounts
    nd_serve hybrid "$ds_caps"
    emit nd_hybrid.mounts $nd/hybrid.mounts
    emit nd_hybrid.err $nd/hybrid.err
    emit nd_hybrid.metrics $nd/hybrid.metrics
    # cgroup v1 alone: the workload in a cgroup of the v1 hierarchy and, as every task of
    # such a host, in cgroup2's root.
    umount /host/sys/fs/cgroup/unified
    rmdir /host/sys/fs/cgroup/unified
    mkdir /host/sys/fs/cgroup/systemd/nd_v1
    grep ' /host/sys/fs/cgroup' /proc/self/mountinfo > $nd/v1.mounts
    nd_serve v1 "$ds_caps" /host/sys/fs/cgroup/systemd/nd_v1/cgroup.procs $cg/cgroup.procs
    rmdir /host/sys/fs/cgroup/systemd/nd_v1
    emit nd_v1.mounts $nd/v1.mounts
    emit nd_v1.err $nd/v1.err
    emit nd_v1.metrics $nd/v1.metrics
    umount /host/sys/fs/cgroup/systemd
    umount /host/sys/fs/cgroup
    echo $paranoid0 > /proc/sys/kernel/perf_event_paranoid
    echo $kptr0 > /proc/sys/kernel/kptr_restrict
fi
"#,
    judge,
    fixtures: &[Fixture::ScaleLibrary],
    ..VmCase::BASE
};

/// The node verdicts.
fn judge(j: &Judge<'_>) {
    j.verdict(
        "",
        "perf_event_paranoid=3, the DaemonSet's capabilities: every probe attached, or exit 1 with one line naming kernel.perf_event_paranoid, 2, sysctl -w and the init container",
        &READS,
        |r| paranoid(&r.read("nd_paranoid3.err")?),
    );
    j.verdict(
        "",
        "kptr_restrict=1, the DaemonSet's capabilities: no warning but shrinker_free's, the frame marks set, 100 vfs_rmdir in their cgroup; without CAP_SYSLOG the warning names it",
        &READS,
        kptr,
    );
    j.verdict(
        "",
        "hybrid cgroups (v1 beside cgroup2 at unified/): 100 vfs_rmdir named by their cgroup2 path, the layout said once",
        &READS,
        |r| layout(r, "hybrid"),
    );
    j.verdict(
        "",
        "cgroup v1 alone: serve ready, every call counted under /, none under a cgroup it cannot see, what it cannot tell apart said once",
        &READS,
        |r| layout(r, "v1"),
    );
}

/// Lines of `log` but the status lines the workload appends.
fn said(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| {
            !l.starts_with("exit ") && !l.starts_with("workload ") && !l.starts_with("VmHWM:")
        })
        .collect()
}

/// The one line, or every probe attached.
fn paranoid(log: &str) -> Verdict {
    let lines = said(log);
    let exit = log.lines().rev().find_map(|l| l.strip_prefix("exit "));
    if let Some(rec) = lines.iter().find(|l| l.contains("recording since")) {
        // A kernel that lets CAP_PERFMON through at 3: every probe it has, or it is half a
        // tracer.
        let refused: Vec<&&str> = lines
            .iter()
            .filter(|l| l.contains("not attached:") && !l.contains("on this kernel"))
            .collect();
        return if refused.is_empty() {
            Ok((*rec).to_owned())
        } else {
            Err(wrong!("{rec}, and not attached: {refused:?}"))
        };
    }
    let [line] = lines.as_slice() else {
        return Err(wrong!("want one line, got {}:\n{log}", lines.len()));
    };
    let wants = [
        "kernel.perf_event_paranoid is 3",
        "sysctl -w kernel.perf_event_paranoid=2",
        "/etc/sysctl.d/",
        "init container",
    ];
    let missing: Vec<&str> = wants
        .iter()
        .filter(|w| !line.contains(**w))
        .copied()
        .collect();
    let times = line.matches("perf_event_paranoid is").count();
    if exit != Some("1") || !missing.is_empty() || times != 1 {
        return Err(wrong!(
            "want exit 1 and {missing:?} in one sentence (said {times} times): {log}"
        ));
    }
    Ok(format!("exit 1: {line}"))
}

/// The `vfs_rmdir` calls the scrape counts in `cgroup` (every caller's).
fn rmdirs(metrics: &str, cgroup: &str) -> u64 {
    let want = format!("cgroup=\"{cgroup}\"");
    metrics
        .lines()
        .filter(|l| {
            l.starts_with("tracer_cgroup_calls_total{")
                && l.contains("probe=\"vfs_rmdir\"")
                && l.contains(&want)
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// The status line `nd_serve` appends: the workload's status, the readiness, the exit.
fn status(log: &str) -> Result<(String, String, String), String> {
    let line = log
        .lines()
        .rev()
        .find(|l| l.starts_with("workload "))
        .ok_or_else(|| format!("no status line:\n{log}"))?;
    match line.split(' ').collect::<Vec<_>>().as_slice() {
        ["workload", w, "ready", r, "exit", e] => {
            Ok(((*w).to_owned(), (*r).to_owned(), (*e).to_owned()))
        }
        _ => Err(format!("status line: {line}")),
    }
}

fn kptr(r: &Results<'_>) -> Verdict {
    let log = r.read("nd_kptr.err")?;
    let (w, ready, _) = status(&log)?;
    let warnings: Vec<&str> = said(&log)
        .into_iter()
        .filter(|l| l.contains("warning"))
        .collect();
    let unexpected: Vec<&str> = said(&log)
        .into_iter()
        .filter(|l| l.contains("error") || l.contains("warning"))
        .filter(|l| !l.contains("not attached: shrinker_free"))
        .collect();
    let n = rmdirs(&r.read("nd_kptr.metrics")?, "/nd_kptr");
    // The process's peak, within the container's limit (which also holds the maps).
    let limit = daemonset()?
        .memory_limit
        .ok_or("the DaemonSet has no memory limit")?;
    let peak = log
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib << 10);
    if w != "0"
        || ready != "200"
        || !unexpected.is_empty()
        || n != PAIRS
        || peak.is_none_or(|p| p >= limit)
    {
        return Err(wrong!(
            "want workload 0, ready 200, no warning but shrinker_free's, {PAIRS} vfs_rmdir in /nd_kptr (got {n}), a peak RSS under the limit {} MiB:\n{log}",
            limit >> 20
        ));
    }
    let peak = peak.unwrap_or_default() >> 20;
    let without = r.read("nd_nosyslog.err")?;
    let Some(hidden) = without.lines().find(|l| l.contains(FRAME_WARNING)) else {
        return Err(wrong!(
            "without CAP_SYSLOG no warning of the frame marks (so the case cannot tell):\n{without}"
        ));
    };
    if !hidden.contains("CAP_SYSLOG") {
        return Err(wrong!(
            "without CAP_SYSLOG the warning does not name it: {hidden}"
        ));
    }
    Ok(format!(
        "{n} vfs_rmdir in /nd_kptr, peak RSS {peak} MiB (limit {} MiB), warnings {warnings:?}; without CAP_SYSLOG: {hidden}",
        limit >> 20
    ))
}

fn layout(r: &Results<'_>, tag: &str) -> Verdict {
    let log = r.read(&format!("nd_{tag}.err"))?;
    let metrics = r.read(&format!("nd_{tag}.metrics"))?;
    let mounts = r.read(&format!("nd_{tag}.mounts"))?;
    let (w, ready, _) = status(&log)?;
    let own = format!("/nd_{tag}");
    if let Some(error) = log.lines().find(|l| l.contains("error")) {
        return Err(wrong!("{error}\n{log}"));
    }
    let (said_once, counted) = if tag == "hybrid" {
        let n = rmdirs(&metrics, &own);
        (
            "cgroup v1 hierarchies (systemd) are mounted beside cgroup2",
            (n == PAIRS).then(|| format!("{n} vfs_rmdir in {own}")),
        )
    } else {
        let root = rmdirs(&metrics, "/");
        let own_n = rmdirs(&metrics, &own);
        (
            "no cgroup2 hierarchy is mounted (cgroup v1 only: systemd)",
            (root >= PAIRS && own_n == 0 && !metrics.contains(&format!("cgroup=\"{own}\"")))
                .then(|| format!("{root} vfs_rmdir under /, none under {own}")),
        )
    };
    let times = log.lines().filter(|l| l.contains(said_once)).count();
    match counted {
        Some(counted) if w == "0" && ready == "200" && times == 1 => Ok(format!(
            "{counted}; said once: {}",
            log.lines()
                .find(|l| l.contains(said_once))
                .unwrap_or_default()
        )),
        _ => Err(wrong!(
            "want workload 0, ready 200, the counts, `{said_once}` once (got {times}); mounts:\n{mounts}\nlog:\n{log}\nvfs_rmdir lines:\n{}",
            metrics
                .lines()
                .filter(|l| l.starts_with("tracer_cgroup_calls_total{") && l.contains("vfs_rmdir"))
                .collect::<Vec<_>>()
                .join("\n")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_paranoid_line_must_say_what_to_set_and_how() {
        let good = "tracer serve: error: kernel.perf_event_paranoid is 3 on this host, and above 2 this kernel refuses ...: set it to 2 on the node (`sysctl -w kernel.perf_event_paranoid=2`, and a file in /etc/sysctl.d/ for later boots), or on Kubernetes with the init container of deploy/kubernetes/20-daemonset.yaml\nexit 1\n";
        assert!(paranoid(good).is_ok());
        let twice = good.replace(
            "deploy/kubernetes/20-daemonset.yaml\n",
            "deploy/kubernetes/20-daemonset.yaml: kernel.perf_event_paranoid is 3 on this host\n",
        );
        assert!(paranoid(&twice).is_err());
        assert!(paranoid(&good.replace("exit 1", "exit 0")).is_err());
        assert!(paranoid(&format!("tracer serve: attaching 17 probes...\n{good}")).is_err());
        assert!(paranoid("recording since x: 17 of 17 probes attached in 9 s\nexit 143\n").is_ok());
        assert!(
            paranoid("recording since x: 9 of 17 probes attached in 9 s\nwarning: not attached: vfs_rmdir: permission denied\nexit 143\n")
                .is_err()
        );
    }

    #[test]
    fn rmdirs_are_summed_over_callers_of_one_cgroup() {
        let m = "tracer_cgroup_calls_total{probe=\"vfs_rmdir\",caller=\"none\",cgroup=\"/a\"} 60\ntracer_cgroup_calls_total{probe=\"vfs_rmdir\",caller=\"rmdir\",cgroup=\"/a\"} 40\ntracer_cgroup_calls_total{probe=\"vfs_rmdir\",caller=\"none\",cgroup=\"/\"} 7\n";
        assert_eq!(rmdirs(m, "/a"), 100);
        assert_eq!(rmdirs(m, "/"), 7);
    }
}
