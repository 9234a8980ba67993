//! `cargo xtask lint`: no import cycle between the modules of any crate of the workspace.
//!
//! A module that uses another which, directly or through others, uses the first cannot be
//! read, tested or moved alone; the layout stops telling which one is built on which. The
//! lint asks `cargo-modules` (built into the setup cache by `cargo xtask setup`) for each
//! crate's graph, for every lib and bin target of every workspace member that
//! `cargo metadata` lists, so a crate added later is linted without a change here.
//!
//! What counts as a use: cargo-modules records an item's uses (a `use` in a module's scope,
//! a type in a function's signature, a struct's field or an enum's variant; not what
//! function bodies call) and, with `--no-fns --no-traits --no-types`, folds each item into
//! the module that owns it, so what is left are module -> module uses. `--no-owns` leaves
//! out a parent's `mod child;`: declaring a child is not an import. A strongly connected set
//! of two or more modules in that graph is a cycle; each is printed with the uses that
//! close it, and the crate's case fails.
//!
//! Why not cargo-modules' own `--acyclic`: it looks for cycles in the graph of items before
//! they are folded into modules, "owns" edges included, so a type and its own constructor
//! already make one (`kernel::Series` owns `Series::by_name`, which returns a `Series`): it
//! fails on almost any crate, xtask included. And it misses the cycles this lint is about,
//! where module `a` uses an item of `b` and `b` an item of `a` (an item has no edge back to
//! the module that owns it). The module graph is therefore read here, from the DOT text
//! cargo-modules prints, and its cycles found with Tarjan's algorithm.
//!
//! Tests modules: the crates are analysed without `cfg(test)` (cargo-modules' default; no
//! `--cfg-test`), so `#[cfg(test)] mod tests { use super::*; }` is not in the graph. A tests
//! module importing the parent that declares it tests that parent from inside; it is not a
//! layer of the crate, and counting it would make every module with unit tests a cycle.
//!
//! `tracer-ebpf` is left out (and says so): it is `no_std` for `bpfel-unknown-none`,
//! built by nightly from `tracer-loader/build.rs`, and cargo-modules loads a crate for the host.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    process::Command,
};

use anyhow::Context as _;

use crate::{
    testing::harness::{Tally, Verdict},
    util,
};

/// Workspace members the lint does not analyse, and why.
const SKIPPED: [(&str, &str); 1] = [(
    "tracer-ebpf",
    "no_std kernel programs for bpfel-unknown-none; cargo-modules loads crates for the host",
)];

/// The flags that leave module -> module uses: no external or standard-library items, no
/// functions, traits or types (their uses fold into their modules), no "owns" edges.
const FLAGS: [&str; 8] = [
    "--no-externs",
    "--no-sysroot",
    "--no-fns",
    "--no-traits",
    "--no-types",
    "--no-owns",
    "--layout",
    "dot",
];

/// One crate to analyse: a lib or bin target of a workspace member.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    package: String,
    /// `lib`, or `bin` with the binary's name.
    kind: Kind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Lib,
    Bin(String),
}

impl Target {
    fn describe(&self) -> String {
        match &self.kind {
            Kind::Lib => format!("{} (lib)", self.package),
            Kind::Bin(name) => format!("{} (bin {name})", self.package),
        }
    }
}

/// `cargo xtask lint`: one case per crate, printed and counted in `tally`.
pub fn lint(cargo_modules: &Path, tally: &mut Tally) -> anyhow::Result<()> {
    let metadata = util::output(
        util::cargo()
            .args(["metadata", "--no-deps", "--format-version", "1"])
            .current_dir(util::workspace_root()),
    )?;
    let (targets, skipped) = targets(&metadata)?;
    for (package, why) in skipped {
        tally.skip(
            "lint",
            &format!("no import cycle between the modules of {package}"),
            why,
        );
    }
    for target in targets {
        let verdict = acyclic(cargo_modules, &target);
        tally.record(
            "lint",
            &format!(
                "no import cycle between the modules of {}",
                target.describe()
            ),
            &verdict,
        );
    }
    Ok(())
}

/// Members left out, with why.
type Skipped = Vec<(String, &'static str)>;

/// The lib and bin targets of the workspace's members, and the members left out.
fn targets(metadata: &str) -> anyhow::Result<(Vec<Target>, Skipped)> {
    let v: serde_json::Value = serde_json::from_str(metadata).context("cargo metadata's JSON")?;
    let packages = v["packages"]
        .as_array()
        .context("cargo metadata lists no packages")?;
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for p in packages {
        let package = p["name"].as_str().context("a package without a name")?;
        if let Some((_, why)) = SKIPPED.iter().find(|(name, _)| *name == package) {
            skipped.push((package.to_owned(), *why));
            continue;
        }
        for t in p["targets"].as_array().into_iter().flatten() {
            let kinds: Vec<&str> = t["kind"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(serde_json::Value::as_str)
                .collect();
            let kind = if kinds.contains(&"lib") {
                Kind::Lib
            } else if kinds.contains(&"bin") {
                Kind::Bin(
                    t["name"]
                        .as_str()
                        .context("a bin without a name")?
                        .to_owned(),
                )
            } else {
                continue;
            };
            out.push(Target {
                package: package.to_owned(),
                kind,
            });
        }
    }
    Ok((out, skipped))
}

/// Run cargo-modules on `target` and judge its module graph.
fn acyclic(cargo_modules: &Path, target: &Target) -> Verdict {
    let mut cmd = Command::new(cargo_modules);
    cmd.arg("dependencies")
        .arg("--manifest-path")
        .arg(util::workspace_root().join("Cargo.toml"))
        .args(["--package", &target.package]);
    match &target.kind {
        Kind::Lib => cmd.arg("--lib"),
        Kind::Bin(name) => cmd.args(["--bin", name]),
    };
    cmd.args(FLAGS)
        // Its `cargo check` of the build scripts wraps rustc: a directory of its own keeps
        // that from invalidating the workspace's build.
        .env("CARGO_TARGET_DIR", util::target_dir().join("cargo-modules"))
        .current_dir(util::workspace_root());
    let dot = util::output(&mut cmd).map_err(|e| format!("{e:#}"))?;
    if !dot.trim_start().starts_with("digraph") {
        return Err(format!(
            "cargo-modules printed no DOT graph for {}: {}",
            target.describe(),
            dot.lines().next().unwrap_or("(nothing)")
        ));
    }
    let edges = uses(&dot);
    let cycles = cycles(&edges);
    if cycles.is_empty() {
        let modules: BTreeSet<&str> = edges
            .iter()
            .flat_map(|(a, b)| [a.as_str(), b.as_str()])
            .collect();
        return Ok(format!(
            "{} uses between {} modules, no cycle",
            edges.len(),
            modules.len()
        ));
    }
    Err(cycles
        .iter()
        .map(|c| describe_cycle(c, &edges))
        .collect::<Vec<_>>()
        .join("; "))
}

/// The `uses` edges of cargo-modules' DOT text, as `(from, to)` module paths, self-uses
/// left out. Lines look like
/// `"xtask::a" -> "xtask::b" [label="uses", ...] [constraint=false]; // "uses" edge`.
fn uses(dot: &str) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for line in dot.lines() {
        let line = line.trim();
        if !line.ends_with("// \"uses\" edge") {
            continue;
        }
        let Some((from, rest)) = line.split_once(" -> ") else {
            continue;
        };
        let Some(to) = rest.split(' ').next() else {
            continue;
        };
        let (from, to) = (from.trim_matches('"'), to.trim_matches('"'));
        if from != to {
            out.insert((from.to_owned(), to.to_owned()));
        }
    }
    out
}

/// The strongly connected sets of two or more modules (Tarjan's algorithm), each sorted.
fn cycles(edges: &BTreeSet<(String, String)>) -> Vec<Vec<String>> {
    /// Tarjan's state: the graph, then per node its index and low-link, the stack.
    struct State<'a> {
        next: BTreeMap<&'a str, Vec<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }

    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.next.get(v).cloned().unwrap_or_default() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut set = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                set.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if set.len() > 1 {
                set.sort();
                s.found.push(set);
            }
        }
    }

    let mut s = State {
        next: BTreeMap::new(),
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for (a, b) in edges {
        s.next.entry(a.as_str()).or_default().push(b.as_str());
    }
    let nodes: Vec<&str> = s.next.keys().copied().collect();
    for v in nodes {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.found.sort();
    s.found
}

/// `import cycle between a, b: a -> b, b -> a`.
fn describe_cycle(modules: &[String], edges: &BTreeSet<(String, String)>) -> String {
    let inside: Vec<String> = edges
        .iter()
        .filter(|(a, b)| modules.contains(a) && modules.contains(b))
        .map(|(a, b)| format!("{a} -> {b}"))
        .collect();
    format!(
        "import cycle between {}: {}",
        modules.join(", "),
        inside.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(a: &str, b: &str) -> String {
        format!(
            "    \"{a}\" -> \"{b}\" [label=\"uses\", color=\"#7f7f7f\", style=\"dashed\"] [constraint=false]; // \"uses\" edge"
        )
    }

    #[test]
    fn uses_edges_are_read_and_owns_edges_left_out() {
        let dot = [
            "digraph {".to_owned(),
            edge("x::a", "x::b"),
            edge("x::a", "x::a"),
            "    \"x\" -> \"x::a\" [label=\"owns\", color=\"#000000\", style=\"solid\"] [constraint=true]; // \"owns\" edge".to_owned(),
            "}".to_owned(),
        ]
        .join("\n");
        let e = uses(&dot);
        assert_eq!(
            e.into_iter().collect::<Vec<_>>(),
            vec![("x::a".to_owned(), "x::b".to_owned())]
        );
    }

    #[test]
    fn a_cycle_through_three_modules_is_named_with_its_uses() {
        let dot = [
            edge("x::a", "x::b"),
            edge("x::b", "x::c"),
            edge("x::c", "x::a"),
            edge("x::c", "x::d"),
            edge("x::e", "x::f"),
            edge("x::f", "x::e"),
        ]
        .join("\n");
        let e = uses(&dot);
        let found = cycles(&e);
        assert_eq!(
            found,
            vec![
                vec!["x::a".to_owned(), "x::b".to_owned(), "x::c".to_owned()],
                vec!["x::e".to_owned(), "x::f".to_owned()],
            ]
        );
        assert_eq!(
            describe_cycle(&found[1], &e),
            "import cycle between x::e, x::f: x::e -> x::f, x::f -> x::e"
        );
    }

    #[test]
    fn a_layered_graph_has_no_cycle() {
        let dot = [edge("x", "x::a"), edge("x::a", "x::b"), edge("x", "x::b")].join("\n");
        assert!(cycles(&uses(&dot)).is_empty());
    }

    #[test]
    fn members_give_their_lib_and_bin_targets_and_the_kernel_crate_is_skipped() {
        let metadata = r#"{"packages":[
            {"name":"tracer","targets":[{"kind":["lib"],"name":"tracer"},{"kind":["bin"],"name":"tracer"},{"kind":["custom-build"],"name":"build-script-build"}]},
            {"name":"tracer-ebpf","targets":[{"kind":["bin"],"name":"tracer"}]},
            {"name":"xtask","targets":[{"kind":["bin"],"name":"xtask"},{"kind":["test"],"name":"it"}]}
        ]}"#;
        let (t, skipped) = targets(metadata).unwrap();
        assert_eq!(
            t.iter().map(Target::describe).collect::<Vec<_>>(),
            vec!["tracer (lib)", "tracer (bin tracer)", "xtask (bin xtask)"]
        );
        assert_eq!(skipped.len(), 1);
        assert_eq!(skipped[0].0, "tracer-ebpf");
    }
}
