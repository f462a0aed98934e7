use super::*;

/// The benchmark variant changes quantization, its warm-up, the step count, evaluations
/// and checkpoints, and nothing else.
#[test]
fn bench_variant_changes_only_what_it_says() {
    let base = RunConfig::parse(
        "small",
        RunConfig::preset_text("small").expect("small"),
        &["qat.enabled=false".into(), "qat.warmup_steps=5".into()],
    )
    .expect("small");
    for qat in [false, true] {
        let b = base.bench_variant(qat, 12);
        assert_eq!(b.qat.enabled, qat);
        assert_eq!(
            (
                b.qat.warmup_steps,
                b.train.steps,
                b.train.eval_every,
                b.train.checkpoint_every
            ),
            (0, 12, 0, 0)
        );
        let mut back = b.clone();
        back.qat.enabled = base.qat.enabled;
        back.qat.warmup_steps = base.qat.warmup_steps;
        back.train.steps = base.train.steps;
        back.train.eval_every = base.train.eval_every;
        back.train.checkpoint_every = base.train.checkpoint_every;
        assert_eq!(back, base);
    }
}

/// Blocks end at every step count up to `steps` in order, the last at `steps`, and the
/// variants alternate which runs first.
#[test]
fn bench_blocks_cover_the_steps_in_alternating_order() {
    for steps in [1, 2, 7, 10, 13, 400] {
        let blocks: Vec<_> = RunConfig::bench_blocks(steps).collect();
        assert_eq!(blocks.len() as u64, steps.min(10), "{steps}");
        assert_eq!(blocks.last().map(|b| b.0), Some(steps), "{steps}");
        for (i, (until, order)) in blocks.iter().enumerate() {
            assert!(
                *until >= 1 && (i == 0 || *until > blocks[i - 1].0),
                "{steps}"
            );
            assert_eq!(*order, if i % 2 == 0 { [0, 1] } else { [1, 0] });
        }
    }
    assert_eq!(
        RunConfig::bench_blocks(0).collect::<Vec<_>>(),
        [(0, [0, 1])]
    );
}

#[test]
fn presets_parse_and_overrides_apply() {
    for (name, text) in PRESETS {
        RunConfig::parse(name, text, &[]).expect(name);
    }
    let c = RunConfig::parse(
        "smoke",
        PRESETS[0].1,
        &[
            "train.lr=1e-5".into(),
            "qat.scaling.estimator=most_recent".into(),
        ],
    )
    .expect("overrides");
    assert_eq!(c.train.lr, 1e-5);
    assert_eq!(c.qat.scaling.estimator.to_string(), "most_recent");
}

#[test]
fn the_corpus_is_a_type_written_as_before() {
    use crate::config::Corpus;
    for (text, want) in [
        ("web", Corpus::Web),
        ("kb", Corpus::Kb),
        ("synthetic", Corpus::Synthetic),
        (
            "texts/my corpus.txt",
            Corpus::File("texts/my corpus.txt".into()),
        ),
    ] {
        let c = RunConfig::parse("smoke", PRESETS[0].1, &[format!("data.corpus='{text}'")])
            .expect(text);
        assert_eq!(c.data.corpus, want);
        // Written back as the same text (run folders' config.toml keep their spelling).
        let toml = c.to_toml();
        assert!(toml.contains(&format!("corpus = \"{text}\"")), "{toml}");
    }
    let e = RunConfig::parse("smoke", PRESETS[0].1, &["data.corpus=''".into()]).unwrap_err();
    assert!(e.message.contains("data.corpus is empty"), "{}", e.message);
}

#[test]
fn errors_name_the_key() {
    let e = RunConfig::parse("x.toml", PRESETS[0].1, &["model.layrs=3".into()]).unwrap_err();
    assert!(e.to_string().contains("layrs"), "{e}");
    let e = RunConfig::parse("x.toml", PRESETS[0].1, &["model.heads=5".into()]).unwrap_err();
    assert!(
        e.to_string()
            .contains("model.d_model 64 must be a multiple of model.heads 5"),
        "{e}"
    );
    let e = RunConfig::parse("x.toml", PRESETS[0].1, &["train.batch=\"many\"".into()]).unwrap_err();
    assert!(
        e.to_string().starts_with("x.toml:") && e.to_string().contains("batch"),
        "{e}"
    );
    let e = RunConfig::parse("x.toml", PRESETS[0].1, &["qat.blocks=[9]".into()]).unwrap_err();
    assert!(e.to_string().contains("qat.blocks: block 9"), "{e}");
    assert!(RunConfig::preset_text("huge").is_err());
}

#[test]
fn default_blocks_skip_first_and_last_like_the_paper() {
    let q = QatConfig::default();
    assert_eq!(q.blocks_for(26), (3..24).collect::<Vec<u32>>());
    assert_eq!(q.blocks_for(4), vec![1, 2]);
    assert_eq!(q.blocks_for(8), vec![1, 2, 3, 4, 5, 6]);
}

#[test]
fn a_setting_is_blamed_on_the_set_of_any_key_it_involves_never_by_prefix() {
    let smoke = RunConfig::preset_text("smoke").unwrap();
    // The message is about model.d_model, but model.heads is what the user set.
    let e = RunConfig::parse("smoke", smoke, &["model.heads=5".into()]).unwrap_err();
    assert_eq!(e.set.as_deref(), Some("model.heads=5"), "{e}");
    assert!(e.message.contains("model.heads 5"), "{e}");
    // A key that merely starts like another is not it (train.eps is not train.eps_x), and
    // a set of an unrelated key is not blamed.
    let e = RunConfig::parse(
        "smoke",
        smoke,
        &["train.lr=2".into(), "train.seed=3".into()],
    )
    .unwrap_err();
    assert_eq!(e.set.as_deref(), Some("train.lr=2"), "{e}");
    let e = RunConfig::parse(
        "smoke",
        smoke,
        &["train.seed=3".into(), "model.heads=5".into()],
    )
    .unwrap_err();
    assert_eq!(e.set.as_deref(), Some("model.heads=5"), "{e}");
    let bad = RunConfig::parse("smoke", smoke, &[]).unwrap();
    let mut m = bad.clone();
    m.train.eps = 0.0;
    let e = m.validate().unwrap_err();
    assert_eq!(e.keys, vec!["train.eps"]);
    assert!(e.involves("train") && e.involves("train.eps") && !e.involves("train.ep"));
}

#[test]
fn every_preset_says_what_it_is_in_one_line() {
    for (name, _) in PRESETS {
        let about = RunConfig::preset_description(name).unwrap_or_default();
        assert!(
            about.len() > 20 && !about.contains('\n'),
            "{name}: {about:?}"
        );
    }
    assert_eq!(
        RunConfig::preset_description("smoke"),
        Some("the smallest run that exercises everything (tests, CI, the app's first look).")
    );
    assert_eq!(RunConfig::preset_description("none"), None);
}
