//! A crate's modules as its files lay them out, and the paths each one's code names: what
//! both checks of the lint read. syn parses every file; `#[cfg(...)]` is not evaluated, so
//! the modules of every configuration are in (a kernel-only or feature-only one too),
//! and what sits under `#[cfg(test)]` is marked as test code.
//!
//! A path is named wherever the code writes one: a `use` declaration, a type in a
//! signature or a field, an expression or a pattern in a function body, an attribute, a
//! macro's own path, and `a::b` token runs inside a macro's arguments (`format!("{}",
//! crate::x::y())`), which syn leaves as tokens.

use std::{
    collections::BTreeMap,
    io,
    path::{Path, PathBuf},
};

use proc_macro2::{Spacing, TokenStream, TokenTree};
use syn::visit::{self, Visit};

/// Reads a source file (the file system, or a test's strings).
pub type Read<'a> = &'a dyn Fn(&Path) -> io::Result<String>;

/// One crate (a lib or bin target), as parsed.
#[derive(Debug)]
pub struct Crate {
    /// The crate's name in paths (`tracer_core`).
    pub name: String,
    /// Its modules; the root is the first.
    pub modules: Vec<Module>,
}

/// One module of a crate.
#[derive(Debug)]
pub struct Module {
    /// From the crate root: empty for the root itself.
    pub path: Vec<String>,
    pub parent: Option<usize>,
    /// Child modules by name.
    pub children: BTreeMap<String, usize>,
    /// Under `#[cfg(test)]`, itself or an ancestor.
    pub test: bool,
    /// The file its items are in.
    pub file: PathBuf,
    /// The paths its code names, in the order written.
    pub refs: Vec<Ref>,
}

/// A path named in a module's code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ref {
    /// Its segments' identifiers (`crate`, `super` and `self` among them); a path written
    /// with a leading `::` (an extern crate) starts with `::`.
    pub segments: Vec<String>,
    /// Whether a `use` declaration names it, and what it brings into scope.
    pub import: Import,
    /// The line it starts on, in the module's file.
    pub line: usize,
    /// Inside an item under `#[cfg(test)]`.
    pub test: bool,
}

/// What a path of a `use` declaration brings into scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Import {
    /// Not a `use` path.
    No,
    /// The name it binds (its last segment, or the `as` name).
    Name(String),
    /// Everything public in it (`use a::*`).
    Glob,
}

impl Module {
    /// `crate::a::b` as `name::a::b`, `name` for the root.
    pub fn display(&self, crate_name: &str) -> String {
        std::iter::once(crate_name)
            .chain(self.path.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join("::")
    }
}

/// Parse the crate whose root file is `root`, following each `mod name;` to its file.
///
/// # Errors
/// A file that cannot be read or parsed, or a `mod name;` without a file.
pub fn load(name: &str, root: &Path, read: Read<'_>) -> Result<Crate, String> {
    let mut c = Crate {
        name: name.to_owned(),
        modules: vec![Module {
            path: Vec::new(),
            parent: None,
            children: BTreeMap::new(),
            test: false,
            file: root.to_path_buf(),
            refs: Vec::new(),
        }],
    };
    let file = parse(root, read)?;
    // A crate root's child modules live beside it, as a `mod.rs`'s do.
    let dir = root.parent().unwrap_or(Path::new("")).to_path_buf();
    load_items(&mut c, 0, &file.items, &dir, read)?;
    Ok(c)
}

fn parse(path: &Path, read: Read<'_>) -> Result<syn::File, String> {
    let text = read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    syn::parse_file(&text).map_err(|e| {
        let at = e.span().start();
        format!("{}:{}:{}: {e}", path.display(), at.line, at.column + 1)
    })
}

/// Add the items of module `m` (its child modules, and the paths the rest name); `dir` is
/// where its child modules' files are.
fn load_items(
    c: &mut Crate,
    m: usize,
    items: &[syn::Item],
    dir: &Path,
    read: Read<'_>,
) -> Result<(), String> {
    for item in items {
        let syn::Item::Mod(child) = item else {
            let mut refs = Refs {
                out: Vec::new(),
                test: c.modules[m].test,
            };
            refs.visit_item(item);
            c.modules[m].refs.extend(refs.out);
            continue;
        };
        let name = child.ident.to_string();
        let test = c.modules[m].test || cfg_test(&child.attrs);
        let parsed;
        let (file, items, child_dir): (PathBuf, &[syn::Item], PathBuf) =
            if let Some((_, inline)) = &child.content {
                (c.modules[m].file.clone(), inline, dir.join(&name))
            } else {
                let file = child_file(dir, &name, &child.attrs, &c.modules[m].file, read)?;
                parsed = parse(&file, read)?;
                let child_dir = if file.file_name().is_some_and(|f| f == "mod.rs") {
                    file.parent().unwrap_or(dir).to_path_buf()
                } else {
                    file.with_extension("")
                };
                (file, &parsed.items, child_dir)
            };
        let index = c.modules.len();
        let mut path = c.modules[m].path.clone();
        path.push(name.clone());
        c.modules.push(Module {
            path,
            parent: Some(m),
            children: BTreeMap::new(),
            test,
            file,
            refs: Vec::new(),
        });
        c.modules[m].children.insert(name, index);
        load_items(c, index, items, &child_dir, read)?;
    }
    Ok(())
}

/// The file of `mod name;`: its `#[path]` (beside the declaring file), else `dir/name.rs` or
/// `dir/name/mod.rs`.
fn child_file(
    dir: &Path,
    name: &str,
    attrs: &[syn::Attribute],
    declared_in: &Path,
    read: Read<'_>,
) -> Result<PathBuf, String> {
    let explicit = attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    });
    let candidates = match explicit {
        Some(p) => vec![declared_in.parent().unwrap_or(dir).join(p)],
        None => vec![
            dir.join(format!("{name}.rs")),
            dir.join(name).join("mod.rs"),
        ],
    };
    candidates
        .iter()
        .find(|p| read(p).is_ok())
        .cloned()
        .ok_or_else(|| {
            format!(
                "{}: `mod {name};` has no file (looked for {})",
                declared_in.display(),
                candidates
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}

/// `#[cfg(test)]`, or a `cfg(all(...))` that needs `test`.
fn cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| match &a.meta {
        syn::Meta::List(list) if list.path.is_ident("cfg") => needs_test(list.tokens.clone()),
        _ => false,
    })
}

/// Whether a cfg predicate holds only under `cargo test`: `test`, or `all(..)` of one that does.
fn needs_test(predicate: TokenStream) -> bool {
    let tokens: Vec<TokenTree> = predicate.into_iter().collect();
    match tokens.as_slice() {
        [TokenTree::Ident(i)] => i == "test",
        [TokenTree::Ident(i), TokenTree::Group(g)] if i == "all" => {
            let mut part = TokenStream::new();
            let mut any = false;
            for t in g.stream() {
                if matches!(&t, TokenTree::Punct(p) if p.as_char() == ',') {
                    any |= needs_test(std::mem::take(&mut part));
                } else {
                    part.extend([t]);
                }
            }
            any || needs_test(part)
        }
        _ => false,
    }
}

/// The attributes of an item, whatever its kind.
fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item;
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// Collects the paths an item's code names.
struct Refs {
    out: Vec<Ref>,
    /// Inside test code.
    test: bool,
}

impl Refs {
    fn push(&mut self, segments: Vec<String>, import: Import, line: usize) {
        if !segments.is_empty() {
            self.out.push(Ref {
                segments,
                import,
                line,
                test: self.test,
            });
        }
    }

    /// Every path of a `use` tree, with what it brings into scope.
    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree, line: usize) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree, line);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let name = n.ident.to_string();
                let mut path = prefix.clone();
                // `use a::b::{self}` names `a::b`.
                if name != "self" {
                    path.push(name);
                }
                let bound = path.last().cloned().unwrap_or_default();
                self.push(path, Import::Name(bound), line);
            }
            syn::UseTree::Rename(r) => {
                let mut path = prefix.clone();
                if r.ident != "self" {
                    path.push(r.ident.to_string());
                }
                self.push(path, Import::Name(r.rename.to_string()), line);
            }
            syn::UseTree::Glob(_) => self.push(prefix.clone(), Import::Glob, line),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t, line);
                }
            }
        }
    }

    /// The `a::b::c` runs among a macro's argument tokens.
    fn tokens(&mut self, stream: TokenStream) {
        let tokens: Vec<TokenTree> = stream.into_iter().collect();
        let colons = |i: usize| {
            matches!((tokens.get(i), tokens.get(i + 1)),
                (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
                    if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':')
        };
        let mut i = 0;
        while i < tokens.len() {
            match &tokens[i] {
                TokenTree::Group(g) => {
                    self.tokens(g.stream());
                    i += 1;
                }
                TokenTree::Ident(first) if colons(i + 1) => {
                    let line = first.span().start().line;
                    let mut segments = vec![first.to_string()];
                    // `::name` before it: an extern crate's path.
                    if i >= 2 && colons(i - 2) {
                        segments.insert(0, "::".to_owned());
                    }
                    i += 1;
                    while colons(i) {
                        if let Some(TokenTree::Ident(next)) = tokens.get(i + 2) {
                            segments.push(next.to_string());
                            i += 3;
                        } else {
                            // `format::$fmt::number` in a macro's template: a path that goes
                            // on past what the tokens say.
                            segments.push("$".to_owned());
                            i += 2;
                            break;
                        }
                    }
                    self.push(segments, Import::No, line);
                }
                _ => i += 1,
            }
        }
    }
}

impl<'ast> Visit<'ast> for Refs {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let outer = self.test;
        self.test |= cfg_test(item_attrs(item));
        visit::visit_item(self, item);
        self.test = outer;
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        let outer = self.test;
        self.test |= cfg_test(&f.attrs);
        visit::visit_impl_item_fn(self, f);
        self.test = outer;
    }

    /// `pub(crate)`, `pub(super)`, `pub(in path)` say who may use an item, not what it uses.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    /// A module declared inside a function body belongs to no module of the tree: its paths
    /// are left out.
    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {}

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let line = u.use_token.span.start().line;
        let mut prefix = Vec::new();
        if u.leading_colon.is_some() {
            prefix.push("::".to_owned());
        }
        self.use_tree(&mut prefix, &u.tree, line);
    }

    fn visit_item_extern_crate(&mut self, e: &'ast syn::ItemExternCrate) {
        let line = e.ident.span().start().line;
        self.push(vec![e.ident.to_string()], Import::No, line);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if let Some(first) = p.segments.first() {
            let line = first.ident.span().start().line;
            let mut segments: Vec<String> =
                p.segments.iter().map(|s| s.ident.to_string()).collect();
            if p.leading_colon.is_some() {
                segments.insert(0, "::".to_owned());
            }
            self.push(segments, Import::No, line);
        }
        // Generic arguments hold paths of their own.
        visit::visit_path(self, p);
    }

    /// An attribute's arguments are tokens to syn: `#[derive(serde::Serialize)]` names a
    /// path all the same.
    fn visit_meta_list(&mut self, list: &'ast syn::MetaList) {
        self.visit_path(&list.path);
        self.tokens(list.tokens.clone());
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.visit_path(&m.path);
        self.tokens(m.tokens.clone());
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// Sources by path, as a [`Read`].
    pub fn files(list: &[(&str, &str)]) -> impl Fn(&Path) -> io::Result<String> {
        let map: BTreeMap<PathBuf, String> = list
            .iter()
            .map(|(p, t)| (PathBuf::from(p), (*t).to_owned()))
            .collect();
        move |p: &Path| {
            map.get(p)
                .cloned()
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
        }
    }

    fn refs_of(c: &Crate, module: &str) -> Vec<String> {
        let m = c
            .modules
            .iter()
            .find(|m| m.display(&c.name) == module)
            .unwrap();
        m.refs.iter().map(|r| r.segments.join("::")).collect()
    }

    #[test]
    fn modules_are_found_by_file_inline_and_path_attribute() {
        let read = files(&[
            (
                "src/lib.rs",
                "mod a; mod b { mod c; } #[path = \"other.rs\"] mod d;",
            ),
            ("src/a.rs", "mod e;"),
            ("src/a/e.rs", ""),
            ("src/b/c/mod.rs", ""),
            ("src/other.rs", ""),
        ]);
        let c = load("x", Path::new("src/lib.rs"), &read).unwrap();
        let names: Vec<String> = c.modules.iter().map(|m| m.display("x")).collect();
        assert_eq!(names, ["x", "x::a", "x::a::e", "x::b", "x::b::c", "x::d"]);
        let missing = load(
            "x",
            Path::new("src/lib.rs"),
            &files(&[("src/lib.rs", "mod z;")]),
        );
        assert!(missing.unwrap_err().contains("`mod z;` has no file"));
    }

    #[test]
    fn paths_are_read_from_bodies_macros_and_signatures() {
        let read = files(&[(
            "src/lib.rs",
            "use crate::a::{B, c as d, e::*};\n\
             fn f(x: crate::t::T) -> super::U {\n\
                 let y = self::g::h();\n\
                 println!(\"{}\", crate::m::n(::std::x::y()));\n\
                 macro_rules! m { ($f:ident) => { fmt::$f::n() } }\n\
                 y\n\
             }\n\
             #[cfg(test)] fn t() { crate::only::in_tests(); }",
        )]);
        let c = load("x", Path::new("src/lib.rs"), &read).unwrap();
        let refs = refs_of(&c, "x");
        for want in [
            "crate::a::B",
            "crate::a::c",
            "crate::a::e",
            "crate::t::T",
            "super::U",
            "self::g::h",
            "println",
            "crate::m::n",
            "::::std::x::y",
            "crate::only::in_tests",
            "fmt::$",
        ] {
            assert!(refs.contains(&want.to_owned()), "{want} in {refs:?}");
        }
        let r = &c.modules[0].refs;
        assert_eq!(r[1].import, Import::Name("d".into()));
        assert_eq!(r[2].import, Import::Glob);
        assert_eq!(r.iter().find(|r| r.segments[0] == "self").unwrap().line, 3);
        assert!(
            r.iter()
                .find(|r| r.segments.ends_with(&["in_tests".to_owned()]))
                .unwrap()
                .test
        );
        assert!(!r[0].test);
    }

    #[test]
    fn test_modules_and_cfg_all_test_are_marked() {
        let attrs = |a: &str| {
            syn::parse_str::<syn::ItemFn>(&format!("{a} fn f() {{}}"))
                .unwrap()
                .attrs
        };
        assert!(cfg_test(&attrs("#[cfg(test)]")));
        assert!(cfg_test(&attrs("#[cfg(all(feature = \"x\", test))]")));
        assert!(!cfg_test(&attrs("#[cfg(not(test))]")));
        assert!(!cfg_test(&attrs("#[cfg(any(test, feature = \"x\"))]")));
        assert!(!cfg_test(&attrs("#[cfg(feature = \"test\")]")));
        assert!(!cfg_test(&attrs("#[inline]")));
    }
}
