//! The architectures tracer is built for and the VMs boot, and what QEMU, Debian and the
//! guest call each (the build's own names for them, its target triples, are in
//! `tracer_build`).

/// An architecture tracer is built for, and the test kernels of it boot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Arch {
    /// amd64: built on the stable toolchain; QEMU's `pc` machine.
    #[default]
    #[value(name = "x86_64", alias = "amd64")]
    X86_64,
    /// arm64: cross-built on the nightly toolchain with `-Zbuild-std`; QEMU's `virt`
    /// machine, `-cpu max` with the cheap pointer-authentication cipher.
    #[value(name = "aarch64", alias = "arm64")]
    Aarch64,
}

/// Every architecture, amd64 first.
pub const ARCHES: [Arch; 2] = [Arch::X86_64, Arch::Aarch64];

impl Arch {
    /// What `--arch` takes: `x86_64`, `aarch64`.
    pub const fn name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Aarch64 => "aarch64",
        }
    }

    /// Debian's name, in package names and `uname -r` (`linux-image-cloud-arm64`).
    pub const fn debian(self) -> &'static str {
        match self {
            Arch::X86_64 => "amd64",
            Arch::Aarch64 => "arm64",
        }
    }

    /// The QEMU system emulator, and the Debian package (from bookworm-backports, QEMU 10)
    /// that carries it.
    pub const fn qemu(self) -> (&'static str, &'static str) {
        match self {
            Arch::X86_64 => ("qemu-system-x86_64", "qemu-system-x86"),
            Arch::Aarch64 => ("qemu-system-aarch64", "qemu-system-arm"),
        }
    }

    /// The guest's console (the first serial port).
    pub const fn console(self) -> &'static str {
        match self {
            Arch::X86_64 => "ttyS0",
            Arch::Aarch64 => "ttyAMA0",
        }
    }

    /// The guest's second serial port, where results go: a 16550 on `pc`, the second PL011
    /// QEMU 10's `virt` makes when `-serial` is given twice.
    pub const fn results_port(self) -> &'static str {
        match self {
            Arch::X86_64 => "/dev/ttyS1",
            Arch::Aarch64 => "/dev/ttyAMA1",
        }
    }

    /// The prefix of the syscall wrappers that take the user's registers
    /// (`__arm64_sys_unlinkat(regs)`), the names the kernel's kprobe events see.
    pub const fn syscall_prefix(self) -> &'static str {
        match self {
            Arch::X86_64 => "__x64_sys_",
            Arch::Aarch64 => "__arm64_sys_",
        }
    }

    /// The name of a kernel series' lane: `6.12` on amd64 (as before arm64 came), `arm64-6.12`.
    pub fn lane(self, series: &str) -> String {
        match self {
            Arch::X86_64 => series.to_owned(),
            Arch::Aarch64 => format!("{}-{series}", self.debian()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_keep_amd64_s_names_and_prefix_arm64_s() {
        assert_eq!(Arch::X86_64.lane("6.12"), "6.12");
        assert_eq!(Arch::Aarch64.lane("6.12"), "arm64-6.12");
        assert_eq!(
            ARCHES.map(|a| (a.console(), a.results_port())),
            [("ttyS0", "/dev/ttyS1"), ("ttyAMA0", "/dev/ttyAMA1")]
        );
    }
}
