//! The dense index of a knowledge base and its recall path.

use rag_ann::{FlatIndex, IndexKind, Query, VectorIndex, VectorIndexParams};
use rag_core::{EmbeddingSpace, Hit, KbSnapshot, PassageId, PathKind, RankedList};
use rag_lexical::{Filter, LexicalIndex};
use rustc_hash::FxHashMap;

/// Vectors of one knowledge base snapshot.
pub struct DenseIndex {
    space: EmbeddingSpace,
    /// Ordinal → passage.
    ids: Vec<PassageId>,
    index: VectorIndex<u32>,
    /// Searchable passages without a vector, or whose vector was made from another text.
    pub missing: usize,
    /// Searchable passages.
    pub total: usize,
}

impl std::fmt::Debug for DenseIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenseIndex")
            .field("space", &self.space)
            .field("vectors", &self.ids.len())
            .field("missing", &self.missing)
            .finish()
    }
}

impl DenseIndex {
    /// Builds the index from the snapshot's vectors; stale vectors (made from
    /// a text that has since changed) are left out and counted as missing.
    pub fn build(
        snapshot: &KbSnapshot,
        lexical: &LexicalIndex,
        params: VectorIndexParams,
    ) -> Option<Result<Self, rag_ann::AnnError>> {
        let space = snapshot.space.clone()?;
        let fresh: FxHashMap<PassageId, &rag_core::PassageVector> =
            snapshot.vectors.iter().map(|v| (v.id, v)).collect();
        let mut flat = match FlatIndex::with_capacity(space.dims, snapshot.vectors.len()) {
            Ok(f) => f,
            Err(e) => return Some(Err(e)),
        };
        let mut ids = Vec::new();
        let (mut missing, mut total) = (0, 0);
        for p in snapshot
            .passages
            .iter()
            .filter(|p| p.searchable && lexical.passage(p.id).is_some())
        {
            total += 1;
            match fresh.get(&p.id) {
                Some(v) if v.text_hash == crate::embed::text_hash(&p.embedding_text()) => {
                    if let Err(e) = flat.add(ids.len() as u32, &v.vector) {
                        return Some(Err(e));
                    }
                    ids.push(p.id);
                }
                _ => missing += 1,
            }
        }
        Some(
            VectorIndex::from_flat(flat, params).map(|index| DenseIndex {
                space,
                ids,
                index,
                missing,
                total,
            }),
        )
    }

    /// The embedding space.
    pub fn space(&self) -> &EmbeddingSpace {
        &self.space
    }

    /// Which index answers searches.
    pub fn kind(&self) -> IndexKind {
        self.index.kind()
    }

    /// The `k` passages closest to `query`, with cosine scores.
    pub fn search(
        &self,
        query: &[f32],
        k: usize,
        filter: &Filter,
        lexical: &LexicalIndex,
    ) -> Result<RankedList, rag_ann::AnnError> {
        let allowed = |ord: u32| {
            lexical
                .passage(self.ids[ord as usize])
                .is_some_and(|p| filter.allows(p))
        };
        let outcome = self.index.search(&Query::new(query, k).filter(&allowed))?;
        let hits = outcome
            .hits
            .iter()
            .enumerate()
            .map(|(i, h)| Hit {
                id: self.ids[h.key as usize],
                rank: i as u32 + 1,
                score: h.score as f64,
                matched: vec![],
            })
            .collect();
        let mut notes = vec![format!(
            "index: {} over {} vectors ({})",
            outcome.kind.as_str(),
            self.ids.len(),
            self.space.model_id
        )];
        if self.missing > 0 {
            notes.push(format!(
                "{} of {} passages have no current vector and cannot be found by meaning; run `ragscope reembed`",
                self.missing, self.total
            ));
        }
        Ok(RankedList {
            path: PathKind::Dense,
            hits,
            notes,
        })
    }
}
