//! [`Engine::map_sample`]: the passages and vectors the embedding map lays
//! out, at most a fixed number of them, so that drawing the map of a large
//! knowledge base costs the server that many passages, not the knowledge
//! base (before, the map read a whole snapshot, every text and vector, into
//! the server and kept every vector in its cache).

use crate::blocking::blocking;
use crate::engine::{Engine, KbIndex};
use rag_core::{
    CoreError, EmbeddingSpace, KnowledgeBase, Passage, PassageId, StoreRecall, TenantId, Viewer,
};
use std::collections::HashMap;
use std::sync::Arc;

/// The component named when its work fails to run.
const MAP: &str = "embedding map";

/// Vectors read from the store per statement.
const VECTOR_BATCH: usize = 1_000;

/// What the embedding map draws.
#[derive(Debug, Clone, Default)]
pub struct MapSample {
    /// The stored vectors' space (`None`: the knowledge base has none).
    pub space: Option<EmbeddingSpace>,
    /// The commit the sample is of.
    pub seq: u64,
    /// Searchable passages the viewer may see (with a vector or not).
    pub visible: usize,
    /// Whether there were more than the limit, so the passages are a sample.
    pub sampled: bool,
    /// The sampled passages that have a vector of the space's dimensions,
    /// in the knowledge base's order, with their vectors.
    pub passages: Vec<(Passage, Vec<f32>)>,
    /// Why vectors are missing, when they are.
    pub note: Option<String>,
}

/// A fixed pseudo-random key of a passage: the sample is the passages with
/// the smallest keys, the same in every process and spread over the whole
/// knowledge base (not its oldest passages).
fn sample_key(id: &PassageId) -> u64 {
    // FNV-1a over the id's text, then a final mix (splitmix64).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.to_string().bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// At most `limit` of `ids` (those with the smallest [`sample_key`]), in
/// their order.
pub(crate) fn sample(ids: Vec<PassageId>, limit: usize) -> Vec<PassageId> {
    if ids.len() <= limit {
        return ids;
    }
    let mut keyed: Vec<(u64, usize)> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| (sample_key(id), i))
        .collect();
    keyed.select_nth_unstable(limit.saturating_sub(1));
    keyed.truncate(limit);
    let mut keep: Vec<usize> = keyed.into_iter().map(|(_, i)| i).collect();
    keep.sort_unstable();
    keep.into_iter().map(|i| ids[i]).collect()
}

impl Engine {
    /// Up to `limit` searchable passages of a knowledge base that `viewer`
    /// may see, each with its stored vector: all of them when there are
    /// no more, otherwise a fixed sample spread over the knowledge base.
    /// Only the sampled passages' texts and vectors are read: from the
    /// in-memory indexes, or by id from a store that holds them itself
    /// (PostgreSQL).
    pub async fn map_sample(
        &self,
        tenant: &TenantId,
        kb: &KnowledgeBase,
        viewer: &Viewer,
        limit: usize,
    ) -> Result<MapSample, CoreError> {
        let index = self.index(tenant, kb).await?;
        let Some(space) = index.space.clone() else {
            return Ok(MapSample {
                seq: index.seq(),
                ..Default::default()
            });
        };
        let recall = self.store().store_recall();
        // Listing, sampling and reading the indexes is CPU work over up to
        // the whole knowledge base: off the async runtime.
        let ids: Vec<PassageId> = match (&index.store_passages, &recall) {
            (Some(_), Some(recall)) => {
                recall
                    .passages_except(tenant, kb.id, viewer, &[], i64::MAX as usize)
                    .await?
            }
            _ => {
                let (index, viewer) = (index.clone(), viewer.clone());
                blocking(MAP, move || {
                    index
                        .lexical
                        .passage_metas()
                        .filter(|p| p.searchable && viewer.sees(p.owner.as_deref()))
                        .map(|p| p.id)
                        .collect()
                })
                .await?
            }
        };
        let visible = ids.len();
        let ids = blocking(MAP, move || sample(ids, limit)).await?;
        let (mut vectors, note) = self
            .vectors_of(tenant, kb, &index, recall.as_deref(), &ids)
            .await?;
        let mut passages = if index.store_passages.is_some() {
            self.passages_by_id((tenant, kb.id), &index, ids.iter().copied())
                .await?
        } else {
            let (index, ids) = (index.clone(), ids.clone());
            blocking(MAP, move || {
                ids.iter()
                    .filter_map(|id| Some((*id, index.lexical.passage(*id)?.into_owned())))
                    .collect::<HashMap<_, _>>()
            })
            .await?
        };
        let dims = space.dims;
        let passages = ids
            .iter()
            .filter_map(|id| {
                let v = vectors.remove(id).filter(|v| v.len() == dims)?;
                Some((passages.remove(id)?, v))
            })
            .collect();
        Ok(MapSample {
            space: Some(space),
            seq: index.seq(),
            visible,
            sampled: visible > limit,
            passages,
            note,
        })
    }

    /// The stored vectors of `ids`: from the dense index, or from a store
    /// that searches them itself (`recall`).
    async fn vectors_of(
        &self,
        tenant: &TenantId,
        kb: &KnowledgeBase,
        index: &Arc<KbIndex>,
        recall: Option<&dyn StoreRecall>,
        ids: &[PassageId],
    ) -> Result<(HashMap<PassageId, Vec<f32>>, Option<String>), CoreError> {
        if index.store_dense {
            let mut out = HashMap::with_capacity(ids.len());
            if let Some(recall) = recall {
                for part in ids.chunks(VECTOR_BATCH) {
                    out.extend(recall.vectors(tenant, kb.id, part).await?);
                }
            }
            return Ok((out, None));
        }
        match &index.dense {
            Some(Ok(_)) => {
                let (index, ids) = (index.clone(), ids.to_vec());
                let out = blocking(MAP, move || {
                    let Some(Ok(dense)) = &index.dense else {
                        return HashMap::new();
                    };
                    ids.iter()
                        .filter_map(|id| Some((*id, dense.vector_of(*id)?.to_vec())))
                        .collect()
                })
                .await?;
                Ok((out, None))
            }
            Some(Err(e)) => Ok((
                HashMap::new(),
                Some(format!("the vectors could not be loaded: {e}")),
            )),
            None => Ok((HashMap::new(), None)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rag_core::FaqId;

    #[test]
    fn a_sample_keeps_order_is_the_same_every_time_and_spreads_out() {
        let all: Vec<PassageId> = (1..=10_000u128)
            .map(|i| PassageId::Faq(FaqId(uuid::Uuid::from_u128(i))))
            .collect();
        assert_eq!(sample(all.clone(), 20_000), all);
        let a = sample(all.clone(), 1_000);
        assert_eq!(a.len(), 1_000);
        assert_eq!(a, sample(all.clone(), 1_000));
        let place: HashMap<PassageId, usize> =
            all.iter().enumerate().map(|(i, id)| (*id, i)).collect();
        let at: Vec<usize> = a.iter().map(|id| place[id]).collect();
        assert!(
            at.windows(2).all(|w| w[0] < w[1]),
            "in the knowledge base's order"
        );
        // Spread over the whole knowledge base: each tenth holds about a
        // tenth of the sample, not the first thousand passages.
        for tenth in 0..10 {
            let here = at.iter().filter(|&&i| i / 1_000 == tenth).count();
            assert!((60..=140).contains(&here), "tenth {tenth}: {here}");
        }
        // A smaller sample is part of a larger one.
        let small = sample(all.clone(), 100);
        assert!(small.iter().all(|id| a.contains(id)));
    }
}
