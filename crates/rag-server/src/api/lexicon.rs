//! The lexicon of a knowledge base: synonym groups, the segmenter's user
//! dictionary, and facts.

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::extract::ApiJson;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use rag_core::{FactId, SynonymGroup, UserWord};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Synonyms, dictionary words and facts.
#[derive(Debug, Serialize, ToSchema)]
pub struct LexiconBody {
    /// Synonym groups.
    pub synonyms: Vec<SynonymGroup>,
    /// Segmenter words.
    pub user_words: Vec<UserWord>,
    /// Facts.
    pub facts: Vec<rag_core::Fact>,
}

/// The knowledge base's synonyms, user dictionary and facts.
#[utoipa::path(get, path = "/kbs/{kb}/lexicon", tag = "lexicon", params(("kb" = String, Path)),
    responses((status = 200, body = LexiconBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn get_lexicon(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
) -> Result<Json<LexiconBody>, ApiError> {
    let l = state.engine.lexicon(&caller.tenant, &kb).await?;
    Ok(Json(LexiconBody {
        synonyms: l.synonyms,
        user_words: l.user_words,
        facts: l.facts,
    }))
}

/// How many items a write added or changed.
#[derive(Debug, Serialize, ToSchema)]
pub struct Changed {
    /// Count.
    pub changed: usize,
}

fn check_terms(groups: &[SynonymGroup]) -> Result<(), ApiError> {
    for g in groups {
        if g.terms.len() < 2 || g.terms.iter().any(|t| t.trim().is_empty() || t.len() > 200) {
            return Err(ApiError::bad_request(
                "invalid_param",
                "a synonym group has at least two non-empty terms of at most 200 bytes",
            ));
        }
    }
    Ok(())
}

/// Adds synonym groups (groups already present are skipped).
#[utoipa::path(post, path = "/kbs/{kb}/synonyms", tag = "lexicon", params(("kb" = String, Path)), request_body = Vec<SynonymGroup>,
    responses((status = 200, body = Changed), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn add_synonyms(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
    ApiJson(groups): ApiJson<Vec<SynonymGroup>>,
) -> Result<Json<Changed>, ApiError> {
    caller.require_write()?;
    check_terms(&groups)?;
    Ok(Json(Changed {
        changed: state
            .engine
            .add_synonyms(&caller.tenant, &kb, groups)
            .await?,
    }))
}

/// Adds words to the Chinese segmenter's dictionary of this knowledge base.
#[utoipa::path(post, path = "/kbs/{kb}/dictionary", tag = "lexicon", params(("kb" = String, Path)), request_body = Vec<UserWord>,
    responses((status = 200, body = Changed), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn add_dictionary(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
    ApiJson(words): ApiJson<Vec<UserWord>>,
) -> Result<Json<Changed>, ApiError> {
    caller.require_write()?;
    if words.iter().any(|w| {
        w.word.trim().is_empty()
            || w.word.chars().count() > 32
            || w.word.chars().any(char::is_whitespace)
    }) {
        return Err(ApiError::bad_request(
            "invalid_param",
            "a dictionary word has 1 to 32 characters and no spaces",
        ));
    }
    Ok(Json(Changed {
        changed: state
            .engine
            .add_user_words(&caller.tenant, &kb, words)
            .await?,
    }))
}

/// A fact to add or replace (by key).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FactBody {
    /// The key.
    pub key: String,
    /// The value.
    pub value: String,
    /// Other ways to ask for the key.
    #[serde(default)]
    pub key_synonyms: Vec<String>,
}

/// Adds or replaces facts by key.
#[utoipa::path(post, path = "/kbs/{kb}/facts", tag = "lexicon", params(("kb" = String, Path)), request_body = Vec<FactBody>,
    responses((status = 200, body = Changed), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn put_facts(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
    ApiJson(facts): ApiJson<Vec<FactBody>>,
) -> Result<Json<Changed>, ApiError> {
    caller.require_write()?;
    if facts
        .iter()
        .any(|f| f.key.trim().is_empty() || f.value.trim().is_empty())
    {
        return Err(ApiError::bad_request(
            "invalid_param",
            "a fact has a non-empty key and value",
        ));
    }
    let facts = facts
        .into_iter()
        .map(|f| (f.key, f.value, f.key_synonyms))
        .collect();
    Ok(Json(Changed {
        changed: state.engine.put_facts(&caller.tenant, &kb, facts).await?,
    }))
}

/// Deletes a fact.
#[utoipa::path(delete, path = "/kbs/{kb}/facts/{id}", tag = "lexicon", params(("kb" = String, Path), ("id" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn delete_fact(
    State(state): State<AppState>,
    caller: Caller,
    Path((kb, id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    caller.require_write()?;
    let id =
        FactId::parse(&id).ok_or_else(|| ApiError::not_found(format!("fact {id:?} not found")))?;
    state.engine.delete_fact(&caller.tenant, &kb, id).await?;
    Ok(StatusCode::NO_CONTENT)
}
