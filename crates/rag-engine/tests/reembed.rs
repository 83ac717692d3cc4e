//! `reembed` reads a knowledge base a page at a time: over several pages of
//! document chunks and FAQ entries (two documents with many chunks, one of
//! them spanning pages, and more FAQ entries than a page), every searchable
//! passage gets a current vector, the progress it reports ends at the
//! knowledge base's size, a second run finds nothing to do, and an edit is
//! the only passage a third run embeds.

mod support;

use rag_core::*;
use rag_engine::{Components, Engine, EngineConfig};
use std::sync::Arc;

#[tokio::test]
async fn every_page_of_chunks_and_faq_entries_gets_a_current_vector() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        rag_store::EmbeddedStore::open(dir.path(), rag_store::OpenMode::ReadWrite).unwrap(),
    );
    let tenant = TenantId::default_tenant();
    let kb = store
        .create_kb(&tenant, "kb", KbSettings::default())
        .await
        .unwrap()
        .id;
    // Written without an embedder: no passage has a vector yet.
    let mut ops = Vec::new();
    for (d, chunks) in [(0i64, 400u32), (1, 150)] {
        let id = DocId::generate();
        ops.push(WriteOp::PutDocument {
            document: Document {
                id,
                kb,
                title: format!("manual {d}"),
                source: format!("manual-{d}.md"),
                content_hash: format!("h{d}"),
                tags: vec![],
                created_at: d,
                updated_at: d,
                text: String::new(),
                owner: None,
            },
            chunks: (0..chunks)
                .map(|o| Chunk {
                    id: ChunkId::generate(),
                    doc: id,
                    ordinal: o,
                    heading_path: vec![],
                    text: format!("section {o} of manual {d}"),
                    start: 0,
                    end: 0,
                })
                .collect(),
        });
    }
    let faq = |i: i64, status: FaqStatus| FaqEntry {
        id: FaqId::generate(),
        kb,
        question: format!("question {i}?"),
        answer: format!("answer {i}."),
        status,
        edited: false,
        source_url: None,
        tags: vec![],
        created_at: i,
        updated_at: i,
        valid_from: None,
        valid_until: None,
        source_doc: None,
    };
    let mut faqs: Vec<FaqEntry> = (0..300).map(|i| faq(i, FaqStatus::Approved)).collect();
    faqs.push(faq(300, FaqStatus::Disabled));
    ops.extend(faqs.iter().cloned().map(WriteOp::PutFaq));
    store.apply(&tenant, kb, ops).await.unwrap();

    let mut components = Components::lexical(store.clone());
    components.embedder = Some(Arc::new(support::TwoForms));
    let engine = Engine::new(components, EngineConfig::default());
    let mut heard = Vec::new();
    let report = engine
        .reembed(&tenant, "kb", |seen, total| heard.push((seen, total)))
        .await
        .unwrap();
    let total = 400 + 150 + 301;
    let searchable = total - 1;
    assert_eq!(report.needed, searchable, "{report:?}");
    assert_eq!(heard.first(), Some(&(0, total)));
    assert_eq!(heard.last(), Some(&(total, total)));
    assert!(heard.len() > 4, "one report per page: {heard:?}");
    assert!(heard.windows(2).all(|w| w[0].0 <= w[1].0));
    let snapshot = store.snapshot(&tenant, kb).await.unwrap();
    let vectors: std::collections::HashMap<PassageId, &str> = snapshot
        .vectors
        .iter()
        .map(|v| (v.id, v.text_hash.as_str()))
        .collect();
    for p in snapshot
        .passages
        .iter()
        .filter(|p| p.kind() != PassageKind::Fact)
    {
        let want = p
            .searchable
            .then(|| rag_engine::text_hash(&p.embedding_text()));
        assert_eq!(
            vectors.get(&p.id).map(|h| h.to_string()),
            want,
            "{:?}",
            p.id
        );
    }

    let again = engine.reembed(&tenant, "kb", |_, _| {}).await.unwrap();
    assert_eq!(again.needed, 0);

    let mut edited = faqs[123].clone();
    edited.answer = "a new answer.".into();
    store
        .apply(&tenant, kb, vec![WriteOp::PutFaq(edited)])
        .await
        .unwrap();
    let third = engine.reembed(&tenant, "kb", |_, _| {}).await.unwrap();
    assert_eq!(third.needed, 1);
}
