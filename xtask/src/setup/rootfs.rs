//! The Debian 12 systems the release cases install the package on: a root file system of
//! Debian's packages for each architecture the release ships, made once by mmdebstrap and
//! kept under the cache as a cpio archive the kernel unpacks as its initramfs.

use std::{
    fs,
    os::unix::fs::symlink,
    path::{Path, PathBuf},
    process::Command,
    sync::{Mutex, OnceLock, PoisonError},
    thread::JoinHandle,
};

use anyhow::{Context as _, bail};

use super::{
    apt::{doing, require_root},
    debian::{machine_mirrors, sources_for},
};
use crate::{arch::Arch, util::run};

/// Each architecture's Debian 12 root file system, made on a thread of its own: on a new
/// machine that is minutes of downloads and package scripts, which only the release cases'
/// boots need, so the build and the other boots go on beside it.
pub struct DebianSystems {
    /// The thread making them, until one waits for it.
    making: Mutex<Option<JoinHandle<anyhow::Result<Systems>>>>,
    /// What it made, or why it could not.
    made: OnceLock<Result<Systems, String>>,
}

pub(super) type Systems = Vec<(Arch, PathBuf)>;

impl DebianSystems {
    /// Start making them: `work` (setup's steps, each architecture's [`debian_rootfs`]) on a
    /// thread of its own, its result kept for whoever waits.
    pub(super) fn start(work: impl FnOnce() -> anyhow::Result<Systems> + Send + 'static) -> Self {
        let made = OnceLock::new();
        let handle = std::thread::Builder::new()
            .name("debian-rootfs".into())
            .spawn(work)
            .map_err(|e| made.set(Err(format!("starting its thread: {e}"))))
            .ok();
        Self {
            making: Mutex::new(handle),
            made,
        }
    }

    /// Wait until they are made: each architecture's archive, or why setup could not make
    /// them.
    ///
    /// # Errors
    /// When making them failed.
    pub fn wait(&self) -> anyhow::Result<&[(Arch, PathBuf)]> {
        let made = self.made.get_or_init(|| {
            let handle = self
                .making
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            match handle.map(JoinHandle::join) {
                Some(Ok(made)) => made.map_err(|e| format!("{e:#}")),
                Some(Err(_)) => Err("the thread making them panicked".into()),
                None => Err("nothing was making them".into()),
            }
        });
        made.as_deref().map_err(|e| anyhow::anyhow!("{e}"))
    }
}

impl Drop for DebianSystems {
    /// Never exit while mmdebstrap runs: it would go on orphaned, and the next setup would
    /// remove its work directory under it.
    fn drop(&mut self) {
        let handle = self
            .making
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(handle) = handle {
            if !handle.is_finished() {
                println!("setup: waiting for the Debian 12 root file systems being made");
            }
            let _ = handle.join();
        }
    }
}

/// The packages of the release cases' Debian system besides `minbase`: systemd as init, curl
/// to scrape, bpftool to list BPF objects, libcap2-bin's capsh to start a container's
/// process with the `DaemonSet`'s capabilities.
const PACKAGES: &str = "systemd,systemd-sysv,dbus,curl,bpftool,procps,iproute2,kmod,libcap2-bin";

/// Where the kernel's `binfmt_misc` is, which runs another architecture's programs through
/// an interpreter.
const BINFMT: &str = "/proc/sys/fs/binfmt_misc";
/// How Debian's qemu-user-static registers arm64's interpreter (systemd-binfmt reads it at
/// boot; a host without systemd running has it registered by setup).
const BINFMT_AARCH64: &str = "/usr/lib/binfmt.d/qemu-aarch64.conf";

/// `arch`'s Debian 12 root file system from the machine's Debian mirror, with systemd as its
/// `/init`. Named by what it holds, so a change of the package list makes a new one. An
/// arm64 system runs its packages' scripts through QEMU's user emulation, which setup
/// registers with the kernel where it is not.
pub(super) fn debian_rootfs(cache: &Path, arch: Arch) -> anyhow::Result<(PathBuf, String)> {
    let dir = cache.join("debian-rootfs");
    let tag: u32 = PACKAGES
        .bytes()
        .fold(0, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    let archive = match arch {
        Arch::X86_64 => dir.join(format!("bookworm-{tag:08x}.cpio")),
        Arch::Aarch64 => dir.join(format!("bookworm-arm64-{tag:08x}.cpio")),
    };
    if archive.is_file() {
        return Ok((archive, "already cached".into()));
    }
    require_root("making a root file system")?;
    if arch == Arch::Aarch64 {
        arm64_interpreter()?;
    }
    let name = format!(
        "Debian 12 root file system for {} (mmdebstrap)",
        arch.debian()
    );
    doing(
        &name,
        match arch {
            Arch::X86_64 => "making it (about 2 min: its packages are downloaded)",
            Arch::Aarch64 => {
                "making it (about 2 min: its packages are downloaded, their scripts run under QEMU)"
            }
        },
    );
    let work = dir.join(format!(".work-{}", arch.debian()));
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let mirrors = machine_mirrors()?;
    let sources = work.join("debian.sources");
    fs::write(
        &sources,
        sources_for(
            &mirrors,
            &["bookworm", "bookworm-updates", "bookworm-security"],
            arch,
        )?,
    )?;
    let root = work.join("root");
    run(Command::new("mmdebstrap")
        .args(["--quiet", "--variant=minbase"])
        .arg(format!("--architectures={}", arch.debian()))
        .arg(format!("--include={PACKAGES}"))
        .arg("bookworm")
        .arg(&root)
        .arg(&sources))?;
    // The kernel runs /init of the initramfs: systemd, which then boots the system as it
    // would from a disk.
    symlink("/lib/systemd/systemd", root.join("init"))?;
    let partial = work.join("root.cpio");
    let out = fs::File::create(&partial)?;
    let status = Command::new("sh")
        .args(["-c", "find . | LC_ALL=C sort | busybox cpio -o -H newc"])
        .current_dir(&root)
        .stdout(out)
        .stderr(std::process::Stdio::null())
        .status()
        .context("running busybox cpio")?;
    if !status.success() {
        bail!("archiving the root file system failed ({status})");
    }
    fs::rename(&partial, &archive)?;
    fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    let size = fs::metadata(&archive)?.len() >> 20;
    Ok((archive, format!("made ({size} MiB)")))
}

/// QEMU's arm64 interpreter registered with the kernel's `binfmt_misc` (mounted where it is
/// not), as Debian's qemu-user-static registers it, so that mmdebstrap can run arm64's
/// package scripts.
fn arm64_interpreter() -> anyhow::Result<()> {
    let registered = Path::new(BINFMT).join("qemu-aarch64");
    if registered.is_file() {
        return Ok(());
    }
    if !Path::new(BINFMT).join("register").exists() {
        run(Command::new("mount").args(["-t", "binfmt_misc", "binfmt_misc", BINFMT]))
            .context("mounting binfmt_misc, which runs arm64's package scripts through QEMU")?;
    }
    let line = fs::read_to_string(BINFMT_AARCH64)
        .with_context(|| format!("reading {BINFMT_AARCH64} (qemu-user-static)"))?;
    fs::write(Path::new(BINFMT).join("register"), line.trim_end())
        .context("registering QEMU's arm64 interpreter with binfmt_misc")?;
    if !registered.is_file() {
        bail!("binfmt_misc did not take QEMU's arm64 interpreter ({BINFMT_AARCH64})");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::{
        sync::{
            Arc,
            atomic::{AtomicBool, Ordering},
        },
        time::Duration,
    };

    use super::*;

    #[test]
    fn every_waiter_gets_what_the_thread_made_or_why_it_could_not() {
        let systems = DebianSystems::start(|| {
            std::thread::sleep(Duration::from_millis(50));
            Ok(vec![(Arch::X86_64, PathBuf::from("amd64.cpio"))])
        });
        // The two release boots wait at once: both get the one result.
        std::thread::scope(|s| {
            let a = s.spawn(|| systems.wait().map(<[_]>::to_vec).unwrap());
            let b = s.spawn(|| systems.wait().map(<[_]>::to_vec).unwrap());
            assert_eq!(a.join().unwrap(), b.join().unwrap());
        });
        assert_eq!(systems.wait().unwrap()[0].1, PathBuf::from("amd64.cpio"));

        let failed = DebianSystems::start(|| anyhow::bail!("mmdebstrap: no mirror"));
        for _ in 0..2 {
            let e = failed.wait().unwrap_err().to_string();
            assert!(e.contains("no mirror"), "{e}");
        }
    }

    #[test]
    fn dropping_them_waits_for_the_thread_making_them() {
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let systems = DebianSystems::start(move || {
            std::thread::sleep(Duration::from_millis(100));
            flag.store(true, Ordering::SeqCst);
            Ok(Vec::new())
        });
        drop(systems);
        assert!(
            done.load(Ordering::SeqCst),
            "an exit would have cut it short"
        );
    }
}
