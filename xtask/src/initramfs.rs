//! A gzip-compressed cpio archive in the kernel's `newc` format: the VM's whole root
//! file system, so no disk image and no Debian initrd are needed.

use std::{
    fmt::Write as _,
    fs::File,
    io::{BufWriter, Write},
    path::Path,
};

use anyhow::Context as _;
use flate2::{Compression, write::GzEncoder};

const S_IFDIR: u32 = 0o040_000;
const S_IFREG: u32 = 0o100_000;
const S_IFCHR: u32 = 0o020_000;

/// Writes a newc archive entry by entry.
pub struct Writer<W: Write> {
    out: W,
    ino: u32,
    written: u64,
}

impl<W: Write> Writer<W> {
    /// An empty archive writing to `out`.
    pub fn new(out: W) -> Self {
        Self {
            out,
            ino: 0,
            written: 0,
        }
    }

    /// A directory.
    pub fn dir(&mut self, path: &str) -> anyhow::Result<()> {
        self.entry(path, S_IFDIR | 0o755, (0, 0), &[])
    }

    /// A regular file.
    pub fn file(&mut self, path: &str, mode: u32, data: &[u8]) -> anyhow::Result<()> {
        self.entry(path, S_IFREG | mode, (0, 0), data)
    }

    /// A character device node. The kernel opens `/dev/console` for PID 1 before any
    /// devtmpfs is mounted, so that one must be in the archive.
    pub fn char_dev(
        &mut self,
        path: &str,
        mode: u32,
        major: u32,
        minor: u32,
    ) -> anyhow::Result<()> {
        self.entry(path, S_IFCHR | mode, (major, minor), &[])
    }

    /// Write the trailer and return the sink.
    pub fn finish(mut self) -> anyhow::Result<W> {
        self.entry("TRAILER!!!", 0, (0, 0), &[])?;
        Ok(self.out)
    }

    fn entry(
        &mut self,
        path: &str,
        mode: u32,
        rdev: (u32, u32),
        data: &[u8],
    ) -> anyhow::Result<()> {
        let name = path.trim_start_matches('/');
        self.ino += 1;
        let nlink = if mode & 0o170_000 == S_IFDIR { 2 } else { 1 };
        let size = u32::try_from(data.len()).context("file too large for newc (4 GiB)")?;
        let namesize = u32::try_from(name.len() + 1).context("name too long")?;
        // c_ino c_mode c_uid c_gid c_nlink c_mtime c_filesize c_devmajor c_devminor
        // c_rdevmajor c_rdevminor c_namesize c_check, each 8 hex digits.
        let fields = [
            self.ino, mode, 0, 0, nlink, 0, size, 0, 0, rdev.0, rdev.1, namesize, 0,
        ];
        let mut header = String::with_capacity(110);
        header.push_str("070701");
        for f in fields {
            let _ = write!(header, "{f:08x}");
        }
        self.put(header.as_bytes())?;
        self.put(name.as_bytes())?;
        self.put(&[0])?;
        self.pad()?;
        self.put(data)?;
        self.pad()
    }

    fn put(&mut self, bytes: &[u8]) -> anyhow::Result<()> {
        self.out.write_all(bytes).context("writing the initramfs")?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// newc aligns every header and every file body to 4 bytes.
    fn pad(&mut self) -> anyhow::Result<()> {
        let n = (4 - self.written % 4) % 4;
        self.put(&[0; 3][..usize::try_from(n).unwrap_or(0)])
    }
}

/// A gzip'd archive file being written.
pub type GzFile = Writer<GzEncoder<BufWriter<File>>>;

/// Start an archive at `path`.
pub fn create(path: &Path) -> anyhow::Result<GzFile> {
    let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    // Fast compression: the archive is rebuilt on every boot, and the guest inflates it
    // under emulation, where level 1 inflates about as fast as level 9.
    Ok(Writer::new(GzEncoder::new(
        BufWriter::new(file),
        Compression::fast(),
    )))
}

/// Finish an archive started with [`create`].
pub fn finish(w: GzFile) -> anyhow::Result<()> {
    let buf = w.finish()?.finish().context("finishing gzip")?;
    buf.into_inner()
        .map_err(std::io::IntoInnerError::into_error)
        .context("flushing the initramfs")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_aligned_and_end_with_the_trailer() {
        let mut w = Writer::new(Vec::new());
        w.dir("/bin").unwrap();
        w.file("/init", 0o755, b"#!/bin/sh\n").unwrap();
        w.char_dev("/dev/console", 0o600, 5, 1).unwrap();
        let out = w.finish().unwrap();
        assert_eq!(out.len() % 4, 0);
        assert!(out.starts_with(b"070701"));
        // The header of /init: mode 0100755, filesize 10, namesize 5 ("init\0").
        let text = String::from_utf8_lossy(&out);
        let init = text.find("init\0").unwrap() - 110;
        assert_eq!(&text[init + 14..init + 22], "000081ed");
        assert_eq!(&text[init + 54..init + 62], "0000000a");
        assert_eq!(&text[init + 94..init + 102], "00000005");
        // /dev/console: rdevmajor 5, rdevminor 1.
        let console = text.find("dev/console\0").unwrap() - 110;
        assert_eq!(&text[console + 78..console + 86], "00000005");
        assert_eq!(&text[console + 86..console + 94], "00000001");
        assert!(text.contains("TRAILER!!!\0"));
    }
}
