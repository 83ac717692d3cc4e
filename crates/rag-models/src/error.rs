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
        rag_core::CoreError::Component { component: "embedder".into(), message: e.to_string() }
    }
}
