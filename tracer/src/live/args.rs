//! The command-line arguments every live view shares, and the source they name.

use std::{path::PathBuf, time::Duration};

use anyhow::Context as _;

use super::{
    frame::{MAX_HOLD, MAX_INTERVAL, MIN_HOLD, MIN_INTERVAL, Options},
    model::ModelSource,
    source::Source,
    synthetic::SyntheticSource,
};
use crate::kernel_args::KernelArgs;
use tracer_core::units::parse_duration;
use tracer_model as model;

/// Where a live view's numbers come from, and how it refreshes.
#[derive(Debug, clap::Args)]
pub struct LiveArgs {
    /// Refresh every D (e.g. 500ms, 2s; 10ms to 1h).
    #[arg(long, value_name = "D", default_value = "1s", value_parser = parse_interval)]
    pub interval: Duration,
    /// Keep at most N cgroups by name (the most active); the rest are summed into `other`.
    #[arg(long, value_name = "N", default_value_t = super::frame::DEFAULT_MAX_CGROUPS)]
    pub max_cgroups: usize,
    /// How long a cgroup keeps its slot (its row in `top`, its label set in `serve`) after
    /// its last call, and a removed one after its removal, before the slot can go to
    /// another cgroup (e.g. 30s, 5m; 1s to 1h).
    ///
    /// For `serve`, make it longer than the scrape interval: a label set's last totals are
    /// then scraped before it leaves the scrape. Shorter gives slots sooner to cgroups that
    /// became busy; longer keeps the calls of short-lived cgroups in `other`.
    #[arg(long, value_name = "D", default_value = "1m", value_parser = parse_hold)]
    pub hold: Duration,
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
        requires = "synthetic",
        value_parser = parse_churn
    )]
    pub churn: f64,
    /// Simulated seconds per second for --model, --replay and --synthetic (above 0, at
    /// most 1000).
    #[arg(long, value_name = "X", default_value_t = 1.0, value_parser = parse_speed)]
    pub speed: f64,
    /// Which probes, how they attach, and the host paths they read (this kernel only).
    #[command(flatten)]
    pub kernel: KernelArgs,
}

/// The fastest `--speed`: each refresh plays `interval x speed` of the source's time, all of
/// it at once, and a model scenario starts again each time it ends.
pub const MAX_SPEED: f64 = 1000.0;

/// The most cgroups `--synthetic` replaces per second: each is a birth and a removal per
/// refresh, in the same loop as everything else.
pub const MAX_CHURN: f64 = 100_000.0;

/// Parse `--interval`: a duration from [`MIN_INTERVAL`] to [`MAX_INTERVAL`].
///
/// # Errors
/// When it is not a duration, or out of that range.
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s).map_err(|e| e.to_string())?;
    if d < MIN_INTERVAL || d > MAX_INTERVAL {
        return Err(format!(
            "{s:?}: the refresh interval must be from {} to {}",
            ns_of(MIN_INTERVAL),
            ns_of(MAX_INTERVAL)
        ));
    }
    Ok(d)
}

/// Parse `--hold`: a duration from [`MIN_HOLD`] to [`MAX_HOLD`].
///
/// # Errors
/// When it is not a duration, or out of that range.
pub fn parse_hold(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s).map_err(|e| e.to_string())?;
    if d < MIN_HOLD || d > MAX_HOLD {
        return Err(format!(
            "{s:?}: the hold of a cgroup's slot must be from {} to {}",
            ns_of(MIN_HOLD),
            ns_of(MAX_HOLD)
        ));
    }
    Ok(d)
}

/// A bound as the flags' help writes it (`10ms`, `1h`).
fn ns_of(d: Duration) -> humantime::FormattedDuration {
    humantime::format_duration(d)
}

/// Parse a number for `what`, from `lowest` (excluded unless `zero_ok`) to `highest`.
fn parse_bounded(s: &str, what: &str, zero_ok: bool, highest: f64) -> Result<f64, String> {
    let x: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number ({what})"))?;
    let low_ok = if zero_ok { x >= 0.0 } else { x > 0.0 };
    // NaN fails both comparisons.
    if !(low_ok && x <= highest) {
        let low = if zero_ok { "from 0" } else { "above 0" };
        return Err(format!("{s:?}: {what} must be {low} and at most {highest}"));
    }
    Ok(x)
}

/// Parse `--speed`: above 0, at most [`MAX_SPEED`].
///
/// # Errors
/// When it is not such a number.
pub fn parse_speed(s: &str) -> Result<f64, String> {
    parse_bounded(s, "simulated seconds per second", false, MAX_SPEED)
}

/// Parse `--churn`: from 0 to [`MAX_CHURN`] cgroups per second.
///
/// # Errors
/// When it is not such a number.
pub fn parse_churn(s: &str) -> Result<f64, String> {
    parse_bounded(s, "cgroups replaced per second", true, MAX_CHURN)
}

/// Open the source `args` name: a model scenario, a capture file, a synthetic load, else
/// this kernel (saying on stderr, as `who`, when attaching begins and recording starts).
///
/// # Errors
/// An unknown scenario or probe, an unreadable capture, or probes that cannot attach.
pub fn open(args: &LiveArgs, who: &str) -> anyhow::Result<(Box<dyn Source>, Options)> {
    if !(args.speed.is_finite() && args.speed > 0.0) {
        anyhow::bail!("--speed must be a positive number, got {}", args.speed);
    }
    let mut opts = Options {
        interval: args.interval,
        max_cgroups: args.max_cgroups,
        slot_hold: args.hold,
        gone_grace: args.hold,
        slow_threshold_ns: args.kernel.slow_ns().unwrap_or(0),
        ..Options::default()
    };
    let source: Box<dyn Source> = if let Some(scenario) = &args.model {
        let prepared = model::prepare(&model::Run {
            host_kernel: tracer_host::kernel_release(),
            ..model::Run::named(scenario, args.variant.as_deref(), &args.set)?
        })?;
        Box::new(ModelSource::new(&prepared, args.speed))
    } else if let Some(path) = &args.replay {
        let (capture, findings) = tracer_core::capture_file::load_with_findings(path)
            .with_context(|| format!("loading {} to replay", path.display()))?;
        // The settings read where the capture was taken, when it says.
        if let Some(f) = findings {
            opts.kernel_features = f.kernel.features;
        }
        Box::new(super::replay::ReplaySource::new(capture, path, args.speed))
    } else if let Some(cgroups) = args.synthetic {
        Box::new(SyntheticSource::new(cgroups, args.churn, args.speed, 1))
    } else {
        let wanted = args.kernel.wanted();
        let hierarchy = args.kernel.prepare_host()?;
        opts.kernel_features = tracer_host::kernel_info().features;
        let attached =
            args.kernel
                .attach(who, &wanted, tracer_loader::attach::MapReads::EveryInterval)?;
        Box::new(super::kernel::KernelSource::new(
            attached,
            hierarchy,
            args.kernel.name_sources(),
        ))
    };
    Ok((source, opts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::GONE_GRACE;

    #[test]
    fn speeds_churns_and_intervals_out_of_range_are_refused() {
        assert_eq!(parse_speed("10"), Ok(10.0));
        for bad in ["0", "-1", "nan", "inf", "1e308", "fast"] {
            assert!(parse_speed(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_churn("0"), Ok(0.0));
        assert!(parse_churn("1e12").unwrap_err().contains("at most 100000"));
        assert!(parse_churn("NaN").is_err());
        assert_eq!(parse_interval("250ms"), Ok(Duration::from_millis(250)));
        assert!(
            parse_interval("1ns")
                .unwrap_err()
                .contains("from 10ms to 1h")
        );
        assert!(parse_interval("2h").is_err());
        assert_eq!(parse_hold("3s"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_hold("1h"), Ok(Duration::from_hours(1)));
        for bad in ["500ms", "0", "61m", "2h", "soon"] {
            assert!(parse_hold(bad).is_err(), "{bad}");
        }
        assert!(parse_hold("0s").unwrap_err().contains("from 1s to 1h"));
    }

    #[test]
    fn an_interval_of_ten_minutes_is_honoured_by_the_loop() {
        use clap::Parser as _;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            live: LiveArgs,
        }
        let argv = ["serve", "--synthetic", "2", "--interval", "10m"];
        let cli = Cli::try_parse_from(argv).unwrap();
        let (source, opts) = open(&cli.live, "tracer serve").unwrap();
        assert_eq!(opts.interval, Duration::from_mins(10));
        let handle = crate::live::spawn(source, opts).unwrap();
        assert_eq!(
            handle.health.interval(),
            Duration::from_mins(10),
            "the loop runs at the interval asked, not a bound of its own"
        );
        let err = Cli::try_parse_from(["serve", "--interval", "61m"])
            .err()
            .unwrap();
        assert!(err.to_string().contains("from 10ms to 1h"), "{err}");
    }

    #[test]
    fn hold_sets_the_idle_hold_and_the_removal_grace() {
        use clap::Parser as _;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            live: LiveArgs,
        }
        let parse = |extra: &[&str]| {
            let argv = ["top", "--synthetic", "4"].iter().chain(extra);
            Cli::try_parse_from(argv).map(|c| open(&c.live, "tracer top").map(|(_, o)| o))
        };
        let o = parse(&[]).unwrap().unwrap();
        assert_eq!((o.slot_hold, o.gone_grace), (GONE_GRACE, GONE_GRACE));
        let o = parse(&["--hold", "3s"]).unwrap().unwrap();
        let three = Duration::from_secs(3);
        assert_eq!((o.slot_hold, o.gone_grace), (three, three));
        let Err(e) = parse(&["--hold", "100ms"]) else {
            panic!("--hold 100ms accepted");
        };
        assert!(e.to_string().contains("from 1s to 1h"), "{e}");
    }
}
