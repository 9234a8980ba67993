//! Loading the object: its maps sized for the host, its globals set from the kernel's
//! layout, tracefs and this process, and its switches set before any probe attaches.

use aya::{Ebpf, EbpfLoader};
use tracer_common::{Probe, maps};

use super::{
    beside::{beside, joined},
    error::LoadError,
    mode::AttachMode,
    timed::timed,
};
use tracer_host::{
    btf::{self, BtfError},
    layout::{KernelLayout, kernel_layout},
    tracefs::{self, FormatError, TracefsError},
};

use crate::{
    kernel_log::KernelLog,
    sizing::{self, Sizes},
    switches, test_knobs,
};

/// The kernel programs, built by build.rs from `tracer-ebpf`.
pub(crate) static EBPF_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/tracer"));

/// The object loaded, with what the attaching that follows needs of the host.
pub(super) struct Loaded {
    /// The object: programs and maps.
    pub ebpf: Ebpf,
    /// The programs' own messages.
    pub kernel_log: KernelLog,
    /// Whether the kernel's struct offsets were found (else a warning says what is lost).
    pub offsets_valid: bool,
    /// Whether the test knob makes return programs skip runs, as a kernel that misses
    /// returns does.
    pub misses_returns: bool,
    /// The entries the resizable maps were given, and their memory.
    pub sizes: Sizes,
    /// The kernel's BTF as aya reads it, for fentry (none under `--attach kprobe`).
    pub aya_btf: Option<aya::Btf>,
    /// Whether tracepoints can attach, or why not.
    pub tracefs: Result<(), TracefsError>,
    /// The cgroup tracepoints' record layout, or why it is not known.
    pub cgroup_layout: Result<[u32; 3], FormatError>,
}

/// Make tracefs usable, read what loading needs of the host, load the object with maps of
/// `sizes` for `cpus` possible CPUs, and set its switches: the slow-call threshold (ns, 0:
/// off) and the test knob.
///
/// # Errors
/// The object is rejected, or a switch cannot be set.
pub(super) fn load(
    mut sizes: Sizes,
    cpus: u32,
    mode: AttachMode,
    slow_threshold_ns: u64,
    warnings: &mut Vec<String>,
) -> Result<Loaded, LoadError> {
    // Tracefs first: the cgroup tracepoints' record layout is read from it before loading.
    let tracefs = tracefs::ensure_mounted();
    if let Err(e) = &tracefs {
        warnings.push(e.to_string());
    }
    // One read of the kernel's BTF serves our offsets, aya's fentry attach and aya's
    // loader. aya's two parse all of it (about 5 MB, a third of a second each in a small VM
    // under emulation) and run at once; our offsets take milliseconds, beside them.
    let raw_btf = timed("reading the kernel's BTF", btf::read_sys_fs);
    let raw_btf = raw_btf.as_deref();
    let cgroup_layout = tracefs::cgroup_layout();
    let test_misses = test_knobs::test_miss_from_env(warnings);
    let (ebpf, offsets_valid, aya_btf) = std::thread::scope(|s| {
        let find_layout = || {
            timed("the struct offsets (read from the kernel's BTF)", || {
                kernel_layout(raw_btf)
            })
        };
        let parse_for_fentry = || {
            raw_btf.ok().and_then(|raw| {
                timed("fentry's BTF (parsing the kernel's BTF)", || {
                    aya::Btf::parse(raw, aya::Endianness::Little).ok()
                })
            })
        };
        let layout = beside(s, "tracer-btf", find_layout);
        let for_fentry =
            (mode != AttachMode::Kprobe).then(|| beside(s, "tracer-btf", parse_for_fentry));
        let (ebpf, offsets_valid) = load_object(
            || joined(layout, find_layout),
            cgroup_layout.as_ref().ok(),
            &mut sizes,
            cpus,
            test_misses.map(|(p, _)| p),
            warnings,
        )?;
        let aya_btf = for_fentry.and_then(|started| joined(started, parse_for_fentry));
        Ok::<_, LoadError>((ebpf, offsets_valid, aya_btf))
    })?;
    let mut ebpf = ebpf;
    let kernel_log = KernelLog::open(&mut ebpf);
    if let Some((_, n)) = test_misses {
        switches::set_test_misses(&mut ebpf, n).map_err(LoadError::Record)?;
    }
    if slow_threshold_ns != 0 {
        switches::set_slow_threshold(&mut ebpf, slow_threshold_ns)
            .map_err(LoadError::SlowThreshold)?;
    }
    Ok(Loaded {
        ebpf,
        kernel_log,
        offsets_valid,
        misses_returns: test_misses.is_some(),
        sizes,
        aya_btf,
        tracefs,
        cgroup_layout,
    })
}

/// Load the object with the kernel's struct offsets (`layout`, had once aya's loader is made:
/// each reads the kernel's BTF, at once) and our own pid set; whether the offsets were
/// found (else a warning says what is lost).
fn load_object(
    layout: impl FnOnce() -> Result<KernelLayout, BtfError>,
    cgroup_layout: Option<&[u32; 3]>,
    chosen: &mut Sizes,
    cpus: u32,
    test_miss: Option<Probe>,
    warnings: &mut Vec<String>,
) -> Result<(Ebpf, bool), LoadError> {
    // Before the loader, which borrows the sizes it is given.
    let knob = test_knobs::map_entries_from_env(warnings);
    let mut loader = timed("aya's loader (parsing the kernel's BTF)", EbpfLoader::new);
    let layout = layout();
    crate::kernel_log::configure(&mut loader);
    let miss_probe = test_miss.map_or(0, |p| u32::from(p.id()) + 1);
    if let Some(p) = test_miss {
        log::info!(
            "{}: the return programs of {} skip runs",
            test_knobs::TEST_MISS_ENV,
            p.name()
        );
        loader.override_global(maps::TEST_MISS_PROBE, &miss_probe, true);
    }
    for (name, n) in sizing::entries(chosen) {
        loader.map_max_entries(name, n);
    }
    for (name, n) in &knob {
        log::info!(
            "{}: map {name} holds {n} entries",
            test_knobs::MAP_ENTRIES_ENV
        );
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
    chosen.bytes = sizing::map_bytes(cpus, chosen.hist, chosen.counters, chosen.threads);
    log::info!(
        "maps sized for {cpus} possible CPUs: HIST {} entries, COUNTERS {}, THREADS {}; \
         {} of kernel memory in all",
        chosen.hist,
        chosen.counters,
        chosen.threads,
        sizing::mib(chosen.bytes)
    );
    let ebpf = timed("the object's maps made", || loader.load(EBPF_OBJECT))?;
    Ok((ebpf, valid == 1))
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
