//! What findings say where saying less would be unsafe or saying more untrue: the
//! conditions a remedy carries wherever it is offered, what the settings list says of each
//! setting (what the kernel has, never advice), and a pile of negative dentries in the words
//! of what was measured.

use super::{
    ctx::Ctx,
    finding::{Advice, TunableStatus},
    kernel::{self, Presence},
};
use crate::snapshot::CgroupId;

/// What pruning one negative dentry costs under the inode locks: 1.892 s for 10 million in
/// the seed thread (Linus Torvalds' dirtest, made by failed lookups, on a filesystem his mail
/// does not name; 0.001 s on tmpfs, which keeps none).
pub const PRUNE_NS_EACH: u64 = 189;

/// What a lazy umount of a common parent does besides waiting once, said whole wherever it
/// is offered: tracer does not know the mount points, so it cannot tell whether it is safe.
pub const LAZY_UMOUNT_CONDITIONS: &str = "Only where that parent is itself a mount you mean \
    to remove, never / and never a parent other work still uses: a lazy umount also detaches \
    the parent's peer mounts (mount propagation), keeps each filesystem alive while anything \
    still holds it open, and reports no error of its teardown. tracer does not know the mount \
    points: check them before running it.";

/// What `fs.dentry-negative=1` costs, said wherever it is offered: the same behaviour made
/// every kernel's default was merged and reverted in 2024 (the tool's own data,
/// [`kernel::D_DELETE_UNHASH`], records both commits).
pub const DENTRY_NEGATIVE_COST: &str = "It is host-wide, and a removed name's dentry is then \
    gone for a later lookup or create of the same name: the same behaviour, made every \
    kernel's default, was merged and reverted in 2024 after a -7.4% filebench regression \
    (681ce8623567, reverted by 4a4be1ad3a6e); its cost on this host's work is not measured \
    here.";

/// Whether `fs.dentry-negative=1` is offered on this kernel: where it exists (or may) and is
/// not already set.
fn dentry_negative_offered(c: &Ctx) -> bool {
    c.kernel.features.dentry_negative != Some(true)
        && kernel::DENTRY_NEGATIVE.since.presence(c.kernel.version) != Presence::No
}

/// What the settings list says of `fs.dentry-negative`.
pub(super) fn dentry_negative_role(c: &Ctx) -> Advice {
    if dentry_negative_offered(c) {
        Advice::InRemedy
    } else {
        Advice::Exists
    }
}

/// The settings umount's list states: on a kernel with the expedited wait, what undoes it
/// (to leave off, or the cause where set); without it, the knob that expedites every wait.
pub(super) fn umount_tunables(c: &Ctx, has: bool, undone: bool) -> Vec<TunableStatus> {
    if has {
        let normal = if undone {
            Advice::IsTheCause
        } else {
            Advice::LeaveOff
        };
        vec![
            c.tunable(&kernel::RCU_NORMAL, normal),
            c.tunable(&kernel::RCU_NORMAL_AFTER_BOOT, Advice::LeaveOff),
        ]
    } else {
        let expedited = if c.kernel.features.rcu_expedited == Some(true) {
            Advice::Exists
        } else {
            Advice::InRemedy
        };
        vec![c.tunable(&kernel::RCU_EXPEDITED, expedited)]
    }
}

/// What a pile of negative dentries is, whose it is, and what it will cost, in the words of
/// what was measured: names removed in one cgroup, or the host's `nr_negative`.
pub(super) fn pile_words(
    c: &Ctx,
    per: &[(CgroupId, u64)],
    by_removal: bool,
) -> (&'static str, String, String) {
    if by_removal {
        let place = per
            .first()
            .map(|(id, _)| c.s.cgroup_label(*id))
            .unwrap_or_default();
        (
            "negative dentries accumulate: each name removed (d_delete) stays cached as a \
             negative dentry, and a directory holding many prunes them all under its inode \
             locks when it is removed",
            format!("by unlink in {place}"),
            format!(
                "a later rmdir of a directory holding them, which prunes them with its inode \
                 locks held ({PRUNE_NS_EACH} ns each: 10 million took 1.892 s in the seed \
                 thread), and the lookups of its parent that wait meanwhile; this much only if \
                 one directory holds them all (how they are spread is not measured)"
            ),
        )
    } else {
        (
            "negative dentries accumulate on the host: nr_negative grew, by failed lookups and \
             removed names in directories tracer does not know; a directory holding many prunes \
             them all under its inode locks when it is removed",
            "on the host (nr_negative's growth)".to_owned(),
            format!(
                "rmdirs of the directories that hold them, each pruning its own with its inode \
                 locks held ({PRUNE_NS_EACH} ns each: 10 million took 1.892 s in the seed \
                 thread); this much only if one directory held them all: nr_negative is the \
                 host's count and says nothing of how they are spread"
            ),
        )
    }
}
