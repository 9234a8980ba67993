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
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(self.epoch);
        humantime::format_rfc3339_seconds(at).to_string()
    }

    /// `Fri, 04 Dec 2026 18:33:15 +0000` (a Debian changelog's date).
    pub fn rfc2822(&self) -> String {
        // 1970-01-01 was a Thursday.
        const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
        const MONTHS: [&str; 12] = [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ];
        let stamp = self.rfc3339();
        let (date, time) = stamp
            .trim_end_matches('Z')
            .split_once('T')
            .unwrap_or((&stamp, ""));
        let mut ymd = date.splitn(3, '-');
        let (y, mo, d) = (
            ymd.next().unwrap_or(""),
            ymd.next().unwrap_or(""),
            ymd.next().unwrap_or(""),
        );
        let weekday = DAYS[usize::try_from((self.epoch / 86_400) % 7).unwrap_or(0)];
        let month = mo
            .parse::<usize>()
            .ok()
            .and_then(|m| MONTHS.get(m.checked_sub(1)?))
            .unwrap_or(&"Jan");
        format!("{weekday}, {d} {month} {y} {time} +0000")
    }
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
