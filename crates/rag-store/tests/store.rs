//! Behaviour of the embedded store: tenant isolation, atomic writes,
//! persistence across reopen, the directory lock and version records.

use rag_core::*;
use rag_store::{EmbeddedStore, OpenMode, StoreError};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
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

#[test]
fn tenants_never_see_each_other() {
    rt().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path(), OpenMode::ReadWrite).unwrap();
        let (a, b) = (TenantId("a".into()), TenantId("b".into()));
        let kb_a = store
            .create_kb(&a, "shared-name", KbSettings::default())
            .await
            .unwrap();
        // The same name is free for another tenant.
        let kb_b = store
            .create_kb(&b, "shared-name", KbSettings::default())
            .await
            .unwrap();
        store
            .apply(
                &a,
                kb_a.id,
                vec![WriteOp::PutFaq(faq(kb_a.id, "a's secret"))],
            )
            .await
            .unwrap();

        assert_eq!(store.list_kbs(&b).await.unwrap(), vec![kb_b.clone()]);
        // Tenant b cannot read, write or delete a's knowledge base by id.
        assert!(store.snapshot(&b, kb_a.id).await.is_err());
        assert!(store.faqs(&b, kb_a.id).await.is_err());
        assert!(store.kb_seq(&b, kb_a.id).await.is_err());
        assert!(store
            .apply(&b, kb_a.id, vec![WriteOp::PutFaq(faq(kb_a.id, "intruder"))])
            .await
            .is_err());
        assert!(store.delete_kb(&b, kb_a.id).await.is_err());
        // And b's own knowledge base holds nothing of a's.
        assert!(store
            .snapshot(&b, kb_b.id)
            .await
            .unwrap()
            .passages
            .is_empty());
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
        let kb = store
            .create_kb(&tenant, "kb", KbSettings::default())
            .await
            .unwrap();
        let seq0 = store.kb_seq(&tenant, kb.id).await.unwrap();
        store
            .apply(&tenant, kb.id, vec![WriteOp::PutFaq(faq(kb.id, "first"))])
            .await
            .unwrap();
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
            owner: None,
        };
        let chunk = Chunk {
            id: ChunkId::generate(),
            doc: doc.id,
            ordinal: 0,
            heading_path: vec![],
            text: "text".into(),
            start: 0,
            end: 4,
        };
        let bad = vec![
            WriteOp::PutFaq(dup),
            WriteOp::PutDocument {
                document: doc.clone(),
                chunks: vec![chunk.clone(), chunk],
            },
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
    let first =
        EmbeddedStore::open_with_analyzer(dir.path(), OpenMode::ReadWrite, "zh_en:1").unwrap();
    match EmbeddedStore::open(dir.path(), OpenMode::ReadWrite) {
        Err(StoreError::Locked { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
        other => panic!("expected Locked, got {other:?}"),
    }
    // Readers do not need the lock.
    assert!(EmbeddedStore::open(dir.path(), OpenMode::ReadOnly).is_ok());
    drop(first);
    let again =
        EmbeddedStore::open_with_analyzer(dir.path(), OpenMode::ReadWrite, "zh_en:2").unwrap();
    assert_eq!(again.info().recorded_analyzer.as_deref(), Some("zh_en:1"));
    assert!(again.info().analyzer_changed);
}

#[test]
fn read_only_open_of_an_empty_directory_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = EmbeddedStore::open(dir.path(), OpenMode::ReadOnly).unwrap_err();
    assert!(err.to_string().contains("no ragscope data"), "{err}");
}

fn document(kb: KbId, hash: &str, owner: Option<&str>) -> (Document, Vec<Chunk>) {
    let doc = Document {
        id: DocId::generate(),
        kb,
        title: format!("doc {hash}"),
        source: "notes.md".into(),
        content_hash: hash.into(),
        tags: vec![],
        created_at: 1,
        updated_at: 1,
        text: "some text".into(),
        owner: owner.map(str::to_owned),
    };
    let chunk = Chunk {
        id: ChunkId::generate(),
        doc: doc.id,
        ordinal: 0,
        heading_path: vec![],
        text: "some text".into(),
        start: 0,
        end: 9,
    };
    (doc, vec![chunk])
}

fn logged(
    tenant: &TenantId,
    kb: KbId,
    query: &str,
    conversation: Option<&str>,
    at: i64,
    owner: Option<&str>,
) -> QueryLogRecord {
    QueryLogRecord {
        id: format!("q-{query}"),
        tenant: tenant.clone(),
        kb,
        kb_name: "kb".into(),
        conversation_id: conversation.map(str::to_owned),
        created_at: at,
        query: query.into(),
        rewritten_query: None,
        params: RetrievalParams::default(),
        filters: Filters::default(),
        fused: vec![],
        answer: None,
        generator: None,
        model: None,
        top1_cosine: None,
        top_fused_score: None,
        cited: vec![],
        kb_miss: query.contains("miss"),
        timings: vec![],
        total_ms: 1.0,
        usage: None,
        feedback: None,
        fired_synonyms: vec![],
        owner: owner.map(str::to_owned),
    }
}

#[test]
fn owners_restrict_documents_and_log_rows_and_old_stores_gain_the_columns() {
    let dir = tempfile::tempdir().unwrap();
    let tenant = TenantId::default_tenant();
    // A format-2 store: no owner columns yet.
    {
        let store = EmbeddedStore::open(dir.path(), OpenMode::ReadWrite).unwrap();
        drop(store);
        let c = rusqlite::Connection::open(dir.path().join("ragscope.sqlite3")).unwrap();
        c.execute_batch(
            "DROP INDEX documents_by_source; DROP INDEX documents_restricted; ALTER TABLE documents DROP COLUMN owner; ALTER TABLE query_log DROP COLUMN owner;
             UPDATE meta SET value = '2' WHERE key = 'format_version';",
        )
        .unwrap();
    }
    let store = EmbeddedStore::open(dir.path(), OpenMode::ReadWrite).unwrap();
    assert_eq!(store.info().format_version, rag_store::FORMAT_VERSION);
    rt().block_on(async {
        let kb = store
            .create_kb(&tenant, "kb", KbSettings::default())
            .await
            .unwrap();
        let (public, pc) = document(kb.id, "same", None);
        let (alice, ac) = document(kb.id, "same", Some("alice"));
        store
            .apply(
                &tenant,
                kb.id,
                vec![
                    WriteOp::PutDocument {
                        document: public.clone(),
                        chunks: pc,
                    },
                    WriteOp::PutDocument {
                        document: alice.clone(),
                        chunks: ac,
                    },
                ],
            )
            .await
            .unwrap();
        // The owner is stored and carried to the passages the indexes see.
        let docs = store.documents(&tenant, kb.id).await.unwrap();
        assert_eq!(
            docs.iter()
                .find(|d| d.id == alice.id)
                .unwrap()
                .owner
                .as_deref(),
            Some("alice")
        );
        assert_eq!(
            store
                .document(&tenant, kb.id, alice.id)
                .await
                .unwrap()
                .unwrap()
                .0
                .owner
                .as_deref(),
            Some("alice")
        );
        let snap = store.snapshot(&tenant, kb.id).await.unwrap();
        let owners: Vec<Option<&str>> = snap.passages.iter().map(|p| p.owner.as_deref()).collect();
        assert!(
            owners.contains(&Some("alice")) && owners.contains(&None),
            "{owners:?}"
        );
        // The same content is a duplicate only for the same owner.
        assert_eq!(
            store
                .document_by_hash(&tenant, kb.id, "same", None)
                .await
                .unwrap(),
            Some(public.id)
        );
        assert_eq!(
            store
                .document_by_hash(&tenant, kb.id, "same", Some("alice"))
                .await
                .unwrap(),
            Some(alice.id)
        );
        assert_eq!(
            store
                .document_by_hash(&tenant, kb.id, "same", Some("bob"))
                .await
                .unwrap(),
            None
        );

        // Query-log rows written through an owner's key are that owner's.
        for r in [
            logged(&tenant, kb.id, "public first", Some("c1"), 10, None),
            logged(&tenant, kb.id, "public miss", Some("c1"), 11, None),
            logged(
                &tenant,
                kb.id,
                "alice private",
                Some("c2"),
                12,
                Some("alice"),
            ),
            logged(&tenant, kb.id, "operator", None, 13, Some(OPERATOR_OWNER)),
        ] {
            store.log_query(&r).await.unwrap();
        }
        let ids = |v: Viewer| {
            let (store, tenant) = (&store, &tenant);
            async move {
                let f = LogFilter {
                    limit: 100,
                    viewer: v,
                    ..Default::default()
                };
                store
                    .query_log(tenant, kb.id, &f)
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|r| r.query)
                    .collect::<Vec<_>>()
            }
        };
        assert_eq!(ids(Viewer::Public).await, ["public miss", "public first"]);
        assert_eq!(
            ids(Viewer::Owner("bob".into())).await,
            ["public miss", "public first"]
        );
        assert_eq!(
            ids(Viewer::Owner("alice".into())).await,
            ["alice private", "public miss", "public first"]
        );
        assert_eq!(ids(Viewer::Everything).await.len(), 4);
        assert!(store
            .query_log_entry(&tenant, "q-alice private", &Viewer::Owner("bob".into()))
            .await
            .unwrap()
            .is_none());
        assert!(store
            .query_log_entry(&tenant, "q-alice private", &Viewer::Owner("alice".into()))
            .await
            .unwrap()
            .is_some());
        assert!(!store
            .set_feedback(&tenant, "q-alice private", &Viewer::Public, "useful")
            .await
            .unwrap());
        assert!(store
            .set_feedback(
                &tenant,
                "q-alice private",
                &Viewer::Owner("alice".into()),
                "useful"
            )
            .await
            .unwrap());

        // Conversations: grouped, ordered by latest activity, scoped by viewer.
        let convs = store
            .conversations(&tenant, kb.id, &Viewer::Owner("alice".into()), 10)
            .await
            .unwrap();
        assert_eq!(
            convs.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
            ["c2", "c1"]
        );
        let c1 = &convs[1];
        assert_eq!(
            (
                c1.turns,
                c1.misses,
                c1.first_query.as_str(),
                c1.last_query.as_str()
            ),
            (2, 1, "public first", "public miss")
        );
        assert_eq!((c1.started_at, c1.last_at), (10, 11));
        assert_eq!(
            store
                .conversations(&tenant, kb.id, &Viewer::Public, 10)
                .await
                .unwrap()
                .len(),
            1
        );
        // Another tenant sees none of it.
        let other = TenantId("other".into());
        assert!(store
            .conversations(&other, kb.id, &Viewer::Everything, 10)
            .await
            .unwrap()
            .is_empty());
        assert_eq!(
            store
                .delete_conversation(&other, kb.id, "c1", &Viewer::Everything)
                .await
                .unwrap(),
            0
        );
        // Bob cannot delete alice's conversation; alice can.
        assert_eq!(
            store
                .delete_conversation(&tenant, kb.id, "c2", &Viewer::Owner("bob".into()))
                .await
                .unwrap(),
            0
        );
        assert_eq!(
            store
                .delete_conversation(&tenant, kb.id, "c2", &Viewer::Owner("alice".into()))
                .await
                .unwrap(),
            1
        );
        assert_eq!(ids(Viewer::Everything).await.len(), 3);
    });
}

fn draft(kb: KbId, q: &str, doc: DocId, edited: bool) -> FaqEntry {
    FaqEntry {
        source_doc: Some(doc),
        edited,
        status: FaqStatus::Pending,
        ..faq(kb, q)
    }
}

#[test]
fn drafts_follow_their_document_and_edited_ones_are_never_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let tenant = TenantId::default_tenant();
    // A store made before faqs.source_doc existed gains the column.
    {
        let store = EmbeddedStore::open(dir.path(), OpenMode::ReadWrite).unwrap();
        drop(store);
        let c = rusqlite::Connection::open(dir.path().join("ragscope.sqlite3")).unwrap();
        c.execute_batch("DROP INDEX faqs_by_source_doc; ALTER TABLE faqs DROP COLUMN source_doc; UPDATE meta SET value = '2' WHERE key = 'format_version';").unwrap();
    }
    let store = EmbeddedStore::open(dir.path(), OpenMode::ReadWrite).unwrap();
    rt().block_on(async {
        let kb = store
            .create_kb(&tenant, "kb", KbSettings::default())
            .await
            .unwrap();
        let (old, oc) = document(kb.id, "v1", None);
        let (new, nc) = document(kb.id, "v2", None);
        store
            .apply(
                &tenant,
                kb.id,
                vec![WriteOp::PutDocument {
                    document: old.clone(),
                    chunks: oc,
                }],
            )
            .await
            .unwrap();
        // A draft of a document that does not exist is refused, and nothing of the write stays.
        let ghost = DocId::generate();
        let err = store
            .apply(
                &tenant,
                kb.id,
                vec![
                    WriteOp::PutFaq(faq(kb.id, "kept?")),
                    WriteOp::PutFaq(draft(kb.id, "ghost", ghost, false)),
                ],
            )
            .await
            .unwrap_err();
        assert!(err.to_string().contains("not found"), "{err}");
        assert!(store.faqs(&tenant, kb.id).await.unwrap().is_empty());

        let (plain, unedited, edited) = (
            faq(kb.id, "people wrote me"),
            draft(kb.id, "unedited", old.id, false),
            draft(kb.id, "edited", old.id, true),
        );
        let space = EmbeddingSpace {
            model_id: "m".into(),
            dims: 2,
        };
        let vectors = [&plain, &unedited, &edited]
            .iter()
            .map(|f| PassageVector {
                id: PassageId::Faq(f.id),
                text_hash: "h".into(),
                vector: vec![1.0, 0.0],
            })
            .collect();
        store
            .apply(
                &tenant,
                kb.id,
                vec![
                    WriteOp::PutFaq(plain.clone()),
                    WriteOp::PutFaq(unedited.clone()),
                    WriteOp::PutFaq(edited.clone()),
                    WriteOp::PutVectors { space, vectors },
                ],
            )
            .await
            .unwrap();
        let stored = store.faqs(&tenant, kb.id).await.unwrap();
        assert_eq!(
            stored
                .iter()
                .filter(|f| f.source_doc == Some(old.id))
                .count(),
            2,
            "the link is stored and read back"
        );
        // An update keeps the stored link, whatever the entry says.
        store
            .apply(
                &tenant,
                kb.id,
                vec![WriteOp::PutFaq(FaqEntry {
                    source_doc: None,
                    answer: "changed".into(),
                    ..edited.clone()
                })],
            )
            .await
            .unwrap();
        let e = store
            .faqs(&tenant, kb.id)
            .await
            .unwrap()
            .into_iter()
            .find(|f| f.id == edited.id)
            .unwrap();
        assert_eq!((e.answer.as_str(), e.source_doc), ("changed", Some(old.id)));

        // Re-sync: the new version in, edited drafts moved to it, the old one out.
        store
            .apply(
                &tenant,
                kb.id,
                vec![
                    WriteOp::PutDocument {
                        document: new.clone(),
                        chunks: nc,
                    },
                    WriteOp::RelinkDrafts {
                        from: old.id,
                        to: new.id,
                    },
                    WriteOp::DeleteDocument(old.id),
                ],
            )
            .await
            .unwrap();
        let after = store.faqs(&tenant, kb.id).await.unwrap();
        let names: Vec<(&str, Option<DocId>)> = after
            .iter()
            .map(|f| (f.question.as_str(), f.source_doc))
            .collect();
        assert_eq!(names, [("people wrote me", None), ("edited", Some(new.id))]);
        let vectors: Vec<PassageId> = store
            .snapshot(&tenant, kb.id)
            .await
            .unwrap()
            .vectors
            .into_iter()
            .map(|v| v.id)
            .collect();
        assert!(
            !vectors.contains(&PassageId::Faq(unedited.id)),
            "the deleted draft's vector went with it"
        );
        assert_eq!(vectors.len(), 2);

        // Relinking to a document that does not exist is refused.
        assert!(store
            .apply(
                &tenant,
                kb.id,
                vec![WriteOp::RelinkDrafts {
                    from: new.id,
                    to: ghost
                }]
            )
            .await
            .is_err());

        // DeleteUneditedDrafts spares edited entries; deleting the document unlinks them.
        let fresh = draft(kb.id, "fresh", new.id, false);
        store
            .apply(&tenant, kb.id, vec![WriteOp::PutFaq(fresh.clone())])
            .await
            .unwrap();
        store
            .apply(&tenant, kb.id, vec![WriteOp::DeleteUneditedDrafts(new.id)])
            .await
            .unwrap();
        let names: Vec<String> = store
            .faqs(&tenant, kb.id)
            .await
            .unwrap()
            .into_iter()
            .map(|f| f.question)
            .collect();
        assert_eq!(names, ["people wrote me", "edited"]);
        store
            .apply(
                &tenant,
                kb.id,
                vec![WriteOp::PutFaq(fresh), WriteOp::DeleteDocument(new.id)],
            )
            .await
            .unwrap();
        let after = store.faqs(&tenant, kb.id).await.unwrap();
        let names: Vec<(&str, Option<DocId>)> = after
            .iter()
            .map(|f| (f.question.as_str(), f.source_doc))
            .collect();
        assert_eq!(
            names,
            [("people wrote me", None), ("edited", None)],
            "the edited draft outlives its document, unlinked"
        );
    });
}

/// The documents listing counts each document's chunks through an index on
/// `chunks.doc_id`, not a scan of every chunk per document (which made
/// `kb list` take minutes at 100,000 documents).
#[test]
fn per_document_chunk_reads_use_an_index() {
    let dir = tempfile::tempdir().unwrap();
    drop(rag_store::EmbeddedStore::open(dir.path(), rag_store::OpenMode::ReadWrite).unwrap());
    let conn = rusqlite::Connection::open(dir.path().join("ragscope.sqlite3")).unwrap();
    for sql in [
        "EXPLAIN QUERY PLAN SELECT count(*) FROM chunks c WHERE c.doc_id = 'x'",
        "EXPLAIN QUERY PLAN SELECT id FROM chunks WHERE doc_id = 'x' ORDER BY ordinal",
    ] {
        let plan: Vec<String> = conn
            .prepare(sql)
            .unwrap()
            .query_map([], |r| r.get::<_, String>(3))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert!(
            plan.iter().any(|d| d.contains("chunks_by_doc")),
            "{sql}: {plan:?}"
        );
    }
}

#[test]
fn a_streamed_snapshot_sends_what_the_whole_one_holds() {
    rt().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path(), OpenMode::ReadWrite).unwrap();
        let tenant = TenantId::default_tenant();
        let kb = store
            .create_kb(&tenant, "kb", KbSettings::default())
            .await
            .unwrap();
        let mut ops = Vec::new();
        for i in 0..7 {
            let (document, chunks) = document(kb.id, &format!("h{i}"), None);
            ops.push(WriteOp::PutDocument { document, chunks });
            ops.push(WriteOp::PutFaq(faq(kb.id, &format!("question {i}"))));
        }
        ops.push(WriteOp::PutFact(Fact {
            id: FactId::generate(),
            kb: kb.id,
            key: "hours".into(),
            value: "9 to 5".into(),
            key_synonyms: vec![],
        }));
        store.apply(&tenant, kb.id, ops).await.unwrap();
        let whole = store.snapshot(&tenant, kb.id).await.unwrap();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let received = std::thread::spawn(move || rx.iter().collect::<Vec<SnapshotPart>>());
        let vectors = store
            .index_snapshot_streamed(&tenant, kb.id, 3, tx)
            .await
            .unwrap();
        assert_eq!(vectors, 0);
        let parts = received.join().unwrap();
        let SnapshotPart::Head(head) = &parts[0] else {
            panic!("the head first: {parts:?}");
        };
        assert_eq!(head.seq, whole.seq);
        assert!(matches!(parts.last(), Some(SnapshotPart::End)));
        let mut passages: Vec<Passage> = Vec::new();
        for part in &parts[1..parts.len() - 1] {
            let SnapshotPart::Passages(p) = part else {
                panic!("{part:?}");
            };
            assert!(!p.is_empty() && p.len() <= 3, "batches of at most 3");
            passages.extend(p.iter().cloned());
        }
        // The text passages in the whole snapshot's order, then its facts
        // (which the head holds).
        passages.extend(head.passages.iter().cloned());
        assert_eq!(passages, whole.passages);
        assert_eq!(head.passages.len(), 1);
        // Another tenant's stream is refused before anything is sent.
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let other = TenantId("other".into());
        assert!(store
            .index_snapshot_streamed(&other, kb.id, 3, tx)
            .await
            .is_err());
        assert!(rx.try_recv().is_err());
    });
}
