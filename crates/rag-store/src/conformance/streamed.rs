//! The conformance script's check of a streamed snapshot (the same
//! passages as the whole snapshot, in parts, ending with `End`) and of the
//! lexicon snapshot (the whole one's facts, synonyms, dictionary and space,
//! no text and no vector); nothing for another tenant.

use super::*;

pub(super) async fn check<S: Store>(
    store: &S,
    t: &mut Transcript,
    a: &TenantId,
    b: &TenantId,
    kb: &KnowledgeBase,
) {
    let (whole, vectors) = store.index_snapshot(a, kb.id).await.unwrap();
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let received = std::thread::spawn(move || rx.iter().collect::<Vec<SnapshotPart>>());
    let sent = store.index_snapshot_streamed(a, kb.id, 2, tx).await;
    let parts = received.join().unwrap();
    assert_eq!(sent.unwrap(), vectors);
    let Some(SnapshotPart::Head(head)) = parts.first() else {
        panic!("the head first: {parts:?}");
    };
    assert_eq!(head.seq, whole.seq);
    assert!(matches!(parts.last(), Some(SnapshotPart::End)));
    let mut got: Vec<Passage> = head.passages.clone();
    for part in &parts[1..parts.len() - 1] {
        let SnapshotPart::Passages(p) = part else {
            panic!("{part:?}");
        };
        assert!(!p.is_empty() && p.len() <= 2);
        assert!(p.iter().all(|p| p.kind() != PassageKind::Fact));
        got.extend(p.iter().cloned());
    }
    let mut want = whole.passages.clone();
    want.sort_by_key(|p| p.id);
    got.sort_by_key(|p| p.id);
    assert_eq!(got, want, "the streamed passages are the snapshot's");
    t.push("streamed snapshot: parts", parts.len());
    // Another tenant gets an error and no part.
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let received = std::thread::spawn(move || rx.iter().count());
    let refused = store.index_snapshot_streamed(b, kb.id, 2, tx).await;
    assert!(refused.is_err());
    assert_eq!(received.join().unwrap(), 0);

    let whole = store.snapshot(a, kb.id).await.unwrap();
    let lexicon = store.lexicon_snapshot(a, kb.id).await.unwrap();
    let facts: Vec<&Passage> = whole
        .passages
        .iter()
        .filter(|p| p.kind() == PassageKind::Fact)
        .collect();
    assert!(!facts.is_empty(), "the script has facts by now");
    assert_eq!(lexicon.passages.iter().collect::<Vec<_>>(), facts);
    assert_eq!(
        (
            &lexicon.synonyms,
            &lexicon.user_words,
            &lexicon.space,
            lexicon.seq
        ),
        (&whole.synonyms, &whole.user_words, &whole.space, whole.seq)
    );
    assert!(lexicon.vectors.is_empty());
    t.push(
        "lexicon snapshot: facts, synonym groups, words",
        (
            facts.len(),
            lexicon.synonyms.len(),
            lexicon.user_words.len(),
        ),
    );
    assert!(store.lexicon_snapshot(b, kb.id).await.is_err());
}
