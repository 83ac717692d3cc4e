//! FAQ entries: list, create, read, edit, delete, approve and disable.

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::extract::ApiJson;
use crate::state::AppState;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use rag_core::{FaqCursor, FaqEntry, FaqId, FaqQuery, FaqStatus};
use rag_engine::{FaqPatch, NewFaq};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

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

/// The longest text the FAQ listing filters by.
const MAX_CONTAINS_CHARS: usize = 200;

/// Which page of the FAQ listing.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FaqsParams {
    /// Entries per page, 1 to 500 (default 50).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 500)]
    pub limit: Option<String>,
    /// The `next_cursor` of the previous page (absent: the first page).
    pub cursor: Option<String>,
    /// Only entries of this status: `approved`, `pending` or `disabled`.
    #[param(value_type = Option<FaqStatus>)]
    pub status: Option<String>,
    /// Only entries whose question, answer or tags contain this text
    /// (letters A to Z in either case; at most 200 characters). The
    /// entries are read in order until the page is full: a filter for
    /// looking through the listing, not a search.
    pub contains: Option<String>,
}

/// One page of the FAQ listing.
#[derive(Debug, Serialize, ToSchema)]
pub struct FaqList {
    /// The entries, oldest first (by creation time, then id).
    pub faqs: Vec<FaqEntry>,
    /// Pass as `cursor` to get the next page; null on the last page.
    pub next_cursor: Option<String>,
    /// How many entries the knowledge base holds (of `status`, when given;
    /// the `contains` filter aside).
    pub total: usize,
    /// The page size used.
    pub limit: usize,
}

impl FaqsParams {
    /// The store's query, or 400 `invalid_param`.
    fn query(self) -> Result<FaqQuery, ApiError> {
        use super::paging::{invalid, shown};
        let limit = super::paging::limit(self.limit.as_deref())?;
        let after = super::paging::cursor(self.cursor.as_deref(), FaqCursor::decode)?;
        let status = match self.status.as_deref().filter(|s| !s.is_empty()) {
            None => None,
            Some(text) => Some(FaqStatus::parse(text).ok_or_else(|| {
                invalid(
                    "status",
                    format!(
                        "must be approved, pending or disabled, not {:?}",
                        shown(text)
                    ),
                )
            })?),
        };
        let contains = match self.contains.filter(|c| !c.trim().is_empty()) {
            None => None,
            Some(text) if text.chars().count() > MAX_CONTAINS_CHARS || text.contains('\0') => {
                return Err(invalid(
                    "contains",
                    format!("must be at most {MAX_CONTAINS_CHARS} characters, without NUL"),
                ))
            }
            Some(text) => Some(text),
        };
        Ok(FaqQuery {
            after,
            limit,
            status,
            contains,
            with_total: true,
        })
    }
}

/// FAQ entries of a knowledge base, a page at a time: follow `next_cursor`
/// until it is null. Each entry present from the first page to the last is
/// listed exactly once, in order, whatever is added, edited or deleted
/// between pages (entries added meanwhile come at the end).
#[utoipa::path(get, path = "/kbs/{kb}/faqs", tag = "faqs", params(("kb" = String, Path), FaqsParams),
    responses((status = 200, body = FaqList), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn list_faqs(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
    Query(params): Query<FaqsParams>,
) -> Result<Json<FaqList>, ApiError> {
    let query = params.query()?;
    let page = state.engine.faqs_page(&caller.tenant, &kb, &query).await?;
    Ok(Json(FaqList {
        faqs: page.faqs,
        next_cursor: page.next.map(|c| c.encode()),
        total: page.total.unwrap_or_default(),
        limit: query.limit,
    }))
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
