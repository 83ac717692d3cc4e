//! The OpenAI-compatible chat API under `/v1`, so that any OpenAI client
//! works with `base_url = http://HOST:3210/v1` and a ragscope API key:
//! [`models`] lists the knowledge bases as models, [`chat`] answers
//! `chat/completions` ([`stream`] when streaming), errors in OpenAI's shape
//! ([`error`]).

mod chat;
mod error;
mod models;
mod stream;

use crate::protocols::access::{self, Access};
use crate::state::AppState;
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use error::OpenAiError;

/// The `/v1` routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/models", get(models::list_models))
        .route("/v1/models/{model}", get(models::get_model))
        .route("/v1/chat/completions", post(chat_completions))
}

/// The caller, or OpenAI's 401/403.
async fn openai_caller(state: &AppState, parts: &Parts) -> Result<Access, OpenAiError> {
    access::resolve(state, parts)
        .await
        .map_err(|d| OpenAiError::from(d.error()))
}

async fn chat_completions(State(state): State<AppState>, req: Request) -> Response {
    match answer(&state, req).await {
        Ok(res) => res,
        Err(e) => e.into_response(),
    }
}

async fn answer(state: &AppState, req: Request) -> Result<Response, OpenAiError> {
    let (parts, body) = req.into_parts();
    let access = openai_caller(state, &parts).await?;
    let request: chat::ChatRequest = super::read_json(state, body)
        .await
        .map_err(OpenAiError::from)?;
    let turn = request.turn(&access)?;
    if request.stream {
        Ok(stream::stream(state, &access, turn).await?.into_response())
    } else {
        Ok(Json(chat::complete(state, &access, turn).await?).into_response())
    }
}
