//! The labels a cluster's Prometheus gives tracer's series: a real Prometheus (Debian's)
//! scrapes a real `tracer serve` through the scrape configuration the Prometheus Operator
//! generates for `deploy/kubernetes/40-podmonitor.yaml`, with `deploy/prometheus/rules.yaml`
//! loaded, and the rules and the dashboard's pod queries must name the workload's
//! namespace, pod and container and the node, never tracer's own pod.
//!
//! The configuration is written as the operator's `generatePodMonitorConfig`
//! (`pkg/prometheus/promcfg.go`) writes it: the job `podMonitor/<ns>/<name>/0`,
//! `honor_labels: false`, its relabelings in order (the job name kept aside, Failed and
//! Succeeded pods dropped, the selector's and the port's `keep`s, the target's `namespace`,
//! `container` and `pod`, `job` and `endpoint`), then the `PodMonitor`'s own relabelings
//! as it reads them, then the sharding rules of shard 0 of 1. Its `kubernetes_sd_configs`
//! (role pod) alone is replaced: by a `file_sd_configs` whose targets carry the
//! `__meta_kubernetes_*` labels the pod role gives a kubelet's pod (tracer's, on node
//! `node-a`), and a pod of another application on the same port, which the selector must
//! drop.

use std::{fmt::Write as _, path::Path, thread::sleep, time::Duration};

use tracer_core::{
    capture_file,
    cgroup_names::{CgroupNames, Runtime},
    snapshot::{Counter, SeriesKey},
};

use super::{
    harness::{Tally, Verdict, wrong},
    host_serve::{
        CGROUP_HISTOGRAM_FAMILY, CGROUP_HISTOGRAMS, SETTINGS, Setting, Target, model_capture,
        start_serve,
    },
    manifests::{PodMonitor, podmonitor},
    prometheus::Prometheus,
};
use crate::util;

const SCOPE: &str = "host operator";
/// The node tracer's pod runs on, and its name and address in the pod's metadata.
const NODE: &str = "node-a";
const TRACER_POD: &str = "tracer-x7k2p";
/// The workload the replayed capture's busy cgroup belongs to, as the kubelet names it.
const WORKLOAD: [(&str, &str); 3] = [
    ("namespace", "shop"),
    ("pod", "cart-7d9f"),
    ("container", "cart"),
];
const POD_UID: &str = "77777777-7777-4777-8777-777777777777";
/// A systemd unit's cgroup beside it: a unit has no pod, and must not get tracer's.
const UNIT: &str = "cron.service";

/// The case, against the tracer binary at `tracer`, at tracer serve's defaults and with
/// `--cgroup-histograms`.
pub(crate) fn host_cases(tracer: &Path, tally: &mut Tally) {
    for setting in &SETTINGS {
        host_case(tracer, setting, tally);
    }
}

/// The case, with the target serving in `setting`.
fn host_case(tracer: &Path, setting: &Setting, tally: &mut Tally) {
    let verdict = (|| -> Verdict {
        let pm = podmonitor()?;
        // kube-prometheus-stack's Prometheus selects the PodMonitors labelled with its
        // release alone.
        if !pm
            .labels
            .iter()
            .any(|(k, v)| k == "release" && !v.is_empty())
        {
            return Err(wrong!(
                "the PodMonitor has no `release` label, which kube-prometheus-stack selects on: {:?}",
                pm.labels
            ));
        }
        let capture = workload_capture(tracer)?;
        let path = capture.to_string_lossy().into_owned();
        let mut source = vec!["--replay", path.as_str()];
        source.extend_from_slice(setting.flags);
        let target = start_serve(tracer, "replay of a pod's capture", &source);
        let _ = std::fs::remove_file(&capture);
        let target = target?;
        let (config, targets) = operator_config(&pm, &target);
        let prometheus =
            Prometheus::with_config("operator", &config, &[("targets.json", &targets)], false)?;
        judge(&prometheus, &pm, setting)
    })();
    let scope = if setting.flags.is_empty() {
        SCOPE.to_owned()
    } else {
        format!("{SCOPE} {}", setting.flags.join(" "))
    };
    tally.record(
        &scope,
        "Prometheus scraping tracer through the operator's configuration of the PodMonitor: up, the rules and the dashboard's pod queries name the workload's namespace, pod and container and the node, never tracer's pod",
        &verdict,
    );
}

/// A model run's capture with its calls in a pod's container (named as the kubelet names
/// it) and, the same again, in a systemd unit: written to a temporary file.
fn workload_capture(tracer: &Path) -> Result<std::path::PathBuf, String> {
    let file = model_capture(
        tracer,
        "operator",
        &["negative-dentry-rmdir", "--set", "negatives=2000"],
    )?;
    let mut s = capture_file::load(&file).map_err(|e| format!("{e:#}"))?;
    let (&pod_id, _) = s
        .cgroups
        .iter()
        .next()
        .ok_or("the model's capture has no cgroup")?;
    let unit_id = pod_id + 1;
    let container_id = "c7".repeat(32);
    s.cgroups.insert(
        pod_id,
        format!(
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{}.slice/cri-containerd-{container_id}.scope",
            POD_UID.replace('-', "_")
        ),
    );
    s.cgroups.insert(unit_id, format!("/system.slice/{UNIT}"));
    let series: Vec<(SeriesKey, _)> = s
        .series
        .iter()
        .filter(|(k, _)| k.cgroup == pod_id)
        .map(|(k, v)| {
            (
                SeriesKey {
                    cgroup: unit_id,
                    ..*k
                },
                v.clone(),
            )
        })
        .collect();
    s.series.extend(series);
    let counters: Vec<((Counter, u64), u64)> = s
        .counters
        .iter()
        .filter(|((_, c), _)| *c == pod_id)
        .map(|((k, _), v)| ((*k, unit_id), *v))
        .collect();
    s.counters.extend(counters);
    s.cgroup_names.insert(
        pod_id,
        CgroupNames {
            namespace: Some(WORKLOAD[0].1.into()),
            pod: Some(WORKLOAD[1].1.into()),
            pod_uid: Some(POD_UID.into()),
            container: Some(WORKLOAD[2].1.into()),
            container_id: Some(container_id),
            runtime: Some(Runtime::Containerd),
            ..CgroupNames::default()
        },
    );
    s.cgroup_names.insert(
        unit_id,
        CgroupNames {
            unit: Some(UNIT.into()),
            ..CgroupNames::default()
        },
    );
    std::fs::write(&file, capture_file::to_string(&s))
        .map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(file)
}

/// The label Prometheus' pod role makes of a Kubernetes label name (`app.kubernetes.io/name`
/// gives `app_kubernetes_io_name`).
fn sanitized(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// The scrape configuration the operator writes for `pm`'s endpoint, its pod discovery
/// replaced by a target file, and that file: tracer's pod at `target`, and another
/// application's pod with a port of the same name.
fn operator_config(pm: &PodMonitor, target: &Target) -> (String, String) {
    let port = target.addr.rsplit(':').next().unwrap_or_default();
    let rules = util::workspace_root().join("deploy/prometheus/rules.yaml");
    let mut relabel = vec![
        "{source_labels: [job], target_label: __tmp_prometheus_job_name}".to_owned(),
        "{action: drop, source_labels: [__meta_kubernetes_pod_phase], regex: (Failed|Succeeded)}"
            .to_owned(),
    ];
    // The selector's labels, sorted, each a `keep`.
    let mut labels = pm.match_labels.clone();
    labels.sort();
    for (k, v) in &labels {
        let k = sanitized(k);
        relabel.push(format!(
            "{{action: keep, source_labels: [__meta_kubernetes_pod_label_{k}, __meta_kubernetes_pod_labelpresent_{k}], regex: ({v});true}}"
        ));
    }
    relabel.extend([
        format!(
            "{{action: keep, source_labels: [__meta_kubernetes_pod_container_port_name], regex: {}}}",
            pm.port
        ),
        "{source_labels: [__meta_kubernetes_namespace], target_label: namespace}".to_owned(),
        "{source_labels: [__meta_kubernetes_pod_container_name], target_label: container}"
            .to_owned(),
        "{source_labels: [__meta_kubernetes_pod_name], target_label: pod}".to_owned(),
        format!(
            "{{target_label: job, replacement: {}/{}}}",
            pm.namespace, pm.name
        ),
        format!("{{target_label: endpoint, replacement: {}}}", pm.port),
    ]);
    relabel.extend(pm.relabelings.iter().cloned());
    // Shard 0 of 1: the config reloader puts the shard's number where `$(SHARD)` stands.
    relabel.extend([
        "{source_labels: [__address__], target_label: __tmp_hash, modulus: 1, action: hashmod}"
            .to_owned(),
        "{source_labels: [__tmp_hash], regex: 0, action: keep}".to_owned(),
    ]);
    let relabel = relabel.iter().fold(String::new(), |mut out, r| {
        let _ = writeln!(out, "      - {r}");
        out
    });
    let config = format!(
        "global:\n  scrape_interval: 30s\n  evaluation_interval: 1s\n\
         rule_files:\n  - {}\n\
         scrape_configs:\n  - job_name: podMonitor/{}/{}/0\n    honor_labels: false\n\
         \x20   file_sd_configs:\n      - files: [targets.json]\n\
         \x20   scrape_interval: {}\n    scrape_timeout: {}\n    metrics_path: {}\n\
         \x20   relabel_configs:\n{relabel}",
        rules.display(),
        pm.namespace,
        pm.name,
        pm.interval,
        pm.scrape_timeout,
        pm.path,
    );
    let pod = |name: &str, app: &str, node: &str| {
        let mut l = serde_json::Map::new();
        let mut put = |k: &str, v: &str| {
            l.insert(k.to_owned(), serde_json::Value::String(v.to_owned()));
        };
        put("__meta_kubernetes_namespace", &pm.namespace);
        put("__meta_kubernetes_pod_name", name);
        put("__meta_kubernetes_pod_ip", "127.0.0.1");
        put("__meta_kubernetes_pod_host_ip", "10.1.0.7");
        put("__meta_kubernetes_pod_node_name", node);
        put("__meta_kubernetes_pod_ready", "true");
        put("__meta_kubernetes_pod_phase", "Running");
        put("__meta_kubernetes_pod_controller_kind", "DaemonSet");
        put("__meta_kubernetes_pod_controller_name", app);
        put("__meta_kubernetes_pod_container_name", app);
        put("__meta_kubernetes_pod_container_init", "false");
        put("__meta_kubernetes_pod_container_port_name", &pm.port);
        put("__meta_kubernetes_pod_container_port_number", port);
        put("__meta_kubernetes_pod_container_port_protocol", "TCP");
        put("__meta_kubernetes_pod_label_app_kubernetes_io_name", app);
        put(
            "__meta_kubernetes_pod_labelpresent_app_kubernetes_io_name",
            "true",
        );
        put(
            "__meta_kubernetes_pod_label_app_kubernetes_io_component",
            "exporter",
        );
        put(
            "__meta_kubernetes_pod_labelpresent_app_kubernetes_io_component",
            "true",
        );
        serde_json::json!({"targets": [target.addr], "labels": l})
    };
    let targets = serde_json::json!([
        pod(TRACER_POD, "tracer", NODE),
        pod("other-exporter-4kq9z", "other-exporter", "node-b"),
    ]);
    (config, targets.to_string())
}

/// The labels of a result series (JSON), as `name="value"` pairs, for a failure's message.
fn show(labels: &serde_json::Value) -> String {
    labels.to_string()
}

/// Whether the series' labels hold the workload's namespace and pod, and the node.
fn names_the_workload(labels: &serde_json::Value, with_container: bool) -> bool {
    let want = if with_container { 3 } else { 2 };
    WORKLOAD
        .iter()
        .take(want)
        .all(|(k, v)| labels[*k].as_str() == Some(*v))
        && labels["node"].as_str().is_none_or(|n| n == NODE)
}

#[expect(
    clippy::too_many_lines,
    reason = "one verdict, its checks in the order a reader of the scrape would make them"
)]
fn judge(prometheus: &Prometheus, pm: &PodMonitor, setting: &Setting) -> Verdict {
    let per_cgroup_histograms = setting.flags.contains(&CGROUP_HISTOGRAMS);
    let job = format!("{}/{}", pm.namespace, pm.name);
    // Two scrapes of the target (at the PodMonitor's interval) and the rules over them.
    let ready = format!(
        "count_over_time(up{{job=\"{job}\"}}[10m]) >= 2 and on () count(namespace_pod:tracer_negative_dentries:rate5m) > 0"
    );
    let mut waited = 0;
    while prometheus.query(&ready)?.is_empty() {
        if waited >= 120 {
            return Err(wrong!(
                "after {waited} s: no two scrapes and rules yet ({ready})"
            ));
        }
        sleep(Duration::from_secs(2));
        waited += 2;
    }
    // Each rule group is evaluated every second at an offset of its own: three more
    // evaluations, so that every group has seen the second scrape.
    sleep(Duration::from_secs(3));
    let mut seen = Vec::new();
    // One target: tracer's pod, the other application's dropped; labelled with its node,
    // not its pod.
    let up = prometheus.query("up")?;
    let [(labels, value)] = up.as_slice() else {
        return Err(wrong!("expected one target, got {up:?}"));
    };
    if labels["job"] != job.as_str()
        || labels["node"] != NODE
        || labels["endpoint"] != pm.port.as_str()
        || (*value - 1.0).abs() > f64::EPSILON
        || ["namespace", "pod", "container"]
            .iter()
            .any(|l| !labels[*l].is_null())
    {
        return Err(wrong!(
            "up: want job {job}, node {NODE}, endpoint {}, no namespace/pod/container, 1: {}",
            pm.port,
            show(labels)
        ));
    }
    seen.push(format!("up{}", show(labels)));
    // No label of tracer's was pushed aside, and no series names tracer's own pod.
    for expr in [
        format!("{{job=\"{job}\", exported_namespace!=\"\"}}"),
        format!("{{job=\"{job}\", exported_pod!=\"\"}}"),
        format!("{{job=\"{job}\", exported_container!=\"\"}}"),
        format!("{{job=\"{job}\", pod=\"{TRACER_POD}\"}}"),
        format!("{{job=\"{job}\", node!=\"{NODE}\"}}"),
    ] {
        let found = prometheus.query(&expr)?;
        if let Some((labels, _)) = found.first() {
            return Err(wrong!(
                "{expr}: {} series, e.g. {}",
                found.len(),
                show(labels)
            ));
        }
    }
    seen.push("no exported_* label, no series of tracer's pod".to_owned());
    // The info series: the workload's names on the pod's cgroup, none on the unit's.
    let info = prometheus.query(&format!("tracer_cgroup_info{{job=\"{job}\"}}"))?;
    let pod_info = info
        .iter()
        .find(|(l, _)| names_the_workload(l, true) && l["node"] == NODE);
    let unit_info = info.iter().find(|(l, _)| l["unit"] == UNIT);
    match (pod_info, unit_info) {
        (Some(_), Some((unit, _))) if unit["pod"].is_null() && unit["namespace"].is_null() => {}
        _ => {
            return Err(wrong!(
                "tracer_cgroup_info: want shop/cart-7d9f/cart on {NODE} and {UNIT} without a pod: {}",
                info.iter()
                    .map(|(l, _)| show(l))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    seen.push("tracer_cgroup_info names shop/cart-7d9f/cart, cron.service without a pod".into());
    // The recording rules: by pod, and by node.
    {
        let expr = "namespace_pod:tracer_negative_dentries:rate5m";
        let rs = prometheus.query(expr)?;
        if rs.len() != 1 || !names_the_workload(&rs[0].0, false) {
            return Err(wrong!(
                "{expr}: want one series of shop/cart-7d9f: {}",
                rs.iter()
                    .map(|(l, _)| show(l))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    for expr in [
        "namespace_pod_probe:tracer_cgroup_call_seconds:rate5m",
        "namespace_pod_probe:tracer_cgroup_call_seconds:mean_rate5m",
    ] {
        let rs = prometheus.query(expr)?;
        if rs.is_empty() || !rs.iter().all(|(l, _)| names_the_workload(l, false)) {
            return Err(wrong!(
                "{expr}: want series of shop/cart-7d9f alone: {}",
                rs.iter()
                    .map(|(l, _)| show(l))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    // The p99 per cgroup: with the per-cgroup histograms only.
    let gated = "node_probe_cgroup:tracer_cgroup_latency_seconds:p99_rate5m";
    if !per_cgroup_histograms {
        let rs = prometheus.query(gated)?;
        if !rs.is_empty() {
            return Err(wrong!(
                "{gated}: {} series without {CGROUP_HISTOGRAMS}",
                rs.len()
            ));
        }
    }
    for expr in [
        "node_cgroup:tracer_negative_dentries:rate5m",
        "node_probe_caller:tracer_latency_seconds:p99_rate5m",
        "node_probe_caller:tracer_latency_seconds_count:rate5m",
        "node_probe_cgroup:tracer_cgroup_calls:rate5m",
        "node_probe_cgroup:tracer_cgroup_call_seconds:rate5m",
    ]
    .into_iter()
    .chain(per_cgroup_histograms.then_some(gated))
    {
        let rs = prometheus.query(expr)?;
        if rs.is_empty() || rs.iter().any(|(l, _)| l["node"] != NODE) {
            return Err(wrong!(
                "{expr}: want series of node {NODE} alone: {}",
                rs.iter()
                    .map(|(l, _)| show(l))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    seen.push(
        "namespace_pod:...{namespace=\"shop\", pod=\"cart-7d9f\"}; node_*:... {node=\"node-a\"}"
            .into(),
    );
    // The dashboard: its node and pod variables, and each of its queries by pod.
    let nodes = prometheus.label_values("node", "tracer_source_up")?;
    let pods =
        prometheus.label_values("pod", &format!("tracer_cgroup_info{{node=~\"{NODE}\"}}"))?;
    if nodes != [NODE] || pods != [WORKLOAD[1].1] {
        return Err(wrong!(
            "the dashboard's variables: node {nodes:?} (want [{NODE}]), pod {pods:?} (want [{}])",
            WORKLOAD[1].1
        ));
    }
    let by_pod = dashboard_pod_queries()?;
    if by_pod.is_empty() {
        return Err("no query of dashboards/tracer.json joins tracer_cgroup_info".into());
    }
    let mut empty = 0;
    for expr in &by_pod {
        let rs = prometheus.query(expr)?;
        if !per_cgroup_histograms && expr.contains(CGROUP_HISTOGRAM_FAMILY) {
            if !rs.is_empty() {
                return Err(wrong!(
                    "dashboard: {expr}: {} series without {CGROUP_HISTOGRAMS}",
                    rs.len()
                ));
            }
            empty += 1;
            continue;
        }
        if rs.is_empty() || !rs.iter().all(|(l, _)| names_the_workload(l, false)) {
            return Err(wrong!(
                "dashboard: {expr}: want series of shop/cart-7d9f: {}",
                rs.iter()
                    .map(|(l, _)| show(l))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    let note = if empty > 0 {
        format!(" ({empty} on {CGROUP_HISTOGRAM_FAMILY}: no series without {CGROUP_HISTOGRAMS})")
    } else {
        String::new()
    };
    seen.push(format!(
        "the dashboard's variables node {nodes:?}, pod {pods:?}, and its {} queries by pod name shop/cart-7d9f{note}",
        by_pod.len() - empty
    ));
    Ok(seen.join("; "))
}

/// The dashboard's queries that join `tracer_cgroup_info` (by pod), its variables set as
/// Grafana sets them for node `node-a` and every pod.
fn dashboard_pod_queries() -> Result<Vec<String>, String> {
    let path = util::workspace_root().join("dashboards/tracer.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    let mut stack = vec![&json];
    while let Some(v) = stack.pop() {
        match v {
            serde_json::Value::Object(m) => {
                if let Some(serde_json::Value::String(e)) = m.get("expr")
                    && e.contains("tracer_cgroup_info")
                {
                    out.push(
                        e.replace("$node", NODE)
                            .replace("$pod", ".+")
                            .replace("$probe", ".*")
                            .replace("$cgroup", ".*")
                            .replace("$__rate_interval", "1m")
                            .replace("$__range", "1m"),
                    );
                }
                stack.extend(m.values());
            }
            serde_json::Value::Array(a) => stack.extend(a),
            _ => {}
        }
    }
    Ok(out)
}
