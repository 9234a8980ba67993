//! The booted kernel, as the guest sees it, and what tracer can attach there.

use tracer_core::snapshot::{AttachState, Probe, ProbeKind};

use crate::testing::{
    harness::{Verdict, wrong},
    suite::{
        capture::load_capture,
        case::{On, VmCase},
        results::{Results, capture_files},
    },
};

/// `uname -r` in the guest.
pub const UNAME: VmCase = VmCase {
    name: "kernel::uname",
    heading: "uname",
    on: On::Every,
    arm64: On::Every,
    workload: r"
uname -r > /tmp/uname
emit uname /tmp/uname
",
    judge: |j| {
        j.verdict(
            "reference",
            "uname -r is the booted kernel",
            &["uname"],
            |r| check_uname(r, j.release()),
        );
    },
    ..VmCase::BASE
};

/// The guest's `uname -r` is the booted kernel's release.
pub fn check_uname(files: &Results<'_>, release: &str) -> Verdict {
    let got = files.read("uname")?;
    let got = got.trim();
    if release.is_empty() {
        Ok(format!("{got} (release of this kernel unknown)"))
    } else if got == release {
        Ok(got.to_owned())
    } else {
        Err(wrong!("guest says {got}, expected {release}"))
    }
}

/// The capture whose attach states `tracer probes` must agree with: the kprobe capture of
/// 50 tmpfs umounts, which attaches every probe (the tmpfs case's).
const ATTACHED: &str = "tmpfs_kprobe";

/// `tracer probes` in the guest: what can attach on this kernel, and why not.
pub const PROBES: VmCase = VmCase {
    name: "kernel::probes",
    heading: "tracer probes: what can attach on this kernel",
    on: On::Every,
    arm64: On::Every,
    workload: r#"
tracer probes > /tmp/probes.txt 2>&1
echo "exit $?" >> /tmp/probes.txt
emit probes.txt /tmp/probes.txt
"#,
    judge: |j| {
        let mut reads = capture_files(ATTACHED);
        reads.push("probes.txt".to_owned());
        j.verdict(
            "kprobe",
            "tracer probes: every kernel function tracer times is found or said absent, its programs load, and each is where the kprobe capture of the same boot attached it",
            &reads.iter().map(String::as_str).collect::<Vec<_>>(),
            probes_agree,
        );
    },
    needs: &["counts::tmpfs"],
    ..VmCase::BASE
};

/// One function line of `tracer probes`.
#[derive(Debug, PartialEq, Eq)]
struct Listed {
    probe: Probe,
    /// The kernel symbol it found; `None`: absent on this kernel.
    symbol: Option<String>,
    /// Whether its programs loaded.
    loaded: bool,
}

/// The function line `line` of `tracer probes`, if it is one.
fn probe_line(line: &str) -> Option<Result<Listed, String>> {
    let name = line.split_whitespace().next()?;
    let probe = Probe::from_name(name).filter(|p| p.kind() == ProbeKind::Function)?;
    let rest = line[name.len()..].trim();
    let (symbol, loaded) = if let Some(s) = rest.strip_suffix("load ok") {
        (s.trim(), true)
    } else if let Some((s, _)) = rest.split_once("rejected:") {
        (s.trim(), false)
    } else {
        return Some(Err(format!("unreadable line: {line}")));
    };
    let symbol = match symbol {
        "absent on this kernel" => None,
        s if s.ends_with("functions share this name") => {
            return Some(Err(format!("{name}: {s}, so it cannot attach")));
        }
        s => Some(s.trim_end_matches("(compiler clone)").trim().to_owned()),
    };
    Some(Ok(Listed {
        probe,
        symbol,
        loaded,
    }))
}

/// `tracer probes` exited 0, found every kernel function tracer times or said it is absent,
/// loaded every program, and each symbol is the one the kprobe capture of the same boot
/// attached to (each function it calls absent, absent there too).
fn probes_agree(files: &Results<'_>) -> Verdict {
    let text = files.read("probes.txt")?;
    if text.lines().last() != Some("exit 0") {
        return Err(wrong!("tracer probes did not exit 0:\n{}", text.trim()));
    }
    let listed = text
        .lines()
        .filter_map(probe_line)
        .collect::<Result<Vec<_>, String>>()?;
    let s = load_capture(files, ATTACHED)?;
    let functions = s
        .probes
        .keys()
        .filter(|p| p.kind() == ProbeKind::Function)
        .count();
    if listed.len() != functions {
        return Err(wrong!(
            "tracer probes lists {} kernel functions, the capture has {functions}:\n{}",
            listed.len(),
            text.trim()
        ));
    }
    let (mut found, mut absent) = (Vec::new(), Vec::new());
    for Listed {
        probe,
        symbol,
        loaded,
    } in listed
    {
        if !loaded {
            return Err(wrong!(
                "{}: its programs were rejected:\n{}",
                probe.name(),
                text.trim()
            ));
        }
        let state = s.probes.get(&probe).map(|st| &st.state);
        match (&symbol, state) {
            (Some(sym), Some(AttachState::Attached { symbol, .. })) if sym == symbol => {
                found.push(if sym == probe.name() {
                    sym.clone()
                } else {
                    format!("{} at {sym}", probe.name())
                });
            }
            (None, Some(AttachState::Absent { .. })) => absent.push(probe.name()),
            _ => {
                return Err(wrong!(
                    "{}: tracer probes says {}, the capture {state:?}",
                    probe.name(),
                    symbol.as_deref().unwrap_or("absent")
                ));
            }
        }
    }
    Ok(format!(
        "found and attached: {}; absent in both: {}; every program loads",
        found.join(", "),
        if absent.is_empty() {
            "none".to_owned()
        } else {
            absent.join(", ")
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probes_line_gives_the_symbol_found_and_whether_it_loads() {
        let line = |l: &str| probe_line(l).unwrap();
        assert_eq!(
            line("vfs_rmdir                    vfs_rmdir.part.0 (compiler clone)        load ok"),
            Ok(Listed {
                probe: Probe::VfsRmdir,
                symbol: Some("vfs_rmdir.part.0".to_owned()),
                loaded: true
            })
        );
        assert_eq!(
            line("unregister_shrinker          absent on this kernel                    load ok"),
            Ok(Listed {
                probe: Probe::UnregisterShrinker,
                symbol: None,
                loaded: true
            })
        );
        let rejected = line(
            "d_delete                     d_delete                                 rejected: EPERM (RUST_LOG=debug shows the verifier log)",
        );
        assert_eq!(
            rejected,
            Ok(Listed {
                probe: Probe::DDelete,
                symbol: Some("d_delete".to_owned()),
                loaded: false
            })
        );
        assert!(
            line("namespace_unlock             2 functions share this name              load ok")
                .is_err()
        );
        // The header, a tracepoint's name, anything else: not a function line.
        assert!(
            probe_line(
                "probe                        kernel symbol                            programs"
            )
            .is_none()
        );
        assert!(probe_line("").is_none());
    }

    /// `tracer probes` on Debian's 6.12, as it printed in the suite's VM.
    const ON_6_12: &str =
        "probe                        kernel symbol                            programs
synchronize_srcu             synchronize_srcu                         load ok
synchronize_srcu_expedited   synchronize_srcu_expedited               load ok
synchronize_rcu              synchronize_rcu                          load ok
synchronize_rcu_expedited    synchronize_rcu_expedited                load ok
unregister_shrinker          absent on this kernel                    load ok
shrinker_free                shrinker_free                            load ok
deactivate_locked_super      deactivate_locked_super                  load ok
namespace_unlock             namespace_unlock                         load ok
shrink_dcache_parent         shrink_dcache_parent                     load ok
d_delete                     d_delete                                 load ok
vfs_rmdir                    vfs_rmdir                                load ok
exit 0
";

    #[test]
    fn probes_must_agree_with_what_the_capture_attached() {
        use crate::testing::suite::{
            capture::tests::{absent, attach, snapshot},
            results::Files,
        };
        let dir = std::env::temp_dir().join(format!("tracer-probes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let judge = |probes: &str, capture: &tracer_core::snapshot::Snapshot| {
            let mut files = Files::new();
            for (name, text) in [
                ("probes.txt", probes.to_owned()),
                ("tmpfs_kprobe.rc", "0\n".to_owned()),
                ("tmpfs_kprobe.log", String::new()),
                (
                    "tmpfs_kprobe.json",
                    tracer_core::capture_file::to_string(capture),
                ),
            ] {
                let path = dir.join(name);
                std::fs::write(&path, text).unwrap();
                files.insert(name.to_owned(), path);
            }
            probes_agree(&Results::all(&files))
        };
        let mut s = snapshot("6.12.95+deb12-cloud-amd64", 1_000_000_000);
        for p in tracer_core::snapshot::PROBES
            .iter()
            .filter(|p| p.kind() == ProbeKind::Function)
        {
            attach(&mut s, *p);
        }
        absent(&mut s, Probe::UnregisterShrinker);
        let seen = judge(ON_6_12, &s).unwrap();
        assert!(
            seen.contains("absent in both: unregister_shrinker"),
            "{seen}"
        );
        // Found by one, absent for the other.
        absent(&mut s, Probe::ShrinkerFree);
        assert!(
            judge(ON_6_12, &s)
                .unwrap_err()
                .to_string()
                .starts_with("shrinker_free: tracer probes says shrinker_free")
        );
        attach(&mut s, Probe::ShrinkerFree);
        // A failed exit, a rejected program.
        assert!(judge(&ON_6_12.replace("exit 0", "exit 1"), &s).is_err());
        let rejected = ON_6_12.replace(
            "d_delete                                 load ok",
            "d_delete                                 rejected: EPERM",
        );
        assert!(
            judge(&rejected, &s)
                .unwrap_err()
                .to_string()
                .contains("rejected")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
