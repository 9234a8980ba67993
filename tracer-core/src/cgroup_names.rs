//! What a cgroup v2 path says about what runs in it: the systemd unit, the container and
//! its runtime, the Kubernetes pod's UID and quality-of-service class; and [`CgroupNames`], those facts
//! with the names the node adds (namespace, pod, container), as every view shows them.
//!
//! Pure: a path in, facts out. The names a path does not carry (a pod's name, a
//! container's) are looked up on the node by `tracer-host`'s `names`.
//!
//! Layouts recognised (cgroup v2; `<id>` is 64 hex digits, `<uid>` a pod UID):
//!
//! | runtime | path |
//! |---|---|
//! | kubelet, systemd driver | `/kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid, `_` for `-`>.slice/<container>` |
//! | kubelet, cgroupfs driver | `/kubepods/<qos>/pod<uid>/<id>` |
//! | containerd (CRI) | `cri-containerd-<id>.scope` |
//! | CRI-O | `crio-<id>.scope` (its monitor: `crio-conmon-<id>.scope`) |
//! | docker | `/system.slice/docker-<id>.scope`, `/docker/<id>` |
//! | podman | `/machine.slice/libpod-<id>.scope`, rootless `.../libpod-<id>.scope/container` (its monitor: `libpod-conmon-<id>.scope`) |
//!
//! A Guaranteed pod has no class level in its path (`/kubepods.slice/kubepods-pod<uid>.slice`,
//! `/kubepods/pod<uid>`). A static pod's UID is 32 hex digits without dashes. A cgroup
//! under a container's belongs to that container.

/// A container runtime, as its cgroup names show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Runtime {
    /// `docker-<id>.scope` or `/docker/<id>`.
    Docker,
    /// `libpod-<id>.scope`.
    Podman,
    /// `cri-containerd-<id>.scope`.
    Containerd,
    /// `crio-<id>.scope`.
    CriO,
}

impl Runtime {
    /// Every runtime, for reading names back.
    pub const ALL: [Runtime; 4] = [
        Runtime::Docker,
        Runtime::Podman,
        Runtime::Containerd,
        Runtime::CriO,
    ];

    /// Name in reports, metrics and the capture file.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Docker => "docker",
            Runtime::Podman => "podman",
            Runtime::Containerd => "containerd",
            Runtime::CriO => "cri-o",
        }
    }

    /// The runtime called `name` (see [`Runtime::name`]).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Runtime> {
        Self::ALL.into_iter().find(|r| r.name() == name)
    }
}

/// A Kubernetes pod's quality-of-service class, which the kubelet files its cgroup under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Qos {
    /// Requests equal limits for every resource: no level of its own in the path.
    Guaranteed,
    /// `kubepods-burstable.slice`, `/kubepods/burstable`.
    Burstable,
    /// `kubepods-besteffort.slice`, `/kubepods/besteffort`.
    BestEffort,
}

impl Qos {
    /// Every class, for reading names back.
    pub const ALL: [Qos; 3] = [Qos::Guaranteed, Qos::Burstable, Qos::BestEffort];

    /// The Kubernetes name (`status.qosClass`).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Qos::Guaranteed => "Guaranteed",
            Qos::Burstable => "Burstable",
            Qos::BestEffort => "BestEffort",
        }
    }

    /// The class called `name` (see [`Qos::name`]).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Qos> {
        Self::ALL.into_iter().find(|q| q.name() == name)
    }

    /// The kubelet's level in a path (`burstable`, `besteffort`).
    fn from_level(level: &str) -> Option<Qos> {
        match level {
            "burstable" => Some(Qos::Burstable),
            "besteffort" => Some(Qos::BestEffort),
            _ => None,
        }
    }
}

/// The name a pod's sandbox (its "pause" container) gets as its container name, as the
/// kubelet and cAdvisor have long called it.
pub const SANDBOX_CONTAINER: &str = "POD";

/// What is known of the workload in one cgroup: from its path ([`CgroupNames::from_path`])
/// and from the node (namespace, pod and container names). Every field is optional; a
/// plain cgroup carries none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CgroupNames {
    /// The pod's Kubernetes namespace.
    pub namespace: Option<String>,
    /// The pod's name.
    pub pod: Option<String>,
    /// The pod's UID, with dashes (`1b2c3d4e-...`), or a static pod's 32 hex digits.
    pub pod_uid: Option<String>,
    /// The pod's quality-of-service class.
    pub qos: Option<Qos>,
    /// The container's name in its pod ([`SANDBOX_CONTAINER`] for the pod's sandbox).
    pub container: Option<String>,
    /// The container's id (64 hex digits).
    pub container_id: Option<String>,
    /// The runtime that made the container, when its path says (the cgroupfs driver's
    /// `/kubepods/.../<id>` does not).
    pub runtime: Option<Runtime>,
    /// The systemd unit (`.service`, `.scope`, else `.slice`) of a cgroup that is no
    /// container's: `nginx.service`, `session-3.scope`, `libpod-conmon-<id>.scope`.
    pub unit: Option<String>,
}

/// How many hex digits of a container id a short form shows (as `docker ps` does).
const SHORT_ID: usize = 12;

impl CgroupNames {
    /// What the path of a cgroup (relative to the cgroup2 root, `/a/b`) says.
    #[must_use]
    pub fn from_path(path: &str) -> CgroupNames {
        let mut out = CgroupNames::default();
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        let mut slice = None;
        for (i, part) in parts.iter().enumerate() {
            let parent = i.checked_sub(1).map(|j| parts[j]);
            if let Some((runtime, id)) = container_of(part, parent) {
                out.runtime = runtime;
                out.container_id = Some(id.to_owned());
                // Below a container's cgroup: the container's (podman's `container`,
                // systemd inside it).
                break;
            }
            if let Some((qos, uid)) = pod_of(part, &parts[..i]) {
                out.qos = Some(qos);
                out.pod_uid = Some(uid);
                continue;
            }
            if let Some(stem) = part.strip_suffix(".slice") {
                if !stem.is_empty() {
                    slice = Some(*part);
                }
            } else if is_unit(part) {
                out.unit = Some((*part).to_owned());
            }
        }
        if out.container_id.is_some() || out.pod_uid.is_some() {
            out.unit = None;
        } else if out.unit.is_none() {
            out.unit = slice.map(str::to_owned);
        }
        out
    }

    /// Whether nothing is known.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        *self == CgroupNames::default()
    }

    /// Whether the cgroup is a pod's or a pod's container's.
    #[must_use]
    pub fn in_pod(&self) -> bool {
        self.pod_uid.is_some() || self.pod.is_some()
    }

    /// What a view calls the cgroup at `path`: `namespace/pod/container` for a pod's
    /// container (`namespace/pod` for the pod itself), a container without a pod by its
    /// runtime and short id (`docker:3f9a1b2c4d5e`), else its unit (`nginx.service`, and
    /// `nginx.service/worker` for a cgroup the unit made under its own); None when none is
    /// known (show the path).
    #[must_use]
    pub fn label(&self, path: &str) -> Option<String> {
        let container = || {
            self.container_id.as_ref().map(|id| {
                let short = id.get(..SHORT_ID).unwrap_or(id);
                format!(
                    "{}:{short}",
                    self.runtime.map_or("container", Runtime::name)
                )
            })
        };
        if let (Some(ns), Some(pod)) = (&self.namespace, &self.pod) {
            let mut s = format!("{ns}/{pod}");
            if let Some(c) = self.container.clone().or_else(container) {
                s.push('/');
                s.push_str(&c);
            }
            return Some(s);
        }
        if let Some(uid) = &self.pod_uid {
            let mut s = format!("pod:{uid}");
            if let Some(c) = self.container.clone().or_else(container) {
                s.push('/');
                s.push_str(&c);
            }
            return Some(s);
        }
        container().or_else(|| {
            let unit = self.unit.as_ref()?;
            let below = path
                .find(&format!("/{unit}/"))
                .map_or(unit.as_str(), |at| &path[at + 1..]);
            Some(below.to_owned())
        })
    }
}

/// A systemd unit name other than a slice: `name.service`, `name.scope` and the rest of
/// systemd's unit types that can hold processes.
fn is_unit(part: &str) -> bool {
    part.rsplit_once('.')
        .is_some_and(|(stem, kind)| !stem.is_empty() && matches!(kind, "service" | "scope"))
}

/// 64 lowercase hex digits: a container id.
fn is_container_id(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The runtime and container id `part` names (`parent` is the component above it), or
/// None for anything else, a runtime's monitor (`*-conmon-<id>.scope`) included.
fn container_of<'a>(part: &'a str, parent: Option<&str>) -> Option<(Option<Runtime>, &'a str)> {
    let stem = part.strip_suffix(".scope").unwrap_or(part);
    let prefixed = [
        ("cri-containerd-", Runtime::Containerd),
        ("crio-", Runtime::CriO),
        ("docker-", Runtime::Docker),
        ("libpod-", Runtime::Podman),
    ];
    for (prefix, runtime) in prefixed {
        if let Some(id) = stem.strip_prefix(prefix) {
            // `crio-conmon-<id>`, `libpod-conmon-<id>`: not hex, so not a container.
            return is_container_id(id).then_some((Some(runtime), id));
        }
    }
    if is_container_id(part) {
        // `/docker/<id>`; under a cgroupfs kubelet's pod (`pod<uid>/<id>`) the runtime is
        // not in the path.
        let runtime = (parent == Some("docker")).then_some(Runtime::Docker);
        return Some((runtime, part));
    }
    None
}

/// The quality-of-service class and UID (with dashes) of the pod whose cgroup `part` is, given the
/// components above it; None when it is no pod's.
fn pod_of(part: &str, above: &[&str]) -> Option<(Qos, String)> {
    if let Some(stem) = part.strip_suffix(".slice") {
        // systemd driver: `[<prefix>-]kubepods[-<qos>]-pod<uid with _>.slice`, the prefix
        // being a `--cgroup-root` of the kubelet's (kind's `kubelet-`).
        let (before, uid) = stem.rsplit_once("-pod")?;
        let uid = pod_uid(&uid.replace('_', "-"))?;
        let qos = if before == "kubepods" || before.ends_with("-kubepods") {
            Qos::Guaranteed
        } else {
            let (kubepods, level) = before.rsplit_once('-')?;
            if !(kubepods == "kubepods" || kubepods.ends_with("-kubepods")) {
                return None;
            }
            Qos::from_level(level)?
        };
        return Some((qos, uid));
    }
    // cgroupfs driver: `kubepods/[<qos>/]pod<uid>`.
    let uid = pod_uid(part.strip_prefix("pod")?)?;
    match above {
        [.., "kubepods"] => Some((Qos::Guaranteed, uid)),
        [.., "kubepods", level] => Some((Qos::from_level(level)?, uid)),
        _ => None,
    }
}

/// `uid` when it is a pod UID: a UUID with dashes (`8-4-4-4-12` hex digits), or the 32 hex
/// digits the kubelet gives a static pod.
fn pod_uid(uid: &str) -> Option<String> {
    let hex = |s: &str| s.bytes().all(|b| b.is_ascii_hexdigit());
    let ok = if uid.len() == 32 {
        hex(uid)
    } else {
        let groups: Vec<&str> = uid.split('-').collect();
        groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12]) && groups.iter().all(|g| hex(g))
    };
    ok.then(|| uid.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3f9a1b2c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8";
    const UID: &str = "1b2c3d4e-5f60-4718-89a0-b1c2d3e4f506";

    fn systemd_uid() -> String {
        UID.replace('-', "_")
    }

    /// The facts of a container of a pod.
    fn pod_container(qos: Qos, runtime: Option<Runtime>) -> CgroupNames {
        CgroupNames {
            pod_uid: Some(UID.to_owned()),
            qos: Some(qos),
            container_id: Some(ID.to_owned()),
            runtime,
            ..CgroupNames::default()
        }
    }

    #[test]
    fn kubelet_systemd_driver_with_containerd() {
        let u = systemd_uid();
        let path = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{u}.slice/cri-containerd-{ID}.scope"
        );
        assert_eq!(
            CgroupNames::from_path(&path),
            pod_container(Qos::Burstable, Some(Runtime::Containerd))
        );
        // The pod's own slice: its UID and class, no container.
        let pod =
            format!("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{u}.slice");
        let names = CgroupNames::from_path(&pod);
        assert_eq!(
            (
                names.pod_uid.as_deref(),
                names.qos,
                names.container_id,
                names.unit
            ),
            (Some(UID), Some(Qos::BestEffort), None, None)
        );
    }

    #[test]
    fn guaranteed_pods_have_no_qos_level() {
        let u = systemd_uid();
        let systemd = format!("/kubepods.slice/kubepods-pod{u}.slice/cri-containerd-{ID}.scope");
        assert_eq!(
            CgroupNames::from_path(&systemd),
            pod_container(Qos::Guaranteed, Some(Runtime::Containerd))
        );
        let cgroupfs = format!("/kubepods/pod{UID}/{ID}");
        assert_eq!(
            CgroupNames::from_path(&cgroupfs),
            pod_container(Qos::Guaranteed, None)
        );
    }

    #[test]
    fn kubelet_systemd_driver_with_cri_o_and_its_monitor() {
        let u = systemd_uid();
        let pod =
            format!("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{u}.slice");
        assert_eq!(
            CgroupNames::from_path(&format!("{pod}/crio-{ID}.scope")),
            pod_container(Qos::Burstable, Some(Runtime::CriO))
        );
        // conmon watches the container from the pod's slice: the pod's, no container's.
        let conmon = CgroupNames::from_path(&format!("{pod}/crio-conmon-{ID}.scope"));
        assert_eq!(
            (
                conmon.pod_uid.as_deref(),
                conmon.container_id,
                conmon.runtime
            ),
            (Some(UID), None, None)
        );
    }

    #[test]
    fn kubelet_cgroupfs_driver() {
        let path = format!("/kubepods/besteffort/pod{UID}/{ID}");
        assert_eq!(
            CgroupNames::from_path(&path),
            pod_container(Qos::BestEffort, None)
        );
        let burstable = CgroupNames::from_path(&format!("/kubepods/burstable/pod{UID}"));
        assert_eq!(
            (burstable.pod_uid.as_deref(), burstable.qos),
            (Some(UID), Some(Qos::Burstable))
        );
        // A kubelet under a cgroup root of its own (kind: `/kubelet.slice/kubelet-kubepods...`).
        let u = systemd_uid();
        let kind = format!(
            "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod{u}.slice/cri-containerd-{ID}.scope"
        );
        assert_eq!(
            CgroupNames::from_path(&kind),
            pod_container(Qos::BestEffort, Some(Runtime::Containerd))
        );
    }

    #[test]
    fn static_pods_have_hash_uids() {
        let hash = "8d2a8d1e2c5f4b0f1c7a3e6d9b8c1a2f";
        let path = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{hash}.slice/cri-containerd-{ID}.scope"
        );
        assert_eq!(CgroupNames::from_path(&path).pod_uid.as_deref(), Some(hash));
    }

    #[test]
    fn docker_under_systemd_and_cgroupfs() {
        let docker = CgroupNames {
            container_id: Some(ID.to_owned()),
            runtime: Some(Runtime::Docker),
            ..CgroupNames::default()
        };
        assert_eq!(
            CgroupNames::from_path(&format!("/system.slice/docker-{ID}.scope")),
            docker
        );
        assert_eq!(CgroupNames::from_path(&format!("/docker/{ID}")), docker);
        assert_eq!(
            docker.label("/docker/x").as_deref(),
            Some("docker:3f9a1b2c4d5e")
        );
    }

    #[test]
    fn podman_rootful_rootless_and_conmon() {
        let podman = CgroupNames {
            container_id: Some(ID.to_owned()),
            runtime: Some(Runtime::Podman),
            ..CgroupNames::default()
        };
        assert_eq!(
            CgroupNames::from_path(&format!("/machine.slice/libpod-{ID}.scope")),
            podman
        );
        let rootless = format!(
            "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID}.scope/container"
        );
        assert_eq!(CgroupNames::from_path(&rootless), podman);
        let conmon = format!("/machine.slice/libpod-conmon-{ID}.scope");
        assert_eq!(
            CgroupNames::from_path(&conmon),
            CgroupNames {
                unit: Some(format!("libpod-conmon-{ID}.scope")),
                ..CgroupNames::default()
            }
        );
    }

    #[test]
    fn systemd_units_and_slices() {
        let unit = |p: &str| CgroupNames::from_path(p).unit;
        assert_eq!(
            unit("/system.slice/nginx.service").as_deref(),
            Some("nginx.service")
        );
        // A cgroup a service made under its own belongs to it.
        assert_eq!(
            unit("/system.slice/nginx.service/worker").as_deref(),
            Some("nginx.service")
        );
        assert_eq!(
            unit("/user.slice/user-0.slice/session-1.scope").as_deref(),
            Some("session-1.scope")
        );
        assert_eq!(unit("/system.slice").as_deref(), Some("system.slice"));
        let n = CgroupNames::from_path("/system.slice/cron.service");
        assert_eq!(
            n.label("/system.slice/cron.service").as_deref(),
            Some("cron.service")
        );
        let worker = "/system.slice/nginx.service/worker";
        assert_eq!(
            CgroupNames::from_path(worker).label(worker).as_deref(),
            Some("nginx.service/worker")
        );
        assert!(!n.in_pod());
    }

    #[test]
    fn a_plain_cgroup_carries_nothing() {
        for path in [
            "/",
            "",
            "/tracer-test/plain",
            "/docker",
            "/kubepods",
            "/kubepods/burstable",
        ] {
            let n = CgroupNames::from_path(path);
            assert!(n.is_empty(), "{path}: {n:?}");
            assert_eq!(n.label(path), None, "{path}");
        }
        // Almost ids and UIDs: one hex digit short, or not hex.
        let short = &ID[1..];
        assert!(
            CgroupNames::from_path(&format!("/system.slice/docker-{short}.scope"))
                .container_id
                .is_none()
        );
        assert!(
            CgroupNames::from_path(&format!("/kubepods/pod{}/x", &UID[1..]))
                .pod_uid
                .is_none()
        );
        assert!(
            CgroupNames::from_path("/pod1b2c3d4e-5f60-4718-89a0-b1c2d3e4f506")
                .pod_uid
                .is_none()
        );
    }

    #[test]
    fn labels_say_namespace_pod_container_where_known() {
        let mut n = pod_container(Qos::Burstable, Some(Runtime::Containerd));
        assert_eq!(
            n.label(""),
            Some(format!("pod:{UID}/containerd:3f9a1b2c4d5e"))
        );
        n.namespace = Some("shop".into());
        n.pod = Some("cart-7d9f".into());
        assert_eq!(
            n.label("").as_deref(),
            Some("shop/cart-7d9f/containerd:3f9a1b2c4d5e")
        );
        n.container = Some("cart".into());
        assert_eq!(n.label("").as_deref(), Some("shop/cart-7d9f/cart"));
        assert_eq!(Runtime::from_name("cri-o"), Some(Runtime::CriO));
        assert_eq!(Qos::from_name("BestEffort"), Some(Qos::BestEffort));
    }
}
