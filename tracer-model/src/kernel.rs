//! Kernel profiles: what each kernel's code does on the paths the model simulates.
//!
//! A profile is the set of facts a scenario needs to run "as on Linux X": which grace period
//! `namespace_unlock` waits for, which shrinker teardown the superblock uses and whether it
//! waits, where `deactivate_locked_super` runs, where rmdir prunes, and what the kernel's
//! RCU does on one CPU. Each fact cites the code it follows. `tracer model --kernel auto`
//! picks the capture's kernel when calibrating, else the running one.
//!
//! The 7.3 profile runs the 6.12 code on these paths. What changed after 6.12, as read in
//! the mainline source, and why none of it changes the modelled paths:
//! - `namespace_unlock`: every umount, a lazy one (`MNT_DETACH`) included, still calls
//!   `synchronize_rcu_expedited` after `up_write(&namespace_sem)` in every release read
//!   through 6.19 (`fs/namespace.c` at 6.19.0). The patch that hands a lazy umount's final
//!   `mntput`s to `queue_rcu_work` instead ("fs/namespace: defer RCU sync for `MNT_DETACH`
//!   umount", queued in the vfs tree for 6.16) is in none of them
//!   (`tracer_core::findings::kernel::LAZY_UMOUNT_DEFERRED`). With mount-notification
//!   listeners (fsnotify, since 6.14) `namespace_unlock` first downgrades `namespace_sem` to
//!   send them; without listeners, as in the workloads here, nothing differs. `emptied_ns`
//!   frees an emptied namespace there too, off these paths.
//! - `synchronize_rcu_expedited`: the changes read after 6.12 touch the per-`rcu_node`
//!   workers (`rcu_exp_par_gp_kworker` affinity), which exist only past one leaf
//!   `rcu_node` (16 CPUs); the work still runs on `rcu_exp_gp_kworker`, not real-time
//!   without `CONFIG_RCU_EXP_KTHREAD` (Debian's 7.3 config does not set it).
//! - `deactivate_locked_super`, `shrinker_free` and `vfs_rmdir` (prune under both inode
//!   locks): no 7.x text of them was readable here, so 6.12's is assumed; Linus's 2024
//!   patch moving the prune out of the inode locks is a variant, not a profile, until a
//!   7.3 source or capture shows it merged.
//! - The kernel's configuration differs: Debian's 7.3 builds `CONFIG_PREEMPT_LAZY` where 6.1
//!   and 6.12 build `PREEMPT_VOLUNTARY`, so kernel code is preempted at the tick too. The
//!   model's kernel steps on these paths are tens of microseconds, well under a tick, so
//!   the model keeps them unpreempted on every profile.
//!
//! No capture of 7.3 checks the profile here (the model-fit bench boots 6.1 and 6.12).

use std::{fmt, str::FromStr};

use thiserror::Error;

use tracer_core::snapshot::Probe;

use super::rcu::{Gp, RcuConfig};

/// The first series whose `namespace_unlock` waits in `synchronize_rcu_expedited`: 5.0
/// (`fs/namespace.c` read at 4.20.1 and 5.0.1; see
/// `tracer_core::findings::kernel::NAMESPACE_UNLOCK_EXPEDITED`).
pub const EXPEDITED_UMOUNT: (u32, u32) = (5, 0);

/// A kernel the model can follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kernel {
    /// Linux 4.14, the kernel of the 2017 umount thread (Neil Brown's 4-CPU VM).
    V4_14,
    /// Linux 6.1 (Debian 12's kernel, booted by the VM tests).
    V6_1,
    /// Linux 6.12 (Debian 12 backports, booted by the VM tests).
    V6_12,
    /// Linux 7.3 (follows the 6.12 code on the modelled paths; see the module docs).
    V7_3,
}

/// Every profile, oldest first.
pub const KERNELS: [Kernel; 4] = [Kernel::V4_14, Kernel::V6_1, Kernel::V6_12, Kernel::V7_3];

/// A `--kernel` value that is neither a profile nor `auto`, or a release that is not one.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum KernelError {
    /// Not a profile name.
    #[error("unknown kernel `{0}`; profiles: 4.14, 6.1, 6.12, 7.3, or auto")]
    Unknown(String),
    /// A release string without a version in front.
    #[error("kernel release `{0}` has no MAJOR.MINOR version")]
    Release(String),
}

impl Kernel {
    /// The version as users write it.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Kernel::V4_14 => "4.14",
            Kernel::V6_1 => "6.1",
            Kernel::V6_12 => "6.12",
            Kernel::V7_3 => "7.3",
        }
    }

    const fn version(self) -> (u32, u32) {
        match self {
            Kernel::V4_14 => (4, 14),
            Kernel::V6_1 => (6, 1),
            Kernel::V6_12 => (6, 12),
            Kernel::V7_3 => (7, 3),
        }
    }

    /// The profile for a `uname -r` release such as `6.12.95+deb12-cloud-amd64`: the newest
    /// profile not newer than it whose code on the modelled paths is the release's. Returns
    /// the profile and whether the match is exact (same MAJOR.MINOR).
    ///
    /// # Errors
    /// When the release does not start with `MAJOR.MINOR`.
    pub fn from_release(release: &str) -> Result<(Kernel, bool), KernelError> {
        let v = version(release).ok_or_else(|| KernelError::Release(release.to_owned()))?;
        // Where the modelled code changed: 5.0 made namespace_unlock expedited
        // (`synchronize_rcu()` in fs/namespace.c through 4.20.1, `synchronize_rcu_expedited()`
        // from 5.0.1), 6.7 replaced unregister_shrinker by shrinker_free. Between those, the
        // nearest profile has the same code on these paths.
        let k = match v {
            v if v < EXPEDITED_UMOUNT => Kernel::V4_14,
            v if v < (6, 7) => Kernel::V6_1,
            v if v < (7, 3) => Kernel::V6_12,
            _ => Kernel::V7_3,
        };
        Ok((k, k.version() == v))
    }

    /// This kernel's facts.
    #[must_use]
    pub const fn profile(self) -> Profile {
        let v = self.version();
        Profile {
            kernel: self,
            // "VFS: use synchronize_rcu_expedited() in namespace_unlock()" (NeilBrown,
            // posted 2017-10-26, commit id not known): fs/namespace.c's namespace_unlock
            // calls synchronize_rcu() at 4.15.18, 4.16.13, 4.19.0 and 4.20.1 and
            // synchronize_rcu_expedited() from 5.0.1 on. Before 5.0 every umount waited a
            // normal grace period (the seed thread's 100 s for 5,000 tmpfs on 4.14).
            namespace_gp: if v.0 < EXPEDITED_UMOUNT.0 {
                Gp::Normal
            } else {
                Gp::Expedited
            },
            // Linux 6.7 (shrinker_alloc/shrinker_register/shrinker_free) made the
            // superblock's shrinker dynamically allocated; unregister_shrinker is gone.
            teardown: if v.0 > 6 || (v.0 == 6 && v.1 >= 7) {
                Probe::ShrinkerFree
            } else {
                Probe::UnregisterShrinker
            },
            // 4.14 and 6.1 unregister_shrinker: down_write(&shrinker_rwsem), list_del,
            // up_write, kfree. 6.7+ shrinker_free: drop the initial reference,
            // wait_for_completion of in-flight lookups, unlink under shrinker_mutex, free
            // by call_rcu. Neither waits for a grace period: the synchronize_srcu version
            // existed only during the 6.4 development cycle (reverted before 6.4), which the
            // ramfs-stress and memcg-shrink scenarios keep as variants.
            teardown_waits: false,
            // Every profile: the last mntput of a umount is delayed to task work
            // (mntput_no_expire -> task_work_add(cleanup_mnt), since 3.18), which runs on
            // the way back to user space, after the syscall's exit tracepoint. So
            // deactivate_locked_super is no part of umount(2)'s latency and no traced
            // function encloses it.
            deactivate_in_task_work: true,
            // rcu_blocking_is_gp() up to 6.0: on a kernel without CONFIG_PREEMPTION, with
            // one CPU online, synchronize_rcu() returns at once (any context switch is a
            // grace period). "rcu: Disable run-time single-CPU grace-period optimization"
            // (6.1) removed that; since then only early boot takes the shortcut.
            // Tree SRCU (4.12+): synchronize_srcu() runs as synchronize_srcu_expedited()
            // when srcu_might_be_idle(): no callbacks queued on this CPU, no grace period in
            // progress, and at least exp_holdoff (DEFAULT_SRCU_EXP_HOLDOFF, 25 us) since
            // the last one ended.
            rcu: RcuConfig {
                single_cpu_shortcut: v.0 < 6,
                srcu_idle_expedites: true,
                srcu_exp_holdoff_ns: 25_000,
            },
            // lock:contention_begin/end appeared in 5.19: older kernels give tracer no
            // inode-lock waits.
            lock_contention_tracepoints: v.0 > 5,
            // 4.14 through 6.12 vfs_rmdir: inode_lock(victim) (the parent's is held by
            // do_rmdir), ->rmdir, shrink_dcache_parent, S_DEAD, inode_unlock, dput,
            // d_delete: the pruning runs under both inode locks.
            prune_under_lock: true,
            // EEVDF replaced CFS in 6.6 (147f3efaa241, "sched/fair: Implement an EEVDF-like
            // scheduling policy").
            sched: if v.0 > 6 || (v.0 == 6 && v.1 >= 6) {
                Sched::Eevdf
            } else {
                Sched::Cfs
            },
        }
    }
}

/// The fair scheduler of a kernel, as far as the model needs it: how long a task runs
/// before a task that woke up (a grace period's kworker, a waiter it wakes) gets its CPU.
///
/// Both check the running task's slice on the tick only (`sched_feat(HRTICK)` is off by
/// default) and both scale their base figures by `1 + ilog2(min(CPUs, 8))`
/// (`get_update_sysctl_factor`, `SCHED_TUNABLESCALING_LOG`, the default): 2 on the VM's 2
/// CPUs. They differ on a wakeup (see [`Sched::wakeup_preempts`]): CFS lets a task that slept
/// long enough take the CPU at once, EEVDF lets the running task finish its slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sched {
    /// CFS (up to 6.5): `check_preempt_tick` preempts the running task once it has run its
    /// ideal slice, `sched_latency` (6 ms, scaled) shared among the runnable tasks, never
    /// less than `sched_min_granularity` (0.75 ms, scaled).
    Cfs,
    /// EEVDF (6.6 on): the running task is preempted at the tick once it has used its
    /// request, `sysctl_sched_base_slice` (0.75 ms, scaled), whatever the number of tasks.
    Eevdf,
}

impl Sched {
    /// How long a task runs before the tick may preempt it, on `ncpus` CPUs with
    /// `nr_running` runnable tasks on its CPU.
    #[must_use]
    pub fn slice_ns(self, ncpus: usize, nr_running: usize) -> u64 {
        let factor = 1 + u64::from(ncpus.clamp(1, 8).ilog2());
        let nr = u64::try_from(nr_running.max(1)).unwrap_or(u64::MAX);
        match self {
            Sched::Cfs => {
                let (latency, min_gran) = (6_000_000 * factor, 750_000 * factor);
                // __sched_period: stretched once more than sched_nr_latency (8) run.
                let period = if nr > 8 {
                    nr.saturating_mul(min_gran)
                } else {
                    latency
                };
                (period / nr).max(min_gran)
            }
            Sched::Eevdf => 750_000 * factor,
        }
    }

    /// Whether a task waking after `slept_ns` asleep takes the CPU from the running task at
    /// once (wakeup preemption), on `ncpus` CPUs.
    ///
    /// CFS (6.1 `kernel/sched/fair.c`): `place_entity` puts a waking task at
    /// `max(its vruntime, min_vruntime - sched_latency / 2)` (`GENTLE_FAIR_SLEEPERS`), so it is
    /// credited with the time it slept, up to 3 ms (scaled); `check_preempt_wakeup` then
    /// preempts the running task when the woken one is more than `sched_wakeup_granularity`
    /// (1 ms, scaled) behind it. The running task is taken as at `min_vruntime`, so a task
    /// that slept longer than the granularity preempts: a kworker woken for a grace period
    /// (it sleeps between work items) and a waiter woken after a wait of milliseconds.
    ///
    /// EEVDF (6.6 on, `RUN_TO_PARITY`, a default feature): `set_next_entity` marks the running
    /// task's deadline as protected and `pick_eevdf` keeps it on the CPU until the deadline,
    /// one slice after it was picked: the tick decides. `pick_eevdf` drops that protection
    /// for a running task that is no longer eligible (it has run ahead of the queue's
    /// weighted average), which the model leaves out: on 6.12 the tick-only hand-overs
    /// predicted the concurrent umounts within 2x (docs/benchmarks.md, model-fit).
    #[must_use]
    pub fn wakeup_preempts(self, ncpus: usize, slept_ns: u64) -> bool {
        let factor = 1 + u64::from(ncpus.clamp(1, 8).ilog2());
        match self {
            Sched::Cfs => slept_ns.min(3_000_000 * factor) > 1_000_000 * factor,
            Sched::Eevdf => false,
        }
    }

    /// How long a kworker has slept when it is woken for work: longer than any sleeper
    /// credit, as they sleep between work items.
    pub const KWORKER_SLEPT_NS: u64 = u64::MAX;
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Kernel {
    type Err = KernelError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        KERNELS
            .into_iter()
            .find(|k| k.name() == s.trim())
            .ok_or_else(|| KernelError::Unknown(s.to_owned()))
    }
}

/// `MAJOR.MINOR` at the start of a release string.
fn version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.trim().split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// What a kernel does on the modelled paths (see [`Kernel::profile`] for the sources).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "each is one independent fact of the kernel's code, cited where it is set"
)]
pub struct Profile {
    /// The kernel.
    pub kernel: Kernel,
    /// The grace period `namespace_unlock` waits for on every umount.
    pub namespace_gp: Gp,
    /// The superblock's shrinker teardown: `unregister_shrinker` or `shrinker_free`.
    pub teardown: Probe,
    /// Whether the teardown waits for an SRCU grace period.
    pub teardown_waits: bool,
    /// `deactivate_locked_super` runs as task work after umount(2)'s exit, outside it.
    pub deactivate_in_task_work: bool,
    /// What RCU and SRCU do by themselves (the one-CPU shortcut, SRCU's idle expedite).
    pub rcu: RcuConfig,
    /// The `lock:contention_*` tracepoints exist, so inode-lock waits are seen.
    pub lock_contention_tracepoints: bool,
    /// `shrink_dcache_parent` runs inside `vfs_rmdir`, under both inode locks.
    pub prune_under_lock: bool,
    /// The fair scheduler: how long a woken task waits for a busy CPU.
    pub sched: Sched,
}

/// Where `--kernel` takes the profile from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Choice {
    /// The capture's kernel when calibrating, else the running one.
    #[default]
    Auto,
    /// This one.
    Fixed(Kernel),
}

impl FromStr for Choice {
    type Err = KernelError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim() == "auto" {
            Ok(Choice::Auto)
        } else {
            s.parse().map(Choice::Fixed)
        }
    }
}

/// Resolve `choice`: a fixed profile as is; `auto` from `capture_kernel` (the calibration
/// capture's `uname -r`) if given, else from `running` (this host's). Returns the profile
/// and a sentence saying where it came from.
#[must_use]
pub fn resolve(
    choice: Choice,
    capture_kernel: Option<&str>,
    running: Option<&str>,
    fallback: Kernel,
) -> (Kernel, String) {
    if let Choice::Fixed(k) = choice {
        return (k, format!("Linux {k} (--kernel)"));
    }
    for (release, whose) in [(capture_kernel, "the capture's"), (running, "this host's")] {
        let Some(release) = release else { continue };
        if let Ok((k, exact)) = Kernel::from_release(release) {
            let how = if exact {
                String::new()
            } else {
                format!(", which runs {k}'s code on these paths")
            };
            return (k, format!("Linux {k}: {whose} kernel is {release}{how}"));
        }
    }
    (
        fallback,
        format!("Linux {fallback}: no kernel release known, the scenario's own"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_map_to_the_profile_with_the_same_code() {
        let k = |r| Kernel::from_release(r).unwrap();
        assert_eq!(k("6.1.0-57-cloud-amd64"), (Kernel::V6_1, true));
        assert_eq!(k("6.12.95+deb12-cloud-amd64"), (Kernel::V6_12, true));
        assert_eq!(k("6.18.44-fc-v769"), (Kernel::V6_12, false));
        assert_eq!(k("4.14.0"), (Kernel::V4_14, true));
        assert_eq!(k("5.10.0-30-amd64"), (Kernel::V6_1, false));
        // namespace_unlock went expedited in 5.0: 4.19 and 4.20 still wait a full grace
        // period, as 4.14 does.
        assert_eq!(k("4.19.0-27-amd64"), (Kernel::V4_14, false));
        assert_eq!(k("4.20.1"), (Kernel::V4_14, false));
        assert_eq!(k("5.0.1"), (Kernel::V6_1, false));
        assert_eq!(k("7.3.1"), (Kernel::V7_3, true));
        assert!(Kernel::from_release("linux").is_err());
    }

    #[test]
    fn profiles_follow_each_kernels_code() {
        let p = Kernel::V4_14.profile();
        assert_eq!(p.namespace_gp, Gp::Normal);
        assert_eq!(p.teardown, Probe::UnregisterShrinker);
        assert!(p.rcu.single_cpu_shortcut && !p.lock_contention_tracepoints);
        let p = Kernel::V6_1.profile();
        assert_eq!(p.namespace_gp, Gp::Expedited);
        assert_eq!(p.teardown, Probe::UnregisterShrinker);
        assert!(!p.rcu.single_cpu_shortcut && p.lock_contention_tracepoints);
        for k in [Kernel::V6_12, Kernel::V7_3] {
            let p = k.profile();
            assert_eq!(p.namespace_gp, Gp::Expedited);
            assert_eq!(p.teardown, Probe::ShrinkerFree);
        }
        assert!(
            KERNELS
                .iter()
                .all(|k| k.profile().deactivate_in_task_work && !k.profile().teardown_waits)
        );
    }

    /// Each profile's code is what the findings' kernel facts (each read in the kernel's
    /// source at a release) say a kernel of its version has; so is the release at which
    /// `--kernel auto` moves from one profile to the next.
    #[test]
    fn profiles_agree_with_the_kernel_facts_the_findings_rely_on() {
        use tracer_core::findings::kernel::{
            KernelVersion, LAZY_UMOUNT_DEFERRED, NAMESPACE_UNLOCK_EXPEDITED,
            RMDIR_PRUNE_AFTER_UNLOCK, SHRINKER_FREE,
        };
        use tracer_core::findings::{Presence, Since};
        for k in KERNELS {
            let (major, minor) = k.version();
            let v = Some(KernelVersion::new(major, minor));
            let p = k.profile();
            let expedited = NAMESPACE_UNLOCK_EXPEDITED.since.presence(v) == Presence::Yes;
            assert_eq!(p.namespace_gp == Gp::Expedited, expedited, "{k}");
            let shrinker_free = SHRINKER_FREE.since.presence(v) == Presence::Yes;
            assert_eq!(p.teardown == Probe::ShrinkerFree, shrinker_free, "{k}");
            // No release read prunes outside the inode locks.
            assert_ne!(
                RMDIR_PRUNE_AFTER_UNLOCK.since.presence(v),
                Presence::Yes,
                "{k}"
            );
            assert!(p.prune_under_lock, "{k}");
            // No release read defers a lazy umount's wait: every profile's umount waits in
            // namespace_unlock, whatever the flags (the model has no lazy umount).
            assert_ne!(LAZY_UMOUNT_DEFERRED.since.presence(v), Presence::Yes, "{k}");
        }
        let Since::Version { major, minor, .. } = NAMESPACE_UNLOCK_EXPEDITED.since else {
            panic!("the expedited umount is dated by a release");
        };
        assert_eq!(EXPEDITED_UMOUNT, (major, minor));
        // The last release read before it, and the first read with it.
        let gp = |r| Kernel::from_release(r).unwrap().0.profile().namespace_gp;
        assert_eq!(gp("4.20.1"), Gp::Normal);
        assert_eq!(gp("5.0.1"), Gp::Expedited);
    }

    #[test]
    fn slices_are_the_schedulers_defaults_scaled_for_the_cpus() {
        // 2 CPUs: factor 2. CFS shares 12 ms among the runnable tasks, down to 1.5 ms.
        assert_eq!(Sched::Cfs.slice_ns(2, 2), 6_000_000);
        assert_eq!(Sched::Cfs.slice_ns(2, 10), 1_500_000);
        // EEVDF: 1.5 ms whatever the load; 8 CPUs and more: factor 4.
        assert_eq!(Sched::Eevdf.slice_ns(2, 3), 1_500_000);
        assert_eq!(Sched::Eevdf.slice_ns(64, 1), 3_000_000);
        assert_eq!(Kernel::V6_1.profile().sched, Sched::Cfs);
        // CFS: a sleep credited beyond the 2 ms wakeup granularity (on 2 CPUs) preempts; a
        // short one does not; EEVDF never preempts on a wakeup.
        assert!(Sched::Cfs.wakeup_preempts(2, 2_500_000));
        assert!(Sched::Cfs.wakeup_preempts(2, Sched::KWORKER_SLEPT_NS));
        assert!(!Sched::Cfs.wakeup_preempts(2, 1_500_000));
        assert!(!Sched::Cfs.wakeup_preempts(1, 900_000));
        assert!(!Sched::Eevdf.wakeup_preempts(2, Sched::KWORKER_SLEPT_NS));
        assert_eq!(Kernel::V6_12.profile().sched, Sched::Eevdf);
    }

    #[test]
    fn auto_prefers_the_capture_then_the_host() {
        let auto = Choice::Auto;
        assert_eq!(
            resolve(auto, Some("6.1.0-57"), Some("6.12.1"), Kernel::V4_14).0,
            Kernel::V6_1
        );
        assert_eq!(
            resolve(auto, None, Some("6.12.1"), Kernel::V4_14).0,
            Kernel::V6_12
        );
        assert_eq!(resolve(auto, None, None, Kernel::V4_14).0, Kernel::V4_14);
        let fixed: Choice = "4.14".parse().unwrap();
        assert_eq!(
            resolve(fixed, Some("6.1.0"), None, Kernel::V6_12).0,
            Kernel::V4_14
        );
        assert!("5.4".parse::<Choice>().is_err());
    }
}
