//! Loads the kernel programs and attaches each probe where this kernel allows.
//!
//! One missing symbol never stops the others: every probe ends in an [`AttachState`] that
//! the Snapshot carries (attached and how, absent on this kernel, or failed and why).

pub mod kallsyms;

use std::{collections::BTreeMap, path::Path};

use aya::{Ebpf, programs::KProbe};
use tracer_common::{FUNCTIONS, Probe};

use crate::snapshot::{AttachMethod, AttachState};
use kallsyms::{Kallsyms, Resolution};

/// The kernel programs, built by build.rs from `tracer-ebpf`.
static EBPF_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/tracer"));

/// Why the probes could not be loaded at all.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The binary was built without bpf-linker.
    #[error(
        "this tracer binary was built without its kernel programs (bpf-linker was missing at \
         build time); build it with `cargo xtask build`"
    )]
    NoPrograms,
    /// Neither root nor the capabilities BPF tracing needs.
    #[error(
        "tracing needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN on Linux < 5.8); run as root, \
         or grant them: `sudo setcap cap_bpf,cap_perfmon+ep $(command -v tracer)`"
    )]
    NoPrivileges,
    /// The kernel has no kprobe support.
    #[error(
        "this kernel cannot attach kprobes: CONFIG_KPROBES is not set (no kprobe PMU under \
         /sys/bus/event_source/devices){config}. tracer needs a kernel built with \
         CONFIG_KPROBES=y, as Debian, Ubuntu, Fedora and RHEL kernels are. Without one, \
         `tracer model SCENARIO` predicts these paths (see `tracer model --list`)"
    )]
    NoKprobes {
        /// What the kernel config file says, when found.
        config: String,
    },
    /// kallsyms could not be read.
    #[error("cannot read /proc/kallsyms: {0}")]
    Kallsyms(std::io::Error),
    /// The object was rejected as a whole.
    #[error("loading the kernel programs failed: {0}")]
    Load(#[from] aya::EbpfError),
}

/// The loaded programs, and what became of each probe. Dropping it detaches everything.
pub struct Attached {
    /// The loaded object: programs and maps.
    pub ebpf: Ebpf,
    /// Outcome per probe.
    pub states: BTreeMap<Probe, AttachState>,
}

/// Check what tracing needs before touching the kernel, so the error names the real cause.
///
/// # Errors
/// The first missing prerequisite.
pub fn preflight() -> Result<(), LoadError> {
    if EBPF_OBJECT.is_empty() {
        return Err(LoadError::NoPrograms);
    }
    if !has_tracing_privileges() {
        return Err(LoadError::NoPrivileges);
    }
    if !Path::new("/sys/bus/event_source/devices/kprobe").exists() {
        return Err(LoadError::NoKprobes { config: kernel_config_says("CONFIG_KPROBES") });
    }
    Ok(())
}

/// CAP_SYS_ADMIN, or CAP_BPF with CAP_PERFMON, in the effective set.
fn has_tracing_privileges() -> bool {
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_PERFMON: u32 = 38;
    const CAP_BPF: u32 = 39;
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else { return false };
    let Some(eff) = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
    else {
        return false;
    };
    let has = |cap: u32| eff & (1 << cap) != 0;
    has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON))
}

/// `, and /boot/config-R says "# CONFIG_X is not set"`, or empty when no config is found.
fn kernel_config_says(option: &str) -> String {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let path = format!("/boot/config-{}", release.trim());
    let Ok(text) = std::fs::read_to_string(&path) else { return String::new() };
    text.lines()
        .find(|l| l.starts_with(&format!("{option}=")) || l.contains(&format!("{option} is not set")))
        .map(|l| format!(", and {path} says \"{l}\""))
        .unwrap_or_default()
}

/// The probes `--probes` names, or all function probes.
///
/// # Errors
/// An unknown name, with the list of known ones.
pub fn select(names: Option<&str>) -> Result<Vec<Probe>, String> {
    let Some(names) = names else { return Ok(FUNCTIONS.to_vec()) };
    let mut out = Vec::new();
    for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match FUNCTIONS.iter().find(|p| p.name() == name) {
            Some(p) if !out.contains(p) => out.push(*p),
            Some(_) => {}
            None => {
                let known: Vec<&str> = FUNCTIONS.iter().map(|p| p.name()).collect();
                return Err(format!("unknown probe {name:?}; known probes: {}", known.join(", ")));
            }
        }
    }
    if out.is_empty() {
        return Err("--probes names no probe".to_owned());
    }
    Ok(out)
}

/// Load the programs and attach `wanted` probes. Probes not in `wanted` are `NotRequested`.
///
/// # Errors
/// Only when nothing can be loaded at all; a probe that fails is reported in its state.
pub fn attach(wanted: &[Probe]) -> Result<Attached, LoadError> {
    preflight()?;
    raise_memlock_limit();
    let kallsyms = Kallsyms::read().map_err(LoadError::Kallsyms)?;
    let mut ebpf = Ebpf::load(EBPF_OBJECT)?;
    let mut states = BTreeMap::new();
    for probe in FUNCTIONS {
        let state = if wanted.contains(&probe) {
            attach_function(&mut ebpf, &kallsyms, probe)
        } else {
            AttachState::NotRequested
        };
        log::debug!("{}: {state:?}", probe.name());
        states.insert(probe, state);
    }
    Ok(Attached { ebpf, states })
}

/// One probe's readiness on this kernel, without attaching: its symbol, and whether its
/// programs pass the verifier.
#[derive(Debug)]
pub struct Check {
    /// The probe.
    pub probe: Probe,
    /// Where it would attach.
    pub resolution: Resolution,
    /// `Ok` when both programs loaded, else the kernel's reason.
    pub load: Result<(), String>,
}

/// Resolve and load (not attach) every function probe: `tracer probes`.
///
/// # Errors
/// When the programs or kallsyms cannot be read at all.
pub fn check() -> Result<(Vec<Check>, Option<LoadError>), LoadError> {
    if EBPF_OBJECT.is_empty() {
        return Err(LoadError::NoPrograms);
    }
    // Loading needs privileges but not kprobes: keep going and report the kprobe verdict.
    let verdict = preflight().err();
    if matches!(verdict, Some(LoadError::NoPrivileges)) {
        return Err(LoadError::NoPrivileges);
    }
    raise_memlock_limit();
    let kallsyms = Kallsyms::read().map_err(LoadError::Kallsyms)?;
    let mut ebpf = Ebpf::load(EBPF_OBJECT)?;
    let mut out = Vec::new();
    for probe in FUNCTIONS {
        let load = ["entry", "exit"].iter().try_for_each(|suffix| {
            let name = format!("{}_{suffix}", probe.name());
            let program: &mut KProbe = ebpf
                .program_mut(&name)
                .ok_or_else(|| format!("program {name} missing from the object"))?
                .try_into()
                .map_err(|e| format!("{name}: {e}"))?;
            program.load().map_err(|e| format!("loading {name}: {e}"))
        });
        out.push(Check { probe, resolution: kallsyms.resolve(probe.name()), load });
    }
    Ok((out, verdict))
}

fn attach_function(ebpf: &mut Ebpf, kallsyms: &Kallsyms, probe: Probe) -> AttachState {
    let symbol = match kallsyms.resolve(probe.name()) {
        Resolution::Exact(s) | Resolution::Clone(s) => s,
        Resolution::Absent => return AttachState::Absent { symbol: probe.name().to_owned() },
        Resolution::Ambiguous(n) => {
            return AttachState::Failed {
                reason: format!("{n} kernel functions are named {}; cannot tell which", probe.name()),
            };
        }
    };
    // Entry and exit must both attach, or neither: half a pair would count unmatched calls.
    let mut links = Vec::new();
    for suffix in ["entry", "exit"] {
        let name = format!("{}_{suffix}", probe.name());
        let result = (|| -> Result<(), String> {
            let program: &mut KProbe = ebpf
                .program_mut(&name)
                .ok_or_else(|| format!("program {name} missing from the object"))?
                .try_into()
                .map_err(|e| format!("{name}: {e}"))?;
            program.load().map_err(|e| format!("loading {name}: {e}"))?;
            let link = program.attach(&symbol, 0).map_err(|e| format!("kprobe on {symbol}: {e}"))?;
            links.push((name.clone(), link));
            Ok(())
        })();
        if let Err(reason) = result {
            for (name, link) in links {
                if let Some(p) = ebpf.program_mut(&name).and_then(|p| <&mut KProbe>::try_from(p).ok()) {
                    let _ = p.detach(link);
                }
            }
            return AttachState::Failed { reason };
        }
    }
    AttachState::Attached { method: AttachMethod::Kprobe, symbol }
}

/// Kernels before 5.11 charge BPF maps to RLIMIT_MEMLOCK; later ones to the memory cgroup,
/// where raising it may be refused and does not matter.
fn raise_memlock_limit() {
    let rlim = libc::rlimit { rlim_cur: libc::RLIM_INFINITY, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: setrlimit reads a valid rlimit struct.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &raw const rlim) } != 0 {
        log::debug!("raising RLIMIT_MEMLOCK failed: {}", std::io::Error::last_os_error());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn select_defaults_to_every_function_and_rejects_unknown_names() {
        assert_eq!(select(None).unwrap(), FUNCTIONS.to_vec());
        assert_eq!(select(Some("vfs_rmdir, d_delete,vfs_rmdir")).unwrap(), vec![Probe::VfsRmdir, Probe::DDelete]);
        let err = select(Some("vfs_rmdir,vfs_unlink")).unwrap_err();
        assert!(err.contains("\"vfs_unlink\"") && err.contains("synchronize_srcu"), "{err}");
        assert!(select(Some(",")).is_err());
    }
}
