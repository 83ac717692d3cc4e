//! `POST /kbs/{kb}/eval`: a golden set run under one or two retrieval
//! settings, scored per question (nDCG@10, Recall@10, MRR@10) with the
//! means, for the workbench's Eval page. The same scoring as `ragscope
//! tune` (`rag_core::metrics`); every question runs through the engine
//! without an answer and without a query-log row, as the caller (tenant
//! and viewer).

use super::query::check_k;
use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::extract::ApiJson;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::Json;
use futures::{StreamExt, TryStreamExt};
use rag_core::metrics::{golden_ranking, passage_keys, score_expected};
use rag_core::{CoreError, PassageId, QueryRequest, RetrievalOverrides, RetrievalParams};
use rag_engine::{KbIndex, QueryOptions};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use utoipa::ToSchema;

/// Most questions in one golden set.
pub(crate) const MAX_GOLDEN: usize = 500;
/// Most expected names of one question.
pub(crate) const MAX_EXPECTED: usize = 100;
/// Questions run at the same time (each run is itself parallel over its paths).
const CONCURRENT_QUESTIONS: usize = 2;
/// Hit ids reported per question and side.
const REPORTED_HITS: usize = 10;

/// One question of a golden set.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GoldenRow {
    /// The question.
    #[schema(min_length = 1)]
    pub question: String,
    /// What a good ranking holds: entry or chunk ids (`faq:…`, `chunk:…`,
    /// or the bare uuid), document ids, or document sources (file name or
    /// URL) and FAQ links (1 to 100).
    #[schema(min_items = 1, max_items = 100)]
    pub expected: Vec<String>,
}

/// A golden set and the settings to run it under.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EvalBody {
    /// The questions (1 to 500).
    #[schema(min_items = 1, max_items = 500)]
    pub golden: Vec<GoldenRow>,
    /// Setting A: changes to the knowledge base's retrieval settings
    /// (absent or empty: the settings as they are).
    #[serde(default)]
    pub a: RetrievalOverrides,
    /// Setting B, compared with A question by question (absent: A only).
    #[serde(default)]
    pub b: Option<RetrievalOverrides>,
}

/// How one question ranked under one setting.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SideScore {
    /// nDCG@10 (binary gains).
    pub ndcg10: f64,
    /// Share of the expected names in the first 10.
    pub recall10: f64,
    /// Reciprocal rank of the first expected name within the first 10.
    pub mrr10: f64,
    /// Rank (from 1) of the first expected name in the scored ranking, in
    /// which the chunks of one document count once; null when none ranks.
    pub first_rank: Option<usize>,
    /// Ids of the first 10 hits, best first.
    pub hits: Vec<String>,
}

/// One question with its scores under A and B.
#[derive(Debug, Serialize, ToSchema)]
pub struct EvalQuery {
    /// The question.
    pub question: String,
    /// Its expected names.
    pub expected: Vec<String>,
    /// Under setting A.
    pub a: SideScore,
    /// Under setting B (null without B).
    pub b: Option<SideScore>,
}

/// Means over the golden set.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub struct EvalMeans {
    /// Mean nDCG@10.
    pub ndcg10: f64,
    /// Mean Recall@10.
    pub recall10: f64,
    /// Mean MRR@10.
    pub mrr10: f64,
}

/// One setting as it ran.
#[derive(Debug, Serialize, ToSchema)]
pub struct EvalSide {
    /// The retrieval settings in effect (the knowledge base's with the
    /// overrides applied), ready to be saved as its `retrieval` settings.
    pub settings: RetrievalParams,
    /// Means over the questions.
    pub means: EvalMeans,
}

/// The result of an evaluation.
#[derive(Debug, Serialize, ToSchema)]
pub struct EvalReport {
    /// Setting A.
    pub a: EvalSide,
    /// Setting B (null without B).
    pub b: Option<EvalSide>,
    /// Per question, in the golden set's order.
    pub queries: Vec<EvalQuery>,
}

fn limit(message: String) -> ApiError {
    ApiError::bad_request("limit_exceeded", message)
}

/// The golden set's limits, and each question within the engine's query limits.
fn check_golden(state: &AppState, golden: &[GoldenRow]) -> Result<(), ApiError> {
    if golden.is_empty() {
        return Err(ApiError::bad_request(
            "invalid_param",
            "golden holds no question",
        ));
    }
    if golden.len() > MAX_GOLDEN {
        return Err(limit(format!(
            "golden holds {} questions; the limit is {MAX_GOLDEN}",
            golden.len()
        )));
    }
    for (i, row) in golden.iter().enumerate() {
        state.engine.check_query(&row.question).map_err(|e| {
            let mut err = ApiError::from(e);
            err.message = format!("golden[{i}].question: {}", err.message);
            err
        })?;
        if row.expected.is_empty() {
            return Err(ApiError::bad_request(
                "invalid_param",
                format!("golden[{i}].expected names no id"),
            ));
        }
        if row.expected.len() > MAX_EXPECTED {
            return Err(limit(format!(
                "golden[{i}].expected holds {} ids; the limit is {MAX_EXPECTED}",
                row.expected.len()
            )));
        }
    }
    Ok(())
}

/// The overrides' limits and ranges (`side` names them in messages).
fn check_overrides(state: &AppState, side: &str, o: &RetrievalOverrides) -> Result<(), ApiError> {
    let max = state.config.limits.max_top_k;
    let named = |mut e: ApiError| {
        e.message = format!("{side}: {}", e.message);
        e
    };
    check_k("per_path_k", o.per_path_k, max).map_err(named)?;
    check_k("top_k", o.top_k, max).map_err(named)?;
    check_k("rerank_top_k", o.rerank_top_k, max).map_err(named)?;
    if o.paths.as_ref().is_some_and(Vec::is_empty) {
        return Err(named(ApiError::bad_request(
            "invalid_param",
            "paths must name at least one path",
        )));
    }
    Ok(())
}

/// The settings a side runs with: the knowledge base's, overridden, validated.
fn resolve(
    side: &str,
    o: &RetrievalOverrides,
    base: &RetrievalParams,
) -> Result<RetrievalParams, ApiError> {
    let (params, _) = o.apply(base);
    params.validate().map_err(|e| {
        let mut err = ApiError::from(CoreError::from(e));
        err.message = format!("{side}: {}", err.message);
        err
    })?;
    Ok(params)
}

/// Runs one question under one setting and scores its ranking.
async fn score_question(
    state: &AppState,
    caller: &Caller,
    (kb, kb_id): (&str, rag_core::KbId),
    index: &KbIndex,
    row: &GoldenRow,
    overrides: &RetrievalOverrides,
) -> Result<SideScore, ApiError> {
    let request = QueryRequest {
        kb: kb.to_owned(),
        query: row.question.clone(),
        params: None,
        overrides: overrides.clone(),
        filters: Default::default(),
        generate: false,
        conversation_id: None,
    };
    let options = QueryOptions {
        views: false,
        log: false,
        viewer: caller.viewer(),
    };
    let out = state
        .engine
        .run(&caller.tenant, request, options, &mut |_| {})
        .await?;
    // The final order: the reranker's hits, then the rest of the fused
    // hits in fused order (without a reranker, the fused order).
    let mut ids: Vec<PassageId> = out.reranked.iter().map(|h| h.id).collect();
    let head: HashSet<PassageId> = ids.iter().copied().collect();
    ids.extend(
        out.fused
            .hits
            .iter()
            .map(|h| h.id)
            .filter(|id| !head.contains(id)),
    );
    let passages = state
        .engine
        .passages_by_id((&caller.tenant, kb_id), index, ids.iter().copied())
        .await?;
    let keys_of = |id: PassageId| {
        let p = passages.get(&id);
        passage_keys(
            id,
            p.and_then(|p| p.doc),
            p.and_then(|p| p.source.as_deref()),
        )
    };
    let ranked = golden_ranking(&ids, keys_of, &row.expected);
    let m = score_expected(&ranked, &row.expected);
    Ok(SideScore {
        ndcg10: m.ndcg10,
        recall10: m.recall10,
        mrr10: m.mrr10,
        first_rank: ranked
            .iter()
            .position(|k| row.expected.contains(k))
            .map(|p| p + 1),
        hits: ids
            .iter()
            .take(REPORTED_HITS)
            .map(|id| id.to_string())
            .collect(),
    })
}

fn means(scores: &[&SideScore]) -> EvalMeans {
    let n = scores.len().max(1) as f64;
    let sum = |f: fn(&SideScore) -> f64| scores.iter().map(|s| f(s)).sum::<f64>() / n;
    EvalMeans {
        ndcg10: sum(|s| s.ndcg10),
        recall10: sum(|s| s.recall10),
        mrr10: sum(|s| s.mrr10),
    }
}

/// Runs a golden set under setting A and, when given, setting B, and scores
/// every question's ranking against its expected names (nDCG@10,
/// Recall@10, MRR@10, rank of the first expected name) with the means. No
/// answer is generated and no query-log row is written; the questions run
/// with the caller's tenant and owner scope, a few at a time, in one of the
/// key's query slots.
#[utoipa::path(post, path = "/kbs/{kb}/eval", tag = "query",
    params(("kb" = String, Path, description = "Knowledge base name")),
    request_body = EvalBody,
    responses((status = 200, body = EvalReport),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 413, body = ErrorBody), (status = 422, body = ErrorBody),
        (status = 429, body = ErrorBody)))]
pub(super) async fn run_eval(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
    ApiJson(body): ApiJson<EvalBody>,
) -> Result<Json<EvalReport>, ApiError> {
    let _permit = state.query_slot(&caller.key_id)?;
    check_golden(&state, &body.golden)?;
    check_overrides(&state, "a", &body.a)?;
    if let Some(b) = &body.b {
        check_overrides(&state, "b", b)?;
    }
    let kb_row = state.engine.kb(&caller.tenant, &kb).await?;
    let base = &kb_row.settings.retrieval;
    let settings_a = resolve("a", &body.a, base)?;
    let settings_b = body.b.as_ref().map(|b| resolve("b", b, base)).transpose()?;
    let index = state.engine.index(&caller.tenant, &kb_row).await?;
    let kb_id = kb_row.id;
    // In the golden set's order; the first failure ends the run (the
    // questions still running are dropped, which cancels them). Each
    // question's future owns what it reads, so the stream is `Send`.
    let sides = std::sync::Arc::new((body.a, body.b));
    let queries: Vec<EvalQuery> = futures::stream::iter(body.golden)
        .map(|row| {
            let (state, caller, kb, index, sides) = (
                state.clone(),
                caller.clone(),
                kb.clone(),
                index.clone(),
                sides.clone(),
            );
            async move {
                let (a, b) = &*sides;
                let sa = score_question(&state, &caller, (&kb, kb_id), &index, &row, a).await?;
                let sb = match b {
                    Some(b) => {
                        Some(score_question(&state, &caller, (&kb, kb_id), &index, &row, b).await?)
                    }
                    None => None,
                };
                Ok::<_, ApiError>(EvalQuery {
                    question: row.question,
                    expected: row.expected,
                    a: sa,
                    b: sb,
                })
            }
        })
        .buffered(CONCURRENT_QUESTIONS)
        .try_collect()
        .await?;
    let a_scores: Vec<&SideScore> = queries.iter().map(|q| &q.a).collect();
    let b_scores: Vec<&SideScore> = queries.iter().filter_map(|q| q.b.as_ref()).collect();
    Ok(Json(EvalReport {
        a: EvalSide {
            settings: settings_a,
            means: means(&a_scores),
        },
        b: settings_b.map(|settings| EvalSide {
            settings,
            means: means(&b_scores),
        }),
        queries,
    }))
}
