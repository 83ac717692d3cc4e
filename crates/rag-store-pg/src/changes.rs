//! The change feed: what every commit touched, logged in the commit's own
//! transaction (`kb_changes`, migration 0004), and
//! [`rag_core::StoreRead::changes_since`], which reads the log and then only
//! the rows it names, by primary key: its cost follows what changed, not the
//! size of the knowledge base. Vectors are searched in PostgreSQL, so the
//! changes carry none (only which passages were revectored).

use crate::error::{corrupt, pg};
use crate::open::{begin, owned, PgStore};
use crate::rows::{fact_from_row, faq_from_row, space_of, FACT_COLUMNS, FAQ_COLUMNS};
use crate::snapshot::{chunk_passage, synonyms, user_words, CHUNK_PASSAGE_COLUMNS};
use rag_core::{CoreError, KbChanges, KbId, Passage, PassageId, TenantId};
use std::collections::BTreeSet;
use tokio_postgres::types::ToSql;
use tokio_postgres::Transaction;

/// `kb_changes.what`: a passage was written or deleted.
pub(crate) const PASSAGE: i16 = 0;
/// `kb_changes.what`: a passage's vector was written.
pub(crate) const VECTOR: i16 = 1;
/// `kb_changes.what`: a synonym group was added.
pub(crate) const SYNONYMS: i16 = 2;
/// `kb_changes.what`: the user dictionary changed.
pub(crate) const USER_WORDS: i16 = 3;
/// `kb_changes.what`: every vector was cleared or the embedding space was fixed.
pub(crate) const VECTORS_RESET: i16 = 4;

/// How many of a knowledge base's latest commits the change log keeps by
/// default.
pub const CHANGE_LOG_COMMITS: u64 = 4096;

/// What one commit touched, collected while its operations run.
#[derive(Debug, Default)]
pub(crate) struct Touched {
    items: BTreeSet<(i16, String)>,
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
    pub(crate) fn flag(&mut self, what: i16) {
        self.items.insert((what, String::new()));
    }

    /// The passages `query` names (its one column, the passage id's text),
    /// before the operation deletes them.
    pub(crate) async fn passages_of(
        &mut self,
        tx: &Transaction<'_>,
        query: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<(), CoreError> {
        for r in tx.query(query, params).await.map_err(pg)? {
            self.items.insert((PASSAGE, r.get(0)));
        }
        Ok(())
    }
}

/// Logs what commit `seq` touched and drops the entries of commits more than
/// `retain` commits old, inside the commit's transaction (which holds the
/// knowledge base's row lock).
pub(crate) async fn record(
    tx: &Transaction<'_>,
    tenant: &TenantId,
    kb: KbId,
    seq: u64,
    touched: Touched,
    retain: u64,
) -> Result<(), CoreError> {
    let (whats, passages): (Vec<i16>, Vec<String>) = touched.items.into_iter().unzip();
    let seq_i = seq as i64;
    if !whats.is_empty() {
        tx.execute(
            "INSERT INTO kb_changes (tenant, kb_id, seq, what, passage)
             SELECT $1, $2, $3, u.what, u.passage FROM unnest($4::smallint[], $5::text[]) AS u(what, passage)
             ON CONFLICT DO NOTHING",
            &[&tenant.0, &kb.0, &seq_i, &whats, &passages],
        )
        .await
        .map_err(pg)?;
    }
    let log_from: Option<i64> = tx
        .query_one("SELECT log_from FROM kbs WHERE id = $1", &[&kb.0])
        .await
        .map_err(pg)?
        .get(0);
    let floor = seq.saturating_sub(retain);
    let new_from = match log_from {
        // Not logged before (a knowledge base from before the log): from this commit on.
        None => Some(floor.max(seq.saturating_sub(1))),
        Some(from) if (from as u64) < floor => Some(floor),
        Some(_) => None,
    };
    if let Some(from) = new_from {
        let from = from as i64;
        tx.execute(
            "DELETE FROM kb_changes WHERE kb_id = $1 AND seq <= $2",
            &[&kb.0, &from],
        )
        .await
        .map_err(pg)?;
        tx.execute(
            "UPDATE kbs SET log_from = $2 WHERE id = $1",
            &[&kb.0, &from],
        )
        .await
        .map_err(pg)?;
    }
    Ok(())
}

/// [`rag_core::StoreRead::changes_since`].
pub(crate) async fn changes_since(
    store: &PgStore,
    tenant: &TenantId,
    kb: KbId,
    since: u64,
) -> Result<Option<KbChanges>, CoreError> {
    let mut conn = store.conn().await?;
    // One repeatable-read transaction: the changes are consistent with their seq.
    let tx = begin(&mut conn, &tenant.0, true).await?;
    owned(&tx, tenant, kb).await?;
    let changes = load_changes(&tx, kb, since).await?;
    tx.commit().await.map_err(pg)?;
    Ok(changes)
}

async fn load_changes(
    tx: &Transaction<'_>,
    kb: KbId,
    since: u64,
) -> Result<Option<KbChanges>, CoreError> {
    let row = tx
        .query_one(
            "SELECT seq, log_from, embed_model, embed_dims FROM kbs WHERE id = $1",
            &[&kb.0],
        )
        .await
        .map_err(pg)?;
    let seq = row.get::<_, i64>(0) as u64;
    let log_from: Option<i64> = row.get(1);
    // Older than the log (or newer than the knowledge base): cannot tell.
    if since > seq || log_from.is_none_or(|from| since < from as u64) {
        return Ok(None);
    }
    let mut changes = KbChanges {
        seq,
        space: space_of(row.get(2), row.get(3)),
        ..Default::default()
    };
    if since == seq {
        return Ok(Some(changes));
    }
    let mut written = BTreeSet::new();
    let mut vectored = BTreeSet::new();
    let (mut synonyms_changed, mut words_changed) = (false, false);
    let rows = tx
        .query(
            "SELECT what, passage FROM kb_changes WHERE kb_id = $1 AND seq > $2",
            &[&kb.0, &(since as i64)],
        )
        .await
        .map_err(pg)?;
    for r in &rows {
        let what: i16 = r.get(0);
        let passage: String = r.get(1);
        let id = || {
            PassageId::parse(&passage)
                .ok_or_else(|| corrupt("kb_changes", "passage", passage.clone()))
        };
        match what {
            PASSAGE => {
                written.insert(id()?);
            }
            VECTOR => {
                vectored.insert(id()?);
            }
            SYNONYMS => synonyms_changed = true,
            USER_WORDS => words_changed = true,
            VECTORS_RESET => changes.vectors_reset = true,
            other => {
                return Err(corrupt(
                    "kb_changes",
                    "what",
                    format!("unknown change kind {other}"),
                ))
            }
        }
    }
    let (mut chunks, mut faqs, mut facts) = (Vec::new(), Vec::new(), Vec::new());
    for id in &written {
        match id {
            PassageId::Chunk(c) => chunks.push(c.0),
            PassageId::Faq(f) => faqs.push(f.0),
            PassageId::Fact(f) => facts.push(f.0),
        }
    }
    let mut found = Vec::new();
    if !chunks.is_empty() {
        for r in tx
            .query(
                &format!(
                    "SELECT {CHUNK_PASSAGE_COLUMNS} FROM chunks c JOIN documents d ON d.id = c.doc_id
                     WHERE c.id = ANY($2) AND c.kb_id = $1"
                ),
                &[&kb.0, &chunks],
            )
            .await
            .map_err(pg)?
        {
            found.push(chunk_passage(&r)?);
        }
    }
    if !faqs.is_empty() {
        for r in tx
            .query(
                &format!("SELECT {FAQ_COLUMNS} FROM faqs WHERE id = ANY($2) AND kb_id = $1"),
                &[&kb.0, &faqs],
            )
            .await
            .map_err(pg)?
        {
            found.push(Passage::from(faq_from_row(&r, kb)?));
        }
    }
    if !facts.is_empty() {
        for r in tx
            .query(
                &format!("SELECT {FACT_COLUMNS} FROM facts WHERE id = ANY($2) AND kb_id = $1"),
                &[&kb.0, &facts],
            )
            .await
            .map_err(pg)?
        {
            found.push(Passage::from(fact_from_row(&r, kb)));
        }
    }
    found.sort_by_key(|p| p.id);
    changes.removed = written
        .iter()
        .filter(|id| found.binary_search_by_key(*id, |p| p.id).is_err())
        .copied()
        .collect();
    changes.upserted = found;
    // Vectors stay here; the engine learns which passages have a new one.
    let only_vectors: Vec<String> = vectored
        .difference(&written)
        .map(|id| id.to_string())
        .collect();
    if !only_vectors.is_empty() {
        let mut revectored = tx
            .query(
                "SELECT passage FROM vectors WHERE kb_id = $1 AND passage = ANY($2)",
                &[&kb.0, &only_vectors],
            )
            .await
            .map_err(pg)?
            .iter()
            .map(|r| {
                let p: String = r.get(0);
                PassageId::parse(&p).ok_or_else(|| corrupt("vectors", "passage", p.clone()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        revectored.sort();
        changes.revectored = revectored;
    }
    if synonyms_changed {
        changes.synonyms = Some(synonyms(tx, kb).await?);
    }
    if words_changed {
        changes.user_words = Some(user_words(tx, kb).await?);
    }
    Ok(Some(changes))
}
