//! Names of the pods, containers and units the cgroups hold, from the node alone: no API
//! server, and never a runtime's socket.
//!
//! A cgroup's path gives its unit, its container id and its pod's UID
//! ([`CgroupNames::from_path`]); the node gives the rest:
//!
//! - the kubelet's links `/var/log/containers/<pod>_<namespace>_<container>-<id>.log`: a
//!   container id to its pod, namespace and container;
//! - the kubelet's pod directories `/var/log/pods/<namespace>_<pod>_<uid>/`: a pod UID to
//!   its namespace and pod;
//! - the OCI bundle's `config.json` each runtime writes before starting a container, whose
//!   annotations name the pod, its namespace, its UID and the container, and say whether
//!   it is the pod's sandbox: containerd's under
//!   `/run/containerd/io.containerd.runtime.v2.task/<namespace>/<id>/`, CRI-O's and
//!   podman's under `/run/containers/storage/overlay-containers/<id>/userdata/`.
//!
//! The kubelet makes its links and directories after the runtime made the cgroup, so a
//! cgroup not yet named is looked up again on later refreshes, at growing intervals, up to
//! [`MAX_TRIES`] times. Once named, a cgroup costs no further reads. A source that is
//! missing (no kubelet, no runtime, not mounted) names nothing; it is not an error.

use std::{
    collections::{BTreeMap, HashMap},
    io::Read as _,
    path::{Path, PathBuf},
};

use tracer_core::cgroup_names::{CgroupNames, SANDBOX_CONTAINER};
use tracer_core::snapshot::CgroupId;

/// How many times a cgroup is looked up before it keeps the names found so far: at
/// refreshes 0, 1, 3, 7, ... after it was learned (2^tries - 1), about 8.5 minutes of
/// one-second refreshes for the last.
pub const MAX_TRIES: u32 = 10;

/// Most cgroups waiting for names at once; more are named from their paths alone.
pub const MAX_PENDING: usize = 4_096;

/// The largest `config.json` read (a bundle's is a few tens of KiB).
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Where the node's sources of names are: the host's `/` as this process sees it
/// (`--names-root`, e.g. `/host` in a container that mounts the host's `/var/log/pods`
/// at `/host/var/log/pods`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sources {
    root: PathBuf,
}

impl Default for Sources {
    fn default() -> Self {
        Self::under(Path::new("/"))
    }
}

impl Sources {
    /// The sources under `root` (the host's `/`).
    #[must_use]
    pub fn under(root: &Path) -> Self {
        Self {
            root: root.to_path_buf(),
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// The kubelet's container links, by container id: (pod, namespace, container).
    fn container_links(&self) -> HashMap<String, (String, String, String)> {
        list(&self.path("var/log/containers"))
            .filter_map(|name| parse_container_link(&name))
            .map(|(pod, ns, container, id)| (id, (pod, ns, container)))
            .collect()
    }

    /// The kubelet's pod directories, by pod UID: (namespace, pod).
    fn pod_dirs(&self) -> HashMap<String, (String, String)> {
        list(&self.path("var/log/pods"))
            .filter_map(|name| parse_pod_dir(&name))
            .map(|(ns, pod, uid)| (uid, (ns, pod)))
            .collect()
    }

    /// The annotations of container `id`'s OCI bundle, from whichever runtime has one.
    fn bundle_annotations(&self, id: &str) -> Option<Annotations> {
        let containerd = self.path("run/containerd/io.containerd.runtime.v2.task");
        let candidates = list(&containerd)
            .map(|ns| containerd.join(ns).join(id).join("config.json"))
            .chain(std::iter::once(
                self.path("run/containers/storage/overlay-containers")
                    .join(id)
                    .join("userdata/config.json"),
            ));
        candidates
            .filter_map(|p| read_small(&p))
            .find_map(|text| annotations(&text))
    }
}

/// The names of the entries of `dir`; none when it cannot be read.
fn list(dir: &Path) -> impl Iterator<Item = String> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
}

/// A file's text, when it exists, is readable and is at most [`MAX_CONFIG_BYTES`].
fn read_small(path: &Path) -> Option<String> {
    let file = std::fs::File::open(path).ok()?;
    let mut text = String::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_string(&mut text)
        .ok()?;
    (text.len() as u64 <= MAX_CONFIG_BYTES).then_some(text)
}

/// `<pod>_<namespace>_<container>-<64 hex id>.log`: pod, namespace, container, id.
/// Kubernetes names have no `_`; a container's name may have `-`.
fn parse_container_link(name: &str) -> Option<(String, String, String, String)> {
    let stem = name.strip_suffix(".log")?;
    let (rest, id) = stem.rsplit_once('-')?;
    if id.len() != 64 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut parts = rest.split('_');
    let (pod, ns, container) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || [pod, ns, container].iter().any(|s| s.is_empty()) {
        return None;
    }
    Some((
        pod.into(),
        ns.into(),
        container.into(),
        id.to_ascii_lowercase(),
    ))
}

/// `<namespace>_<pod>_<uid>`: namespace, pod, UID.
fn parse_pod_dir(name: &str) -> Option<(String, String, String)> {
    let mut parts = name.split('_');
    let (ns, pod, uid) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || [ns, pod, uid].iter().any(|s| s.is_empty()) {
        return None;
    }
    Some((ns.into(), pod.into(), uid.to_ascii_lowercase()))
}

/// What a bundle's annotations say of its container.
#[derive(Debug, Default, PartialEq, Eq)]
struct Annotations {
    namespace: Option<String>,
    pod: Option<String>,
    pod_uid: Option<String>,
    container: Option<String>,
    sandbox: bool,
}

/// The Kubernetes annotations of an OCI `config.json`: containerd's
/// `io.kubernetes.cri.*` or CRI-O's `io.kubernetes.pod.*`; None when it has neither.
fn annotations(config: &str) -> Option<Annotations> {
    let v: serde_json::Value = serde_json::from_str(config).ok()?;
    let a = v.get("annotations")?.as_object()?;
    let get = |k: &str| a.get(k).and_then(|v| v.as_str()).map(str::to_owned);
    let first = |keys: [&str; 2]| keys.into_iter().find_map(get);
    let out = Annotations {
        namespace: first([
            "io.kubernetes.cri.sandbox-namespace",
            "io.kubernetes.pod.namespace",
        ]),
        pod: first(["io.kubernetes.cri.sandbox-name", "io.kubernetes.pod.name"]),
        pod_uid: first(["io.kubernetes.cri.sandbox-uid", "io.kubernetes.pod.uid"]),
        container: first([
            "io.kubernetes.cri.container-name",
            "io.kubernetes.container.name",
        ]),
        sandbox: get("io.kubernetes.cri.container-type").as_deref() == Some("sandbox")
            || get("io.kubernetes.cri-o.ContainerType").as_deref() == Some("sandbox"),
    };
    (out != Annotations::default()).then_some(out)
}

/// A cgroup still missing names.
#[derive(Debug)]
struct Pending {
    /// Looked up this many times.
    tries: u32,
    /// The refresh it is next looked up at.
    next: u64,
}

/// Names cgroups as they are learned: from their paths at once, from the node when it has
/// them. See the module docs.
#[derive(Debug)]
pub struct Resolver {
    sources: Sources,
    /// Every cgroup learned and not forgotten with anything known of it.
    named: HashMap<CgroupId, CgroupNames>,
    /// The cgroups of pods whose names are not all known yet.
    pending: BTreeMap<CgroupId, Pending>,
    /// Refreshes so far.
    refreshes: u64,
}

impl Default for Resolver {
    /// A resolver of this host's sources.
    fn default() -> Self {
        Self::new(Sources::default())
    }
}

impl Resolver {
    /// A resolver reading `sources`.
    #[must_use]
    pub fn new(sources: Sources) -> Self {
        Self {
            sources,
            named: HashMap::new(),
            pending: BTreeMap::new(),
            refreshes: 0,
        }
    }

    /// A cgroup was learned (made, or found by a walk): named from its `path` now, and
    /// looked up on the node at the next [`Resolver::refresh`] if it is a container's or a
    /// pod's. Learning a cgroup again changes nothing.
    pub fn learn(&mut self, id: CgroupId, path: &str) {
        if self.named.contains_key(&id) || self.pending.contains_key(&id) {
            return;
        }
        let names = CgroupNames::from_path(path);
        if names.container_id.is_some() || names.pod_uid.is_some() {
            if self.pending.len() < MAX_PENDING {
                self.pending.insert(
                    id,
                    Pending {
                        tries: 0,
                        next: self.refreshes,
                    },
                );
            } else {
                log::debug!("{MAX_PENDING} cgroups wait for names: {path} keeps its own");
            }
        }
        if !names.is_empty() {
            self.named.insert(id, names);
        }
    }

    /// Forget a removed cgroup.
    pub fn forget(&mut self, id: CgroupId) {
        self.named.remove(&id);
        self.pending.remove(&id);
    }

    /// What is known of cgroup `id`.
    #[must_use]
    pub fn get(&self, id: CgroupId) -> Option<&CgroupNames> {
        self.named.get(&id)
    }

    /// How many cgroups still wait for names.
    #[must_use]
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Look up the cgroups due at this refresh; returns those whose names changed. Reads
    /// nothing when none is due.
    pub fn refresh(&mut self) -> Vec<CgroupId> {
        let now = self.refreshes;
        self.refreshes += 1;
        self.look_up(|p| p.next <= now)
    }

    /// Look up every cgroup still missing names, due or not (a capture's last chance);
    /// returns those whose names changed.
    pub fn refresh_all(&mut self) -> Vec<CgroupId> {
        self.refreshes += 1;
        self.look_up(|_| true)
    }

    fn look_up(&mut self, due: impl Fn(&Pending) -> bool) -> Vec<CgroupId> {
        let ids: Vec<CgroupId> = self
            .pending
            .iter()
            .filter(|(_, p)| due(p))
            .map(|(id, _)| *id)
            .collect();
        if ids.is_empty() {
            return Vec::new();
        }
        // One listing of each directory serves every cgroup looked up now.
        let mut links = None;
        let mut pods = None;
        let mut changed = Vec::new();
        for id in ids {
            let Some(names) = self.named.get_mut(&id) else {
                self.pending.remove(&id);
                continue;
            };
            let before = names.clone();
            fill(names, &self.sources, &mut links, &mut pods);
            if *names != before {
                changed.push(id);
            }
            let complete = complete(names);
            let Some(p) = self.pending.get_mut(&id) else {
                continue;
            };
            p.tries += 1;
            if complete || p.tries >= MAX_TRIES {
                self.pending.remove(&id);
            } else {
                // Due again 1, 2, 4, ... refreshes after this one.
                p.next = self.refreshes - 1 + (1 << (p.tries - 1));
            }
        }
        changed
    }
}

/// Whether nothing more is to be learned of a cgroup: a pod's has its namespace, pod and
/// container names (the pod's own slice, its namespace and pod); a container outside any
/// pod is known by its id.
fn complete(names: &CgroupNames) -> bool {
    if names.pod_uid.is_none() && names.pod.is_none() {
        return true;
    }
    names.namespace.is_some()
        && names.pod.is_some()
        && (names.container_id.is_none() || names.container.is_some())
}

/// Fill what the node says of a cgroup into `names`: the container's link, else its
/// bundle's annotations; the pod's directory for a pod still unnamed. `links` and `pods`
/// are read on first need.
fn fill(
    names: &mut CgroupNames,
    sources: &Sources,
    links: &mut Option<HashMap<String, (String, String, String)>>,
    pods: &mut Option<HashMap<String, (String, String)>>,
) {
    if let Some(id) = names.container_id.clone()
        && names.container.is_none()
    {
        let linked = links
            .get_or_insert_with(|| sources.container_links())
            .get(&id)
            .cloned();
        if let Some((pod, ns, container)) = linked {
            names.pod = Some(pod);
            names.namespace = Some(ns);
            names.container = Some(container);
        } else if let Some(a) = sources.bundle_annotations(&id) {
            names.pod = names.pod.take().or(a.pod);
            names.namespace = names.namespace.take().or(a.namespace);
            names.pod_uid = names.pod_uid.take().or(a.pod_uid);
            names.container = if a.sandbox {
                Some(SANDBOX_CONTAINER.to_owned())
            } else {
                a.container
            };
        }
    }
    if names.pod.is_none()
        && let Some(uid) = names.pod_uid.clone()
        && let Some((ns, pod)) = pods
            .get_or_insert_with(|| sources.pod_dirs())
            .get(&uid)
            .cloned()
    {
        names.namespace = Some(ns);
        names.pod = Some(pod);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3f9a1b2c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8";
    const PAUSE: &str = "99887766554433221100ffeeddccbbaa99887766554433221100ffeeddccbbaa";
    const UID: &str = "1b2c3d4e-5f60-4718-89a0-b1c2d3e4f506";

    /// A temporary host `/`, removed on drop.
    struct Host(PathBuf);

    impl Host {
        fn new(name: &str) -> Self {
            let dir =
                std::env::temp_dir().join(format!("tracer-names-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Host(dir)
        }

        fn file(&self, rel: &str, text: &str) {
            let p = self.0.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }

        fn dir(&self, rel: &str) {
            std::fs::create_dir_all(self.0.join(rel)).unwrap();
        }

        fn resolver(&self) -> Resolver {
            Resolver::new(Sources::under(&self.0))
        }
    }

    impl Drop for Host {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn containerd_path(id: &str) -> String {
        format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{id}.scope",
            UID.replace('-', "_")
        )
    }

    fn shown(r: &Resolver, id: CgroupId, path: &str) -> Option<String> {
        r.get(id).and_then(|n| n.label(path))
    }

    #[test]
    fn link_and_directory_names_parse_with_dashes_in_names() {
        assert_eq!(
            parse_container_link(&format!("cart-7d9f_shop_cart-api-{ID}.log")),
            Some((
                "cart-7d9f".into(),
                "shop".into(),
                "cart-api".into(),
                ID.into()
            ))
        );
        assert_eq!(parse_container_link("cart_shop_cart-abc.log"), None);
        assert_eq!(parse_container_link(&format!("cart_cart-{ID}.log")), None);
        assert_eq!(
            parse_pod_dir(&format!("shop_cart-7d9f_{UID}")),
            Some(("shop".into(), "cart-7d9f".into(), UID.into()))
        );
        assert_eq!(parse_pod_dir("shop_cart"), None);
    }

    #[test]
    fn a_container_is_named_by_its_kubelet_link_once_it_appears() {
        let host = Host::new("link");
        let path = containerd_path(ID);
        let mut r = host.resolver();
        r.learn(7, &path);
        // The kubelet has not made its link yet: the path's facts only.
        assert_eq!(r.refresh(), Vec::<CgroupId>::new());
        assert_eq!(
            shown(&r, 7, &path),
            Some(format!("pod:{UID}/containerd:3f9a1b2c4d5e"))
        );
        host.file(
            &format!("var/log/containers/cart-7d9f_shop_cart-{ID}.log"),
            "",
        );
        // Looked up again at growing intervals: refresh 1 is due, then named.
        let mut named_at = None;
        for i in 1..10 {
            if r.refresh() == [7] {
                named_at = Some(i);
                break;
            }
        }
        assert_eq!(named_at, Some(1));
        assert_eq!(shown(&r, 7, &path).as_deref(), Some("shop/cart-7d9f/cart"));
        assert_eq!(r.pending(), 0);
        // Named: nothing is read again, even when the node's files change.
        std::fs::remove_dir_all(host.0.join("var/log/containers")).unwrap();
        for _ in 0..100 {
            assert!(r.refresh().is_empty());
        }
        assert_eq!(shown(&r, 7, &path).as_deref(), Some("shop/cart-7d9f/cart"));
    }

    #[test]
    fn retries_back_off_and_stop() {
        let host = Host::new("backoff");
        let mut r = host.resolver();
        r.learn(7, &containerd_path(ID));
        let mut looked_at = Vec::new();
        for i in 0..2_000u64 {
            let before = r.pending.get(&7).map(|p| p.tries);
            r.refresh();
            if r.pending.get(&7).map(|p| p.tries) != before {
                looked_at.push(i);
            }
        }
        assert_eq!(looked_at, [0, 1, 3, 7, 15, 31, 63, 127, 255, 511]);
        assert_eq!(r.pending(), 0);
        // What the path said stays.
        assert_eq!(r.get(7).and_then(|n| n.container_id.as_deref()), Some(ID));
    }

    #[test]
    fn a_pod_directory_names_a_pod_and_a_bundle_its_sandbox() {
        let host = Host::new("bundle");
        host.dir(&format!("var/log/pods/shop_cart-7d9f_{UID}/cart"));
        host.file(
            &format!("run/containerd/io.containerd.runtime.v2.task/k8s.io/{PAUSE}/config.json"),
            &format!(
                r#"{{"ociVersion":"1.2.0","annotations":{{
                "io.kubernetes.cri.container-type":"sandbox",
                "io.kubernetes.cri.sandbox-name":"cart-7d9f",
                "io.kubernetes.cri.sandbox-namespace":"shop",
                "io.kubernetes.cri.sandbox-uid":"{UID}"}}}}"#
            ),
        );
        let mut r = host.resolver();
        let pod_slice = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice",
            UID.replace('-', "_")
        );
        r.learn(1, &pod_slice);
        r.learn(2, &containerd_path(PAUSE));
        let mut changed = r.refresh();
        changed.sort_unstable();
        assert_eq!(changed, [1, 2]);
        assert_eq!(shown(&r, 1, &pod_slice).as_deref(), Some("shop/cart-7d9f"));
        assert_eq!(
            shown(&r, 2, &containerd_path(PAUSE)).as_deref(),
            Some("shop/cart-7d9f/POD")
        );
        assert_eq!(r.pending(), 0);
    }

    #[test]
    fn a_cri_o_bundle_names_its_container() {
        let host = Host::new("crio");
        host.file(
            &format!("run/containers/storage/overlay-containers/{ID}/userdata/config.json"),
            &format!(
                r#"{{"annotations":{{"io.kubernetes.pod.name":"web-0",
                "io.kubernetes.pod.namespace":"blog","io.kubernetes.pod.uid":"{UID}",
                "io.kubernetes.container.name":"nginx",
                "io.kubernetes.cri-o.ContainerType":"container"}}}}"#
            ),
        );
        let path = format!("/kubepods/pod{UID}/crio-{ID}");
        let mut r = host.resolver();
        r.learn(3, &path);
        assert_eq!(r.refresh(), [3]);
        let n = r.get(3).unwrap();
        assert_eq!(
            (
                n.namespace.as_deref(),
                n.pod.as_deref(),
                n.container.as_deref()
            ),
            (Some("blog"), Some("web-0"), Some("nginx"))
        );
    }

    #[test]
    fn without_sources_units_and_containers_keep_their_paths_facts() {
        let host = Host::new("none");
        let mut r = Resolver::new(Sources::under(&host.0.join("missing")));
        r.learn(1, "/system.slice/cron.service");
        r.learn(2, &format!("/system.slice/docker-{ID}.scope"));
        r.learn(3, "/tracer-test/plain");
        assert!(r.refresh().is_empty());
        assert_eq!(
            shown(&r, 1, "/system.slice/cron.service").as_deref(),
            Some("cron.service")
        );
        assert_eq!(shown(&r, 2, "").as_deref(), Some("docker:3f9a1b2c4d5e"));
        assert_eq!(r.get(3), None);
        // A docker container outside a pod has nothing more to wait for.
        assert_eq!(r.pending(), 0);
        r.forget(1);
        assert_eq!(r.get(1), None);
    }

    #[test]
    fn unreadable_or_foreign_bundles_name_nothing() {
        assert_eq!(annotations("not json"), None);
        assert_eq!(
            annotations(r#"{"annotations":{"org.opencontainers.image.ref.name":"x"}}"#),
            None
        );
        assert_eq!(annotations(r#"{"ociVersion":"1.0"}"#), None);
    }
}
