//! An OpenAI-compatible embeddings client.

use crate::error::ModelError;
use async_trait::async_trait;
use rag_core::{CoreError, Embedder};
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;
use std::time::Duration;

/// Configuration of an OpenAI-compatible embeddings endpoint.
#[derive(Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct OpenAiEmbedderConfig {
    /// Base URL including the version prefix, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// API key, sent as a bearer token when set.
    pub api_key: Option<String>,
    /// Model name for documents (and queries unless `query_model` is set).
    pub model: String,
    /// Model name for queries, for providers that separate them.
    pub query_model: Option<String>,
    /// Prefix prepended to queries (e.g. "query: " for e5 models served raw).
    pub query_prefix: String,
    /// Prefix prepended to documents.
    pub document_prefix: String,
    /// Expected vector length; learnt from the first response when `None`.
    pub dimensions: Option<usize>,
    /// Texts per request.
    pub batch_size: usize,
    /// Timeout of one request, in milliseconds.
    pub timeout_ms: u64,
    /// Retries after the first attempt for retryable failures.
    pub max_retries: u32,
    /// First backoff, in milliseconds; doubles with every retry, capped at 5 s.
    pub backoff_ms: u64,
    /// Longest `Retry-After` the client waits; a longer one ends the call with the 429.
    pub max_retry_wait_ms: u64,
}

impl Default for OpenAiEmbedderConfig {
    fn default() -> Self {
        OpenAiEmbedderConfig {
            base_url: "https://api.openai.com/v1".into(),
            api_key: None,
            model: "text-embedding-3-small".into(),
            query_model: None,
            query_prefix: String::new(),
            document_prefix: String::new(),
            dimensions: None,
            batch_size: 64,
            timeout_ms: 30_000,
            max_retries: 3,
            backoff_ms: 200,
            max_retry_wait_ms: 10_000,
        }
    }
}

impl std::fmt::Debug for OpenAiEmbedderConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiEmbedderConfig")
            .field("base_url", &rag_core::redact::redact_url(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("query_model", &self.query_model)
            .field("batch_size", &self.batch_size)
            .field("timeout_ms", &self.timeout_ms)
            .field("max_retries", &self.max_retries)
            .finish()
    }
}

/// The client.
#[derive(Debug)]
pub struct OpenAiEmbedder {
    config: OpenAiEmbedderConfig,
    retry: crate::http::RetryPolicy,
    client: reqwest::Client,
    url: String,
    model_id: String,
    dimensions: OnceLock<usize>,
}

#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    input: &'a [String],
    encoding_format: &'static str,
}

#[derive(Deserialize)]
struct Response {
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    embedding: Vec<f32>,
    #[serde(default)]
    index: Option<usize>,
}

enum Attempt {
    Done(Vec<Vec<f32>>),
    Retry {
        error: ModelError,
        after: Option<Duration>,
    },
    Fail(ModelError),
}

impl OpenAiEmbedder {
    /// A client for `config` (validated here).
    pub fn new(config: OpenAiEmbedderConfig) -> Result<Self, ModelError> {
        if !(config.base_url.starts_with("http://") || config.base_url.starts_with("https://")) {
            return Err(ModelError::Config(format!(
                "base_url {:?} must start with http:// or https://",
                rag_core::redact::redact_url(&config.base_url)
            )));
        }
        if config.batch_size == 0 || config.batch_size > 2048 {
            return Err(ModelError::Config("batch_size must be in 1..=2048".into()));
        }
        if config.timeout_ms == 0 {
            return Err(ModelError::Config("timeout_ms must be positive".into()));
        }
        if config.model.trim().is_empty() {
            return Err(ModelError::Config("model must be named".into()));
        }
        let client = reqwest::Client::builder()
            .timeout(Duration::from_millis(config.timeout_ms))
            .connect_timeout(Duration::from_millis(config.timeout_ms.min(10_000)))
            .build()
            .map_err(|e| ModelError::Config(e.to_string()))?;
        let url = format!("{}/embeddings", config.base_url.trim_end_matches('/'));
        let model_id = format!(
            "openai-compatible:{}@{}",
            config.model,
            rag_core::redact::redact_url(config.base_url.trim_end_matches('/'))
        );
        let dimensions = OnceLock::new();
        if let Some(d) = config.dimensions {
            let _ = dimensions.set(d);
        }
        let retry = crate::http::RetryPolicy {
            max_retries: config.max_retries,
            backoff_ms: config.backoff_ms,
            max_backoff_ms: 5_000,
            max_wait_ms: config.max_retry_wait_ms,
        };
        Ok(OpenAiEmbedder {
            retry,
            config,
            client,
            url,
            model_id,
            dimensions,
        })
    }

    /// Embeds texts (queries when `query`), in batches, in input order.
    pub async fn embed_batch(
        &self,
        texts: &[&str],
        query: bool,
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        let (model, prefix) = if query {
            (
                self.config
                    .query_model
                    .as_deref()
                    .unwrap_or(&self.config.model),
                self.config.query_prefix.as_str(),
            )
        } else {
            (
                self.config.model.as_str(),
                self.config.document_prefix.as_str(),
            )
        };
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.config.batch_size) {
            let input: Vec<String> = batch.iter().map(|t| format!("{prefix}{t}")).collect();
            let vectors = self.request(model, &input).await?;
            for v in &vectors {
                let expected = *self.dimensions.get_or_init(|| v.len());
                if v.len() != expected {
                    return Err(ModelError::WrongDimension {
                        expected,
                        got: v.len(),
                    });
                }
            }
            out.extend(vectors);
        }
        Ok(out)
    }

    async fn request(&self, model: &str, input: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            match self.attempt(model, input, attempt).await {
                Attempt::Done(v) => return Ok(v),
                Attempt::Fail(e) => return Err(e),
                Attempt::Retry { error, after } => match self.retry.decide(attempt, after) {
                    crate::http::Decision::GiveUp => return Err(error),
                    crate::http::Decision::Wait(wait) => {
                        tracing::warn!(url = %self.url, attempt, wait_ms = wait.as_millis() as u64, error = %error, "embedding request failed; retrying");
                        tokio::time::sleep(wait).await;
                    }
                },
            }
        }
    }

    async fn attempt(&self, model: &str, input: &[String], attempt: u32) -> Attempt {
        let mut req = self.client.post(&self.url).json(&Request {
            model,
            input,
            encoding_format: "float",
        });
        if let Some(key) = self.config.api_key.as_deref().filter(|k| !k.is_empty()) {
            req = req.bearer_auth(key);
        }
        let response = match req.send().await {
            Ok(r) => r,
            Err(e) if e.is_timeout() => {
                return Attempt::Retry {
                    error: ModelError::Timeout {
                        url: self.url.clone(),
                        timeout_ms: self.config.timeout_ms,
                    },
                    after: None,
                }
            }
            Err(e) => {
                return Attempt::Retry {
                    error: ModelError::Connect {
                        url: self.url.clone(),
                        detail: root_cause(&e),
                    },
                    after: None,
                }
            }
        };
        let status = response.status().as_u16();
        let retry_after =
            crate::http::retry_after(response.headers(), std::time::SystemTime::now());
        let class = crate::http::classify(status);
        if class == crate::http::StatusClass::Unauthorized {
            return Attempt::Fail(ModelError::Unauthorized {
                url: self.url.clone(),
                status,
            });
        }
        if class != crate::http::StatusClass::Success {
            let body: String = response
                .text()
                .await
                .unwrap_or_default()
                .chars()
                .take(300)
                .collect();
            let error = ModelError::Http {
                url: self.url.clone(),
                status,
                attempts: attempt,
                body,
            };
            return if class == crate::http::StatusClass::Retryable {
                Attempt::Retry {
                    error,
                    after: retry_after,
                }
            } else {
                Attempt::Fail(error)
            };
        }
        let parsed: Response = match response.json().await {
            Ok(p) => p,
            Err(e) if e.is_timeout() => {
                return Attempt::Retry {
                    error: ModelError::Timeout {
                        url: self.url.clone(),
                        timeout_ms: self.config.timeout_ms,
                    },
                    after: None,
                }
            }
            Err(e) => {
                return Attempt::Fail(ModelError::BadResponse {
                    url: self.url.clone(),
                    detail: root_cause(&e),
                })
            }
        };
        if parsed.data.len() != input.len() {
            return Attempt::Fail(ModelError::BadResponse {
                url: self.url.clone(),
                detail: format!("{} vectors for {} inputs", parsed.data.len(), input.len()),
            });
        }
        let mut items = parsed.data;
        if items.iter().all(|i| i.index.is_some()) {
            items.sort_by_key(|i| i.index);
        }
        let vectors: Vec<Vec<f32>> = items.into_iter().map(|i| i.embedding).collect();
        if vectors
            .iter()
            .any(|v| v.is_empty() || v.iter().any(|x| !x.is_finite()))
        {
            return Attempt::Fail(ModelError::BadResponse {
                url: self.url.clone(),
                detail: "empty or non-finite vector".into(),
            });
        }
        Attempt::Done(vectors)
    }
}

fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        msg = format!("{msg}: {s}");
        source = s.source();
    }
    msg
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn dimensions(&self) -> usize {
        self.dimensions.get().copied().unwrap_or(0)
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, CoreError> {
        let mut v = self.embed_batch(&[text], true).await?;
        v.pop().ok_or_else(|| {
            ModelError::BadResponse {
                url: self.url.clone(),
                detail: "no vector".into(),
            }
            .into()
        })
    }

    async fn embed_documents(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, CoreError> {
        Ok(self.embed_batch(texts, false).await?)
    }
}
