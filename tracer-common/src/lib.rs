//! Types shared by the kernel programs (`tracer-ebpf`) and userspace (`tracer`).
//!
//! Everything here is `#[repr(C)]`, `Copy`, and laid out without implicit padding:
//! the verifier rejects stack reads of padding bytes, so gaps are explicit `_pad` fields.
#![no_std]
#![expect(
    clippy::inline_always,
    reason = "the kernel programs need these inlined into each program"
)]
#![expect(
    clippy::pub_underscore_fields,
    reason = "explicit padding fields keep layouts free of implicit padding"
)]

pub mod hist;
pub mod maps;
pub mod probe;
pub mod ptrauth;

pub use hist::{BUCKETS, bucket_bounds, bucket_of};
pub use probe::{FUNCTIONS, NO_CALLER, PROBES, Probe, ProbeKind};
