//! FAQ entries: list, create, read, edit, delete, approve and disable.

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::extract::ApiJson;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use rag_core::{FaqEntry, FaqId, FaqStatus};
use rag_engine::{FaqPatch, NewFaq};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A stored link must be an http or https URL with a host
/// ([`rag_core::link::is_web_link`]): anything else would come back as a
/// clickable citation.
pub(crate) fn check_link(name: &str, url: &str) -> Result<(), ApiError> {
    if !rag_core::link::is_web_link(url) {
        return Err(ApiError::bad_request(
            "invalid_param",
            format!(
                "{name} must be an http or https URL with a host (at most {} bytes)",
                rag_core::link::MAX_LINK_BYTES
            ),
        ));
    }
    Ok(())
}

fn parse_faq(id: &str) -> Result<FaqId, ApiError> {
    FaqId::parse(id).ok_or_else(|| ApiError::not_found(format!("FAQ entry {id:?} not found")))
}

/// FAQ entries of a knowledge base.
#[utoipa::path(get, path = "/kbs/{kb}/faqs", tag = "faqs", params(("kb" = String, Path)),
    responses((status = 200, body = Vec<FaqEntry>), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn list_faqs(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
) -> Result<Json<Vec<FaqEntry>>, ApiError> {
    Ok(Json(state.engine.faqs(&caller.tenant, &kb).await?))
}

/// A new FAQ entry.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewFaqBody {
    /// The question.
    pub question: String,
    /// The answer.
    pub answer: String,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Source link: an http or https URL.
    #[serde(default)]
    pub source_url: Option<String>,
    /// Status (approved when absent).
    #[serde(default)]
    pub status: Option<FaqStatus>,
}

/// Creates an FAQ entry.
#[utoipa::path(post, path = "/kbs/{kb}/faqs", tag = "faqs", params(("kb" = String, Path)), request_body = NewFaqBody,
    responses((status = 201, body = FaqEntry), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn create_faq(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
    ApiJson(b): ApiJson<NewFaqBody>,
) -> Result<impl IntoResponse, ApiError> {
    caller.require_write()?;
    if let Some(url) = b.source_url.as_deref().filter(|u| !u.is_empty()) {
        check_link("source_url", url)?;
    }
    let new = NewFaq {
        question: b.question,
        answer: b.answer,
        tags: b.tags,
        source_url: b.source_url,
        status: b.status,
        ..Default::default()
    };
    Ok((
        StatusCode::CREATED,
        Json(state.engine.create_faq(&caller.tenant, &kb, new).await?),
    ))
}

/// One FAQ entry.
#[utoipa::path(get, path = "/kbs/{kb}/faqs/{id}", tag = "faqs", params(("kb" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = FaqEntry), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn get_faq(
    State(state): State<AppState>,
    caller: Caller,
    Path((kb, id)): Path<(String, String)>,
) -> Result<Json<FaqEntry>, ApiError> {
    Ok(Json(
        state
            .engine
            .faq(&caller.tenant, &kb, parse_faq(&id)?)
            .await?,
    ))
}

/// Changes to an FAQ entry.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FaqPatchBody {
    /// New question.
    #[serde(default)]
    pub question: Option<String>,
    /// New answer.
    #[serde(default)]
    pub answer: Option<String>,
    /// New tags.
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    /// New source link, an http or https URL ("" removes it).
    #[serde(default)]
    pub source_url: Option<String>,
}

/// Edits an FAQ entry (sets `edited`; re-embeds only when question or answer changed).
#[utoipa::path(patch, path = "/kbs/{kb}/faqs/{id}", tag = "faqs", params(("kb" = String, Path), ("id" = String, Path)), request_body = FaqPatchBody,
    responses((status = 200, body = FaqEntry), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn edit_faq(
    State(state): State<AppState>,
    caller: Caller,
    Path((kb, id)): Path<(String, String)>,
    ApiJson(b): ApiJson<FaqPatchBody>,
) -> Result<Json<FaqEntry>, ApiError> {
    caller.require_write()?;
    if let Some(url) = b.source_url.as_deref().filter(|u| !u.is_empty()) {
        check_link("source_url", url)?;
    }
    let patch = FaqPatch {
        question: b.question,
        answer: b.answer,
        tags: b.tags,
        source_url: b.source_url,
    };
    Ok(Json(
        state
            .engine
            .update_faq(&caller.tenant, &kb, parse_faq(&id)?, patch)
            .await?,
    ))
}

/// Deletes an FAQ entry.
#[utoipa::path(delete, path = "/kbs/{kb}/faqs/{id}", tag = "faqs", params(("kb" = String, Path), ("id" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn delete_faq(
    State(state): State<AppState>,
    caller: Caller,
    Path((kb, id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    caller.require_write()?;
    state
        .engine
        .delete_faq(&caller.tenant, &kb, parse_faq(&id)?)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Approves an FAQ entry (it becomes searchable).
#[utoipa::path(post, path = "/kbs/{kb}/faqs/{id}/approve", tag = "faqs", params(("kb" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = FaqEntry), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn approve_faq(
    State(state): State<AppState>,
    caller: Caller,
    Path((kb, id)): Path<(String, String)>,
) -> Result<Json<FaqEntry>, ApiError> {
    caller.require_write()?;
    Ok(Json(
        state
            .engine
            .set_faq_status(&caller.tenant, &kb, parse_faq(&id)?, FaqStatus::Approved)
            .await?,
    ))
}

/// Disables an FAQ entry (it stops being searchable).
#[utoipa::path(post, path = "/kbs/{kb}/faqs/{id}/disable", tag = "faqs", params(("kb" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = FaqEntry), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn disable_faq(
    State(state): State<AppState>,
    caller: Caller,
    Path((kb, id)): Path<(String, String)>,
) -> Result<Json<FaqEntry>, ApiError> {
    caller.require_write()?;
    Ok(Json(
        state
            .engine
            .set_faq_status(&caller.tenant, &kb, parse_faq(&id)?, FaqStatus::Disabled)
            .await?,
    ))
}
