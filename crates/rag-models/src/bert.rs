//! Bring-your-own model: any Hugging Face BERT-family directory
//! (config.json, model.safetensors, tokenizer.json, sentence-transformers
//! pooling files), run in-process by `rag-bert`.

use crate::error::ModelError;
use async_trait::async_trait;
use rag_bert::BertModel;
use rag_core::{CoreError, Embedder};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::Arc;

/// A BERT-family sentence embedder loaded from a directory.
pub struct BertEmbedder {
    model: Arc<BertModel>,
    model_id: String,
    threads: usize,
}

impl std::fmt::Debug for BertEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BertEmbedder")
            .field("model_id", &self.model_id)
            .finish()
    }
}

impl BertEmbedder {
    /// Loads the model directory. The model id names the directory and the
    /// first 12 hex digits of the weights' sha256, so vectors of other weights
    /// are never mixed with these.
    pub fn load(dir: &Path, threads: usize) -> Result<Self, ModelError> {
        let model = BertModel::load(dir)
            .map_err(|e| ModelError::Config(format!("model directory {}: {e}", dir.display())))?;
        let weights = std::fs::read(dir.join("model.safetensors")).map_err(|e| {
            ModelError::Config(format!(
                "cannot read {}/model.safetensors: {e}",
                dir.display()
            ))
        })?;
        let digest = Sha256::digest(&weights);
        let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| "model".into());
        Ok(BertEmbedder {
            model: Arc::new(model),
            model_id: format!("bert:{name}:{hex}"),
            threads: threads.max(1),
        })
    }

    fn failed(e: tokio::task::JoinError) -> CoreError {
        CoreError::Component {
            component: "bert embedder".into(),
            message: e.to_string(),
        }
    }
}

#[async_trait]
impl Embedder for BertEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dimensions(&self) -> usize {
        self.model.dimensions()
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, CoreError> {
        let (model, text) = (self.model.clone(), text.to_owned());
        let e = tokio::task::spawn_blocking(move || model.embed(&text))
            .await
            .map_err(Self::failed)?;
        if e.truncated() {
            tracing::debug!(
                tokens = e.tokens,
                untruncated = e.untruncated_tokens,
                "query truncated to the model's maximum length"
            );
        }
        Ok(e.vector)
    }

    fn count_tokens(&self, text: &str) -> Option<usize> {
        // [CLS] and [SEP] are not the text's.
        Some(self.model.encode(text).untruncated_len.saturating_sub(2))
    }

    async fn embed_documents(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, CoreError> {
        let (model, threads) = (self.model.clone(), self.threads);
        let texts: Vec<String> = texts.iter().map(|t| (*t).to_owned()).collect();
        let out = tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            model.embed_batch_parallel(&refs, threads)
        })
        .await
        .map_err(Self::failed)?;
        let truncated = out.iter().filter(|e| e.truncated()).count();
        if truncated > 0 {
            tracing::warn!(truncated, "passages longer than the model's maximum length were truncated (chunk them smaller)");
        }
        Ok(out.into_iter().map(|e| e.vector).collect())
    }
}
