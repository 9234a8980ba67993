//! `tracer probes`: each function probe's symbol on this kernel, and whether its kprobe
//! programs pass the verifier, without attaching anything.

use aya::{Ebpf, programs::KProbe};
use tracer_common::{FUNCTIONS, Probe};

use tracer_host::{
    kallsyms::{Kallsyms, Resolution},
    memlock,
};

use crate::attach::{self, AttachError, LoadError, functions, load::EBPF_OBJECT, program};

/// One probe's readiness on this kernel, without attaching: its symbol, and whether its
/// kprobe programs pass the verifier.
#[derive(Debug)]
pub struct Check {
    /// The probe.
    pub probe: Probe,
    /// Where it would attach.
    pub resolution: Resolution,
    /// `Ok` when both programs loaded, else the kernel's reason.
    pub load: Result<(), AttachError>,
}

/// Resolve and load (not attach) every function probe. Also returns why kprobes cannot
/// attach here, if they cannot.
///
/// # Errors
/// When the programs or kallsyms cannot be read at all.
pub fn probes() -> Result<(Vec<Check>, Option<LoadError>), LoadError> {
    attach::preflight_common()?;
    let verdict = attach::kprobe_support().err();
    memlock::raise_limit();
    let kallsyms = Kallsyms::read().map_err(LoadError::Kallsyms)?;
    let mut ebpf = Ebpf::load(EBPF_OBJECT)?;
    let mut out = Vec::new();
    for &probe in FUNCTIONS {
        let load = ["entry", "exit"].iter().try_for_each(|suffix| {
            let name = format!("{}_{suffix}", probe.name());
            let program: &mut KProbe = program::typed(&mut ebpf, &name)?;
            program
                .load()
                .map_err(|e| AttachError::refused(format!("loading {name}"), &e))
        });
        out.push(Check {
            probe,
            resolution: functions::resolve(&kallsyms, probe),
            load,
        });
    }
    Ok((out, verdict))
}
