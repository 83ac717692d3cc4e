//! The protocols other tools already speak, over the same engine and keys
//! as `/api/v1`: MCP for agents (`/mcp`, and stdio through `ragscope mcp`),
//! an OpenAI-compatible chat API (`/v1`) and Dify's external knowledge API
//! (`/dify/retrieval`).
//!
//! Each answers in its protocol's own error shape, with the status of the
//! one error table (`error.rs`). Callers are resolved by [`access`]; what
//! the routes do is [`service`], which goes through the same request
//! checks, query slots and engine calls as `/api/v1`.

pub(crate) mod access;
mod dify;
pub(crate) mod mcp;
mod openai;
pub(crate) mod service;

use crate::error::ApiError;
use crate::state::AppState;
use axum::body::Body;
use axum::http::StatusCode;
use axum::Router;
use serde::de::DeserializeOwned;

/// The protocol routes. They read their bodies themselves, within
/// `max_json_bytes`, so that even a body too large is refused in the
/// protocol's shape.
pub(crate) fn routes(state: &AppState) -> Router<AppState> {
    Router::new()
        .merge(mcp::http::routes(state.clone()))
        .merge(openai::routes())
        .merge(dify::routes())
}

/// Reads a JSON body within `max_json_bytes` (unknown fields are the
/// protocol's business: the request types decide).
pub(crate) async fn read_json<T: DeserializeOwned>(
    state: &AppState,
    body: Body,
) -> Result<T, ApiError> {
    let limit = state.config.limits.max_json_bytes;
    let bytes = axum::body::to_bytes(body, limit).await.map_err(|_| {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("the body exceeds the limit of {limit} bytes"),
        )
    })?;
    serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::bad_request("invalid_body", format!("the body is not valid here: {e}"))
    })
}
