//! Every VM case, each declared once: its workload (the guest's shell) beside its judge,
//! in a file by what it checks. [`SUITE`] lists them in the order the guest runs them,
//! [`HARDEN`] the hardening cases, which run after them in one boot a kernel (6.12) or in a
//! boot of their own (`cargo xtask harden-vm`). docs/tests.md says how to add one.

pub mod bpftrace;
pub mod cgroups;
pub mod concurrency;
pub mod counts;
pub mod findings;
pub mod guest;
pub mod heal;
pub mod kernel;
pub mod lifecycle;
pub mod live;
pub mod locks;
pub mod model;
pub mod names;
pub mod nodes;
pub mod ordinary;
pub mod privilege;
pub mod readme;
pub mod scale;
pub mod serve_churn;
pub mod shrink;
pub mod signals;
pub mod slow;
pub mod srcu;
pub mod umount;
pub mod voice;

use super::case::Group;

/// The suite, as `/suite.sh`: the workloads share the prelude (a mounted ext2, `half.sh`,
/// the `capture` and `reference` functions), and may use what an earlier case left.
pub const SUITE: Group = Group {
    script: "/suite.sh",
    prelude: include_str!("../../../../vm/suite-prelude.sh"),
    libraries: &[("/scale.sh", include_str!("../../../../vm/scale.sh"))],
    cases: &[
        kernel::UNAME,
        kernel::PROBES,
        guest::ROOT_ONLY,
        counts::RMDIR,
        counts::UNLINK,
        counts::TMPFS,
        counts::UNLINK_TMPFS,
        counts::UNLINKAT,
        concurrency::CONCURRENCY,
        concurrency::IDLE,
        voice::RMDIR_LOCKS,
        voice::COUNTERS,
        locks::LOCK_WAITS,
        srcu::SRCU,
        cgroups::CGROUP_FORMAT,
        cgroups::CHURN,
        heal::HEAL,
        heal::HEAL_EXIT,
        heal::HEAL_TASK_WORK,
        names::NAMES,
        slow::SLOW,
        umount::UMOUNT300,
        locks::NEGATIVE_DENTRIES,
        findings::ORDINARY,
        ordinary::AT_SCALE,
        readme::CAPTURE,
        shrink::SHRINK_CHURN,
        shrink::MEMCG_SHRINK,
        bpftrace::BPFTRACE,
        model::CALIBRATION,
        live::LIVE,
        serve_churn::SERVE_CHURN,
        scale::SCALE,
        nodes::NODES,
    ],
};

/// The hardening cases, as `/harden.sh`: signals to each command, and least privilege.
pub const HARDEN: Group = Group {
    script: "/harden.sh",
    prelude: include_str!("../../../../vm/harden-prelude.sh"),
    libraries: &[],
    cases: &[
        signals::SIGNALS,
        lifecycle::LIFECYCLE,
        privilege::LEAST_PRIVILEGE,
        privilege::DEPLOY,
    ],
};
