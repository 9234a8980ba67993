//! The VM cases checked against each other before any VM boots, in a second: the guest
//! script each kernel gets parses (`sh -n`), every file a workload sends back is read by a
//! judge, every file a judge reads is sent back by a workload of the same kernels that runs
//! whenever its case does (its own, a fixture's it declares, or a case it `needs`), every
//! judge reads only what it declares, and every case has both a workload that sends
//! something and a judge that gives a verdict. A misspelt result name or an `if` left open
//! fails here, not after a boot of the suite.
//!
//! What a workload sends is read from its shell: `emit NAME FILE`, and the calls of the
//! group's functions (`capture NAME ...` sends `NAME.rc`, `NAME.log`, `NAME.json`, as its
//! body's own `emit`s say). A name may use the variable of an enclosing `for` loop over
//! words, which stands for each of them; any other variable makes the name unknown, and
//! that is a failure too. What a judge reads is what it declares when run over no files
//! ([`Judge::audit`]), once for each kernel the case runs on.

use std::{
    collections::BTreeMap,
    io::Write as _,
    process::{Command, Stdio},
};

use super::{
    case::{FIXTURES, Fixture, Group, Judge, Lane, On, VmCase},
    results::glob_match,
};
use crate::{
    arch::{ARCHES, Arch},
    kernel,
};

/// Every problem found in `groups`, or what was checked.
///
/// # Errors
/// Each problem, naming the case.
pub fn audit(groups: &[&Group]) -> Result<String, Vec<String>> {
    let mut problems = Vec::new();
    let mut sent: Vec<Sent<'_>> = Vec::new();
    let mut read: Vec<(&VmCase, Arch, On, String)> = Vec::new();
    let mut cases = 0;
    for group in groups {
        problems.extend(parses(group));
        let functions = match functions(group) {
            Ok(f) => f,
            Err(e) => {
                problems.push(format!("{}: {e}", group.script));
                continue;
            }
        };
        fixtures(group, &functions, &mut sent, &mut problems);
        for case in group.cases {
            cases += 1;
            let name = case.heading;
            match emits(case.workload, &functions) {
                Ok(results) if results.is_empty() => {
                    problems.push(format!("case \"{name}\": its workload sends nothing back"));
                }
                Ok(results) => sent.extend(results.into_iter().map(|files| Sent {
                    case,
                    fixture: None,
                    files,
                })),
                Err(e) => problems.push(format!("case \"{name}\": {e}")),
            }
            let lanes = ARCHES.into_iter().flat_map(|arch| {
                kernel::SERIES
                    .iter()
                    .filter_map(|s| kernel::version_of(s.name))
                    .map(move |version| Lane { arch, version })
            });
            let mut verdicts = 0;
            for lane in lanes.filter(|l| case.runs_on(*l)) {
                let a = Judge::audit(case.judge, lane);
                verdicts += a.verdicts;
                for u in a.undeclared {
                    problems.push(format!(
                        "case \"{name}\": its judge reads {u} without declaring it"
                    ));
                }
                let on = case.on(lane.arch);
                read.extend(a.declared.into_iter().map(|d| (case, lane.arch, on, d)));
            }
            if verdicts == 0 {
                problems.push(format!("case \"{name}\": its judge gives no verdict"));
            }
        }
    }
    read.sort_by(|a, b| (a.0.heading, a.1.name(), &a.3).cmp(&(b.0.heading, b.1.name(), &b.3)));
    read.dedup_by(|a, b| a.0.heading == b.0.heading && a.1 == b.1 && a.3 == b.3);
    for (case, arch, on, name) in &read {
        let senders: Vec<&Sent<'_>> = sent
            .iter()
            .filter(|s| {
                s.case.on(*arch).covers(*on)
                    && s.files.iter().any(|f| glob_match(name, f) || name == f)
            })
            .collect();
        if senders.is_empty() {
            problems.push(format!(
                "case \"{}\": its judge reads {name}, which no workload of its kernels sends back",
                case.heading
            ));
        } else if !senders.iter().any(|s| s.runs_with(case)) {
            problems.push(format!(
                "case \"{}\": its judge reads {name}, which {} sends back: name it in the case's `needs`, so that `--case` runs it too",
                case.heading, senders[0].case.name
            ));
        }
    }
    for s in &sent {
        let judged = read
            .iter()
            .any(|(_, _, _, name)| s.files.iter().any(|f| glob_match(name, f) || name == f));
        if !judged {
            problems.push(format!(
                "case \"{}\": its workload sends back {}, which no judge reads",
                s.case.heading,
                s.files.join(", ")
            ));
        }
    }
    if problems.is_empty() {
        Ok(format!(
            "{cases} cases: each of the {} results their workloads send back is judged, each of the {} files their judges read is sent",
            sent.len(),
            read.len()
        ))
    } else {
        Err(problems)
    }
}

/// What the fixtures of `group` send back (once a group, as from the first case declaring
/// each), and a problem for each case whose workload uses one it does not declare.
fn fixtures<'a>(
    group: &'a Group,
    functions: &BTreeMap<String, Function>,
    sent: &mut Vec<Sent<'a>>,
    problems: &mut Vec<String>,
) {
    let mut set_up: Vec<Fixture> = Vec::new();
    for case in group.cases {
        for fixture in case.fixtures {
            if set_up.contains(fixture) {
                continue;
            }
            set_up.push(*fixture);
            match emits(fixture.setup(), functions) {
                Ok(results) => sent.extend(results.into_iter().map(|files| Sent {
                    case,
                    fixture: Some(*fixture),
                    files,
                })),
                Err(e) => problems.push(format!("fixture {}: {e}", fixture.name())),
            }
        }
        for fixture in FIXTURES {
            if !case.fixtures.contains(&fixture) && fixture.relied_on(case.workload, group.prelude)
            {
                problems.push(format!(
                    "case \"{}\": its workload uses what fixture {} sets up without declaring it",
                    case.heading,
                    fixture.name()
                ));
            }
        }
    }
}

/// The `for` loops around a command, innermost last: each loop's variable and its words
/// (`None`: a `while` or `until` loop; no words: a loop over what is not plain words).
type Loops = [Option<(String, Option<Vec<String>>)>];

/// Whether the script each kernel gets from `group` parses, by `sh -n`, and so does the
/// script of each case alone (`--case`; a case may not close what another opened): a
/// problem per script that does not.
fn parses(group: &Group) -> Vec<String> {
    let mut problems = Vec::new();
    for (arch, s) in ARCHES
        .into_iter()
        .flat_map(|a| kernel::SERIES.iter().map(move |s| (a, s)))
    {
        let Some(version) = kernel::version_of(s.name) else {
            continue;
        };
        let lane = Lane { arch, version };
        if group.run(lane, |_| true).next().is_none() {
            continue;
        }
        let alone = group.run(lane, |_| true).map(|c| {
            (
                format!(" ({} alone)", c.name),
                group.script_of(lane, |o| o.name == c.name),
            )
        });
        for (which, script) in std::iter::once((String::new(), group.script(lane))).chain(alone) {
            if let Some(problem) = sh_n(&script) {
                problems.push(format!(
                    "{} for {}{which}: the guest script does not parse: {problem}",
                    group.script,
                    arch.lane(s.name)
                ));
            }
        }
    }
    problems
}

/// Why `sh -n` refuses `script`, if it does.
fn sh_n(script: &str) -> Option<String> {
    let checked = Command::new("sh")
        .arg("-n")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut sh| {
            if let Some(mut stdin) = sh.stdin.take() {
                stdin.write_all(script.as_bytes())?;
            }
            sh.wait_with_output()
        });
    match checked {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(String::from_utf8_lossy(&out.stderr).trim().to_owned()),
        Err(e) => Some(format!("sh -n: {e}")),
    }
}

/// Files one call sends back that are read together: those of one stem (`x.rc`, `x.log`,
/// `x.json`).
struct Sent<'a> {
    /// The case whose workload sends them, or the first that declares the fixture that does.
    case: &'a VmCase,
    fixture: Option<Fixture>,
    files: Vec<String>,
}

impl Sent<'_> {
    /// Whether these files are sent in every boot that runs `reader`: by its own workload,
    /// a fixture it declares, or a case of its boot's clock that it `needs`.
    fn runs_with(&self, reader: &VmCase) -> bool {
        match self.fixture {
            Some(fixture) => reader.fixtures.contains(&fixture),
            None => {
                std::ptr::eq(self.case, reader)
                    || (self.case.clock == reader.clock && reader.needs.contains(&self.case.name))
            }
        }
    }
}

/// A shell function of a group's prelude or libraries: where each of its parameters comes
/// from (`name=$1` gives `name` -> 1), and the names its body sends back, with those
/// parameters (and `$1`...) in them.
#[derive(Debug, Clone, Default)]
pub struct Function {
    params: BTreeMap<String, usize>,
    sends: Vec<Vec<String>>,
}

/// The functions of a group's prelude and libraries.
///
/// # Errors
/// A function whose body sends a file under a name the audit cannot tell.
pub fn functions(group: &Group) -> Result<BTreeMap<String, Function>, String> {
    let mut out = BTreeMap::new();
    let texts = std::iter::once(group.prelude).chain(group.libraries.iter().map(|(_, t)| *t));
    for text in texts {
        for (name, body) in function_bodies(text) {
            let params = params(&body);
            let sends = calls(&body, &out, Names::Template)?;
            out.insert(name, Function { params, sends });
        }
    }
    Ok(out)
}

/// What a workload sends back, each call's files by stem.
///
/// # Errors
/// A name the audit cannot tell.
pub fn emits(
    text: &str,
    functions: &BTreeMap<String, Function>,
) -> Result<Vec<Vec<String>>, String> {
    calls(text, functions, Names::Known)
}

/// Whether names must come out known (a workload) or may keep variables (a function's
/// body, whose parameters the caller gives).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Names {
    Known,
    Template,
}

/// `NAME() {` ... `}` at the start of lines.
fn function_bodies(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current: Option<(String, Vec<&str>)> = None;
    for line in text.lines() {
        if let Some((name, body)) = &mut current {
            if line == "}" {
                out.push((name.clone(), body.join("\n")));
                current = None;
            } else {
                body.push(line);
            }
        } else if let Some(name) = line.strip_suffix("() {")
            && !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            current = Some((name.to_owned(), Vec::new()));
        }
    }
    out
}

/// `name=$1 workload=$2`: each variable a positional parameter is given to.
fn params(body: &str) -> BTreeMap<String, usize> {
    commands(body)
        .iter()
        .flatten()
        .filter_map(|word| {
            let (var, value) = word.split_once('=')?;
            let n = value.strip_prefix('$')?.parse().ok()?;
            Some((var.to_owned(), n))
        })
        .collect()
}

/// The files each call in `text` sends back, grouped by call and stem.
fn calls(
    text: &str,
    functions: &BTreeMap<String, Function>,
    names: Names,
) -> Result<Vec<Vec<String>>, String> {
    // The enclosing loops: a `for` over literal words binds its variable to them.
    let mut loops: Vec<Option<(String, Option<Vec<String>>)>> = Vec::new();
    let mut out = Vec::new();
    for command in commands(text) {
        let words = strip_reserved(&command);
        let Some(first) = words.first() else {
            continue;
        };
        match first.as_str() {
            "for" => {
                let var = words.get(1).cloned().unwrap_or_default();
                let values: Vec<String> = words.iter().skip(3).cloned().collect();
                let literal = values.iter().all(|v| !v.contains('$'));
                loops.push(Some((var, literal.then_some(values))));
            }
            "while" | "until" => loops.push(None),
            "done" => {
                loops.pop();
            }
            "emit" => {
                let name = words.get(1).ok_or("`emit` without a name")?;
                for n in expand(name, &loops, names)? {
                    out.push(vec![n]);
                }
            }
            f => {
                let Some(function) = functions.get(f) else {
                    continue;
                };
                let mut files = Vec::new();
                for template in function.sends.iter().flatten() {
                    let given = substitute(template, &function.params, &words[1..]);
                    files.extend(expand(&given, &loops, names)?);
                }
                out.extend(by_stem(files));
            }
        }
    }
    Ok(out)
}

/// Files grouped by their stem (what comes before the first `.`), in order.
fn by_stem(files: Vec<String>) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = Vec::new();
    for f in files {
        let stem = f.split('.').next().unwrap_or_default().to_owned();
        match out
            .iter_mut()
            .find(|g| g[0].split('.').next() == Some(stem.as_str()))
        {
            Some(group) => group.push(f),
            None => out.push(vec![f]),
        }
    }
    out
}

/// A function's name template with the call's arguments for its parameters (`$name`,
/// `${name}`, `$1`).
fn substitute(template: &str, params: &BTreeMap<String, usize>, args: &[String]) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (var, tail) =
            if let Some(braced) = after.strip_prefix('{').and_then(|b| b.split_once('}')) {
                braced
            } else {
                let end = after
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(after.len());
                (&after[..end], &after[end..])
            };
        let n = params.get(var).copied().or_else(|| var.parse().ok());
        if let Some(arg) = n.and_then(|n: usize| args.get(n.checked_sub(1)?)) {
            out.push_str(arg);
        } else {
            out.push('$');
            out.push_str(&after[..after.len() - tail.len()]);
        }
        rest = tail;
    }
    out.push_str(rest);
    out
}

/// Every name `name` stands for, its loop variables replaced by each of their words.
fn expand(name: &str, loops: &Loops, names: Names) -> Result<Vec<String>, String> {
    let Some(at) = name.find('$') else {
        return Ok(vec![name.to_owned()]);
    };
    if names == Names::Template {
        return Ok(vec![name.to_owned()]);
    }
    let rest = &name[at + 1..];
    let (var, after) = if let Some(braced) = rest.strip_prefix('{') {
        let end = braced
            .find('}')
            .ok_or_else(|| format!("unclosed ${{ in {name}"))?;
        (&braced[..end], &braced[end + 1..])
    } else {
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        (&rest[..end], &rest[end..])
    };
    let words = loops
        .iter()
        .rev()
        .flatten()
        .find(|(v, _)| v == var)
        .map(|(_, words)| words)
        .ok_or_else(|| {
            format!("cannot tell which file {name} names: ${var} is no variable of a `for` loop over words")
        })?
        .as_ref()
        .ok_or_else(|| format!("cannot tell which file {name} names: ${var} loops over no plain words"))?;
    let mut out = Vec::new();
    for w in words {
        out.extend(expand(&format!("{}{w}{after}", &name[..at]), loops, names)?);
    }
    Ok(out)
}

/// A command's words from its command word on: the reserved words that may lead it
/// (`then`, `do`, `!`, `{` ...) and variable assignments left out.
fn strip_reserved(command: &[String]) -> &[String] {
    const RESERVED: [&str; 12] = [
        "if", "then", "else", "elif", "do", "!", "{", "}", "fi", "esac", "time", "exec",
    ];
    let mut words = command;
    while let Some((first, rest)) = words.split_first() {
        let assignment = first.split_once('=').is_some_and(|(v, _)| {
            !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        if RESERVED.contains(&first.as_str()) || assignment {
            words = rest;
        } else {
            break;
        }
    }
    words
}

/// The simple commands of a shell text, each as its words (quotes taken off, variables
/// left as written): split at newlines, `;`, `&&`, `||`, `|`, `&` and parentheses outside
/// quotes and `$(...)`, comments and here-documents left out.
pub fn commands(text: &str) -> Vec<Vec<String>> {
    let mut lexer = Lexer::default();
    let mut chars = text
        .replace("\\\n", " ")
        .chars()
        .collect::<Vec<_>>()
        .into_iter()
        .peekable();
    while let Some(c) = chars.next() {
        lexer.take(c, &mut chars);
    }
    lexer.end_word();
    lexer.end_command();
    lexer.commands
}

/// The state of [`commands`]' reading.
#[derive(Default)]
struct Lexer {
    commands: Vec<Vec<String>>,
    command: Vec<String>,
    word: Option<String>,
    /// Here-documents whose bodies start on the next line: their end words.
    heredocs: Vec<String>,
}

impl Lexer {
    fn end_word(&mut self) {
        if let Some(w) = self.word.take() {
            self.command.push(w);
        }
    }

    fn end_command(&mut self) {
        self.end_word();
        if !self.command.is_empty() {
            self.commands.push(std::mem::take(&mut self.command));
        }
    }

    fn push(&mut self, c: char) {
        self.word.get_or_insert_with(String::new).push(c);
    }

    fn take(&mut self, c: char, rest: &mut std::iter::Peekable<std::vec::IntoIter<char>>) {
        match c {
            '\n' => {
                self.end_command();
                // Here-document bodies are not commands of this text.
                for end in std::mem::take(&mut self.heredocs) {
                    let mut line = String::new();
                    for c in rest.by_ref() {
                        if c != '\n' {
                            line.push(c);
                            continue;
                        }
                        if line.trim_start_matches('\t') == end {
                            break;
                        }
                        line.clear();
                    }
                }
            }
            '#' if self.word.is_none() => {
                while rest.peek().is_some_and(|&c| c != '\n') {
                    rest.next();
                }
            }
            '\'' => {
                self.word.get_or_insert_with(String::new);
                for c in rest.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    self.push(c);
                }
            }
            '"' => {
                self.word.get_or_insert_with(String::new);
                while let Some(c) = rest.next() {
                    match c {
                        '"' => break,
                        '\\' => {
                            if let Some(next) = rest.next() {
                                self.push(next);
                            }
                        }
                        '$' if rest.peek() == Some(&'(') => self.substitution(rest),
                        _ => self.push(c),
                    }
                }
            }
            '\\' => {
                if let Some(next) = rest.next() {
                    self.push(next);
                }
            }
            '$' if rest.peek() == Some(&'(') => self.substitution(rest),
            '<' if rest.peek() == Some(&'<') => {
                rest.next();
                if rest.peek() == Some(&'-') {
                    rest.next();
                }
                while rest.peek() == Some(&' ') {
                    rest.next();
                }
                let mut end = String::new();
                while let Some(&c) = rest.peek() {
                    if c.is_whitespace() || c == ';' {
                        break;
                    }
                    rest.next();
                    if c != '\'' && c != '"' {
                        end.push(c);
                    }
                }
                self.heredocs.push(end);
            }
            // `2>&1`, `>&2`: a redirection, not a background job.
            '&' if self
                .word
                .as_deref()
                .is_some_and(|w| w.ends_with('>') || w.ends_with('<')) =>
            {
                self.push(c);
            }
            ';' | '&' | '|' | '(' | ')' => {
                self.end_command();
                if rest.peek() == Some(&c) {
                    rest.next();
                }
            }
            c if c.is_whitespace() => self.end_word(),
            c => self.push(c),
        }
    }

    /// `$(...)`, kept whole in the word.
    fn substitution(&mut self, rest: &mut std::iter::Peekable<std::vec::IntoIter<char>>) {
        self.push('$');
        let mut depth = 0;
        for c in rest.by_ref() {
            self.push(c);
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_split_as_the_shell_splits_them() {
        let text = "a 'b c' \"d $(e; f)\" # g\nh && i || j | k & l; m 2>&1 >&2\n\
                    cat > /tmp/x <<'END'\nemit inside here\nEND\n(cd x && n)\nlong \\\n  line";
        let got: Vec<String> = commands(text).iter().map(|c| c.join(" ")).collect();
        assert_eq!(
            got,
            [
                "a b c d $(e; f)",
                "h",
                "i",
                "j",
                "k",
                "l",
                "m 2>&1 >&2",
                "cat > /tmp/x",
                "cd x",
                "n",
                "long line"
            ]
        );
    }

    fn functions_of(prelude: &'static str) -> BTreeMap<String, Function> {
        functions(&Group {
            script: "/t.sh",
            prelude,
            libraries: &[],
            cases: &[],
        })
        .unwrap()
    }

    const PRELUDE: &str = "capture() {\n    name=$1 workload=$2\n    shift 2\n    emit $name.rc /tmp/$name.rc\n    emit $name.log /tmp/$name.log\n    [ -f /tmp/$name.json ] && emit $name.json /tmp/$name.json\n}\nbt() {\n    emit $1.bt /tmp/$1.bt\n}\n";

    #[test]
    fn parameters_are_replaced_whole() {
        let params = BTreeMap::from([("n".to_owned(), 1), ("name".to_owned(), 2)]);
        let args = ["50".to_owned(), "scale_$how".to_owned()];
        assert_eq!(substitute("$name.rc", &params, &args), "scale_$how.rc");
        assert_eq!(
            substitute("${n}x-$2-$how", &params, &args),
            "50x-scale_$how-$how"
        );
    }

    #[test]
    fn a_workload_sends_what_its_calls_and_loops_name() {
        let f = functions_of(PRELUDE);
        let text = "for how in kprobe fentry; do\n    capture rmdir_$how \"x y\" --attach $how\ndone\n\
                    bt rmdir 'w'\nfor n in 50 150; do emit um$n.txt /tmp/x; done\n\
                    for n in 5000; do capture neg$n w; done\nemit ${n}x /tmp/y";
        let sent = emits(text, &f);
        assert_eq!(
            sent.unwrap_err(),
            "cannot tell which file ${n}x names: $n is no variable of a `for` loop over words"
        );
        let sent = emits(&text[..text.rfind('\n').unwrap()], &f).unwrap();
        let joined: Vec<String> = sent.iter().map(|g| g.join(" ")).collect();
        assert_eq!(
            joined,
            [
                "rmdir_kprobe.rc rmdir_kprobe.log rmdir_kprobe.json",
                "rmdir_fentry.rc rmdir_fentry.log rmdir_fentry.json",
                "rmdir.bt",
                "um50.txt",
                "um150.txt",
                "neg5000.rc neg5000.log neg5000.json",
            ]
        );
        let unknown = emits("for spec in $list; do emit $spec /tmp/x; done", &f);
        assert!(unknown.unwrap_err().contains("loops over no plain words"));
    }
}
