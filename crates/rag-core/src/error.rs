//! Errors shared across seams.

use thiserror::Error;

/// A mistake in what the user asked for. Maps to a 4xx status and a non-zero exit.
#[derive(Debug, Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum UserError {
    /// The query is empty after normalisation.
    #[error("the query is empty")]
    EmptyQuery,
    /// The query is longer than the configured limit.
    #[error("the query is {len} bytes long; the limit is {limit} bytes")]
    QueryTooLong {
        /// Length of the query in bytes.
        len: usize,
        /// The configured limit.
        limit: usize,
    },
    /// No knowledge base of that name exists for the tenant.
    #[error("unknown knowledge base {name:?}")]
    UnknownKb {
        /// The name that was asked for.
        name: String,
    },
    /// A knowledge base of that name exists already.
    #[error("knowledge base {name:?} already exists")]
    KbExists {
        /// The name that was asked for.
        name: String,
    },
    /// A parameter is out of its valid range.
    #[error("invalid parameter {name}: {reason}")]
    InvalidParam {
        /// Parameter name.
        name: &'static str,
        /// Why it is invalid.
        reason: String,
    },
    /// The knowledge base's vectors come from another embedding model.
    #[error("knowledge base vectors were made by {stored_model} ({stored_dims} dimensions) but the configured embedder is {configured_model} ({configured_dims} dimensions); run `ragscope reembed --kb NAME` to switch models")]
    EmbeddingSpaceMismatch {
        /// Model of the stored vectors.
        stored_model: String,
        /// Their dimension.
        stored_dims: usize,
        /// The configured model.
        configured_model: String,
        /// Its dimension.
        configured_dims: usize,
    },
    /// The thing asked for does not exist for this tenant (or is not visible to the caller).
    #[error("{what} {id:?} not found")]
    NotFound {
        /// What kind of thing.
        what: &'static str,
        /// The id or name asked for.
        id: String,
    },
    /// A retrieval path was requested that is not available.
    #[error("retrieval path {path} is not available: {reason}")]
    PathUnavailable {
        /// The path.
        path: String,
        /// Why.
        reason: String,
    },
}

/// Errors crossing the engine's seams.
#[derive(Debug, Error, Clone)]
#[non_exhaustive]
pub enum CoreError {
    /// The caller's mistake.
    #[error(transparent)]
    User(#[from] UserError),
    /// A store failed.
    #[error("store: {0}")]
    Store(String),
    /// A retriever, model or other component failed.
    #[error("{component}: {message}")]
    Component {
        /// Which component.
        component: String,
        /// What happened.
        message: String,
    },
    /// The operation was cancelled.
    #[error("cancelled")]
    Cancelled,
    /// The knowledge base's indexes are being built for the first time in
    /// this process and were not ready within the configured wait; the
    /// build goes on, so asking again shortly succeeds.
    #[error("the indexes of knowledge base {kb:?} are being built; try again shortly")]
    IndexBuilding {
        /// The knowledge base's name.
        kb: String,
    },
}

impl CoreError {
    /// The stable snake_case code of this error: the one name it has in
    /// events, API responses (`rag-server` maps codes to statuses) and the
    /// CLI.
    pub fn code(&self) -> &'static str {
        match self {
            CoreError::User(u) => match u {
                UserError::EmptyQuery => "empty_query",
                UserError::QueryTooLong { .. } => "query_too_long",
                UserError::UnknownKb { .. } => "unknown_kb",
                UserError::KbExists { .. } => "kb_exists",
                UserError::InvalidParam { .. } => "invalid_param",
                UserError::EmbeddingSpaceMismatch { .. } => "embedding_space_mismatch",
                UserError::NotFound { .. } => "not_found",
                UserError::PathUnavailable { .. } => "path_unavailable",
            },
            CoreError::Store(_) => "store_error",
            CoreError::Component { .. } => "internal",
            CoreError::Cancelled => "cancelled",
            CoreError::IndexBuilding { .. } => "index_building",
        }
    }

    /// The message a caller may see: the whole message for the caller's
    /// own mistakes, a generic one for failures inside the server (whose
    /// details — SQL, paths, provider addresses — go to the server log only).
    pub fn public_message(&self) -> String {
        match self {
            CoreError::User(u) => u.to_string(),
            CoreError::Cancelled => "cancelled".into(),
            e @ CoreError::IndexBuilding { .. } => e.to_string(),
            CoreError::Store(_) => "the store failed; the details are in the server log".into(),
            CoreError::Component { component, .. } => {
                format!("{component} failed; the details are in the server log")
            }
        }
    }

    /// Whether this error is the caller's fault.
    pub fn is_user_error(&self) -> bool {
        matches!(self, CoreError::User(_))
    }
}

/// Result alias with [`CoreError`].
pub type Result<T, E = CoreError> = std::result::Result<T, E>;
