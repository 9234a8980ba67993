//! Paths and child processes shared by every command.

use std::{
    ffi::OsString,
    fmt::Write as _,
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{Context as _, bail};

/// The workspace root: xtask lives one level below it.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Where cargo puts what xtask hands on (the static tracer, unit tests), whatever
/// `CARGO_TARGET_DIR` xtask itself was built with: one place, so nothing builds twice.
pub fn target_dir() -> PathBuf {
    workspace_root().join("target")
}

/// `${XDG_CACHE_HOME:-$HOME/.cache}/tracer-xtask`: survives fresh clones, so the kernels
/// and bpf-linker are fetched and built once per machine.
pub fn cache_dir() -> anyhow::Result<PathBuf> {
    let base = match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(
            std::env::var_os("HOME").context("neither XDG_CACHE_HOME nor HOME is set")?,
        )
        .join(".cache"),
    };
    Ok(base.join("tracer-xtask"))
}

/// The cargo that runs us (`$CARGO`), so children use the same toolchain.
pub fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo")))
}

/// Whether we run as root. The owner of `/proc/self` is the effective uid, which spares
/// a libc dependency.
pub fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// The calling thread, and every process it starts meanwhile, under `SCHED_IDLE` until
/// dropped: the scheduler gives it a core only when nothing else wants one. The suite's
/// builds that no boot waits for run so, on the time its VM lanes leave (a TCG guest keeps
/// under one core busy on average). They still share the cores' caches with the guests.
/// Where the kernel refuses, the thread runs as before, and says so on standard error.
pub struct Idle(bool);

impl Idle {
    pub fn start(what: &str) -> Self {
        let idle = set_policy(libc::SCHED_IDLE);
        if let Err(e) = &idle {
            eprintln!("xtask: {what} at normal priority: SCHED_IDLE refused ({e})");
        }
        Self(idle.is_ok())
    }
}

impl Drop for Idle {
    fn drop(&mut self) {
        if self.0
            && let Err(e) = set_policy(libc::SCHED_OTHER)
        {
            eprintln!("xtask: this thread stays under SCHED_IDLE: {e}");
        }
    }
}

/// The calling thread's scheduling policy (pid 0 is the calling thread: Linux schedules
/// threads, and a process started from one inherits its policy).
fn set_policy(policy: libc::c_int) -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler only reads `param`, which outlives the call.
    let rc = unsafe { libc::sched_setscheduler(0, policy, &raw const param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The command line, for error messages.
pub fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for arg in cmd.get_args() {
        let _ = write!(s, " {}", arg.to_string_lossy());
    }
    s
}

/// Run `cmd` with inherited output; fail unless it exits 0.
pub fn run(cmd: &mut Command) -> anyhow::Result<()> {
    let status = cmd
        .stdin(Stdio::null())
        .status()
        .with_context(|| format!("cannot start `{}`", describe(cmd)))?;
    if !status.success() {
        bail!("`{}` failed ({status})", describe(cmd));
    }
    Ok(())
}

/// Run `cmd` and return its standard output; fail (with its stderr) unless it exits 0.
pub fn output(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot start `{}`", describe(cmd)))?;
    if !out.status.success() {
        bail!(
            "`{}` failed ({}): {}",
            describe(cmd),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8(out.stdout).with_context(|| format!("`{}` printed non-UTF-8", describe(cmd)))
}

/// Whether an ELF file has no program interpreter, i.e. runs without a dynamic loader
/// (a static or static-pie executable): the guest has no libraries.
pub fn is_static_elf(path: &Path) -> anyhow::Result<bool> {
    Ok(elf_facts(path)?.is_static)
}

/// What an executable's ELF headers say of where it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElfFacts {
    /// The machine it is for (`e_machine`).
    pub machine: object::Architecture,
    /// No program interpreter (`PT_INTERP`): a static or static-pie executable.
    pub is_static: bool,
}

/// [`ElfFacts`] of the 64-bit little-endian ELF file at `path` (what x86-64 and aarch64 run).
pub fn elf_facts(path: &Path) -> anyhow::Result<ElfFacts> {
    use object::{
        Object as _,
        read::elf::{ElfFile64, ProgramHeader as _},
    };
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let elf = ElfFile64::<object::LittleEndian>::parse(bytes.as_slice())
        .with_context(|| format!("{} is not a 64-bit little-endian ELF file", path.display()))?;
    let endian = elf.endian();
    let is_static = !elf
        .elf_program_headers()
        .iter()
        .any(|p| p.p_type(endian) == object::elf::PT_INTERP);
    Ok(ElfFacts {
        machine: elf.architecture(),
        is_static,
    })
}

/// Quote `arg` for a POSIX shell.
pub fn shell_quote(arg: &str) -> String {
    if !arg.is_empty()
        && arg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
    {
        return arg.to_owned();
    }
    format!("'{}'", arg.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quote_leaves_plain_words_and_quotes_the_rest() {
        assert_eq!(shell_quote("uname"), "uname");
        assert_eq!(shell_quote("-r"), "-r");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn a_dynamic_executable_has_an_interpreter() {
        // This test binary is linked dynamically (only xtask's own build adds +crt-static).
        let me = std::env::current_exe().unwrap();
        assert!(!is_static_elf(&me).unwrap());
        assert!(is_static_elf(Path::new("/proc/self/cmdline")).is_err());
        assert_eq!(
            elf_facts(&me).unwrap().machine,
            if cfg!(target_arch = "x86_64") {
                object::Architecture::X86_64
            } else {
                object::Architecture::Aarch64
            }
        );
    }
}
