//! JSON extractors whose rejections use the API's error shape.
//!
//! [`ApiJson`] reads the body itself and stops at `max_json_bytes` of bytes
//! actually received, so a body sent without `Content-Length` (chunked) is
//! bounded as well as one that declares its length. It also refuses fields
//! the body type does not know, at any depth (422 `invalid_body`), where
//! serde would silently ignore them: a type with `#[serde(default)]` (the
//! knowledge-base settings) would otherwise take a misspelt field as "every
//! setting at its default". Every JSON body under `/api/v1` comes through it.
//! (A protocol-compatible route that must ignore unknown fields would need a
//! lenient twin.)

use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::{header, HeaderMap, StatusCode};
use futures::StreamExt;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// Like [`axum::Json`], but a malformed body answers `{code, message, request_id}`,
/// the body limit applies to the bytes read, and a field the type does not
/// know answers 422 `invalid_body`.
pub struct ApiJson<T>(pub T);

fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body_too_large",
        format!("the body exceeds the limit of {limit} bytes"),
    )
}

/// Whether the request says it carries JSON (`application/json` or `application/…+json`).
fn is_json(headers: &HeaderMap) -> bool {
    let Some(ct) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match essence.split_once('/') {
        Some(("application", sub)) => sub == "json" || sub.ends_with("+json"),
        _ => false,
    }
}

/// Reads the body, at most `limit` bytes of it.
async fn read_limited(req: Request, limit: usize) -> Result<Vec<u8>, ApiError> {
    if !is_json(req.headers()) {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "Expected request with `Content-Type: application/json`",
        ));
    }
    let mut stream = req.into_body().into_data_stream();
    let mut buf = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            ApiError::bad_request("bad_request", format!("the body could not be read: {e}"))
        })?;
        if buf.len() + chunk.len() > limit {
            return Err(too_large(limit));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf)
}

fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    match axum::Json::<T>::from_bytes(bytes) {
        Ok(axum::Json(v)) => Ok(v),
        Err(e) => Err(match &e {
            JsonRejection::JsonDataError(_) => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_body",
                e.body_text(),
            ),
            JsonRejection::JsonSyntaxError(_) => {
                ApiError::bad_request("malformed_json", e.body_text())
            }
            _ => ApiError::new(e.status(), "bad_request", e.body_text()),
        }),
    }
}

impl<T> FromRequest<AppState> for ApiJson<T>
where
    T: DeserializeOwned + Serialize,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let bytes = read_limited(req, state.config.limits.max_json_bytes).await?;
        let value: T = parse(&bytes)?;
        // What was sent against what the type kept: a key the typed value
        // does not serialize back was ignored by serde, so it is unknown.
        let sent: Value = serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::bad_request("malformed_json", e.to_string()))?;
        let kept = serde_json::to_value(&value).map_err(ApiError::internal)?;
        if let Some(path) = unknown_field(&sent, &kept, String::new()) {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_body",
                format!("unknown field `{path}`"),
            ));
        }
        Ok(ApiJson(value))
    }
}

/// The path of the first key of `sent` that `kept` lacks, if any.
fn unknown_field(sent: &Value, kept: &Value, at: String) -> Option<String> {
    let join = |key: &str| {
        if at.is_empty() {
            key.to_owned()
        } else {
            format!("{at}.{key}")
        }
    };
    match (sent, kept) {
        (Value::Object(s), Value::Object(k)) => s.iter().find_map(|(key, v)| match k.get(key) {
            None => Some(join(key)),
            Some(kv) => unknown_field(v, kv, join(key)),
        }),
        (Value::Array(s), Value::Array(k)) => s
            .iter()
            .zip(k)
            .enumerate()
            .find_map(|(i, (sv, kv))| unknown_field(sv, kv, format!("{at}[{i}]"))),
        // An object where the type keeps something else (a map turned into
        // a struct's default, say): every key was ignored.
        (Value::Object(s), _) => s.keys().next().map(|key| join(key)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::unknown_field;
    use serde_json::json;

    #[test]
    fn unknown_keys_are_found_at_any_depth() {
        let kept = json!({ "a": 1, "b": { "c": null, "d": [ { "e": 1 } ] } });
        assert_eq!(
            unknown_field(&json!({ "a": 2 }), &kept, String::new()),
            None
        );
        assert_eq!(
            unknown_field(
                &json!({ "b": { "c": 1, "d": [ { "e": 2 } ] } }),
                &kept,
                String::new()
            ),
            None
        );
        assert_eq!(
            unknown_field(&json!({ "z": 1 }), &kept, String::new()).as_deref(),
            Some("z")
        );
        assert_eq!(
            unknown_field(&json!({ "b": { "x": 1 } }), &kept, String::new()).as_deref(),
            Some("b.x")
        );
        assert_eq!(
            unknown_field(
                &json!({ "b": { "d": [ { "e": 1, "f": 2 } ] } }),
                &kept,
                String::new()
            )
            .as_deref(),
            Some("b.d[0].f")
        );
    }
}
