//! What the protocol routes do, once: list knowledge bases, search, ask and
//! look up FAQ entries for one resolved caller.
//!
//! MCP's tools, the OpenAI-compatible chat API and Dify's retrieval all call
//! these functions, and these call what `/api/v1` calls: `to_request`
//! (limits, the knowledge base's settings), the caller's query slot, and
//! `Engine::query_with` / `Engine::faq_tool` with the caller's tenant and
//! viewer, so tenant and owner scope hold below every protocol.

use super::access::Access;
use crate::api::query::{to_request, FilterBody, QueryBody};
use crate::error::ApiError;
use crate::state::AppState;
use futures::{Stream, StreamExt};
use rag_core::{PassageId, PassageKind, PassageView, PipelineEvent};
use serde::Serialize;
use std::collections::HashMap;

/// A knowledge base as the protocols list it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct KbSummary {
    /// Its name (the `kb` argument of the tools, the OpenAI model id, Dify's `knowledge_id`).
    pub name: String,
    /// Creation time (unix seconds).
    pub created_at: i64,
}

/// The knowledge bases the caller sees: its tenant's, or the one its key is scoped to.
pub(crate) async fn list_kbs(
    state: &AppState,
    access: &Access,
) -> Result<Vec<KbSummary>, ApiError> {
    Ok(state
        .engine
        .list_kbs(&access.caller.tenant)
        .await?
        .into_iter()
        .filter(|kb| access.sees_kb(&kb.name))
        .map(|kb| KbSummary {
            name: kb.name,
            created_at: kb.created_at,
        })
        .collect())
}

/// One search hit.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SearchHit {
    /// Rank, from 1.
    pub rank: u32,
    /// The passage.
    pub id: PassageId,
    /// FAQ entry, document chunk or fact.
    pub kind: PassageKind,
    /// Title (the question, the document's title, the fact's key).
    pub title: String,
    /// The passage's text.
    pub text: String,
    /// The normalised fused score in [0, 1] (1: first in every path).
    pub score: f64,
    /// Where it came from (document path or URL, FAQ source URL), when known.
    pub source: Option<String>,
}

/// The result of a search.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SearchResult {
    /// Knowledge base.
    pub kb: String,
    /// The query.
    pub query: String,
    /// Hits, best first.
    pub hits: Vec<SearchHit>,
    /// Warnings of the run (a path that could not run, …).
    pub warnings: Vec<String>,
}

/// Searches without generating an answer: the fused (and reranked) hits with their texts.
pub(crate) async fn search(
    state: &AppState,
    access: &Access,
    kb: &str,
    query: String,
    top_k: Option<usize>,
    filters: Option<FilterBody>,
) -> Result<SearchResult, ApiError> {
    access.check_kb(kb)?;
    let _permit = state.query_slot(&access.caller.key_id)?;
    let body = QueryBody {
        top_k,
        rerank_top_k: top_k,
        filters,
        generate: Some(false),
        ..body(query.clone())
    };
    let request = to_request(state, &access.caller, kb, body, false).await?;
    let events: Vec<PipelineEvent> = state
        .engine
        .query_with(&access.caller.tenant, request, access.options())
        .collect()
        .await;
    record_metrics(state, &events);
    fail_on_error(&events)?;
    let mut views: HashMap<PassageId, PassageView> = HashMap::new();
    for e in &events {
        if let PipelineEvent::Recall { passages, .. } = e {
            for p in passages {
                views.entry(p.id).or_insert_with(|| p.clone());
            }
        }
    }
    let hits = events
        .iter()
        .rev()
        .find_map(|e| match e {
            PipelineEvent::Reranked { hits, .. } => Some(hits),
            _ => None,
        })
        .map(|hits| {
            hits.iter()
                .filter_map(|h| {
                    let v = views.get(&h.id)?;
                    Some(SearchHit {
                        rank: h.rank,
                        id: h.id,
                        kind: v.kind,
                        title: v.title.clone(),
                        text: v.body.clone(),
                        score: h.normalized.clamp(0.0, 1.0),
                        source: v.source.clone(),
                    })
                })
                .enumerate()
                .map(|(i, mut h)| {
                    h.rank = i as u32 + 1;
                    h
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(SearchResult {
        kb: kb.to_owned(),
        query,
        hits,
        warnings: warnings(&events),
    })
}

/// A source of an answer.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct AnswerSource {
    /// The `[n]` number the answer cites it by.
    pub n: u32,
    /// The passage.
    pub id: PassageId,
    /// Title.
    pub title: String,
    /// Where it came from, when known.
    pub source: Option<String>,
    /// The text the answer was given from.
    pub text: String,
}

/// A cited answer.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Answer {
    /// Knowledge base.
    pub kb: String,
    /// The question as asked.
    pub question: String,
    /// The answer, with `[n]` citations.
    pub answer: String,
    /// The knowledge base did not support an answer: the fixed reply was given.
    pub kb_miss: bool,
    /// The sources the answer cites.
    pub sources: Vec<AnswerSource>,
    /// The query-log id of this answer (for feedback).
    pub log_id: Option<String>,
    /// The conversation it belongs to, when one was given.
    pub conversation_id: Option<String>,
    /// How a follow-up was rewritten into a standalone query ("heuristic", "llm"), if it was.
    pub rewrite_method: Option<String>,
    /// Warnings of the run.
    pub warnings: Vec<String>,
    /// Tokens the LLM provider counted, when one answered.
    #[serde(skip)]
    pub usage: Option<rag_core::TokenUsage>,
}

impl Answer {
    /// The answer of a finished run's events (`Err` for an `error` event).
    pub(crate) fn from_events(
        kb: &str,
        question: &str,
        conversation_id: Option<String>,
        events: &[PipelineEvent],
    ) -> Result<Answer, ApiError> {
        fail_on_error(events)?;
        let mut answer = Answer {
            kb: kb.to_owned(),
            question: question.to_owned(),
            answer: String::new(),
            kb_miss: false,
            sources: Vec::new(),
            log_id: None,
            conversation_id,
            rewrite_method: None,
            warnings: warnings(events),
            usage: None,
        };
        let mut packed: HashMap<u32, &PassageView> = HashMap::new();
        for e in events {
            match e {
                PipelineEvent::QueryReceived { query_id, .. } => {
                    answer.log_id = Some(query_id.clone())
                }
                PipelineEvent::QueryAnalyzed { rewrite_method, .. } => {
                    answer.rewrite_method = rewrite_method.clone()
                }
                PipelineEvent::ContextAssembled { sources, .. } => {
                    packed = sources.iter().map(|s| (s.n, &s.passage)).collect();
                }
                PipelineEvent::Answered {
                    text,
                    kb_miss,
                    cited,
                    usage,
                    ..
                } => {
                    answer.answer = text.clone();
                    answer.usage = *usage;
                    answer.kb_miss = *kb_miss;
                    answer.sources = cited
                        .iter()
                        .map(|c| AnswerSource {
                            n: c.n,
                            id: c.id,
                            title: c.title.clone(),
                            source: c.source.clone(),
                            text: packed.get(&c.n).map(|p| p.body.clone()).unwrap_or_default(),
                        })
                        .collect();
                }
                _ => {}
            }
        }
        Ok(answer)
    }
}

/// Starts a cited answer and returns its events as they come (the caller's
/// query slot is held until the stream ends or is dropped, which cancels the
/// run). The request is checked before anything runs: an unknown knowledge
/// base or a bad parameter is an `Err`, not a stream.
pub(crate) async fn ask_events(
    state: &AppState,
    access: &Access,
    kb: &str,
    question: String,
    conversation_id: Option<String>,
) -> Result<impl Stream<Item = PipelineEvent> + Send + 'static, ApiError> {
    access.check_kb(kb)?;
    let permit = state.query_slot(&access.caller.key_id)?;
    let body = QueryBody {
        generate: Some(true),
        conversation_id,
        ..body(question)
    };
    let request = to_request(state, &access.caller, kb, body, true).await?;
    let metrics = state.metrics.clone();
    let mut missed = false;
    Ok(state
        .engine
        .query_with(&access.caller.tenant, request, access.options())
        .map(move |e| {
            let _held = &permit;
            missed |= crate::api::query::is_miss(&e);
            if let Some(t) = crate::api::query::stage_timings(&e) {
                metrics.query(&t, missed);
            }
            e
        }))
}

/// A cited answer, whole.
pub(crate) async fn ask(
    state: &AppState,
    access: &Access,
    kb: &str,
    question: String,
    conversation_id: Option<String>,
) -> Result<Answer, ApiError> {
    let events: Vec<PipelineEvent> =
        ask_events(state, access, kb, question.clone(), conversation_id.clone())
            .await?
            .collect()
            .await;
    Answer::from_events(kb, &question, conversation_id, &events)
}

/// The FAQ tool's text: `Q: … A: … Source: …` per approved hit, or
/// `No relevant FAQs found for: <query>`.
pub(crate) async fn faq_lookup(
    state: &AppState,
    access: &Access,
    kb: &str,
    query: &str,
) -> Result<String, ApiError> {
    access.check_kb(kb)?;
    let _permit = state.query_slot(&access.caller.key_id)?;
    state.engine.check_query(query)?;
    Ok(state
        .engine
        .faq_tool(&access.caller.tenant, kb, query, &access.viewer)
        .await?)
}

/// A query body with only the question set.
fn body(query: String) -> QueryBody {
    QueryBody {
        query,
        paths: None,
        per_path_k: None,
        top_k: None,
        rerank_top_k: None,
        k: None,
        weights: None,
        lexical_interpolation: None,
        rerank: None,
        filters: None,
        generate: None,
        conversation_id: None,
    }
}

fn fail_on_error(events: &[PipelineEvent]) -> Result<(), ApiError> {
    match events.last() {
        Some(PipelineEvent::Error { code, message }) => {
            Err(ApiError::from_code(code, message.clone()))
        }
        None => Err(ApiError::internal("the query produced no events")),
        _ => Ok(()),
    }
}

fn warnings(events: &[PipelineEvent]) -> Vec<String> {
    events
        .iter()
        .find_map(|e| match e {
            PipelineEvent::Done { warnings, .. } => Some(warnings.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

fn record_metrics(state: &AppState, events: &[PipelineEvent]) {
    if let Some(t) = events.last().and_then(crate::api::query::stage_timings) {
        state
            .metrics
            .query(&t, events.iter().any(crate::api::query::is_miss));
    }
}
