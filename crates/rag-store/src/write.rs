//! The atomic writes: [`StoreWrite`] for the embedded store, every batch of
//! operations in one transaction that moves the commit sequence.

use crate::changes::{Touched, SYNONYMS, USER_WORDS, VECTORS_RESET};
use crate::error::StoreError;
use crate::open::{owned, EmbeddedStore};
use crate::rows::{sql, vector_bytes};
use async_trait::async_trait;
use rag_core::{
    failpoint, CoreError, KbId, KbSettings, KnowledgeBase, PassageId, StoreWrite, TenantId,
    UserError, WriteOp,
};
use rusqlite::{params, OptionalExtension, Transaction};

fn delete_document(
    tx: &Transaction<'_>,
    kb_s: &str,
    id: &str,
    log: &mut Touched,
) -> Result<(), CoreError> {
    log.passages_of(
        tx,
        "SELECT 'chunk:' || id FROM chunks WHERE doc_id = ?2 AND kb_id = ?1",
        kb_s,
        id,
    )?;
    tx.execute(
        // `+kb_id`: by primary key, not through every vector of the knowledge base.
        "DELETE FROM vectors WHERE +kb_id = ?1 AND passage IN (SELECT 'chunk:' || id FROM chunks WHERE doc_id = ?2)",
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
fn delete_unedited_drafts(
    tx: &Transaction<'_>,
    kb_s: &str,
    doc: &str,
    log: &mut Touched,
) -> Result<(), CoreError> {
    log.passages_of(
        tx,
        "SELECT 'faq:' || id FROM faqs WHERE kb_id = ?1 AND source_doc = ?2 AND edited = 0",
        kb_s,
        doc,
    )?;
    tx.execute(
        // `+kb_id`: by primary key, not through every vector of the knowledge base.
        "DELETE FROM vectors WHERE +kb_id = ?1 AND passage IN
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

fn apply_op(
    tx: &Transaction<'_>,
    kb: KbId,
    op: WriteOp,
    log: &mut Touched,
) -> Result<(), CoreError> {
    let kb_s = kb.to_string();
    match op {
        WriteOp::PutDocument {
            document: d,
            chunks,
        } => {
            delete_document(tx, &kb_s, &d.id.to_string(), log)?;
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
                log.passage(PassageId::Chunk(c.id));
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
            delete_unedited_drafts(tx, &kb_s, &id, log)?;
            tx.execute(
                "UPDATE faqs SET source_doc = NULL WHERE kb_id = ?1 AND source_doc = ?2",
                params![kb_s, id],
            )
            .map_err(sql)?;
            delete_document(tx, &kb_s, &id, log)?;
        }
        WriteOp::DeleteUneditedDrafts(doc) => {
            delete_unedited_drafts(tx, &kb_s, &doc.to_string(), log)?
        }
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
            log.passage(PassageId::Faq(f.id));
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
            log.passage(PassageId::Faq(id));
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
            log.passage(PassageId::Fact(f.id));
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
            log.passage(PassageId::Fact(id));
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
                    // The space is fixed now: dense indexes start over.
                    log.flag(VECTORS_RESET);
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
                log.vector(v.id);
                stmt.execute(params![
                    v.id.to_string(),
                    kb_s,
                    v.text_hash,
                    vector_bytes(&v.vector)
                ])
                .map_err(sql)?;
            }
        }
        WriteOp::PutSentenceVectors(items) => {
            // Only beside the passage vector of the same text: a vector
            // stored since (another text) is left without them.
            let mut stmt = tx
                .prepare_cached(
                    "UPDATE vectors SET sentences = ?1 WHERE passage = ?2 AND kb_id = ?3 AND text_hash = ?4",
                )
                .map_err(sql)?;
            for (id, hash, sentences) in items {
                stmt.execute(params![sentences.to_bytes(), id.to_string(), kb_s, hash])
                    .map_err(sql)?;
            }
        }
        WriteOp::PutSecondVectors { model, items } => {
            // As sentence vectors: only beside the vector of the same text.
            let mut stmt = tx
                .prepare_cached(
                    "UPDATE vectors SET second = ?1, second_model = ?2 WHERE passage = ?3 AND kb_id = ?4 AND text_hash = ?5",
                )
                .map_err(sql)?;
            for (id, hash, vectors) in items {
                stmt.execute(params![
                    vectors.to_bytes(),
                    model,
                    id.to_string(),
                    kb_s,
                    hash
                ])
                .map_err(sql)?;
            }
        }
        WriteOp::PutSource(source) => crate::sources::put(tx, kb, &source)?,
        WriteOp::DeleteSource(id) => crate::sources::delete(tx, kb, id)?,
        WriteOp::ClearVectors => {
            log.flag(VECTORS_RESET);
            tx.execute("DELETE FROM vectors WHERE kb_id = ?1", [&kb_s])
                .map_err(sql)?;
            tx.execute(
                "UPDATE kbs SET embed_model = NULL, embed_dims = NULL WHERE id = ?1",
                [&kb_s],
            )
            .map_err(sql)?;
        }
        WriteOp::AddSynonyms(g) => {
            log.flag(SYNONYMS);
            tx.execute(
                "INSERT INTO synonyms (kb_id, terms) VALUES (?1, ?2)",
                params![kb_s, serde_json::to_string(&g.terms).unwrap_or_default()],
            )
            .map_err(sql)?;
        }
        WriteOp::AddUserWord(w) => {
            log.flag(USER_WORDS);
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
                "INSERT INTO kbs (id, tenant, name, created_at, settings, seq, log_from) VALUES (?1, ?2, ?3, ?4, ?5, 1, 1)",
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
        let retain = self.change_log_retention();
        self.with_conn(move |c| {
            let tx = c.transaction().map_err(sql)?;
            owned(&tx, &tenant, kb)?;
            let mut log = Touched::default();
            for op in ops {
                apply_op(&tx, kb, op, &mut log)?;
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
            // The change log, in the same transaction.
            crate::changes::record(&tx, kb, seq as u64, log, retain)?;
            if failpoint::hit("store.apply.before_commit") {
                return Err(StoreError::Failpoint("store.apply.before_commit").into());
            }
            tx.commit().map_err(sql)?;
            Ok(seq as u64)
        })
        .await
    }
}
