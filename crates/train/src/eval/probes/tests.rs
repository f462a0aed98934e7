use super::*;
use crate::corpus::{KnowledgeBase, pretrain_corpus};

#[test]
fn probes_are_deterministic_and_stated_by_the_corpus() {
    let kb = KnowledgeBase::generate(30, 1);
    let p = ProbeSet::generate(&kb, 12, 4);
    assert_eq!(p, ProbeSet::generate(&kb, 12, 4));
    assert_eq!(p.knowledge.len(), 30 * KNOWLEDGE_PER_ENTITY);
    assert_eq!(p.completion.len(), 12);
    assert!(
        p.knowledge
            .iter()
            .chain(&p.completion)
            .all(|i| i.choices.len() == 4 && i.answer < 4)
    );
    // Every knowledge question, answered rightly, is a sentence the pretraining corpus
    // states (item i asks about entity i / 6); every choice set has no duplicate.
    let big = pretrain_corpus(&kb, 2, 400_000);
    for (i, it) in p.knowledge.iter().enumerate() {
        let e = &kb.entities[i / KNOWLEDGE_PER_ENTITY];
        assert!(it.context.contains(&e.name), "{it:?}");
        let sentence = format!("{}{}", it.context, it.choices[it.answer]);
        assert!(big.contains(&sentence), "not in the corpus: {sentence}");
        let distinct: std::collections::BTreeSet<_> = it.choices.iter().collect();
        assert_eq!(distinct.len(), 4, "{it:?}");
    }
    // Every completion item is distinct and its right answer continues a corpus line.
    let all = ProbeSet::generate(&kb, COMPLETION_ITEMS, 4);
    assert_eq!(all.completion.len(), COMPLETION_ITEMS);
    let contexts: std::collections::BTreeSet<_> =
        all.completion.iter().map(|i| &i.context).collect();
    assert_eq!(contexts.len(), COMPLETION_ITEMS);
    for it in &all.completion {
        let sentence = format!("{}{}", it.context, it.choices[it.answer]);
        assert!(big.contains(&sentence), "not in the corpus: {sentence}");
    }
}

#[test]
fn probe_scores_carry_marks_and_intervals() {
    use crate::eval::resample::unpack_marks;
    // 2 entities' knowledge items (12) and 4 completion items, every choice one token;
    // losses make the answer the most likely choice on even items only.
    let kb = KnowledgeBase::generate(2, 1);
    let p = ProbeSet::generate(&kb, 4, 2);
    let spans = |items: &[McItem]| -> Vec<(usize, usize)> {
        items
            .iter()
            .flat_map(|it| it.choices.iter().map(|_| (1, 1)))
            .collect()
    };
    let mut rows = Vec::new();
    for items in [&p.knowledge, &p.completion] {
        for (i, it) in items.iter().enumerate() {
            for c in 0..it.choices.len() {
                let right = (c == it.answer) == (i % 2 == 0);
                rows.push(vec![if right { 0.1 } else { 3.0 }]);
            }
        }
    }
    rows.push(vec![1.0, 2.0]);
    rows.push(vec![3.0, 4.0]);
    let s = score_probes(
        5,
        &rows,
        &(p.knowledge.clone(), spans(&p.knowledge)),
        &(p.completion.clone(), spans(&p.completion)),
    );
    assert_eq!((s.knowledge_items, s.completion_items), (12, 4));
    assert_eq!(s.knowledge_acc, 0.5);
    assert_eq!(s.heldout_loss, 2.5);
    let m = s.marks.as_ref().unwrap();
    let marks = unpack_marks(&m.knowledge_acc, 12).unwrap();
    assert_eq!(marks, (0..12).map(|i| i % 2 == 0).collect::<Vec<_>>());
    assert_eq!(m.heldout, vec![1.5, 3.5]);
    for name in crate::eval::PROBE_SCORES {
        let [lo, hi] = s.interval(name);
        let v = s.score(name);
        assert!(lo <= v && v <= hi, "{name}: {lo} {v} {hi}");
    }
    // Round trip through the probes.jsonl line.
    let line = serde_json::to_string(&s).unwrap();
    let back: crate::ProbeScores = serde_json::from_str(&line).unwrap();
    assert_eq!(back, s);
    // A record from before marks: no items, NaN intervals, no panic.
    let old: crate::ProbeScores = serde_json::from_str(
        r#"{"step":1,"knowledge_acc":0.5,"knowledge_acc_norm":0.5,"completion_acc":0.5,"completion_acc_norm":0.5,"heldout_loss":2.0}"#,
    )
    .unwrap();
    use crate::eval::ProbeScore;
    assert!(old.item_values(ProbeScore::KnowledgeAcc).is_none());
    assert!(old.interval(ProbeScore::KnowledgeAcc)[0].is_nan());
    // The margins are never another score's value: NaN where not recorded.
    assert!(old.score(ProbeScore::KnowledgeMargin).is_nan());
    assert!(old.score(ProbeScore::CompletionMargin).is_nan());
    for score in ProbeScore::ALL {
        assert_eq!(ProbeScore::of(score.name()), Some(score));
    }
    assert_eq!(ProbeScore::of("heldout"), None);
}

#[test]
fn oracle_scores_100_and_uniform_scores_chance() {
    let kb = KnowledgeBase::generate(200, 5);
    let p = ProbeSet::generate(&kb, 300, 6);
    for items in [&p.knowledge, &p.completion] {
        let oracle: Vec<Vec<f64>> = items
            .iter()
            .map(|it| {
                (0..it.choices.len())
                    .map(|i| if i == it.answer { 0.0 } else { -10.0 })
                    .collect()
            })
            .collect();
        assert_eq!(mc_accuracy(items, &oracle), (1.0, 1.0));
        // A uniform model: every byte costs ln 256.
        let uniform: Vec<Vec<f64>> = items
            .iter()
            .map(|it| {
                it.choices
                    .iter()
                    .map(|c| -(c.len() as f64) * 256f64.ln())
                    .collect()
            })
            .collect();
        let (_, acc_norm) = mc_accuracy(items, &uniform);
        assert!((acc_norm - 0.25).abs() < 0.08, "chance: {acc_norm}");
    }
}

#[test]
fn ape_and_relative_drop_by_hand() {
    assert!((ape(&[1.1, 2.0], &[1.0, 2.0]) - 5.0).abs() < 1e-9);
    assert!((relative_drop(0.8, 0.6) - 25.0).abs() < 1e-9);
    assert_eq!(relative_drop(0.0, 0.5), 0.0);
}
