//! What `tracer top --frames` prints, read as a user would read it: the live views' and
//! the names' cases judge it (a scrape is read by `crate::exposition`).

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
}
