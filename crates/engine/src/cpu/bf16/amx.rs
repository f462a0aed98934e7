//! The AMX kernel: `TDPBF16PS` on tiles of 16 rows × 16 pairs.
//!
//! A C block of 32×32 is four accumulator tiles (tmm0–tmm3: rows 0–15 and 16–31 × columns
//! 0–15 and 16–31), fed per chunk of 16 pairs of k by two tiles of A (tmm4, tmm5: 16 rows ×
//! 16 pairs each) and two of B (tmm6, tmm7: 16 pairs × 16 columns). `TDPBF16PS` keeps, per
//! element of C, two f32 sums over the chunk (the even products and the odd ones, k
//! ascending) and adds their sum to C: `c ← c + (even + odd)`, one rounding per addition
//! (measured on this kernel against the scalar twin, [`super::reference`]).
//!
//! The instructions are written as inline assembly (Rust has no stable AMX intrinsics or
//! target features); the tile registers are used nowhere else, so they hold their values from
//! one `asm!` block to the next on the same thread.

use super::{AMX_KC as KC, AMX_MR as MR};
use std::arch::asm;

/// The tile configuration: palette 1, the eight tiles 16 rows × 64 bytes.
#[repr(C, align(64))]
struct Config([u8; 64]);

const CONFIG: Config = {
    let mut c = [0u8; 64];
    c[0] = 1;
    let mut t = 0;
    while t < 8 {
        // Bytes per row (u16, little-endian) at 16 + 2t; rows at 48 + t.
        c[16 + 2 * t] = 64;
        c[48 + t] = 16;
        t += 1;
    }
    Config(c)
};

/// Whether the CPU has AMX-TILE and AMX-BF16 (CPUID leaf 7: EDX bits 24 and 22; std's
/// detection of these features is not stable yet).
pub(super) fn on_cpu() -> bool {
    // SAFETY: CPUID exists on every x86-64 CPU; leaf 7 is answered by every CPU that has
    // AVX-512 (checked before this is asked).
    #[allow(unused_unsafe)]
    let leaf = unsafe { std::arch::x86_64::__cpuid_count(7, 0) };
    leaf.edx & (1 << 24) != 0 && leaf.edx & (1 << 22) != 0
}

/// Whether Linux lets this process use the tiles' data (it must ask once:
/// `arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`; the permission is the process's, for
/// every thread).
pub(super) fn permitted() -> bool {
    #[cfg(target_os = "linux")]
    {
        const ARCH_REQ_XCOMP_PERM: libc::c_ulong = 0x1023;
        const XFEATURE_XTILEDATA: libc::c_ulong = 18;
        // SAFETY: a system call with two integer arguments; it changes only what the
        // process may do.
        unsafe {
            libc::syscall(
                libc::SYS_arch_prctl,
                ARCH_REQ_XCOMP_PERM,
                XFEATURE_XTILEDATA,
            ) == 0
        }
    }
    #[cfg(not(target_os = "linux"))]
    false
}

/// The tiles of this thread, configured for [`Tiles::block`] while it lives (not `Send`: the
/// configuration is the thread's); released when dropped.
pub(super) struct Tiles(std::marker::PhantomData<*const ()>);

impl Tiles {
    /// # Safety
    /// The CPU has AMX-TILE and AMX-BF16, and [`permitted`] answered `true` in this process.
    pub(super) unsafe fn configure() -> Tiles {
        // SAFETY: the configuration is 64 aligned bytes; the caller vouches for the CPU.
        unsafe {
            asm!("ldtilecfg [{}]", in(reg) CONFIG.0.as_ptr(), options(nostack, readonly, preserves_flags))
        };
        Tiles(std::marker::PhantomData)
    }

    /// One 32×32 block of sums over `chunks` chunks of [`KC`] pairs into `out` (row-major,
    /// 32 f32 a row): A's 32 rows start at `a`, `sa` pairs apart; B's chunk c starts at
    /// `b + c·KC·32`, its rows (pairs) 32 columns' pairs apart.
    ///
    /// # Safety
    /// `a` points to 32 rows of `sa ≥ chunks·KC` readable pairs; `b` to `chunks·KC·32`
    /// readable pairs.
    pub(super) unsafe fn block(
        &self,
        chunks: usize,
        a: *const u32,
        sa: usize,
        b: *const u32,
        out: &mut [[f32; 32]; MR],
    ) {
        // SAFETY: the tiles are configured (self exists); every tile load reads 16 rows of
        // 64 bytes inside the operands the caller vouches for; the stores write the 32×32
        // f32 of `out`.
        unsafe {
            asm!(
                "tilezero tmm0",
                "tilezero tmm1",
                "tilezero tmm2",
                "tilezero tmm3",
                options(nostack, nomem, preserves_flags)
            );
            for c in 0..chunks {
                asm!(
                    // Each load just before the first product that reads it (measured
                    // faster than all four loads first: the tiles are not renamed).
                    "tileloadd tmm4, [{a0} + {sa}*1]",
                    "tileloadd tmm6, [{b0} + {sb}*1]",
                    "tdpbf16ps tmm0, tmm4, tmm6",
                    "tileloadd tmm7, [{b1} + {sb}*1]",
                    "tdpbf16ps tmm1, tmm4, tmm7",
                    "tileloadd tmm5, [{a1} + {sa}*1]",
                    "tdpbf16ps tmm2, tmm5, tmm6",
                    "tdpbf16ps tmm3, tmm5, tmm7",
                    a0 = in(reg) a.add(c * KC),
                    a1 = in(reg) a.add(16 * sa + c * KC),
                    b0 = in(reg) b.add(c * KC * 32),
                    b1 = in(reg) b.add(c * KC * 32 + 16),
                    sa = in(reg) sa * 4,
                    sb = in(reg) 128usize,
                    options(nostack, readonly, preserves_flags)
                );
            }
            let o = out.as_mut_ptr().cast::<f32>();
            asm!(
                "tilestored [{o0} + {s}*1], tmm0",
                "tilestored [{o1} + {s}*1], tmm1",
                "tilestored [{o2} + {s}*1], tmm2",
                "tilestored [{o3} + {s}*1], tmm3",
                o0 = in(reg) o,
                o1 = in(reg) o.add(16),
                o2 = in(reg) o.add(16 * 32),
                o3 = in(reg) o.add(16 * 32 + 16),
                s = in(reg) 128usize,
                options(nostack, preserves_flags)
            );
        }
    }
}

impl Drop for Tiles {
    fn drop(&mut self) {
        // SAFETY: the tiles were configured by `configure` on this thread.
        unsafe { asm!("tilerelease", options(nostack, nomem, preserves_flags)) };
    }
}
