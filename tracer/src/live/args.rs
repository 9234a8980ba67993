//! The command-line arguments every live view shares, and the source they name.

use std::{path::PathBuf, time::Duration};

use anyhow::Context as _;

use super::{Options, Source, model::ModelSource, synthetic::SyntheticSource};
use crate::{capture::parse_duration, model, probes};

/// Where a live view's numbers come from, and how it refreshes.
#[derive(Debug, clap::Args)]
pub struct LiveArgs {
    /// Refresh every D (e.g. 500ms, 2s).
    #[arg(long, value_name = "D", default_value = "1s", value_parser = parse_duration)]
    pub interval: Duration,
    /// Keep at most N cgroups by name (the most active); the rest are summed into `other`.
    #[arg(long, value_name = "N", default_value_t = super::DEFAULT_MAX_CGROUPS)]
    pub max_cgroups: usize,
    /// Play a model scenario instead of tracing this kernel (see `tracer model --list`);
    /// works where kprobes cannot attach.
    #[arg(long, value_name = "SCENARIO", conflicts_with_all = ["replay", "synthetic"])]
    pub model: Option<String>,
    /// Variant of the model scenario.
    #[arg(long, value_name = "VARIANT", requires = "model")]
    pub variant: Option<String>,
    /// Change a model parameter, e.g. `--set mounts=10000` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE", requires = "model")]
    pub set: Vec<String>,
    /// Replay a capture file (`tracer capture --format json -o FILE`) over its own duration.
    #[arg(long, value_name = "FILE", conflicts_with = "synthetic")]
    pub replay: Option<PathBuf>,
    /// A synthetic load of N cgroups with churn (not a measurement: for trying the views
    /// and benchmarking tracer itself).
    #[arg(long, value_name = "CGROUPS")]
    pub synthetic: Option<usize>,
    /// With --synthetic: cgroups replaced (removed and born) per second.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 100.0,
        requires = "synthetic"
    )]
    pub churn: f64,
    /// Simulated seconds per second for --model, --replay and --synthetic.
    #[arg(long, value_name = "X", default_value_t = 1.0)]
    pub speed: f64,
    /// Comma-separated probes to attach (default: all).
    #[arg(long, value_name = "LIST")]
    pub probes: Option<String>,
    /// How to hook kernel functions.
    #[arg(long, value_enum, default_value_t = probes::AttachMode::Auto, value_name = "HOW")]
    pub attach: probes::AttachMode,
    /// List calls at least this slow (e.g. 10ms); changeable live.
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    pub slow: Option<Duration>,
}

/// Open the source `args` name: a model scenario, a capture file, a synthetic load, else
/// this kernel.
///
/// # Errors
/// An unknown scenario or probe, an unreadable capture, or probes that cannot attach.
pub fn open(args: &LiveArgs) -> anyhow::Result<(Box<dyn Source>, Options)> {
    if !(args.speed.is_finite() && args.speed > 0.0) {
        anyhow::bail!("--speed must be a positive number, got {}", args.speed);
    }
    let opts = Options {
        interval: args.interval,
        max_cgroups: args.max_cgroups,
        slow_threshold_ns: args
            .slow
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
        ..Options::default()
    };
    let source: Box<dyn Source> = if let Some(scenario) = &args.model {
        let prepared = model::prepare(&model::Args {
            scenario: Some(scenario.clone()),
            variant: args.variant.clone(),
            set: args.set.clone(),
            ..model::Args::default()
        })?;
        Box::new(ModelSource::new(&prepared, args.speed))
    } else if let Some(path) = &args.replay {
        let capture = crate::report::load(path)
            .with_context(|| format!("loading {} to replay", path.display()))?;
        Box::new(super::replay::ReplaySource::new(capture, path, args.speed))
    } else if let Some(cgroups) = args.synthetic {
        Box::new(SyntheticSource::new(cgroups, args.churn, args.speed, 1))
    } else {
        let wanted = probes::select(args.probes.as_deref()).map_err(anyhow::Error::msg)?;
        Box::new(super::kernel::KernelSource::attach(
            &wanted,
            args.attach,
            opts.slow_threshold_ns,
        )?)
    };
    Ok((source, opts))
}
