//! Reads struct field offsets from the running kernel's BTF (`/sys/kernel/btf/vmlinux`).
//!
//! aya's Rust programs have no CO-RE relocations, so the offsets the programs need
//! (`dentry.d_inode`, `inode.i_rwsem`, ...) are looked up here and handed to them as
//! globals at load time. The BTF is parsed by `btf-rs`.

use std::{collections::HashMap, path::PathBuf, sync::OnceLock};

use btf_rs::{BtfType, Member, Type};

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
    /// Not a BTF blob, or cut short: what `btf-rs` said.
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

/// The kernel's BTF, parsed by `btf-rs`; what the programs need is looked up in it.
pub struct Btf {
    btf: btf_rs::Btf,
    /// Every enumerator by name (the first enum declaring it wins), gathered on first use.
    enumerators: OnceLock<HashMap<String, u64>>,
}

impl std::fmt::Debug for Btf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (first, last) = self.btf.base().type_id_range();
        write!(f, "Btf {{ types: {first}..={last} }}")
    }
}

impl Btf {
    /// Read the running kernel's BTF.
    ///
    /// # Errors
    /// When the file is missing (kernel without `CONFIG_DEBUG_INFO_BTF`) or malformed.
    pub fn from_sys_fs() -> Result<Self, BtfError> {
        Self::parse(&read_sys_fs()?).map_err(BtfError::in_source)
    }

    /// Parse a BTF blob.
    ///
    /// # Errors
    /// When the blob is not BTF or is cut short.
    pub fn parse(data: &[u8]) -> Result<Self, BtfError> {
        let btf = btf_rs::Btf::from_bytes(data).map_err(|e| BtfError::Malformed(e.to_string()))?;
        Ok(Btf {
            btf,
            enumerators: OnceLock::new(),
        })
    }

    /// Byte offset of `member` in struct `name`, looking through anonymous struct and union
    /// members. A dotted path (`d_hash.pprev`) descends into named members.
    ///
    /// # Errors
    /// When the struct or member does not exist.
    pub fn offset_of(&self, name: &str, member: &str) -> Result<u32, BtfError> {
        let mut id = self
            .btf
            .resolve_ids_by_name(name)
            .unwrap_or_default()
            .into_iter()
            .find(|id| matches!(self.btf.resolve_type_by_id(*id), Ok(Type::Struct(_))))
            .ok_or_else(|| BtfError::NoStruct(name.into()))?;
        let mut total = 0;
        for part in member.split('.') {
            let (bits, type_id) = self
                .find(id, part, 0)
                .ok_or_else(|| BtfError::NoMember(name.into(), member.into()))?;
            total += bits;
            // Members descended into are plain structs in the kernel's layouts used here;
            // typedefs and qualifiers are not followed.
            id = type_id;
        }
        Ok(total / 8)
    }

    /// The value of the enumerator `name` (`DCACHE_OP_DELETE`), in whichever enum declares
    /// it; `None` when no enum does (the kernel declares it as a macro, which BTF lacks).
    #[must_use]
    pub fn enum_value(&self, name: &str) -> Option<u64> {
        self.enumerators
            .get_or_init(|| self.all_enumerators())
            .get(name)
            .copied()
    }

    /// The parameter names of function `name`, in order; `None` when BTF has no such
    /// function (inlined, or not in this kernel).
    #[must_use]
    pub fn parameters(&self, name: &str) -> Option<Vec<String>> {
        let func = self
            .btf
            .resolve_types_by_name(name)
            .ok()?
            .into_iter()
            .find_map(|t| match t {
                Type::Func(f) => Some(f),
                _ => None,
            })?;
        let Ok(Type::FuncProto(proto)) = self.btf.resolve_chained_type(&func) else {
            return None;
        };
        Some(
            proto
                .parameters
                .iter()
                .map(|p| self.btf.resolve_name(p).unwrap_or_default())
                .collect(),
        )
    }

    /// Every enumerator of every enum, by name; the first declared wins.
    fn all_enumerators(&self) -> HashMap<String, u64> {
        let mut out = HashMap::new();
        let (first, last) = self.btf.base().type_id_range();
        for id in first..=last {
            let values: Vec<(String, u64)> = match self.btf.resolve_type_by_id(id) {
                // Values are signed 32-bit: sign-extend, as the kernel's enum does.
                #[expect(clippy::cast_possible_wrap, reason = "BTF stores an s32")]
                #[expect(clippy::cast_sign_loss, reason = "bit pattern kept")]
                Ok(Type::Enum(e)) => e
                    .members
                    .iter()
                    .map(|m| (self.name(m), i64::from(m.val() as i32) as u64))
                    .collect(),
                Ok(Type::Enum64(e)) => e.members.iter().map(|m| (self.name(m), m.val())).collect(),
                _ => continue,
            };
            for (name, value) in values {
                out.entry(name).or_insert(value);
            }
        }
        out
    }

    fn name(&self, t: &dyn BtfType) -> String {
        self.btf.resolve_name(t).unwrap_or_default()
    }

    /// Depth-first search for a named member, through anonymous ones (bounded depth): its
    /// bit offset (a bitfield's too) and type id.
    fn find(&self, id: u32, member: &str, depth: u32) -> Option<(u32, u32)> {
        if depth > 8 {
            return None;
        }
        let Ok(Type::Struct(composite) | Type::Union(composite)) = self.btf.resolve_type_by_id(id)
        else {
            return None;
        };
        let members: Vec<(String, &Member)> = composite
            .members
            .iter()
            .map(|m| (self.name(m), m))
            .collect();
        if let Some((_, m)) = members.iter().find(|(n, _)| n == member) {
            return Some((m.bit_offset(), m.get_type_id()?));
        }
        members
            .iter()
            .filter(|(n, _)| n.is_empty())
            .find_map(|(_, m)| {
                self.find(m.get_type_id()?, member, depth + 1)
                    .map(|(bits, t)| (m.bit_offset() + bits, t))
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
    fn finds_members_through_anonymous_unions_and_dotted_paths() {
        let btf = Btf::parse(&sample()).unwrap();
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
        let btf = Btf::parse(&sample()).unwrap();
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
        let btf = Btf::parse(&sample()).unwrap();
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
}
