//! The change feed: what every commit touched, logged in the commit's own
//! transaction (`kb_changes`, see schema format 4), and
//! [`rag_core::StoreRead::changes_since`], which reads the log and then only
//! the rows it names, by primary key: its cost follows what changed, not the
//! size of the knowledge base.

use crate::error::StoreError;
use crate::open::{owned, EmbeddedStore};
use crate::rows::{
    chunk_passage, fact_from_row, faq_from_row, sql, vector_from_row, CHUNK_PASSAGE_COLUMNS,
    FACT_COLUMNS, FAQ_COLUMNS,
};
use crate::snapshot::{read_space, read_synonyms, read_user_words};
use rag_core::{CoreError, KbChanges, KbId, Passage, PassageId, TenantId};
use rusqlite::{params, Connection, Transaction};
use std::collections::BTreeSet;

/// `kb_changes.what`: a passage was written or deleted.
pub(crate) const PASSAGE: u8 = 0;
/// `kb_changes.what`: a passage's vector was written.
pub(crate) const VECTOR: u8 = 1;
/// `kb_changes.what`: a synonym group was added.
pub(crate) const SYNONYMS: u8 = 2;
/// `kb_changes.what`: the user dictionary changed.
pub(crate) const USER_WORDS: u8 = 3;
/// `kb_changes.what`: every vector was cleared or the embedding space was fixed.
pub(crate) const VECTORS_RESET: u8 = 4;

/// The first format with the change log.
const FIRST_FORMAT: u32 = 4;

/// What one commit touched, collected while its operations run.
#[derive(Debug, Default)]
pub(crate) struct Touched {
    items: BTreeSet<(u8, String)>,
}

impl Touched {
    /// A passage written or deleted.
    pub(crate) fn passage(&mut self, id: PassageId) {
        self.items.insert((PASSAGE, id.to_string()));
    }

    /// A passage's vector written.
    pub(crate) fn vector(&mut self, id: PassageId) {
        self.items.insert((VECTOR, id.to_string()));
    }

    /// A change to the whole knowledge base ([`SYNONYMS`], [`USER_WORDS`],
    /// [`VECTORS_RESET`]).
    pub(crate) fn flag(&mut self, what: u8) {
        self.items.insert((what, String::new()));
    }

    /// The passages `query` names (its one column, the passage id's text;
    /// parameters `?1` the knowledge base and `?2` `arg`), before the
    /// operation deletes them.
    pub(crate) fn passages_of(
        &mut self,
        tx: &Transaction<'_>,
        query: &str,
        kb: &str,
        arg: &str,
    ) -> Result<(), CoreError> {
        let mut stmt = tx.prepare_cached(query).map_err(sql)?;
        let ids = stmt
            .query_map(params![kb, arg], |r| r.get::<_, String>(0))
            .map_err(sql)?;
        for id in ids {
            self.items.insert((PASSAGE, id.map_err(sql)?));
        }
        Ok(())
    }
}

/// Logs what commit `seq` touched and drops the entries of commits more than
/// `retain` commits old, inside the commit's transaction.
pub(crate) fn record(
    tx: &Transaction<'_>,
    kb: KbId,
    seq: u64,
    touched: Touched,
    retain: u64,
) -> Result<(), CoreError> {
    let kb_s = kb.to_string();
    {
        let mut stmt = tx
            .prepare_cached(
                "INSERT OR IGNORE INTO kb_changes (kb_id, seq, what, passage) VALUES (?1, ?2, ?3, ?4)",
            )
            .map_err(sql)?;
        for (what, passage) in touched.items {
            stmt.execute(params![kb_s, seq as i64, what, passage])
                .map_err(sql)?;
        }
    }
    let log_from: Option<i64> = tx
        .query_row("SELECT log_from FROM kbs WHERE id = ?1", [&kb_s], |r| {
            r.get(0)
        })
        .map_err(sql)?;
    let floor = seq.saturating_sub(retain);
    let new_from = match log_from {
        // Not logged before (cannot happen after the migration): from this commit on.
        None => Some(floor.max(seq.saturating_sub(1))),
        Some(from) if (from as u64) < floor => Some(floor),
        Some(_) => None,
    };
    if let Some(from) = new_from {
        tx.execute(
            "DELETE FROM kb_changes WHERE kb_id = ?1 AND seq <= ?2",
            params![kb_s, from as i64],
        )
        .map_err(sql)?;
        tx.execute(
            "UPDATE kbs SET log_from = ?2 WHERE id = ?1",
            params![kb_s, from as i64],
        )
        .map_err(sql)?;
    }
    Ok(())
}

/// [`rag_core::StoreRead::changes_since`].
pub(crate) async fn changes_since(
    store: &EmbeddedStore,
    tenant: &TenantId,
    kb: KbId,
    since: u64,
) -> Result<Option<KbChanges>, CoreError> {
    // A read-only open of a store from before the log: nothing to read.
    if store.info().format_version < FIRST_FORMAT {
        return Ok(None);
    }
    let tenant = tenant.clone();
    store
        .with_read(move |c| {
            // with_read is one read transaction: the changes are consistent with their seq.
            owned(c, &tenant, kb)?;
            load_changes(c, kb, since)
        })
        .await
}

fn corrupt(detail: String) -> CoreError {
    StoreError::Corrupt {
        table: "kb_changes",
        column: "passage",
        detail,
    }
    .into()
}

fn load_changes(conn: &Connection, kb: KbId, since: u64) -> Result<Option<KbChanges>, CoreError> {
    let kb_s = kb.to_string();
    let (seq, log_from): (i64, Option<i64>) = conn
        .query_row(
            "SELECT seq, log_from FROM kbs WHERE id = ?1",
            [&kb_s],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(sql)?;
    let seq = seq as u64;
    // Older than the log (or newer than the knowledge base): cannot tell.
    if since > seq || log_from.is_none_or(|from| since < from as u64) {
        return Ok(None);
    }
    let mut changes = KbChanges {
        seq,
        space: read_space(conn, kb)?,
        ..Default::default()
    };
    if since == seq {
        return Ok(Some(changes));
    }
    let mut written = BTreeSet::new();
    let mut vectored = BTreeSet::new();
    let (mut synonyms, mut user_words) = (false, false);
    {
        let mut stmt = conn
            .prepare_cached("SELECT what, passage FROM kb_changes WHERE kb_id = ?1 AND seq > ?2")
            .map_err(sql)?;
        let mut rows = stmt.query(params![kb_s, since as i64]).map_err(sql)?;
        while let Some(r) = rows.next().map_err(sql)? {
            let what: u8 = r.get(0).map_err(sql)?;
            let passage: String = r.get(1).map_err(sql)?;
            let id = || PassageId::parse(&passage).ok_or_else(|| corrupt(passage.clone()));
            match what {
                PASSAGE => {
                    written.insert(id()?);
                }
                VECTOR => {
                    vectored.insert(id()?);
                }
                SYNONYMS => synonyms = true,
                USER_WORDS => user_words = true,
                VECTORS_RESET => changes.vectors_reset = true,
                other => return Err(corrupt(format!("unknown change kind {other}"))),
            }
        }
    }
    for &id in &written {
        match passage(conn, &kb_s, kb, id)? {
            Some(p) => changes.upserted.push(p),
            None => changes.removed.push(id),
        }
    }
    let mut stmt = conn
        .prepare_cached(
            "SELECT passage, text_hash, vector FROM vectors WHERE passage = ?1 AND kb_id = ?2",
        )
        .map_err(sql)?;
    for id in written.union(&vectored) {
        let mut rows = stmt.query(params![id.to_string(), kb_s]).map_err(sql)?;
        if let Some(r) = rows.next().map_err(sql)? {
            changes.vectors.push(vector_from_row(r)?);
            if !written.contains(id) {
                changes.revectored.push(*id);
            }
        }
    }
    if synonyms {
        changes.synonyms = Some(read_synonyms(conn, kb)?);
    }
    if user_words {
        changes.user_words = Some(read_user_words(conn, kb)?);
    }
    Ok(Some(changes))
}

/// One passage of the knowledge base by its id, as the snapshot builds it.
fn passage(
    conn: &Connection,
    kb_s: &str,
    kb: KbId,
    id: PassageId,
) -> Result<Option<Passage>, CoreError> {
    let (query, key) = match id {
        PassageId::Chunk(c) => (
            format!(
                "SELECT {CHUNK_PASSAGE_COLUMNS} FROM chunks c JOIN documents d ON d.id = c.doc_id
                 WHERE c.id = ?1 AND c.kb_id = ?2"
            ),
            c.to_string(),
        ),
        PassageId::Faq(f) => (
            format!("SELECT {FAQ_COLUMNS} FROM faqs WHERE id = ?1 AND kb_id = ?2"),
            f.to_string(),
        ),
        PassageId::Fact(f) => (
            format!("SELECT {FACT_COLUMNS} FROM facts WHERE id = ?1 AND kb_id = ?2"),
            f.to_string(),
        ),
    };
    let mut stmt = conn.prepare_cached(&query).map_err(sql)?;
    let mut rows = stmt.query(params![key, kb_s]).map_err(sql)?;
    let Some(r) = rows.next().map_err(sql)? else {
        return Ok(None);
    };
    Ok(Some(match id {
        PassageId::Chunk(_) => chunk_passage(r)?,
        PassageId::Faq(_) => Passage::from(faq_from_row(r, kb)?),
        PassageId::Fact(_) => Passage::from(fact_from_row(r, kb)?),
    }))
}
