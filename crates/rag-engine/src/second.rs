//! A second embedder's opinion: an English-only model (all-MiniLM-L6-v2
//! by default), trained on paraphrase and question pairs, rescoring the
//! candidates the other paths found for an English question over English
//! passages.
//!
//! e5-small reads both languages; MiniLM reads English only but matches
//! English paraphrases better (docs/quality.md: its dense path alone beats
//! e5's on banking77 dev). It does not search: after recall, the stage
//! reads the second vectors of every candidate some path returned (stored
//! beside the passage vectors, [`WriteOp::PutSecondVectors`]) and ranks
//! them by the second model's cosine, as a list of its own
//! ([`PathKind::SecondDense`]) that shares the dense weight in fusion.
//!
//! What is stored per passage: the vector of its whole embedded text, then
//! for a document passage of several sentences its sentences' (scored as
//! the dense path scores sentence vectors: `(1 − w) · whole + w · best
//! sentence`), for an FAQ entry its question's (scored by the better of
//! the two: question-to-question matching). Passages in Chinese get none.
//! The stage runs only when every candidate has them, so a knowledge base
//! that is partly Chinese, or not yet re-embedded, is fused as before, and
//! the list's note says why.

use crate::embed::CachedEmbedder;
use crate::emit::EventSink;
use crate::engine::Engine;
use crate::sentences::{sentence_texts, SENTENCE_WEIGHT};
use crate::stages::{ms, Run};
use rag_core::{
    AnalyzedQuery, CoreError, FaqEntry, Hit, Language, PassageId, PathKind, PipelineEvent,
    RankedList, SentenceVectors, StageTiming, WriteOp,
};
use std::collections::HashSet;
use std::time::Instant;

/// The question being embedded by the second model while recall runs;
/// dropped unused, the embedding stops.
pub(crate) struct SecondQuery {
    model: String,
    task: tokio::task::JoinHandle<Result<Vec<f32>, CoreError>>,
}

impl Drop for SecondQuery {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What the second embedder embeds for one passage.
#[derive(Clone, Debug)]
pub(crate) struct SecondSource {
    pub(crate) id: PassageId,
    /// The hash of the passage's embedded text (its stored vector's).
    pub(crate) text_hash: String,
    /// The passage's embedded text.
    pub(crate) whole: String,
    /// Its sentences (a document passage) or its question (an FAQ entry).
    pub(crate) parts: Vec<String>,
}

impl SecondSource {
    /// A document passage: its embedded text, then its sentences.
    pub(crate) fn chunk(id: PassageId, text_hash: String, title: &str, body: &str) -> Self {
        let whole = if title.is_empty() {
            body.to_owned()
        } else {
            format!("{title}\n{body}")
        };
        SecondSource {
            id,
            text_hash,
            whole,
            parts: sentence_texts(title, body),
        }
    }

    /// An FAQ entry: "question: answer", then the question.
    pub(crate) fn faq(f: &FaqEntry) -> Self {
        let whole = format!("{}: {}", f.question, f.answer);
        SecondSource {
            id: PassageId::Faq(f.id),
            text_hash: rag_core::text_hash(&whole),
            whole,
            parts: vec![f.question.clone()],
        }
    }

    /// Any passage, by its kind (facts: their text alone).
    pub(crate) fn passage(p: &rag_core::Passage, text_hash: String) -> Self {
        match p.id {
            PassageId::Chunk(_) => Self::chunk(p.id, text_hash, &p.title, &p.body),
            PassageId::Faq(_) => SecondSource {
                id: p.id,
                text_hash,
                whole: p.embedding_text(),
                parts: vec![p.title.clone()],
            },
            PassageId::Fact(_) => SecondSource {
                id: p.id,
                text_hash,
                whole: p.embedding_text(),
                parts: Vec::new(),
            },
        }
    }

    /// Whether the second (English) model should read it: not Chinese.
    fn readable(&self) -> bool {
        !matches!(
            rag_text::detect_language(&self.whole),
            Language::Zh | Language::Mixed
        )
    }
}

/// Embeds the English ones of `sources` with the second model (through
/// the cache, `batch` texts at a time) and returns the write that stores
/// them, `None` when none is English. The write must follow the passages'
/// vectors.
pub(crate) async fn embed_second(
    embedder: &CachedEmbedder,
    sources: &[SecondSource],
    batch: usize,
) -> Result<Option<WriteOp>, CoreError> {
    let kept: Vec<&SecondSource> = sources.iter().filter(|s| s.readable()).collect();
    if kept.is_empty() {
        return Ok(None);
    }
    let groups: Vec<Vec<String>> = kept
        .iter()
        .map(|s| {
            std::iter::once(s.whole.clone())
                .chain(s.parts.iter().cloned())
                .collect()
        })
        .collect();
    let texts: usize = groups.iter().map(Vec::len).sum();
    let mut items = Vec::with_capacity(kept.len());
    for (s, mine) in kept
        .iter()
        .zip(embedder.embed_groups(&groups, batch).await?)
    {
        if let Some(v) = SentenceVectors::quantise(&mine) {
            items.push((s.id, s.text_hash.clone(), v));
        }
    }
    tracing::debug!(passages = items.len(), texts, "second vectors embedded");
    Ok((!items.is_empty()).then(|| WriteOp::PutSecondVectors {
        model: embedder.model().model_id().to_owned(),
        items,
    }))
}

/// The second model's score of one passage for a unit query vector:
/// document passages mix the whole text's cosine with their best
/// sentence's, FAQ entries take the better of the whole entry and the
/// question.
pub(crate) fn second_score(id: PassageId, stored: &SentenceVectors, unit: &[f32]) -> Option<f64> {
    let cos = stored.cosines(unit)?;
    let (whole, parts) = cos.split_first()?;
    let best = parts.iter().copied().reduce(f32::max);
    Some(match (id, best) {
        (_, None) => f64::from(*whole),
        (PassageId::Faq(_), Some(b)) => f64::from(whole.max(b)),
        (_, Some(b)) => {
            (1.0 - SENTENCE_WEIGHT) * f64::from(*whole) + SENTENCE_WEIGHT * f64::from(b)
        }
    })
}

/// The empty list of a stage that did not score: `missing` of `total`
/// candidates had no vectors of `model`.
fn not_used(missing: usize, total: usize, model: &str) -> RankedList {
    RankedList {
        path: PathKind::SecondDense,
        hits: Vec::new(),
        notes: vec![format!(
            "not used: {missing} of the {total} candidates have no vectors of {model} (not English, or stored before it was configured: `ragscope reembed` adds them), so the candidates are fused without it"
        )],
    }
}

/// The candidates ranked by the second model's score (ties by passage
/// id); an empty list, with a note saying why, when any of them has no
/// stored second vectors.
pub(crate) fn second_list(
    candidates: &[PassageId],
    stored: &[(PassageId, SentenceVectors)],
    query: &[f32],
    model: &str,
) -> RankedList {
    let norm = query.iter().map(|x| x * x).sum::<f32>().sqrt();
    let unit: Vec<f32> = query
        .iter()
        .map(|x| x / norm.max(f32::MIN_POSITIVE))
        .collect();
    // A candidate without rows, or with rows of other dimensions than the
    // question's, has no score.
    let scored: Vec<Option<f64>> = candidates
        .iter()
        .map(|id| {
            let rows = stored.iter().find(|(s, _)| s == id).map(|(_, v)| v);
            rows.and_then(|v| second_score(*id, v, &unit))
        })
        .collect();
    let missing = scored.iter().filter(|s| s.is_none()).count();
    if missing > 0 {
        return not_used(missing, candidates.len(), model);
    }
    let mut hits: Vec<Hit> = candidates
        .iter()
        .zip(scored)
        .map(|(id, score)| Hit {
            id: *id,
            rank: 0,
            score: score.unwrap_or_default(),
            matched: vec![],
        })
        .collect();
    hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
    for (i, h) in hits.iter_mut().enumerate() {
        h.rank = i as u32 + 1;
    }
    let n = hits.len();
    RankedList {
        path: PathKind::SecondDense,
        hits,
        notes: vec![format!(
            "the {n} candidates the other paths found, scored by {model}'s cosine (a document passage: {} × whole + {} × best sentence; an FAQ entry: the better of the entry and its question)",
            1.0 - SENTENCE_WEIGHT,
            SENTENCE_WEIGHT
        )],
    }
}

impl Engine {
    /// The second model's vectors of `sources`, as a write, when a second
    /// embedder is configured and some are English.
    pub(crate) async fn second_ops(
        &self,
        sources: &[SecondSource],
    ) -> Result<Option<WriteOp>, CoreError> {
        match self.second_embedder() {
            Some(e) if !sources.is_empty() => {
                embed_second(&e, sources, self.config().embed_batch).await
            }
            _ => Ok(None),
        }
    }

    /// Starts embedding the question with the second model, when its
    /// stage will run (asked for beside the dense path, configured, a
    /// question in English), so that it overlaps recall.
    pub(crate) fn start_second_query(
        &self,
        run: &Run<'_>,
        analyzed: &AnalyzedQuery,
    ) -> Option<SecondQuery> {
        let embedder = self.second_embedder()?;
        let paths = &run.params.paths;
        if !paths.contains(&PathKind::SecondDense)
            || !paths.contains(&PathKind::Dense)
            || analyzed.language != Language::En
        {
            return None;
        }
        let raw = analyzed.raw.clone();
        let model = embedder.model().model_id().to_owned();
        Some(SecondQuery {
            model,
            task: tokio::spawn(async move { embedder.embed_query(&raw).await }),
        })
    }

    /// The second embedder's list, after recall: `None` when it does not
    /// take part (its question was not started, or no dense list to share
    /// the weight with).
    pub(crate) async fn second_stage(
        &self,
        run: &mut Run<'_>,
        lists: &[RankedList],
        query: Option<SecondQuery>,
        emit: &mut EventSink<'_>,
    ) -> Result<Option<RankedList>, CoreError> {
        let Some(mut query) = query else {
            return Ok(None);
        };
        let dense = lists
            .iter()
            .any(|l| l.path == PathKind::Dense && !l.hits.is_empty());
        if !dense {
            return Ok(None);
        }
        let t = Instant::now();
        let mut seen = HashSet::new();
        let candidates: Vec<PassageId> = lists
            .iter()
            .flat_map(|l| l.hits.iter().map(|h| h.id))
            .filter(|id| seen.insert(*id))
            .collect();
        let model = query.model.clone();
        let result = async {
            let stored = self
                .store()
                .second_vectors(run.tenant, run.kb.id, &model, &candidates)
                .await?;
            // No question vector is needed when a candidate has none.
            if stored.len() < candidates.len() {
                let missing = candidates.len() - stored.len();
                return Ok(not_used(missing, candidates.len(), &model));
            }
            let vector = (&mut query.task).await.map_err(|e| CoreError::Component {
                component: "second embedder".into(),
                message: e.to_string(),
            })??;
            Ok::<_, CoreError>(second_list(&candidates, &stored, &vector, &model))
        }
        .await;
        let elapsed = ms(t);
        run.timings.push(StageTiming {
            stage: format!("recall:{}", PathKind::SecondDense),
            ms: elapsed,
        });
        match result {
            Ok(list) => {
                emit.emit(PipelineEvent::Recall {
                    list: list.clone(),
                    passages: Vec::new(),
                    elapsed_ms: elapsed,
                })
                .await;
                Ok(Some(list))
            }
            Err(e) => {
                // Fail-soft: the other paths are fused without it.
                run.warnings
                    .push(format!("{} path failed: {e}", PathKind::SecondDense));
                emit.emit(PipelineEvent::RecallFailed {
                    path: PathKind::SecondDense,
                    message: e.to_string(),
                })
                .await;
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rag_core::{ChunkId, FaqId};

    fn chunk() -> PassageId {
        PassageId::Chunk(ChunkId::generate())
    }

    #[test]
    fn passages_mix_their_best_sentence_and_faq_entries_take_the_better_row() {
        let q = [1.0, 0.0];
        let rows = SentenceVectors::quantise(&[vec![0.0, 1.0], vec![1.0, 0.0]]).unwrap();
        let c = second_score(chunk(), &rows, &q).unwrap();
        assert!((c - 0.5).abs() < 1e-2, "{c}");
        let f = second_score(PassageId::Faq(FaqId::generate()), &rows, &q).unwrap();
        assert!((f - 1.0).abs() < 1e-2, "{f}");
        let alone = SentenceVectors::quantise(&[vec![0.6, 0.8]]).unwrap();
        let a = second_score(chunk(), &alone, &q).unwrap();
        assert!((a - 0.6).abs() < 1e-2, "{a}");
        // Another model's dimensions: no score.
        assert!(second_score(chunk(), &alone, &[1.0, 0.0, 0.0]).is_none());
    }

    #[test]
    fn the_list_ranks_every_candidate_or_none() {
        let ids: Vec<PassageId> = (0..3).map(|_| chunk()).collect();
        let v = |x: f32| SentenceVectors::quantise(&[vec![x, (1.0 - x * x).sqrt()]]).unwrap();
        let stored = vec![(ids[2], v(0.9)), (ids[0], v(0.2)), (ids[1], v(0.5))];
        let list = second_list(&ids, &stored, &[2.0, 0.0], "m");
        let order: Vec<PassageId> = list.hits.iter().map(|h| h.id).collect();
        assert_eq!(order, vec![ids[2], ids[1], ids[0]]);
        assert_eq!(
            list.hits.iter().map(|h| h.rank).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        // One candidate without vectors (a Chinese passage): no list, and why.
        let list = second_list(&ids, &stored[..2], &[1.0, 0.0], "m");
        assert!(list.hits.is_empty());
        assert!(list.notes[0].contains("1 of the 3"), "{:?}", list.notes);
    }

    #[test]
    fn chinese_passages_are_not_given_to_the_english_model() {
        let zh = SecondSource::chunk(chunk(), "h".into(), "", "退款需要三到五个工作日到账。");
        let en = SecondSource::chunk(chunk(), "h".into(), "Refunds", "Refunds take three days.");
        assert!(!zh.readable());
        assert!(en.readable());
        assert_eq!(en.whole, "Refunds\nRefunds take three days.");
    }
}
