//! kprobe and kretprobe: a kernel function's calls traced by its symbol in kallsyms, also
//! where the compiler renamed it (`.isra.0`) or BTF lacks it.

use aya::{
    Ebpf,
    programs::{KProbe, kprobe::KProbeLinkId, links::FdLink},
    util::KernelVersion,
};
use tracer_common::Probe;

use super::{error::AttachError, program, timed::timed};
use tracer_host::{kallsyms::Kallsyms, possible_cpus};

use crate::kprobe_links::KprobeLink;

/// Load and attach `<name>_entry`/`_exit` (kprobe/kretprobe) on `symbol`; on failure
/// nothing stays attached.
pub(super) fn attach_function(
    ebpf: &mut Ebpf,
    probe: Probe,
    symbol: &str,
    kept: &mut Vec<KprobeLink>,
) -> Result<(), AttachError> {
    let entry = format!("{}_entry", probe.name());
    let exit = format!("{}_exit", probe.name());
    attach_pair(ebpf, &entry, &exit, symbol, kept)
}

/// Attach kprobe and kretprobe to each syscall function of `functions` (its name, as the
/// programs are named, and its symbol); one attached already, for another probe
/// (`unlinkat`), is kept as it is.
pub(super) fn attach_syscalls(
    ebpf: &mut Ebpf,
    functions: &[(&str, String)],
    kept: &mut Vec<KprobeLink>,
) -> Result<(), AttachError> {
    for (name, symbol) in functions {
        let entry = format!("sys_{name}_kprobe");
        let exit = format!("sys_{name}_kretprobe");
        if program::typed::<KProbe>(ebpf, &entry)?.fd().is_ok() {
            continue; // attached for another probe (unlinkat)
        }
        attach_pair(ebpf, &entry, &exit, symbol, kept)?;
    }
    Ok(())
}

/// Load and attach the kretprobe `exit`, then the kprobe `entry`, on `symbol` (the exit
/// first for the reason [`super::fentry::attach_function`] gives); on failure nothing stays
/// attached. Their links go to `kept` where they are links.
fn attach_pair(
    ebpf: &mut Ebpf,
    entry: &str,
    exit: &str,
    symbol: &str,
    kept: &mut Vec<KprobeLink>,
) -> Result<(), AttachError> {
    let mut links = Vec::new();
    for name in [exit, entry] {
        let name = name.to_owned();
        let result = (|| -> Result<(), AttachError> {
            let program: &mut KProbe = program::typed(ebpf, &name)?;
            timed(&format!("loading {name}"), || program.load())
                .map_err(|e| AttachError::refused(format!("loading {name}"), &e))?;
            let link = timed(&format!("attaching {name} to {symbol}"), || {
                program.attach(symbol, 0)
            })
            .map_err(|e| AttachError::refused(format!("kprobe on {symbol}"), &e))?;
            links.push((name.clone(), link));
            Ok(())
        })();
        if let Err(reason) = result {
            for (name, link) in links {
                if let Ok(p) = program::typed::<KProbe>(ebpf, &name) {
                    let _ = p.detach(link);
                }
            }
            return Err(reason);
        }
    }
    for (name, link) in links {
        let program: &mut KProbe = program::typed(ebpf, &name)?;
        kept.extend(take_link(program, link));
    }
    Ok(())
}

/// Take the link `id` from aya, where it is an fd link: as aya 0.14 makes a kprobe's link
/// one exactly where perf links exist (Linux >= 5.15) and kprobes are perf events (>= 4.17).
/// Elsewhere the link stays with the program (converting it would detach it).
fn take_link(program: &mut KProbe, id: KProbeLinkId) -> Option<KprobeLink> {
    let fd_links = aya::features().bpf_perf_link()
        && KernelVersion::current().is_ok_and(|v| v >= KernelVersion::new(4, 17, 0));
    if !fd_links {
        return None;
    }
    let link = program.take_link(id).ok()?;
    FdLink::try_from(link).ok().map(KprobeLink::new)
}

/// Say (`--verbose`) where the loss `kprobe_misses` cannot be known.
pub(super) fn note_misses_unreported() {
    if !tracer_host::kprobe_misses_reported() {
        log::info!(
            "this kernel's kprobe links do not report missed hits (Linux >= 6.7 does): \
             kprobe_misses stays 0 here"
        );
    }
}

/// What a kretprobe can hold on this kernel, when that can lose returns: a kernel built
/// without `CONFIG_PREEMPTION` (its `preempt_schedule` exists only with it) gives each
/// kretprobe as many instances as the machine has possible CPUs (`register_kretprobe`'s
/// default, which perf's kprobes cannot raise), so more calls in flight at once in one
/// traced function than that lose their return. Such calls are counted, not hidden.
pub(super) fn kretprobes_held_per_function(kallsyms: &Kallsyms) -> Option<String> {
    if kallsyms.is_empty() || kallsyms.has("preempt_schedule") {
        return None;
    }
    let cpus = std::fs::read_to_string("/sys/devices/system/cpu/possible")
        .ok()
        .and_then(|s| possible_cpus(&s));
    let held = cpus.map_or_else(|| "one per possible CPU".to_owned(), |n| n.to_string());
    Some(format!(
        "this kernel is built without CONFIG_PREEMPTION, so each kretprobe holds only {held} \
         calls in flight at once: more concurrent calls of one traced function lose their \
         return, counted under losses as entries without a return"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kretprobes_held_per_cpu_only_without_preemption() {
        assert_eq!(possible_cpus("0-1\n"), Some(2));
        assert_eq!(possible_cpus("0"), Some(1));
        assert_eq!(possible_cpus("0-3,8-11"), Some(8));
        assert_eq!(possible_cpus("3-1"), None);
        assert_eq!(possible_cpus("cpus"), None);
        // Debian's 5.10 (PREEMPT_VOLUNTARY, no PREEMPT_DYNAMIC) has no preempt_schedule.
        let voluntary = Kallsyms::parse("ffffffff81000000 T vfs_rmdir\n");
        let warning = kretprobes_held_per_function(&voluntary).expect("a warning");
        assert!(
            warning.contains("CONFIG_PREEMPTION") && warning.contains("entries without a return"),
            "{warning}"
        );
        let preemptible =
            Kallsyms::parse("ffffffff81000000 T vfs_rmdir\nffffffff81000100 T preempt_schedule\n");
        assert_eq!(kretprobes_held_per_function(&preemptible), None);
        // No symbols read (no permission): nothing can be said.
        assert_eq!(kretprobes_held_per_function(&Kallsyms::parse("")), None);
    }
}
