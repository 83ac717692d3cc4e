//! The reads other than snapshots: [`StoreRead`] for PostgreSQL.

use crate::error::pg;
use crate::open::{begin, owned, PgStore};
use crate::rows::{json, read_faqs, space_of, to_kb};
use async_trait::async_trait;
use rag_core::{
    Chunk, ChunkId, CoreError, DocId, Document, DocumentInfo, DocumentPage, DocumentQuery,
    EmbeddingSpace, FaqEntry, KbCounts, KbId, KbSnapshot, KnowledgeBase, PassageId,
    SentenceVectors, Source, StoreRead, TenantId, UserError,
};
use std::sync::Arc;

/// The vectors of some passages ($2) of a knowledge base ($1).
pub const VECTORS_BY_ID_SQL: &str =
    "SELECT passage, text_hash, vector FROM vectors WHERE kb_id = $1 AND passage = ANY($2)";

/// A page of the documents listing: the knowledge base's documents after
/// the key ($2, $3) in key order, those the viewer may see ($4: every
/// owner's; else unrestricted ones and $5's), $6 rows at most. The row
/// comparison is a range of `documents_by_kb`.
pub const PAGE_SQL: &str = "SELECT d.id, d.title, d.source, d.content_hash, (SELECT count(*) FROM chunks c WHERE c.doc_id = d.id), d.owner, d.created_at
     FROM documents d
     WHERE d.kb_id = $1 AND (d.created_at, d.id) > ($2, $3) AND ($4 OR d.owner IS NULL OR d.owner = $5)
     ORDER BY d.created_at, d.id LIMIT $6";

/// [`PAGE_SQL`] for one source ($7), through `documents_by_source`.
pub const PAGE_BY_SOURCE_SQL: &str = "SELECT d.id, d.title, d.source, d.content_hash, (SELECT count(*) FROM chunks c WHERE c.doc_id = d.id), d.owner, d.created_at
     FROM documents d
     WHERE d.kb_id = $1 AND d.source = $7 AND (d.created_at, d.id) > ($2, $3) AND ($4 OR d.owner IS NULL OR d.owner = $5)
     ORDER BY d.created_at, d.id LIMIT $6";

/// Every document of a knowledge base.
pub const COUNT_ALL_SQL: &str = "SELECT count(*) FROM documents WHERE kb_id = $1";

/// The documents a viewer without every owner's rights may see: all of
/// them, less the restricted ones, plus its owner's ($2; NULL adds none),
/// the last two counted in the partial index `documents_restricted`.
pub const COUNT_VISIBLE_SQL: &str = "SELECT (SELECT count(*) FROM documents WHERE kb_id = $1)
          - (SELECT count(*) FROM documents WHERE kb_id = $1 AND owner IS NOT NULL)
          + (SELECT count(*) FROM documents WHERE kb_id = $1 AND owner = $2)";

fn doc_info(r: &tokio_postgres::Row) -> DocumentInfo {
    DocumentInfo {
        id: DocId(r.get(0)),
        title: r.get(1),
        source: r.get(2),
        content_hash: r.get(3),
        chunks: r.get::<_, i64>(4) as usize,
        owner: r.get(5),
        created_at: r.get(6),
    }
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
        crate::snapshot::snapshot(self, tenant, kb).await
    }

    async fn lexicon_snapshot(&self, tenant: &TenantId, kb: KbId) -> Result<KbSnapshot, CoreError> {
        crate::head::lexicon_snapshot(self, tenant, kb).await
    }

    async fn index_snapshot(
        &self,
        tenant: &TenantId,
        kb: KbId,
    ) -> Result<(KbSnapshot, usize), CoreError> {
        crate::snapshot::index_snapshot(self, tenant, kb).await
    }

    async fn changes_since(
        &self,
        tenant: &TenantId,
        kb: KbId,
        since: u64,
    ) -> Result<Option<rag_core::KbChanges>, CoreError> {
        crate::changes::changes_since(self, tenant, kb, since).await
    }

    async fn documents(&self, tenant: &TenantId, kb: KbId) -> Result<Vec<DocumentInfo>, CoreError> {
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, false).await?;
        owned(&tx, tenant, kb).await?;
        let rows = tx
            .query(
                "SELECT d.id, d.title, d.source, d.content_hash, (SELECT count(*) FROM chunks c WHERE c.doc_id = d.id), d.owner, d.created_at
                 FROM documents d WHERE d.kb_id = $1 ORDER BY d.created_at, d.id",
                &[&kb.0],
            )
            .await
            .map_err(pg)?;
        tx.commit().await.map_err(pg)?;
        Ok(rows.iter().map(doc_info).collect())
    }

    async fn documents_page(
        &self,
        tenant: &TenantId,
        kb: KbId,
        query: &DocumentQuery,
    ) -> Result<DocumentPage, CoreError> {
        let (everyone, owner) = query.viewer.sql_visibility();
        // The first page starts before every key.
        let (after_at, after_id) = query
            .after
            .map(|a| (a.created_at, a.id.0))
            .unwrap_or((i64::MIN, uuid::Uuid::nil()));
        let limit = query.limit as i64 + 1;
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, false).await?;
        owned(&tx, tenant, kb).await?;
        let rows = match &query.source {
            None => tx
                .query(
                    PAGE_SQL,
                    &[&kb.0, &after_at, &after_id, &everyone, &owner, &limit],
                )
                .await
                .map_err(pg)?,
            Some(source) => tx
                .query(
                    PAGE_BY_SOURCE_SQL,
                    &[
                        &kb.0, &after_at, &after_id, &everyone, &owner, &limit, source,
                    ],
                )
                .await
                .map_err(pg)?,
        };
        let total: i64 = if everyone {
            tx.query_one(COUNT_ALL_SQL, &[&kb.0])
                .await
                .map_err(pg)?
                .get(0)
        } else {
            tx.query_one(COUNT_VISIBLE_SQL, &[&kb.0, &owner])
                .await
                .map_err(pg)?
                .get(0)
        };
        tx.commit().await.map_err(pg)?;
        Ok(DocumentPage::from_rows(
            rows.iter().map(doc_info).collect(),
            query.limit,
            total as usize,
        ))
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

    async fn document_by_source(
        &self,
        tenant: &TenantId,
        kb: KbId,
        source: &str,
        owner: Option<&str>,
    ) -> Result<Vec<DocId>, CoreError> {
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, false).await?;
        owned(&tx, tenant, kb).await?;
        let rows = tx
            .query(
                "SELECT id FROM documents WHERE kb_id = $1 AND source = $2 AND owner IS NOT DISTINCT FROM $3 ORDER BY created_at, id",
                &[&kb.0, &source, &owner],
            )
            .await
            .map_err(pg)?;
        tx.commit().await.map_err(pg)?;
        Ok(rows.iter().map(|r| DocId(r.get(0))).collect())
    }

    async fn kb_counts(&self, tenant: &TenantId, kb: KbId) -> Result<KbCounts, CoreError> {
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, false).await?;
        owned(&tx, tenant, kb).await?;
        let r = tx
            .query_one(
                "SELECT (SELECT count(*) FROM documents WHERE kb_id = $1),
                        (SELECT count(*) FROM chunks WHERE kb_id = $1),
                        (SELECT count(*) FROM faqs WHERE kb_id = $1)",
                &[&kb.0],
            )
            .await
            .map_err(pg)?;
        tx.commit().await.map_err(pg)?;
        Ok(KbCounts {
            documents: r.get::<_, i64>(0) as usize,
            chunks: r.get::<_, i64>(1) as usize,
            faqs: r.get::<_, i64>(2) as usize,
        })
    }

    async fn faqs(&self, tenant: &TenantId, kb: KbId) -> Result<Vec<FaqEntry>, CoreError> {
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, false).await?;
        owned(&tx, tenant, kb).await?;
        let out = read_faqs(&tx, kb).await?;
        tx.commit().await.map_err(pg)?;
        Ok(out)
    }

    async fn faq(
        &self,
        tenant: &TenantId,
        kb: KbId,
        id: rag_core::FaqId,
    ) -> Result<Option<FaqEntry>, CoreError> {
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, false).await?;
        owned(&tx, tenant, kb).await?;
        let row = tx
            .query_opt(&crate::pages::faq_by_id_sql(), &[&id.0, &kb.0])
            .await
            .map_err(pg)?;
        tx.commit().await.map_err(pg)?;
        row.map(|r| crate::rows::faq_from_row(&r, kb)).transpose()
    }

    async fn faqs_page(
        &self,
        tenant: &TenantId,
        kb: KbId,
        query: &rag_core::FaqQuery,
    ) -> Result<rag_core::FaqPage, CoreError> {
        crate::pages::faqs_page(self, tenant, kb, query).await
    }

    async fn sources(&self, tenant: &TenantId, kb: KbId) -> Result<Vec<Source>, CoreError> {
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, false).await?;
        owned(&tx, tenant, kb).await?;
        let out = crate::sources::read(&tx, kb).await?;
        tx.commit().await.map_err(pg)?;
        Ok(out)
    }

    async fn passages_page(
        &self,
        tenant: &TenantId,
        kb: KbId,
        after: Option<&rag_core::PassageCursor>,
        limit: usize,
    ) -> Result<rag_core::PassagePage, CoreError> {
        crate::pages::passages_page(self, tenant, kb, after, limit).await
    }

    async fn vectors(
        &self,
        tenant: &TenantId,
        kb: KbId,
        ids: &[PassageId],
    ) -> Result<Vec<rag_core::PassageVector>, CoreError> {
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, true).await?;
        owned(&tx, tenant, kb).await?;
        let keys: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
        let rows = tx
            .query(VECTORS_BY_ID_SQL, &[&kb.0, &keys])
            .await
            .map_err(pg)?;
        tx.commit().await.map_err(pg)?;
        let corrupt = |column, detail: String| crate::error::corrupt("vectors", column, detail);
        rows.iter()
            .map(|r| {
                let passage: String = r.get(0);
                let id = PassageId::parse(&passage)
                    .ok_or_else(|| corrupt("passage", passage.clone()))?;
                let vector: crate::vector::VectorOwned = r
                    .try_get(2)
                    .map_err(|e| corrupt("vector", crate::error::describe(&e)))?;
                Ok(rag_core::PassageVector {
                    id,
                    text_hash: r.get(1),
                    vector: vector.0,
                })
            })
            .collect()
    }

    async fn sentence_vectors(
        &self,
        tenant: &TenantId,
        kb: KbId,
        ids: &[PassageId],
    ) -> Result<Vec<(PassageId, SentenceVectors)>, CoreError> {
        let rows = self.vector_rows(tenant, kb, ids, "sentences", None).await?;
        Ok(decode_rows(&rows))
    }

    async fn second_vectors(
        &self,
        tenant: &TenantId,
        kb: KbId,
        model: &str,
        ids: &[PassageId],
    ) -> Result<Vec<(PassageId, SentenceVectors)>, CoreError> {
        let rows = self
            .vector_rows(tenant, kb, ids, "second", Some(model))
            .await?;
        Ok(decode_rows(&rows))
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

impl PgStore {
    /// `passage` and `column` (`vector` or `sentences`) of the rows of
    /// these passages of a knowledge base of a tenant that have one.
    pub(crate) async fn vector_rows(
        &self,
        tenant: &TenantId,
        kb: KbId,
        ids: &[PassageId],
        column: &'static str,
        second_model: Option<&str>,
    ) -> Result<Vec<tokio_postgres::Row>, CoreError> {
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, true).await?;
        owned(&tx, tenant, kb).await?;
        let keys: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
        let sql = format!("SELECT passage, {column} FROM vectors WHERE kb_id = $1 AND passage = ANY($2) AND {column} IS NOT NULL");
        let rows = match second_model {
            Some(model) => {
                tx.query(
                    &format!("{sql} AND second_model = $3"),
                    &[&kb.0, &keys, &model],
                )
                .await
            }
            None => tx.query(&sql, &[&kb.0, &keys]).await,
        }
        .map_err(pg)?;
        tx.commit().await.map_err(pg)?;
        Ok(rows)
    }
}

/// Rows of (passage, encoded vectors) as read by `vector_rows`; unreadable
/// bytes are skipped (the passage is then scored without them).
fn decode_rows(rows: &[tokio_postgres::Row]) -> Vec<(PassageId, SentenceVectors)> {
    rows.iter()
        .filter_map(|r| {
            let id = PassageId::parse(r.get(0))?;
            let bytes: &[u8] = r.get(1);
            Some((id, SentenceVectors::from_bytes(bytes)?))
        })
        .collect()
}
