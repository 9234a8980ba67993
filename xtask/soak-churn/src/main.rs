//! The cgroup churn of `cargo xtask bench soak` (`xtask/vm/soak.sh`), run in the guest:
//! QUOTA short-lived cgroups in SECONDS, paced evenly (a worker ahead of schedule waits).
//! Each cycle makes the cgroup, forks a child that moves itself into it, mounts a tmpfs,
//! makes a directory there, creates and unlinks two files in it, removes it and unmounts;
//! then reaps the child and removes the cgroup. These are the system calls of the shell
//! commands this replaces, so the kernel functions the soak counts are called as often
//! per cgroup, without a fork and exec per step: under TCG emulation those capped the pace
//! at about 6 cgroups a second, where 10,000 in 10 minutes needs 17.
//!
//! Usage: `soak-churn WORKER QUOTA SECONDS`. The number of cgroups done so far is kept in
//! `/tmp/soak.doneWORKER`; each failed step is a line of `/tmp/soak.fail`.

use std::{
    ffi::CString,
    fs::{self, File, OpenOptions},
    io::Write as _,
    os::unix::fs::FileExt as _,
    process::ExitCode,
    thread,
    time::{Duration, Instant},
};

/// Where the cgroups are made (cgroup v2, as the guest's init mounts it).
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
struct Args {
    worker: u32,
    quota: u64,
    seconds: u64,
}

/// `WORKER QUOTA SECONDS`, each a whole number; SECONDS at least 1.
fn parse(args: &[String]) -> Result<Args, String> {
    let [worker, quota, seconds] = args else {
        return Err(format!(
            "expected 3 arguments (WORKER QUOTA SECONDS), got {}",
            args.len()
        ));
    };
    let number = |name: &str, v: &str| {
        v.parse::<u64>()
            .map_err(|e| format!("{name} {v:?} is not a whole number: {e}"))
    };
    let worker = u32::try_from(number("WORKER", worker)?)
        .map_err(|_| format!("WORKER {worker:?} is too large"))?;
    let quota = number("QUOTA", quota)?;
    let seconds = number("SECONDS", seconds)?;
    if seconds == 0 {
        return Err("SECONDS must be at least 1".into());
    }
    Ok(Args {
        worker,
        quota,
        seconds,
    })
}

/// When cycle `n` (from 0) of `quota` spread evenly over `window` may start.
fn due(n: u64, quota: u64, window: Duration) -> Duration {
    let nanos = window.as_nanos() * u128::from(n) / u128::from(quota.max(1));
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// The paths of one worker's tmpfs, made once.
struct Mount {
    dir: String,
    dir_c: CString,
    sub: String,
    files: [String; 2],
}

impl Mount {
    fn new(worker: u32) -> Self {
        let dir = format!("/mnt/soak{worker}");
        Self {
            dir_c: CString::new(dir.clone()).unwrap_or_default(),
            sub: format!("{dir}/d"),
            files: [format!("{dir}/d/a"), format!("{dir}/d/b")],
            dir,
        }
    }
}

/// The last OS error, with what was being done.
fn os_error(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

/// The child's part of a cycle: into `cgroup`, then the file system work.
fn child(cgroup: &str, m: &Mount) -> Result<(), String> {
    fs::write(
        format!("{cgroup}/cgroup.procs"),
        std::process::id().to_string(),
    )
    .map_err(|e| format!("moving into the cgroup: {e}"))?;
    // SAFETY: valid NUL-terminated strings; a null data pointer is allowed for tmpfs.
    let mounted = unsafe {
        libc::mount(
            c"none".as_ptr(),
            m.dir_c.as_ptr(),
            c"tmpfs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if mounted != 0 {
        return Err(os_error(&format!("mount tmpfs on {}", m.dir)));
    }
    let work = || -> Result<(), String> {
        fs::create_dir(&m.sub).map_err(|e| format!("mkdir {}: {e}", m.sub))?;
        for f in &m.files {
            File::create(f).map_err(|e| format!("create {f}: {e}"))?;
        }
        for f in &m.files {
            fs::remove_file(f).map_err(|e| format!("unlink {f}: {e}"))?;
        }
        fs::remove_dir(&m.sub).map_err(|e| format!("rmdir {}: {e}", m.sub))
    };
    let worked = work();
    // SAFETY: a valid NUL-terminated path.
    if unsafe { libc::umount2(m.dir_c.as_ptr(), 0) } != 0 {
        let err = os_error(&format!("umount {}", m.dir));
        // Detached, so the next cycle mounts on a clean directory.
        // SAFETY: as above.
        unsafe { libc::umount2(m.dir_c.as_ptr(), libc::MNT_DETACH) };
        return Err(match worked {
            Ok(()) => err,
            Err(w) => format!("{w}; {err}"),
        });
    }
    worked
}

/// One cgroup's cycle; a failed step is a line written to `fail`.
fn cycle(cgroup: &str, m: &Mount, fail: &mut File) {
    if let Err(e) = fs::create_dir(cgroup) {
        let _ = writeln!(fail, "cgroup {cgroup}: mkdir failed: {e}");
        return;
    }
    // SAFETY: this process has one thread, so the child may run any code.
    match unsafe { libc::fork() } {
        -1 => {
            let _ = writeln!(fail, "cgroup {cgroup}: {}", os_error("fork"));
        }
        0 => {
            let code = match child(cgroup, m) {
                Ok(()) => 0,
                Err(e) => {
                    let _ = writeln!(fail, "cgroup {cgroup}: workload failed: {e}");
                    1
                }
            };
            // SAFETY: ends the child without running the parent's exit handlers.
            unsafe { libc::_exit(code) };
        }
        pid => {
            let mut status = 0;
            // SAFETY: `status` is a valid place for the child's status.
            if unsafe { libc::waitpid(pid, &raw mut status, 0) } != pid {
                let _ = writeln!(fail, "cgroup {cgroup}: {}", os_error("waitpid"));
            } else if libc::WIFSIGNALED(status) {
                let _ = writeln!(
                    fail,
                    "cgroup {cgroup}: workload killed by signal {}",
                    libc::WTERMSIG(status)
                );
            }
        }
    }
    if let Err(e) = fs::remove_dir(cgroup) {
        let _ = writeln!(fail, "cgroup {cgroup}: rmdir failed: {e}");
    }
}

fn run(args: &Args) -> Result<u64, String> {
    let m = Mount::new(args.worker);
    fs::create_dir_all(&m.dir).map_err(|e| format!("mkdir {}: {e}", m.dir))?;
    let done_path = format!("/tmp/soak.done{}", args.worker);
    let done = File::create(&done_path).map_err(|e| format!("{done_path}: {e}"))?;
    done.write_all_at(b"0\n", 0)
        .map_err(|e| format!("{done_path}: {e}"))?;
    let mut fail = OpenOptions::new()
        .create(true)
        .append(true)
        .open("/tmp/soak.fail")
        .map_err(|e| format!("/tmp/soak.fail: {e}"))?;
    let window = Duration::from_secs(args.seconds);
    let start = Instant::now();
    let mut n = 0;
    while n < args.quota {
        let elapsed = start.elapsed();
        if elapsed >= window {
            break;
        }
        let at = due(n, args.quota, window);
        if let Some(wait) = at.checked_sub(elapsed).filter(|w| !w.is_zero()) {
            thread::sleep(wait);
            continue;
        }
        cycle(
            &format!("{CGROUP_ROOT}/soak_{}_{n}", args.worker),
            &m,
            &mut fail,
        );
        n += 1;
        // The count only grows, so each write covers the one before.
        done.write_all_at(format!("{n}\n").as_bytes(), 0)
            .map_err(|e| format!("{done_path}: {e}"))?;
    }
    Ok(n)
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let result = parse(&argv).and_then(|args| {
        let start = Instant::now();
        let n = run(&args)?;
        println!(
            "soak-churn {}: {n} cgroups in {:.1} s",
            args.worker,
            start.elapsed().as_secs_f64()
        );
        Ok(())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("soak-churn: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn arguments_are_three_whole_numbers() {
        assert_eq!(
            parse(&strings(&["1", "5000", "600"])),
            Ok(Args {
                worker: 1,
                quota: 5000,
                seconds: 600
            })
        );
        assert!(
            parse(&strings(&["1", "5000"]))
                .unwrap_err()
                .contains("got 2")
        );
        assert!(
            parse(&strings(&["1", "-5", "600"]))
                .unwrap_err()
                .starts_with("QUOTA \"-5\" is not a whole number")
        );
        assert!(
            parse(&strings(&["0", "10", "0"]))
                .unwrap_err()
                .contains("at least 1")
        );
    }

    #[test]
    fn cycles_are_spread_evenly_over_the_window() {
        let window = Duration::from_mins(10);
        assert_eq!(due(0, 5000, window), Duration::ZERO);
        assert_eq!(due(2500, 5000, window), Duration::from_mins(5));
        assert_eq!(due(1, 3, Duration::from_secs(1)).as_nanos(), 333_333_333);
    }
}
