//! The OCI image archive, written here rather than by a container engine: for each
//! architecture one layer (the static binary, its copyright and the licenses), a config
//! whose entrypoint is `tracer serve` with the standard `org.opencontainers.image.*` labels
//! and a manifest with its platform; an image index of those manifests, named by the tag;
//! all in an OCI image layout archived as a tar
//! (`skopeo copy --all oci-archive:FILE docker://IMAGE:TAG` pushes both architectures).
//!
//! The JSON is `serde_json`'s, keys in a fixed order, and the layer and archive are
//! [`archive`]'s: the same content gives the same digests.

use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use super::{
    archive,
    release::{Contents, IMAGE, Release, SOURCE_URL, hex},
};
use crate::arch::Arch;

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

/// One architecture's image: its layer, config and manifest blobs, and the manifest's
/// descriptor in the index, with its platform.
fn image(
    arch: Arch,
    c: &Contents,
    release: &Release,
    blobs: &mut Vec<Vec<u8>>,
) -> anyhow::Result<Value> {
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
        "architecture": arch.debian(),
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
    manifest_desc["platform"] = json!({ "architecture": arch.debian(), "os": "linux" });
    blobs.extend([layer_gz, config, manifest]);
    Ok(manifest_desc)
}

/// The image archive's bytes: an OCI layout whose `index.json` names, by the tag, one image
/// index with an image per architecture of `images` (what `docker buildx` and
/// `podman manifest` push as a multi-architecture image; `skopeo copy --all` keeps it whole,
/// a plain `skopeo copy` takes this host's platform).
pub fn archive(images: &[(Arch, Contents)], release: &Release) -> anyhow::Result<Vec<u8>> {
    let mut blobs = Vec::new();
    let manifests = images
        .iter()
        .map(|(arch, c)| image(*arch, c, release, &mut blobs))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let image_index = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": INDEX,
        "manifests": manifests,
        "annotations": labels(release),
    }))?;
    let mut index_desc = descriptor(INDEX, &image_index);
    index_desc["annotations"] = json!({
        "org.opencontainers.image.ref.name": release.version,
        "io.containerd.image.name": format!("{IMAGE}:{}", release.version),
    });
    blobs.push(image_index);
    let index = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": INDEX,
        "manifests": [index_desc],
    }))?;
    let mut out = archive::Tree::default();
    for blob in blobs {
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

#[cfg(test)]
mod tests {
    use std::{collections::BTreeMap, io::Read as _};

    use super::*;

    fn contents(binary: &[u8]) -> Contents {
        Contents {
            tracer: binary.to_vec(),
            man: Vec::new(),
            completions: Vec::new(),
            copyright: b"copyright".to_vec(),
            licenses: vec![("MIT".into(), b"mit".to_vec())],
        }
    }

    fn release() -> Release {
        Release {
            version: "0.1.0".into(),
            revision: "0123".into(),
            epoch: 1_796_409_195,
        }
    }

    /// The archive's members by path.
    fn members(tar: &[u8]) -> BTreeMap<String, Vec<u8>> {
        let mut out = BTreeMap::new();
        let mut archive = tar::Archive::new(tar);
        for entry in archive.entries().expect("a tar") {
            let mut entry = entry.expect("a member");
            let path = entry.path().expect("a path").display().to_string();
            let mut data = Vec::new();
            entry.read_to_end(&mut data).expect("its data");
            out.insert(path, data);
        }
        out
    }

    fn blob<'a>(files: &'a BTreeMap<String, Vec<u8>>, desc: &Value) -> &'a [u8] {
        let digest = desc["digest"].as_str().expect("a digest");
        let name = format!("blobs/sha256/{}", digest.trim_start_matches("sha256:"));
        let data = files.get(&name).unwrap_or_else(|| panic!("no blob {name}"));
        assert_eq!(desc["size"], data.len(), "{name}'s size");
        assert_eq!(digest, format!("sha256:{}", hex(&Sha256::digest(data))));
        data
    }

    #[test]
    fn one_tag_names_an_index_of_an_image_per_architecture_each_with_its_own_binary() {
        let images = [
            (Arch::X86_64, contents(b"amd64 binary")),
            (Arch::Aarch64, contents(b"arm64 binary")),
        ];
        let tar = archive(&images, &release()).expect("the archive");
        let files = members(&tar);
        let layout: Value = serde_json::from_slice(&files["index.json"]).unwrap();
        let tagged = layout["manifests"].as_array().unwrap();
        assert_eq!(tagged.len(), 1, "one tag: {layout}");
        assert_eq!(tagged[0]["mediaType"], INDEX);
        assert_eq!(
            tagged[0]["annotations"]["org.opencontainers.image.ref.name"],
            "0.1.0"
        );
        let index: Value = serde_json::from_slice(blob(&files, &tagged[0])).unwrap();
        let manifests = index["manifests"].as_array().unwrap();
        let platforms: Vec<&str> = manifests
            .iter()
            .map(|m| m["platform"]["architecture"].as_str().unwrap())
            .collect();
        assert_eq!(platforms, ["amd64", "arm64"]);
        for (desc, (arch, c)) in manifests.iter().zip(&images) {
            assert_eq!(desc["platform"]["os"], "linux");
            let manifest: Value = serde_json::from_slice(blob(&files, desc)).unwrap();
            let config: Value = serde_json::from_slice(blob(&files, &manifest["config"])).unwrap();
            assert_eq!(config["architecture"], arch.debian());
            assert_eq!(config["config"]["Entrypoint"], json!(ENTRYPOINT));
            let mut layer = Vec::new();
            flate2::read::GzDecoder::new(blob(&files, &manifest["layers"][0]))
                .read_to_end(&mut layer)
                .unwrap();
            let in_layer = members(&layer);
            assert_eq!(in_layer["usr/bin/tracer"], c.tracer, "{}", arch.name());
        }
        // The same content gives the same bytes.
        assert_eq!(tar, archive(&images, &release()).unwrap());
    }
}
