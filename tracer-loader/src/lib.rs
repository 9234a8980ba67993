//! Loads tracer's kernel programs and reads them: what the host is (kallsyms, BTF, kernel
//! version, preemption model, cgroups, capabilities), attaching each probe where the
//! kernel allows, reading the maps into a [`tracer_core::snapshot::Snapshot`], draining
//! the ring buffers, and relaying what the kernel programs log.
//!
//! Modules, leaves first: [`host`] (facts, no BPF), [`kernel_log`], [`links`] (the kprobes' links), [`read`] (maps and ring
//! buffers into core types), [`settle`] (the programs' switches), [`sizing`] (the maps'
//! entries from the host and a kernel-memory budget), [`attach`] (loading).

pub mod attach;
pub mod host;
pub mod kernel_log;
pub mod links;
pub mod read;
pub mod settle;
pub mod sizing;

/// SHA-256 of the kernel programs' object this binary embeds (`none` when it was built
/// without them): which programs run, for `tracer --version`.
pub const KERNEL_PROGRAMS_SHA256: &str = env!("TRACER_EBPF_SHA256");
