//! [`EmbeddedStore`]: the SQLite-backed store.

use crate::error::StoreError;
use crate::lock::DirLock;
use crate::schema::{FORMAT_VERSION, SCHEMA_V1, SCHEMA_V2, SCHEMA_V3, V3_COLUMNS};
use async_trait::async_trait;
use rag_core::{
    failpoint, Chunk, ChunkId, CoreError, DocId, Document, DocumentInfo, EmbeddingSpace, FactId,
    FaqEntry, FaqId, FaqStatus, KbId, KbSettings, KbSnapshot, KnowledgeBase, Passage, PassageId,
    PassageVector, StoreRead, StoreWrite, SynonymGroup, TenantId, UserError, UserWord, WriteOp,
};
use rusqlite::{params, Connection, OpenFlags, OptionalExtension, Transaction};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// How to open a data directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Take the directory's lock; create it if needed.
    ReadWrite,
    /// No lock; the database must exist. Readers never block the writer.
    ReadOnly,
}

/// What the store found when it opened.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreInfo {
    /// Store format on disk.
    pub format_version: u32,
    /// Analyzer recorded by the last writer, if any.
    pub recorded_analyzer: Option<String>,
    /// Whether the recorded analyzer differs from the running one (derived
    /// indexes are then rebuilt, which the engine does on every open anyway).
    pub analyzer_changed: bool,
}

/// The embedded store. Cheap to clone; all clones share one connection.
#[derive(Clone)]
pub struct EmbeddedStore {
    inner: Arc<Inner>,
}

struct Inner {
    conn: Mutex<Connection>,
    dir: PathBuf,
    info: StoreInfo,
    _lock: Option<DirLock>,
}

impl std::fmt::Debug for EmbeddedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedStore")
            .field("dir", &self.inner.dir)
            .finish()
    }
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> StoreError + 'a {
    move |source| StoreError::Io {
        op,
        path: path.to_owned(),
        source,
    }
}

impl EmbeddedStore {
    /// Opens (and in read-write mode creates) the store in `dir`, recording
    /// the analyzer `analyzer` ("name:version") as the one indexing it.
    pub fn open_with_analyzer(
        dir: &Path,
        mode: OpenMode,
        analyzer: &str,
    ) -> Result<Self, StoreError> {
        let db = dir.join("ragscope.sqlite3");
        let (conn, lock) = match mode {
            OpenMode::ReadWrite => {
                std::fs::create_dir_all(dir).map_err(io("create", dir))?;
                let lock = DirLock::acquire(dir)?;
                (Connection::open(&db)?, Some(lock))
            }
            OpenMode::ReadOnly => {
                if !db.exists() {
                    return Err(StoreError::Missing(dir.to_owned()));
                }
                (
                    Connection::open_with_flags(
                        &db,
                        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                    )?,
                    None,
                )
            }
        };
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        let info = if mode == OpenMode::ReadWrite {
            conn.pragma_update(None, "journal_mode", "WAL")?;
            conn.pragma_update(None, "synchronous", "FULL")?;
            Self::init_schema(&conn, analyzer)?
        } else {
            Self::read_info(&conn, analyzer)?
        };
        Ok(EmbeddedStore {
            inner: Arc::new(Inner {
                conn: Mutex::new(conn),
                dir: dir.to_owned(),
                info,
                _lock: lock,
            }),
        })
    }

    /// Opens with the current analyzer name and version recorded.
    pub fn open(dir: &Path, mode: OpenMode) -> Result<Self, StoreError> {
        Self::open_with_analyzer(dir, mode, "unspecified")
    }

    /// What the store found when it opened.
    pub fn info(&self) -> &StoreInfo {
        &self.inner.info
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    fn read_info(conn: &Connection, analyzer: &str) -> Result<StoreInfo, StoreError> {
        let get = |k: &str| -> Result<Option<String>, rusqlite::Error> {
            conn.query_row("SELECT value FROM meta WHERE key = ?1", [k], |r| r.get(0))
                .optional()
        };
        let format_version = get("format_version")?
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if format_version > FORMAT_VERSION {
            return Err(StoreError::NewerFormat {
                found: format_version,
                supported: FORMAT_VERSION,
            });
        }
        let recorded_analyzer = get("analyzer")?;
        let analyzer_changed = recorded_analyzer.as_deref().is_some_and(|a| a != analyzer);
        Ok(StoreInfo {
            format_version,
            recorded_analyzer,
            analyzer_changed,
        })
    }

    fn init_schema(conn: &Connection, analyzer: &str) -> Result<StoreInfo, StoreError> {
        let has_meta: bool = conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='meta'",
            [],
            |r| r.get::<_, i64>(0),
        )? > 0;
        let info = if has_meta {
            Some(Self::read_info(conn, analyzer)?)
        } else {
            None
        };
        // Format 1 is the first; future formats migrate here, step by step.
        conn.execute_batch(SCHEMA_V1)?;
        conn.execute_batch(SCHEMA_V2)?;
        conn.execute_batch(SCHEMA_V3)?;
        for (table, column, decl) in V3_COLUMNS {
            let present: bool = conn.query_row(
                &format!("SELECT count(*) FROM pragma_table_info('{table}') WHERE name = ?1"),
                [column],
                |r| r.get::<_, i64>(0),
            )? > 0;
            if !present {
                conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {decl}"))?;
            }
        }
        conn.execute(
            "INSERT INTO meta(key, value) VALUES ('format_version', ?1) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            [FORMAT_VERSION.to_string()],
        )?;
        conn.execute(
            "INSERT INTO meta(key, value) VALUES ('analyzer', ?1) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            [analyzer],
        )?;
        if let Some(i) = &info {
            if i.analyzer_changed {
                tracing::info!(from = ?i.recorded_analyzer, to = analyzer, "analyzer changed; lexical indexes are rebuilt from the stored text");
            }
        }
        Ok(info
            .map(|i| StoreInfo {
                format_version: FORMAT_VERSION,
                ..i
            })
            .unwrap_or(StoreInfo {
                format_version: FORMAT_VERSION,
                recorded_analyzer: None,
                analyzer_changed: false,
            }))
    }

    /// Runs `f` with the connection on a blocking thread.
    pub(crate) async fn with_conn<T, F>(&self, f: F) -> Result<T, CoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, CoreError> + Send + 'static,
    {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let mut conn = inner.conn.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut conn)
        })
        .await
        .map_err(|e| CoreError::Store(format!("store task failed: {e}")))?
    }
}

pub(crate) fn sql(e: rusqlite::Error) -> CoreError {
    StoreError::Sqlite(e).into()
}

fn json_vec(s: &str, table: &'static str, column: &'static str) -> Result<Vec<String>, CoreError> {
    serde_json::from_str(s).map_err(|e| {
        StoreError::Corrupt {
            table,
            column,
            detail: e.to_string(),
        }
        .into()
    })
}

fn parse_id<T>(s: &str, table: &'static str, parse: fn(&str) -> Option<T>) -> Result<T, CoreError> {
    parse(s).ok_or_else(|| {
        StoreError::Corrupt {
            table,
            column: "id",
            detail: format!("bad id {s:?}"),
        }
        .into()
    })
}

/// Checks that `kb` belongs to `tenant`. Every content query goes through it,
/// so one tenant can never read or write another's knowledge base.
fn owned(conn: &Connection, tenant: &TenantId, kb: KbId) -> Result<(), CoreError> {
    let found: Option<i64> = conn
        .query_row(
            "SELECT 1 FROM kbs WHERE id = ?1 AND tenant = ?2",
            params![kb.to_string(), tenant.0],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql)?;
    match found {
        Some(_) => Ok(()),
        None => Err(UserError::UnknownKb {
            name: kb.to_string(),
        }
        .into()),
    }
}

fn kb_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(String, String, String, i64, String)> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
}

fn to_kb(
    (id, tenant, name, created_at, settings): (String, String, String, i64, String),
) -> Result<KnowledgeBase, CoreError> {
    Ok(KnowledgeBase {
        id: parse_id(&id, "kbs", KbId::parse)?,
        tenant: TenantId(tenant),
        name,
        created_at,
        settings: serde_json::from_str(&settings).map_err(|e| StoreError::Corrupt {
            table: "kbs",
            column: "settings",
            detail: e.to_string(),
        })?,
    })
}

/// Little-endian f32 bytes.
pub(crate) fn vector_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The inverse of [`vector_bytes`].
pub(crate) fn vector_from_bytes(b: &[u8]) -> Option<Vec<f32>> {
    b.len().is_multiple_of(4).then(|| {
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    })
}

fn delete_document(tx: &Transaction<'_>, kb_s: &str, id: &str) -> Result<(), CoreError> {
    tx.execute(
        "DELETE FROM vectors WHERE kb_id = ?1 AND passage IN (SELECT 'chunk:' || id FROM chunks WHERE doc_id = ?2)",
        params![kb_s, id],
    )
    .map_err(sql)?;
    tx.execute(
        "DELETE FROM documents WHERE id = ?1 AND kb_id = ?2",
        params![id, kb_s],
    )
    .map_err(sql)?;
    Ok(())
}

/// Deletes the FAQ entries drafted from document `doc` that nobody edited, with their vectors.
fn delete_unedited_drafts(tx: &Transaction<'_>, kb_s: &str, doc: &str) -> Result<(), CoreError> {
    tx.execute(
        "DELETE FROM vectors WHERE kb_id = ?1 AND passage IN
           (SELECT 'faq:' || id FROM faqs WHERE kb_id = ?1 AND source_doc = ?2 AND edited = 0)",
        params![kb_s, doc],
    )
    .map_err(sql)?;
    tx.execute(
        "DELETE FROM faqs WHERE kb_id = ?1 AND source_doc = ?2 AND edited = 0",
        params![kb_s, doc],
    )
    .map_err(sql)?;
    Ok(())
}

fn document_exists(tx: &Transaction<'_>, kb_s: &str, doc: &str) -> Result<bool, CoreError> {
    let found: Option<i64> = tx
        .query_row(
            "SELECT 1 FROM documents WHERE id = ?1 AND kb_id = ?2",
            params![doc, kb_s],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql)?;
    Ok(found.is_some())
}

fn apply_op(tx: &Transaction<'_>, kb: KbId, op: WriteOp) -> Result<(), CoreError> {
    let kb_s = kb.to_string();
    match op {
        WriteOp::PutDocument {
            document: d,
            chunks,
        } => {
            delete_document(tx, &kb_s, &d.id.to_string())?;
            tx.execute(
                "INSERT INTO documents (id, kb_id, title, source, content_hash, tags, created_at, updated_at, text, owner)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![
                    d.id.to_string(),
                    kb_s,
                    d.title,
                    d.source,
                    d.content_hash,
                    serde_json::to_string(&d.tags).unwrap_or_default(),
                    d.created_at,
                    d.updated_at,
                    d.text,
                    d.owner
                ],
            )
            .map_err(sql)?;
            let mut stmt = tx
                .prepare_cached(
                    "INSERT INTO chunks (id, doc_id, kb_id, ordinal, heading_path, text, start_byte, end_byte)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )
                .map_err(sql)?;
            for (i, c) in chunks.iter().enumerate() {
                stmt.execute(params![
                    c.id.to_string(),
                    d.id.to_string(),
                    kb_s,
                    c.ordinal,
                    serde_json::to_string(&c.heading_path).unwrap_or_default(),
                    c.text,
                    c.start as i64,
                    c.end as i64
                ])
                .map_err(sql)?;
                if i + 1 == chunks.len().div_ceil(2)
                    && failpoint::hit("store.put_document.mid_chunks")
                {
                    return Err(StoreError::Failpoint("store.put_document.mid_chunks").into());
                }
            }
        }
        WriteOp::DeleteDocument(id) => {
            // Its drafts: unedited ones go with it; edited ones are human
            // knowledge now and stay, unlinked.
            let id = id.to_string();
            delete_unedited_drafts(tx, &kb_s, &id)?;
            tx.execute(
                "UPDATE faqs SET source_doc = NULL WHERE kb_id = ?1 AND source_doc = ?2",
                params![kb_s, id],
            )
            .map_err(sql)?;
            delete_document(tx, &kb_s, &id)?;
        }
        WriteOp::DeleteUneditedDrafts(doc) => delete_unedited_drafts(tx, &kb_s, &doc.to_string())?,
        WriteOp::RelinkDrafts { from, to } => {
            if !document_exists(tx, &kb_s, &to.to_string())? {
                return Err(UserError::NotFound {
                    what: "document",
                    id: to.to_string(),
                }
                .into());
            }
            tx.execute(
                "UPDATE faqs SET source_doc = ?3 WHERE kb_id = ?1 AND source_doc = ?2 AND edited = 1",
                params![kb_s, from.to_string(), to.to_string()],
            )
            .map_err(sql)?;
        }
        WriteOp::PutFaq(f) => {
            let id = f.id.to_string();
            let exists: Option<i64> = tx
                .query_row(
                    "SELECT 1 FROM faqs WHERE id = ?1 AND kb_id = ?2",
                    params![id, kb_s],
                    |r| r.get(0),
                )
                .optional()
                .map_err(sql)?;
            // A new draft must point at a document of this knowledge base
            // (it may have been deleted while the LLM was drafting).
            if let (None, Some(doc)) = (exists, f.source_doc) {
                if !document_exists(tx, &kb_s, &doc.to_string())? {
                    return Err(UserError::NotFound {
                        what: "document",
                        id: doc.to_string(),
                    }
                    .into());
                }
            }
            // On update the stored source_doc is kept: links change only
            // through the draft operations, so an edit racing a re-sync
            // cannot point an entry back at a deleted document.
            tx.execute(
                "INSERT INTO faqs (id, kb_id, question, answer, status, edited, source_url, tags, created_at, updated_at, valid_from, valid_until, source_doc)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
                 ON CONFLICT(id) DO UPDATE SET question = excluded.question, answer = excluded.answer, status = excluded.status,
                   edited = excluded.edited, source_url = excluded.source_url, tags = excluded.tags, updated_at = excluded.updated_at,
                   valid_from = excluded.valid_from, valid_until = excluded.valid_until
                 WHERE faqs.kb_id = excluded.kb_id",
                params![
                    id,
                    kb_s,
                    f.question,
                    f.answer,
                    f.status.as_str(),
                    f.edited,
                    f.source_url,
                    serde_json::to_string(&f.tags).unwrap_or_default(),
                    f.created_at,
                    f.updated_at,
                    f.valid_from,
                    f.valid_until,
                    f.source_doc.map(|d| d.to_string())
                ],
            )
            .map_err(sql)?;
        }
        WriteOp::DeleteFaq(id) => {
            tx.execute(
                "DELETE FROM vectors WHERE passage = ?1 AND kb_id = ?2",
                params![PassageId::Faq(id).to_string(), kb_s],
            )
            .map_err(sql)?;
            tx.execute(
                "DELETE FROM faqs WHERE id = ?1 AND kb_id = ?2",
                params![id.to_string(), kb_s],
            )
            .map_err(sql)?;
        }
        WriteOp::PutFact(f) => {
            tx.execute(
                "INSERT INTO facts (id, kb_id, key, value, key_synonyms) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT(id) DO UPDATE SET key = excluded.key, value = excluded.value, key_synonyms = excluded.key_synonyms
                 WHERE facts.kb_id = excluded.kb_id",
                params![f.id.to_string(), kb_s, f.key, f.value, serde_json::to_string(&f.key_synonyms).unwrap_or_default()],
            )
            .map_err(sql)?;
        }
        WriteOp::PutSettings(settings) => {
            let json = serde_json::to_string(&settings)
                .map_err(|e| CoreError::Store(format!("settings: {e}")))?;
            tx.execute(
                "UPDATE kbs SET settings = ?1 WHERE id = ?2",
                params![json, kb_s],
            )
            .map_err(sql)?;
        }
        WriteOp::DeleteFact(id) => {
            tx.execute(
                "DELETE FROM vectors WHERE passage = ?1 AND kb_id = ?2",
                params![PassageId::Fact(id).to_string(), kb_s],
            )
            .map_err(sql)?;
            tx.execute(
                "DELETE FROM facts WHERE id = ?1 AND kb_id = ?2",
                params![id.to_string(), kb_s],
            )
            .map_err(sql)?;
        }
        WriteOp::PutVectors { space, vectors } => {
            let stored: (Option<String>, Option<i64>) = tx
                .query_row(
                    "SELECT embed_model, embed_dims FROM kbs WHERE id = ?1",
                    [&kb_s],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .map_err(sql)?;
            match stored {
                (Some(model), Some(dims))
                    if model != space.model_id || dims as usize != space.dims =>
                {
                    return Err(UserError::EmbeddingSpaceMismatch {
                        stored_model: model,
                        stored_dims: dims as usize,
                        configured_model: space.model_id,
                        configured_dims: space.dims,
                    }
                    .into());
                }
                (Some(_), Some(_)) => {}
                _ => {
                    tx.execute(
                        "UPDATE kbs SET embed_model = ?1, embed_dims = ?2 WHERE id = ?3",
                        params![space.model_id, space.dims as i64, kb_s],
                    )
                    .map_err(sql)?;
                }
            }
            let mut stmt = tx
                .prepare_cached("INSERT OR REPLACE INTO vectors (passage, kb_id, text_hash, vector) VALUES (?1, ?2, ?3, ?4)")
                .map_err(sql)?;
            for v in vectors {
                if v.vector.len() != space.dims {
                    return Err(UserError::InvalidParam {
                        name: "vector",
                        reason: format!(
                            "a vector has {} dimensions in a {}-dimensional space",
                            v.vector.len(),
                            space.dims
                        ),
                    }
                    .into());
                }
                stmt.execute(params![
                    v.id.to_string(),
                    kb_s,
                    v.text_hash,
                    vector_bytes(&v.vector)
                ])
                .map_err(sql)?;
            }
        }
        WriteOp::PutSource(source) => crate::sources::put(tx, kb, &source)?,
        WriteOp::DeleteSource(id) => crate::sources::delete(tx, kb, id)?,
        WriteOp::ClearVectors => {
            tx.execute("DELETE FROM vectors WHERE kb_id = ?1", [&kb_s])
                .map_err(sql)?;
            tx.execute(
                "UPDATE kbs SET embed_model = NULL, embed_dims = NULL WHERE id = ?1",
                [&kb_s],
            )
            .map_err(sql)?;
        }
        WriteOp::AddSynonyms(g) => {
            tx.execute(
                "INSERT INTO synonyms (kb_id, terms) VALUES (?1, ?2)",
                params![kb_s, serde_json::to_string(&g.terms).unwrap_or_default()],
            )
            .map_err(sql)?;
        }
        WriteOp::AddUserWord(w) => {
            tx.execute(
                "INSERT INTO user_words (kb_id, word, freq) VALUES (?1, ?2, ?3)
                 ON CONFLICT(kb_id, word) DO UPDATE SET freq = excluded.freq",
                params![kb_s, w.word, w.freq],
            )
            .map_err(sql)?;
        }
    }
    Ok(())
}

fn load_snapshot(conn: &Connection, kb: KbId) -> Result<KbSnapshot, CoreError> {
    let kb_s = kb.to_string();
    let seq: i64 = conn
        .query_row("SELECT seq FROM kbs WHERE id = ?1", [&kb_s], |r| r.get(0))
        .map_err(sql)?;
    let mut passages = Vec::new();

    let mut stmt = conn
        .prepare(
            "SELECT c.id, c.doc_id, d.title, c.heading_path, c.text, d.tags, d.source, c.start_byte, c.end_byte, d.created_at, d.owner
             FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.kb_id = ?1 ORDER BY d.created_at, d.id, c.ordinal",
        )
        .map_err(sql)?;
    let rows = stmt
        .query_map([&kb_s], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, String>(5)?,
                r.get::<_, String>(6)?,
                r.get::<_, i64>(7)?,
                r.get::<_, i64>(8)?,
                r.get::<_, i64>(9)?,
                r.get::<_, Option<String>>(10)?,
            ))
        })
        .map_err(sql)?;
    for row in rows {
        let (id, doc, title, headings, text, tags, source, start, end, created_at, owner) =
            row.map_err(sql)?;
        let headings = json_vec(&headings, "chunks", "heading_path")?;
        // The title field carries the document title and the headings above the chunk.
        let full_title = rag_core::chunk_title(&title, &headings);
        passages.push(Passage {
            id: PassageId::Chunk(parse_id(&id, "chunks", ChunkId::parse)?),
            title: full_title,
            body: text,
            tags: json_vec(&tags, "documents", "tags")?,
            aliases: Vec::new(),
            doc: Some(parse_id(&doc, "documents", DocId::parse)?),
            source: Some(source),
            span: Some((start as usize, end as usize)),
            created_at,
            valid_from: None,
            valid_until: None,
            searchable: true,
            owner,
        });
    }

    passages.extend(read_faqs(conn, kb)?.into_iter().map(Passage::from));

    let mut stmt = conn
        .prepare("SELECT id, key, value, key_synonyms FROM facts WHERE kb_id = ?1 ORDER BY id")
        .map_err(sql)?;
    let rows = stmt
        .query_map([&kb_s], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
            ))
        })
        .map_err(sql)?;
    for row in rows {
        let (id, key, value, syn) = row.map_err(sql)?;
        let key_synonyms = json_vec(&syn, "facts", "key_synonyms")?;
        passages.push(Passage::from(rag_core::Fact {
            id: parse_id(&id, "facts", FactId::parse)?,
            kb,
            key,
            value,
            key_synonyms,
        }));
    }

    let mut stmt = conn
        .prepare("SELECT terms FROM synonyms WHERE kb_id = ?1 ORDER BY id")
        .map_err(sql)?;
    let synonyms = stmt
        .query_map([&kb_s], |r| r.get::<_, String>(0))
        .map_err(sql)?
        .map(|r| {
            r.map_err(sql).and_then(|t| {
                Ok(SynonymGroup {
                    terms: json_vec(&t, "synonyms", "terms")?,
                })
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut stmt = conn
        .prepare("SELECT word, freq FROM user_words WHERE kb_id = ?1 ORDER BY word")
        .map_err(sql)?;
    let user_words = stmt
        .query_map([&kb_s], |r| {
            Ok(UserWord {
                word: r.get(0)?,
                freq: r.get(1)?,
            })
        })
        .map_err(sql)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(sql)?;
    let (model, dims): (Option<String>, Option<i64>) = conn
        .query_row(
            "SELECT embed_model, embed_dims FROM kbs WHERE id = ?1",
            [&kb_s],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(sql)?;
    let space = model.zip(dims).map(|(model_id, dims)| EmbeddingSpace {
        model_id,
        dims: dims as usize,
    });
    let mut stmt = conn
        .prepare("SELECT passage, text_hash, vector FROM vectors WHERE kb_id = ?1 ORDER BY passage")
        .map_err(sql)?;
    let rows = stmt
        .query_map([&kb_s], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Vec<u8>>(2)?,
            ))
        })
        .map_err(sql)?;
    let mut vectors = Vec::new();
    for row in rows {
        let (passage, text_hash, bytes) = row.map_err(sql)?;
        let id = PassageId::parse(&passage).ok_or_else(|| StoreError::Corrupt {
            table: "vectors",
            column: "passage",
            detail: passage.clone(),
        })?;
        let vector = vector_from_bytes(&bytes).ok_or_else(|| StoreError::Corrupt {
            table: "vectors",
            column: "vector",
            detail: format!("{} bytes", bytes.len()),
        })?;
        vectors.push(PassageVector {
            id,
            text_hash,
            vector,
        });
    }
    Ok(KbSnapshot {
        seq: seq as u64,
        passages,
        synonyms,
        user_words,
        space,
        vectors,
    })
}

fn read_faqs(conn: &Connection, kb: KbId) -> Result<Vec<FaqEntry>, CoreError> {
    let mut stmt = conn
        .prepare(
            "SELECT id, question, answer, status, edited, source_url, tags, created_at, updated_at, valid_from, valid_until, source_doc
             FROM faqs WHERE kb_id = ?1 ORDER BY created_at, id",
        )
        .map_err(sql)?;
    let rows = stmt
        .query_map([kb.to_string()], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, bool>(4)?,
                r.get::<_, Option<String>>(5)?,
                r.get::<_, String>(6)?,
                r.get::<_, i64>(7)?,
                r.get::<_, i64>(8)?,
                r.get::<_, Option<i64>>(9)?,
                r.get::<_, Option<i64>>(10)?,
                r.get::<_, Option<String>>(11)?,
            ))
        })
        .map_err(sql)?;
    let mut out = Vec::new();
    for row in rows {
        let (
            id,
            question,
            answer,
            status,
            edited,
            source_url,
            tags,
            created_at,
            updated_at,
            valid_from,
            valid_until,
            source_doc,
        ) = row.map_err(sql)?;
        out.push(FaqEntry {
            id: parse_id(&id, "faqs", FaqId::parse)?,
            kb,
            question,
            answer,
            status: FaqStatus::parse(&status).ok_or(StoreError::Corrupt {
                table: "faqs",
                column: "status",
                detail: status.clone(),
            })?,
            edited,
            source_url,
            tags: json_vec(&tags, "faqs", "tags")?,
            created_at,
            updated_at,
            valid_from,
            valid_until,
            source_doc: source_doc
                .map(|d| parse_id(&d, "faqs", DocId::parse))
                .transpose()?,
        });
    }
    Ok(out)
}

#[async_trait]
impl StoreRead for EmbeddedStore {
    async fn list_kbs(&self, tenant: &TenantId) -> Result<Vec<KnowledgeBase>, CoreError> {
        let tenant = tenant.clone();
        self.with_conn(move |c| {
            let mut stmt = c
                .prepare("SELECT id, tenant, name, created_at, settings FROM kbs WHERE tenant = ?1 ORDER BY name")
                .map_err(sql)?;
            let rows = stmt.query_map([&tenant.0], kb_from_row).map_err(sql)?;
            rows.map(|r| r.map_err(sql).and_then(to_kb)).collect()
        })
        .await
    }

    async fn kb_by_name(
        &self,
        tenant: &TenantId,
        name: &str,
    ) -> Result<Option<KnowledgeBase>, CoreError> {
        let (tenant, name) = (tenant.clone(), name.to_owned());
        self.with_conn(move |c| {
            c.query_row(
                "SELECT id, tenant, name, created_at, settings FROM kbs WHERE tenant = ?1 AND name = ?2",
                params![tenant.0, name],
                kb_from_row,
            )
            .optional()
            .map_err(sql)?
            .map(to_kb)
            .transpose()
        })
        .await
    }

    async fn kb_seq(&self, tenant: &TenantId, kb: KbId) -> Result<u64, CoreError> {
        let tenant = tenant.clone();
        self.with_conn(move |c| {
            let seq: Option<i64> = c
                .query_row(
                    "SELECT seq FROM kbs WHERE id = ?1 AND tenant = ?2",
                    params![kb.to_string(), tenant.0],
                    |r| r.get(0),
                )
                .optional()
                .map_err(sql)?;
            seq.map(|s| s as u64).ok_or_else(|| {
                UserError::UnknownKb {
                    name: kb.to_string(),
                }
                .into()
            })
        })
        .await
    }

    async fn snapshot(&self, tenant: &TenantId, kb: KbId) -> Result<KbSnapshot, CoreError> {
        let tenant = tenant.clone();
        self.with_conn(move |c| {
            // One read transaction: the snapshot is consistent with its seq.
            let tx = c.transaction().map_err(sql)?;
            owned(&tx, &tenant, kb)?;
            let snap = load_snapshot(&tx, kb)?;
            tx.finish().map_err(sql)?;
            Ok(snap)
        })
        .await
    }

    async fn documents(&self, tenant: &TenantId, kb: KbId) -> Result<Vec<DocumentInfo>, CoreError> {
        let tenant = tenant.clone();
        self.with_conn(move |c| {
            owned(c, &tenant, kb)?;
            let mut stmt = c
                .prepare(
                    "SELECT d.id, d.title, d.source, d.content_hash, (SELECT count(*) FROM chunks c WHERE c.doc_id = d.id), d.owner
                     FROM documents d WHERE d.kb_id = ?1 ORDER BY d.created_at, d.id",
                )
                .map_err(sql)?;
            let rows = stmt
                .query_map([kb.to_string()], |r| {
                    Ok((r.get::<_, String>(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get::<_, i64>(4)?, r.get(5)?))
                })
                .map_err(sql)?;
            let mut out = Vec::new();
            for row in rows {
                let (id, title, source, content_hash, chunks, owner) = row.map_err(sql)?;
                out.push(DocumentInfo {
                    id: parse_id(&id, "documents", DocId::parse)?,
                    title,
                    source,
                    content_hash,
                    chunks: chunks as usize,
                    owner,
                });
            }
            Ok(out)
        })
        .await
    }

    async fn document(
        &self,
        tenant: &TenantId,
        kb: KbId,
        doc: DocId,
    ) -> Result<Option<(Document, Vec<Chunk>)>, CoreError> {
        let tenant = tenant.clone();
        self.with_conn(move |c| {
            owned(c, &tenant, kb)?;
            let row = c
                .query_row(
                    "SELECT title, source, content_hash, tags, created_at, updated_at, text, owner FROM documents WHERE id = ?1 AND kb_id = ?2",
                    params![doc.to_string(), kb.to_string()],
                    |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, String>(2)?,
                            r.get::<_, String>(3)?,
                            r.get::<_, i64>(4)?,
                            r.get::<_, i64>(5)?,
                            r.get::<_, String>(6)?,
                            r.get::<_, Option<String>>(7)?,
                        ))
                    },
                )
                .optional()
                .map_err(sql)?;
            let Some((title, source, content_hash, tags, created_at, updated_at, text, owner)) = row else { return Ok(None) };
            let document = Document {
                id: doc,
                kb,
                title,
                source,
                content_hash,
                tags: json_vec(&tags, "documents", "tags")?,
                created_at,
                updated_at,
                text,
                owner,
            };
            let mut stmt = c
                .prepare("SELECT id, ordinal, heading_path, text, start_byte, end_byte FROM chunks WHERE doc_id = ?1 ORDER BY ordinal")
                .map_err(sql)?;
            let rows = stmt
                .query_map([doc.to_string()], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, i64>(4)?,
                        r.get::<_, i64>(5)?,
                    ))
                })
                .map_err(sql)?;
            let mut chunks = Vec::new();
            for row in rows {
                let (id, ordinal, heading_path, text, start, end) = row.map_err(sql)?;
                chunks.push(Chunk {
                    id: parse_id(&id, "chunks", ChunkId::parse)?,
                    doc,
                    ordinal: ordinal as u32,
                    heading_path: json_vec(&heading_path, "chunks", "heading_path")?,
                    text,
                    start: start as usize,
                    end: end as usize,
                });
            }
            Ok(Some((document, chunks)))
        })
        .await
    }

    async fn document_by_hash(
        &self,
        tenant: &TenantId,
        kb: KbId,
        hash: &str,
        owner: Option<&str>,
    ) -> Result<Option<DocId>, CoreError> {
        let (tenant, hash, owner) = (tenant.clone(), hash.to_owned(), owner.map(str::to_owned));
        self.with_conn(move |c| {
            owned(c, &tenant, kb)?;
            let id: Option<String> = c
                .query_row(
                    "SELECT id FROM documents WHERE kb_id = ?1 AND content_hash = ?2 AND owner IS ?3 LIMIT 1",
                    params![kb.to_string(), hash, owner],
                    |r| r.get(0),
                )
                .optional()
                .map_err(sql)?;
            id.map(|s| parse_id(&s, "documents", DocId::parse)).transpose()
        })
        .await
    }

    async fn faqs(&self, tenant: &TenantId, kb: KbId) -> Result<Vec<FaqEntry>, CoreError> {
        let tenant = tenant.clone();
        self.with_conn(move |c| {
            owned(c, &tenant, kb)?;
            read_faqs(c, kb)
        })
        .await
    }

    async fn sources(
        &self,
        tenant: &TenantId,
        kb: KbId,
    ) -> Result<Vec<rag_core::Source>, CoreError> {
        let tenant = tenant.clone();
        self.with_conn(move |c| {
            owned(c, &tenant, kb)?;
            crate::sources::read(c, kb)
        })
        .await
    }

    async fn embedding_space(
        &self,
        tenant: &TenantId,
        kb: KbId,
    ) -> Result<Option<EmbeddingSpace>, CoreError> {
        let tenant = tenant.clone();
        self.with_conn(move |c| {
            owned(c, &tenant, kb)?;
            let (model, dims): (Option<String>, Option<i64>) = c
                .query_row(
                    "SELECT embed_model, embed_dims FROM kbs WHERE id = ?1",
                    [kb.to_string()],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .map_err(sql)?;
            Ok(model.zip(dims).map(|(model_id, dims)| EmbeddingSpace {
                model_id,
                dims: dims as usize,
            }))
        })
        .await
    }
}

#[async_trait]
impl StoreWrite for EmbeddedStore {
    async fn create_kb(
        &self,
        tenant: &TenantId,
        name: &str,
        settings: KbSettings,
    ) -> Result<KnowledgeBase, CoreError> {
        let kb = KnowledgeBase::new(tenant, name, settings);
        let row = kb.clone();
        self.with_conn(move |c| {
            let settings = serde_json::to_string(&row.settings).unwrap_or_default();
            match c.execute(
                "INSERT INTO kbs (id, tenant, name, created_at, settings, seq) VALUES (?1, ?2, ?3, ?4, ?5, 1)",
                params![row.id.to_string(), row.tenant.0, row.name, row.created_at, settings],
            ) {
                Ok(_) => Ok(()),
                Err(rusqlite::Error::SqliteFailure(e, _)) if e.code == rusqlite::ErrorCode::ConstraintViolation => {
                    Err(UserError::KbExists { name: row.name.clone() }.into())
                }
                Err(e) => Err(sql(e)),
            }
        })
        .await?;
        Ok(kb)
    }

    async fn delete_kb(&self, tenant: &TenantId, kb: KbId) -> Result<(), CoreError> {
        let tenant = tenant.clone();
        self.with_conn(move |c| {
            let tx = c.transaction().map_err(sql)?;
            owned(&tx, &tenant, kb)?;
            tx.execute("DELETE FROM kbs WHERE id = ?1", [kb.to_string()])
                .map_err(sql)?;
            tx.commit().map_err(sql)
        })
        .await
    }

    async fn apply(
        &self,
        tenant: &TenantId,
        kb: KbId,
        ops: Vec<WriteOp>,
    ) -> Result<u64, CoreError> {
        let tenant = tenant.clone();
        self.with_conn(move |c| {
            let tx = c.transaction().map_err(sql)?;
            owned(&tx, &tenant, kb)?;
            for op in ops {
                apply_op(&tx, kb, op)?;
            }
            tx.execute(
                "UPDATE kbs SET seq = seq + 1 WHERE id = ?1",
                [kb.to_string()],
            )
            .map_err(sql)?;
            let seq: i64 = tx
                .query_row("SELECT seq FROM kbs WHERE id = ?1", [kb.to_string()], |r| {
                    r.get(0)
                })
                .map_err(sql)?;
            if failpoint::hit("store.apply.before_commit") {
                return Err(StoreError::Failpoint("store.apply.before_commit").into());
            }
            tx.commit().map_err(sql)?;
            Ok(seq as u64)
        })
        .await
    }
}
