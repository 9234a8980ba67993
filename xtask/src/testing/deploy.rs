//! Host cases of what a fleet deploys (`deploy/`): the Prometheus rules (`promtool check
//! rules`, and `promtool test rules`, which must make every alert fire), the systemd unit
//! (`systemd-analyze verify`, and `systemd-analyze security --offline=yes` at "OK" or
//! better), and the Kubernetes manifests (`kubernetes-validate --strict` against the
//! newest schema it carries; the `PodMonitor` is a CRD it has no schema for).

use std::{
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use super::harness::{Fail, Tally, Verdict, wrong};
use crate::util;

const SCOPE: &str = "host deploy";
/// The worst `systemd-analyze security` exposure rated "OK" (5.0 and above is "MEDIUM").
const MAX_EXPOSURE: f64 = 4.9;
/// Where the unit expects tracer (the path `systemd-analyze verify` needs to exist).
const UNIT_EXEC: &str = "/usr/bin/tracer";

/// Every case, each a line of `tally`; `kubernetes_validate` is setup's executable.
pub(crate) fn cases(kubernetes_validate: &Path, tally: &mut Tally) {
    let deploy = util::workspace_root().join("deploy");
    let prometheus = deploy.join("prometheus");
    tally.record(
        SCOPE,
        "promtool check rules deploy/prometheus/rules.yaml",
        &check_rules(&prometheus),
    );
    tally.record(
        SCOPE,
        "promtool test rules deploy/prometheus/rules.test.yaml fires every alert",
        &test_rules(&prometheus),
    );
    let unit = deploy.join("systemd/tracer.service");
    tally.record(
        SCOPE,
        "systemd-analyze verify deploy/systemd/tracer.service",
        &verify_unit(&unit),
    );
    tally.record(
        SCOPE,
        "tracer.service hides nothing tracer reads (/proc/kallsyms, other processes) and keeps its capabilities",
        &read(&unit).map_err(Fail::from).and_then(|text| unit_keeps_what_tracer_needs(&text)),
    );
    tally.record(
        SCOPE,
        "systemd-analyze security --offline=yes: tracer.service at OK or better",
        &unit_security(&unit),
    );
    tally.record(
        SCOPE,
        "kubernetes-validate --strict deploy/kubernetes/*.yaml",
        &validate_manifests(kubernetes_validate, &deploy.join("kubernetes")),
    );
}

/// Run `cmd` in `dir`; its status and what it printed (stdout, then stderr).
fn run_in(cmd: &mut Command, dir: &Path) -> Result<(bool, String, String), String> {
    let out = cmd
        .current_dir(dir)
        .output()
        .map_err(|e| format!("{}: {e}", util::describe(cmd)))?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

fn promtool(dir: &Path, args: &[&str]) -> Result<(bool, String), String> {
    let (ok, out, err) = run_in(Command::new("promtool").args(args), dir).map_err(|e| {
        format!("{e} (cargo xtask setup installs Debian's prometheus, which has promtool)")
    })?;
    Ok((ok, format!("{out}{err}").trim().to_owned()))
}

fn check_rules(dir: &Path) -> Verdict {
    let (ok, said) = promtool(dir, &["check", "rules", "rules.yaml"])?;
    if !ok {
        return Err(Fail::Wrong(said));
    }
    // "SUCCESS: 15 rules found"
    Ok(said
        .lines()
        .find_map(|l| l.trim().strip_prefix("SUCCESS: "))
        .unwrap_or("SUCCESS")
        .to_owned())
}

fn test_rules(dir: &Path) -> Verdict {
    let rules = read(&dir.join("rules.yaml"))?;
    let tests = read(&dir.join("rules.test.yaml"))?;
    let alerts = alert_names(&rules);
    let fired = alerts_fired_in_tests(&tests);
    let untested: Vec<&String> = alerts.iter().filter(|a| !fired.contains(a)).collect();
    if alerts.is_empty() {
        return Err("rules.yaml defines no alert".into());
    }
    if !untested.is_empty() {
        return Err(wrong!(
            "rules.test.yaml never expects these alerts to fire: {untested:?}"
        ));
    }
    let (ok, said) = promtool(dir, &["test", "rules", "rules.test.yaml"])?;
    if ok {
        Ok(format!(
            "{} alerts, each expected to fire (promtool: SUCCESS)",
            alerts.len()
        ))
    } else {
        Err(Fail::Wrong(said))
    }
}

fn read(path: &Path) -> Result<String, String> {
    fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// The names of the alerting rules (`- alert: NAME`).
fn alert_names(rules: &str) -> Vec<String> {
    rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert:"))
        .map(|n| n.trim().to_owned())
        .collect()
}

/// The alerts some `alert_rule_test` entry expects to fire: an entry (from `- eval_time:`)
/// naming the alert and listing at least one `exp_labels`.
fn alerts_fired_in_tests(tests: &str) -> Vec<String> {
    tests
        .split("- eval_time:")
        .skip(1)
        .filter(|entry| {
            // An entry ends where the next list of the test group begins.
            let entry = entry.split("promql_expr_test:").next().unwrap_or(entry);
            let entry = entry.split("input_series:").next().unwrap_or(entry);
            entry.contains("exp_labels:")
        })
        .filter_map(|entry| {
            entry
                .lines()
                .find_map(|l| l.trim().strip_prefix("alertname:"))
                .map(|n| n.trim().to_owned())
        })
        .collect()
}

/// A scratch directory, removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// `systemd-analyze verify` needs the `ExecStart=` program to exist: the unit is checked
/// as a copy whose `ExecStart=` names an executable stub in a scratch directory instead
/// of `/usr/bin/tracer` (nothing else changed). Any warning fails the case (an
/// unknown or misspelt setting is only a warning to systemd, and ignored).
fn verify_unit(unit: &Path) -> Verdict {
    let text = read(unit)?;
    let scratch =
        Scratch(std::env::temp_dir().join(format!("tracer-deploy-verify-{}", std::process::id())));
    let _ = fs::remove_dir_all(&scratch.0);
    fs::create_dir_all(&scratch.0).map_err(|e| format!("{}: {e}", scratch.0.display()))?;
    let stub = scratch.0.join("tracer");
    write_executable(&stub)?;
    let from = format!("ExecStart={UNIT_EXEC} ");
    if !text.lines().any(|l| l.starts_with(&from)) {
        return Err(wrong!("no `{from}...` line in {}", unit.display()));
    }
    let copy = text.replace(&from, &format!("ExecStart={} ", stub.display()));
    let checked = scratch.0.join("tracer.service");
    fs::write(&checked, copy).map_err(|e| format!("{}: {e}", checked.display()))?;
    let (ok, out, err) = run_in(
        Command::new("systemd-analyze").arg("verify").arg(&checked),
        &scratch.0,
    )
    .map_err(|e| format!("{e} (cargo xtask setup installs systemd)"))?;
    let said = format!("{out}{err}").trim().to_owned();
    match (ok, said.is_empty()) {
        (true, true) => Ok(format!(
            "no error, no warning (ExecStart={UNIT_EXEC} stood in for by a stub)"
        )),
        (true, false) => Err(wrong!("warnings: {said}")),
        (false, _) => Err(Fail::Wrong(said)),
    }
}

/// Settings that raise the security rating but break tracer: `ProtectKernelTunables=`
/// makes `/proc/kallsyms` inaccessible, `ProtectProc=invisible` and `ProcSubset=pid` hide
/// other processes and `/proc/kallsyms`, `PrivateUsers=` makes its capabilities count in a
/// user namespace only (not for `bpf()`), `ProtectKernelLogs=` drops `CAP_SYSLOG`.
const BREAKS_TRACER: [(&str, &str); 6] = [
    (
        "ProtectKernelTunables=yes",
        "makes /proc/kallsyms inaccessible",
    ),
    ("ProtectProc=invisible", "hides other processes' threads"),
    ("ProtectProc=noaccess", "hides other processes' threads"),
    ("ProcSubset=pid", "hides /proc/kallsyms"),
    (
        "ProtectKernelLogs=yes",
        "drops CAP_SYSLOG, and /proc/kallsyms hides the kernel's addresses",
    ),
    (
        "PrivateUsers=yes",
        "confines its capabilities to a user namespace",
    ),
];
/// What the unit must grant (docs/production.md).
const NEEDED: [&str; 4] = [
    "AmbientCapabilities=CAP_BPF CAP_PERFMON CAP_DAC_READ_SEARCH CAP_SYSLOG",
    "CapabilityBoundingSet=CAP_BPF CAP_PERFMON CAP_DAC_READ_SEARCH CAP_SYSLOG",
    "LimitMEMLOCK=infinity",
    "NoNewPrivileges=yes",
];

fn unit_keeps_what_tracer_needs(text: &str) -> Verdict {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let breaking: Vec<String> = BREAKS_TRACER
        .iter()
        .filter(|(setting, _)| lines.contains(setting))
        .map(|(setting, why)| format!("{setting} ({why})"))
        .collect();
    let missing: Vec<&str> = NEEDED
        .iter()
        .filter(|n| !lines.contains(n))
        .copied()
        .collect();
    if breaking.is_empty() && missing.is_empty() {
        Ok(format!(
            "none of {} set; {}",
            BREAKS_TRACER.len(),
            NEEDED.join(", ")
        ))
    } else {
        Err(wrong!("breaks tracer: {breaking:?}; missing: {missing:?}"))
    }
}

fn write_executable(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt as _;
    fs::write(path, "#!/bin/sh\nexit 0\n").map_err(|e| format!("{}: {e}", path.display()))?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("{}: {e}", path.display()))
}

fn unit_security(unit: &Path) -> Verdict {
    let dir = unit.parent().unwrap_or(Path::new("."));
    let (_, out, err) = run_in(
        Command::new("systemd-analyze")
            .args(["security", "--offline=yes", "--no-pager"])
            .arg(unit),
        dir,
    )
    .map_err(|e| format!("{e} (cargo xtask setup installs systemd)"))?;
    let (exposure, rating) = overall_exposure(&out).ok_or_else(|| {
        format!(
            "no \"Overall exposure level\" line in its output: {}",
            format!("{out}{err}").trim()
        )
    })?;
    if exposure <= MAX_EXPOSURE && matches!(rating.as_str(), "PERFECT" | "SAFE" | "OK") {
        Ok(format!("exposure {exposure:.1} {rating}"))
    } else {
        Err(wrong!(
            "exposure {exposure:.1} {rating}, above {MAX_EXPOSURE} (\"OK\"); what counts: {}",
            exposed_settings(&out).join("; ")
        ))
    }
}

/// `→ Overall exposure level for tracer.service: 2.1 OK 🙂` -> (2.1, "OK").
fn overall_exposure(out: &str) -> Option<(f64, String)> {
    let line = out.lines().find(|l| l.contains("Overall exposure level"))?;
    let (_, rest) = line.rsplit_once(": ")?;
    let mut words = rest.split_whitespace();
    let exposure = words.next()?.parse().ok()?;
    Some((exposure, words.next()?.to_owned()))
}

/// The settings that add to the exposure (`✗` lines), for a failure's message.
fn exposed_settings(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| l.trim_start().strip_prefix('✗'))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

fn validate_manifests(kubernetes_validate: &Path, dir: &Path) -> Verdict {
    let mut files: Vec<String> = fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| Path::new(n).extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(wrong!("no manifests in {}", dir.display()));
    }
    let (ok, out, err) = run_in(
        Command::new(kubernetes_validate)
            .arg("--strict")
            .args(&files),
        dir,
    )
    .map_err(|e| format!("{e} (cargo xtask setup installs kubernetes-validate)"))?;
    let said = format!("{out}{err}");
    let passed = said.lines().filter(|l| l.contains(" passed for ")).count();
    // Kinds without a schema (the Operator's CRDs) are warnings, not errors.
    let unknown: Vec<&str> = said
        .lines()
        .filter(|l| l.contains("Couldn't find schema for kind"))
        .filter_map(|l| l.split("kind ").nth(1)?.split_whitespace().next())
        .collect();
    let errors: Vec<&str> = said.lines().filter(|l| l.starts_with("ERROR")).collect();
    if !errors.is_empty() {
        return Err(Fail::Wrong(errors.join("\n")));
    }
    if !ok || passed + unknown.len() < files.len() {
        return Err(wrong!(
            "{} of {} files passed: {}",
            passed,
            files.len(),
            said.trim()
        ));
    }
    let version = said
        .lines()
        .find_map(|l| l.split("against version ").nth(1))
        .unwrap_or("?");
    let mut seen = format!("{passed} manifests valid against Kubernetes {version} (strict)");
    if !unknown.is_empty() {
        let _ = write!(
            seen,
            "; no schema for the CRD kind {} (not checked)",
            unknown.join(", ")
        );
    }
    Ok(seen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_overall_exposure_is_read() {
        let out = "✗ PrivateNetwork=     Service has access to the host's network    0.5\n\
                   ✓ UMask=     Files created by service are accessible only by ...\n\n\
                   → Overall exposure level for tracer.service: 2.1 OK 🙂\n";
        assert_eq!(overall_exposure(out), Some((2.1, "OK".to_owned())));
        assert_eq!(exposed_settings(out), ["PrivateNetwork="]);
        assert_eq!(overall_exposure("nothing"), None);
    }

    #[test]
    fn a_unit_hiding_kallsyms_is_refused() {
        let good = NEEDED.join("\n");
        assert!(unit_keeps_what_tracer_needs(&good).is_ok());
        let bad = format!("{good}\nProtectKernelTunables=yes\n");
        assert!(
            unit_keeps_what_tracer_needs(&bad)
                .unwrap_err()
                .to_string()
                .contains("kallsyms")
        );
        assert!(unit_keeps_what_tracer_needs("NoNewPrivileges=yes\n").is_err());
    }

    #[test]
    fn every_alert_must_be_expected_to_fire() {
        let rules = "groups:\n  - name: g\n    rules:\n      - alert: A\n      - alert: B\n";
        assert_eq!(alert_names(rules), ["A", "B"]);
        let tests = "tests:\n  - interval: 1m\n    alert_rule_test:\n      - eval_time: 5m\n        alertname: A\n        exp_alerts: []\n      - eval_time: 20m\n        alertname: B\n        exp_alerts:\n          - exp_labels: {x: y}\n    promql_expr_test:\n      - expr: up\n";
        assert_eq!(alerts_fired_in_tests(tests), ["B"]);
    }
}
