//! No import cycle between the modules of a crate.
//!
//! A module that uses another which, directly or through others, uses the first cannot be
//! read, tested or moved alone; the layout stops telling which one is built on which.
//!
//! What counts as a use: every path a module's code names (see [`super::source`]: `use`
//! declarations, signatures, fields, function bodies, macro arguments) that leads to an
//! item of another module of the same crate. A path is followed as rustc resolves it:
//! `crate::`, `self::` and `super::` from where they stand, a first segment that is a child
//! module or a name a `use` of the same module brought in from there, then down through
//! child modules for as long as the segments name them; the module reached owns the item
//! (`crate::kernel::Series::by_name` is a use of `crate::kernel`). Other paths (extern
//! crates, local items, generics, a single name outside a `use`) are no use of a module. Declaring a child (`mod child;`)
//! is not a use, nor is a path to the module itself.
//!
//! Tests: code under `#[cfg(test)]` is left out. A tests module importing the parent that
//! declares it (`use super::*`) tests that parent from inside; it is not a layer of the
//! crate, and counting it would make every module with unit tests a cycle.
//!
//! A strongly connected set of two or more modules (Tarjan's algorithm) is a cycle; each
//! is printed with the uses that close it, each at the first place it is written.

use std::collections::{BTreeMap, BTreeSet};

use super::source::{Crate, Import};
use crate::testing::harness::{Fail, Verdict};

/// Module -> module uses, by the modules' display names, with where each is first written
/// (`file:line`).
pub type Uses = BTreeMap<(String, String), String>;

/// The crate's module -> module uses.
pub fn uses(c: &Crate, root: &std::path::Path) -> Uses {
    let bindings = bindings(c);
    let mut out = Uses::new();
    for (m, module) in c.modules.iter().enumerate() {
        if module.test {
            continue;
        }
        // A path of one segment outside a `use` names a local item, a value or a type, never
        // a module (`keys` a local variable beside a child module `keys`); one a `use`
        // brought in is that `use`'s.
        let uses_a_module =
            |r: &&super::source::Ref| !r.test && (r.import != Import::No || r.segments.len() > 1);
        for r in module.refs.iter().filter(uses_a_module) {
            let Some(to) = resolve(c, &bindings, m, &r.segments) else {
                continue;
            };
            if to == m || c.modules[to].test {
                continue;
            }
            let file = module.file.strip_prefix(root).unwrap_or(&module.file);
            out.entry((module.display(&c.name), c.modules[to].display(&c.name)))
                .or_insert_with(|| format!("{}:{}", file.display(), r.line));
        }
    }
    out
}

/// What the names a module's `use` declarations bring in lead to: per module, each bound
/// name's module, and the modules it globs.
#[derive(Default, Clone)]
struct Scope {
    names: BTreeMap<String, usize>,
    globs: Vec<usize>,
}

/// Each module's [`Scope`]. A `use` may start with a name another `use` brought in
/// (`use crate::testing; use testing::suite;`), so they are resolved until nothing changes.
fn bindings(c: &Crate) -> Vec<Scope> {
    let mut scopes = vec![Scope::default(); c.modules.len()];
    loop {
        let mut changed = false;
        for (m, module) in c.modules.iter().enumerate() {
            for r in &module.refs {
                if r.import == Import::No {
                    continue;
                }
                let Some(to) = resolve(c, &scopes, m, &r.segments) else {
                    continue;
                };
                let scope = &mut scopes[m];
                changed |= match &r.import {
                    Import::Name(name) => scope.names.insert(name.clone(), to) != Some(to),
                    Import::Glob if !scope.globs.contains(&to) => {
                        scope.globs.push(to);
                        true
                    }
                    _ => false,
                };
            }
        }
        if !changed {
            return scopes;
        }
    }
}

/// The module of this crate that the path `segments`, written in module `m`, leads to.
fn resolve(c: &Crate, scopes: &[Scope], m: usize, segments: &[String]) -> Option<usize> {
    let (first, rest) = segments.split_first()?;
    let mut at = match first.as_str() {
        "crate" => 0,
        "self" => m,
        "super" => c.modules[m].parent?,
        name => c.modules[m]
            .children
            .get(name)
            .or_else(|| scopes[m].names.get(name))
            .or_else(|| {
                scopes[m]
                    .globs
                    .iter()
                    .find_map(|&g| c.modules[g].children.get(name))
            })
            .copied()?,
    };
    for s in rest {
        match s.as_str() {
            "super" => at = c.modules[at].parent?,
            "self" => {}
            name => match c.modules[at].children.get(name) {
                Some(&child) => at = child,
                None => break,
            },
        }
    }
    Some(at)
}

/// The crate's verdict: how many uses between how many modules, or each cycle.
pub fn acyclic(uses: &Uses) -> Verdict {
    let found = cycles(uses);
    if found.is_empty() {
        let modules: BTreeSet<&str> = uses
            .keys()
            .flat_map(|(a, b)| [a.as_str(), b.as_str()])
            .collect();
        return Ok(format!(
            "{} uses between {} modules, no cycle",
            uses.len(),
            modules.len()
        ));
    }
    Err(Fail::Wrong(
        found
            .iter()
            .map(|c| describe_cycle(c, uses))
            .collect::<Vec<_>>()
            .join("; "),
    ))
}

/// The strongly connected sets of two or more modules (Tarjan's algorithm), each sorted.
pub fn cycles(uses: &Uses) -> Vec<Vec<String>> {
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
    for (a, b) in uses.keys() {
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

/// `import cycle between a, b: a -> b (file:line), b -> a (file:line)`.
pub fn describe_cycle(modules: &[String], uses: &Uses) -> String {
    let inside: Vec<String> = uses
        .iter()
        .filter(|((a, b), _)| modules.contains(a) && modules.contains(b))
        .map(|((a, b), at)| format!("{a} -> {b} ({at})"))
        .collect();
    format!(
        "import cycle between {}: {}",
        modules.join(", "),
        inside.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{super::source, *};

    fn uses_of(list: &[(&str, &str)]) -> Uses {
        let read = source::tests::files(list);
        let c = source::load("x", Path::new("src/lib.rs"), &read).unwrap();
        uses(&c, Path::new(""))
    }

    fn pairs(u: &Uses) -> Vec<(&str, &str)> {
        u.keys().map(|(a, b)| (a.as_str(), b.as_str())).collect()
    }

    /// A cycle made on purpose, through three modules by `use` declarations, beside one of
    /// two modules.
    #[test]
    fn a_cycle_through_three_modules_is_named_with_its_uses() {
        let u = uses_of(&[
            ("src/lib.rs", "mod a; mod b; mod c; mod d; mod e; mod f;"),
            ("src/a.rs", "use crate::b::B;\npub struct A;"),
            ("src/b.rs", "use super::c::C;\npub struct B;"),
            ("src/c.rs", "use crate::a::A;\nuse crate::d;\npub struct C;"),
            ("src/d.rs", ""),
            ("src/e.rs", "pub struct E(pub crate::f::F);"),
            ("src/f.rs", "pub struct F;\nfn g(_: Option<super::e::E>) {}"),
        ]);
        let found = cycles(&u);
        assert_eq!(
            found,
            vec![
                vec!["x::a".to_owned(), "x::b".to_owned(), "x::c".to_owned()],
                vec!["x::e".to_owned(), "x::f".to_owned()],
            ]
        );
        assert_eq!(
            describe_cycle(&found[1], &u),
            "import cycle between x::e, x::f: x::e -> x::f (src/e.rs:1), x::f -> x::e (src/f.rs:2)"
        );
        assert!(
            acyclic(&u)
                .unwrap_err()
                .to_string()
                .starts_with("import cycle between x::a, x::b, x::c")
        );
    }

    /// A cycle made on purpose inside function bodies, where no `use` declaration shows it:
    /// one call by a qualified path, one inside a macro's arguments.
    #[test]
    fn a_cycle_inside_function_bodies_is_found() {
        let u = uses_of(&[
            ("src/lib.rs", "mod a; mod b;"),
            ("src/a.rs", "pub fn f() -> u32 {\n    crate::b::g() + 1\n}"),
            (
                "src/b.rs",
                "pub fn g() -> u32 {\n    let n = 1;\n    println!(\"{}\", super::a::f());\n    n\n}",
            ),
        ]);
        assert_eq!(
            acyclic(&u).unwrap_err(),
            Fail::from(
                "import cycle between x::a, x::b: x::a -> x::b (src/a.rs:2), x::b -> x::a (src/b.rs:3)"
            )
        );
    }

    #[test]
    fn paths_resolve_through_imports_children_and_globs() {
        let u = uses_of(&[
            ("src/lib.rs", "mod t; mod k; fn run() { t::s::go(); }"),
            ("src/t.rs", "pub mod s; pub mod h;"),
            (
                "src/t/s.rs",
                "use crate::k;\nuse super::h as harness;\npub fn go() { k::K::new(); harness::x(); }",
            ),
            ("src/t/h.rs", "use crate::*;\npub fn x() { k::f(); }"),
            ("src/k.rs", "pub struct K;"),
        ]);
        assert_eq!(
            pairs(&u),
            [
                ("x", "x::t::s"),
                ("x::t::h", "x"),
                ("x::t::h", "x::k"),
                ("x::t::s", "x::k"),
                ("x::t::s", "x::t::h"),
            ]
        );
        // The root uses t::s, which uses t::h, which globs the root: a cycle.
        assert_eq!(cycles(&u), vec![vec!["x", "x::t::h", "x::t::s"]]);
    }

    #[test]
    fn a_layered_crate_has_no_cycle_and_tests_modules_are_left_out() {
        let u = uses_of(&[
            ("src/lib.rs", "mod a; mod b;\nfn main() { a::run(); }"),
            (
                "src/a.rs",
                "use crate::b::B;\npub fn run() { let b = 1; let _ = b; }\n\
                 #[cfg(test)]\nmod tests { use super::*; use crate::run; }",
            ),
            (
                "src/b.rs",
                "pub struct B;\n#[cfg(test)]\nfn only_in_tests() { crate::a::run(); }\n\
                 pub fn local(a: u32) -> u32 { a }",
            ),
        ]);
        assert_eq!(pairs(&u), [("x", "x::a"), ("x::a", "x::b")]);
        assert_eq!(
            acyclic(&u),
            Ok("2 uses between 3 modules, no cycle".to_owned())
        );
    }
}
