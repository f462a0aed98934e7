//! `hif8lab`: the command line of hif8lab.
//!
//! Subcommands: `train`, `pretrain`, `grid`, `lesson` (training, all through the run driver
//! of `hif8lab-train`), `replay`, `trace synth`, `export te-recipe` (delayed scaling
//! offline), `codec` (inspect and apply the 8-bit formats) and `bench` (measured figures).
//! Each subcommand lives in its own module; this file only parses arguments
//! and maps outcomes to exit codes (0 ok, 1 a failure on the way, 2 input refused; see
//! [`output::exit_code_of`]; `train` stopped by a signal exits 128 + its number).

mod commands;
mod output;

use commands::*;
use output::{ClosedPipe, Outcome, exit_code_of};

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// HiF8 quantization-aware training lab.
#[derive(Parser, Debug)]
#[command(name = "hif8lab", version, about, long_about = None)]
struct Cli {
    /// Threads of the CPU backend (parallel loops and GEMM; default: one per core). Results
    /// do not depend on it: losses are bit-identical at any thread count.
    #[arg(long, global = true, value_parser = clap::value_parser!(u64).range(1..=1024))]
    threads: Option<u64>,
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
    /// Work with amax traces (synthetic traces for lessons and tests).
    #[command(subcommand)]
    Trace(scaling_cmds::TraceCommand),
    /// Recompute every estimator over a recorded amax trace (JSONL, CSV or TE log).
    Replay(scaling_cmds::ReplayArgs),
    /// Train a configuration headless (writes a run folder).
    Train(train_cmd::TrainArgs),
    /// Pretrain the base model of an experiment grid (high precision, knowledge corpus).
    Pretrain(grid_cmd::GridArgs),
    /// Run the paper's experiment grid from the base model and write results.md / .csv.
    Grid(grid_cmd::GridArgs),
    /// The lessons: run one headless and check its claims (`lesson run NAME [--json]`).
    #[command(subcommand)]
    Lesson(grid_cmd::LessonCommand),
    /// Export a run's weights as a Hugging Face Llama folder (`export hf`), or settings for
    /// other tools (Transformer Engine, Megatron-LM).
    #[command(subcommand)]
    Export(scaling_cmds::ExportCommand),
    /// Loss, perplexity and bits per byte of a model (run folder, checkpoint or Hugging Face
    /// folder) on a text.
    Eval(model_cmds::EvalArgs),
    /// Generate text from a model (seeded, reproducible).
    Sample(model_cmds::SampleArgs),
    /// A model's knowledge on a multiple-choice probe set (the shipped general-knowledge set:
    /// 609 items over 209 clusters), scored like lm-eval-harness, with intervals.
    Probe(probe_cmd::ProbeArgs),
    /// Calibrate the probes without training: damage a real base's quantized MLP weights at
    /// known sizes (Gaussian noise, HiF8 with the scale too large), score each damaged model
    /// and report the smallest damage each score detects, with intervals.
    CalibrateProbe(calibrate_cmd::CalibrateArgs),
    /// The pre-registered perturb-then-train study: a damage training carries (the control),
    /// a sham that should not matter, and saturation judged only when both allow it.
    PerturbStudy(perturb_cmd::PerturbStudyArgs),
    /// Bring a model in (`import gguf FILE.gguf --out DIR` writes a Hugging Face folder), or
    /// a training log as CSV (`import log FILE --out steps.csv`).
    #[command(subcommand)]
    Import(import_cmd::ImportCommand),
    /// Compare lm-evaluation-harness results (BASE QUANT [MORE…]): paired per task on the
    /// same documents where the per-sample logs exist (McNemar, exact and cluster intervals,
    /// TOST against --margin), unpaired binomial intervals otherwise; Holm across tasks.
    CompareEvals(evals_cmd::CompareEvalsArgs),
    /// Compare two training logs step by step (APE and the signed difference, block
    /// bootstrap, warmup apart).
    CompareLogs(evals_cmd::CompareLogsArgs),
    /// Rebuild the report on the paper's own numbers from its extract.
    JudgePaper(evals_cmd::JudgePaperArgs),
}

/// Runs one command.
fn run(command: Command) -> anyhow::Result<Outcome> {
    match command {
        Command::Codec(cmd) => codec::run(cmd),
        Command::Bench(cmd) => bench::run(cmd),
        Command::Trace(cmd) => scaling_cmds::run_trace(cmd),
        Command::Replay(args) => scaling_cmds::run_replay(args),
        Command::Export(cmd) => scaling_cmds::run_export(cmd),
        Command::Eval(args) => model_cmds::run_eval(args),
        Command::Sample(args) => model_cmds::run_sample(args),
        Command::Probe(args) => probe_cmd::run_probe(args),
        Command::CalibrateProbe(args) => calibrate_cmd::run_calibrate(args),
        Command::PerturbStudy(args) => perturb_cmd::run(args),
        Command::Import(cmd) => import_cmd::run(cmd),
        Command::CompareEvals(args) => evals_cmd::run_compare_evals(args),
        Command::CompareLogs(args) => evals_cmd::run_compare_logs(args),
        Command::JudgePaper(args) => evals_cmd::run_judge_paper(args),
        Command::Train(args) => train_cmd::run_train(args).map(|()| Outcome::Ok),
        Command::Pretrain(args) => grid_cmd::run_pretrain(args).map(|()| Outcome::Ok),
        Command::Grid(args) => grid_cmd::run_grid(args).map(|()| Outcome::Ok),
        Command::Lesson(cmd) => grid_cmd::run_lesson(cmd),
    }
}

fn main() -> ExitCode {
    hif8lab_engine::cpu::tune_allocator();
    let cli = Cli::parse();
    if let Some(n) = cli.threads
        && let Err(e) = hif8lab_engine::cpu::set_threads(n as usize)
    {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    // A file size limit (`ulimit -f`) makes the write that passes it fail (EFBIG), handled
    // like a full disk, instead of killing the process with SIGXFSZ mid-write.
    let _ = signal_hook::flag::register(
        signal_hook::consts::SIGXFSZ,
        std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
    );
    // The whole command on a thread of the CPU backend's pool (see `on_pool`).
    let result = hif8lab_engine::cpu::on_pool(|| run(cli.command));
    match result {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::BadInput) => ExitCode::from(2),
        Ok(Outcome::ClaimsFail | Outcome::Differs) => ExitCode::FAILURE,
        Ok(Outcome::Inconclusive) => ExitCode::from(3),
        Err(err) if err.is::<ClosedPipe>() => ExitCode::from(141),
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(exit_code_of(&err))
        }
    }
}
