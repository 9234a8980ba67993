//! tracer at a large host's scale in the VM (`vm/scale.sh`, shared with `cargo xtask bench
//! scale`, whose verdicts [`crate::testing::suite::scale`] holds): the maps' kernel memory
//! at the possible CPUs the VM was booted with, calls past the maps' capacity, and on 6.12
//! 2,000 cgroups alive at once.

use std::time::Duration;

use crate::testing::suite::{
    case::{Fixture, On, VmCase},
    scale::{self, SUITE_CGROUPS},
};

/// The maps' memory under each tool, `HIST` shrunk under 50 cgroups, and 2,000 cgroups.
pub const SCALE: VmCase = VmCase {
    name: "scale::scale",
    heading: "scale: the maps' kernel memory at $(cat /sys/devices/system/cpu/possible) possible CPUs, calls past the maps' capacity, many cgroups",
    on: On::Every,
    workload: r"
for how in kprobe fentry; do
    scale_memory $how
    # HIST shrunk by the test knob: most calls find it full.
    export TRACER_MAP_ENTRIES=HIST=32
    scale_cgroups 50 overflow_$how --attach $how
    unset TRACER_MAP_ENTRIES
done
# 2000 cgroups alive at once take minutes under TCG: on one kernel (the boot that runs
# longest anyway, beside two other kernels' in turn). `cargo xtask bench scale` runs them
# on every kernel.
case $(uname -r) in
6.12.*)
    for how in kprobe fentry; do
        scale_cgroups 2000 scale_$how --attach $how
    done
    scale_serve 2000 100 scale_serve
    ;;
esac
",
    judge: |j| scale::judge(j, SUITE_CGROUPS),
    fixtures: &[Fixture::ScaleLibrary],
    timeout: Duration::from_mins(20),
    ..VmCase::BASE
};
