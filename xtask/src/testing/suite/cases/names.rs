//! Cgroups named by what runs in them: laid out as containerd, a cgroupfs kubelet, CRI-O,
//! a pod's sandbox, docker, podman and a systemd service lay them out, beside a plain one,
//! with the kubelet's links, pod directories and OCI bundles made after them; each view
//! (the capture and its report, `top --frames`, `serve`) must name each exactly.

use tracer_core::{
    cgroup_names::Qos,
    snapshot::{Probe, Snapshot},
};

use crate::{
    exposition,
    testing::{
        harness::{Verdict, wrong},
        suite::{
            case::{On, SINKS_KERNEL, VmCase},
            results::Results,
            views::{first_word, last_view, rmdirs_in},
        },
    },
};

/// The names case: a capture, its report, then `top --frames` and `serve` over the same
/// workload again.
pub const NAMES: VmCase = VmCase {
    name: "names::names",
    heading: "names (cgroups laid out as each runtime lays them out, named after they are made)",
    on: On::Only(&[SINKS_KERNEL]),
    workload: r#"
# The ids and UIDs are those of `named_cgroups` below. Each cgroup gets its own count
# of mkdir + rmdir; the kubelet's links and pod directories and the OCI
# bundles appear only after every cgroup is made and used, under a root of their own.
nr=/tmp/names-root
C1=$(hex c1c1c1c1) C2=$(hex c2c2c2c2) C3=$(hex c3c3c3c3) P1=$(hex a0a0a0a0) C4=$(hex d4d4d4d4) C5=$(hex e5e5e5e5)
U1=11111111-1111-4111-8111-111111111111 U1s=11111111_1111_4111_8111_111111111111
U2=22222222-2222-4222-8222-222222222222
U3=33333333-3333-4333-8333-333333333333 U3s=33333333_3333_4333_8333_333333333333
pod1=kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod$U1s.slice
names_cgroups="$pod1/cri-containerd-$C1.scope:11 kubepods/besteffort/pod$U2/$C2:12 kubepods.slice/kubepods-pod$U3s.slice/crio-$C3.scope:13 $pod1/cri-containerd-$P1.scope:14 system.slice/docker-$C4.scope:15 machine.slice/libpod-$C5.scope:16 system.slice/names-test.service:17 names-plain:18"
mkdir -p /tmp/namesw
rm -rf $nr
cat > /tmp/names.sh <<NAMES
for spec in $names_cgroups; do mkdir -p /sys/fs/cgroup/\${spec%:*} || exit 1; done
for spec in $names_cgroups; do sh /tmp/half.sh \${spec%:*} namesw \${spec##*:} || exit 1; done
sleep 1
mkdir -p $nr/var/log/containers $nr/var/log/pods/shop_cart-7d9f_$U1/cart $nr/var/log/pods/blog_web-0_$U2/nginx
ln -s ../pods/shop_cart-7d9f_$U1/cart/0.log $nr/var/log/containers/cart-7d9f_shop_cart-$C1.log
ln -s ../pods/blog_web-0_$U2/nginx/0.log $nr/var/log/containers/web-0_blog_nginx-$C2.log
b=$nr/run/containerd/io.containerd.runtime.v2.task/k8s.io/$P1
mkdir -p \$b
echo '{"ociVersion":"1.2.0","annotations":{"io.kubernetes.cri.container-type":"sandbox","io.kubernetes.cri.sandbox-name":"cart-7d9f","io.kubernetes.cri.sandbox-namespace":"shop","io.kubernetes.cri.sandbox-uid":"$U1"}}' > \$b/config.json
b=$nr/run/containers/storage/overlay-containers/$C3/userdata
mkdir -p \$b
echo '{"ociVersion":"1.2.0","annotations":{"io.kubernetes.pod.name":"db-0","io.kubernetes.pod.namespace":"ops","io.kubernetes.pod.uid":"$U3","io.kubernetes.container.name":"postgres","io.kubernetes.cri-o.ContainerType":"container"}}' > \$b/config.json
sleep 1
NAMES
capture names "sh /tmp/names.sh" --names-root $nr
tracer report /tmp/names.json > /tmp/names.txt 2>&1
emit names.txt /tmp/names.txt
for spec in $names_cgroups; do rmdir /sys/fs/cgroup/${spec%:*}; done
# The same workload again, its cgroups and names made anew, under `tracer top --frames` and
# `tracer serve` at once. A cgroup's names are looked up 0, 1, 3, 7, 15 and 31 refreshes
# after it is made: 36 refreshes see names made up to 31 s after their cgroups (on a loaded
# host, 6.12's were first found at the 15th).
rm -rf $nr
ifconfig lo 127.0.0.1 up 2>/dev/null || ip link set lo up 2>/dev/null
tracer serve --listen 127.0.0.1:29111 --interval 1s --names-root $nr > /tmp/names_serve.log 2>&1 &
srv=$!
i=0
while [ $i -lt 1200 ] && ! wget -q -O /dev/null http://127.0.0.1:29111/metrics 2>/dev/null; do
    sleep 0.1; i=$((i+1))
done
# Once serve answers: top's refreshes all come after the workload starts, as counted above.
timeout 200 tracer top --frames 36 --interval 1s --view cgroups --width 160 --height 40 \
    --names-root $nr > /tmp/names_top.txt 2> /tmp/names_top.err &
top=$!
wait_for /tmp/names_top.txt "refresh 1/36"
sh /tmp/names.sh >> /tmp/names_top.err 2>&1
echo "workload exit $?" >> /tmp/names_top.err
wait $top
echo "exit $?" >> /tmp/names_top.err
wget -q -O /tmp/names_serve.metrics http://127.0.0.1:29111/metrics
kill $srv
wait $srv
echo "exit $?" >> /tmp/names_serve.log
emit names_top.txt /tmp/names_top.txt
emit names_top.err /tmp/names_top.err
[ -f /tmp/names_serve.metrics ] && emit names_serve.metrics /tmp/names_serve.metrics
emit names_serve.log /tmp/names_serve.log
for spec in $names_cgroups; do rmdir /sys/fs/cgroup/${spec%:*}; done
for d in $pod1 kubepods.slice/kubepods-burstable.slice kubepods.slice/kubepods-pod$U3s.slice kubepods.slice kubepods/besteffort/pod$U2 kubepods/besteffort kubepods system.slice machine.slice; do
    rmdir /sys/fs/cgroup/$d
done
rm -rf $nr /tmp/namesw
"#,
    judge: |j| {
        j.capture(
            "auto",
            "names: cgroups of containerd, a cgroupfs kubelet, CRI-O, a pod's sandbox, docker, podman, a systemd service and a plain one, named after they were made (kubelet links and pod directories, OCI bundles): each named exactly, the plain one not, 11 to 18 vfs_rmdir each",
            "names",
            names,
        );
        j.verdict(
            "auto",
            "names: the report shows each cgroup by its pod or unit",
            &["names.txt"],
            names_in_report,
        );
        j.verdict(
            "auto",
            "names: top --frames over the same workload shows each cgroup by its pod, container or unit, the plain one by its path, 11 to 18 rmdirs each",
            &["names_top.txt", "names_top.err"],
            names_top,
        );
        j.verdict(
            "auto",
            "names: serve's tracer_cgroup_info names each cgroup exactly (namespace, pod, container, id, runtime, unit), none for the plain one, 11 to 18 rmdir and vfs_rmdir each",
            &["names_serve.metrics", "names_serve.log"],
            names_serve,
        );
    },
    ..VmCase::BASE
};

/// A cgroup of the names case, laid out as a runtime lays it out.
pub struct NamedCgroup {
    /// Its path under the cgroup2 root.
    pub path: String,
    /// What every view must call it (`capture`'s report, `top`, `serve`'s
    /// `tracer_cgroup_info`); None: a plain cgroup, known by its path alone.
    pub name: Option<&'static str>,
    /// Its pod's quality-of-service class, which its path says.
    pub qos: Option<Qos>,
    /// mkdir + rmdir pairs the workload makes in it.
    pub rmdirs: u64,
}

/// The names case's cgroups, with the names a view must give each once the kubelet's
/// links and pod directories and the OCI bundles appeared after them. The ids and UIDs
/// are the suite's.
pub fn named_cgroups() -> [NamedCgroup; 8] {
    let hex = |h: &str| h.repeat(8);
    let pod1 = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod11111111_1111_4111_8111_111111111111.slice";
    let pod3 = "/kubepods.slice/kubepods-pod33333333_3333_4333_8333_333333333333.slice";
    let u2 = "22222222-2222-4222-8222-222222222222";
    let named = |path: String, name, qos, rmdirs| NamedCgroup {
        path,
        name,
        qos,
        rmdirs,
    };
    [
        named(
            format!("{pod1}/cri-containerd-{}.scope", hex("c1c1c1c1")),
            Some("shop/cart-7d9f/cart"),
            Some(Qos::Burstable),
            11,
        ),
        named(
            format!("/kubepods/besteffort/pod{u2}/{}", hex("c2c2c2c2")),
            Some("blog/web-0/nginx"),
            Some(Qos::BestEffort),
            12,
        ),
        named(
            format!("{pod3}/crio-{}.scope", hex("c3c3c3c3")),
            Some("ops/db-0/postgres"),
            Some(Qos::Guaranteed),
            13,
        ),
        named(
            format!("{pod1}/cri-containerd-{}.scope", hex("a0a0a0a0")),
            Some("shop/cart-7d9f/POD"),
            Some(Qos::Burstable),
            14,
        ),
        named(
            format!("/system.slice/docker-{}.scope", hex("d4d4d4d4")),
            Some("docker:d4d4d4d4d4d4"),
            None,
            15,
        ),
        named(
            format!("/machine.slice/libpod-{}.scope", hex("e5e5e5e5")),
            Some("podman:e5e5e5e5e5e5"),
            None,
            16,
        ),
        named(
            "/system.slice/names-test.service".to_owned(),
            Some("names-test.service"),
            None,
            17,
        ),
        named("/names-plain".to_owned(), None, None, 18),
    ]
}

/// The names case's capture: each cgroup of [`named_cgroups`] with its exact rmdir count,
/// called what a capture whose names appeared after the cgroups must call it; the plain
/// cgroup carries no name.
pub fn names(s: &Snapshot, _version: (u32, u32)) -> Verdict {
    let mut seen = Vec::new();
    for c in named_cgroups() {
        let path = &c.path;
        let id = s
            .cgroups
            .iter()
            .find(|(_, p)| *p == path)
            .map(|(id, _)| *id)
            .ok_or_else(|| format!("no cgroup {path} in the capture"))?;
        let n = s
            .total_where(|k| k.probe == Probe::VfsRmdir && k.cgroup == id)
            .count();
        if n != c.rmdirs {
            return Err(wrong!("{path}: vfs_rmdir = {n}, expected {}", c.rmdirs));
        }
        let names = s.cgroup_names.get(&id);
        let got = names.and_then(|n| n.label(path));
        if got.as_deref() != c.name {
            return Err(wrong!(
                "{path}: named {got:?}, expected {:?} (names: {names:?})",
                c.name
            ));
        }
        if names.and_then(|n| n.qos) != c.qos {
            return Err(wrong!("{path}: QoS class {names:?}, expected {:?}", c.qos));
        }
        seen.push(format!("{} = {n}", c.name.unwrap_or(path)));
    }
    Ok(format!("vfs_rmdir: {}", seen.join(", ")))
}

/// `tracer report` of the names capture: its per-cgroup table shows each cgroup by what
/// runs in it (a row starts with the name), the plain cgroup by its path, and no
/// container's path.
pub fn names_in_report(files: &Results<'_>) -> Verdict {
    let text = files.read("names.txt")?;
    let table = text
        .split("per cgroup")
        .nth(1)
        .ok_or_else(|| format!("no per-cgroup table in the report:\n{text}"))?;
    let wanted = named_cgroups();
    let missing: Vec<&str> = wanted
        .iter()
        .map(|c| c.name.unwrap_or(&c.path))
        .filter(|w| !table.lines().any(|l| l.trim_start().starts_with(w)))
        .collect();
    if !missing.is_empty() {
        return Err(wrong!("no row of {missing:?} in:\n{table}"));
    }
    if let Some(l) = table
        .lines()
        .find(|l| l.contains("kubepods") || l.contains(".scope"))
    {
        return Err(wrong!("a container shown by its path: {l}"));
    }
    Ok(format!("{} cgroups, each a row by its name", wanted.len()))
}

/// The names case under `tracer top --frames`: its last Cgroups frame shows each cgroup of
/// [`named_cgroups`] by its name (the plain one by its path, a named one never by its
/// path) with its exact rmdir count.
pub fn names_top(files: &Results<'_>) -> Verdict {
    let text = files.read("names_top.txt")?;
    let block = last_view(&text, "Cgroups")
        .ok_or_else(|| files.with_log("names_top.err", "no Cgroups frame".into()))?;
    names_in_frame(&block)
}

/// [`names_top`]'s judgement of one Cgroups frame.
fn names_in_frame(block: &[&str]) -> Verdict {
    let mut seen = Vec::new();
    for c in named_cgroups() {
        let shown = c.name.unwrap_or(&c.path);
        let row = block
            .iter()
            .find(|l| first_word(l) == Some(shown))
            .ok_or_else(|| {
                format!(
                    "no row of {shown} ({}) in the last frame:\n{}",
                    c.path,
                    block.join("\n")
                )
            })?;
        if rmdirs_in(row) != Some(c.rmdirs) {
            return Err(wrong!(
                "{shown}: expected {} rmdirs, the row reads: {row}",
                c.rmdirs
            ));
        }
        if c.name.is_some()
            && let Some(l) = block.iter().find(|l| first_word(l) == Some(&c.path))
        {
            return Err(wrong!("{shown} shown by its path too: {l}"));
        }
        seen.push(format!("{shown} {}", c.rmdirs));
    }
    Ok(format!("rows: {}", seen.join(", ")))
}

/// The names case under `tracer serve`: for each cgroup of [`named_cgroups`] with a name,
/// one `tracer_cgroup_info` series whose labels name it as the capture must (namespace,
/// pod and container, or the runtime and id, or the unit) and carry its path's container
/// id, runtime and unit, nothing else; none for the plain cgroup; each cgroup's rmdir and
/// `vfs_rmdir` counts exact.
pub fn names_serve(files: &Results<'_>) -> Verdict {
    let text = files
        .read("names_serve.metrics")
        .map_err(|e| files.with_log("names_serve.log", e))?;
    names_in_scrape(&text)
}

/// [`names_serve`]'s judgement of one scrape.
fn names_in_scrape(text: &str) -> Verdict {
    use tracer_core::cgroup_names::{CgroupNames, Runtime};
    let mut seen = Vec::new();
    let samples = exposition::samples(text)?;
    for c in named_cgroups() {
        let path = c.path.as_str();
        for probe in ["rmdir", "vfs_rmdir"] {
            let n = exposition::sum(
                text,
                "tracer_cgroup_calls_total",
                &[("probe", probe), ("cgroup", path)],
            );
            #[expect(clippy::cast_precision_loss, reason = "a count under 100")]
            let want = c.rmdirs as f64;
            if n != Some(want) {
                return Err(wrong!(
                    "{probe} _count of {path} = {n:?}, expected {}",
                    c.rmdirs
                ));
            }
        }
        let info: Vec<&exposition::Sample> = samples
            .iter()
            .filter(|s| s.name == "tracer_cgroup_info" && s.label("cgroup") == Some(path))
            .collect();
        let Some(want) = c.name else {
            if !info.is_empty() {
                return Err(wrong!("the plain cgroup has {info:?}"));
            }
            seen.push(format!("{path}: no info, {} rmdir", c.rmdirs));
            continue;
        };
        let [sample] = info.as_slice() else {
            return Err(wrong!(
                "{path}: {} tracer_cgroup_info series, expected one: {info:?}",
                info.len()
            ));
        };
        let labels = &sample.labels;
        let label = |k: &str| sample.label(k).map(str::to_owned);
        let got = CgroupNames {
            namespace: label("namespace"),
            pod: label("pod"),
            container: label("container"),
            container_id: label("container_id"),
            runtime: labels.get("runtime").and_then(|r| Runtime::from_name(r)),
            unit: label("unit"),
            ..CgroupNames::default()
        };
        let of_path = CgroupNames::from_path(path);
        let known = [
            "cgroup",
            "namespace",
            "pod",
            "container",
            "container_id",
            "runtime",
            "unit",
        ];
        if got.label(path).as_deref() != Some(want)
            || sample.label("container_id") != of_path.container_id.as_deref()
            || sample.label("runtime") != of_path.runtime.map(Runtime::name)
            || sample.label("unit") != of_path.unit.as_deref()
            || labels.keys().any(|k| !known.contains(&k.as_str()))
            || (sample.value - 1.0).abs() > f64::EPSILON
        {
            return Err(wrong!(
                "{path}: expected {want} (container id {:?}, runtime {:?}, unit {:?}), got {sample}",
                of_path.container_id,
                of_path.runtime.map(Runtime::name),
                of_path.unit
            ));
        }
        seen.push(format!("{want}, {} rmdir", c.rmdirs));
    }
    Ok(seen.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scrape of the names case as `tracer serve` must give it: each cgroup's counts,
    /// the info series of each named one.
    fn names_scrape() -> String {
        use std::fmt::Write;

        use tracer_core::cgroup_names::{CgroupNames, Runtime};
        let mut text = String::new();
        for c in named_cgroups() {
            let (path, n) = (&c.path, c.rmdirs);
            writeln!(
                text,
                "tracer_cgroup_calls_total{{probe=\"rmdir\",cgroup=\"{path}\"}} {n}"
            )
            .unwrap();
            let caller = "caller=\"rmdir\"";
            writeln!(
                text,
                "tracer_cgroup_calls_total{{probe=\"vfs_rmdir\",{caller},cgroup=\"{path}\"}} {n}"
            )
            .unwrap();
            let Some(name) = c.name else { continue };
            let p = CgroupNames::from_path(path);
            let mut labels = vec![format!("cgroup=\"{path}\"")];
            if let [ns, pod, container] = name.split('/').collect::<Vec<_>>()[..] {
                labels.push(format!(
                    "namespace=\"{ns}\",pod=\"{pod}\",container=\"{container}\""
                ));
            }
            labels.extend(p.container_id.map(|v| format!("container_id=\"{v}\"")));
            labels.extend(
                p.runtime
                    .map(|v| format!("runtime=\"{}\"", Runtime::name(v))),
            );
            labels.extend(p.unit.map(|v| format!("unit=\"{v}\"")));
            writeln!(text, "tracer_cgroup_info{{{}}} 1", labels.join(",")).unwrap();
        }
        text
    }

    #[test]
    fn the_names_scrape_is_judged_by_every_label_and_count() {
        let good = names_scrape();
        assert!(
            names_in_scrape(&good).is_ok(),
            "{:?}",
            names_in_scrape(&good)
        );
        for (from, to) in [
            // Another pod's name, a runtime left out, a count off by one.
            ("pod=\"web-0\"", "pod=\"web-1\""),
            (",runtime=\"docker\"", ""),
            ("names-plain\"} 18", "names-plain\"} 17"),
        ] {
            assert!(good.contains(from), "{from}");
            let bad = good.replace(from, to);
            assert!(names_in_scrape(&bad).is_err(), "{from} -> {to}");
        }
        let plain = format!("{good}tracer_cgroup_info{{cgroup=\"/names-plain\",unit=\"x\"}} 1\n");
        assert!(names_in_scrape(&plain).is_err());
    }

    #[test]
    fn the_names_frame_wants_each_name_with_its_rmdirs() {
        let rows: Vec<String> = named_cgroups()
            .iter()
            .map(|c| format!("{}   -   -   {}   0", c.name.unwrap_or(&c.path), c.rmdirs))
            .collect();
        let block: Vec<&str> = rows.iter().map(String::as_str).collect();
        assert!(
            names_in_frame(&block).is_ok(),
            "{:?}",
            names_in_frame(&block)
        );
        assert!(names_in_frame(&block[1..]).is_err());
        let by_path = format!("{} - 0 0", named_cgroups()[0].path);
        let mut twice = block.clone();
        twice.push(&by_path);
        assert!(names_in_frame(&twice).is_err());
        let off = rows[0].replace("   11   0", "   10   0");
        let mut miscounted = block.clone();
        miscounted[0] = &off;
        assert!(names_in_frame(&miscounted).is_err());
    }
}
