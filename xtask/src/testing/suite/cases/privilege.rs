//! Least privilege: as user 65534, with no capability one message naming `CAP_BPF` and
//! `CAP_PERFMON` and exit 1 (capture and serve); with `CAP_BPF` and `CAP_PERFMON` only the
//! tracepoints name `CAP_DAC_READ_SEARCH`; with the three, in a cgroup delegated to the
//! user, `capture` counts exactly with the command in its own cgroup, and `serve` counts
//! while no thread holds a capability. Outside a delegated cgroup the command shares the
//! host's cgroups, and tracer says what it needs. And `serve` run as `deploy/`'s systemd
//! unit runs it.

use std::path::Path;

use tracer_core::snapshot::Probe;

use super::signals::seconds;
use crate::{
    testing::{
        harness::{Fail, Verdict, wrong},
        suite::{
            capture::exact,
            case::{Judge, On, VmCase},
            results::Results,
        },
    },
    vm,
};

/// Debian's bpftool (`cargo xtask setup` installs it), which lists the kernel's BPF objects.
pub const BPFTOOL: &str = "/usr/sbin/bpftool";

/// util-linux's setpriv: a user id and capability sets for one command.
const SETPRIV: &str = "/usr/bin/setpriv";

/// The systemd unit of `deploy/`, whose ambient capabilities the guest runs serve with.
const UNIT: &str = include_str!("../../../../../deploy/systemd/tracer.service");

/// The sysctl file of `deploy/`, which the guest applies.
const SYSCTL_CONF: &[u8] = include_bytes!("../../../../../deploy/systemd/99-tracer.conf");

/// The unit's `AmbientCapabilities=` as setpriv's list (`+bpf,+perfmon,...`).
fn setpriv_caps(unit: &str) -> String {
    unit.lines()
        .filter_map(|l| l.strip_prefix("AmbientCapabilities="))
        .flat_map(str::split_whitespace)
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_ascii_lowercase()))
        .collect::<Vec<_>>()
        .join(",")
}

/// What the hardening cases need in the guest besides their script: deploy/'s sysctl file
/// and the unit's capabilities, bpftool and setpriv with their libraries.
///
/// # Errors
/// When one of them cannot be read.
pub fn guest_files() -> anyhow::Result<Vec<(String, u32, Vec<u8>)>> {
    let mut files = vec![
        ("/99-tracer.conf".to_owned(), 0o644, SYSCTL_CONF.to_vec()),
        (
            "/deploy.caps".to_owned(),
            0o644,
            setpriv_caps(UNIT).into_bytes(),
        ),
    ];
    for program in [BPFTOOL, SETPRIV] {
        if Path::new(program).exists() {
            files.extend(vm::host_program(program)?);
        }
    }
    Ok(files)
}

/// What the least-privilege cases send back.
const READS: [&str; 13] = [
    "lp.paranoid",
    "lp_none_capture.err",
    "lp_none_serve.err",
    "lp_two.err",
    "lp_nodeleg.err",
    "lp_capture_kprobe.log",
    "lp_capture_kprobe.json",
    "lp_capture_fentry.log",
    "lp_capture_fentry.json",
    "lp_serve.err",
    "lp_serve.metrics",
    "lp_serve.caps",
    "lp.seconds",
];

/// tracer as user 65534 with no capability, some, and the three it needs.
pub const LEAST_PRIVILEGE: VmCase = VmCase {
    name: "privilege::least_privilege",
    heading: "least privilege (user 65534 with only the capabilities named)",
    on: On::Every,
    workload: r#"
t0=$(cut -d' ' -f1 /proc/uptime)
# asuser CAPS ARGS...: tracer as user 65534 with only CAPS (e.g. +bpf,+perfmon), ambient so
# they survive the exec; "" for none.
asuser() {
    caps=$1
    shift
    if [ -n "$caps" ]; then
        $setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=$caps --ambient-caps=$caps tracer "$@"
    else
        $setpriv --reuid=65534 --regid=65534 --clear-groups tracer "$@"
    fi
}
three=+bpf,+perfmon,+dac_read_search
# Debian's kernels default to kernel.perf_event_paranoid=3, where perf_event_open (kprobes
# and tracepoints) was refused to this user even with CAP_PERFMON (seen on 6.12): 2, the
# upstream default, lets CAP_PERFMON open them.
echo "perf_event_paranoid $(cat /proc/sys/kernel/perf_event_paranoid), set to 2" > /tmp/lp.paranoid
echo 2 > /proc/sys/kernel/perf_event_paranoid
if [ -x $setpriv ]; then
    asuser "" capture -d 1s > /dev/null 2> /tmp/lp_none_capture.err
    echo "exit $?" >> /tmp/lp_none_capture.err
    asuser "" serve > /dev/null 2> /tmp/lp_none_serve.err
    echo "exit $?" >> /tmp/lp_none_serve.err
    # Without CAP_DAC_READ_SEARCH: tracefs (root's, 0700) cannot be read.
    asuser +bpf,+perfmon capture -- true > /dev/null 2> /tmp/lp_two.err
    echo "exit $?" >> /tmp/lp_two.err
    # In the root cgroup, which user 65534 cannot write: the command shares the host's.
    asuser $three capture -- true > /dev/null 2> /tmp/lp_nodeleg.err
    echo "exit $?" >> /tmp/lp_nodeleg.err
    # A cgroup delegated to the user, as systemd delegates one (Delegate=yes): tracer's
    # cgroup, under which it makes the command's.
    mkdir -p $cg/lp /tmp/lp
    chown 65534:65534 $cg/lp $cg/lp/cgroup.procs $cg/lp/cgroup.threads $cg/lp/cgroup.subtree_control /tmp/lp
    for how in kprobe fentry; do
        sh -c "echo \$\$ > $cg/lp/cgroup.procs; exec $setpriv --reuid=65534 --regid=65534 --clear-groups \
            --inh-caps=$three --ambient-caps=$three tracer capture --attach $how --format json \
            -o /tmp/lp/cap_$how.json -- sh -c 'cd /tmp/lp && i=0; while [ \$i -lt 50 ]; do mkdir d\$i && rmdir d\$i || exit 1; i=\$((i+1)); done'" \
            > /tmp/lp_capture_$how.log 2>&1
        echo "exit $?" >> /tmp/lp_capture_$how.log
        emit lp_capture_$how.log /tmp/lp_capture_$how.log
        [ -f /tmp/lp/cap_$how.json ] && emit lp_capture_$how.json /tmp/lp/cap_$how.json
    done
    # serve as the same user: scraped after 30 mkdir + rmdir in a cgroup it made, then
    # every thread's capability sets.
    sh -c "echo \$\$ > $cg/lp/cgroup.procs; exec $setpriv --reuid=65534 --regid=65534 --clear-groups \
        --inh-caps=$three --ambient-caps=$three tracer serve --interval 1s" > /dev/null 2> /tmp/lp_serve.err &
    srv=$!
    i=0
    while [ $i -lt 1200 ] && ! wget -q -O /dev/null http://127.0.0.1:29110/metrics 2>/dev/null; do sleep 0.1; i=$((i+1)); done
    # The workload as the same user, moved (by root) into /lp first: a user may move a
    # process only between cgroups whose common ancestor's cgroup.procs it can write.
    cat > /tmp/lp_wl.sh <<'WL'
mkdir /sys/fs/cgroup/lp/wl && echo $$ > /sys/fs/cgroup/lp/wl/cgroup.procs && cd /tmp/lp || exit 1
i=0; while [ $i -lt 30 ]; do mkdir w$i && rmdir w$i || exit 1; i=$((i+1)); done
WL
    sh -c "echo \$\$ > $cg/lp/cgroup.procs; exec $setpriv --reuid=65534 --regid=65534 --clear-groups sh /tmp/lp_wl.sh" \
        >> /tmp/lp_serve.err 2>&1
    sleep 3
    wget -q -O /tmp/lp_serve.metrics http://127.0.0.1:29110/metrics
    for t in /proc/$srv/task/*; do
        grep -E '^Cap(Eff|Prm|Inh|Amb)' $t/status | tr '\n' ' '
        echo
    done > /tmp/lp_serve.caps
    kill -TERM $srv
    wait $srv
    echo "exit $?" >> /tmp/lp_serve.err
    rmdir $cg/lp/wl 2>/dev/null
    for f in lp.paranoid lp_none_capture.err lp_none_serve.err lp_two.err lp_nodeleg.err lp_serve.err lp_serve.metrics lp_serve.caps; do
        emit $f /tmp/$f
    done
fi
echo "seconds $(cut -d' ' -f1 /proc/uptime) $t0" > /tmp/lp.seconds
emit lp.seconds /tmp/lp.seconds
"#,
    judge,
    ..VmCase::BASE
};

/// `serve` as `deploy/systemd/tracer.service` runs it.
pub const DEPLOY: VmCase = VmCase {
    name: "privilege::deploy",
    heading: "serve as deploy/systemd/tracer.service runs it",
    on: On::Every,
    workload: r#"
# tracer serve as deploy/systemd/tracer.service runs it: the sysctl file of
# deploy/systemd applied to Debian's default, a user of its own (a uid of systemd's
# DynamicUser= range, no groups), the unit's ambient capabilities and bounding set (the
# host wrote them to /deploy.caps from the unit), no_new_privs, RLIMIT_MEMLOCK unlimited,
# and the unit's command line. 200 mkdir+rmdir in a cgroup made after it started must be
# counted exactly in a scrape.
if [ -x $setpriv ] && [ -f /deploy.caps ] && [ -f /99-tracer.conf ]; then
    echo 3 > /proc/sys/kernel/perf_event_paranoid
    sysctl -p /99-tracer.conf > /dev/null 2>&1
    echo "perf_event_paranoid $(cat /proc/sys/kernel/perf_event_paranoid) after 99-tracer.conf" > /tmp/deploy.paranoid
    caps=$(cat /deploy.caps)
    (
        ulimit -l unlimited
        exec $setpriv --reuid=61234 --regid=61234 --clear-groups --no-new-privs \
            --bounding-set=-all,$caps --inh-caps=$caps --ambient-caps=$caps tracer serve
    ) > /dev/null 2> /tmp/deploy_serve.err &
    srv=$!
    i=0
    while [ $i -lt 1200 ] && ! wget -q -O - http://127.0.0.1:29110/metrics 2>/dev/null | grep -q '^tracer_source_up 1'; do
        sleep 0.1; i=$((i+1))
    done
    mkdir -p $cg/deploy/wl /tmp/deploy
    sh -c "echo \$\$ > $cg/deploy/wl/cgroup.procs; cd /tmp/deploy && i=0; while [ \$i -lt 200 ]; do mkdir d\$i && rmdir d\$i || exit 1; i=\$((i+1)); done" \
        >> /tmp/deploy_serve.err 2>&1
    sleep 3
    wget -q -O /tmp/deploy_serve.metrics http://127.0.0.1:29110/metrics
    grep -E '^(Uid|Gid|Groups|NoNewPrivs|CapBnd)' /proc/$srv/status > /tmp/deploy_serve.status
    kill -TERM $srv
    wait $srv
    echo "exit $?" >> /tmp/deploy_serve.err
    rmdir $cg/deploy/wl $cg/deploy 2>/dev/null
    for f in deploy.paranoid deploy_serve.err deploy_serve.metrics deploy_serve.status; do
        emit $f /tmp/$f
    done
fi
"#,
    judge: |j| {
        j.verdict(
            "",
            "deploy: serve as deploy/systemd/tracer.service runs it (its sysctl, user, capabilities, no_new_privs) counts 200 vfs_rmdir exactly",
            &["deploy_serve.metrics", "deploy_serve.err", "deploy_serve.status", "deploy.paranoid"],
            deploy_serve,
        );
    },
    ..VmCase::BASE
};

/// The least-privilege cases' verdicts.
fn judge(j: &Judge<'_>) {
    let files = j.files(&READS);
    if !j.has("lp_none_capture.err") {
        j.record(
            "",
            "least privilege: the cases ran",
            &Err(wrong!("no results (is {SETPRIV} on this host?)")),
        );
        return;
    }
    for command in ["capture", "serve"] {
        j.record(
            "",
            &format!(
                "least privilege: {command} as user 65534 without capabilities: one message, exit 1"
            ),
            &refused(&files, &format!("lp_none_{command}.err")),
        );
    }
    j.record(
        "",
        "least privilege: with CAP_BPF and CAP_PERFMON only, the tracepoints name CAP_DAC_READ_SEARCH",
        &files.read("lp_two.err").and_then(|t| {
            if t.contains("CAP_DAC_READ_SEARCH") {
                Ok(t.lines().find(|l| l.contains("CAP_DAC_READ_SEARCH")).unwrap_or("").chars().take(160).collect())
            } else {
                Err(format!("no word of CAP_DAC_READ_SEARCH: {t}"))
            }
        }),
    );
    j.record(
        "",
        "least privilege: outside a delegated cgroup the command shares the host's, and tracer says what it needs",
        &files.read("lp_nodeleg.err").and_then(|t| {
            match t.lines().find(|l| l.contains("shares the host's cgroups")) {
                Some(l) if l.contains("CAP_DAC_OVERRIDE") && l.contains("delegated") => Ok(l.trim().to_owned()),
                _ => Err(format!("expected a line naming a delegated cgroup and CAP_DAC_OVERRIDE: {t}")),
            }
        }),
    );
    for how in ["kprobe", "fentry"] {
        j.record(
            "",
            &format!("least privilege [{how}]: capture as user 65534 with CAP_BPF, CAP_PERFMON, CAP_DAC_READ_SEARCH in a delegated cgroup counts exactly"),
            &least_capture(&files, how),
        );
    }
    j.record(
        "",
        "least privilege: serve as user 65534 with the three counts, and no thread keeps a capability",
        &least_serve(&files),
    );
    if let Some(secs) = files.read("lp.seconds").ok().as_deref().and_then(seconds) {
        println!(
            "{}: the least-privilege cases took {secs:.0} s of the boot",
            j.kernel()
        );
    }
}

/// The one message and exit 1 of a run without capabilities.
fn refused(files: &Results<'_>, name: &str) -> Verdict {
    let text = files.read(name)?;
    let lines: Vec<&str> = text.lines().collect();
    let (said, status) = lines.split_at(lines.len().saturating_sub(1));
    if status != ["exit 1"] || said.len() != 1 {
        return Err(wrong!("expected one line and exit 1: {text}"));
    }
    if !(said[0].contains("CAP_BPF") && said[0].contains("CAP_PERFMON")) {
        return Err(wrong!("does not name CAP_BPF and CAP_PERFMON: {}", said[0]));
    }
    Ok(format!("exit 1: \"{}\"", said[0]))
}

/// A capture as user 65534 with the three capabilities, in a delegated cgroup.
fn least_capture(files: &Results<'_>, how: &str) -> Verdict {
    let log = format!("lp_capture_{how}.log");
    let path = files
        .get(&format!("lp_capture_{how}.json"))
        .ok_or_else(|| {
            files.with_log(
                "lp.paranoid",
                files.with_log(&log, "no capture file".into()),
            )
        })?;
    let s = tracer_core::capture_file::load(path).map_err(|e| format!("{e:#}"))?;
    let counts = format!(
        "{}, {}",
        exact(&s, Probe::SysRmdir, 50)?,
        exact(&s, Probe::VfsRmdir, 50)?
    );
    let cgroup = s
        .command
        .as_ref()
        .and_then(|c| c.cgroup)
        .ok_or_else(|| files.with_log(&log, "the command had no cgroup of its own".into()))?;
    let own = s.total_where(|k| k.probe == Probe::SysRmdir && k.cgroup == cgroup);
    if own.count() != 50 {
        return Err(wrong!(
            "{} rmdir calls in the command's cgroup, expected 50",
            own.count()
        ));
    }
    Ok(format!(
        "{counts}, all 50 in the command's own cgroup {}",
        s.cgroup_name(cgroup)
    ))
}

/// `tracer serve` as user 65534: it counted the workload's rmdir calls by cgroup, and no
/// thread held a capability once it was serving.
fn least_serve(files: &Results<'_>) -> Verdict {
    let metrics = files
        .read("lp_serve.metrics")
        .map_err(|e| files.with_log("lp_serve.err", e))?;
    let n: f64 = metrics
        .lines()
        .filter(|l| {
            l.starts_with("tracer_cgroup_calls_total{")
                && l.contains("probe=\"rmdir\"")
                && l.contains("cgroup=\"/lp/wl\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    if (n - 30.0).abs() > 0.5 {
        return Err(Fail::Wrong(files.with_log(
            "lp_serve.err",
            format!("rmdir _count of /lp/wl = {n}, expected 30"),
        )));
    }
    let caps = files.read("lp_serve.caps")?;
    let mut threads = 0;
    for line in caps.lines().filter(|l| !l.trim().is_empty()) {
        threads += 1;
        let words: Vec<&str> = line.split_whitespace().collect();
        for pair in words.chunks(2) {
            if let [name, value] = pair
                && !value.trim_start_matches('0').is_empty()
            {
                return Err(wrong!("a thread still holds {name} {value}: {line}"));
            }
        }
    }
    if threads == 0 {
        return Err("no thread's capabilities read".into());
    }
    let err = files.read("lp_serve.err").unwrap_or_default();
    if !err.lines().any(|l| l.trim() == "exit 0") {
        return Err(wrong!("did not stop cleanly on SIGTERM: {err}"));
    }
    Ok(format!(
        "30 rmdir calls in /lp/wl; {threads} threads with CapEff/CapPrm/CapInh/CapAmb all 0; said \"{}\"",
        err.lines()
            .find(|l| l.contains("capabilit"))
            .unwrap_or("")
            .trim()
    ))
}

/// `tracer serve` as `deploy/systemd/tracer.service` runs it counted the 200 rmdir calls
/// of a cgroup made after it started.
fn deploy_serve(files: &Results<'_>) -> Verdict {
    let metrics = files
        .read("deploy_serve.metrics")
        .map_err(|e| files.with_log("deploy_serve.err", e))?;
    let n: f64 = metrics
        .lines()
        .filter(|l| {
            l.starts_with("tracer_cgroup_calls_total{")
                && l.contains("probe=\"vfs_rmdir\"")
                && l.contains("cgroup=\"/deploy/wl\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    if (n - 200.0).abs() > 0.5 {
        return Err(Fail::Wrong(files.with_log(
            "deploy_serve.err",
            format!("vfs_rmdir _count of /deploy/wl = {n}, expected 200"),
        )));
    }
    let paranoid = files.read("deploy.paranoid").unwrap_or_default();
    if !paranoid.starts_with("perf_event_paranoid 2 ") {
        return Err(wrong!("99-tracer.conf did not apply: {}", paranoid.trim()));
    }
    let status = files.read("deploy_serve.status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    };
    if !field("Uid:").starts_with("61234 ") || field("NoNewPrivs:") != "1" {
        return Err(wrong!("not run as the unit runs it: {}", status.trim()));
    }
    let err = files.read("deploy_serve.err").unwrap_or_default();
    if !err.lines().any(|l| l.trim() == "exit 0") {
        return Err(wrong!("did not stop cleanly on SIGTERM: {err}"));
    }
    Ok(format!(
        "200 vfs_rmdir calls in /deploy/wl; uid 61234, NoNewPrivs 1, CapBnd {}, capabilities {}",
        field("CapBnd:"),
        setpriv_caps(UNIT)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_units_capabilities_become_setpriv_s() {
        assert_eq!(setpriv_caps(UNIT), "+bpf,+perfmon,+dac_read_search,+syslog");
    }
}
