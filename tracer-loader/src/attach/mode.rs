//! How function probes are hooked ([`AttachMode`]), and which mode this kernel and caller
//! get (`effective_mode`).

use std::{fmt, str::FromStr};

use tracer_host::Preemption;

/// How function probes are hooked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AttachMode {
    /// fentry/fexit where the kernel allows it (checked by a trial attach), else kprobes.
    #[default]
    Auto,
    /// kprobe/kretprobe only.
    Kprobe,
    /// fentry/fexit only (BPF trampolines; Linux >= 5.5 with BTF).
    Fentry,
}

impl AttachMode {
    /// Every mode, in the order `--attach` lists them.
    pub const ALL: [AttachMode; 3] = [AttachMode::Auto, AttachMode::Kprobe, AttachMode::Fentry];

    /// Its name, as `--attach` takes it.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            AttachMode::Auto => "auto",
            AttachMode::Kprobe => "kprobe",
            AttachMode::Fentry => "fentry",
        }
    }

    /// What it does, in a line (`--attach`'s help says it beside the name).
    #[must_use]
    pub const fn help(self) -> &'static str {
        match self {
            AttachMode::Auto => {
                "fentry/fexit where the kernel allows it (checked by a trial attach), else kprobes"
            }
            AttachMode::Kprobe => "kprobe/kretprobe only",
            AttachMode::Fentry => "fentry/fexit only (BPF trampolines; Linux >= 5.5 with BTF)",
        }
    }
}

impl fmt::Display for AttachMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no [`AttachMode`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown attach mode {0:?} (one of auto, kprobe, fentry)")]
pub struct UnknownMode(pub String);

impl FromStr for AttachMode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        AttachMode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| UnknownMode(s.to_owned()))
    }
}

/// When the caller reads the maps while the probes record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapReads {
    /// Once, at the end (`tracer capture`).
    AtEnd,
    /// Every interval (`tracer serve`, `tracer top`).
    EveryInterval,
}

/// The attach mode to use for `wanted` on this kernel, whose maps are read as `reads` says.
///
/// Where the kernel preempts kernel code, each mode has a way to have runs skipped, each
/// counted by the kernel and reported as `program_misses`:
/// - an fentry program preempted mid-run makes the kernel skip that program's next run on
///   its CPU (seen: 2 of 322 calls, three rmdir loops at once on 2 CPUs on 7.3);
/// - a kprobe program is skipped while any BPF program or `bpf()` map operation holds the
///   CPU's BPF guard (`bpf_prog_active`), and a map operation preempted mid-way holds it
///   for as long as its task waits: a reader of the maps every interval makes that happen
///   (seen on 7.3: 67 of 7,995 calls per probe lost by kprobes under `tracer serve` over
///   2,000 cgroups, none by fentry).
///
/// So `auto` takes kprobes there for a capture, which reads the maps once at its end, and
/// fentry for the live views; elsewhere fentry. An explicit mode is kept, with a warning
/// where it can miss calls.
pub(super) fn effective_mode(
    wanted: AttachMode,
    preemption: &Preemption,
    kprobes: bool,
    reads: MapReads,
    warnings: &mut Vec<String>,
) -> AttachMode {
    let model = preemption.model.as_deref().unwrap_or("unknown");
    if !preemption.preempts_programs() {
        return wanted;
    }
    match (wanted, reads) {
        (AttachMode::Auto, MapReads::AtEnd) if kprobes => {
            log::info!(
                "attaching kprobes, not fentry: this kernel preempts kernel code ({model} \
                 preemption, from {}), and a preempted fentry program makes the kernel skip \
                 its next run on that CPU",
                preemption.source
            );
            AttachMode::Kprobe
        }
        (AttachMode::Auto, MapReads::EveryInterval) if kprobes => {
            log::info!(
                "attaching fentry, not kprobes: this kernel preempts kernel code ({model} \
                 preemption, from {}), and the maps are read every interval: a kprobe \
                 program is skipped while a map operation on its CPU is preempted",
                preemption.source
            );
            AttachMode::Auto
        }
        (AttachMode::Fentry, _) => {
            warnings.push(format!(
                "fentry on a kernel that preempts kernel code ({model} preemption): a \
                 preempted program makes the kernel skip its next run on that CPU, so \
                 concurrent calls can be missed; they are counted as the loss \
                 program_misses{}",
                if reads == MapReads::AtEnd {
                    " (--attach kprobe misses none of them in a capture)"
                } else {
                    ""
                }
            ));
            AttachMode::Fentry
        }
        (AttachMode::Kprobe, MapReads::EveryInterval) => {
            warnings.push(format!(
                "kprobes on a kernel that preempts kernel code ({model} preemption), with the \
                 maps read every interval: a kprobe program is skipped while a map operation \
                 on its CPU is preempted, so calls can be missed; they are counted as the \
                 loss program_misses (the default attach, fentry here, missed fewer)"
            ));
            AttachMode::Kprobe
        }
        (other, _) => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracer_host::kernel_version;

    #[test]
    fn auto_takes_kprobes_where_programs_are_preempted_unless_the_maps_are_read_live() {
        let p = |m: Option<&str>| Preemption {
            model: m.map(str::to_owned),
            source: "test",
        };
        let (end, live) = (MapReads::AtEnd, MapReads::EveryInterval);
        let mut w = Vec::new();
        for model in ["lazy", "full", "rt"] {
            assert_eq!(
                effective_mode(AttachMode::Auto, &p(Some(model)), true, end, &mut w),
                AttachMode::Kprobe
            );
            // A live view reads the maps all along: a preempted read would skip kprobes.
            assert_eq!(
                effective_mode(AttachMode::Auto, &p(Some(model)), true, live, &mut w),
                AttachMode::Auto
            );
        }
        assert!(w.is_empty());
        for model in [Some("voluntary"), Some("none"), None] {
            for reads in [end, live] {
                assert_eq!(
                    effective_mode(AttachMode::Auto, &p(model), true, reads, &mut w),
                    AttachMode::Auto
                );
                assert_eq!(
                    effective_mode(AttachMode::Kprobe, &p(model), true, reads, &mut w),
                    AttachMode::Kprobe
                );
            }
        }
        assert!(w.is_empty(), "{w:?}");
        // Without kprobes, auto keeps trying fentry.
        for reads in [end, live] {
            assert_eq!(
                effective_mode(AttachMode::Auto, &p(Some("lazy")), false, reads, &mut w),
                AttachMode::Auto
            );
        }
        // Asked for, fentry stays, and the user is told what it can miss.
        assert_eq!(
            effective_mode(AttachMode::Fentry, &p(Some("lazy")), true, end, &mut w),
            AttachMode::Fentry
        );
        assert!(w.len() == 1 && w[0].contains("program_misses"), "{w:?}");
        // So do kprobes under a live view.
        assert_eq!(
            effective_mode(AttachMode::Kprobe, &p(Some("lazy")), true, live, &mut w),
            AttachMode::Kprobe
        );
        assert!(w.len() == 2 && w[1].contains("map operation"), "{w:?}");
        assert_eq!(kernel_version("7.3.4+deb13-cloud-amd64"), Some((7, 3)));
        assert_eq!(kernel_version("5.10.0-46-cloud-amd64"), Some((5, 10)));
    }

    #[test]
    fn each_mode_is_parsed_from_its_name() {
        for mode in AttachMode::ALL {
            assert_eq!(mode.to_string().parse(), Ok(mode));
        }
        assert_eq!(
            AttachMode::ALL.map(AttachMode::name),
            ["auto", "kprobe", "fentry"]
        );
        assert_eq!(
            "Kprobe".parse::<AttachMode>(),
            Err(UnknownMode("Kprobe".to_owned()))
        );
    }
}
