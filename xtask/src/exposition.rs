//! The one reader of Prometheus' text exposition format the cases and benches use: a scrape
//! of `tracer serve` (text 0.0.4 or `OpenMetrics` text) as samples, each a name, its labels
//! and its value, read as the format defines them (escaped label values, an optional
//! timestamp, `+Inf`/`NaN`), so a judge reads a label set whatever its order or characters.

use std::collections::BTreeMap;

/// One sample line: `name{label="value",...} value [timestamp]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

impl Sample {
    /// The value of label `key`, if the sample has it.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }

    /// Whether every `(label, value)` of `want` is among the sample's labels.
    pub fn has(&self, want: &[(&str, &str)]) -> bool {
        want.iter().all(|(k, v)| self.label(k) == Some(v))
    }
}

/// As the text format writes it (values escaped), labels in name order.
impl std::fmt::Display for Sample {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)?;
        if !self.labels.is_empty() {
            let set: Vec<String> = self
                .labels
                .iter()
                .map(|(k, v)| {
                    let v = v
                        .replace('\\', "\\\\")
                        .replace('"', "\\\"")
                        .replace('\n', "\\n");
                    format!("{k}=\"{v}\"")
                })
                .collect();
            write!(f, "{{{}}}", set.join(","))?;
        }
        write!(f, " {}", self.value)
    }
}

/// Every sample of `text`, in order; comments (`# HELP`, `# TYPE`, `# EOF`) and blank lines
/// skipped.
///
/// # Errors
/// The first line that is not a sample, quoted.
pub fn samples(text: &str) -> Result<Vec<Sample>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| sample(l).ok_or_else(|| format!("not a sample line: `{l}`")))
        .collect()
}

/// The sum of the samples named `metric` whose labels include every one of `want`, over
/// the labels left out; None when no sample matches or `text` does not read.
pub fn sum(text: &str, metric: &str, want: &[(&str, &str)]) -> Option<f64> {
    let matching: Vec<f64> = samples(text)
        .ok()?
        .into_iter()
        .filter(|s| s.name == metric && s.has(want))
        .map(|s| s.value)
        .collect();
    (!matching.is_empty()).then(|| matching.iter().sum())
}

/// One sample line, or None.
pub fn sample(line: &str) -> Option<Sample> {
    let line = line.trim_end();
    let name_end = line.find(['{', ' ']).unwrap_or(line.len());
    let (name, mut rest) = line.split_at(name_end);
    if name.is_empty() {
        return None;
    }
    let mut labels = BTreeMap::new();
    if let Some(set) = rest.strip_prefix('{') {
        rest = label_set(set, &mut labels)?;
    }
    let mut words = rest.split_whitespace();
    let value = number(words.next()?)?;
    // An optional timestamp, then nothing.
    if words.next().is_some_and(|t| t.parse::<f64>().is_err()) || words.next().is_some() {
        return None;
    }
    Some(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// Reads `k="v",...}` into `labels`; what follows the `}`.
fn label_set<'a>(mut s: &'a str, labels: &mut BTreeMap<String, String>) -> Option<&'a str> {
    loop {
        s = s.trim_start_matches([' ', ',']);
        if let Some(after) = s.strip_prefix('}') {
            return Some(after);
        }
        let (key, after) = s.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next()? {
                (i, '"') => break i,
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                (_, c) => value.push(c),
            }
        };
        labels.insert(key.trim().to_owned(), value);
        s = &after[end + 1..];
    }
}

/// A sample's value as the format writes it (`+Inf`, `-Inf`, `NaN` included).
fn number(word: &str) -> Option<f64> {
    match word {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        w => w.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scrape_reads_as_the_format_defines_it() {
        let text = "# HELP tracer_cgroup_calls_total Calls.\n\
                    # TYPE tracer_cgroup_calls_total counter\n\
                    tracer_cgroup_calls_total{probe=\"vfs_rmdir\",cgroup=\"/w\"} 100\n\
                    tracer_cgroup_calls_total{cgroup=\"/w\",probe=\"vfs_rmdir\",caller=\"none\"} 20 1700000000000\n\
                    tracer_cgroup_calls_total{probe=\"vfs_rmdir\",cgroup=\"/x\"} 5\n\
                    tracer_latency_seconds_bucket{probe=\"rmdir\",le=\"+Inf\"} 7\n\
                    tracer_up 1\n\
                    tracer_cgroup_info{cgroup=\"/a \\\"b\\\",c\",unit=\"x\\\\y\\nz\"} 1\n\
                    # EOF\n";
        let all = samples(text).unwrap();
        assert_eq!(all.len(), 6);
        assert_eq!(all[3].label("le"), Some("+Inf"));
        assert_eq!((all[4].name.as_str(), all[4].value), ("tracer_up", 1.0));
        // Escapes: a quote, a comma and a backslash inside values; a newline.
        assert_eq!(all[5].label("cgroup"), Some("/a \"b\",c"));
        assert_eq!(all[5].label("unit"), Some("x\\y\nz"));
        // Written back as read.
        assert_eq!(samples(&all[5].to_string()).unwrap(), [all[5].clone()]);
        assert_eq!(
            all[1].to_string(),
            "tracer_cgroup_calls_total{caller=\"none\",cgroup=\"/w\",probe=\"vfs_rmdir\"} 20"
        );
        // Summed over the labels left out, whatever their order.
        let rmdir = [("probe", "vfs_rmdir"), ("cgroup", "/w")];
        assert_eq!(sum(text, "tracer_cgroup_calls_total", &rmdir), Some(120.0));
        assert_eq!(
            sum(text, "tracer_cgroup_calls_total", &[("cgroup", "/y")]),
            None
        );
        assert_eq!(sum(text, "tracer_up", &[]), Some(1.0));
    }

    #[test]
    fn what_is_not_a_sample_is_refused_by_its_line() {
        for bad in [
            "tracer_up",
            "tracer_up one",
            "tracer_x{probe=\"a} 1",
            "tracer_x{probe=a} 1",
            "tracer_up 1 2 3",
            "{probe=\"a\"} 1",
        ] {
            let err = samples(bad).unwrap_err();
            assert!(err.contains(bad), "{err}");
        }
    }
}
