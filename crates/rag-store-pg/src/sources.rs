//! URL sources in the PostgreSQL store: one row per source, its pages of the
//! last sync as JSON.

use crate::error::{corrupt, pg};
use crate::rows::json;
use rag_core::{CoreError, KbId, Source, SourceId, SourceStatus, TenantId};
use tokio_postgres::types::Json;
use tokio_postgres::Transaction;

pub(crate) async fn put(
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

pub(crate) async fn delete(tx: &Transaction<'_>, kb: KbId, id: SourceId) -> Result<(), CoreError> {
    tx.execute(
        "DELETE FROM sources WHERE id = $1 AND kb_id = $2",
        &[&id.0, &kb.0],
    )
    .await
    .map_err(pg)?;
    Ok(())
}

pub(crate) async fn read(tx: &Transaction<'_>, kb: KbId) -> Result<Vec<Source>, CoreError> {
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
