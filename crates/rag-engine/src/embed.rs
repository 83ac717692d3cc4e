//! Embedding with a persistent cache: only new or changed texts are embedded.

use rag_core::{CoreError, Embedder, EmbeddingCache};
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// Bytes as lowercase hex.
pub(crate) fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// sha256 of bytes, as lowercase hex.
pub(crate) fn hex_sha256(bytes: &[u8]) -> String {
    to_hex(&Sha256::digest(bytes))
}

pub use rag_core::text_hash;

/// An embedder in front of a cache.
#[derive(Clone)]
pub struct CachedEmbedder {
    inner: Arc<dyn Embedder>,
    cache: Option<Arc<dyn EmbeddingCache>>,
}

/// How many texts an embedding run took from the cache and computed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EmbedStats {
    /// Served from the cache.
    pub cached: usize,
    /// Computed by the model.
    pub computed: usize,
}

impl EmbedStats {
    /// The counts of per-text cache marks.
    pub fn of(cached: &[bool]) -> Self {
        let hits = cached.iter().filter(|c| **c).count();
        EmbedStats {
            cached: hits,
            computed: cached.len() - hits,
        }
    }
}

impl CachedEmbedder {
    /// Wraps `inner`; without a cache every text is computed.
    pub fn new(inner: Arc<dyn Embedder>, cache: Option<Arc<dyn EmbeddingCache>>) -> Self {
        CachedEmbedder { inner, cache }
    }

    /// The model.
    pub fn model(&self) -> &Arc<dyn Embedder> {
        &self.inner
    }

    /// Embeds passages, taking what it can from the cache. `batch` texts go to
    /// the model at a time, and each batch is cached as soon as it is done, so
    /// an interrupted run keeps what it computed.
    pub async fn embed_documents(
        &self,
        texts: &[String],
        batch: usize,
    ) -> Result<(Vec<Vec<f32>>, EmbedStats), CoreError> {
        let (vectors, cached) = self.embed(texts, batch, false).await?;
        Ok((vectors, EmbedStats::of(&cached)))
    }

    /// Embeds groups of passage texts in one run (`batch` texts to the
    /// model at a time) and returns each group's vectors, in order.
    pub(crate) async fn embed_groups(
        &self,
        groups: &[Vec<String>],
        batch: usize,
    ) -> Result<Vec<Vec<Vec<f32>>>, CoreError> {
        let texts: Vec<String> = groups.iter().flatten().cloned().collect();
        if texts.is_empty() {
            return Ok(vec![Vec::new(); groups.len()]);
        }
        let (vectors, _) = self.embed_documents(&texts, batch).await?;
        let mut vectors = vectors.into_iter();
        Ok(groups
            .iter()
            .map(|g| vectors.by_ref().take(g.len()).collect())
            .collect())
    }

    /// [`CachedEmbedder::embed_documents`] with, per text, whether its
    /// vector came from the cache (bulk ingest reports each file's share).
    pub async fn embed_documents_marked(
        &self,
        texts: &[String],
        batch: usize,
    ) -> Result<(Vec<Vec<f32>>, Vec<bool>), CoreError> {
        self.embed(texts, batch, false).await
    }

    /// Embeds a query (queries are cached under their own keys).
    /// Several questions embedded as queries (symmetric matching), cached.
    pub async fn embed_queries(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, CoreError> {
        Ok(self.embed(texts, 32, true).await?.0)
    }

    pub async fn embed_query(&self, text: &str) -> Result<Vec<f32>, CoreError> {
        let (mut v, _) = self.embed(&[text.to_owned()], 1, true).await?;
        v.pop().ok_or_else(|| CoreError::Component {
            component: "embedder".into(),
            message: "no vector".into(),
        })
    }

    async fn embed(
        &self,
        texts: &[String],
        batch: usize,
        query: bool,
    ) -> Result<(Vec<Vec<f32>>, Vec<bool>), CoreError> {
        let model = self.inner.model_id().to_owned();
        let keys: Vec<String> = texts
            .iter()
            .map(|t| text_hash(&format!("{}{t}", if query { "query\u{1}" } else { "" })))
            .collect();
        let mut out: Vec<Option<Vec<f32>>> = match &self.cache {
            Some(c) => c.get(&model, &keys).await?,
            None => vec![None; texts.len()],
        };
        let cached: Vec<bool> = out.iter().map(Option::is_some).collect();
        let missing: Vec<usize> = (0..texts.len()).filter(|i| !cached[*i]).collect();
        for group in missing.chunks(batch.max(1)) {
            let refs: Vec<&str> = group.iter().map(|i| texts[*i].as_str()).collect();
            let vectors = if query {
                let mut v = Vec::with_capacity(refs.len());
                for r in &refs {
                    v.push(self.inner.embed_query(r).await?);
                }
                v
            } else {
                self.inner.embed_documents(&refs).await?
            };
            if vectors.len() != group.len() {
                return Err(CoreError::Component {
                    component: "embedder".into(),
                    message: format!("{} vectors for {} texts", vectors.len(), group.len()),
                });
            }
            if let Some(c) = &self.cache {
                let items: Vec<(String, Vec<f32>)> = group
                    .iter()
                    .zip(&vectors)
                    .map(|(i, v)| (keys[*i].clone(), v.clone()))
                    .collect();
                c.put(&model, &items).await?;
            }
            for (i, v) in group.iter().zip(vectors) {
                out[*i] = Some(v);
            }
        }
        Ok((
            out.into_iter().map(|v| v.unwrap_or_default()).collect(),
            cached,
        ))
    }
}
