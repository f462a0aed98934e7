use super::*;

#[test]
fn generators_are_deterministic_and_distinct() {
    let kb = KnowledgeBase::generate(30, 1);
    assert_eq!(kb, KnowledgeBase::generate(30, 1));
    let names: std::collections::BTreeSet<_> = kb.entities.iter().map(|e| &e.name).collect();
    assert_eq!(names.len(), 30);
    let a = pretrain_corpus(&kb, 2, 20_000);
    assert_eq!(a, pretrain_corpus(&kb, 2, 20_000));
    let w = web_corpus(3, 20_000);
    assert_eq!(w, web_corpus(3, 20_000));
    assert!(
        w.bytes().any(|b| b >= 0x80),
        "bursts of rare (non-ASCII) bytes"
    );
    assert!(!a.bytes().any(|b| b >= 0x80));
}
