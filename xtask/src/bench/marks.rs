//! The marks the guest writes to the ftrace buffer (`trace_marker`) around each timed
//! run, stamped by the kernel.

/// One `trace_marker` line: `WHAT ROW RUN [STATUS]` and when the kernel stamped it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Mark {
    pub(crate) what: String,
    pub(crate) row: String,
    pub(crate) run: u32,
    pub(crate) extra: Option<String>,
    /// `CLOCK_MONOTONIC`, microseconds.
    pub(crate) at_us: u64,
}

/// The marks in the text of the ftrace buffer. Lines look like
/// `   sh-80  [001] .....  12.345678: tracing_mark_write: start tracer-auto 3`.
pub(crate) fn parse_marks(trace: &str) -> Vec<Mark> {
    const TAG: &str = ": tracing_mark_write: ";
    let mut out = Vec::new();
    for line in trace.lines() {
        let Some((head, msg)) = line.split_once(TAG) else {
            continue;
        };
        let Some(at_us) = head.split_whitespace().last().and_then(parse_stamp) else {
            continue;
        };
        let mut words = msg.split_whitespace();
        let (Some(what), Some(row), Some(run)) = (words.next(), words.next(), words.next()) else {
            continue;
        };
        let Ok(run) = run.parse() else { continue };
        out.push(Mark {
            what: what.to_owned(),
            row: row.to_owned(),
            run,
            extra: words.next().map(str::to_owned),
            at_us,
        });
    }
    out
}

/// `12.345678` (seconds, microseconds) as microseconds.
fn parse_stamp(s: &str) -> Option<u64> {
    let (secs, frac) = s.split_once('.')?;
    if frac.len() != 6 {
        return None;
    }
    Some(secs.parse::<u64>().ok()? * 1_000_000 + frac.parse::<u64>().ok()?)
}

/// A guest's ftrace buffer with marks of three timed runs, the benches' tests' input.
#[cfg(test)]
pub(crate) const SAMPLE_TRACE: &str = "\
# tracer: nop
#
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
              sh-80      [001] .....    10.000000: tracing_mark_write: start tracer-auto 0
            mark-91      [000] .....    10.900000: tracing_mark_write: attached tracer-auto 0
              sh-80      [001] .....    11.000000: tracing_mark_write: end tracer-auto 0
              sh-80      [001] .....    11.000001: tracing_mark_write: rc tracer-auto 0 0
              sh-80      [001] .....    20.000000: tracing_mark_write: start tracer-auto 1
            mark-95      [000] .N...    20.250000: tracing_mark_write: attached tracer-auto 1
              sh-80      [001] .....    20.500000: tracing_mark_write: end tracer-auto 1
              sh-80      [001] .....    20.500001: tracing_mark_write: rc tracer-auto 1 0
              sh-80      [001] .....    30.000000: tracing_mark_write: start bpftrace 1
              sh-80      [001] .....    30.100000: tracing_mark_write: end bpftrace 1
              sh-80      [001] .....    30.100001: tracing_mark_write: rc bpftrace 1 1
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_parse_with_microsecond_stamps() {
        let marks = parse_marks(SAMPLE_TRACE);
        assert_eq!(marks.len(), 11);
        assert_eq!(
            marks[1],
            Mark {
                what: "attached".into(),
                row: "tracer-auto".into(),
                run: 0,
                extra: None,
                at_us: 10_900_000
            }
        );
        assert_eq!(marks[10].extra.as_deref(), Some("1"));
        assert_eq!(parse_stamp("12.5"), None);
    }
}
