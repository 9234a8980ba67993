//! Where a bench keeps its runs' records: `results/BENCH/DATE[-N].json`, one a run, never
//! written over; and the tables of docs/benchmarks.md made from them, each after a marker
//! line that names its record (`<!-- the table of results/BENCH/DATE.json (cargo xtask
//! bench BENCH --docs) -->`), which `--docs` writes again and a unit test checks.

use std::{
    fs,
    path::{Path, PathBuf},
    process::ExitCode,
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

/// A figure of a record, read back: JSON has no NaN, so `serde_json` writes a figure that
/// could not be measured (no scrape answered, no sample) as `null`; read as NaN again, so
/// a record of a run that went wrong still makes its table (`--docs`).
///
/// # Errors
/// When the value is neither a number nor `null`.
pub fn figure<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    use serde::Deserialize as _;
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// As [`figure`], for a fixed number of figures.
///
/// # Errors
/// When a value is neither a number nor `null`, or there are not `N` of them.
pub fn figures<'de, D: serde::Deserializer<'de>, const N: usize>(
    d: D,
) -> Result<[f64; N], D::Error> {
    use serde::Deserialize as _;
    let v: Vec<f64> = Vec::<Option<f64>>::deserialize(d)?
        .into_iter()
        .map(|x| x.unwrap_or(f64::NAN))
        .collect();
    let n = v.len();
    v.try_into()
        .map_err(|_| serde::de::Error::invalid_length(n, &"the figures the record keeps"))
}

/// `text` with the table after each of `bench`'s marker lines replaced by `table(file)`, the
/// record the marker names; how many.
///
/// # Errors
/// What `table` says of a record.
pub fn with_tables(
    text: &str,
    bench: &str,
    table: impl Fn(&str) -> anyhow::Result<String>,
) -> anyhow::Result<(String, usize)> {
    const OPEN: &str = "<!-- the table of ";
    let close = format!(" (cargo xtask bench {bench} --docs) -->");
    let mut out = String::new();
    let mut lines = text.split_inclusive('\n').peekable();
    let mut tables = 0;
    while let Some(line) = lines.next() {
        out += line;
        let Some(file) = line
            .trim_end()
            .strip_prefix(OPEN)
            .and_then(|l| l.strip_suffix(close.as_str()))
        else {
            continue;
        };
        out += &table(file)?;
        tables += 1;
        while lines.next_if(|l| l.starts_with('|')).is_some() {}
    }
    Ok((out, tables))
}

/// docs/benchmarks.md with `bench`'s tables made again from the records their markers name
/// (`table` of each record's text): the text and how many tables.
///
/// # Errors
/// When the docs or a record cannot be read, or `table` refuses a record.
pub fn docs_tables(
    bench: &str,
    table: impl Fn(&str) -> anyhow::Result<String>,
) -> anyhow::Result<(String, String, usize)> {
    let docs = util::workspace_root().join("docs/benchmarks.md");
    let text = fs::read_to_string(&docs).with_context(|| format!("reading {}", docs.display()))?;
    let (out, tables) = with_tables(&text, bench, |file| {
        let path = util::workspace_root().join(file);
        let json =
            fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        table(&json).with_context(|| format!("reading {}", path.display()))
    })?;
    Ok((text, out, tables))
}

/// `cargo xtask bench BENCH --docs`: [`docs_tables`] written to docs/benchmarks.md.
///
/// # Errors
/// As [`docs_tables`], and when the docs cannot be written.
pub fn write_docs(
    bench: &str,
    table: impl Fn(&str) -> anyhow::Result<String>,
) -> anyhow::Result<ExitCode> {
    let (text, out, tables) = docs_tables(bench, table)?;
    if out == text {
        println!("docs/benchmarks.md: {tables} {bench} tables, each already its record's");
    } else {
        let docs = util::workspace_root().join("docs/benchmarks.md");
        fs::write(&docs, out).with_context(|| format!("writing {}", docs.display()))?;
        println!("docs/benchmarks.md: {tables} {bench} tables written again from their records");
    }
    Ok(ExitCode::SUCCESS)
}

/// For the benches' unit tests: `bench`'s tables of docs/benchmarks.md, `tables` of them,
/// are each what `table` makes of its record, as `--docs` would write them.
///
/// # Panics
/// When a record cannot be read, the count differs, or a table is not its record's.
#[cfg(test)]
pub fn assert_docs_current<R: serde::de::DeserializeOwned>(
    bench: &str,
    tables: usize,
    table: impl Fn(&R) -> String,
) {
    let (text, out, n) =
        docs_tables(bench, |json| Ok(table(&serde_json::from_str::<R>(json)?))).unwrap();
    assert_eq!(n, tables, "docs/benchmarks.md's {bench} tables");
    assert!(
        out == text,
        "cargo xtask bench {bench} --docs would change docs/benchmarks.md"
    );
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
