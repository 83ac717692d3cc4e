//! The conformance script's check of passages read a page at a time: for
//! any page size, the pages hold the snapshot's text passages in its order,
//! each with its vector's text hash, and end; nothing for another tenant.

use super::*;

pub(super) async fn check<S: Store>(
    store: &S,
    t: &mut Transcript,
    a: &TenantId,
    b: &TenantId,
    kb: &KnowledgeBase,
) {
    let whole = store.snapshot(a, kb.id).await.unwrap();
    let want: Vec<&Passage> = whole
        .passages
        .iter()
        .filter(|p| p.kind() != PassageKind::Fact)
        .collect();
    assert!(
        want.iter().any(|p| p.kind() == PassageKind::Chunk)
            && want.iter().any(|p| p.kind() == PassageKind::Faq),
        "the script has chunks and FAQ entries by now"
    );
    let hash_of: BTreeMap<PassageId, &str> = whole
        .vectors
        .iter()
        .map(|v| (v.id, v.text_hash.as_str()))
        .collect();
    assert!(!hash_of.is_empty(), "the script has vectors by now");
    let mut pages_per_size = Vec::new();
    for limit in [1, 2, 3, want.len(), want.len() + 5] {
        let (mut got, mut pages, mut after) = (Vec::new(), 0, None);
        loop {
            let page = store
                .passages_page(a, kb.id, after.as_ref(), limit)
                .await
                .unwrap();
            assert!(page.passages.len() <= limit);
            pages += 1;
            got.extend(page.passages);
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
            assert!(pages <= want.len() + 1, "the pages end");
        }
        let passages: Vec<&Passage> = got.iter().map(|(p, _)| p).collect();
        assert_eq!(
            passages, want,
            "pages of {limit}: the snapshot's passages in order"
        );
        for (p, hash) in &got {
            assert_eq!(hash.as_deref(), hash_of.get(&p.id).copied(), "{:?}", p.id);
        }
        pages_per_size.push((limit, pages));
    }
    t.push(
        "passages a page at a time: (page size, pages)",
        pages_per_size,
    );
    assert!(store.passages_page(b, kb.id, None, 10).await.is_err());
}
