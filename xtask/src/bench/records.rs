//! Where a bench keeps its runs' records: `results/BENCH/DATE[-N].json`, one a run, never
//! written over.

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::Context as _;

use crate::util;

/// The folder of `bench`'s records.
pub fn dir(bench: &str) -> PathBuf {
    util::workspace_root().join("results").join(bench)
}

/// Today's date, as the records are named.
pub fn today() -> String {
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    now.get(..10).unwrap_or(&now).to_owned()
}

/// Write `json` as `dir/STEM.json`, or `STEM-N.json` for the first N free (a day with a
/// record already): the path written.
///
/// # Errors
/// When the folder cannot be made or the file written.
pub fn write(dir: &Path, stem: &str, json: &str) -> anyhow::Result<PathBuf> {
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = (1..=u32::MAX)
        .map(|n| match n {
            1 => dir.join(format!("{stem}.json")),
            n => dir.join(format!("{stem}-{n}.json")),
        })
        .find(|p| !p.exists())
        .context("no free name for the record")?;
    fs::write(&path, json).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_never_overwrites_an_earlier_one() {
        let dir = std::env::temp_dir().join(format!("records-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let first = write(&dir, "2026-12-07", "{\"a\":1}\n").unwrap();
        let second = write(&dir, "2026-12-07", "{\"a\":2}\n").unwrap();
        assert_eq!(first, dir.join("2026-12-07.json"));
        assert_eq!(second, dir.join("2026-12-07-2.json"));
        assert_eq!(fs::read_to_string(&first).unwrap(), "{\"a\":1}\n");
        fs::remove_dir_all(&dir).unwrap();
    }
}
