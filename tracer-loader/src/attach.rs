//! Loads the kernel programs and attaches each probe where this kernel allows.
//!
//! One missing symbol never stops the others: every probe ends in an [`AttachState`] that
//! the Snapshot carries (attached and how, absent on this kernel, or failed and why).

use std::{collections::BTreeMap, path::Path};

use aya::{
    Ebpf, EbpfLoader,
    programs::{FEntry, FExit, KProbe, TracePoint, kprobe::KProbeLinkId, links::FdLink},
    util::KernelVersion,
};
use tracer_common::{FUNCTIONS, PROBES, Probe, maps};
use tracer_core::snapshot::{AttachMethod, AttachState};

use crate::{
    host::{
        Preemption, btf,
        kallsyms::{Kallsyms, Resolution},
        possible_cpus,
    },
    kernel_log::KernelLog,
    links::KprobeLink,
    settle,
};

/// The kernel programs, built by build.rs from `tracer-ebpf`.
static EBPF_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/tracer"));

/// Why the probes could not be loaded at all.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The binary was built without bpf-linker.
    #[error(
        "this tracer binary was built without its kernel programs (bpf-linker was missing at \
         build time); build it with `cargo xtask build`"
    )]
    NoPrograms,
    /// Neither root nor the capabilities BPF tracing needs.
    #[error(
        "tracing needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN on Linux < 5.8); run as root, \
         or grant them (with CAP_DAC_READ_SEARCH, which reading tracefs needs): \
         `sudo setcap cap_bpf,cap_perfmon,cap_dac_read_search+ep $(command -v tracer)`"
    )]
    NoPrivileges,
    /// The kernel has no kprobe support.
    #[error(
        "this kernel cannot attach kprobes: CONFIG_KPROBES is not set (no kprobe PMU under \
         /sys/bus/event_source/devices){config}. tracer needs a kernel built with \
         CONFIG_KPROBES=y, as Debian, Ubuntu, Fedora and RHEL kernels are. Without one, \
         `tracer model SCENARIO` predicts these paths (see `tracer model --list`)"
    )]
    NoKprobes {
        /// What the kernel config file says, when found.
        config: String,
    },
    /// kallsyms could not be read.
    #[error("cannot read /proc/kallsyms: {0}")]
    Kallsyms(std::io::Error),
    /// Not one probe could attach.
    #[error("no probe could be attached: {0}")]
    NothingAttached(String),
    /// The slow-call threshold could not be written.
    #[error("setting the slow-call threshold: {0}")]
    SlowThreshold(String),
    /// Recording could not be started.
    #[error("starting to record: {0}")]
    Record(String),
    /// The object was rejected as a whole.
    #[error("loading the kernel programs failed: {0}")]
    Load(#[from] aya::EbpfError),
    /// The maps cannot be sized within the kernel-memory budget.
    #[error("{0}")]
    Budget(String),
}

/// The loaded programs, and what became of each probe. Dropping it detaches everything.
pub struct Attached {
    /// The loaded object: programs and maps.
    pub ebpf: Ebpf,
    /// Outcome per probe.
    pub states: BTreeMap<Probe, AttachState>,
    /// Things the user should know (degraded features), one sentence each.
    pub warnings: Vec<String>,
    /// Whether the `cgroup:cgroup_mkdir`/`cgroup_rmdir` programs are attached, so
    /// `collect::drain_cgroup_events` learns cgroups as they are made.
    pub cgroup_events: bool,
    /// The programs' own messages (`--verbose`): drained before each reading of the maps.
    pub kernel_log: KernelLog,
    /// The kprobes' and kretprobes' links, kept from attaching (where they are links) to
    /// read the hits they missed (`read::events::kprobe_misses`); dropped last, detaching them.
    pub kprobe_links: Vec<KprobeLink>,
    /// The entries the resizable maps were given, and the kernel memory of all the maps.
    pub sizes: crate::sizing::Sizes,
    /// Runs the kernel skipped (its programs' recursion misses, its kprobes' misses) before
    /// recording started: attaching's, not the traced span's.
    pub misses_before_recording: (u64, u64),
    /// When recording started (`RECORDING` set): the start of the span the maps hold, and
    /// of the slow calls' rate limit's window.
    pub recording_since: settle::RecordingSince,
}

impl Attached {
    /// Tell the programs that a child tracer forks to run a command has not exec'd yet
    /// (`on`), or no longer exists: only meanwhile do they look for its work (see
    /// [`maps::FORKING`]).
    ///
    /// # Errors
    /// The map is missing or cannot be written.
    pub fn forking(&mut self, on: bool) -> Result<(), String> {
        settle::set_word(&mut self.ebpf, maps::FORKING, u64::from(on))
    }
}

/// Check what tracing needs before touching the kernel, so the error names the real cause.
///
/// # Errors
/// The first missing prerequisite.
pub fn preflight() -> Result<(), LoadError> {
    preflight_common()?;
    kprobe_support()
}

/// The programs are embedded and we may load them.
fn preflight_common() -> Result<(), LoadError> {
    if EBPF_OBJECT.is_empty() {
        return Err(LoadError::NoPrograms);
    }
    if !has_tracing_privileges() {
        return Err(LoadError::NoPrivileges);
    }
    Ok(())
}

/// Whether this kernel can attach kprobes at all.
fn kprobe_support() -> Result<(), LoadError> {
    if Path::new("/sys/bus/event_source/devices/kprobe").exists() {
        Ok(())
    } else {
        Err(LoadError::NoKprobes {
            config: kernel_config_says("CONFIG_KPROBES"),
        })
    }
}

/// `CAP_SYS_ADMIN`, or `CAP_BPF` with `CAP_PERFMON`, in the effective set.
fn has_tracing_privileges() -> bool {
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_PERFMON: u32 = 38;
    const CAP_BPF: u32 = 39;
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    let Some(eff) = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
    else {
        return false;
    };
    let has = |cap: u32| eff & (1 << cap) != 0;
    has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON))
}

/// `, and /boot/config-R says "# CONFIG_X is not set"`, or empty when no config is found.
fn kernel_config_says(option: &str) -> String {
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

/// How function probes are hooked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum AttachMode {
    /// fentry/fexit where the kernel allows it (checked by a trial attach), else kprobes.
    #[default]
    Auto,
    /// kprobe/kretprobe only.
    Kprobe,
    /// fentry/fexit only (BPF trampolines; Linux >= 5.5 with BTF).
    Fentry,
}

/// What a kretprobe can hold on this kernel, when that can lose returns: a kernel built
/// without `CONFIG_PREEMPTION` (its `preempt_schedule` exists only with it) gives each
/// kretprobe as many instances as the machine has possible CPUs (`register_kretprobe`'s
/// default, which perf's kprobes cannot raise), so more calls in flight at once in one
/// traced function than that lose their return. Such calls are counted, not hidden.
fn kretprobes_held_per_function(kallsyms: &Kallsyms) -> Option<String> {
    if kallsyms.is_empty() || kallsyms.has("preempt_schedule") {
        return None;
    }
    let cpus = std::fs::read_to_string("/sys/devices/system/cpu/possible")
        .ok()
        .and_then(|s| possible_cpus(&s));
    let held = cpus.map_or_else(|| "one per possible CPU".to_owned(), |n| n.to_string());
    Some(format!(
        "this kernel is built without CONFIG_PREEMPTION, so each kretprobe holds only {held} \
         calls in flight at once: more concurrent calls of one traced function lose their \
         return, counted under losses as entries without a return"
    ))
}

/// When the caller reads the maps while the probes record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapReads {
    /// Once, at the end (`tracer capture`).
    AtEnd,
    /// Every interval (`tracer serve`, `tracer top`).
    EveryInterval,
}

/// The attach mode to use for `wanted` on this kernel, whose maps are read as `reads` says.
///
/// Where the kernel preempts kernel code, each mode has a way to have runs skipped, each
/// counted by the kernel and reported as `program_misses`:
/// - an fentry program preempted mid-run makes the kernel skip that program's next run on
///   its CPU (seen: 2 of 322 calls, three rmdir loops at once on 2 CPUs on 7.3);
/// - a kprobe program is skipped while any BPF program or `bpf()` map operation holds the
///   CPU's BPF guard (`bpf_prog_active`), and a map operation preempted mid-way holds it
///   for as long as its task waits: a reader of the maps every interval makes that happen
///   (seen on 7.3: 67 of 7,995 calls per probe lost by kprobes under `tracer serve` over
///   2,000 cgroups, none by fentry).
///
/// So `auto` takes kprobes there for a capture, which reads the maps once at its end, and
/// fentry for the live views; elsewhere fentry. An explicit mode is kept, with a warning
/// where it can miss calls.
fn effective_mode(
    wanted: AttachMode,
    preemption: &Preemption,
    kprobes: bool,
    reads: MapReads,
    warnings: &mut Vec<String>,
) -> AttachMode {
    let model = preemption.model.as_deref().unwrap_or("unknown");
    if !preemption.preempts_programs() {
        return wanted;
    }
    match (wanted, reads) {
        (AttachMode::Auto, MapReads::AtEnd) if kprobes => {
            log::info!(
                "attaching kprobes, not fentry: this kernel preempts kernel code ({model} \
                 preemption, from {}), and a preempted fentry program makes the kernel skip \
                 its next run on that CPU",
                preemption.source
            );
            AttachMode::Kprobe
        }
        (AttachMode::Auto, MapReads::EveryInterval) if kprobes => {
            log::info!(
                "attaching fentry, not kprobes: this kernel preempts kernel code ({model} \
                 preemption, from {}), and the maps are read every interval: a kprobe \
                 program is skipped while a map operation on its CPU is preempted",
                preemption.source
            );
            AttachMode::Auto
        }
        (AttachMode::Fentry, _) => {
            warnings.push(format!(
                "fentry on a kernel that preempts kernel code ({model} preemption): a \
                 preempted program makes the kernel skip its next run on that CPU, so \
                 concurrent calls can be missed; they are counted as the loss \
                 program_misses{}",
                if reads == MapReads::AtEnd {
                    " (--attach kprobe misses none of them in a capture)"
                } else {
                    ""
                }
            ));
            AttachMode::Fentry
        }
        (AttachMode::Kprobe, MapReads::EveryInterval) => {
            warnings.push(format!(
                "kprobes on a kernel that preempts kernel code ({model} preemption), with the \
                 maps read every interval: a kprobe program is skipped while a map operation \
                 on its CPU is preempted, so calls can be missed; they are counted as the \
                 loss program_misses (the default attach, fentry here, missed fewer)"
            ));
            AttachMode::Kprobe
        }
        (other, _) => other,
    }
}

/// The probes `--probes` names (any probe name; derived spans bring the probes they come
/// from), or all of them.
///
/// # Errors
/// An unknown name, with the list of known ones.
pub fn select(names: Option<&str>) -> Result<Vec<Probe>, String> {
    let Some(names) = names else {
        return Ok(PROBES.to_vec());
    };
    let mut out = Vec::new();
    for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let Some(p) = Probe::from_name(name) else {
            let known: Vec<&str> = PROBES.iter().map(|p| p.name()).collect();
            return Err(format!(
                "unknown probe {name:?}; known probes: {}",
                known.join(", ")
            ));
        };
        let needs: &[Probe] = match p {
            Probe::InodeLockHold | Probe::InodeLockWait => &[Probe::VfsRmdir],
            Probe::PruneUnderInodeLock => &[Probe::VfsRmdir, Probe::ShrinkDcacheParent],
            _ => &[],
        };
        for q in needs.iter().chain([&p]) {
            if !out.contains(q) {
                out.push(*q);
            }
        }
    }
    if out.is_empty() {
        return Err("--probes names no probe".to_owned());
    }
    Ok(out)
}

/// What the programs need to know of the kernel's layout, from its BTF: struct offsets
/// (the dentry and inode ones, `task_struct`'s `real_parent` and `tgid`), `d_flags`
/// values, `vfs_rmdir`'s argument order.
#[derive(Debug, PartialEq, Eq)]
struct KernelLayout {
    /// Globals to set: (name, value).
    globals: Vec<(&'static str, u32)>,
    /// What was not in BTF and was assumed instead, one sentence each (`--verbose`).
    assumed: Vec<String>,
}

/// The kernel's layout from its BTF; `Err` says why the struct offsets are missing.
fn kernel_layout(raw: Result<&[u8], &String>) -> Result<KernelLayout, String> {
    let btf = btf::Btf::parse(raw.map_err(Clone::clone)?)
        .map_err(|e| format!("{}: {e}", btf::source().display()))?;
    let off = |s: &str, m: &str| btf.offset_of(s, m).map_err(|e| e.to_string());
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
    // The third syscall argument in the user's registers (x86-64's `dx`), which the
    // unlinkat kprobe and fentry read its flags from.
    match btf.offset_of("pt_regs", "dx") {
        Ok(off) => globals.push((maps::PT_REGS_ARG3, off)),
        Err(e) => assumed.push(format!(
            "pt_regs.dx is not in this kernel's BTF ({e}): assumed at offset 96 (x86-64)"
        )),
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

/// This process's `comm` (what the kernel programs' `bpf_get_current_comm` returns for it
/// and its children before exec), as two native-endian halves, NUL-padded.
fn own_comm() -> [u64; 2] {
    let name = std::fs::read("/proc/self/comm").unwrap_or_default();
    let mut comm = [0u8; 16];
    // The kernel keeps at most 15 bytes and a NUL.
    for (c, b) in comm
        .iter_mut()
        .zip(name.iter().take(15).take_while(|b| **b != b'\n'))
    {
        *c = *b;
    }
    let half = |i: usize| {
        let mut h = [0u8; 8];
        h.copy_from_slice(&comm[i * 8..i * 8 + 8]);
        u64::from_ne_bytes(h)
    };
    [half(0), half(1)]
}

/// Load the programs and attach `wanted` probes. Probes not in `wanted` are `NotRequested`.
/// Warnings (missing BTF offsets, ...) are returned beside the states for the caller to show.
///
/// # Errors
/// Only when nothing can be loaded at all, or `--attach kprobe` on a kernel without
/// kprobes; a probe that fails is reported in its state.
pub fn attach(wanted: &[Probe], mode: AttachMode) -> Result<Attached, LoadError> {
    attach_with_slow(
        wanted,
        mode,
        0,
        crate::sizing::DEFAULT_BUDGET_MIB << 20,
        MapReads::AtEnd,
    )
}

/// [`attach`], with the slow-call threshold (ns, 0: off) set before the first probe
/// attaches, so that every call that returns while attached is either reported as slow
/// or counted as not reported (`collect::set_slow_threshold` changes it later), and the
/// maps sized within `kernel_memory` bytes ([`crate::sizing`]), and the attach mode chosen
/// for how the caller reads the maps (`reads`: see [`effective_mode`]).
///
/// # Errors
/// As [`attach`]; also when the threshold cannot be set.
#[expect(
    clippy::too_many_lines,
    reason = "the attach sequence in its order: load, each kind of probe, then record"
)]
pub fn attach_with_slow(
    wanted: &[Probe],
    mode: AttachMode,
    slow_threshold_ns: u64,
    kernel_memory: u64,
    reads: MapReads,
) -> Result<Attached, LoadError> {
    preflight_common()?;
    let cpus = crate::sizing::possible_cpus().map_err(LoadError::Budget)?;
    let mut sizes = crate::sizing::choose(cpus, kernel_memory).map_err(LoadError::Budget)?;
    let kprobes = kprobe_support();
    if mode == AttachMode::Kprobe
        && let Err(e) = kprobes
    {
        return Err(e);
    }
    raise_memlock_limit();
    // The kernel writes out its symbols (6.8 MB on Debian's 6.12) while the BTF is parsed
    // and the object loaded, which need none of them. In a 2-CPU VM under TCG the symbols
    // took 1.6 to 3.4 s to read and parse, the BTF and the object 2.9 to 4 s: at once, the
    // first attach came 3.4 to 4.1 s after this point instead of 4.3 to 7.5 s.
    let kallsyms = std::thread::Builder::new()
        .name("tracer-kallsyms".into())
        .spawn(Kallsyms::read);

    let mut warnings = Vec::new();
    let preempts = Preemption::of_this_kernel();
    let mode = effective_mode(mode, &preempts, kprobes.is_ok(), reads, &mut warnings);
    // Tracefs first: the cgroup tracepoints' record layout is read from it before loading.
    let tracefs = ensure_tracefs();
    if let Err(e) = &tracefs {
        warnings.push(e.clone());
    }
    // One read of the kernel's BTF serves both our offsets and aya's fentry attach.
    let raw_btf = btf::read_sys_fs();
    let cgroup_layout = cgroup_tracepoint_layout();
    let test_misses = match std::env::var(TEST_MISS_ENV).ok().map(|s| test_miss(&s)) {
        Some(Ok(knob)) => Some(knob),
        Some(Err(e)) => {
            warnings.push(format!("{TEST_MISS_ENV} ignored: {e}"));
            None
        }
        None => None,
    };
    let (mut ebpf, offsets_valid) = load_object(
        raw_btf.as_deref(),
        cgroup_layout.as_ref().ok(),
        &mut sizes,
        cpus,
        test_misses.map(|(p, _)| p),
        &mut warnings,
    )?;
    let kernel_log = KernelLog::open(&mut ebpf);
    if let Some((_, n)) = test_misses {
        settle::set_word(&mut ebpf, maps::TEST_MISSES, n).map_err(LoadError::Record)?;
    }
    if slow_threshold_ns != 0 {
        settle::set_slow_threshold(&mut ebpf, slow_threshold_ns)
            .map_err(LoadError::SlowThreshold)?;
    }
    let aya_btf = match mode {
        AttachMode::Kprobe => None,
        _ => raw_btf
            .as_deref()
            .ok()
            .and_then(|raw| aya::Btf::parse(raw, aya::Endianness::Little).ok()),
    };

    let kallsyms = match kallsyms {
        Ok(reader) => reader
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the reading thread panicked"))),
        Err(_) => Kallsyms::read(),
    }
    .map_err(LoadError::Kallsyms)?;

    let mut states = BTreeMap::new();
    let mut kprobe_links = Vec::new();
    for &probe in FUNCTIONS {
        let state = if wanted.contains(&probe) {
            attach_function(
                &mut ebpf,
                &kallsyms,
                aya_btf.as_ref(),
                mode,
                kprobes.is_err(),
                probe,
                &mut kprobe_links,
            )
        } else {
            AttachState::NotRequested
        };
        states.insert(probe, state);
    }
    let syscalls_by = match mode {
        AttachMode::Kprobe => SyscallsBy::Kprobes(&kallsyms),
        _ => match aya_btf.as_ref() {
            Some(btf) => SyscallsBy::Fentry(&kallsyms, btf),
            None => SyscallsBy::Tracepoints,
        },
    };
    attach_syscalls(
        &mut ebpf,
        wanted,
        syscalls_by,
        tracefs.as_ref().err(),
        &mut states,
        &mut kprobe_links,
    );
    attach_derived(&mut ebpf, wanted, offsets_valid, &mut states);
    let cgroup_events = match cgroup_layout.and_then(|_| attach_cgroup_events(&mut ebpf)) {
        Ok(()) => true,
        Err(e) => {
            warnings.push(format!(
                "cgroups made during the capture are named only if they still exist at its \
                 end: {e}"
            ));
            false
        }
    };
    attach_thread_exits(&mut ebpf, &mut warnings);

    for (p, s) in &states {
        log::debug!("{}: {s:?}", p.name());
    }
    let by_kprobe = states.values().any(|s| {
        matches!(
            s,
            AttachState::Attached {
                method: AttachMethod::Kprobe,
                ..
            }
        )
    });
    if by_kprobe && let Some(held) = kretprobes_held_per_function(&kallsyms) {
        warnings.push(held);
    }
    let any_function = FUNCTIONS
        .iter()
        .any(|p| matches!(states[p], AttachState::Attached { .. }));
    if !any_function && FUNCTIONS.iter().any(|p| wanted.contains(p)) {
        let mut why = match kprobes {
            Err(e) => e.to_string(),
            Ok(()) => "every function probe failed (see the probes table)".to_owned(),
        };
        if let Err(e) = &tracefs {
            why = format!("{why}; and {e}");
        }
        if !states
            .values()
            .any(|s| matches!(s, AttachState::Attached { .. }))
        {
            return Err(LoadError::NothingAttached(why));
        }
        warnings.push(format!(
            "no kernel function could be traced, only syscalls and tracepoints: {why}"
        ));
    }
    if let Err(why) =
        frame_marks(&kallsyms, &states).and_then(|marks| settle::set_frame_marks(&mut ebpf, &marks))
    {
        warnings.push(format!(
            "a caller frame left by a return the kernel missed is dropped only at the \
             thread's next syscall, work item or exit, not as soon as the stack shows it \
             gone: {why}"
        ));
    }
    // Only now, with every program in place, do the programs start recording.
    let recording_since = start_recording(&mut ebpf, &mut warnings)?;
    let misses_before_recording = (
        crate::read::events::program_misses(&ebpf),
        crate::read::events::kprobe_misses(&kprobe_links),
    );
    Ok(Attached {
        ebpf,
        states,
        warnings,
        cgroup_events,
        kernel_log,
        kprobe_links,
        sizes,
        misses_before_recording,
        recording_since,
    })
}

/// The kernel return trampolines of kretprobes: Linux 5.10's, 5.11 to 5.18's, and since
/// (rethook).
const RETHOOK_SYMBOLS: [&str; 3] = [
    "arch_rethook_trampoline",
    "__kretprobe_trampoline",
    "kretprobe_trampoline",
];

/// What the programs compare a thread's stack with to tell that a caller's frame is still
/// active (`maps::FRAME_MARKS`): each function attached by fentry, its address; for those
/// attached by kprobes, the kretprobe return trampoline's. An error when one is not known:
/// then the programs get none, and trust frames as before.
fn frame_marks(
    kallsyms: &Kallsyms,
    states: &BTreeMap<Probe, AttachState>,
) -> Result<[u64; maps::FRAME_MARKS_LEN], String> {
    let mut marks = [0; maps::FRAME_MARKS_LEN];
    for &probe in FUNCTIONS {
        let Some(AttachState::Attached { method, symbol }) = states.get(&probe) else {
            continue;
        };
        match method {
            AttachMethod::Fentry => {
                marks[usize::from(probe.id())] = kallsyms
                    .address(symbol)
                    .ok_or_else(|| format!("/proc/kallsyms shows no single address of {symbol}"))?;
            }
            AttachMethod::Kprobe if marks[maps::FRAME_MARK_RETHOOK] == 0 => {
                marks[maps::FRAME_MARK_RETHOOK] = RETHOOK_SYMBOLS
                    .iter()
                    .find_map(|s| kallsyms.address(s))
                    .ok_or_else(|| {
                        format!(
                            "/proc/kallsyms shows no address of the kretprobe return \
                             trampoline ({})",
                            RETHOOK_SYMBOLS.join(", ")
                        )
                    })?;
            }
            AttachMethod::Kprobe | AttachMethod::Tracepoint => {}
        }
    }
    log::debug!("frame marks: {marks:x?}");
    Ok(marks)
}

/// Say (`--verbose`) where the loss `kprobe_misses` cannot be known.
fn note_kprobe_misses() {
    if !crate::host::kprobe_misses_reported() {
        log::info!(
            "this kernel's kprobe links do not report missed hits (Linux >= 6.7 does): \
             kprobe_misses stays 0 here"
        );
    }
}

/// Start recording once attaching has settled (see [`settle`]); a warning when it did not.
/// Returns when it started.
fn start_recording(
    ebpf: &mut Ebpf,
    warnings: &mut Vec<String>,
) -> Result<settle::RecordingSince, LoadError> {
    let (took, quiet, since) = settle::settle_and_record(ebpf).map_err(LoadError::Record)?;
    if quiet {
        log::info!(
            "recording after {} ms for attaching to settle",
            took.as_millis()
        );
    } else {
        warnings.push(format!(
            "grace-period waits were still starting {} s after attaching (a busy host, or \
             tracer's attaching): some of those first waits may be recorded",
            took.as_secs()
        ));
    }
    Ok(since)
}

/// The cgroup tracepoints both use this record layout (`TP_STRUCT__entry` of the `cgroup`
/// event class).
const CGROUP_FORMAT: &str = "events/cgroup/cgroup_mkdir/format";

/// Offsets of `root`, `id` and `path` in the cgroup tracepoints' records, from tracefs.
fn cgroup_tracepoint_layout() -> Result<[u32; 3], String> {
    let text = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .find_map(|dir| std::fs::read_to_string(Path::new(dir).join(CGROUP_FORMAT)).ok())
        .ok_or_else(|| format!("no tracefs file {CGROUP_FORMAT}"))?;
    cgroup_offsets(&text)
}

/// Parse a cgroup tracepoint's format file: the offsets of `int root`, `u64 id` and
/// `__data_loc char[] path`, checking their sizes (before Linux 5.7 `id` was an int).
///
/// # Errors
/// A field missing or of another size.
pub fn cgroup_offsets(format: &str) -> Result<[u32; 3], String> {
    let field = |name: &str, size: u32| -> Result<u32, String> {
        let line = format
            .lines()
            .map(str::trim)
            .find(|l| {
                l.strip_prefix("field:")
                    .and_then(|f| f.split(';').next())
                    .and_then(|decl| decl.split_whitespace().last())
                    == Some(name)
            })
            .ok_or_else(|| format!("the cgroup tracepoint has no field {name:?}"))?;
        let value = |key: &str| {
            line.split(';')
                .find_map(|part| part.trim().strip_prefix(key))
                .and_then(|v| v.parse::<u32>().ok())
        };
        let (Some(offset), Some(got)) = (value("offset:"), value("size:")) else {
            return Err(format!("unreadable field line {line:?}"));
        };
        if got != size {
            return Err(format!(
                "field {name:?} is {got} bytes, expected {size}: {line:?}"
            ));
        }
        Ok(offset)
    };
    Ok([field("root", 4)?, field("id", 8)?, field("path", 4)?])
}

/// Attach the `cgroup:cgroup_mkdir` and `cgroup:cgroup_rmdir` programs, both or neither.
fn attach_cgroup_events(ebpf: &mut Ebpf) -> Result<(), String> {
    match attach_tracepoints(ebpf, "cgroup", &["cgroup_mkdir", "cgroup_rmdir"]) {
        AttachState::Attached { .. } => Ok(()),
        AttachState::Failed { reason } => Err(reason),
        other => Err(format!("{other:?}")),
    }
}

/// Attach the programs that discard what a thread left in flight when nothing it traced can
/// be: as it exits (deleting its state, `sched:sched_process_exit`) and, for kernel
/// workers, as they take a work item (`workqueue:workqueue_execute_start`); or say what is
/// lost without them.
fn attach_thread_exits(ebpf: &mut Ebpf, warnings: &mut Vec<String>) {
    match attach_tracepoints(ebpf, "sched", &["sched_process_exit"]) {
        AttachState::Attached { .. } => {}
        AttachState::Failed { reason } => warnings.push(format!(
            "sched:sched_process_exit could not be attached ({reason}): a call an exiting \
             thread left in flight (its return missed) is discarded only when its thread id \
             is reused"
        )),
        other => warnings.push(format!("sched:sched_process_exit: {other:?}")),
    }
    match attach_tracepoints(ebpf, "workqueue", &["workqueue_execute_start"]) {
        AttachState::Attached { .. } => {}
        AttachState::Failed { reason } => warnings.push(format!(
            "workqueue:workqueue_execute_start could not be attached ({reason}): a call a \
             kernel worker left in flight (its return missed) is discarded only when that \
             worker enters the same function again or exits"
        )),
        other => warnings.push(format!("workqueue:workqueue_execute_start: {other:?}")),
    }
}

/// How the syscall probes are attached first (the syscall tracepoints where that fails).
enum SyscallsBy<'a> {
    /// kprobe and kretprobe on the syscalls' functions (`--attach kprobe`).
    Kprobes(&'a Kallsyms),
    /// fentry and fexit on them (the default): only the calls traced pay, where a syscall
    /// tracepoint's program puts every syscall of the host on the slow path.
    Fentry(&'a Kallsyms, &'a aya::Btf),
    /// The syscall tracepoints.
    Tracepoints,
}

/// The syscall probes `wanted`, or why not: `tracefs_unusable` fails the tracepoints. Each
/// is counted by kprobes or fentry on the syscall's functions (`by`) where they exist and
/// attach, else by its tracepoints.
fn attach_syscalls(
    ebpf: &mut Ebpf,
    wanted: &[Probe],
    by: SyscallsBy<'_>,
    tracefs_unusable: Option<&String>,
    states: &mut BTreeMap<Probe, AttachState>,
    kept: &mut Vec<KprobeLink>,
) {
    if matches!(by, SyscallsBy::Kprobes(_)) {
        note_kprobe_misses();
    }
    // All by kprobes, all by fentry or all by tracepoints: the unlinkat tracepoint would
    // count an rmdir its kprobe or fentry also counts.
    let by = match by {
        SyscallsBy::Kprobes(kallsyms) | SyscallsBy::Fentry(kallsyms, _) => {
            match syscall_symbols_missing(kallsyms) {
                None => by,
                Some(why) => {
                    log::info!("syscalls are counted by their tracepoints: {why}");
                    SyscallsBy::Tracepoints
                }
            }
        }
        SyscallsBy::Tracepoints => by,
    };
    let by = match by {
        SyscallsBy::Fentry(_, btf) => match attach_syscalls_fentry(ebpf, btf, wanted) {
            Ok(()) => by,
            Err(why) => {
                log::info!("syscalls are counted by their tracepoints, not fentry: {why}");
                SyscallsBy::Tracepoints
            }
        },
        _ => by,
    };
    for (probe, programs) in SYSCALLS {
        let state = if !wanted.contains(&probe) {
            AttachState::NotRequested
        } else if matches!(by, SyscallsBy::Kprobes(_)) {
            attach_syscall_kprobes(ebpf, probe, kept)
                .unwrap_or_else(|reason| AttachState::Failed { reason })
        } else if matches!(by, SyscallsBy::Fentry(..)) {
            AttachState::Attached {
                method: AttachMethod::Fentry,
                symbol: syscall_symbols(probe).join(","),
            }
        } else if let Some(reason) = tracefs_unusable {
            AttachState::Failed {
                reason: reason.clone(),
            }
        } else {
            attach_tracepoints(ebpf, "syscalls", programs)
        };
        states.insert(probe, state);
    }
}

/// The functions of `probe`'s syscalls (`__x64_sys_rmdir`, `__x64_sys_unlinkat`).
fn syscall_symbols(probe: Probe) -> Vec<String> {
    let prefix = SYSCALL_PREFIX.unwrap_or_default();
    SYSCALL_FUNCTIONS
        .iter()
        .filter(|(p, _)| *p == probe)
        .flat_map(|(_, names)| names.iter())
        .map(|name| format!("{prefix}{name}"))
        .collect()
}

/// fentry and fexit on the functions of every syscall probe `wanted`, all or none: on
/// failure every one of them is unloaded again.
fn attach_syscalls_fentry(ebpf: &mut Ebpf, btf: &aya::Btf, wanted: &[Probe]) -> Result<(), String> {
    let prefix = SYSCALL_PREFIX.unwrap_or_default();
    let mut names: Vec<&str> = SYSCALL_FUNCTIONS
        .iter()
        .filter(|(p, _)| wanted.contains(p))
        .flat_map(|(_, names)| names.iter().copied())
        .collect();
    names.sort_unstable();
    names.dedup();
    let mut done = Vec::new();
    for name in names {
        let symbol = format!("{prefix}{name}");
        // The exit first, for the reason `attach_fentry` gives.
        let pair = [
            (format!("sys_{name}_fexit"), true),
            (format!("sys_{name}_fentry"), false),
        ];
        for (program, exit) in pair {
            let result = if exit {
                typed_program::<FExit>(ebpf, &program).and_then(|p| {
                    p.load(&symbol, btf)
                        .and_then(|()| p.attach().map(drop))
                        .map_err(|e| format!("fexit on {symbol} refused: {}", short(&e)))
                })
            } else {
                typed_program::<FEntry>(ebpf, &program).and_then(|p| {
                    p.load(&symbol, btf)
                        .and_then(|()| p.attach().map(drop))
                        .map_err(|e| format!("fentry on {symbol} refused: {}", short(&e)))
                })
            };
            done.push((program, exit));
            if let Err(e) = result {
                for (program, exit) in &done {
                    // Unloading detaches; a program never loaded has nothing to undo.
                    let _ = if *exit {
                        typed_program::<FExit>(ebpf, program).map(|p| p.unload().is_ok())
                    } else {
                        typed_program::<FEntry>(ebpf, program).map(|p| p.unload().is_ok())
                    };
                }
                return Err(e);
            }
        }
    }
    Ok(())
}

/// The syscall functions that count each syscall probe by kprobe, with their programs
/// (`unlinkat` serves rmdir and unlink, as its tracepoints do).
const SYSCALL_FUNCTIONS: [(Probe, &[&str]); 3] = [
    (Probe::SysUmount, &["umount"]),
    (Probe::SysRmdir, &["rmdir", "unlinkat"]),
    (Probe::SysUnlink, &["unlink", "unlinkat"]),
];

/// How the architecture names a syscall's function: the wrapper that takes the user's
/// registers (`__x64_sys_unlinkat(regs)`), whose layout the unlinkat program reads.
const SYSCALL_PREFIX: Option<&str> = if cfg!(target_arch = "x86_64") {
    Some("__x64_sys_")
} else {
    None
};

/// Why the syscalls cannot all be counted by kprobes on their functions, if they cannot.
fn syscall_symbols_missing(kallsyms: &Kallsyms) -> Option<String> {
    let Some(prefix) = SYSCALL_PREFIX else {
        return Some("the syscall functions' names are only known on x86-64".to_owned());
    };
    SYSCALL_FUNCTIONS
        .iter()
        .flat_map(|(_, names)| names.iter())
        .map(|name| format!("{prefix}{name}"))
        .find(|symbol| !matches!(kallsyms.resolve(symbol), Resolution::Exact(_)))
        .map(|symbol| format!("no single kernel function {symbol}"))
}

/// Attach kprobe and kretprobe to each of `probe`'s syscall functions (their names checked
/// by [`syscall_symbols_missing`]).
fn attach_syscall_kprobes(
    ebpf: &mut Ebpf,
    probe: Probe,
    kept: &mut Vec<KprobeLink>,
) -> Result<AttachState, String> {
    let prefix = SYSCALL_PREFIX.unwrap_or_default();
    let (_, syscalls) = SYSCALL_FUNCTIONS
        .iter()
        .find(|(p, _)| *p == probe)
        .ok_or("no syscall functions")?;
    let symbols: Vec<(&str, String)> = syscalls
        .iter()
        .map(|name| (*name, format!("{prefix}{name}")))
        .collect();
    for (name, symbol) in &symbols {
        let entry = format!("sys_{name}_kprobe");
        let exit = format!("sys_{name}_kretprobe");
        if typed_program::<KProbe>(ebpf, &entry)?.fd().is_ok() {
            continue; // attached for another probe (unlinkat)
        }
        attach_kprobe_pair(ebpf, &entry, &exit, symbol, kept)?;
    }
    Ok(AttachState::Attached {
        method: AttachMethod::Kprobe,
        symbol: symbols
            .iter()
            .map(|(_, s)| s.as_str())
            .collect::<Vec<_>>()
            .join(","),
    })
}

/// Why no tracepoint can attach when tracefs cannot be read.
const TRACEFS_DENIED: &str = "tracefs (/sys/kernel/tracing) cannot be read by this process: \
    the syscall, cgroup and lock tracepoints need CAP_DAC_READ_SEARCH besides CAP_BPF and \
    CAP_PERFMON (or root); grant it with `sudo setcap \
    cap_bpf,cap_perfmon,cap_dac_read_search+ep $(command -v tracer)`";

/// Tracepoints are attached through tracefs; mount it where the system has not (as
/// `mount -t tracefs nodev /sys/kernel/tracing` would).
fn ensure_tracefs() -> Result<(), String> {
    let mut denied = false;
    for p in [
        "/sys/kernel/tracing/events",
        "/sys/kernel/debug/tracing/events",
    ] {
        match Path::new(p).try_exists() {
            Ok(true) => return Ok(()),
            // tracefs is root's, mode 0700: without root a process needs
            // CAP_DAC_READ_SEARCH to look inside, as aya does to find a tracepoint's id.
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => denied = true,
            Ok(false) | Err(_) => {}
        }
    }
    if denied {
        return Err(TRACEFS_DENIED.to_owned());
    }
    let target = c"/sys/kernel/tracing";
    // SAFETY: valid NUL-terminated strings; no data argument.
    let rc = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            target.as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc == 0 {
        log::info!("mounted tracefs at /sys/kernel/tracing");
        Ok(())
    } else {
        Err(format!(
            "tracefs is not mounted and mounting it failed ({}): syscall and lock tracepoints \
             cannot attach; try `mount -t tracefs nodev /sys/kernel/tracing`",
            std::io::Error::last_os_error()
        ))
    }
}

/// Load the object with the kernel's struct offsets and our own pid set; whether the
/// offsets were found (else a warning says what is lost).
fn load_object(
    raw_btf: Result<&[u8], &String>,
    cgroup_layout: Option<&[u32; 3]>,
    chosen: &mut crate::sizing::Sizes,
    cpus: u32,
    test_miss: Option<Probe>,
    warnings: &mut Vec<String>,
) -> Result<(Ebpf, bool), LoadError> {
    // Before the loader, which borrows the sizes it is given.
    let knob = match std::env::var_os(MAP_ENTRIES_ENV).map(|s| map_entries(&s.to_string_lossy())) {
        Some(Ok(sizes)) => sizes,
        Some(Err(e)) => {
            warnings.push(format!("{MAP_ENTRIES_ENV} ignored: {e}"));
            Vec::new()
        }
        None => Vec::new(),
    };
    let mut loader = EbpfLoader::new();
    crate::kernel_log::configure(&mut loader);
    let miss_probe = test_miss.map_or(0, |p| u32::from(p.id()) + 1);
    if let Some(p) = test_miss {
        log::info!(
            "{TEST_MISS_ENV}: the return programs of {} skip runs",
            p.name()
        );
        loader.override_global(maps::TEST_MISS_PROBE, &miss_probe, true);
    }
    for (name, n) in crate::sizing::entries(chosen) {
        loader.map_max_entries(name, n);
    }
    for (name, n) in &knob {
        log::info!("{MAP_ENTRIES_ENV}: map {name} holds {n} entries");
        loader.map_max_entries(name, *n);
        match *name {
            maps::HIST => chosen.hist = *n,
            maps::COUNTERS => chosen.counters = *n,
            maps::THREADS => chosen.threads = *n,
            _ => {}
        }
        if *name == maps::RMDIR_LOCKS {
            // The programs hash a lock to its slots over the table's size.
            loader.override_global(maps::RMDIR_SLOTS, n, true);
        }
    }
    if let Some([root, id, path]) = cgroup_layout {
        loader.override_global(maps::CGROUP_TP_ROOT, root, true);
        loader.override_global(maps::CGROUP_TP_ID, id, true);
        loader.override_global(maps::CGROUP_TP_PATH, path, true);
    }
    let layout = kernel_layout(raw_btf);
    let valid: u32 = match &layout {
        Ok(layout) => {
            for (name, value) in &layout.globals {
                loader.override_global(name, value, true);
            }
            for note in &layout.assumed {
                log::info!("{note}");
            }
            1
        }
        Err(e) => {
            warnings.push(format!(
                "no kernel struct offsets ({e}): negative dentries are not classified and \
                 inode-lock waits are not watched"
            ));
            0
        }
    };
    loader.override_global(maps::OFFSETS_VALID, &valid, true);
    let self_tgid = std::process::id();
    loader.override_global(maps::SELF_TGID, &self_tgid, true);
    // A child forked to run the command is tracer's own work until it execs: known by
    // tracer's comm and its parent (offsets from BTF, set with the layout above; without
    // them it is recorded).
    let comm = own_comm();
    loader.override_global(maps::SELF_COMM, &comm, true);
    chosen.bytes = crate::sizing::map_bytes(cpus, chosen.hist, chosen.counters, chosen.threads);
    log::info!(
        "maps sized for {cpus} possible CPUs: HIST {} entries, COUNTERS {}, THREADS {}; \
         {} of kernel memory in all",
        chosen.hist,
        chosen.counters,
        chosen.threads,
        crate::sizing::mib(chosen.bytes)
    );
    Ok((loader.load(EBPF_OBJECT)?, valid == 1))
}

/// Test knob: `NAME=N[,NAME=N...]` gives the named maps N entries instead of their
/// capacity, so that a few calls fill one and the loss it causes can be checked.
pub const MAP_ENTRIES_ENV: &str = "TRACER_MAP_ENTRIES";

/// Test knob: `PROBE:N` makes the return programs of PROBE skip their next N runs, as when
/// the kernel misses returns (a kretprobe out of instances), so that what tracer does with
/// the state they leave behind can be checked.
pub const TEST_MISS_ENV: &str = "TRACER_TEST_MISS_RETURNS";

/// Parse [`TEST_MISS_ENV`]'s value.
///
/// # Errors
/// An unknown probe, or a count that is not a positive number.
pub fn test_miss(spec: &str) -> Result<(Probe, u64), String> {
    let (name, n) = spec
        .split_once(':')
        .ok_or_else(|| format!("{spec:?} is not PROBE:COUNT"))?;
    let probe = Probe::from_name(name.trim()).ok_or_else(|| format!("no probe {name:?}"))?;
    match n.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok((probe, n)),
        _ => Err(format!("{n:?} is not a positive count")),
    }
}

/// The maps [`MAP_ENTRIES_ENV`] may resize: those a full one loses calls in.
const RESIZABLE: [&str; 4] = [maps::HIST, maps::COUNTERS, maps::RMDIR_LOCKS, maps::THREADS];

/// Parse [`MAP_ENTRIES_ENV`]'s value.
///
/// # Errors
/// A map that cannot be resized, or a size that is not a positive number.
pub fn map_entries(spec: &str) -> Result<Vec<(&'static str, u32)>, String> {
    spec.split(',')
        .filter(|part| !part.trim().is_empty())
        .map(|part| {
            let (name, n) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?} is not NAME=ENTRIES"))?;
            let name = RESIZABLE
                .iter()
                .find(|m| **m == name.trim())
                .ok_or_else(|| {
                    format!(
                        "no map {name:?} to resize (one of {})",
                        RESIZABLE.join(", ")
                    )
                })?;
            match n.trim().parse::<u32>() {
                Ok(n) if n > 0 => Ok((*name, n)),
                _ => Err(format!("{n:?} is not a positive number of entries")),
            }
        })
        .collect()
}

/// The spans derived from `vfs_rmdir` share its fate; waits on its inode locks also need
/// the offsets and the lock-contention tracepoints.
fn attach_derived(
    ebpf: &mut Ebpf,
    wanted: &[Probe],
    offsets_valid: bool,
    states: &mut BTreeMap<Probe, AttachState>,
) {
    let rmdir = states[&Probe::VfsRmdir].clone();
    for p in [Probe::InodeLockHold, Probe::PruneUnderInodeLock] {
        let state = if wanted.contains(&p) {
            rmdir.clone()
        } else {
            AttachState::NotRequested
        };
        states.insert(p, state);
    }
    let wait = if !wanted.contains(&Probe::InodeLockWait) {
        AttachState::NotRequested
    } else if !offsets_valid {
        AttachState::Failed {
            reason: "needs the kernel's BTF for struct inode offsets".to_owned(),
        }
    } else if !matches!(rmdir, AttachState::Attached { .. }) {
        AttachState::Failed {
            reason: "needs the vfs_rmdir probe".to_owned(),
        }
    } else if !tracepoint_exists("lock", "contention_begin") {
        // Added in Linux 5.19; older kernels have no event for a sleeping lock's wait.
        AttachState::Absent {
            symbol: "lock:contention_begin (Linux >= 5.19)".to_owned(),
        }
    } else {
        attach_tracepoints(ebpf, "lock", &["contention_begin", "contention_end"])
    };
    states.insert(Probe::InodeLockWait, wait);
}

/// Whether tracefs lists the tracepoint `category:name` (tracefs mounted, as
/// [`ensure_tracefs`] makes sure).
fn tracepoint_exists(category: &str, name: &str) -> bool {
    ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .any(|dir| {
            Path::new(dir)
                .join("events")
                .join(category)
                .join(name)
                .is_dir()
        })
}

/// The syscall probes and their tracepoint programs (named as the tracepoints).
const SYSCALLS: [(Probe, &[&str]); 3] = [
    (Probe::SysUmount, &["sys_enter_umount", "sys_exit_umount"]),
    (
        Probe::SysRmdir,
        &[
            "sys_enter_rmdir",
            "sys_exit_rmdir",
            "sys_enter_unlinkat",
            "sys_exit_unlinkat",
        ],
    ),
    (
        Probe::SysUnlink,
        &[
            "sys_enter_unlink",
            "sys_exit_unlink",
            "sys_enter_unlinkat",
            "sys_exit_unlinkat",
        ],
    ),
];

/// Attach tracepoint programs named like the tracepoints, all or none. A program already
/// attached (unlinkat serves two probes) counts as attached.
fn attach_tracepoints(ebpf: &mut Ebpf, category: &str, programs: &[&str]) -> AttachState {
    for name in programs {
        let result = (|| -> Result<(), String> {
            let program: &mut TracePoint = typed_program(ebpf, name)?;
            if program.fd().is_ok() {
                return Ok(()); // loaded and attached for another probe
            }
            program.load().map_err(|e| format!("loading {name}: {e}"))?;
            program
                .attach(category, name)
                .map_err(|e| format!("tracepoint {category}:{name}: {e}"))?;
            Ok(())
        })();
        if let Err(reason) = result {
            return AttachState::Failed { reason };
        }
    }
    AttachState::Attached {
        method: AttachMethod::Tracepoint,
        symbol: format!("{category}:{}", programs[0]),
    }
}

/// Probes whose function the compiler may split, with callers calling the split-off body
/// (`vfs_rmdir.part.0` on Debian's 5.10): attached to that body where it exists.
const SPLIT_FUNCTIONS: &[Probe] = &[Probe::VfsRmdir];

/// Where `probe`'s function is on this kernel.
fn resolve(kallsyms: &Kallsyms, probe: Probe) -> Resolution {
    if SPLIT_FUNCTIONS.contains(&probe) {
        kallsyms.resolve_split(probe.name())
    } else {
        kallsyms.resolve(probe.name())
    }
}

fn attach_function(
    ebpf: &mut Ebpf,
    kallsyms: &Kallsyms,
    btf: Option<&aya::Btf>,
    mode: AttachMode,
    no_kprobes: bool,
    probe: Probe,
    kept: &mut Vec<KprobeLink>,
) -> AttachState {
    let symbol = match resolve(kallsyms, probe) {
        Resolution::Exact(s) | Resolution::Clone(s) => s,
        Resolution::Absent => {
            return AttachState::Absent {
                symbol: probe.name().to_owned(),
            };
        }
        Resolution::Ambiguous(n) => {
            return AttachState::Failed {
                reason: format!(
                    "{n} kernel functions are named {}; cannot tell which",
                    probe.name()
                ),
            };
        }
    };
    let mut fentry_error = None;
    // fentry needs the function in BTF by its own name: not for compiler clones.
    if mode != AttachMode::Kprobe && symbol == probe.name() {
        match btf {
            Some(btf) => match attach_fentry(ebpf, btf, probe) {
                Ok(()) => {
                    return AttachState::Attached {
                        method: AttachMethod::Fentry,
                        symbol,
                    };
                }
                Err(e) => fentry_error = Some(e),
            },
            None => fentry_error = Some("no kernel BTF".to_owned()),
        }
    }
    if mode == AttachMode::Fentry {
        let reason = fentry_error.unwrap_or_else(|| {
            format!(
                "{symbol} is a compiler clone of {}, not in BTF, and the calls go to it",
                probe.name()
            )
        });
        return AttachState::Failed {
            reason: format!("fentry: {reason}"),
        };
    }
    if no_kprobes {
        // The full explanation goes in the capture's warning; the state says it briefly.
        let also = fentry_error
            .map(|f| format!("; fentry: {f}"))
            .unwrap_or_default();
        return AttachState::Failed {
            reason: format!("no kprobes (CONFIG_KPROBES not set){also}"),
        };
    }
    match attach_kprobe(ebpf, probe, &symbol, kept) {
        Ok(()) => AttachState::Attached {
            method: AttachMethod::Kprobe,
            symbol,
        },
        Err(reason) => {
            let also = fentry_error
                .map(|f| format!(" (fentry: {f})"))
                .unwrap_or_default();
            AttachState::Failed {
                reason: format!("{reason}{also}"),
            }
        }
    }
}

/// The program `name` of the object, as program type `T`.
fn typed_program<'a, T>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut T, String>
where
    &'a mut T: TryFrom<&'a mut aya::programs::Program, Error = aya::programs::ProgramError>,
{
    ebpf.program_mut(name)
        .ok_or_else(|| format!("program {name} missing from the object"))?
        .try_into()
        .map_err(|e| format!("{name}: {e}"))
}

/// Load and attach `<name>_fentry`/`_fexit`; on failure nothing stays attached.
///
/// The exit program attaches first: a call whose entry is seen then always has its return
/// seen. The other way round, a grace-period wait entered between the two attaches (the
/// Tasks RCU threads wait for one as trampolines change) would stay in flight for
/// [`settle`] until its cap.
fn attach_fentry(ebpf: &mut Ebpf, btf: &aya::Btf, probe: Probe) -> Result<(), String> {
    let entry = format!("{}_fentry", probe.name());
    let exit = format!("{}_fexit", probe.name());
    let program: &mut FExit = typed_program(ebpf, &exit)?;
    program
        .load(probe.name(), btf)
        .map_err(|e| format!("fexit refused: {}", short(&e)))?;
    let link = program
        .attach()
        .map_err(|e| format!("fexit attach refused: {}", short(&e)))?;
    let result = (|| -> Result<(), String> {
        let program: &mut FEntry = typed_program(ebpf, &entry)?;
        program
            .load(probe.name(), btf)
            .map_err(|e| format!("refused: {}", short(&e)))?;
        program
            .attach()
            .map_err(|e| format!("attach refused: {}", short(&e)))?;
        Ok(())
    })();
    if result.is_err()
        && let Ok(p) = typed_program::<FExit>(ebpf, &exit)
    {
        let _ = p.detach(link);
    }
    result
}

/// Load and attach `<name>_entry`/`_exit` (kprobe/kretprobe); on failure nothing stays attached.
fn attach_kprobe(
    ebpf: &mut Ebpf,
    probe: Probe,
    symbol: &str,
    kept: &mut Vec<KprobeLink>,
) -> Result<(), String> {
    let entry = format!("{}_entry", probe.name());
    let exit = format!("{}_exit", probe.name());
    attach_kprobe_pair(ebpf, &entry, &exit, symbol, kept)
}

/// Load and attach the kretprobe `exit`, then the kprobe `entry`, on `symbol` (the exit
/// first for the reason [`attach_fentry`] gives); on failure nothing stays attached. Their
/// links go to `kept` where they are links.
fn attach_kprobe_pair(
    ebpf: &mut Ebpf,
    entry: &str,
    exit: &str,
    symbol: &str,
    kept: &mut Vec<KprobeLink>,
) -> Result<(), String> {
    let mut links = Vec::new();
    for name in [exit, entry] {
        let name = name.to_owned();
        let result = (|| -> Result<(), String> {
            let program: &mut KProbe = typed_program(ebpf, &name)?;
            program
                .load()
                .map_err(|e| format!("loading {name}: {}", short(&e)))?;
            let link = program
                .attach(symbol, 0)
                .map_err(|e| format!("kprobe on {symbol}: {}", short(&e)))?;
            links.push((name.clone(), link));
            Ok(())
        })();
        if let Err(reason) = result {
            for (name, link) in links {
                if let Ok(p) = typed_program::<KProbe>(ebpf, &name) {
                    let _ = p.detach(link);
                }
            }
            return Err(reason);
        }
    }
    for (name, link) in links {
        let program: &mut KProbe = typed_program(ebpf, &name)?;
        kept.extend(take_kprobe_link(program, link));
    }
    Ok(())
}

/// Take the link `id` from aya, where it is an fd link: as aya 0.14 makes a kprobe's link
/// one exactly where perf links exist (Linux >= 5.15) and kprobes are perf events (>= 4.17).
/// Elsewhere the link stays with the program (converting it would detach it).
fn take_kprobe_link(program: &mut KProbe, id: KProbeLinkId) -> Option<KprobeLink> {
    let fd_links = aya::features().bpf_perf_link()
        && KernelVersion::current().is_ok_and(|v| v >= KernelVersion::new(4, 17, 0));
    if !fd_links {
        return None;
    }
    let link = program.take_link(id).ok()?;
    FdLink::try_from(link).ok().map(KprobeLink::new)
}

/// An error's message without a verifier log (kept for `RUST_LOG=debug`).
fn short(e: &dyn std::error::Error) -> String {
    let full = e.to_string();
    log::debug!("{full}");
    let Some((head, log)) = full.split_once(". Verifier output:") else {
        return full;
    };
    let noise = ["verification time", "processed ", "stack depth"];
    match log
        .lines()
        .map(str::trim)
        .rev()
        .find(|l| !l.is_empty() && !noise.iter().any(|n| l.starts_with(n)))
    {
        Some(last) => format!("{head}: {last}"),
        None => head.to_owned(),
    }
}

/// One probe's readiness on this kernel, without attaching: its symbol, and whether its
/// kprobe programs pass the verifier.
#[derive(Debug)]
pub struct Check {
    /// The probe.
    pub probe: Probe,
    /// Where it would attach.
    pub resolution: Resolution,
    /// `Ok` when both programs loaded, else the kernel's reason.
    pub load: Result<(), String>,
}

/// Resolve and load (not attach) every function probe: `tracer probes`. Also returns why
/// kprobes cannot attach here, if they cannot.
///
/// # Errors
/// When the programs or kallsyms cannot be read at all.
pub fn check() -> Result<(Vec<Check>, Option<LoadError>), LoadError> {
    preflight_common()?;
    let verdict = kprobe_support().err();
    raise_memlock_limit();
    let kallsyms = Kallsyms::read().map_err(LoadError::Kallsyms)?;
    let mut ebpf = Ebpf::load(EBPF_OBJECT)?;
    let mut out = Vec::new();
    for &probe in FUNCTIONS {
        let load = ["entry", "exit"].iter().try_for_each(|suffix| {
            let name = format!("{}_{suffix}", probe.name());
            let program: &mut KProbe = typed_program(&mut ebpf, &name)?;
            program
                .load()
                .map_err(|e| format!("loading {name}: {}", short(&e)))
        });
        out.push(Check {
            probe,
            resolution: resolve(&kallsyms, probe),
            load,
        });
    }
    Ok((out, verdict))
}

/// Kernels before 5.11 charge BPF maps to `RLIMIT_MEMLOCK`; later ones to the memory cgroup,
/// where raising it may be refused and does not matter.
fn raise_memlock_limit() {
    let rlim = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit reads a valid rlimit struct.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &raw const rlim) } != 0 {
        log::debug!(
            "raising RLIMIT_MEMLOCK failed: {}",
            std::io::Error::last_os_error()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::kernel_version;

    #[test]
    fn test_knobs_name_only_resizable_maps_and_probes_with_positive_counts() {
        assert_eq!(test_miss("vfs_rmdir:5"), Ok((Probe::VfsRmdir, 5)));
        assert!(test_miss("vfs_rmdir").is_err());
        assert!(test_miss("nope:1").is_err());
        assert!(test_miss("rmdir:0").is_err());
        assert_eq!(
            map_entries("RMDIR_LOCKS=1, COUNTERS = 8,"),
            Ok(vec![("RMDIR_LOCKS", 1), ("COUNTERS", 8)])
        );
        assert!(map_entries("LOSSES=1").unwrap_err().contains("LOSSES"));
        assert!(map_entries("HIST=0").is_err());
        assert!(map_entries("HIST").is_err());
    }

    #[test]
    fn auto_takes_kprobes_where_programs_are_preempted_unless_the_maps_are_read_live() {
        let p = |m: Option<&str>| Preemption {
            model: m.map(str::to_owned),
            source: "test",
        };
        let (end, live) = (MapReads::AtEnd, MapReads::EveryInterval);
        let mut w = Vec::new();
        for model in ["lazy", "full", "rt"] {
            assert_eq!(
                effective_mode(AttachMode::Auto, &p(Some(model)), true, end, &mut w),
                AttachMode::Kprobe
            );
            // A live view reads the maps all along: a preempted read would skip kprobes.
            assert_eq!(
                effective_mode(AttachMode::Auto, &p(Some(model)), true, live, &mut w),
                AttachMode::Auto
            );
        }
        assert!(w.is_empty());
        for model in [Some("voluntary"), Some("none"), None] {
            for reads in [end, live] {
                assert_eq!(
                    effective_mode(AttachMode::Auto, &p(model), true, reads, &mut w),
                    AttachMode::Auto
                );
                assert_eq!(
                    effective_mode(AttachMode::Kprobe, &p(model), true, reads, &mut w),
                    AttachMode::Kprobe
                );
            }
        }
        assert!(w.is_empty(), "{w:?}");
        // Without kprobes, auto keeps trying fentry.
        for reads in [end, live] {
            assert_eq!(
                effective_mode(AttachMode::Auto, &p(Some("lazy")), false, reads, &mut w),
                AttachMode::Auto
            );
        }
        // Asked for, fentry stays, and the user is told what it can miss.
        assert_eq!(
            effective_mode(AttachMode::Fentry, &p(Some("lazy")), true, end, &mut w),
            AttachMode::Fentry
        );
        assert!(w.len() == 1 && w[0].contains("program_misses"), "{w:?}");
        // So do kprobes under a live view.
        assert_eq!(
            effective_mode(AttachMode::Kprobe, &p(Some("lazy")), true, live, &mut w),
            AttachMode::Kprobe
        );
        assert!(w.len() == 2 && w[1].contains("map operation"), "{w:?}");
        assert_eq!(kernel_version("7.3.4+deb13-cloud-amd64"), Some((7, 3)));
        assert_eq!(kernel_version("5.10.0-46-cloud-amd64"), Some((5, 10)));
    }

    #[test]
    fn frame_marks_are_the_fentry_functions_and_the_kretprobe_trampoline() {
        let k = Kallsyms::parse(
            "ffffffff81200010 t namespace_unlock\n\
             ffffffff81300000 T synchronize_rcu_expedited\n\
             ffffffff81700000 T vfs_rmdir\n\
             ffffffff81050000 T arch_rethook_trampoline\n",
        );
        let attached = |method, symbol: &str| AttachState::Attached {
            method,
            symbol: symbol.to_owned(),
        };
        let mut states = BTreeMap::from([
            (
                Probe::NamespaceUnlock,
                attached(AttachMethod::Fentry, "namespace_unlock"),
            ),
            (
                Probe::SynchronizeRcuExpedited,
                attached(AttachMethod::Fentry, "synchronize_rcu_expedited"),
            ),
            (
                Probe::ShrinkerFree,
                AttachState::Absent {
                    symbol: "shrinker_free".to_owned(),
                },
            ),
        ]);
        let marks = frame_marks(&k, &states).unwrap();
        assert_eq!(
            marks[usize::from(Probe::NamespaceUnlock.id())],
            0xffff_ffff_8120_0010
        );
        assert_eq!(
            marks[usize::from(Probe::SynchronizeRcuExpedited.id())],
            0xffff_ffff_8130_0000
        );
        assert_eq!(marks[maps::FRAME_MARK_RETHOOK], 0, "no kprobe attached");
        assert_eq!(marks.iter().filter(|m| **m != 0).count(), 2);
        // A kprobe needs the return trampoline, not the function's address.
        states.insert(Probe::VfsRmdir, attached(AttachMethod::Kprobe, "vfs_rmdir"));
        let marks = frame_marks(&k, &states).unwrap();
        assert_eq!(marks[usize::from(Probe::VfsRmdir.id())], 0);
        assert_eq!(marks[maps::FRAME_MARK_RETHOOK], 0xffff_ffff_8105_0000);
        // One mark not known: none at all, and why.
        states.insert(Probe::DDelete, attached(AttachMethod::Fentry, "d_delete"));
        let e = frame_marks(&k, &states).unwrap_err();
        assert!(e.contains("d_delete"), "{e}");
        let hidden = Kallsyms::parse("0000000000000000 T vfs_rmdir\n");
        let only_kprobe =
            BTreeMap::from([(Probe::VfsRmdir, attached(AttachMethod::Kprobe, "vfs_rmdir"))]);
        assert!(
            frame_marks(&hidden, &only_kprobe)
                .unwrap_err()
                .contains("trampoline")
        );
    }

    #[test]
    fn kretprobes_held_per_cpu_only_without_preemption() {
        assert_eq!(possible_cpus("0-1\n"), Some(2));
        assert_eq!(possible_cpus("0"), Some(1));
        assert_eq!(possible_cpus("0-3,8-11"), Some(8));
        assert_eq!(possible_cpus("3-1"), None);
        assert_eq!(possible_cpus("cpus"), None);
        // Debian's 5.10 (PREEMPT_VOLUNTARY, no PREEMPT_DYNAMIC) has no preempt_schedule.
        let voluntary = Kallsyms::parse("ffffffff81000000 T vfs_rmdir\n");
        let warning = kretprobes_held_per_function(&voluntary).expect("a warning");
        assert!(
            warning.contains("CONFIG_PREEMPTION") && warning.contains("entries without a return"),
            "{warning}"
        );
        let preemptible =
            Kallsyms::parse("ffffffff81000000 T vfs_rmdir\nffffffff81000100 T preempt_schedule\n");
        assert_eq!(kretprobes_held_per_function(&preemptible), None);
        // No symbols read (no permission): nothing can be said.
        assert_eq!(kretprobes_held_per_function(&Kallsyms::parse("")), None);
    }

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
        let raw = btf::read_sys_fs();
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

    #[test]
    fn cgroup_record_layout_is_read_from_the_format_file() {
        // As Linux 6.18 shows it (6.1 and 6.12 alike, checked in the VM suite).
        let format = "name: cgroup_mkdir
ID: 544
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:int root;\toffset:8;\tsize:4;\tsigned:1;
\tfield:int level;\toffset:12;\tsize:4;\tsigned:1;
\tfield:u64 id;\toffset:16;\tsize:8;\tsigned:0;
\tfield:__data_loc char[] path;\toffset:24;\tsize:4;\tsigned:0;

print fmt: \"root=%d id=%llu level=%d path=%s\", REC->root, REC->id, REC->level, __get_str(path)
";
        assert_eq!(cgroup_offsets(format), Ok([8, 16, 24]));
        // Before Linux 5.7 the id was an int: refused rather than misread.
        let old = format.replace("u64 id;\toffset:16;\tsize:8", "int id;\toffset:16;\tsize:4");
        assert!(cgroup_offsets(&old).unwrap_err().contains("\"id\""));
        assert!(cgroup_offsets("name: x\n").is_err());
    }

    #[test]
    fn select_defaults_to_every_probe_and_rejects_unknown_names() {
        assert_eq!(select(None).unwrap(), PROBES.to_vec());
        assert_eq!(
            select(Some("prune_under_inode_lock")).unwrap(),
            vec![
                Probe::VfsRmdir,
                Probe::ShrinkDcacheParent,
                Probe::PruneUnderInodeLock
            ]
        );
        assert_eq!(
            select(Some("vfs_rmdir, d_delete,vfs_rmdir")).unwrap(),
            vec![Probe::VfsRmdir, Probe::DDelete]
        );
        let err = select(Some("vfs_rmdir,vfs_unlink")).unwrap_err();
        assert!(
            err.contains("\"vfs_unlink\"") && err.contains("synchronize_srcu"),
            "{err}"
        );
        assert!(select(Some(",")).is_err());
    }
}
