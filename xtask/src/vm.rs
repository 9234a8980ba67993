//! `cargo xtask vm`: boot a kernel under QEMU with our own initramfs, run a command in
//! it, stream the console, and collect what the guest wrote to its second serial port.

use std::{
    collections::VecDeque,
    fs,
    io::{BufRead as _, BufReader, IsTerminal as _, Read},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

use crate::{arch::Arch, initramfs, kernel::Kernel, setup, util};

/// Console lines kept for a failure report.
const TAIL_LINES: usize = 40;
/// Where the guest finds the loop module.
pub const GUEST_LOOP_KO: &str = "/lib/modules/loop.ko";
/// Where the guest finds the network modules and their load order.
const GUEST_NET_DIR: &str = "/lib/modules/net";

/// What to boot and run.
pub struct Spec<'a> {
    /// The kernel.
    pub kernel: &'a Kernel,
    /// The static tracer binary, put at /bin/tracer.
    pub tracer: Option<&'a Path>,
    /// Shell text the guest runs as /cmd.sh; its exit status is the VM's.
    pub command: String,
    /// Extra files: guest path, mode, contents.
    pub files: Vec<(String, u32, Vec<u8>)>,
    /// Kill QEMU after this long.
    pub timeout: Duration,
    /// Use KVM instead of TCG (hangs on machines with broken nested virtualisation).
    pub kvm: bool,
    /// Under TCG, `-icount shift=0,sleep=off,align=off`: the guest's clocks advance by 1 ns
    /// per guest instruction executed, whatever the host does, so guest time counts
    /// instructions (every virtual CPU then runs on one host thread: boots take longer).
    /// Not with `kvm`.
    pub icount: bool,
    /// Possible CPUs beyond the 2 online (QEMU `-smp 2,maxcpus=N`): hotplug CPUs the kernel
    /// sizes per-CPU memory for, where it honours them (Debian's 5.10 and 6.1).
    pub max_cpus: Option<u32>,
    /// Hand the terminal to the guest (no command given, standard input a terminal).
    pub interactive: bool,
    /// A network card whose guest port `.1` is reachable at `127.0.0.1:.0` on this host
    /// (QEMU user networking, restricted: the guest reaches nothing else). The guest brings
    /// it up with `net-up`, as 10.0.2.15.
    pub forward: Option<(u16, u16)>,
    /// Where the initramfs, the results file and the files split from it go.
    pub out_dir: PathBuf,
}

impl Spec<'_> {
    /// The boot's name on the console: the kernel's, and `icount` after it under icount
    /// (two boots of one kernel can run at once).
    fn name(&self) -> String {
        if self.icount {
            format!("{} icount", self.kernel.name)
        } else {
            self.kernel.name.clone()
        }
    }
}

/// How a boot went.
pub struct Outcome {
    /// The guest's exit status, from its end marker.
    pub exit: Option<i32>,
    /// Why the run failed, when it did (panic, timeout, no end marker).
    pub failure: Option<String>,
    /// Result files the guest sent, by name, as written under `out_dir`.
    pub files: Vec<(String, PathBuf)>,
    /// QEMU start to the guest's /init speaking.
    pub boot: Option<Duration>,
    /// QEMU start to QEMU exit.
    pub total: Duration,
    /// The console's headings, `WORD: [T s] TEXT` (the suite's `say`), in order: where the
    /// guest's time went.
    pub marks: Vec<String>,
}

impl Outcome {
    /// Whether the guest ran to its end marker and its command exited 0.
    pub fn success(&self) -> bool {
        self.failure.is_none() && self.exit == Some(0)
    }
}

/// Where the guest's scripts read which serial port carries results (`/dev/ttyS1`): the
/// port's name is the architecture's.
pub const GUEST_RESULTS_PORT: &str = "/etc/results-port";

/// The static busybox for `arch`'s guests: this host's (busybox-static), or arm64's from
/// Debian's arm64 package (`cargo xtask setup` unpacks it).
fn busybox(arch: Arch) -> anyhow::Result<PathBuf> {
    let path = match setup::guest_root(arch)? {
        None => PathBuf::from("/bin/busybox"),
        Some(root) => root.join("bin/busybox"),
    };
    if !path.is_file() {
        bail!(
            "no {} busybox at {}: run `cargo xtask setup`",
            arch.debian(),
            path.display()
        );
    }
    if !util::is_static_elf(&path)? {
        bail!(
            "{} is not static: install busybox-static (`cargo xtask setup`)",
            path.display()
        );
    }
    Ok(path)
}

/// Build the initramfs for `spec`; returns its path.
fn build_initramfs(spec: &Spec<'_>) -> anyhow::Result<PathBuf> {
    let path = spec.out_dir.join("initramfs.cpio.gz");
    let arch = spec.kernel.arch;
    let busybox = busybox(arch)?;
    let mut w = initramfs::create(&path)?;
    for dir in BASE_DIRS {
        w.dir(dir)?;
    }
    w.char_dev("/dev/console", 0o600, 5, 1)?;
    w.file(
        "/bin/busybox",
        0o755,
        &fs::read(&busybox).with_context(|| format!("reading {}", busybox.display()))?,
    )?;
    w.file(
        GUEST_RESULTS_PORT,
        0o644,
        format!("{}\n", arch.results_port()).as_bytes(),
    )?;
    w.file("/init", 0o755, include_bytes!("../vm/init.sh"))?;
    // `emit NAME FILE`: how guest scripts send result files to the host.
    w.file("/bin/emit", 0o755, include_bytes!("../vm/emit.sh"))?;
    // What several guest scripts set up alike: an ext2 that keeps negative dentries, and
    // the traced functions this kernel has.
    w.file(
        "/bin/mount-ext2",
        0o755,
        include_bytes!("../vm/mount-ext2.sh"),
    )?;
    w.file(
        "/bin/traced-funcs",
        0o755,
        include_bytes!("../vm/traced-funcs.sh"),
    )?;
    // The guest's standard output is a serial console, a terminal to tracer, whatever
    // the host's standard output is: colour is decided here, for where the text lands.
    let mut command = String::new();
    if !host_wants_colour() {
        command.push_str("export NO_COLOR=1\n");
    }
    command.push_str(&spec.command);
    w.file("/cmd.sh", 0o644, command.as_bytes())?;
    if let Some(tracer) = spec.tracer {
        let bytes = fs::read(tracer).with_context(|| format!("reading {}", tracer.display()))?;
        w.file("/bin/tracer", 0o755, &bytes)?;
    }
    if let Some(ko) = &spec.kernel.loop_ko {
        w.file(
            GUEST_LOOP_KO,
            0o644,
            &fs::read(ko).with_context(|| format!("reading {}", ko.display()))?,
        )?;
    }
    if spec.forward.is_some() {
        w.dir(GUEST_NET_DIR)?;
        let mut order = String::new();
        for ko in &load_order(&spec.kernel.net_modules)? {
            let name = ko.file_name().unwrap_or_default().to_string_lossy();
            w.file(
                &format!("{GUEST_NET_DIR}/{name}"),
                0o644,
                &fs::read(ko).with_context(|| format!("reading {}", ko.display()))?,
            )?;
            order.push_str(&name);
            order.push('\n');
        }
        w.file(&format!("{GUEST_NET_DIR}/order"), 0o644, order.as_bytes())?;
        w.file("/bin/net-up", 0o755, include_bytes!("../vm/net-up.sh"))?;
    }
    // The kernel's unpacker makes no missing parent directories: list each one first.
    let mut dirs = std::collections::BTreeSet::new();
    for (guest, _, _) in &spec.files {
        let mut parent = Path::new(guest).parent();
        while let Some(p) = parent.filter(|p| *p != Path::new("/")) {
            dirs.insert(p.to_string_lossy().into_owned());
            parent = p.parent();
        }
    }
    // BTreeSet order puts every directory before its children.
    for dir in dirs.iter().filter(|d| !BASE_DIRS.contains(&d.as_str())) {
        w.dir(dir)?;
    }
    for (guest, mode, data) in &spec.files {
        w.file(guest, *mode, data)?;
    }
    initramfs::finish(w)?;
    Ok(path)
}

/// `depends=` of a module file's `.modinfo`: the modules it needs loaded first.
fn module_depends(ko: &[u8]) -> Vec<String> {
    const KEY: &[u8] = b"depends=";
    ko.windows(KEY.len())
        .position(|w| w == KEY)
        .map(|at| {
            let rest = &ko[at + KEY.len()..];
            let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
            String::from_utf8_lossy(&rest[..end])
                .split(',')
                .filter(|d| !d.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// `modules` in an order `insmod` can load them: each after those its `depends=` names
/// (dependencies outside the list are taken as built in).
fn load_order(modules: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let name = |p: &Path| {
        p.file_stem()
            .map(|s| s.to_string_lossy().replace('-', "_"))
            .unwrap_or_default()
    };
    let mut pending: Vec<(PathBuf, Vec<String>)> = modules
        .iter()
        .map(|p| {
            let deps = fs::read(p)
                .map(|b| module_depends(&b))
                .with_context(|| format!("reading {}", p.display()))?;
            Ok((p.clone(), deps))
        })
        .collect::<anyhow::Result<_>>()?;
    let listed: Vec<String> = modules.iter().map(|p| name(p)).collect();
    let mut out: Vec<PathBuf> = Vec::new();
    while !pending.is_empty() {
        let loaded: Vec<String> = out.iter().map(|p| name(p)).collect();
        let ready = pending.iter().position(|(_, deps)| {
            deps.iter()
                .all(|d| loaded.contains(d) || !listed.contains(d))
        });
        let Some(i) = ready else {
            bail!("the network modules depend on each other in a cycle");
        };
        out.push(pending.remove(i).0);
    }
    Ok(out)
}

/// The initramfs's own directories, parents first.
const BASE_DIRS: [&str; 10] = [
    "/bin",
    "/dev",
    "/proc",
    "/sys",
    "/tmp",
    "/mnt",
    "/root",
    "/lib",
    "/lib/modules",
    "/etc",
];

/// A program for `arch`'s guests at `path`, with its shared libraries, as initramfs files:
/// on amd64 this host's ([`host_program`]); on arm64 the file at `path` in the arm64 guest
/// programs `cargo xtask setup` unpacks from Debian's packages, with every library those
/// packages hold (what `ldd` would name cannot be asked of an arm64 program here; they are a
/// few MiB).
///
/// # Errors
/// When the program or one of its libraries cannot be read, or arm64's were not unpacked.
pub fn program(arch: Arch, path: &str) -> anyhow::Result<Vec<(String, u32, Vec<u8>)>> {
    let Some(root) = setup::guest_root(arch)? else {
        return host_program(path);
    };
    let file = root.join(path.trim_start_matches('/'));
    let mut files = vec![(
        path.to_owned(),
        0o755,
        fs::read(&file).with_context(|| {
            format!(
                "reading {} (the {} guest's {path}: `cargo xtask setup`)",
                file.display(),
                arch.debian()
            )
        })?,
    )];
    let triplet = format!("{}-linux-gnu", arch.name());
    for dir in ["lib", "usr/lib"].map(|d| format!("{d}/{triplet}")) {
        let Ok(entries) = fs::read_dir(root.join(&dir)) else {
            continue;
        };
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".so"))
            .collect();
        names.sort();
        for name in names {
            let lib = root.join(&dir).join(&name);
            // Read through symlinks; the guest gets the file at the name the loader asks for.
            if lib.is_file() {
                let data = fs::read(&lib).with_context(|| format!("reading {}", lib.display()))?;
                files.push((format!("/{dir}/{name}"), 0o755, data));
            }
        }
    }
    // The dynamic loader, where the programs' headers name it.
    let loader = format!("lib/ld-linux-{}.so.1", arch.name());
    let data = fs::read(root.join(&loader))
        .with_context(|| format!("reading {}", root.join(&loader).display()))?;
    files.push((format!("/{loader}"), 0o755, data));
    Ok(files)
}

/// A program of this host with every shared library `ldd` names, as initramfs files at
/// the same paths, so the guest can run it (bpftrace, for comparisons in the same boot).
///
/// # Errors
/// When the program or one of its libraries cannot be read.
pub fn host_program(path: &str) -> anyhow::Result<Vec<(String, u32, Vec<u8>)>> {
    let out = Command::new("ldd")
        .arg(path)
        .output()
        .with_context(|| format!("running ldd {path}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut files = vec![(
        path.to_owned(),
        0o755,
        fs::read(path).with_context(|| format!("reading {path}"))?,
    )];
    // `libx.so => /lib/libx.so (0x...)` or `/lib64/ld-linux-x86-64.so.2 (0x...)`.
    for lib in text
        .lines()
        .filter_map(|l| l.split_whitespace().find(|w| w.starts_with('/')))
    {
        // Read through symlinks; the guest gets the file at the name the loader asks for.
        let data = fs::read(lib).with_context(|| format!("reading {lib} (needed by {path})"))?;
        files.push((lib.to_owned(), 0o755, data));
    }
    Ok(files)
}

/// The QEMU command line: TCG unless asked for KVM, no network (or one forwarded port),
/// the console on standard output and the results port into `results`.
fn qemu_command(spec: &Spec<'_>, initrd: &Path, results: &Path, extra: &str) -> Command {
    let arch = spec.kernel.arch;
    let (program, _) = arch.qemu();
    let mut qemu = Command::new(program);
    if arch == Arch::Aarch64 {
        // virt with a GICv3, which takes more than the 8 CPUs of a GICv2 (`maxcpus`);
        // `pauth-impdef`: QEMU's own pointer-authentication cipher, much cheaper to emulate
        // than the architected QARMA that Debian's kernels would otherwise pay for on every
        // signed return.
        qemu.args(["-M", "virt,gic-version=3"]);
    }
    let cpu = match arch {
        Arch::X86_64 => "max",
        Arch::Aarch64 => "max,pauth-impdef=on",
    };
    if spec.kvm {
        qemu.args(["-accel", "kvm", "-cpu", "host"]);
    } else {
        qemu.args(["-accel", "tcg", "-cpu", cpu]);
        if spec.icount {
            qemu.args(["-icount", "shift=0,sleep=off,align=off"]);
        }
    }
    // 2 GiB: room for bpftrace and its libraries (about 200 MiB) in the initramfs.
    let smp = spec
        .max_cpus
        .map_or_else(|| "2".to_owned(), |n| format!("2,maxcpus={n}"));
    // Under icount every vCPU's TSC is the one instruction clock, synchronized by
    // construction; 5.10 and 6.1 still judge TSCs without `constant_tsc` on a multi-CPU
    // non-Intel machine (TCG's `max`) unsynchronized and fall back to HPET, whose reads make
    // `run_time_ns` no instruction count. `tsc=reliable` says so (x86 alone has TSCs).
    let tsc = if spec.icount && !spec.kvm && arch == Arch::X86_64 {
        " tsc=reliable"
    } else {
        ""
    };
    qemu.args(["-smp", &smp, "-m", "2048", "-kernel"])
        .arg(&spec.kernel.vmlinuz)
        .arg("-initrd")
        .arg(initrd)
        .arg("-append")
        .arg(
            format!("console={} quiet panic=-1{tsc} {extra}", arch.console())
                .trim_end(),
        )
        // Not -nographic: it claims stdio for a monitor mux, which the console needs, and
        // its monitor would take Ctrl-A from an interactive guest.
        .args(["-display", "none", "-monitor", "none", "-no-reboot", "-nic"])
        .arg(match spec.forward {
            // restrict=on: the guest reaches this host's forwarded port and nothing else.
            Some((host, guest)) => format!(
                "user,model=virtio-net-pci,restrict=on,hostfwd=tcp:127.0.0.1:{host}-10.0.2.15:{guest}"
            ),
            None => "none".to_owned(),
        })
        // Two serial ports: the console, and the results (a second PL011 on arm64's virt).
        .args(["-serial", "stdio", "-serial"])
        .arg(format!("file:{}", results.display()));
    if spec.interactive {
        qemu.stdin(Stdio::inherit()).stdout(Stdio::inherit());
    } else {
        qemu.stdin(Stdio::null()).stdout(Stdio::piped());
    }
    qemu
}

/// An initramfs made elsewhere (a whole distribution's root file system), booted with its
/// own kernel command line and memory instead of [`Spec`]'s busybox initramfs.
pub struct Prebuilt<'a> {
    /// The initramfs.
    pub initrd: &'a Path,
    /// The kernel command line.
    pub append: &'a str,
    /// The guest's memory in MiB (the root file system lives in it).
    pub memory_mib: u32,
}

/// [`boot`] from a [`Prebuilt`] initramfs; `spec`'s command, files and tracer are not used.
///
/// # Errors
/// When QEMU cannot be started.
pub fn boot_prebuilt(spec: &Spec<'_>, prebuilt: &Prebuilt<'_>) -> anyhow::Result<Outcome> {
    fs::create_dir_all(&spec.out_dir)
        .with_context(|| format!("creating {}", spec.out_dir.display()))?;
    Ok(run_qemu(spec, prebuilt.initrd, Some(prebuilt), "")?.0)
}

/// Boot, run, collect. Errors only when QEMU cannot be started; a guest that fails is
/// an [`Outcome`] with `failure` set.
pub fn boot(spec: &Spec<'_>) -> anyhow::Result<Outcome> {
    boot_appending(spec, "")
}

/// [`boot`] with kernel parameters `extra` after the usual ones.
///
/// # Errors
/// When QEMU cannot be started.
pub fn boot_appending(spec: &Spec<'_>, extra: &str) -> anyhow::Result<Outcome> {
    fs::create_dir_all(&spec.out_dir)
        .with_context(|| format!("creating {}", spec.out_dir.display()))?;
    let initrd = build_initramfs(spec)?;
    let (outcome, died_early) = run_qemu(spec, &initrd, None, extra)?;
    let Some(why) = died_early else {
        return Ok(outcome);
    };
    // Seen under TCG, once in many boots each: QEMU 10.0 aborting on an assertion in its
    // memory map (`iotlb_to_section`) before the kernel prints a line, and 7.3 oopsing on
    // an int3 in `ktime_get` while it patched its own text, 4 s into boot. Nothing of the
    // suite ran, so booting again is safe; a second failure is reported as it is.
    eprintln!(
        "{} | {why} before the guest's /init spoke: booting once more",
        spec.name()
    );
    Ok(run_qemu(spec, &initrd, None, extra)?.0)
}

/// One QEMU run; also, when QEMU died of a signal or the guest kernel panicked before the
/// guest's /init spoke, which of the two.
fn run_qemu(
    spec: &Spec<'_>,
    initrd: &Path,
    prebuilt: Option<&Prebuilt<'_>>,
    extra: &str,
) -> anyhow::Result<(Outcome, Option<&'static str>)> {
    let results = spec.out_dir.join("results.txt");
    let _ = fs::remove_file(&results);
    let prefix = spec.name();

    let mut qemu = qemu_command(spec, initrd, &results, extra);
    if let Some(p) = prebuilt {
        // QEMU takes the last -m and -append given.
        qemu.args(["-m", &p.memory_mib.to_string(), "-append", p.append]);
    }
    let start = Instant::now();
    let mut child = qemu
        .spawn()
        .with_context(|| format!("starting `{}`", util::describe(&qemu)))?;

    let tail = Arc::new(Mutex::new(VecDeque::with_capacity(TAIL_LINES)));
    let booted = Arc::new(Mutex::new(None));
    let panicked = Arc::new(AtomicBool::new(false));
    let marks = Arc::new(Mutex::new(Vec::new()));
    let reader = child.stdout.take().map(|stdout| {
        let console = Console {
            prefix: prefix.clone(),
            tail: Arc::clone(&tail),
            booted: Arc::clone(&booted),
            panicked: Arc::clone(&panicked),
            marks: Arc::clone(&marks),
            start,
        };
        thread::spawn(move || console.stream(stdout))
    });

    let status = wait_at_most(&mut child, start, spec.timeout)?;
    let timed_out = status.is_none();
    let total = start.elapsed();
    if let Some(reader) = reader {
        let _ = reader.join();
    }

    let text = fs::read(&results)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let parsed = parse_results(&text);
    let files = save_files(&spec.out_dir, &parsed.files)?;
    let tail: Vec<String> = tail
        .lock()
        .map(|t| t.iter().cloned().collect())
        .unwrap_or_default();
    let panicked = panicked.load(Ordering::Relaxed);
    let failure = if timed_out {
        Some(format!(
            "timed out after {} s: QEMU killed",
            spec.timeout.as_secs()
        ))
    } else if panicked {
        Some("the guest kernel panicked".to_owned())
    } else if parsed.exit.is_none() {
        Some(format!(
            "no end marker from the guest (QEMU exited with {})",
            status.map_or_else(|| "?".to_owned(), |s| s.to_string())
        ))
    } else {
        None
    };
    if let Some(why) = &failure {
        eprintln!(
            "{prefix} | VM FAILED: {why}; the console's last {} lines:",
            tail.len()
        );
        for line in &tail {
            eprintln!("{prefix} ! {line}");
        }
    }
    let boot = *booted
        .lock()
        .map_err(|_| anyhow::anyhow!("console reader panicked"))?;
    let before_init = !timed_out && boot.is_none() && parsed.exit.is_none();
    let died_early = if !before_init {
        None
    } else if panicked {
        Some("the guest kernel panicked")
    } else if status.is_some_and(|s| s.code().is_none()) {
        // No exit code: killed by a signal.
        Some("QEMU died")
    } else {
        None
    };
    Ok((
        Outcome {
            exit: parsed.exit,
            failure,
            files,
            boot,
            total,
            marks: marks.lock().map(|m| m.clone()).unwrap_or_default(),
        },
        died_early,
    ))
}

/// QEMU's exit status, or `None` once it ran past `timeout` (it is killed then).
fn wait_at_most(
    child: &mut std::process::Child,
    start: Instant,
    timeout: Duration,
) -> anyhow::Result<Option<std::process::ExitStatus>> {
    loop {
        if let Some(status) = child.try_wait().context("waiting for QEMU")? {
            return Ok(Some(status));
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// Write the result files the guest sent into `out_dir`: their names and paths.
fn save_files(out_dir: &Path, sent: &[(String, String)]) -> anyhow::Result<Vec<(String, PathBuf)>> {
    let mut files = Vec::new();
    for (name, body) in sent {
        // Names come from our own suite, but keep them inside out_dir regardless.
        let safe: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || ".-_".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let path = out_dir.join(&safe);
        fs::write(&path, body).with_context(|| format!("writing {}", path.display()))?;
        files.push((name.clone(), path));
    }
    Ok(files)
}

/// What the console reader shares with the waiting thread.
struct Console {
    prefix: String,
    /// The last lines, for a failure report.
    tail: Arc<Mutex<VecDeque<String>>>,
    /// When /init first spoke.
    booted: Arc<Mutex<Option<Duration>>>,
    /// Whether the kernel said it panicked (the panic line can scroll out of the tail).
    panicked: Arc<AtomicBool>,
    /// Headings, `WORD: [T s] TEXT`.
    marks: Arc<Mutex<Vec<String>>>,
    start: Instant,
}

impl Console {
    /// Echo the console with a prefix until QEMU closes it.
    fn stream(&self, stdout: impl Read) {
        let mut reader = BufReader::new(stdout);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let line = String::from_utf8_lossy(&buf);
            let line = line.trim_end_matches(['\n', '\r']).replace('\r', "");
            if line.starts_with("init: up after")
                && let Ok(mut b) = self.booted.lock()
            {
                b.get_or_insert(self.start.elapsed());
            }
            if line.contains("Kernel panic") {
                self.panicked.store(true, Ordering::Relaxed);
            }
            if is_mark(&line)
                && let Ok(mut m) = self.marks.lock()
            {
                m.push(line.clone());
            }
            println!("{} | {line}", self.prefix);
            if let Ok(mut t) = self.tail.lock() {
                if t.len() == TAIL_LINES {
                    t.pop_front();
                }
                t.push_back(line);
            }
        }
    }
}

/// Whether a console line is a heading of the suite's `say`: `WORD: [T s] TEXT`.
fn is_mark(line: &str) -> bool {
    line.split_once(": [").is_some_and(|(word, rest)| {
        !word.is_empty()
            && word.chars().all(|c| c.is_ascii_alphanumeric())
            && rest
                .split_once(" s] ")
                .is_some_and(|(t, _)| t.parse::<f64>().is_ok())
    })
}

/// What the guest wrote to its results port (`/dev/ttyS1`, `/dev/ttyAMA1`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Results {
    /// `=== FILE name ===` ... `=== END name ===` blocks.
    pub files: Vec<(String, String)>,
    /// `=== EXIT rc ===`.
    pub exit: Option<i32>,
}

/// Split the results stream into files and the exit status. A file cut off by a crash
/// is kept with what arrived; lines outside any block are ignored.
pub fn parse_results(text: &str) -> Results {
    let mut out = Results::default();
    let mut open: Option<(String, String)> = None;
    for raw in text.split('\n') {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let marker = line
            .strip_prefix("=== ")
            .and_then(|l| l.strip_suffix(" ==="));
        match (marker, &mut open) {
            (Some(m), Some((name, body))) if m.strip_prefix("END ") == Some(name.as_str()) => {
                out.files.push((std::mem::take(name), std::mem::take(body)));
                open = None;
            }
            (_, Some((_, body))) => {
                body.push_str(line);
                body.push('\n');
            }
            (Some(m), None) => {
                if let Some(name) = m.strip_prefix("FILE ") {
                    open = Some((name.to_owned(), String::new()));
                } else if let Some(rc) = m.strip_prefix("EXIT ") {
                    out.exit = rc.trim().parse().ok();
                }
            }
            (None, None) => {}
        }
    }
    if let Some(file) = open {
        out.files.push(file);
    }
    out
}

/// Whether the guest may colour its output: the host's standard output is a terminal and
/// `NO_COLOR` is unset or empty there (the rule tracer itself follows).
fn host_wants_colour() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// The `vm` command's own entry: boot, stream, return the guest's status.
pub fn command_line(argv: &[String]) -> (String, bool) {
    if argv.is_empty() {
        // No command: a shell on the console, when there is a terminal to type into.
        let interactive = std::io::stdin().is_terminal();
        let cmd = if interactive {
            "setsid cttyhack sh\n"
        } else {
            "echo 'no command given'\n"
        };
        return (cmd.to_owned(), interactive);
    }
    let words: Vec<String> = argv.iter().map(|a| util::shell_quote(a)).collect();
    (format!("{}\n", words.join(" ")), false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_load_after_what_they_depend_on() {
        let dir = std::env::temp_dir().join(format!("xtask-modules-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let module = |name: &str, depends: &str| {
            let p = dir.join(format!("{name}.ko"));
            fs::write(
                &p,
                format!("\x7fELF...\0license=GPL\0depends={depends}\0vermagic=6.1"),
            )
            .unwrap();
            p
        };
        // Listed as the cache did on 6.1, where virtio.ko needs virtio_ring.ko first.
        let list = [
            module("virtio", "virtio_ring"),
            module("virtio_ring", ""),
            module("virtio_net", "virtio_ring,virtio,net_failover"),
            module("net_failover", "failover"),
            module("failover", ""),
        ];
        let order: Vec<String> = load_order(&list)
            .unwrap()
            .iter()
            .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
            .collect();
        fs::remove_dir_all(&dir).unwrap();
        let at = |m: &str| order.iter().position(|o| o == m).unwrap();
        assert!(at("virtio_ring") < at("virtio"), "{order:?}");
        assert!(at("failover") < at("net_failover"), "{order:?}");
        assert!(at("net_failover") < at("virtio_net") && at("virtio") < at("virtio_net"));
        assert_eq!(order.len(), 5);
    }

    #[test]
    fn results_split_into_files_and_exit() {
        let text = "noise\r\n=== FILE a.json ===\r\n{\"x\": 1}\r\n=== END a.json ===\r\n=== FILE b ===\nline\n=== EXIT 3 ===\n=== END b ===\n=== EXIT 0 ===\n";
        let r = parse_results(text);
        assert_eq!(
            r.files,
            vec![
                ("a.json".into(), "{\"x\": 1}\n".into()),
                ("b".into(), "line\n=== EXIT 3 ===\n".into())
            ]
        );
        assert_eq!(r.exit, Some(0));
    }

    #[test]
    fn a_cut_off_file_is_kept_and_no_marker_means_no_exit() {
        let r = parse_results("=== FILE a ===\npartial");
        assert_eq!(r.files, vec![("a".into(), "partial\n".into())]);
        assert_eq!(r.exit, None);
    }

    #[test]
    fn commands_are_quoted_for_the_guest_shell() {
        let (cmd, interactive) =
            command_line(&["sh".into(), "-c".into(), "echo hi; exit 3".into()]);
        assert_eq!(cmd, "sh -c 'echo hi; exit 3'\n");
        assert!(!interactive);
    }
}

/// How the commands that boot a VM run QEMU (their `--timeout` and `--kvm`).
#[derive(Debug, clap::Args)]
pub struct QemuArgs {
    /// Kill the VM after this many seconds: the suite's longest boot (6.12, with the
    /// hardening and 2,000-cgroup cases) takes the most, docs/tests.md says how long.
    #[arg(long, default_value_t = 3600)]
    pub timeout: u64,
    /// Use KVM instead of TCG emulation (it hangs where nested virtualisation is broken).
    #[arg(long)]
    pub kvm: bool,
}
