//! URL sources in the embedded store: one row per source, its pages of the
//! last sync as JSON.

use crate::error::StoreError;
use crate::rows::sql;
use rag_core::{CoreError, KbId, Source, SourceId, SourceStatus};
use rusqlite::{params, Connection, Transaction};

pub(crate) fn put(tx: &Transaction<'_>, kb: KbId, s: &Source) -> Result<(), CoreError> {
    let pages = serde_json::to_string(&s.pages)
        .map_err(|e| CoreError::Store(format!("source pages: {e}")))?;
    tx.execute(
        "INSERT INTO sources (id, kb_id, url, depth, max_pages, owner, status, reason, created_at, last_sync, pages)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
         ON CONFLICT(id) DO UPDATE SET url = excluded.url, depth = excluded.depth, max_pages = excluded.max_pages,
           owner = excluded.owner, status = excluded.status, reason = excluded.reason, last_sync = excluded.last_sync,
           pages = excluded.pages
         WHERE sources.kb_id = excluded.kb_id",
        params![
            s.id.to_string(),
            kb.to_string(),
            s.url,
            s.depth,
            s.max_pages,
            s.owner,
            s.status.as_str(),
            s.reason,
            s.created_at,
            s.last_sync,
            pages
        ],
    )
    .map_err(sql)?;
    Ok(())
}

pub(crate) fn delete(tx: &Transaction<'_>, kb: KbId, id: SourceId) -> Result<(), CoreError> {
    tx.execute(
        "DELETE FROM sources WHERE id = ?1 AND kb_id = ?2",
        params![id.to_string(), kb.to_string()],
    )
    .map_err(sql)?;
    Ok(())
}

pub(crate) fn read(c: &Connection, kb: KbId) -> Result<Vec<Source>, CoreError> {
    let mut stmt = c
        .prepare(
            "SELECT id, url, depth, max_pages, owner, status, reason, created_at, last_sync, pages
             FROM sources WHERE kb_id = ?1 ORDER BY created_at, id",
        )
        .map_err(sql)?;
    let rows = stmt
        .query_map([kb.to_string()], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, u32>(2)?,
                r.get::<_, u32>(3)?,
                r.get::<_, Option<String>>(4)?,
                r.get::<_, String>(5)?,
                r.get::<_, Option<String>>(6)?,
                r.get::<_, i64>(7)?,
                r.get::<_, Option<i64>>(8)?,
                r.get::<_, String>(9)?,
            ))
        })
        .map_err(sql)?;
    let corrupt = |column: &'static str, detail: String| {
        CoreError::from(StoreError::Corrupt {
            table: "sources",
            column,
            detail,
        })
    };
    let mut out = Vec::new();
    for row in rows {
        let (id, url, depth, max_pages, owner, status, reason, created_at, last_sync, pages) =
            row.map_err(sql)?;
        out.push(Source {
            id: SourceId::parse(&id).ok_or_else(|| corrupt("id", format!("bad id {id:?}")))?,
            kb,
            url,
            depth,
            max_pages,
            owner,
            status: SourceStatus::parse(&status)
                .ok_or_else(|| corrupt("status", status.clone()))?,
            reason,
            created_at,
            last_sync,
            pages: serde_json::from_str(&pages).map_err(|e| corrupt("pages", e.to_string()))?,
        });
    }
    Ok(out)
}
