//! Why the probes could not be loaded at all, and why one program could not be loaded or
//! attached.

use tracer_host::perf_event;

use crate::{sizing::SizingError, switches::SwitchError};

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
         or grant them (with CAP_DAC_READ_SEARCH, which reading tracefs needs): \
         `sudo setcap cap_bpf,cap_perfmon,cap_dac_read_search+ep $(command -v tracer)`"
    )]
    NoPrivileges,
    /// The kernel refuses perf events, and so every kprobe and tracepoint, to this process.
    // Transparent: the refusal is the whole sentence, and an error chain printed with
    // `{:#}` would say it twice were it also this error's source.
    #[error(transparent)]
    PerfEvents(#[from] perf_event::Refused),
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
    /// Not one probe could attach: why, in a sentence.
    #[error("no probe could be attached: {0}")]
    NothingAttached(String),
    /// The slow-call threshold could not be written.
    #[error("setting the slow-call threshold: {0}")]
    SlowThreshold(SwitchError),
    /// Recording could not be started.
    #[error("starting to record: {0}")]
    Record(SwitchError),
    /// The object was rejected as a whole.
    #[error("loading the kernel programs failed: {0}")]
    Load(#[from] aya::EbpfError),
    /// The maps cannot be sized within the kernel-memory budget.
    #[error("{0}")]
    Budget(SizingError),
}

/// Why one program of the object could not be loaded or attached: what the probe's state
/// then says.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// No program of that name in the object (a build mismatch).
    #[error("program {0} missing from the object")]
    Missing(String),
    /// The program is not of the kind asked for (a build mismatch).
    #[error("{0}: {1}")]
    WrongKind(String, aya::programs::ProgramError),
    /// The kernel refused a step (`loading NAME`, `kprobe on SYMBOL`, `fexit refused`, ...):
    /// the step, and the kernel's reason (a verifier log cut to its last line).
    #[error("{step}: {why}")]
    Refused {
        /// What was refused.
        step: String,
        /// The kernel's reason.
        why: String,
    },
}

impl AttachError {
    /// The kernel refused `step`; its reason `e`, without a verifier log (kept for
    /// `RUST_LOG=debug`).
    pub(crate) fn refused(step: impl Into<String>, e: &dyn std::error::Error) -> AttachError {
        AttachError::Refused {
            step: step.into(),
            why: short(e),
        }
    }
}

/// An error's message without a verifier log (kept for `RUST_LOG=debug`).
fn short(e: &dyn std::error::Error) -> String {
    let full = e.to_string();
    log::debug!("{full}");
    let Some((head, log)) = full.split_once(". Verifier output:") else {
        return full;
    };
    let noise = ["verification time", "processed ", "stack depth"];
    match log
        .lines()
        .map(str::trim)
        .rev()
        .find(|l| !l.is_empty() && !noise.iter().any(|n| l.starts_with(n)))
    {
        Some(last) => format!("{head}: {last}"),
        None => head.to_owned(),
    }
}
