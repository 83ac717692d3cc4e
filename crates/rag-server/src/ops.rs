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
use rag_core::{ConversationSummary, LogFilter, PassageId, QueryLogRecord};
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

/// A passage nobody's question reached.
#[derive(Debug, Serialize, ToSchema)]
pub struct NeverRetrieved {
    /// The passage.
    pub id: PassageId,
    /// Its title.
    pub title: String,
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

/// One day of questions.
#[derive(Debug, Serialize, ToSchema)]
pub struct DayStat {
    /// Start of the day (UTC), unix seconds.
    pub day: i64,
    /// Questions.
    pub queries: usize,
    /// Answered from the knowledge base.
    pub hits: usize,
    /// Misses.
    pub misses: usize,
}

/// A question asked more than once.
#[derive(Debug, Serialize, ToSchema)]
pub struct TopQuery {
    /// The question (as first asked; grouped case- and space-insensitively).
    pub query: String,
    /// Times asked.
    pub count: usize,
    /// Times it was a miss.
    pub misses: usize,
    /// Last asked (unix seconds).
    pub last_at: i64,
}

/// An FAQ entry due for review.
#[derive(Debug, Serialize, ToSchema)]
pub struct Unreviewed {
    /// The entry.
    pub id: rag_core::FaqId,
    /// Its question.
    pub question: String,
    /// Last change (unix seconds).
    pub updated_at: i64,
}

/// Knowledge-ops figures over the query log.
#[derive(Debug, Serialize, ToSchema)]
pub struct Analytics {
    /// The window, in days.
    pub days: u32,
    /// Questions logged in the window (at most the latest 10,000).
    pub queries: usize,
    /// Of those, answered by the knowledge base (not a miss, at least one hit).
    pub hits: usize,
    /// Misses.
    pub misses: usize,
    /// hits / queries.
    pub hit_rate: f64,
    /// Per day (UTC), oldest first, days without questions included.
    pub by_day: Vec<DayStat>,
    /// The most asked questions with their misses.
    pub top_queries: Vec<TopQuery>,
    /// Feedback counts.
    pub useful: usize,
    /// Feedback counts.
    pub not_useful: usize,
    /// useful / (useful + not_useful), when any feedback was given.
    pub usefulness: Option<f64>,
    /// The latest missed questions.
    pub recent_misses: Vec<String>,
    /// Searchable FAQ entries and chunks that no question of the window retrieved ("zombies").
    pub never_retrieved: Vec<NeverRetrieved>,
    /// FAQ entries not changed for `review_days` days.
    pub unreviewed: Vec<Unreviewed>,
    /// The review age, in days.
    pub review_days: u32,
    /// Synonym groups none of whose terms fired in the window.
    pub synonyms_never_fired: Vec<Vec<String>>,
    /// Histogram of the best normalised fused score, ten buckets over [0, 1].
    pub top_score_histogram: Vec<usize>,
    /// Histogram of the best cosine of the dense path, ten buckets over [0, 1] (questions where it ran).
    pub top_cosine_histogram: Vec<usize>,
    /// The knowledge base's miss threshold on the fused score (drawn on its histogram).
    pub min_fused: Option<f64>,
    /// The knowledge base's miss threshold on the cosine.
    pub min_cosine: Option<f64>,
}

const DAY: i64 = 86_400;

/// Hit rate over time, top questions, misses, zombies, entries due for
/// review, synonyms that never fire, feedback and score distributions with
/// the miss thresholds.
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
    let kb = state.engine.kb(&caller.tenant, &kb_name).await?;
    let now = rag_core::now();
    let since = now - days as i64 * DAY;
    let viewer = caller.viewer();
    let log = state
        .engine
        .store()
        .query_log(
            &caller.tenant,
            kb.id,
            &LogFilter {
                limit: 10_000,
                since: Some(since),
                viewer: viewer.clone(),
                ..Default::default()
            },
        )
        .await?;
    let index = state.engine.index(&caller.tenant, &kb).await?;
    let lexicon = state.engine.lexicon(&caller.tenant, &kb_name).await?;
    let mut seen: HashSet<PassageId> = HashSet::new();
    let mut fired: HashSet<String> = HashSet::new();
    let (mut fused_hist, mut cosine_hist) = (vec![0usize; 10], vec![0usize; 10]);
    let bucket = |s: f64| ((s.clamp(0.0, 1.0) * 10.0) as usize).min(9);
    let (mut hits, mut misses, mut useful, mut not_useful) = (0, 0, 0, 0);
    let mut recent_misses = Vec::new();
    let first_day = since.div_euclid(DAY) * DAY;
    let mut by_day: Vec<DayStat> = (0..=days as i64)
        .map(|i| DayStat {
            day: first_day + i * DAY,
            queries: 0,
            hits: 0,
            misses: 0,
        })
        .filter(|d| d.day <= now)
        .collect();
    let mut grouped: std::collections::HashMap<String, TopQuery> = std::collections::HashMap::new();
    for r in &log {
        seen.extend(r.fused.iter().map(|h| h.id));
        fired.extend(r.fired_synonyms.iter().flatten().map(|t| t.to_lowercase()));
        let missed = r.kb_miss || r.fused.is_empty();
        if missed {
            misses += 1;
            if recent_misses.len() < 20 {
                recent_misses.push(r.query.clone());
            }
        } else {
            hits += 1;
        }
        let slot = ((r.created_at.div_euclid(DAY) * DAY - first_day) / DAY) as usize;
        if let Some(d) = by_day.get_mut(slot) {
            d.queries += 1;
            if missed {
                d.misses += 1;
            } else {
                d.hits += 1;
            }
        }
        let key: String = r
            .query
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase();
        let e = grouped.entry(key).or_insert_with(|| TopQuery {
            query: r.query.clone(),
            count: 0,
            misses: 0,
            last_at: r.created_at,
        });
        e.count += 1;
        e.misses += missed as usize;
        e.last_at = e.last_at.max(r.created_at);
        if let Some(s) = r.top_fused_score {
            fused_hist[bucket(s)] += 1;
        }
        if let Some(c) = r.top1_cosine {
            cosine_hist[bucket(c)] += 1;
        }
        match r.feedback.as_deref() {
            Some("useful") => useful += 1,
            Some("not_useful") => not_useful += 1,
            _ => {}
        }
    }
    let mut top_queries: Vec<TopQuery> = grouped.into_values().collect();
    top_queries.sort_by(|a, b| b.count.cmp(&a.count).then(b.last_at.cmp(&a.last_at)));
    top_queries.truncate(20);
    let never_retrieved = index
        .lexical
        .passages()
        .filter(|p| p.searchable && viewer.sees(p.owner.as_deref()) && !seen.contains(&p.id))
        .take(500)
        .map(|p| NeverRetrieved {
            id: p.id,
            title: p.title.clone(),
        })
        .collect();
    let review_before = now - review_days as i64 * DAY;
    let mut unreviewed: Vec<Unreviewed> = state
        .engine
        .faqs(&caller.tenant, &kb_name)
        .await?
        .into_iter()
        .filter(|f| f.updated_at < review_before)
        .map(|f| Unreviewed {
            id: f.id,
            question: f.question,
            updated_at: f.updated_at,
        })
        .collect();
    unreviewed.sort_by_key(|u| u.updated_at);
    unreviewed.truncate(500);
    let synonyms_never_fired = lexicon
        .synonyms
        .iter()
        .filter(|g| !g.terms.iter().any(|t| fired.contains(&t.to_lowercase())))
        .map(|g| g.terms.clone())
        .collect();
    let queries = log.len();
    Ok(Json(Analytics {
        days,
        queries,
        hits,
        misses,
        hit_rate: if queries == 0 {
            0.0
        } else {
            hits as f64 / queries as f64
        },
        by_day,
        top_queries,
        useful,
        not_useful,
        usefulness: (useful + not_useful > 0).then(|| useful as f64 / (useful + not_useful) as f64),
        recent_misses,
        never_retrieved,
        unreviewed,
        review_days,
        synonyms_never_fired,
        top_score_histogram: fused_hist,
        top_cosine_histogram: cosine_hist,
        min_fused: kb.settings.answer.min_fused,
        min_cosine: kb.settings.answer.min_cosine,
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
