//! A real host's ordinary work at its scale, run in the guest by the suite's ordinary-work
//! cases (`xtask/src/testing/suite/cases/ordinary.rs`): the system calls a build, a
//! kubelet's pod churn, a package manager's unpack and a log rotation make, without a fork
//! and exec per step (under TCG emulation a shell loop of a million lookups would take
//! tens of minutes).
//!
//! Usage (each prints one line of what it did, the counts the suite's judges check):
//! - `guest-work build-tree TREE SYSINC`: a source tree: `INCLUDE_DIRS` include
//!   directories of `PROJECT_HEADERS` headers each, `SOURCES` sources, and the system
//!   headers they include in SYSINC.
//! - `guest-work build TREE SYSINC`: compile each source as a compiler does, probing each
//!   `#include` through the `-I` directories in order (a failed open per directory that
//!   lacks it, the lookups that leave negative dentries), write its object under a
//!   temporary name and rename it into place, link, then clean.
//! - `guest-work pods BASE FIRST COUNT`: pods FIRST.. as a kubelet runs and removes them:
//!   a cgroup, three tmpfs volumes (secret, configmap, token) filled by writes renamed into
//!   place, a process in the cgroup that writes and unlinks files in the pod's emptyDir,
//!   then the umounts, the pod's directories and the cgroup removed.
//! - `guest-work cgroups CGROUPS DIRS N`: the suite's scale workload, over N cgroups made
//!   beforehand as CGROUPS/g0.. (and directories DIRS/g0..): for cgroup i, a process in it
//!   creates k = 1 + i mod 7 files and k directories in DIRS/gi, then removes the
//!   directories (k rmdir) and unlinks the files (k unlink), and exits. Every cgroup stays
//!   alive throughout; one process per cgroup, forked without an exec (a shell's three
//!   programs per cgroup made 2,000 cgroups take a minute under TCG).
//! - `guest-work unpack DIR FILES`: a package of FILES files installed, then upgraded as
//!   dpkg does: each new file written as `NAME.dpkg-new`, the old one kept as
//!   `NAME.dpkg-tmp` by a hard link, the new renamed over the old, the backups unlinked.
//! - `guest-work logrotate DIR LOGS ROTATIONS`: LOGS logs rotated ROTATIONS times, four
//!   generations kept, as logrotate's `rotate 4` and `create` do.

use std::{
    ffi::CString,
    fs::{self, File},
    io::{self, Read as _, Write as _},
    path::Path,
    process::ExitCode,
};

/// The build's `-I` directories, searched in order before the system's.
const INCLUDE_DIRS: u32 = 40;
/// Headers in each `-I` directory.
const PROJECT_HEADERS: u32 = 10;
/// Translation units.
const SOURCES: u32 = 200;
/// Project headers each source includes.
const PROJECT_INCLUDES: u32 = 5;
/// System headers each source includes, each found only after every `-I` directory
/// failed: `SOURCES * SYSTEM_INCLUDES * INCLUDE_DIRS` failed lookups (1,040,000).
const SYSTEM_INCLUDES: u32 = 130;
/// A pod's tmpfs volumes and the files the kubelet writes into each.
const VOLUMES: [(&str, u32); 3] = [("secret", 2), ("configmap", 3), ("token", 1)];
/// Files the pod's process writes and unlinks in its emptyDir.
const POD_FILES: u32 = 20;
/// Where the pods' cgroups are made (cgroup v2, as the guest's init mounts it).
const POD_CGROUPS: &str = "/sys/fs/cgroup/ordinary_pods";
/// Generations of a log logrotate keeps.
const LOG_KEEP: u32 = 4;

type Result<T> = std::result::Result<T, String>;

/// `what` failed with `e`.
fn fail(what: impl std::fmt::Display, e: &io::Error) -> String {
    format!("{what}: {e}")
}

fn mkdir_p(p: &str) -> Result<()> {
    fs::create_dir_all(p).map_err(|e| fail(format_args!("mkdir -p {p}"), &e))
}

fn write(p: &str, data: &[u8]) -> Result<()> {
    fs::write(p, data).map_err(|e| fail(format_args!("write {p}"), &e))
}

fn rename(from: &str, to: &str) -> Result<()> {
    fs::rename(from, to).map_err(|e| fail(format_args!("rename {from} {to}"), &e))
}

fn unlink(p: &str) -> Result<()> {
    fs::remove_file(p).map_err(|e| fail(format_args!("unlink {p}"), &e))
}

fn rmdir(p: &str) -> Result<()> {
    fs::remove_dir(p).map_err(|e| fail(format_args!("rmdir {p}"), &e))
}

/// Open and read `p` as a compiler reads a header: `Ok(false)` where it does not exist.
fn probe(p: &str, buf: &mut Vec<u8>) -> Result<bool> {
    match File::open(p) {
        Ok(mut f) => {
            buf.clear();
            f.read_to_end(buf)
                .map_err(|e| fail(format_args!("read {p}"), &e))?;
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(fail(format_args!("open {p}"), &e)),
    }
}

/// The project header `n`: its `-I` directory and name.
fn project_header(n: u32) -> (u32, String) {
    (n / PROJECT_HEADERS, format!("p{n}.h"))
}

fn build_tree(tree: &str, sysinc: &str) -> Result<String> {
    mkdir_p(&format!("{tree}/src"))?;
    mkdir_p(sysinc)?;
    for d in 0..INCLUDE_DIRS {
        mkdir_p(&format!("{tree}/inc{d}"))?;
    }
    for n in 0..INCLUDE_DIRS * PROJECT_HEADERS {
        let (d, name) = project_header(n);
        write(&format!("{tree}/inc{d}/{name}"), b"#pragma once\n")?;
    }
    for s in 0..SOURCES * SYSTEM_INCLUDES {
        write(&format!("{sysinc}/s{s}.h"), b"#pragma once\n")?;
    }
    for t in 0..SOURCES {
        write(&format!("{tree}/src/tu{t}.c"), b"int main(void);\n")?;
    }
    Ok(format!(
        "build-tree: {INCLUDE_DIRS} include directories, {} system headers, {SOURCES} sources",
        SOURCES * SYSTEM_INCLUDES
    ))
}

fn build(tree: &str, sysinc: &str) -> Result<String> {
    let obj = format!("{tree}/obj");
    mkdir_p(&obj)?;
    let (mut failed, mut found) = (0_u64, 0_u64);
    let mut buf = Vec::new();
    let mut lookup = |dirs: u32, name: &str, last: Option<&str>| -> Result<()> {
        for d in 0..dirs {
            if probe(&format!("{tree}/inc{d}/{name}"), &mut buf)? {
                found += 1;
                return Ok(());
            }
            failed += 1;
        }
        match last {
            Some(dir) if probe(&format!("{dir}/{name}"), &mut buf)? => {
                found += 1;
                Ok(())
            }
            _ => Err(format!("{name}: not found in any include directory")),
        }
    };
    for t in 0..SOURCES {
        let mut src = Vec::new();
        if !probe(&format!("{tree}/src/tu{t}.c"), &mut src)? {
            return Err(format!(
                "{tree}/src/tu{t}.c: missing (run build-tree first)"
            ));
        }
        for k in 0..PROJECT_INCLUDES {
            let (d, name) =
                project_header((t * PROJECT_INCLUDES + k) % (INCLUDE_DIRS * PROJECT_HEADERS));
            lookup(d + 1, &name, None)?;
        }
        for k in 0..SYSTEM_INCLUDES {
            lookup(
                INCLUDE_DIRS,
                &format!("s{}.h", t * SYSTEM_INCLUDES + k),
                Some(sysinc),
            )?;
        }
        // gcc writes the object under a temporary name and renames it; -MD writes the depfile.
        write(&format!("{obj}/tu{t}.o.tmp"), &[0x7f; 2048])?;
        rename(&format!("{obj}/tu{t}.o.tmp"), &format!("{obj}/tu{t}.o"))?;
        write(&format!("{obj}/tu{t}.d"), b"tu.o: tu.c\n")?;
    }
    let mut image = Vec::new();
    for t in 0..SOURCES {
        let mut o = Vec::new();
        probe(&format!("{obj}/tu{t}.o"), &mut o)?;
        image.extend_from_slice(&o[..64.min(o.len())]);
    }
    write(&format!("{tree}/app.tmp"), &image)?;
    rename(&format!("{tree}/app.tmp"), &format!("{tree}/app"))?;
    // make clean.
    for t in 0..SOURCES {
        unlink(&format!("{obj}/tu{t}.o"))?;
        unlink(&format!("{obj}/tu{t}.d"))?;
    }
    unlink(&format!("{tree}/app"))?;
    rmdir(&obj)?;
    Ok(format!(
        "build: {SOURCES} sources, {failed} failed lookups and {found} headers found in {INCLUDE_DIRS} include directories and the system's, {} files removed, 1 directory",
        2 * SOURCES + 1
    ))
}

/// The last OS error, with what was being done.
fn os_error(what: &str) -> String {
    fail(what, &io::Error::last_os_error())
}

fn cstring(p: &str) -> Result<CString> {
    CString::new(p).map_err(|_| format!("{p}: a NUL in the path"))
}

fn mount_tmpfs(dir: &str) -> Result<()> {
    let c = cstring(dir)?;
    // SAFETY: valid NUL-terminated strings; a null data pointer is allowed for tmpfs.
    let rc = unsafe {
        libc::mount(
            c"tmpfs".as_ptr(),
            c.as_ptr(),
            c"tmpfs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(os_error(&format!("mount tmpfs on {dir}")))
    }
}

fn umount(dir: &str) -> Result<()> {
    let c = cstring(dir)?;
    // SAFETY: a valid NUL-terminated path.
    if unsafe { libc::umount2(c.as_ptr(), 0) } == 0 {
        Ok(())
    } else {
        Err(os_error(&format!("umount {dir}")))
    }
}

/// The pod's process: into its cgroup, then its files written and unlinked.
fn pod_process(cgroup: &str, pod: &str) -> Result<()> {
    write(
        &format!("{cgroup}/cgroup.procs"),
        std::process::id().to_string().as_bytes(),
    )?;
    let mut buf = Vec::new();
    for (vol, keys) in VOLUMES {
        for k in 0..keys {
            probe(&format!("{pod}/volumes/{vol}/key{k}"), &mut buf)?;
        }
    }
    let dir = format!("{pod}/volumes/empty-dir");
    for f in 0..POD_FILES {
        write(&format!("{dir}/f{f}"), b"pod data\n")?;
    }
    for f in 0..POD_FILES {
        unlink(&format!("{dir}/f{f}"))?;
    }
    Ok(())
}

/// Run `work` in a child process (`who`, in its messages) and wait for it.
fn in_child(who: &str, work: impl FnOnce() -> Result<()>) -> Result<()> {
    // SAFETY: this process has one thread, so the child may run any code.
    match unsafe { libc::fork() } {
        -1 => Err(os_error("fork")),
        0 => {
            let code = match work() {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("guest-work: {who}: {e}");
                    1
                }
            };
            // SAFETY: ends the child without running the parent's exit handlers.
            unsafe { libc::_exit(code) }
        }
        pid => {
            let mut status = 0;
            // SAFETY: `status` is a valid place for the child's status.
            if unsafe { libc::waitpid(pid, &raw mut status, 0) } != pid {
                return Err(os_error("waitpid"));
            }
            if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
                Ok(())
            } else {
                Err(format!("{who} ended with status {status:#x}"))
            }
        }
    }
}

fn pod(base: &str, i: u64) -> Result<()> {
    let pod = format!("{base}/pods/pod{i}");
    let cgroup = format!("{POD_CGROUPS}/pod{i}");
    mkdir_p(&format!("{pod}/volumes/empty-dir"))?;
    fs::create_dir(&cgroup).map_err(|e| fail(format_args!("mkdir {cgroup}"), &e))?;
    for (vol, keys) in VOLUMES {
        let dir = format!("{pod}/volumes/{vol}");
        mkdir_p(&dir)?;
        mount_tmpfs(&dir)?;
        // The kubelet's atomic writer: each key written beside, then renamed into place.
        for k in 0..keys {
            write(&format!("{dir}/.key{k}.tmp"), b"value\n")?;
            rename(&format!("{dir}/.key{k}.tmp"), &format!("{dir}/key{k}"))?;
        }
    }
    in_child("the pod's process", || pod_process(&cgroup, &pod))?;
    for (vol, _) in VOLUMES {
        umount(&format!("{pod}/volumes/{vol}"))?;
    }
    for (vol, _) in VOLUMES {
        rmdir(&format!("{pod}/volumes/{vol}"))?;
    }
    rmdir(&format!("{pod}/volumes/empty-dir"))?;
    rmdir(&format!("{pod}/volumes"))?;
    rmdir(&pod)?;
    rmdir(&cgroup)
}

fn pods(base: &str, first: u64, count: u64) -> Result<String> {
    mkdir_p(POD_CGROUPS)?;
    for i in first..first + count {
        pod(base, i)?;
    }
    Ok(format!(
        "pods: {count} pods from {first}, each {} tmpfs volumes mounted and unmounted, {POD_FILES} files written and unlinked by its process, 6 directories and its cgroup removed",
        VOLUMES.len()
    ))
}

/// Files, directories and removals of cgroup `i` of the scale workload.
fn scale_calls(i: u64) -> u64 {
    1 + i % 7
}

fn cgroups(cgroups: &str, dirs: &str, n: u64) -> Result<String> {
    for i in 0..n {
        let cgroup = format!("{cgroups}/g{i}");
        let dir = format!("{dirs}/g{i}");
        in_child(&format!("the process of {cgroup}"), || {
            write(
                &format!("{cgroup}/cgroup.procs"),
                std::process::id().to_string().as_bytes(),
            )?;
            let k = scale_calls(i);
            for j in 0..k {
                write(&format!("{dir}/f{j}"), b"")?;
            }
            for j in 0..k {
                fs::create_dir(format!("{dir}/d{j}"))
                    .map_err(|e| fail(format_args!("mkdir {dir}/d{j}"), &e))?;
            }
            for j in 0..k {
                rmdir(&format!("{dir}/d{j}"))?;
            }
            for j in 0..k {
                unlink(&format!("{dir}/f{j}"))?;
            }
            Ok(())
        })?;
    }
    let calls: u64 = (0..n).map(scale_calls).sum();
    Ok(format!(
        "cgroups: {n} cgroups, a process in each: {calls} directories made and removed, {calls} files made and unlinked"
    ))
}

/// File `n` of the package: 100 to a directory, as a package's files spread.
fn package_file(dir: &str, n: u64) -> String {
    format!("{dir}/usr/share/p{}/f{n}", n / 100)
}

fn unpack(dir: &str, files: u64) -> Result<String> {
    for n in (0..files).step_by(100) {
        mkdir_p(&format!("{dir}/usr/share/p{}", n / 100))?;
    }
    // Version 1 installed, then version 2 over it.
    for version in [b"version 1\n", b"version 2\n"] {
        for n in 0..files {
            let f = package_file(dir, n);
            let new = format!("{f}.dpkg-new");
            write(&new, version)?;
            if Path::new(&f).exists() {
                fs::hard_link(&f, format!("{f}.dpkg-tmp"))
                    .map_err(|e| fail(format_args!("link {f}"), &e))?;
            }
            rename(&new, &f)?;
        }
    }
    for n in 0..files {
        unlink(&format!("{}.dpkg-tmp", package_file(dir, n)))?;
    }
    Ok(format!(
        "unpack: {files} files installed, then upgraded: {} written under temporary names and renamed into place, {files} old ones unlinked",
        2 * files
    ))
}

fn logrotate(dir: &str, logs: u64, rotations: u64) -> Result<String> {
    mkdir_p(dir)?;
    let append = |p: &str| -> Result<()> {
        let mut f = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .map_err(|e| fail(format_args!("open {p}"), &e))?;
        f.write_all(&[b'.'; 511])
            .and_then(|()| f.write_all(b"\n"))
            .map_err(|e| fail(format_args!("append to {p}"), &e))
    };
    let mut removed = 0;
    for _ in 0..rotations {
        for l in 0..logs {
            let log = format!("{dir}/app{l}.log");
            append(&log)?;
            let oldest = format!("{log}.{LOG_KEEP}");
            if Path::new(&oldest).exists() {
                unlink(&oldest)?;
                removed += 1;
            }
            for g in (1..LOG_KEEP).rev() {
                let from = format!("{log}.{g}");
                if Path::new(&from).exists() {
                    rename(&from, &format!("{log}.{}", g + 1))?;
                }
            }
            rename(&log, &format!("{log}.1"))?;
            File::create(&log).map_err(|e| fail(format_args!("create {log}"), &e))?;
        }
    }
    Ok(format!(
        "logrotate: {logs} logs rotated {rotations} times, {removed} old generations removed"
    ))
}

/// A whole number argument.
fn number(name: &str, v: &str) -> Result<u64> {
    v.parse()
        .map_err(|e| format!("{name} {v:?} is not a whole number: {e}"))
}

fn run(args: &[String]) -> Result<String> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args[..] {
        ["build-tree", tree, sysinc] => build_tree(tree, sysinc),
        ["build", tree, sysinc] => build(tree, sysinc),
        ["pods", base, first, count] => {
            pods(base, number("FIRST", first)?, number("COUNT", count)?)
        }
        ["cgroups", base, dirs, n] => cgroups(base, dirs, number("N", n)?),
        ["unpack", dir, files] => unpack(dir, number("FILES", files)?),
        ["logrotate", dir, logs, rotations] => logrotate(
            dir,
            number("LOGS", logs)?,
            number("ROTATIONS", rotations)?,
        ),
        _ => Err(
            "usage: guest-work build-tree TREE SYSINC | build TREE SYSINC | pods BASE FIRST COUNT | cgroups CGROUPS DIRS N | unpack DIR FILES | logrotate DIR LOGS ROTATIONS"
                .into(),
        ),
    }
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    match run(&argv) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("guest-work: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> String {
        let d = std::env::temp_dir().join(format!("guest-work-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d.to_string_lossy().into_owned()
    }

    #[test]
    fn a_build_fails_a_lookup_in_every_include_directory_before_the_system_s() {
        let (tree, sys) = (scratch("tree"), scratch("sys"));
        build_tree(&tree, &sys).unwrap();
        let line = build(&tree, &sys).unwrap();
        // Each system include fails in all 40 directories; project header n of directory d
        // fails in the d before it: the 5 of each source are 1,000 of the 400 headers.
        let project: u64 = (0..SOURCES * PROJECT_INCLUDES)
            .map(|k| u64::from(project_header(k % (INCLUDE_DIRS * PROJECT_HEADERS)).0))
            .sum();
        let failed = u64::from(SOURCES * SYSTEM_INCLUDES * INCLUDE_DIRS) + project;
        assert!(failed >= 1_000_000);
        assert!(
            line.contains(&format!("{failed} failed lookups and 27000 headers found")),
            "{line}"
        );
        // Cleaned: the objects and their directory are gone, the tree's sources stay.
        assert!(!Path::new(&format!("{tree}/obj")).exists());
        assert!(Path::new(&format!("{tree}/src/tu0.c")).exists());
        let _ = (fs::remove_dir_all(&tree), fs::remove_dir_all(&sys));
    }

    #[test]
    fn an_upgrade_leaves_the_new_files_and_no_backup() {
        let dir = scratch("unpack");
        let line = unpack(&dir, 150).unwrap();
        assert!(line.starts_with("unpack: 150 files installed"), "{line}");
        assert_eq!(
            fs::read_to_string(package_file(&dir, 149)).unwrap(),
            "version 2\n"
        );
        assert!(!Path::new(&format!("{}.dpkg-tmp", package_file(&dir, 0))).exists());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn each_cgroup_gets_a_process_of_its_own_that_leaves_its_directory_empty() {
        let (groups, dirs) = (scratch("cgroups"), scratch("cgroup-dirs"));
        for i in 0..10 {
            mkdir_p(&format!("{groups}/g{i}")).unwrap();
            mkdir_p(&format!("{dirs}/g{i}")).unwrap();
        }
        let line = cgroups(&groups, &dirs, 10).unwrap();
        // 1 + i mod 7 each: 1..7, then 1, 2, 3.
        assert!(
            line.contains("34 directories made and removed, 34 files made and unlinked"),
            "{line}"
        );
        let mut pids = std::collections::BTreeSet::new();
        for i in 0..10 {
            assert_eq!(fs::read_dir(format!("{dirs}/g{i}")).unwrap().count(), 0);
            pids.insert(fs::read_to_string(format!("{groups}/g{i}/cgroup.procs")).unwrap());
        }
        assert_eq!(pids.len(), 10, "a process per cgroup");
        assert!(!pids.contains(&std::process::id().to_string()));
        // A cgroup that is not there: the child's failure is the run's.
        assert!(cgroups(&groups, &dirs, 11).is_err());
        let _ = (fs::remove_dir_all(&groups), fs::remove_dir_all(&dirs));
    }

    #[test]
    fn a_rotation_keeps_four_generations() {
        let dir = scratch("logs");
        let line = logrotate(&dir, 3, 6).unwrap();
        // Rotations 5 and 6 find a fourth generation to remove, for each of the 3 logs.
        assert!(line.ends_with("6 old generations removed"), "{line}");
        assert!(Path::new(&format!("{dir}/app0.log.4")).exists());
        assert!(!Path::new(&format!("{dir}/app0.log.5")).exists());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn bad_arguments_say_how_to_call_it() {
        let args = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(
            run(&args(&["pods", "/x", "a", "1"]))
                .unwrap_err()
                .starts_with("FIRST \"a\"")
        );
        assert!(
            run(&args(&["fly"]))
                .unwrap_err()
                .starts_with("usage: guest-work")
        );
    }
}
