//! [`PgStore`]: the store traits over PostgreSQL, with the same semantics as
//! the embedded store (orderings, errors, tenant scoping).

use crate::error::{corrupt, pg, PgStoreError};
use crate::migrate::latest_version;
use crate::pool::{Conn, Pool};
use crate::vector::{VectorOwned, VectorRef};
use async_trait::async_trait;
use rag_core::{
    failpoint, Chunk, ChunkId, CoreError, DocId, Document, DocumentInfo, EmbeddingSpace, FactId,
    FaqEntry, FaqId, FaqStatus, KbId, KbSettings, KbSnapshot, KnowledgeBase, Passage, PassageId,
    PassageVector, Source, SourceId, SourceStatus, StoreRead, StoreWrite, SynonymGroup, TenantId,
    UserError, UserWord, WriteOp,
};
use std::sync::Arc;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Json;
use tokio_postgres::{Config, IsolationLevel, Row, Transaction};

/// How many connections a store opens at most unless told otherwise.
pub const DEFAULT_POOL_SIZE: usize = 8;

/// The PostgreSQL store. Cheap to clone; clones share one pool.
#[derive(Clone)]
pub struct PgStore {
    pool: Arc<Pool>,
    /// The analysis behind the stored term statistics (the engine's own).
    pub(crate) analyzer: rag_text::Analyzer,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").finish_non_exhaustive()
    }
}

/// Parses a `postgres://…` URL or a `key=value` connection string.
pub fn parse_config(url: &str) -> Result<Config, PgStoreError> {
    url.parse::<Config>()
        .map_err(|e| PgStoreError::Url(crate::error::describe(&e)))
}

impl PgStore {
    /// Connects as the application role named in `url`; see [`PgStore::connect_with`].
    pub async fn connect(url: &str) -> Result<Self, PgStoreError> {
        Self::connect_with(parse_config(url)?, DEFAULT_POOL_SIZE).await
    }

    /// Connects with at most `pool_size` connections. Refuses a role that is
    /// a superuser, may bypass row-level security or owns the schema's tables
    /// (row-level security would then protect nothing), and a schema older or
    /// newer than this build's migrations.
    pub async fn connect_with(mut config: Config, pool_size: usize) -> Result<Self, PgStoreError> {
        let options = match config.get_options() {
            Some(o) if !o.is_empty() => format!("{o} -c search_path=ragscope,public"),
            _ => "-c search_path=ragscope,public".to_owned(),
        };
        config.options(&options);
        let pool = Pool::new(config, pool_size);
        {
            let conn = pool.get().await?;
            check_role(&conn).await?;
            check_schema(&conn).await?;
        }
        Ok(PgStore {
            pool: Arc::new(pool),
            analyzer: rag_text::Analyzer::new(),
        })
    }

    pub(crate) async fn conn(&self) -> Result<Conn<'_>, CoreError> {
        Ok(self.pool.get().await?)
    }
}

async fn check_role(conn: &Conn<'_>) -> Result<(), PgStoreError> {
    let row = conn.query_one("SELECT current_user::text, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user", &[]).await?;
    let (role, superuser, bypass): (String, bool, bool) = (row.get(0), row.get(1), row.get(2));
    let unsafe_role = |reason: &str| {
        Err(PgStoreError::UnsafeRole {
            role: role.clone(),
            reason: reason.to_owned(),
        })
    };
    if superuser {
        return unsafe_role("it is a superuser, which bypasses row-level security");
    }
    if bypass {
        return unsafe_role("it has BYPASSRLS");
    }
    let owns: i64 = conn
        .query_one(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = 'ragscope' AND pg_has_role(current_user, c.relowner, 'USAGE')",
            &[],
        )
        .await?
        .get(0);
    if owns > 0 {
        return unsafe_role("it owns (or is a member of the owner of) the ragscope tables");
    }
    // The definer roles read across tenants (their functions confine them).
    let definer: bool = conn
        .query_one(
            "SELECT coalesce(bool_or(pg_has_role(current_user, r.oid, 'USAGE')), false)
             FROM pg_roles r WHERE r.rolname IN ('ragscope_auth', 'ragscope_search')",
            &[],
        )
        .await?
        .get(0);
    if definer {
        return unsafe_role(
            "it is a member of ragscope_auth or ragscope_search, which read across tenants",
        );
    }
    Ok(())
}

async fn check_schema(conn: &Conn<'_>) -> Result<(), PgStoreError> {
    let found: i32 = match conn
        .query_one(
            "SELECT coalesce(max(version), 0) FROM ragscope.schema_migrations",
            &[],
        )
        .await
    {
        Ok(row) => row.get(0),
        Err(e)
            if e.code() == Some(&SqlState::UNDEFINED_TABLE)
                || e.code() == Some(&SqlState::INVALID_SCHEMA_NAME) =>
        {
            0
        }
        Err(e) => return Err(e.into()),
    };
    let wanted = latest_version();
    if found < wanted {
        return Err(PgStoreError::SchemaBehind { found, wanted });
    }
    if found > wanted {
        return Err(PgStoreError::NewerSchema {
            found,
            supported: wanted,
        });
    }
    Ok(())
}

/// Starts a transaction in which row-level security sees `tenant` only.
pub(crate) async fn begin<'c>(
    conn: &'c mut Conn<'_>,
    tenant: &str,
    snapshot: bool,
) -> Result<Transaction<'c>, CoreError> {
    let tx = if snapshot {
        conn.build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
    } else {
        conn.transaction().await
    }
    .map_err(pg)?;
    tx.execute("SELECT set_config('ragscope.tenant', $1, true)", &[&tenant])
        .await
        .map_err(pg)?;
    Ok(tx)
}

/// Checks that `kb` belongs to `tenant` (the application's own scoping; row
/// level security holds beneath it).
pub(crate) async fn owned(
    tx: &Transaction<'_>,
    tenant: &TenantId,
    kb: KbId,
) -> Result<(), CoreError> {
    match tx
        .query_opt(
            "SELECT 1 FROM kbs WHERE id = $1 AND tenant = $2",
            &[&kb.0, &tenant.0],
        )
        .await
        .map_err(pg)?
    {
        Some(_) => Ok(()),
        None => Err(UserError::UnknownKb {
            name: kb.to_string(),
        }
        .into()),
    }
}

fn to_kb(r: &Row) -> Result<KnowledgeBase, CoreError> {
    let settings: Json<KbSettings> = r
        .try_get(4)
        .map_err(|e| corrupt("kbs", "settings", crate::error::describe(&e)))?;
    Ok(KnowledgeBase {
        id: KbId(r.get(0)),
        tenant: TenantId(r.get(1)),
        name: r.get(2),
        created_at: r.get(3),
        settings: settings.0,
    })
}

fn json<'a, T: serde::Deserialize<'a>>(
    r: &'a Row,
    idx: usize,
    table: &'static str,
    column: &'static str,
) -> Result<T, CoreError> {
    r.try_get::<_, Json<T>>(idx)
        .map(|j| j.0)
        .map_err(|e| corrupt(table, column, crate::error::describe(&e)))
}

fn space_of(model: Option<String>, dims: Option<i32>) -> Option<EmbeddingSpace> {
    model.zip(dims).map(|(model_id, dims)| EmbeddingSpace {
        model_id,
        dims: dims as usize,
    })
}

async fn delete_document(tx: &Transaction<'_>, kb: KbId, id: DocId) -> Result<(), CoreError> {
    tx.execute(
        "DELETE FROM vectors WHERE kb_id = $1 AND passage IN (SELECT 'chunk:' || id::text FROM chunks WHERE doc_id = $2)",
        &[&kb.0, &id.0],
    )
    .await
    .map_err(pg)?;
    tx.execute(
        "DELETE FROM documents WHERE id = $1 AND kb_id = $2",
        &[&id.0, &kb.0],
    )
    .await
    .map_err(pg)?;
    Ok(())
}

/// Inserts or replaces documents with all their chunks, a few statements for
/// the whole batch (ids must be distinct).
async fn put_documents(
    tx: &Transaction<'_>,
    tenant: &TenantId,
    kb: KbId,
    docs: Vec<(Document, Vec<Chunk>)>,
) -> Result<(), CoreError> {
    let t = &tenant.0;
    let ids: Vec<uuid::Uuid> = docs.iter().map(|(d, _)| d.id.0).collect();
    tx.execute(
        "DELETE FROM vectors WHERE kb_id = $1 AND passage IN (SELECT 'chunk:' || id::text FROM chunks WHERE doc_id = ANY($2))",
        &[&kb.0, &ids],
    )
    .await
    .map_err(pg)?;
    tx.execute(
        "DELETE FROM documents WHERE id = ANY($1) AND kb_id = $2",
        &[&ids, &kb.0],
    )
    .await
    .map_err(pg)?;
    let titles: Vec<&str> = docs.iter().map(|(d, _)| d.title.as_str()).collect();
    let sources: Vec<&str> = docs.iter().map(|(d, _)| d.source.as_str()).collect();
    let hashes: Vec<&str> = docs.iter().map(|(d, _)| d.content_hash.as_str()).collect();
    let tags: Vec<Json<&Vec<String>>> = docs.iter().map(|(d, _)| Json(&d.tags)).collect();
    let created: Vec<i64> = docs.iter().map(|(d, _)| d.created_at).collect();
    let updated: Vec<i64> = docs.iter().map(|(d, _)| d.updated_at).collect();
    let texts: Vec<&str> = docs.iter().map(|(d, _)| d.text.as_str()).collect();
    let owners: Vec<Option<&str>> = docs.iter().map(|(d, _)| d.owner.as_deref()).collect();
    tx.execute(
        "INSERT INTO documents (id, tenant, kb_id, title, source, content_hash, tags, created_at, updated_at, text, owner)
         SELECT u.id, $1, $2, u.title, u.source, u.content_hash, ARRAY(SELECT jsonb_array_elements_text(u.tags)),
                u.created_at, u.updated_at, u.text, u.owner
         FROM unnest($3::uuid[], $4::text[], $5::text[], $6::text[], $7::jsonb[], $8::bigint[], $9::bigint[], $10::text[], $11::text[])
              AS u(id, title, source, content_hash, tags, created_at, updated_at, text, owner)",
        &[t, &kb.0, &ids, &titles, &sources, &hashes, &tags, &created, &updated, &texts, &owners],
    )
    .await
    .map_err(pg)?;
    let chunks: Vec<&Chunk> = docs.iter().flat_map(|(_, c)| c).collect();
    let chunk_ids: Vec<uuid::Uuid> = chunks.iter().map(|c| c.id.0).collect();
    let doc_ids: Vec<uuid::Uuid> = docs
        .iter()
        .flat_map(|(d, c)| std::iter::repeat_n(d.id.0, c.len()))
        .collect();
    let ordinals: Vec<i32> = chunks.iter().map(|c| c.ordinal as i32).collect();
    let headings: Vec<Json<&Vec<String>>> = chunks.iter().map(|c| Json(&c.heading_path)).collect();
    let chunk_texts: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
    let starts: Vec<i64> = chunks.iter().map(|c| c.start as i64).collect();
    let ends: Vec<i64> = chunks.iter().map(|c| c.end as i64).collect();
    tx.execute(
        "INSERT INTO chunks (id, tenant, doc_id, kb_id, ordinal, heading_path, text, start_byte, end_byte)
         SELECT u.id, $1, u.doc_id, $2, u.ordinal, u.heading_path, u.text, u.start_byte, u.end_byte
         FROM unnest($3::uuid[], $4::uuid[], $5::integer[], $6::jsonb[], $7::text[], $8::bigint[], $9::bigint[])
              AS u(id, doc_id, ordinal, heading_path, text, start_byte, end_byte)",
        &[t, &kb.0, &chunk_ids, &doc_ids, &ordinals, &headings, &chunk_texts, &starts, &ends],
    )
    .await
    .map_err(pg)?;
    Ok(())
}

/// Deletes the FAQ entries drafted from document `doc` that nobody edited, with their vectors.
async fn delete_unedited_drafts(
    tx: &Transaction<'_>,
    kb: KbId,
    doc: DocId,
) -> Result<(), CoreError> {
    tx.execute(
        "DELETE FROM vectors WHERE kb_id = $1 AND passage IN
           (SELECT 'faq:' || id::text FROM faqs WHERE kb_id = $1 AND source_doc = $2 AND NOT edited)",
        &[&kb.0, &doc.0],
    )
    .await
    .map_err(pg)?;
    tx.execute(
        "DELETE FROM faqs WHERE kb_id = $1 AND source_doc = $2 AND NOT edited",
        &[&kb.0, &doc.0],
    )
    .await
    .map_err(pg)?;
    Ok(())
}

async fn document_exists(tx: &Transaction<'_>, kb: KbId, doc: DocId) -> Result<bool, CoreError> {
    Ok(tx
        .query_opt(
            "SELECT 1 FROM documents WHERE id = $1 AND kb_id = $2",
            &[&doc.0, &kb.0],
        )
        .await
        .map_err(pg)?
        .is_some())
}

async fn apply_op(
    tx: &Transaction<'_>,
    tenant: &TenantId,
    kb: KbId,
    op: WriteOp,
) -> Result<(), CoreError> {
    let t = &tenant.0;
    match op {
        WriteOp::PutDocument { document, chunks } => {
            put_documents(tx, tenant, kb, vec![(document, chunks)]).await?
        }
        WriteOp::DeleteDocument(id) => {
            // Its drafts: unedited ones go with it; edited ones are human
            // knowledge now and stay, unlinked.
            delete_unedited_drafts(tx, kb, id).await?;
            tx.execute(
                "UPDATE faqs SET source_doc = NULL WHERE kb_id = $1 AND source_doc = $2",
                &[&kb.0, &id.0],
            )
            .await
            .map_err(pg)?;
            delete_document(tx, kb, id).await?;
        }
        WriteOp::DeleteUneditedDrafts(doc) => delete_unedited_drafts(tx, kb, doc).await?,
        WriteOp::RelinkDrafts { from, to } => {
            if !document_exists(tx, kb, to).await? {
                return Err(rag_core::UserError::NotFound {
                    what: "document",
                    id: to.to_string(),
                }
                .into());
            }
            tx.execute(
                "UPDATE faqs SET source_doc = $3 WHERE kb_id = $1 AND source_doc = $2 AND edited",
                &[&kb.0, &from.0, &to.0],
            )
            .await
            .map_err(pg)?;
        }
        WriteOp::PutFaq(f) => {
            let exists = tx
                .query_opt(
                    "SELECT 1 FROM faqs WHERE id = $1 AND kb_id = $2",
                    &[&f.id.0, &kb.0],
                )
                .await
                .map_err(pg)?
                .is_some();
            // A new draft must point at a document of this knowledge base
            // (it may have been deleted while the LLM was drafting).
            if let (false, Some(doc)) = (exists, f.source_doc) {
                if !document_exists(tx, kb, doc).await? {
                    return Err(rag_core::UserError::NotFound {
                        what: "document",
                        id: doc.to_string(),
                    }
                    .into());
                }
            }
            // On update the stored source_doc is kept: links change only
            // through the draft operations.
            let source_doc = f.source_doc.map(|d| d.0);
            tx.execute(
                "INSERT INTO faqs (id, tenant, kb_id, question, answer, status, edited, source_url, tags, created_at, updated_at, valid_from, valid_until, source_doc)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
                 ON CONFLICT (id) DO UPDATE SET question = excluded.question, answer = excluded.answer, status = excluded.status,
                   edited = excluded.edited, source_url = excluded.source_url, tags = excluded.tags, updated_at = excluded.updated_at,
                   valid_from = excluded.valid_from, valid_until = excluded.valid_until
                 WHERE faqs.kb_id = excluded.kb_id",
                &[
                    &f.id.0,
                    t,
                    &kb.0,
                    &f.question,
                    &f.answer,
                    &f.status.as_str(),
                    &f.edited,
                    &f.source_url,
                    &f.tags,
                    &f.created_at,
                    &f.updated_at,
                    &f.valid_from,
                    &f.valid_until,
                    &source_doc,
                ],
            )
            .await
            .map_err(pg)?;
        }
        WriteOp::DeleteFaq(id) => {
            tx.execute(
                "DELETE FROM vectors WHERE passage = $1 AND kb_id = $2",
                &[&PassageId::Faq(id).to_string(), &kb.0],
            )
            .await
            .map_err(pg)?;
            tx.execute(
                "DELETE FROM faqs WHERE id = $1 AND kb_id = $2",
                &[&id.0, &kb.0],
            )
            .await
            .map_err(pg)?;
        }
        WriteOp::PutFact(f) => {
            tx.execute(
                "INSERT INTO facts (id, tenant, kb_id, key, value, key_synonyms) VALUES ($1, $2, $3, $4, $5, $6)
                 ON CONFLICT (id) DO UPDATE SET key = excluded.key, value = excluded.value, key_synonyms = excluded.key_synonyms
                 WHERE facts.kb_id = excluded.kb_id",
                &[&f.id.0, t, &kb.0, &f.key, &f.value, &f.key_synonyms],
            )
            .await
            .map_err(pg)?;
        }
        WriteOp::DeleteFact(id) => {
            tx.execute(
                "DELETE FROM vectors WHERE passage = $1 AND kb_id = $2",
                &[&PassageId::Fact(id).to_string(), &kb.0],
            )
            .await
            .map_err(pg)?;
            tx.execute(
                "DELETE FROM facts WHERE id = $1 AND kb_id = $2",
                &[&id.0, &kb.0],
            )
            .await
            .map_err(pg)?;
        }
        WriteOp::PutSettings(settings) => {
            tx.execute(
                "UPDATE kbs SET settings = $1 WHERE id = $2",
                &[&Json(&settings), &kb.0],
            )
            .await
            .map_err(pg)?;
        }
        WriteOp::PutVectors { space, vectors } => {
            let row = tx
                .query_one(
                    "SELECT embed_model, embed_dims FROM kbs WHERE id = $1",
                    &[&kb.0],
                )
                .await
                .map_err(pg)?;
            match space_of(row.get(0), row.get(1)) {
                Some(stored) if stored != space => {
                    return Err(UserError::EmbeddingSpaceMismatch {
                        stored_model: stored.model_id,
                        stored_dims: stored.dims,
                        configured_model: space.model_id,
                        configured_dims: space.dims,
                    }
                    .into());
                }
                Some(_) => {}
                None => {
                    tx.execute(
                        "UPDATE kbs SET embed_model = $1, embed_dims = $2 WHERE id = $3",
                        &[&space.model_id, &(space.dims as i32), &kb.0],
                    )
                    .await
                    .map_err(pg)?;
                }
            }
            if let Some(v) = vectors.iter().find(|v| v.vector.len() != space.dims) {
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
            // The same passage twice in one batch: the last one wins, as a
            // sequence of replacing inserts would have it.
            let mut last: std::collections::HashMap<PassageId, usize> =
                std::collections::HashMap::new();
            for (i, v) in vectors.iter().enumerate() {
                last.insert(v.id, i);
            }
            let kept: Vec<&PassageVector> = vectors
                .iter()
                .enumerate()
                .filter(|(i, v)| last[&v.id] == *i)
                .map(|(_, v)| v)
                .collect();
            let passages: Vec<String> = kept.iter().map(|v| v.id.to_string()).collect();
            let hashes: Vec<&str> = kept.iter().map(|v| v.text_hash.as_str()).collect();
            let values: Vec<VectorRef<'_>> = kept.iter().map(|v| VectorRef(&v.vector)).collect();
            tx.execute(
                "INSERT INTO vectors (tenant, kb_id, passage, text_hash, vector)
                 SELECT $1, $2, u.passage, u.text_hash, u.vector FROM unnest($3::text[], $4::text[], $5::vector[]) AS u(passage, text_hash, vector)
                 ON CONFLICT (kb_id, passage) DO UPDATE SET text_hash = excluded.text_hash, vector = excluded.vector",
                &[t, &kb.0, &passages, &hashes, &values],
            )
            .await
            .map_err(pg)?;
        }
        WriteOp::ClearVectors => {
            tx.execute("DELETE FROM vectors WHERE kb_id = $1", &[&kb.0])
                .await
                .map_err(pg)?;
            tx.execute(
                "UPDATE kbs SET embed_model = NULL, embed_dims = NULL WHERE id = $1",
                &[&kb.0],
            )
            .await
            .map_err(pg)?;
        }
        WriteOp::AddSynonyms(g) => {
            tx.execute(
                "INSERT INTO synonyms (tenant, kb_id, position, terms)
                 SELECT $1, $2, coalesce(max(position), 0) + 1, $3 FROM synonyms WHERE kb_id = $2",
                &[t, &kb.0, &g.terms],
            )
            .await
            .map_err(pg)?;
        }
        WriteOp::AddUserWord(w) => {
            tx.execute(
                "INSERT INTO user_words (tenant, kb_id, word, freq) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (kb_id, word) DO UPDATE SET freq = excluded.freq",
                &[t, &kb.0, &w.word, &w.freq.map(i64::from)],
            )
            .await
            .map_err(pg)?;
        }
        WriteOp::PutSource(s) => put_source(tx, tenant, kb, &s).await?,
        WriteOp::DeleteSource(id) => {
            tx.execute(
                "DELETE FROM sources WHERE id = $1 AND kb_id = $2",
                &[&id.0, &kb.0],
            )
            .await
            .map_err(pg)?;
        }
    }
    Ok(())
}

async fn put_source(
    tx: &Transaction<'_>,
    tenant: &TenantId,
    kb: KbId,
    s: &Source,
) -> Result<(), CoreError> {
    tx.execute(
        "INSERT INTO sources (id, tenant, kb_id, url, depth, max_pages, owner, status, reason, created_at, last_sync, pages)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
         ON CONFLICT (id) DO UPDATE SET url = excluded.url, depth = excluded.depth, max_pages = excluded.max_pages,
           owner = excluded.owner, status = excluded.status, reason = excluded.reason, last_sync = excluded.last_sync,
           pages = excluded.pages
         WHERE sources.kb_id = excluded.kb_id",
        &[
            &s.id.0,
            &tenant.0,
            &kb.0,
            &s.url,
            &i64::from(s.depth),
            &i64::from(s.max_pages),
            &s.owner,
            &s.status.as_str(),
            &s.reason,
            &s.created_at,
            &s.last_sync,
            &Json(&s.pages),
        ],
    )
    .await
    .map_err(pg)?;
    Ok(())
}

async fn read_sources(tx: &Transaction<'_>, kb: KbId) -> Result<Vec<Source>, CoreError> {
    let rows = tx
        .query(
            "SELECT id, url, depth, max_pages, owner, status, reason, created_at, last_sync, pages
             FROM sources WHERE kb_id = $1 ORDER BY created_at, id",
            &[&kb.0],
        )
        .await
        .map_err(pg)?;
    let u32_of =
        |v: i64, column| u32::try_from(v).map_err(|_| corrupt("sources", column, v.to_string()));
    rows.iter()
        .map(|r| {
            let status: String = r.get(5);
            Ok(Source {
                id: SourceId(r.get(0)),
                kb,
                url: r.get(1),
                depth: u32_of(r.get(2), "depth")?,
                max_pages: u32_of(r.get(3), "max_pages")?,
                owner: r.get(4),
                status: SourceStatus::parse(&status)
                    .ok_or_else(|| corrupt("sources", "status", status.clone()))?,
                reason: r.get(6),
                created_at: r.get(7),
                last_sync: r.get(8),
                pages: json(r, 9, "sources", "pages")?,
            })
        })
        .collect()
}

async fn read_faqs(tx: &Transaction<'_>, kb: KbId) -> Result<Vec<FaqEntry>, CoreError> {
    let rows = tx
        .query(
            "SELECT id, question, answer, status, edited, source_url, tags, created_at, updated_at, valid_from, valid_until, source_doc
             FROM faqs WHERE kb_id = $1 ORDER BY created_at, id",
            &[&kb.0],
        )
        .await
        .map_err(pg)?;
    rows.iter()
        .map(|r| {
            let status: String = r.get(3);
            Ok(FaqEntry {
                id: FaqId(r.get(0)),
                kb,
                question: r.get(1),
                answer: r.get(2),
                status: FaqStatus::parse(&status)
                    .ok_or_else(|| corrupt("faqs", "status", status.clone()))?,
                edited: r.get(4),
                source_url: r.get(5),
                tags: r.get(6),
                created_at: r.get(7),
                updated_at: r.get(8),
                valid_from: r.get(9),
                valid_until: r.get(10),
                source_doc: r.get::<_, Option<uuid::Uuid>>(11).map(rag_core::DocId),
            })
        })
        .collect()
}

/// Which passages [`passages_of`] loads.
#[derive(Debug, Default)]
pub(crate) struct Scope {
    /// Every passage of the knowledge base.
    pub all: bool,
    /// Chunks of these documents.
    pub docs: Vec<uuid::Uuid>,
    /// These FAQ entries.
    pub faqs: Vec<uuid::Uuid>,
    /// These facts.
    pub facts: Vec<uuid::Uuid>,
}

/// Passages of a knowledge base in snapshot order (chunks by document
/// creation, document and ordinal; FAQ entries by creation; facts by id),
/// each with its chunk ordinal (0 for others).
pub(crate) async fn passages_of(
    tx: &Transaction<'_>,
    kb: KbId,
    scope: &Scope,
) -> Result<Vec<(Passage, i32)>, CoreError> {
    let mut passages = Vec::new();
    let all = scope.all;
    if all || !scope.docs.is_empty() {
        let rows = tx
            .query(
                "SELECT c.id, c.doc_id, d.title, c.heading_path, c.text, d.tags, d.source, c.start_byte, c.end_byte, d.created_at, d.owner, c.ordinal
                 FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.kb_id = $1 AND ($2 OR c.doc_id = ANY($3))
                 ORDER BY d.created_at, d.id, c.ordinal",
                &[&kb.0, &all, &scope.docs],
            )
            .await
            .map_err(pg)?;
        for r in &rows {
            let headings: Vec<String> = json(r, 3, "chunks", "heading_path")?;
            let title: String = r.get(2);
            let passage = Passage {
                id: PassageId::Chunk(ChunkId(r.get(0))),
                title: rag_core::chunk_title(&title, &headings),
                body: r.get(4),
                tags: r.get(5),
                aliases: Vec::new(),
                doc: Some(DocId(r.get(1))),
                source: Some(r.get(6)),
                span: Some((r.get::<_, i64>(7) as usize, r.get::<_, i64>(8) as usize)),
                created_at: r.get(9),
                valid_from: None,
                valid_until: None,
                searchable: true,
                owner: r.get(10),
            };
            passages.push((passage, r.get::<_, i32>(11)));
        }
    }
    if all || !scope.faqs.is_empty() {
        let faqs = read_faqs(tx, kb).await?;
        passages.extend(
            faqs.into_iter()
                .filter(|f| all || scope.faqs.contains(&f.id.0))
                .map(|f| (Passage::from(f), 0)),
        );
    }
    if all || !scope.facts.is_empty() {
        let rows = tx
            .query("SELECT id, key, value, key_synonyms FROM facts WHERE kb_id = $1 AND ($2 OR id = ANY($3)) ORDER BY id", &[&kb.0, &all, &scope.facts])
            .await
            .map_err(pg)?;
        for r in &rows {
            let fact = rag_core::Fact {
                id: FactId(r.get(0)),
                kb,
                key: r.get(1),
                value: r.get(2),
                key_synonyms: r.get(3),
            };
            passages.push((Passage::from(fact), 0));
        }
    }
    Ok(passages)
}

/// The user dictionary of a knowledge base.
pub(crate) async fn user_words(tx: &Transaction<'_>, kb: KbId) -> Result<Vec<UserWord>, CoreError> {
    tx.query(
        "SELECT word, freq FROM user_words WHERE kb_id = $1 ORDER BY word",
        &[&kb.0],
    )
    .await
    .map_err(pg)?
    .iter()
    .map(|r| {
        let freq: Option<i64> = r.get(1);
        Ok(UserWord {
            word: r.get(0),
            freq: freq
                .map(|f| u32::try_from(f).map_err(|_| corrupt("user_words", "freq", f.to_string())))
                .transpose()?,
        })
    })
    .collect()
}

async fn load_snapshot(
    tx: &Transaction<'_>,
    kb: KbId,
    with_vectors: bool,
) -> Result<KbSnapshot, CoreError> {
    let kb_row = tx
        .query_one(
            "SELECT seq, embed_model, embed_dims FROM kbs WHERE id = $1",
            &[&kb.0],
        )
        .await
        .map_err(pg)?;
    let seq: i64 = kb_row.get(0);
    let space = space_of(kb_row.get(1), kb_row.get(2));
    let passages = passages_of(
        tx,
        kb,
        &Scope {
            all: true,
            ..Default::default()
        },
    )
    .await?
    .into_iter()
    .map(|(p, _)| p)
    .collect();
    let synonyms = tx
        .query(
            "SELECT terms FROM synonyms WHERE kb_id = $1 ORDER BY position",
            &[&kb.0],
        )
        .await
        .map_err(pg)?
        .iter()
        .map(|r| SynonymGroup { terms: r.get(0) })
        .collect();
    let user_words = user_words(tx, kb).await?;
    let mut vectors = Vec::new();
    let rows = if with_vectors {
        tx.query(
            "SELECT passage, text_hash, vector FROM vectors WHERE kb_id = $1 ORDER BY passage",
            &[&kb.0],
        )
        .await
        .map_err(pg)?
    } else {
        Vec::new()
    };
    for r in rows {
        let passage: String = r.get(0);
        let id = PassageId::parse(&passage)
            .ok_or_else(|| corrupt("vectors", "passage", passage.clone()))?;
        let vector: VectorOwned = r
            .try_get(2)
            .map_err(|e| corrupt("vectors", "vector", crate::error::describe(&e)))?;
        vectors.push(PassageVector {
            id,
            text_hash: r.get(1),
            vector: vector.0,
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

#[async_trait]
impl StoreRead for PgStore {
    fn store_recall(&self) -> Option<Arc<dyn rag_core::StoreRecall>> {
        Some(Arc::new(self.clone()))
    }

    async fn list_kbs(&self, tenant: &TenantId) -> Result<Vec<KnowledgeBase>, CoreError> {
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, false).await?;
        let rows = tx
            .query("SELECT id, tenant, name, created_at, settings FROM kbs WHERE tenant = $1 ORDER BY name", &[&tenant.0])
            .await
            .map_err(pg)?;
        tx.commit().await.map_err(pg)?;
        rows.iter().map(to_kb).collect()
    }

    async fn kb_by_name(
        &self,
        tenant: &TenantId,
        name: &str,
    ) -> Result<Option<KnowledgeBase>, CoreError> {
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, false).await?;
        let row = tx
            .query_opt("SELECT id, tenant, name, created_at, settings FROM kbs WHERE tenant = $1 AND name = $2", &[&tenant.0, &name])
            .await
            .map_err(pg)?;
        tx.commit().await.map_err(pg)?;
        row.as_ref().map(to_kb).transpose()
    }

    async fn kb_seq(&self, tenant: &TenantId, kb: KbId) -> Result<u64, CoreError> {
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, false).await?;
        let row = tx
            .query_opt(
                "SELECT seq FROM kbs WHERE id = $1 AND tenant = $2",
                &[&kb.0, &tenant.0],
            )
            .await
            .map_err(pg)?;
        tx.commit().await.map_err(pg)?;
        row.map(|r| r.get::<_, i64>(0) as u64).ok_or_else(|| {
            UserError::UnknownKb {
                name: kb.to_string(),
            }
            .into()
        })
    }

    async fn snapshot(&self, tenant: &TenantId, kb: KbId) -> Result<KbSnapshot, CoreError> {
        let mut conn = self.conn().await?;
        // One repeatable-read transaction: the snapshot is consistent with its seq.
        let tx = begin(&mut conn, &tenant.0, true).await?;
        owned(&tx, tenant, kb).await?;
        let snap = load_snapshot(&tx, kb, true).await?;
        tx.commit().await.map_err(pg)?;
        Ok(snap)
    }

    async fn index_snapshot(
        &self,
        tenant: &TenantId,
        kb: KbId,
    ) -> Result<(KbSnapshot, usize), CoreError> {
        // Vectors are searched here (pgvector): the engine needs only their number.
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, true).await?;
        owned(&tx, tenant, kb).await?;
        let snap = load_snapshot(&tx, kb, false).await?;
        let count: i64 = tx
            .query_one("SELECT count(*) FROM vectors WHERE kb_id = $1", &[&kb.0])
            .await
            .map_err(pg)?
            .get(0);
        tx.commit().await.map_err(pg)?;
        Ok((snap, count as usize))
    }

    async fn documents(&self, tenant: &TenantId, kb: KbId) -> Result<Vec<DocumentInfo>, CoreError> {
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, false).await?;
        owned(&tx, tenant, kb).await?;
        let rows = tx
            .query(
                "SELECT d.id, d.title, d.source, d.content_hash, (SELECT count(*) FROM chunks c WHERE c.doc_id = d.id), d.owner
                 FROM documents d WHERE d.kb_id = $1 ORDER BY d.created_at, d.id",
                &[&kb.0],
            )
            .await
            .map_err(pg)?;
        tx.commit().await.map_err(pg)?;
        Ok(rows
            .iter()
            .map(|r| DocumentInfo {
                id: DocId(r.get(0)),
                title: r.get(1),
                source: r.get(2),
                content_hash: r.get(3),
                chunks: r.get::<_, i64>(4) as usize,
                owner: r.get(5),
            })
            .collect())
    }

    async fn document(
        &self,
        tenant: &TenantId,
        kb: KbId,
        doc: DocId,
    ) -> Result<Option<(Document, Vec<Chunk>)>, CoreError> {
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, true).await?;
        owned(&tx, tenant, kb).await?;
        let Some(r) = tx
            .query_opt(
                "SELECT title, source, content_hash, tags, created_at, updated_at, text, owner FROM documents WHERE id = $1 AND kb_id = $2",
                &[&doc.0, &kb.0],
            )
            .await
            .map_err(pg)?
        else {
            tx.commit().await.map_err(pg)?;
            return Ok(None);
        };
        let document = Document {
            id: doc,
            kb,
            title: r.get(0),
            source: r.get(1),
            content_hash: r.get(2),
            tags: r.get(3),
            created_at: r.get(4),
            updated_at: r.get(5),
            text: r.get(6),
            owner: r.get(7),
        };
        let rows = tx
            .query("SELECT id, ordinal, heading_path, text, start_byte, end_byte FROM chunks WHERE doc_id = $1 ORDER BY ordinal", &[&doc.0])
            .await
            .map_err(pg)?;
        tx.commit().await.map_err(pg)?;
        let chunks = rows
            .iter()
            .map(|r| {
                Ok(Chunk {
                    id: ChunkId(r.get(0)),
                    doc,
                    ordinal: r.get::<_, i32>(1) as u32,
                    heading_path: json(r, 2, "chunks", "heading_path")?,
                    text: r.get(3),
                    start: r.get::<_, i64>(4) as usize,
                    end: r.get::<_, i64>(5) as usize,
                })
            })
            .collect::<Result<Vec<_>, CoreError>>()?;
        Ok(Some((document, chunks)))
    }

    async fn document_by_hash(
        &self,
        tenant: &TenantId,
        kb: KbId,
        hash: &str,
        owner: Option<&str>,
    ) -> Result<Option<DocId>, CoreError> {
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, false).await?;
        owned(&tx, tenant, kb).await?;
        let row = tx
            .query_opt(
                "SELECT id FROM documents WHERE kb_id = $1 AND content_hash = $2 AND owner IS NOT DISTINCT FROM $3 ORDER BY id LIMIT 1",
                &[&kb.0, &hash, &owner],
            )
            .await
            .map_err(pg)?;
        tx.commit().await.map_err(pg)?;
        Ok(row.map(|r| DocId(r.get(0))))
    }

    async fn faqs(&self, tenant: &TenantId, kb: KbId) -> Result<Vec<FaqEntry>, CoreError> {
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, false).await?;
        owned(&tx, tenant, kb).await?;
        let out = read_faqs(&tx, kb).await?;
        tx.commit().await.map_err(pg)?;
        Ok(out)
    }

    async fn sources(&self, tenant: &TenantId, kb: KbId) -> Result<Vec<Source>, CoreError> {
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, false).await?;
        owned(&tx, tenant, kb).await?;
        let out = read_sources(&tx, kb).await?;
        tx.commit().await.map_err(pg)?;
        Ok(out)
    }

    async fn embedding_space(
        &self,
        tenant: &TenantId,
        kb: KbId,
    ) -> Result<Option<EmbeddingSpace>, CoreError> {
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, false).await?;
        let row = tx
            .query_opt(
                "SELECT embed_model, embed_dims FROM kbs WHERE id = $1 AND tenant = $2",
                &[&kb.0, &tenant.0],
            )
            .await
            .map_err(pg)?;
        tx.commit().await.map_err(pg)?;
        let row = row.ok_or_else(|| {
            CoreError::from(UserError::UnknownKb {
                name: kb.to_string(),
            })
        })?;
        Ok(space_of(row.get(0), row.get(1)))
    }
}

#[async_trait]
impl StoreWrite for PgStore {
    async fn create_kb(
        &self,
        tenant: &TenantId,
        name: &str,
        settings: KbSettings,
    ) -> Result<KnowledgeBase, CoreError> {
        let kb = KnowledgeBase::new(tenant, name, settings);
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, false).await?;
        match tx
            .execute(
                "INSERT INTO kbs (id, tenant, name, created_at, settings, seq) VALUES ($1, $2, $3, $4, $5, 1)",
                &[&kb.id.0, &tenant.0, &kb.name, &kb.created_at, &Json(&kb.settings)],
            )
            .await
        {
            Ok(_) => {}
            Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => return Err(UserError::KbExists { name: kb.name }.into()),
            Err(e) => return Err(pg(e)),
        }
        tx.commit().await.map_err(pg)?;
        Ok(kb)
    }

    async fn delete_kb(&self, tenant: &TenantId, kb: KbId) -> Result<(), CoreError> {
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, false).await?;
        owned(&tx, tenant, kb).await?;
        tx.execute("DELETE FROM kbs WHERE id = $1", &[&kb.0])
            .await
            .map_err(pg)?;
        tx.commit().await.map_err(pg)
    }

    async fn apply(
        &self,
        tenant: &TenantId,
        kb: KbId,
        ops: Vec<WriteOp>,
    ) -> Result<u64, CoreError> {
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, false).await?;
        // The row lock serialises writers of one knowledge base (its seq, the
        // synonym positions) across processes.
        if tx
            .query_opt(
                "SELECT 1 FROM kbs WHERE id = $1 AND tenant = $2 FOR UPDATE",
                &[&kb.0, &tenant.0],
            )
            .await
            .map_err(pg)?
            .is_none()
        {
            return Err(UserError::UnknownKb {
                name: kb.to_string(),
            }
            .into());
        }
        let mut dirty = crate::lex::Dirty::default();
        // Runs of documents go in together (a few statements per run, not per document).
        let mut run: Vec<(Document, Vec<Chunk>)> = Vec::new();
        for op in ops {
            dirty.note(&op);
            match op {
                WriteOp::PutDocument { document, chunks }
                    if !run.iter().any(|(d, _)| d.id == document.id) =>
                {
                    run.push((document, chunks));
                }
                op => {
                    if !run.is_empty() {
                        put_documents(&tx, tenant, kb, std::mem::take(&mut run)).await?;
                    }
                    if let WriteOp::PutDocument { document, chunks } = op {
                        run.push((document, chunks));
                    } else {
                        apply_op(&tx, tenant, kb, op).await?;
                    }
                }
            }
        }
        if !run.is_empty() {
            put_documents(&tx, tenant, kb, run).await?;
        }
        crate::lex::sync(&tx, tenant, kb, &self.analyzer, dirty).await?;
        let seq: i64 = tx
            .query_one(
                "UPDATE kbs SET seq = seq + 1 WHERE id = $1 RETURNING seq",
                &[&kb.0],
            )
            .await
            .map_err(pg)?
            .get(0);
        if failpoint::hit("store.apply.before_commit") {
            return Err(PgStoreError::Failpoint("store.apply.before_commit").into());
        }
        tx.commit().await.map_err(pg)?;
        Ok(seq as u64)
    }
}
