//! A model without optimizer state, for `eval` and `sample`: the windowed next-token loss of
//! a token stream, the logits of one window, and seeded sampling. Optionally with the run's
//! fake quantization, every forward pass using the quantizer state saved in a checkpoint
//! (the scales the run would use next; the state is restored before every batch, so what
//! one batch measures never changes the next).
//!
//! Sampling recomputes the window for each new token (no KV cache): cost per token is one
//! forward pass over the context.

use hif8lab_engine::{Backend, BankConfig, BankSnapshot};

use crate::checkpoint::Checkpoint;
use crate::config::{ModelConfig, QatConfig};
use crate::data::Rng;
use crate::model::{self, Ctx, Params, QuantPlan, Workspace};
use crate::trainer::TrainError;

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

/// A model on backend `B` for inference.
pub struct Model<B: Backend> {
    backend: B,
    config: ModelConfig,
    params: Params<B::Tensor>,
    ws: Workspace<B::Tensor>,
    batch: usize,
    plan: QuantPlan,
    bank: Option<(B::Bank, BankSnapshot)>,
}

impl<B: Backend> Model<B> {
    /// The model `m` (its `context` is the window) with `weights` (checked by name and shape),
    /// `batch` windows per forward pass.
    pub fn new(
        backend: B,
        m: ModelConfig,
        weights: &Checkpoint,
        batch: usize,
    ) -> Result<Self, TrainError> {
        let mut list = Vec::new();
        for (name, shape, _) in model::param_specs(&m) {
            let data = weights
                .tensor_of_shape(&name, &shape)
                .map_err(TrainError::Checkpoint)?;
            list.push(backend.upload(data)?);
        }
        let params = Params::from_list(list, m.layers);
        let ws = Workspace::new(&backend, &m, batch)?;
        let plan = QuantPlan::new(&m, &QatConfig::default());
        Ok(Model {
            backend,
            params,
            ws,
            batch,
            plan,
            bank: None,
            config: m,
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
        let snap = crate::trainer::bank_snapshot(state, plan.ids.len(), qat.scaling.active_index())
            .map_err(|e| TrainError::Checkpoint(format!("--quantized: {e}")))?;
        let bank = self
            .backend
            .new_bank(&BankConfig::new(plan.ids.len(), qat.scaling.clone()))?;
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

    /// One forward pass over `batch` sequences (inputs, targets; each padded to the context).
    fn forward(&self, x: &[f32], y: &[f32]) -> Result<(), TrainError> {
        self.ws.load(&self.backend, x, y)?;
        if let Some((bank, snap)) = &self.bank {
            self.backend.restore_bank(bank, snap)?;
        }
        let cx = Ctx {
            b: &self.backend,
            m: &self.config,
            batch: self.batch,
            plan: &self.plan,
            bank: self.bank.as_ref().map(|(b, _)| b),
            bf16: false,
            clipped_ste: false,
            scratch: &[],
            histogram: None,
        };
        model::forward(&cx, &self.params, &self.ws, 1.0)?;
        Ok(())
    }

    fn read(&self, t: &B::Tensor) -> Result<Vec<f32>, TrainError> {
        self.backend.flush();
        Ok(self.backend.read(t).wait()?)
    }

    /// The windowed loss of `ids` ([`windows`]; token ids must be below the vocabulary).
    pub fn eval(&mut self, ids: &[u32]) -> Result<EvalLoss, TrainError> {
        let c = self.config.context;
        let vocab = self.config.vocab as u32;
        if let Some(bad) = ids.iter().find(|t| **t >= vocab) {
            return Err(TrainError::Data(format!(
                "token id {bad} is outside the model's vocabulary of {vocab}"
            )));
        }
        let mut total = EvalLoss {
            tokens: 0,
            loss_sum: 0.0,
        };
        for chunk in windows(ids.len(), c).chunks(self.batch) {
            let mut x = vec![0.0f32; self.batch * c];
            let mut y = vec![0.0f32; self.batch * c];
            for (i, (s, len)) in chunk.iter().enumerate() {
                for j in 0..*len {
                    x[i * c + j] = ids[s + j] as f32;
                    y[i * c + j] = ids[s + j + 1] as f32;
                }
            }
            self.forward(&x, &y)?;
            let losses = self.read(&self.ws.losses)?;
            for (i, (_, len)) in chunk.iter().enumerate() {
                total.tokens += *len as u64;
                total.loss_sum += losses[i * c..i * c + len]
                    .iter()
                    .map(|v| f64::from(*v))
                    .sum::<f64>();
            }
        }
        if !total.loss_sum.is_finite() {
            return Err(TrainError::NonFinite {
                step: 0,
                what: "eval loss".into(),
            });
        }
        Ok(total)
    }

    /// The logits [len, vocab] of one window `ids` (at most the context long).
    pub fn logits(&mut self, ids: &[u32]) -> Result<Vec<f32>, TrainError> {
        let (c, v) = (self.config.context, self.config.vocab);
        let ids = &ids[ids.len().saturating_sub(c)..];
        let mut x = vec![0.0f32; self.batch * c];
        for (j, t) in ids.iter().enumerate() {
            x[j] = (*t).min(v as u32 - 1) as f32;
        }
        self.forward(&x, &x.clone())?;
        let all = self.read(&self.ws.logits)?;
        Ok(all[..ids.len() * v].to_vec())
    }

    /// Generates `n` tokens after `prompt` (seeded): temperature 0 takes the most likely
    /// token; `top_k` 0 samples from the whole vocabulary. `each` sees every new token.
    pub fn sample(
        &mut self,
        prompt: &[u32],
        n: usize,
        temperature: f32,
        top_k: usize,
        seed: u64,
        each: &mut dyn FnMut(u32),
    ) -> Result<Vec<u32>, TrainError> {
        let v = self.config.vocab;
        let mut rng = Rng::new(seed);
        let mut ids: Vec<u32> = if prompt.is_empty() {
            vec![0]
        } else {
            prompt.to_vec()
        };
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let logits = self.logits(&ids)?;
            let last = &logits[logits.len() - v..];
            let t = pick(last, temperature, top_k, &mut rng);
            ids.push(t);
            out.push(t);
            each(t);
        }
        Ok(out)
    }
}

/// One token from `logits`: argmax at temperature 0, else a draw from the softmax of
/// logits / temperature over the `top_k` most likely (all when 0). Ties go to the lower id.
pub fn pick(logits: &[f32], temperature: f32, top_k: usize, rng: &mut Rng) -> u32 {
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|a, b| logits[*b].total_cmp(&logits[*a]).then(a.cmp(b)));
    if temperature <= 0.0 || !temperature.is_finite() {
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
