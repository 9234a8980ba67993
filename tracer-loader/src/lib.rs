//! Loads tracer's kernel programs and reads them: attaching each probe where the kernel
//! allows, as the host's facts ([`tracer_host`]: kallsyms, BTF, kernel version, preemption
//! model, cgroups, capabilities, tracefs) say it can, reading the maps into a
//! [`tracer_core::snapshot::Snapshot`], draining the ring buffers, and relaying what the
//! kernel programs log. aya stays inside: a caller holds an [`attached::Attached`] and does
//! everything through its methods.
//!
//! Modules, leaves first: [`kernel_log`], `kprobe_links` (the kprobes' links), [`sizing`]
//! (the maps' entries from the host and a kernel-memory budget), [`test_knobs`] (what the VM
//! suite sets through the environment), [`switches`] (the words the programs read:
//! recording, the slow-call threshold, ...), [`settle`] (when recording starts), [`read`]
//! (maps and ring buffers into core types), `forget` (deleting removed cgroups' and exited
//! threads' entries), [`attached`] (the loaded programs), [`attach`] (loading and
//! attaching), [`check`] (`tracer probes`).

pub mod attach;
pub mod attached;
pub mod check;
mod forget;
pub mod kernel_log;
mod kprobe_links;
pub mod read;
pub mod settle;
pub mod sizing;
pub mod switches;
pub mod test_knobs;

/// SHA-256 of the kernel programs' object this binary embeds (`none` when it was built
/// without them): which programs run, for `tracer --version`.
pub const KERNEL_PROGRAMS_SHA256: &str = env!("TRACER_EBPF_SHA256");
