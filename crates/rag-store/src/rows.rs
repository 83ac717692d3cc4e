//! Rows and domain types: decoding stored values (ids, JSON columns,
//! vectors) and the rows shared by several reads.

use crate::error::StoreError;
use rag_core::{CoreError, DocId, FaqEntry, FaqId, FaqStatus, KbId, KnowledgeBase, TenantId};
use rusqlite::Connection;

pub(crate) fn sql(e: rusqlite::Error) -> CoreError {
    StoreError::Sqlite(e).into()
}

pub(crate) fn json_vec(
    s: &str,
    table: &'static str,
    column: &'static str,
) -> Result<Vec<String>, CoreError> {
    serde_json::from_str(s).map_err(|e| {
        StoreError::Corrupt {
            table,
            column,
            detail: e.to_string(),
        }
        .into()
    })
}

pub(crate) fn parse_id<T>(
    s: &str,
    table: &'static str,
    parse: fn(&str) -> Option<T>,
) -> Result<T, CoreError> {
    parse(s).ok_or_else(|| {
        StoreError::Corrupt {
            table,
            column: "id",
            detail: format!("bad id {s:?}"),
        }
        .into()
    })
}

pub(crate) fn kb_from_row(
    r: &rusqlite::Row<'_>,
) -> rusqlite::Result<(String, String, String, i64, String)> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
}

pub(crate) fn to_kb(
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

pub(crate) fn read_faqs(conn: &Connection, kb: KbId) -> Result<Vec<FaqEntry>, CoreError> {
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
