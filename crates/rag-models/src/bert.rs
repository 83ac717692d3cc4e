//! Bring-your-own model: any Hugging Face BERT-family directory
//! (config.json, model.safetensors, tokenizer.json, sentence-transformers
//! pooling files), run in-process by `rag-bert`.

use crate::error::ModelError;
use async_trait::async_trait;
use rag_bert::{BertModel, Bf16Tier, Int8Tier, Precision, Tiers};
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
    /// Loads the model directory with its linear layers in `precision`
    /// (`embedder.bert_precision`), on the kernels `kernel`
    /// (`embedder.kernel`, shared with e5) allows: "auto" the fastest this
    /// CPU has, "amx" AMX for int8, "avx512" AVX-512 VNNI and BF16,
    /// "avx2" and "portable" the portable kernels. A kernel the CPU lacks
    /// is an error. The model id names the directory and the first 12 hex
    /// digits of the weights' sha256, so vectors of other weights are never
    /// mixed with these; the precisions keep a cosine of at least 0.999 to
    /// the f32 vectors (measured on all-MiniLM-L6-v2), so they share it.
    pub fn load(
        dir: &Path,
        threads: usize,
        precision: Precision,
        kernel: rag_e5::Kernel,
    ) -> Result<Self, ModelError> {
        let tiers = tiers_for(kernel);
        let model = BertModel::load(dir)
            .and_then(|m| m.with_precision_on(precision, tiers))
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

    /// The precision of the linear layers.
    pub fn precision(&self) -> Precision {
        self.model.precision()
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

/// The packed precisions' kernels that the `embedder.kernel` setting
/// allows (AMX-BF16 is not implemented: "amx" runs bf16 on AVX-512).
fn tiers_for(kernel: rag_e5::Kernel) -> Tiers {
    use rag_e5::Kernel;
    match kernel {
        Kernel::Auto => Tiers::best(),
        Kernel::Amx => Tiers {
            int8: Int8Tier::Amx,
            bf16: Bf16Tier::best(),
        },
        Kernel::Avx512 => Tiers {
            int8: Int8Tier::Avx512,
            bf16: Bf16Tier::Avx512,
        },
        Kernel::Avx2 | Kernel::Portable => Tiers::portable(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_settings_map_to_packed_tiers() {
        assert_eq!(tiers_for(rag_e5::Kernel::Auto), Tiers::best());
        assert_eq!(tiers_for(rag_e5::Kernel::Portable), Tiers::portable());
        assert_eq!(tiers_for(rag_e5::Kernel::Avx2), Tiers::portable());
        assert_eq!(tiers_for(rag_e5::Kernel::Avx512).int8, Int8Tier::Avx512);
        assert_eq!(tiers_for(rag_e5::Kernel::Amx).int8, Int8Tier::Amx);
    }
}
