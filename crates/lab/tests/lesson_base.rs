//! The lessons' shipped base (`assets/lessons/base.safetensors`) is what pretraining the
//! `grid-lesson` base gives now, bit for bit — weights and probe scores — so a lesson that
//! starts from it (the browser, at once) runs what `hif8lab lesson run` runs; a grid whose
//! pretraining differs never gets it; a damaged base file is refused by field.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on bad fixtures

use hif8lab_engine::cpu::CpuBackend;
use hif8lab_lab::grid::GridConfig;
use hif8lab_lab::lesson::base;

#[test]
fn the_shipped_base_is_what_pretraining_gives() {
    let grid = GridConfig::preset("grid-lesson").unwrap();
    let shipped = base::shipped(&grid).expect(
        "the shipped base does not state grid-lesson's pretraining: run `hif8lab lesson base`",
    );
    let fresh = base::pretrain(CpuBackend::new(), &grid).unwrap();
    // The bits hold on the kind of machine the file was made on (fused multiply-adds or
    // not in the products); elsewhere, the knowledge score within one item.
    let made_on = base::shipped_machine().expect("the shipped base names its machine");
    if made_on != base::machine() {
        let items = fresh.probes.knowledge_items as f64;
        let d = (fresh.probes.knowledge_acc_norm - shipped.probes.knowledge_acc_norm).abs();
        assert!(
            d <= 1.0 / items + 1e-12,
            "{d} apart ({made_on} vs {})",
            base::machine()
        );
        eprintln!(
            "lesson base: made on {made_on}, this is {}: bits not compared",
            base::machine()
        );
        return;
    }
    assert_eq!(
        shipped.fingerprint(),
        fresh.fingerprint(),
        "{}: stale weights — run `hif8lab lesson base` and commit the file",
        base::FILE
    );
    // The whole file: weights, the configuration it states and the probe scores.
    assert!(
        fresh.to_checkpoint(&grid.pretrain_config()).to_bytes() == base::shipped_bytes(),
        "{}: stale probe scores or metadata — run `hif8lab lesson base`",
        base::FILE
    );
    // What the lessons' claims start from: the base knows a good share of its facts.
    assert!(
        shipped.probes.knowledge_acc_norm > 0.3,
        "{:?}",
        shipped.probes
    );
    assert_eq!(shipped.probes.step, grid.pretrain_phase().steps);
}

#[test]
fn another_pretraining_does_not_get_the_shipped_base() {
    let grid = GridConfig::preset("grid-lesson").unwrap();
    let mut other = grid.clone();
    other.pretrain.as_mut().unwrap().steps -= 1;
    assert!(base::shipped(&other).is_none());
    let mut other = grid.clone();
    other.model.d_ff += 8;
    assert!(base::shipped(&other).is_none());
    let mut other = grid;
    other.data.entities += 1;
    assert!(base::shipped(&other).is_none());
}

#[test]
fn a_damaged_base_file_is_refused_by_field() {
    let grid = GridConfig::preset("grid-lesson").unwrap();
    let (good, config) = base::parse("base.safetensors", base::shipped_bytes()).unwrap();
    assert_eq!(config, grid.pretrain_config());
    // Without its probe scores.
    let mut ck = good.to_checkpoint(&config);
    ck.metadata.remove("hif8lab.lesson_base.probes");
    let e = base::parse("x.safetensors", &ck.to_bytes())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("x.safetensors") && e.contains("hif8lab.lesson_base.probes"),
        "{e}"
    );
    // A configuration that is not one.
    let mut ck = good.to_checkpoint(&config);
    ck.metadata
        .insert("hif8lab.lesson_base.config".into(), "{\"model\":1}".into());
    let e = base::parse("y.safetensors", &ck.to_bytes())
        .unwrap_err()
        .to_string();
    assert!(e.contains("hif8lab.lesson_base.config"), "{e}");
    // Cut anywhere: an error, never a panic.
    let bytes = base::shipped_bytes();
    for cut in [0, 7, 8, 100, bytes.len() / 2, bytes.len() - 1] {
        assert!(
            base::parse("z.safetensors", &bytes[..cut]).is_err(),
            "cut at {cut}"
        );
    }
}

/// A grid whose QAT runs would quantize nothing (two blocks: the default placement keeps
/// both in high precision) is refused before anything trains: its claims would otherwise be
/// judged from no data.
#[test]
fn a_grid_that_quantizes_nothing_is_refused_before_training() {
    let mut grid = GridConfig::preset("grid-micro").unwrap();
    grid.model.layers = 2;
    let out = std::env::temp_dir().join(format!("hif8lab-grid-nothing-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let e = hif8lab_lab::grid::run_grid(&|| Ok(CpuBackend::new()), &grid, &out, 1, 1, &[], &mut ())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("most_recent-high") && e.contains("no block is quantized"),
        "{e}"
    );
    assert!(!out.join("base").exists(), "nothing pretrained");
    let _ = std::fs::remove_dir_all(&out);
}
