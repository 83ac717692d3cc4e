//! Index snapshots: the passages, vectors and vocabulary of a knowledge
//! base, read in one repeatable-read transaction so they match its commit
//! sequence; and the passage loader the recall tables share.

use crate::error::{corrupt, pg};
use crate::open::{begin, owned, PgStore};
use crate::rows::{fact_from_row, faq_from_row, json, FACT_COLUMNS, FAQ_COLUMNS};
use crate::vector::VectorOwned;
use rag_core::{
    ChunkId, CoreError, DocId, KbId, KbSnapshot, Passage, PassageId, PassageVector, SynonymGroup,
    TenantId, UserWord,
};
use tokio_postgres::{Row, Transaction};

/// Which passages [`passages_of`] loads.
#[derive(Debug, Default)]
pub(crate) struct Scope {
    /// Every passage of the knowledge base.
    pub all: bool,
    /// Chunks of these documents.
    pub docs: Vec<uuid::Uuid>,
    /// These FAQ entries.
    pub faqs: Vec<uuid::Uuid>,
    /// These facts.
    pub facts: Vec<uuid::Uuid>,
    /// Every fact (the facts of a knowledge base's head).
    pub every_fact: bool,
}

/// [`passages_of`] without the ordinals.
pub(crate) async fn passages_in(
    tx: &Transaction<'_>,
    kb: KbId,
    scope: Scope,
) -> Result<Vec<Passage>, CoreError> {
    Ok(passages_of(tx, kb, &scope)
        .await?
        .into_iter()
        .map(|(p, _)| p)
        .collect())
}

/// Passages of a knowledge base in snapshot order (chunks by document
/// creation, document and ordinal; FAQ entries by creation; facts by id),
/// each with its chunk ordinal (0 for others).
pub(crate) async fn passages_of(
    tx: &Transaction<'_>,
    kb: KbId,
    scope: &Scope,
) -> Result<Vec<(Passage, i32)>, CoreError> {
    let mut passages = Vec::new();
    let all = scope.all;
    if all || !scope.docs.is_empty() {
        let rows = tx
            .query(
                &format!(
                    "SELECT {CHUNK_PASSAGE_COLUMNS}, c.ordinal
                     FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.kb_id = $1 AND ($2 OR c.doc_id = ANY($3))
                     ORDER BY d.created_at, d.id, c.ordinal"
                ),
                &[&kb.0, &all, &scope.docs],
            )
            .await
            .map_err(pg)?;
        for r in &rows {
            passages.push((chunk_passage(r)?, r.get::<_, i32>(11)));
        }
    }
    if all || !scope.faqs.is_empty() {
        let rows = tx
            .query(
                &format!(
                    "SELECT {FAQ_COLUMNS} FROM faqs WHERE kb_id = $1 AND ($2 OR id = ANY($3)) ORDER BY created_at, id"
                ),
                &[&kb.0, &all, &scope.faqs],
            )
            .await
            .map_err(pg)?;
        for r in &rows {
            passages.push((Passage::from(faq_from_row(r, kb)?), 0));
        }
    }
    let every_fact = all || scope.every_fact;
    if every_fact || !scope.facts.is_empty() {
        let rows = tx
            .query(
                &format!("SELECT {FACT_COLUMNS} FROM facts WHERE kb_id = $1 AND ($2 OR id = ANY($3)) ORDER BY id"),
                &[&kb.0, &every_fact, &scope.facts],
            )
            .await
            .map_err(pg)?;
        for r in &rows {
            passages.push((Passage::from(fact_from_row(r, kb)), 0));
        }
    }
    Ok(passages)
}

/// The columns [`chunk_passage`] decodes, of `chunks c JOIN documents d ON d.id = c.doc_id`.
pub(crate) const CHUNK_PASSAGE_COLUMNS: &str = "c.id, c.doc_id, d.title, c.heading_path, c.text, d.tags, d.source, c.start_byte, c.end_byte, d.created_at, d.owner";

/// A chunk's passage from a row of [`CHUNK_PASSAGE_COLUMNS`]: the title field
/// carries the document title and the headings above the chunk.
pub(crate) fn chunk_passage(r: &Row) -> Result<Passage, CoreError> {
    let headings: Vec<String> = json(r, 3, "chunks", "heading_path")?;
    let title: String = r.get(2);
    Ok(Passage {
        id: PassageId::Chunk(ChunkId(r.get(0))),
        title: rag_core::chunk_title(&title, &headings),
        body: r.get(4),
        tags: r.get(5),
        aliases: Vec::new(),
        doc: Some(DocId(r.get(1))),
        source: Some(r.get(6)),
        span: Some((r.get::<_, i64>(7) as usize, r.get::<_, i64>(8) as usize)),
        created_at: r.get(9),
        valid_from: None,
        valid_until: None,
        searchable: true,
        owner: r.get(10),
    })
}

/// The synonym groups of a knowledge base, in the order they were added.
pub(crate) async fn synonyms(
    tx: &Transaction<'_>,
    kb: KbId,
) -> Result<Vec<SynonymGroup>, CoreError> {
    Ok(tx
        .query(
            "SELECT terms FROM synonyms WHERE kb_id = $1 ORDER BY position",
            &[&kb.0],
        )
        .await
        .map_err(pg)?
        .iter()
        .map(|r| SynonymGroup { terms: r.get(0) })
        .collect())
}

/// The user dictionary of a knowledge base.
pub(crate) async fn user_words(tx: &Transaction<'_>, kb: KbId) -> Result<Vec<UserWord>, CoreError> {
    tx.query(
        "SELECT word, freq FROM user_words WHERE kb_id = $1 ORDER BY word",
        &[&kb.0],
    )
    .await
    .map_err(pg)?
    .iter()
    .map(|r| {
        let freq: Option<i64> = r.get(1);
        Ok(UserWord {
            word: r.get(0),
            freq: freq
                .map(|f| u32::try_from(f).map_err(|_| corrupt("user_words", "freq", f.to_string())))
                .transpose()?,
        })
    })
    .collect()
}

/// [`rag_core::StoreRead::snapshot`].
pub(crate) async fn snapshot(
    store: &PgStore,
    tenant: &TenantId,
    kb: KbId,
) -> Result<KbSnapshot, CoreError> {
    let mut conn = store.conn().await?;
    // One repeatable-read transaction: the snapshot is consistent with its seq.
    let tx = begin(&mut conn, &tenant.0, true).await?;
    owned(&tx, tenant, kb).await?;
    let snap = load_snapshot(&tx, kb, true).await?;
    tx.commit().await.map_err(pg)?;
    Ok(snap)
}

/// [`rag_core::StoreRead::index_snapshot`].
pub(crate) async fn index_snapshot(
    store: &PgStore,
    tenant: &TenantId,
    kb: KbId,
) -> Result<(KbSnapshot, usize), CoreError> {
    // Vectors are searched here (pgvector): the engine needs only their number.
    let mut conn = store.conn().await?;
    let tx = begin(&mut conn, &tenant.0, true).await?;
    owned(&tx, tenant, kb).await?;
    let snap = load_snapshot(&tx, kb, false).await?;
    let count: i64 = tx
        .query_one("SELECT count(*) FROM vectors WHERE kb_id = $1", &[&kb.0])
        .await
        .map_err(pg)?
        .get(0);
    tx.commit().await.map_err(pg)?;
    Ok((snap, count as usize))
}

async fn load_snapshot(
    tx: &Transaction<'_>,
    kb: KbId,
    with_vectors: bool,
) -> Result<KbSnapshot, CoreError> {
    // Every passage replaces the lexicon's facts (the list ends with them).
    let mut snapshot = crate::head::lexicon(tx, kb).await?;
    let all = Scope {
        all: true,
        ..Default::default()
    };
    snapshot.passages = passages_in(tx, kb, all).await?;
    let mut vectors = Vec::new();
    let rows = if with_vectors {
        tx.query(
            "SELECT passage, text_hash, vector FROM vectors WHERE kb_id = $1 ORDER BY passage",
            &[&kb.0],
        )
        .await
        .map_err(pg)?
    } else {
        Vec::new()
    };
    for r in rows {
        let passage: String = r.get(0);
        let id = PassageId::parse(&passage)
            .ok_or_else(|| corrupt("vectors", "passage", passage.clone()))?;
        let vector: VectorOwned = r
            .try_get(2)
            .map_err(|e| corrupt("vectors", "vector", crate::error::describe(&e)))?;
        vectors.push(PassageVector {
            id,
            text_hash: r.get(1),
            vector: vector.0,
        });
    }
    snapshot.vectors = vectors;
    Ok(snapshot)
}
