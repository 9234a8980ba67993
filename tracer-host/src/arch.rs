//! The architecture tracer runs on, as the kernel names what differs between them: the
//! prefix of its syscall functions, the registers a syscall's arguments are in.

/// The architectures tracer is built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// x86-64 (amd64).
    X86_64,
    /// `AArch64` (arm64).
    Aarch64,
}

impl Arch {
    /// The architecture of this binary; None on one tracer knows nothing of.
    pub const THIS: Option<Arch> = if cfg!(target_arch = "x86_64") {
        Some(Arch::X86_64)
    } else if cfg!(target_arch = "aarch64") {
        Some(Arch::Aarch64)
    } else {
        None
    };

    /// Its name as `uname -m` says it (and Rust's `target_arch`): `x86_64`, `aarch64`.
    #[must_use]
    pub const fn machine(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Aarch64 => "aarch64",
        }
    }

    /// Its name as the kernel's source tree and Debian say it: `x86-64`, `arm64`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86-64",
            Arch::Aarch64 => "arm64",
        }
    }

    /// The prefix of the kernel's syscall functions, the wrappers that take the user's
    /// registers (`__x64_sys_unlinkat(regs)`, `__arm64_sys_unlinkat(regs)`).
    #[must_use]
    pub const fn syscall_prefix(self) -> &'static str {
        match self {
            Arch::X86_64 => "__x64_sys_",
            Arch::Aarch64 => "__arm64_sys_",
        }
    }

    /// Where a syscall's third argument is in `struct pt_regs`: the member BTF names, the
    /// bytes past it, and the offset assumed where BTF does not say (x86-64: `dx`; arm64:
    /// `regs[2]`, in the anonymous struct of its `user_regs` union).
    #[must_use]
    pub const fn pt_regs_arg3(self) -> (&'static str, u32, u32) {
        match self {
            Arch::X86_64 => ("dx", 0, 96),
            Arch::Aarch64 => ("regs", 16, 16),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_binary_knows_its_architecture() {
        let this = Arch::THIS.expect("tracer is built for x86-64 or arm64");
        assert_eq!(this.machine(), std::env::consts::ARCH);
    }

    #[test]
    fn each_architecture_names_its_syscall_functions() {
        assert_eq!(
            format!("{}unlinkat", Arch::X86_64.syscall_prefix()),
            "__x64_sys_unlinkat"
        );
        assert_eq!(
            format!("{}unlinkat", Arch::Aarch64.syscall_prefix()),
            "__arm64_sys_unlinkat"
        );
        // The third argument: x86-64's dx (offset 96 in its pt_regs), arm64's x2.
        assert_eq!(Arch::X86_64.pt_regs_arg3(), ("dx", 0, 96));
        assert_eq!(Arch::Aarch64.pt_regs_arg3(), ("regs", 16, 16));
    }
}
