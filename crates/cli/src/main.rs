//! `hif8lab`: the command line of hif8lab.
//!
//! Subcommands: `codec` (inspect and apply the 8-bit formats) and `bench` (measured
//! figures). Each subcommand lives in its own module; this file only parses arguments
//! and maps outcomes to exit codes (0 ok, 1 failure, 2 bad input).

mod bench;
mod codec;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// HiF8 quantization-aware training lab.
#[derive(Parser, Debug)]
#[command(name = "hif8lab", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Inspect and apply the 8-bit formats (HiF8, E4M3, E5M2).
    #[command(subcommand)]
    Codec(codec::CodecCommand),
    /// Measure throughput; figures name the machine they ran on.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
}

/// How a command ended, mapped to the process exit code.
pub enum Outcome {
    /// Everything succeeded.
    Ok,
    /// Some input was rejected (reported on stderr); exit code 2.
    BadInput,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Codec(cmd) => codec::run(cmd),
        Command::Bench(cmd) => bench::run(cmd),
    };
    match result {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::BadInput) => ExitCode::from(2),
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
