//! `cargo xtask test` and the commands that run a part of it. Every case ends in a
//! [`harness::Verdict`] that a [`harness::Tally`] prints and counts.
//!
//! - [`harness`]: the verdict, the tally and its closing line, the guest's result files.
//! - [`prometheus`]: a real Prometheus and promtool, for the exporter's cases on this host
//!   and in the VM.
//! - [`host`]: tracer on this host: the unit tests, a kernel without kprobes, bad input.
//! - [`host_arm64`]: the arm64 tracer, cross-built: its ELF header, and `--version` under
//!   user-mode QEMU.
//! - [`host_serve`], [`host_top`], [`host_harden`]: the host cases of `tracer serve`
//!   (promtool, a real Prometheus, the dashboards), of `tracer top` in a real terminal, and
//!   of hardening (the exporter under abuse, bad input, least privilege); [`host_tls`],
//!   both over TLS with basic auth (`--web.config.file`).
//! - [`host_operator`]: a real Prometheus scraping `tracer serve` through the scrape
//!   configuration the Prometheus Operator makes of `deploy/kubernetes/`'s `PodMonitor`.
//! - [`scraper`]: the scraper the hardening cases run beside their hostile clients, plain
//!   or over TLS.
//! - [`deploy`]: the checks of what a fleet deploys (`deploy/`): rules, unit, manifests.
//! - [`manifests`]: what the cases read of `deploy/kubernetes/` (the `DaemonSet`'s
//!   arguments and capabilities, the `PodMonitor`'s endpoint).
//! - [`release`]: what `cargo xtask dist` writes: lintian, the image's labels, two equal
//!   runs, and the .deb and image run on Debian 12 under systemd.
//! - [`suite`]: one VM per kernel running the script its cases make; the cases and the checks of
//!   what comes back.
//!
//! Uses go one way: [`harness`] and [`prometheus`] use no other module here, and no case
//! module uses the orchestration above it (`cargo xtask lint` fails on a cycle).

pub(crate) mod deploy;
pub(crate) mod harness;
pub(crate) mod host;
pub(crate) mod host_arm64;
pub(crate) mod host_harden;
pub(crate) mod host_operator;
pub(crate) mod host_serve;
pub(crate) mod host_tls;
pub(crate) mod host_top;
pub(crate) mod manifests;
pub(crate) mod prometheus;
pub(crate) mod release;
pub(crate) mod scraper;
pub(crate) mod suite;
