//! Knowledge bases: list, create, read, delete, and replace their settings.

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::extract::ApiJson;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use rag_core::{KbSettings, KnowledgeBase};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A new knowledge base.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewKb {
    /// Name, unique in the tenant.
    pub name: String,
    /// Settings (defaults when absent).
    #[serde(default)]
    pub settings: Option<KbSettings>,
}

/// Knowledge bases of the caller's tenant.
#[utoipa::path(get, path = "/kbs", tag = "kbs", responses((status = 200, body = Vec<KnowledgeBase>), (status = 401, body = ErrorBody)))]
pub(super) async fn list_kbs(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<Vec<KnowledgeBase>>, ApiError> {
    Ok(Json(state.engine.list_kbs(&caller.tenant).await?))
}

/// Creates a knowledge base.
#[utoipa::path(post, path = "/kbs", tag = "kbs", request_body = NewKb,
    responses((status = 201, body = KnowledgeBase), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub(super) async fn create_kb(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<NewKb>,
) -> Result<impl IntoResponse, ApiError> {
    caller.require_write()?;
    let mut settings = body.settings.unwrap_or_default();
    super::intents::stamp_intents(&caller, &mut settings.intents, &[])?;
    settings
        .retrieval
        .validate()
        .map_err(rag_core::CoreError::from)?;
    let kb = state
        .engine
        .create_kb(&caller.tenant, &body.name, settings)
        .await?;
    Ok((StatusCode::CREATED, Json(kb)))
}

/// One knowledge base.
#[utoipa::path(get, path = "/kbs/{kb}", tag = "kbs", params(("kb" = String, Path)),
    responses((status = 200, body = KnowledgeBase), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn get_kb(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
) -> Result<Json<KnowledgeBase>, ApiError> {
    Ok(Json(state.engine.kb(&caller.tenant, &kb).await?))
}

/// Deletes a knowledge base and everything in it.
#[utoipa::path(delete, path = "/kbs/{kb}", tag = "kbs", params(("kb" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn delete_kb(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
) -> Result<StatusCode, ApiError> {
    caller.require_write()?;
    state.engine.delete_kb(&caller.tenant, &kb).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Replaces a knowledge base's settings.
#[utoipa::path(put, path = "/kbs/{kb}/settings", tag = "kbs", params(("kb" = String, Path)), request_body = KbSettings,
    responses((status = 200, body = KnowledgeBase), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn put_settings(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
    ApiJson(mut settings): ApiJson<KbSettings>,
) -> Result<Json<KnowledgeBase>, ApiError> {
    caller.require_write()?;
    let current = state.engine.kb(&caller.tenant, &kb).await?.settings.intents;
    super::intents::stamp_intents(&caller, &mut settings.intents, &current)?;
    Ok(Json(
        state
            .engine
            .update_kb_settings(&caller.tenant, &kb, settings)
            .await?,
    ))
}
