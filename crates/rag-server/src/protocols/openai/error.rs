//! OpenAI's error shape, `{"error": {"message", "type", "param", "code"}}`,
//! from an [`ApiError`] (whose status comes from the one error table).
//! `code` is ragscope's stable code; `type` is OpenAI's class of it.

use crate::error::ApiError;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

/// An error of the OpenAI-compatible API.
#[derive(Debug)]
pub(crate) struct OpenAiError {
    pub error: ApiError,
    /// The request field it is about, when one is.
    pub param: Option<&'static str>,
}

impl From<ApiError> for OpenAiError {
    fn from(error: ApiError) -> Self {
        let param = match error.code {
            "unknown_kb" => Some("model"),
            "empty_query" | "query_too_long" => Some("messages"),
            _ => None,
        };
        OpenAiError { error, param }
    }
}

impl OpenAiError {
    /// A 400 about one request field.
    pub(crate) fn invalid(param: &'static str, message: impl Into<String>) -> Self {
        OpenAiError {
            error: ApiError::bad_request("invalid_param", message),
            param: Some(param),
        }
    }

    /// The `error` object (also sent inside a stream that fails).
    pub(crate) fn body(&self) -> Value {
        let kind = match self.error.status {
            StatusCode::UNAUTHORIZED => "authentication_error",
            StatusCode::FORBIDDEN => "permission_error",
            StatusCode::NOT_FOUND => "not_found_error",
            StatusCode::TOO_MANY_REQUESTS => "rate_limit_error",
            s if s.is_server_error() => "server_error",
            _ => "invalid_request_error",
        };
        // A model that does not exist is OpenAI's `model_not_found`.
        let code = if self.error.code == "unknown_kb" {
            "model_not_found"
        } else {
            self.error.code
        };
        json!({ "error": {
            "message": self.error.message,
            "type": kind,
            "param": self.param,
            "code": code,
        }})
    }
}

impl IntoResponse for OpenAiError {
    fn into_response(self) -> Response {
        let mut res = (
            self.error.status,
            [(header::CONTENT_TYPE, "application/json")],
            self.body().to_string(),
        )
            .into_response();
        if let Some(s) = self.error.retry_after {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_have_openai_classes_and_our_codes() {
        let e = OpenAiError::from(ApiError::not_found("x"));
        assert_eq!(e.body()["error"]["type"], "not_found_error");
        let e = OpenAiError::from(ApiError::from(rag_core::CoreError::from(
            rag_core::UserError::UnknownKb {
                name: "shop".into(),
            },
        )));
        assert_eq!(e.body()["error"]["code"], "model_not_found");
        assert_eq!(e.body()["error"]["param"], "model");
        let e = OpenAiError::invalid("n", "only n = 1");
        assert_eq!(e.body()["error"]["type"], "invalid_request_error");
        assert_eq!(e.body()["error"]["param"], "n");
        let e = OpenAiError::from(ApiError::internal("disk at /secret"));
        assert_eq!(e.body()["error"]["type"], "server_error");
        assert!(!e.body().to_string().contains("/secret"));
    }
}
