//! Archives whose bytes depend on their content alone: a tar (ustar) with its members
//! sorted, every parent directory listed before its children, owner root:root, one mtime;
//! and gzip without a name or a time in its header. What `cargo xtask dist` writes the
//! tarball and the image's layer and layout with.

use std::{collections::BTreeMap, io::Write as _};

use anyhow::{Context as _, bail};
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

    /// The tree as a tar stream: members in byte order of their paths (so a directory comes
    /// before what it holds), each with `mtime` and owner root:root (uid and gid 0).
    ///
    /// # Errors
    /// When a path does not fit ustar's name and prefix fields.
    pub fn tar(&self, mtime: u64) -> anyhow::Result<Vec<u8>> {
        let mut out = Vec::new();
        for (path, node) in &self.entries {
            let (name, mode, data, kind): (String, u32, &[u8], u8) = match node {
                Node::Dir => (format!("{path}/"), 0o755, &[], b'5'),
                Node::File { mode, data } => (path.clone(), *mode, data, b'0'),
            };
            out.extend_from_slice(&header(&name, mode, data.len() as u64, mtime, kind)?);
            out.extend_from_slice(data);
            out.resize(out.len().next_multiple_of(512), 0);
        }
        // The end of the archive: two zero blocks.
        out.resize(out.len() + 1024, 0);
        Ok(out)
    }
}

/// One ustar header block.
fn header(name: &str, mode: u32, size: u64, mtime: u64, kind: u8) -> anyhow::Result<[u8; 512]> {
    let mut h = [0_u8; 512];
    let (prefix, name) = split_name(name)?;
    let put = |h: &mut [u8; 512], at: usize, bytes: &[u8]| {
        h[at..at + bytes.len()].copy_from_slice(bytes);
    };
    put(&mut h, 0, name.as_bytes());
    put(&mut h, 100, format!("{mode:07o}\0").as_bytes());
    put(&mut h, 108, b"0000000\0");
    put(&mut h, 116, b"0000000\0");
    put(&mut h, 124, format!("{size:011o}\0").as_bytes());
    put(&mut h, 136, format!("{mtime:011o}\0").as_bytes());
    h[156] = kind;
    put(&mut h, 257, b"ustar\x0000");
    put(&mut h, 265, b"root");
    put(&mut h, 297, b"root");
    put(&mut h, 345, prefix.as_bytes());
    // The checksum is the sum of the header's bytes with its own field read as spaces.
    put(&mut h, 148, b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    put(&mut h, 148, format!("{sum:06o}\0 ").as_bytes());
    Ok(h)
}

/// ustar's (prefix, name) of a path: the name alone when it fits 100 bytes, else split at a
/// `/` so that the prefix fits 155.
fn split_name(path: &str) -> anyhow::Result<(&str, &str)> {
    if path.len() <= 100 {
        return Ok(("", path));
    }
    for (i, _) in path.match_indices('/') {
        let (prefix, rest) = (&path[..i], &path[i + 1..]);
        if prefix.len() <= 155 && rest.len() <= 100 && !rest.is_empty() {
            return Ok((prefix, rest));
        }
    }
    bail!("{path}: too long for a ustar header")
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
    }

    #[test]
    fn a_long_path_is_split_into_prefix_and_name() {
        let long = format!("{}/{}", "d".repeat(120), "f".repeat(90));
        let (prefix, name) = split_name(&long).unwrap();
        assert_eq!((prefix.len(), name.len()), (120, 90));
        assert!(split_name(&"x".repeat(300)).is_err());
    }

    #[test]
    fn gzip_has_no_time_and_no_name() {
        let gz = gzip(b"hello").unwrap();
        assert_eq!(&gz[..4], &[0x1f, 0x8b, 8, 0]);
        assert_eq!(&gz[4..8], &[0, 0, 0, 0]);
    }
}
