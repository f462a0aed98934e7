//! Eight f32 lanes as one value ([`F8`]): one AVX register natively (where the build targets
//! AVX), two `simd128` registers in the browser, a plain array elsewhere; and sixteen
//! ([`F16`]): one AVX-512 register where the build targets AVX-512, two [`F8`] elsewhere.
//! Only IEEE `+` and `×` lane by lane, never fused, so every lane computes exactly what the
//! scalar loops compute: the kernels written with them ([`Lanes`]) stay bit-identical to their
//! readable references whatever the width (no lane is ever summed with another). They exist
//! because the compiler's own vectorization of register blocks (arrays of accumulators) was
//! unreliable: it mixed lanes of different rows and kept the accumulators in memory.

#![allow(unsafe_code)]

pub(crate) use hif8lab_scaling::stats::simd as stats;

/// Lanes of [`F8`].
pub(crate) const LANES: usize = 8;

#[cfg(all(target_arch = "x86_64", target_feature = "avx"))]
mod imp {
    use std::arch::x86_64::{
        __m256, _mm256_add_ps, _mm256_loadu_ps, _mm256_mul_ps, _mm256_set1_ps, _mm256_setzero_ps,
        _mm256_storeu_ps,
    };

    #[derive(Clone, Copy)]
    pub(crate) struct F8(__m256);

    impl F8 {
        #[inline(always)]
        pub(crate) fn zero() -> F8 {
            // SAFETY: AVX is enabled for this build (the cfg above).
            F8(unsafe { _mm256_setzero_ps() })
        }
        #[inline(always)]
        pub(crate) fn splat(x: f32) -> F8 {
            // SAFETY: as above.
            F8(unsafe { _mm256_set1_ps(x) })
        }
        #[inline(always)]
        pub(crate) fn load(x: &[f32; 8]) -> F8 {
            // SAFETY: as above; `x` is 8 readable f32 (unaligned load).
            F8(unsafe { _mm256_loadu_ps(x.as_ptr()) })
        }
        #[inline(always)]
        pub(crate) fn store(self, out: &mut [f32; 8]) {
            // SAFETY: as above; `out` is 8 writable f32 (unaligned store).
            unsafe { _mm256_storeu_ps(out.as_mut_ptr(), self.0) }
        }
        #[inline(always)]
        pub(crate) fn add(self, o: F8) -> F8 {
            // SAFETY: as above.
            F8(unsafe { _mm256_add_ps(self.0, o.0) })
        }
        #[inline(always)]
        pub(crate) fn mul(self, o: F8) -> F8 {
            // SAFETY: as above.
            F8(unsafe { _mm256_mul_ps(self.0, o.0) })
        }
    }
}

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod imp {
    use std::arch::wasm32::{f32x4_add, f32x4_mul, f32x4_splat, v128, v128_load, v128_store};

    #[derive(Clone, Copy)]
    pub(crate) struct F8(v128, v128);

    impl F8 {
        #[inline(always)]
        pub(crate) fn zero() -> F8 {
            F8(f32x4_splat(0.0), f32x4_splat(0.0))
        }
        #[inline(always)]
        pub(crate) fn splat(x: f32) -> F8 {
            F8(f32x4_splat(x), f32x4_splat(x))
        }
        #[inline(always)]
        pub(crate) fn load(x: &[f32; 8]) -> F8 {
            let p = x.as_ptr().cast::<v128>();
            // SAFETY: `x` is 8 readable f32: two 16-byte loads at offsets 0 and 16 (wasm
            // loads need no alignment).
            unsafe { F8(v128_load(p), v128_load(p.add(1))) }
        }
        #[inline(always)]
        pub(crate) fn store(self, out: &mut [f32; 8]) {
            let p = out.as_mut_ptr().cast::<v128>();
            // SAFETY: `out` is 8 writable f32, as for `load`.
            unsafe {
                v128_store(p, self.0);
                v128_store(p.add(1), self.1);
            }
        }
        #[inline(always)]
        pub(crate) fn add(self, o: F8) -> F8 {
            F8(f32x4_add(self.0, o.0), f32x4_add(self.1, o.1))
        }
        #[inline(always)]
        pub(crate) fn mul(self, o: F8) -> F8 {
            F8(f32x4_mul(self.0, o.0), f32x4_mul(self.1, o.1))
        }
    }
}

#[cfg(not(any(
    all(target_arch = "x86_64", target_feature = "avx"),
    all(target_arch = "wasm32", target_feature = "simd128")
)))]
mod imp {
    #[derive(Clone, Copy)]
    pub(crate) struct F8([f32; 8]);

    impl F8 {
        #[inline(always)]
        pub(crate) fn zero() -> F8 {
            F8([0.0; 8])
        }
        #[inline(always)]
        pub(crate) fn splat(x: f32) -> F8 {
            F8([x; 8])
        }
        #[inline(always)]
        pub(crate) fn load(x: &[f32; 8]) -> F8 {
            F8(*x)
        }
        #[inline(always)]
        pub(crate) fn store(self, out: &mut [f32; 8]) {
            *out = self.0;
        }
        #[inline(always)]
        pub(crate) fn add(self, o: F8) -> F8 {
            F8(std::array::from_fn(|l| self.0[l] + o.0[l]))
        }
        #[inline(always)]
        pub(crate) fn mul(self, o: F8) -> F8 {
            F8(std::array::from_fn(|l| self.0[l] * o.0[l]))
        }
    }
}

pub(crate) use imp::F8;

/// Whether [`F16`] is one register here (AVX-512): kernels take it only then — as two
/// [`F8`] it is what two vectors of [`F8`] already are.
pub(crate) const WIDE: bool = cfg!(all(target_arch = "x86_64", target_feature = "avx512f"));

/// Sixteen f32 lanes: one AVX-512 register.
#[cfg(all(target_arch = "x86_64", target_feature = "avx512f"))]
mod wide {
    use std::arch::x86_64::{
        __m512, _mm512_add_ps, _mm512_loadu_ps, _mm512_mul_ps, _mm512_set1_ps, _mm512_setzero_ps,
        _mm512_storeu_ps,
    };

    #[derive(Clone, Copy)]
    pub(crate) struct F16(__m512);

    impl F16 {
        #[inline(always)]
        pub(crate) fn zero() -> F16 {
            // SAFETY: AVX-512F is enabled for this build (the cfg above).
            F16(unsafe { _mm512_setzero_ps() })
        }
        #[inline(always)]
        pub(crate) fn splat(x: f32) -> F16 {
            // SAFETY: as above.
            F16(unsafe { _mm512_set1_ps(x) })
        }
        #[inline(always)]
        pub(crate) fn load(x: &[f32; 16]) -> F16 {
            // SAFETY: as above; `x` is 16 readable f32 (unaligned load).
            F16(unsafe { _mm512_loadu_ps(x.as_ptr()) })
        }
        #[inline(always)]
        pub(crate) fn store(self, out: &mut [f32; 16]) {
            // SAFETY: as above; `out` is 16 writable f32 (unaligned store).
            unsafe { _mm512_storeu_ps(out.as_mut_ptr(), self.0) }
        }
        #[inline(always)]
        pub(crate) fn add(self, o: F16) -> F16 {
            // SAFETY: as above.
            F16(unsafe { _mm512_add_ps(self.0, o.0) })
        }
        #[inline(always)]
        pub(crate) fn mul(self, o: F16) -> F16 {
            // SAFETY: as above.
            F16(unsafe { _mm512_mul_ps(self.0, o.0) })
        }
    }
}

/// Sixteen f32 lanes as two [`F8`] (lanes 0–7, 8–15).
#[cfg(not(all(target_arch = "x86_64", target_feature = "avx512f")))]
mod wide {
    use super::F8;

    #[derive(Clone, Copy)]
    pub(crate) struct F16(F8, F8);

    impl F16 {
        #[inline(always)]
        pub(crate) fn zero() -> F16 {
            F16(F8::zero(), F8::zero())
        }
        #[inline(always)]
        pub(crate) fn splat(x: f32) -> F16 {
            F16(F8::splat(x), F8::splat(x))
        }
        #[inline(always)]
        pub(crate) fn load(x: &[f32; 16]) -> F16 {
            let (lo, hi) = x.split_at(8);
            F16(
                F8::load(lo.try_into().expect("8 lanes")),
                F8::load(hi.try_into().expect("8 lanes")),
            )
        }
        #[inline(always)]
        pub(crate) fn store(self, out: &mut [f32; 16]) {
            let (lo, hi) = out.split_at_mut(8);
            self.0.store(lo.try_into().expect("8 lanes"));
            self.1.store(hi.try_into().expect("8 lanes"));
        }
        #[inline(always)]
        pub(crate) fn add(self, o: F16) -> F16 {
            F16(self.0.add(o.0), self.1.add(o.1))
        }
        #[inline(always)]
        pub(crate) fn mul(self, o: F16) -> F16 {
            F16(self.0.mul(o.0), self.1.mul(o.1))
        }
    }
}

pub(crate) use wide::F16;

/// A vector of [`Lanes::W`] f32 lanes, lane by lane IEEE `+` and `×` (the kernels are
/// written once for [`F8`] and [`F16`]).
pub(crate) trait Lanes: Copy {
    /// Lanes.
    const W: usize;
    fn zero() -> Self;
    fn splat(x: f32) -> Self;
    /// The first `W` elements of `x` (panics if shorter).
    fn at(x: &[f32]) -> Self;
    /// Into the first `W` elements of `out` (panics if shorter).
    fn store_at(self, out: &mut [f32]);
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;

    /// `self + c·x` lane by lane: the product rounded, then the sum (no fused multiply-add).
    #[inline(always)]
    fn add_scaled(self, c: f32, x: Self) -> Self {
        self.add(Self::splat(c).mul(x))
    }

    /// The first `out.len()` lanes (at most `W`) into `out`.
    #[inline(always)]
    fn store_prefix(self, out: &mut [f32]) {
        let mut all = [0.0f32; 16];
        self.store_at(&mut all);
        let n = out.len();
        out.copy_from_slice(&all[..n]);
    }
}

/// The first `N` elements of `x` as an array (panics if shorter).
#[inline(always)]
fn head<const N: usize>(x: &[f32]) -> &[f32; N] {
    let Some(head) = x.first_chunk::<N>() else {
        panic!("simd: {} elements, {N} needed", x.len());
    };
    head
}

/// The first `N` elements of `x` as a mutable array (panics if shorter).
#[inline(always)]
fn head_mut<const N: usize>(x: &mut [f32]) -> &mut [f32; N] {
    let n = x.len();
    x.first_chunk_mut::<N>()
        .unwrap_or_else(|| panic!("simd: {n} elements, {N} needed"))
}

/// [`Lanes`] of a lane type from its own methods (the same for [`F8`] and [`F16`]).
macro_rules! lanes_of {
    ($t:ident, $w:literal) => {
        impl Lanes for $t {
            const W: usize = $w;
            #[inline(always)]
            fn zero() -> Self {
                $t::zero()
            }
            #[inline(always)]
            fn splat(x: f32) -> Self {
                $t::splat(x)
            }
            #[inline(always)]
            fn at(x: &[f32]) -> Self {
                $t::load(head(x))
            }
            #[inline(always)]
            fn store_at(self, out: &mut [f32]) {
                self.store(head_mut(out));
            }
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                $t::add(self, o)
            }
            #[inline(always)]
            fn mul(self, o: Self) -> Self {
                $t::mul(self, o)
            }
        }
    };
}

lanes_of!(F8, 8);
lanes_of!(F16, 16);

#[cfg(test)]
mod tests {
    use super::*;

    fn lanes_compute_what_scalars_compute<L: Lanes>() {
        let w = L::W;
        let v = crate::cpu::test_data::values(64, 7, 1e3);
        let (a, b) = (&v[..w], &v[w..2 * w]);
        let array = |x: L| {
            let mut out = vec![0.0f32; w];
            x.store_at(&mut out);
            out
        };
        for c in [0.0, -1.5, 3.25e-3, f32::MIN_POSITIVE, 7.1e7] {
            let got = array(L::at(a).add_scaled(c, L::at(b)));
            for l in 0..w {
                assert_eq!(
                    got[l].to_bits(),
                    (a[l] + c * b[l]).to_bits(),
                    "{w} lanes: lane {l}, c {c}"
                );
            }
        }
        let prod = array(L::at(a).mul(L::at(b)));
        for l in 0..w {
            assert_eq!(prod[l].to_bits(), (a[l] * b[l]).to_bits());
        }
        assert_eq!(array(L::zero()), vec![0.0; w]);
        assert_eq!(array(L::splat(2.5)), vec![2.5; w]);
        let mut part = [9.0f32; 5];
        L::at(a).store_prefix(&mut part);
        assert_eq!(part, [a[0], a[1], a[2], a[3], a[4]]);
    }

    #[test]
    fn eight_and_sixteen_lanes_compute_what_scalars_compute() {
        lanes_compute_what_scalars_compute::<F8>();
        lanes_compute_what_scalars_compute::<F16>();
    }
}
