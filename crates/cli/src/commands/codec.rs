//! `hif8lab codec`: code tables, encoding and exact fake quantization from the shell.
//!
//! Numbers are printed so that they parse back to the exact f32 (`inf`, `-inf`, `nan`
//! spelled so), which makes the output usable as a fixture for other tools.

use std::io::{self, BufRead, BufWriter, Write};

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use hif8lab_format::{FakeQuant, Format, Overflow};

use crate::output::Outcome;

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
        /// Where to compute: `cpu` (the format crate), `gpu` / `gpu:ADAPTER` (the engine's
        /// qdq kernel) or `auto` (the GPU when an adapter exists).
        #[arg(long, default_value = "cpu")]
        backend: hif8lab_engine::BackendChoice,
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
            let gpu = match backend.resolve(&mut |n| eprintln!("note: {n}")) {
                hif8lab_engine::BackendChoice::Gpu { adapter } => Some(
                    hif8lab_engine::open_gpu(adapter.as_deref())
                        .with_context(|| format!("--backend {backend}"))?,
                ),
                _ => None,
            };
            if let Some(gpu) = gpu {
                let (values, outcome) = collect_numbers(numbers)?;
                for y in gpu_qdq(gpu, &values, format, overflow, scale)? {
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
fn gpu_qdq(
    gpu: hif8lab_engine::gpu::GpuBackend,
    values: &[f32],
    format: Format,
    overflow: Overflow,
    scale: f32,
) -> Result<Vec<f32>> {
    use hif8lab_engine::prelude::*;
    let scaling = hif8lab_scaling::ScalingConfig {
        format,
        overflow,
        ..Default::default()
    };
    let plan = scaling.plan()?;
    let k = plan.estimators().len();
    let bank = gpu.new_bank(&hif8lab_engine::BankConfig::new(1, plan))?;
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
    f: impl FnMut(f32) -> String,
) -> Result<Outcome> {
    if numbers.is_empty() {
        return for_each_line(io::stdin().lock(), out, &mut io::stderr(), f);
    }
    let mut errors = io::stderr();
    let mut lines = Lines::new(out, &mut errors, f);
    for (i, text) in numbers.iter().enumerate() {
        lines.handle(i + 1, text.as_bytes())?;
    }
    Ok(lines.outcome())
}

/// [`for_each_number`] over lines of bytes: a line that is not UTF-8 or not a number is
/// named on `errors` (line number and text, invalid bytes shown as `\xNN`), prints nothing,
/// and makes the outcome `BadInput`; the other lines go on.
pub fn for_each_line(
    mut input: impl BufRead,
    out: &mut impl Write,
    errors: &mut impl Write,
    f: impl FnMut(f32) -> String,
) -> Result<Outcome> {
    let mut lines = Lines::new(out, errors, f);
    let mut buf = Vec::new();
    let mut line_no = 0;
    loop {
        buf.clear();
        let n = input
            .read_until(b'\n', &mut buf)
            .with_context(|| format!("reading stdin after line {line_no}"))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        lines.handle(line_no, line)?;
    }
    Ok(lines.outcome())
}

/// The per-line work of [`for_each_line`].
struct Lines<'a, O, E, F> {
    out: &'a mut O,
    errors: &'a mut E,
    f: F,
    bad: usize,
}

impl<'a, O: Write, E: Write, F: FnMut(f32) -> String> Lines<'a, O, E, F> {
    fn new(out: &'a mut O, errors: &'a mut E, f: F) -> Self {
        Lines {
            out,
            errors,
            f,
            bad: 0,
        }
    }

    fn handle(&mut self, line_no: usize, bytes: &[u8]) -> Result<()> {
        let value = std::str::from_utf8(bytes).map_err(|_| "is not UTF-8 text");
        match value.and_then(|t| parse_value(t).ok_or("is not a number")) {
            Ok(x) => writeln!(self.out, "{}", (self.f)(x))?,
            Err(why) => {
                self.bad += 1;
                writeln!(
                    self.errors,
                    "error: line {line_no}: '{}' {why}",
                    bytes.escape_ascii()
                )?;
            }
        }
        Ok(())
    }

    fn outcome(&self) -> Outcome {
        if self.bad == 0 {
            Outcome::Ok
        } else {
            Outcome::BadInput
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `codec encode`'s stdin reader on 100,000 mutated inputs: never a panic; every line is
    /// either one output line or one error line naming its number, and any error makes the
    /// outcome `BadInput`.
    #[test]
    fn fuzz_codec_stdin() {
        let seeds = vec![
            b"1.5\n-2\n0.0001\n40960\n".to_vec(),
            b"nan\ninf\n-inf\n1e-30\r\n3\n".to_vec(),
        ];
        let mut m = hif8lab_tests::Mutator::new(9, &["1e39", "0x1p3", " 7 "]);
        let start = std::time::Instant::now();
        let counts = hif8lab_tests::fuzz("codec stdin", 100_000, &mut m, &seeds, |bytes| {
            let (mut out, mut errors) = (Vec::new(), Vec::new());
            let outcome = for_each_line(bytes, &mut out, &mut errors, |x| {
                format!("0x{:02X}", Format::HiF8.encode(x, Overflow::Inf))
            })
            .map_err(|e| e.to_string())?;
            let lines = bytes.split(|b| *b == b'\n').count() - usize::from(bytes.ends_with(b"\n"));
            let lines = if bytes.is_empty() { 0 } else { lines };
            let (o, e) = (
                out.split(|b| *b == b'\n').count() - 1,
                errors.split(|b| *b == b'\n').count() - 1,
            );
            assert_eq!(o + e, lines, "one line out per line in");
            match outcome {
                Outcome::Ok if e == 0 => Ok(()),
                Outcome::BadInput if e > 0 => Err(String::from_utf8_lossy(&errors).into_owned()),
                _ => panic!("outcome does not match the {e} error line(s)"),
            }
        });
        println!(
            "fuzz codec stdin: 100000 inputs in {:.2} s ({} accepted, {} refused)",
            start.elapsed().as_secs_f64(),
            counts.0,
            counts.1
        );
    }
}
