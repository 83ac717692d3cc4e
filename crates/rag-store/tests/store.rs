//! Behaviour of the embedded store: tenant isolation, atomic writes,
//! persistence across reopen, the directory lock and version records.

use rag_core::*;
use rag_store::{EmbeddedStore, OpenMode, StoreError};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn faq(kb: KbId, q: &str) -> FaqEntry {
    FaqEntry {
        id: FaqId::generate(),
        kb,
        question: q.into(),
        answer: "answer".into(),
        status: FaqStatus::Approved,
        edited: false,
        source_url: None,
        tags: vec![],
        created_at: 1,
        updated_at: 1,
        valid_from: None,
        valid_until: None,
    }
}

#[test]
fn tenants_never_see_each_other() {
    rt().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path(), OpenMode::ReadWrite).unwrap();
        let (a, b) = (TenantId("a".into()), TenantId("b".into()));
        let kb_a = store.create_kb(&a, "shared-name", KbSettings::default()).await.unwrap();
        // The same name is free for another tenant.
        let kb_b = store.create_kb(&b, "shared-name", KbSettings::default()).await.unwrap();
        store.apply(&a, kb_a.id, vec![WriteOp::PutFaq(faq(kb_a.id, "a's secret"))]).await.unwrap();

        assert_eq!(store.list_kbs(&b).await.unwrap(), vec![kb_b.clone()]);
        // Tenant b cannot read, write or delete a's knowledge base by id.
        assert!(store.snapshot(&b, kb_a.id).await.is_err());
        assert!(store.faqs(&b, kb_a.id).await.is_err());
        assert!(store.kb_seq(&b, kb_a.id).await.is_err());
        assert!(store.apply(&b, kb_a.id, vec![WriteOp::PutFaq(faq(kb_a.id, "intruder"))]).await.is_err());
        assert!(store.delete_kb(&b, kb_a.id).await.is_err());
        // And b's own knowledge base holds nothing of a's.
        assert!(store.snapshot(&b, kb_b.id).await.unwrap().passages.is_empty());
        let a_faqs = store.faqs(&a, kb_a.id).await.unwrap();
        assert_eq!(a_faqs.len(), 1);
        assert_eq!(a_faqs[0].question, "a's secret");
    });
}

#[test]
fn failed_write_changes_nothing_and_data_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let tenant = TenantId::default_tenant();
    let kb = rt().block_on(async {
        let store = EmbeddedStore::open(dir.path(), OpenMode::ReadWrite).unwrap();
        let kb = store.create_kb(&tenant, "kb", KbSettings::default()).await.unwrap();
        let seq0 = store.kb_seq(&tenant, kb.id).await.unwrap();
        store.apply(&tenant, kb.id, vec![WriteOp::PutFaq(faq(kb.id, "first"))]).await.unwrap();
        assert_eq!(store.kb_seq(&tenant, kb.id).await.unwrap(), seq0 + 1);
        // A write whose last operation fails (the same chunk id twice) must
        // leave nothing of its earlier operations behind.
        let dup = faq(kb.id, "dup");
        let doc = Document {
            id: DocId::generate(),
            kb: kb.id,
            title: "t".into(),
            source: "s".into(),
            content_hash: "h".into(),
            tags: vec![],
            created_at: 1,
            updated_at: 1,
            text: "text".into(),
        };
        let chunk = Chunk { id: ChunkId::generate(), doc: doc.id, ordinal: 0, heading_path: vec![], text: "text".into(), start: 0, end: 4 };
        let bad = vec![
            WriteOp::PutFaq(dup),
            WriteOp::PutDocument { document: doc.clone(), chunks: vec![chunk.clone(), chunk] },
        ];
        assert!(store.apply(&tenant, kb.id, bad).await.is_err());
        assert_eq!(store.kb_seq(&tenant, kb.id).await.unwrap(), seq0 + 1);
        assert_eq!(store.faqs(&tenant, kb.id).await.unwrap().len(), 1);
        assert!(store.documents(&tenant, kb.id).await.unwrap().is_empty());
        kb
    });
    // Reopen: what was committed is there.
    rt().block_on(async {
        let store = EmbeddedStore::open(dir.path(), OpenMode::ReadOnly).unwrap();
        assert_eq!(store.info().format_version, rag_store::FORMAT_VERSION);
        let faqs = store.faqs(&tenant, kb.id).await.unwrap();
        assert_eq!(faqs.len(), 1);
        assert_eq!(faqs[0].question, "first");
    });
}

#[test]
fn one_writer_per_directory_and_analyzer_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let first = EmbeddedStore::open_with_analyzer(dir.path(), OpenMode::ReadWrite, "zh_en:1").unwrap();
    match EmbeddedStore::open(dir.path(), OpenMode::ReadWrite) {
        Err(StoreError::Locked { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
        other => panic!("expected Locked, got {other:?}"),
    }
    // Readers do not need the lock.
    assert!(EmbeddedStore::open(dir.path(), OpenMode::ReadOnly).is_ok());
    drop(first);
    let again = EmbeddedStore::open_with_analyzer(dir.path(), OpenMode::ReadWrite, "zh_en:2").unwrap();
    assert_eq!(again.info().recorded_analyzer.as_deref(), Some("zh_en:1"));
    assert!(again.info().analyzer_changed);
}

#[test]
fn read_only_open_of_an_empty_directory_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = EmbeddedStore::open(dir.path(), OpenMode::ReadOnly).unwrap_err();
    assert!(err.to_string().contains("no ragscope data"), "{err}");
}
