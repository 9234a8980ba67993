//! What the kernel programs need to know of this kernel's layout, from its BTF: struct
//! offsets (the dentry and inode ones, `task_struct`'s `real_parent` and `tgid`), `d_flags`
//! values, `vfs_rmdir`'s argument order. aya's Rust programs have no CO-RE relocations, so
//! these are handed to them as globals at load time.

use tracer_common::maps;

use crate::{
    arch::Arch,
    btf::{Btf, BtfError},
};

/// The globals the programs read the kernel's layout from.
#[derive(Debug, PartialEq, Eq)]
pub struct KernelLayout {
    /// Globals to set: (name, value).
    pub globals: Vec<(&'static str, u32)>,
    /// What was not in BTF and was assumed instead, one sentence each (`--verbose`).
    pub assumed: Vec<String>,
}

/// The kernel's layout from its BTF (`raw`, or why it could not be read).
///
/// # Errors
/// Why the struct offsets are missing: no BTF, or a struct or member not in it.
pub fn kernel_layout(raw: Result<&[u8], &BtfError>) -> Result<KernelLayout, BtfError> {
    let btf = Btf::parse(raw.map_err(Clone::clone)?).map_err(BtfError::in_source)?;
    let off = |s: &str, m: &str| btf.offset_of(s, m);
    let mut globals = vec![
        (maps::DENTRY_D_INODE, off("dentry", "d_inode")?),
        (maps::DENTRY_D_FLAGS, off("dentry", "d_flags")?),
        (maps::DENTRY_D_HASH_PPREV, off("dentry", "d_hash.pprev")?),
        (maps::INODE_I_RWSEM, off("inode", "i_rwsem")?),
        (maps::TASK_REAL_PARENT, off("task_struct", "real_parent")?),
        (maps::TASK_TGID, off("task_struct", "tgid")?),
    ];
    let mut assumed = Vec::new();
    // Newer kernels declare the DCACHE_ flags in `enum dentry_flags` (6.18 and 7.3 do, 6.12
    // does not); older ones as macros, absent from BTF, with these values since 5.9.
    let mut dies = 0;
    for (name, fallback) in [
        ("DCACHE_OP_DELETE", maps::DCACHE_OP_DELETE),
        ("DCACHE_DONTCACHE", maps::DCACHE_DONTCACHE),
    ] {
        dies |= if let Some(Ok(v)) = btf.enum_value(name).map(u32::try_from) {
            v
        } else {
            assumed.push(format!(
                "{name} is not in this kernel's BTF (a macro there, not an enum): assumed \
                 {fallback:#x}"
            ));
            fallback
        };
    }
    globals.push((maps::DCACHE_DIES_AT_DPUT, dies));
    let rmdir_params = btf.parameters("vfs_rmdir");
    if let Some(params) = &rmdir_params {
        globals.push((
            maps::VFS_RMDIR_ARGS,
            u32::try_from(params.len()).unwrap_or(u32::MAX),
        ));
    }
    globals.push((
        maps::VFS_RMDIR_DIR_ARG,
        rmdir_dir_arg(rmdir_params, &mut assumed),
    ));
    // The third syscall argument in the user's registers (x86-64's `dx`, arm64's x2), which
    // the unlinkat kprobe and fentry read its flags from.
    if let Some(arch) = Arch::THIS {
        let (member, past, fallback) = arch.pt_regs_arg3();
        match btf.offset_of("pt_regs", member) {
            Ok(off) => globals.push((maps::PT_REGS_ARG3, off + past)),
            Err(e) => assumed.push(format!(
                "pt_regs.{member} is not in this kernel's BTF ({e}): assumed the third \
                 syscall argument at offset {fallback} ({})",
                arch.name()
            )),
        }
    }
    Ok(KernelLayout { globals, assumed })
}

/// Where `dir` is among `vfs_rmdir`'s parameters (`dentry` follows): 0 before Linux 5.12,
/// 1 since (the mount's user namespace, later its idmap, comes first).
fn rmdir_dir_arg(params: Option<Vec<String>>, assumed: &mut Vec<String>) -> u32 {
    let found = params.as_deref().and_then(|p| {
        let dir = p.iter().position(|n| n == "dir")?;
        (p.get(dir + 1).map(String::as_str) == Some("dentry"))
            .then(|| u32::try_from(dir).ok())
            .flatten()
    });
    found.unwrap_or_else(|| {
        assumed.push(format!(
            "vfs_rmdir's parameters are not (…, dir, dentry, …) in this kernel's BTF ({}): \
             assumed dir is the second, as since Linux 5.12",
            params.map_or_else(|| "absent".to_owned(), |p| p.join(", "))
        ));
        1
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vfs_rmdir_argument_order_follows_btf() {
        let names = |n: &[&str]| Some(n.iter().map(|s| (*s).to_owned()).collect());
        let mut assumed = Vec::new();
        // 5.10, 6.1, 6.12 and 7.3 as their BTF declares them.
        assert_eq!(rmdir_dir_arg(names(&["dir", "dentry"]), &mut assumed), 0);
        assert_eq!(
            rmdir_dir_arg(names(&["mnt_userns", "dir", "dentry"]), &mut assumed),
            1
        );
        assert_eq!(
            rmdir_dir_arg(
                names(&["idmap", "dir", "dentry", "delegated_inode"]),
                &mut assumed
            ),
            1
        );
        assert!(assumed.is_empty());
        // Unknown: the 5.12+ order, and said so.
        assert_eq!(rmdir_dir_arg(None, &mut assumed), 1);
        assert_eq!(rmdir_dir_arg(names(&["a", "b"]), &mut assumed), 1);
        assert_eq!(assumed.len(), 2);
        assert!(assumed[1].contains("(a, b)"), "{}", assumed[1]);
    }

    #[test]
    fn this_kernels_layout_has_the_dcache_flags_that_drop_dentries() {
        let raw = crate::btf::read_sys_fs();
        let layout = kernel_layout(raw.as_deref()).unwrap();
        let global = |name| {
            layout
                .globals
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| *v)
        };
        // Both flags, whether read from BTF or assumed: OP_DELETE (tmpfs up to 6.x) and
        // DONTCACHE (tmpfs on 7.x).
        assert_eq!(global(maps::DCACHE_DIES_AT_DPUT), Some(0x88));
        assert_eq!(
            global(maps::VFS_RMDIR_DIR_ARG),
            Some(1),
            "{:?}",
            layout.assumed
        );
    }
}
