//! The grid on a model brought in from outside (`[base] model = PATH`), on a small fixture
//! made here: a 6-block Llama whose block 3 carries an injected outlier channel (one channel
//! of its MLP's RMSNorm weight ×300 — a weight no quantizer sees — so channel c of block 3's
//! `gate` and `up` inputs is ~300× the others: a "massive activation" in miniature). The grid continues from its weights without
//! pretraining, probes it with the general-knowledge set in its own tokenizer, and reports
//! per-quantizer figures: the outlier quantizer must top the amax table, most_recent must
//! be exceeded there more often than max_window(64) on the same calls (the real model's
//! ordering), and E4M3 must clip where HiF8 overflows nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use std::path::Path;

use hif8lab_engine::cpu::CpuBackend;
use hif8lab_lab::grid::{self, GridConfig};
use hif8lab_train::config::RunConfig;
use hif8lab_train::models::hf::{ExportDtype, ExportParts, write_folder};
use hif8lab_train::{TrainError, Trainer};

const OUTLIER_BLOCK: usize = 3;
const OUTLIER_CHANNEL: usize = 5;

const MODEL: &str = "vocab = 256\nd_model = 48\nlayers = 6\nheads = 4\nkv_heads = 2\n\
                     d_ff = 96\ncontext = 48\nnorm_eps = 1e-5\nrope_theta = 10000.0\n\
                     tie_embeddings = false\nmax_positions = 64\n";

/// Writes the fixture model (seeded initialization, outlier injected) as a Hugging Face
/// folder with the byte tokenizer.
fn outlier_model(dir: &Path) {
    let text = format!("[model]\n{MODEL}\n[train]\nsteps = 1\nbatch = 2\nlr = 1e-3\nseed = 3\n");
    let config = RunConfig::parse("fixture", &text, &[]).unwrap();
    let t = Trainer::from_config(CpuBackend::new(), config.clone()).unwrap();
    let ck = t.begin_weights().finish(true).unwrap();
    let norm = format!("model.layers.{OUTLIER_BLOCK}.post_attention_layernorm.weight");
    let mut weights: Vec<(String, Vec<usize>, Vec<f32>)> = ck
        .tensors
        .into_iter()
        .map(|t| (t.name, t.shape, t.data))
        .collect();
    let (_, _, data) = weights.iter_mut().find(|(n, _, _)| *n == norm).unwrap();
    data[OUTLIER_CHANNEL] *= 300.0;
    let parts = ExportParts {
        model: &config.model,
        base_config: None,
        tokenizer_json: None,
        dtype: ExportDtype::F32,
        tokenizer_config: None,
        generation_config: None,
    };
    write_folder(dir, &parts, &weights).unwrap();
}

fn top_of(s: &hif8lab_train::run::RunSummary) -> String {
    s.per_quantizer
        .iter()
        .max_by(|a, b| a.amax_max.total_cmp(&b.amax_max))
        .unwrap()
        .quantizer
        .clone()
}

fn grid_text(model: &Path, extra: &str) -> String {
    format!(
        "[base]\nmodel = \"{}\"\n\n[model]\n{MODEL}\n[continue]\nsteps = 24\nbatch = 2\n\
         lr_high = 1e-3\nlr_low = 1e-4\nqat_warmup_steps = 2\neval_every = 24\ne4m3 = true\n\n\
         [data]\nbytes = 40000\n{extra}",
        model.display()
    )
}

#[test]
fn a_real_base_shows_its_outlier_and_the_estimator_ordering() {
    let root = std::env::temp_dir().join(format!("hif8lab-real-base-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let model = root.join("model");
    outlier_model(&model);
    let config = GridConfig::parse(&grid_text(&model, ""), "fixture grid").unwrap();
    assert_eq!(config.runs().len(), 10, "the 8 cells and 2 E4M3 twins");
    let out = root.join("grid");
    let make = || Ok::<_, TrainError>(CpuBackend::new());
    let results = grid::run_grid(&make, &config, &out, 1, 1, &[], &mut ()).unwrap();

    // No pretraining: the base is the model, probed with the general-knowledge set.
    assert!(!out.join("base").join("checkpoints").exists());
    assert!(out.join("base").join("probes.json").is_file());
    assert_eq!(results.base_model.as_deref(), Some("model"));
    assert_eq!(results.base.knowledge_items, 609);
    let runs_cfg = std::fs::read_to_string(out.join("runs/most_recent-low/config.toml")).unwrap();
    assert!(runs_cfg.contains("init_from"), "{runs_cfg}");

    // The outlier's quantizers (block 3's gate and up inputs) top the amax table of every
    // QAT run, far above the activations of every other block (block 3's `down` input
    // carries the channel on).
    let outlier = format!("block{OUTLIER_BLOCK}.gate.A");
    let twin = format!("block{OUTLIER_BLOCK}.up.A");
    let row = |name: &str| results.rows.iter().find(|r| r.name == name).unwrap();
    for r in results.rows.iter().filter(|r| r.name.contains("-low")) {
        let s = &r.seeds[0];
        if s.estimator == "none" {
            assert!(s.per_quantizer.is_empty(), "{}", r.name);
            continue;
        }
        let top = s
            .per_quantizer
            .iter()
            .max_by(|a, b| a.amax_max.total_cmp(&b.amax_max))
            .unwrap();
        assert!(
            top.quantizer == outlier || top.quantizer == twin,
            "{}: {}",
            r.name,
            top.quantizer
        );
        let others: Vec<f32> = s
            .per_quantizer
            .iter()
            .filter(|q| {
                q.quantizer.ends_with(".A")
                    && !q.quantizer.starts_with(&format!("block{OUTLIER_BLOCK}."))
            })
            .map(|q| q.amax_max)
            .collect();
        assert!(
            others.iter().all(|a| top.amax_max > 20.0 * a),
            "{}: {} vs {others:?}",
            r.name,
            top.amax_max
        );
    }
    // most_recent is exceeded more often than max_window(64) on the outlier's calls.
    let s = &row("most_recent-low").seeds[0];
    let q = s
        .per_quantizer
        .iter()
        .find(|q| q.quantizer == outlier)
        .unwrap();
    let k = |e: &str| s.estimators.iter().position(|x| x == e).unwrap();
    let (mr, mw) = (
        q.calls_above[k("most_recent")],
        q.calls_above[k("max_window(64)")],
    );
    assert!(
        mr > mw,
        "most_recent {mr} vs max_window {mw} of {}",
        q.calls
    );
    // HiF8 absorbs what lands above the estimate; E4M3 (target 448 = its max) clips it.
    assert_eq!(q.overflow[k("most_recent")], 0);
    let e = &row("most_recent-low-e4m3").seeds[0];
    let clipped: u64 = e
        .per_quantizer
        .iter()
        .map(|q| q.overflow[e.estimators.iter().position(|x| *x == e.estimator).unwrap()])
        .sum();
    assert!(clipped > 0, "E4M3 clipped nothing");

    // The lesson "a real model's outliers", judged from this grid's data: it finds the
    // injected channel's quantizer by itself and judges lesson 1's claims there.
    let data = grid::GridData::read(&out.join(grid::DATA_FILE)).unwrap();
    let lesson = hif8lab_lab::lesson::outliers::judge("fixture", &data).unwrap();
    assert_eq!(lesson.claims.len(), 4);
    let found = lesson.claims[0].evidence["quantizer"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(found == outlier || found == twin, "{found}");
    assert!(lesson.claims[0].holds, "{:?}", lesson.claims[0]);
    assert!(lesson.summary.contains(&found), "{}", lesson.summary);
    // Without the E4M3 twins the lesson says what it needs.
    let mut partial = data.clone();
    partial.runs.retain(|r| !r.run.ends_with("-e4m3"));
    let e = hif8lab_lab::lesson::outliers::judge("x/runs.jsonl.gz", &partial)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("x/runs.jsonl.gz") && e.contains("most_recent-low-e4m3"),
        "{e}"
    );

    // The report says where the outliers are, and follows from its data byte for byte.
    let md = std::fs::read_to_string(out.join("results.md")).unwrap();
    assert!(md.contains("a real pretrained model"), "{md}");
    assert!(md.contains("## Quantizers: where the outliers are"));
    assert!(md.contains(&format!("| {} |", top_of(&row("most_recent-low").seeds[0]))));
    assert_eq!(grid::recompute(&out).unwrap().markdown(), md);

    // A re-run reuses the base's scores and every finished run.
    let again = grid::run_grid(&make, &config, &out, 1, 1, &[], &mut ()).unwrap();
    assert_eq!(again.markdown(), md);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn real_base_configs_are_checked_by_field() {
    let root = std::env::temp_dir().join(format!("hif8lab-real-cfg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let model = root.join("model");
    outlier_model(&model);
    let parse = |t: &str| GridConfig::parse(t, "g.toml").map_err(|e| e.to_string());
    // [base] and [pretrain] exclude each other; one is needed.
    let both = grid_text(&model, "\n[pretrain]\nsteps = 5\nbatch = 2\nlr = 1e-3\n");
    assert!(parse(&both).unwrap_err().contains("exclude each other"));
    let neither =
        grid_text(&model, "").replace(&format!("[base]\nmodel = \"{}\"\n", model.display()), "");
    assert!(parse(&neither).unwrap_err().contains("[pretrain]"));
    // A shape that is not the model's is refused naming each field.
    let wrong = parse(&grid_text(&model, "").replace("d_ff = 96", "d_ff = 128")).unwrap();
    let make = || Ok::<_, TrainError>(CpuBackend::new());
    let err = grid::run_grid(&make, &wrong, &root.join("g"), 1, 1, &[], &mut ())
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("model.d_ff = 128, but the model has 96"),
        "{err}"
    );
    // A missing model names base.model; a real base is not pretrained twice.
    let missing = parse(&grid_text(&root.join("nowhere"), "")).unwrap();
    let err = grid::run_grid(&make, &missing, &root.join("g"), 1, 1, &[], &mut ())
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("base.model") && err.contains("nowhere"),
        "{err}"
    );
    let ok = parse(&grid_text(&model, "")).unwrap();
    let err = grid::run_grid(&make, &ok, &root.join("g"), 1, 2, &[], &mut ())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("--base-seeds"), "{err}");
    // The shipped presets parse.
    for p in ["real-smollm2", "real-smollm2-quick", "real-smollm2-perturb"] {
        let g = GridConfig::preset(p).unwrap();
        assert_eq!(g.base.as_ref().unwrap().model, "smollm2-135m");
        assert!(g.pretrain.is_none());
    }
    // The perturb study's preset: the dose study's continued training, the sham on, the
    // damage given on the command line (none by default).
    let g = GridConfig::preset("real-smollm2-perturb").unwrap();
    let dose = GridConfig::preset("real-smollm2-dose").unwrap();
    assert!(g.cont.sham && g.base.as_ref().unwrap().perturb.is_none());
    assert_eq!(
        (g.cont.steps, g.cont.eval_every),
        (dose.cont.steps, dose.cont.eval_every)
    );
    assert!(g.runs().iter().any(|r| r.name == "max_window65-low"));
    // Its max_window-low is the dose study's run exactly (U and P differ in the base alone).
    let mw = |c: &GridConfig| {
        let r = c
            .runs()
            .into_iter()
            .find(|r| r.name == "max_window-low")
            .unwrap();
        c.run_config(&r)
    };
    assert_eq!(mw(&g), mw(&dose));
    let _ = std::fs::remove_dir_all(&root);
}

/// The dose study's machinery end to end on the fixture: arms probed at several doses (the
/// earlier states scored from their checkpoints, which are then not written), the positive
/// control in its first order only, the study's section in the report, and `--recompute`
/// giving the report back.
#[test]
fn a_dose_study_probes_every_dose_and_runs_its_control() {
    let root = std::env::temp_dir().join(format!("hif8lab-dose-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let model = root.join("model");
    outlier_model(&model);
    let text = grid_text(&model, "\n[control]\nsteps = 8\norders = 1\nmargin = -12\n")
        .replace("eval_every = 24", "eval_every = 8")
        .replace("e4m3 = true", "e4m3 = false");
    let config = GridConfig::parse(&text, "fixture dose").unwrap();
    let out = root.join("grid");
    let make = || Ok::<_, TrainError>(CpuBackend::new());
    let only = ["most_recent-low", "max_window-low", "control-low"].map(String::from);
    let results = grid::run_grid(&make, &config, &out, 2, 1, &only, &mut ()).unwrap();
    // The arms: probes after 8, 16 and 24 steps; no intermediate checkpoint left behind.
    let row = |name: &str| results.rows.iter().find(|r| r.name == name).unwrap();
    for s in &row("max_window-low").seeds {
        let steps: Vec<u64> = s
            .earlier_probes
            .iter()
            .chain(&s.probes)
            .map(|p| p.step)
            .collect();
        assert_eq!(steps, vec![8, 16, 24]);
    }
    assert!(
        !out.join("runs/max_window-low/checkpoints/step_8.safetensors")
            .exists()
    );
    // The control is not a cell of the paper's claims, and ran in order 0 only.
    assert!(results.rows.iter().all(|r| r.name != "control-low"));
    assert!(out.join("runs/control-low").is_dir());
    assert!(!out.join("runs/control-low-seed1").exists());
    let dose = results.dose.as_ref().expect("a dose study");
    assert_eq!((dose.orders, dose.doses.clone()), (2, vec![8, 16, 24]));
    assert_eq!(dose.control.len(), 1);
    assert_eq!(dose.claims.len(), 3);
    let md = std::fs::read_to_string(out.join("results.md")).unwrap();
    assert!(md.contains("## The dose study (pre-registered)"), "{md}");
    let again = grid::recompute(&out).unwrap();
    assert_eq!(again.markdown(), results.markdown());
    let _ = std::fs::remove_dir_all(&root);
}

/// Fresh data orders (`grid --first-order`): the runs train at orders K, K+1, … (their
/// `train.seed` = 7 + order, their folders named by order), the data record those orders,
/// the report names them and `--recompute` gives it back; data whose runs do not share the
/// same orders are refused by name.
#[test]
fn fresh_orders_start_where_they_are_told() {
    let root = std::env::temp_dir().join(format!("hif8lab-fresh-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let model = root.join("model");
    outlier_model(&model);
    let text = grid_text(&model, "")
        .replace("steps = 24", "steps = 6")
        .replace("eval_every = 24", "eval_every = 6")
        .replace("e4m3 = true", "e4m3 = false");
    let config = GridConfig::parse(&text, "fixture fresh").unwrap();
    let out = root.join("grid");
    let make = || Ok::<_, TrainError>(CpuBackend::new());
    let only = ["baseline-low", "max_window-low-warmup"].map(String::from);
    let results = grid::run_grid_from(&make, &config, &out, 3, 2, 1, &only, &mut ()).unwrap();
    assert_eq!(results.first_order, 3);
    assert_eq!(results.seeds, 2);
    let first = config
        .runs()
        .into_iter()
        .find(|r| r.name == "baseline-low")
        .unwrap();
    let seed0 = config.run_config(&first).train.seed;
    for (name, k) in [
        ("baseline-low-seed3", 3),
        ("max_window-low-warmup-seed4", 4),
    ] {
        let cfg = std::fs::read_to_string(out.join("runs").join(name).join("config.toml"))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(cfg.contains(&format!("seed = {}\n", seed0 + k)), "{cfg}");
    }
    assert!(!out.join("runs/baseline-low").exists());
    let md = std::fs::read_to_string(out.join("results.md")).unwrap();
    assert!(
        md.contains("Data orders 3–4 (fresh: orders 0–2 were not run here)"),
        "{md}"
    );
    // The placebo names the orders it compares, not orders 0 and 1.
    assert!(
        md.contains("orders 3 and 4 of the first pretraining")
            && md.contains("order 3 (first) vs order 4 (second)")
            && !md.contains("orders 0 and 1"),
        "{md}"
    );
    let again = grid::recompute(&out).unwrap();
    assert_eq!(again.markdown(), results.markdown());

    // One run's first order dropped: its orders no longer start where the others' do.
    let path = out.join(grid::DATA_FILE);
    let mut data = grid::GridData::read(&path).unwrap();
    let k = data
        .runs
        .iter()
        .position(|d| d.run == "baseline-low" && d.order == 3)
        .unwrap();
    data.runs.remove(k);
    let bad = root.join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(bad.join(grid::DATA_FILE), data.to_gzip_jsonl().unwrap()).unwrap();
    let err = grid::recompute(&bad).unwrap_err().to_string();
    assert!(
        err.contains("run baseline-low lacks some data order"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn perturb_then_train_damages_the_base_once_and_the_study_judges_it() {
    use hif8lab_lab::perturb_study::{self, StudyData};
    let root = std::env::temp_dir().join(format!("hif8lab-perturb-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let model = root.join("model");
    outlier_model(&model);
    let text = grid_text(&model, "")
        .replace("steps = 24", "steps = 12")
        .replace("eval_every = 24", "eval_every = 6")
        .replace("e4m3 = true", "e4m3 = false\nsham = true");
    let line = format!("model = \"{}\"\n", model.display());
    let damaged_text = text.replace(&line, &format!("{line}perturb = \"hif8:1024\"\n"));
    let undamaged = GridConfig::parse(&text, "fixture undamaged").unwrap();
    let damaged = GridConfig::parse(&damaged_text, "fixture damaged").unwrap();
    assert!(
        GridConfig::parse(
            &text.replace(&line, &format!("{line}perturb = \"hif8:0.5\"\n")),
            "bad"
        )
        .unwrap_err()
        .to_string()
        .contains("base.perturb")
    );
    let make = || Ok::<_, TrainError>(CpuBackend::new());
    let runs = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
    let go = |config: &GridConfig, dir: &str, seeds: usize, names: &[&str]| {
        grid::run_grid_from(
            &make,
            config,
            &root.join(dir),
            0,
            seeds,
            1,
            &runs(names),
            &mut (),
        )
    };
    let dose = go(
        &undamaged,
        "dose",
        2,
        &["most_recent-low", "max_window-low"],
    )
    .unwrap();
    let p = go(&damaged, "damaged", 2, &["max_window-low"]).unwrap();
    // The damage is applied once, before the base is probed: its scores differ, and the
    // report names it.
    let name = p.base_model.clone().unwrap();
    assert!(
        name.contains("damaged before any run by hif8:1024 on 12 tensors"),
        "{name}"
    );
    assert_ne!(
        dose.bases[0].heldout_loss, p.bases[0].heldout_loss,
        "the damaged base scores as the undamaged one"
    );
    assert!(p.markdown().contains("damaged before any run by hif8:1024"));
    // A folder of the damaged base is not reused for the undamaged one.
    let err = go(&undamaged, "damaged", 2, &["max_window-low"])
        .unwrap_err()
        .to_string();
    assert!(err.contains("holds runs from the base"), "{err}");
    let s = go(&undamaged, "sham", 2, &["max_window65-low"]).unwrap();
    assert_eq!(s.rows[0].summary.estimator, "max_window(65)");
    go(&undamaged, "rerun", 1, &["max_window-low"]).unwrap();

    let read = |dir: &str| grid::GridData::read(&root.join(dir).join(grid::DATA_FILE)).unwrap();
    let data = StudyData {
        damaged: read("damaged"),
        sham: read("sham"),
        rerun: Some(read("rerun")),
    };
    let path = root.join("study.jsonl.gz");
    std::fs::write(&path, data.to_gzip_jsonl().unwrap()).unwrap();
    let back = StudyData::read(&path).unwrap();
    assert_eq!(back, data);
    let study = perturb_study::analyse(&read("dose"), &back).unwrap();
    assert_eq!(study.orders, vec![0, 1]);
    assert_eq!(study.doses, vec![6, 12]);
    // The rerun by the same build reproduces U's order 0 exactly.
    assert_eq!(study.rerun, Some((0.0, 12)));
    assert!(study.control.iter().flatten().all(|c| c.is_finite()));
    assert!(
        study.control[1].iter().all(|c| *c != 0.0),
        "training from the damaged base ended where the undamaged one did"
    );
    // Claim 3 is judged only when the control holds, the sham passes and the arms differ.
    assert_eq!(
        study.claims.len(),
        1 + usize::from(study.saturation_not_judged.is_none())
    );
    let md = study.markdown();
    for phrase in [
        "Sham placebo",
        "every loss identical",
        "U − P",
        "aturation costs knowledge at 12 steps",
    ] {
        assert!(md.contains(phrase), "{phrase}: {md}");
    }
    // A data file with an unknown arm, or without the sham, is refused by name.
    let text = String::from_utf8({
        use std::io::Read;
        let mut s = Vec::new();
        flate2::read::GzDecoder::new(&std::fs::read(&path).unwrap()[..])
            .read_to_end(&mut s)
            .unwrap();
        s
    })
    .unwrap();
    for (bad, says) in [
        (
            text.replacen("\"arm\":\"sham\"", "\"arm\":\"shame\"", 1),
            "field 'arm' is \"shame\"",
        ),
        (
            text.lines()
                .filter(|l| !l.contains("\"arm\":\"sham\""))
                .collect::<Vec<_>>()
                .join("\n"),
            "no line of the arm \"sham\"",
        ),
    ] {
        let p = root.join("bad.jsonl.gz");
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut z, bad.as_bytes()).unwrap();
        std::fs::write(&p, z.finish().unwrap()).unwrap();
        let e = StudyData::read(&p).unwrap_err().to_string();
        assert!(e.contains(says) && e.contains("bad.jsonl.gz"), "{e}");
    }
    let _ = std::fs::remove_dir_all(&root);
}
