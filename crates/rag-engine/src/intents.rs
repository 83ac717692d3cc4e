//! Intent routing: before recall, a question is matched against the
//! knowledge base's intents (their example questions) with the engine's own
//! analyzer, BM25 and embedder; a match at or above the intent's threshold
//! is posted to the intent's webhook, whose reply is the answer. No match,
//! no webhook or a failed call: the normal pipeline runs.
//!
//! The match score of one example is calibrated so one threshold means the
//! same for every knowledge base: lexical evidence is the question's BM25
//! score against the example over the example's score against itself
//! (1 = the question carries all of the example's term weight), capped at
//! 1; dense evidence is the cosine of the two question vectors (e5
//! `query:` on both sides, as its model card asks for symmetric tasks).
//! With vectors the score is their mean, without it is the lexical part.
//! An intent's score is its best example's.

use crate::answer::AnswerOutcome;
use crate::emit::EventSink;
use crate::Engine;
use rag_core::{
    FaqId, Filters, Intent, KbSnapshot, Passage, PassageId, PipelineEvent, RetrievalParams, Viewer,
    WebhookCall,
};
use rag_lexical::{Filter, LexicalIndex};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Intent indexes kept (one per distinct intent list and vocabulary).
const CACHED_INDEXES: usize = 64;

/// The example questions of a knowledge base's intents, indexed.
pub(crate) struct IntentIndex {
    lexical: LexicalIndex,
    /// Per example (in passage-id order): its intent and text, and its BM25
    /// score against itself.
    examples: Vec<Example>,
    by_id: HashMap<PassageId, usize>,
    /// Example vectors, in `examples` order, when an embedder is configured.
    vectors: Option<Vec<Vec<f32>>>,
}

struct Example {
    intent: usize,
    text: String,
    self_score: f64,
}

/// The best intent for a question.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IntentMatch {
    pub intent: usize,
    pub score: f64,
    pub example: String,
}

fn example_id(n: usize) -> PassageId {
    PassageId::Faq(FaqId(uuid::Uuid::from_u128(n as u128 + 1)))
}

impl IntentIndex {
    /// Indexes the examples with the knowledge base's analyzer and words
    /// (CPU work: call on a blocking thread).
    fn build(base: &LexicalIndex, analyzer: &rag_text::Analyzer, intents: &[Intent]) -> Self {
        let mut passages = Vec::new();
        let mut examples = Vec::new();
        for (i, intent) in intents.iter().enumerate() {
            for text in &intent.examples {
                passages.push(Passage {
                    id: example_id(examples.len()),
                    title: text.clone(),
                    body: String::new(),
                    tags: Vec::new(),
                    aliases: Vec::new(),
                    doc: None,
                    source: None,
                    span: None,
                    created_at: 0,
                    valid_from: None,
                    valid_until: None,
                    searchable: true,
                    owner: None,
                });
                examples.push(Example {
                    intent: i,
                    text: text.clone(),
                    self_score: 0.0,
                });
            }
        }
        let snapshot = KbSnapshot {
            seq: 0,
            passages,
            synonyms: Vec::new(),
            user_words: base.user_words().to_vec(),
            space: None,
            vectors: Vec::new(),
        };
        let lexical = LexicalIndex::build(analyzer, &snapshot);
        let by_id: HashMap<PassageId, usize> =
            (0..examples.len()).map(|n| (example_id(n), n)).collect();
        let params = RetrievalParams::default();
        let filter = Filter::new(&Filters::default(), 0, &Viewer::Public);
        for (n, e) in examples.iter_mut().enumerate() {
            let q = lexical.analyze_query(&e.text);
            let list = lexical.bm25(&q, by_id.len().max(1), &params.bm25, &filter);
            e.self_score = list
                .hits
                .iter()
                .find(|h| h.id == example_id(n))
                .map_or(0.0, |h| h.score);
        }
        IntentIndex {
            lexical,
            examples,
            by_id,
            vectors: None,
        }
    }

    /// The best intent for `question` (CPU work), with its query vector if
    /// the index has example vectors.
    fn best(&self, question: &str, vector: Option<&[f32]>) -> Option<IntentMatch> {
        let q = self.lexical.analyze_query(question);
        let params = RetrievalParams::default();
        let filter = Filter::new(&Filters::default(), 0, &Viewer::Public);
        let list = self
            .lexical
            .bm25(&q, self.examples.len().max(1), &params.bm25, &filter);
        let mut lexical = vec![0.0; self.examples.len()];
        for h in &list.hits {
            if let Some(&n) = self.by_id.get(&h.id) {
                let own = self.examples[n].self_score;
                lexical[n] = if own > 0.0 {
                    (h.score / own).min(1.0)
                } else {
                    0.0
                };
            }
        }
        let dense = match (&self.vectors, vector) {
            (Some(vs), Some(v)) => Some(
                vs.iter()
                    .map(|e| cosine(e, v).max(0.0))
                    .collect::<Vec<f64>>(),
            ),
            _ => None,
        };
        let mut best: Option<IntentMatch> = None;
        for (n, e) in self.examples.iter().enumerate() {
            let score = match &dense {
                Some(d) => 0.5 * lexical[n] + 0.5 * d[n],
                None => lexical[n],
            };
            if best.as_ref().is_none_or(|b| score > b.score) {
                best = Some(IntentMatch {
                    intent: e.intent,
                    score,
                    example: e.text.clone(),
                });
            }
        }
        best.filter(|b| b.score > 0.0)
    }
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        dot += f64::from(*x) * f64::from(*y);
        na += f64::from(*x) * f64::from(*x);
        nb += f64::from(*y) * f64::from(*y);
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

/// A key for an intent list under a vocabulary and an embedding model.
fn cache_key(intents: &[Intent], base: &LexicalIndex, model: Option<&str>) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for i in intents {
        i.name.hash(&mut h);
        i.examples.hash(&mut h);
    }
    for w in base.user_words() {
        format!("{w:?}").hash(&mut h);
    }
    model.hash(&mut h);
    h.finish()
}

impl Engine {
    /// The intent index of an intent list, built once and cached.
    async fn intent_index(
        &self,
        intents: &[Intent],
        base: &Arc<crate::engine::KbIndex>,
    ) -> Result<Arc<IntentIndex>, String> {
        let embedder = self.embedder();
        let key = cache_key(
            intents,
            &base.lexical,
            embedder.as_ref().map(|e| e.model().model_id()),
        );
        if let Some(ix) = self
            .inner
            .intents
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            return Ok(ix.clone());
        }
        let (b, list, analyzer) = (base.clone(), intents.to_vec(), self.inner.analyzer.clone());
        let mut index =
            tokio::task::spawn_blocking(move || IntentIndex::build(&b.lexical, &analyzer, &list))
                .await
                .map_err(|e| e.to_string())?;
        if let Some(e) = &embedder {
            let texts: Vec<String> = index.examples.iter().map(|x| x.text.clone()).collect();
            index.vectors = Some(e.embed_queries(&texts).await.map_err(|e| e.to_string())?);
        }
        let index = Arc::new(index);
        let mut cache = self.inner.intents.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= CACHED_INDEXES {
            cache.clear();
        }
        cache.insert(key, index.clone());
        Ok(index)
    }

    /// Builds the intent index of a knowledge base's intents in the
    /// background (after they were saved), so the first question does not
    /// wait for the examples to be analysed and embedded.
    pub(crate) fn warm_intents(&self, tenant: &rag_core::TenantId, kb: &rag_core::KnowledgeBase) {
        if kb.settings.intents.is_empty() {
            return;
        }
        let (engine, tenant, kb) = (self.clone(), tenant.clone(), kb.clone());
        tokio::spawn(async move {
            let Ok(index) = engine.index_now(&tenant, &kb).await else {
                return;
            };
            if let Err(e) = engine.intent_index(&kb.settings.intents, &index).await {
                tracing::warn!(kb = %kb.name, error = %e, "intents could not be indexed");
            }
        });
    }

    /// Routes the question to an intent's webhook when one matches. Returns
    /// the webhook's answer (its events emitted), or `None` for the normal
    /// pipeline; a failed call is a warning and a `routed` event.
    pub(crate) async fn route_stage(
        &self,
        run: &mut crate::stages::Run<'_>,
        question: &str,
        language: rag_core::Language,
        emit: &mut EventSink<'_>,
    ) -> Option<AnswerOutcome> {
        let intents = run.kb.settings.intents.clone();
        if intents.is_empty() || !run.request.generate {
            return None;
        }
        let t = Instant::now();
        let index = match self.intent_index(&intents, &run.index).await {
            Ok(ix) => ix,
            Err(e) => {
                run.warnings
                    .push(format!("intents could not be matched: {e}"));
                return None;
            }
        };
        let vector = match (&index.vectors, self.embedder()) {
            (Some(_), Some(e)) => e.embed_query(question).await.ok(),
            _ => None,
        };
        let (ix, q) = (index.clone(), question.to_owned());
        let best = tokio::task::spawn_blocking(move || ix.best(&q, vector.as_deref()))
            .await
            .ok()
            .flatten();
        let Some(best) = best.filter(|b| b.score >= intents[b.intent].threshold) else {
            // The matching's time shows even when no intent matched.
            run.timings.push(rag_core::StageTiming {
                stage: "intents".into(),
                ms: crate::stages::ms(t),
            });
            return None;
        };
        let intent = &intents[best.intent];
        let call = WebhookCall {
            intent: intent.name.clone(),
            question: run.request.query.clone(),
            conversation_id: run.request.conversation_id.clone(),
            kb: run.kb.name.clone(),
            tenant: run.tenant.to_string(),
        };
        let called = Instant::now();
        let reply = match &self.inner.components.webhook {
            Some(w) => {
                w.call(
                    &intent.webhook,
                    &call,
                    Duration::from_millis(intent.timeout_ms),
                    intent.private_ok,
                )
                .await
            }
            None => Err("this server calls no webhooks".to_owned()),
        };
        let reply = reply.and_then(|r| {
            if r.answer.trim().is_empty() {
                Err("the webhook's answer is empty".to_owned())
            } else {
                Ok(r)
            }
        });
        let webhook_ms = crate::stages::ms(called);
        let (answered, error, sources) = match &reply {
            Ok(r) => (true, None, r.sources.clone()),
            Err(e) => (false, Some(rag_core::redact::redact_text(e)), Vec::new()),
        };
        emit.emit(PipelineEvent::Routed {
            intent: intent.name.clone(),
            score: best.score,
            threshold: intent.threshold,
            example: best.example.clone(),
            answered,
            error: error.clone(),
            sources,
            webhook_ms,
        })
        .await;
        run.timings.push(rag_core::StageTiming {
            stage: "routed".into(),
            ms: crate::stages::ms(t),
        });
        let reply = match reply {
            Ok(r) => r,
            Err(_) => {
                run.warnings.push(format!(
                    "intent {} matched but its webhook failed ({}); answered from the knowledge base",
                    intent.name,
                    error.unwrap_or_default()
                ));
                return None;
            }
        };
        let generator = format!("intent:{}", intent.name);
        emit.emit(PipelineEvent::AnswerToken {
            text: reply.answer.clone(),
        })
        .await;
        emit.emit(PipelineEvent::Answered {
            text: reply.answer.clone(),
            generator: generator.clone(),
            model: None,
            language: if language == rag_core::Language::En {
                "en"
            } else {
                "zh"
            }
            .into(),
            kb_miss: false,
            miss_reasons: Vec::new(),
            removed_citations: Vec::new(),
            cited: Vec::new(),
            support: Vec::new(),
            usage: None,
            elapsed_ms: webhook_ms,
        })
        .await;
        Some(AnswerOutcome {
            text: reply.answer,
            generator,
            model: None,
            kb_miss: false,
            cited: Vec::new(),
            usage: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intent(name: &str, examples: &[&str]) -> Intent {
        Intent {
            name: name.into(),
            examples: examples.iter().map(|s| s.to_string()).collect(),
            webhook: "https://tools.example/h".into(),
            threshold: 0.7,
            timeout_ms: 1000,
            private_ok: false,
        }
    }

    fn index(intents: &[Intent]) -> IntentIndex {
        let analyzer = rag_text::Analyzer::new();
        let base = LexicalIndex::build(&analyzer, &KbSnapshot::default());
        IntentIndex::build(&base, &analyzer, intents)
    }

    #[test]
    fn the_best_example_decides_and_scores_are_calibrated() {
        let ix = index(&[
            intent("order_status", &["我的订单到哪了", "查一下物流进度"]),
            intent("refund", &["怎么申请退款"]),
        ]);
        // The example itself scores 1.
        let m = ix.best("我的订单到哪了", None).unwrap();
        assert_eq!((m.intent, m.example.as_str()), (0, "我的订单到哪了"));
        assert!((m.score - 1.0).abs() < 1e-9, "{m:?}");
        let m = ix.best("怎么申请退款", None).unwrap();
        assert_eq!(m.intent, 1);
        // Part of an example's terms: a lower score, the same intent.
        let part = ix.best("物流", None).unwrap();
        assert_eq!(part.intent, 0);
        assert!(part.score > 0.0 && part.score < 0.7, "{part:?}");
        // Nothing shared: no match.
        assert_eq!(ix.best("营业时间", None), None);
    }
}
