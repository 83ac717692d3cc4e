//! Knowledge-ops routes: the query log (filters, feedback; replaying a logged
//! question is a query, in `api/query.rs`), the FAQ tool for agents, and
//! analytics (hit rates, never-retrieved entries, misses, score
//! distribution), and conversations.

use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::extract::ApiJson;
use crate::state::AppState;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use rag_core::{ConversationSummary, LogFilter, QueryLogRecord};
use rag_engine::Analytics;
use serde::{Deserialize, Serialize};
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
        before: None,
        viewer: caller.viewer(),
    };
    Ok(Json(
        state
            .engine
            .store()
            .query_log(&caller.tenant, kb.id, &filter)
            .await?,
    ))
}

/// One query-log row the caller may see, or 404.
pub(crate) async fn entry(
    state: &AppState,
    caller: &Caller,
    id: &str,
) -> Result<QueryLogRecord, ApiError> {
    state
        .engine
        .store()
        .query_log_entry(&caller.tenant, id, &caller.viewer())
        .await?
        .ok_or_else(|| ApiError::not_found(format!("query {id:?} not found")))
}

/// One query-log row.
#[utoipa::path(get, path = "/log/{id}", tag = "ops", params(("id" = String, Path)),
    responses((status = 200, body = QueryLogRecord), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn get_log(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<QueryLogRecord>, ApiError> {
    Ok(Json(entry(&state, &caller, &id).await?))
}

/// Feedback on an answer.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FeedbackBody {
    /// "useful" or "not_useful".
    pub feedback: String,
}

/// Records a user's feedback on an answer. A widget key may rate the
/// answers given to it (by this server, within a day) and no others.
#[utoipa::path(post, path = "/log/{id}/feedback", tag = "ops", params(("id" = String, Path)), request_body = FeedbackBody,
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn feedback(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(b): ApiJson<FeedbackBody>,
) -> Result<StatusCode, ApiError> {
    if b.feedback != "useful" && b.feedback != "not_useful" {
        return Err(ApiError::bad_request(
            "invalid_param",
            "feedback is \"useful\" or \"not_useful\"",
        ));
    }
    // A widget key rates only the answers it was given (it cannot read the
    // log, so it knows no other ids; this makes sure of it).
    if caller.is_widget() && !state.answered_to(&id, &caller.key_id) {
        return Err(ApiError::not_found(format!("query {id:?} not found")));
    }
    if state
        .engine
        .store()
        .set_feedback(&caller.tenant, &id, &caller.viewer(), &b.feedback)
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!("query {id:?} not found")))
    }
}

/// A question for the FAQ tool.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
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
    Ok(Json(FaqToolText {
        text: state
            .engine
            .faq_tool(&caller.tenant, &kb, &b.query, &caller.viewer())
            .await?,
    }))
}

/// The window of the analytics.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AnalyticsQuery {
    /// Look at the questions of the last this many days (default 30, 1 to 3650).
    pub days: Option<u32>,
    /// FAQ entries unchanged for this many days are due for review (default 90).
    pub review_days: Option<u32>,
}

/// Hit rate over time, top questions, misses, zombies, entries due for
/// review, synonyms that never fire, feedback and score distributions with
/// the miss thresholds, over every logged question of the window the caller
/// may see.
#[utoipa::path(get, path = "/kbs/{kb}/analytics", tag = "ops", params(("kb" = String, Path), AnalyticsQuery),
    responses((status = 200, body = Analytics), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub(crate) async fn analytics(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb_name): Path<String>,
    Query(q): Query<AnalyticsQuery>,
) -> Result<Json<Analytics>, ApiError> {
    let days = q.days.unwrap_or(30).clamp(1, 3650);
    let review_days = q.review_days.unwrap_or(90).clamp(1, 3650);
    Ok(Json(
        state
            .engine
            .analytics(
                &caller.tenant,
                &kb_name,
                &caller.viewer(),
                days,
                review_days,
            )
            .await?,
    ))
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
    Ok(Json(
        state
            .engine
            .store()
            .conversations(&caller.tenant, kb.id, &caller.viewer(), limit)
            .await?,
    ))
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
    let filter = LogFilter {
        conversation_id: Some(id.clone()),
        limit: 1000,
        viewer: caller.viewer(),
        ..Default::default()
    };
    let mut rows = state
        .engine
        .store()
        .query_log(&caller.tenant, kb.id, &filter)
        .await?;
    if rows.is_empty() {
        return Err(ApiError::not_found(format!(
            "conversation {id:?} not found"
        )));
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
    if state
        .engine
        .store()
        .delete_conversation(&caller.tenant, kb.id, &id, &caller.viewer())
        .await?
        == 0
    {
        return Err(ApiError::not_found(format!(
            "conversation {id:?} not found"
        )));
    }
    Ok(StatusCode::NO_CONTENT)
}
