//! Knowledge-ops routes: the query log (filters, feedback, replay under new
//! settings), the FAQ tool for agents, and analytics (hit rates,
//! never-retrieved entries, misses, score distribution), and conversations.

use crate::api::{to_request, QueryBody, QueryEvents};
use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::extract::ApiJson;
use crate::state::AppState;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use futures::StreamExt;
use rag_core::{ConversationSummary, LogFilter, PassageId, PipelineEvent, QueryLogRecord};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use utoipa::{IntoParams, ToSchema};

/// Query-log filters.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LogQuery {
    /// Only misses (true) or only answered questions (false).
    pub kb_miss: Option<bool>,
    /// Only one conversation.
    pub conversation_id: Option<String>,
    /// Created at or after (unix seconds).
    pub since: Option<i64>,
    /// At most this many, newest first (default 100, at most 1000).
    pub limit: Option<usize>,
}

/// The query log of a knowledge base, newest first.
#[utoipa::path(get, path = "/kbs/{kb}/log", tag = "ops", params(("kb" = String, Path), LogQuery),
    responses((status = 200, body = Vec<QueryLogRecord>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn list_log(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
    Query(q): Query<LogQuery>,
) -> Result<Json<Vec<QueryLogRecord>>, ApiError> {
    let kb = state.engine.kb(&caller.tenant, &kb).await?;
    let filter = LogFilter {
        kb_miss: q.kb_miss,
        conversation_id: q.conversation_id,
        since: q.since,
        limit: q.limit.unwrap_or(100).clamp(1, 1000),
        viewer: caller.viewer(),
    };
    Ok(Json(state.engine.store().query_log(&caller.tenant, kb.id, &filter).await?))
}

async fn entry(state: &AppState, caller: &Caller, id: &str) -> Result<QueryLogRecord, ApiError> {
    state.engine.store().query_log_entry(&caller.tenant, id, &caller.viewer()).await?.ok_or_else(|| ApiError::not_found(format!("query {id:?} not found")))
}

/// One query-log row.
#[utoipa::path(get, path = "/log/{id}", tag = "ops", params(("id" = String, Path)),
    responses((status = 200, body = QueryLogRecord), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn get_log(State(state): State<AppState>, caller: Caller, Path(id): Path<String>) -> Result<Json<QueryLogRecord>, ApiError> {
    Ok(Json(entry(&state, &caller, &id).await?))
}

/// Feedback on an answer.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FeedbackBody {
    /// "useful" or "not_useful".
    pub feedback: String,
}

/// Records a user's feedback on an answer.
#[utoipa::path(post, path = "/log/{id}/feedback", tag = "ops", params(("id" = String, Path)), request_body = FeedbackBody,
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn feedback(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(b): ApiJson<FeedbackBody>,
) -> Result<StatusCode, ApiError> {
    if b.feedback != "useful" && b.feedback != "not_useful" {
        return Err(ApiError::bad_request("invalid_param", "feedback is \"useful\" or \"not_useful\""));
    }
    if state.engine.store().set_feedback(&caller.tenant, &id, &caller.viewer(), &b.feedback).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!("query {id:?} not found")))
    }
}

/// Settings to replay a logged question under (absent fields: as logged).
#[derive(Debug, Deserialize, ToSchema)]
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
pub(crate) async fn replay(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(b): ApiJson<ReplayBody>,
) -> Result<Json<QueryEvents>, ApiError> {
    let _permit = state.query_slot(&caller.key_id)?;
    let rec = entry(&state, &caller, &id).await?;
    let kb = state
        .engine
        .store()
        .list_kbs(&caller.tenant)
        .await?
        .into_iter()
        .find(|k| k.id == rec.kb)
        .ok_or_else(|| ApiError::not_found("the knowledge base of that query no longer exists"))?;
    let body = QueryBody {
        query: rec.rewritten_query.clone().unwrap_or(rec.query.clone()),
        paths: Some(b.paths.unwrap_or(rec.params.paths.clone())),
        per_path_k: Some(rec.params.per_path_k),
        top_k: Some(b.top_k.unwrap_or(rec.params.fusion.top_k)),
        rerank_top_k: Some(rec.params.rerank_top_k),
        k: Some(b.k.unwrap_or(rec.params.fusion.k)),
        weights: Some(b.weights.unwrap_or(rec.params.fusion.weights)),
        lexical_interpolation: b.lexical_interpolation.or(rec.params.fusion.lexical_interpolation),
        rerank: Some(rec.params.rerank),
        filters: Some(crate::api::FilterBody {
            tags: rec.filters.tags.clone(),
            created_after: rec.filters.created_after,
            created_before: rec.filters.created_before,
        }),
        generate: Some(b.generate.unwrap_or(rec.answer.is_some())),
        conversation_id: None,
    };
    let request = to_request(&state, &caller, &kb.name, body, true).await?;
    let events: Vec<PipelineEvent> = state.engine.query_with(&caller.tenant, request, caller.query_options()).collect().await;
    Ok(Json(QueryEvents { events }))
}

/// A question for the FAQ tool.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FaqToolBody {
    /// The question.
    pub query: String,
}

/// The tool's text.
#[derive(Debug, Serialize, ToSchema)]
pub struct FaqToolText {
    /// "Q: … A: … Source: …" per approved hit, or "No relevant FAQs found for: <query>".
    pub text: String,
}

/// The FAQ lookup tool for agents.
#[utoipa::path(post, path = "/kbs/{kb}/faq-tool", tag = "ops", params(("kb" = String, Path)), request_body = FaqToolBody,
    responses((status = 200, body = FaqToolText), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub(crate) async fn faq_tool(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
    ApiJson(b): ApiJson<FaqToolBody>,
) -> Result<Json<FaqToolText>, ApiError> {
    state.engine.check_query(&b.query)?;
    Ok(Json(FaqToolText { text: state.engine.faq_tool(&caller.tenant, &kb, &b.query, &caller.viewer()).await? }))
}

/// A passage nobody's question reached.
#[derive(Debug, Serialize, ToSchema)]
pub struct NeverRetrieved {
    /// The passage.
    pub id: PassageId,
    /// Its title.
    pub title: String,
}

/// Knowledge-ops figures over the query log.
#[derive(Debug, Serialize, ToSchema)]
pub struct Analytics {
    /// Questions logged (at most the last 10,000).
    pub queries: usize,
    /// Of those, answered by the knowledge base (not a miss, at least one hit).
    pub hits: usize,
    /// Misses.
    pub misses: usize,
    /// hits / queries.
    pub hit_rate: f64,
    /// Feedback counts.
    pub useful: usize,
    /// Feedback counts.
    pub not_useful: usize,
    /// The latest missed questions.
    pub recent_misses: Vec<String>,
    /// Searchable FAQ entries and chunks that no logged question retrieved.
    pub never_retrieved: Vec<NeverRetrieved>,
    /// Histogram of the best normalised fused score, ten buckets over [0, 1].
    pub top_score_histogram: Vec<usize>,
}

/// Hit rate, misses, never-retrieved entries and score distribution.
#[utoipa::path(get, path = "/kbs/{kb}/analytics", tag = "ops", params(("kb" = String, Path)),
    responses((status = 200, body = Analytics), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn analytics(State(state): State<AppState>, caller: Caller, Path(kb): Path<String>) -> Result<Json<Analytics>, ApiError> {
    let kb = state.engine.kb(&caller.tenant, &kb).await?;
    let log = state
        .engine
        .store()
        .query_log(&caller.tenant, kb.id, &LogFilter { limit: 10_000, viewer: caller.viewer(), ..Default::default() })
        .await?;
    let index = state.engine.index(&caller.tenant, &kb).await?;
    let viewer = caller.viewer();
    let mut seen: HashSet<PassageId> = HashSet::new();
    let mut hist = vec![0usize; 10];
    let (mut hits, mut misses, mut useful, mut not_useful) = (0, 0, 0, 0);
    let mut recent_misses = Vec::new();
    for r in &log {
        seen.extend(r.fused.iter().map(|h| h.id));
        if r.kb_miss || r.fused.is_empty() {
            misses += 1;
            if recent_misses.len() < 20 {
                recent_misses.push(r.query.clone());
            }
        } else {
            hits += 1;
        }
        if let Some(s) = r.top_fused_score {
            hist[((s.clamp(0.0, 1.0) * 10.0) as usize).min(9)] += 1;
        }
        match r.feedback.as_deref() {
            Some("useful") => useful += 1,
            Some("not_useful") => not_useful += 1,
            _ => {}
        }
    }
    let never_retrieved = index
        .lexical
        .passages()
        .iter()
        .filter(|p| p.searchable && viewer.sees(p.owner.as_deref()) && !seen.contains(&p.id))
        .take(500)
        .map(|p| NeverRetrieved { id: p.id, title: p.title.clone() })
        .collect();
    let queries = log.len();
    Ok(Json(Analytics {
        queries,
        hits,
        misses,
        hit_rate: if queries == 0 { 0.0 } else { hits as f64 / queries as f64 },
        useful,
        not_useful,
        recent_misses,
        never_retrieved,
        top_score_histogram: hist,
    }))
}

// ---------------------------------------------------------------- conversations

/// How many conversations to list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ConversationsQuery {
    /// At most this many, latest activity first (default 100, at most 1000).
    pub limit: Option<usize>,
}

/// Conversations of a knowledge base (questions sent with a
/// `conversation_id`), latest activity first.
#[utoipa::path(get, path = "/kbs/{kb}/conversations", tag = "ops", params(("kb" = String, Path), ConversationsQuery),
    responses((status = 200, body = Vec<ConversationSummary>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn list_conversations(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
    Query(q): Query<ConversationsQuery>,
) -> Result<Json<Vec<ConversationSummary>>, ApiError> {
    let kb = state.engine.kb(&caller.tenant, &kb).await?;
    let limit = q.limit.unwrap_or(100).clamp(1, 1000);
    Ok(Json(state.engine.store().conversations(&caller.tenant, kb.id, &caller.viewer(), limit).await?))
}

/// One turn of a conversation.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConversationTurn {
    /// The query-log row of the turn.
    pub query_id: String,
    /// When.
    pub created_at: i64,
    /// The question as asked.
    pub query: String,
    /// The standalone question searched, when the follow-up was rewritten.
    pub rewritten_query: Option<String>,
    /// The answer, if one was generated.
    pub answer: Option<String>,
    /// Sources the answer cited.
    pub cited: Vec<rag_core::CitedSource>,
    /// The knowledge base could not answer.
    pub kb_miss: bool,
    /// User feedback.
    pub feedback: Option<String>,
}

/// A conversation with its turns, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct Conversation {
    /// Its id.
    pub id: String,
    /// Turns, oldest first (at most the latest 1,000).
    pub turns: Vec<ConversationTurn>,
}

/// A conversation's turns.
#[utoipa::path(get, path = "/kbs/{kb}/conversations/{id}", tag = "ops", params(("kb" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = Conversation), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn get_conversation(
    State(state): State<AppState>,
    caller: Caller,
    Path((kb, id)): Path<(String, String)>,
) -> Result<Json<Conversation>, ApiError> {
    let kb = state.engine.kb(&caller.tenant, &kb).await?;
    let filter = LogFilter { conversation_id: Some(id.clone()), limit: 1000, viewer: caller.viewer(), ..Default::default() };
    let mut rows = state.engine.store().query_log(&caller.tenant, kb.id, &filter).await?;
    if rows.is_empty() {
        return Err(ApiError::not_found(format!("conversation {id:?} not found")));
    }
    rows.reverse();
    let turns = rows
        .into_iter()
        .map(|r| ConversationTurn {
            query_id: r.id,
            created_at: r.created_at,
            query: r.query,
            rewritten_query: r.rewritten_query,
            answer: r.answer,
            cited: r.cited,
            kb_miss: r.kb_miss,
            feedback: r.feedback,
        })
        .collect();
    Ok(Json(Conversation { id, turns }))
}

/// Forgets a conversation: its turns leave the query log, and a question sent
/// with its id afterwards starts afresh.
#[utoipa::path(delete, path = "/kbs/{kb}/conversations/{id}", tag = "ops", params(("kb" = String, Path), ("id" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn delete_conversation(
    State(state): State<AppState>,
    caller: Caller,
    Path((kb, id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    caller.require_write()?;
    let kb = state.engine.kb(&caller.tenant, &kb).await?;
    if state.engine.store().delete_conversation(&caller.tenant, kb.id, &id, &caller.viewer()).await? == 0 {
        return Err(ApiError::not_found(format!("conversation {id:?} not found")));
    }
    Ok(StatusCode::NO_CONTENT)
}
