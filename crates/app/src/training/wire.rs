//! What crosses between the page and its training worker: the start of a run ([`Setup`] and
//! the base weights) one way, [`Msg`]s the other, each as one byte buffer (transferred, not
//! copied). Step reports are binary and exact — every f32 bit, NaN and ±Inf included (JSON has
//! neither); the rest is JSON or safetensors, the formats the run folder uses.

use std::sync::Arc;

use hif8lab_scaling::stats::Log2Histogram;
use hif8lab_scaling::{CallRecord, Module, QuantizerId, Role};
use hif8lab_train::eval::{McItem, ProbeSet};
use hif8lab_train::models::checkpoint::Checkpoint;
use hif8lab_train::{ProbeScores, RunConfig, StepReport};

use super::{Msg, RunExtras};

/// A run as the worker starts it: the config and what [`RunExtras`] holds besides the base
/// weights (sent apart, as safetensors).
#[derive(Debug, Clone, PartialEq)]
pub struct Setup {
    /// The run's configuration.
    pub config: RunConfig,
    /// [`RunExtras::probes`].
    pub probes: Option<ProbeSet>,
    /// [`RunExtras::eval_every`].
    pub eval_every: u64,
    /// [`RunExtras::eval_at_start`].
    pub eval_at_start: bool,
    /// [`RunExtras::keep_weights`].
    pub keep_weights: bool,
}

impl Setup {
    /// The setup of `config` with `extras`, and the base weights' safetensors bytes.
    pub fn of(config: RunConfig, extras: &RunExtras) -> (Self, Option<Vec<u8>>) {
        let setup = Setup {
            config,
            probes: extras.probes.as_deref().cloned(),
            eval_every: extras.eval_every,
            eval_at_start: extras.eval_at_start,
            keep_weights: extras.keep_weights,
        };
        (setup, extras.base.as_ref().map(|b| b.to_bytes()))
    }

    /// The setup as one buffer: the config (JSON), the schedule, the probe items.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer(Vec::new());
        // (JSON, as the settings hold a config; NaN cannot occur in a checked one.)
        w.text(&serde_json::to_string(&self.config).unwrap_or_default());
        w.u64(self.eval_every);
        w.u8(u8::from(self.eval_at_start));
        w.u8(u8::from(self.keep_weights));
        match &self.probes {
            Some(p) => {
                w.u8(1);
                for items in [&p.knowledge, &p.completion] {
                    w.u32(items.len() as u32);
                    for it in items {
                        w.text(&it.context);
                        w.u32(it.choices.len() as u32);
                        it.choices.iter().for_each(|c| w.text(c));
                        w.u64(it.answer as u64);
                        w.u32(it.group);
                    }
                }
                w.text(&p.heldout);
            }
            None => w.u8(0),
        }
        w.0
    }

    /// The setup of a buffer [`Setup::encode`] wrote.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        let mut r = Reader { bytes, at: 0 };
        let json = r.text()?;
        let config: RunConfig = serde_json::from_str(&json).map_err(|e| format!("config: {e}"))?;
        let eval_every = r.u64()?;
        let eval_at_start = r.u8()? != 0;
        let keep_weights = r.u8()? != 0;
        let probes = match r.u8()? {
            0 => None,
            _ => {
                let mut lists = Vec::new();
                for _ in 0..2 {
                    let n = r.len(1)?;
                    let mut items = Vec::with_capacity(n);
                    for _ in 0..n {
                        let context = r.text()?;
                        let k = r.len(4)?;
                        let choices = (0..k).map(|_| r.text()).collect::<Result<_, _>>()?;
                        items.push(McItem {
                            context,
                            choices,
                            answer: r.u64()? as usize,
                            group: r.u32()?,
                        });
                    }
                    lists.push(items);
                }
                let completion = lists.pop().unwrap_or_default();
                let knowledge = lists.pop().unwrap_or_default();
                Some(ProbeSet {
                    knowledge,
                    completion,
                    heldout: r.text()?,
                })
            }
        };
        if r.at != bytes.len() {
            return Err(format!("{} bytes left after the setup", bytes.len() - r.at));
        }
        Ok(Setup {
            config,
            probes,
            eval_every,
            eval_at_start,
            keep_weights,
        })
    }

    /// The config and extras again (`base`: the safetensors bytes [`Setup::of`] gave).
    pub fn into_run(self, base: Option<&[u8]>) -> Result<(RunConfig, RunExtras), String> {
        let base = match base {
            Some(bytes) => Some(Arc::new(
                Checkpoint::from_bytes("(base weights)", bytes).map_err(|e| e.to_string())?,
            )),
            None => None,
        };
        let extras = RunExtras {
            base,
            probes: self.probes.map(Arc::new),
            eval_every: self.eval_every,
            eval_at_start: self.eval_at_start,
            keep_weights: self.keep_weights,
        };
        Ok((self.config, extras))
    }
}

const STARTED: u8 = 1;
const PREPARING: u8 = 2;
const REPORT: u8 = 3;
const PROBES: u8 = 4;
const WEIGHTS: u8 = 5;
const ERROR: u8 = 6;
const FINISHED: u8 = 7;

#[derive(serde::Serialize, serde::Deserialize)]
struct StartedWire {
    estimators: Vec<String>,
    active: usize,
    backend: String,
    quantizers: Vec<QuantizerId>,
}

/// `msg` as one buffer: a tag byte, then its payload.
pub fn encode(msg: &Msg) -> Vec<u8> {
    let mut w = Writer(Vec::new());
    match msg {
        Msg::Started {
            estimators,
            active,
            backend,
            quantizers,
        } => {
            w.u8(STARTED);
            let wire = StartedWire {
                estimators: estimators.clone(),
                active: *active,
                backend: backend.clone(),
                quantizers: quantizers.clone(),
            };
            // (Names and ids only: JSON cannot fail on them.)
            w.0.extend(serde_json::to_vec(&wire).unwrap_or_default());
        }
        Msg::Preparing { compiled, total } => {
            w.u8(PREPARING);
            w.u64(*compiled as u64);
            w.u64(*total as u64);
        }
        Msg::Report(r) => {
            w.u8(REPORT);
            w.report(r);
        }
        Msg::Probes(p) => match serde_json::to_vec(p) {
            Ok(json) => {
                w.u8(PROBES);
                w.0.extend(json);
            }
            // A score that JSON cannot hold (NaN): said, as the run folder would fail to.
            Err(e) => {
                w.u8(ERROR);
                w.0.extend(format!("probe scores: {e}").into_bytes());
            }
        },
        Msg::Weights(ck) => {
            w.u8(WEIGHTS);
            w.0.extend(ck.to_bytes());
        }
        Msg::Error(e) => {
            w.u8(ERROR);
            w.0.extend(e.as_bytes());
        }
        Msg::Finished => w.u8(FINISHED),
    }
    w.0
}

/// The message of a buffer [`encode`] wrote.
pub fn decode(bytes: &[u8]) -> Result<Msg, String> {
    let (&tag, body) = bytes.split_first().ok_or("an empty message")?;
    let mut r = Reader { bytes: body, at: 0 };
    let msg = match tag {
        STARTED => {
            let s: StartedWire = serde_json::from_slice(body).map_err(|e| e.to_string())?;
            return Ok(Msg::Started {
                estimators: s.estimators,
                active: s.active,
                backend: s.backend,
                quantizers: s.quantizers,
            });
        }
        PREPARING => Msg::Preparing {
            compiled: r.u64()? as usize,
            total: r.u64()? as usize,
        },
        REPORT => Msg::Report(Box::new(r.report()?)),
        PROBES => {
            let p: ProbeScores = serde_json::from_slice(body).map_err(|e| e.to_string())?;
            return Ok(Msg::Probes(Box::new(p)));
        }
        WEIGHTS => {
            let ck = Checkpoint::from_bytes("(weights)", body).map_err(|e| e.to_string())?;
            return Ok(Msg::Weights(Arc::new(ck)));
        }
        ERROR => return Ok(Msg::Error(String::from_utf8_lossy(body).into_owned())),
        FINISHED => Msg::Finished,
        other => return Err(format!("unknown message tag {other}")),
    };
    if r.at != body.len() {
        return Err(format!(
            "{} bytes left after the message",
            body.len() - r.at
        ));
    }
    Ok(msg)
}

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend(v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend(v.to_le_bytes());
    }
    fn f32(&mut self, v: f32) {
        self.0.extend(v.to_bits().to_le_bytes());
    }
    fn f32s(&mut self, v: &[f32]) {
        self.u32(v.len() as u32);
        v.iter().for_each(|x| self.f32(*x));
    }
    fn u64s(&mut self, v: &[u64]) {
        self.u32(v.len() as u32);
        v.iter().for_each(|x| self.u64(*x));
    }
    fn text(&mut self, t: &str) {
        self.u32(t.len() as u32);
        self.0.extend(t.as_bytes());
    }
    fn id(&mut self, id: &QuantizerId) {
        self.u32(id.block);
        let index = |found: Option<usize>| found.unwrap_or(0) as u8;
        self.u8(index(Module::ALL.iter().position(|m| *m == id.module)));
        self.u8(index(Role::ALL.iter().position(|r| *r == id.role)));
    }
    fn report(&mut self, r: &StepReport) {
        self.u64(r.step);
        self.f32(r.loss);
        self.f32(r.lr);
        self.f32(r.grad_norm);
        self.u8(u8::from(r.qat_enabled));
        self.u64(r.tokens);
        self.u32(r.calls.len() as u32);
        for c in &r.calls {
            self.id(&c.id);
            self.u64(c.step);
            self.u32(c.micro);
            self.u64(c.numel);
            self.f32(c.amax);
            self.f32s(&c.est);
            self.f32s(&c.scales);
            self.u64s(&c.above_est);
            self.u64s(&c.overflow);
            self.u64(c.underflow);
            self.u64(c.nonfinite);
            match c.sqnr_db {
                Some(v) => {
                    self.u8(1);
                    self.f32(v);
                }
                None => self.u8(0),
            }
        }
        match &r.histogram {
            Some((id, h)) => {
                self.u8(1);
                self.id(id);
                self.u64(h.zeros);
                self.u64(h.below);
                self.u64(h.above);
                self.u64(h.nonfinite);
                self.u64s(&h.bins);
            }
            None => self.u8(0),
        }
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let end = self.at + N;
        let got = self
            .bytes
            .get(self.at..end)
            .ok_or_else(|| format!("the message ends at byte {}", self.bytes.len()))?;
        self.at = end;
        let mut out = [0; N];
        out.copy_from_slice(got);
        Ok(out)
    }
    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take::<1>()?[0])
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take()?))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take()?))
    }
    fn f32(&mut self) -> Result<f32, String> {
        Ok(f32::from_bits(self.u32()?))
    }
    /// A length, checked against the bytes left (`size` bytes an entry).
    fn len(&mut self, size: usize) -> Result<usize, String> {
        let n = self.u32()? as usize;
        if n.saturating_mul(size) > self.bytes.len() - self.at {
            return Err(format!("a list of {n} entries is longer than the message"));
        }
        Ok(n)
    }
    fn f32s(&mut self) -> Result<Vec<f32>, String> {
        let n = self.len(4)?;
        (0..n).map(|_| self.f32()).collect()
    }
    fn u64s(&mut self) -> Result<Vec<u64>, String> {
        let n = self.len(8)?;
        (0..n).map(|_| self.u64()).collect()
    }
    fn text(&mut self) -> Result<String, String> {
        let n = self.len(1)?;
        let bytes = &self.bytes[self.at..self.at + n];
        self.at += n;
        String::from_utf8(bytes.to_vec()).map_err(|e| e.to_string())
    }
    fn id(&mut self) -> Result<QuantizerId, String> {
        let block = self.u32()?;
        let (m, r) = (self.u8()? as usize, self.u8()? as usize);
        Ok(QuantizerId {
            block,
            module: *Module::ALL.get(m).ok_or("module index")?,
            role: *Role::ALL.get(r).ok_or("role index")?,
        })
    }
    fn report(&mut self) -> Result<StepReport, String> {
        let (step, loss, lr, grad_norm) = (self.u64()?, self.f32()?, self.f32()?, self.f32()?);
        let qat_enabled = self.u8()? != 0;
        let tokens = self.u64()?;
        let n = self.len(1)?;
        let mut calls = Vec::with_capacity(n);
        for _ in 0..n {
            calls.push(CallRecord {
                id: self.id()?,
                step: self.u64()?,
                micro: self.u32()?,
                numel: self.u64()?,
                amax: self.f32()?,
                est: self.f32s()?,
                scales: self.f32s()?,
                above_est: self.u64s()?,
                overflow: self.u64s()?,
                underflow: self.u64()?,
                nonfinite: self.u64()?,
                sqnr_db: match self.u8()? {
                    0 => None,
                    _ => Some(self.f32()?),
                },
            });
        }
        let histogram = match self.u8()? {
            0 => None,
            _ => {
                let id = self.id()?;
                let h = Log2Histogram {
                    zeros: self.u64()?,
                    below: self.u64()?,
                    above: self.u64()?,
                    nonfinite: self.u64()?,
                    bins: self.u64s()?,
                };
                Some((id, h))
            }
        };
        Ok(StepReport {
            step,
            loss,
            lr,
            grad_norm,
            qat_enabled,
            tokens,
            calls,
            histogram,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> StepReport {
        let id = |block| QuantizerId {
            block,
            module: Module::Down,
            role: Role::G,
        };
        StepReport {
            step: 7,
            loss: f32::NAN,
            lr: 1e-5,
            grad_norm: f32::INFINITY,
            qat_enabled: true,
            tokens: 256,
            calls: vec![CallRecord {
                id: id(3),
                step: 7,
                micro: 1,
                numel: 4096,
                amax: -0.0,
                est: vec![1.5, f32::NEG_INFINITY],
                scales: vec![f32::NAN, 2.0],
                above_est: vec![0, u64::MAX],
                overflow: vec![5, 6],
                underflow: 9,
                nonfinite: 1,
                sqnr_db: Some(31.25),
            }],
            histogram: Some((
                id(1),
                Log2Histogram {
                    zeros: 1,
                    below: 2,
                    above: 3,
                    nonfinite: 4,
                    bins: vec![5, 6, 7],
                },
            )),
        }
    }

    /// A report crosses bit for bit (NaN, ±Inf and −0 included), and so does every other
    /// message.
    #[test]
    fn messages_cross_exactly() {
        let r = report();
        let Msg::Report(back) = decode(&encode(&Msg::Report(Box::new(r.clone())))).unwrap() else {
            panic!("not a report")
        };
        assert_eq!(back.loss.to_bits(), r.loss.to_bits());
        assert_eq!(back.grad_norm, f32::INFINITY);
        assert_eq!(back.calls[0].amax.to_bits(), (-0.0f32).to_bits());
        assert!(back.calls[0].scales[0].is_nan());
        let (mut a, mut b) = (r.clone(), (*back).clone());
        for x in [&mut a, &mut b] {
            x.loss = 0.0;
            x.calls[0].scales[0] = 0.0;
        }
        assert_eq!(a, b);
        let started = Msg::Started {
            estimators: vec!["max_window".into()],
            active: 0,
            backend: "cpu 'wasm' (cpu)".into(),
            quantizers: vec![r.calls[0].id],
        };
        assert_eq!(
            format!("{:?}", decode(&encode(&started)).unwrap()),
            format!("{started:?}")
        );
        for m in [
            Msg::Preparing {
                compiled: 3,
                total: 17,
            },
            Msg::Error("boom".into()),
            Msg::Finished,
        ] {
            assert_eq!(
                format!("{:?}", decode(&encode(&m)).unwrap()),
                format!("{m:?}")
            );
        }
    }

    /// A cut or padded buffer is refused with a message, never read past its end.
    #[test]
    fn a_damaged_message_is_refused() {
        let bytes = encode(&Msg::Report(Box::new(report())));
        for cut in [0, 1, 9, bytes.len() / 2, bytes.len() - 1] {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut padded = bytes.clone();
        padded.push(0);
        assert!(decode(&padded).unwrap_err().contains("left after"));
        let mut huge = vec![REPORT];
        huge.extend([0u8; 29]);
        huge.extend(u32::MAX.to_le_bytes());
        assert!(
            decode(&huge)
                .unwrap_err()
                .contains("longer than the message")
        );
        assert!(decode(&[99]).unwrap_err().contains("unknown message tag"));
    }

    /// A run's setup and base weights come back as they went.
    #[test]
    fn a_setup_crosses_with_its_base() {
        let config =
            RunConfig::parse("smoke", RunConfig::preset_text("smoke").unwrap(), &[]).unwrap();
        let base = Checkpoint {
            tensors: vec![hif8lab_train::models::checkpoint::NamedTensor {
                name: "w".into(),
                shape: vec![2],
                data: vec![1.0, -2.5],
            }],
            metadata: Default::default(),
        };
        let extras = RunExtras {
            base: Some(Arc::new(base.clone())),
            probes: None,
            eval_every: 25,
            eval_at_start: true,
            keep_weights: true,
        };
        let (setup, bytes) = Setup::of(config.clone(), &extras);
        let back = Setup::decode(&setup.encode()).unwrap();
        assert_eq!(back, setup);
        let (config2, extras2) = back.into_run(bytes.as_deref()).unwrap();
        assert_eq!(config2, config);
        assert_eq!(extras2.base.unwrap().tensors, base.tensors);
        assert_eq!((extras2.eval_every, extras2.eval_at_start), (25, true));
        // With a probe set, every item as it was.
        let mut with = setup.clone();
        with.probes = Some(hif8lab_train::eval::ProbeSet::for_data(&config.data));
        let encoded = with.encode();
        assert_eq!(Setup::decode(&encoded).unwrap(), with);
        assert!(Setup::decode(&encoded[..encoded.len() - 1]).is_err());
    }
}
