//! The atomic writes: [`StoreWrite`] for PostgreSQL, every batch of
//! operations in one transaction that holds the knowledge base's row lock and
//! moves its commit sequence.

use crate::changes::{Touched, SYNONYMS, USER_WORDS, VECTORS_RESET};
use crate::error::{pg, PgStoreError};
use crate::open::{begin, owned, PgStore};
use crate::rows::space_of;
use crate::vector::VectorRef;
use async_trait::async_trait;
use rag_core::{
    failpoint, Chunk, CoreError, DocId, Document, KbId, KbSettings, KnowledgeBase, PassageId,
    PassageVector, StoreWrite, TenantId, UserError, WriteOp,
};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Json;
use tokio_postgres::Transaction;

async fn delete_document(
    tx: &Transaction<'_>,
    kb: KbId,
    id: DocId,
    log: &mut Touched,
) -> Result<(), CoreError> {
    log.passages_of(
        tx,
        "SELECT 'chunk:' || id::text FROM chunks WHERE doc_id = $1 AND kb_id = $2",
        &[&id.0, &kb.0],
    )
    .await?;
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
    log: &mut Touched,
) -> Result<(), CoreError> {
    let t = &tenant.0;
    let ids: Vec<uuid::Uuid> = docs.iter().map(|(d, _)| d.id.0).collect();
    // The chunks of replaced versions, and the new ones.
    log.passages_of(
        tx,
        "SELECT 'chunk:' || id::text FROM chunks WHERE doc_id = ANY($1) AND kb_id = $2",
        &[&ids, &kb.0],
    )
    .await?;
    for (_, chunks) in &docs {
        for c in chunks {
            log.passage(PassageId::Chunk(c.id));
        }
    }
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
    log: &mut Touched,
) -> Result<(), CoreError> {
    log.passages_of(
        tx,
        "SELECT 'faq:' || id::text FROM faqs WHERE kb_id = $1 AND source_doc = $2 AND NOT edited",
        &[&kb.0, &doc.0],
    )
    .await?;
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
    log: &mut Touched,
) -> Result<(), CoreError> {
    let t = &tenant.0;
    match op {
        WriteOp::PutDocument { document, chunks } => {
            put_documents(tx, tenant, kb, vec![(document, chunks)], log).await?
        }
        WriteOp::DeleteDocument(id) => {
            // Its drafts: unedited ones go with it; edited ones are human
            // knowledge now and stay, unlinked.
            delete_unedited_drafts(tx, kb, id, log).await?;
            tx.execute(
                "UPDATE faqs SET source_doc = NULL WHERE kb_id = $1 AND source_doc = $2",
                &[&kb.0, &id.0],
            )
            .await
            .map_err(pg)?;
            delete_document(tx, kb, id, log).await?;
        }
        WriteOp::DeleteUneditedDrafts(doc) => delete_unedited_drafts(tx, kb, doc, log).await?,
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
            log.passage(PassageId::Faq(f.id));
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
            log.passage(PassageId::Faq(id));
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
            log.passage(PassageId::Fact(f.id));
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
            log.passage(PassageId::Fact(id));
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
                    // The space is fixed now: dense indexes start over.
                    log.flag(VECTORS_RESET);
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
            for v in &kept {
                log.vector(v.id);
            }
            let passages: Vec<String> = kept.iter().map(|v| v.id.to_string()).collect();
            let hashes: Vec<&str> = kept.iter().map(|v| v.text_hash.as_str()).collect();
            let values: Vec<VectorRef<'_>> = kept.iter().map(|v| VectorRef(&v.vector)).collect();
            tx.execute(
                "INSERT INTO vectors (tenant, kb_id, passage, text_hash, vector)
                 SELECT $1, $2, u.passage, u.text_hash, u.vector FROM unnest($3::text[], $4::text[], $5::vector[]) AS u(passage, text_hash, vector)
                 ON CONFLICT (kb_id, passage) DO UPDATE SET text_hash = excluded.text_hash, vector = excluded.vector, sentences = NULL, second = NULL, second_model = NULL",
                &[t, &kb.0, &passages, &hashes, &values],
            )
            .await
            .map_err(pg)?;
        }
        WriteOp::PutSentenceVectors(items) => {
            // Only beside the passage vector of the same text.
            let passages: Vec<String> = items.iter().map(|(id, _, _)| id.to_string()).collect();
            let hashes: Vec<&str> = items.iter().map(|(_, h, _)| h.as_str()).collect();
            let bytes: Vec<Vec<u8>> = items.iter().map(|(_, _, s)| s.to_bytes()).collect();
            tx.execute(
                "UPDATE vectors v SET sentences = u.sentences
                 FROM unnest($2::text[], $3::text[], $4::bytea[]) AS u(passage, text_hash, sentences)
                 WHERE v.kb_id = $1 AND v.passage = u.passage AND v.text_hash = u.text_hash",
                &[&kb.0, &passages, &hashes, &bytes],
            )
            .await
            .map_err(pg)?;
        }
        WriteOp::PutSecondVectors { model, items } => {
            // As sentence vectors: only beside the vector of the same text.
            let passages: Vec<String> = items.iter().map(|(id, _, _)| id.to_string()).collect();
            let hashes: Vec<&str> = items.iter().map(|(_, h, _)| h.as_str()).collect();
            let bytes: Vec<Vec<u8>> = items.iter().map(|(_, _, s)| s.to_bytes()).collect();
            tx.execute(
                "UPDATE vectors v SET second = u.second, second_model = $5
                 FROM unnest($2::text[], $3::text[], $4::bytea[]) AS u(passage, text_hash, second)
                 WHERE v.kb_id = $1 AND v.passage = u.passage AND v.text_hash = u.text_hash",
                &[&kb.0, &passages, &hashes, &bytes, &model],
            )
            .await
            .map_err(pg)?;
        }
        WriteOp::ClearVectors => {
            log.flag(VECTORS_RESET);
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
            log.flag(SYNONYMS);
            tx.execute(
                "INSERT INTO synonyms (tenant, kb_id, position, terms)
                 SELECT $1, $2, coalesce(max(position), 0) + 1, $3 FROM synonyms WHERE kb_id = $2",
                &[t, &kb.0, &g.terms],
            )
            .await
            .map_err(pg)?;
        }
        WriteOp::AddUserWord(w) => {
            log.flag(USER_WORDS);
            tx.execute(
                "INSERT INTO user_words (tenant, kb_id, word, freq) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (kb_id, word) DO UPDATE SET freq = excluded.freq",
                &[t, &kb.0, &w.word, &w.freq.map(i64::from)],
            )
            .await
            .map_err(pg)?;
        }
        WriteOp::PutSource(s) => crate::sources::put(tx, tenant, kb, &s).await?,
        WriteOp::DeleteSource(id) => crate::sources::delete(tx, kb, id).await?,
    }
    Ok(())
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
                "INSERT INTO kbs (id, tenant, name, created_at, settings, seq, log_from) VALUES ($1, $2, $3, $4, $5, 1, 1)",
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
        let mut log = Touched::default();
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
                        put_documents(&tx, tenant, kb, std::mem::take(&mut run), &mut log).await?;
                    }
                    if let WriteOp::PutDocument { document, chunks } = op {
                        run.push((document, chunks));
                    } else {
                        apply_op(&tx, tenant, kb, op, &mut log).await?;
                    }
                }
            }
        }
        if !run.is_empty() {
            put_documents(&tx, tenant, kb, run, &mut log).await?;
        }
        let written = crate::lex::sync(&tx, tenant, kb, &self.analyzer, dirty).await?;
        // The knowledge base's size, for the statistics after a large load
        // (`analyze.rs`); read only when they may be refreshed.
        let passages = if self.analyses.allowed() && written > 0 {
            crate::lex::passage_count(&tx, kb).await?
        } else {
            0
        };
        let seq: i64 = tx
            .query_one(
                "UPDATE kbs SET seq = seq + 1 WHERE id = $1 RETURNING seq",
                &[&kb.0],
            )
            .await
            .map_err(pg)?
            .get(0);
        // The change log, in the same transaction.
        let retain = self.change_log_retention();
        crate::changes::record(&tx, tenant, kb, seq as u64, log, retain).await?;
        if failpoint::hit("store.apply.before_commit") {
            return Err(PgStoreError::Failpoint("store.apply.before_commit").into());
        }
        tx.commit().await.map_err(pg)?;
        self.analyses
            .after_write(&conn, kb, passages, written)
            .await;
        Ok(seq as u64)
    }
}
