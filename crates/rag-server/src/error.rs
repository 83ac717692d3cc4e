//! The one error shape of the API: `{code, message, request_id}` with the
//! right status. Internal errors are logged with the request id and reach the
//! client only as "internal error".

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use rag_core::CoreError;
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
    /// Seconds the client should wait (429, and 503 `index_building`).
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

/// The one table from an error code ([`CoreError::code`], and the codes
/// of pipeline `error` events, which are the same) to its HTTP status.
pub(crate) fn status_of(code: &str) -> StatusCode {
    match code {
        "unknown_kb" | "not_found" => StatusCode::NOT_FOUND,
        "kb_exists" | "path_unavailable" | "embedding_space_mismatch" => StatusCode::CONFLICT,
        "query_too_long" => StatusCode::PAYLOAD_TOO_LARGE,
        "empty_query" | "invalid_param" | "bad_request" => StatusCode::BAD_REQUEST,
        "cancelled" | "index_building" => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// Every code [`status_of`] knows, as `&'static str`.
const CODES: &[&str] = &[
    "unknown_kb",
    "not_found",
    "kb_exists",
    "path_unavailable",
    "embedding_space_mismatch",
    "query_too_long",
    "empty_query",
    "invalid_param",
    "bad_request",
    "cancelled",
    "index_building",
    "store_error",
    "internal",
];

impl ApiError {
    /// An error from a code and a message that already went through
    /// [`CoreError::public_message`] (a pipeline `error` event).
    pub(crate) fn from_code(code: &str, message: String) -> Self {
        let status = status_of(code);
        let code = CODES
            .iter()
            .copied()
            .find(|c| *c == code)
            .unwrap_or("internal");
        let mut out = Self::new(status, code, message);
        if code == "index_building" {
            out.retry_after = Some(1);
        }
        out
    }
}

impl From<CoreError> for ApiError {
    fn from(e: CoreError) -> Self {
        let code = e.code();
        let status = status_of(code);
        let expected = matches!(e, CoreError::Cancelled | CoreError::IndexBuilding { .. });
        if status.is_server_error() && !expected {
            // The detail goes to the log (with the request id), never to the client.
            tracing::error!(detail = %e, code, "internal error");
        }
        let mut out = ApiError::new(status, code, e.public_message());
        if matches!(e, CoreError::IndexBuilding { .. }) {
            out.retry_after = Some(1);
        }
        out
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

#[cfg(test)]
mod code_table_tests {
    use super::*;
    use rag_core::UserError;

    #[test]
    fn every_core_error_code_has_one_status() {
        let errors = [
            CoreError::from(UserError::EmptyQuery),
            UserError::QueryTooLong { len: 2, limit: 1 }.into(),
            UserError::UnknownKb { name: "x".into() }.into(),
            UserError::KbExists { name: "x".into() }.into(),
            UserError::InvalidParam {
                name: "k",
                reason: String::new(),
            }
            .into(),
            UserError::NotFound {
                what: "document",
                id: "x".into(),
            }
            .into(),
            UserError::PathUnavailable {
                path: "dense".into(),
                reason: String::new(),
            }
            .into(),
            CoreError::Store("disk I/O error at /secret/path".into()),
            CoreError::Cancelled,
        ];
        for e in errors {
            let code = e.code();
            assert!(CODES.contains(&code), "{code} is not in the table");
            let api = ApiError::from(e);
            assert_eq!(api.code, code);
            assert_eq!(api.status, status_of(code));
            assert!(!api.message.contains("/secret/path"), "{}", api.message);
        }
        // The same code gives the same status over HTTP as in an event.
        assert_eq!(
            ApiError::from_code("not_found", "m".into()).status,
            StatusCode::NOT_FOUND
        );
        assert_eq!(ApiError::from_code("weird", "m".into()).code, "internal");
    }
}
