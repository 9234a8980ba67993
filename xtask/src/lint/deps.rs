//! No dependency in a Cargo.toml that the code it is for never names.
//!
//! A dependency is named where a path starts with its crate name (a `use`, a qualified
//! path, an attribute such as `#[tokio::main]`, `extern crate`, a macro's arguments): the
//! package name with `-` as `_`, or its `package = ` rename. What counts as its code goes by
//! the table it is declared in:
//!
//! - `[dependencies]`: the lib and bin targets, test code (`#[cfg(test)]`) left out; a
//!   dependency only tests name belongs in `[dev-dependencies]`.
//! - `[dev-dependencies]`: the test, bench and example targets, and the lib's and bins'
//!   `#[cfg(test)]` code.
//! - `[build-dependencies]`: the build script.
//!
//! Nothing is compiled, so the kernel crate, which builds only for BPF, is read like the
//! rest; a dependency named only in a doc test counts as unused.
//!
//! Also: no package depends on what [`FORBIDDEN`] keeps it from, directly or through
//! another member of the workspace.

use std::{collections::BTreeSet, path::Path};

/// Dependencies declared for what they make cargo do, not to be named: (package,
/// dependency, why).
const UNNAMED: [(&str, &str, &str); 1] = [(
    "tracer-loader",
    "tracer-ebpf",
    "a build-dependency so that cargo rebuilds the loader when the kernel programs change; \
     its build script builds them, nothing links them",
)];

/// Dependencies a package must not have, directly or through a workspace member:
/// (package, dependency, why).
pub const FORBIDDEN: [(&str, &str, &str); 1] = [(
    "xtask",
    "tracer-loader",
    "its build script builds the kernel programs, with nightly and bpf-linker; xtask needs \
     the host's facts alone, which tracer-host has",
)];

use super::source::{self, Read};
use crate::testing::harness::{Verdict, wrong};

/// One package, as `cargo metadata` describes it.
#[derive(Debug)]
pub struct Package {
    pub name: String,
    pub dependencies: Vec<Dependency>,
    pub targets: Vec<Target>,
}

/// A dependency a package declares.
#[derive(Debug)]
pub struct Dependency {
    /// What its Cargo.toml calls it (the rename, where there is one).
    pub name: String,
    /// The package it is, whatever its Cargo.toml calls it.
    pub package: String,
    pub kind: Kind,
}

/// The table a dependency is declared in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Normal,
    Dev,
    Build,
}

/// A target of a package and its root file.
#[derive(Debug)]
pub struct Target {
    pub name: String,
    /// `lib`, `proc-macro`, `bin`, `test`, `bench`, `example` or `custom-build`.
    pub kind: String,
    pub root: std::path::PathBuf,
}

/// The crate names each kind of dependency may be named by, from the package's code.
#[derive(Debug, Default)]
struct Named {
    normal: BTreeSet<String>,
    dev: BTreeSet<String>,
    build: BTreeSet<String>,
}

/// The package's verdict: every dependency named by its code, or which ones are not.
pub fn unused(package: &Package, read: Read<'_>) -> Verdict {
    let named = named(package, read)?;
    let mut unused = Vec::new();
    for d in &package.dependencies {
        let crate_name = d.name.replace('-', "_");
        let used = match d.kind {
            Kind::Normal => named.normal.contains(&crate_name),
            Kind::Dev => named.dev.contains(&crate_name),
            Kind::Build => named.build.contains(&crate_name),
        };
        let declared_for_cargo = UNNAMED
            .iter()
            .any(|(p, dep, _)| *p == package.name && *dep == d.name);
        if used || declared_for_cargo {
            continue;
        }
        unused.push(match d.kind {
            Kind::Normal if named.dev.contains(&crate_name) => {
                format!("{} (named only by tests: a dev-dependency)", d.name)
            }
            Kind::Normal => d.name.clone(),
            Kind::Dev => format!("{} (dev)", d.name),
            Kind::Build => format!("{} (build)", d.name),
        });
    }
    if unused.is_empty() {
        Ok(format!(
            "{} dependencies, each named by the code it is for",
            package.dependencies.len()
        ))
    } else {
        Err(wrong!(
            "declared in Cargo.toml, named by no code of {}: {}",
            package.name,
            unused.join(", ")
        ))
    }
}

/// The verdict of each [`FORBIDDEN`] rule for `package`: (what it checks, verdict). The
/// dependencies of `members` (the workspace's packages) are followed, but for their
/// dev-dependencies, which a dependent never builds.
pub fn forbidden(package: &Package, members: &[Package]) -> Vec<(String, Verdict)> {
    FORBIDDEN
        .iter()
        .filter(|(p, _, _)| *p == package.name)
        .map(|(_, banned, why)| {
            let what = format!("{} does not depend on {banned}", package.name);
            let verdict = match path_to(package, banned, members) {
                None => Ok(format!("{banned} is not among its dependencies")),
                Some(path) => Err(wrong!(
                    "{} depends on {banned} ({}): {why}",
                    package.name,
                    path.join(" -> ")
                )),
            };
            (what, verdict)
        })
        .collect()
}

/// The packages from `from` to `to`, both included, when `from` depends on `to`.
fn path_to(from: &Package, to: &str, members: &[Package]) -> Option<Vec<String>> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![(from, vec![from.name.clone()])];
    while let Some((p, path)) = stack.pop() {
        // The package's own dev-dependencies count (its tests build them); a dependency's
        // do not.
        let own = std::ptr::eq(p, from);
        for d in p.dependencies.iter().filter(|d| own || d.kind != Kind::Dev) {
            let mut next = path.clone();
            next.push(d.package.clone());
            if d.package == to {
                return Some(next);
            }
            if let Some(m) = members.iter().find(|m| m.name == d.package)
                && seen.insert(m.name.clone())
            {
                stack.push((m, next));
            }
        }
    }
    None
}

/// The first segments of every path the package's targets name, by who may use them.
fn named(package: &Package, read: Read<'_>) -> Result<Named, String> {
    let mut named = Named::default();
    for t in &package.targets {
        let c = source::load(&t.name.replace('-', "_"), &t.root, read)?;
        for m in &c.modules {
            for r in &m.refs {
                // `::name::...` names an extern crate explicitly.
                let first = match r.segments.first().map(String::as_str) {
                    Some("::") => r.segments.get(1),
                    _ => r.segments.first(),
                };
                let Some(first) = first.cloned() else {
                    continue;
                };
                let test = m.test || r.test;
                match t.kind.as_str() {
                    "lib" | "proc-macro" | "bin" if test => named.dev.insert(first),
                    "lib" | "proc-macro" | "bin" => named.normal.insert(first),
                    "custom-build" => named.build.insert(first),
                    _ => named.dev.insert(first),
                };
            }
        }
    }
    Ok(named)
}

/// The packages of `cargo metadata --no-deps` JSON.
///
/// # Errors
/// JSON that is not cargo's.
pub fn packages(metadata: &serde_json::Value) -> Result<Vec<Package>, String> {
    let str_of = |v: &serde_json::Value, what: &str| {
        v.as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("cargo metadata: no {what}"))
    };
    let mut out = Vec::new();
    for p in metadata["packages"].as_array().into_iter().flatten() {
        let mut dependencies = Vec::new();
        for d in p["dependencies"].as_array().into_iter().flatten() {
            let package = str_of(&d["name"], "dependency name")?;
            let name = d["rename"]
                .as_str()
                .map_or_else(|| package.clone(), str::to_owned);
            let kind = match d["kind"].as_str() {
                Some("dev") => Kind::Dev,
                Some("build") => Kind::Build,
                _ => Kind::Normal,
            };
            dependencies.push(Dependency {
                name,
                package,
                kind,
            });
        }
        let mut targets = Vec::new();
        for t in p["targets"].as_array().into_iter().flatten() {
            let kind = t["kind"]
                .as_array()
                .and_then(|k| k.first())
                .map_or_else(|| Ok(String::new()), |k| str_of(k, "target kind"))?;
            targets.push(Target {
                name: str_of(&t["name"], "target name")?,
                kind,
                root: Path::new(&str_of(&t["src_path"], "target src_path")?).to_path_buf(),
            });
        }
        out.push(Package {
            name: str_of(&p["name"], "package name")?,
            dependencies,
            targets,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{super::source::tests::files, *};
    use crate::testing::harness::Fail;

    fn package(deps: &[(&str, Kind)]) -> Package {
        let target = |name: &str, kind: &str, root: &str| Target {
            name: name.into(),
            kind: kind.into(),
            root: root.into(),
        };
        Package {
            name: "p".into(),
            dependencies: deps
                .iter()
                .map(|(n, k)| Dependency {
                    name: (*n).into(),
                    package: (*n).into(),
                    kind: *k,
                })
                .collect(),
            targets: vec![
                target("p", "lib", "src/lib.rs"),
                target("p", "bin", "src/main.rs"),
                target("it", "test", "tests/it.rs"),
                target("build-script-build", "custom-build", "build.rs"),
            ],
        }
    }

    #[test]
    fn each_kind_of_dependency_is_looked_for_in_its_own_code() {
        let read = files(&[
            (
                "src/lib.rs",
                "use anyhow::Context;\n#[derive(serde::Serialize)] struct S;\n\
                 fn f() { println!(\"{}\", ::base64::x()); }\n\
                 #[cfg(test)] mod tests { use proptest::prelude::*; fn t() { only_tests::x(); } }",
            ),
            (
                "src/main.rs",
                "#[tokio::main] async fn main() { tracer_core::run(); }",
            ),
            ("tests/it.rs", "fn t() { prost::Message::x(); }"),
            ("build.rs", "fn main() { aya_build::build(); }"),
        ]);
        let used = package(&[
            ("anyhow", Kind::Normal),
            ("serde", Kind::Normal),
            ("base64", Kind::Normal),
            ("tokio", Kind::Normal),
            ("tracer-core", Kind::Normal),
            ("proptest", Kind::Dev),
            ("prost", Kind::Dev),
            ("aya-build", Kind::Build),
        ]);
        assert_eq!(
            unused(&used, &read),
            Ok("8 dependencies, each named by the code it is for".to_owned())
        );
        let unused_ones = package(&[
            ("anyhow", Kind::Normal),
            ("rand", Kind::Normal),
            ("only-tests", Kind::Normal),
            ("anyhow", Kind::Build),
            ("criterion", Kind::Dev),
        ]);
        assert_eq!(
            unused(&unused_ones, &read).unwrap_err(),
            Fail::from(
                "declared in Cargo.toml, named by no code of p: rand, only-tests (named only by \
             tests: a dev-dependency), anyhow (build), criterion (dev)"
            )
        );
    }

    #[test]
    fn the_kernel_programs_build_dependency_is_declared_for_cargo_alone() {
        let mut p = package(&[("tracer-ebpf", Kind::Build)]);
        let read = files(&[
            ("src/lib.rs", ""),
            ("src/main.rs", ""),
            ("tests/it.rs", ""),
            ("build.rs", ""),
        ]);
        assert!(
            unused(&p, &read)
                .unwrap_err()
                .to_string()
                .contains("tracer-ebpf (build)")
        );
        p.name = "tracer-loader".into();
        assert!(unused(&p, &read).is_ok());
    }

    #[test]
    fn metadata_gives_renames_kinds_and_targets() {
        let metadata: serde_json::Value = serde_json::from_str(
            r#"{"packages":[{"name":"tracer","dependencies":[
                {"name":"aya","rename":null,"kind":null},
                {"name":"proptest","rename":null,"kind":"dev"},
                {"name":"aya-build","rename":"ab","kind":"build"}],
              "targets":[{"kind":["lib"],"name":"tracer","src_path":"/w/tracer/src/lib.rs"}]}]}"#,
        )
        .unwrap();
        let p = packages(&metadata).unwrap();
        let deps: Vec<(&str, Kind)> = p[0]
            .dependencies
            .iter()
            .map(|d| (d.name.as_str(), d.kind))
            .collect();
        assert_eq!(
            deps,
            [
                ("aya", Kind::Normal),
                ("proptest", Kind::Dev),
                ("ab", Kind::Build)
            ]
        );
        // A rename still says which package it is.
        assert_eq!(p[0].dependencies[2].package, "aya-build");
        assert_eq!(p[0].targets[0].root, Path::new("/w/tracer/src/lib.rs"));
    }

    /// A dependency as a manifest declares it: its package, its rename, its table's kind.
    type Declared<'a> = (&'a str, Option<&'a str>, Option<&'a str>);

    /// `cargo metadata --no-deps` of packages with these dependencies: (name, dependencies).
    fn members(manifests: &[(&str, &[Declared])]) -> Vec<Package> {
        let packages: Vec<serde_json::Value> = manifests
            .iter()
            .map(|(name, deps)| {
                let deps: Vec<serde_json::Value> = deps
                    .iter()
                    .map(|(d, rename, kind)| {
                        serde_json::json!({"name": d, "rename": rename, "kind": kind})
                    })
                    .collect();
                serde_json::json!({"name": name, "dependencies": deps, "targets": []})
            })
            .collect();
        packages_of(&serde_json::json!({ "packages": packages }))
    }

    fn packages_of(metadata: &serde_json::Value) -> Vec<Package> {
        packages(metadata).unwrap()
    }

    /// The verdict for xtask among `members`.
    fn xtask_verdict(members: &[Package]) -> Verdict {
        let xtask = members.iter().find(|p| p.name == "xtask").unwrap();
        let mut verdicts = forbidden(xtask, members);
        assert_eq!(verdicts.len(), 1);
        let (what, verdict) = verdicts.remove(0);
        assert_eq!(what, "xtask does not depend on tracer-loader");
        verdict
    }

    #[test]
    fn xtask_naming_the_loader_fails_directly_renamed_or_through_a_member() {
        let host: (&str, &[_]) = ("tracer-host", &[("tracer-core", None, None)]);
        let loader: (&str, &[_]) = ("tracer-loader", &[("tracer-host", None, None)]);
        // Today's: the host facts alone.
        let fine = members(&[
            (
                "xtask",
                &[("tracer-host", None, None), ("anyhow", None, None)],
            ),
            host,
            loader,
        ]);
        assert_eq!(
            xtask_verdict(&fine),
            Ok("tracer-loader is not among its dependencies".to_owned())
        );
        // `tracer-loader = { workspace = true }` in xtask's [dependencies].
        let direct = members(&[("xtask", &[("tracer-loader", None, None)]), host, loader]);
        let said = xtask_verdict(&direct).unwrap_err();
        assert!(
            said.to_string()
                .starts_with("xtask depends on tracer-loader (xtask -> tracer-loader): "),
            "{said}"
        );
        assert!(
            said.to_string().contains("builds the kernel programs"),
            "{said}"
        );
        // `loader = { package = "tracer-loader", ... }`, and in [build-dependencies].
        let renamed = members(&[
            ("xtask", &[("tracer-loader", Some("loader"), Some("build"))]),
            loader,
        ]);
        assert!(xtask_verdict(&renamed).is_err());
        // Through the tracer crate, which depends on the loader.
        let through = members(&[
            ("xtask", &[("tracer", None, None)]),
            (
                "tracer",
                &[("tracer-host", None, None), ("tracer-loader", None, None)],
            ),
            host,
            loader,
        ]);
        assert_eq!(
            xtask_verdict(&through)
                .unwrap_err()
                .to_string()
                .split(": ")
                .next(),
            Some("xtask depends on tracer-loader (xtask -> tracer -> tracer-loader)")
        );
        // xtask's own tests would build it; a member's tests are not built for xtask.
        let own_tests = members(&[("xtask", &[("tracer-loader", None, Some("dev"))]), loader]);
        assert!(xtask_verdict(&own_tests).is_err());
        let members_tests = members(&[
            ("xtask", &[("tracer-core", None, None)]),
            ("tracer-core", &[("tracer-loader", None, Some("dev"))]),
            loader,
        ]);
        assert!(xtask_verdict(&members_tests).is_ok());
        // Other packages have no such rule.
        assert!(forbidden(&direct[1], &direct).is_empty());
    }
}
