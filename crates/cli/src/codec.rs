//! `hif8lab codec`: code tables, encoding and exact fake quantization from the shell.
//!
//! Numbers are printed so that they parse back to the exact f32 (`inf`, `-inf`, `nan`
//! spelled so), which makes the output usable as a fixture for other tools.

use std::io::{self, BufRead, BufWriter, Write};

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use hif8lab_format::{FakeQuant, Format, Overflow};

use crate::Outcome;

#[derive(Subcommand, Debug)]
pub enum CodecCommand {
    /// Print every code and its value, one `0xNN<TAB>value` per line.
    Table {
        /// Number format.
        #[arg(long, default_value = "hif8")]
        format: Format,
    },
    /// Encode numbers (arguments, or one per line on stdin) to codes, one `0xNN` per line.
    Encode {
        #[command(flatten)]
        input: NumberInput,
    },
    /// Print qdq(x·S)/S per number, exact.
    Qdq {
        #[command(flatten)]
        input: NumberInput,
        /// Per-tensor scale S applied before and removed after quantization.
        #[arg(long, default_value_t = 1.0)]
        scale: f32,
        /// Where to compute: `cpu` (the format crate) or `gpu` (the engine's qdq kernel).
        #[arg(long, default_value = "cpu", value_parser = ["cpu", "gpu"])]
        backend: String,
    },
}

/// The options shared by `encode` and `qdq`.
#[derive(Args, Debug)]
pub struct NumberInput {
    /// Number format.
    #[arg(long, default_value = "hif8")]
    format: Format,
    /// Overflow behaviour: `inf` (non-finite; NaN for e4m3) or `saturate`.
    #[arg(long, default_value = "inf")]
    overflow: Overflow,
    /// Numbers to process; without any, one number per line is read from stdin.
    #[arg(allow_negative_numbers = true)]
    numbers: Vec<String>,
}

/// Prints an f32 so that it parses back to the same bits (shortest round-trip digits).
pub fn format_value(v: f32) -> String {
    if v.is_nan() {
        "nan".to_owned()
    } else if v == f32::INFINITY {
        "inf".to_owned()
    } else if v == f32::NEG_INFINITY {
        "-inf".to_owned()
    } else {
        format!("{v}")
    }
}

/// Parses one input line as an f32 (decimal, exponent, `inf`, `nan`).
pub fn parse_value(text: &str) -> Option<f32> {
    let t = text.trim();
    if t.is_empty() {
        return None;
    }
    t.parse::<f32>().ok()
}

pub fn run(cmd: CodecCommand) -> Result<Outcome> {
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let outcome = match cmd {
        CodecCommand::Table { format } => {
            for code in 0..=255u8 {
                writeln!(out, "0x{code:02X}\t{}", format_value(format.decode(code)))?;
            }
            Outcome::Ok
        }
        CodecCommand::Encode { input } => {
            let NumberInput {
                format,
                overflow,
                numbers,
            } = input;
            for_each_number(numbers, &mut out, |x| {
                format!("0x{:02X}", format.encode(x, overflow))
            })?
        }
        CodecCommand::Qdq {
            input,
            scale,
            backend,
        } => {
            let NumberInput {
                format,
                overflow,
                numbers,
            } = input;
            if !(scale.is_finite() && scale > 0.0) {
                anyhow::bail!("--scale must be a finite number > 0, got {scale}");
            }
            if backend == "gpu" {
                let (values, outcome) = collect_numbers(numbers)?;
                for y in gpu_qdq(&values, format, overflow, scale)? {
                    writeln!(out, "{}", format_value(y))?;
                }
                outcome
            } else {
                let quant = FakeQuant::new(format).with_overflow(overflow);
                for_each_number(numbers, &mut out, |x| format_value(quant.qdq(x, scale)))?
            }
        }
    };
    out.flush().context("writing to stdout")?;
    Ok(outcome)
}

/// Runs `qdq(x·scale)/scale` over `values` with the engine's GPU kernel.
fn gpu_qdq(values: &[f32], format: Format, overflow: Overflow, scale: f32) -> Result<Vec<f32>> {
    use hif8lab_engine::Backend;
    use hif8lab_engine::gpu::GpuBackend;
    let gpu = GpuBackend::new_blocking().context("--backend gpu")?;
    let scaling = hif8lab_scaling::ScalingConfig {
        format,
        overflow,
        ..Default::default()
    };
    let k = scaling.estimators().len();
    let bank = gpu.new_bank(&hif8lab_engine::BankConfig::new(1, scaling))?;
    gpu.set_scales(&bank, &vec![scale; k])?;
    let x = gpu.upload(values)?;
    let y = gpu.zeros(values.len())?;
    gpu.qdq(&x, &y, &bank, 0)?;
    Ok(gpu.read(&y).wait()?)
}

/// Reads all numbers (arguments or stdin); bad lines are reported as by [`for_each_number`].
fn collect_numbers(numbers: Vec<String>) -> Result<(Vec<f32>, Outcome)> {
    let mut values = Vec::new();
    let outcome = for_each_number(numbers, &mut io::sink(), |x| {
        values.push(x);
        String::new()
    })?;
    Ok((values, outcome))
}

/// Applies `f` to each number from the arguments or stdin, writing one line per valid input.
/// Invalid lines are reported on stderr with their line number and text, print nothing,
/// and make the outcome `BadInput`.
pub fn for_each_number(
    numbers: Vec<String>,
    out: &mut impl Write,
    mut f: impl FnMut(f32) -> String,
) -> Result<Outcome> {
    let mut bad = 0usize;
    let mut handle = |line_no: usize, text: &str, out: &mut dyn Write| -> Result<()> {
        match parse_value(text) {
            Some(x) => writeln!(out, "{}", f(x))?,
            None => {
                bad += 1;
                eprintln!("error: line {line_no}: '{text}' is not a number");
            }
        }
        Ok(())
    };
    if numbers.is_empty() {
        for (i, line) in io::stdin().lock().lines().enumerate() {
            let line = line.with_context(|| format!("reading stdin line {}", i + 1))?;
            handle(i + 1, &line, out)?;
        }
    } else {
        for (i, text) in numbers.iter().enumerate() {
            handle(i + 1, text, out)?;
        }
    }
    Ok(if bad == 0 {
        Outcome::Ok
    } else {
        Outcome::BadInput
    })
}
