//! Facts about the host that decide what can attach and how: the kernel's release and
//! version, its preemption model, whether it has kprobes, its CPUs,
//! `/proc/sys/fs/dentry-state`; and, in the submodules, its symbols, its BTF and the layout
//! the programs read from it, tracefs, its cgroups, the names of the pods, containers and
//! units in them, this process's privileges and capabilities, whether the kernel lets it
//! open perf events, its locked-memory limit, and a process's `/proc/PID/stat`.
//!
//! No aya and no kernel programs here: these are read from procfs, sysfs, tracefs and the
//! kernel's BTF (and two trial system calls, in [`caps`] and [`perf_event`]), so that what
//! needs only a host fact, as xtask does, neither builds the kernel programs nor links aya;
//! tracer-loader loads and attaches them.

pub mod arch;
pub mod btf;
pub mod caps;
pub mod cgroup;
pub mod kallsyms;
pub mod layout;
pub mod memlock;
pub mod names;
pub mod perf_event;
pub mod privileges;
pub mod stat;
pub mod tracefs;

use tracer_core::findings::{KernelFeatures, KernelInfo};
use tracer_core::snapshot::DentryState;

/// `/proc/sys/fs/dentry-state` now, if readable.
#[must_use]
pub fn read_dentry_state() -> Option<DentryState> {
    DentryState::parse(&std::fs::read_to_string("/proc/sys/fs/dentry-state").ok()?).ok()
}

/// `uname -r`.
#[must_use]
pub fn kernel_release() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_owned())
}

/// `(major, minor)` of a kernel release such as `7.3.4+deb13-cloud-amd64`.
#[must_use]
pub fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.trim().split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Where a kernel built with `PREEMPT_DYNAMIC` shows, and takes, its preemption model.
const DEBUGFS_PREEMPT: &str = "/sys/kernel/debug/sched/preempt";

/// The running kernel's preemption model, as far as it can be learned.
///
/// fentry trampolines run their programs with only migration disabled: under the `full`
/// and `lazy` models (and `PREEMPT_RT`) a program can be preempted mid-run, and the
/// kernel then skips that program's next run on the same CPU (counted in its recursion
/// misses). Under `none` and `voluntary`, kernel code is not preempted there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Preemption {
    /// `none`, `voluntary`, `full`, `lazy` or `rt`; None when nothing says.
    pub model: Option<String>,
    /// Where the model was read.
    pub source: &'static str,
}

impl Preemption {
    /// Read from debugfs (`sched/preempt`, the model in force), else the kernel command
    /// line's `preempt=`, else the kernel's config or version string (the built default).
    #[must_use]
    pub fn of_this_kernel() -> Preemption {
        let read = |p: &str| std::fs::read_to_string(p).ok();
        if let Some(model) = Self::in_force() {
            return Preemption {
                model: Some(model),
                source: DEBUGFS_PREEMPT,
            };
        }
        if let Some(model) = read("/proc/cmdline").as_deref().and_then(|c| {
            c.split_whitespace()
                .find_map(|w| w.strip_prefix("preempt="))
                .map(str::to_owned)
        }) {
            return Preemption {
                model: Some(model),
                source: "the kernel command line",
            };
        }
        let release = read("/proc/sys/kernel/osrelease").unwrap_or_default();
        if let Some(model) = read(&format!("/boot/config-{}", release.trim()))
            .as_deref()
            .and_then(Self::from_config)
        {
            return Preemption {
                model: Some(model),
                source: "the kernel's config",
            };
        }
        Preemption {
            model: read("/proc/sys/kernel/version")
                .as_deref()
                .and_then(Self::from_version),
            source: "the kernel's version string",
        }
    }

    /// The model in force on a kernel that chooses it at boot or run time
    /// (`PREEMPT_DYNAMIC`), as debugfs shows it; None where it does not.
    #[must_use]
    pub fn in_force() -> Option<String> {
        std::fs::read_to_string(DEBUGFS_PREEMPT)
            .ok()
            .as_deref()
            .and_then(Self::from_debugfs)
    }

    /// The model in force as [`Preemption::in_force`] read it, when this was read there.
    #[must_use]
    pub fn shown_in_force(&self) -> Option<&str> {
        (self.source == DEBUGFS_PREEMPT)
            .then_some(self.model.as_deref())
            .flatten()
    }

    /// Whether `model` runs kernel code without preempting it.
    #[must_use]
    pub fn never_preempts(model: &str) -> bool {
        matches!(model, "none" | "voluntary")
    }

    /// `none voluntary (full) lazy`: the model in parentheses.
    fn from_debugfs(text: &str) -> Option<String> {
        text.split_whitespace()
            .find_map(|w| w.strip_prefix('(')?.strip_suffix(')'))
            .map(str::to_owned)
    }

    /// The `CONFIG_PREEMPT*` choice a kernel was built with.
    fn from_config(text: &str) -> Option<String> {
        [
            ("CONFIG_PREEMPT_RT=y", "rt"),
            ("CONFIG_PREEMPT_LAZY=y", "lazy"),
            ("CONFIG_PREEMPT=y", "full"),
            ("CONFIG_PREEMPT_VOLUNTARY=y", "voluntary"),
            ("CONFIG_PREEMPT_NONE=y", "none"),
        ]
        .iter()
        .find(|(line, _)| text.lines().any(|l| l.trim() == *line))
        .map(|(_, model)| (*model).to_owned())
    }

    /// `#1 SMP PREEMPT_RT ...` or `#1 SMP PREEMPT ...` (a fixed model); a kernel built
    /// with `PREEMPT_DYNAMIC` or without preemption does not say.
    fn from_version(text: &str) -> Option<String> {
        let words: Vec<&str> = text.split_whitespace().collect();
        if words.contains(&"PREEMPT_RT") {
            Some("rt".to_owned())
        } else if words.contains(&"PREEMPT") {
            Some("full".to_owned())
        } else {
            None
        }
    }

    /// Whether programs that only disable migration can be preempted mid-run.
    #[must_use]
    pub fn preempts_programs(&self) -> bool {
        matches!(self.model.as_deref(), Some("full" | "lazy" | "rt"))
    }
}

/// The running kernel as the findings weigh it: its release and the settings that change
/// the traced paths, each `None` where it cannot be read (a file absent on this kernel, or
/// not readable here).
#[must_use]
pub fn kernel_info() -> KernelInfo {
    let flag = |path: &str| std::fs::read_to_string(path).ok().as_deref().and_then(flag);
    let preemption = Preemption::of_this_kernel();
    let mut info =
        kernel_release().map_or_else(KernelInfo::unknown, |r| KernelInfo::from_release(&r));
    info.features = KernelFeatures {
        preempt_rt: preemption.model.as_deref().map(|m| m == "rt"),
        rcu_normal: flag("/sys/kernel/rcu_normal"),
        rcu_expedited: flag("/sys/kernel/rcu_expedited"),
        // Since 6.13 (fs/dcache.c); absent before.
        dentry_negative: flag("/proc/sys/fs/dentry-negative"),
    };
    info
}

/// A `0`/`1` switch of sysfs or procfs.
fn flag(text: &str) -> Option<bool> {
    match text.trim() {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    }
}

/// Whether this kernel can attach kprobes at all: it has the kprobe PMU, which
/// `CONFIG_KPROBES` brings.
#[must_use]
pub fn kprobes_supported() -> bool {
    std::path::Path::new("/sys/bus/event_source/devices/kprobe").exists()
}

/// `, and /boot/config-R says "# CONFIG_X is not set"` for `option` (`CONFIG_X`), or empty
/// when no config is found.
#[must_use]
pub fn kernel_config_says(option: &str) -> String {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let path = format!("/boot/config-{}", release.trim());
    let Ok(text) = std::fs::read_to_string(&path) else {
        return String::new();
    };
    text.lines()
        .find(|l| {
            l.starts_with(&format!("{option}=")) || l.contains(&format!("{option} is not set"))
        })
        .map(|l| format!(", and {path} says \"{l}\""))
        .unwrap_or_default()
}

/// Whether this kernel's kprobe links report their `missed` count (Linux >= 6.7).
#[must_use]
pub fn kprobe_misses_reported() -> bool {
    kernel_release().as_deref().and_then(kernel_version) >= Some((6, 7))
}

/// How many CPUs a `/sys/devices/system/cpu/possible` list (`0-3,8`) names.
#[must_use]
pub fn possible_cpus(list: &str) -> Option<u32> {
    list.trim().split(',').try_fold(0u32, |n, range| {
        let (a, b) = range.split_once('-').unwrap_or((range, range));
        let (a, b) = (a.parse::<u32>().ok()?, b.parse::<u32>().ok()?);
        n.checked_add(b.checked_sub(a)?.checked_add(1)?)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switches_read_as_the_kernel_writes_them() {
        assert_eq!(flag("1\n"), Some(true));
        assert_eq!(flag("0\n"), Some(false));
        assert_eq!(flag(""), None);
        assert_eq!(flag("yes"), None);
        // This host's: a release, and what it could read (`None` where it could not).
        let k = kernel_info();
        assert_eq!(k.release, kernel_release());
        assert_eq!(
            k.features.rcu_normal.is_some(),
            std::path::Path::new("/sys/kernel/rcu_normal").exists()
        );
    }

    #[test]
    fn preemption_model_is_read_where_the_kernel_says_it() {
        assert_eq!(
            Preemption::from_debugfs("none voluntary full (lazy)\n").as_deref(),
            Some("lazy")
        );
        assert_eq!(
            Preemption::from_debugfs("none (voluntary) full\n").as_deref(),
            Some("voluntary")
        );
        // Debian's 7.3 and 6.12 cloud configs.
        let lazy = "CONFIG_PREEMPT_BUILD=y\n# CONFIG_PREEMPT is not set\nCONFIG_PREEMPT_LAZY=y\nCONFIG_PREEMPT_DYNAMIC=y\n";
        let voluntary =
            "CONFIG_PREEMPT_BUILD=y\nCONFIG_PREEMPT_VOLUNTARY=y\n# CONFIG_PREEMPT is not set\n";
        assert_eq!(Preemption::from_config(lazy).as_deref(), Some("lazy"));
        assert_eq!(
            Preemption::from_config(voluntary).as_deref(),
            Some("voluntary")
        );
        assert_eq!(
            Preemption::from_version("#1 SMP PREEMPT_DYNAMIC Debian 7.3.4").as_deref(),
            None
        );
        assert_eq!(
            Preemption::from_version("#1 SMP PREEMPT Mon").as_deref(),
            Some("full")
        );
        // Only a model debugfs showed is the one in force; a built default is not.
        let read = |model: &str, source| Preemption {
            model: Some(model.to_owned()),
            source,
        };
        assert_eq!(
            read("voluntary", DEBUGFS_PREEMPT).shown_in_force(),
            Some("voluntary")
        );
        assert_eq!(
            read("voluntary", "the kernel's config").shown_in_force(),
            None
        );
    }
}
