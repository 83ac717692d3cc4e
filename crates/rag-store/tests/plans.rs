//! Query plans of the embedded store's queries: every read and write
//! reaches its rows of one knowledge base (or one document, one passage)
//! through an index, never by a full scan of a content table, so listings,
//! ingest lookups and the change feed stay fast at 100,000 documents (a scan
//! of every chunk per document made `kb list` take minutes).
//!
//! The list below repeats the store's SQL (as in `src/`); a query added
//! there belongs here too.

use rag_core::*;
use rag_store::{EmbeddedStore, OpenMode};

/// (what, SQL, indexes the plan must use). Parameters are bound to dummy
/// text values.
const QUERIES: &[(&str, &str, &[&str])] = &[
    // read.rs
    (
        "list_kbs",
        "SELECT id, tenant, name, created_at, settings FROM kbs WHERE tenant = ?1 ORDER BY name",
        &["sqlite_autoindex_kbs_2"],
    ),
    (
        "kb_by_name",
        "SELECT id, tenant, name, created_at, settings FROM kbs WHERE tenant = ?1 AND name = ?2",
        &["sqlite_autoindex_kbs_2"],
    ),
    (
        "owned / kb_seq",
        "SELECT seq FROM kbs WHERE id = ?1 AND tenant = ?2",
        &["sqlite_autoindex_kbs_1"],
    ),
    (
        "documents listing",
        "SELECT d.id, d.title, d.source, d.content_hash, (SELECT count(*) FROM chunks c WHERE c.doc_id = d.id), d.owner, d.created_at
         FROM documents d WHERE d.kb_id = ?1 ORDER BY d.created_at, d.id",
        &["documents_by_kb", "chunks_by_doc"],
    ),
    (
        "documents page",
        "SELECT d.id, d.title, d.source, d.content_hash, (SELECT count(*) FROM chunks c WHERE c.doc_id = d.id), d.owner, d.created_at
         FROM documents d
         WHERE d.kb_id = ?1 AND (d.created_at, d.id) > (?2, ?3) AND (?4 OR d.owner IS NULL OR d.owner = ?5)
         ORDER BY d.created_at, d.id LIMIT ?6",
        &["documents_by_kb (kb_id=? AND (created_at,id)>(?,?))", "chunks_by_doc"],
    ),
    (
        "documents of one source",
        "SELECT d.id, d.title, d.source, d.content_hash, (SELECT count(*) FROM chunks c WHERE c.doc_id = d.id), d.owner, d.created_at
         FROM documents d WHERE d.kb_id = ?1 AND d.source = ?2",
        &["documents_by_source (kb_id=? AND source=?)", "chunks_by_doc"],
    ),
    (
        "documents page: count",
        "SELECT count(*) FROM documents WHERE kb_id = ?1",
        &["COVERING INDEX documents_by_"],
    ),
    (
        "documents page: count of what a viewer sees",
        "SELECT (SELECT count(*) FROM documents WHERE kb_id = ?1)
              - (SELECT count(*) FROM documents WHERE kb_id = ?1 AND owner IS NOT NULL)
              + (SELECT count(*) FROM documents WHERE kb_id = ?1 AND owner = ?2)",
        &["COVERING INDEX documents_restricted (kb_id=? AND owner>?)", "COVERING INDEX documents_restricted (kb_id=? AND owner=?)"],
    ),
    (
        "kb_counts",
        "SELECT (SELECT count(*) FROM documents WHERE kb_id = ?1),
                (SELECT count(*) FROM chunks WHERE kb_id = ?1),
                (SELECT count(*) FROM faqs WHERE kb_id = ?1)",
        &["documents_by_", "chunks_by_kb", "faqs_by_"],
    ),
    (
        "document",
        "SELECT title, source, content_hash, tags, created_at, updated_at, text, owner FROM documents WHERE id = ?1 AND kb_id = ?2",
        &["sqlite_autoindex_documents_1"],
    ),
    (
        "document chunks",
        "SELECT id, ordinal, heading_path, text, start_byte, end_byte FROM chunks WHERE doc_id = ?1 ORDER BY ordinal",
        &["chunks_by_doc"],
    ),
    (
        "document_by_hash",
        "SELECT id FROM documents WHERE kb_id = ?1 AND content_hash = ?2 AND owner IS ?3 LIMIT 1",
        &["documents_by_hash"],
    ),
    (
        "document_by_source",
        "SELECT id, created_at FROM documents WHERE kb_id = ?1 AND source = ?2 AND owner IS ?3",
        &["documents_by_source"],
    ),
    (
        "faqs",
        "SELECT id, question, answer, status, edited, source_url, tags, created_at, updated_at, valid_from, valid_until, source_doc
         FROM faqs WHERE kb_id = ?1 ORDER BY created_at, id",
        &["faqs_by_"],
    ),
    (
        "faq by id",
        "SELECT id, question, answer, status, edited, source_url, tags, created_at, updated_at, valid_from, valid_until, source_doc
         FROM faqs WHERE id = ?1 AND kb_id = ?2",
        &["sqlite_autoindex_faqs_1"],
    ),
    (
        "embedding_space",
        "SELECT embed_model, embed_dims FROM kbs WHERE id = ?1",
        &["sqlite_autoindex_kbs_1"],
    ),
    // pages.rs
    (
        "passages page: chunks",
        "SELECT c.id, c.doc_id, d.title, c.heading_path, c.text, d.tags, d.source, c.start_byte, c.end_byte, d.created_at, d.owner, c.ordinal
         FROM documents d JOIN chunks c ON c.doc_id = d.id
         WHERE d.kb_id = ?1 AND (d.created_at, d.id) >= (?2, ?3) AND c.ordinal > CASE WHEN d.id = ?3 THEN ?4 ELSE -1 END
         ORDER BY d.created_at, d.id, c.ordinal LIMIT ?5",
        &["documents_by_kb (kb_id=? AND (created_at,id)>(?,?))", "chunks_by_doc (doc_id=? AND ordinal>?)"],
    ),
    (
        "passages page: FAQ entries",
        "SELECT id, question, answer, status, edited, source_url, tags, created_at, updated_at, valid_from, valid_until, source_doc
         FROM faqs WHERE kb_id = ?1 AND (created_at, id) > (?2, ?3) ORDER BY created_at, id LIMIT ?4",
        &["faqs_by_kb_created (kb_id=? AND (created_at,id)>(?,?))"],
    ),
    (
        "FAQ page of one status",
        "SELECT id, question, answer, status, edited, source_url, tags, created_at, updated_at, valid_from, valid_until, source_doc
         FROM faqs WHERE kb_id = ?1 AND status = ?5 AND (created_at, id) > (?2, ?3) ORDER BY created_at, id LIMIT ?4",
        &["faqs_by_kb_status (kb_id=? AND status=? AND (created_at,id)>(?,?))"],
    ),
    (
        "FAQ page of entries containing a text",
        "SELECT id, question, answer, status, edited, source_url, tags, created_at, updated_at, valid_from, valid_until, source_doc
         FROM faqs WHERE kb_id = ?1 AND (instr(lower(question), ?6) > 0 OR instr(lower(answer), ?6) > 0
                   OR EXISTS (SELECT 1 FROM json_each(faqs.tags) t WHERE instr(lower(t.value), ?6) > 0))
         AND (created_at, id) > (?2, ?3) ORDER BY created_at, id LIMIT ?4",
        &["faqs_by_kb_created (kb_id=? AND (created_at,id)>(?,?))"],
    ),
    (
        "FAQ page: count",
        "SELECT count(*) FROM faqs WHERE kb_id = ?1",
        &["COVERING INDEX faqs_by_"],
    ),
    (
        "FAQ page: count of one status",
        "SELECT count(*) FROM faqs WHERE kb_id = ?1 AND status = ?2",
        &["COVERING INDEX faqs_by_kb_status (kb_id=? AND status=?)"],
    ),
    (
        "passages page: a vector's hash",
        "SELECT text_hash FROM vectors WHERE passage = ?1 AND kb_id = ?2",
        &["sqlite_autoindex_vectors_1"],
    ),
    // snapshot.rs
    (
        "snapshot chunks",
        "SELECT c.id, c.doc_id, d.title, c.heading_path, c.text, d.tags, d.source, c.start_byte, c.end_byte, d.created_at, d.owner
         FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.kb_id = ?1 ORDER BY d.created_at, d.id, c.ordinal",
        &["chunks_by_kb", "sqlite_autoindex_documents_1"],
    ),
    (
        "snapshot facts",
        "SELECT id, key, value, key_synonyms FROM facts WHERE kb_id = ?1 ORDER BY id",
        &["facts_by_kb"],
    ),
    (
        "snapshot vectors",
        "SELECT passage, text_hash, vector FROM vectors WHERE kb_id = ?1 ORDER BY passage",
        &["vectors_by_kb"],
    ),
    (
        "synonyms",
        "SELECT terms FROM synonyms WHERE kb_id = ?1 ORDER BY id",
        &["synonyms_by_kb"],
    ),
    (
        "user words",
        "SELECT word, freq FROM user_words WHERE kb_id = ?1 ORDER BY word",
        &["sqlite_autoindex_user_words_1"],
    ),
    // changes.rs
    (
        "change log",
        "SELECT what, passage FROM kb_changes WHERE kb_id = ?1 AND seq > ?2",
        &["PRIMARY KEY"],
    ),
    (
        "change log prune",
        "DELETE FROM kb_changes WHERE kb_id = ?1 AND seq <= ?2",
        &["PRIMARY KEY"],
    ),
    (
        "changed chunk",
        "SELECT c.id, c.doc_id, d.title, c.heading_path, c.text, d.tags, d.source, c.start_byte, c.end_byte, d.created_at, d.owner
         FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.id = ?1 AND c.kb_id = ?2",
        &["sqlite_autoindex_chunks_1", "sqlite_autoindex_documents_1"],
    ),
    (
        "changed FAQ entry",
        "SELECT id, question, answer, status, edited, source_url, tags, created_at, updated_at, valid_from, valid_until, source_doc
         FROM faqs WHERE id = ?1 AND kb_id = ?2",
        &["sqlite_autoindex_faqs_1"],
    ),
    (
        "changed fact",
        "SELECT id, key, value, key_synonyms FROM facts WHERE id = ?1 AND kb_id = ?2",
        &["sqlite_autoindex_facts_1"],
    ),
    (
        "changed vector",
        "SELECT passage, text_hash, vector FROM vectors WHERE passage = ?1 AND kb_id = ?2",
        &["sqlite_autoindex_vectors_1"],
    ),
    // write.rs
    (
        "a document's chunks before it goes",
        "SELECT 'chunk:' || id FROM chunks WHERE doc_id = ?2 AND kb_id = ?1",
        &["chunks_by_"],
    ),
    (
        "delete a document's vectors",
        "DELETE FROM vectors WHERE +kb_id = ?1 AND passage IN (SELECT 'chunk:' || id FROM chunks WHERE doc_id = ?2)",
        &["sqlite_autoindex_vectors_1", "chunks_by_doc"],
    ),
    (
        "delete a document",
        "DELETE FROM documents WHERE id = ?1 AND kb_id = ?2",
        &["sqlite_autoindex_documents_1"],
    ),
    (
        "unedited drafts",
        "SELECT 'faq:' || id FROM faqs WHERE kb_id = ?1 AND source_doc = ?2 AND edited = 0",
        &["faqs_by_source_doc"],
    ),
    (
        "delete unedited drafts' vectors",
        "DELETE FROM vectors WHERE +kb_id = ?1 AND passage IN
           (SELECT 'faq:' || id FROM faqs WHERE kb_id = ?1 AND source_doc = ?2 AND edited = 0)",
        &["sqlite_autoindex_vectors_1", "faqs_by_source_doc"],
    ),
    (
        "delete unedited drafts",
        "DELETE FROM faqs WHERE kb_id = ?1 AND source_doc = ?2 AND edited = 0",
        &["faqs_by_source_doc"],
    ),
    (
        "unlink edited drafts",
        "UPDATE faqs SET source_doc = NULL WHERE kb_id = ?1 AND source_doc = ?2",
        &["faqs_by_source_doc"],
    ),
    (
        "relink drafts",
        "UPDATE faqs SET source_doc = ?3 WHERE kb_id = ?1 AND source_doc = ?2 AND edited = 1",
        &["faqs_by_source_doc"],
    ),
    (
        "document exists",
        "SELECT 1 FROM documents WHERE id = ?1 AND kb_id = ?2",
        &["sqlite_autoindex_documents_1"],
    ),
    (
        "FAQ entry exists",
        "SELECT 1 FROM faqs WHERE id = ?1 AND kb_id = ?2",
        &["sqlite_autoindex_faqs_1"],
    ),
    (
        "delete a passage's vector",
        "DELETE FROM vectors WHERE passage = ?1 AND kb_id = ?2",
        &["sqlite_autoindex_vectors_1"],
    ),
    (
        "delete an FAQ entry",
        "DELETE FROM faqs WHERE id = ?1 AND kb_id = ?2",
        &["sqlite_autoindex_faqs_1"],
    ),
    (
        "delete a fact",
        "DELETE FROM facts WHERE id = ?1 AND kb_id = ?2",
        &["sqlite_autoindex_facts_1"],
    ),
    (
        "clear vectors",
        "DELETE FROM vectors WHERE kb_id = ?1",
        &["vectors_by_kb"],
    ),
    // sources.rs
    (
        "sources",
        "SELECT id, url, depth, max_pages, owner, status, reason, created_at, last_sync, pages
         FROM sources WHERE kb_id = ?1 ORDER BY created_at, id",
        &["sources_by_kb"],
    ),
    (
        "delete a source",
        "DELETE FROM sources WHERE id = ?1 AND kb_id = ?2",
        &["sqlite_autoindex_sources_1"],
    ),
    // log.rs
    (
        "query log",
        "SELECT record, feedback FROM query_log
         WHERE tenant = ?1 AND kb_id = ?2
           AND (?3 IS NULL OR kb_miss = ?3)
           AND (?4 IS NULL OR conversation = ?4)
           AND (?5 IS NULL OR created_at >= ?5)
           AND (?7 = 1 OR owner IS NULL OR owner = ?8)
         ORDER BY created_at DESC, id DESC LIMIT ?6",
        &["query_log_by_kb"],
    ),
    (
        "a log row",
        "SELECT record, feedback FROM query_log WHERE id = ?1 AND tenant = ?2 AND (?3 = 1 OR owner IS NULL OR owner = ?4)",
        &["sqlite_autoindex_query_log_1"],
    ),
    (
        "delete a conversation",
        "DELETE FROM query_log WHERE tenant = ?1 AND kb_id = ?2 AND conversation = ?3 AND (?4 = 1 OR owner IS NULL OR owner = ?5)",
        &["query_log_by_"],
    ),
    // keys.rs
    (
        "key by hash",
        "SELECT id FROM api_keys WHERE hash = ?1",
        &["sqlite_autoindex_api_keys_2"],
    ),
];

/// Tables whose full scan would grow with the content.
const CONTENT_TABLES: &[&str] = &[
    "chunks",
    "documents",
    "faqs",
    "facts",
    "vectors",
    "synonyms",
    "user_words",
    "kb_changes",
    "sources",
    "query_log",
    "c",
    "d",
];

fn plan(conn: &rusqlite::Connection, sql: &str) -> Vec<String> {
    let mut stmt = conn
        .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let n = stmt.parameter_count();
    let values: Vec<String> = (0..n).map(|i| format!("value{i}")).collect();
    stmt.query_map(rusqlite::params_from_iter(values.iter()), |r| {
        r.get::<_, String>(3)
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

#[test]
fn every_store_query_uses_an_index() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path(), OpenMode::ReadWrite).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // A small knowledge base, so the tables and indexes hold something.
    rt.block_on(async {
        let tenant = TenantId::default_tenant();
        for name in ["a", "b"] {
            let kb = store
                .create_kb(&tenant, name, KbSettings::default())
                .await
                .unwrap()
                .id;
            let mut ops = Vec::new();
            for i in 0..20 {
                let id = DocId::generate();
                ops.push(WriteOp::PutDocument {
                    document: Document {
                        id,
                        kb,
                        title: format!("doc {i}"),
                        source: format!("{i}.md"),
                        content_hash: format!("h{i}"),
                        tags: vec![],
                        created_at: i,
                        updated_at: i,
                        text: "some text".into(),
                        owner: None,
                    },
                    chunks: vec![Chunk {
                        id: ChunkId::generate(),
                        doc: id,
                        ordinal: 0,
                        heading_path: vec![],
                        text: "some text".into(),
                        start: 0,
                        end: 9,
                    }],
                });
            }
            ops.push(WriteOp::AddSynonyms(SynonymGroup {
                terms: vec!["a".into(), "b".into()],
            }));
            store.apply(&tenant, kb, ops).await.unwrap();
        }
    });
    let conn = rusqlite::Connection::open(dir.path().join("ragscope.sqlite3")).unwrap();
    let mut failures = Vec::new();
    for (what, sql, indexes) in QUERIES {
        let plan = plan(&conn, sql);
        let scans: Vec<&String> = plan
            .iter()
            .filter(|d| {
                CONTENT_TABLES
                    .iter()
                    .any(|t| d.starts_with(&format!("SCAN {t}")))
            })
            .collect();
        if !scans.is_empty() {
            failures.push(format!("{what}: full scan {scans:?} in {plan:?}"));
        }
        // A page is the first rows of its range, not a sort of them all
        // (sorting one document's chunks at a time, "FOR RIGHT PART OF
        // ORDER BY", still stops at the page's end).
        if what.starts_with("passages page")
            && plan
                .iter()
                .any(|d| d.contains("USE TEMP B-TREE FOR ORDER BY"))
        {
            failures.push(format!("{what}: a sort in {plan:?}"));
        }
        for index in *indexes {
            if !plan.iter().any(|d| d.contains(index)) {
                failures.push(format!("{what}: no {index} in {plan:?}"));
            }
        }
        eprintln!("{what}: {plan:?}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
