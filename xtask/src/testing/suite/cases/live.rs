//! The live views in the VM: `tracer top --frames` and `tracer serve` while workloads whose
//! counts are known run in cgroups of their own. `tracer serve` is scraped from this host
//! through a forwarded port by a real Prometheus, queried after the VM is gone.

use tracer_core::snapshot::{AttachMethod, Probe};

use crate::{
    exposition,
    testing::{
        harness::{Fail, Verdict, wrong},
        prometheus::{Prometheus, p99_agrees, promtool_check},
        suite::{
            capture::{attached_with, load_capture},
            case::{Fixture, On, SINKS_KERNEL, VmCase},
            results::{Results, capture_files},
            views::{last_view, rmdirs_in},
        },
    },
};

/// The port `tracer serve` listens on in the guest (its default).
pub const GUEST_SERVE_PORT: u16 = 29110;

/// `top --frames` under kprobe and fentry, then `serve` scraped from the host.
pub const LIVE: VmCase = VmCase {
    name: "live::live",
    heading: "live views: tracer top --frames and tracer serve while workloads run in cgroups of their own",
    on: On::Only(&[SINKS_KERNEL]),
    workload: r#"
for how in kprobe fentry; do
    cg=top_$how
    mkdir -p /sys/fs/cgroup/$cg /tmp/$cg
    # The slow rmdir's directory: 20000 negative dentries, made before top starts.
    if [ -d /mnt/ext2 ]; then
        mkdir -p /mnt/ext2/$cg
        sh -c "i=0; while [ \$i -lt 20000 ]; do [ -e /mnt/ext2/$cg/x\$i ]; i=\$((i+1)); done"
    fi
    timeout 200 tracer top --attach $how --frames 8 --interval 1s --view cgroups,slow \
        --width 160 --height 40 --slow 5ms > /tmp/$cg.txt 2> /tmp/$cg.err &
    top=$!
    # Workloads start once the probes are attached and the first refresh is out.
    wait_for /tmp/$cg.txt "refresh 1/8"
    sh /tmp/half.sh $cg $cg 77 >> /tmp/$cg.err 2>&1
    if [ -d /mnt/ext2/$cg ]; then
        sh -c "echo \$\$ > /sys/fs/cgroup/$cg/cgroup.procs; echo \$\$ > /tmp/$cg.pid; exec rmdir /mnt/ext2/$cg"
    fi
    wait $top
    echo "exit $?" >> /tmp/$cg.err
    emit top_$how.txt /tmp/$cg.txt
    emit top_$how.err /tmp/$cg.err
    [ -f /tmp/$cg.pid ] && emit top_$how.pid /tmp/$cg.pid
done

# tracer serve, scraped by a Prometheus on the host through the forwarded port.
if net-up > /tmp/net.log 2>&1; then
    mkdir -p /sys/fs/cgroup/serve_wl /tmp/serve_wl
    # A pod's container, named by the kubelet's link only after its calls (the names case's
    # hex and ids).
    snr=/tmp/serve-names C6=$(hex f6f6f6f6)
    spod=kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod66666666_6666_4666_8666_666666666666.slice/cri-containerd-$C6.scope
    mkdir -p $snr /tmp/serve_pod
    # With the per-cgroup histograms: the host checks the workload cgroup's own p99.
    tracer serve --listen 0.0.0.0:29110 --interval 1s --names-root $snr --cgroup-histograms > /tmp/serve.log 2>&1 &
    srv=$!
    i=0
    while [ $i -lt 1200 ] && ! wget -q -O /tmp/serve.first http://127.0.0.1:29110/metrics 2>/dev/null; do
        sleep 0.1; i=$((i+1))
    done
    # Under a capture too, whose fine buckets give tracer's own p99 of the same calls (the
    # workload moves itself from the capture's cgroup into /serve_wl).
    tracer capture --format json -o /tmp/serve_wl.json -- sh /tmp/half.sh serve_wl serve_wl 120 \
        > /tmp/serve_cap.log 2>&1
    mkdir -p /sys/fs/cgroup/$spod && sh /tmp/half.sh $spod serve_pod 5
    mkdir -p $snr/var/log/containers
    ln -s ../pods/live_api-0_66666666-6666-4666-8666-666666666666/api/0.log $snr/var/log/containers/api-0_live_api-$C6.log
    # Looked up 1, 2 and 4 refreshes after the cgroup was made.
    sleep 5
    # Two refreshes for the counts to reach /metrics, then time for Prometheus to scrape.
    sleep 3
    wget -q -O /tmp/serve.metrics http://127.0.0.1:29110/metrics
    sleep 5
    kill $srv
    wait $srv
    echo "exit $?" >> /tmp/serve.log
    emit serve.metrics /tmp/serve.metrics
    emit serve.log /tmp/serve.log
    emit serve_cap.log /tmp/serve_cap.log
    [ -f /tmp/serve_wl.json ] && emit serve_wl.json /tmp/serve_wl.json
else
    emit net.log /tmp/net.log
fi
"#,
    judge: |j| {
        for how in ["kprobe", "fentry"] {
            let (txt, err, pid) = (
                format!("top_{how}.txt"),
                format!("top_{how}.err"),
                format!("top_{how}.pid"),
            );
            j.verdict(
                "",
                &format!("top --frames [{how}]: a cgroup made after start shows by path with its exact rmdir count"),
                &[&txt, &err, &pid],
                |r| top_cgroup(r, how),
            );
            if j.has(&pid) {
                let mut reads = vec![txt.clone(), err.clone(), pid.clone()];
                if how == "fentry" {
                    reads.extend(capture_files("churn_fentry"));
                }
                j.verdict(
                    "",
                    &format!("top --frames [{how}]: slow calls list the 20000-negative-dentry rmdir with pid and cgroup"),
                    &reads.iter().map(String::as_str).collect::<Vec<_>>(),
                    |r| {
                        let blocked = (how == "fentry").then(|| fentry_rmdir_blocked(r)).flatten();
                        blocked.map_or_else(|| top_slow(r, how), Err)
                    },
                );
            }
        }
        j.verdict(
            "",
            "serve in the VM: promtool check metrics passes on a live scrape",
            &["serve.metrics", "net.log"],
            |r| {
                let text = r
                    .read("serve.metrics")
                    .map_err(|e| r.with_log("net.log", e))?;
                promtool_check("serve in the VM", &text)
            },
        );
        j.verdict(
            "",
            "serve in the VM: the scrape counts the workload's 120 rmdir and vfs_rmdir calls",
            &["serve.metrics", "serve.log"],
            serve_counts,
        );
        j.verdict(
            "",
            "serve in the VM: a pod's container named by the kubelet after its calls has its tracer_cgroup_info (namespace, pod, container, id, runtime)",
            &["serve.metrics", "serve.log"],
            serve_names,
        );
        let prometheus = j.prometheus();
        j.verdict(
            "",
            "serve in the VM: Prometheus on this host scraped it through the forwarded port, _count = 120",
            &[],
            |_| prometheus_count(prometheus),
        );
        j.verdict(
            "",
            "serve in the VM: histogram_quantile(0.99) in Prometheus is within one bucket of tracer's own p99",
            &["serve_wl.json", "serve_cap.log"],
            |r| prometheus_p99(r, prometheus),
        );
    },
    fixtures: &[Fixture::Ext2, Fixture::Prometheus],
    needs: &["cgroups::churn"],
    ..VmCase::BASE
};

/// mkdir + rmdir pairs each workload makes in its cgroup (as the workload above runs them).
const TOP_RMDIRS: u64 = 77;

const SERVE_RMDIRS: u64 = 120;

/// The same, as Prometheus' values are.
const SERVE_RMDIRS_F: f64 = 120.0;

/// The cgroup's row in the last Cgroups frame shows its path and its rmdir(2) calls.
fn top_cgroup(files: &Results<'_>, how: &str) -> Verdict {
    let cg = format!("top_{how}");
    let text = files.read(&format!("{cg}.txt"))?;
    let slow_rmdir = u64::from(files.has(&format!("{cg}.pid")));
    let want = TOP_RMDIRS + slow_rmdir;
    let block = last_view(&text, "Cgroups")
        .ok_or_else(|| files.with_log(&format!("{cg}.err"), "no Cgroups frame".into()))?;
    let row = block
        .iter()
        .find(|l| l.starts_with(&format!("/{cg} ")))
        .ok_or_else(|| format!("no row for /{cg} in the last frame:\n{}", block.join("\n")))?;
    if rmdirs_in(row) == Some(want) {
        Ok(format!("/{cg}: {want} rmdirs in the last frame"))
    } else {
        Err(wrong!(
            "/{cg}: expected {want} rmdirs, the row reads: {row}"
        ))
    }
}

/// The last Slow calls frame lists the rmdir of 20,000 negative dentries: `vfs_rmdir`,
/// its pid, its cgroup.
fn top_slow(files: &Results<'_>, how: &str) -> Verdict {
    let cg = format!("top_{how}");
    let pid = files.read(&format!("{cg}.pid"))?.trim().to_owned();
    let text = files.read(&format!("{cg}.txt"))?;
    let block = last_view(&text, "Slow calls")
        .ok_or_else(|| files.with_log(&format!("{cg}.err"), "no Slow calls frame".into()))?;
    let line = block.iter().find(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        w.contains(&pid.as_str())
            && w.contains(&format!("/{cg}").as_str())
            && l.contains("vfs_rmdir")
    });
    match line {
        Some(l) => Ok(format!(
            "slow call: {}",
            l.split_whitespace().collect::<Vec<_>>().join(" ")
        )),
        None => Err(wrong!(
            "no vfs_rmdir of pid {pid} in /{cg} among the slow calls:\n{}",
            block.join("\n")
        )),
    }
}

fn serve_counts(files: &Results<'_>) -> Verdict {
    let text = files
        .read("serve.metrics")
        .map_err(|e| files.with_log("serve.log", e))?;
    let want = SERVE_RMDIRS_F;
    let mut seen = Vec::new();
    for probe in ["rmdir", "vfs_rmdir"] {
        let n = exposition::sum(
            &text,
            "tracer_cgroup_calls_total",
            &[("probe", probe), ("cgroup", "/serve_wl")],
        );
        if n != Some(want) {
            return Err(wrong!(
                "{probe} _count of /serve_wl = {n:?}, expected {want}"
            ));
        }
        seen.push(format!("{probe} {want}"));
    }
    Ok(format!("/serve_wl: {}", seen.join(", ")))
}

/// The scrape names the pod's container the kubelet linked only after its calls, with one
/// `tracer_cgroup_info` series of exactly the labels known, and counts its 5 rmdirs.
fn serve_names(files: &Results<'_>) -> Verdict {
    let text = files
        .read("serve.metrics")
        .map_err(|e| files.with_log("serve.log", e))?;
    let id = "f6f6f6f6".repeat(8);
    let cgroup = format!(
        "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod66666666_6666_4666_8666_666666666666.slice/cri-containerd-{id}.scope"
    );
    let rmdirs = exposition::sum(
        &text,
        "tracer_cgroup_calls_total",
        &[("probe", "rmdir"), ("cgroup", &cgroup)],
    );
    if rmdirs != Some(5.0) {
        return Err(wrong!("rmdir _count of {cgroup} = {rmdirs:?}, expected 5"));
    }
    let labels = [
        ("cgroup", cgroup.as_str()),
        ("namespace", "live"),
        ("pod", "api-0"),
        ("container", "api"),
        ("container_id", &id),
        ("runtime", "containerd"),
    ];
    let info: Vec<exposition::Sample> = exposition::samples(&text)?
        .into_iter()
        .filter(|s| s.name == "tracer_cgroup_info" && s.label("cgroup") == Some(&cgroup))
        .collect();
    match info.as_slice() {
        [sample]
            if sample.has(&labels)
                && sample.labels.len() == labels.len()
                && (sample.value - 1.0).abs() < f64::EPSILON =>
        {
            Ok(format!("{sample}; 5 rmdir"))
        }
        _ => Err(wrong!(
            "expected one tracer_cgroup_info{labels:?} 1, got {info:?}"
        )),
    }
}

fn prometheus_count(prometheus: Option<&Prometheus>) -> Verdict {
    let p = prometheus.ok_or("no Prometheus was started")?;
    // The guest is gone: its last samples are stale now, so ask for the largest seen (over
    // the whole boot: the scale and hardening cases run for minutes after this one).
    let expr = "max_over_time(tracer_cgroup_calls_total{probe=\"rmdir\",cgroup=\"/serve_wl\"}[2h])";
    let got = p.query(expr)?;
    match got.as_slice() {
        [(_, v)] if (*v - SERVE_RMDIRS_F).abs() < 0.5 => Ok(format!("{expr} = {v}")),
        other => Err(wrong!(
            "{expr}: {:?}, expected one series of {SERVE_RMDIRS}",
            other.iter().map(|(_, v)| *v).collect::<Vec<_>>()
        )),
    }
}

/// Prometheus' `histogram_quantile(0.99)` of the exported buckets lands within one exposed
/// bucket of tracer's own p99 of the same calls (from a capture of the workload, with the
/// kernel's fine buckets).
fn prometheus_p99(files: &Results<'_>, prometheus: Option<&Prometheus>) -> Verdict {
    let p = prometheus.ok_or("no Prometheus was started")?;
    let path = files
        .get("serve_wl.json")
        .ok_or_else(|| files.with_log("serve_cap.log", "the guest sent no serve_wl.json".into()))?;
    let capture = tracer_core::capture_file::load(path).map_err(|e| format!("{e:#}"))?;
    let own = capture.total_where(|k| {
        k.probe == tracer_core::snapshot::Probe::SysRmdir
            && capture.cgroup_name(k.cgroup) == "/serve_wl"
    });
    if own.count() != SERVE_RMDIRS {
        return Err(wrong!(
            "the capture saw {} rmdir calls in /serve_wl, expected {SERVE_RMDIRS}",
            own.count()
        ));
    }
    let own = own.quantile_ns(0.99).ok_or("no p99 in the capture")?;
    let expr = "histogram_quantile(0.99, max_over_time(tracer_cgroup_latency_seconds_bucket{probe=\"rmdir\",cgroup=\"/serve_wl\"}[2h]))";
    let prom = p
        .query(expr)?
        .first()
        .map(|(_, v)| *v * 1e9)
        .ok_or_else(|| format!("{expr}: no series"))?;
    p99_agrees(prom, own)
}

/// Why fentry cannot trace `vfs_rmdir` in this boot, if it cannot: what the fentry churn
/// capture of the same boot says.
pub fn fentry_rmdir_blocked(files: &Results<'_>) -> Option<Fail> {
    let s = load_capture(files, "churn_fentry").ok()?;
    attached_with(&s, Probe::VfsRmdir, AttachMethod::Fentry)
        .err()
        .filter(Fail::cannot)
}
