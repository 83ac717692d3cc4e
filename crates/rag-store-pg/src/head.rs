//! What an engine reads of a knowledge base whose text stays here
//! ([`rag_core::StoreRecall::head`], `passages`, `passages_except`): the
//! head of a commit (facts, synonyms, dictionary, counts), and passages by
//! id, so that no process loads a knowledge base's corpus.

use crate::error::pg;
use crate::open::{begin, owned, PgStore};
use crate::rows::{fact_from_row, faq_from_row, space_of, FACT_COLUMNS, FAQ_COLUMNS};
use crate::snapshot::{
    chunk_passage, passages_in, synonyms, user_words, Scope, CHUNK_PASSAGE_COLUMNS,
};
use rag_core::{CoreError, KbId, KbSnapshot, Passage, PassageId, RecallHead, TenantId, Viewer};
use tokio_postgres::Transaction;

/// [`rag_core::StoreRecall::head`].
pub(crate) async fn head(
    store: &PgStore,
    tenant: &TenantId,
    kb: KbId,
) -> Result<RecallHead, CoreError> {
    // The counts live in the recall rows: rows of another analysis (or
    // none) are rebuilt first.
    store.ensure_current(tenant, kb).await?;
    let mut conn = store.conn().await?;
    // One repeatable-read transaction: every part is of the same commit.
    let tx = begin(&mut conn, &tenant.0, true).await?;
    owned(&tx, tenant, kb).await?;
    let snapshot = lexicon(&tx, kb).await?;
    let stats = tx
        .query_opt(
            "SELECT n, han, latin FROM lex_stats WHERE kb_id = $1",
            &[&kb.0],
        )
        .await
        .map_err(pg)?;
    let (passages, han, latin) = stats
        .map(|r| (r.get::<_, i64>(0), r.get::<_, i64>(1), r.get::<_, i64>(2)))
        .unwrap_or_default();
    let vectors: i64 = tx
        .query_one("SELECT count(*) FROM vectors WHERE kb_id = $1", &[&kb.0])
        .await
        .map_err(pg)?
        .get(0);
    tx.commit().await.map_err(pg)?;
    Ok(RecallHead {
        snapshot,
        passages: passages.max(0) as usize,
        vectors: vectors.max(0) as usize,
        script: (han.max(0) as u64, latin.max(0) as u64),
    })
}

/// [`rag_core::StoreRead::lexicon_snapshot`].
pub(crate) async fn lexicon_snapshot(
    store: &PgStore,
    tenant: &TenantId,
    kb: KbId,
) -> Result<KbSnapshot, CoreError> {
    let mut conn = store.conn().await?;
    let tx = begin(&mut conn, &tenant.0, true).await?;
    owned(&tx, tenant, kb).await?;
    let snapshot = lexicon(&tx, kb).await?;
    tx.commit().await.map_err(pg)?;
    Ok(snapshot)
}

/// The commit, facts, synonym groups, dictionary and embedding space of a
/// knowledge base, read in `tx`.
pub(crate) async fn lexicon(tx: &Transaction<'_>, kb: KbId) -> Result<KbSnapshot, CoreError> {
    let kb_row = tx
        .query_one(
            "SELECT seq, embed_model, embed_dims FROM kbs WHERE id = $1",
            &[&kb.0],
        )
        .await
        .map_err(pg)?;
    let facts = Scope {
        every_fact: true,
        ..Default::default()
    };
    let facts = passages_in(tx, kb, facts).await?;
    Ok(KbSnapshot {
        seq: kb_row.get::<_, i64>(0) as u64,
        passages: facts,
        synonyms: synonyms(tx, kb).await?,
        user_words: user_words(tx, kb).await?,
        space: space_of(kb_row.get(1), kb_row.get(2)),
        vectors: Vec::new(),
    })
}

/// Chunks by id (`$1`) of a knowledge base (`$2`), as passages.
pub fn chunks_by_id_sql() -> String {
    format!(
        "SELECT {CHUNK_PASSAGE_COLUMNS} FROM chunks c JOIN documents d ON d.id = c.doc_id
         WHERE c.id = ANY($1) AND c.kb_id = $2"
    )
}

/// FAQ entries by id (`$1`) of a knowledge base (`$2`).
pub fn faqs_by_id_sql() -> String {
    format!("SELECT {FAQ_COLUMNS} FROM faqs WHERE id = ANY($1) AND kb_id = $2")
}

/// [`rag_core::StoreRecall::passages`]: one statement per kind, each
/// through its table's primary key.
pub(crate) async fn passages(
    store: &PgStore,
    tenant: &TenantId,
    kb: KbId,
    ids: &[PassageId],
) -> Result<Vec<Passage>, CoreError> {
    let (mut chunks, mut faqs, mut facts) = (Vec::new(), Vec::new(), Vec::new());
    for id in ids {
        match id {
            PassageId::Chunk(c) => chunks.push(c.0),
            PassageId::Faq(f) => faqs.push(f.0),
            PassageId::Fact(f) => facts.push(f.0),
        }
    }
    let mut out = Vec::with_capacity(ids.len());
    if ids.is_empty() {
        return Ok(out);
    }
    let mut conn = store.conn().await?;
    let tx = begin(&mut conn, &tenant.0, true).await?;
    owned(&tx, tenant, kb).await?;
    if !chunks.is_empty() {
        let rows = tx
            .query(&chunks_by_id_sql(), &[&chunks, &kb.0])
            .await
            .map_err(pg)?;
        for r in &rows {
            out.push(chunk_passage(r)?);
        }
    }
    if !faqs.is_empty() {
        let rows = tx
            .query(&faqs_by_id_sql(), &[&faqs, &kb.0])
            .await
            .map_err(pg)?;
        for r in &rows {
            // Entries waiting for review or switched off are in no index.
            let p = Passage::from(faq_from_row(r, kb)?);
            if p.searchable {
                out.push(p);
            }
        }
    }
    if !facts.is_empty() {
        let rows = tx
            .query(
                &format!("SELECT {FACT_COLUMNS} FROM facts WHERE id = ANY($1) AND kb_id = $2"),
                &[&facts, &kb.0],
            )
            .await
            .map_err(pg)?;
        for r in &rows {
            out.push(Passage::from(fact_from_row(r, kb)));
        }
    }
    tx.commit().await.map_err(pg)?;
    Ok(out)
}

/// [`rag_core::StoreRecall::passages_except`].
pub(crate) async fn passages_except(
    store: &PgStore,
    tenant: &TenantId,
    kb: KbId,
    viewer: &Viewer,
    except: &[PassageId],
    limit: usize,
) -> Result<Vec<PassageId>, CoreError> {
    let (everything, owner) = viewer.sql_visibility();
    let except: Vec<String> = except.iter().map(ToString::to_string).collect();
    let mut conn = store.conn().await?;
    let tx = begin(&mut conn, &tenant.0, true).await?;
    owned(&tx, tenant, kb).await?;
    let rows = tx
        .query(
            "SELECT p.passage FROM passages p
             WHERE p.kb_id = $1 AND ($2 OR p.owner IS NULL OR p.owner = $3)
               AND NOT (p.passage = ANY($4))
             ORDER BY p.kind, p.created_at, p.grp, p.ordinal LIMIT $5",
            &[&kb.0, &everything, &owner, &except, &(limit as i64)],
        )
        .await
        .map_err(pg)?;
    tx.commit().await.map_err(pg)?;
    rows.iter()
        .map(|r| crate::recall::passage_id(r.get(0)))
        .collect()
}
