//! [`rag_core::StoreRead::passages_page`]: a knowledge base's text passages
//! a page at a time, in the snapshot's order, each page a transaction of
//! its own.
//!
//! Chunks come in (document `created_at`, document id, ordinal) order
//! through `documents_by_kb` and `chunks_by_doc`, then FAQ entries in
//! (`created_at`, id) order through `faqs_by_kb`; a page starts after the
//! cursor's key, so reading it costs the same wherever it lies.
//!
//! [`rag_core::StoreRead::faqs_page`]: the FAQ listing, in the same order,
//! through `faqs_by_kb` or, for one status, `faqs_by_kb_status`.

use crate::error::pg;
use crate::open::{begin, owned, PgStore};
use crate::rows::{faq_from_row, FAQ_COLUMNS};
use crate::snapshot::{chunk_passage, CHUNK_PASSAGE_COLUMNS};
use rag_core::{
    CoreError, DocId, FaqPage, FaqQuery, KbId, Passage, PassageCursor, PassagePage, TenantId,
};
use std::collections::HashMap;

/// The chunks after a (document `created_at`, document id, ordinal) key.
pub fn chunks_page_sql() -> String {
    format!(
        "SELECT {CHUNK_PASSAGE_COLUMNS}, c.ordinal
         FROM documents d JOIN chunks c ON c.doc_id = d.id
         WHERE d.kb_id = $1 AND (d.created_at, d.id) >= ($2, $3) AND c.ordinal > CASE WHEN d.id = $3 THEN $4 ELSE -1 END
         ORDER BY d.created_at, d.id, c.ordinal LIMIT $5"
    )
}

/// The FAQ entries after a (`created_at`, id) key.
pub fn faqs_page_sql() -> String {
    format!(
        "SELECT {FAQ_COLUMNS} FROM faqs WHERE kb_id = $1 AND (created_at, id) > ($2, $3) ORDER BY created_at, id LIMIT $4"
    )
}

/// One FAQ entry by id ($1) of a knowledge base ($2).
pub fn faq_by_id_sql() -> String {
    format!("SELECT {FAQ_COLUMNS} FROM faqs WHERE id = $1 AND kb_id = $2")
}

/// The FAQ entries of one status ($5) after a (`created_at`, id) key.
pub fn faqs_status_page_sql() -> String {
    faq_page_sql(true, false)
}

/// Letters A to Z in lower case, and nothing else changed (as Rust's
/// `to_ascii_lowercase`, whatever the database's collation).
const ASCII_LOWER: &str = "'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz'";

/// A page of the FAQ listing after a (`created_at`, id) key ($2, $3), $4
/// rows at most: of one status ($5) when `status`, of entries containing
/// the next parameter (lowercased) when `contains`.
pub fn faq_page_sql(status: bool, contains: bool) -> String {
    let mut filters = String::new();
    if status {
        filters.push_str(" AND status = $5");
    }
    if contains {
        let p = if status { "$6" } else { "$5" };
        filters.push_str(&format!(
            " AND (strpos(translate(question, {ASCII_LOWER}), {p}) > 0
                   OR strpos(translate(answer, {ASCII_LOWER}), {p}) > 0
                   OR EXISTS (SELECT 1 FROM unnest(tags) t WHERE strpos(translate(t, {ASCII_LOWER}), {p}) > 0))"
        ));
    }
    format!(
        "SELECT {FAQ_COLUMNS} FROM faqs WHERE kb_id = $1{filters} AND (created_at, id) > ($2, $3) ORDER BY created_at, id LIMIT $4"
    )
}

/// The FAQ entries of a knowledge base.
pub const FAQ_COUNT_SQL: &str = "SELECT count(*) FROM faqs WHERE kb_id = $1";
/// The FAQ entries of a knowledge base with one status.
pub const FAQ_STATUS_COUNT_SQL: &str = "SELECT count(*) FROM faqs WHERE kb_id = $1 AND status = $2";

pub(crate) async fn faqs_page(
    store: &PgStore,
    tenant: &TenantId,
    kb: KbId,
    query: &FaqQuery,
) -> Result<FaqPage, CoreError> {
    let mut conn = store.conn().await?;
    let tx = begin(&mut conn, &tenant.0, true).await?;
    owned(&tx, tenant, kb).await?;
    let (at, id) = query
        .after
        .map(|a| (a.created_at, a.id.0))
        .unwrap_or((i64::MIN, uuid::Uuid::nil()));
    let limit = i64::try_from(query.limit).unwrap_or(i64::MAX - 1) + 1;
    let status = query.status.map(|s| s.as_str());
    let contains = query.contains.as_deref().map(str::to_ascii_lowercase);
    let mut bound: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![&kb.0, &at, &id, &limit];
    if status.is_some() {
        bound.push(&status);
    }
    if contains.is_some() {
        bound.push(&contains);
    }
    let sql = faq_page_sql(status.is_some(), contains.is_some());
    let rows = tx.query(&sql, &bound).await.map_err(pg)?;
    let total = if query.with_total {
        let row = match status {
            None => tx.query_one(FAQ_COUNT_SQL, &[&kb.0]).await,
            Some(status) => tx.query_one(FAQ_STATUS_COUNT_SQL, &[&kb.0, &status]).await,
        }
        .map_err(pg)?;
        Some(row.get::<_, i64>(0).max(0) as usize)
    } else {
        None
    };
    tx.commit().await.map_err(pg)?;
    let faqs = rows
        .iter()
        .map(|r| faq_from_row(r, kb))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(FaqPage::from_rows(faqs, query.limit, total))
}

pub(crate) async fn passages_page(
    store: &PgStore,
    tenant: &TenantId,
    kb: KbId,
    after: Option<&PassageCursor>,
    limit: usize,
) -> Result<PassagePage, CoreError> {
    let mut conn = store.conn().await?;
    let tx = begin(&mut conn, &tenant.0, true).await?;
    owned(&tx, tenant, kb).await?;
    let limit_sql = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut rows: Vec<(Passage, PassageCursor)> = Vec::new();
    // Chunks first, unless the cursor is already among the FAQ entries.
    let chunk_key = match after {
        None => Some((i64::MIN, uuid::Uuid::nil(), -1i32)),
        Some(PassageCursor::Chunk {
            created_at,
            doc,
            ordinal,
        }) => Some((
            *created_at,
            doc.0,
            i32::try_from(*ordinal).unwrap_or(i32::MAX),
        )),
        Some(PassageCursor::Faq { .. }) => None,
    };
    if let Some((at, doc, ordinal)) = chunk_key {
        let found = tx
            .query(
                &chunks_page_sql(),
                &[&kb.0, &at, &doc, &ordinal, &limit_sql],
            )
            .await
            .map_err(pg)?;
        for r in &found {
            let p = chunk_passage(r)?;
            let cursor = PassageCursor::Chunk {
                created_at: p.created_at,
                doc: DocId(r.get(1)),
                ordinal: i64::from(r.get::<_, i32>(11)),
            };
            rows.push((p, cursor));
        }
    }
    if rows.len() < limit {
        let (at, id) = match after {
            Some(PassageCursor::Faq { created_at, id }) => (*created_at, id.0),
            _ => (i64::MIN, uuid::Uuid::nil()),
        };
        let rest = (limit - rows.len()) as i64;
        let found = tx
            .query(&faqs_page_sql(), &[&kb.0, &at, &id, &rest])
            .await
            .map_err(pg)?;
        for r in &found {
            let faq = faq_from_row(r, kb)?;
            let cursor = PassageCursor::Faq {
                created_at: faq.created_at,
                id: faq.id,
            };
            rows.push((Passage::from(faq), cursor));
        }
    }
    let keys: Vec<String> = rows.iter().map(|(p, _)| p.id.to_string()).collect();
    let hashes: HashMap<String, String> = tx
        .query(
            "SELECT passage, text_hash FROM vectors WHERE kb_id = $1 AND passage = ANY($2)",
            &[&kb.0, &keys],
        )
        .await
        .map_err(pg)?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    tx.commit().await.map_err(pg)?;
    let next = if rows.len() == limit {
        rows.last().map(|(_, cursor)| cursor.clone())
    } else {
        None
    };
    let passages = rows
        .into_iter()
        .zip(keys)
        .map(|((p, _), key)| {
            let hash = hashes.get(&key).cloned();
            (p, hash)
        })
        .collect();
    Ok(PassagePage { passages, next })
}
