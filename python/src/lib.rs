//! `hif8lab._core`: the Rust codec, estimators and trace format of hif8lab for Python.
//!
//! Arrays cross the boundary as little-endian bytes (`numpy.ndarray.tobytes()` of f32 or
//! u8), so the module needs no NumPy headers and builds once for every Python ≥ 3.9 (abi3).
//! Everything here is the reference the package's PyTorch code is held to bit for bit:
//! `qdq`/`encode`/`decode` are `hif8lab_format`'s, `Quantizer` is
//! `hif8lab_scaling::QuantizerState`, and traces are written and read by
//! `hif8lab_scaling::trace` (no second trace format).

mod omp;

use std::fs::OpenOptions;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use hif8lab_format::{FakeQuant, Format, Overflow};
use hif8lab_scaling::import::AmaxSeries;
use hif8lab_scaling::replay::replay as replay_all;
use hif8lab_scaling::stats::simd;
use hif8lab_scaling::trace::{TraceHeader, TraceRecord, TraceWriter, read_trace};
use hif8lab_scaling::{EstimatorKind, EstimatorSpec, QuantizerState, ScalingConfig, ScalingPlan};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn format_of(name: &str) -> PyResult<Format> {
    name.parse::<Format>().map_err(value_error)
}

fn overflow_of(saturate: bool) -> Overflow {
    if saturate {
        Overflow::Saturate
    } else {
        Overflow::Inf
    }
}

/// The fake quantizer of a format name and overflow choice, as every entry point takes them.
fn quant_of(format: &str, saturate: bool) -> PyResult<FakeQuant> {
    Ok(FakeQuant::new(format_of(format)?).with_overflow(overflow_of(saturate)))
}

fn f32s(data: &[u8]) -> PyResult<Vec<f32>> {
    if !data.len().is_multiple_of(4) {
        return Err(value_error(format!(
            "expected f32 bytes (a multiple of 4), got {} bytes",
            data.len()
        )));
    }
    Ok(data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

fn f32_bytes<'py>(py: Python<'py>, values: &[f32]) -> Bound<'py, PyBytes> {
    let mut out = Vec::with_capacity(values.len() * 4);
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
    PyBytes::new(py, &out)
}

/// `qdq(x·scale)/scale` of every f32 in `data` (little-endian bytes), as f32 bytes.
#[pyfunction]
#[pyo3(signature = (data, format="hif8", scale=1.0, saturate=false))]
fn qdq<'py>(
    py: Python<'py>,
    data: &[u8],
    format: &str,
    scale: f32,
    saturate: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    let quant = quant_of(format, saturate)?;
    let src = f32s(data)?;
    let mut dst = vec![0.0f32; src.len()];
    py.detach(|| quant.qdq_into(&src, &mut dst, scale));
    Ok(f32_bytes(py, &dst))
}

/// The 8-bit code of every f32 in `data` (no scaling), as bytes.
#[pyfunction]
#[pyo3(signature = (data, format="hif8", saturate=false))]
fn encode<'py>(
    py: Python<'py>,
    data: &[u8],
    format: &str,
    saturate: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    let f = format_of(format)?;
    let overflow = overflow_of(saturate);
    let codes: Vec<u8> = f32s(data)?.iter().map(|x| f.encode(*x, overflow)).collect();
    Ok(PyBytes::new(py, &codes))
}

/// The value of every 8-bit code in `codes`, as f32 bytes.
#[pyfunction]
#[pyo3(signature = (codes, format="hif8"))]
fn decode<'py>(py: Python<'py>, codes: &[u8], format: &str) -> PyResult<Bound<'py, PyBytes>> {
    let f = format_of(format)?;
    let values: Vec<f32> = codes.iter().map(|c| f.decode(*c)).collect();
    Ok(f32_bytes(py, &values))
}

/// The format's landmarks: max_finite, min_normal, min_subnormal, overflow_threshold,
/// underflow_max, has_inf, natural_target.
#[pyfunction]
#[pyo3(signature = (format="hif8"))]
fn facts(format: &str) -> PyResult<String> {
    let f = format_of(format)?.facts();
    Ok(serde_json::json!({
        "format": f.format.name(),
        "max_finite": f.max_finite,
        "min_normal": f.min_normal,
        "min_subnormal": f.min_subnormal,
        "overflow_threshold": f.overflow_threshold,
        "underflow_max": f.underflow_max,
        "has_inf": f.has_inf,
        "natural_target": f.natural_target,
    })
    .to_string())
}

/// The statistics of one call, by the Rust reference (`hif8lab_scaling::stats`): `x` as f32
/// bytes, one (est, scale) pair per estimator, the active scale. Returns JSON with numel,
/// amax, nonfinite, above_est [..], overflow [..], underflow, signal, noise, sqnr_db.
#[pyfunction]
#[pyo3(signature = (data, ests, scales, active_scale, format="hif8", saturate=false))]
fn tensor_stats(
    data: &[u8],
    ests: Vec<f32>,
    scales: Vec<f32>,
    active_scale: f32,
    format: &str,
    saturate: bool,
) -> PyResult<String> {
    use hif8lab_scaling::stats::{Threshold, sqnr_db, tensor_stats as stats_of};
    if ests.len() != scales.len() {
        return Err(value_error("ests and scales differ in length"));
    }
    let quant = quant_of(format, saturate)?;
    let x = f32s(data)?;
    let thresholds = Threshold::pairs(&ests, &scales);
    let s = stats_of(&x, &thresholds, active_scale, &quant);
    Ok(serde_json::json!({
        "numel": s.numel,
        "amax": s.amax,
        "nonfinite": s.nonfinite,
        "above_est": s.above_est,
        "overflow": s.overflow,
        "underflow": s.underflow,
        "signal": s.signal,
        "noise": s.noise,
        "sqnr_db": sqnr_db(s.signal, s.noise),
    })
    .to_string())
}

/// A borrowed f32 buffer of the caller's process: an address and a length, as
/// `torch.Tensor.data_ptr()` and `numel()` give them for a contiguous CPU tensor.
#[derive(Clone, Copy)]
struct Span {
    addr: usize,
    len: usize,
}

impl Span {
    fn check(self, what: &str) -> PyResult<Self> {
        let bytes = self
            .len
            .checked_mul(4)
            .filter(|b| *b <= isize::MAX as usize);
        match bytes {
            _ if self.len > 0 && self.addr == 0 => {
                Err(value_error(format!("{what}: a null address")))
            }
            _ if !self.addr.is_multiple_of(std::mem::align_of::<f32>()) => Err(value_error(
                format!("{what}: address {:#x} is not f32-aligned", self.addr),
            )),
            Some(b) if self.addr.checked_add(b).is_some() => Ok(self),
            _ => Err(value_error(format!(
                "{what}: {} f32 at {:#x} overflow the address space",
                self.len, self.addr
            ))),
        }
    }

    fn end(self) -> usize {
        self.addr + self.len * 4
    }
}

/// amax (over the non-NaN |x|), the NaN/±Inf count and `qdq(x·scale)/scale` of one operand in
/// place of the caller's buffers: `n` f32 at address `src` are read, their fake-quantized
/// values written to the `n` f32 at `dst`. The same bits as `qdq` and
/// `hif8lab_scaling::stats::amax_and_nonfinite` (the codec and the amax pass of the lab's CPU
/// backend), without copies and, for HiF8, in one read of the operand: the torch package's
/// delayed scaling on the CPU, where a compiled torch function costs more to call than its
/// work. A long operand is split over torch's own OpenMP team ([`omp`]; threads of our own
/// ran slower beside its spinning workers, measured in a training step). The caller
/// (``hif8lab.torch.fakequant._amax_qdq_into``) passes two contiguous f32 CPU tensors it keeps
/// alive over the call; the ranges must not overlap (checked).
#[pyfunction]
#[pyo3(signature = (src, dst, n, scale, format="hif8", saturate=false))]
fn amax_qdq_at(
    py: Python<'_>,
    src: usize,
    dst: usize,
    n: usize,
    scale: f32,
    format: &str,
    saturate: bool,
) -> PyResult<(f32, u64)> {
    let quant = quant_of(format, saturate)?;
    let (s, d) = (
        Span { addr: src, len: n }.check("src")?,
        Span { addr: dst, len: n }.check("dst")?,
    );
    if n > 0 && s.addr < d.end() && d.addr < s.end() {
        return Err(value_error("amax_qdq_at: src and dst overlap"));
    }
    if n == 0 {
        return Ok((0.0, 0));
    }
    // SAFETY: the caller owns two live, f32-aligned buffers of n f32 each at these addresses
    // (checked above: non-null, aligned, within the address space, disjoint), and nothing
    // else touches them during the call (the Python caller holds both tensors and waits).
    #[allow(unsafe_code)]
    let (x, out) = unsafe {
        (
            std::slice::from_raw_parts(s.addr as *const f32, n),
            std::slice::from_raw_parts_mut(d.addr as *mut f32, n),
        )
    };
    Ok(py.detach(|| amax_qdq_parallel(x, out, &quant, scale)))
}

/// The threads a long operand's CPU kernels are split over now: torch's OpenMP team where an
/// OpenMP runtime is loaded (torch's `get_num_threads()`), else 1.
#[pyfunction]
fn omp_threads() -> usize {
    omp::threads()
}

/// Operands at least this long are split over torch's OpenMP team ([`omp::parallel`]).
const PARALLEL_MIN: usize = 1 << 16;

/// [`simd::amax_qdq_into`] on the OpenMP team: contiguous parts of whole 64-element blocks,
/// one per thread; the parts' amaxes combined by max and their counts by sum (the same
/// results as one pass, whatever the split).
fn amax_qdq_parallel(x: &[f32], out: &mut [f32], quant: &FakeQuant, scale: f32) -> (f32, u64) {
    let threads = omp::threads();
    if x.len() < PARALLEL_MIN || threads < 2 {
        return simd::amax_qdq_into(x, out, quant, scale);
    }
    let chunk = x.len().div_ceil(threads).next_multiple_of(64);
    let parts: Vec<_> = x
        .chunks(chunk)
        .zip(out.chunks_mut(chunk))
        .map(|(x, out)| std::sync::Mutex::new((x, out, 0.0f32, 0u64)))
        .collect();
    omp::parallel(parts.len(), &|i| {
        let mut part = parts[i].lock().unwrap_or_else(|e| e.into_inner());
        let (x, out, ..) = &mut *part;
        let (amax, nonfinite) = simd::amax_qdq_into(x, out, quant, scale);
        (part.2, part.3) = (amax, nonfinite);
    });
    parts
        .into_iter()
        .fold((0.0f32, 0u64), |(amax, nonfinite), part| {
            let (_, _, a, n) = part.into_inner().unwrap_or_else(|e| e.into_inner());
            (amax.max(a), nonfinite + n)
        })
}

/// The statistics of one call on the caller's buffers (as [`amax_qdq_at`]): `n` f32 at `src`
/// and their fake-quantized values at `quantized` (the call's output), one (est, scale) pair
/// per estimator, the active scale and `reach` (the call's amax: bounds above it count
/// nothing without a pass). Returns (signal, noise, above_est [..], overflow [..],
/// underflow): `hif8lab_scaling::stats::tensor_counts_given`, the reference
/// [`tensor_stats`] is held to, in one pass per eight bounds.
#[pyfunction]
#[pyo3(signature = (src, quantized, n, ests, scales, active_scale, reach, format="hif8", saturate=false))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn call_stats_at(
    py: Python<'_>,
    src: usize,
    quantized: usize,
    n: usize,
    ests: Vec<f32>,
    scales: Vec<f32>,
    active_scale: f32,
    reach: f32,
    format: &str,
    saturate: bool,
) -> PyResult<(f64, f64, Vec<u64>, Vec<u64>, u64)> {
    use hif8lab_scaling::stats::{CountBounds, Threshold};
    if ests.len() != scales.len() {
        return Err(value_error("ests and scales differ in length"));
    }
    let quant = quant_of(format, saturate)?;
    let s = Span { addr: src, len: n }.check("src")?;
    let q = Span {
        addr: quantized,
        len: n,
    }
    .check("quantized")?;
    if n == 0 {
        return Ok((0.0, 0.0, vec![0; ests.len()], vec![0; ests.len()], 0));
    }
    // SAFETY: two live, f32-aligned buffers of n f32 each (checked: non-null, aligned,
    // within the address space), only read here, held by the Python caller over the call.
    #[allow(unsafe_code)]
    let (x, xq) = unsafe {
        (
            std::slice::from_raw_parts(s.addr as *const f32, n),
            std::slice::from_raw_parts(q.addr as *const f32, n),
        )
    };
    let bounds = CountBounds::new(&Threshold::pairs(&ests, &scales), active_scale, &quant);
    let t = py.detach(|| simd::tensor_counts_given(x, xq, &bounds, reach));
    Ok((t.signal, t.noise, t.above_est, t.overflow, t.underflow))
}

/// `hif8lab_format::hash_u32(seed, index)` (the lab's data order and hybrid rounding).
#[pyfunction]
fn hash_u32(seed: u32, index: u32) -> u32 {
    hif8lab_format::hash_u32(seed, index)
}

/// A scaling configuration from its JSON (the `[scaling]` table of a run config, as JSON),
/// planned: every range checked once, by the plan (the error names the field).
fn plan_of(json: &str) -> PyResult<ScalingPlan> {
    let config: ScalingConfig = serde_json::from_str(json).map_err(value_error)?;
    config
        .plan()
        .map_err(|e| value_error(format!("scaling config: {}: {e}", e.field)))
}

/// The canonical name of an estimator spelling (`max` → `max_window(64)`), its window
/// resolved with `window` (default: the lab's default window).
#[pyfunction]
#[pyo3(signature = (name, window=None))]
fn estimator_name(name: &str, window: Option<usize>) -> PyResult<String> {
    let spec: EstimatorSpec = name.parse().map_err(value_error)?;
    let default = ScalingConfig::default();
    let config = ScalingConfig {
        window: window.unwrap_or(default.window),
        ..default.comparing(&[spec])
    };
    let plan = config.plan().map_err(value_error)?;
    Ok(plan.active().to_string())
}

/// The resolved estimator list, active index and history length of a scaling config (JSON).
#[pyfunction]
fn resolve_config(config_json: &str) -> PyResult<(Vec<String>, usize, usize)> {
    let plan = plan_of(config_json)?;
    Ok((plan.names(), plan.active_index(), plan.history_len()))
}

/// The plan of a scaling config (JSON in, JSON out): what the torch bank executes, the same
/// flat estimator descriptors the WGSL `scale_update` kernel gets (`kind` is the code of
/// `EstimatorKind`, `kind_name` its name), the active index, the history length, the scale
/// rule (target, margin and 2^margin as f32), cold start, format and overflow.
#[pyfunction]
fn plan(config_json: &str) -> PyResult<String> {
    let plan = plan_of(config_json)?;
    let estimators: Vec<serde_json::Value> = plan
        .estimators()
        .iter()
        .map(|e| {
            let d = e.descriptor();
            serde_json::json!({
                "name": e.to_string(),
                "kind": d.kind,
                "kind_name": e.kind().name(),
                "n": d.n,
                "alpha": d.alpha,
                "beta": d.beta,
                "damping": d.damping,
            })
        })
        .collect();
    let rule = plan.rule();
    Ok(serde_json::json!({
        "estimators": estimators,
        "active": plan.active_index(),
        "history_len": plan.history_len(),
        "window": plan.window(),
        "target": rule.target,
        "margin": rule.margin,
        "margin_scale": hif8lab_scaling::rule::pow2(rule.margin),
        "epsilon": hif8lab_scaling::rule::EST_EPSILON,
        "cold_start": plan.cold_start().name(),
        "format": plan.format().name(),
        "overflow": plan.overflow().name(),
    })
    .to_string())
}

/// The lab's default scaling config as JSON (the one place the defaults are spelled:
/// `hif8lab_scaling::ScalingConfig::default`).
#[pyfunction]
fn default_config() -> PyResult<String> {
    serde_json::to_string(&ScalingConfig::default()).map_err(value_error)
}

/// The estimator kinds the Rust reference implements, by name, in the order of their codes
/// (`EstimatorKind::ALL`): the table the package's tests walk.
#[pyfunction]
fn estimator_kinds() -> Vec<&'static str> {
    EstimatorKind::ALL.iter().map(|k| k.name()).collect()
}

/// One quantizer's delayed-scaling state (hif8lab_scaling::QuantizerState).
#[pyclass(module = "hif8lab._core")]
struct Quantizer {
    state: QuantizerState,
}

#[pymethods]
impl Quantizer {
    /// A fresh state for a scaling config given as JSON (`{"estimator": "max_window",
    /// "window": 64, "target": 15.0, "shadow": [...], ...}`).
    #[new]
    fn new(config_json: &str) -> PyResult<Self> {
        Ok(Quantizer {
            state: QuantizerState::new(&plan_of(config_json)?),
        })
    }

    /// One whole call with this call's amax: every estimator's
    /// `(est, raw_est, scale, kept_previous, cold)`, active one at `active_index`.
    fn call(&mut self, amax: f32) -> Vec<(f32, f32, f32, bool, bool)> {
        self.state
            .call(amax)
            .iter()
            .map(|d| (d.est, d.raw_est, d.scale, d.kept_previous, d.cold))
            .collect()
    }

    /// Forgets the history and the scales (QAT switching on after warmup).
    fn reset(&mut self) {
        self.state.reset();
    }

    /// The stored amax history, oldest first.
    fn history(&self) -> Vec<f32> {
        self.state.history()
    }

    /// The scale each estimator used last.
    fn scales(&self) -> Vec<f32> {
        self.state.scales().to_vec()
    }

    /// Estimator names, in order.
    fn estimators(&self) -> Vec<String> {
        self.state
            .estimators()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    /// Index of the active estimator.
    #[getter]
    fn active_index(&self) -> usize {
        self.state.active_index()
    }
}

/// Every estimator's raw estimate for rows of amax histories kept as ring buffers, executed by
/// the Rust estimators themselves (the plan of a scaling config): what the torch bank computes
/// at each micro-batch's start on the CPU (``hif8lab.torch.bank``; its torch-op twin
/// ``estimate_rows`` runs on other devices and is tested against this, bit for bit).
#[pyclass(module = "hif8lab._core")]
struct RowEstimates {
    estimators: Vec<hif8lab_scaling::ResolvedEstimator>,
}

#[pymethods]
impl RowEstimates {
    /// The estimators of a scaling config given as JSON (the plan's, in order).
    #[new]
    fn new(config_json: &str) -> PyResult<Self> {
        Ok(RowEstimates {
            estimators: plan_of(config_json)?.estimators().to_vec(),
        })
    }

    /// `hist`: R rows of `h` f32 (little-endian bytes) as ring buffers, row r's next slot at
    /// `pos[r]` and its `n[r]` valid entries just before it (wrapping); returns [R, E] f32
    /// bytes, row by row: each estimator's estimate from the valid entries oldest first
    /// (`Estimator::estimate`; `current` gives NaN: it needs the call's own amax), NaN for
    /// a row with no entry.
    fn ring<'py>(
        &self,
        py: Python<'py>,
        hist: &[u8],
        h: usize,
        pos: Vec<usize>,
        n: Vec<usize>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        use hif8lab_scaling::Estimator;
        let rows = pos.len();
        if n.len() != rows {
            return Err(value_error(format!(
                "ring: {} positions but {} counts",
                rows,
                n.len()
            )));
        }
        if h == 0 || rows.checked_mul(h).and_then(|v| v.checked_mul(4)) != Some(hist.len()) {
            return Err(value_error(format!(
                "ring: {} bytes of history for {rows} rows of {h} f32",
                hist.len()
            )));
        }
        if let Some(r) = (0..rows).find(|&r| pos[r] >= h || n[r] > h) {
            return Err(value_error(format!(
                "ring: row {r}: position {} and count {} outside a ring of {h}",
                pos[r], n[r]
            )));
        }
        let hist = f32s(hist)?;
        let mut out = Vec::with_capacity(rows * self.estimators.len());
        let mut ordered = Vec::with_capacity(h);
        for r in 0..rows {
            let row = &hist[r * h..(r + 1) * h];
            ordered.clear();
            ordered.extend((0..n[r]).map(|k| row[(pos[r] + h - n[r] + k) % h]));
            for e in &self.estimators {
                out.push(if ordered.is_empty() || e.is_current() {
                    f32::NAN
                } else {
                    e.estimate(&ordered, f32::NAN)
                });
            }
        }
        Ok(f32_bytes(py, &out))
    }
}

/// `hif8lab replay` of amax sequences: `{quantizer: [amax…]}` as JSON in, the replay report
/// (per quantizer and estimator: calls above, worst ratio, overflow, …) as JSON out. Unset
/// settings take the lab's defaults.
#[pyfunction]
#[pyo3(signature = (series_json, window=None, target=None, format=None))]
fn replay(
    series_json: &str,
    window: Option<usize>,
    target: Option<f32>,
    format: Option<&str>,
) -> PyResult<String> {
    let series: std::collections::BTreeMap<String, Vec<f32>> =
        serde_json::from_str(series_json).map_err(value_error)?;
    let default = ScalingConfig::default();
    let config = ScalingConfig {
        window: window.unwrap_or(default.window),
        target: target.unwrap_or(default.target),
        format: format.map(format_of).transpose()?.unwrap_or(default.format),
        ..default
    };
    let plan = config
        .plan()
        .map_err(|e| value_error(format!("{}: {e}", e.field)))?;
    let series: Vec<AmaxSeries> = series
        .into_iter()
        .map(|(name, amax)| {
            let mut s = AmaxSeries::new(name);
            s.steps = (0..amax.len() as u64).collect();
            s.amax = amax;
            s
        })
        .collect();
    let report = replay_all(&series, &plan);
    serde_json::to_string(&report).map_err(value_error)
}

/// Starts a trace file at `path` with a header given as JSON (the trace schema's header),
/// replacing any file there. Written to a temporary name and renamed, so a reader never sees
/// a file without its header.
#[pyfunction]
fn trace_start(path: PathBuf, header_json: &str) -> PyResult<()> {
    let header: TraceHeader =
        serde_json::from_str(header_json).map_err(|e| value_error(format!("trace header: {e}")))?;
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let written = (|| {
        let file = std::fs::File::create(&tmp)?;
        let mut writer = TraceWriter::new(BufWriter::new(file), &header)?;
        writer.flush()?;
        writer
            .into_inner()
            .into_inner()
            .map_err(|e| e.into_error())?
            .sync_all()?;
        std::fs::rename(&tmp, &path)
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        PyOSError::new_err(format!("{}: {e}", path.display()))
    })
}

/// Appends records (a JSON array of trace records) to the trace at `path`, each checked
/// against the schema and written as one whole line; returns how many were written.
#[pyfunction]
fn trace_append(path: PathBuf, records_json: &str) -> PyResult<usize> {
    let records: Vec<TraceRecord> = serde_json::from_str(records_json)
        .map_err(|e| value_error(format!("trace records: {e}")))?;
    let mut buffer = Vec::new();
    {
        let mut writer = TraceWriter::resume(&mut buffer);
        for r in &records {
            writer
                .record(r)
                .map_err(|e| value_error(format!("trace record: {e}")))?;
        }
    }
    let mut file = OpenOptions::new()
        .append(true)
        .open(&path)
        .map_err(|e| PyOSError::new_err(format!("{}: {e}", path.display())))?;
    file.write_all(&buffer)
        .and_then(|()| file.flush())
        .map_err(|e| PyOSError::new_err(format!("{}: {e}", path.display())))?;
    Ok(records.len())
}

/// Reads a trace: `(header, records, warnings)` as JSON texts (records as one JSON array).
#[pyfunction]
fn trace_read(path: PathBuf) -> PyResult<(String, String, Vec<String>)> {
    let trace = read_trace(&path).map_err(value_error)?;
    Ok((
        serde_json::to_string(&trace.header).map_err(value_error)?,
        serde_json::to_string(&trace.records).map_err(value_error)?,
        trace.warnings,
    ))
}

/// The native core.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(qdq, m)?)?;
    m.add_function(wrap_pyfunction!(encode, m)?)?;
    m.add_function(wrap_pyfunction!(decode, m)?)?;
    m.add_function(wrap_pyfunction!(facts, m)?)?;
    m.add_function(wrap_pyfunction!(tensor_stats, m)?)?;
    m.add_function(wrap_pyfunction!(amax_qdq_at, m)?)?;
    m.add_function(wrap_pyfunction!(omp_threads, m)?)?;
    m.add_function(wrap_pyfunction!(call_stats_at, m)?)?;
    m.add_function(wrap_pyfunction!(hash_u32, m)?)?;
    m.add_function(wrap_pyfunction!(estimator_name, m)?)?;
    m.add_function(wrap_pyfunction!(resolve_config, m)?)?;
    m.add_function(wrap_pyfunction!(plan, m)?)?;
    m.add_function(wrap_pyfunction!(default_config, m)?)?;
    m.add_function(wrap_pyfunction!(estimator_kinds, m)?)?;
    m.add_function(wrap_pyfunction!(replay, m)?)?;
    m.add_function(wrap_pyfunction!(trace_start, m)?)?;
    m.add_function(wrap_pyfunction!(trace_append, m)?)?;
    m.add_function(wrap_pyfunction!(trace_read, m)?)?;
    m.add_class::<Quantizer>()?;
    m.add_class::<RowEstimates>()?;
    m.add("TRACE_VERSION", hif8lab_scaling::trace::TRACE_VERSION)?;
    Ok(())
}
