//! Reads run on their own connections: a write transaction in progress
//! neither blocks them nor shows them its uncommitted rows, and the number
//! of read connections stays bounded however many reads run at once.

use rag_core::*;
use rag_store::{EmbeddedStore, OpenMode};
use std::time::Duration;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
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
        source_doc: None,
    }
}

/// Fails instead of hanging if a read waits for the writer: the writer is
/// held by this very thread, so a read that needs it could never finish.
fn soon<T>(rt: &tokio::runtime::Runtime, f: impl std::future::Future<Output = T>) -> T {
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(60), f)
            .await
            .expect("the read waited for the open write transaction")
    })
}

#[test]
fn reads_neither_wait_for_nor_see_an_open_write() {
    let rt = rt();
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path(), OpenMode::ReadWrite).unwrap();
    let tenant = TenantId("t".into());
    let kb = rt
        .block_on(store.create_kb(&tenant, "kb", KbSettings::default()))
        .unwrap();
    rt.block_on(store.apply(&tenant, kb.id, vec![WriteOp::PutFaq(faq(kb.id, "first"))]))
        .unwrap();
    let seq = rt.block_on(store.kb_seq(&tenant, kb.id)).unwrap();

    store.with_writer_blocking(|conn| {
        let tx = conn.transaction().unwrap();
        tx.execute(
            "UPDATE kbs SET name = 'renamed', seq = seq + 100 WHERE id = ?1",
            [kb.id.to_string()],
        )
        .unwrap();
        tx.execute("DELETE FROM faqs WHERE kb_id = ?1", [kb.id.to_string()])
            .unwrap();
        // The write is open and holds the writing connection: reads still
        // answer, from the last commit.
        assert_eq!(soon(&rt, store.kb_seq(&tenant, kb.id)).unwrap(), seq);
        assert!(soon(&rt, store.kb_by_name(&tenant, "kb"))
            .unwrap()
            .is_some());
        assert!(soon(&rt, store.kb_by_name(&tenant, "renamed"))
            .unwrap()
            .is_none());
        let snap = soon(&rt, store.snapshot(&tenant, kb.id)).unwrap();
        assert_eq!(snap.seq, seq);
        assert_eq!(snap.passages.len(), 1);
        assert_eq!(soon(&rt, store.faqs(&tenant, kb.id)).unwrap().len(), 1);
        tx.commit().unwrap();
    });

    // Committed: the next read sees it.
    assert_eq!(
        rt.block_on(store.kb_seq(&tenant, kb.id)).unwrap(),
        seq + 100
    );
    assert!(rt
        .block_on(store.kb_by_name(&tenant, "renamed"))
        .unwrap()
        .is_some());
    assert!(rt.block_on(store.faqs(&tenant, kb.id)).unwrap().is_empty());
}

#[test]
fn many_reads_at_once_share_a_few_connections() {
    let rt = rt();
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path(), OpenMode::ReadWrite).unwrap();
    let tenant = TenantId("t".into());
    let kb = rt
        .block_on(store.create_kb(&tenant, "kb", KbSettings::default()))
        .unwrap();
    let faqs: Vec<WriteOp> = (0..200)
        .map(|i| WriteOp::PutFaq(faq(kb.id, &format!("question {i}"))))
        .collect();
    rt.block_on(store.apply(&tenant, kb.id, faqs)).unwrap();
    let counts = rt.block_on(async {
        let reads: Vec<_> = (0..64)
            .map(|_| {
                let (store, tenant) = (store.clone(), tenant.clone());
                tokio::spawn(async move { store.faqs(&tenant, kb.id).await.unwrap().len() })
            })
            .collect();
        let mut counts = Vec::new();
        for read in reads {
            counts.push(read.await.unwrap());
        }
        counts
    });
    assert!(counts.iter().all(|&n| n == 200), "{counts:?}");
    let opened = store.read_connections();
    assert!((1..=4).contains(&opened), "{opened} read connections");
}

#[test]
fn a_read_only_open_reads_through_its_own_connections() {
    let rt = rt();
    let dir = tempfile::tempdir().unwrap();
    let tenant = TenantId("t".into());
    let kb = {
        let store = EmbeddedStore::open(dir.path(), OpenMode::ReadWrite).unwrap();
        let kb = rt
            .block_on(store.create_kb(&tenant, "kb", KbSettings::default()))
            .unwrap();
        rt.block_on(store.apply(&tenant, kb.id, vec![WriteOp::PutFaq(faq(kb.id, "q"))]))
            .unwrap();
        kb
    };
    let store = EmbeddedStore::open(dir.path(), OpenMode::ReadOnly).unwrap();
    assert_eq!(rt.block_on(store.faqs(&tenant, kb.id)).unwrap().len(), 1);
    assert_eq!(store.read_connections(), 1);
    // Writes are refused, not half-done.
    assert!(rt
        .block_on(store.apply(&tenant, kb.id, vec![WriteOp::PutFaq(faq(kb.id, "q2"))]))
        .is_err());
}
