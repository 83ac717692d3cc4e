//! Whole passages by id, for what a query shows and reads (views, rerank
//! texts, context, citations, log titles): from the in-memory index, or,
//! when the store holds the text and searches it itself (PostgreSQL), read
//! from the store for the ids a query needs. An engine over such a store
//! keeps only each knowledge base's head ([`rag_core::RecallHead`]), so its
//! memory does not grow with the corpus.

use crate::engine::{Engine, KbIndex};
use rag_core::{CoreError, KbId, Passage, PassageId, TenantId};
use std::collections::HashMap;

/// Passages read for one query, by id.
pub(crate) type Fetched = HashMap<PassageId, Passage>;

impl Engine {
    /// Adds to `into` the passages of `ids` it does not hold yet: those the
    /// index holds (every passage in memory; the facts of a head), then the
    /// rest from the store when it holds the text. Ids that name no
    /// searchable passage are left out, as the index leaves them out.
    pub(crate) async fn fetch_passages(
        &self,
        (tenant, kb): (&TenantId, KbId),
        index: &KbIndex,
        ids: impl IntoIterator<Item = PassageId>,
        into: &mut Fetched,
    ) -> Result<(), CoreError> {
        let mut rest = Vec::new();
        for id in ids {
            if into.contains_key(&id) {
                continue;
            }
            match index.lexical.passage(id) {
                Some(p) => {
                    into.insert(id, p.into_owned());
                }
                None if index.store_passages.is_some() && !rest.contains(&id) => rest.push(id),
                None => {}
            }
        }
        if rest.is_empty() {
            return Ok(());
        }
        if let Some(recall) = self.store().store_recall() {
            for p in recall.passages(tenant, kb, &rest).await? {
                into.insert(p.id, p);
            }
        }
        Ok(())
    }

    /// Whole passages of a knowledge base by id, from `index` (of that
    /// knowledge base) or from the store when it holds the text; ids that
    /// name no searchable passage are left out.
    pub async fn passages_by_id(
        &self,
        at: (&TenantId, KbId),
        index: &KbIndex,
        ids: impl IntoIterator<Item = PassageId>,
    ) -> Result<Fetched, CoreError> {
        let mut out = Fetched::new();
        self.fetch_passages(at, index, ids, &mut out).await?;
        Ok(out)
    }
}
