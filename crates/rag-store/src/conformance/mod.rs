//! One script of store operations, run against any store; it asserts the
//! semantics both stores must have and returns a transcript of everything
//! deterministic it read, so two stores can be compared line by line.
//!
//! Ids come from the engine: the script makes them from a counter, so both
//! runs use the same ids. Knowledge-base ids and creation times are made by
//! `create_kb` itself; the transcript replaces them with names and zero.
//!
//! Behind the `testing` feature: the PostgreSQL store's tests run the same
//! script against both stores and compare the transcripts.

mod beside;
mod isolation;
mod pages;
mod streamed;

use rag_core::*;
use std::collections::BTreeMap;

/// Deterministic engine-side ids.
pub struct Ids(u128);

impl Default for Ids {
    fn default() -> Self {
        Self::new()
    }
}

impl Ids {
    /// The counter's start.
    pub fn new() -> Self {
        Ids(0x0190_0000_0000_7000_8000_0000_0000_0000)
    }
    /// The next id.
    pub fn fresh(&mut self) -> uuid::Uuid {
        self.0 += 1;
        uuid::Uuid::from_u128(self.0)
    }
}

/// The transcript: labelled debug renderings, with knowledge-base ids replaced.
pub struct Transcript {
    lines: Vec<String>,
    names: BTreeMap<String, String>,
}

impl Transcript {
    fn new() -> Self {
        Transcript {
            lines: Vec::new(),
            names: BTreeMap::new(),
        }
    }
    fn name_kb(&mut self, kb: &KnowledgeBase, label: &str) {
        self.names.insert(kb.id.to_string(), label.to_owned());
    }
    fn push(&mut self, label: &str, value: impl std::fmt::Debug) {
        let mut s = format!("{label}: {value:?}");
        for (id, name) in &self.names {
            s = s.replace(id, name);
        }
        self.lines.push(s);
    }
    /// A result: user errors in full (they are part of the contract), store
    /// failures as a category (their wording is the driver's).
    fn result<T: std::fmt::Debug>(&mut self, label: &str, r: &Result<T, CoreError>) {
        match r {
            Ok(v) => self.push(label, format!("Ok({v:?})")),
            Err(CoreError::User(u)) => self.push(label, format!("UserError({u})")),
            Err(_) => self.push(label, "StoreError"),
        }
    }
    pub fn lines(self) -> Vec<String> {
        self.lines
    }
}

fn kb_view(kb: &KnowledgeBase) -> KnowledgeBase {
    KnowledgeBase {
        created_at: 0,
        ..kb.clone()
    }
}

fn document(
    ids: &mut Ids,
    kb: KbId,
    title: &str,
    hash: &str,
    owner: Option<&str>,
    chunks: &[(&str, &[&str])],
) -> (Document, Vec<Chunk>) {
    let text: String = chunks
        .iter()
        .map(|(t, _)| *t)
        .collect::<Vec<_>>()
        .join("\n");
    let doc = Document {
        id: DocId(ids.fresh()),
        kb,
        title: title.into(),
        source: format!("{title}.md"),
        content_hash: hash.into(),
        tags: vec!["manual".into(), "desk".into()],
        created_at: 100,
        updated_at: 100,
        text,
        owner: owner.map(str::to_owned),
    };
    let mut start = 0;
    let chunks = chunks
        .iter()
        .enumerate()
        .map(|(i, (t, headings))| {
            let c = Chunk {
                id: ChunkId(ids.fresh()),
                doc: doc.id,
                ordinal: i as u32,
                heading_path: headings.iter().map(|h| h.to_string()).collect(),
                text: t.to_string(),
                start,
                end: start + t.len(),
            };
            start += t.len() + 1;
            c
        })
        .collect();
    (doc, chunks)
}

fn faq(ids: &mut Ids, kb: KbId, q: &str, a: &str, status: FaqStatus, at: i64) -> FaqEntry {
    FaqEntry {
        id: FaqId(ids.fresh()),
        kb,
        question: q.into(),
        answer: a.into(),
        status,
        edited: false,
        source_url: Some("https://example.com/faq".into()),
        tags: vec!["faq".into()],
        created_at: at,
        updated_at: at,
        valid_from: None,
        valid_until: Some(2_000_000_000),
        source_doc: None,
    }
}

fn logged(
    tenant: &TenantId,
    kb: KbId,
    id: &str,
    query: &str,
    conversation: Option<&str>,
    at: i64,
    owner: Option<&str>,
) -> QueryLogRecord {
    QueryLogRecord {
        id: id.into(),
        tenant: tenant.clone(),
        kb,
        kb_name: "kb".into(),
        conversation_id: conversation.map(str::to_owned),
        created_at: at,
        query: query.into(),
        rewritten_query: None,
        params: RetrievalParams::default(),
        filters: Filters::default(),
        fused: vec![LoggedHit {
            id: PassageId::Faq(FaqId(uuid::Uuid::from_u128(7))),
            title: "退款 refund".into(),
            rank: 1,
            normalized: 0.123_456_789_012_345_67,
            path_ranks: vec![(PathKind::Bm25, 1), (PathKind::Dense, 3)],
        }],
        answer: Some("answer [1]".into()),
        generator: Some("extractive".into()),
        model: None,
        top1_cosine: Some(0.812_345_678_9),
        top_fused_score: Some(1.0 / 3.0),
        cited: vec![],
        kb_miss: query.contains("miss"),
        timings: vec![],
        total_ms: 12.345_678_901_234,
        usage: None,
        feedback: None,
        fired_synonyms: vec![vec!["退款".into(), "退钱".into()]],
        owner: owner.map(str::to_owned),
    }
}

fn key(
    id: &str,
    tenant: &TenantId,
    role: Role,
    owner: Option<&str>,
    kb: Option<&str>,
    at: i64,
) -> ApiKeyInfo {
    ApiKeyInfo {
        id: id.into(),
        tenant: tenant.clone(),
        role,
        owner: owner.map(str::to_owned),
        kb: kb.map(str::to_owned),
        label: format!("label {id}"),
        prefix: format!("rsk_{id}"),
        created_at: at,
        revoked: false,
    }
}

/// Runs the script; panics where a store breaks a rule both must keep.
/// Runs the script against `store` (which must be empty) and returns its
/// transcript.
pub async fn run<S: Store + KeyStore>(store: &S) -> Vec<String> {
    let mut ids = Ids::new();
    let mut t = Transcript::new();
    let (a, b) = (TenantId("tenant-a".into()), TenantId("tenant-b".into()));

    // Tenants.
    t.result("create tenant a", &store.create_tenant(&a, 1).await);
    t.result("create tenant a again", &store.create_tenant(&a, 2).await);
    t.result("create tenant b", &store.create_tenant(&b, 3).await);
    t.result("tenants", &store.tenants().await);

    // Knowledge bases: names are per tenant.
    let kb = store
        .create_kb(&a, "kb", KbSettings::default())
        .await
        .unwrap();
    t.name_kb(&kb, "KB_A");
    let other = store
        .create_kb(&a, "another", KbSettings::default())
        .await
        .unwrap();
    t.name_kb(&other, "KB_A2");
    let kb_b = store
        .create_kb(&b, "kb", KbSettings::default())
        .await
        .unwrap();
    t.name_kb(&kb_b, "KB_B");
    t.result(
        "duplicate name",
        &store
            .create_kb(&a, "kb", KbSettings::default())
            .await
            .map(|k| kb_view(&k)),
    );
    t.push(
        "kbs of a",
        store
            .list_kbs(&a)
            .await
            .unwrap()
            .iter()
            .map(kb_view)
            .collect::<Vec<_>>(),
    );
    t.push(
        "kbs of b",
        store
            .list_kbs(&b)
            .await
            .unwrap()
            .iter()
            .map(kb_view)
            .collect::<Vec<_>>(),
    );
    t.push(
        "kb by name",
        store
            .kb_by_name(&a, "kb")
            .await
            .unwrap()
            .map(|k| kb_view(&k)),
    );
    t.push(
        "kb by name, other tenant's",
        store
            .kb_by_name(&b, "another")
            .await
            .unwrap()
            .map(|k| kb_view(&k)),
    );
    t.result("seq", &store.kb_seq(&a, kb.id).await);

    // Content.
    let (doc1, chunks1) = document(
        &mut ids,
        kb.id,
        "Desk manual",
        "hash-1",
        None,
        &[
            ("Lift the desk with both hands.", &["Setup"]),
            ("升降桌的最大高度是 125 厘米。", &["Setup", "高度"]),
            ("Warranty: five years.", &[]),
        ],
    );
    let (doc2, chunks2) = document(
        &mut ids,
        kb.id,
        "Alice notes",
        "hash-1",
        Some("alice"),
        &[("Alice's private note.", &["Private"])],
    );
    let mut f1 = faq(
        &mut ids,
        kb.id,
        "怎么退款？",
        "在订单页申请退款。",
        FaqStatus::Approved,
        50,
    );
    let f2 = faq(
        &mut ids,
        kb.id,
        "Do you deliver at night?",
        "Until 02:00.",
        FaqStatus::Pending,
        40,
    );
    let f3 = faq(
        &mut ids,
        kb.id,
        "Opening hours?",
        "16:00 to 02:00.",
        FaqStatus::Disabled,
        50,
    );
    let fact = Fact {
        id: FactId(ids.fresh()),
        kb: kb.id,
        key: "营业时间".into(),
        value: "16:00–次日02:00".into(),
        key_synonyms: vec!["几点开门".into(), "opening hours".into()],
    };
    let fact2 = Fact {
        id: FactId(ids.fresh()),
        kb: kb.id,
        key: "电话".into(),
        value: "123".into(),
        key_synonyms: vec![],
    };
    let source = Source {
        id: SourceId(ids.fresh()),
        kb: kb.id,
        url: "https://example.com/".into(),
        depth: 1,
        max_pages: 20,
        owner: None,
        status: SourceStatus::Synced,
        reason: None,
        created_at: 70,
        last_sync: Some(80),
        pages: vec![SourcePage {
            url: "https://example.com/".into(),
            outcome: PageOutcome::Indexed,
            reason: None,
            doc: Some(doc1.id),
            depth: 0,
        }],
    };
    let mut settings = KbSettings::default();
    settings.answer.profile = "faq".into();
    settings.answer.min_cosine = Some(0.75);
    let ops = vec![
        WriteOp::PutDocument {
            document: doc1.clone(),
            chunks: chunks1.clone(),
        },
        WriteOp::PutDocument {
            document: doc2.clone(),
            chunks: chunks2.clone(),
        },
        WriteOp::PutFaq(f1.clone()),
        WriteOp::PutFaq(f2.clone()),
        WriteOp::PutFaq(f3.clone()),
        WriteOp::PutFact(fact.clone()),
        WriteOp::PutFact(fact2.clone()),
        WriteOp::AddSynonyms(SynonymGroup {
            terms: vec!["退款".into(), "退钱".into(), "refund".into()],
        }),
        WriteOp::AddSynonyms(SynonymGroup {
            terms: vec!["desk".into(), "table".into()],
        }),
        WriteOp::AddUserWord(UserWord {
            word: "升降桌".into(),
            freq: Some(100),
        }),
        WriteOp::AddUserWord(UserWord {
            word: "Zeta".into(),
            freq: None,
        }),
        WriteOp::AddUserWord(UserWord {
            word: "alpha".into(),
            freq: Some(1),
        }),
        WriteOp::AddUserWord(UserWord {
            word: "升降桌".into(),
            freq: Some(200),
        }),
        WriteOp::PutSettings(settings),
        WriteOp::PutSource(source.clone()),
    ];
    t.result("apply content", &store.apply(&a, kb.id, ops).await);

    // Vectors: the first fix the space.
    let space = EmbeddingSpace {
        model_id: "test-model".into(),
        dims: 3,
    };
    let vec_of = |id: PassageId, x: f32| PassageVector {
        id,
        text_hash: format!("h-{x}"),
        vector: vec![x, -x / 3.0, 0.1 + x],
    };
    let vectors = vec![
        vec_of(PassageId::Chunk(chunks1[0].id), 0.5),
        vec_of(PassageId::Chunk(chunks1[1].id), 1.0 / 7.0),
        vec_of(PassageId::Chunk(chunks2[0].id), -2.25),
        vec_of(PassageId::Faq(f1.id), 3.0e-8),
        vec_of(PassageId::Faq(f2.id), 0.0),
        vec_of(PassageId::Fact(fact.id), 1e20),
        vec_of(PassageId::Faq(f1.id), 0.75),
    ];
    t.result(
        "put vectors",
        &store
            .apply(
                &a,
                kb.id,
                vec![WriteOp::PutVectors {
                    space: space.clone(),
                    vectors,
                }],
            )
            .await,
    );
    let other_space = EmbeddingSpace {
        model_id: "other-model".into(),
        dims: 3,
    };
    t.result(
        "vectors of another space",
        &store
            .apply(
                &a,
                kb.id,
                vec![WriteOp::PutVectors {
                    space: other_space,
                    vectors: vec![vec_of(PassageId::Fact(fact2.id), 1.0)],
                }],
            )
            .await,
    );
    let short = PassageVector {
        id: PassageId::Fact(fact2.id),
        text_hash: "x".into(),
        vector: vec![1.0, 2.0],
    };
    t.result(
        "vector of the wrong length",
        &store
            .apply(
                &a,
                kb.id,
                vec![WriteOp::PutVectors {
                    space: space.clone(),
                    vectors: vec![short],
                }],
            )
            .await,
    );
    t.result("embedding space", &store.embedding_space(&a, kb.id).await);

    beside::check(
        store,
        &mut t,
        (&a, &b),
        &kb,
        (
            PassageId::Chunk(chunks1[0].id),
            PassageId::Chunk(chunks1[1].id),
            PassageId::Chunk(chunks2[0].id),
        ),
        f1.id,
        &space,
        vec_of(PassageId::Chunk(chunks2[0].id), -2.25),
    )
    .await;
    // Reads.
    t.push("snapshot 1", store.snapshot(&a, kb.id).await.unwrap());
    t.push("documents", store.documents(&a, kb.id).await.unwrap());
    t.push(
        "document 1",
        store.document(&a, kb.id, doc1.id).await.unwrap(),
    );
    t.push(
        "document of another kb",
        store.document(&a, other.id, doc1.id).await.unwrap(),
    );
    t.push(
        "missing document",
        store.document(&a, kb.id, DocId(ids.fresh())).await.unwrap(),
    );
    for owner in [None, Some("alice"), Some("bob")] {
        t.push(
            &format!("by hash, owner {owner:?}"),
            store
                .document_by_hash(&a, kb.id, "hash-1", owner)
                .await
                .unwrap(),
        );
    }
    t.push("faqs", store.faqs(&a, kb.id).await.unwrap());
    t.push("sources", store.sources(&a, kb.id).await.unwrap());
    t.push(
        "kb after settings",
        store
            .kb_by_name(&a, "kb")
            .await
            .unwrap()
            .map(|k| kb_view(&k)),
    );

    // Changes: edit, replace, delete.
    f1.answer = "在“我的订单”里申请退款。".into();
    f1.edited = true;
    f1.updated_at = 60;
    f1.created_at = 999; // not changed by an update
    let (mut doc1b, _) = document(
        &mut ids,
        kb.id,
        "Desk manual v2",
        "hash-2",
        None,
        &[("Only one chunk now.", &["Setup"])],
    );
    doc1b.id = doc1.id;
    let chunks1b = vec![Chunk {
        id: ChunkId(ids.fresh()),
        doc: doc1.id,
        ordinal: 0,
        heading_path: vec!["Setup".into()],
        text: "Only one chunk now.".into(),
        start: 0,
        end: 19,
    }];
    let mut source2 = source.clone();
    source2.status = SourceStatus::Failed;
    source2.reason = Some("HTTP 500".into());
    let ops = vec![
        WriteOp::PutFaq(f1.clone()),
        WriteOp::PutDocument {
            document: doc1b,
            chunks: chunks1b,
        },
        WriteOp::DeleteFaq(f2.id),
        WriteOp::DeleteFact(fact2.id),
        WriteOp::PutFact(Fact {
            value: "16:00–次日03:00".into(),
            ..fact.clone()
        }),
        WriteOp::PutSource(source2),
    ];
    t.result("apply changes", &store.apply(&a, kb.id, ops).await);
    t.push("snapshot 2", store.snapshot(&a, kb.id).await.unwrap());
    streamed::check(store, &mut t, &a, &b, &kb).await;
    pages::check(store, &mut t, &a, &b, &kb).await;
    t.push("sources 2", store.sources(&a, kb.id).await.unwrap());
    let ops = vec![
        WriteOp::DeleteSource(source.id),
        WriteOp::DeleteDocument(doc2.id),
    ];
    t.result(
        "delete source and document",
        &store.apply(&a, kb.id, ops).await,
    );
    t.push("documents 2", store.documents(&a, kb.id).await.unwrap());
    t.push("sources 3", store.sources(&a, kb.id).await.unwrap());

    // FAQ drafts: linked to a document; unedited ones follow it, edited ones stay.
    let (draft_doc, draft_chunks) = document(
        &mut ids,
        kb.id,
        "Draft source",
        "hash-draft",
        None,
        &[("Returns within 30 days.", &[])],
    );
    let (draft_doc2, draft_chunks2) = document(
        &mut ids,
        kb.id,
        "Draft source v2",
        "hash-draft-2",
        None,
        &[("Returns within 60 days.", &[])],
    );
    let draft = |ids: &mut Ids, q: &str, edited: bool, doc: DocId| FaqEntry {
        edited,
        source_doc: Some(doc),
        ..faq(ids, kb.id, q, "from the document", FaqStatus::Pending, 70)
    };
    let (kept, dropped) = (
        draft(&mut ids, "edited draft?", true, draft_doc.id),
        draft(&mut ids, "unedited draft?", false, draft_doc.id),
    );
    let missing = DocId(ids.fresh());
    let orphan = draft(&mut ids, "draft of a missing document?", false, missing);
    t.result(
        "draft of a missing document",
        &store.apply(&a, kb.id, vec![WriteOp::PutFaq(orphan)]).await,
    );
    let ops = vec![
        WriteOp::PutDocument {
            document: draft_doc.clone(),
            chunks: draft_chunks,
        },
        WriteOp::PutFaq(kept.clone()),
        WriteOp::PutFaq(dropped.clone()),
    ];
    t.result("drafts stored", &store.apply(&a, kb.id, ops).await);
    let ops = vec![
        WriteOp::PutDocument {
            document: draft_doc2.clone(),
            chunks: draft_chunks2,
        },
        WriteOp::RelinkDrafts {
            from: draft_doc.id,
            to: draft_doc2.id,
        },
        WriteOp::DeleteDocument(draft_doc.id),
    ];
    t.result("document replaced", &store.apply(&a, kb.id, ops).await);
    t.push(
        "drafts after replace",
        store
            .faqs(&a, kb.id)
            .await
            .unwrap()
            .into_iter()
            .filter(|f| f.question.contains("draft"))
            .collect::<Vec<_>>(),
    );
    t.result(
        "drafts deleted",
        &store
            .apply(
                &a,
                kb.id,
                vec![
                    WriteOp::DeleteUneditedDrafts(draft_doc2.id),
                    WriteOp::DeleteDocument(draft_doc2.id),
                ],
            )
            .await,
    );
    t.push(
        "drafts after delete",
        store
            .faqs(&a, kb.id)
            .await
            .unwrap()
            .into_iter()
            .filter(|f| f.question.contains("draft"))
            .collect::<Vec<_>>(),
    );

    // A write that fails part-way changes nothing.
    let seq_before = store.kb_seq(&a, kb.id).await.unwrap();
    let (bad_doc, bad_chunks) = document(&mut ids, kb.id, "bad", "hash-bad", None, &[("x", &[])]);
    let dup = vec![bad_chunks[0].clone(), bad_chunks[0].clone()];
    let ops = vec![
        WriteOp::PutFaq(faq(
            &mut ids,
            kb.id,
            "never",
            "stored",
            FaqStatus::Approved,
            1,
        )),
        WriteOp::PutDocument {
            document: bad_doc,
            chunks: dup,
        },
    ];
    let r = store.apply(&a, kb.id, ops).await;
    assert!(r.is_err(), "a write with a duplicate chunk id must fail");
    t.result("failed write", &r);
    assert_eq!(
        store.kb_seq(&a, kb.id).await.unwrap(),
        seq_before,
        "a failed write must not move the sequence"
    );
    t.push(
        "faqs after failed write",
        store.faqs(&a, kb.id).await.unwrap().len(),
    );

    let kbs = isolation::Kbs {
        a: &a,
        b: &b,
        kb: &kb,
        other: &other,
        kb_b: &kb_b,
        doc1: doc1.id,
    };
    isolation::run(store, &mut t, &mut ids, kbs).await;
    t.lines()
}
