//! Planner statistics after large loads.
//!
//! PostgreSQL plans a knowledge base's recall statements from the tables'
//! statistics, which autovacuum refreshes only once a tenth of a table has
//! changed and at most once a minute. A knowledge base loaded into a
//! database that already holds a larger one changes far less than a tenth
//! of it, so for a long while the planner takes the new knowledge base for
//! a row or two (docs/postgres.md: one such plan read every row of the
//! knowledge base per candidate, 1.6 s a query). So the store analyses the
//! recall tables itself, after a write that at least doubled a knowledge
//! base since this process last analysed it (or started): at 1,000, 2,000,
//! 4,000 … passages of a bulk load, about ten times up to a million, and
//! never after the small writes of a server's day.
//!
//! ANALYZE needs the table's owner or, from PostgreSQL 17 on, the MAINTAIN
//! privilege, which migration 11 grants the application role. On an older
//! server the store does not try, and autovacuum alone keeps the statistics.

use crate::error::pg;
use crate::pool::Conn;
use rag_core::KbId;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// A knowledge base is analysed once it holds at least this many passages.
pub const ANALYZE_MIN_PASSAGES: i64 = 1_000;

/// The tables the recall statements plan over.
const TABLES: &str = "ragscope.passages, ragscope.postings, ragscope.lex_terms, ragscope.vectors";

/// Whether a knowledge base that holds `passages` now, of which `written`
/// were written since it was last analysed, is to be analysed: at least
/// [`ANALYZE_MIN_PASSAGES`], and at least half of it new (it doubled).
pub(crate) fn due(passages: i64, written: i64) -> bool {
    passages >= ANALYZE_MIN_PASSAGES && written >= ANALYZE_MIN_PASSAGES && 2 * written >= passages
}

/// What this process wrote per knowledge base since it last analysed it.
#[derive(Debug, Default)]
pub(crate) struct Analyses {
    /// Whether the role may analyse the recall tables.
    allowed: bool,
    written: Mutex<HashMap<KbId, i64>>,
    done: AtomicU64,
}

impl Analyses {
    pub(crate) fn new(allowed: bool) -> Self {
        Analyses {
            allowed,
            ..Default::default()
        }
    }

    /// Whether the role may analyse the recall tables (PostgreSQL 17 or
    /// later, MAINTAIN granted).
    pub(crate) fn allowed(&self) -> bool {
        self.allowed
    }

    /// How many times this store analysed the recall tables.
    pub(crate) fn count(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }

    /// Notes a committed write of `written` passages to `kb`, which now
    /// holds `passages`; whether the tables are to be analysed now (the
    /// count restarts then).
    fn note(&self, kb: KbId, passages: i64, written: i64) -> bool {
        if !self.allowed {
            return false;
        }
        let mut map = self.written.lock().unwrap_or_else(|e| e.into_inner());
        let total = map.entry(kb).or_insert(0);
        *total += written;
        if due(passages, *total) {
            *total = 0;
            true
        } else {
            false
        }
    }

    /// After a committed write: analyses the recall tables when the write
    /// made `kb` due. The write has landed either way; a failed ANALYZE is
    /// logged, not returned.
    pub(crate) async fn after_write(&self, conn: &Conn<'_>, kb: KbId, passages: i64, written: i64) {
        if !self.note(kb, passages, written) {
            return;
        }
        let started = std::time::Instant::now();
        match conn
            .batch_execute(&format!("ANALYZE {TABLES}"))
            .await
            .map_err(pg)
        {
            Ok(()) => {
                self.done.fetch_add(1, Ordering::Relaxed);
                tracing::info!(
                    kb = %kb,
                    passages,
                    ms = started.elapsed().as_millis() as u64,
                    "analysed the recall tables (the knowledge base at least doubled)"
                );
            }
            Err(e) => tracing::warn!(kb = %kb, error = %e, "could not analyse the recall tables"),
        }
    }
}

/// Whether the connected role may analyse the recall tables.
pub(crate) async fn may_analyze(conn: &Conn<'_>) -> Result<bool, tokio_postgres::Error> {
    let row = conn
        .query_one(
            "SELECT current_setting('server_version_num')::int >= 170000
                    AND has_table_privilege('ragscope.postings', 'MAINTAIN')
                    AND has_table_privilege('ragscope.passages', 'MAINTAIN')
                    AND has_table_privilege('ragscope.lex_terms', 'MAINTAIN')
                    AND has_table_privilege('ragscope.vectors', 'MAINTAIN')",
            &[],
        )
        .await;
    match row {
        Ok(row) => Ok(row.get(0)),
        // Before PostgreSQL 17 "MAINTAIN" is no privilege at all, and AND
        // does not promise to stop before it.
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::INVALID_PARAMETER_VALUE) => {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_knowledge_base_is_analysed_each_time_it_doubles() {
        // A bulk load in writes of 300 passages: analysed at 1,200, 2,400,
        // 4,800 and 9,600 passages.
        let a = Analyses::new(true);
        let kb = KbId(uuid::Uuid::from_u128(1));
        let mut at = Vec::new();
        for i in 1..=40 {
            if a.note(kb, i * 300, 300) {
                at.push(i * 300);
            }
        }
        assert_eq!(at, vec![1_200, 2_400, 4_800, 9_600]);
    }

    #[test]
    fn small_writes_to_a_large_knowledge_base_never_analyse() {
        let a = Analyses::new(true);
        let kb = KbId(uuid::Uuid::from_u128(2));
        assert!((0..1_000).all(|i| !a.note(kb, 100_000 + i, 1)));
        // Each knowledge base counts its own writes.
        let other = KbId(uuid::Uuid::from_u128(3));
        assert!(a.note(other, 1_500, 1_500));
        assert!(!a.note(kb, 101_000, 1));
    }

    #[test]
    fn below_the_minimum_or_without_the_privilege_nothing_runs() {
        assert!(!due(999, 999));
        assert!(due(1_000, 1_000));
        assert!(!due(10_000, 4_999));
        assert!(due(10_000, 5_000));
        let a = Analyses::new(false);
        assert!(!a.note(KbId(uuid::Uuid::from_u128(4)), 50_000, 50_000));
    }
}
