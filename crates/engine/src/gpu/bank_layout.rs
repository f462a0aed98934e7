//! Where a bank's buffers sit in a readback, and how to decode them into a [`BankSnapshot`].

use super::{GpuBank, histogram, quant_stats};
use crate::bank::{BankSnapshot, QuantizerSnapshot, StatsSnapshot};

/// Where a bank's buffers sit in a readback, and how to decode them.
#[derive(Clone, Copy, Debug)]
pub(super) struct BankLayout {
    q: usize,
    k: usize,
    cap: usize,
    active: usize,
}

impl BankLayout {
    pub(super) fn of(bank: &GpuBank) -> Self {
        BankLayout {
            q: bank.config.quantizers,
            k: bank.k,
            cap: bank.cap,
            active: bank.active,
        }
    }

    /// u32 words of history, meta, measured amax, est, scales, stats, histogram.
    fn sizes(&self) -> [usize; 7] {
        let (q, k) = (self.q, self.k);
        [
            q * self.cap,
            q * 2,
            q,
            q * k,
            q * k,
            q * quant_stats::slot_words(k),
            histogram::WORDS,
        ]
    }

    pub(super) fn ranges<'a>(&self, bank: &'a GpuBank) -> Vec<(&'a wgpu::Buffer, u64, u64)> {
        let buffers = [
            &bank.history,
            &bank.meta,
            &bank.amax_bits,
            &bank.est,
            &bank.scales,
            &bank.stats,
            &bank.hist,
        ];
        buffers
            .into_iter()
            .zip(self.sizes())
            .map(|(b, n)| (b, 0, n as u64 * 4))
            .collect()
    }

    pub(super) fn decode(&self, all: &[u32]) -> BankSnapshot {
        let (q, k, cap) = (self.q, self.k, self.cap);
        let stride = quant_stats::slot_words(k);
        let mut parts = Vec::new();
        let mut at = 0;
        for n in self.sizes() {
            parts.push(&all[at..at + n]);
            at += n;
        }
        let f = |w: u32| f32::from_bits(w);
        let (history, meta, amax, est, scales, stats) =
            (parts[0], parts[1], parts[2], parts[3], parts[4], parts[5]);
        let quantizers = (0..q)
            .map(|i| {
                let len = meta[2 * i] as usize;
                let next = meta[2 * i + 1] as usize;
                let oldest = (next + cap - len.min(cap)) % cap.max(1);
                let s = &stats[i * stride..(i + 1) * stride];
                QuantizerSnapshot {
                    measured_amax: f(amax[i]),
                    est: est[i * k..(i + 1) * k].iter().map(|w| f(*w)).collect(),
                    scales: scales[i * k..(i + 1) * k].iter().map(|w| f(*w)).collect(),
                    history: (0..len)
                        .map(|j| f(history[i * cap + (oldest + j) % cap]))
                        .collect(),
                    stats: StatsSnapshot {
                        amax: f(s[0]),
                        nonfinite: u64::from(s[1]),
                        underflow: u64::from(s[2]),
                        above_est: s[3..3 + k].iter().map(|v| u64::from(*v)).collect(),
                        overflow: s[3 + k..3 + 2 * k].iter().map(|v| u64::from(*v)).collect(),
                        signal: f64::from(f(s[3 + 2 * k])),
                        noise: f64::from(f(s[4 + 2 * k])),
                    },
                }
            })
            .collect();
        let h = parts[6];
        let histogram = (h[0] > 0).then(|| crate::BankHistogram {
            quantizer: h[0] as usize - 1,
            hist: hif8lab_scaling::stats::Log2Histogram {
                zeros: u64::from(h[1]),
                below: u64::from(h[2]),
                above: u64::from(h[3]),
                nonfinite: u64::from(h[4]),
                bins: h[histogram::HEAD..].iter().map(|v| u64::from(*v)).collect(),
            },
        });
        BankSnapshot {
            active: self.active,
            quantizers,
            histogram,
        }
    }
}

/// Little-endian u32 words of a readback.
pub(super) fn words(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}
