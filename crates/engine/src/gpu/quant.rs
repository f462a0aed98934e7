//! The GPU's `QuantOps` without a kernel of their own: a quantizer bank created, its scales
//! set, read back and restored (the kernels' launchers sit beside them; `crate::ops`
//! declares which is which).

use super::bank_layout::{BankLayout, words};
use super::*;
use crate::bank::{BankConfig, BankSnapshot};
use crate::{EngineError, Readback, StepReadback, same_len};

/// The words (u32 or f32) of each buffer a bank of `config` holds: the one account of its
/// layout, used to allocate it and to estimate a run's memory before it is.
struct BankWords {
    history: usize,
    meta: usize,
    amax: usize,
    /// Per (quantizer, estimator): the estimates, and the scales as many again.
    est: usize,
    stats: usize,
    hist: usize,
    partials: usize,
}

impl BankWords {
    fn of(config: &BankConfig) -> Self {
        let (q, k) = (config.quantizers, config.estimators());
        // Every buffer holds at least 4 words (a zero-sized binding is invalid).
        let w = |n: usize| n.max(4);
        BankWords {
            history: w(q * config.plan.history_len()),
            meta: w(q * 2),
            amax: w(q),
            est: q * k,
            stats: w(q * quant_stats::slot_words(k)),
            hist: w(histogram::WORDS),
            partials: w(2 * super::kernel::REDUCTION_GROUPS),
        }
    }

    fn bytes(&self, estimators: usize) -> u128 {
        let words = self.history
            + self.meta
            + self.amax
            + 2 * self.est
            + self.stats
            + self.hist
            + self.partials;
        (words * 4 + estimators * size_of::<scale_update::EstimatorDesc>()) as u128
    }
}

/// Bytes a quantizer bank of `config` takes on the device: every buffer
/// `new_bank` allocates.
pub fn bank_bytes(config: &BankConfig) -> u128 {
    BankWords::of(config).bytes(config.estimators())
}

pub(crate) fn new_bank(gpu: &GpuBackend, config: &BankConfig) -> Result<GpuBank, EngineError> {
    config.validate()?;
    let k = config.estimators();
    let cap = config.plan.history_len();
    let words = BankWords::of(config);
    let descs: Vec<scale_update::EstimatorDesc> = config
        .plan
        .descriptors()
        .iter()
        .map(scale_update::EstimatorDesc::from)
        .collect();
    let rule = config.plan.rule();
    let init = |label: &str, contents: &[u8]| -> Result<wgpu::Buffer, EngineError> {
        let limit = gpu.limits.max_storage_buffer_binding_size;
        if contents.len() as u64 > limit {
            return Err(EngineError::TooLarge {
                what: format!("bank {label}"),
                bytes: contents.len() as u64,
                limit,
            });
        }
        Ok(gpu
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
            }))
    };
    let zero_words = |n: usize| vec![0u32; n];
    let bank = GpuBank {
        quant: config.quant().into(),
        k,
        cap,
        active: config.plan.active_index(),
        estimators: init("bank estimators", bytemuck::cast_slice(&descs))?,
        history: init(
            "bank history",
            bytemuck::cast_slice(&zero_words(words.history)),
        )?,
        meta: init("bank meta", bytemuck::cast_slice(&zero_words(words.meta)))?,
        amax_bits: init("bank amax", bytemuck::cast_slice(&zero_words(words.amax)))?,
        est: init(
            "bank est",
            bytemuck::cast_slice(&vec![rule.implied_est(1.0); words.est]),
        )?,
        scales: init(
            "bank scales",
            bytemuck::cast_slice(&vec![1.0f32; words.est]),
        )?,
        stats: init("bank stats", bytemuck::cast_slice(&zero_words(words.stats)))?,
        hist: init(
            "bank histogram",
            bytemuck::cast_slice(&zero_words(words.hist)),
        )?,
        partials: init(
            "bank quant_stats partials",
            bytemuck::cast_slice(&zero_words(words.partials)),
        )?,
        config: config.clone(),
    };
    Ok(bank)
}

pub(crate) fn set_scales(
    gpu: &GpuBackend,
    bank: &GpuBank,
    scales: &[f32],
) -> Result<(), EngineError> {
    same_len("set_scales", scales.len(), bank.config.quantizers * bank.k)?;
    let rule = bank.config.plan.rule();
    let est: Vec<f32> = scales.iter().map(|s| rule.implied_est(*s)).collect();
    gpu.write_ordered(&bank.scales, 0, bytemuck::cast_slice(scales));
    gpu.write_ordered(&bank.est, 0, bytemuck::cast_slice(&est));
    Ok(())
}

pub(crate) fn read_bank(gpu: &GpuBackend, bank: &GpuBank) -> Readback<BankSnapshot> {
    let layout = BankLayout::of(bank);
    gpu.readback(&layout.ranges(bank), move |bytes| {
        layout.decode(&words(bytes))
    })
}

pub(crate) fn read_step(
    gpu: &GpuBackend,
    tensors: &[&GpuTensor],
    bank: Option<&GpuBank>,
) -> Readback<StepReadback> {
    let mut ranges: Vec<(&wgpu::Buffer, u64, u64)> =
        tensors.iter().map(|t| (t.buffer(), 0, t.bytes())).collect();
    let lens: Vec<usize> = tensors.iter().map(|t| t.len).collect();
    let layout = bank.map(BankLayout::of);
    if let (Some(layout), Some(bank)) = (&layout, bank) {
        ranges.extend(layout.ranges(bank));
    }
    gpu.readback(&ranges, move |bytes| {
        let all = words(bytes);
        let mut at = 0;
        let tensors = lens
            .iter()
            .map(|n| {
                let v = all[at..at + n].iter().map(|w| f32::from_bits(*w)).collect();
                at += n;
                v
            })
            .collect();
        StepReadback {
            tensors,
            bank: layout.map(|l| l.decode(&all[at..])),
        }
    })
}

pub(crate) fn restore_bank(
    gpu: &GpuBackend,
    bank: &GpuBank,
    snapshot: &BankSnapshot,
) -> Result<(), EngineError> {
    let q = bank.config.quantizers;
    let (k, cap) = (bank.k, bank.cap);
    same_len("restore_bank quantizers", snapshot.quantizers.len(), q)?;
    let mut history = vec![0.0f32; q * cap];
    let mut meta = vec![0u32; q * 2];
    let mut est = Vec::with_capacity(q * k);
    let mut scales = Vec::with_capacity(q * k);
    for (i, s) in snapshot.quantizers.iter().enumerate() {
        same_len("restore_bank scales", s.scales.len(), k)?;
        same_len("restore_bank est", s.est.len(), k)?;
        let kept = &s.history[s.history.len().saturating_sub(cap)..];
        history[i * cap..i * cap + kept.len()].copy_from_slice(kept);
        meta[2 * i] = kept.len() as u32;
        meta[2 * i + 1] = (kept.len() % cap) as u32;
        est.extend_from_slice(&s.est);
        scales.extend_from_slice(&s.scales);
    }
    gpu.write_ordered(&bank.history, 0, bytemuck::cast_slice(&history));
    gpu.write_ordered(&bank.meta, 0, bytemuck::cast_slice(&meta));
    gpu.write_ordered(&bank.est, 0, bytemuck::cast_slice(&est));
    gpu.write_ordered(&bank.scales, 0, bytemuck::cast_slice(&scales));
    gpu.write_ordered(
        &bank.hist,
        0,
        bytemuck::cast_slice(&vec![0u32; histogram::WORDS]),
    );
    Ok(())
}
