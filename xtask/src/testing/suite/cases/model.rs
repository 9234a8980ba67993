//! The model calibrated on one capture of a boot predicts another of a different size: the
//! calls must agree exactly; the time ratio is reported.

use tracer_core::snapshot::{Probe, Snapshot};

use crate::testing::{
    harness::{Verdict, ms},
    suite::{
        case::{On, VmCase},
        results::Results,
    },
};

/// Captures of 50 and 150 umounts, and of rmdirs of 5000 and 20000 negative dentries.
pub const CALIBRATION: VmCase = VmCase {
    heading: "calibration captures (umount of 50 and 150 tmpfs; rmdir of 5000 and 20000 negatives)",
    on: On::Every,
    workload: r#"
for n in 50 150; do
    i=0; while [ $i -lt $n ]; do mkdir -p /mnt/c$n/$i && mount -t tmpfs none /mnt/c$n/$i; i=$((i+1)); done
    capture um$n "i=0; while [ \$i -lt $n ]; do umount /mnt/c$n/\$i || exit 1; i=\$((i+1)); done"
done
if [ -d /mnt/ext2 ]; then
    for n in 5000 20000; do
        mkdir -p /mnt/ext2/n$n
        sh -c "i=0; while [ \$i -lt $n ]; do [ -e /mnt/ext2/n$n/x\$i ]; i=\$((i+1)); done"
        capture neg$n "rmdir /mnt/ext2/n$n"
    done
fi
"#,
    judge: |j| {
        j.verdict(
            "auto",
            "model calibrated on 50 umounts predicts 150 (time ratio reported)",
            &["um50.json", "um150.json"],
            |r| {
                predicts(
                    r,
                    "um50",
                    "um150",
                    "umount-storm",
                    "expedited",
                    "mounts=150",
                    Probe::SysUmount,
                    None,
                )
            },
        );
        j.verdict(
            "auto",
            "model calibrated on a 5000-negative rmdir predicts 20000 (time ratio reported)",
            &["neg5000.json", "neg20000.json"],
            |r| {
                predicts(
                    r,
                    "neg5000",
                    "neg20000",
                    "negative-dentry-rmdir",
                    "prune-under-lock",
                    "negatives=20000",
                    Probe::ShrinkDcacheParent,
                    Some(Probe::VfsRmdir),
                )
            },
        );
    },
};

/// Calibrate the model on capture `fit`, predict the workload of capture `check` (the
/// scenario with `set`), and compare the calls and total time of `probe` (under `caller`,
/// if given). The calls must agree exactly; the time ratio is reported, with whether it is
/// within the 2x goal, not judged: under TCG on a shared host one grace period's length
/// varies tenfold between runs, so a timing verdict would test the host's load.
#[expect(
    clippy::too_many_arguments,
    reason = "one call per case reads best with every knob named"
)]
pub fn predicts(
    files: &Results<'_>,
    fit: &str,
    check: &str,
    scenario: &str,
    variant: &str,
    set: &str,
    probe: Probe,
    caller: Option<Probe>,
) -> Verdict {
    let path = |n: &str| {
        files
            .get(&format!("{n}.json"))
            .cloned()
            .ok_or_else(|| format!("the guest sent no {n}.json"))
    };
    let measured = tracer_core::capture_file::load(&path(check)?).map_err(|e| format!("{e:#}"))?;
    let run = tracer_model::Run {
        seed: 1,
        calibrate: Some(path(fit)?),
        // The test VMs have 2 CPUs.
        ..tracer_model::Run::named(scenario, Some(variant), &[set, "cpus=2"])
            .map_err(|e| format!("model: {e}"))?
    };
    let predicted = tracer_model::run(&run).map_err(|e| format!("model: {e:#}"))?;
    let total = |s: &Snapshot| match caller {
        Some(c) => s.probe_by_caller(probe, Some(c)).sum_ns(),
        None => s.probe_total(probe).sum_ns(),
    };
    let calls = |s: &Snapshot| match caller {
        Some(c) => s.probe_by_caller(probe, Some(c)).count(),
        None => s.probe_total(probe).count(),
    };
    if calls(&measured) != calls(&predicted) {
        return Err(format!(
            "{}: the model made {} calls, the kernel {}",
            probe.name(),
            calls(&predicted),
            calls(&measured)
        ));
    }
    let (real, model) = (total(&measured), total(&predicted));
    if real == 0 || model == 0 {
        return Err(format!(
            "{}: measured {real} ns, predicted {model} ns",
            probe.name()
        ));
    }
    #[expect(clippy::cast_precision_loss, reason = "a ratio")]
    let ratio = model as f64 / real as f64;
    let verdict = format!(
        "{}: predicted {:.1} ms, measured {:.1} ms, ratio {ratio:.2}",
        probe.name(),
        ms(model),
        ms(real)
    );
    let goal = if (0.5..=2.0).contains(&ratio) {
        "within"
    } else {
        "outside"
    };
    Ok(format!(
        "{verdict} ({goal} the 2x goal), {} calls each",
        calls(&measured)
    ))
}
