//! The flags that choose and tune the kernel source, one declaration shared by `tracer
//! capture` and the live commands (`tracer top`, `tracer serve`), so their names, help and
//! parsing cannot drift apart.

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use tracer_core::{snapshot::AttachState, units::parse_duration};
use tracer_host::{btf, cgroup, names};
use tracer_loader::attach::{self as probes, AttachMode, ProbeSelection};

/// Which probes attach, how, and what the kernel side may use.
#[derive(Debug, Clone, clap::Args)]
pub struct KernelArgs {
    /// Comma-separated probes to attach (default: all), e.g. `vfs_rmdir,d_delete`; `tracer
    /// probes` lists them.
    #[arg(long, value_name = "LIST", value_parser = str::parse::<ProbeSelection>)]
    pub probes: Option<ProbeSelection>,
    /// How to hook kernel functions.
    #[arg(long, value_parser = attach_modes(), default_value_t = AttachMode::Auto, value_name = "HOW")]
    pub attach: AttachMode,
    /// Read the kernel's BTF (struct offsets, fentry) from this file instead of
    /// /sys/kernel/btf/vmlinux: for kernels built without `CONFIG_DEBUG_INFO_BTF`.
    #[arg(long, value_name = "PATH")]
    pub btf: Option<PathBuf>,
    /// Where the host's cgroup hierarchy is mounted (e.g. /host/sys/fs/cgroup in a
    /// container, whose own /sys/fs/cgroup is its private cgroup namespace): a cgroup2
    /// root, or a v1 host's directory of hierarchies (cgroup2 at its unified/, when
    /// there); default: the cgroup2 mount in /proc/self/mountinfo.
    #[arg(long, value_name = "PATH")]
    pub cgroup_root: Option<PathBuf>,
    /// Where the host's `/` is seen for the names of pods and containers (its
    /// var/log/containers, var/log/pods and the runtimes' bundles under run/; e.g. /host
    /// in a container that mounts them there); default: /.
    #[arg(long, value_name = "PATH")]
    pub names_root: Option<PathBuf>,
    /// List each call at least this slow (e.g. 5ms) with its process, thread and cgroup (at
    /// most 100 per second per CPU; the rest are counted). `tracer top` can change it live.
    #[arg(long, value_parser = parse_duration, value_name = "D")]
    pub slow: Option<Duration>,
    /// Kernel memory tracer's maps may take (e.g. 32MiB, 1GiB; a plain number is MiB): the
    /// histogram map gets what the fixed maps leave. Past its capacity calls still count,
    /// in cgroup `other`. See docs/production.md.
    #[arg(long, value_name = "SIZE", default_value = "32MiB",
          value_parser = tracer_core::units::parse_mib)]
    pub kernel_memory: u64,
}

impl KernelArgs {
    /// The probes asked for (all when `--probes` is not given).
    #[must_use]
    pub fn wanted(&self) -> Vec<tracer_common::Probe> {
        self.probes.as_ref().map_or_else(
            || ProbeSelection::all().probes().to_vec(),
            |selection| selection.probes().to_vec(),
        )
    }

    /// The `--slow` threshold in nanoseconds (at least 1 when given: 0 turns it off).
    #[must_use]
    pub fn slow_ns(&self) -> Option<u64> {
        self.slow
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1))
    }

    /// The host's cgroup hierarchy cgroups are named from (see [`cgroup::hierarchy`]);
    /// `--btf` taken into use. Both are read before anything attaches, so a bad path leaves
    /// no probe behind.
    ///
    /// # Errors
    /// A `--cgroup-root` that is no cgroup hierarchy.
    pub fn prepare_host(&self) -> anyhow::Result<cgroup::Hierarchy> {
        if let Some(path) = &self.btf {
            btf::use_file(path);
        }
        cgroup::hierarchy(self.cgroup_root.as_deref()).map_err(anyhow::Error::msg)
    }

    /// Where the names of pods and containers are read.
    #[must_use]
    pub fn name_sources(&self) -> names::Sources {
        self.names_root
            .as_deref()
            .map_or_else(names::Sources::default, names::Sources::under)
    }
}

/// `--attach`'s values: each mode by its name, with its help, parsed by its `FromStr`.
fn attach_modes() -> impl TypedValueParser<Value = AttachMode> {
    PossibleValuesParser::new(
        AttachMode::ALL.map(|mode| PossibleValue::new(mode.name()).help(mode.help())),
    )
    .try_map(|name| name.parse::<AttachMode>())
}

impl KernelArgs {
    /// Attach the probes asked for, the slow-call threshold set, the maps sized, saying on
    /// stderr (as `who`, e.g. `tracer serve`) when attaching begins and when recording
    /// starts: a script starts its workload on the `recording` line, and an operator of a
    /// busy host, where attaching can take many seconds, sees that it is under way.
    ///
    /// # Errors
    /// As [`probes::attach_with_slow`].
    pub fn attach(
        &self,
        who: &str,
        wanted: &[tracer_common::Probe],
        reads: probes::MapReads,
    ) -> anyhow::Result<tracer_loader::attached::Attached> {
        // No privilege, no programs, perf events refused: one message, and no word of
        // attaching before it.
        probes::preflight_attach()?;
        eprintln!("{who}: attaching {} probes...", wanted.len());
        let begun = Instant::now();
        let attached = probes::attach_with_slow(
            wanted,
            self.attach,
            self.slow_ns().unwrap_or(0),
            self.kernel_memory,
            reads,
        )?;
        eprintln!("{who}: {}", recording_line(&attached, wanted.len(), begun));
        Ok(attached)
    }
}

/// `recording since T: K of N probes attached in A s, settled in S s`.
fn recording_line(
    attached: &tracer_loader::attached::Attached,
    wanted: usize,
    begun: Instant,
) -> String {
    let since = &attached.recording_since;
    let ready = attached
        .states
        .values()
        .filter(|s| matches!(s, AttachState::Attached { .. }))
        .count();
    let total = since.instant.saturating_duration_since(begun);
    let attaching = total.saturating_sub(since.settled_in);
    let at = std::time::UNIX_EPOCH + Duration::from_nanos(since.unix_ns);
    format!(
        "recording since {}: {ready} of {wanted} probes attached in {:.2} s, settled in {:.2} s",
        humantime::format_rfc3339_seconds(at),
        attaching.as_secs_f64(),
        since.settled_in.as_secs_f64(),
    )
}
