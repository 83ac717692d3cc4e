//! The reads other than snapshots: [`StoreRead`] for the embedded store.

use crate::open::{owned, EmbeddedStore};
use crate::rows::{
    faq_from_row, json_vec, kb_from_row, parse_id, read_faqs, sql, to_kb, FAQ_COLUMNS,
};
use async_trait::async_trait;
use rag_core::{
    Chunk, ChunkId, CoreError, DocId, Document, DocumentInfo, DocumentPage, DocumentQuery,
    EmbeddingSpace, FaqEntry, FaqId, KbCounts, KbId, KbSnapshot, KnowledgeBase, PassageId,
    SentenceVectors, StoreRead, TenantId, UserError,
};
use rusqlite::{params, OptionalExtension};

/// Runs `sql` (parameters: passage key, knowledge base) once per key of
/// `keys` through the primary key, keeping what `read` makes of each
/// passage's row (`None`: nothing to keep).
fn per_passage<T>(
    c: &rusqlite::Connection,
    sql_text: &str,
    kb: KbId,
    keys: &[String],
    mut read: impl FnMut(&str, &rusqlite::Row<'_>) -> Result<Option<T>, CoreError>,
) -> Result<Vec<T>, CoreError> {
    let mut stmt = c.prepare_cached(sql_text).map_err(sql)?;
    let kb_s = kb.to_string();
    let mut out = Vec::new();
    for key in keys {
        let mut rows = stmt.query(params![key, kb_s]).map_err(sql)?;
        if let Some(r) = rows.next().map_err(sql)? {
            out.extend(read(key, r)?);
        }
    }
    Ok(out)
}

/// A page of the documents listing: the knowledge base's documents after
/// the key (?2, ?3) in key order, those the viewer may see (?4: every
/// owner's; else unrestricted ones and ?5's), ?6 rows at most. The row
/// value comparison is a range of `documents_by_kb`.
pub(crate) const PAGE_SQL: &str = "SELECT d.id, d.title, d.source, d.content_hash, (SELECT count(*) FROM chunks c WHERE c.doc_id = d.id), d.owner, d.created_at
     FROM documents d
     WHERE d.kb_id = ?1 AND (d.created_at, d.id) > (?2, ?3) AND (?4 OR d.owner IS NULL OR d.owner = ?5)
     ORDER BY d.created_at, d.id LIMIT ?6";

/// The documents of one source (?2), through `documents_by_source`: a
/// source holds a handful of documents, paged in [`page_of_source`] (an
/// ORDER BY or a key range here would make SQLite walk the whole knowledge
/// base in `documents_by_kb` instead).
pub(crate) const BY_SOURCE_SQL: &str = "SELECT d.id, d.title, d.source, d.content_hash, (SELECT count(*) FROM chunks c WHERE c.doc_id = d.id), d.owner, d.created_at
     FROM documents d WHERE d.kb_id = ?1 AND d.source = ?2";

/// Every document of a knowledge base, counted in `documents_by_kb`.
pub(crate) const COUNT_ALL_SQL: &str = "SELECT count(*) FROM documents WHERE kb_id = ?1";

/// The documents a viewer without every owner's rights may see: all of
/// them, less the restricted ones, plus its owner's (?2; NULL adds none),
/// the last two counted in the partial index `documents_restricted`.
pub(crate) const COUNT_VISIBLE_SQL: &str =
    "SELECT (SELECT count(*) FROM documents WHERE kb_id = ?1)
          - (SELECT count(*) FROM documents WHERE kb_id = ?1 AND owner IS NOT NULL)
          + (SELECT count(*) FROM documents WHERE kb_id = ?1 AND owner = ?2)";

/// One page of a source's documents, read whole, in key order.
fn page_of_source(mut docs: Vec<DocumentInfo>, query: &DocumentQuery) -> Vec<DocumentInfo> {
    docs.retain(|d| {
        query.viewer.sees(d.owner.as_deref())
            && query
                .after
                .is_none_or(|a| (d.created_at, d.id) > (a.created_at, a.id))
    });
    docs.sort_by_key(|d| (d.created_at, d.id));
    docs.truncate(query.limit + 1);
    docs
}

type DocInfoRow = (String, String, String, String, i64, Option<String>, i64);

fn doc_info_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<DocInfoRow> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
    ))
}

fn to_doc_info(row: DocInfoRow) -> Result<DocumentInfo, CoreError> {
    let (id, title, source, content_hash, chunks, owner, created_at) = row;
    Ok(DocumentInfo {
        id: parse_id(&id, "documents", DocId::parse)?,
        title,
        source,
        content_hash,
        chunks: chunks as usize,
        owner,
        created_at,
    })
}

#[async_trait]
impl StoreRead for EmbeddedStore {
    async fn list_kbs(&self, tenant: &TenantId) -> Result<Vec<KnowledgeBase>, CoreError> {
        let tenant = tenant.clone();
        self.with_read(move |c| {
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
        self.with_read(move |c| {
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
        self.with_read(move |c| {
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
        crate::snapshot::snapshot(self, tenant, kb).await
    }

    async fn lexicon_snapshot(&self, tenant: &TenantId, kb: KbId) -> Result<KbSnapshot, CoreError> {
        crate::snapshot::lexicon_snapshot(self, tenant, kb).await
    }

    async fn index_snapshot_streamed(
        &self,
        tenant: &TenantId,
        kb: KbId,
        batch: usize,
        parts: std::sync::mpsc::SyncSender<rag_core::SnapshotPart>,
    ) -> Result<usize, CoreError> {
        crate::snapshot::index_snapshot_streamed(self, tenant, kb, batch, parts).await
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
        let tenant = tenant.clone();
        self.with_read(move |c| {
            owned(c, &tenant, kb)?;
            let mut stmt = c
                .prepare(
                    "SELECT d.id, d.title, d.source, d.content_hash, (SELECT count(*) FROM chunks c WHERE c.doc_id = d.id), d.owner, d.created_at
                     FROM documents d WHERE d.kb_id = ?1 ORDER BY d.created_at, d.id",
                )
                .map_err(sql)?;
            let rows = stmt.query_map([kb.to_string()], doc_info_row).map_err(sql)?;
            rows.map(|r| r.map_err(sql).and_then(to_doc_info)).collect()
        })
        .await
    }

    async fn documents_page(
        &self,
        tenant: &TenantId,
        kb: KbId,
        query: &DocumentQuery,
    ) -> Result<DocumentPage, CoreError> {
        let (tenant, query) = (tenant.clone(), query.clone());
        self.with_read(move |c| {
            owned(c, &tenant, kb)?;
            let (everyone, owner) = query.viewer.sql_visibility();
            // The first page starts before every key.
            let (after_at, after_id) = query
                .after
                .map(|a| (a.created_at, a.id.to_string()))
                .unwrap_or((i64::MIN, String::new()));
            let limit = query.limit as i64 + 1;
            let kb_s = kb.to_string();
            let rows = match &query.source {
                None => {
                    let mut stmt = c.prepare_cached(PAGE_SQL).map_err(sql)?;
                    let rows = stmt
                        .query_map(
                            params![kb_s, after_at, after_id, everyone, owner, limit],
                            doc_info_row,
                        )
                        .map_err(sql)?;
                    rows.map(|r| r.map_err(sql).and_then(to_doc_info))
                        .collect::<Result<Vec<_>, _>>()?
                }
                Some(source) => {
                    let mut stmt = c.prepare_cached(BY_SOURCE_SQL).map_err(sql)?;
                    let rows = stmt
                        .query_map(params![kb_s, source], doc_info_row)
                        .map_err(sql)?;
                    let docs = rows
                        .map(|r| r.map_err(sql).and_then(to_doc_info))
                        .collect::<Result<Vec<_>, _>>()?;
                    page_of_source(docs, &query)
                }
            };
            let total: i64 = if everyone {
                c.prepare_cached(COUNT_ALL_SQL)
                    .and_then(|mut s| s.query_row([&kb_s], |r| r.get(0)))
                    .map_err(sql)?
            } else {
                c.prepare_cached(COUNT_VISIBLE_SQL)
                    .and_then(|mut s| s.query_row(params![kb_s, owner], |r| r.get(0)))
                    .map_err(sql)?
            };
            Ok(DocumentPage::from_rows(rows, query.limit, total as usize))
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
        self.with_read(move |c| {
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
        self.with_read(move |c| {
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

    async fn document_by_source(
        &self,
        tenant: &TenantId,
        kb: KbId,
        source: &str,
        owner: Option<&str>,
    ) -> Result<Vec<DocId>, CoreError> {
        let (tenant, source, owner) = (tenant.clone(), source.to_owned(), owner.map(str::to_owned));
        self.with_read(move |c| {
            owned(c, &tenant, kb)?;
            let mut stmt = c
                // Sorted here: an ORDER BY makes SQLite walk the knowledge
                // base's documents in order instead of looking the source up.
                .prepare_cached(
                    "SELECT id, created_at FROM documents WHERE kb_id = ?1 AND source = ?2 AND owner IS ?3",
                )
                .map_err(sql)?;
            let mut found = stmt
                .query_map(params![kb.to_string(), source, owner], |r| {
                    Ok((r.get::<_, i64>(1)?, r.get::<_, String>(0)?))
                })
                .map_err(sql)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(sql)?;
            found.sort();
            found
                .iter()
                .map(|(_, id)| parse_id(id, "documents", DocId::parse))
                .collect()
        })
        .await
    }

    async fn kb_counts(&self, tenant: &TenantId, kb: KbId) -> Result<KbCounts, CoreError> {
        let tenant = tenant.clone();
        self.with_read(move |c| {
            owned(c, &tenant, kb)?;
            let (documents, chunks, faqs): (i64, i64, i64) = c
                .query_row(
                    "SELECT (SELECT count(*) FROM documents WHERE kb_id = ?1),
                            (SELECT count(*) FROM chunks WHERE kb_id = ?1),
                            (SELECT count(*) FROM faqs WHERE kb_id = ?1)",
                    [kb.to_string()],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .map_err(sql)?;
            Ok(KbCounts {
                documents: documents as usize,
                chunks: chunks as usize,
                faqs: faqs as usize,
            })
        })
        .await
    }

    async fn faqs(&self, tenant: &TenantId, kb: KbId) -> Result<Vec<FaqEntry>, CoreError> {
        let tenant = tenant.clone();
        self.with_read(move |c| {
            owned(c, &tenant, kb)?;
            read_faqs(c, kb)
        })
        .await
    }

    async fn faq(
        &self,
        tenant: &TenantId,
        kb: KbId,
        id: FaqId,
    ) -> Result<Option<FaqEntry>, CoreError> {
        let tenant = tenant.clone();
        self.with_read(move |c| {
            owned(c, &tenant, kb)?;
            let mut stmt = c
                .prepare_cached(&format!(
                    "SELECT {FAQ_COLUMNS} FROM faqs WHERE id = ?1 AND kb_id = ?2"
                ))
                .map_err(sql)?;
            let mut rows = stmt
                .query(params![id.to_string(), kb.to_string()])
                .map_err(sql)?;
            match rows.next().map_err(sql)? {
                Some(r) => Ok(Some(faq_from_row(r, kb)?)),
                None => Ok(None),
            }
        })
        .await
    }

    async fn faqs_page(
        &self,
        tenant: &TenantId,
        kb: KbId,
        query: &rag_core::FaqQuery,
    ) -> Result<rag_core::FaqPage, CoreError> {
        crate::pages::faqs_page(self, tenant, kb, query).await
    }

    async fn sources(
        &self,
        tenant: &TenantId,
        kb: KbId,
    ) -> Result<Vec<rag_core::Source>, CoreError> {
        let tenant = tenant.clone();
        self.with_read(move |c| {
            owned(c, &tenant, kb)?;
            crate::sources::read(c, kb)
        })
        .await
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
        let (tenant, keys) = (
            tenant.clone(),
            ids.iter().map(|id| id.to_string()).collect::<Vec<_>>(),
        );
        self.with_read(move |c| {
            owned(c, &tenant, kb)?;
            per_passage(
                c,
                "SELECT passage, text_hash, vector FROM vectors WHERE passage = ?1 AND kb_id = ?2",
                kb,
                &keys,
                |_, r| crate::rows::vector_from_row(r).map(Some),
            )
        })
        .await
    }

    async fn sentence_vectors(
        &self,
        tenant: &TenantId,
        kb: KbId,
        ids: &[PassageId],
    ) -> Result<Vec<(PassageId, SentenceVectors)>, CoreError> {
        let (tenant, keys) = (
            tenant.clone(),
            ids.iter().map(|id| id.to_string()).collect::<Vec<_>>(),
        );
        self.with_read(move |c| {
            owned(c, &tenant, kb)?;
            per_passage(
                c,
                "SELECT sentences FROM vectors WHERE passage = ?1 AND kb_id = ?2 AND sentences IS NOT NULL",
                kb,
                &keys,
                |key, r| {
                    let bytes: Vec<u8> = r.get(0).map_err(sql)?;
                    // Unreadable bytes are skipped: the passage is scored by
                    // its passage vector alone.
                    let id = PassageId::parse(key);
                    Ok(id.zip(SentenceVectors::from_bytes(&bytes)))
                },
            )
        })
        .await
    }

    async fn second_vectors(
        &self,
        tenant: &TenantId,
        kb: KbId,
        model: &str,
        ids: &[PassageId],
    ) -> Result<Vec<(PassageId, SentenceVectors)>, CoreError> {
        let (tenant, model, keys) = (
            tenant.clone(),
            model.to_owned(),
            ids.iter().map(|id| id.to_string()).collect::<Vec<_>>(),
        );
        self.with_read(move |c| {
            owned(c, &tenant, kb)?;
            per_passage(
                c,
                "SELECT second, second_model FROM vectors WHERE passage = ?1 AND kb_id = ?2 AND second IS NOT NULL",
                kb,
                &keys,
                |key, r| {
                    let (bytes, made_by): (Vec<u8>, Option<String>) =
                        (r.get(0).map_err(sql)?, r.get(1).map_err(sql)?);
                    if made_by.as_deref() != Some(model.as_str()) {
                        return Ok(None);
                    }
                    let id = PassageId::parse(key);
                    Ok(id.zip(SentenceVectors::from_bytes(&bytes)))
                },
            )
        })
        .await
    }

    async fn embedding_space(
        &self,
        tenant: &TenantId,
        kb: KbId,
    ) -> Result<Option<EmbeddingSpace>, CoreError> {
        let tenant = tenant.clone();
        self.with_read(move |c| {
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
