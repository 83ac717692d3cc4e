//! [`rag_core::StoreRead::passages_page`]: a knowledge base's text passages
//! a page at a time, in the snapshot's order, each page a read of its own.
//!
//! Chunks come in (document `created_at`, document id, ordinal) order
//! through `documents_by_kb` and `chunks_by_doc`, then FAQ entries in
//! (`created_at`, id) order through `faqs_by_kb_created`; a page starts
//! after the cursor's key, so reading it costs the same wherever it lies.
//!
//! [`rag_core::StoreRead::faqs_page`]: the FAQ listing, in the same
//! (`created_at`, id) order, through `faqs_by_kb_created` or, for one
//! status, `faqs_by_kb_status`.

use crate::open::{owned, EmbeddedStore};
use crate::rows::{chunk_passage, faq_from_row, parse_id, sql, CHUNK_PASSAGE_COLUMNS, FAQ_COLUMNS};
use rag_core::{
    CoreError, DocId, FaqPage, FaqQuery, KbId, Passage, PassageCursor, PassagePage, TenantId,
};
use rusqlite::{params, Connection, OptionalExtension};

/// The chunks after a (document `created_at`, document id, ordinal) key.
fn chunks_sql() -> String {
    format!(
        "SELECT {CHUNK_PASSAGE_COLUMNS}, c.ordinal
         FROM documents d JOIN chunks c ON c.doc_id = d.id
         WHERE d.kb_id = ?1 AND (d.created_at, d.id) >= (?2, ?3) AND c.ordinal > CASE WHEN d.id = ?3 THEN ?4 ELSE -1 END
         ORDER BY d.created_at, d.id, c.ordinal LIMIT ?5"
    )
}

/// A passage's vector's text hash.
const HASH_SQL: &str = "SELECT text_hash FROM vectors WHERE passage = ?1 AND kb_id = ?2";

pub(crate) async fn passages_page(
    store: &EmbeddedStore,
    tenant: &TenantId,
    kb: KbId,
    after: Option<&PassageCursor>,
    limit: usize,
) -> Result<PassagePage, CoreError> {
    let (tenant, after) = (tenant.clone(), after.cloned());
    store
        .with_read(move |c| {
            owned(c, &tenant, kb)?;
            read_page(c, kb, after, limit)
        })
        .await
}

fn read_page(
    c: &Connection,
    kb: KbId,
    after: Option<PassageCursor>,
    limit: usize,
) -> Result<PassagePage, CoreError> {
    let kb_s = kb.to_string();
    let mut rows: Vec<(Passage, PassageCursor)> = Vec::new();
    // Chunks first, unless the cursor is already among the FAQ entries.
    let chunk_key = match &after {
        None => Some((i64::MIN, String::new(), -1)),
        Some(PassageCursor::Chunk {
            created_at,
            doc,
            ordinal,
        }) => Some((*created_at, doc.to_string(), *ordinal)),
        Some(PassageCursor::Faq { .. }) => None,
    };
    if let Some((at, doc, ordinal)) = chunk_key {
        let mut stmt = c.prepare_cached(&chunks_sql()).map_err(sql)?;
        let mut found = stmt
            .query(params![kb_s, at, doc, ordinal, limit as i64])
            .map_err(sql)?;
        while let Some(r) = found.next().map_err(sql)? {
            let p = chunk_passage(r)?;
            let doc: String = r.get(1).map_err(sql)?;
            let cursor = PassageCursor::Chunk {
                created_at: p.created_at,
                doc: parse_id(&doc, "documents", DocId::parse)?,
                ordinal: r.get(11).map_err(sql)?,
            };
            rows.push((p, cursor));
        }
    }
    if rows.len() < limit {
        let (at, id) = match &after {
            Some(PassageCursor::Faq { created_at, id }) => (*created_at, id.to_string()),
            _ => (i64::MIN, String::new()),
        };
        let mut stmt = c.prepare_cached(&faq_page_sql(false, false)).map_err(sql)?;
        let mut found = stmt
            .query(params![kb_s, at, id, (limit - rows.len()) as i64])
            .map_err(sql)?;
        while let Some(r) = found.next().map_err(sql)? {
            let faq = faq_from_row(r, kb)?;
            let cursor = PassageCursor::Faq {
                created_at: faq.created_at,
                id: faq.id,
            };
            rows.push((Passage::from(faq), cursor));
        }
    }
    let next = if rows.len() == limit {
        rows.last().map(|(_, cursor)| cursor.clone())
    } else {
        None
    };
    let mut hash = c.prepare_cached(HASH_SQL).map_err(sql)?;
    let mut passages = Vec::with_capacity(rows.len());
    for (p, _) in rows {
        let h: Option<String> = hash
            .query_row(params![p.id.to_string(), kb_s], |r| r.get(0))
            .optional()
            .map_err(sql)?;
        passages.push((p, h));
    }
    Ok(PassagePage { passages, next })
}

/// A page of the FAQ listing after a (`created_at`, id) key (?2, ?3), ?4
/// rows at most: of one status (?5) when `status`, of entries containing
/// ?6 (lowercased) when `contains`.
pub(crate) fn faq_page_sql(status: bool, contains: bool) -> String {
    let mut filters = String::new();
    if status {
        filters.push_str(" AND status = ?5");
    }
    if contains {
        filters.push_str(
            " AND (instr(lower(question), ?6) > 0 OR instr(lower(answer), ?6) > 0
                   OR EXISTS (SELECT 1 FROM json_each(faqs.tags) t WHERE instr(lower(t.value), ?6) > 0))",
        );
    }
    format!(
        "SELECT {FAQ_COLUMNS} FROM faqs WHERE kb_id = ?1{filters} AND (created_at, id) > (?2, ?3) ORDER BY created_at, id LIMIT ?4"
    )
}

/// The FAQ entries of a knowledge base.
const FAQ_COUNT_SQL: &str = "SELECT count(*) FROM faqs WHERE kb_id = ?1";
/// The FAQ entries of a knowledge base with one status.
const FAQ_STATUS_COUNT_SQL: &str = "SELECT count(*) FROM faqs WHERE kb_id = ?1 AND status = ?2";

pub(crate) async fn faqs_page(
    store: &EmbeddedStore,
    tenant: &TenantId,
    kb: KbId,
    query: &FaqQuery,
) -> Result<FaqPage, CoreError> {
    let (tenant, query) = (tenant.clone(), query.clone());
    store
        .with_read(move |c| {
            owned(c, &tenant, kb)?;
            let kb_s = kb.to_string();
            // The first page starts before every key.
            let (at, id) = query
                .after
                .map(|a| (a.created_at, a.id.to_string()))
                .unwrap_or((i64::MIN, String::new()));
            let limit = query.limit as i64 + 1;
            let status = query.status.map(|s| s.as_str());
            let contains = query.contains.as_deref().map(str::to_ascii_lowercase);
            let mut stmt = c
                .prepare_cached(&faq_page_sql(status.is_some(), contains.is_some()))
                .map_err(sql)?;
            // Unused parameters are bound too (as NULL): the statement
            // names the highest it uses.
            let mut bound: Vec<&dyn rusqlite::ToSql> = vec![&kb_s, &at, &id, &limit];
            if status.is_some() || contains.is_some() {
                bound.push(&status);
            }
            if contains.is_some() {
                bound.push(&contains);
            }
            let mut rows = stmt.query(bound.as_slice()).map_err(sql)?;
            let mut faqs = Vec::new();
            while let Some(r) = rows.next().map_err(sql)? {
                faqs.push(faq_from_row(r, kb)?);
            }
            let total = if query.with_total {
                let n: i64 = match status {
                    None => c
                        .prepare_cached(FAQ_COUNT_SQL)
                        .and_then(|mut s| s.query_row([&kb_s], |r| r.get(0))),
                    Some(status) => c
                        .prepare_cached(FAQ_STATUS_COUNT_SQL)
                        .and_then(|mut s| s.query_row(params![kb_s, status], |r| r.get(0))),
                }
                .map_err(sql)?;
                Some(n.max(0) as usize)
            } else {
                None
            };
            Ok(FaqPage::from_rows(faqs, query.limit, total))
        })
        .await
}
