//! What a release is: its version, source and image name, the build it is made of (its
//! commit and date), and what it holds besides the binary.

use std::{fmt::Write as _, fs, process::Command};

use anyhow::Context as _;

use crate::util;

/// The package's version: the workspace's, which xtask shares.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// Where the project lives; the image's source label and the copyright's source offer.
pub const SOURCE_URL: &str = "https://github.com/tracer-rs/tracer";
/// The image's name (the `DaemonSet`'s `image:`), tagged with [`VERSION`].
pub const IMAGE: &str = "ghcr.io/tracer-rs/tracer";

/// What identifies the build being packaged.
pub struct Release {
    /// The package version.
    pub version: String,
    /// The full git commit, or `unknown` outside git.
    pub revision: String,
    /// Seconds since the epoch every time in the artifacts is: `SOURCE_DATE_EPOCH`, else
    /// the commit's date.
    pub epoch: u64,
}

impl Release {
    /// The commit of the work tree, and its date unless `SOURCE_DATE_EPOCH` is set.
    pub fn of_workspace() -> anyhow::Result<Release> {
        let root = util::workspace_root();
        let git = |args: &[&str]| {
            util::output(Command::new("git").args(args).current_dir(&root))
                .ok()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
        };
        let from_env = std::env::var("SOURCE_DATE_EPOCH")
            .ok()
            .and_then(|s| s.trim().parse().ok());
        let epoch = match from_env {
            Some(e) => e,
            None => git(&["log", "-1", "--format=%ct", "HEAD"])
                .and_then(|s| s.parse().ok())
                .context("no SOURCE_DATE_EPOCH and no git commit to take the date from")?,
        };
        Ok(Release {
            version: VERSION.to_owned(),
            revision: git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into()),
            epoch,
        })
    }

    /// `YYYY-MM-DDTHH:MM:SSZ` of [`Release::epoch`].
    pub fn rfc3339(&self) -> String {
        let (y, mo, d, h, mi, s) = civil(self.epoch);
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
    }

    /// `Fri, 04 Dec 2026 18:33:15 +0000` (a Debian changelog's date).
    pub fn rfc2822(&self) -> String {
        const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
        const MONTHS: [&str; 12] = [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ];
        let (y, mo, d, h, mi, s) = civil(self.epoch);
        let weekday = DAYS[usize::try_from((self.epoch / 86_400) % 7).unwrap_or(0)];
        let month = MONTHS[usize::try_from(mo - 1).unwrap_or(0)];
        format!("{weekday}, {d:02} {month} {y:04} {h:02}:{mi:02}:{s:02} +0000")
    }
}

/// (year, month, day, hour, minute, second) in UTC of seconds since the epoch.
fn civil(epoch: u64) -> (i64, i64, i64, u64, u64, u64) {
    let days = i64::try_from(epoch / 86_400).unwrap_or(0);
    let secs = epoch % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day, secs / 3600, secs / 60 % 60, secs % 60)
}

/// The files a release is made of besides the binary, read once: the man pages and
/// completions the binary writes of itself, the licenses, the copyright file.
pub struct Contents {
    /// The stripped static binary.
    pub tracer: Vec<u8>,
    /// `man1/tracer.1`, `man1/tracer-capture.1`, ...: name and roff.
    pub man: Vec<(String, Vec<u8>)>,
    /// (`tracer.bash` | `_tracer` | `tracer.fish`, text).
    pub completions: Vec<(String, Vec<u8>)>,
    /// The machine-readable copyright file (`deploy/deb/copyright` filled in).
    pub copyright: Vec<u8>,
    /// `LICENSES/*`: name and text.
    pub licenses: Vec<(String, Vec<u8>)>,
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Every file under `dir` of the workspace, by path relative to the workspace, sorted;
/// hidden files left out.
pub fn workspace_files(dir: &str) -> anyhow::Result<Vec<(String, u32, Vec<u8>)>> {
    use std::os::unix::fs::PermissionsExt as _;
    let root = util::workspace_root();
    let mut out = Vec::new();
    let mut stack = vec![root.join(dir)];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let entry = entry?;
            let path = entry.path();
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let meta = entry.metadata()?;
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file() {
                let rel = path
                    .strip_prefix(&root)
                    .context("a file outside the workspace")?
                    .to_string_lossy()
                    .into_owned();
                let mode = if meta.permissions().mode() & 0o111 == 0 {
                    0o644
                } else {
                    0o755
                };
                out.push((rel, mode, fs::read(&path)?));
            }
        }
    }
    out.sort();
    Ok(out)
}
