//! The one error shape of the API: `{code, message, request_id}` with the
//! right status. Internal errors are logged with the request id and reach the
//! client only as "internal error".

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use rag_core::{CoreError, UserError};
use serde::Serialize;
use utoipa::ToSchema;

/// The body of every error response.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorBody {
    /// Stable snake_case code.
    pub code: String,
    /// What went wrong, for people.
    pub message: String,
    /// The request's id, also in the server log and the `x-request-id` header.
    pub request_id: String,
}

/// An error a handler returns. The request-id middleware completes the body.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable code.
    pub code: &'static str,
    /// Message shown to the client.
    pub message: String,
    /// Seconds the client should wait (429).
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// An error with this status, code and message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }
    /// 400.
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }
    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }
    /// 403 for a key that lacks the role (never for another tenant's data: that is 404).
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }
    /// 500; the detail goes to the log only.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        tracing::error!(detail = %detail, "internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error; the server log has details under this request id",
        )
    }
}

impl From<CoreError> for ApiError {
    fn from(e: CoreError) -> Self {
        match &e {
            CoreError::User(u) => {
                let msg = u.to_string();
                match u {
                    UserError::UnknownKb { .. } => {
                        ApiError::new(StatusCode::NOT_FOUND, "unknown_kb", msg)
                    }
                    UserError::NotFound { .. } => ApiError::not_found(msg),
                    UserError::KbExists { .. } => {
                        ApiError::new(StatusCode::CONFLICT, "kb_exists", msg)
                    }
                    UserError::EmptyQuery => ApiError::bad_request("empty_query", msg),
                    UserError::QueryTooLong { .. } => {
                        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "query_too_long", msg)
                    }
                    UserError::InvalidParam { .. } => ApiError::bad_request("invalid_param", msg),
                    UserError::PathUnavailable { .. } => {
                        ApiError::new(StatusCode::CONFLICT, "path_unavailable", msg)
                    }
                    UserError::EmbeddingSpaceMismatch { .. } => {
                        ApiError::new(StatusCode::CONFLICT, "embedding_space_mismatch", msg)
                    }
                    _ => ApiError::bad_request("bad_request", msg),
                }
            }
            CoreError::Cancelled => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "cancelled",
                "the request was cancelled",
            ),
            _ => ApiError::internal(&e),
        }
    }
}

/// Marker left in a response's extensions so the middleware can fill in the request id.
#[derive(Debug, Clone)]
pub(crate) struct PendingError {
    pub code: &'static str,
    pub message: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut res = self.status.into_response();
        if let Some(s) = self.retry_after {
            res.headers_mut()
                .insert("retry-after", HeaderValue::from(s));
        }
        res.extensions_mut().insert(PendingError {
            code: self.code,
            message: self.message,
        });
        res
    }
}

/// Code for a bare status produced outside our handlers (unknown route, wrong method, body limit).
pub(crate) fn code_for_status(status: StatusCode) -> (&'static str, &'static str) {
    match status {
        StatusCode::NOT_FOUND => ("no_route", "no such route; see /api/openapi.json"),
        StatusCode::METHOD_NOT_ALLOWED => (
            "method_not_allowed",
            "this route does not accept that method",
        ),
        StatusCode::PAYLOAD_TOO_LARGE => ("body_too_large", "the request body exceeds the limit"),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => (
            "unsupported_media_type",
            "send JSON with content-type: application/json",
        ),
        StatusCode::BAD_REQUEST => ("bad_request", "the request could not be read"),
        StatusCode::UNPROCESSABLE_ENTITY => (
            "invalid_body",
            "the request body does not match the expected shape",
        ),
        s if s.is_server_error() => ("internal", "internal error"),
        _ => ("error", "the request failed"),
    }
}
