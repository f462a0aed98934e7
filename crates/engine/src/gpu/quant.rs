//! The GPU's `QuantOps` without a kernel of their own: a quantizer bank created, its scales
//! set, read back and restored (the kernels' launchers sit beside them; `crate::ops`
//! declares which is which).

use super::bank_layout::{BankLayout, words};
use super::*;
use crate::bank::{BankConfig, BankSnapshot};
use crate::{EngineError, Readback, StepReadback, same_len};

pub(crate) fn new_bank(gpu: &GpuBackend, config: &BankConfig) -> Result<GpuBank, EngineError> {
    config.validate()?;
    let specs = config.scaling.estimators();
    let k = specs.len();
    let q = config.quantizers;
    let cap = config.scaling.history_len();
    let descs: Vec<scale_update::EstimatorDesc> = specs
        .iter()
        .map(|s| scale_update::EstimatorDesc::from_spec(s, config.scaling.window))
        .collect();
    let rule = config.scaling.rule();
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
    let zero_words = |n: usize| vec![0u32; n.max(4)];
    let bank = GpuBank {
        quant: config.quant().into(),
        k,
        cap,
        active: config.scaling.active_index(),
        estimators: init("bank estimators", bytemuck::cast_slice(&descs))?,
        history: init("bank history", bytemuck::cast_slice(&zero_words(q * cap)))?,
        meta: init("bank meta", bytemuck::cast_slice(&zero_words(q * 2)))?,
        amax_bits: init("bank amax", bytemuck::cast_slice(&zero_words(q)))?,
        est: init(
            "bank est",
            bytemuck::cast_slice(&vec![rule.implied_est(1.0); q * k]),
        )?,
        scales: init("bank scales", bytemuck::cast_slice(&vec![1.0f32; q * k]))?,
        stats: init(
            "bank stats",
            bytemuck::cast_slice(&zero_words(q * quant_stats::slot_words(k))),
        )?,
        hist: init(
            "bank histogram",
            bytemuck::cast_slice(&zero_words(histogram::WORDS)),
        )?,
        partials: init(
            "bank quant_stats partials",
            bytemuck::cast_slice(&zero_words(2 * super::kernel::REDUCTION_GROUPS)),
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
    let rule = bank.config.scaling.rule();
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
