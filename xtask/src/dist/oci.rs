//! The OCI image archive, written here rather than by a container engine: one layer (the
//! static binary, its copyright and the licenses), a config whose entrypoint is
//! `tracer serve` with the standard `org.opencontainers.image.*` labels, a manifest, an
//! index naming the tag, all in an OCI image layout archived as a tar
//! (`skopeo copy oci-archive:FILE docker://IMAGE:TAG` pushes it).
//!
//! The JSON is `serde_json`'s, keys in a fixed order, and the layer and archive are
//! [`archive`]'s: the same content gives the same digests.

use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use super::{
    archive,
    release::{Contents, IMAGE, Release, SOURCE_URL, hex},
};

const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
const INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// What the container runs: `tracer serve`; the default arguments (the image's `Cmd`)
/// serve every interface of the pod's network namespace, as the `DaemonSet`'s arguments do.
pub const ENTRYPOINT: [&str; 2] = ["/usr/bin/tracer", "serve"];
const CMD: [&str; 2] = ["--listen", "0.0.0.0:29110"];

/// The `org.opencontainers.image.*` labels of the image (and annotations of its manifest).
pub fn labels(release: &Release) -> Value {
    json!({
        "org.opencontainers.image.created": release.rfc3339(),
        "org.opencontainers.image.description": "tracer serve: Prometheus metrics of the kernel's grace-period waits, shrinker teardown and dcache pruning under inode locks",
        "org.opencontainers.image.documentation": format!("{SOURCE_URL}/blob/{}/docs/deploy.md", release.revision),
        "org.opencontainers.image.licenses": "(MIT OR Apache-2.0) AND GPL-2.0-or-later AND LGPL-2.1-or-later",
        "org.opencontainers.image.ref.name": release.version,
        "org.opencontainers.image.revision": release.revision,
        "org.opencontainers.image.source": SOURCE_URL,
        "org.opencontainers.image.title": "tracer",
        "org.opencontainers.image.url": SOURCE_URL,
        "org.opencontainers.image.version": release.version,
    })
}

/// A descriptor of `blob`.
fn descriptor(media_type: &str, blob: &[u8]) -> Value {
    json!({
        "mediaType": media_type,
        "digest": format!("sha256:{}", hex(&Sha256::digest(blob))),
        "size": blob.len(),
    })
}

/// The image archive's bytes.
pub fn archive(c: &Contents, release: &Release) -> anyhow::Result<Vec<u8>> {
    let mut layer = archive::Tree::default();
    layer.file("usr/bin/tracer", 0o755, c.tracer.clone());
    layer.file("usr/share/doc/tracer/copyright", 0o644, c.copyright.clone());
    for (name, text) in &c.licenses {
        layer.file(
            &format!("usr/share/doc/tracer/LICENSES/{name}"),
            0o644,
            text.clone(),
        );
    }
    let layer_tar = layer.tar(release.epoch)?;
    let layer_gz = archive::gzip(&layer_tar)?;
    let created = release.rfc3339();
    let config = serde_json::to_vec(&json!({
        "created": created,
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Entrypoint": ENTRYPOINT,
            "Cmd": CMD,
            "ExposedPorts": { "29110/tcp": {} },
            "Labels": labels(release),
        },
        "rootfs": {
            "type": "layers",
            "diff_ids": [format!("sha256:{}", hex(&Sha256::digest(&layer_tar)))],
        },
        "history": [{ "created": created, "created_by": "cargo xtask dist" }],
    }))?;
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": descriptor(CONFIG, &config),
        "layers": [descriptor(LAYER, &layer_gz)],
        "annotations": labels(release),
    }))?;
    let mut manifest_desc = descriptor(MANIFEST, &manifest);
    manifest_desc["annotations"] = json!({
        "org.opencontainers.image.ref.name": release.version,
        "io.containerd.image.name": format!("{IMAGE}:{}", release.version),
    });
    manifest_desc["platform"] = json!({ "architecture": "amd64", "os": "linux" });
    let index = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": INDEX,
        "manifests": [manifest_desc],
    }))?;
    let mut out = archive::Tree::default();
    for blob in [layer_gz, config, manifest] {
        let name = format!("blobs/sha256/{}", hex(&Sha256::digest(&blob)));
        out.file(&name, 0o644, blob);
    }
    out.file("index.json", 0o644, index);
    out.file(
        "oci-layout",
        0o644,
        br#"{"imageLayoutVersion":"1.0.0"}"#.to_vec(),
    );
    out.tar(release.epoch)
}
