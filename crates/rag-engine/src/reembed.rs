//! [`Engine::reembed`]: every searchable passage given a current vector
//! (and, for a document passage of several sentences, its sentence
//! vectors) from the configured embedder.

use crate::embed::text_hash;
use crate::engine::Engine;
use crate::sentences::{embed_sentences, sentence_texts, SentenceSource};
use rag_core::{
    CoreError, EmbeddingSpace, Passage, PassageId, PassageVector, TenantId, UserError, WriteOp,
};

/// Passages per write.
const BATCH: usize = 256;

/// What a re-embedding run did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReembedReport {
    /// Passages that needed a vector.
    pub needed: usize,
    /// Of those, served by the cache.
    pub cached: usize,
    /// Of those, computed by the model.
    pub computed: usize,
    /// Whether old vectors of another model were dropped first.
    pub switched_model: bool,
    /// Passages whose current vector had no sentence vectors yet (stored
    /// before they existed) and got them.
    pub sentences_added: usize,
}

fn sentence_source(p: &Passage, hash: String) -> SentenceSource {
    SentenceSource {
        id: p.id,
        text_hash: hash,
        title: p.title.clone(),
        body: p.body.clone(),
    }
}

impl Engine {
    /// Gives every searchable passage of a knowledge base a current vector
    /// from the configured embedder: passages without one, or whose text
    /// changed, are embedded (through the cache); when the knowledge base's
    /// vectors come from another model they are dropped first. Document
    /// passages of several sentences get sentence vectors beside (when
    /// they are on), also those whose vector was current but stored
    /// without them. Writes in batches, each atomic, so an interrupted run
    /// keeps its progress.
    pub async fn reembed(
        &self,
        tenant: &TenantId,
        kb_name: &str,
        mut progress: impl FnMut(usize, usize) + Send,
    ) -> Result<ReembedReport, CoreError> {
        let embedder = self.embedder().ok_or_else(|| UserError::PathUnavailable {
            path: "dense".into(),
            reason: "no embedder is configured".into(),
        })?;
        let kb = self.kb(tenant, kb_name).await?;
        let snapshot = self.store().snapshot(tenant, kb.id).await?;
        let mut report = ReembedReport::default();
        let model_id = embedder.model().model_id().to_owned();
        let switched = snapshot
            .space
            .as_ref()
            .is_some_and(|s| s.model_id != model_id);
        if switched {
            self.store()
                .apply(tenant, kb.id, vec![WriteOp::ClearVectors])
                .await?;
            report.switched_model = true;
        }
        let current: std::collections::HashMap<_, _> = if switched {
            Default::default()
        } else {
            snapshot
                .vectors
                .iter()
                .map(|v| (v.id, v.text_hash.clone()))
                .collect()
        };
        let sentences_on = self.config().sentence_vectors;
        let (mut todo, mut kept) = (Vec::new(), Vec::new());
        for p in snapshot.passages.iter().filter(|p| p.searchable) {
            let text = p.embedding_text();
            let hash = text_hash(&text);
            if current.get(&p.id) != Some(&hash) {
                todo.push((p, hash, text));
            } else if sentences_on
                && matches!(p.id, PassageId::Chunk(_))
                && !sentence_texts(&p.title, &p.body).is_empty()
            {
                kept.push(sentence_source(p, hash));
            }
        }
        report.needed = todo.len();
        let mut done = 0;
        progress(0, todo.len());
        for part in todo.chunks(BATCH) {
            let texts: Vec<String> = part.iter().map(|(_, _, t)| t.clone()).collect();
            let (vectors, stats) = embedder
                .embed_documents(&texts, self.config().embed_batch)
                .await?;
            report.cached += stats.cached;
            report.computed += stats.computed;
            let dims = vectors.first().map_or(0, Vec::len);
            let space = EmbeddingSpace {
                model_id: model_id.clone(),
                dims,
            };
            let vectors = part
                .iter()
                .zip(vectors)
                .map(|((p, hash, _), vector)| PassageVector {
                    id: p.id,
                    text_hash: hash.clone(),
                    vector,
                })
                .collect();
            let mut ops = vec![WriteOp::PutVectors { space, vectors }];
            if sentences_on {
                let sources: Vec<SentenceSource> = part
                    .iter()
                    .filter(|(p, _, _)| matches!(p.id, PassageId::Chunk(_)))
                    .map(|(p, hash, _)| sentence_source(p, hash.clone()))
                    .collect();
                let batch = self.config().embed_batch;
                ops.extend(embed_sentences(&embedder, &sources, batch).await?);
            }
            self.store().apply(tenant, kb.id, ops).await?;
            done += part.len();
            progress(done, todo.len());
        }
        // Current vectors stored without their sentences.
        for part in kept.chunks(BATCH) {
            let ids: Vec<PassageId> = part.iter().map(|s| s.id).collect();
            let have = self.store().sentence_vectors(tenant, kb.id, &ids).await?;
            let missing: Vec<SentenceSource> = part
                .iter()
                .filter(|s| !have.iter().any(|(id, _)| *id == s.id))
                .cloned()
                .collect();
            let batch = self.config().embed_batch;
            if let Some(op) = embed_sentences(&embedder, &missing, batch).await? {
                report.sentences_added += missing.len();
                self.store().apply(tenant, kb.id, vec![op]).await?;
            }
        }
        Ok(report)
    }
}
