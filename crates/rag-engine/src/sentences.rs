//! Multi-vector passages: a document passage of several sentences is
//! embedded as a whole and sentence by sentence, and the dense path scores
//! its best candidates by a mix of the two.
//!
//! A question usually matches one sentence of a passage; the whole
//! passage's vector blurs that sentence with the rest. The dense path still
//! searches passage vectors (one per passage in the index), then reads the
//! sentence vectors of its best [`RESCORE_DEPTH`] candidates from the store
//! and scores each by `(1 − w) · passage cosine + w · best sentence cosine`
//! ([`SENTENCE_WEIGHT`]). A passage without sentence vectors (one sentence,
//! an FAQ entry, or vectors written before this existed) keeps its passage
//! cosine, which is then its best sentence's too. Chosen on SciFact train
//! (docs/quality.md): rescoring the best 100 ranks as scoring every
//! passage does, and int8 codes as full precision.

use crate::embed::CachedEmbedder;
use rag_core::{
    CoreError, Hit, KbId, PassageId, RankedList, SentenceVectors, StoreRead, TenantId, WriteOp,
};
use std::sync::Arc;

/// The best sentence's share of a rescored passage's score.
pub(crate) const SENTENCE_WEIGHT: f64 = 0.5;
/// Candidates of the passage search that are rescored (at least; a larger
/// k rescores k).
pub(crate) const RESCORE_DEPTH: usize = 100;
/// Sentences embedded per passage at most (the first ones).
const MAX_SENTENCES: usize = 32;
/// Pieces shorter than this many characters join the sentence before them
/// (or after, at the start): headings' numbers, "Methods:" and the like.
const MIN_CHARS: usize = 12;

/// The texts embedded for a passage's sentences, each as its passage is
/// (`title` line first): none when the body holds fewer than two sentences.
pub(crate) fn sentence_texts(title: &str, body: &str) -> Vec<String> {
    let mut pieces: Vec<(usize, usize)> = Vec::new();
    for s in rag_answer::split_sentences(body) {
        let short = body[s.start..s.end].chars().count() < MIN_CHARS;
        match pieces.last_mut() {
            Some(last) if short => last.1 = s.end,
            _ => pieces.push((s.start, s.end)),
        }
    }
    // A short first piece joins the next one.
    if pieces.len() >= 2 && body[pieces[0].0..pieces[0].1].chars().count() < MIN_CHARS {
        pieces[1].0 = pieces[0].0;
        pieces.remove(0);
    }
    if pieces.len() < 2 {
        return Vec::new();
    }
    pieces
        .into_iter()
        .take(MAX_SENTENCES)
        .map(|(a, b)| format!("{title}\n{}", &body[a..b]))
        .collect()
}

/// A passage whose sentences may be embedded: its id, the hash of its
/// embedded text (the stored vector's), its title line and its body.
#[derive(Clone)]
pub(crate) struct SentenceSource {
    pub(crate) id: PassageId,
    pub(crate) text_hash: String,
    pub(crate) title: String,
    pub(crate) body: String,
}

/// Embeds the sentences of `passages` (through the cache, `batch` texts at
/// a time) and returns the write that stores them, `None` when no passage
/// has two sentences. The write must follow the passages' vectors.
pub(crate) async fn embed_sentences(
    embedder: &CachedEmbedder,
    passages: &[SentenceSource],
    batch: usize,
) -> Result<Option<WriteOp>, CoreError> {
    let per: Vec<Vec<String>> = passages
        .iter()
        .map(|p| sentence_texts(&p.title, &p.body))
        .collect();
    let sentences: usize = per.iter().map(Vec::len).sum();
    if sentences == 0 {
        return Ok(None);
    }
    let mut items = Vec::new();
    for (p, mine) in passages
        .iter()
        .zip(embedder.embed_groups(&per, batch).await?)
    {
        if mine.len() < 2 {
            continue;
        }
        if let Some(s) = SentenceVectors::quantise(&mine) {
            items.push((p.id, p.text_hash.clone(), s));
        }
    }
    tracing::debug!(
        passages = items.len(),
        sentences,
        "sentence vectors embedded"
    );
    Ok((!items.is_empty()).then_some(WriteOp::PutSentenceVectors(items)))
}

/// Where the dense path reads sentence vectors: a knowledge base of a
/// tenant in the store.
#[derive(Clone)]
pub(crate) struct StoredSentences {
    pub(crate) store: Arc<dyn StoreRead>,
    pub(crate) tenant: TenantId,
    pub(crate) kb: KbId,
}

impl crate::engine::Engine {
    /// Where the dense path of a knowledge base reads sentence vectors;
    /// `None` when they are turned off.
    pub(crate) fn stored_sentences(&self, tenant: &TenantId, kb: KbId) -> Option<StoredSentences> {
        self.config().sentence_vectors.then(|| StoredSentences {
            store: self.store().clone() as Arc<dyn StoreRead>,
            tenant: tenant.clone(),
            kb,
        })
    }
}

impl StoredSentences {
    /// How many passage hits to ask for so that `k` can be returned
    /// after rescoring the best `depth`.
    pub(crate) fn search_k(k: usize, depth: usize) -> usize {
        k.max(depth.max(RESCORE_DEPTH))
    }

    /// `list` (passage cosines, best first) with its best
    /// `max(depth, RESCORE_DEPTH)` hits rescored by their sentences, the
    /// rest after them in their order, cut to `k`. `query` is the vector
    /// that was searched.
    pub(crate) async fn rescore(
        &self,
        list: RankedList,
        query: &[f32],
        depth: usize,
        k: usize,
    ) -> Result<RankedList, CoreError> {
        let head = list.hits.len().min(depth.max(RESCORE_DEPTH));
        let chunks: Vec<PassageId> = list.hits[..head]
            .iter()
            .map(|h| h.id)
            .filter(|id| matches!(id, PassageId::Chunk(_)))
            .collect();
        let stored = if chunks.is_empty() {
            Vec::new()
        } else {
            self.store
                .sentence_vectors(&self.tenant, self.kb, &chunks)
                .await?
        };
        Ok(rescored(list, query, head, k, &stored))
    }
}

/// The arithmetic of [`StoredSentences::rescore`]: the first `head` hits
/// rescored and re-ranked (ties by passage id, as the passage search
/// breaks them), the rest after them, cut to `k`; a note says what ran.
pub(crate) fn rescored(
    mut list: RankedList,
    query: &[f32],
    head: usize,
    k: usize,
    stored: &[(PassageId, SentenceVectors)],
) -> RankedList {
    let norm = query.iter().map(|x| x * x).sum::<f32>().sqrt();
    let unit: Vec<f32> = query
        .iter()
        .map(|x| x / norm.max(f32::MIN_POSITIVE))
        .collect();
    let mut mixed = 0;
    let mut top: Vec<Hit> = list.hits.drain(..head.min(list.hits.len())).collect();
    for hit in &mut top {
        let best = stored
            .iter()
            .find(|(id, _)| *id == hit.id)
            .and_then(|(_, s)| s.best_cosine(&unit));
        if let Some(best) = best {
            hit.score = (1.0 - SENTENCE_WEIGHT) * hit.score + SENTENCE_WEIGHT * f64::from(best);
            mixed += 1;
        }
    }
    if mixed > 0 {
        top.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
        list.notes.push(format!(
            "{mixed} of the best {} candidates were scored by {} × passage cosine + {} × their best sentence's cosine",
            top.len(),
            1.0 - SENTENCE_WEIGHT,
            SENTENCE_WEIGHT
        ));
    }
    top.append(&mut list.hits);
    top.truncate(k);
    for (i, h) in top.iter_mut().enumerate() {
        h.rank = i as u32 + 1;
    }
    list.hits = top;
    list
}

#[cfg(test)]
mod tests {
    use super::*;
    use rag_core::{ChunkId, PathKind};

    fn list(ids: &[PassageId], scores: &[f64]) -> RankedList {
        RankedList {
            path: PathKind::Dense,
            hits: ids
                .iter()
                .zip(scores)
                .enumerate()
                .map(|(i, (id, s))| Hit {
                    id: *id,
                    rank: i as u32 + 1,
                    score: *s,
                    matched: vec![],
                })
                .collect(),
            notes: vec![],
        }
    }

    #[test]
    fn sentences_are_split_with_short_pieces_joined_and_the_title_first() {
        let body = "1. Aspirin lowers fever in adults. It also thins the blood. Yes. Trials agree on this.";
        let texts = sentence_texts("Aspirin", body);
        assert_eq!(
            texts,
            vec![
                "Aspirin\n1. Aspirin lowers fever in adults.".to_owned(),
                "Aspirin\nIt also thins the blood. Yes.".to_owned(),
                "Aspirin\nTrials agree on this.".to_owned(),
            ]
        );
        assert!(sentence_texts("t", "One sentence only.").is_empty());
        assert!(sentence_texts("t", "Hi. One sentence only here.").is_empty());
        let zh = sentence_texts(
            "",
            "退款需要三到五个工作日到账。如需加急请联系人工客服处理。",
        );
        assert_eq!(zh.len(), 2);
        assert!(zh[0].starts_with('\n'));
    }

    #[test]
    fn the_best_sentence_lifts_a_passage_and_the_tail_keeps_its_order() {
        let ids: Vec<PassageId> = (0..4)
            .map(|_| PassageId::Chunk(ChunkId::generate()))
            .collect();
        let l = list(&ids, &[0.9, 0.8, 0.7, 0.6]);
        // The second passage holds a sentence equal to the query.
        let q = vec![1.0, 0.0];
        let s = SentenceVectors::quantise(&[vec![0.0, 1.0], vec![1.0, 0.0]]).unwrap();
        let out = rescored(l.clone(), &q, 3, 10, &[(ids[1], s)]);
        let order: Vec<PassageId> = out.hits.iter().map(|h| h.id).collect();
        assert_eq!(order, vec![ids[0], ids[1], ids[2], ids[3]]);
        assert!(
            (out.hits[1].score - 0.9).abs() < 1e-3,
            "{}",
            out.hits[1].score
        );
        assert_eq!(out.notes.len(), 1);
        // Lifted above the first once its sentence beats the first's passage.
        let s = SentenceVectors::quantise(&[vec![0.0, 1.0], vec![1.0, 0.0]]).unwrap();
        let l = list(&ids, &[0.85, 0.84, 0.7, 0.6]);
        let out = rescored(l, &q, 3, 2, &[(ids[1], s)]);
        let order: Vec<PassageId> = out.hits.iter().map(|h| h.id).collect();
        assert_eq!(order, vec![ids[1], ids[0]]);
        assert_eq!(
            out.hits.iter().map(|h| h.rank).collect::<Vec<_>>(),
            vec![1, 2]
        );
        // Nothing stored: the list is as searched, without a note.
        let out = rescored(list(&ids, &[0.9, 0.8, 0.7, 0.6]), &q, 4, 3, &[]);
        assert_eq!(out.hits.len(), 3);
        assert!(out.notes.is_empty());
    }

    #[test]
    fn only_the_head_is_rescored() {
        let ids: Vec<PassageId> = (0..3)
            .map(|_| PassageId::Chunk(ChunkId::generate()))
            .collect();
        let q = vec![1.0, 0.0];
        let s = SentenceVectors::quantise(&[vec![1.0, 0.0], vec![0.0, 1.0]]).unwrap();
        // The third passage has a perfect sentence but lies beyond the head.
        let out = rescored(list(&ids, &[0.9, 0.8, 0.3]), &q, 2, 3, &[(ids[2], s)]);
        assert_eq!(out.hits[2].id, ids[2]);
        assert_eq!(out.hits[2].score, 0.3);
    }
}
