//! The query log in the embedded store: indexed columns for filtering, the
//! whole record as JSON.

use crate::embedded::{sql, EmbeddedStore};
use crate::error::StoreError;
use async_trait::async_trait;
use rag_core::{CoreError, KbId, LogFilter, QueryLogRecord, QueryLogStore, TenantId};
use rusqlite::{params, OptionalExtension};

fn decode(json: String, feedback: Option<String>) -> Result<QueryLogRecord, CoreError> {
    let mut r: QueryLogRecord = serde_json::from_str(&json)
        .map_err(|e| CoreError::from(StoreError::Corrupt { table: "query_log", column: "record", detail: e.to_string() }))?;
    r.feedback = feedback;
    Ok(r)
}

#[async_trait]
impl QueryLogStore for EmbeddedStore {
    async fn log_query(&self, record: &QueryLogRecord) -> Result<(), CoreError> {
        let record = record.clone();
        let json = serde_json::to_string(&record).map_err(|e| CoreError::Store(format!("query log record: {e}")))?;
        self.with_conn(move |c| {
            c.execute(
                "INSERT INTO query_log (id, tenant, kb_id, created_at, query, conversation, kb_miss, feedback, record)
                 SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9 WHERE EXISTS (SELECT 1 FROM kbs WHERE id = ?3 AND tenant = ?2)",
                params![
                    record.id,
                    record.tenant.0,
                    record.kb.to_string(),
                    record.created_at,
                    record.query,
                    record.conversation_id,
                    record.kb_miss as i64,
                    record.feedback,
                    json
                ],
            )
            .map_err(sql)?;
            Ok(())
        })
        .await
    }

    async fn query_log(&self, tenant: &TenantId, kb: KbId, filter: &LogFilter) -> Result<Vec<QueryLogRecord>, CoreError> {
        let (tenant, filter) = (tenant.clone(), filter.clone());
        self.with_conn(move |c| {
            let mut stmt = c
                .prepare(
                    "SELECT record, feedback FROM query_log
                     WHERE tenant = ?1 AND kb_id = ?2
                       AND (?3 IS NULL OR kb_miss = ?3)
                       AND (?4 IS NULL OR conversation = ?4)
                       AND (?5 IS NULL OR created_at >= ?5)
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
                        filter.limit.clamp(1, 10_000) as i64
                    ],
                    |r| Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?)),
                )
                .map_err(sql)?;
            let mut out = Vec::new();
            for row in rows {
                let (json, feedback) = row.map_err(sql)?;
                out.push(decode(json, feedback)?);
            }
            Ok(out)
        })
        .await
    }

    async fn query_log_entry(&self, tenant: &TenantId, id: &str) -> Result<Option<QueryLogRecord>, CoreError> {
        let (tenant, id) = (tenant.clone(), id.to_owned());
        self.with_conn(move |c| {
            let row = c
                .query_row(
                    "SELECT record, feedback FROM query_log WHERE id = ?1 AND tenant = ?2",
                    params![id, tenant.0],
                    |r| Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?)),
                )
                .optional()
                .map_err(sql)?;
            row.map(|(j, f)| decode(j, f)).transpose()
        })
        .await
    }

    async fn set_feedback(&self, tenant: &TenantId, id: &str, feedback: &str) -> Result<bool, CoreError> {
        let (tenant, id, feedback) = (tenant.clone(), id.to_owned(), feedback.to_owned());
        self.with_conn(move |c| {
            let n = c
                .execute("UPDATE query_log SET feedback = ?1 WHERE id = ?2 AND tenant = ?3", params![feedback, id, tenant.0])
                .map_err(sql)?;
            Ok(n == 1)
        })
        .await
    }
}
