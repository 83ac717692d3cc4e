//! The engine keeps a knowledge base's indexes current through the store's
//! change log: after each kind of write, the lists of every lexical path
//! equal those of an engine that builds its indexes from scratch over the
//! same store (the dense path's included, with a deterministic stand-in
//! embedder), and the update goes to a new segment instead of a rebuild.

use async_trait::async_trait;

use rag_core::{
    CoreError, Embedder, FaqStatus, KbSettings, PathKind, QueryRequest, RetrievalParams,
    SynonymGroup, TenantId, UserWord, Viewer,
};
use rag_engine::{Components, Engine, EngineConfig, FaqPatch, NewFaq, QueryOptions};
use std::sync::Arc;

/// A deterministic bag-of-characters embedder.
struct CharBag;

#[async_trait]
impl Embedder for CharBag {
    fn model_id(&self) -> &str {
        "test/char-bag-16"
    }
    fn dimensions(&self) -> usize {
        16
    }
    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, CoreError> {
        Ok(char_bag(text))
    }
    async fn embed_documents(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, CoreError> {
        Ok(texts.iter().map(|t| char_bag(t)).collect())
    }
}

fn char_bag(text: &str) -> Vec<f32> {
    let mut v = [0f32; 16];
    for c in text.chars() {
        v[c as usize % 16] += 1.0;
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
    v.iter().map(|x| x / norm).collect()
}

fn new_engine(store: Arc<dyn rag_core::Store>) -> Engine {
    let mut components = Components::lexical(store);
    components.embedder = Some(Arc::new(CharBag));
    Engine::new(components, EngineConfig::default())
}

const QUERIES: &[&str] = &[
    "how long does a refund take",
    "refnud",
    "怎么申请退款",
    "退宽",
    "营业时间",
    "云闪付",
    "desk weight limit",
];

async fn lists(engine: &Engine, tenant: &TenantId, q: &str) -> Vec<(String, Vec<(String, u64)>)> {
    let request = QueryRequest {
        kb: "kb".into(),
        query: q.into(),
        params: Some(RetrievalParams {
            paths: PathKind::ALL.to_vec(),
            ..RetrievalParams::default()
        }),
        overrides: Default::default(),
        filters: Default::default(),
        generate: false,
        conversation_id: None,
    };
    let options = QueryOptions {
        views: false,
        log: false,
        viewer: Viewer::Everything,
    };
    let out = engine
        .run(tenant, request, options, &mut |_| {})
        .await
        .unwrap();
    out.lists
        .iter()
        .map(|l| {
            (
                format!("{:?}", l.path),
                l.hits
                    .iter()
                    .map(|h| (h.id.to_string(), h.score.to_bits()))
                    .collect(),
            )
        })
        .collect()
}

#[tokio::test]
async fn every_write_is_applied_as_a_fresh_build_would_answer() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn rag_core::Store> = Arc::new(
        rag_store::EmbeddedStore::open(dir.path(), rag_store::OpenMode::ReadWrite).unwrap(),
    );
    let engine = new_engine(store.clone());
    let tenant = TenantId::default_tenant();
    engine
        .create_kb(&tenant, "kb", KbSettings::default())
        .await
        .unwrap();
    for i in 0..30 {
        let text = format!(
            "# Note {i}\n\nRefunds take {i} days. 退款需要 {i} 天，营业时间 9 点。The desk lifts {i}0 kg."
        );
        engine
            .ingest(&tenant, "kb", &format!("note-{i}.md"), text.into_bytes())
            .await
            .unwrap();
    }
    let check = |label: &'static str| {
        let (live, store, tenant) = (engine.clone(), store.clone(), tenant.clone());
        async move {
            let fresh = new_engine(store);
            let first = lists(&live, &tenant, QUERIES[0]).await;
            assert!(
                first
                    .iter()
                    .any(|(p, hits)| p == "Dense" && !hits.is_empty()),
                "{label}: the dense path answers: {first:?}"
            );
            for q in QUERIES {
                assert_eq!(
                    lists(&live, &tenant, q).await,
                    lists(&fresh, &tenant, q).await,
                    "{label}: {q}"
                );
            }
        }
    };
    check("initial").await;
    let kb = engine.kb(&tenant, "kb").await.unwrap();
    let seq_before = engine.index(&tenant, &kb).await.unwrap().seq();

    let faq = engine
        .create_faq(
            &tenant,
            "kb",
            NewFaq {
                question: "退款多久到账？".into(),
                answer: "Refunds arrive within 3 days, 云闪付 at once.".into(),
                tags: vec![],
                source_url: None,
                status: None,
                valid_from: None,
                valid_until: None,
            },
        )
        .await
        .unwrap();
    check("faq added").await;
    let index = engine.index(&tenant, &kb).await.unwrap();
    assert!(index.seq() > seq_before);
    assert!(
        index.lexical.segment_count() >= 2,
        "the write went to a new segment, not a rebuild"
    );

    engine
        .update_faq(
            &tenant,
            "kb",
            faq.id,
            FaqPatch {
                answer: Some("Refunds arrive within 5 days.".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    check("faq edited").await;
    engine
        .set_faq_status(&tenant, "kb", faq.id, FaqStatus::Disabled)
        .await
        .unwrap();
    check("faq disabled").await;
    engine
        .add_synonyms(
            &tenant,
            "kb",
            vec![SynonymGroup {
                terms: vec!["退款".into(), "退钱".into()],
            }],
        )
        .await
        .unwrap();
    check("synonyms").await;
    engine
        .add_user_words(
            &tenant,
            "kb",
            vec![UserWord {
                word: "营业时间".into(),
                freq: Some(100_000),
            }],
        )
        .await
        .unwrap();
    check("user word").await;
    engine
        .put_facts(
            &tenant,
            "kb",
            vec![(
                "营业时间".into(),
                "9:00–18:00".into(),
                vec!["opening hours".into()],
            )],
        )
        .await
        .unwrap();
    check("fact").await;
    let docs = store.documents(&tenant, kb.id).await.unwrap();
    engine
        .delete_document(&tenant, "kb", docs[3].id, &Viewer::Everything)
        .await
        .unwrap();
    check("document deleted").await;
    engine
        .ingest(
            &tenant,
            "kb",
            "note-5.md",
            b"# Note 5\n\nReplaced: refunds now take one day.".to_vec(),
        )
        .await
        .unwrap();
    check("document replaced").await;
    let index = engine.index(&tenant, &kb).await.unwrap();
    assert_eq!(index.seq(), store.kb_seq(&tenant, kb.id).await.unwrap());
}

/// Every query's lists are the same from both engines.
async fn same_lists(a: &Engine, b: &Engine, tenant: &TenantId) {
    for q in QUERIES {
        assert_eq!(lists(a, tenant, q).await, lists(b, tenant, q).await, "{q}");
    }
}

/// The one write after the stored build in the tests below.
/// Puts damaged bytes in an index file's place the way the engine writes
/// files: a new file renamed over the old one, never a change in place
/// (engines still mapping the old file keep reading the old bytes).
fn replace_file(path: &std::path::Path, bytes: &[u8]) {
    let temp = path.with_extension("damaged");
    std::fs::write(&temp, bytes).unwrap();
    std::fs::rename(&temp, path).unwrap();
}

/// A lexical engine keeping its index files in `dir/index`, saving after
/// every commit and reading what it saved in place, as a server does.
fn with_files(
    store: Arc<dyn rag_core::Store>,
    dir: &std::path::Path,
    segment_passages: usize,
) -> Engine {
    let config = EngineConfig {
        index_dir: Some(dir.join("index")),
        read_saved_in_place: true,
        save_every_commits: 1,
        segment_passages,
        ..EngineConfig::default()
    };
    Engine::new(Components::lexical(store), config)
}

/// Knowledge base "kb" with `n` one-passage notes.
async fn notes_kb(engine: &Engine, tenant: &TenantId, n: usize) -> rag_core::KnowledgeBase {
    engine
        .create_kb(tenant, "kb", KbSettings::default())
        .await
        .unwrap();
    for i in 0..n {
        engine
            .ingest(
                tenant,
                "kb",
                &format!("n{i}.md"),
                format!("Refunds take {i} days. 退款需要 {i} 天。").into_bytes(),
            )
            .await
            .unwrap();
    }
    engine.kb(tenant, "kb").await.unwrap()
}

fn refund_faq() -> NewFaq {
    NewFaq {
        question: "云闪付退款多久到账？".into(),
        answer: "Refunds arrive within 3 days.".into(),
        tags: vec![],
        source_url: None,
        status: None,
        valid_from: None,
        valid_until: None,
    }
}

#[tokio::test]
async fn a_new_process_reads_the_stored_index_and_catches_up() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn rag_core::Store> = Arc::new(
        rag_store::EmbeddedStore::open(dir.path(), rag_store::OpenMode::ReadWrite).unwrap(),
    );
    let lexical = |store: Arc<dyn rag_core::Store>| {
        with_files(store, dir.path(), rag_lexical::SEGMENT_PASSAGES)
    };
    let tenant = TenantId::default_tenant();
    let first = lexical(store.clone());
    let kb = notes_kb(&first, &tenant, 12).await;
    // The full build stores the index; a write after it is in the change log only.
    let built = first.index(&tenant, &kb).await.unwrap();
    assert_eq!(built.lexical.shared_bytes(), 0);
    first.flush_index_files().await;
    // Once written, the building process reads the bulk bytes from the file
    // too, and answers as before.
    let swapped = first.index(&tenant, &kb).await.unwrap();
    assert_eq!(swapped.seq(), built.seq());
    assert!(swapped.lexical.shared_bytes() > 0);
    let encoded = |ix: &rag_lexical::LexicalIndex| {
        (0..ix.segment_count())
            .map(|i| (ix.encode_segment(i), ix.segment_file(i)))
            .collect::<Vec<_>>()
    };
    assert_eq!(encoded(&swapped.lexical), encoded(&built.lexical));
    drop((built, swapped));
    let lexd = dir.path().join("index").join(format!("{}.lexd", kb.id));
    let segment_files = || {
        let mut names: Vec<String> = std::fs::read_dir(&lexd)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".seg"))
            .collect();
        names.sort();
        names
    };
    assert!(lexd.join("manifest").exists());
    let first_files = segment_files();
    assert_eq!(first_files.len(), 1);
    let first_segment = lexd.join(&first_files[0]);
    let modified = |p: &std::path::Path| std::fs::metadata(p).unwrap().modified().unwrap();
    let first_written = modified(&first_segment);
    first.create_faq(&tenant, "kb", refund_faq()).await.unwrap();
    let live = first.index(&tenant, &kb).await.unwrap();
    first.flush_index_files().await;
    // Storing the write added its segment's file; the first segment's file
    // was not written again.
    let files = segment_files();
    assert_eq!(files.len(), 2, "{files:?}");
    assert!(files.contains(&first_files[0]));
    assert_eq!(modified(&first_segment), first_written);
    // A segment whose passages are all gone goes, with its file.
    let faq = first
        .create_faq(
            &tenant,
            "kb",
            NewFaq {
                question: "临时问题".into(),
                ..refund_faq()
            },
        )
        .await
        .unwrap();
    first.index(&tenant, &kb).await.unwrap();
    first.flush_index_files().await;
    assert_eq!(segment_files().len(), 3);
    first.delete_faq(&tenant, "kb", faq.id).await.unwrap();
    drop(live);
    let live = first.index(&tenant, &kb).await.unwrap();
    first.flush_index_files().await;
    assert_eq!(segment_files(), files);
    assert_eq!(modified(&first_segment), first_written);
    // A segment file lost while the process runs is written again, under
    // its name and with the same bytes, by the next save.
    let first_bytes = std::fs::read(&first_segment).unwrap();
    std::fs::remove_file(&first_segment).unwrap();
    first
        .create_faq(
            &tenant,
            "kb",
            NewFaq {
                question: "发票怎么开".into(),
                ..refund_faq()
            },
        )
        .await
        .unwrap();
    drop(live);
    let live = first.index(&tenant, &kb).await.unwrap();
    first.flush_index_files().await;
    assert_eq!(std::fs::read(&first_segment).unwrap(), first_bytes);
    // One more write that this process does not index (nor store).
    first
        .create_faq(
            &tenant,
            "kb",
            NewFaq {
                question: "营业时间".into(),
                ..refund_faq()
            },
        )
        .await
        .unwrap();
    drop(live);

    // A second process reads the files, applies the one write, and answers
    // as a build from scratch would.
    let second = lexical(store.clone());
    let read = second.index(&tenant, &kb).await.unwrap();
    let live = Engine::new(Components::lexical(store.clone()), EngineConfig::default())
        .index(&tenant, &kb)
        .await
        .unwrap();
    assert_eq!(read.seq(), live.seq());
    assert_eq!(
        read.lexical.segment_count(),
        4,
        "read from the files (three segments) and caught up, not built from a snapshot"
    );
    // Its postings, n-gram lists and match texts are read in place from
    // the mapped file, not copied.
    assert!(read.lexical.shared_bytes() > 0);
    let fresh = Engine::new(Components::lexical(store.clone()), EngineConfig::default());
    same_lists(&second, &fresh, &tenant).await;
    assert_eq!(
        fresh
            .index(&tenant, &kb)
            .await
            .unwrap()
            .lexical
            .shared_bytes(),
        0
    );

    // A damaged file is ignored: the index is built from the store.
    let file = first_segment;
    let mut bytes = std::fs::read(&file).unwrap();
    bytes.truncate(bytes.len() / 2);
    replace_file(&file, &bytes);
    let third = lexical(store.clone());
    let built = third.index(&tenant, &kb).await.unwrap();
    assert_eq!(built.lexical.segment_count(), 1);
    third.flush_index_files().await;
    same_lists(&third, &fresh, &tenant).await;
    // And deleting the files loses nothing.
    std::fs::remove_dir_all(dir.path().join("index")).unwrap();
    let fourth = lexical(store);
    assert_eq!(fourth.index(&tenant, &kb).await.unwrap().seq(), live.seq());
}

#[tokio::test]
async fn the_dense_index_and_its_graph_are_read_back_not_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn rag_core::Store> = Arc::new(
        rag_store::EmbeddedStore::open(dir.path(), rag_store::OpenMode::ReadWrite).unwrap(),
    );
    // A graph from 8 vectors on, so that the stored part is a graph.
    let vectors = rag_ann::VectorIndexParams {
        hnsw_threshold: 8,
        ..Default::default()
    };
    let config = |dir: Option<std::path::PathBuf>| EngineConfig {
        index_dir: dir,
        vectors,
        read_saved_in_place: true,
        ..EngineConfig::default()
    };
    let with_vectors = |store: Arc<dyn rag_core::Store>, dir: Option<std::path::PathBuf>| {
        let mut components = Components::lexical(store);
        components.embedder = Some(Arc::new(CharBag));
        Engine::new(components, config(dir))
    };
    let index_dir = dir.path().join("index");
    let tenant = TenantId::default_tenant();
    let first = with_vectors(store.clone(), Some(index_dir.clone()));
    first
        .create_kb(&tenant, "kb", KbSettings::default())
        .await
        .unwrap();
    for i in 0..20 {
        first
            .ingest(
                &tenant,
                "kb",
                &format!("n{i}.md"),
                format!("Refunds take {i} days, desk {i}. 退款需要 {i} 天，营业时间{i}点。")
                    .into_bytes(),
            )
            .await
            .unwrap();
    }
    let kb = first.kb(&tenant, "kb").await.unwrap();
    let built = first.index(&tenant, &kb).await.unwrap();
    let dense = built.dense.as_ref().unwrap().as_ref().unwrap();
    // The first build answers by exact search while the graph is built in
    // the background; once it is in, the same commit is answered by the graph.
    assert_eq!(dense.kind(), rag_ann::IndexKind::Exact);
    let exact_lists = {
        let mut out = Vec::new();
        for q in QUERIES {
            out.push(lists(&first, &tenant, q).await);
        }
        out
    };
    first.flush_index_files().await;
    let swapped = first.index(&tenant, &kb).await.unwrap();
    assert_eq!(swapped.seq(), built.seq());
    let dense = swapped.dense.as_ref().unwrap().as_ref().unwrap();
    assert_eq!(dense.kind(), rag_ann::IndexKind::Hnsw);
    // Once the file is written, the process that built it reads the
    // graph part's vectors from it too, instead of its heap copy.
    assert_eq!(dense.parts_in_place(), 1);
    assert_eq!(dense.vector_heap_bytes(), 0);
    for (q, before) in QUERIES.iter().zip(&exact_lists) {
        assert_eq!(&lists(&first, &tenant, q).await, before, "{q}");
    }
    let file = index_dir.join(format!("{}.vec", kb.id));
    assert!(file.exists());
    first.create_faq(&tenant, "kb", refund_faq()).await.unwrap();

    // A second process reads both files (one graph part, nothing built) and
    // applies the one write as a new small part.
    let second = with_vectors(store.clone(), Some(index_dir.clone()));
    let read = second.index(&tenant, &kb).await.unwrap();
    let dense = read.dense.as_ref().unwrap().as_ref().unwrap();
    assert_eq!(read.lexical.segment_count(), 2);
    assert_eq!(
        dense.part_count(),
        2,
        "read back and caught up, not rebuilt"
    );
    assert_eq!(dense.kind(), rag_ann::IndexKind::Hnsw);
    assert_eq!(dense.len(), 21);
    // The graph part's full-precision vectors are read in place from the
    // mapped file; only the new small part's are on the heap.
    assert_eq!(dense.parts_in_place(), 1);
    assert!(
        dense.vector_heap_bytes() < 20 * 16 * 4,
        "{}",
        dense.vector_heap_bytes()
    );
    let fresh = with_vectors(store.clone(), None);
    same_lists(&second, &fresh, &tenant).await;
    let built_fresh = fresh.index(&tenant, &kb).await.unwrap();
    let fresh_dense = built_fresh.dense.as_ref().unwrap().as_ref().unwrap();
    assert_eq!(fresh_dense.parts_in_place(), 0);
    assert!(fresh_dense.vector_heap_bytes() >= 21 * 16 * 4);

    // A damaged dense file is refused: both indexes are built from the store.
    let mut bytes = std::fs::read(&file).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x55;
    replace_file(&file, &bytes);
    let third = with_vectors(store.clone(), Some(index_dir.clone()));
    let rebuilt = third.index(&tenant, &kb).await.unwrap();
    assert_eq!(rebuilt.lexical.segment_count(), 1);
    assert_eq!(
        rebuilt
            .dense
            .as_ref()
            .unwrap()
            .as_ref()
            .unwrap()
            .part_count(),
        1
    );
    same_lists(&third, &fresh, &tenant).await;
}

#[tokio::test]
async fn a_large_build_writes_its_segments_as_it_goes() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn rag_core::Store> = Arc::new(
        rag_store::EmbeddedStore::open(dir.path(), rag_store::OpenMode::ReadWrite).unwrap(),
    );
    let lexical = |store: Arc<dyn rag_core::Store>| with_files(store, dir.path(), 5);
    let tenant = TenantId::default_tenant();
    let first = lexical(store.clone());
    let kb = notes_kb(&first, &tenant, 23).await;
    let lexd = dir.path().join("index").join(format!("{}.lexd", kb.id));
    // A build directory of a process that died half-way (its lock is free).
    let orphan = lexd.join("build-0000000000000000000000000000dead");
    std::fs::create_dir_all(&orphan).unwrap();
    std::fs::write(orphan.join("0000000000000000000000000000beef.seg"), b"x").unwrap();
    let built = first.index(&tenant, &kb).await.unwrap();
    // Five segments, each read in place from its file as soon as it was
    // built, and stored with a manifest before the first answer.
    assert_eq!(built.lexical.segment_count(), 5);
    assert!((0..5).all(|i| built.lexical.segment_file(i).is_some()));
    assert!(built.lexical.shared_bytes() > 0);
    let names = |d: &std::path::Path| {
        let mut n: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        n.sort();
        n
    };
    // The save queued after the build had nothing more to write: the
    // segment files are the five the build wrote.
    first.flush_index_files().await;
    let files = names(&lexd);
    let mut written: Vec<String> = (0..5)
        .map(|i| format!("{:032x}.seg", built.lexical.segment_file(i).unwrap().name))
        .collect();
    written.sort();
    let segs: Vec<String> = files
        .iter()
        .filter(|n| n.ends_with(".seg"))
        .cloned()
        .collect();
    assert_eq!(segs, written, "{files:?}");
    assert!(files.contains(&"manifest".to_owned()));
    assert!(!files.iter().any(|n| n.starts_with("build-")), "{files:?}");
    let fresh = Engine::new(Components::lexical(store.clone()), EngineConfig::default());
    same_lists(&first, &fresh, &tenant).await;

    // A write goes into a segment of its own; the big ones are not merged.
    first.create_faq(&tenant, "kb", refund_faq()).await.unwrap();
    let live = first.index(&tenant, &kb).await.unwrap();
    assert_eq!(live.lexical.segment_count(), 6);
    let fresh = Engine::new(Components::lexical(store.clone()), EngineConfig::default());
    same_lists(&first, &fresh, &tenant).await;
    first.flush_index_files().await;

    // A second process reads the six files.
    let second = lexical(store.clone());
    let read = second.index(&tenant, &kb).await.unwrap();
    assert_eq!(read.seq(), live.seq());
    assert_eq!(read.lexical.segment_count(), 6);
    same_lists(&second, &fresh, &tenant).await;
}
