//! The dense index of a knowledge base and its recall path.
//!
//! Like the lexical index it is a list of immutable parts: the vectors of
//! the last full build (exact, or an HNSW graph above the threshold) and
//! small exact parts holding the vectors written since, with the entries of
//! replaced or deleted passages marked dead. [`DenseIndex::apply`] returns
//! the index of a later commit sharing the old parts; small parts are merged
//! once there are [`MAX_PARTS`] of them.

use rag_ann::{FlatIndex, IndexKind, Query, VectorIndex, VectorIndexParams};
use rag_core::{EmbeddingSpace, Hit, KbChanges, KbSnapshot, PassageId, PathKind, RankedList};
use rag_lexical::{Filter, LexicalIndex};
use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::Arc;

/// Parts kept before the small ones are merged.
const MAX_PARTS: usize = 8;

/// One immutable part: vectors under ordinals, and the passage of each.
pub(crate) struct Part {
    pub(crate) ids: Vec<PassageId>,
    pub(crate) ord_of: FxHashMap<PassageId, u32>,
    pub(crate) index: VectorIndex<u32>,
    /// Whether any of its passages is an FAQ entry (dead ones included).
    pub(crate) faqs: bool,
}

/// Whether any of `ids` is an FAQ entry.
pub(crate) fn any_faq(ids: &[PassageId]) -> bool {
    ids.iter().any(|id| matches!(id, PassageId::Faq(_)))
}

/// Vectors of one knowledge base at one commit.
#[derive(Clone)]
pub struct DenseIndex {
    pub(crate) space: EmbeddingSpace,
    pub(crate) params: VectorIndexParams,
    pub(crate) parts: Vec<Arc<Part>>,
    /// Dead ordinals per part.
    pub(crate) dead: Vec<Arc<FxHashSet<u32>>>,
    /// Live vectors.
    pub(crate) live: usize,
    /// Searchable passages without a vector, or whose vector was made from another text.
    pub missing: usize,
    /// Searchable passages.
    pub total: usize,
}

impl std::fmt::Debug for DenseIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenseIndex")
            .field("space", &self.space)
            .field("vectors", &self.live)
            .field("parts", &self.parts.len())
            .field("missing", &self.missing)
            .finish()
    }
}

fn part(
    dims: usize,
    items: Vec<(PassageId, &[f32])>,
    params: VectorIndexParams,
) -> Result<Part, rag_ann::AnnError> {
    let mut flat = FlatIndex::with_capacity(dims, items.len())?;
    let mut ids = Vec::with_capacity(items.len());
    for (id, v) in items {
        flat.add(ids.len() as u32, v)?;
        ids.push(id);
    }
    let ord_of = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (*id, i as u32))
        .collect();
    Ok(Part {
        faqs: any_faq(&ids),
        ids,
        ord_of,
        index: VectorIndex::from_flat(flat, params)?,
    })
}

impl DenseIndex {
    /// Builds the index from the snapshot's vectors (its passages are not
    /// read: they are those of `lexical`, the index built from the same
    /// snapshot, which may have taken them); stale vectors (made from a
    /// text that has since changed) are left out and counted as missing.
    pub fn build(
        snapshot: &KbSnapshot,
        lexical: &LexicalIndex,
        params: VectorIndexParams,
    ) -> Option<Result<Self, rag_ann::AnnError>> {
        let space = snapshot.space.clone()?;
        let fresh: FxHashMap<PassageId, &rag_core::PassageVector> =
            snapshot.vectors.iter().map(|v| (v.id, v)).collect();
        let mut items = Vec::new();
        let mut total = 0;
        for meta in lexical.passage_metas().filter(|p| p.searchable) {
            total += 1;
            if let Some(v) = fresh.get(&meta.id) {
                let text = lexical.passage(meta.id).map(|p| p.embedding_text());
                if text.is_some_and(|t| v.text_hash == crate::embed::text_hash(&t)) {
                    items.push((meta.id, v.vector.as_slice()));
                }
            }
        }
        // An order that does not depend on the store's or the index's.
        items.sort_unstable_by_key(|(id, _)| *id);
        let live = items.len();
        // Exact for now: the engine builds the graph of a large part in the
        // background ([`DenseIndex::graph_pending`]) or, when asked to, at once.
        let exact = VectorIndexParams {
            hnsw_threshold: usize::MAX,
            ..params
        };
        Some(part(space.dims, items, exact).map(|p| DenseIndex {
            space,
            params,
            parts: vec![Arc::new(p)],
            dead: vec![Arc::new(FxHashSet::default())],
            live,
            missing: total - live,
            total,
        }))
    }

    /// The index after `changes`, given the lexical index at the same
    /// commit (which says which passages are searchable): the vectors of
    /// changed passages are marked dead, current vectors of written passages
    /// go to a new exact part. `None` when the space changed or the vectors
    /// were cleared (a full build is needed).
    pub fn apply(
        &self,
        changes: &KbChanges,
        before: &LexicalIndex,
        lexical: &LexicalIndex,
    ) -> Option<Result<Self, rag_ann::AnnError>> {
        if changes.vectors_reset || changes.space.as_ref() != Some(&self.space) {
            return None;
        }
        let mut next = self.clone();
        let touched = changes
            .removed
            .iter()
            .chain(changes.upserted.iter().map(|p| &p.id))
            .chain(&changes.revectored);
        for id in touched {
            next.kill(*id);
        }
        let vectors: FxHashMap<PassageId, &rag_core::PassageVector> =
            changes.vectors.iter().map(|v| (v.id, v)).collect();
        let mut ids: Vec<PassageId> = changes
            .upserted
            .iter()
            .map(|p| p.id)
            .chain(changes.revectored.iter().copied())
            .collect();
        ids.extend(changes.removed.iter().copied());
        ids.sort();
        ids.dedup();
        let counted =
            |l: &LexicalIndex, id: PassageId| l.passage_meta(id).is_some_and(|p| p.searchable);
        let mut items = Vec::new();
        for id in ids {
            next.total -= usize::from(counted(before, id));
            next.total += usize::from(counted(lexical, id));
            // Only searchable passages are in the lexical index.
            let Some(p) = lexical.passage(id) else {
                continue;
            };
            if let Some(v) = vectors.get(&id) {
                if v.text_hash == crate::embed::text_hash(&p.embedding_text()) {
                    items.push((id, v.vector.as_slice()));
                }
            }
        }
        if !items.is_empty() {
            next.live += items.len();
            match part(self.space.dims, items, self.params) {
                Ok(p) => {
                    next.parts.push(Arc::new(p));
                    next.dead.push(Arc::new(FxHashSet::default()));
                }
                Err(e) => return Some(Err(e)),
            }
        }
        next.missing = next.total.saturating_sub(next.live);
        Some(next.merge_parts().map(|()| next))
    }

    fn kill(&mut self, id: PassageId) {
        for (i, p) in self.parts.iter().enumerate() {
            if let Some(o) = p.ord_of.get(&id) {
                if Arc::make_mut(&mut self.dead[i]).insert(*o) {
                    self.live -= 1;
                }
            }
        }
    }

    /// Merges the small parts into one once there are too many, and
    /// rebuilds a part whose entries are mostly dead.
    fn merge_parts(&mut self) -> Result<(), rag_ann::AnnError> {
        let size = |i: usize, s: &Self| s.parts[i].ids.len();
        let mut group: Vec<usize> = Vec::new();
        if self.parts.len() > MAX_PARTS {
            // Every part but the largest.
            let largest = (0..self.parts.len())
                .max_by_key(|&i| size(i, self))
                .unwrap_or(0);
            group = (0..self.parts.len()).filter(|&i| i != largest).collect();
        } else if let Some(i) =
            (0..self.parts.len()).find(|&i| self.dead[i].len() * 2 > size(i, self))
        {
            group = vec![i];
        }
        if group.is_empty() {
            return Ok(());
        }
        let mut items: Vec<(PassageId, Vec<f32>)> = Vec::new();
        for &i in &group {
            let p = &self.parts[i];
            for (o, v) in p.index.store().iter() {
                if !self.dead[i].contains(&o) {
                    items.push((p.ids[o as usize], v.to_vec()));
                }
            }
        }
        let merged = part(
            self.space.dims,
            items.iter().map(|(id, v)| (*id, v.as_slice())).collect(),
            self.params,
        )?;
        for &i in group.iter().rev() {
            self.parts.remove(i);
            self.dead.remove(i);
        }
        self.parts.push(Arc::new(merged));
        self.dead.push(Arc::new(FxHashSet::default()));
        Ok(())
    }

    /// The largest part, when it is big enough for a graph but searched
    /// exactly (a fresh build): the engine builds its graph off the query
    /// path and swaps it in with [`with_part_replaced`](Self::with_part_replaced).
    pub(crate) fn graph_pending(&self) -> Option<Arc<Part>> {
        self.parts
            .iter()
            .max_by_key(|p| p.ids.len())
            .filter(|p| {
                p.index.kind() == IndexKind::Exact && p.index.len() >= self.params.hnsw_threshold
            })
            .cloned()
    }

    /// The same part with its graph (the vectors copied; ordinals, and so
    /// the dead marks, unchanged).
    pub(crate) fn graph_part(
        part: &Part,
        params: VectorIndexParams,
    ) -> Result<Part, rag_ann::AnnError> {
        Ok(Part {
            ids: part.ids.clone(),
            ord_of: part.ord_of.clone(),
            index: VectorIndex::from_flat(part.index.store().clone(), params)?,
            faqs: part.faqs,
        })
    }

    /// This index with `old` (still one of its parts) replaced by `new`;
    /// `None` when `old` is no longer a part (merged away since).
    pub(crate) fn with_part_replaced(&self, old: &Arc<Part>, new: Arc<Part>) -> Option<Self> {
        let at = self.parts.iter().position(|p| Arc::ptr_eq(p, old))?;
        let mut next = self.clone();
        next.parts[at] = new;
        Some(next)
    }

    /// Builds the pending graph in place (when the caller wants it at once).
    pub(crate) fn build_graph_now(&mut self) -> Result<(), rag_ann::AnnError> {
        if let Some(old) = self.graph_pending() {
            let new = Arc::new(Self::graph_part(&old, self.params)?);
            if let Some(next) = self.with_part_replaced(&old, new) {
                *self = next;
            }
        }
        Ok(())
    }

    /// The embedding space.
    pub fn space(&self) -> &EmbeddingSpace {
        &self.space
    }

    /// Which index answers searches (of the largest part).
    pub fn kind(&self) -> IndexKind {
        self.parts
            .iter()
            .max_by_key(|p| p.ids.len())
            .map_or(IndexKind::Exact, |p| p.index.kind())
    }

    /// The immutable parts the vectors are in (the last full build, and
    /// the small parts written since).
    pub fn part_count(&self) -> usize {
        self.parts.len()
    }

    /// Live vectors.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Parts whose full-precision vectors are read in place from a mapped
    /// index file rather than held in memory.
    pub fn parts_in_place(&self) -> usize {
        self.parts
            .iter()
            .filter(|p| p.index.store().is_shared())
            .count()
    }

    /// Bytes of full-precision vectors held on the heap (those read in
    /// place from a mapped file not counted).
    pub fn vector_heap_bytes(&self) -> usize {
        self.parts
            .iter()
            .map(|p| p.index.store().matrix_heap_bytes())
            .sum()
    }

    /// Whether the index may hold FAQ entries (a part that ever did).
    pub fn holds_faqs(&self) -> bool {
        self.parts.iter().any(|p| p.faqs)
    }

    /// The stored (unit) vector of a live passage.
    pub fn vector_of(&self, id: PassageId) -> Option<&[f32]> {
        self.parts
            .iter()
            .zip(&self.dead)
            .rev()
            .find_map(|(part, dead)| {
                let ord = *part.ord_of.get(&id)?;
                if dead.contains(&ord) {
                    return None;
                }
                part.index.store().vector(ord)
            })
    }

    /// Whether no vector is live.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// The `k` passages closest to `query`, with cosine scores; ties by passage id.
    pub fn search(
        &self,
        query: &[f32],
        k: usize,
        filter: &Filter,
        lexical: &LexicalIndex,
    ) -> Result<RankedList, rag_ann::AnnError> {
        let mut found: Vec<(PassageId, f32)> = Vec::new();
        let mut kinds: Vec<&str> = Vec::new();
        for (i, part) in self.parts.iter().enumerate() {
            let dead = &self.dead[i];
            let allowed = |ord: u32| {
                !dead.contains(&ord)
                    && lexical
                        .passage_meta(part.ids[ord as usize])
                        .is_some_and(|p| filter.allows(p))
            };
            let outcome = part.index.search(&Query::new(query, k).filter(&allowed))?;
            if !kinds.contains(&outcome.kind.as_str()) {
                kinds.push(outcome.kind.as_str());
            }
            found.extend(
                outcome
                    .hits
                    .iter()
                    .map(|h| (part.ids[h.key as usize], h.score)),
            );
        }
        found.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        found.truncate(k);
        let hits = found
            .into_iter()
            .enumerate()
            .map(|(i, (id, score))| Hit {
                id,
                rank: i as u32 + 1,
                score: score as f64,
                matched: vec![],
            })
            .collect();
        let mut notes = vec![format!(
            "index: {} over {} vectors ({})",
            kinds.join(" + "),
            self.live,
            self.space.model_id
        )];
        if self.graph_pending().is_some() {
            notes.push(
                "the HNSW graph is being built in the background; exact search answers meanwhile"
                    .to_owned(),
            );
        }
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
