//! `hif8lab trace synth`, `hif8lab replay` and `hif8lab export te-recipe`: the command-line
//! face of the scaling crate.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use hif8lab_format::Format;
use hif8lab_scaling::config::ColdStart;
use hif8lab_scaling::import::import_file;
use hif8lab_scaling::replay::{EstimatorReplay, ReplayReport, replay};
use hif8lab_scaling::synth::{Pattern, synth, to_csv};
use hif8lab_scaling::te::te_recipe;
use hif8lab_scaling::{EstimatorSpec, ScalingConfig};

use crate::output::Outcome;

#[derive(Subcommand, Debug)]
pub enum TraceCommand {
    /// Keep the calls of some quantizers of a hif8lab trace (JSONL, gzipped when the name ends
    /// in .gz): the header and, in file order, every record of the quantizers named. For a
    /// trace small enough to keep beside results, or to read in the app.
    Select {
        /// The trace (`trace.jsonl` of a run folder, or a `.jsonl.gz`).
        trace: PathBuf,
        /// Quantizers to keep, comma-separated (`block11.down.A,block9.down.A`).
        #[arg(long, value_delimiter = ',', required = true)]
        quantizers: Vec<hif8lab_scaling::QuantizerId>,
        /// Output file (written atomically; gzipped when it ends in .gz).
        #[arg(long)]
        out: PathBuf,
    },
    /// Write a synthetic amax trace as CSV (step,layer,role,amax).
    Synth {
        /// Shape of the amax sequence.
        #[arg(long, value_parser = parse_pattern)]
        pattern: Pattern,
        /// Quantizer calls per layer (1 to 1,000,000: the trace is built in memory).
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        calls: u64,
        /// Random seed.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Output file (written atomically); stdout when absent.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

fn parse_pattern(s: &str) -> Result<Pattern, hif8lab_format::UnknownName> {
    s.parse()
}

/// Arguments of `hif8lab replay`.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// A hif8lab trace (JSONL), a CSV `step,layer,role,amax`, or a Transformer Engine log.
    pub(crate) trace: PathBuf,
    /// History length, and the window of max_window / mean_window.
    #[arg(long, default_value_t = ScalingConfig::default().window)]
    pub(crate) window: usize,
    /// Estimators to compare, comma-separated (default: most_recent, ema(0.1),
    /// mean_window(N), max_window(N), current).
    #[arg(long)]
    pub(crate) estimators: Option<String>,
    /// Scaling target (15 = top of HiF8's 3-bit tier).
    #[arg(long, default_value_t = ScalingConfig::default().target)]
    pub(crate) target: f32,
    /// Margin (power-of-two headroom).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub(crate) margin: i32,
    /// Number format for the tier and overflow counts.
    #[arg(long, default_value = "hif8")]
    format: Format,
    /// Cold start: jit (first call uses its own amax) or te (scale 1.0).
    #[arg(long, default_value = "jit", value_parser = parse_cold_start)]
    cold_start: ColdStart,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    pub(crate) json: bool,
    /// Sweep one setting: `window=1,4,16,64,256,1024` (each window-dependent estimator of
    /// --estimators, default max_window and mean_window), `estimators=most_recent,max_window(16),…`,
    /// `target=…` or `margin=…`; prints the trade-off table (calls above the estimate,
    /// overflowing calls, modelled overflow and SQNR loss, headroom).
    #[arg(long)]
    pub(crate) sweep: Option<String>,
    /// With --sweep: draw the trade-off (calls above the estimate vs SQNR loss) as a PNG.
    #[arg(long, requires = "sweep")]
    pub(crate) plot: Option<PathBuf>,
}

fn parse_cold_start(s: &str) -> Result<ColdStart, String> {
    match s.to_ascii_lowercase().as_str() {
        "jit" => Ok(ColdStart::Jit),
        "te" => Ok(ColdStart::Te),
        _ => Err(format!("unknown cold start '{s}' (expected jit or te)")),
    }
}

#[derive(Subcommand, Debug)]
pub enum ExportCommand {
    /// Write a run's weights as a Hugging Face Llama folder (config.json, model.safetensors,
    /// generation_config.json, tokenizer.json) that `transformers` loads without custom code.
    Hf(crate::commands::model_cmds::ExportHfArgs),
    /// Print the Transformer Engine DelayedScaling recipe and Megatron-LM flags for a config.
    TeRecipe {
        /// A TOML config: a run config with a `[scaling]` table, or the scaling table itself.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Active estimator (overrides the config).
        #[arg(long)]
        estimator: Option<EstimatorSpec>,
        /// History length (overrides the config).
        #[arg(long)]
        window: Option<usize>,
        /// Scaling target (overrides the config).
        #[arg(long)]
        target: Option<f32>,
        /// Margin (overrides the config).
        #[arg(long, allow_negative_numbers = true)]
        margin: Option<i32>,
        /// Number format (overrides the config).
        #[arg(long)]
        format: Option<Format>,
    },
}

/// Writes `bytes` to `path` atomically (the run folder's writer: temporary file, rename).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    hif8lab_train::run::write_atomic(path, bytes)
        .with_context(|| format!("writing {}", path.display()))
}

pub fn run_trace(cmd: TraceCommand) -> Result<Outcome> {
    match cmd {
        TraceCommand::Select {
            trace,
            quantizers,
            out,
        } => select(&trace, &quantizers, &out),
        TraceCommand::Synth {
            pattern,
            calls,
            seed,
            out,
        } => {
            if calls == 0 {
                bail!("--calls must be at least 1");
            }
            let csv = to_csv(&synth(pattern, calls as usize, seed));
            match out {
                Some(path) => write_atomic(&path, csv.as_bytes())?,
                None => std::io::stdout().write_all(csv.as_bytes())?,
            }
            Ok(Outcome::Ok)
        }
    }
}

/// `trace select`: streams `trace`, keeps the records of `quantizers`, writes them with the
/// header to `out`. A quantizer the trace never calls is refused by name (nothing written).
fn select(
    trace: &Path,
    quantizers: &[hif8lab_scaling::QuantizerId],
    out: &Path,
) -> Result<Outcome> {
    use hif8lab_scaling::trace::{TraceWriter, stream_trace};
    let name = trace.display().to_string();
    let file = fs::File::open(trace).with_context(|| name.clone())?;
    let gz = |p: &Path| p.extension().is_some_and(|e| e == "gz");
    let reader: Box<dyn std::io::BufRead> = if gz(trace) {
        Box::new(std::io::BufReader::new(flate2::read::GzDecoder::new(file)))
    } else {
        Box::new(std::io::BufReader::new(file))
    };
    let inner = if gz(trace) {
        trace.with_extension("")
    } else {
        trace.to_owned()
    };
    let mut kept = Vec::new();
    let mut calls = vec![0usize; quantizers.len()];
    let (header, warnings) = stream_trace(&inner, reader, |r| {
        if let Some(i) = quantizers.iter().position(|q| *q == r.quantizer()) {
            calls[i] += 1;
            kept.push(r);
        }
    })?;
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    if let Some(i) = calls.iter().position(|n| *n == 0) {
        bail!(
            "{name}: quantizer {} has no call in this trace (--quantizers)",
            quantizers[i]
        );
    }
    let mut w = TraceWriter::new(Vec::new(), &header)?;
    for r in &kept {
        w.record(r)?;
    }
    let lines = w.into_inner();
    let bytes = if gz(out) {
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(&lines)?;
        z.finish()?
    } else {
        lines
    };
    write_atomic(out, &bytes)?;
    let counts: Vec<String> = quantizers
        .iter()
        .zip(&calls)
        .map(|(q, n)| format!("{q}: {n}"))
        .collect();
    eprintln!(
        "{}: {} calls kept ({}), {} bytes",
        out.display(),
        kept.len(),
        counts.join(", "),
        bytes.len()
    );
    Ok(Outcome::Ok)
}

pub fn run_replay(args: ReplayArgs) -> Result<Outcome> {
    let estimators = match &args.estimators {
        None if args.sweep.is_some() => Vec::new(),
        None => EstimatorSpec::default_set(),
        Some(list) => crate::commands::sweep_cmd::split_top_level(list)
            .iter()
            .map(|s| s.parse::<EstimatorSpec>().map_err(anyhow::Error::from))
            .collect::<Result<Vec<_>>>()
            .context("--estimators")?,
    };
    if estimators.is_empty() && args.sweep.is_none() {
        bail!("--estimators: no estimator given");
    }
    // The replay's config: the same ranges as a run's qat.scaling table, checked once by
    // its plan (an error names the flag).
    let base = ScalingConfig {
        window: args.window,
        target: args.target,
        margin: args.margin,
        format: args.format,
        cold_start: args.cold_start,
        ..ScalingConfig::default()
    };
    let plan = base
        .clone()
        .comparing(&estimators)
        .plan()
        .map_err(|e| match e.field.as_str() {
            "window" | "target" | "margin" => anyhow::anyhow!("--{e} (as qat.scaling.{})", e.field),
            _ => anyhow::anyhow!("--estimators: {e}"),
        })?;
    let settings = match &args.sweep {
        Some(text) => Some(crate::commands::sweep_cmd::settings(
            text,
            &base,
            &estimators,
        )?),
        None => None,
    };
    // Only a regular file is read (a FIFO would hang, a link to /dev/zero never end).
    let meta = fs::metadata(&args.trace).with_context(|| args.trace.display().to_string())?;
    if !meta.is_file() {
        bail!("{}: not a regular file", args.trace.display());
    }
    let imported = if args.trace.extension().is_some_and(|e| e == "gz") {
        // A gzipped trace (as the repository keeps its real-model one): read whole, every
        // member of it, up to a bound on what it inflates to.
        const MAX_INFLATED: u64 = 1 << 30;
        let packed = fs::read(&args.trace).with_context(|| args.trace.display().to_string())?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(
                flate2::read::MultiGzDecoder::new(&packed[..]),
                MAX_INFLATED + 1,
            ),
            &mut bytes,
        )
        .map_err(|e| anyhow::anyhow!("{}: not gzip ({e})", args.trace.display()))?;
        if bytes.len() as u64 > MAX_INFLATED {
            bail!(
                "{}: inflates to more than {} MiB; replay reads a trace whole (split it, or \
                 replay it uncompressed)",
                args.trace.display(),
                MAX_INFLATED >> 20
            );
        }
        let inner = args.trace.with_extension("");
        hif8lab_scaling::import::import_bytes(&inner, &bytes)?
    } else {
        import_file(&args.trace)?
    };
    for w in &imported.warnings {
        eprintln!("warning: {}: {w}", args.trace.display());
    }
    if imported.series.iter().all(|s| s.amax.is_empty()) {
        bail!(
            "{}: no quantizer calls to replay (a header alone, or no amax values)",
            args.trace.display()
        );
    }
    if let Some(settings) = settings {
        let output = crate::commands::sweep_cmd::SweepOutput {
            trace: &args.trace,
            json: args.json,
            plot: args.plot.as_deref(),
        };
        return crate::commands::sweep_cmd::run(&output, &imported, &settings);
    }
    let report = replay(&imported.series, &plan);
    if args.json {
        crate::output::outln!("{}", serde_json::to_string(&report)?);
    } else {
        print_report(&report, &args, imported.kind)?;
    }
    Ok(Outcome::Ok)
}

fn print_table(title: &str, rows: &[(&String, &EstimatorReplay)], hif8: bool) -> Result<()> {
    crate::output::outln!("{title}");
    crate::output::outln!(
        "  {:<22} {:>8} {:>15} {:>11} {:>15} {:>11} {:>9}",
        "estimator",
        "calls",
        "calls_above_est",
        "worst_ratio",
        "median_headroom",
        if hif8 { "beyond_3bit" } else { "" },
        "overflow"
    );
    for (name, r) in rows {
        crate::output::outln!(
            "  {:<22} {:>8} {:>15} {:>11.3} {:>15.3} {:>11} {:>9}",
            name,
            r.calls,
            r.calls_above_est,
            r.worst_ratio,
            r.median_headroom,
            r.beyond_3bit_tier
                .map(|v| v.to_string())
                .unwrap_or_default(),
            r.beyond_overflow
        );
    }
    Ok(())
}

fn print_report(report: &ReplayReport, args: &ReplayArgs, kind: &str) -> Result<()> {
    let hif8 = args.format == Format::HiF8;
    crate::output::outln!(
        "replay of {} ({kind}, {} quantizer(s)); format {}, target {}, margin {}, window {}",
        args.trace.display(),
        report.quantizers.len(),
        args.format,
        args.target,
        args.margin,
        args.window
    );
    crate::output::outln!(
        "calls_above_est: amax > estimate; worst_ratio: max amax/est; median_headroom: est/amax{}\n",
        if hif8 {
            "; beyond_3bit: amax·scale ≥ 16 (left HiF8's 3-bit tier); overflow: amax·scale ≥ 40960"
        } else {
            ""
        }
    );
    for q in &report.quantizers {
        let rows: Vec<_> = report
            .order
            .iter()
            .filter_map(|n| q.estimators.get_key_value(n))
            .collect();
        let left_out = q.nonfinite_amax + q.negative_amax + q.rounded_to_zero;
        let note = if left_out > 0 {
            format!(
                "; {left_out} left out: {} NaN/Inf, {} negative, {} printed as 0",
                q.nonfinite_amax, q.negative_amax, q.rounded_to_zero
            )
        } else {
            String::new()
        };
        let sqnr = q.recorded_sqnr.map_or(String::new(), |r| {
            format!(
                "; recorded SQNR (the run's own estimator) median {:.2} dB, worst {:.2} dB over {} calls",
                r.median_db, r.worst_db, r.calls
            )
        });
        print_table(
            &format!("{} ({} calls{note}{sqnr})", q.name, q.calls),
            &rows,
            hif8,
        )?;
    }
    let rows: Vec<_> = report
        .order
        .iter()
        .filter_map(|n| report.total.get_key_value(n))
        .collect();
    crate::output::outln!();
    print_table("TOTAL", &rows, hif8)
}

pub fn run_export(cmd: ExportCommand) -> Result<Outcome> {
    match cmd {
        ExportCommand::Hf(args) => crate::commands::model_cmds::run_export_hf(args),
        ExportCommand::TeRecipe {
            config,
            estimator,
            window,
            target,
            margin,
            format,
        } => {
            let mut c = match &config {
                Some(path) => load_scaling_config(path)?,
                None => ScalingConfig::default(),
            };
            if let Some(e) = estimator {
                c.estimator = e;
            }
            if let Some(w) = window {
                c.window = w;
            }
            if let Some(t) = target {
                c.target = t;
            }
            if let Some(m) = margin {
                c.margin = m;
            }
            if let Some(f) = format {
                c.format = f;
            }
            let plan = c.plan().map_err(anyhow::Error::msg)?;
            crate::output::out!("{}", te_recipe(&plan));
            Ok(Outcome::Ok)
        }
    }
}

/// Loads a scaling config from TOML: hif8lab's own run config (`config.toml` of a run
/// folder, a preset: its `[qat.scaling]` table), a file with a `[scaling]` table, or a file
/// that is the scaling table itself. Errors name the file and the key.
pub fn load_scaling_config(path: &Path) -> Result<ScalingConfig> {
    let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let table: toml::Table =
        toml::from_str(&text).with_context(|| format!("{}: not valid TOML", path.display()))?;
    let scaling = match (table.get("scaling"), table.get("qat")) {
        (Some(toml::Value::Table(t)), _) => t.clone(),
        (Some(_), _) => bail!("{}: 'scaling' must be a table", path.display()),
        (None, Some(_)) => {
            let run = hif8lab_train::RunConfig::parse(&path.display().to_string(), &text, &[])?;
            return Ok(run.qat.scaling);
        }
        (None, None) => table,
    };
    let config: ScalingConfig = scaling.try_into().map_err(|e: toml::de::Error| {
        anyhow::anyhow!("{}: [scaling]: {}", path.display(), e.message())
    })?;
    config
        .validate()
        .map_err(|e| anyhow::anyhow!("{}: [scaling]: {e}", path.display()))?;
    Ok(config)
}
