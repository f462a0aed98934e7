//! Eight f32 lanes as one value: one AVX register natively (where the build targets AVX),
//! two `simd128` registers in the browser, a plain array elsewhere. Only IEEE `+` and `×`
//! lane by lane, never fused, so every lane computes exactly what the scalar loops compute:
//! the kernels written with it stay bit-identical to their readable references. It exists
//! because the compiler's own vectorization of register blocks (arrays of accumulators) was
//! unreliable: it mixed lanes of different rows and kept the accumulators in memory.

#![allow(unsafe_code)]

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

impl F8 {
    /// `self + c·x` lane by lane: the product rounded, then the sum (no fused multiply-add).
    #[inline(always)]
    pub(crate) fn add_scaled(self, c: f32, x: F8) -> F8 {
        self.add(F8::splat(c).mul(x))
    }

    /// The first [`LANES`] elements of `x` (panics if shorter).
    #[inline(always)]
    pub(crate) fn at(x: &[f32]) -> F8 {
        F8::load(first(x))
    }

    /// The lanes as an array.
    #[inline(always)]
    pub(crate) fn to_array(self) -> [f32; LANES] {
        let mut out = [0.0; LANES];
        self.store(&mut out);
        out
    }
}

/// The first [`LANES`] elements of `x` as an array (panics if shorter).
#[inline(always)]
fn first(x: &[f32]) -> &[f32; LANES] {
    let Some(head) = x.first_chunk::<LANES>() else {
        panic!("simd: {} elements, {LANES} needed", x.len());
    };
    head
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_compute_what_scalars_compute() {
        let v = crate::cpu::test_data::values(64, 7, 1e3);
        let (a, b) = (&v[..8], &v[8..16]);
        for c in [0.0, -1.5, 3.25e-3, f32::MIN_POSITIVE, 7.1e7] {
            let got = F8::at(a).add_scaled(c, F8::at(b)).to_array();
            for l in 0..LANES {
                assert_eq!(
                    got[l].to_bits(),
                    (a[l] + c * b[l]).to_bits(),
                    "lane {l}, c {c}"
                );
            }
        }
        let prod = F8::at(a).mul(F8::at(b)).to_array();
        for l in 0..LANES {
            assert_eq!(prod[l].to_bits(), (a[l] * b[l]).to_bits());
        }
        assert_eq!(F8::zero().to_array(), [0.0; LANES]);
        let mut out = [9.0; LANES];
        F8::splat(2.5).store(&mut out);
        assert_eq!(out, [2.5; LANES]);
    }
}
