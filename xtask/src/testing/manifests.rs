//! What the cases read of `deploy/kubernetes/`: the `DaemonSet`'s image, arguments,
//! capabilities and memory limit, which the release's image case and the VM cases of nodes
//! as clusters run them (`suite/cases/nodes.rs`) run tracer with; and the `PodMonitor`'s
//! endpoint, from which the operator's scrape configuration is written
//! (`host_operator.rs`). Line readers of the files as written, not YAML parsers: each test
//! below pins what they read.

use std::fs;

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
/// When it cannot be read.
pub(crate) fn daemonset() -> Result<DaemonSet, String> {
    let path = util::workspace_root().join("deploy/kubernetes/20-daemonset.yaml");
    let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(parse_daemonset(&text))
}

/// The items of the list under the first line `key` (its `- ` lines at or below its
/// indent, comments skipped).
fn list_after(lines: &[&str], key: &str) -> Vec<String> {
    let Some(at) = lines.iter().position(|l| l.trim() == key) else {
        return Vec::new();
    };
    let indent = lines[at].len() - lines[at].trim_start().len();
    lines[at + 1..]
        .iter()
        .filter(|l| !l.trim_start().starts_with('#'))
        .take_while(|l| {
            let i = l.len() - l.trim_start().len();
            i > indent || (i == indent && l.trim_start().starts_with("- "))
        })
        .filter_map(|l| l.trim().strip_prefix("- "))
        .map(|v| v.trim().to_owned())
        .collect()
}

/// The value of the first `key: value` line after the first line `section` (e.g. `memory:`
/// under `limits:`), comments skipped.
fn value_after(lines: &[&str], section: &str, key: &str) -> Option<String> {
    let at = lines.iter().position(|l| l.trim() == section)?;
    lines[at + 1..]
        .iter()
        .filter(|l| !l.trim_start().starts_with('#'))
        .find_map(|l| l.trim().strip_prefix(key))
        .map(|v| v.trim().trim_matches('"').to_owned())
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

fn parse_daemonset(text: &str) -> DaemonSet {
    let lines: Vec<&str> = text.lines().collect();
    DaemonSet {
        image: lines
            .iter()
            .filter(|l| !l.trim_start().starts_with('#'))
            .find_map(|l| l.trim().strip_prefix("image: "))
            .unwrap_or_default()
            .trim()
            .to_owned(),
        args: list_after(&lines, "args:"),
        caps: list_after(&lines, "add:"),
        memory_limit: value_after(&lines, "limits:", "memory:").and_then(|q| bytes(&q)),
    }
}

/// What the operator's scrape configuration is made of, from
/// `deploy/kubernetes/40-podmonitor.yaml`: its name and namespace, its selector's labels, its
/// one endpoint, and that endpoint's relabelings in Prometheus' words.
pub(crate) struct PodMonitor {
    pub(crate) name: String,
    pub(crate) namespace: String,
    /// `spec.selector.matchLabels`, in order.
    pub(crate) match_labels: Vec<(String, String)>,
    /// The endpoint's `port`, `path`, `interval` and `scrapeTimeout`.
    pub(crate) port: String,
    pub(crate) path: String,
    pub(crate) interval: String,
    pub(crate) scrape_timeout: String,
    /// Its `relabelings`, each as Prometheus' `relabel_configs` entry in YAML flow style
    /// (`{source_labels: [...], target_label: node, action: replace}`).
    pub(crate) relabelings: Vec<String>,
    /// `metadata.labels`, in order.
    pub(crate) labels: Vec<(String, String)>,
}

/// Read `deploy/kubernetes/40-podmonitor.yaml`.
///
/// # Errors
/// When it cannot be read, or lacks a field the configuration needs.
pub(crate) fn podmonitor() -> Result<PodMonitor, String> {
    let path = util::workspace_root().join("deploy/kubernetes/40-podmonitor.yaml");
    let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_podmonitor(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The `key: value` lines indented below the first line `section`.
fn map_after(lines: &[&str], section: &str) -> Vec<(String, String)> {
    let Some(at) = lines.iter().position(|l| l.trim() == section) else {
        return Vec::new();
    };
    let indent = lines[at].len() - lines[at].trim_start().len();
    lines[at + 1..]
        .iter()
        .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
        .take_while(|l| l.len() - l.trim_start().len() > indent)
        .filter_map(|l| l.trim().split_once(": "))
        .map(|(k, v)| (k.to_owned(), v.trim().trim_matches('"').to_owned()))
        .collect()
}

/// The operator's field names as Prometheus' (`sourceLabels` is `source_labels`).
fn prometheus_key(key: &str) -> Option<&'static str> {
    Some(match key {
        "sourceLabels" => "source_labels",
        "separator" => "separator",
        "targetLabel" => "target_label",
        "regex" => "regex",
        "modulus" => "modulus",
        "replacement" => "replacement",
        "action" => "action",
        _ => return None,
    })
}

/// Each `relabelings:` item as a flow mapping of Prometheus' keys, in the order the
/// operator writes them (`generateRelabelConfig`: `source_labels`, `separator`,
/// `target_label`, `regex`, `modulus`, `replacement`, `action`).
fn relabelings(lines: &[&str]) -> Result<Vec<String>, String> {
    // The operator's order of the fields.
    const ORDER: [&str; 7] = [
        "source_labels",
        "separator",
        "target_label",
        "regex",
        "modulus",
        "replacement",
        "action",
    ];
    let Some(at) = lines.iter().position(|l| l.trim() == "relabelings:") else {
        return Ok(Vec::new());
    };
    let indent = lines[at].len() - lines[at].trim_start().len();
    let mut items: Vec<Vec<(&'static str, String)>> = Vec::new();
    for line in lines[at + 1..]
        .iter()
        .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
        .take_while(|l| l.len() - l.trim_start().len() > indent)
    {
        let trimmed = line.trim();
        let field = if let Some(first) = trimmed.strip_prefix("- ") {
            items.push(Vec::new());
            first
        } else {
            trimmed
        };
        let (key, value) = field
            .split_once(':')
            .ok_or_else(|| format!("a relabeling line without a key: {line}"))?;
        let key = prometheus_key(key.trim())
            .ok_or_else(|| format!("a relabeling field the test does not know: {key}"))?;
        let mut value = value.trim().to_owned();
        if key == "action" {
            value = value.to_ascii_lowercase();
        }
        items
            .last_mut()
            .ok_or_else(|| format!("a relabeling field before its item: {line}"))?
            .push((key, value));
    }
    Ok(items
        .into_iter()
        .map(|mut item| {
            item.sort_by_key(|(k, _)| ORDER.iter().position(|o| o == k));
            let fields: Vec<String> = item.iter().map(|(k, v)| format!("{k}: {v}")).collect();
            format!("{{{}}}", fields.join(", "))
        })
        .collect())
}

fn parse_podmonitor(text: &str) -> Result<PodMonitor, String> {
    let lines: Vec<&str> = text.lines().collect();
    let scalar = |key: &str| {
        lines
            .iter()
            .filter(|l| !l.trim_start().starts_with('#'))
            .find_map(|l| {
                let t = l.trim();
                t.strip_prefix(key)
                    .or_else(|| t.strip_prefix("- ").and_then(|t| t.strip_prefix(key)))
            })
            .map(|v| v.trim().trim_matches('"').to_owned())
            .ok_or_else(|| format!("no `{key}` line"))
    };
    Ok(PodMonitor {
        name: scalar("name:")?,
        namespace: scalar("namespace:")?,
        match_labels: map_after(&lines, "matchLabels:"),
        port: scalar("port:")?,
        path: scalar("path:")?,
        interval: scalar("interval:")?,
        scrape_timeout: scalar("scrapeTimeout:")?,
        relabelings: relabelings(&lines)?,
        labels: map_after(&lines, "labels:"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemonsets_image_args_capabilities_and_limit_are_read() {
        let ds = parse_daemonset(include_str!("../../../deploy/kubernetes/20-daemonset.yaml"));
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
        let pm = parse_podmonitor(include_str!("../../../deploy/kubernetes/40-podmonitor.yaml"))
            .unwrap();
        assert_eq!((pm.name.as_str(), pm.namespace.as_str()), ("tracer", "tracer"));
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
}
