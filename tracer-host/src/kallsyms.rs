//! Finds the symbol to attach a probe to in `/proc/kallsyms`.
//!
//! The compiler may rename a static function (`namespace_unlock.isra.0`) or leave only
//! clones (`*.constprop.N`); a name may also exist several times. Like libbpf-tools, prefer
//! the exact name, else a single suffixed clone.

/// Where a probe can attach on this kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// The exact symbol exists once.
    Exact(String),
    /// Only a compiler clone exists (`name.isra.0`, `name.constprop.0`, ...): attach to it.
    Clone(String),
    /// The kernel has no such function.
    Absent,
    /// The name exists several times (distinct static functions): a kprobe by name would
    /// hit only one, so none is chosen.
    Ambiguous(usize),
}

/// The text symbols of a kernel, sorted by name (a name occurs as often as the kernel has
/// functions of that name), with the address of each.
///
/// A kernel has 100,000 to 200,000 of them, and they are read at every start: they are kept
/// as one string of names and a sorted index into it, so reading them costs a sort. Two
/// maps of owned names (two allocations and two tree insertions a symbol) took a second and
/// a half of tracer's start in a small VM under emulation.
#[derive(Debug, Default)]
pub struct Kallsyms {
    /// The names, one after another.
    names: String,
    /// Each text symbol, by name.
    symbols: Vec<Symbol>,
}

#[derive(Debug, Clone, Copy)]
struct Symbol {
    /// Where the name is in `names`.
    start: u32,
    end: u32,
    address: u64,
}

impl Kallsyms {
    /// Read the running kernel's `/proc/kallsyms`.
    ///
    /// # Errors
    /// When the file cannot be read.
    pub fn read() -> std::io::Result<Self> {
        Ok(Self::parse(&std::fs::read_to_string("/proc/kallsyms")?))
    }

    /// Parse kallsyms text: `ADDRESS TYPE NAME [MODULE]` lines; only text (`t`/`T`) symbols
    /// are kept, and `__pfx_` padding symbols (Linux >= 6.2) are skipped.
    #[must_use]
    pub fn parse(text: &str) -> Self {
        let mut names = String::with_capacity(text.len() / 2);
        let mut symbols = Vec::with_capacity(text.len() / 40);
        for line in text.lines() {
            let mut fields = line.split_ascii_whitespace();
            let (Some(addr), Some(kind), Some(name)) =
                (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            if !matches!(kind, "t" | "T") || name.starts_with("__pfx_") {
                continue;
            }
            let (Ok(start), Ok(end)) = (
                u32::try_from(names.len()),
                u32::try_from(names.len() + name.len()),
            ) else {
                break; // 4 GiB of names: no kernel has them
            };
            names.push_str(name);
            symbols.push(Symbol {
                start,
                end,
                address: u64::from_str_radix(addr, 16).unwrap_or(0),
            });
        }
        let mut k = Self { names, symbols };
        let mut symbols = std::mem::take(&mut k.symbols);
        symbols.sort_unstable_by(|a, b| k.name(a).cmp(k.name(b)));
        k.symbols = symbols;
        k
    }

    fn name(&self, s: &Symbol) -> &str {
        &self.names[s.start as usize..s.end as usize]
    }

    /// The symbols named `name`.
    fn named(&self, name: &str) -> &[Symbol] {
        let from = self.symbols.partition_point(|s| self.name(s) < name);
        let len = self.symbols[from..].partition_point(|s| self.name(s) == name);
        &self.symbols[from..from + len]
    }

    /// Each name that begins with `prefix`, with how often it occurs, in order.
    fn names_from<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = (&'a str, usize)> + 'a {
        let from = self.symbols.partition_point(|s| self.name(s) < prefix);
        let mut rest = self.symbols[from..]
            .iter()
            .map(|s| self.name(s))
            .take_while(move |n| n.starts_with(prefix))
            .peekable();
        std::iter::from_fn(move || {
            let name = rest.next()?;
            let mut count = 1;
            while rest.next_if(|n| *n == name).is_some() {
                count += 1;
            }
            Some((name, count))
        })
    }

    /// Whether the text has any symbols at all.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }

    /// Where to attach for a function whose body the compiler may split off into
    /// `name.part.N` (partial inlining): that clone when it exists once, else as
    /// [`Kallsyms::resolve`]. Callers in the function's own file can inline the split-off
    /// head and call the clone directly, bypassing `name` (Debian's 5.10: `do_rmdir` calls
    /// `vfs_rmdir.part.0`), so only the clone sees every call that gets past the head.
    #[must_use]
    pub fn resolve_split(&self, name: &str) -> Resolution {
        let prefix = format!("{name}.part.");
        let parts: Vec<&str> = self
            .names_from(&prefix)
            .filter(|(k, n)| *n == 1 && k[prefix.len()..].bytes().all(|b| b.is_ascii_digit()))
            .map(|(k, _)| k)
            .collect();
        match parts.as_slice() {
            [one] => Resolution::Clone((*one).to_owned()),
            _ => self.resolve(name),
        }
    }

    /// Whether the kernel has the text symbol `name` (exactly that name).
    #[must_use]
    pub fn has(&self, name: &str) -> bool {
        !self.named(name).is_empty()
    }

    /// The address of the text symbol `name`, when it exists exactly once and the kernel
    /// shows addresses (`kernel.kptr_restrict` shows zeros to those it hides them from).
    #[must_use]
    pub fn address(&self, name: &str) -> Option<u64> {
        match self.named(name) {
            [one] => Some(one.address).filter(|a| *a != 0),
            _ => None,
        }
    }

    /// Whether the kernel showed this process any address (it shows zeros to a reader it
    /// hides them from: see [`why_hidden`]).
    #[must_use]
    pub fn shows_addresses(&self) -> bool {
        self.symbols.iter().any(|s| s.address != 0)
    }

    /// Where to attach for the function `name`.
    #[must_use]
    pub fn resolve(&self, name: &str) -> Resolution {
        match self.named(name).len() {
            0 => {}
            1 => return Resolution::Exact(name.to_owned()),
            n => return Resolution::Ambiguous(n),
        }
        let prefix = format!("{name}.");
        let clones: Vec<&str> = self
            .names_from(&prefix)
            .filter(|(k, n)| *n == 1 && is_clone_suffix(&k[prefix.len()..]))
            .map(|(k, _)| k)
            .collect();
        match clones.as_slice() {
            [] => Resolution::Absent,
            [one] => Resolution::Clone((*one).to_owned()),
            many => Resolution::Ambiguous(many.len()),
        }
    }
}

/// Why the kernel shows a reader without `CAP_SYSLOG` no address, from
/// `kernel.kptr_restrict` and `kernel.perf_event_paranoid` (None: unreadable), as its
/// `kallsyms_show_value` decides (`kernel/ksyms_common.c`): at `kptr_restrict` 0 every
/// reader sees them while `perf_event_paranoid` is at most 1, else only one holding
/// `CAP_SYSLOG` does; at 1 only one holding `CAP_SYSLOG`; at 2 none. Capabilities are those
/// of the process that opened `/proc/kallsyms`.
#[must_use]
pub fn why_hidden(kptr_restrict: Option<i32>, paranoid: Option<i32>) -> String {
    const GRANT: &str = "grant tracer CAP_SYSLOG (the systemd unit and the DaemonSet of deploy/ \
                         do; it is dropped with the others once the probes are attached)";
    match (kptr_restrict, paranoid) {
        (Some(k), _) if k >= 2 => format!(
            "kernel.kptr_restrict is {k}, under which the kernel shows kernel addresses to no \
             process; at 1 it shows them to a process holding CAP_SYSLOG"
        ),
        (Some(1), _) => format!(
            "kernel.kptr_restrict is 1, under which the kernel shows kernel addresses only to \
             a process holding CAP_SYSLOG: {GRANT}"
        ),
        (_, Some(p)) if p > 1 => format!(
            "kernel.perf_event_paranoid is {p}, above 1, under which the kernel shows kernel \
             addresses only to a process holding CAP_SYSLOG: {GRANT}"
        ),
        _ => format!(
            "the kernel shows kernel addresses only to a process holding CAP_SYSLOG: {GRANT}"
        ),
    }
}

/// [`why_hidden`] on this host's settings.
#[must_use]
pub fn why_hidden_here() -> String {
    let read = |name: &str| {
        std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    why_hidden(read("kptr_restrict"), read("perf_event_paranoid"))
}

/// `isra.0`, `constprop.0`, `part.0`, `cold` and their combinations.
fn is_clone_suffix(s: &str) -> bool {
    s.split('.').all(|part| {
        matches!(part, "isra" | "constprop" | "part" | "cold" | "lto_priv")
            || (!part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
ffffffff81000000 T _stext
ffffffff81200000 t __pfx_namespace_unlock
ffffffff81200010 t namespace_unlock
ffffffff81300000 T synchronize_srcu
ffffffff81400000 t shrink_dcache_parent.constprop.0
ffffffff81500000 t dup_static
ffffffff81600000 t dup_static
ffffffff81700000 T vfs_rmdir
ffffffff81700100 t vfs_rmdirx
ffffffff81800000 d synchronize_rcu_data
ffffffffc0000000 t loop_configure\t[loop]
";

    #[test]
    fn resolves_exact_clone_absent_and_ambiguous() {
        let k = Kallsyms::parse(SAMPLE);
        assert_eq!(
            k.resolve("namespace_unlock"),
            Resolution::Exact("namespace_unlock".into())
        );
        assert_eq!(
            k.resolve("synchronize_srcu"),
            Resolution::Exact("synchronize_srcu".into())
        );
        assert_eq!(
            k.resolve("shrink_dcache_parent"),
            Resolution::Clone("shrink_dcache_parent.constprop.0".into())
        );
        assert_eq!(k.resolve("unregister_shrinker"), Resolution::Absent);
        assert_eq!(k.resolve("dup_static"), Resolution::Ambiguous(2));
        assert_eq!(
            k.resolve("vfs_rmdir"),
            Resolution::Exact("vfs_rmdir".into())
        );
        // Data symbols are not functions.
        assert_eq!(k.resolve("synchronize_rcu_data"), Resolution::Absent);
        // Module symbols count too.
        assert_eq!(
            k.resolve("loop_configure"),
            Resolution::Exact("loop_configure".into())
        );
    }

    #[test]
    fn split_functions_resolve_to_their_part_clone() {
        // Debian's 5.10: the exported vfs_rmdir checks, then jumps to vfs_rmdir.part.0, which
        // do_rmdir calls directly.
        let k = Kallsyms::parse(
            "ffffffff812d5950 t vfs_rmdir.part.0\nffffffff812d75b0 T vfs_rmdir\n\
             ffffffff812d7600 T d_delete\nffffffff81300000 t two.part.0\n\
             ffffffff81300100 t two.part.1\nffffffff81300200 T two\n",
        );
        assert_eq!(
            k.resolve_split("vfs_rmdir"),
            Resolution::Clone("vfs_rmdir.part.0".into())
        );
        assert_eq!(
            k.resolve("vfs_rmdir"),
            Resolution::Exact("vfs_rmdir".into())
        );
        // No part clone: the function itself; two of them: no telling which, the function.
        assert_eq!(
            k.resolve_split("d_delete"),
            Resolution::Exact("d_delete".into())
        );
        assert_eq!(k.resolve_split("two"), Resolution::Exact("two".into()));
        assert_eq!(k.resolve_split("absent"), Resolution::Absent);
    }

    #[test]
    fn addresses_only_of_names_seen_once_and_shown() {
        let k = Kallsyms::parse(SAMPLE);
        assert_eq!(k.address("namespace_unlock"), Some(0xffff_ffff_8120_0010));
        assert_eq!(k.address("vfs_rmdir"), Some(0xffff_ffff_8170_0000));
        assert_eq!(k.address("dup_static"), None, "two functions of the name");
        assert_eq!(k.address("synchronize_rcu_data"), None, "not text");
        assert_eq!(k.address("__pfx_namespace_unlock"), None);
        let hidden = Kallsyms::parse("0000000000000000 T vfs_rmdir\n");
        assert!(hidden.has("vfs_rmdir"));
        assert_eq!(hidden.address("vfs_rmdir"), None, "addresses hidden");
    }

    #[test]
    fn hidden_addresses_are_explained_as_the_kernel_decides() {
        assert!(Kallsyms::parse(SAMPLE).shows_addresses());
        assert!(!Kallsyms::parse("0000000000000000 T vfs_rmdir\n").shows_addresses());
        // Debian's default: kptr_restrict 0, perf_event_paranoid 3 (2 with 99-tracer.conf).
        let paranoid = why_hidden(Some(0), Some(2));
        assert!(
            paranoid.contains("perf_event_paranoid is 2") && paranoid.contains("CAP_SYSLOG"),
            "{paranoid}"
        );
        let restricted = why_hidden(Some(1), Some(-1));
        assert!(
            restricted.contains("kptr_restrict is 1")
                && restricted.contains("grant tracer CAP_SYSLOG"),
            "{restricted}"
        );
        // At 2 no capability helps: it says so rather than advise one.
        let none = why_hidden(Some(2), Some(2));
        assert!(
            none.contains("to no process") && !none.contains("grant"),
            "{none}"
        );
        assert!(why_hidden(None, None).contains("CAP_SYSLOG"));
    }

    #[test]
    fn names_are_found_whatever_order_the_kernel_lists_them_in() {
        // The kernel lists symbols by address: the same name far apart, clones before
        // their function, module symbols last.
        let k = Kallsyms::parse(
            "ffffffff81000300 t dup_static\nffffffff81000100 T zz_last\n\
             ffffffff81000200 t namespace_unlock.isra.0\nffffffff81000400 t aa_first\n\
             ffffffff81000500 t dup_static\nffffffffc0000000 t dup_static\t[loop]\n",
        );
        assert_eq!(k.resolve("dup_static"), Resolution::Ambiguous(3));
        assert_eq!(k.address("dup_static"), None);
        assert_eq!(
            k.resolve("namespace_unlock"),
            Resolution::Clone("namespace_unlock.isra.0".into())
        );
        assert_eq!(k.address("aa_first"), Some(0xffff_ffff_8100_0400));
        assert_eq!(k.address("zz_last"), Some(0xffff_ffff_8100_0100));
        assert!(!k.has("namespace_unlock") && !k.has("aa") && !k.has("zz_last_"));
    }

    #[test]
    fn clone_suffixes() {
        assert!(is_clone_suffix("isra.0"));
        assert!(is_clone_suffix("constprop.0.isra.0"));
        assert!(!is_clone_suffix("x"));
        assert!(!is_clone_suffix(""));
    }
}
