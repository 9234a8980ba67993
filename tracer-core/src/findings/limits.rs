//! The figures the rules judge by, each with its reason: shared by the rules of every path
//! (`rules`, `dcache`).

/// Below a tenth of the wall time (or window) a cost is no finding.
pub const NOTABLE_PERCENT: f64 = 10.0;
/// From half of the wall time (or window) a cost dominates the work.
pub const DOMINANT_PERCENT: f64 = 50.0;
/// The least time, in all, that is a finding; also the least single stall.
pub const NOTICEABLE_NS: u64 = 100_000_000;
/// The least share of the inode-lock holds that pruning took for a wait to count as its.
pub const PRUNING_HELD_PERCENT: f64 = 50.0;
/// A stall of seconds: the seed thread's `ls` behind a rmdir.
pub const STALL_NS: u64 = 1_000_000_000;
/// A mean own time of `unregister_shrinker` past which it waited for `shrinker_rwsem`.
pub const LOCK_WAITED_NS: u64 = 1_000_000;
/// The fewest negative dentries a `shrink_dcache_parent` call must prune on average for its
/// time over the dentries to be a cost per dentry. A call costs something whatever it prunes
/// (its walk's set-up, the locks), which a fit of time over dentries cannot tell apart: a
/// build's 120 small prunes on 6.12 (some hundred objects removed over them) came to 31 µs
/// "per dentry", 164 times the seed's. At a thousand a call the dentries' own time (189 µs
/// at the seed's cost) is six times such a call's, and the fit within the 1.25x its checks
/// allow.
pub const MIN_PRUNED_PER_CALL: u64 = 1_000;
