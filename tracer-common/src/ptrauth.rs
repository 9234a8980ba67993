//! arm64's pointer authentication, as the kernel signs its own return addresses
//! (`CONFIG_ARM64_PTR_AUTH_KERNEL`, on in Debian's arm64 kernels): a function's prologue
//! (`paciasp`) signs the return address in x30 before saving it in its frame record, the
//! signature in the bits above the virtual address size. A return address read from a
//! kernel stack is compared with, or looked up among, kernel addresses only once stripped.

/// The kernel's `ptrauth_kernel_pac_mask()`, `GENMASK_ULL(63, va_bits)`: the bits a kernel
/// address of a `va_bits` address space has all set, and a signed return address carries
/// its signature in. 0 (nothing to strip) for a size out of range, as on x86-64, where the
/// loader gives none.
#[inline(always)]
#[must_use]
pub const fn kernel_pac_mask(va_bits: u32) -> u64 {
    if va_bits == 0 || va_bits >= 64 {
        0
    } else {
        !((1u64 << va_bits) - 1)
    }
}

/// The kernel's `ptrauth_strip_kernel_insn_pac()`: a kernel return address without its
/// signature, every bit of `mask` ([`kernel_pac_mask`]) set again. An address that was not
/// signed (a kernel without pointer authentication, or an x86-64 one with `mask` 0) is
/// returned as it is.
#[inline(always)]
#[must_use]
pub const fn strip_kernel_pac(addr: u64, mask: u64) -> u64 {
    addr | mask
}

/// The virtual address size the kernel's text at `text` (its `_text` and `_etext`, say)
/// shows: one more than the number of low bits below the run of ones every such address
/// starts with. The kernel image lies in the upper half of the kernel's address space, so
/// this is the size the kernel was built for (48 on Debian's arm64 kernels) or, where its
/// image was placed higher still, less; never more than the size the kernel runs with. So
/// stripping with its [`kernel_pac_mask`] clears every signature bit and changes no bit of
/// an address in that text. None where an address is not a kernel one (no leading ones:
/// `/proc/kallsyms` showed zeros, or user addresses).
#[must_use]
pub fn text_va_bits(text: &[u64]) -> Option<u32> {
    let ones = text.iter().map(|a| a.leading_ones()).min()?;
    (2..64).contains(&ones).then(|| 65 - ones)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signed_return_address_strips_to_the_function_it_returns_into() {
        // 48-bit VA: the signature in bits 63..56 and 54..48, bit 55 (kernel half) kept.
        let mask = kernel_pac_mask(48);
        assert_eq!(mask, 0xffff_0000_0000_0000);
        let returns_to = 0xffff_8000_0812_a4c8;
        for signed in [0x3cd5_8000_0812_a4c8, 0x00a0_8000_0812_a4c8, returns_to] {
            assert_eq!(strip_kernel_pac(signed, mask), returns_to, "{signed:#x}");
        }
        // 39-bit VA (4K pages, three levels): the signature reaches down to bit 39.
        let mask39 = kernel_pac_mask(39);
        assert_eq!(
            strip_kernel_pac(0x5a9b_ab80_0812_a4c8, mask39),
            0xffff_ff80_0812_a4c8
        );
        // A 48-bit mask would leave part of that signature in place.
        assert_ne!(
            strip_kernel_pac(0x5a9b_ab80_0812_a4c8, mask),
            0xffff_ff80_0812_a4c8
        );
    }

    #[test]
    fn nothing_is_stripped_without_a_size() {
        assert_eq!(kernel_pac_mask(0), 0);
        assert_eq!(kernel_pac_mask(64), 0);
        // x86-64: the loader gives no size, and an address compares as read.
        assert_eq!(
            strip_kernel_pac(0xffff_ffff_8105_0000, 0),
            0xffff_ffff_8105_0000
        );
    }

    #[test]
    fn the_va_size_is_read_from_the_kernel_text_addresses() {
        // Debian's arm64 kernels (VA_BITS=48), with and without KASLR.
        assert_eq!(
            text_va_bits(&[0xffff_8000_0801_0000, 0xffff_8000_0a00_0000]),
            Some(48)
        );
        assert_eq!(text_va_bits(&[0xffff_a3c1_5e21_0000]), Some(48));
        // An image placed high by KASLR shows a smaller size, whose mask changes no bit of
        // its addresses; the lowest of the text's bounds decides.
        assert_eq!(text_va_bits(&[0xffff_c000_0001_0000]), Some(47));
        assert_eq!(
            text_va_bits(&[0xffff_bfff_ff00_0000, 0xffff_c000_0100_0000]),
            Some(48)
        );
        // 39-bit VA.
        assert_eq!(text_va_bits(&[0xffff_ffc0_0801_0000]), Some(39));
        // Hidden addresses (kptr_restrict) or nothing read: no size.
        assert_eq!(text_va_bits(&[0]), None);
        assert_eq!(text_va_bits(&[]), None);
        // Every address of the text keeps its bits under the mask of the size read.
        let text = [0xffff_8000_0801_0000_u64, 0xffff_8000_0a00_0000];
        let mask = kernel_pac_mask(text_va_bits(&text).unwrap());
        for a in text {
            assert_eq!(strip_kernel_pac(a, mask), a);
        }
    }
}
