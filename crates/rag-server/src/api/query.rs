//! Queries: the streamed and JSON runs, `/retrieve` with its cached
//! candidate lists, `/refuse`, and replay of a logged question.

use super::SseEvent;
use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::extract::ApiJson;
use crate::state::{AppState, CachedCandidates, CANDIDATES_TTL};
use axum::extract::{Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::Json;
use futures::{Stream, StreamExt};
use rag_core::{
    Filters, FusionParams, PathKind, PathWeights, PipelineEvent, QueryRequest, RankedList,
    RetrievalParams,
};
use serde::{Deserialize, Serialize};
use std::convert::Infallible;
use utoipa::ToSchema;

/// Filters of a query.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FilterBody {
    /// Every listed tag must be present.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Created at or after (unix seconds).
    #[serde(default)]
    pub created_after: Option<i64>,
    /// Created at or before (unix seconds).
    #[serde(default)]
    pub created_before: Option<i64>,
}

/// A query. Absent fields take the knowledge base's settings.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QueryBody {
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
    /// Generate an answer (default true for /query, ignored by /retrieve).
    #[serde(default)]
    pub generate: Option<bool>,
    /// Continue a conversation: a follow-up is rewritten from its earlier turns.
    #[serde(default)]
    pub conversation_id: Option<String>,
}

impl QueryBody {
    /// The body's retrieval knobs as overrides (wire names unchanged).
    pub(crate) fn overrides(&self) -> rag_core::RetrievalOverrides {
        rag_core::RetrievalOverrides {
            paths: self.paths.clone(),
            per_path_k: self.per_path_k,
            top_k: self.top_k,
            rerank_top_k: self.rerank_top_k,
            k: self.k,
            weights: self.weights,
            lexical_interpolation: self.lexical_interpolation,
            rerank: self.rerank,
            ..Default::default()
        }
    }
}

/// The events of one query, as one document.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueryEvents {
    /// The events, in order, ending with `done` or `error`.
    pub events: Vec<PipelineEvent>,
}

pub(crate) fn check_k(name: &'static str, v: Option<usize>, max: usize) -> Result<(), ApiError> {
    match v {
        Some(0) => Err(ApiError::bad_request(
            "invalid_param",
            format!("{name} must be at least 1"),
        )),
        Some(n) if n > max => Err(ApiError::bad_request(
            "limit_exceeded",
            format!("{name} is {n}; the limit is {max}"),
        )),
        _ => Ok(()),
    }
}

pub(crate) async fn to_request(
    state: &AppState,
    caller: &Caller,
    kb: &str,
    body: QueryBody,
    may_generate: bool,
) -> Result<QueryRequest, ApiError> {
    if body
        .conversation_id
        .as_ref()
        .is_some_and(|c| c.is_empty() || c.len() > 128)
    {
        return Err(ApiError::bad_request(
            "invalid_param",
            "conversation_id has 1 to 128 bytes",
        ));
    }
    let conversation_id = match body.conversation_id.clone() {
        // A widget's conversations live apart from every other key's, so a
        // public page can neither continue nor read (through the follow-up
        // rewrite) a conversation it did not start; its ids are the page's
        // own random ones.
        Some(id) if caller.is_widget() => {
            if !(WIDGET_CONVERSATION_MIN..=WIDGET_CONVERSATION_MAX).contains(&id.len()) {
                return Err(ApiError::bad_request(
                    "invalid_param",
                    format!(
                        "a widget's conversation_id has {WIDGET_CONVERSATION_MIN} to {WIDGET_CONVERSATION_MAX} bytes (a random id, such as a UUID)"
                    ),
                ));
            }
            Some(format!("widget:{}:{id}", caller.key_id))
        }
        other => other,
    };
    let max = state.config.limits.max_top_k;
    check_k("per_path_k", body.per_path_k, max)?;
    check_k("top_k", body.top_k, max)?;
    check_k("rerank_top_k", body.rerank_top_k, max)?;
    state.engine.check_query(&body.query)?;
    let overrides = body.overrides();
    if overrides.paths.as_ref().is_some_and(Vec::is_empty) {
        return Err(ApiError::bad_request(
            "invalid_param",
            "paths must name at least one path",
        ));
    }
    // Each value in its range (RetrievalParams::validate, field by field);
    // the engine merges the overrides with the knowledge base's settings
    // once and checks the result again.
    overrides
        .apply(&RetrievalParams::default())
        .0
        .validate()
        .map_err(rag_core::CoreError::from)?;
    // An unknown knowledge base is a 404 before any stream starts.
    state.engine.kb(&caller.tenant, kb).await?;
    let f = body.filters.unwrap_or_default();
    let filters = Filters {
        tags: f.tags,
        created_after: f.created_after,
        created_before: f.created_before,
        as_of: None,
    };
    Ok(QueryRequest {
        kb: kb.to_owned(),
        query: body.query,
        params: None,
        overrides,
        filters,
        generate: may_generate && body.generate.unwrap_or(true),
        conversation_id,
    })
}

/// Shortest conversation id a widget may send.
const WIDGET_CONVERSATION_MIN: usize = 16;
/// Longest conversation id a widget may send (its stored form is prefixed).
const WIDGET_CONVERSATION_MAX: usize = 96;

/// Remembers which widget key an answer was given to, so that key (and no
/// other) may leave feedback on it.
pub(crate) fn note_answer(state: &AppState, caller: &Caller, e: &PipelineEvent) {
    if let PipelineEvent::QueryReceived { query_id, .. } = e {
        if caller.is_widget() {
            state.remember_answer(query_id, &caller.key_id);
        }
    }
}

pub(crate) fn is_miss(e: &PipelineEvent) -> bool {
    matches!(e, PipelineEvent::Answered { kb_miss: true, .. })
}

pub(crate) fn stage_timings(e: &PipelineEvent) -> Option<Vec<(String, f64)>> {
    match e {
        PipelineEvent::Done { timings, .. } => {
            Some(timings.iter().map(|t| (t.stage.clone(), t.ms)).collect())
        }
        _ => None,
    }
}

/// Runs a query and streams its pipeline events as Server-Sent Events
/// (`event: <type>`, `data: <json>`), one per stage as it completes, ending
/// with `done` or `error`. Closing the connection cancels the run.
#[utoipa::path(post, path = "/kbs/{kb}/query", tag = "query",
    params(("kb" = String, Path, description = "Knowledge base name")),
    request_body = QueryBody,
    responses(
        (status = 200, description = "Pipeline events", content_type = "text/event-stream", body = SseEvent),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub(super) async fn query_stream(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
    ApiJson(body): ApiJson<QueryBody>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let permit = state.query_slot(&caller.key_id)?;
    let request = to_request(&state, &caller, &kb, body, true).await?;
    if state.config.log_queries {
        tracing::info!(kb = %kb, query = %request.query, "query");
    }
    let metrics = state.metrics.clone();
    let mut missed = false;
    let (noted_state, noted_caller) = (state.clone(), caller.clone());
    let events = state
        .engine
        .query_with(&caller.tenant, request, caller.query_options())
        .map(move |e| {
            let _held = &permit;
            note_answer(&noted_state, &noted_caller, &e);
            missed |= is_miss(&e);
            if let Some(t) = stage_timings(&e) {
                metrics.query(&t, missed);
            }
            let data = serde_json::to_string(&e).unwrap_or_else(|_| "{}".into());
            Ok(Event::default().event(e.kind()).data(data))
        });
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}

/// Runs a query and returns the same events as the stream, as one JSON document.
#[utoipa::path(post, path = "/kbs/{kb}/query/sync", tag = "query",
    params(("kb" = String, Path, description = "Knowledge base name")),
    request_body = QueryBody,
    responses((status = 200, body = QueryEvents),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub(super) async fn query_json(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
    ApiJson(body): ApiJson<QueryBody>,
) -> Result<Json<QueryEvents>, ApiError> {
    let _permit = state.query_slot(&caller.key_id)?;
    let request = to_request(&state, &caller, &kb, body, true).await?;
    let events: Vec<PipelineEvent> = state
        .engine
        .query_with(&caller.tenant, request, caller.query_options())
        .inspect(|e| note_answer(&state, &caller, e))
        .collect()
        .await;
    if let Some(t) = events.last().and_then(stage_timings) {
        state.metrics.query(&t, events.iter().any(is_miss));
    }
    Ok(Json(QueryEvents { events }))
}

/// Ranked lists of a retrieval, kept for re-fusion.
#[derive(Debug, Serialize, ToSchema)]
pub struct Retrieval {
    /// Id of the cached candidate lists, for `/refuse`.
    pub candidates_id: String,
    /// Seconds the candidates stay cached.
    pub expires_in_s: u64,
    /// The events of the run (analysis, each path's list with highlights, fusion, rerank).
    pub events: Vec<PipelineEvent>,
}

/// Runs the chosen paths only and returns their ranked lists with
/// explanations and highlights; the candidate lists are cached so they can be
/// re-fused with other weights without recomputing recall.
#[utoipa::path(post, path = "/kbs/{kb}/retrieve", tag = "query",
    params(("kb" = String, Path, description = "Knowledge base name")),
    request_body = QueryBody,
    responses((status = 200, body = Retrieval),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub(super) async fn retrieve(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
    ApiJson(body): ApiJson<QueryBody>,
) -> Result<Json<Retrieval>, ApiError> {
    let _permit = state.query_slot(&caller.key_id)?;
    let request = to_request(&state, &caller, &kb, body, false).await?;
    let events: Vec<PipelineEvent> = state
        .engine
        .query_with(&caller.tenant, request, caller.query_options())
        .inspect(|e| note_answer(&state, &caller, e))
        .collect()
        .await;
    if let Some(PipelineEvent::Error { code, message }) = events.last() {
        return Err(ApiError::from_code(code, message.clone()));
    }
    let lists: Vec<RankedList> = events
        .iter()
        .filter_map(|e| match e {
            PipelineEvent::Recall { list, .. } => Some(list.clone()),
            _ => None,
        })
        .collect();
    // The λ the run applied (requested, or suggested for this query), so a
    // re-fusion without one fuses as the run did.
    let (applied_lambda, second_weight_factor) = events
        .iter()
        .find_map(|e| match e {
            PipelineEvent::Fused {
                lexical_interpolation,
                second_weight_factor,
                ..
            } => Some((*lexical_interpolation, *second_weight_factor)),
            _ => None,
        })
        .unwrap_or_default();
    let candidates_id = state.keep_candidates(CachedCandidates {
        tenant: caller.tenant.clone(),
        viewer: caller.viewer(),
        kb,
        lists,
        applied_lambda,
        second_weight_factor,
        created: std::time::Instant::now(),
    });
    Ok(Json(Retrieval {
        candidates_id,
        expires_in_s: CANDIDATES_TTL.as_secs(),
        events,
    }))
}

/// New fusion settings for cached candidates.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RefuseBody {
    /// From `/retrieve`.
    pub candidates_id: String,
    /// RRF k.
    #[serde(default)]
    pub k: Option<f64>,
    /// Per-path weights.
    #[serde(default)]
    pub weights: Option<PathWeights>,
    /// λ in [0, 1].
    #[serde(default)]
    pub lexical_interpolation: Option<f64>,
    /// Hits kept.
    #[serde(default)]
    pub top_k: Option<usize>,
}

/// The result of a re-fusion.
#[derive(Debug, Serialize, ToSchema)]
pub struct Refused {
    /// The fusion parameters applied.
    pub fusion: FusionParams,
    /// The fused ranking with explanations.
    pub fused: rag_core::Fused,
}

/// Re-fuses cached candidate lists with new weights, k or λ (no recall runs).
#[utoipa::path(post, path = "/kbs/{kb}/refuse", tag = "query",
    params(("kb" = String, Path, description = "Knowledge base name")),
    request_body = RefuseBody,
    responses((status = 200, body = Refused), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(super) async fn refuse(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
    ApiJson(body): ApiJson<RefuseBody>,
) -> Result<Json<Refused>, ApiError> {
    check_k("top_k", body.top_k, state.config.limits.max_top_k)?;
    let cached = {
        let map = state.candidates.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&body.candidates_id).cloned()
    };
    let cached = cached
        .filter(|c| {
            c.tenant == caller.tenant
                && c.viewer == caller.viewer()
                && c.kb == kb
                && c.created.elapsed() < CANDIDATES_TTL
        })
        .ok_or_else(|| {
            ApiError::not_found(
                "no cached candidates with that id (they expire; run /retrieve again)",
            )
        })?;
    let kb_row = state.engine.kb(&caller.tenant, &kb).await?;
    let mut fusion = kb_row.settings.retrieval.fusion;
    if let Some(k) = body.k {
        fusion.k = k;
    }
    if let Some(w) = body.weights {
        fusion.weights = w;
    }
    // λ: the request's, else the knowledge base's, else the one the run applied
    // (the per-query suggestion).
    let chosen = body.lexical_interpolation.or(fusion.lexical_interpolation);
    if chosen.is_none() && body.weights.is_none() {
        // The run's automatic rule, as it fused.
        fusion.weights.second_dense *= cached.second_weight_factor.unwrap_or(1.0);
    }
    fusion.lexical_interpolation = chosen.or(cached.applied_lambda);
    if let Some(t) = body.top_k {
        fusion.top_k = t;
    }
    fusion.validate().map_err(rag_core::CoreError::from)?;
    let fused = rag_core::Fuser::fuse(&rag_fusion::Fusion::new(fusion), &cached.lists);
    Ok(Json(Refused { fusion, fused }))
}

/// Settings to replay a logged question under (absent fields: as logged).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayBody {
    /// Paths to run.
    #[serde(default)]
    pub paths: Option<Vec<rag_core::PathKind>>,
    /// Per-path weights.
    #[serde(default)]
    pub weights: Option<rag_core::PathWeights>,
    /// λ.
    #[serde(default)]
    pub lexical_interpolation: Option<f64>,
    /// RRF k.
    #[serde(default)]
    pub k: Option<f64>,
    /// Hits kept after fusion.
    #[serde(default)]
    pub top_k: Option<usize>,
    /// Generate an answer.
    #[serde(default)]
    pub generate: Option<bool>,
}

/// Re-runs a logged question under new settings and returns its events.
#[utoipa::path(post, path = "/log/{id}/replay", tag = "ops", params(("id" = String, Path)), request_body = ReplayBody,
    responses((status = 200, body = QueryEvents), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub(super) async fn replay(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(b): ApiJson<ReplayBody>,
) -> Result<Json<QueryEvents>, ApiError> {
    let _permit = state.query_slot(&caller.key_id)?;
    let rec = crate::ops::entry(&state, &caller, &id).await?;
    let kb = state
        .engine
        .store()
        .list_kbs(&caller.tenant)
        .await?
        .into_iter()
        .find(|k| k.id == rec.kb)
        .ok_or_else(|| ApiError::not_found("the knowledge base of that query no longer exists"))?;
    // The logged run's parameters are the base, so the replay ranks as that
    // run did whatever the knowledge base's settings are now; the body's
    // fields change only what they name.
    let overrides = rag_core::RetrievalOverrides {
        paths: b.paths,
        weights: b.weights,
        lexical_interpolation: b.lexical_interpolation,
        k: b.k,
        top_k: b.top_k,
        ..Default::default()
    };
    check_k("top_k", overrides.top_k, state.config.limits.max_top_k)?;
    let request = QueryRequest {
        kb: kb.name.clone(),
        query: rec.rewritten_query.clone().unwrap_or(rec.query.clone()),
        params: Some(rec.params.clone()),
        overrides,
        filters: rec.filters.clone(),
        generate: b.generate.unwrap_or(rec.answer.is_some()),
        conversation_id: None,
    };
    let events: Vec<PipelineEvent> = state
        .engine
        .query_with(&caller.tenant, request, caller.query_options())
        .collect()
        .await;
    Ok(Json(QueryEvents { events }))
}
