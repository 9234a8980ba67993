//! fentry and fexit: BPF trampolines on a kernel function, found by its name in the
//! kernel's BTF; only the calls traced pay for them.

use aya::{
    Ebpf,
    programs::{FEntry, FExit},
};
use tracer_common::Probe;

use super::{error::AttachError, program, timed::timed};

/// Load and attach `<name>_fentry`/`_fexit`; on failure nothing stays attached.
///
/// The exit program attaches first: a call whose entry is seen then always has its return
/// seen. The other way round, a grace-period wait entered between the two attaches (the
/// Tasks RCU threads wait for one as trampolines change) would stay in flight for
/// [`crate::settle`] until its cap.
pub(super) fn attach_function(
    ebpf: &mut Ebpf,
    btf: &aya::Btf,
    probe: Probe,
) -> Result<(), AttachError> {
    let entry = format!("{}_fentry", probe.name());
    let exit = format!("{}_fexit", probe.name());
    let program: &mut FExit = program::typed(ebpf, &exit)?;
    timed(&format!("loading {exit}"), || {
        program.load(probe.name(), btf)
    })
    .map_err(|e| AttachError::refused("fexit refused", &e))?;
    let link = timed(&format!("attaching {exit}"), || program.attach())
        .map_err(|e| AttachError::refused("fexit attach refused", &e))?;
    let result = (|| -> Result<(), AttachError> {
        let program: &mut FEntry = program::typed(ebpf, &entry)?;
        timed(&format!("loading {entry}"), || {
            program.load(probe.name(), btf)
        })
        .map_err(|e| AttachError::refused("refused", &e))?;
        timed(&format!("attaching {entry}"), || program.attach())
            .map_err(|e| AttachError::refused("attach refused", &e))?;
        Ok(())
    })();
    if result.is_err()
        && let Ok(p) = program::typed::<FExit>(ebpf, &exit)
    {
        let _ = p.detach(link);
    }
    result
}

/// fentry and fexit on each syscall function of `functions` (its name, as the programs
/// are named, and its symbol), all or none: on failure every one of them is unloaded again.
pub(super) fn attach_syscalls(
    ebpf: &mut Ebpf,
    btf: &aya::Btf,
    functions: &[(&str, String)],
) -> Result<(), AttachError> {
    let mut done = Vec::new();
    for (name, symbol) in functions {
        // The exit first, for the reason `attach_function` gives.
        let pair = [
            (format!("sys_{name}_fexit"), true),
            (format!("sys_{name}_fentry"), false),
        ];
        for (program, exit) in pair {
            let result = if exit {
                program::typed::<FExit>(ebpf, &program).and_then(|p| {
                    p.load(symbol, btf)
                        .and_then(|()| p.attach().map(drop))
                        .map_err(|e| AttachError::refused(format!("fexit on {symbol} refused"), &e))
                })
            } else {
                program::typed::<FEntry>(ebpf, &program).and_then(|p| {
                    p.load(symbol, btf)
                        .and_then(|()| p.attach().map(drop))
                        .map_err(|e| {
                            AttachError::refused(format!("fentry on {symbol} refused"), &e)
                        })
                })
            };
            done.push((program, exit));
            if let Err(e) = result {
                for (program, exit) in &done {
                    // Unloading detaches; a program never loaded has nothing to undo.
                    let _ = if *exit {
                        program::typed::<FExit>(ebpf, program).map(|p| p.unload().is_ok())
                    } else {
                        program::typed::<FEntry>(ebpf, program).map(|p| p.unload().is_ok())
                    };
                }
                return Err(e);
            }
        }
    }
    Ok(())
}
