//! URL sources over HTTP: add a start page (optionally with its same-site
//! links to a depth and a page limit), sync it (fetch, extract, index what
//! changed), see each page's status, delete it with its documents.
//!
//! A URL with credentials (`https://user:pass@host/`) is refused as a
//! source; sources stored before that rule are listed with their
//! credentials (and secret query parameters) redacted.

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::extract::ApiJson;
use crate::redact::{has_userinfo, redact_url};
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use rag_core::{Source, SourceId, Viewer};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A URL source to add.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewSourceBody {
    /// The start page (http or https, without credentials).
    pub url: String,
    /// How many links deep to follow same-site links (default 0: the page only).
    #[serde(default)]
    pub depth: Option<u32>,
    /// At most this many pages per sync (default 50).
    #[serde(default)]
    pub max_pages: Option<u32>,
    /// Restrict the pages' documents to this owner (keys issued for an owner
    /// always add their owner's sources).
    #[serde(default)]
    pub owner: Option<String>,
}

/// A source as shown: no credentials in its URLs or reasons.
fn shown(mut s: Source) -> Source {
    s.url = redact_url(&s.url);
    s.reason = s.reason.as_deref().map(redact_url);
    for p in &mut s.pages {
        p.url = redact_url(&p.url);
        p.reason = p.reason.as_deref().map(redact_url);
    }
    s
}

fn parse_source(id: &str) -> Result<SourceId, ApiError> {
    SourceId::parse(id).ok_or_else(|| ApiError::not_found(format!("source {id:?} not found")))
}

/// The owner documents of this caller's uploads and sources are restricted to.
pub(crate) fn owner_for(
    caller: &Caller,
    asked: Option<String>,
) -> Result<Option<String>, ApiError> {
    match (&caller.owner, asked) {
        (Some(mine), Some(asked)) if *mine != asked => Err(ApiError::forbidden(
            "a key issued for an owner adds that owner's documents only",
        )),
        (Some(mine), _) => Ok(Some(mine.clone())),
        (None, Some(asked)) if !Viewer::valid_owner(&asked) => Err(ApiError::bad_request(
            "invalid_param",
            "owner has 1 to 128 bytes, no control characters, and is not \"*\"",
        )),
        (None, asked) => Ok(asked),
    }
}

/// URL sources of a knowledge base with the status of their last sync.
#[utoipa::path(get, path = "/kbs/{kb}/sources", tag = "documents", params(("kb" = String, Path)),
    responses((status = 200, body = Vec<Source>), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn list_sources(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
) -> Result<Json<Vec<Source>>, ApiError> {
    Ok(Json(
        state
            .engine
            .sources(&caller.tenant, &kb, &caller.viewer())
            .await?
            .into_iter()
            .map(shown)
            .collect(),
    ))
}

/// Adds a URL source (status `pending`; `POST …/sync` reads it).
#[utoipa::path(post, path = "/kbs/{kb}/sources", tag = "documents", params(("kb" = String, Path)), request_body = NewSourceBody,
    responses((status = 201, body = Source), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn add_source(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
    ApiJson(b): ApiJson<NewSourceBody>,
) -> Result<(StatusCode, Json<Source>), ApiError> {
    caller.require_write()?;
    if has_userinfo(&b.url) {
        return Err(ApiError::bad_request(
            "invalid_param",
            "a source URL cannot hold credentials (user:password@); they would be stored and shown with it",
        ));
    }
    let owner = owner_for(&caller, b.owner)?;
    let new = rag_engine::NewSource {
        url: b.url,
        depth: b.depth,
        max_pages: b.max_pages,
    };
    Ok((
        StatusCode::CREATED,
        Json(
            state
                .engine
                .add_source(&caller.tenant, &kb, new, owner)
                .await
                .map(shown)?,
        ),
    ))
}

/// A URL source with the pages of its last sync.
#[utoipa::path(get, path = "/kbs/{kb}/sources/{id}", tag = "documents", params(("kb" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = Source), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn get_source(
    State(state): State<AppState>,
    caller: Caller,
    Path((kb, id)): Path<(String, String)>,
) -> Result<Json<Source>, ApiError> {
    Ok(Json(
        state
            .engine
            .source(&caller.tenant, &kb, parse_source(&id)?, &caller.viewer())
            .await
            .map(shown)?,
    ))
}

/// Fetches the source's pages now and indexes what changed; returns the
/// source with each page's outcome (indexed, unchanged, failed with its
/// reason, removed).
#[utoipa::path(post, path = "/kbs/{kb}/sources/{id}/sync", tag = "documents", params(("kb" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = Source), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub(crate) async fn sync_source(
    State(state): State<AppState>,
    caller: Caller,
    Path((kb, id)): Path<(String, String)>,
) -> Result<Json<Source>, ApiError> {
    caller.require_write()?;
    let id = parse_source(&id)?;
    let _permit = state.ingest_slot(&caller.key_id)?;
    Ok(Json(
        state
            .engine
            .sync_source(&caller.tenant, &kb, id, &caller.viewer(), &mut |_| {})
            .await
            .map(shown)?,
    ))
}

/// Deletes a URL source and the documents of its pages.
#[utoipa::path(delete, path = "/kbs/{kb}/sources/{id}", tag = "documents", params(("kb" = String, Path), ("id" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn delete_source(
    State(state): State<AppState>,
    caller: Caller,
    Path((kb, id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    caller.require_write()?;
    state
        .engine
        .delete_source(&caller.tenant, &kb, parse_source(&id)?, &caller.viewer())
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
