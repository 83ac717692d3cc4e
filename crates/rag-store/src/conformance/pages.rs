//! The conformance script's checks of what is read a page at a time or by
//! id: for any page size, the passage pages hold the snapshot's text
//! passages in its order, each with its vector's text hash, and end; the FAQ
//! pages hold the entries of the asked status and text in (`created_at`, id)
//! order with their count; FAQ entries and vectors read by id are those of
//! the snapshot; nothing for another tenant.

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

    faqs(store, t, a, b, kb).await;
    vectors(store, t, a, b, kb).await;
}

async fn faqs<S: Store>(
    store: &S,
    t: &mut Transcript,
    a: &TenantId,
    b: &TenantId,
    kb: &KnowledgeBase,
) {
    let all = store.faqs(a, kb.id).await.unwrap();
    assert!(all.len() >= 2, "the script has FAQ entries by now");
    let statuses = [
        None,
        Some(FaqStatus::Approved),
        Some(FaqStatus::Pending),
        Some(FaqStatus::Disabled),
    ];
    // Every status, a text of one entry's question (in another case when
    // it has letters), a text in no entry.
    let word: String = all[0].question.chars().take(3).collect();
    let texts = [
        None,
        Some(word.to_ascii_uppercase()),
        Some("\u{1F99C}".to_string()),
    ];
    let mut seen = Vec::new();
    for status in statuses {
        for contains in &texts {
            for limit in [1, 2, all.len() + 1] {
                let query = FaqQuery {
                    after: None,
                    limit,
                    status,
                    contains: contains.clone(),
                    with_total: limit != 2,
                };
                let want: Vec<&FaqEntry> = all.iter().filter(|f| query.admits(f)).collect();
                let (mut got, mut after, mut pages) = (Vec::new(), None, 0);
                loop {
                    let page = store
                        .faqs_page(
                            a,
                            kb.id,
                            &FaqQuery {
                                after,
                                ..query.clone()
                            },
                        )
                        .await
                        .unwrap();
                    assert!(page.faqs.len() <= limit);
                    let total = all.iter().filter(|f| status.is_none_or(|s| f.status == s));
                    let total = query.with_total.then(|| total.count());
                    assert_eq!(page.total, total, "{status:?}: the count");
                    pages += 1;
                    got.extend(page.faqs);
                    match page.next {
                        Some(next) => after = Some(next),
                        None => break,
                    }
                    assert!(pages <= all.len() + 1, "the pages end");
                }
                assert_eq!(
                    got.iter().collect::<Vec<_>>(),
                    want,
                    "{status:?} {contains:?}, pages of {limit}"
                );
                if limit == 1 {
                    seen.push((status, contains.is_some(), got.len()));
                }
            }
        }
    }
    t.push("FAQ pages: (status, filtered by a text, entries)", seen);
    for f in &all {
        assert_eq!(store.faq(a, kb.id, f.id).await.unwrap().as_ref(), Some(f));
    }
    assert_eq!(store.faq(a, kb.id, FaqId::generate()).await.unwrap(), None);
    let first = FaqQuery {
        limit: 10,
        ..FaqQuery::default()
    };
    assert!(store.faqs_page(b, kb.id, &first).await.is_err());
    assert!(store.faq(b, kb.id, all[0].id).await.is_err());
}

async fn vectors<S: Store>(
    store: &S,
    t: &mut Transcript,
    a: &TenantId,
    b: &TenantId,
    kb: &KnowledgeBase,
) {
    let whole = store.snapshot(a, kb.id).await.unwrap();
    let mut ids: Vec<PassageId> = whole.passages.iter().map(|p| p.id).collect();
    ids.push(PassageId::Faq(FaqId::generate()));
    let mut got = store.vectors(a, kb.id, &ids).await.unwrap();
    got.sort_by_key(|v| v.id.to_string());
    let mut want = whole.vectors.clone();
    want.sort_by_key(|v| v.id.to_string());
    assert_eq!(got, want, "the vectors of every passage, read by id");
    t.push("vectors read by id", got.len());
    assert!(store.vectors(a, kb.id, &[]).await.unwrap().is_empty());
    assert!(store.vectors(b, kb.id, &ids).await.is_err());
}
