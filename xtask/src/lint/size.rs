//! Files a newcomer can read: no source file over [`MAX_SOURCE_LINES`] lines before its
//! tests, no page of `docs/` over [`MAX_DOC_LINES`]. Read from the files git tracks.

use std::path::Path;

use crate::testing::harness::{Fail, Verdict, wrong};

/// The most lines a source file holds before its `#[cfg(test)]` module.
pub const MAX_SOURCE_LINES: usize = 1_000;
/// The most lines a page of `docs/` holds.
pub const MAX_DOC_LINES: usize = 600;

/// A source file's lines before its first top-level `#[cfg(test)]`; 0 for a file of tests
/// alone (`tests.rs`, `*_tests.rs`, under `tests/` or `benches/`).
fn source_lines(path: &str, text: &str) -> usize {
    let name = path.rsplit('/').next().unwrap_or(path);
    if name == "tests.rs"
        || name.ends_with("_tests.rs")
        || path.split('/').any(|d| d == "tests" || d == "benches")
    {
        return 0;
    }
    text.lines()
        .take_while(|l| !l.starts_with("#[cfg(test)]"))
        .count()
}

/// Each of `files` (path, text) over its limit, named with its count.
fn over(files: &[(String, String)]) -> Vec<String> {
    files
        .iter()
        .filter_map(|(path, text)| {
            let extension = Path::new(path).extension().and_then(|e| e.to_str());
            let (lines, max) = if extension == Some("rs") {
                (source_lines(path, text), MAX_SOURCE_LINES)
            } else if path.starts_with("docs/") && extension == Some("md") {
                (text.lines().count(), MAX_DOC_LINES)
            } else {
                return None;
            };
            (lines > max).then(|| format!("{path}: {lines} lines (at most {max})"))
        })
        .collect()
}

/// The verdict on every file git tracks under `root`.
pub fn sizes(root: &Path) -> Verdict {
    let listed = std::process::Command::new("git")
        .args(["ls-files", "-z", "--", "*.rs", "docs/*.md"])
        .current_dir(root)
        .output()
        .map_err(|e| format!("git ls-files: {e}"))?;
    if !listed.status.success() {
        return Err(wrong!(
            "git ls-files: {}",
            String::from_utf8_lossy(&listed.stderr).trim()
        ));
    }
    let files: Vec<(String, String)> = String::from_utf8_lossy(&listed.stdout)
        .split('\0')
        .filter(|p| !p.is_empty())
        // A file deleted in the work tree but not yet from the index is not read.
        .filter_map(|p| Some((p.to_owned(), std::fs::read_to_string(root.join(p)).ok()?)))
        .collect();
    let too_long = over(&files);
    if too_long.is_empty() {
        Ok(format!(
            "{} files, none over {MAX_SOURCE_LINES} source lines or {MAX_DOC_LINES} lines of docs",
            files.len()
        ))
    } else {
        Err(Fail::Wrong(too_long.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_past_its_limit_is_named_and_tests_do_not_count() {
        let long = "fn f() {}\n".repeat(MAX_SOURCE_LINES + 1);
        let with_tests = format!("{}#[cfg(test)]\nmod tests {{\n{long}}}\n", "x\n".repeat(10));
        let page = "line\n".repeat(MAX_DOC_LINES + 1);
        let files = [
            ("a/src/long.rs", long.as_str()),
            ("a/src/short.rs", with_tests.as_str()),
            ("a/src/tests.rs", long.as_str()),
            ("a/tests/it.rs", long.as_str()),
            ("docs/page.md", page.as_str()),
            ("README.md", page.as_str()),
        ]
        .map(|(p, t)| (p.to_owned(), t.to_owned()));
        assert_eq!(
            over(&files),
            [
                "a/src/long.rs: 1001 lines (at most 1000)",
                "docs/page.md: 601 lines (at most 600)"
            ]
        );
    }
}
