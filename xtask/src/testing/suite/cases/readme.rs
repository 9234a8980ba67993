//! The README's capture example is what the same run prints: `cargo xtask run`'s workload
//! (`xtask/vm/demo.sh`: 100 tmpfs unmounted one after another, the default attach) on 6.12,
//! its report's lines as the README quotes them, figures aside: the findings' severities
//! and headlines, each figure's unit, the remedy's words.

use std::fmt::Write as _;

use crate::testing::{
    harness::{Fail, Verdict},
    suite::case::{On, VmCase},
};

/// The README, whose example the run must match.
const README: &str = include_str!("../../../../../README.md");
/// The sentence that introduces the example.
const EXAMPLE_AT: &str = "A real run of `cargo xtask run`'s workload";
/// What a report says when no rule's threshold was passed: the README's finding lines
/// cannot be checked against it (the case is skipped, saying why). Whether the 100 umounts'
/// grace periods pass the rule's share of the wall depends on the host under TCG: 24.9% in
/// the README's run, 5.8% in one of the suite's (2026-12-06, expedited waits of 228 µs
/// each against 4.7 ms).
const NO_FINDING: &str = "none: no rule's threshold was passed";

/// `cargo xtask run`'s workload, then its capture re-rendered as a report.
pub const CAPTURE: VmCase = VmCase {
    name: "readme::capture",
    heading: "README's capture example (cargo xtask run's 100 tmpfs umounts, the default attach)",
    on: On::Only(&[(6, 12)]),
    workload: r"
i=0
while [ $i -lt 100 ]; do mkdir -p /mnt/t$i && mount -t tmpfs none /mnt/t$i || break; i=$((i + 1)); done
capture readme 'i=0; while [ $i -lt 100 ]; do umount /mnt/t$i || exit 1; i=$((i + 1)); done'
tracer report /tmp/readme.json > /tmp/readme.report 2>&1
emit readme.report /tmp/readme.report
",
    judge: |j| {
        j.verdict(
            "auto",
            "README's capture example: its findings' severities, headlines, units and remedy are the run's",
            &["readme.report", "readme.rc", "readme.log", "readme.json"],
            |r| {
                let rc = r.read("readme.rc")?;
                if rc.trim() != "0" {
                    return Err(Fail::Wrong(r.with_log("readme.log", format!("tracer capture exited {}", rc.trim()))));
                }
                let report = r.read("readme.report")?;
                if report.contains(NO_FINDING) {
                    return Err(Fail::Cannot(format!(
                        "no finding in this boot's report to set beside the README's: \
                         its expedited grace periods were short this time (under TCG one waits \
                         for the other vCPU's turn on the host, and the VM beside this one \
                         sets how long); the report: {}",
                        report.lines().take(18).collect::<Vec<_>>().join(" / ")
                    )));
                }
                matches_example(&example(README)?, &report)
            },
        );
    },
    ..VmCase::BASE
};

/// The README's example: the indented block after the sentence that introduces it.
fn example(readme: &str) -> Verdict {
    let at = readme
        .find(EXAMPLE_AT)
        .ok_or_else(|| format!("README.md has no \"{EXAMPLE_AT}\""))?;
    let mut block = String::new();
    let mut started = false;
    for line in readme[at..].lines().skip_while(|l| !l.is_empty()) {
        if line.starts_with("    ") {
            started = true;
            block.push_str(line);
            block.push('\n');
        } else if started && !line.trim().is_empty() {
            break;
        }
    }
    if block.is_empty() {
        return Err("README.md's example has no indented block".into());
    }
    Ok(block)
}

/// Words and figures as a report prints them, figures as `#` and every time unit as one
/// word: a faster or slower run prints other figures, and a time in other units (233 ms or
/// 1.2 s), but the same words, and a time where the README has one.
fn normalized(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    for w in text.split_whitespace() {
        let figure: String = w
            .chars()
            .map(|c| if c.is_ascii_digit() { '#' } else { c })
            .collect();
        // 1,234.5 and 29.1 alike.
        let mut figure = figure.replace("#,#", "##").replace("#.#", "##");
        while figure.contains("##") {
            figure = figure.replace("##", "#");
        }
        let unit = figure.trim_end_matches([')', ',', ';', ':']);
        let unit = unit.trim_start_matches('(');
        if matches!(unit, "ns" | "µs" | "ms" | "s" | "min")
            && words.last().is_some_and(|l: &String| l.ends_with('#'))
        {
            words.push(figure.replacen(unit, "TIME", 1));
        } else {
            words.push(figure);
        }
    }
    words
}

/// Each run of lines of `example` between its `…` is, figures aside, in `report` in order.
fn matches_example(example: &str, report: &str) -> Verdict {
    let report = normalized(report);
    let mut from = 0;
    let mut checked = 0;
    for part in example.split('…') {
        let want = normalized(part);
        if want.is_empty() {
            continue;
        }
        let found = report[from..]
            .windows(want.len())
            .position(|w| w == want.as_slice())
            .ok_or_else(|| {
                let mut why =
                    String::from("the README's lines are not the run's, figures aside:\n");
                let _ = write!(why, "{}", part.trim_end());
                why
            })?;
        from += found + want.len();
        checked += want.len();
    }
    Ok(format!(
        "{checked} words of the README's example, in order, figures aside"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_readme_has_an_example() {
        let e = example(README).unwrap();
        assert!(e.contains("findings") && e.contains('…'), "{e}");
    }

    #[test]
    fn figures_and_time_units_aside_the_words_must_be_the_run_s() {
        let example = "    findings\n      info     umount waits\n      20.4% of the wall (233 ms)\n    …\n    remedy  A lazy umount\n";
        let run = "findings\n  info     umount waits\n  31.0% of the wall (1.21 s)\n  evidence x\n  remedy  A lazy umount\n";
        assert!(matches_example(example, run).is_ok());
        // Another severity, another headline, a share where the README has a time: refused.
        assert!(matches_example(example, &run.replace("info ", "warning ")).is_err());
        assert!(matches_example(example, &run.replace("umount waits", "rmdir waits")).is_err());
        assert!(matches_example(example, &run.replace("(1.21 s)", "(12%)")).is_err());
        // Out of order: the remedy before the findings.
        assert!(
            matches_example(
                example,
                "remedy A lazy umount\nfindings info umount waits 1% of the wall (1 s)"
            )
            .is_err()
        );
    }
}
