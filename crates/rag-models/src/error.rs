//! Errors of model clients.

use thiserror::Error;

/// What can go wrong talking to a model provider.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The configuration is unusable.
    #[error("invalid model configuration: {0}")]
    Config(String),
    /// The provider could not be reached.
    #[error("cannot reach {url}: {detail}")]
    Connect {
        /// Endpoint.
        url: String,
        /// Cause.
        detail: String,
    },
    /// The request took longer than the configured timeout.
    #[error("{url} did not answer within {timeout_ms} ms")]
    Timeout {
        /// Endpoint.
        url: String,
        /// The timeout.
        timeout_ms: u64,
    },
    /// The provider refused the credentials.
    #[error("{url} refused the API key (HTTP {status}); check the key in the configuration")]
    Unauthorized {
        /// Endpoint.
        url: String,
        /// 401 or 403.
        status: u16,
    },
    /// Any other HTTP error after retries.
    #[error("{url} answered HTTP {status} after {attempts} attempt(s): {body}")]
    Http {
        /// Endpoint.
        url: String,
        /// Status code.
        status: u16,
        /// Attempts made.
        attempts: u32,
        /// The start of the response body.
        body: String,
    },
    /// The response was not what the protocol promises.
    #[error("unexpected response from {url}: {detail}")]
    BadResponse {
        /// Endpoint.
        url: String,
        /// What was wrong.
        detail: String,
    },
    /// No answer text arrived within the first-token timeout.
    #[error("{url} sent no answer within {timeout_ms} ms (first-token timeout)")]
    FirstTokenTimeout {
        /// Endpoint.
        url: String,
        /// The timeout.
        timeout_ms: u64,
    },
    /// The stream went silent for longer than the idle timeout.
    #[error("{url} stopped sending for more than {timeout_ms} ms in the middle of the answer (idle timeout)")]
    IdleTimeout {
        /// Endpoint.
        url: String,
        /// The timeout.
        timeout_ms: u64,
    },
    /// The stream ended or broke before its end marker.
    #[error("the answer stream from {url} was cut: {detail}")]
    StreamCut {
        /// Endpoint.
        url: String,
        /// What happened.
        detail: String,
    },
    /// The provider reported an error inside a successful response.
    #[error("{url} reported an error: {message}")]
    Provider {
        /// Endpoint.
        url: String,
        /// The provider's message.
        message: String,
    },
    /// Vectors of a different length than expected.
    #[error("the embedding model returned {got}-dimensional vectors, expected {expected}")]
    WrongDimension {
        /// Expected length.
        expected: usize,
        /// Returned length.
        got: usize,
    },
}

impl From<ModelError> for rag_core::CoreError {
    fn from(e: ModelError) -> Self {
        rag_core::CoreError::Component {
            component: "embedder".into(),
            message: e.to_string(),
        }
    }
}

impl ModelError {
    /// The error as a seam error of `component` ("generator", "reranker"…).
    pub fn into_core(self, component: &str) -> rag_core::CoreError {
        rag_core::CoreError::Component {
            component: component.into(),
            message: self.to_string(),
        }
    }
}

/// An error and its sources, as one line.
pub(crate) fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        msg = format!("{msg}: {s}");
        source = s.source();
    }
    msg
}
