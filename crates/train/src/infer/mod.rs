//! A model without optimizer state, for `eval` and `sample`: the windowed next-token loss of
//! a token stream, the logits of one window, and seeded sampling. Optionally with the run's
//! fake quantization, every forward pass using the quantizer state saved in a checkpoint
//! (the scales the run would use next; the state is restored before every batch, so what
//! one batch measures never changes the next).
//!
//! Windows are never padded: a call's activations have exactly its rows (`infer::forward`).
//! Sampling keeps every layer's keys and values: the prompt is processed once, then one
//! position per token.

mod forward;
mod probe;

use std::collections::HashMap;

use hif8lab_engine::{Backend, BankConfig, BankSnapshot};

use crate::config::{ModelConfig, QatConfig};
use crate::model::{self, Params, QuantPlan};
use crate::models::checkpoint::Checkpoint;
use crate::rng::Rng;
pub use crate::trainer::InferError;
use crate::trainer::TrainError;
use forward::{Acts, KvCache, Pass};
pub use probe::{HELDOUT_WINDOWS, SCORE_BATCH, choice_sequence, score_probe_set, sequence_losses};

/// The windowed loss of a token stream.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EvalLoss {
    /// Targets scored.
    pub tokens: u64,
    /// Sum of their losses (nats).
    pub loss_sum: f64,
}

impl EvalLoss {
    /// Mean loss per target (nats/token).
    pub fn loss(&self) -> f64 {
        self.loss_sum / self.tokens.max(1) as f64
    }
}

/// Windows of the `eval` convention over `n` tokens with context `c`: (start, inputs) with
/// inputs `t[s..s+len]` predicting `t[s+1..s+len+1]`, for s = 0, C, 2C, … while s + 1 < n.
pub fn windows(n: usize, c: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut s = 0;
    while s + 1 < n {
        out.push((s, c.min(n - 1 - s)));
        s += c;
    }
    out
}

/// Bytes the model's weights take on a backend (f32).
pub fn weight_bytes(m: &ModelConfig) -> u64 {
    4 * model::param_specs(m)
        .iter()
        .map(|(_, shape, _)| shape.iter().product::<usize>() as u64)
        .sum::<u64>()
}

/// Bytes an `eval` of `tokens` tokens takes with windows of `m.context` and up to `batch`
/// windows per pass: weights, RoPE table and the activations of the largest pass.
pub fn eval_bytes(m: &ModelConfig, tokens: usize, batch: usize) -> u64 {
    let ws = windows(tokens, m.context);
    let full = ws.iter().filter(|w| w.1 == m.context).count();
    let mut acts = 0;
    if full > 0 {
        let bk = batch.min(full);
        acts = forward::acts_bytes(m, bk, m.context, m.context, true);
    }
    if let Some(last) = ws.last().filter(|w| w.1 < m.context) {
        acts = acts.max(forward::acts_bytes(m, 1, last.1, last.1, true));
    }
    weight_bytes(m) + 4 * (m.context * m.head_dim()) as u64 + acts
}

/// Bytes `sample` takes for a prompt of `prompt` tokens and `capacity` cached positions.
pub fn sample_bytes(m: &ModelConfig, prompt: usize, capacity: usize) -> u64 {
    let prefill = forward::acts_bytes(m, 1, prompt.max(1), capacity, false);
    let step = forward::acts_bytes(m, 1, 1, capacity, false);
    weight_bytes(m)
        + 4 * (capacity * m.head_dim()) as u64
        + forward::cache_bytes(m, capacity)
        + prefill
        + step
}

/// A model on backend `B` for inference.
pub struct Model<B: Backend> {
    backend: B,
    config: ModelConfig,
    params: Params<B::Tensor>,
    rope_table: B::Tensor,
    batch: usize,
    plan: QuantPlan,
    bank: Option<(B::Bank, BankSnapshot)>,
    /// Activations by (batch, rows, capacity, all logits), made on first use.
    acts: HashMap<(usize, usize, usize, bool), Acts<B::Tensor>>,
    /// Windows through the workgroup attention kernel (a GPU backend; see [`Pass`]).
    windows_as_cached: bool,
}

impl<B: Backend> Model<B> {
    /// The model `m` (its `context` is the window) with `weights` (checked by name and shape),
    /// up to `batch` windows per forward pass.
    pub fn new(
        backend: B,
        m: ModelConfig,
        weights: &Checkpoint,
        batch: usize,
    ) -> Result<Self, TrainError> {
        let mut list = Vec::new();
        for (name, shape, _) in model::param_specs(&m) {
            let data = weights.tensor_of_shape(&name, &shape)?;
            list.push(backend.upload(data)?);
        }
        let params = Params::from_list(list, m.layers);
        let rope_table = backend.upload(&m.rope_table(m.context))?;
        let plan = QuantPlan::new(&m, &QatConfig::default());
        let backend_is_gpu = backend.info().kind == "gpu";
        Ok(Model {
            backend,
            params,
            rope_table,
            batch: batch.max(1),
            plan,
            bank: None,
            config: m,
            acts: HashMap::new(),
            windows_as_cached: backend_is_gpu,
        })
    }

    /// Runs with the fake quantization of `qat` and the quantizer state saved in `state`
    /// (a run's checkpoint).
    pub fn quantized(mut self, qat: &QatConfig, state: &Checkpoint) -> Result<Self, TrainError> {
        let plan = QuantPlan::new(&self.config, qat);
        if plan.ids.is_empty() {
            return Err(TrainError::Checkpoint(if qat.enabled {
                format!(
                    "--quantized: the run quantizes no layer (qat.blocks {:?} of {} blocks)",
                    qat.blocks_for(self.config.layers),
                    self.config.layers
                )
            } else {
                "--quantized: the run's config quantizes nothing (qat.enabled = false)".into()
            }));
        }
        let scaling = qat.plan()?;
        let snap = crate::trainer::bank_snapshot(state, plan.ids.len(), scaling.active_index())
            .map_err(|e| TrainError::Checkpoint(format!("--quantized: {e}")))?;
        let bank = self
            .backend
            .new_bank(&BankConfig::new(plan.ids.len(), scaling))?;
        self.plan = plan;
        self.bank = Some((bank, snap));
        Ok(self)
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The model (its `context` is the window length).
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    fn read(&self, t: &B::Tensor) -> Result<Vec<f32>, TrainError> {
        self.backend.flush();
        Ok(self.backend.read(t).wait()?)
    }

    /// Makes (once) the activations of a call shape.
    fn ensure_acts(&mut self, key: (usize, usize, usize, bool)) -> Result<(), TrainError> {
        if !self.acts.contains_key(&key) {
            // One shape at a time in memory besides the one asked for: eval alternates at
            // most between full windows and the last one; generation between prompt and step.
            if self.acts.len() >= 2 {
                self.acts.clear();
            }
            let a = Acts::new(&self.backend, &self.config, key.0, key.1, key.2, key.3)?;
            self.acts.insert(key, a);
        }
        Ok(())
    }

    /// One forward pass of the activations `key` (tokens already written).
    fn run(
        &self,
        key: (usize, usize, usize, bool),
        cache: Option<&mut KvCache<B::Tensor>>,
    ) -> Result<(), TrainError> {
        self.run_watched(key, cache, None)
    }

    /// `values` (what the pass of `key` gave, named `what`) when all are finite; else the
    /// error naming the first block whose output is not, found by running the pass again
    /// (its tokens are still written) reading the residual stream after every block.
    fn finite(
        &self,
        key: (usize, usize, usize, bool),
        values: Vec<f32>,
        what: &str,
    ) -> Result<Vec<f32>, TrainError> {
        if values.iter().all(|v| v.is_finite()) {
            return Ok(values);
        }
        let watch = std::cell::Cell::new(None);
        self.run_watched(key, None, Some(&watch))?;
        let place = match watch.get() {
            Some(l) => format!(
                "the output of block {l} (model.layers.{l}) is the first that is not finite"
            ),
            None => "every block's output is finite; the final norm or the head is not".into(),
        };
        Err(InferError::Overflow(format!("{what} hold NaN or Inf ({place})")).into())
    }

    fn run_watched(
        &self,
        key: (usize, usize, usize, bool),
        cache: Option<&mut KvCache<B::Tensor>>,
        watch: Option<&std::cell::Cell<Option<usize>>>,
    ) -> Result<(), TrainError> {
        if let Some((bank, snap)) = &self.bank {
            self.backend.restore_bank(bank, snap)?;
        }
        let pass = Pass {
            b: &self.backend,
            m: &self.config,
            params: &self.params,
            rope_table: &self.rope_table,
            plan: &self.plan,
            bank: self.bank.as_ref().map(|(b, _)| b),
            windows_as_cached: self.windows_as_cached,
            watch,
        };
        let a = self.acts.get(&key).ok_or(InferError::MissingActivations)?;
        pass.forward(a, cache, key.3)?;
        Ok(())
    }

    /// The windowed loss of `ids` ([`windows`]; token ids must be below the vocabulary).
    /// `progress` sees the targets scored so far after every pass.
    pub fn eval_with(
        &mut self,
        ids: &[u32],
        progress: &mut dyn FnMut(u64),
    ) -> Result<EvalLoss, TrainError> {
        let c = self.config.context;
        let vocab = self.config.vocab as u32;
        if let Some(bad) = ids.iter().find(|t| **t >= vocab) {
            return Err(InferError::TokenOutOfVocab { id: *bad, vocab }.into());
        }
        let mut total = EvalLoss {
            tokens: 0,
            loss_sum: 0.0,
        };
        let all = windows(ids.len(), c);
        // Full windows in batches; a last, shorter window on its own (never padded).
        let full: Vec<_> = all.iter().copied().filter(|w| w.1 == c).collect();
        let mut groups: Vec<Vec<(usize, usize)>> =
            full.chunks(self.batch).map(<[_]>::to_vec).collect();
        if let Some(last) = all.last().filter(|w| w.1 < c) {
            groups.push(vec![*last]);
        }
        for chunk in groups {
            let len = chunk[0].1;
            let key = (chunk.len(), len, len, true);
            self.ensure_acts(key)?;
            let mut x = Vec::with_capacity(chunk.len() * len);
            let mut y = Vec::with_capacity(chunk.len() * len);
            for (s, l) in &chunk {
                x.extend(ids[*s..s + l].iter().map(|t| *t as f32));
                y.extend(ids[s + 1..s + l + 1].iter().map(|t| *t as f32));
            }
            let a = &self.acts[&key];
            self.backend.write(&a.tokens, &x)?;
            self.backend.write(&a.targets, &y)?;
            self.run(key, None)?;
            let losses = self.read(&self.acts[&key].losses)?;
            let losses = self.finite(key, losses, "the losses")?;
            total.tokens += losses.len() as u64;
            total.loss_sum += losses.iter().map(|v| f64::from(*v)).sum::<f64>();
            progress(total.tokens);
        }
        if !total.loss_sum.is_finite() {
            return Err(TrainError::NonFinite {
                step: 0,
                what: "eval loss".into(),
            });
        }
        Ok(total)
    }

    /// The loss of every target of one sequence `seq` (at most `context + 1` tokens): entry
    /// i is −log p(seq[i + 1] | seq[..= i]). What a multiple-choice item is scored from.
    pub fn token_losses(&mut self, seq: &[u32]) -> Result<Vec<f32>, TrainError> {
        Ok(self.token_losses_batch(&[seq])?.pop().unwrap_or_default())
    }

    /// [`Model::token_losses`] of several sequences of one length in one pass (the weights
    /// are read once for all of them).
    pub fn token_losses_batch(&mut self, seqs: &[&[u32]]) -> Result<Vec<Vec<f32>>, TrainError> {
        let (c, vocab) = (self.config.context, self.config.vocab as u32);
        let Some(first) = seqs.first() else {
            return Ok(Vec::new());
        };
        let n = first.len();
        if n < 2 || n > c + 1 || seqs.iter().any(|s| s.len() != n) {
            return Err(InferError::SequenceLengths { max: c + 1 }.into());
        }
        if let Some(bad) = seqs.iter().flat_map(|s| s.iter()).find(|t| **t >= vocab) {
            return Err(InferError::TokenOutOfVocab { id: *bad, vocab }.into());
        }
        let len = n - 1;
        let key = (seqs.len(), len, len, true);
        self.ensure_acts(key)?;
        let x: Vec<f32> = seqs
            .iter()
            .flat_map(|s| s[..len].iter().map(|t| *t as f32))
            .collect();
        let y: Vec<f32> = seqs
            .iter()
            .flat_map(|s| s[1..].iter().map(|t| *t as f32))
            .collect();
        let a = &self.acts[&key];
        self.backend.write(&a.tokens, &x)?;
        self.backend.write(&a.targets, &y)?;
        self.run(key, None)?;
        let losses = self.read(&self.acts[&key].losses)?;
        let losses = self.finite(key, losses, "the losses")?;
        Ok(losses.chunks(len).map(<[f32]>::to_vec).collect())
    }

    /// The windowed loss of `ids` ([`Model::eval_with`] without progress).
    pub fn eval(&mut self, ids: &[u32]) -> Result<EvalLoss, TrainError> {
        self.eval_with(ids, &mut |_| {})
    }

    /// The logits [len, vocab] of one window `ids` (its last `context` tokens).
    pub fn logits(&mut self, ids: &[u32]) -> Result<Vec<f32>, TrainError> {
        let (c, v) = (self.config.context, self.config.vocab);
        let ids = &ids[ids.len().saturating_sub(c)..];
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let key = (1, ids.len(), ids.len(), true);
        self.ensure_acts(key)?;
        let x: Vec<f32> = ids.iter().map(|t| (*t).min(v as u32 - 1) as f32).collect();
        let a = &self.acts[&key];
        self.backend.write(&a.tokens, &x)?;
        self.backend.write(&a.targets, &x)?;
        self.run(key, None)?;
        let logits = self.read(&self.acts[&key].logits)?;
        self.finite(key, logits, "the logits")
    }

    /// Generates `n` tokens after `prompt` (seeded): temperature 0 takes the most likely
    /// token; `top_k` 0 samples from the whole vocabulary. `each` sees every new token and
    /// returns whether to go on (false stops: a reader that went away).
    ///
    /// Keys and values are cached: the prompt runs once, then one position per token. When
    /// the context is full, the cache restarts from the last half of the context.
    pub fn sample(
        &mut self,
        prompt: &[u32],
        n: usize,
        temperature: f32,
        top_k: usize,
        seed: u64,
        each: &mut dyn FnMut(u32) -> bool,
    ) -> Result<Vec<u32>, TrainError> {
        let (c, v) = (self.config.context, self.config.vocab);
        let mut rng = Rng::new(seed);
        let mut ids: Vec<u32> = if prompt.is_empty() {
            vec![0]
        } else {
            prompt.iter().map(|t| (*t).min(v as u32 - 1)).collect()
        };
        let capacity = c.min(ids.len().saturating_add(n)).max(1);
        let mut cache = KvCache::new(&self.backend, &self.config, capacity)?;
        let mut out = Vec::with_capacity(n.min(1 << 16));
        // Positions to feed: the prompt's last `capacity` at first, then one per token.
        let mut feed: Vec<u32> = ids[ids.len().saturating_sub(capacity)..].to_vec();
        for _ in 0..n {
            if cache.len + feed.len() > capacity {
                // Context full: start again from the last half of the context.
                cache.len = 0;
                let keep = (capacity / 2).max(1);
                feed = ids[ids.len() - keep.min(ids.len())..].to_vec();
            }
            let key = (1, feed.len(), capacity, false);
            self.ensure_acts(key)?;
            let x: Vec<f32> = feed.iter().map(|t| *t as f32).collect();
            self.backend.write(&self.acts[&key].tokens, &x)?;
            self.run(key, Some(&mut cache))?;
            let logits = self.read(&self.acts[&key].logits)?;
            if logits.iter().any(|v| !v.is_finite()) {
                // Where it overflows, from a window of what was fed (no cache).
                self.logits(&ids)?;
                return Err(InferError::Overflow("the logits hold NaN or Inf".into()).into());
            }
            let t = pick(&logits, temperature, top_k, &mut rng);
            ids.push(t);
            out.push(t);
            if !each(t) {
                break;
            }
            feed = vec![t];
        }
        Ok(out)
    }
}

/// One token from `logits`: argmax at temperature 0, else a draw from the softmax of
/// logits / temperature over the `top_k` most likely (all when 0). Ties go to the lower id.
pub fn pick(logits: &[f32], temperature: f32, top_k: usize, rng: &mut Rng) -> u32 {
    // Most likely first, ties to the lower id (a total order: the same for any sort).
    let before = |a: &usize, b: &usize| logits[*b].total_cmp(&logits[*a]).then(a.cmp(b));
    if temperature <= 0.0 || !temperature.is_finite() {
        // The first of that order, in one pass (a sort of a 49,152-token vocabulary per
        // token cost a tenth of a generated token's time).
        return (0..logits.len()).min_by(before).unwrap_or(0) as u32;
    }
    let mut order: Vec<usize> = (0..logits.len()).collect();
    let k = if top_k == 0 {
        order.len()
    } else {
        top_k.min(order.len())
    };
    if k < order.len() {
        // The k first of the order, then only they sorted: the same k in the same order.
        order.select_nth_unstable_by(k, before);
        order.truncate(k);
    }
    order.sort_by(before);
    let top = &order[..k];
    let m = f64::from(logits[top[0]]);
    let w: Vec<f64> = top
        .iter()
        .map(|i| ((f64::from(logits[*i]) - m) / f64::from(temperature)).exp())
        .collect();
    let total: f64 = w.iter().sum();
    let mut r = rng.uniform() * total;
    for (i, wi) in top.iter().zip(&w) {
        if r < *wi {
            return *i as u32;
        }
        r -= wi;
    }
    top[k - 1] as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_follow_the_convention() {
        assert_eq!(windows(10, 4), vec![(0, 4), (4, 4), (8, 1)]);
        assert_eq!(windows(9, 4), vec![(0, 4), (4, 4)]);
        assert_eq!(windows(1, 4), vec![]);
        let targets: usize = windows(1000, 64).iter().map(|w| w.1).sum();
        assert_eq!(targets, 999);
    }

    /// The draws of the full sort (the reference), for any logits with ties.
    fn pick_by_sorting(logits: &[f32], temperature: f32, top_k: usize, rng: &mut Rng) -> u32 {
        let mut order: Vec<usize> = (0..logits.len()).collect();
        order.sort_by(|a, b| logits[*b].total_cmp(&logits[*a]).then(a.cmp(b)));
        if temperature <= 0.0 {
            return order[0] as u32;
        }
        let k = if top_k == 0 {
            order.len()
        } else {
            top_k.min(order.len())
        };
        let top = &order[..k];
        let m = f64::from(logits[top[0]]);
        let w: Vec<f64> = top
            .iter()
            .map(|i| ((f64::from(logits[*i]) - m) / f64::from(temperature)).exp())
            .collect();
        let mut r = rng.uniform() * w.iter().sum::<f64>();
        for (i, wi) in top.iter().zip(&w) {
            if r < *wi {
                return *i as u32;
            }
            r -= wi;
        }
        top[k - 1] as u32
    }

    #[test]
    fn pick_draws_what_a_full_sort_draws() {
        let mut draws = Rng::new(3);
        for case in 0..200 {
            // Few distinct values: many ties.
            let logits: Vec<f32> = (0..97)
                .map(|_| (draws.uniform() * 7.0).floor() as f32)
                .collect();
            for (t, k) in [(0.0, 0), (1.0, 0), (0.7, 5), (2.0, 96), (1.0, 200)] {
                let (mut a, mut b) = (Rng::new(case), Rng::new(case));
                for _ in 0..5 {
                    assert_eq!(
                        pick(&logits, t, k, &mut a),
                        pick_by_sorting(&logits, t, k, &mut b),
                        "case {case}, temperature {t}, top_k {k}"
                    );
                }
            }
        }
    }

    #[test]
    fn pick_is_greedy_at_zero_and_respects_top_k() {
        let mut rng = Rng::new(1);
        let l = [0.1, 3.0, 2.9, -1.0];
        assert_eq!(pick(&l, 0.0, 0, &mut rng), 1);
        for _ in 0..200 {
            let t = pick(&l, 1.0, 2, &mut rng);
            assert!(t == 1 || t == 2, "{t}");
        }
        let draws: Vec<u32> = (0..50).map(|_| pick(&l, 5.0, 0, &mut rng)).collect();
        assert!(
            draws.contains(&0) || draws.contains(&3),
            "a high temperature reaches the tail"
        );
    }
}
