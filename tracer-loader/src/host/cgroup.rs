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

/// The root of the cgroup2 hierarchy cgroups are named under: `given` (`--cgroup-root`,
/// where the host's hierarchy is mounted, e.g. `/host/sys/fs/cgroup` in a container whose
/// own `/sys/fs/cgroup` is its private cgroup namespace), else the mount found in
/// `/proc/self/mountinfo` (`Ok(None)` when there is none).
///
/// # Errors
/// When `given` is not the root of a cgroup2 hierarchy: not a directory, or without the
/// `cgroup.controllers` and `cgroup.procs` files every cgroup2 directory has (a cgroup v1
/// directory has no `cgroup.controllers`), or a cgroup under the root (it has
/// `cgroup.events`, which the root lacks).
pub fn cgroup2_root(given: Option<&Path>) -> Result<Option<PathBuf>, CgroupRootError> {
    let Some(root) = given else {
        return Ok(find_cgroup2());
    };
    if !root.is_dir() {
        return Err(CgroupRootError::NotADirectory(root.to_path_buf()));
    }
    if !root.join("cgroup.controllers").is_file() || !root.join("cgroup.procs").is_file() {
        return Err(CgroupRootError::NotCgroup2(root.to_path_buf()));
    }
    if root.join("cgroup.events").exists() {
        return Err(CgroupRootError::NotTheRoot(root.to_path_buf()));
    }
    Ok(Some(root.to_path_buf()))
}

/// Why a `--cgroup-root` is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CgroupRootError {
    /// Not a directory.
    #[error(
        "--cgroup-root {}: not a directory (mount the host's /sys/fs/cgroup there)",
        .0.display()
    )]
    NotADirectory(PathBuf),
    /// A directory without the files every cgroup2 directory has.
    #[error(
        "--cgroup-root {}: not a cgroup2 hierarchy (no cgroup.controllers and cgroup.procs)",
        .0.display()
    )]
    NotCgroup2(PathBuf),
    /// A cgroup under the root.
    #[error(
        "--cgroup-root {}: a cgroup, not the root of the hierarchy (it has cgroup.events); \
         name the host's /sys/fs/cgroup",
        .0.display()
    )]
    NotTheRoot(PathBuf),
}

/// Why a cgroup could not be found or made.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// No cgroup2 filesystem is mounted.
    #[error("no cgroup2 filesystem is mounted")]
    NoCgroup2,
    /// This process is in no cgroup v2 (`/proc/self/cgroup` has no `0::` line).
    #[error("this process has no cgroup v2 path")]
    NoOwnPath,
    /// No cgroup at this path.
    #[error("cgroup {}: {}", .0.display(), .1)]
    NotFound(PathBuf, std::io::Error),
    /// The cgroup could not be made.
    #[error("{}: {}", .0.display(), .1)]
    Create(PathBuf, std::io::Error),
    /// The cgroup could not be made for want of write access to tracer's own.
    #[error(
        "{}: {}; run tracer in a cgroup delegated to its user, or grant it CAP_DAC_OVERRIDE",
        .0.display(),
        .1
    )]
    CreateDenied(PathBuf, std::io::Error),
    /// The cgroup made could not be read back.
    #[error("{0}")]
    Made(std::io::Error),
    /// Its path holds a NUL byte.
    #[error("{0}")]
    Nul(std::ffi::NulError),
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
        let Ok(meta) = std::fs::metadata(&dir) else {
            continue;
        };
        out.insert(meta.ino(), rel.clone());
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                let name = entry.file_name().to_string_lossy().into_owned();
                let child = if rel == "/" {
                    format!("/{name}")
                } else {
                    format!("{rel}/{name}")
                };
                stack.push((entry.path(), child));
            }
        }
    }
    out
}

/// The id of the cgroup at `path` (absolute, or relative to `root`, the cgroup2 root).
///
/// # Errors
/// When there is no cgroup2 mount or no such cgroup.
pub fn id_of(path: &Path, root: Option<&Path>) -> Result<u64, CgroupError> {
    let full = if path.is_absolute() && path.exists() {
        path.to_path_buf()
    } else {
        let root = root.ok_or(CgroupError::NoCgroup2)?;
        root.join(path.strip_prefix("/").unwrap_or(path))
    };
    match std::fs::metadata(&full) {
        Ok(m) => Ok(m.ino()),
        Err(e) => Err(CgroupError::NotFound(full, e)),
    }
}

/// This process's cgroup v2 path, from `/proc/self/cgroup` (`0::/PATH`).
#[must_use]
pub fn own_path() -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_owned)
}

/// What a capture's cgroup is called, before the pid of the tracer that made it.
const PREFIX: &str = "tracer-capture-";

/// Capture cgroups an earlier run left under `parent` (the cgroup at path `own`, this
/// process's): `tracer-capture-PID` whose PID is no longer a process in `own` (a tracer
/// killed by SIGKILL cannot remove its cgroup; its command may still run in it). Each
/// empty one is removed; one that still holds processes or cgroups is left and named with
/// them. Returns one sentence per cgroup found.
fn clean_stale(parent: &Path, own: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return Vec::new();
    };
    let mut said = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        // Alive and in our cgroup: a tracer running beside this one (a pid reused by an
        // unrelated process elsewhere does not keep the cgroup).
        let alive = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("0::"))
                .is_some_and(|p| p == own)
        });
        if alive || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let dir = entry.path();
        match std::fs::remove_dir(&dir) {
            Ok(()) => said.push(format!(
                "removed cgroup {} left by an earlier run (pid {pid}, no longer running)",
                dir.display()
            )),
            Err(e) => {
                let why = what_keeps(&dir);
                let why = if why.is_empty() {
                    e.to_string()
                } else {
                    why.join("; ")
                };
                said.push(format!(
                    "cgroup {} left by an earlier run (pid {pid}, no longer running) cannot be \
                     removed yet: {why}; it is removed by the next capture once empty",
                    dir.display()
                ));
            }
        }
    }
    said.sort();
    said
}

/// A cgroup made for one command, under the tracer's own cgroup (so the command keeps the
/// same ancestors, and their limits); removed on drop when empty.
#[derive(Debug)]
pub struct Transient {
    /// Its directory.
    pub dir: PathBuf,
    /// Its id.
    pub id: u64,
    /// `<dir>/cgroup.procs` as a C string, for the child to write to before exec.
    procs: std::ffi::CString,
}

impl Transient {
    /// Make `tracer-capture-<pid>` under this process's cgroup.
    ///
    /// # Errors
    /// No cgroup2 mount, or the directory cannot be made.
    pub fn create() -> Result<Self, CgroupError> {
        let root = find_cgroup2().ok_or(CgroupError::NoCgroup2)?;
        let own = own_path().ok_or(CgroupError::NoOwnPath)?;
        let parent = root.join(own.trim_start_matches('/'));
        for said in clean_stale(&parent, &own) {
            eprintln!("tracer: {said}");
        }
        let dir = parent.join(format!("{PREFIX}{}", std::process::id()));
        if let Err(e) = std::fs::create_dir(&dir) {
            // Not root: making a cgroup needs write access to tracer's own.
            return Err(if e.kind() == std::io::ErrorKind::PermissionDenied {
                CgroupError::CreateDenied(dir, e)
            } else {
                CgroupError::Create(dir, e)
            });
        }
        let id = std::fs::metadata(&dir).map_err(CgroupError::Made)?.ino();
        let procs = std::ffi::CString::new(
            dir.join("cgroup.procs")
                .into_os_string()
                .into_encoded_bytes(),
        )
        .map_err(CgroupError::Nul)?;
        Ok(Self { dir, id, procs })
    }

    /// What a child needs to move itself in (see [`enter_from_child`]).
    #[must_use]
    pub fn procs_file(&self) -> std::ffi::CString {
        self.procs.clone()
    }

    /// Whether process `pid`, a child not yet waited for, is in this cgroup. `cgroup.procs`
    /// no longer lists a child that has already exited (a command quicker than this check),
    /// but its `/proc/<pid>/cgroup` still names the cgroup until it is waited for.
    #[must_use]
    pub fn holds(&self, pid: u32) -> bool {
        let listed = std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .is_ok_and(|t| t.lines().any(|l| l.trim() == pid.to_string()));
        let name = self.dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
        listed
            || std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
                .is_ok_and(|t| in_cgroup_named(&t, name))
    }
}

/// Whether a `/proc/<pid>/cgroup` text puts the process in a cgroup called `name`: its
/// unified hierarchy's line (`0::/path`) ends with that name (a transient cgroup's name is
/// unique to the tracer that made it).
fn in_cgroup_named(proc_cgroup: &str, name: &str) -> bool {
    !name.is_empty()
        && proc_cgroup
            .lines()
            .filter_map(|l| l.strip_prefix("0::"))
            .any(|path| path.trim_end().rsplit('/').next() == Some(name))
}

/// Move the calling process into the cgroup whose `cgroup.procs` is `procs`. Only
/// async-signal-safe calls: it runs in the child between fork and exec.
///
/// # Errors
/// The kernel refused (e.g. a threaded or domain-invalid cgroup).
pub fn enter_from_child(procs: &std::ffi::CStr) -> std::io::Result<()> {
    // SAFETY: a valid C string, and plain open/write/close.
    unsafe {
        let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let ok = libc::write(fd, b"0".as_ptr().cast(), 1) == 1;
        let err = std::io::Error::last_os_error();
        libc::close(fd);
        if ok { Ok(()) } else { Err(err) }
    }
}

impl Drop for Transient {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            // Cgroups the command made and processes it left running keep it busy: name
            // them, so they can be found and removed.
            let why = what_keeps(&self.dir);
            let why = if why.is_empty() {
                e.to_string()
            } else {
                format!("{e}: {}", why.join("; "))
            };
            eprintln!("tracer: cgroup {} left in place: {why}", self.dir.display());
        }
    }
}

/// What keeps cgroup `dir` from being removed: the cgroups under it (paths relative to
/// it) and the processes in it and under it (pid and command name).
fn what_keeps(dir: &Path) -> Vec<String> {
    let mut children = Vec::new();
    let mut pids = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    // Bounded: a cgroup tree is not deep, but a command could make many.
    while let Some(d) = stack.pop() {
        if let Ok(procs) = std::fs::read_to_string(d.join("cgroup.procs")) {
            pids.extend(procs.split_whitespace().map(str::to_owned));
        }
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) && children.len() < 1000 {
                let path = entry.path();
                if let Ok(rel) = path.strip_prefix(dir) {
                    children.push(rel.display().to_string());
                }
                stack.push(path);
            }
        }
    }
    children.sort();
    let mut out = Vec::new();
    if !children.is_empty() {
        out.push(format!(
            "the command left cgroups in it: {} (rmdir them, deepest first)",
            shorten(&children)
        ));
    }
    if !pids.is_empty() {
        let named: Vec<String> = pids
            .iter()
            .map(|pid| {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
                match comm.trim() {
                    "" => pid.clone(),
                    comm => format!("{pid} ({comm})"),
                }
            })
            .collect();
        out.push(format!("processes still in it: {}", shorten(&named)));
    }
    out
}

/// The first ten of `items`, and how many more.
fn shorten(items: &[String]) -> String {
    let mut s = items
        .iter()
        .take(10)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > 10 {
        use std::fmt::Write as _;
        let _ = write!(s, " and {} more", items.len() - 10);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_is_placed_by_its_unified_cgroup_line() {
        let hybrid =
            "12:memory:/user.slice\n1:name=systemd:/user.slice\n0::/user.slice/tracer-capture-42\n";
        assert!(in_cgroup_named(hybrid, "tracer-capture-42"));
        assert!(!in_cgroup_named(hybrid, "tracer-capture-4"));
        assert!(!in_cgroup_named(
            "0::/tracer-capture-42/child\n",
            "tracer-capture-42"
        ));
        assert!(!in_cgroup_named(
            "12:memory:/tracer-capture-42\n",
            "tracer-capture-42"
        ));
        assert!(!in_cgroup_named("0::/\n", ""));
    }

    #[test]
    fn a_given_cgroup_root_is_used_when_it_is_a_cgroup2_root() {
        let dir = std::env::temp_dir().join(format!("tracer-cgroup-root-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let host = dir.join("host/sys/fs/cgroup");
        let child = host.join("kubepods.slice");
        std::fs::create_dir_all(&child).unwrap();
        // Not there, then a directory that is no cgroup2 hierarchy.
        let missing = cgroup2_root(Some(&dir.join("nowhere"))).unwrap_err();
        assert!(missing.to_string().contains("not a directory"), "{missing}");
        let plain = cgroup2_root(Some(&host)).unwrap_err();
        assert!(
            plain.to_string().contains("not a cgroup2 hierarchy"),
            "{plain}"
        );
        // The files of a cgroup2 root: accepted as given, and cgroups are named under it.
        for f in ["cgroup.controllers", "cgroup.procs"] {
            std::fs::write(host.join(f), "").unwrap();
            std::fs::write(child.join(f), "").unwrap();
        }
        std::fs::write(child.join("cgroup.events"), "populated 1\n").unwrap();
        assert_eq!(cgroup2_root(Some(&host)), Ok(Some(host.clone())));
        assert_eq!(
            walk(&host).into_values().collect::<Vec<_>>(),
            ["/", "/kubepods.slice"]
        );
        assert_eq!(
            id_of(Path::new("kubepods.slice"), Some(&host)).unwrap(),
            std::fs::metadata(&child).unwrap().ino()
        );
        // A cgroup below the root is refused: its paths would not be the host's.
        let below = cgroup2_root(Some(&child)).unwrap_err();
        assert!(below.to_string().contains("not the root"), "{below}");
        // Not given: the mount from mountinfo, as before.
        assert_eq!(cgroup2_root(None), Ok(find_cgroup2()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn finds_the_cgroup2_mount_in_a_hybrid_layout() {
        let text = "\
25 30 0:23 / /sys rw,nosuid shared:7 - sysfs sysfs rw
33 25 0:28 / /sys/fs/cgroup ro shared:9 - tmpfs tmpfs ro,mode=755
34 33 0:29 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw,nsdelegate
35 33 0:30 / /sys/fs/cgroup/memory rw shared:11 - cgroup cgroup rw,memory
";
        assert_eq!(
            cgroup2_mount(text),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(
            cgroup2_mount("25 30 0:23 / /sys rw - sysfs sysfs rw\n"),
            None
        );
    }

    #[test]
    fn a_cgroup_that_cannot_be_removed_names_what_is_left_in_it() {
        let dir = std::env::temp_dir().join(format!("tracer-cgroup-keeps-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("made/deeper")).unwrap();
        std::fs::write(dir.join("cgroup.procs"), "").unwrap();
        std::fs::write(dir.join("made/deeper/cgroup.procs"), "4242\n").unwrap();
        let why = what_keeps(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(why.len(), 2, "{why:?}");
        assert!(why[0].contains("made, made/deeper"), "{why:?}");
        assert!(why[1].starts_with("processes still in it: 4242"), "{why:?}");
    }

    #[test]
    fn cgroups_of_killed_runs_are_removed_or_named_and_live_ones_kept() {
        let dir = std::env::temp_dir().join(format!("tracer-cgroup-stale-{}", std::process::id()));
        // pid_max is at most 2^22: these pids cannot be running.
        let gone = dir.join("tracer-capture-99999998");
        let busy = dir.join("tracer-capture-99999999");
        let own_pid = dir.join(format!("tracer-capture-{}", std::process::id()));
        let other = dir.join("tracer-capture-notapid");
        for d in [&gone, &own_pid, &other] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::create_dir_all(busy.join("left")).unwrap();
        let own = own_path().unwrap_or_default();
        let said = clean_stale(&dir, &own);
        let (gone_left, busy_left, own_left, other_left) = (
            gone.exists(),
            busy.exists(),
            own_pid.exists(),
            other.exists(),
        );
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(said.len(), 2, "{said:?}");
        let about = |pid: &str| said.iter().find(|l| l.contains(pid)).cloned();
        assert!(
            about("pid 99999998").is_some_and(|l| l.starts_with("removed cgroup")),
            "{said:?}"
        );
        assert!(
            about("pid 99999999").is_some_and(|l| l.contains("left cgroups in it: left")),
            "{said:?}"
        );
        assert!(!gone_left && busy_left && other_left);
        // This process is alive in its own cgroup: its cgroup is not an earlier run's.
        assert_eq!(own_left, !own.is_empty());
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
