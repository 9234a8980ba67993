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

/// The id `bpf_get_current_cgroup_id` gives a task in the cgroup2 hierarchy's root: its
/// directory's inode number. On a host that mounts no cgroup2, every task is there.
pub const ROOT_ID: u64 = 1;

/// How the host's cgroups are laid out, as far as naming them goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Layout {
    /// cgroup2 alone (the unified layout, systemd's default since 247).
    Unified,
    /// cgroup v1 hierarchies (named by their directories: `memory`, `cpu,cpuacct`,
    /// `systemd`, ...) beside cgroup2, which is mounted at `unified` among them (systemd's
    /// hybrid layout).
    Hybrid {
        /// The v1 hierarchies' directories.
        v1: Vec<String>,
    },
    /// cgroup v1 alone: no cgroup2 hierarchy is mounted, so every task is in its root.
    V1 {
        /// The v1 hierarchies' directories.
        v1: Vec<String>,
    },
    /// No cgroup filesystem is mounted at all.
    None,
}

/// The host's cgroup2 hierarchy, which cgroups are named from, and the layout it is part of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hierarchy {
    /// Where the cgroup2 hierarchy is mounted; None where it is not.
    pub root: Option<PathBuf>,
    /// The layout found.
    pub layout: Layout,
}

impl Hierarchy {
    /// The paths of the cgroups there are now, by id: a walk of the cgroup2 tree, or, where
    /// v1 alone is mounted, its root, where every task is.
    #[must_use]
    pub fn paths(&self) -> BTreeMap<u64, String> {
        match (&self.root, &self.layout) {
            (Some(root), _) => walk(root),
            (None, Layout::V1 { .. }) => BTreeMap::from([(ROOT_ID, "/".to_owned())]),
            (None, _) => BTreeMap::new(),
        }
    }

    /// What cannot be told apart on this layout, in one sentence; None where nothing is
    /// missing.
    #[must_use]
    pub fn missing(&self) -> Option<String> {
        match &self.layout {
            Layout::Unified | Layout::None => None,
            Layout::Hybrid { v1 } => Some(format!(
                "cgroup v1 hierarchies ({}) are mounted beside cgroup2 (the hybrid layout): \
                 cgroups are named from the cgroup2 tree at {}, where a container runtime \
                 using the cgroupfs driver leaves its containers in the cgroup of its own \
                 service, and their calls are counted there (docs/names.md)",
                v1.join(", "),
                self.root
                    .as_deref()
                    .map_or_else(|| "?".into(), |r| r.display().to_string())
            )),
            Layout::V1 { v1 } => Some(format!(
                "no cgroup2 hierarchy is mounted (cgroup v1 only: {}): the kernel gives every \
                 task the cgroup2 root's id, so every call is counted under cgroup / and no \
                 pod, container or unit can be told apart; boot the node with cgroup v2 \
                 (systemd.unified_cgroup_hierarchy=1) to name them (docs/names.md)",
                v1.join(", ")
            )),
        }
    }
}

/// The cgroup hierarchies cgroups are named from: under `given` (`--cgroup-root`, where the
/// host's `/sys/fs/cgroup` is mounted, e.g. `/host/sys/fs/cgroup` in a container whose own
/// `/sys/fs/cgroup` is its private cgroup namespace), else as `/proc/self/mountinfo` shows
/// them. Under `given`: a cgroup2 root is used as it is; a directory of cgroup v1
/// hierarchies with cgroup2 at `unified` among them (the hybrid layout) gives that
/// `unified`; one without (v1 alone) gives no cgroup2 root, and every call is the root's.
///
/// # Errors
/// When `given` is none of those: not a directory, a cgroup below the root (it has
/// `cgroup.events`, which the root lacks), or a directory with neither the files every
/// cgroup2 directory has (`cgroup.controllers`, `cgroup.procs`) nor a v1 hierarchy in it.
pub fn hierarchy(given: Option<&Path>) -> Result<Hierarchy, CgroupRootError> {
    let Some(root) = given else {
        return Ok(std::fs::read_to_string("/proc/self/mountinfo").map_or(
            Hierarchy {
                root: None,
                layout: Layout::None,
            },
            |m| mounted(&m),
        ));
    };
    if !root.is_dir() {
        return Err(CgroupRootError::NotADirectory(root.to_path_buf()));
    }
    if is_cgroup2(root) {
        if root.join("cgroup.events").exists() {
            return Err(CgroupRootError::NotTheRoot(root.to_path_buf()));
        }
        return Ok(Hierarchy {
            root: Some(root.to_path_buf()),
            layout: Layout::Unified,
        });
    }
    let v1 = v1_hierarchies(root);
    let unified = root.join("unified");
    if is_cgroup2(&unified) && !unified.join("cgroup.events").exists() {
        return Ok(Hierarchy {
            root: Some(unified),
            layout: Layout::Hybrid { v1 },
        });
    }
    if v1.is_empty() {
        return Err(CgroupRootError::NotCgroup2(root.to_path_buf()));
    }
    Ok(Hierarchy {
        root: None,
        layout: Layout::V1 { v1 },
    })
}

/// Whether `dir` has the files every cgroup2 directory has (a v1 one has no
/// `cgroup.controllers`).
fn is_cgroup2(dir: &Path) -> bool {
    dir.join("cgroup.controllers").is_file() && dir.join("cgroup.procs").is_file()
}

/// The directories under `root` that are cgroup v1 hierarchies (a `cgroup.procs` and no
/// `cgroup.controllers`), sorted; the links a v1 layout makes between them (`cpu` to
/// `cpu,cpuacct`) are not counted twice.
fn v1_hierarchies(root: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| e.path().join("cgroup.procs").is_file() && !is_cgroup2(&e.path()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

/// The layout mountinfo text shows: the cgroup2 mount, and each v1 hierarchy by its
/// mount point's last component.
#[must_use]
pub fn mounted(mountinfo: &str) -> Hierarchy {
    let root = cgroup2_mount(mountinfo);
    let mut v1: Vec<String> = mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            (right.split_whitespace().next()? == "cgroup").then_some(())?;
            let point = left.split_whitespace().nth(4)?;
            Some(point.rsplit('/').next().unwrap_or(point).to_owned())
        })
        .collect();
    v1.sort();
    v1.dedup();
    let layout = match (&root, v1.is_empty()) {
        (Some(_), true) => Layout::Unified,
        (Some(_), false) => Layout::Hybrid { v1 },
        (None, false) => Layout::V1 { v1 },
        (None, true) => Layout::None,
    };
    Hierarchy { root, layout }
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
    /// A directory with neither the files every cgroup2 directory has nor a v1 hierarchy.
    #[error(
        "--cgroup-root {}: not a cgroup hierarchy (no cgroup.controllers and cgroup.procs, no \
         cgroup2 at unified/, no cgroup v1 hierarchy in it); name the host's /sys/fs/cgroup",
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
        // Not there, then a directory that is no cgroup hierarchy at all.
        let missing = hierarchy(Some(&dir.join("nowhere"))).unwrap_err();
        assert!(missing.to_string().contains("not a directory"), "{missing}");
        let plain = hierarchy(Some(&host)).unwrap_err();
        assert!(
            plain.to_string().contains("not a cgroup hierarchy"),
            "{plain}"
        );
        // The files of a cgroup2 root: accepted as given, and cgroups are named under it.
        for f in ["cgroup.controllers", "cgroup.procs"] {
            std::fs::write(host.join(f), "").unwrap();
            std::fs::write(child.join(f), "").unwrap();
        }
        std::fs::write(child.join("cgroup.events"), "populated 1\n").unwrap();
        let unified = hierarchy(Some(&host)).unwrap();
        assert_eq!(
            unified,
            Hierarchy {
                root: Some(host.clone()),
                layout: Layout::Unified
            }
        );
        assert_eq!(unified.missing(), None);
        // Keyed by inode number, which the filesystem hands out in no promised order.
        let mut named = unified.paths().into_values().collect::<Vec<_>>();
        named.sort();
        assert_eq!(named, ["/", "/kubepods.slice"]);
        assert_eq!(
            id_of(Path::new("kubepods.slice"), Some(&host)).unwrap(),
            std::fs::metadata(&child).unwrap().ino()
        );
        // A cgroup below the root is refused: its paths would not be the host's.
        let below = hierarchy(Some(&child)).unwrap_err();
        assert!(below.to_string().contains("not the root"), "{below}");
        // Not given: the mount from mountinfo, as before.
        assert_eq!(hierarchy(None).unwrap().root, find_cgroup2());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A directory laid out as a v1 host's /sys/fs/cgroup: a hierarchy per directory, each
    /// with a `cgroup.procs` and no `cgroup.controllers`, and a link between two.
    fn v1_host(dir: &Path) {
        for h in ["memory", "cpu,cpuacct", "systemd"] {
            std::fs::create_dir_all(dir.join(h).join("kubepods")).unwrap();
            std::fs::write(dir.join(h).join("cgroup.procs"), "").unwrap();
        }
        std::os::unix::fs::symlink("cpu,cpuacct", dir.join("cpu")).unwrap();
    }

    #[test]
    fn a_hybrid_root_gives_its_unified_hierarchy_and_says_what_it_cannot_attribute() {
        let dir = std::env::temp_dir().join(format!("tracer-cgroup-hybrid-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        v1_host(&dir);
        let unified = dir.join("unified");
        std::fs::create_dir_all(unified.join("system.slice")).unwrap();
        for f in ["cgroup.controllers", "cgroup.procs"] {
            std::fs::write(unified.join(f), "").unwrap();
        }
        let h = hierarchy(Some(&dir)).unwrap();
        let paths = h.paths();
        let missing = h.missing().unwrap_or_default();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(h.root, Some(unified.clone()));
        assert_eq!(
            h.layout,
            Layout::Hybrid {
                v1: vec!["cpu,cpuacct".into(), "memory".into(), "systemd".into()]
            }
        );
        // Named from the unified tree, not the v1 ones.
        let mut named = paths.into_values().collect::<Vec<_>>();
        named.sort();
        assert_eq!(named, ["/", "/system.slice"]);
        for said in ["hybrid", "cgroupfs driver", &unified.display().to_string()] {
            assert!(missing.contains(said), "{said:?} not in: {missing}");
        }
    }

    #[test]
    fn a_v1_root_names_every_call_the_root_s_and_says_so() {
        let dir = std::env::temp_dir().join(format!("tracer-cgroup-v1-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        v1_host(&dir);
        let h = hierarchy(Some(&dir));
        std::fs::remove_dir_all(&dir).unwrap();
        let h = h.unwrap();
        assert_eq!(h.root, None);
        assert_eq!(
            h.paths(),
            BTreeMap::from([(ROOT_ID, "/".to_owned())]),
            "every task is in the root of the unmounted cgroup2 hierarchy"
        );
        let missing = h.missing().unwrap_or_default();
        for said in [
            "cgroup v1 only: cpu,cpuacct, memory, systemd",
            "counted under cgroup /",
            "systemd.unified_cgroup_hierarchy=1",
        ] {
            assert!(missing.contains(said), "{said:?} not in: {missing}");
        }
    }

    #[test]
    fn finds_the_cgroup2_mount_in_a_hybrid_layout() {
        let text = "\
25 30 0:23 / /sys rw,nosuid shared:7 - sysfs sysfs rw
33 25 0:28 / /sys/fs/cgroup ro shared:9 - tmpfs tmpfs ro,mode=755
34 33 0:29 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw,nsdelegate
35 33 0:30 / /sys/fs/cgroup/memory rw shared:11 - cgroup cgroup rw,memory
36 33 0:31 / /sys/fs/cgroup/systemd rw shared:12 - cgroup cgroup rw,xattr,name=systemd
";
        assert_eq!(
            cgroup2_mount(text),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(
            cgroup2_mount("25 30 0:23 / /sys rw - sysfs sysfs rw\n"),
            None
        );
        let hybrid = mounted(text);
        assert_eq!(
            hybrid.layout,
            Layout::Hybrid {
                v1: vec!["memory".into(), "systemd".into()]
            }
        );
        // The same without cgroup2: v1 alone, every call the root's.
        let v1: String = text
            .lines()
            .filter(|l| !l.contains("cgroup2"))
            .flat_map(|l| [l, "\n"])
            .collect();
        let v1 = mounted(&v1);
        assert_eq!(v1.root, None);
        assert!(matches!(v1.layout, Layout::V1 { .. }));
        assert_eq!(v1.paths().get(&ROOT_ID).map(String::as_str), Some("/"));
        let only2 = mounted("34 33 0:29 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
        assert_eq!(only2.layout, Layout::Unified);
        assert_eq!(only2.missing(), None);
        let none = mounted("25 30 0:23 / /sys rw - sysfs sysfs rw\n");
        assert_eq!((none.layout.clone(), none.paths().len()), (Layout::None, 0));
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
