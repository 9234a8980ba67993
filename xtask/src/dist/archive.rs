//! Archives whose bytes depend on their content alone: a tar (ustar, by the `tar` crate) with its members
//! sorted, every parent directory listed before its children, owner root:root, one mtime;
//! and gzip without a name or a time in its header. What `cargo xtask dist` writes the
//! tarball and the image's layer and layout with.

use std::{collections::BTreeMap, io::Write as _};

use anyhow::Context as _;
use flate2::{Compression, GzBuilder};

/// A tree of files to archive, by path (no leading `/`, no trailing `/`).
#[derive(Default)]
pub struct Tree {
    entries: BTreeMap<String, Node>,
}

enum Node {
    Dir,
    File { mode: u32, data: Vec<u8> },
}

impl Tree {
    /// Add a file, and each of its parent directories not yet there (mode 0755).
    pub fn file(&mut self, path: &str, mode: u32, data: Vec<u8>) {
        let path = path.trim_matches('/');
        let mut at = 0;
        while let Some(i) = path[at..].find('/') {
            self.entries
                .entry(path[..at + i].to_owned())
                .or_insert(Node::Dir);
            at += i + 1;
        }
        self.entries
            .insert(path.to_owned(), Node::File { mode, data });
    }

    /// The tree as a tar stream (ustar headers, by the `tar` crate): members in byte order
    /// of their paths (so a directory comes before what it holds), each with `mtime` and
    /// owner root:root (uid and gid 0).
    ///
    /// # Errors
    /// When a path cannot be written into a header.
    pub fn tar(&self, mtime: u64) -> anyhow::Result<Vec<u8>> {
        let mut out = tar::Builder::new(Vec::new());
        for (path, node) in &self.entries {
            let (mode, data, kind): (u32, &[u8], _) = match node {
                Node::Dir => (0o755, &[], tar::EntryType::Directory),
                Node::File { mode, data } => (*mode, data, tar::EntryType::Regular),
            };
            let mut h = tar::Header::new_ustar();
            h.set_entry_type(kind);
            h.set_mode(mode);
            h.set_uid(0);
            h.set_gid(0);
            h.set_username("root")?;
            h.set_groupname("root")?;
            h.set_mtime(mtime);
            h.set_size(data.len() as u64);
            // In the header's own fields (prefix and name), not a GNU long-name member.
            h.set_path(path).with_context(|| format!("tar: {path}"))?;
            if matches!(node, Node::Dir) {
                // A directory's name ends in `/`, as GNU tar and dpkg-deb write it.
                let name = &mut h.as_ustar_mut().context("ustar")?.name;
                let end = name.iter().position(|&b| b == 0);
                let slot = end.ok_or_else(|| anyhow::anyhow!("tar: {path}/: name too long"))?;
                name[slot] = b'/';
            }
            h.set_cksum();
            out.append(&h, data)
                .with_context(|| format!("tar: {path}"))?;
        }
        out.into_inner().context("tar")
    }
}

/// `data` gzipped at the best level, with no file name and a zero time in the header (as
/// `gzip -n` writes it).
pub fn gzip(data: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut gz = GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), Compression::best());
    gz.write_all(data).context("gzip")?;
    gz.finish().context("gzip")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_sorted_with_parents_first_and_tar_reads_them() {
        let mut t = Tree::default();
        t.file("usr/share/doc/x/copyright", 0o644, b"c\n".to_vec());
        t.file("usr/bin/tracer", 0o755, vec![7; 700]);
        // Longer than ustar's 100-byte name field.
        let long = format!("a/{}/{}", "d".repeat(60), "f".repeat(90));
        t.file(&long, 0o644, b"l\n".to_vec());
        let once = t.tar(1_764_873_195).unwrap();
        assert_eq!(once, t.tar(1_764_873_195).unwrap());
        assert_eq!(once.len() % 512, 0);
        let dir = std::env::temp_dir().join(format!("xtask-tar-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let tar = dir.join("t.tar");
        std::fs::write(&tar, &once).unwrap();
        let out = std::process::Command::new("tar")
            .args(["-tvf"])
            .arg(&tar)
            .env("TZ", "UTC")
            .output()
            .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let listing = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{listing}");
        let names: Vec<&str> = listing
            .lines()
            .map(|l| l.split_whitespace().last().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "a/",
                &format!("a/{}/", "d".repeat(60)),
                long.as_str(),
                "usr/",
                "usr/bin/",
                "usr/bin/tracer",
                "usr/share/",
                "usr/share/doc/",
                "usr/share/doc/x/",
                "usr/share/doc/x/copyright"
            ]
        );
        let tracer: Vec<&str> = listing
            .lines()
            .find(|l| l.ends_with("usr/bin/tracer"))
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(tracer[..3], ["-rwxr-xr-x", "root/root", "700"], "{listing}");
        assert!(listing.contains("2025-12-04"), "{listing}");
        // What ustar cannot hold is refused, not written another way.
        let mut t = Tree::default();
        t.file(&"x".repeat(300), 0o644, Vec::new());
        assert!(t.tar(0).is_err());
    }

    #[test]
    fn gzip_has_no_time_and_no_name() {
        let gz = gzip(b"hello").unwrap();
        assert_eq!(&gz[..4], &[0x1f, 0x8b, 8, 0]);
        assert_eq!(&gz[4..8], &[0, 0, 0, 0]);
    }
}
