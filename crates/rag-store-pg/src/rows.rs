//! Rows and domain types: decoding stored values (JSON columns, embedding
//! spaces) and the rows shared by several reads.

use crate::error::{corrupt, pg};
use rag_core::{
    CoreError, EmbeddingSpace, Fact, FactId, FaqEntry, FaqId, FaqStatus, KbId, KbSettings,
    KnowledgeBase, TenantId,
};
use tokio_postgres::types::Json;
use tokio_postgres::{Row, Transaction};

pub(crate) fn to_kb(r: &Row) -> Result<KnowledgeBase, CoreError> {
    let settings: Json<KbSettings> = r
        .try_get(4)
        .map_err(|e| corrupt("kbs", "settings", crate::error::describe(&e)))?;
    Ok(KnowledgeBase {
        id: KbId(r.get(0)),
        tenant: TenantId(r.get(1)),
        name: r.get(2),
        created_at: r.get(3),
        settings: settings.0.upgraded(),
    })
}

pub(crate) fn json<'a, T: serde::Deserialize<'a>>(
    r: &'a Row,
    idx: usize,
    table: &'static str,
    column: &'static str,
) -> Result<T, CoreError> {
    r.try_get::<_, Json<T>>(idx)
        .map(|j| j.0)
        .map_err(|e| corrupt(table, column, crate::error::describe(&e)))
}

pub(crate) fn space_of(model: Option<String>, dims: Option<i32>) -> Option<EmbeddingSpace> {
    model.zip(dims).map(|(model_id, dims)| EmbeddingSpace {
        model_id,
        dims: dims as usize,
    })
}

/// The columns [`faq_from_row`] decodes, of `faqs`.
pub(crate) const FAQ_COLUMNS: &str = "id, question, answer, status, edited, source_url, tags, created_at, updated_at, valid_from, valid_until, source_doc";

/// An FAQ entry from a row of [`FAQ_COLUMNS`].
pub(crate) fn faq_from_row(r: &Row, kb: KbId) -> Result<FaqEntry, CoreError> {
    let status: String = r.get(3);
    Ok(FaqEntry {
        id: FaqId(r.get(0)),
        kb,
        question: r.get(1),
        answer: r.get(2),
        status: FaqStatus::parse(&status)
            .ok_or_else(|| corrupt("faqs", "status", status.clone()))?,
        edited: r.get(4),
        source_url: r.get(5),
        tags: r.get(6),
        created_at: r.get(7),
        updated_at: r.get(8),
        valid_from: r.get(9),
        valid_until: r.get(10),
        source_doc: r.get::<_, Option<uuid::Uuid>>(11).map(rag_core::DocId),
    })
}

/// The columns [`fact_from_row`] decodes, of `facts`.
pub(crate) const FACT_COLUMNS: &str = "id, key, value, key_synonyms";

/// A fact from a row of [`FACT_COLUMNS`].
pub(crate) fn fact_from_row(r: &Row, kb: KbId) -> Fact {
    Fact {
        id: FactId(r.get(0)),
        kb,
        key: r.get(1),
        value: r.get(2),
        key_synonyms: r.get(3),
    }
}

/// Every FAQ entry of a knowledge base, oldest first.
pub(crate) async fn read_faqs(tx: &Transaction<'_>, kb: KbId) -> Result<Vec<FaqEntry>, CoreError> {
    let rows = tx
        .query(
            &format!("SELECT {FAQ_COLUMNS} FROM faqs WHERE kb_id = $1 ORDER BY created_at, id"),
            &[&kb.0],
        )
        .await
        .map_err(pg)?;
    rows.iter().map(|r| faq_from_row(r, kb)).collect()
}
