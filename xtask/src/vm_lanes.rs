//! The VM lanes of `cargo xtask test`: a queue of boots, taken by a few lanes at once.
//!
//! The lanes start as soon as amd64's tracer is built. What comes later (amd64's root-only
//! test binaries, arm64's tracer, the release) is handed over in a [`Later`] slot: a boot
//! that needs it waits for it, and a lane takes the first boot in the queue whose slots are
//! filled before one that would wait.

use std::{
    path::{Path, PathBuf},
    sync::{Mutex, OnceLock},
    time::{Duration, Instant},
};

use crate::{
    arch, dist, kernel, setup,
    testing::{self, harness::Tally, suite::case::Clock, suite::select::Selection},
};

/// The kernel whose suite boot runs the hardening cases too (signals, least privilege):
/// one kernel is enough for what they check, and each boot of them costs minutes.
pub const HARDEN_KERNEL: &str = "6.12";

/// What is made while the lanes already run: filled once (None when it could not be made),
/// waited for by the boots that need it.
pub type Later<T> = OnceLock<Option<T>>;

/// amd64's root-only test binaries: (libtest name, path), none where they did not build.
pub type GuestTests = Vec<(String, PathBuf)>;

/// Fills the slots of [`Vms`] with None when dropped, unless filled before: a host phase
/// that panics still lets the boots waiting on them go on (and the lanes end).
pub struct FillOnDrop<'a>(pub &'a Vms<'a>);

impl Drop for FillOnDrop<'_> {
    fn drop(&mut self) {
        let vms = self.0;
        let _ = (
            vms.guest_tests.set(None),
            vms.tracer_arm64.set(None),
            vms.release.set(None),
        );
    }
}

/// What the VM lanes boot with: each architecture's tracer, amd64's root-only test
/// binaries, and the release.
pub struct Vms<'a> {
    pub tracer: Option<&'a Path>,
    pub guest_tests: &'a Later<GuestTests>,
    pub tracer_arm64: &'a Later<PathBuf>,
    pub release: &'a Later<dist::Artifacts>,
}

/// What a VM lane boots.
pub enum Job {
    /// A kernel's suite, the boot of its guest clock's cases.
    Suite(kernel::Kernel, Clock),
    /// Debian 12 under systemd with the release's .deb and image, on the kernel's
    /// architecture.
    Release(kernel::Kernel),
}

impl Job {
    /// Each kernel's suite, in `lanes`' order, and Debian 12 with the release second (`release`),
    /// so that one lane takes it, once made, while the other runs the longest suite; then the
    /// short boots under icount of the kernels `selection` runs such cases on.
    pub fn queue(
        lanes: &[(arch::Arch, kernel::Series)],
        release: bool,
        selection: &Selection,
        tools: &setup::Tools,
    ) -> anyhow::Result<Vec<Job>> {
        let kernels = lanes
            .iter()
            .map(|(a, s)| kernel::resolve_for(s.name, &tools.kernels, *a))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let counted: Vec<Job> = kernels
            .iter()
            .filter(|k| testing::suite::boots(selection, k, Clock::Instructions))
            .map(|k| Job::Suite(k.clone(), Clock::Instructions))
            .collect();
        let mut vms: Vec<Job> = kernels
            .into_iter()
            // The suite's boot, unless the cases selected run only under icount: where
            // none runs at all, it says so.
            .filter(|k| {
                selection.is_all()
                    || testing::suite::boots(selection, k, Clock::Host)
                    || !testing::suite::boots(selection, k, Clock::Instructions)
            })
            .map(|k| Job::Suite(k, Clock::Host))
            .collect();
        if release {
            let kernel = kernel::resolve(testing::release::KERNEL, &tools.kernels)?;
            vms.insert(1.min(vms.len()), Job::Release(kernel));
            // arm64's after the suites, before the boots under icount.
            let arm64 = kernel::resolve_for(
                testing::release::KERNEL,
                &tools.kernels,
                arch::Arch::Aarch64,
            )?;
            vms.push(Job::Release(arm64));
        }
        vms.extend(counted);
        Ok(vms)
    }

    /// Whether the boot runs amd64's root-only test binaries.
    pub fn runs_root_only(&self, selection: &Selection) -> bool {
        matches!(self, Job::Suite(kernel, clock)
            if testing::suite::runs_root_only(selection, kernel, *clock))
    }

    /// Whether what the boot needs is there (it need not wait).
    fn ready(&self, vms: &Vms<'_>, selection: &Selection) -> bool {
        match self {
            Job::Suite(kernel, _) => match kernel.arch {
                arch::Arch::X86_64 => {
                    !self.runs_root_only(selection) || vms.guest_tests.get().is_some()
                }
                arch::Arch::Aarch64 => vms.tracer_arm64.get().is_some(),
            },
            Job::Release(_) => vms.release.get().is_some(),
        }
    }

    /// Boot and judge with the tracer of the kernel's architecture (amd64's, and arm64's
    /// where built), QEMU's timeout and whether with KVM; the lane's name for the timing
    /// line, and whether the VM could run, with the per-case results file it wrote.
    fn run(
        self,
        vms: &Vms<'_>,
        tools: &setup::Tools,
        (timeout, kvm): (Duration, bool),
        selection: &Selection,
        tally: &mut Tally,
    ) -> (String, anyhow::Result<Option<PathBuf>>) {
        let root_only = self.runs_root_only(selection);
        match self {
            Job::Suite(kernel, clock) => {
                let harden = kernel.name == HARDEN_KERNEL;
                let name = format!("VM {}{}", kernel.name, clock.suffix());
                let tracer = match kernel.arch {
                    arch::Arch::X86_64 => vms.tracer,
                    arch::Arch::Aarch64 => {
                        let Some(bin) = vms.tracer_arm64.wait() else {
                            // Its build's failure is said where it was built.
                            let why = "the arm64 tracer did not build (above)";
                            tally.skip(&kernel.name, "VM boots, runs the suite", why);
                            return (name, Ok(None));
                        };
                        Some(bin.as_path())
                    }
                };
                let Some(tracer) = tracer else {
                    let e = anyhow::anyhow!("no tracer built for {}", kernel.name);
                    return (name, Err(e));
                };
                // Not built: said where they were built, and by the case that runs them.
                let guest_tests = if root_only {
                    vms.guest_tests.wait().as_deref().unwrap_or_default()
                } else {
                    &[]
                };
                let built = testing::suite::Built {
                    tracer,
                    guest_tests,
                };
                let selection = selection.on_clock(clock);
                let run = testing::suite::vm_suite(
                    &kernel, &built, timeout, kvm, harden, &selection, tally,
                );
                (name, run)
            }
            Job::Release(kernel) => {
                let name = match kernel.arch {
                    arch::Arch::X86_64 => "VM release (Debian 12)".to_owned(),
                    arch::Arch::Aarch64 => "VM release (Debian 12 arm64)".to_owned(),
                };
                // Not made: its failure is said where it was made.
                let Some(made) = vms.release.wait() else {
                    return (name, Ok(None));
                };
                let run = tools.debian_rootfs(kernel.arch).and_then(|rootfs| {
                    testing::release::vm(&kernel, made, rootfs, timeout, kvm, tally)
                });
                (name, run.map(|()| None))
            }
        }
    }
}

/// The next boot for a lane: the first whose inputs are there, else the first (which
/// waits for them).
fn next(queue: &Mutex<Vec<Job>>, vms: &Vms<'_>, selection: &Selection) -> Option<Job> {
    let mut queue = queue.lock().ok()?;
    if queue.is_empty() {
        return None;
    }
    let at = queue
        .iter()
        .position(|j| j.ready(vms, selection))
        .unwrap_or(0);
    Some(queue.remove(at))
}

/// What the lanes did: their verdicts, the per-case results files they wrote, each VM's
/// time, and the first boot that could not run.
pub struct Done {
    pub tally: Tally,
    pub written: Vec<PathBuf>,
    pub took: Vec<(String, Duration)>,
    pub failure: Option<anyhow::Error>,
}

/// Boot the `queue`'s VMs, `jobs` at once.
pub fn run(
    queue: Vec<Job>,
    jobs: usize,
    vms: &Vms<'_>,
    (tools, timeout, selection): (&setup::Tools, (Duration, bool), &Selection),
) -> Done {
    let lanes = jobs.min(queue.len()).max(1);
    let queue = Mutex::new(queue);
    let done = std::thread::scope(|scope| {
        let lanes: Vec<_> = (0..lanes)
            .map(|_| {
                scope.spawn(|| {
                    let mut tally = Tally::default();
                    let mut took = Vec::new();
                    let mut written = Vec::new();
                    while let Some(job) = next(&queue, vms, selection) {
                        let start = Instant::now();
                        let (name, run) = job.run(vms, tools, timeout, selection, &mut tally);
                        took.push((name, start.elapsed()));
                        match run {
                            Ok(Some(path)) => written.push(path),
                            Ok(None) => {}
                            Err(e) => return (tally, took, written, Err(e)),
                        }
                    }
                    (tally, took, written, Ok(()))
                })
            })
            .collect();
        lanes
            .into_iter()
            .map(|l| l.join().expect("a VM lane panicked"))
            .collect::<Vec<_>>()
    });
    let mut all = Done {
        tally: Tally::default(),
        written: Vec::new(),
        took: Vec::new(),
        failure: None,
    };
    for (lane, took, paths, run) in done {
        all.tally.merge(&lane);
        all.took.extend(took);
        all.written.extend(paths);
        all.failure = all.failure.or(run.err());
    }
    all
}
