//! Reads struct field offsets from the running kernel's BTF (`/sys/kernel/btf/vmlinux`).
//!
//! aya's Rust programs have no CO-RE relocations, so the offsets the programs need
//! (`dentry.d_inode`, `inode.i_rwsem`, ...) are looked up here and handed to them as
//! globals at load time. Only what that needs is parsed: type records and names.

use std::collections::HashMap;

/// Why an offset could not be found.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BtfError {
    /// Not a BTF blob, or cut short.
    #[error("malformed BTF: {0}")]
    Malformed(&'static str),
    /// No struct of that name.
    #[error("BTF has no struct {0}")]
    NoStruct(String),
    /// The struct has no such member (at any depth of anonymous members).
    #[error("BTF struct {0} has no member {1}")]
    NoMember(String, String),
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
pub fn read_sys_fs() -> Result<Vec<u8>, String> {
    match GIVEN.get() {
        Some(path) => std::fs::read(path).map_err(|e| format!("--btf {}: {e}", path.display())),
        None => std::fs::read(VMLINUX).map_err(|e| {
            format!(
                "{VMLINUX}: {e} (the kernel needs CONFIG_DEBUG_INFO_BTF=y, or give its BTF \
                 with --btf PATH)"
            )
        }),
    }
}

const KIND_INT: u32 = 1;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_FUNC: u32 = 12;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;
const KIND_DECL_TAG: u32 = 17;
const KIND_ENUM64: u32 = 19;

/// One struct or union member.
#[derive(Clone, Debug)]
struct Member {
    name: String,
    type_id: u32,
    bit_offset: u32,
}

/// The structs and unions of a BTF blob, by type id, and struct ids by name; enumerators
/// and functions by name offset, resolved when asked for.
#[derive(Debug, Default)]
pub struct Btf {
    composites: HashMap<u32, Vec<Member>>,
    struct_by_name: HashMap<String, u32>,
    /// The string section, for the names below.
    strings: Vec<u8>,
    /// Every enumerator: (name offset, value).
    enumerators: Vec<(u32, u64)>,
    /// Every function: (name offset, its prototype's parameter name offsets).
    functions: Vec<(u32, u32)>,
    /// Parameter name offsets of each function prototype, by type id.
    prototypes: HashMap<u32, Vec<u32>>,
}

fn u32_at(data: &[u8], off: usize) -> Result<u32, BtfError> {
    data.get(off..off + 4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or(BtfError::Malformed("truncated"))
}

impl Btf {
    /// Read the running kernel's BTF.
    ///
    /// # Errors
    /// When the file is missing (kernel without `CONFIG_DEBUG_INFO_BTF`) or malformed.
    pub fn from_sys_fs() -> Result<Self, String> {
        Self::parse(&read_sys_fs()?).map_err(|e| format!("{}: {e}", source().display()))
    }

    /// Parse a little-endian BTF blob.
    ///
    /// # Errors
    /// When the blob is not BTF or is cut short.
    pub fn parse(data: &[u8]) -> Result<Self, BtfError> {
        if data.get(0..2) != Some(&[0x9f, 0xeb]) {
            return Err(BtfError::Malformed("bad magic (not little-endian BTF)"));
        }
        let hdr_len = u32_at(data, 4)? as usize;
        let type_off = u32_at(data, 8)? as usize;
        let type_len = u32_at(data, 12)? as usize;
        let str_off = u32_at(data, 16)? as usize;
        let str_len = u32_at(data, 20)? as usize;
        let types = data
            .get(hdr_len + type_off..hdr_len + type_off + type_len)
            .ok_or(BtfError::Malformed("type section out of bounds"))?;
        let strings = data
            .get(hdr_len + str_off..hdr_len + str_off + str_len)
            .ok_or(BtfError::Malformed("string section out of bounds"))?;
        let name = |off: u32| -> String {
            let s = strings.get(off as usize..).unwrap_or_default();
            let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
            String::from_utf8_lossy(&s[..end]).into_owned()
        };

        let mut btf = Btf {
            strings: strings.to_vec(),
            ..Btf::default()
        };
        let mut pos = 0;
        let mut id = 1; // type 0 is void
        while pos < types.len() {
            let name_off = u32_at(types, pos)?;
            let info = u32_at(types, pos + 4)?;
            let vlen = (info & 0xffff) as usize;
            let kind = (info >> 24) & 0x1f;
            let kind_flag = info >> 31 == 1;
            pos += 12;
            let extra = match kind {
                KIND_INT | KIND_VAR | KIND_DECL_TAG => 4,
                KIND_ARRAY => 12,
                KIND_STRUCT | KIND_UNION | KIND_DATASEC | KIND_ENUM64 => vlen * 12,
                KIND_ENUM | KIND_FUNC_PROTO => vlen * 8,
                _ => 0,
            };
            match kind {
                KIND_ENUM => {
                    for m in 0..vlen {
                        let at = pos + m * 8;
                        // Values are signed 32-bit: sign-extend, as the kernel's enum does.
                        #[expect(clippy::cast_possible_wrap, reason = "BTF stores an s32")]
                        let value = i64::from(u32_at(types, at + 4)? as i32);
                        #[expect(clippy::cast_sign_loss, reason = "bit pattern kept")]
                        btf.enumerators.push((u32_at(types, at)?, value as u64));
                    }
                }
                KIND_ENUM64 => {
                    for m in 0..vlen {
                        let at = pos + m * 12;
                        let value = u64::from(u32_at(types, at + 4)?)
                            | (u64::from(u32_at(types, at + 8)?) << 32);
                        btf.enumerators.push((u32_at(types, at)?, value));
                    }
                }
                // A function's "size" field is its prototype's type id.
                KIND_FUNC => btf.functions.push((name_off, u32_at(types, pos - 4)?)),
                KIND_FUNC_PROTO => {
                    let params = (0..vlen)
                        .map(|m| u32_at(types, pos + m * 8))
                        .collect::<Result<_, _>>()?;
                    btf.prototypes.insert(id, params);
                }
                _ => {}
            }
            if kind == KIND_STRUCT || kind == KIND_UNION {
                let mut members = Vec::with_capacity(vlen);
                for m in 0..vlen {
                    let at = pos + m * 12;
                    let raw_offset = u32_at(types, at + 8)?;
                    members.push(Member {
                        name: name(u32_at(types, at)?),
                        type_id: u32_at(types, at + 4)?,
                        // With kind_flag, the top 8 bits hold a bitfield's size.
                        bit_offset: if kind_flag {
                            raw_offset & 0x00ff_ffff
                        } else {
                            raw_offset
                        },
                    });
                }
                btf.composites.insert(id, members);
                if kind == KIND_STRUCT && name_off != 0 {
                    btf.struct_by_name.entry(name(name_off)).or_insert(id);
                }
            }
            pos += extra;
            if pos > types.len() {
                return Err(BtfError::Malformed("type record cut short"));
            }
            id += 1;
        }
        Ok(btf)
    }

    /// Byte offset of `member` in struct `name`, looking through anonymous struct and union
    /// members. A dotted path (`d_hash.pprev`) descends into named members.
    ///
    /// # Errors
    /// When the struct or member does not exist.
    pub fn offset_of(&self, name: &str, member: &str) -> Result<u32, BtfError> {
        let mut id = *self
            .struct_by_name
            .get(name)
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
            .iter()
            .find(|(off, _)| self.name_is(*off, name))
            .map(|(_, v)| *v)
    }

    /// The parameter names of function `name`, in order; `None` when BTF has no such
    /// function (inlined, or not in this kernel).
    #[must_use]
    pub fn parameters(&self, name: &str) -> Option<Vec<String>> {
        let (_, proto) = self
            .functions
            .iter()
            .find(|(off, _)| self.name_is(*off, name))?;
        let params = self.prototypes.get(proto)?;
        Some(params.iter().map(|off| self.name(*off)).collect())
    }

    fn name_bytes(&self, off: u32) -> &[u8] {
        let s = self.strings.get(off as usize..).unwrap_or_default();
        let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
        &s[..end]
    }

    fn name_is(&self, off: u32, name: &str) -> bool {
        self.name_bytes(off) == name.as_bytes()
    }

    fn name(&self, off: u32) -> String {
        String::from_utf8_lossy(self.name_bytes(off)).into_owned()
    }

    /// Depth-first search for a named member, through anonymous ones (bounded depth).
    fn find(&self, id: u32, member: &str, depth: u32) -> Option<(u32, u32)> {
        if depth > 8 {
            return None;
        }
        let members = self.composites.get(&id)?;
        if let Some(m) = members.iter().find(|m| m.name == member) {
            return Some((m.bit_offset, m.type_id));
        }
        members.iter().filter(|m| m.name.is_empty()).find_map(|m| {
            self.find(m.type_id, member, depth + 1)
                .map(|(bits, t)| (m.bit_offset + bits, t))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BTF blob with `struct inner { int a; int b; }`,
    /// `struct outer { int x; union { int y; struct inner z; }; }`,
    /// `enum flags { F_DEL = 8, F_NEG = -1 }` and `int f(int dir, int dentry)`.
    fn sample() -> Vec<u8> {
        let strings = b"\0int\0inner\0a\0b\0outer\0x\0y\0z\0flags\0F_DEL\0F_NEG\0f\0dir\0dentry\0";
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
