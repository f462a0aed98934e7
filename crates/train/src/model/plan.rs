//! The QAT placement: which quantizer sits on which operand of which linear layer, and how
//! many elements each sees per call.

use super::*;

/// The quantizers of one linear layer (bank indices), per role.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinearQuant {
    /// Activation (GEMM input) quantizer.
    pub a: Option<usize>,
    /// Weight quantizer.
    pub w: Option<usize>,
    /// Output-gradient quantizer.
    pub g: Option<usize>,
}

/// Which quantizer sits where: the QAT placement of SPEC.md §4.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuantPlan {
    /// Bank index → quantizer name.
    pub ids: Vec<QuantizerId>,
    /// Per block, per module (in [`Module::ALL`] order).
    pub layers: Vec<[LinearQuant; 7]>,
}

impl QuantPlan {
    /// Elements each quantizer sees per call (bank order), for a batch of `batch` sequences.
    pub fn numel(&self, m: &ModelConfig, batch: usize) -> Vec<u64> {
        let n = (batch * m.context) as u64;
        let (c, f) = (m.d_model as u64, m.d_ff as u64);
        let qd = (m.heads * m.head_dim()) as u64;
        let kvd = (m.kv_heads * m.head_dim()) as u64;
        self.ids
            .iter()
            .map(|id| {
                let (cin, cout) = match id.module {
                    Module::Gate | Module::Up => (c, f),
                    Module::Down => (f, c),
                    Module::Q => (c, qd),
                    Module::K | Module::V => (c, kvd),
                    Module::O => (qd, c),
                };
                match id.role {
                    Role::A => n * cin,
                    Role::W => cout * cin,
                    Role::G => n * cout,
                }
            })
            .collect()
    }

    /// The plan for a model and QAT config (empty when QAT is off).
    pub fn new(m: &ModelConfig, q: &QatConfig) -> Self {
        let mut plan = QuantPlan {
            ids: Vec::new(),
            layers: vec![[LinearQuant::default(); 7]; m.layers],
        };
        if !q.enabled {
            return plan;
        }
        for block in q.blocks_for(m.layers) {
            for (mi, module) in Module::ALL.iter().enumerate() {
                if !q.modules.contains(module) {
                    continue;
                }
                for role in Role::ALL {
                    if !q.roles.contains(&role) {
                        continue;
                    }
                    let index = plan.ids.len();
                    plan.ids.push(QuantizerId {
                        block,
                        module: *module,
                        role,
                    });
                    let lq = &mut plan.layers[block as usize][mi];
                    match role {
                        Role::A => lq.a = Some(index),
                        Role::W => lq.w = Some(index),
                        Role::G => lq.g = Some(index),
                    }
                }
            }
        }
        plan
    }

    pub(crate) fn get(&self, block: usize, module: Module) -> LinearQuant {
        let mi = Module::ALL.iter().position(|m| *m == module).unwrap_or(0);
        self.layers[block][mi]
    }
}
