//! The result files a guest sent back, as one verdict may read them: only those it
//! declared. A read of any other is refused and remembered, so that what a case's judge
//! says it reads (which the pre-boot audit checks against what the workloads send) is
//! what it reads.

use std::{
    cell::RefCell,
    collections::{BTreeMap, BTreeSet},
    fs,
    path::PathBuf,
};

/// Result files by name.
pub type Files = BTreeMap<String, PathBuf>;

/// What the guest sent back, restricted to the names (or `*` patterns) a verdict declared.
pub struct Results<'a> {
    files: &'a Files,
    /// `None`: every name (a bench judging its own run).
    declared: Option<Vec<String>>,
    /// Where a read of an undeclared name is remembered.
    undeclared: Option<&'a RefCell<BTreeSet<String>>>,
}

impl<'a> Results<'a> {
    /// Every file, no declaration needed: for the benches, which judge their own runs with
    /// the suite's verdicts.
    pub fn all(files: &'a Files) -> Results<'a> {
        Results {
            files,
            declared: None,
            undeclared: None,
        }
    }

    /// Only the names in `declared`; reads of others go to `undeclared`.
    pub fn declared(
        files: &'a Files,
        declared: Vec<String>,
        undeclared: &'a RefCell<BTreeSet<String>>,
    ) -> Results<'a> {
        Results {
            files,
            declared: Some(declared),
            undeclared: Some(undeclared),
        }
    }

    /// Whether the verdict declared `name`; remembers it when not.
    fn allowed(&self, name: &str) -> Result<(), String> {
        let Some(declared) = &self.declared else {
            return Ok(());
        };
        if declared.iter().any(|d| glob_match(d, name)) {
            return Ok(());
        }
        if let Some(u) = self.undeclared {
            u.borrow_mut().insert(name.to_owned());
        }
        Err(format!(
            "the judge reads {name}, which this verdict does not declare (declared: {})",
            declared.join(", ")
        ))
    }

    /// The path of result file `name`, if the guest sent it.
    pub fn get(&self, name: &str) -> Option<&'a PathBuf> {
        self.allowed(name).ok()?;
        self.files.get(name)
    }

    /// Whether the guest sent `name`.
    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// The text of result file `name`.
    pub fn read(&self, name: &str) -> Result<String, String> {
        self.allowed(name)?;
        let path = self
            .files
            .get(name)
            .ok_or_else(|| format!("the guest sent no {name}"))?;
        fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))
    }

    /// `why`, followed by the last lines of the log file `log` when the guest sent it.
    pub fn with_log(&self, log: &str, why: String) -> String {
        match self.read(log) {
            Ok(text) => {
                let lines: Vec<&str> = text.lines().collect();
                let tail = lines[lines.len().saturating_sub(10)..].join("\n    ");
                format!("{why}\n  {log}:\n    {tail}")
            }
            Err(_) => why,
        }
    }
}

/// The files `tracer capture` leaves for a capture named `stem` (the guest's `capture`).
pub fn capture_files(stem: &str) -> Vec<String> {
    ["rc", "log", "json"]
        .iter()
        .map(|ext| format!("{stem}.{ext}"))
        .collect()
}

/// Whether `name` matches `pattern`, where `*` stands for any run of characters.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let Some((head, rest)) = pattern.split_once('*') else {
        return pattern == name;
    };
    let Some(mut left) = name.strip_prefix(head) else {
        return false;
    };
    let parts: Vec<&str> = rest.split('*').collect();
    let (last, middle) = parts.split_last().unwrap_or((&"", &[]));
    for part in middle {
        match left.find(part) {
            Some(i) => left = &left[i + part.len()..],
            None => return false,
        }
    }
    left.len() >= last.len() && left.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_any_run_of_characters() {
        assert!(glob_match("capture_*_*.err", "capture_kprobe_INT.err"));
        assert!(glob_match("a*", "a"));
        assert!(!glob_match("capture_*_*.err", "capture_kprobe.err"));
        assert!(!glob_match("x.rc", "x.rcx"));
        assert!(glob_match("x.rc", "x.rc"));
        assert!(!glob_match("*.err", "a.err.log"));
    }

    #[test]
    fn a_read_outside_the_declared_names_is_refused_and_remembered() {
        let files = Files::from([
            ("a.log".to_owned(), PathBuf::from("/nonexistent/a.log")),
            ("b.log".to_owned(), PathBuf::from("/nonexistent/b.log")),
        ]);
        let undeclared = RefCell::new(BTreeSet::new());
        let r = Results::declared(&files, vec!["a.*".into()], &undeclared);
        assert!(r.has("a.log"));
        assert!(!r.has("b.log"));
        let e = r.read("b.log").unwrap_err();
        assert!(e.contains("does not declare"), "{e}");
        assert_eq!(undeclared.borrow().iter().collect::<Vec<_>>(), ["b.log"]);
        assert!(Results::all(&files).has("b.log"));
    }
}
