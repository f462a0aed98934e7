//! Names of quantizers: the block, the module (linear layer) and the role of the tensor.

use std::fmt;
use std::str::FromStr;

use hif8lab_format::UnknownName;
use serde::{Deserialize, Serialize};

/// Which GEMM operand a quantizer sees (SPEC.md §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Role {
    /// Activation: the GEMM input in the forward pass.
    A,
    /// Weight.
    W,
    /// Output gradient, quantized in the backward pass.
    G,
}

impl Role {
    /// All roles in order.
    pub const ALL: [Role; 3] = [Role::A, Role::W, Role::G];

    /// One-letter name.
    pub fn name(self) -> &'static str {
        match self {
            Role::A => "A",
            Role::W => "W",
            Role::G => "G",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Role {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "a" | "act" | "activation" | "input" => Ok(Role::A),
            "w" | "weight" => Ok(Role::W),
            "g" | "grad" | "gradient" | "output_grad" => Ok(Role::G),
            _ => Err(UnknownName {
                kind: "role",
                given: s.to_owned(),
                expected: "A, W, G".into(),
            }),
        }
    }
}

/// A linear layer of a transformer block that can be quantized.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Module {
    /// MLP gate projection.
    Gate,
    /// MLP up projection.
    Up,
    /// MLP down projection.
    Down,
    /// Attention query projection.
    Q,
    /// Attention key projection.
    K,
    /// Attention value projection.
    V,
    /// Attention output projection.
    O,
}

impl Module {
    /// All modules, MLP first.
    pub const ALL: [Module; 7] = [
        Module::Gate,
        Module::Up,
        Module::Down,
        Module::Q,
        Module::K,
        Module::V,
        Module::O,
    ];

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Module::Gate => "gate",
            Module::Up => "up",
            Module::Down => "down",
            Module::Q => "q",
            Module::K => "k",
            Module::V => "v",
            Module::O => "o",
        }
    }
}

impl fmt::Display for Module {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Module {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Module::ALL
            .into_iter()
            .find(|m| m.name() == s.trim().to_ascii_lowercase())
            .ok_or_else(|| UnknownName {
                kind: "module",
                given: s.to_owned(),
                expected: Module::ALL.map(Module::name).join(", "),
            })
    }
}

/// One quantizer: (block, module, role).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct QuantizerId {
    /// Transformer block index.
    pub block: u32,
    /// Linear layer.
    pub module: Module,
    /// Operand role.
    pub role: Role,
}

impl fmt::Display for QuantizerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "block{}.{}.{}", self.block, self.module, self.role)
    }
}

/// Parses the display form `block{N}.{module}.{role}` (exactly; other names are not ids).
impl FromStr for QuantizerId {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || UnknownName {
            kind: "quantizer name",
            given: s.to_owned(),
            expected: "block{N}.{gate|up|down}.{A|W|G}, e.g. block1.up.A".into(),
        };
        let mut parts = s.split('.');
        let (Some(block), Some(module), Some(role), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        let block = block
            .strip_prefix("block")
            .and_then(|b| b.parse::<u32>().ok())
            .ok_or_else(bad)?;
        let id = QuantizerId {
            block,
            module: module.parse().map_err(|_| bad())?,
            role: role.parse().map_err(|_| bad())?,
        };
        // Only the canonical spelling round-trips (no aliases such as `grad`).
        if id.to_string() == s {
            Ok(id)
        } else {
            Err(bad())
        }
    }
}
