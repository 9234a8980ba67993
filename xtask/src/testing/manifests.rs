//! What the cases read of `deploy/kubernetes/`: the `DaemonSet`'s image, arguments,
//! capabilities and memory limit, which the release's image case and the VM cases of nodes
//! as clusters run them (`suite/cases/nodes.rs`) run tracer with; and the `PodMonitor`'s
//! endpoint, from which the operator's scrape configuration is written
//! (`host_operator.rs`). Read as YAML (serde-saphyr, as tracer reads its web config), into
//! the few fields the cases use: the tests below pin what they read.

use std::{collections::BTreeMap, fs, path::Path};

use serde::Deserialize;

use crate::util;

/// What the cases read of `deploy/kubernetes/20-daemonset.yaml`.
pub(crate) struct DaemonSet {
    pub(crate) image: String,
    pub(crate) args: Vec<String>,
    /// The capabilities it adds, as Kubernetes names them (`BPF`, `SYSLOG`).
    pub(crate) caps: Vec<String>,
    /// The container's memory limit, in bytes.
    pub(crate) memory_limit: Option<u64>,
}

impl DaemonSet {
    /// The capabilities in capsh's names (`cap_bpf`).
    pub(crate) fn capsh_caps(&self) -> Vec<String> {
        self.caps
            .iter()
            .map(|c| format!("cap_{}", c.to_ascii_lowercase()))
            .collect()
    }

    /// The capabilities as setpriv's list (`+bpf,+perfmon,...`).
    pub(crate) fn setpriv_caps(&self) -> String {
        self.caps
            .iter()
            .map(|c| format!("+{}", c.to_ascii_lowercase()))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The capabilities' bits, as `/proc/PID/status` shows them, by their numbers in
    /// `linux/capability.h`; None when one is not known here.
    pub(crate) fn cap_mask(&self) -> Option<u64> {
        self.caps.iter().try_fold(0, |mask, c| {
            let bit = match c.as_str() {
                "DAC_READ_SEARCH" => 2,
                "SYS_RESOURCE" => 24,
                "SYSLOG" => 34,
                "PERFMON" => 38,
                "BPF" => 39,
                _ => return None,
            };
            Some(mask | (1u64 << bit))
        })
    }
}

/// Read `deploy/kubernetes/20-daemonset.yaml`.
///
/// # Errors
/// When it cannot be read, is not YAML, or has no container.
pub(crate) fn daemonset() -> Result<DaemonSet, String> {
    let path = util::workspace_root().join("deploy/kubernetes/20-daemonset.yaml");
    parse_daemonset(&read(&path)?).map_err(|e| format!("{}: {e}", path.display()))
}

fn read(path: &Path) -> Result<String, String> {
    fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// The fields of a `DaemonSet` the cases use, by the Kubernetes API's names.
#[derive(Deserialize)]
struct DaemonSetYaml {
    spec: DaemonSetSpec,
}

#[derive(Deserialize)]
struct DaemonSetSpec {
    template: PodTemplate,
}

#[derive(Deserialize)]
struct PodTemplate {
    spec: PodSpec,
}

#[derive(Deserialize)]
struct PodSpec {
    containers: Vec<Container>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Container {
    name: String,
    image: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    security_context: Option<SecurityContext>,
    #[serde(default)]
    resources: Option<Resources>,
}

#[derive(Deserialize)]
struct SecurityContext {
    #[serde(default)]
    capabilities: Option<Capabilities>,
}

#[derive(Deserialize)]
struct Capabilities {
    #[serde(default)]
    add: Vec<String>,
}

#[derive(Deserialize)]
struct Resources {
    #[serde(default)]
    limits: BTreeMap<String, String>,
}

/// A Kubernetes quantity of bytes (`192Mi`, `1Gi`, `500M`, `1000`).
fn bytes(quantity: &str) -> Option<u64> {
    let split = quantity
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(quantity.len());
    let (n, unit) = quantity.split_at(split);
    let n: u64 = n.parse().ok()?;
    let scale = match unit {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        _ => return None,
    };
    n.checked_mul(scale)
}

/// The container named `tracer` (else the first) of a `DaemonSet`'s text.
fn parse_daemonset(text: &str) -> Result<DaemonSet, String> {
    let ds: DaemonSetYaml = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
    let mut containers = ds.spec.template.spec.containers;
    let at = containers
        .iter()
        .position(|c| c.name == "tracer")
        .unwrap_or(0);
    if containers.is_empty() {
        return Err("no container".into());
    }
    let c = containers.swap_remove(at);
    Ok(DaemonSet {
        image: c.image,
        args: c.args,
        caps: c
            .security_context
            .and_then(|s| s.capabilities)
            .map(|c| c.add)
            .unwrap_or_default(),
        memory_limit: c
            .resources
            .and_then(|r| r.limits.get("memory").and_then(|q| bytes(q))),
    })
}

/// What the operator's scrape configuration is made of, from
/// `deploy/kubernetes/40-podmonitor.yaml`: its name and namespace, its selector's labels, its
/// one endpoint, and that endpoint's relabelings in Prometheus' words.
pub(crate) struct PodMonitor {
    pub(crate) name: String,
    pub(crate) namespace: String,
    /// `spec.selector.matchLabels`, sorted by name.
    pub(crate) match_labels: Vec<(String, String)>,
    /// The endpoint's `port`, `path`, `interval` and `scrapeTimeout`.
    pub(crate) port: String,
    pub(crate) path: String,
    pub(crate) interval: String,
    pub(crate) scrape_timeout: String,
    /// Its `relabelings`, each as Prometheus' `relabel_configs` entry in YAML flow style
    /// (`{source_labels: [...], target_label: node, action: replace}`).
    pub(crate) relabelings: Vec<String>,
    /// `metadata.labels`, sorted by name.
    pub(crate) labels: Vec<(String, String)>,
}

/// Read `deploy/kubernetes/40-podmonitor.yaml`.
///
/// # Errors
/// When it cannot be read, or lacks a field the configuration needs.
pub(crate) fn podmonitor() -> Result<PodMonitor, String> {
    let path = util::workspace_root().join("deploy/kubernetes/40-podmonitor.yaml");
    parse_podmonitor(&read(&path)?).map_err(|e| format!("{}: {e}", path.display()))
}

/// The fields of a `PodMonitor` the cases use, by the CRD's names.
#[derive(Deserialize)]
struct PodMonitorYaml {
    metadata: Metadata,
    spec: PodMonitorSpec,
}

#[derive(Deserialize)]
struct Metadata {
    name: String,
    namespace: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodMonitorSpec {
    selector: Selector,
    pod_metrics_endpoints: Vec<Endpoint>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Selector {
    #[serde(default)]
    match_labels: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Endpoint {
    port: String,
    path: String,
    interval: String,
    scrape_timeout: String,
    #[serde(default)]
    relabelings: Vec<Relabeling>,
}

/// One of the operator's `RelabelConfig`s; a field it does not know is refused, so the
/// test never writes a configuration that silently lost one.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Relabeling {
    source_labels: Option<Vec<String>>,
    separator: Option<String>,
    target_label: Option<String>,
    regex: Option<String>,
    modulus: Option<u64>,
    replacement: Option<String>,
    action: Option<String>,
}

impl Relabeling {
    /// As a flow mapping of Prometheus' keys, in the order the operator writes them
    /// (`generateRelabelConfig`: `source_labels`, `separator`, `target_label`, `regex`,
    /// `modulus`, `replacement`, `action`), the action in lower case.
    fn in_prometheus_words(&self) -> String {
        let fields = [
            (
                "source_labels",
                self.source_labels
                    .as_ref()
                    .map(|l| format!("[{}]", l.join(", "))),
            ),
            ("separator", self.separator.clone()),
            ("target_label", self.target_label.clone()),
            ("regex", self.regex.clone()),
            ("modulus", self.modulus.map(|m| m.to_string())),
            ("replacement", self.replacement.clone()),
            (
                "action",
                self.action.as_ref().map(|a| a.to_ascii_lowercase()),
            ),
        ];
        let set: Vec<String> = fields
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| format!("{k}: {v}")))
            .collect();
        format!("{{{}}}", set.join(", "))
    }
}

fn parse_podmonitor(text: &str) -> Result<PodMonitor, String> {
    let pm: PodMonitorYaml = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
    let [endpoint] = <[Endpoint; 1]>::try_from(pm.spec.pod_metrics_endpoints)
        .map_err(|e| format!("{} podMetricsEndpoints, where the case writes one", e.len()))?;
    Ok(PodMonitor {
        name: pm.metadata.name,
        namespace: pm.metadata.namespace,
        match_labels: pm.spec.selector.match_labels.into_iter().collect(),
        port: endpoint.port,
        path: endpoint.path,
        interval: endpoint.interval,
        scrape_timeout: endpoint.scrape_timeout,
        relabelings: endpoint
            .relabelings
            .iter()
            .map(Relabeling::in_prometheus_words)
            .collect(),
        labels: pm.metadata.labels.into_iter().collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemonsets_image_args_capabilities_and_limit_are_read() {
        let ds =
            parse_daemonset(include_str!("../../../deploy/kubernetes/20-daemonset.yaml")).unwrap();
        assert_eq!(
            ds.image,
            format!("{}:{}", crate::dist::IMAGE, crate::dist::VERSION)
        );
        assert_eq!(
            ds.args,
            [
                "--listen",
                "0.0.0.0:29110",
                "--cgroup-root",
                "/host/sys/fs/cgroup",
                "--names-root",
                "/host"
            ]
        );
        assert_eq!(
            ds.capsh_caps(),
            [
                "cap_bpf",
                "cap_perfmon",
                "cap_dac_read_search",
                "cap_syslog",
                "cap_sys_resource"
            ]
        );
        assert_eq!(
            ds.setpriv_caps(),
            "+bpf,+perfmon,+dac_read_search,+syslog,+sys_resource"
        );
        assert_eq!(
            ds.cap_mask(),
            Some((1 << 2) | (1 << 24) | (1 << 34) | (1 << 38) | (1 << 39))
        );
        assert_eq!(ds.memory_limit, Some(192 << 20));
        assert_eq!(bytes("1Gi"), Some(1 << 30));
        assert_eq!(bytes("12Q"), None);
    }

    #[test]
    fn the_podmonitors_endpoint_and_relabelings_are_read_in_prometheus_words() {
        let pm = parse_podmonitor(include_str!(
            "../../../deploy/kubernetes/40-podmonitor.yaml"
        ))
        .unwrap();
        assert_eq!(
            (pm.name.as_str(), pm.namespace.as_str()),
            ("tracer", "tracer")
        );
        assert_eq!(
            pm.match_labels,
            [("app.kubernetes.io/name".to_owned(), "tracer".to_owned())]
        );
        assert_eq!(
            (pm.port.as_str(), pm.path.as_str(), pm.interval.as_str()),
            ("metrics", "/metrics", "15s")
        );
        assert_eq!(
            pm.relabelings,
            [
                "{source_labels: [__meta_kubernetes_pod_node_name], target_label: node, action: replace}",
                "{regex: namespace|pod|container, action: labeldrop}",
            ]
        );
        assert!(
            pm.labels
                .iter()
                .any(|(k, v)| k == "release" && v == "kube-prometheus-stack")
        );
    }

    #[test]
    fn what_the_cases_cannot_use_is_refused_with_its_reason() {
        // Not a DaemonSet's shape, and a pod without containers.
        assert!(parse_daemonset("kind: DaemonSet\n").is_err());
        let empty = "spec:\n  template:\n    spec:\n      containers: []\n";
        assert_eq!(
            parse_daemonset(empty).err().as_deref(),
            Some("no container")
        );
        // The container named tracer is read, wherever it stands.
        let two = "spec:\n  template:\n    spec:\n      containers:\n\
                   \x20       - {name: sidecar, image: a}\n\
                   \x20       - {name: tracer, image: b, args: [serve]}\n";
        let ds = parse_daemonset(two).unwrap();
        assert_eq!(
            (ds.image.as_str(), ds.args.as_slice()),
            ("b", &["serve".to_owned()][..])
        );
        assert_eq!((ds.caps.len(), ds.memory_limit), (0, None));
        // A relabeling field the operator's scrape config would carry but the case would
        // drop, and a second endpoint the case would not write.
        let pm = include_str!("../../../deploy/kubernetes/40-podmonitor.yaml");
        let unknown = pm.replace("action: labeldrop", "action: labeldrop\n          shiny: x");
        let err = parse_podmonitor(&unknown).err().unwrap_or_default();
        assert!(err.contains("shiny"), "{err}");
        let twice = pm.replace(
            "    - port: metrics\n",
            "    - port: other\n      path: /\n      interval: 1s\n      scrapeTimeout: 1s\n    - port: metrics\n",
        );
        assert_eq!(
            parse_podmonitor(&twice).err().as_deref(),
            Some("2 podMetricsEndpoints, where the case writes one")
        );
    }
}
