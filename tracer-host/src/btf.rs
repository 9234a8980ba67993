//! Reads struct field offsets from the running kernel's BTF (`/sys/kernel/btf/vmlinux`).
//!
//! aya's Rust programs have no CO-RE relocations, so the offsets the programs need
//! (`dentry.d_inode`, `inode.i_rwsem`, ...) are looked up here and handed to them as
//! globals at load time.
//!
//! The BTF is read by a walk of its type section that decodes only the types asked about
//! (the format: the kernel's `Documentation/bpf/btf.rst`). tracer asks ten questions of
//! about 5 MB and over 100,000 types at every start; a parser that builds every type and
//! string first (btf-rs, which this replaced) took most of a second of a small VM's CPU for
//! them.
//! The tests hold this walk to btf-rs's answers over the host's own BTF.

use std::{borrow::Cow, ops::Range, path::PathBuf};

/// Why the kernel's BTF, or an offset in it, could not be had.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum BtfError {
    /// The `--btf` file could not be read: the system's reason.
    #[error("--btf {}: {}", .0.display(), .1)]
    GivenUnreadable(PathBuf, String),
    /// [`VMLINUX`] could not be read (a kernel without `CONFIG_DEBUG_INFO_BTF`): the
    /// system's reason.
    #[error(
        "{}: {} (the kernel needs CONFIG_DEBUG_INFO_BTF=y, or give its BTF with --btf PATH)",
        VMLINUX,
        .0
    )]
    VmlinuxUnreadable(String),
    /// What was read from this file is not valid BTF.
    #[error("{}: {}", .0.display(), .1)]
    Invalid(PathBuf, Box<BtfError>),
    /// Not a BTF blob, cut short, or of a kind unknown here: what was wrong.
    #[error("malformed BTF: {0}")]
    Malformed(String),
    /// No struct of that name.
    #[error("BTF has no struct {0}")]
    NoStruct(String),
    /// The struct has no such member (at any depth of anonymous members).
    #[error("BTF struct {0} has no member {1}")]
    NoMember(String, String),
}

impl BtfError {
    /// This error, of the BTF read from [`source`].
    #[must_use]
    pub fn in_source(self) -> BtfError {
        BtfError::Invalid(source(), Box::new(self))
    }
}

/// Where the running kernel exposes its BTF.
pub const VMLINUX: &str = "/sys/kernel/btf/vmlinux";

/// A BTF file given with `--btf PATH`, read instead of [`VMLINUX`] (as bpftrace and
/// `ebpf_exporter` accept one): for kernels built without `CONFIG_DEBUG_INFO_BTF`, whose
/// BTF can be generated from their debug info (`pahole -J`) or found in a BTF archive.
static GIVEN: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// Read the kernel's BTF from `path` from now on, rather than from [`VMLINUX`]; the first
/// call wins.
pub fn use_file(path: &std::path::Path) {
    let _ = GIVEN.set(path.to_path_buf());
}

/// Where the kernel's BTF is read from: the `--btf` file, else [`VMLINUX`].
#[must_use]
pub fn source() -> std::path::PathBuf {
    GIVEN
        .get()
        .cloned()
        .unwrap_or_else(|| std::path::PathBuf::from(VMLINUX))
}

/// The running kernel's BTF, raw (from the `--btf` file when one was given).
///
/// # Errors
/// When the file is missing (a kernel without `CONFIG_DEBUG_INFO_BTF`, and no `--btf`).
pub fn read_sys_fs() -> Result<Vec<u8>, BtfError> {
    match GIVEN.get() {
        Some(path) => {
            std::fs::read(path).map_err(|e| BtfError::GivenUnreadable(path.clone(), e.to_string()))
        }
        None => std::fs::read(VMLINUX).map_err(|e| BtfError::VmlinuxUnreadable(e.to_string())),
    }
}

/// The kernel's BTF, read where it lies (borrowed, or owned when read from a file): where its
/// type and string sections are and where each type starts; what the programs need is
/// looked up in it.
pub struct Btf<'a> {
    data: Cow<'a, [u8]>,
    types: Range<usize>,
    strings: Range<usize>,
    /// The byte offset in the type section of type id `i + 1` (id 0 is `void`, which has
    /// none).
    starts: Vec<u32>,
}

impl std::fmt::Debug for Btf<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Btf {{ types: 1..={} }}", self.starts.len())
    }
}

/// The BTF kinds read here (`BTF_KIND_*` of the kernel's `include/uapi/linux/btf.h`).
mod kind {
    pub const STRUCT: u32 = 4;
    pub const UNION: u32 = 5;
    pub const ENUM: u32 = 6;
    pub const FUNC: u32 = 12;
    pub const FUNC_PROTO: u32 = 13;
    pub const ENUM64: u32 = 19;
}

/// The bytes that follow a type's 12-byte common part, by its kind and `vlen`; `None` for a
/// kind this reader does not know (so it cannot tell where the next type starts).
fn trailing_bytes(kind: u32, vlen: u32) -> Option<u32> {
    Some(match kind {
        // PTR, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FLOAT, TYPE_TAG
        2 | 7..=12 | 16 | 18 => 0,
        // INT, VAR, DECL_TAG: one u32
        1 | 14 | 17 => 4,
        // ARRAY: element type, index type, count
        3 => 12,
        // STRUCT, UNION: members (name, type, offset); DATASEC: (type, offset, size);
        // ENUM64: (name, low, high)
        4 | 5 | 15 | 19 => 12 * vlen,
        // ENUM: (name, value); FUNC_PROTO: parameters (name, type)
        6 | 13 => 8 * vlen,
        _ => return None,
    })
}

/// One type's common part.
#[derive(Clone, Copy)]
struct Head {
    /// Where its trailing records start in the type section.
    body: usize,
    name_off: u32,
    kind: u32,
    vlen: u32,
    kind_flag: bool,
    /// Its size, or the type it refers to (by kind).
    size_or_type: u32,
}

impl Btf<'static> {
    /// Read the running kernel's BTF.
    ///
    /// # Errors
    /// When the file is missing (kernel without `CONFIG_DEBUG_INFO_BTF`) or malformed.
    pub fn from_sys_fs() -> Result<Self, BtfError> {
        Btf::read(Cow::Owned(read_sys_fs()?)).map_err(BtfError::in_source)
    }
}

impl<'a> Btf<'a> {
    /// Parse a BTF blob (little-endian, as on the architectures tracer runs on): check its
    /// header and sections and note where each type starts.
    ///
    /// # Errors
    /// When the blob is not BTF, is cut short, or holds a kind this reader does not know.
    pub fn parse(data: &'a [u8]) -> Result<Self, BtfError> {
        Btf::read(Cow::Borrowed(data))
    }

    fn read(blob: Cow<'a, [u8]>) -> Result<Self, BtfError> {
        let data = &*blob;
        let bad = |why: String| BtfError::Malformed(why);
        let word = |at: usize| -> Option<u32> {
            Some(u32::from_le_bytes(data.get(at..at + 4)?.try_into().ok()?))
        };
        match data.get(..4) {
            Some([0x9f, 0xeb, 1, _]) => {}
            Some([0xeb, 0x9f, ..]) => {
                return Err(bad("big-endian BTF, which tracer does not read".into()));
            }
            Some([0x9f, 0xeb, v, _]) => return Err(bad(format!("BTF version {v}, not 1"))),
            _ => return Err(bad("not BTF (no 0xeb9f magic)".into())),
        }
        let cut = || bad(format!("its header is cut short ({} bytes)", data.len()));
        if data.len() < 24 {
            return Err(cut());
        }
        let header = word(4).ok_or_else(cut)? as usize;
        if header < 24 {
            return Err(bad(format!(
                "a {header}-byte header, shorter than BTF's 24"
            )));
        }
        let section = |off_at: usize, what: &str| -> Result<Range<usize>, BtfError> {
            let (off, len) = (
                word(off_at).ok_or_else(cut)?,
                word(off_at + 4).ok_or_else(cut)?,
            );
            let start = header.checked_add(off as usize);
            start
                .and_then(|s| Some(s..s.checked_add(len as usize)?))
                .filter(|r| r.end <= data.len())
                .ok_or_else(|| {
                    bad(format!(
                        "its {what} section ({len} bytes at {off} past a {header}-byte header) \
                         runs past its {} bytes",
                        data.len()
                    ))
                })
        };
        let (type_range, strings) = (section(8, "type")?, section(16, "string")?);
        let types = &data[type_range.clone()];
        // Kernels' types average about 40 bytes.
        let mut starts = Vec::with_capacity(types.len() / 32);
        let mut at = 0usize;
        while at < types.len() {
            let id = starts.len() + 1;
            let info = match types.get(at..at + 12) {
                Some(head) => u32::from_le_bytes([head[4], head[5], head[6], head[7]]),
                None => return Err(bad(format!("type {id} is cut short"))),
            };
            let (kind, vlen) = ((info >> 24) & 0x1f, info & 0xffff);
            let extra = trailing_bytes(kind, vlen)
                .ok_or_else(|| bad(format!("type {id} is of kind {kind}, unknown to tracer")))?;
            let next = at + 12 + extra as usize;
            if next > types.len() {
                return Err(bad(format!("type {id} runs past the type section")));
            }
            starts.push(u32::try_from(at).map_err(|_| bad("a type section over 4 GiB".into()))?);
            at = next;
        }
        Ok(Btf {
            data: blob,
            types: type_range,
            strings,
            starts,
        })
    }

    /// Byte offset of `member` in struct `name`, looking through anonymous struct and union
    /// members. A dotted path (`d_hash.pprev`) descends into named members.
    ///
    /// # Errors
    /// When the struct or member does not exist.
    pub fn offset_of(&self, name: &str, member: &str) -> Result<u32, BtfError> {
        let (mut id, _) = self
            .of_kind(&[kind::STRUCT])
            .find(|(_, h)| self.is(h.name_off, name))
            .ok_or_else(|| BtfError::NoStruct(name.into()))?;
        let mut total = 0u32;
        for part in member.split('.') {
            let (bits, type_id) = self
                .find(id, part)
                .ok_or_else(|| BtfError::NoMember(name.into(), member.into()))?;
            total = total.saturating_add(bits);
            // Members descended into are plain structs in the kernel's layouts used here;
            // typedefs and qualifiers are not followed.
            id = type_id;
        }
        Ok(total / 8)
    }

    /// The value of the enumerator `name` (`DCACHE_OP_DELETE`), in whichever enum declares
    /// it first; `None` when no enum does (the kernel declares it as a macro, which BTF lacks).
    /// A 32-bit enum's value is sign-extended unless the enum says it is unsigned.
    #[must_use]
    pub fn enum_value(&self, name: &str) -> Option<u64> {
        self.of_kind(&[kind::ENUM, kind::ENUM64])
            .find_map(|(_, h)| {
                let width = match h.kind {
                    kind::ENUM => 8,
                    kind::ENUM64 => 12,
                    _ => return None,
                };
                (0..h.vlen as usize).find_map(|i| {
                    let at = h.body + i * width;
                    if !self.is(self.word(at)?, name) {
                        return None;
                    }
                    let low = self.word(at + 4)?;
                    Some(match (h.kind, h.kind_flag) {
                        (kind::ENUM64, _) => u64::from(low) | u64::from(self.word(at + 8)?) << 32,
                        (_, true) => u64::from(low),
                        #[expect(clippy::cast_possible_wrap, reason = "BTF stores an s32")]
                        #[expect(clippy::cast_sign_loss, reason = "bit pattern kept")]
                        (_, false) => i64::from(low as i32) as u64,
                    })
                })
            })
    }

    /// The parameter names of function `name`, in order; `None` when BTF has no such
    /// function (inlined, or not in this kernel).
    #[must_use]
    pub fn parameters(&self, name: &str) -> Option<Vec<String>> {
        let (_, func) = self
            .of_kind(&[kind::FUNC])
            .find(|(_, h)| self.is(h.name_off, name))?;
        let proto = self
            .head(func.size_or_type)
            .filter(|h| h.kind == kind::FUNC_PROTO)?;
        (0..proto.vlen as usize)
            .map(|i| {
                let name_off = self.word(proto.body + i * 8)?;
                Some(
                    self.name(name_off)
                        .map(String::from_utf8_lossy)
                        .unwrap_or_default()
                        .into_owned(),
                )
            })
            .collect()
    }

    /// Every type of these kinds, in order of id: its id and common part. (A kind is told
    /// from one byte, so the walk over the other types is short.)
    fn of_kind(&self, kinds: &[u32]) -> impl Iterator<Item = (u32, Head)> {
        let types = &self.data[self.types.clone()];
        (1..).zip(&self.starts).filter_map(move |(id, &at)| {
            let info = types.get(at as usize + 7).copied()?;
            kinds
                .contains(&u32::from(info & 0x1f))
                .then(|| self.head(id))
                .flatten()
                .map(|h| (id, h))
        })
    }

    /// The little-endian word at `at` in the type section.
    fn word(&self, at: usize) -> Option<u32> {
        let types = &self.data[self.types.clone()];
        Some(u32::from_le_bytes(types.get(at..at + 4)?.try_into().ok()?))
    }

    /// The string section.
    fn strings(&self) -> &[u8] {
        &self.data[self.strings.clone()]
    }

    /// Type `id`'s common part; `None` for `void` and ids past the last.
    fn head(&self, id: u32) -> Option<Head> {
        let at = *self.starts.get((id as usize).checked_sub(1)?)? as usize;
        let info = self.word(at + 4)?;
        Some(Head {
            body: at + 12,
            name_off: self.word(at)?,
            kind: (info >> 24) & 0x1f,
            vlen: info & 0xffff,
            kind_flag: info >> 31 == 1,
            size_or_type: self.word(at + 8)?,
        })
    }

    /// The name at `off` in the string section, without its terminating NUL.
    fn name(&self, off: u32) -> Option<&[u8]> {
        let rest = self.strings().get(off as usize..)?;
        Some(&rest[..rest.iter().position(|&b| b == 0)?])
    }

    /// Whether the name at `off` is `name`.
    fn is(&self, off: u32, name: &str) -> bool {
        let off = off as usize;
        let strings = self.strings();
        strings.get(off..off + name.len()) == Some(name.as_bytes())
            && strings.get(off + name.len()) == Some(&0)
    }

    /// Depth-first search for a named member, through anonymous ones: its bit offset (a
    /// bitfield's too) and type id.
    fn find(&self, id: u32, member: &str) -> Option<(u32, u32)> {
        // A kernel's anonymous members nest a few deep and are few; a `--btf` file could nest
        // them in a cycle, or fan each out 65,535 ways: the search is bounded in depth and in
        // members looked at.
        let mut budget = 1 << 20;
        self.find_within(id, member, 0, &mut budget)
    }

    fn find_within(
        &self,
        id: u32,
        member: &str,
        depth: u32,
        budget: &mut u32,
    ) -> Option<(u32, u32)> {
        if depth > 8 {
            return None;
        }
        let h = self
            .head(id)
            .filter(|h| matches!(h.kind, kind::STRUCT | kind::UNION))?;
        *budget = budget.checked_sub(h.vlen)?;
        let members: Vec<(u32, u32, u32)> = (0..h.vlen as usize)
            .map(|i| {
                let at = h.body + i * 12;
                let offset = self.word(at + 8)?;
                // With the kind flag, the top 8 bits hold a bitfield's size.
                let bits = if h.kind_flag {
                    offset & 0x00ff_ffff
                } else {
                    offset
                };
                Some((self.word(at)?, self.word(at + 4)?, bits))
            })
            .collect::<Option<_>>()?;
        if let Some(&(_, type_id, bits)) = members.iter().find(|(n, _, _)| self.is(*n, member)) {
            return Some((bits, type_id));
        }
        members
            .iter()
            .filter(|(n, _, _)| self.name(*n).is_none_or(<[u8]>::is_empty))
            .find_map(|&(_, type_id, bits)| {
                self.find_within(type_id, member, depth + 1, budget)
                    .map(|(inner, t)| (bits.saturating_add(inner), t))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // BTF kinds, to build blobs by hand.
    const KIND_INT: u32 = 1;
    const KIND_STRUCT: u32 = 4;
    const KIND_UNION: u32 = 5;
    const KIND_ENUM: u32 = 6;
    const KIND_FUNC: u32 = 12;
    const KIND_FUNC_PROTO: u32 = 13;
    /// A struct's `kind_flag`: its members' offsets carry a bitfield size in the top 8 bits.
    const KIND_FLAG: u32 = 1 << 31;

    /// A BTF blob with `struct inner { int a; int b; }`,
    /// `struct outer { int x; union { int y; struct inner z; }; }`,
    /// `enum flags { F_DEL = 8, F_NEG = -1 }`, `int f(int dir, int dentry)` and
    /// `struct bits { int lo:3; int pad; int hi:5; }` (bitfields: `hi` at bit 64).
    fn sample() -> Vec<u8> {
        let strings = b"\0int\0inner\0a\0b\0outer\0x\0y\0z\0flags\0F_DEL\0F_NEG\0f\0dir\0dentry\0bits\0lo\0pad\0hi\0";
        let s = |name: &str| -> u32 {
            let needle = format!("\0{name}\0");
            let pos = strings
                .windows(needle.len())
                .position(|w| w == needle.as_bytes())
                .unwrap();
            u32::try_from(pos + 1).unwrap()
        };
        let mut types: Vec<u32> = Vec::new();
        // 1: int, 4 bytes
        types.extend([s("int"), KIND_INT << 24, 4, 32]);
        // 2: struct inner { a @0, b @32 bits }
        types.extend([s("inner"), (KIND_STRUCT << 24) | 2, 8]);
        types.extend([s("a"), 1, 0, s("b"), 1, 32]);
        // 3: anonymous union { y @0, z @0 }
        types.extend([0, (KIND_UNION << 24) | 2, 8]);
        types.extend([s("y"), 1, 0, s("z"), 2, 0]);
        // 4: struct outer { x @0, <anon union> @64 bits }
        types.extend([s("outer"), (KIND_STRUCT << 24) | 2, 16]);
        types.extend([s("x"), 1, 0, 0, 3, 64]);
        // 5: enum flags { F_DEL = 8, F_NEG = -1 }
        types.extend([s("flags"), (KIND_ENUM << 24) | 2, 4]);
        types.extend([s("F_DEL"), 8, s("F_NEG"), u32::MAX]);
        // 6: int (int dir, int dentry); 7: f, of that prototype
        types.extend([0, (KIND_FUNC_PROTO << 24) | 2, 1]);
        types.extend([s("dir"), 1, s("dentry"), 1]);
        types.extend([s("f"), KIND_FUNC << 24, 6]);
        // 8: struct bits, kind_flag: offsets hold (bitfield size << 24) | bit offset
        types.extend([s("bits"), KIND_FLAG | (KIND_STRUCT << 24) | 3, 12]);
        types.extend([
            s("lo"),
            1,
            3 << 24,
            s("pad"),
            1,
            32,
            s("hi"),
            1,
            (5 << 24) | 64,
        ]);
        blob(&types, strings)
    }

    /// A BTF blob of these type words and strings.
    fn blob(types: &[u32], strings: &[u8]) -> Vec<u8> {
        let types: Vec<u8> = types.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut blob = vec![0x9f, 0xeb, 1, 0];
        let type_len = u32::try_from(types.len()).unwrap();
        let str_len = u32::try_from(strings.len()).unwrap();
        for v in [24u32, 0, type_len, type_len, str_len] {
            blob.extend(v.to_le_bytes());
        }
        blob.extend(types);
        blob.extend(strings);
        blob
    }

    #[test]
    fn a_struct_made_of_itself_is_searched_in_bounded_time() {
        // struct loop { 60,000 anonymous members, each a struct loop }: nine levels deep
        // would be 60,000^9 members looked at.
        let members = 60_000;
        let mut types = vec![1, (KIND_STRUCT << 24) | members, 8];
        for _ in 0..members {
            types.extend([0, 1, 0]);
        }
        let data = blob(&types, b"\0loop\0x\0");
        let btf = Btf::parse(&data).unwrap();
        assert_eq!(
            btf.offset_of("loop", "x"),
            Err(BtfError::NoMember("loop".into(), "x".into()))
        );
    }

    #[test]
    fn finds_members_through_anonymous_unions_and_dotted_paths() {
        let data = sample();
        let btf = Btf::parse(&data).unwrap();
        assert_eq!(btf.offset_of("outer", "x"), Ok(0));
        assert_eq!(btf.offset_of("outer", "y"), Ok(8));
        assert_eq!(btf.offset_of("outer", "z"), Ok(8));
        assert_eq!(btf.offset_of("outer", "z.b"), Ok(12));
        assert_eq!(btf.offset_of("inner", "b"), Ok(4));
        assert_eq!(
            btf.offset_of("outer", "w"),
            Err(BtfError::NoMember("outer".into(), "w".into()))
        );
        assert_eq!(
            btf.offset_of("nope", "x"),
            Err(BtfError::NoStruct("nope".into()))
        );
    }

    #[test]
    fn bitfield_members_resolve_to_their_offset_without_their_size() {
        let data = sample();
        let btf = Btf::parse(&data).unwrap();
        assert_eq!(btf.offset_of("bits", "lo"), Ok(0));
        assert_eq!(
            btf.offset_of("bits", "pad"),
            Ok(4),
            "a plain member beside bitfields"
        );
        assert_eq!(
            btf.offset_of("bits", "hi"),
            Ok(8),
            "the size bits are not offset"
        );
    }

    #[test]
    fn finds_enumerators_and_parameter_names() {
        let data = sample();
        let btf = Btf::parse(&data).unwrap();
        assert_eq!(btf.enum_value("F_DEL"), Some(8));
        assert_eq!(btf.enum_value("F_NEG"), Some(u64::MAX));
        assert_eq!(btf.enum_value("F_NONE"), None);
        assert_eq!(
            btf.parameters("f"),
            Some(vec!["dir".to_owned(), "dentry".to_owned()])
        );
        // A struct's member name is not a function.
        assert_eq!(btf.parameters("x"), None);
    }

    #[test]
    fn rejects_garbage_and_truncation() {
        assert!(matches!(Btf::parse(b"ELF\0"), Err(BtfError::Malformed(_))));
        let blob = sample();
        assert!(matches!(
            Btf::parse(&blob[..blob.len() - 30]),
            Err(BtfError::Malformed(_))
        ));
    }

    #[test]
    fn reads_this_kernels_dentry_and_inode_layout() {
        // The machines this project builds on have BTF (see docs/kernels.md).
        let btf = Btf::from_sys_fs().unwrap();
        let d_inode = btf.offset_of("dentry", "d_inode").unwrap();
        let d_flags = btf.offset_of("dentry", "d_flags").unwrap();
        assert!(d_inode > d_flags, "d_flags leads struct dentry");
        assert!(btf.offset_of("inode", "i_rwsem").unwrap() > 0);
        assert_eq!(
            btf.offset_of("dentry", "d_hash.pprev").unwrap(),
            btf.offset_of("dentry", "d_hash").unwrap() + 8
        );
    }

    #[test]
    fn says_what_is_wrong_with_a_blob_it_cannot_read() {
        let why = |blob: &[u8]| match Btf::parse(blob) {
            Err(BtfError::Malformed(why)) => why,
            other => panic!("{other:?}"),
        };
        assert!(why(b"ELF\0").contains("no 0xeb9f magic"));
        assert!(why(&[0xeb, 0x9f, 1, 0]).contains("big-endian"));
        let blob = sample();
        assert!(why(&blob[..20]).contains("header is cut short"));
        // The string section's length one past the blob.
        let mut long = blob.clone();
        let str_len = u32::from_le_bytes(long[20..24].try_into().unwrap());
        long[20..24].copy_from_slice(&(str_len + 1).to_le_bytes());
        assert!(why(&long).contains("string section"), "{}", why(&long));
        // Type 1 (the int) made kind 31, which BTF does not define.
        let mut unknown = blob.clone();
        unknown[24 + 7] = 31;
        assert_eq!(why(&unknown), "type 1 is of kind 31, unknown to tracer");
        // Struct inner (type 2) claiming 200 members.
        let mut past = blob;
        past[24 + 16 + 4] = 200;
        assert_eq!(why(&past), "type 2 runs past the type section");
    }

    /// The answers of btf-rs, which tracer used before its own walk: the same questions
    /// asked of btf-rs's types, to hold the walk to.
    struct Reference(btf_rs::Btf);

    use btf_rs::BtfType as _;

    impl Reference {
        fn name(&self, t: &dyn btf_rs::BtfType) -> String {
            self.0.resolve_name(t).unwrap_or_default()
        }

        /// A struct's or union's members: (name, bit offset, type id).
        fn members(&self, id: u32) -> Option<Vec<(String, u32, u32)>> {
            let Ok(btf_rs::Type::Struct(c) | btf_rs::Type::Union(c)) =
                self.0.resolve_type_by_id(id)
            else {
                return None;
            };
            c.members
                .iter()
                .map(|m| Some((self.name(m), m.bit_offset(), m.get_type_id()?)))
                .collect()
        }

        fn find(&self, id: u32, member: &str, depth: u32) -> Option<(u32, u32)> {
            if depth > 8 {
                return None;
            }
            let members = self.members(id)?;
            if let Some((_, bits, t)) = members.iter().find(|(n, _, _)| n == member) {
                return Some((*bits, *t));
            }
            members
                .iter()
                .filter(|(n, _, _)| n.is_empty())
                .find_map(|(_, bits, t)| {
                    self.find(*t, member, depth + 1).map(|(b, t)| (bits + b, t))
                })
        }

        fn offset_of(&self, name: &str, member: &str) -> Result<u32, BtfError> {
            let mut id = self
                .0
                .resolve_ids_by_name(name)
                .unwrap_or_default()
                .into_iter()
                .find(|id| matches!(self.0.resolve_type_by_id(*id), Ok(btf_rs::Type::Struct(_))))
                .ok_or_else(|| BtfError::NoStruct(name.into()))?;
            let mut total = 0;
            for part in member.split('.') {
                let (bits, type_id) = self
                    .find(id, part, 0)
                    .ok_or_else(|| BtfError::NoMember(name.into(), member.into()))?;
                total += bits;
                id = type_id;
            }
            Ok(total / 8)
        }

        fn parameters(&self, name: &str) -> Option<Vec<String>> {
            let func = self
                .0
                .resolve_types_by_name(name)
                .ok()?
                .into_iter()
                .find_map(|t| match t {
                    btf_rs::Type::Func(f) => Some(f),
                    _ => None,
                })?;
            let Ok(btf_rs::Type::FuncProto(proto)) = self.0.resolve_chained_type(&func) else {
                return None;
            };
            Some(proto.parameters.iter().map(|p| self.name(p)).collect())
        }

        /// Every enumerator's value, the first declared winning; an `enum`'s sign-extended.
        #[expect(
            clippy::cast_possible_wrap,
            clippy::cast_sign_loss,
            reason = "BTF stores an s32; its bit pattern kept"
        )]
        fn enumerators(&self) -> Vec<(String, u64)> {
            let (first, last) = self.0.base().type_id_range();
            let mut seen = std::collections::HashSet::new();
            let mut out = Vec::new();
            for id in first..=last {
                let values: Vec<(String, u64)> = match self.0.resolve_type_by_id(id) {
                    Ok(btf_rs::Type::Enum(e)) => e
                        .members
                        .iter()
                        .map(|m| (self.name(m), i64::from(m.val() as i32) as u64))
                        .collect(),
                    Ok(btf_rs::Type::Enum64(e)) => {
                        e.members.iter().map(|m| (self.name(m), m.val())).collect()
                    }
                    _ => continue,
                };
                out.extend(values.into_iter().filter(|(n, _)| seen.insert(n.clone())));
            }
            out
        }
    }

    /// Every `step`-th of `items`, and the last.
    fn every<T: Clone>(items: &[T], step: usize) -> Vec<T> {
        let mut out: Vec<T> = items.iter().step_by(step).cloned().collect();
        out.extend(items.last().cloned());
        out
    }

    #[test]
    fn answers_as_btf_rs_does_over_this_kernels_btf() {
        answers_as_btf_rs_does(&read_sys_fs().unwrap());
    }

    /// Holds the walk to btf-rs's answers over `raw`.
    fn answers_as_btf_rs_does(raw: &[u8]) {
        let ours = Btf::parse(raw).unwrap();
        let theirs = Reference(btf_rs::Btf::from_bytes(raw).unwrap());
        let (first, last) = theirs.0.base().type_id_range();
        // btf-rs counts `void` (id 0) among them.
        assert_eq!(
            (first, last as usize),
            (0, ours.starts.len()),
            "the same types"
        );
        // Every member of every struct and union, through anonymous members: the same bit
        // offset and type. Then by name, as the loader asks, with one level of dotted path,
        // for a spread of the structs.
        let (mut paths, mut checked) = (Vec::new(), 0);
        for id in first..=last {
            let Some(fields) = theirs.members(id) else {
                continue;
            };
            for (name, _, _) in fields.iter().filter(|(n, _, _)| !n.is_empty()) {
                assert_eq!(ours.find(id, name), theirs.find(id, name, 0), "{id}.{name}");
                checked += 1;
            }
            if let Ok(btf_rs::Type::Struct(s)) = theirs.0.resolve_type_by_id(id) {
                let outer = theirs.name(&s);
                for (name, _, t) in fields.iter().filter(|(n, _, _)| !n.is_empty()) {
                    paths.push((outer.clone(), name.clone()));
                    for (inner, _, _) in theirs.members(*t).unwrap_or_default() {
                        paths.push((outer.clone(), format!("{name}.{inner}")));
                    }
                }
            }
        }
        assert!(checked > 20_000, "{checked} members");
        let asked = [
            ("dentry", "d_hash.pprev"),
            ("dentry", "d_nope"),
            ("no_such", "x"),
        ];
        let asked = asked.map(|(s, m)| (s.to_owned(), m.to_owned()));
        for (name, member) in every(&paths, 997).into_iter().chain(asked) {
            assert_eq!(
                ours.offset_of(&name, &member),
                theirs.offset_of(&name, &member),
                "{name}.{member}"
            );
        }
        // Enumerators: the same value, but where btf-rs sign-extended a value of an enum
        // that says it is unsigned.
        let enumerators = theirs.enumerators();
        assert!(enumerators.len() > 2_000, "{}", enumerators.len());
        for (name, value) in every(&enumerators, 181) {
            let found = ours.enum_value(&name).unwrap();
            assert!(
                found == value || (value >> 32 == 0xffff_ffff && found == value & 0xffff_ffff),
                "{name}: {found:#x}, btf-rs {value:#x}"
            );
        }
        assert_eq!(ours.enum_value("NO_SUCH_ENUMERATOR"), None);
        // Functions' parameters.
        let funcs: Vec<String> = (first..=last)
            .filter_map(|id| match theirs.0.resolve_type_by_id(id) {
                Ok(btf_rs::Type::Func(f)) => Some(theirs.name(&f)),
                _ => None,
            })
            .collect();
        assert!(funcs.len() > 5_000, "{} functions", funcs.len());
        for name in every(&funcs, 601).iter().chain(&["vfs_rmdir".to_owned()]) {
            assert_eq!(ours.parameters(name), theirs.parameters(name), "{name}");
        }
        assert_eq!(
            ours.parameters("dentry"),
            None,
            "a struct is not a function"
        );
    }
}
