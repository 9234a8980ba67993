//! tracefs, through which tracepoints attach: mounted where the system has not, asked which
//! tracepoints this kernel has, and read for the record layout of the cgroup tracepoints.

use std::path::Path;

/// Where tracefs is found: its own mount point, and its place under debugfs.
const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// Why no tracepoint can attach.
#[derive(Debug, thiserror::Error)]
pub enum TracefsError {
    /// tracefs is root's (mode 0700): without root a process needs `CAP_DAC_READ_SEARCH` to
    /// look inside, as aya does to find a tracepoint's id.
    #[error(
        "tracefs (/sys/kernel/tracing) cannot be read by this process: the syscall, cgroup \
         and lock tracepoints need CAP_DAC_READ_SEARCH besides CAP_BPF and CAP_PERFMON (or \
         root); grant it with `sudo setcap cap_bpf,cap_perfmon,cap_dac_read_search+ep \
         $(command -v tracer)`"
    )]
    Denied,
    /// Not mounted, and mounting it failed: the kernel's reason.
    #[error(
        "tracefs is not mounted and mounting it failed ({0}): syscall and lock tracepoints \
         cannot attach; try `mount -t tracefs nodev /sys/kernel/tracing`"
    )]
    Unmounted(std::io::Error),
}

/// Tracepoints are attached through tracefs; mount it where the system has not (as
/// `mount -t tracefs nodev /sys/kernel/tracing` would).
///
/// # Errors
/// When this process may not read tracefs, or it is not mounted and cannot be.
pub fn ensure_mounted() -> Result<(), TracefsError> {
    let mut denied = false;
    for dir in TRACEFS {
        match Path::new(dir).join("events").try_exists() {
            Ok(true) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => denied = true,
            Ok(false) | Err(_) => {}
        }
    }
    if denied {
        return Err(TracefsError::Denied);
    }
    let target = c"/sys/kernel/tracing";
    // SAFETY: valid NUL-terminated strings; no data argument.
    let rc = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            target.as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc == 0 {
        log::info!("mounted tracefs at /sys/kernel/tracing");
        Ok(())
    } else {
        Err(TracefsError::Unmounted(std::io::Error::last_os_error()))
    }
}

/// Whether tracefs lists the tracepoint `category:name` (tracefs mounted, as
/// [`ensure_mounted`] makes sure).
#[must_use]
pub fn tracepoint_exists(category: &str, name: &str) -> bool {
    TRACEFS.iter().any(|dir| {
        Path::new(dir)
            .join("events")
            .join(category)
            .join(name)
            .is_dir()
    })
}

/// The cgroup tracepoints both use this record layout (`TP_STRUCT__entry` of the `cgroup`
/// event class).
const CGROUP_FORMAT: &str = "events/cgroup/cgroup_mkdir/format";

/// Why the cgroup tracepoints' record layout is not known.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FormatError {
    /// tracefs has no format file for them.
    #[error("no tracefs file {}", CGROUP_FORMAT)]
    NoFile,
    /// A field the programs read is missing.
    #[error("the cgroup tracepoint has no field {0:?}")]
    NoField(&'static str),
    /// A field's line has no offset or size.
    #[error("unreadable field line {0:?}")]
    Unreadable(String),
    /// A field has another size than the programs read (before Linux 5.7 `id` was an int).
    #[error("field {name:?} is {got} bytes, expected {expected}: {line:?}")]
    Size {
        /// The field.
        name: &'static str,
        /// Its size in this kernel.
        got: u32,
        /// The size the programs read.
        expected: u32,
        /// Its line in the format file.
        line: String,
    },
}

/// Offsets of `root`, `id` and `path` in the cgroup tracepoints' records, from tracefs.
///
/// # Errors
/// No format file, or one [`cgroup_offsets`] refuses.
pub fn cgroup_layout() -> Result<[u32; 3], FormatError> {
    let text = TRACEFS
        .iter()
        .find_map(|dir| std::fs::read_to_string(Path::new(dir).join(CGROUP_FORMAT)).ok())
        .ok_or(FormatError::NoFile)?;
    cgroup_offsets(&text)
}

/// Parse a cgroup tracepoint's format file: the offsets of `int root`, `u64 id` and
/// `__data_loc char[] path`, checking their sizes (before Linux 5.7 `id` was an int).
///
/// # Errors
/// A field missing or of another size.
pub fn cgroup_offsets(format: &str) -> Result<[u32; 3], FormatError> {
    let field = |name: &'static str, size: u32| -> Result<u32, FormatError> {
        let line = format
            .lines()
            .map(str::trim)
            .find(|l| {
                l.strip_prefix("field:")
                    .and_then(|f| f.split(';').next())
                    .and_then(|decl| decl.split_whitespace().last())
                    == Some(name)
            })
            .ok_or(FormatError::NoField(name))?;
        let value = |key: &str| {
            line.split(';')
                .find_map(|part| part.trim().strip_prefix(key))
                .and_then(|v| v.parse::<u32>().ok())
        };
        let (Some(offset), Some(got)) = (value("offset:"), value("size:")) else {
            return Err(FormatError::Unreadable(line.to_owned()));
        };
        if got != size {
            return Err(FormatError::Size {
                name,
                got,
                expected: size,
                line: line.to_owned(),
            });
        }
        Ok(offset)
    };
    Ok([field("root", 4)?, field("id", 8)?, field("path", 4)?])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_record_layout_is_read_from_the_format_file() {
        // As Linux 6.18 shows it (6.1 and 6.12 alike, checked in the VM suite).
        let format = "name: cgroup_mkdir
ID: 544
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:int root;\toffset:8;\tsize:4;\tsigned:1;
\tfield:int level;\toffset:12;\tsize:4;\tsigned:1;
\tfield:u64 id;\toffset:16;\tsize:8;\tsigned:0;
\tfield:__data_loc char[] path;\toffset:24;\tsize:4;\tsigned:0;

print fmt: \"root=%d id=%llu level=%d path=%s\", REC->root, REC->id, REC->level, __get_str(path)
";
        assert_eq!(cgroup_offsets(format), Ok([8, 16, 24]));
        // Before Linux 5.7 the id was an int: refused rather than misread.
        let old = format.replace("u64 id;\toffset:16;\tsize:8", "int id;\toffset:16;\tsize:4");
        assert!(
            cgroup_offsets(&old)
                .unwrap_err()
                .to_string()
                .contains("\"id\"")
        );
        assert!(cgroup_offsets("name: x\n").is_err());
    }

    #[test]
    fn the_messages_say_what_to_do() {
        // The text users see, as before these were types.
        assert_eq!(
            TracefsError::Denied.to_string(),
            "tracefs (/sys/kernel/tracing) cannot be read by this process: the syscall, \
             cgroup and lock tracepoints need CAP_DAC_READ_SEARCH besides CAP_BPF and \
             CAP_PERFMON (or root); grant it with `sudo setcap \
             cap_bpf,cap_perfmon,cap_dac_read_search+ep $(command -v tracer)`"
        );
        assert_eq!(
            FormatError::NoFile.to_string(),
            "no tracefs file events/cgroup/cgroup_mkdir/format"
        );
    }
}
