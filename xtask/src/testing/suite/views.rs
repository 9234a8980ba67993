//! What `tracer top --frames` prints and what a scrape of `tracer serve` holds, read as a
//! user would read them: the live views' and the names' cases judge both.

use std::collections::BTreeMap;

/// The last block of `--frames` text showing `view` (from its `──── refresh` line on).
pub fn last_view<'a>(text: &'a str, view: &str) -> Option<Vec<&'a str>> {
    let mut blocks: Vec<Vec<&str>> = Vec::new();
    for line in text.lines() {
        if line.starts_with("──── refresh") {
            blocks.push(Vec::new());
        }
        if let Some(b) = blocks.last_mut() {
            b.push(line);
        }
    }
    blocks
        .into_iter()
        .rev()
        .find(|b| b.first().is_some_and(|h| h.contains(&format!("· {view} "))))
}

/// A Cgroups row's rmdir(2) calls since start: the last but one column (umount2(2)'s last).
pub fn rmdirs_in(row: &str) -> Option<u64> {
    let words: Vec<&str> = row.split_whitespace().collect();
    words.get(words.len().checked_sub(2)?)?.parse().ok()
}

/// A row's first column (a cgroup's name or path has no space).
pub fn first_word(row: &str) -> Option<&str> {
    row.split_whitespace().next()
}

/// The labels of a text-format sample line, `name{k="v",...} value` (values without `"`
/// or `,`, as the names case's are).
pub fn labels_of(line: &str) -> Option<BTreeMap<&str, &str>> {
    let (_, rest) = line.split_once('{')?;
    let (set, _) = rest.rsplit_once("} ")?;
    set.strip_suffix('"')?
        .split("\",")
        .map(|kv| kv.split_once("=\""))
        .collect()
}

/// The value of the sample of `metric` whose labels include every one of `labels`,
/// summed over the rest (from a text scrape).
pub fn scraped(text: &str, metric: &str, labels: &[&str]) -> Option<f64> {
    let mut found = None;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(metric) else {
            continue;
        };
        let Some((set, value)) = rest.strip_prefix('{').and_then(|r| r.split_once("} ")) else {
            continue;
        };
        let have: Vec<&str> = set.split(',').collect();
        if labels.iter().all(|l| have.contains(l)) {
            *found.get_or_insert(0.0) += value.trim().parse::<f64>().ok()?;
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_frame_of_a_view_is_found() {
        let text = "──── refresh 1/2 (#1) · Cgroups ──\n/a 1\n──── refresh 1/2 (#1) · Slow calls ──\nx\n──── refresh 2/2 (#2) · Cgroups ──\n/a 2\n";
        assert_eq!(last_view(text, "Cgroups").unwrap()[1], "/a 2");
        assert_eq!(last_view(text, "Slow calls").unwrap()[1], "x");
        assert!(last_view(text, "Detail").is_none());
    }

    #[test]
    fn scraped_values_sum_over_the_labels_left_out() {
        let text = "tracer_latency_seconds_count{probe=\"vfs_rmdir\",caller=\"rmdir\",cgroup=\"/w\"} 100\n\
                    tracer_latency_seconds_count{probe=\"vfs_rmdir\",caller=\"none\",cgroup=\"/w\"} 20\n\
                    tracer_latency_seconds_count{probe=\"vfs_rmdir\",caller=\"none\",cgroup=\"/x\"} 5\n";
        assert_eq!(
            scraped(
                text,
                "tracer_latency_seconds_count",
                &["probe=\"vfs_rmdir\"", "cgroup=\"/w\""]
            ),
            Some(120.0)
        );
        assert_eq!(
            scraped(text, "tracer_latency_seconds_count", &["cgroup=\"/y\""]),
            None
        );
    }
}
