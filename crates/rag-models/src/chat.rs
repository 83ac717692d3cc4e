//! An OpenAI-compatible chat-completions client with SSE streaming,
//! implementing [`rag_core::Generator`].
//!
//! The request asks for `stream: true` and `stream_options.include_usage`, so
//! providers that support it (OpenAI, OpenRouter, vLLM…) report token usage
//! in the last chunk; it becomes [`GenEvent::Usage`] with the model name the
//! provider reports. Until the response starts (status and headers),
//! connection errors, 429 and 5xx are retried with exponential backoff,
//! honouring `Retry-After` up to `max_retry_wait_ms`; once tokens flow
//! nothing is retried. Three timeouts bound a call: `connect_timeout_ms`
//! (TCP/TLS), `first_token_timeout_ms` (from sending the request that gets
//! answered to the first piece of answer text; a request whose response does
//! not start within it is not retried) and `idle_timeout_ms` (between data events afterwards). A stream that ends
//! without `[DONE]` or a finish reason, an SSE data line that is not JSON,
//! and an error object inside the stream each end the stream with a typed
//! [`ModelError`]. The API key is sent as a bearer token only; it is
//! redacted from `Debug` and never appears in errors or logs.

use crate::error::ModelError;
use async_trait::async_trait;
use futures::stream::BoxStream;
use futures::StreamExt;
use rag_core::{ChatMessage, CoreError, GenEvent, GenerateRequest, Generator};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// OpenRouter's OpenAI-compatible base URL.
pub const OPENROUTER_BASE_URL: &str = "https://openrouter.ai/api/v1";
/// The model used with OpenRouter when none is configured.
pub const OPENROUTER_DEFAULT_MODEL: &str = "openai/gpt-4o-mini";

/// Configuration of an OpenAI-compatible chat endpoint.
#[derive(Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ChatConfig {
    /// Base URL including the version prefix; `/chat/completions` is appended.
    pub base_url: String,
    /// API key, sent as a bearer token when set.
    pub api_key: Option<String>,
    /// Model name.
    pub model: String,
    /// Sampling temperature.
    pub temperature: f32,
    /// Maximum completion tokens.
    pub max_tokens: u32,
    /// TCP/TLS connect timeout, in milliseconds.
    pub connect_timeout_ms: u64,
    /// From sending the request to the first answer text, in milliseconds.
    pub first_token_timeout_ms: u64,
    /// Longest silence between data events once the answer flows, in milliseconds.
    pub idle_timeout_ms: u64,
    /// Retries after the first attempt (before any token), for retryable failures.
    pub max_retries: u32,
    /// First backoff, in milliseconds; doubles with every retry, capped at 5 s.
    pub backoff_ms: u64,
    /// Longest `Retry-After` the client waits; a longer one ends the call with the 429.
    pub max_retry_wait_ms: u64,
}

impl Default for ChatConfig {
    fn default() -> Self {
        ChatConfig {
            base_url: "https://api.openai.com/v1".into(),
            api_key: None,
            model: "gpt-4o-mini".into(),
            temperature: 0.2,
            max_tokens: 800,
            connect_timeout_ms: 5_000,
            first_token_timeout_ms: 30_000,
            idle_timeout_ms: 30_000,
            max_retries: 2,
            backoff_ms: 500,
            max_retry_wait_ms: 10_000,
        }
    }
}

impl ChatConfig {
    /// OpenRouter with `api_key` (the value of `OPENROUTER_API_KEY`) and its default model.
    pub fn openrouter(api_key: impl Into<String>) -> Self {
        ChatConfig {
            base_url: OPENROUTER_BASE_URL.into(),
            api_key: Some(api_key.into()),
            model: OPENROUTER_DEFAULT_MODEL.into(),
            ..ChatConfig::default()
        }
    }
}

impl std::fmt::Debug for ChatConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatConfig")
            .field("base_url", &rag_core::redact::redact_url(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("temperature", &self.temperature)
            .field("max_tokens", &self.max_tokens)
            .field("connect_timeout_ms", &self.connect_timeout_ms)
            .field("first_token_timeout_ms", &self.first_token_timeout_ms)
            .field("idle_timeout_ms", &self.idle_timeout_ms)
            .field("max_retries", &self.max_retries)
            .finish()
    }
}

/// Token usage of one completion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatUsage {
    /// The model that answered.
    pub model: String,
    /// Prompt tokens.
    pub prompt: u32,
    /// Completion tokens.
    pub completion: u32,
}

/// A whole completion, collected from the stream.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatCompletion {
    /// The answer text.
    pub text: String,
    /// Usage, when the provider reported it.
    pub usage: Option<ChatUsage>,
    /// Milliseconds from the request to the first answer text.
    pub first_token_ms: Option<f64>,
    /// Milliseconds from the request to the end.
    pub total_ms: f64,
}

/// The client.
#[derive(Debug, Clone)]
pub struct OpenAiChat {
    config: ChatConfig,
    retry: crate::http::RetryPolicy,
    client: reqwest::Client,
    url: String,
    name: String,
}

#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    messages: &'a [ChatMessage],
    temperature: f32,
    max_tokens: u32,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<ResponseFormat>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// `{"type": "json_object"}`: OpenAI's JSON mode.
#[derive(Serialize)]
struct ResponseFormat {
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: u32,
    #[serde(default)]
    completion_tokens: u32,
}

enum Attempt {
    Started(reqwest::Response, Instant),
    Retry {
        error: ModelError,
        after: Option<Duration>,
    },
    Fail(ModelError),
}

impl OpenAiChat {
    /// A client for `config` (validated here).
    pub fn new(config: ChatConfig) -> Result<Self, ModelError> {
        if !(config.base_url.starts_with("http://") || config.base_url.starts_with("https://")) {
            return Err(ModelError::Config(format!(
                "base_url {:?} must start with http:// or https://",
                rag_core::redact::redact_url(&config.base_url)
            )));
        }
        if config.model.trim().is_empty() {
            return Err(ModelError::Config("model must be named".into()));
        }
        if config.connect_timeout_ms == 0
            || config.first_token_timeout_ms == 0
            || config.idle_timeout_ms == 0
        {
            return Err(ModelError::Config("timeouts must be positive".into()));
        }
        if !(0.0..=2.0).contains(&config.temperature) {
            return Err(ModelError::Config("temperature must be in 0..=2".into()));
        }
        if config.max_tokens == 0 {
            return Err(ModelError::Config("max_tokens must be positive".into()));
        }
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(config.connect_timeout_ms))
            .build()
            .map_err(|e| ModelError::Config(e.to_string()))?;
        let base = config.base_url.trim_end_matches('/');
        let url = format!("{base}/chat/completions");
        let name = format!(
            "openai-compatible:{}@{}",
            config.model,
            rag_core::redact::redact_url(base)
        );
        let retry = crate::http::RetryPolicy {
            max_retries: config.max_retries,
            backoff_ms: config.backoff_ms,
            max_backoff_ms: 5_000,
            max_wait_ms: config.max_retry_wait_ms,
        };
        Ok(OpenAiChat {
            retry,
            config,
            client,
            url,
            name,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ChatConfig {
        &self.config
    }

    /// Streams the completion of `messages`: text deltas, then usage (when
    /// reported), then [`GenEvent::Done`]; a failure is the stream's last item.
    pub async fn stream(
        &self,
        messages: &[ChatMessage],
    ) -> Result<BoxStream<'static, Result<GenEvent, ModelError>>, ModelError> {
        self.stream_with(messages, false).await
    }

    /// [`OpenAiChat::stream`], asking for one JSON object when `json` is set
    /// (`response_format: {"type": "json_object"}`). A provider without JSON
    /// mode that answers HTTP 400 naming `response_format` is asked once more
    /// without it; the caller validates the reply either way.
    pub async fn stream_with(
        &self,
        messages: &[ChatMessage],
        json: bool,
    ) -> Result<BoxStream<'static, Result<GenEvent, ModelError>>, ModelError> {
        if messages.is_empty() {
            return Err(ModelError::Config("no messages to send".into()));
        }
        let started = Instant::now();
        let (response, sent) = self.start(messages, json).await?;
        let state = StreamState {
            response,
            url: self.url.clone(),
            model: self.config.model.clone(),
            buffer: Vec::new(),
            pending: VecDeque::new(),
            first_deadline: sent + Duration::from_millis(self.config.first_token_timeout_ms),
            first_timeout_ms: self.config.first_token_timeout_ms,
            idle: Duration::from_millis(self.config.idle_timeout_ms),
            got_text: false,
            finished: false,
            done: false,
            usage: None,
            started,
            first_token_ms: None,
        };
        Ok(futures::stream::unfold(state, |mut s| async move {
            let item = s.next_event().await?;
            Some((item, s))
        })
        .boxed())
    }

    /// Runs a completion to its end and returns the whole text.
    pub async fn complete(&self, messages: &[ChatMessage]) -> Result<ChatCompletion, ModelError> {
        let started = Instant::now();
        let mut stream = self.stream(messages).await?;
        let mut text = String::new();
        let mut usage = None;
        let mut first_token_ms = None;
        while let Some(event) = stream.next().await {
            match event? {
                GenEvent::Delta(d) => {
                    if first_token_ms.is_none() {
                        first_token_ms = Some(started.elapsed().as_secs_f64() * 1000.0);
                    }
                    text.push_str(&d);
                }
                GenEvent::Usage {
                    model,
                    prompt,
                    completion,
                } => {
                    usage = Some(ChatUsage {
                        model,
                        prompt,
                        completion,
                    })
                }
                GenEvent::Done => break,
            }
        }
        Ok(ChatCompletion {
            text,
            usage,
            first_token_ms,
            total_ms: started.elapsed().as_secs_f64() * 1000.0,
        })
    }

    async fn start(
        &self,
        messages: &[ChatMessage],
        mut json: bool,
    ) -> Result<(reqwest::Response, Instant), ModelError> {
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            match self.attempt(messages, attempt, json).await {
                Attempt::Started(r, sent) => return Ok((r, sent)),
                Attempt::Fail(ModelError::Http {
                    status: 400, body, ..
                }) if json && body.to_ascii_lowercase().contains("response_format") => {
                    // No JSON mode here: once more without it (not counted as a retry).
                    tracing::warn!(url = %self.url, body = %body, "the provider refused response_format; asking again without JSON mode");
                    json = false;
                }
                Attempt::Fail(e) => return Err(e),
                Attempt::Retry { error, after } => match self.retry.decide(attempt, after) {
                    crate::http::Decision::GiveUp => return Err(error),
                    crate::http::Decision::Wait(wait) => {
                        tracing::warn!(url = %self.url, attempt, wait_ms = wait.as_millis() as u64, error = %error, "chat request failed; retrying");
                        tokio::time::sleep(wait).await;
                    }
                },
            }
        }
    }

    async fn attempt(&self, messages: &[ChatMessage], attempt: u32, json: bool) -> Attempt {
        let body = Request {
            model: &self.config.model,
            messages,
            temperature: self.config.temperature,
            max_tokens: self.config.max_tokens,
            stream: true,
            stream_options: StreamOptions {
                include_usage: true,
            },
            response_format: json.then_some(ResponseFormat {
                kind: "json_object",
            }),
        };
        let mut req = self
            .client
            .post(&self.url)
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .json(&body);
        if let Some(key) = self.config.api_key.as_deref().filter(|k| !k.is_empty()) {
            req = req.bearer_auth(key);
        }
        // Every attempt gets the whole first-token allowance for its response to start.
        let sent = Instant::now();
        let timeout = Duration::from_millis(self.config.first_token_timeout_ms);
        let response = match tokio::time::timeout(timeout, req.send()).await {
            Err(_) => {
                return Attempt::Fail(ModelError::FirstTokenTimeout {
                    url: self.url.clone(),
                    timeout_ms: self.config.first_token_timeout_ms,
                })
            }
            Ok(Ok(r)) => r,
            Ok(Err(e)) if e.is_timeout() => {
                return Attempt::Retry {
                    error: ModelError::Timeout {
                        url: self.url.clone(),
                        timeout_ms: self.config.connect_timeout_ms,
                    },
                    after: None,
                }
            }
            Ok(Err(e)) => {
                return Attempt::Retry {
                    error: ModelError::Connect {
                        url: self.url.clone(),
                        detail: crate::error::root_cause(&e),
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
            let text = tokio::time::timeout(
                Duration::from_millis(self.config.idle_timeout_ms),
                response.text(),
            )
            .await;
            let body: String = text
                .ok()
                .and_then(Result::ok)
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
        Attempt::Started(response, sent)
    }
}

struct StreamState {
    response: reqwest::Response,
    url: String,
    model: String,
    buffer: Vec<u8>,
    pending: VecDeque<Result<GenEvent, ModelError>>,
    first_deadline: Instant,
    first_timeout_ms: u64,
    idle: Duration,
    got_text: bool,
    /// A finish reason or `[DONE]` was seen.
    finished: bool,
    /// The stream has ended (successfully or not).
    done: bool,
    usage: Option<(u32, u32)>,
    started: Instant,
    first_token_ms: Option<f64>,
}

impl StreamState {
    async fn next_event(&mut self) -> Option<Result<GenEvent, ModelError>> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                if e.is_err() {
                    self.done = true;
                    self.pending.clear();
                }
                return Some(e);
            }
            if self.done {
                return None;
            }
            let (deadline, first) = if self.got_text {
                (Instant::now() + self.idle, false)
            } else {
                (self.first_deadline, true)
            };
            let chunk = match tokio::time::timeout_at(deadline.into(), self.response.chunk()).await
            {
                Err(_) => Err(if first {
                    ModelError::FirstTokenTimeout {
                        url: self.url.clone(),
                        timeout_ms: self.first_timeout_ms,
                    }
                } else {
                    ModelError::IdleTimeout {
                        url: self.url.clone(),
                        timeout_ms: self.idle.as_millis() as u64,
                    }
                }),
                Ok(Ok(Some(bytes))) => Ok(Some(bytes)),
                Ok(Ok(None)) => Ok(None),
                Ok(Err(e)) => Err(ModelError::StreamCut {
                    url: self.url.clone(),
                    detail: crate::error::root_cause(&e),
                }),
            };
            match chunk {
                Err(e) => self.pending.push_back(Err(e)),
                Ok(Some(bytes)) => {
                    self.buffer.extend_from_slice(&bytes);
                    self.drain_lines();
                }
                Ok(None) => {
                    // End of body. An unterminated last line is an incomplete
                    // event, which SSE discards.
                    let partial = !self.buffer.is_empty();
                    self.buffer.clear();
                    if !self.done && self.pending.iter().all(Result::is_ok) {
                        if self.finished {
                            self.finish();
                        } else {
                            let detail = if partial {
                                "the stream ended in the middle of an event, before [DONE] or a finish reason"
                            } else {
                                "the stream ended before [DONE] or a finish reason"
                            };
                            self.pending.push_back(Err(ModelError::StreamCut {
                                url: self.url.clone(),
                                detail: detail.into(),
                            }));
                        }
                    }
                }
            }
        }
    }

    fn drain_lines(&mut self) {
        while let Some(pos) = self.buffer.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buffer.drain(..=pos).collect();
            if self.done || self.pending.iter().any(Result::is_err) {
                continue;
            }
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            self.line(line);
        }
    }

    fn line(&mut self, line: &str) {
        // SSE: empty lines separate events, ':' starts a comment (keep-alive),
        // fields other than data are not used.
        let Some(data) = line.strip_prefix("data:") else {
            return;
        };
        let data = data.strip_prefix(' ').unwrap_or(data).trim_end();
        if data.is_empty() {
            return;
        }
        if data == "[DONE]" {
            self.finished = true;
            self.finish();
            return;
        }
        let chunk: Chunk = match serde_json::from_str(data) {
            Ok(c) => c,
            Err(e) => {
                let shown: String = data.chars().take(80).collect();
                self.pending.push_back(Err(ModelError::BadResponse {
                    url: self.url.clone(),
                    detail: format!("malformed SSE data line {shown:?}: {e}"),
                }));
                return;
            }
        };
        if let Some(err) = chunk.error {
            let message = err
                .get("message")
                .and_then(|m| m.as_str())
                .map(str::to_owned)
                .unwrap_or_else(|| err.to_string());
            self.pending.push_back(Err(ModelError::Provider {
                url: self.url.clone(),
                message: message.chars().take(300).collect(),
            }));
            return;
        }
        if let Some(m) = chunk.model.filter(|m| !m.is_empty()) {
            self.model = m;
        }
        for choice in chunk.choices {
            if let Some(text) = choice
                .delta
                .and_then(|d| d.content)
                .filter(|t| !t.is_empty())
            {
                if !self.got_text {
                    self.got_text = true;
                    self.first_token_ms = Some(self.started.elapsed().as_secs_f64() * 1000.0);
                }
                self.pending.push_back(Ok(GenEvent::Delta(text)));
            }
            if choice.finish_reason.is_some() {
                self.finished = true;
            }
        }
        if let Some(u) = chunk.usage {
            self.usage = Some((u.prompt_tokens, u.completion_tokens));
        }
    }

    fn finish(&mut self) {
        if self.done {
            return;
        }
        if let Some((prompt, completion)) = self.usage {
            self.pending.push_back(Ok(GenEvent::Usage {
                model: self.model.clone(),
                prompt,
                completion,
            }));
        }
        self.pending.push_back(Ok(GenEvent::Done));
        tracing::info!(
            url = %self.url,
            model = %self.model,
            prompt_tokens = self.usage.map(|u| u.0),
            completion_tokens = self.usage.map(|u| u.1),
            first_token_ms = self.first_token_ms,
            total_ms = self.started.elapsed().as_secs_f64() * 1000.0,
            "chat completion done"
        );
        // Nothing is read after this; pending events are still handed out.
        self.done = true;
    }
}

#[async_trait]
impl Generator for OpenAiChat {
    fn name(&self) -> &str {
        &self.name
    }

    async fn generate(
        &self,
        request: GenerateRequest,
    ) -> Result<BoxStream<'static, Result<GenEvent, CoreError>>, CoreError> {
        if request.messages.is_empty() {
            return Err(ModelError::Config("the request carries no chat messages (build them with the knowledge base's prompt template)".into())
                .into_core("generator"));
        }
        let stream = self
            .stream_with(&request.messages, request.json)
            .await
            .map_err(|e| e.into_core("generator"))?;
        Ok(stream
            .map(|r| r.map_err(|e| e.into_core("generator")))
            .boxed())
    }
}
