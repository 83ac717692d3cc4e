//! [`Engine::reembed`]: every searchable passage given a current vector
//! (and, for a document passage of several sentences, its sentence
//! vectors) from the configured embedder.

use crate::embed::{text_hash, CachedEmbedder};
use crate::engine::Engine;
use crate::second::SecondSource;
use crate::sentences::{embed_sentences, sentence_texts, SentenceSource};
use rag_core::{
    CoreError, EmbeddingSpace, KbId, Passage, PassageId, PassageVector, TenantId, UserError,
    WriteOp,
};

/// Passages per page read and per write.
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
    /// Passages whose current vector had no vectors of the second
    /// (English) embedder yet and got them (`second.rs`).
    pub second_added: usize,
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
    /// keeps its progress. `progress` hears (passages looked at, passages
    /// of the knowledge base).
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
        let mut report = ReembedReport::default();
        let model_id = embedder.model().model_id().to_owned();
        let switched = self
            .store()
            .embedding_space(tenant, kb.id)
            .await?
            .is_some_and(|s| s.model_id != model_id);
        if switched {
            self.store()
                .apply(tenant, kb.id, vec![WriteOp::ClearVectors])
                .await?;
            report.switched_model = true;
        }
        // The passages are read a page at a time, each page a read of its
        // own, so memory holds one page whatever the knowledge base's size
        // and no read stays open across the writes.
        let counts = self.store().kb_counts(tenant, kb.id).await?;
        let total = counts.chunks + counts.faqs;
        let mut seen = 0;
        progress(0, total);
        let mut after = None;
        loop {
            let page = self
                .store()
                .passages_page(tenant, kb.id, after.as_ref(), BATCH)
                .await?;
            seen += page.passages.len();
            self.reembed_page(
                tenant,
                kb.id,
                &embedder,
                &model_id,
                page.passages,
                &mut report,
            )
            .await?;
            progress(seen.min(total), total);
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        Ok(report)
    }

    /// One page of [`Engine::reembed`]: its passages without a current
    /// vector embedded and written (one atomic write), then sentence
    /// vectors for current ones stored without them.
    async fn reembed_page(
        &self,
        tenant: &TenantId,
        kb: KbId,
        embedder: &CachedEmbedder,
        model_id: &str,
        passages: Vec<(Passage, Option<String>)>,
        report: &mut ReembedReport,
    ) -> Result<(), CoreError> {
        let sentences_on = self.config().sentence_vectors;
        let (mut todo, mut kept, mut current) = (Vec::new(), Vec::new(), Vec::new());
        for (p, stored) in passages.iter().filter(|(p, _)| p.searchable) {
            let text = p.embedding_text();
            let hash = text_hash(&text);
            if stored.as_ref() != Some(&hash) {
                todo.push((p, hash, text));
                continue;
            }
            current.push(SecondSource::passage(p, hash.clone()));
            if sentences_on
                && matches!(p.id, PassageId::Chunk(_))
                && !sentence_texts(&p.title, &p.body).is_empty()
            {
                kept.push(sentence_source(p, hash));
            }
        }
        report.needed += todo.len();
        if !todo.is_empty() {
            let texts: Vec<String> = todo.iter().map(|(_, _, t)| t.clone()).collect();
            let (vectors, stats) = embedder
                .embed_documents(&texts, self.config().embed_batch)
                .await?;
            report.cached += stats.cached;
            report.computed += stats.computed;
            let dims = vectors.first().map_or(0, Vec::len);
            let space = EmbeddingSpace {
                model_id: model_id.to_owned(),
                dims,
            };
            let vectors = todo
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
                let sources: Vec<SentenceSource> = todo
                    .iter()
                    .filter(|(p, _, _)| matches!(p.id, PassageId::Chunk(_)))
                    .map(|(p, hash, _)| sentence_source(p, hash.clone()))
                    .collect();
                let batch = self.config().embed_batch;
                ops.extend(embed_sentences(embedder, &sources, batch).await?);
            }
            let second: Vec<SecondSource> = todo
                .iter()
                .map(|(p, hash, _)| SecondSource::passage(p, hash.clone()))
                .collect();
            ops.extend(self.second_ops(&second).await?);
            self.store().apply(tenant, kb, ops).await?;
        }
        // Current vectors stored without the second embedder's.
        if let (Some(second), false) = (self.second_embedder(), current.is_empty()) {
            let ids: Vec<PassageId> = current.iter().map(|s| s.id).collect();
            let model = second.model().model_id().to_owned();
            let have = self
                .store()
                .second_vectors(tenant, kb, &model, &ids)
                .await?;
            let missing: Vec<SecondSource> = current
                .into_iter()
                .filter(|s| !have.iter().any(|(id, _)| *id == s.id))
                .collect();
            if let Some(op) = self.second_ops(&missing).await? {
                if let WriteOp::PutSecondVectors { items, .. } = &op {
                    report.second_added += items.len();
                }
                self.store().apply(tenant, kb, vec![op]).await?;
            }
        }
        // Current vectors stored without their sentences.
        if !kept.is_empty() {
            let ids: Vec<PassageId> = kept.iter().map(|s| s.id).collect();
            let have = self.store().sentence_vectors(tenant, kb, &ids).await?;
            let missing: Vec<SentenceSource> = kept
                .into_iter()
                .filter(|s| !have.iter().any(|(id, _)| *id == s.id))
                .collect();
            let batch = self.config().embed_batch;
            if let Some(op) = embed_sentences(embedder, &missing, batch).await? {
                report.sentences_added += missing.len();
                self.store().apply(tenant, kb, vec![op]).await?;
            }
        }
        Ok(())
    }
}
