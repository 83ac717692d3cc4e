//! The query log in the embedded store: indexed columns for filtering, the
//! whole record as JSON.

use crate::error::StoreError;
use crate::open::EmbeddedStore;
use crate::rows::sql;
use async_trait::async_trait;
use rag_core::{
    ConversationSummary, CoreError, KbId, LogFilter, QueryLogRecord, QueryLogStore, TenantId,
    Viewer,
};
use rusqlite::{params, OptionalExtension};

fn decode(json: String, feedback: Option<String>) -> Result<QueryLogRecord, CoreError> {
    let mut r: QueryLogRecord = serde_json::from_str(&json).map_err(|e| {
        CoreError::from(StoreError::Corrupt {
            table: "query_log",
            column: "record",
            detail: e.to_string(),
        })
    })?;
    r.feedback = feedback;
    Ok(r)
}

/// The SQL parameters of the visibility condition
/// `(?a = 1 OR owner IS NULL OR owner = ?b)`: everything, or rows without an
/// owner and the viewer's own.
fn visibility(viewer: &Viewer) -> (i64, Option<String>) {
    match viewer {
        Viewer::Everything => (1, None),
        Viewer::Public => (0, None),
        Viewer::Owner(o) => (0, Some(o.clone())),
    }
}

#[async_trait]
impl QueryLogStore for EmbeddedStore {
    async fn log_query(&self, record: &QueryLogRecord) -> Result<(), CoreError> {
        let record = record.clone();
        let json = serde_json::to_string(&record)
            .map_err(|e| CoreError::Store(format!("query log record: {e}")))?;
        self.with_conn(move |c| {
            c.execute(
                "INSERT INTO query_log (id, tenant, kb_id, created_at, query, conversation, kb_miss, feedback, record, owner)
                 SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10 WHERE EXISTS (SELECT 1 FROM kbs WHERE id = ?3 AND tenant = ?2)",
                params![
                    record.id,
                    record.tenant.0,
                    record.kb.to_string(),
                    record.created_at,
                    record.query,
                    record.conversation_id,
                    record.kb_miss as i64,
                    record.feedback,
                    json,
                    record.owner
                ],
            )
            .map_err(sql)?;
            Ok(())
        })
        .await
    }

    async fn query_log(
        &self,
        tenant: &TenantId,
        kb: KbId,
        filter: &LogFilter,
    ) -> Result<Vec<QueryLogRecord>, CoreError> {
        let (tenant, filter) = (tenant.clone(), filter.clone());
        let (all, owner) = visibility(&filter.viewer);
        self.with_read(move |c| {
            let mut stmt = c
                .prepare(
                    "SELECT record, feedback FROM query_log
                     WHERE tenant = ?1 AND kb_id = ?2
                       AND (?3 IS NULL OR kb_miss = ?3)
                       AND (?4 IS NULL OR conversation = ?4)
                       AND (?5 IS NULL OR created_at >= ?5)
                       AND (?7 = 1 OR owner IS NULL OR owner = ?8)
                       AND (?9 IS NULL OR created_at < ?9 OR (created_at = ?9 AND id < ?10))
                     ORDER BY created_at DESC, id DESC LIMIT ?6",
                )
                .map_err(sql)?;
            let rows = stmt
                .query_map(
                    params![
                        tenant.0,
                        kb.to_string(),
                        filter.kb_miss.map(|b| b as i64),
                        filter.conversation_id,
                        filter.since,
                        filter.limit.clamp(1, 10_000) as i64,
                        all,
                        owner,
                        filter.before.as_ref().map(|b| b.0),
                        filter.before.as_ref().map(|b| b.1.clone())
                    ],
                    |r| Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?)),
                )
                .map_err(sql)?;
            let mut out = Vec::new();
            for row in rows {
                let (json, feedback) = row.map_err(sql)?;
                // One unreadable row never makes the listing fail.
                match decode(json, feedback) {
                    Ok(r) => out.push(r),
                    Err(e) => tracing::warn!(error = %e, "query log: skipping an unreadable row"),
                }
            }
            Ok(out)
        })
        .await
    }

    async fn query_log_entry(
        &self,
        tenant: &TenantId,
        id: &str,
        viewer: &Viewer,
    ) -> Result<Option<QueryLogRecord>, CoreError> {
        let (tenant, id) = (tenant.clone(), id.to_owned());
        let (all, owner) = visibility(viewer);
        self.with_read(move |c| {
            let row = c
                .query_row(
                    "SELECT record, feedback FROM query_log WHERE id = ?1 AND tenant = ?2 AND (?3 = 1 OR owner IS NULL OR owner = ?4)",
                    params![id, tenant.0, all, owner],
                    |r| Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?)),
                )
                .optional()
                .map_err(sql)?;
            row.map(|(j, f)| decode(j, f)).transpose()
        })
        .await
    }

    async fn set_feedback(
        &self,
        tenant: &TenantId,
        id: &str,
        viewer: &Viewer,
        feedback: &str,
    ) -> Result<bool, CoreError> {
        let (tenant, id, feedback) = (tenant.clone(), id.to_owned(), feedback.to_owned());
        let (all, owner) = visibility(viewer);
        self.with_conn(move |c| {
            let n = c
                .execute(
                    "UPDATE query_log SET feedback = ?1 WHERE id = ?2 AND tenant = ?3 AND (?4 = 1 OR owner IS NULL OR owner = ?5)",
                    params![feedback, id, tenant.0, all, owner],
                )
                .map_err(sql)?;
            Ok(n == 1)
        })
        .await
    }

    async fn conversations(
        &self,
        tenant: &TenantId,
        kb: KbId,
        viewer: &Viewer,
        limit: usize,
    ) -> Result<Vec<ConversationSummary>, CoreError> {
        let tenant = tenant.clone();
        let (all, owner) = visibility(viewer);
        self.with_read(move |c| {
            let mut stmt = c
                .prepare(
                    "SELECT conversation, count(*), min(created_at), max(created_at), sum(kb_miss),
                            (SELECT f.query FROM query_log f WHERE f.tenant = q.tenant AND f.kb_id = q.kb_id AND f.conversation = q.conversation
                               AND (?3 = 1 OR f.owner IS NULL OR f.owner = ?4) ORDER BY f.created_at, f.id LIMIT 1),
                            (SELECT l.query FROM query_log l WHERE l.tenant = q.tenant AND l.kb_id = q.kb_id AND l.conversation = q.conversation
                               AND (?3 = 1 OR l.owner IS NULL OR l.owner = ?4) ORDER BY l.created_at DESC, l.id DESC LIMIT 1)
                     FROM query_log q
                     WHERE q.tenant = ?1 AND q.kb_id = ?2 AND q.conversation IS NOT NULL
                       AND (?3 = 1 OR q.owner IS NULL OR q.owner = ?4)
                     GROUP BY q.conversation
                     ORDER BY max(created_at) DESC, max(id) DESC LIMIT ?5",
                )
                .map_err(sql)?;
            let rows = stmt
                .query_map(params![tenant.0, kb.to_string(), all, owner, limit.clamp(1, 10_000) as i64], |r| {
                    Ok(ConversationSummary {
                        id: r.get(0)?,
                        turns: r.get::<_, i64>(1)? as usize,
                        started_at: r.get(2)?,
                        last_at: r.get(3)?,
                        misses: r.get::<_, i64>(4)? as usize,
                        first_query: r.get(5)?,
                        last_query: r.get(6)?,
                    })
                })
                .map_err(sql)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(sql)
        })
        .await
    }

    async fn delete_conversation(
        &self,
        tenant: &TenantId,
        kb: KbId,
        id: &str,
        viewer: &Viewer,
    ) -> Result<usize, CoreError> {
        let (tenant, id) = (tenant.clone(), id.to_owned());
        let (all, owner) = visibility(viewer);
        self.with_conn(move |c| {
            c.execute(
                "DELETE FROM query_log WHERE tenant = ?1 AND kb_id = ?2 AND conversation = ?3 AND (?4 = 1 OR owner IS NULL OR owner = ?5)",
                params![tenant.0, kb.to_string(), id, all, owner],
            )
            .map_err(sql)
        })
        .await
    }
}
