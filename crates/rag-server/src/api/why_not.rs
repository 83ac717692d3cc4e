//! "Why not this one?": where an expected entry fell in every path of a
//! query, for the workbench and for maintainers' scripts.

use super::query::{to_request, FilterBody, QueryBody};
use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::extract::ApiJson;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::Json;
use rag_core::{PathKind, PathWeights};
use rag_engine::WhyNot;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Longest entry id accepted (ids are `faq:<uuid>` or `chunk:<uuid>:<n>`).
const MAX_ENTRY_ID: usize = 256;

/// A query's retrieval fields (as `/query` takes them) and the entry expected.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WhyNotBody {
    /// The entry the caller expected, as query hits name it (`faq:…`, `chunk:…`).
    pub entry_id: String,
    /// The question.
    pub query: String,
    /// Paths to run (default: the knowledge base's).
    #[serde(default)]
    pub paths: Option<Vec<PathKind>>,
    /// Candidates per path.
    #[serde(default)]
    pub per_path_k: Option<usize>,
    /// Hits kept after fusion.
    #[serde(default)]
    pub top_k: Option<usize>,
    /// Hits kept after rerank.
    #[serde(default)]
    pub rerank_top_k: Option<usize>,
    /// RRF k.
    #[serde(default)]
    pub k: Option<f64>,
    /// Per-path fusion weights.
    #[serde(default)]
    pub weights: Option<PathWeights>,
    /// λ in [0, 1]: 0 = vectors only, 1 = lexical only.
    #[serde(default)]
    pub lexical_interpolation: Option<f64>,
    /// Run the configured reranker (default true).
    #[serde(default)]
    pub rerank: Option<bool>,
    /// Filters.
    #[serde(default)]
    pub filters: Option<FilterBody>,
}

impl WhyNotBody {
    /// The query part, as `/query` would take it (no answer is generated).
    fn into_query(self) -> (String, QueryBody) {
        let body = QueryBody {
            query: self.query,
            paths: self.paths,
            per_path_k: self.per_path_k,
            top_k: self.top_k,
            rerank_top_k: self.rerank_top_k,
            k: self.k,
            weights: self.weights,
            lexical_interpolation: self.lexical_interpolation,
            rerank: self.rerank,
            filters: self.filters,
            generate: Some(false),
            conversation_id: None,
        };
        (self.entry_id, body)
    }
}

/// Explains where an expected entry fell in the query's paths: its rank and
/// score in each (or why the path did not return it: terms missing, below
/// the typo threshold, filtered, cut by per-path k), its fused rank and
/// contributions, and whether rerank or context packing dropped it. An
/// entry the caller may not see is a 404, exactly like one that does not
/// exist. Nothing is logged and no answer is generated.
#[utoipa::path(post, path = "/kbs/{kb}/why-not", tag = "query",
    params(("kb" = String, Path, description = "Knowledge base name")),
    request_body = WhyNotBody,
    responses((status = 200, body = WhyNot),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 422, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub(super) async fn why_not(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
    ApiJson(body): ApiJson<WhyNotBody>,
) -> Result<Json<WhyNot>, ApiError> {
    let _permit = state.query_slot(&caller.key_id)?;
    let (entry_id, body) = body.into_query();
    if entry_id.trim().is_empty() {
        return Err(ApiError::bad_request(
            "invalid_param",
            "entry_id names the entry expected (faq:… or chunk:…)",
        ));
    }
    if entry_id.len() > MAX_ENTRY_ID {
        return Err(ApiError::bad_request(
            "limit_exceeded",
            format!(
                "entry_id has {} bytes; the limit is {MAX_ENTRY_ID}",
                entry_id.len()
            ),
        ));
    }
    let request = to_request(&state, &caller, &kb, body, false).await?;
    let answer = state
        .engine
        .why_not(&caller.tenant, request, caller.viewer(), &entry_id)
        .await?;
    Ok(Json(answer))
}
