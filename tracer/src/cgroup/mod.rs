//! cgroup v2 ids (what `bpf_get_current_cgroup_id` returns) to paths.
//!
//! A cgroup's id is the inode number of its directory in the cgroup2 filesystem, so a walk
//! of the mount names every live cgroup. Ids with no directory belong to cgroups removed
//! since: they collapse into one "(gone)" row instead of growing the label set without bound.

use std::{
    collections::BTreeMap,
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
};

/// Most cgroups a walk records; beyond this, further ids are reported as their number.
pub const MAX_CGROUPS: usize = 16_384;

/// Where the cgroup2 filesystem is mounted, from mountinfo text.
#[must_use]
pub fn cgroup2_mount(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
        let (left, right) = line.split_once(" - ")?;
        let fstype = right.split_whitespace().next()?;
        (fstype == "cgroup2").then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
    })
}

/// The running system's cgroup2 mount point.
#[must_use]
pub fn find_cgroup2() -> Option<PathBuf> {
    cgroup2_mount(&std::fs::read_to_string("/proc/self/mountinfo").ok()?)
}

/// Map every cgroup under `root` to its path relative to it (`/` for the root), up to
/// [`MAX_CGROUPS`].
#[must_use]
pub fn walk(root: &Path) -> BTreeMap<u64, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![(root.to_path_buf(), "/".to_owned())];
    while let Some((dir, rel)) = stack.pop() {
        if out.len() >= MAX_CGROUPS {
            break;
        }
        let Ok(meta) = std::fs::metadata(&dir) else { continue };
        out.insert(meta.ino(), rel.clone());
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                let name = entry.file_name().to_string_lossy().into_owned();
                let child = if rel == "/" { format!("/{name}") } else { format!("{rel}/{name}") };
                stack.push((entry.path(), child));
            }
        }
    }
    out
}

/// The id of the cgroup at `path` (absolute, or relative to the cgroup2 mount).
///
/// # Errors
/// When there is no cgroup2 mount or no such cgroup.
pub fn id_of(path: &Path) -> Result<u64, String> {
    let full = if path.is_absolute() && path.exists() {
        path.to_path_buf()
    } else {
        let root = find_cgroup2().ok_or("no cgroup2 filesystem is mounted")?;
        root.join(path.strip_prefix("/").unwrap_or(path))
    };
    std::fs::metadata(&full)
        .map(|m| m.ino())
        .map_err(|e| format!("cgroup {}: {e}", full.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_cgroup2_mount_in_a_hybrid_layout() {
        let text = "\
25 30 0:23 / /sys rw,nosuid shared:7 - sysfs sysfs rw
33 25 0:28 / /sys/fs/cgroup ro shared:9 - tmpfs tmpfs ro,mode=755
34 33 0:29 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw,nsdelegate
35 33 0:30 / /sys/fs/cgroup/memory rw shared:11 - cgroup cgroup rw,memory
";
        assert_eq!(cgroup2_mount(text), Some(PathBuf::from("/sys/fs/cgroup/unified")));
        assert_eq!(cgroup2_mount("25 30 0:23 / /sys rw - sysfs sysfs rw\n"), None);
    }

    #[test]
    fn walk_names_directories_by_inode() {
        let dir = std::env::temp_dir().join(format!("tracer-cgroup-walk-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("a/b")).unwrap();
        let map = walk(&dir);
        let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
        assert_eq!(map[&ino(&dir)], "/");
        assert_eq!(map[&ino(&dir.join("a/b"))], "/a/b");
        assert_eq!(map.len(), 3);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
