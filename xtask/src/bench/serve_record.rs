//! `bench serve`'s record: every turn's figures and each goal's verdict, written by every
//! run to `results/serve/DATE[-N].json`; and docs/benchmarks.md's table made from the record
//! its marker line names (`cargo xtask bench serve --docs`), which a unit test checks.

use std::{fmt::Write as _, process::ExitCode};

use serde::{Deserialize, Serialize};

use super::records;

/// One run of `bench serve`.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Record {
    pub(super) bench: String,
    pub(super) date: String,
    pub(super) command: String,
    /// Seconds of load per turn.
    pub(super) seconds: u64,
    /// What the previous release's binary was built from.
    pub(super) previous: String,
    pub(super) settings: Vec<SettingRecord>,
}

/// One setting's turns and its goal's verdict.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct SettingRecord {
    /// `defaults` or `cgroup histograms`.
    pub(super) setting: String,
    /// The format the goal is judged in, and the paced turns are scraped in.
    pub(super) judged: String,
    /// The judged format's p99, this build's over the previous release's, at most this.
    pub(super) goal: f64,
    #[serde(deserialize_with = "records::figure")]
    pub(super) p99_ratio: f64,
    /// The goal held and no scrape of this build failed.
    pub(super) held: bool,
    pub(super) formats: Vec<FormatRecord>,
    /// The judged format scraped once a frame, each scrape waiting for its frame's
    /// encoding: the previous release's, then this build's.
    pub(super) paced: [Paced; 2],
}

/// What a paced turn measured: a scrape a refresh, as a Prometheus scrapes.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Paced {
    pub(super) scrapes: usize,
    #[serde(deserialize_with = "records::figure")]
    pub(super) p50_ms: f64,
    #[serde(deserialize_with = "records::figure")]
    pub(super) max_ms: f64,
    pub(super) failed: usize,
}

/// One format's turn of each binary.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct FormatRecord {
    pub(super) format: String,
    pub(super) previous: Figures,
    pub(super) this: Figures,
}

/// What one turn measured.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Figures {
    pub(super) series: usize,
    pub(super) bytes: usize,
    #[serde(deserialize_with = "records::figure")]
    pub(super) p50_ms: f64,
    #[serde(deserialize_with = "records::figure")]
    pub(super) p99_ms: f64,
    #[serde(deserialize_with = "records::figure")]
    pub(super) max_ms: f64,
    pub(super) scrapes: usize,
    #[serde(deserialize_with = "records::figure")]
    pub(super) per_second: f64,
    pub(super) failed: usize,
    /// The server's CPU over the turn, in % of one core.
    #[serde(deserialize_with = "records::figure")]
    pub(super) server_cpu_percent: f64,
    /// What the hostile clients saw: slow drips cut off, oversized requests refused (431),
    /// idle connections closed.
    pub(super) slow_drips_cut: u64,
    pub(super) refused_431: u64,
    pub(super) idle_closed: u64,
}

impl Record {
    /// docs/benchmarks.md's table: a row per setting and format, both binaries' figures
    /// side by side and the p99 ratio.
    pub(super) fn table(&self) -> String {
        let mut out = String::from(
            "| setting | format | series previous / this | bytes previous / this | p50 previous / this | p99 previous / this | p99 this/previous | failed |\n\
             |---|---|---|---|---|---|---|---|\n",
        );
        for s in &self.settings {
            for f in &s.formats {
                let (p, t) = (&f.previous, &f.this);
                let _ = writeln!(
                    out,
                    "| {} | {} | {} / {} ({:.3}x) | {} / {} ({:.3}x) | {:.1} ms / {:.1} ms | {:.1} ms / {:.1} ms | **{:.2}x** | {} / {} |",
                    s.setting,
                    f.format,
                    grouped(p.series),
                    grouped(t.series),
                    ratio_of(t.series, p.series),
                    grouped(p.bytes),
                    grouped(t.bytes),
                    ratio_of(t.bytes, p.bytes),
                    p.p50_ms,
                    t.p50_ms,
                    p.p99_ms,
                    t.p99_ms,
                    t.p99_ms / p.p99_ms,
                    p.failed,
                    t.failed
                );
            }
            let [p, t] = &s.paced;
            let _ = writeln!(
                out,
                "| {} | {}, one scrape a frame (max, not p99: {} scrapes) | | | {:.1} ms / {:.1} ms | {:.1} ms / {:.1} ms | **{:.2}x** | {} / {} |",
                s.setting,
                s.judged,
                t.scrapes,
                p.p50_ms,
                t.p50_ms,
                p.max_ms,
                t.max_ms,
                t.max_ms / p.max_ms,
                p.failed,
                t.failed
            );
        }
        out
    }
}

/// `a / b` of two counts.
pub(super) fn ratio_of(a: usize, b: usize) -> f64 {
    let f = |n: usize| f64::from(u32::try_from(n).unwrap_or(u32::MAX));
    f(a) / f(b)
}

/// `n` with a comma between each group of three digits.
fn grouped(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `cargo xtask bench serve --docs`.
///
/// # Errors
/// As [`records::write_docs`].
pub(super) fn write_docs() -> anyhow::Result<ExitCode> {
    records::write_docs("serve", |json| {
        Ok(serde_json::from_str::<Record>(json)?.table())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_grouped_by_thousands() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_000), "1,000");
        assert_eq!(grouped(12_501_827), "12,501,827");
    }

    #[test]
    fn the_docs_table_is_its_record() {
        records::assert_docs_current("serve", 1, Record::table);
    }
}
