//! The query log in the PostgreSQL store: indexed columns for filtering, the
//! whole record as JSON; rows filtered by the viewer in SQL.

use crate::error::{corrupt, describe, pg};
use crate::open::{begin, PgStore};
use async_trait::async_trait;
use rag_core::{
    ConversationSummary, CoreError, KbId, LogFilter, QueryLogRecord, QueryLogStore, TenantId,
    Viewer,
};
use tokio_postgres::types::Json;
use tokio_postgres::Row;

fn decode(r: &Row) -> Result<QueryLogRecord, CoreError> {
    let mut rec: QueryLogRecord = r
        .try_get::<_, Json<QueryLogRecord>>(0)
        .map_err(|e| corrupt("query_log", "record", describe(&e)))?
        .0;
    rec.feedback = r.get(1);
    Ok(rec)
}

/// The parameters of the visibility condition `($a OR owner IS NULL OR owner
/// = $b)`: everything, or rows without an owner and the viewer's own.
fn visibility(viewer: &Viewer) -> (bool, Option<String>) {
    let (everything, owner) = viewer.sql_visibility();
    (everything, owner.map(str::to_owned))
}

#[async_trait]
impl QueryLogStore for PgStore {
    async fn log_query(&self, record: &QueryLogRecord) -> Result<(), CoreError> {
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &record.tenant.0, false).await?;
        tx.execute(
            "INSERT INTO query_log (id, tenant, kb_id, created_at, query, conversation, kb_miss, feedback, owner, record)
             SELECT $1::text, $2::text, $3::uuid, $4::bigint, $5::text, $6::text, $7::boolean, $8::text, $9::text, $10::jsonb
             WHERE EXISTS (SELECT 1 FROM kbs WHERE id = $3::uuid AND tenant = $2::text)",
            &[
                &record.id,
                &record.tenant.0,
                &record.kb.0,
                &record.created_at,
                &record.query,
                &record.conversation_id,
                &record.kb_miss,
                &record.feedback,
                &record.owner,
                &Json(record),
            ],
        )
        .await
        .map_err(pg)?;
        tx.commit().await.map_err(pg)
    }

    async fn query_log(
        &self,
        tenant: &TenantId,
        kb: KbId,
        filter: &LogFilter,
    ) -> Result<Vec<QueryLogRecord>, CoreError> {
        let (all, owner) = visibility(&filter.viewer);
        let limit = filter.limit.clamp(1, 10_000) as i64;
        let before_at: Option<i64> = filter.before.as_ref().map(|b| b.0);
        let before_id: Option<&str> = filter.before.as_ref().map(|b| b.1.as_str());
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, false).await?;
        let rows = tx
            .query(
                "SELECT record, feedback FROM query_log
                 WHERE tenant = $1 AND kb_id = $2
                   AND ($3::boolean IS NULL OR kb_miss = $3::boolean)
                   AND ($4::text IS NULL OR conversation = $4::text)
                   AND ($5::bigint IS NULL OR created_at >= $5::bigint)
                   AND ($7::boolean OR owner IS NULL OR owner = $8::text)
                   AND ($9::bigint IS NULL OR created_at < $9::bigint
                        OR (created_at = $9::bigint AND id < $10::text))
                 ORDER BY created_at DESC, id DESC LIMIT $6",
                &[
                    &tenant.0,
                    &kb.0,
                    &filter.kb_miss,
                    &filter.conversation_id,
                    &filter.since,
                    &limit,
                    &all,
                    &owner,
                    &before_at,
                    &before_id,
                ],
            )
            .await
            .map_err(pg)?;
        tx.commit().await.map_err(pg)?;
        // One unreadable row never makes the listing fail.
        Ok(rows
            .iter()
            .filter_map(|r| {
                decode(r)
                    .map_err(
                        |e| tracing::warn!(error = %e, "query log: skipping an unreadable row"),
                    )
                    .ok()
            })
            .collect())
    }

    async fn query_log_entry(
        &self,
        tenant: &TenantId,
        id: &str,
        viewer: &Viewer,
    ) -> Result<Option<QueryLogRecord>, CoreError> {
        let (all, owner) = visibility(viewer);
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, false).await?;
        let row = tx
            .query_opt(
                "SELECT record, feedback FROM query_log WHERE id = $1 AND tenant = $2 AND ($3::boolean OR owner IS NULL OR owner = $4::text)",
                &[&id, &tenant.0, &all, &owner],
            )
            .await
            .map_err(pg)?;
        tx.commit().await.map_err(pg)?;
        row.as_ref().map(decode).transpose()
    }

    async fn set_feedback(
        &self,
        tenant: &TenantId,
        id: &str,
        viewer: &Viewer,
        feedback: &str,
    ) -> Result<bool, CoreError> {
        let (all, owner) = visibility(viewer);
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, false).await?;
        let n = tx
            .execute(
                "UPDATE query_log SET feedback = $1 WHERE id = $2 AND tenant = $3 AND ($4::boolean OR owner IS NULL OR owner = $5::text)",
                &[&feedback, &id, &tenant.0, &all, &owner],
            )
            .await
            .map_err(pg)?;
        tx.commit().await.map_err(pg)?;
        Ok(n == 1)
    }

    async fn conversations(
        &self,
        tenant: &TenantId,
        kb: KbId,
        viewer: &Viewer,
        limit: usize,
    ) -> Result<Vec<ConversationSummary>, CoreError> {
        let (all, owner) = visibility(viewer);
        let limit = limit.clamp(1, 10_000) as i64;
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, false).await?;
        let rows = tx
            .query(
                "SELECT conversation, count(*), min(created_at), max(created_at), sum(CASE WHEN kb_miss THEN 1 ELSE 0 END)::bigint,
                        (array_agg(query ORDER BY created_at, id))[1],
                        (array_agg(query ORDER BY created_at DESC, id DESC))[1]
                 FROM query_log
                 WHERE tenant = $1 AND kb_id = $2 AND conversation IS NOT NULL
                   AND ($3::boolean OR owner IS NULL OR owner = $4::text)
                 GROUP BY conversation
                 ORDER BY max(created_at) DESC, max(id) DESC LIMIT $5",
                &[&tenant.0, &kb.0, &all, &owner, &limit],
            )
            .await
            .map_err(pg)?;
        tx.commit().await.map_err(pg)?;
        Ok(rows
            .iter()
            .map(|r| ConversationSummary {
                id: r.get(0),
                turns: r.get::<_, i64>(1) as usize,
                started_at: r.get(2),
                last_at: r.get(3),
                misses: r.get::<_, i64>(4) as usize,
                first_query: r.get(5),
                last_query: r.get(6),
            })
            .collect())
    }

    async fn delete_conversation(
        &self,
        tenant: &TenantId,
        kb: KbId,
        id: &str,
        viewer: &Viewer,
    ) -> Result<usize, CoreError> {
        let (all, owner) = visibility(viewer);
        let mut conn = self.conn().await?;
        let tx = begin(&mut conn, &tenant.0, false).await?;
        let n = tx
            .execute(
                "DELETE FROM query_log WHERE tenant = $1 AND kb_id = $2 AND conversation = $3 AND ($4::boolean OR owner IS NULL OR owner = $5::text)",
                &[&tenant.0, &kb.0, &id, &all, &owner],
            )
            .await
            .map_err(pg)?;
        tx.commit().await.map_err(pg)?;
        Ok(n as usize)
    }
}
