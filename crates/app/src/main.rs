//! `hif8lab-app`: the desktop dashboard. Flags: `--preset NAME`, `--autostart`,
//! `--open RUN_DIR`, `--check-open RUN_DIR` (read it as --open would and print what it holds, no
//! window), `--watch RUN_DIR` (follow a run another process writes, e.g. a torchrun
//! of `hif8lab.torch.train`), `--init-from HF_DIR`, `--trace FILE`, `--tab PANEL`, `--lesson NAME`, `--pretrain-base` (the lessons' base pretrained here, not the shipped one), `--backend cpu|gpu`, `--bench-frames N` (frame-time benchmark), `--png-after NAME.png` (save the shown panel
//! into `exports/` once training finishes). Without a display it says so and names the headless command.

use std::path::PathBuf;
use std::process::ExitCode;

use hif8lab_app::training::Device;
use hif8lab_app::{HifApp, Options};
use hif8lab_engine::BackendChoice;

fn parse_args() -> Result<Options, String> {
    let mut options = Options::default();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--preset" => options.preset = Some(args.next().ok_or("--preset needs a name")?),
            "--autostart" => options.autostart = true,
            "--open" => {
                options.open = Some(PathBuf::from(
                    args.next().ok_or("--open needs a run folder")?,
                ))
            }
            "--check-open" => {
                options.check_open = Some(PathBuf::from(
                    args.next().ok_or("--check-open needs a run folder")?,
                ))
            }
            "--watch" => {
                options.watch = Some(PathBuf::from(
                    args.next().ok_or("--watch needs a run folder")?,
                ))
            }
            "--trace" => {
                options.trace = Some(PathBuf::from(args.next().ok_or("--trace needs a file")?))
            }
            "--bench-frames" => {
                let n = args.next().ok_or("--bench-frames needs a frame count")?;
                options.bench_frames = Some(
                    n.parse()
                        .map_err(|_| format!("--bench-frames: '{n}' is not a frame count"))?,
                );
            }
            "--png-after" => {
                options.png_after = Some(args.next().ok_or("--png-after needs a file name")?)
            }
            "--backend" => {
                let b = args.next().ok_or("--backend needs auto, cpu or gpu")?;
                let choice: BackendChoice = b.parse().map_err(|e| format!("--backend: {e}"))?;
                if let BackendChoice::Gpu {
                    adapter: Some(name),
                } = &choice
                {
                    return Err(format!(
                        "--backend gpu:{name}: the app computes on the device it draws with; \
                         give gpu (or auto) and choose the adapter with WGPU_ADAPTER_NAME"
                    ));
                }
                options.backend = Some(choice);
            }
            "--init-from" => {
                options.init_from = Some(PathBuf::from(
                    args.next()
                        .ok_or("--init-from needs a Hugging Face folder")?,
                ))
            }
            "--pretrain-base" => options.pretrain_base = true,
            "--lesson" => options.lesson = Some(args.next().ok_or("--lesson needs a name")?),
            "--tab" => {
                let name = args.next().ok_or("--tab needs a panel name")?;
                options.tab = Some(hif8lab_app::Tab::parse(&name).ok_or_else(|| {
                    format!("unknown panel '{name}' (loss, amax, saturation, estimators, histogram, runs, lessons)")
                })?);
            }
            "--help" | "-h" => {
                print!("{HELP}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument '{other}' (try --help)")),
        }
    }
    Ok(options)
}

/// `hif8lab-app --help`: every flag with what it does.
const HELP: &str = "\
hif8lab-app: train with HiF8 fake quantization and watch delayed scaling live.

Usage: hif8lab-app [OPTIONS]

Options:
  --preset NAME         start from a preset (smoke, small, medium, …)
  --autostart           start training at once
  --open DIR            open a run folder (hif8lab train, hif8lab.torch.train) or a grid folder
  --watch DIR           follow a run folder another process writes (torchrun, hif8lab train)
  --check-open DIR      open DIR headless, print what was read, exit (0 ok, 2 unreadable)
  --trace FILE          replay an amax trace (JSONL, CSV or Transformer Engine log)
  --tab PANEL           show a panel first: loss, amax, saturation, estimators, histogram,
                        runs or lessons
  --lesson NAME         open a lesson (see the Lessons tab for their names)
  --pretrain-base       pretrain the lessons' base model instead of using the shipped one
  --init-from MODEL     continue training a model: a Hugging Face folder or a GGUF file
  --backend auto|cpu|gpu
                        where to compute (auto: the GPU when an adapter opens)
  --bench-frames N      draw N frames, print the frame times, exit
  --png-after NAME.png  save the shown panel as a PNG (into exports/, or the path
                        given) once there is data to show: a finished run, an
                        opened folder or trace, a lesson's verdict; the window stays
  -h, --help            this text

Without a display it says so and exits; the browser build is the same app (README).
";

fn main() -> ExitCode {
    hif8lab_engine::cpu::tune_allocator();
    let options = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(dir) = &options.check_open {
        return check_open(dir);
    }
    if cfg!(target_os = "linux")
        && std::env::var_os("DISPLAY").is_none()
        && std::env::var_os("WAYLAND_DISPLAY").is_none()
    {
        eprintln!(
            "hif8lab-app needs a display (neither DISPLAY nor WAYLAND_DISPLAY is set).\n\
             Train headless instead:  cargo run --release -p hif8lab-cli -- train --preset smoke\n\
             or run the app under Xvfb: Xvfb :99 & DISPLAY=:99 cargo run --release"
        );
        return ExitCode::FAILURE;
    }
    run_window(options)
}

/// `--check-open DIR`: what `--open` would read, printed without a window (0: read, 2: not).
fn check_open(dir: &std::path::Path) -> ExitCode {
    // A committed results folder: its runs from the grid's data file.
    let data = dir.join(hif8lab_lab::grid::DATA_FILE);
    if !dir.join("runs").is_dir() && data.is_file() {
        return match hif8lab_lab::grid::GridData::read(&data) {
            Ok(d) => {
                let first: Vec<String> = d
                    .runs
                    .iter()
                    .filter(|r| r.order == 0 && r.base_seed == 0)
                    .map(|r| {
                        let v = hif8lab_app::state::RunView::from_summary(&r.run, &r.summary);
                        format!(
                            "{} ({} steps, {} probes)",
                            v.name,
                            v.loss.len(),
                            v.probes.len()
                        )
                    })
                    .collect();
                println!(
                    "{}: results folder, {} runs in {} data order(s); first order: {}",
                    dir.display(),
                    d.runs.len(),
                    d.runs.iter().map(|r| r.order).max().map_or(0, |m| m + 1),
                    first.join(", ")
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: cannot open {}: {e}", dir.display());
                ExitCode::from(2)
            }
        };
    }
    // What --open would show, said without a window (scripts check folders this way).
    match hif8lab_app::state::RunView::load(dir) {
        Ok(v) => {
            let calls: usize = v.calls.values().map(Vec::len).sum();
            println!(
                "{}: {} steps, QAT from step {}, {} quantizers, {} calls, estimators {}",
                dir.display(),
                v.loss.len(),
                v.qat_from.map_or("-".into(), |s| s.to_string()),
                v.calls.len(),
                calls,
                v.estimators.join(", ")
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: cannot open {}: {e}", dir.display());
            ExitCode::from(2)
        }
    }
}

/// The window, with `options` applied once eframe gives the app its device.
fn run_window(options: Options) -> ExitCode {
    let mut native = eframe::NativeOptions {
        viewport: eframe::egui::ViewportBuilder::default()
            .with_inner_size([1280.0, 800.0])
            .with_title("hif8lab"),
        ..Default::default()
    };
    if options.bench_frames.is_some() {
        // The benchmark measures drawing, not waiting for the display.
        native.wgpu_options.surface.present_mode = wgpu::PresentMode::AutoNoVsync;
    }
    let result = eframe::run_native(
        "hif8lab",
        native,
        Box::new(move |cc| {
            let mut app = HifApp::new(&options);
            if let Some(rs) = &cc.wgpu_render_state {
                // The engine shares eframe's device and queue.
                app.device.gpu = Some(Device::Gpu(Box::new((
                    rs.device.clone(),
                    rs.queue.clone(),
                    rs.adapter.get_info(),
                ))));
            }
            // The desktop app trains on the CPU unless asked for the GPU (gpu, or auto on a
            // hardware adapter: auto never trains on a software rasterizer such as lavapipe).
            let software = cc
                .wgpu_render_state
                .as_ref()
                .is_some_and(|rs| rs.adapter.get_info().device_type == wgpu::DeviceType::Cpu);
            match options.backend {
                None | Some(BackendChoice::Cpu) => app.form.settings.gpu = false,
                Some(BackendChoice::Auto) if software => {
                    eprintln!(
                        "note: the display's adapter is a software rasterizer; --backend auto \
                         trains on the CPU backend (--backend gpu takes the adapter anyway)"
                    );
                    app.form.settings.gpu = false;
                }
                Some(_) => app.form.settings.gpu = app.device.gpu.is_some(),
            }
            if options.autostart {
                let ctx = cc.egui_ctx.clone();
                app.autostart(move || ctx.request_repaint());
            }
            Ok(Box::new(app))
        }),
    );
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
