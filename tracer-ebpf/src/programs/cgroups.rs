//! cgroup v2 directories made and removed, with their paths, sent to userspace so that
//! short-lived cgroups keep their names.

use aya_ebpf::{
    EbpfContext as _, helpers::generated::bpf_probe_read_kernel_str, macros::tracepoint,
    programs::TracePointContext,
};
use tracer_common::maps::{CGROUP_PATH_MAX, CGROUP2_HIERARCHY, CgroupEvent, Loss};

use crate::{
    globals::{CGROUP_TP_ID, CGROUP_TP_PATH, CGROUP_TP_ROOT, global},
    maps::CGROUP_EVENTS,
    record::lose,
};

/// `cgroup:cgroup_mkdir(root, id, level, path)`.
#[tracepoint]
pub fn cgroup_mkdir(ctx: TracePointContext) -> u32 {
    cgroup_event(&ctx, 0);
    0
}

/// `cgroup:cgroup_rmdir(root, id, level, path)`.
#[tracepoint]
pub fn cgroup_rmdir(ctx: TracePointContext) -> u32 {
    cgroup_event(&ctx, 1);
    0
}

/// Send one cgroup v2 event; v1 hierarchies (a hybrid layout has several) are skipped:
/// their ids are not what `bpf_get_current_cgroup_id` returns.
#[inline(always)]
fn cgroup_event(ctx: &TracePointContext, removed: u32) -> Option<()> {
    let offset = |g: &'static u32| usize::try_from(global(g)).unwrap_or(0);
    let root: u32 = unsafe { ctx.read_at(offset(&CGROUP_TP_ROOT)) }.ok()?;
    if root != CGROUP2_HIERARCHY {
        return None;
    }
    let id: u64 = unsafe { ctx.read_at(offset(&CGROUP_TP_ID)) }.ok()?;
    // __data_loc: the string's offset in the record in the low 16 bits, its length above.
    let loc: u32 = unsafe { ctx.read_at(offset(&CGROUP_TP_PATH)) }.ok()?;
    let Some(mut entry) = CGROUP_EVENTS.reserve::<CgroupEvent>(0) else {
        lose(Loss::CgroupEventDrops);
        return None;
    };
    let event = entry.as_mut_ptr();
    let src = unsafe { ctx.as_ptr().cast::<u8>().add((loc & 0xffff) as usize) };
    // SAFETY: `event` is reserved memory the size of a CgroupEvent; the helper writes at
    // most CGROUP_PATH_MAX bytes into its path and always NUL-terminates.
    let copied = unsafe {
        (*event).id = id;
        (*event).removed = removed;
        bpf_probe_read_kernel_str(
            core::ptr::addr_of_mut!((*event).path).cast(),
            CGROUP_PATH_MAX as u32,
            src.cast(),
        )
    };
    if copied <= 0 {
        entry.discard(0);
        return None;
    }
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "1..=512"
    )]
    let len = (copied - 1) as u32;
    unsafe { (*event).len = len };
    entry.submit(0);
    Some(())
}
