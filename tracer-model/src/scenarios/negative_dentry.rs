//! `negative-dentry-rmdir`: remove a directory holding millions of negative dentries while
//! another task lists a directory (Yafang Shao and Linus Torvalds, 2024: "vfs: move dentry
//! shrinking outside the inode lock in `rmdir()`").

use tracer_core::snapshot::Probe;

use super::{
    spec::{Ctx, Figure, Outcome, Runner, Spec, secs},
    variant::{RmdirVariant, Variant},
};
use crate::engine::Engine;
use crate::{
    kernel::Kernel,
    params::{DentrySetup, Fs, GpCosts, LookupIn, Populate, Setup},
    paths::{self, Dirs, Prune},
    sim::{Class, Step, World},
};

/// The scenario.
pub const SCENARIO: Spec = Spec {
    name: "negative-dentry-rmdir",
    about: "Make N negative dentries in a directory, then rmdir it while `ls` runs beside. \
            rmdir prunes every child dentry (shrink_dcache_parent): the thread measured \
            1.892 s for 10 million (on a filesystem the mail does not name) and 0.001 s on \
            tmpfs, which never keeps negative \
            dentries. Pruning under the inode locks makes the `ls` wait as long.",
    variants: &[
        (
            Variant::Rmdir(RmdirVariant::PruneUnderLock),
            "the --kernel's code (4.14 to 6.12): shrink_dcache_parent with both inode locks held",
        ),
        (
            Variant::Rmdir(RmdirVariant::PruneAfterUnlock),
            "Linus's v2: prune after dropping both inode locks",
        ),
        (
            Variant::Rmdir(RmdirVariant::PruneAfterVictimUnlock),
            "Linus's v1: prune after dropping only the victim's lock",
        ),
    ],
    kernel: Kernel::V6_12,
    defaults: || Setup::Dentry(DentrySetup::default()),
    run: Runner::Dentry(run),
};

const PROBES: &[Probe] = &[
    Probe::SysUnlink,
    Probe::DDelete,
    Probe::SysRmdir,
    Probe::VfsRmdir,
    Probe::ShrinkDcacheParent,
    Probe::InodeLockHold,
    Probe::PruneUnderInodeLock,
    Probe::InodeLockWait,
];

fn run(ctx: &Ctx, variant: RmdirVariant, setup: &DentrySetup) -> Outcome {
    let p = &setup.dentry;
    let prune = match variant {
        RmdirVariant::PruneUnderLock if ctx.profile.prune_under_lock => Prune::UnderLock,
        RmdirVariant::PruneUnderLock | RmdirVariant::PruneAfterUnlock => Prune::AfterUnlock,
        RmdirVariant::PruneAfterVictimUnlock => Prune::AfterVictimUnlock,
    };
    let mut eng = Engine::new(ctx.seed);
    // No grace period on these paths: the machinery keeps its defaults.
    let mut w = World::new(
        setup.cpus.clone(),
        GpCosts::default(),
        ctx.profile,
        ctx.description.clone(),
        PROBES,
    );
    if ctx.timeline {
        w.keep_timeline();
    }
    let dirs = Dirs {
        parent: w.lock(true),
        victim: w.lock(true),
    };

    // Phase 1: fill the directory. tmpfs's always_delete_dentry drops each dentry at once.
    let unlink = p.populate == Populate::Unlink;
    let fill = Step::Populate {
        n: p.negatives,
        ns: p.populate_ns,
        unlink,
        retain: p.fs == Fs::Ext4,
    };
    w.spawn(&mut eng, 0, vec![fill], 1, 1, Class::Main);
    w.run(&mut eng, u64::MAX);
    let filled = w.last_task_end();
    let negatives = w.negatives;

    // Phase 2: rmdir, and `ls` beside it.
    w.spawn(
        &mut eng,
        filled,
        paths::rmdir(p, prune, dirs, p.fs == Fs::Ext4),
        1,
        1,
        Class::Main,
    );
    let dir = if p.lookup_in == LookupIn::Parent {
        dirs.parent
    } else {
        dirs.victim
    };
    for i in 0..p.lookups {
        let at = filled + p.lookup_after_ns + i * p.lookup_interval_ns;
        w.spawn(&mut eng, at, paths::ls(p, dir), 1, 1, Class::Main);
    }
    w.run(&mut eng, u64::MAX);
    let span = w.last_task_end();
    let rmdir = w.calls(Probe::SysRmdir, None);
    let prune_calls = w.calls(Probe::ShrinkDcacheParent, None);
    let prune_calls = if prune_calls.count() > 0 {
        prune_calls
    } else {
        w.calls(Probe::ShrinkDcacheParent, Some(Probe::VfsRmdir))
    };
    let waits = w.calls(Probe::InodeLockWait, None);
    let events = eng.handled();
    let timeline = w.take_timeline();
    let snapshot = w.finish(span);
    let ms = |ns: Option<u64>| secs(ns.unwrap_or(0)) * 1e3;
    #[expect(clippy::cast_precision_loss, reason = "a figure")]
    let figures = vec![
        Figure::new("negative_dentries", negatives as f64, ""),
        Figure::new("populate", secs(filled), "s"),
        Figure::new("rmdir", secs(rmdir.max_ns().unwrap_or(0)), "s"),
        Figure::new("prune", secs(prune_calls.max_ns().unwrap_or(0)), "s"),
        Figure::new("lookup_wait_max", ms(waits.max_ns()), "ms"),
    ];
    Outcome {
        snapshot,
        figures,
        events,
        timeline,
    }
}
