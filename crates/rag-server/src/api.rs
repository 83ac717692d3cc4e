//! The routes under `/api/v1`. Each handler is scoped to its caller's tenant:
//! the tenant is passed to the engine and from there into every store query,
//! so another tenant's names and ids simply do not exist (404).

use crate::auth::{create_key, Caller};
use crate::error::{ApiError, ErrorBody};
use crate::extract::ApiJson;
use crate::state::{AppState, CachedCandidates, CANDIDATES_TTL};
use axum::extract::{Multipart, Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::IntoResponse;
use axum::Json;
use futures::{Stream, StreamExt};
use rag_core::{
    ApiKeyInfo, Chunk, DocId, Document, DocumentInfo, FactId, FaqEntry, FaqId, FaqStatus, Filters,
    FusionParams, KbSettings, KnowledgeBase, PathKind, PathWeights, PipelineEvent, QueryRequest,
    RankedList, RetrievalParams, Role, SynonymGroup, TenantId, UserWord,
};
use rag_engine::{FaqPatch, NewFaq};
use serde::{Deserialize, Serialize};
use std::convert::Infallible;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// All `/api/v1` routes with their OpenAPI descriptions.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(query_stream))
        .routes(routes!(query_json))
        .routes(routes!(retrieve))
        .routes(routes!(refuse))
        .routes(routes!(list_kbs, create_kb))
        .routes(routes!(get_kb, delete_kb))
        .routes(routes!(put_settings))
        .routes(routes!(list_documents, upload))
        .routes(routes!(get_document, delete_document))
        .routes(routes!(crate::drafts::draft_faqs))
        .routes(routes!(list_faqs, create_faq))
        .routes(routes!(get_faq, edit_faq, delete_faq))
        .routes(routes!(approve_faq))
        .routes(routes!(disable_faq))
        .routes(routes!(get_lexicon))
        .routes(routes!(add_synonyms))
        .routes(routes!(add_dictionary))
        .routes(routes!(put_facts))
        .routes(routes!(delete_fact))
        .routes(routes!(list_tenants, create_tenant))
        .routes(routes!(list_keys, create_api_key))
        .routes(routes!(revoke_key))
        .routes(routes!(crate::ops::list_log))
        .routes(routes!(crate::ops::get_log))
        .routes(routes!(crate::ops::feedback))
        .routes(routes!(crate::ops::replay))
        .routes(routes!(crate::ops::faq_tool))
        .routes(routes!(crate::ops::analytics))
        .routes(routes!(
            crate::sources::list_sources,
            crate::sources::add_source
        ))
        .routes(routes!(
            crate::sources::get_source,
            crate::sources::delete_source
        ))
        .routes(routes!(crate::sources::sync_source))
        .routes(routes!(crate::ops::list_conversations))
        .routes(routes!(
            crate::ops::get_conversation,
            crate::ops::delete_conversation
        ))
        .merge(crate::web::api_routes())
}

// ---------------------------------------------------------------- queries

/// Filters of a query.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
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
#[derive(Debug, Clone, Deserialize, ToSchema)]
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

/// One Server-Sent Event as streamed: `event:` names the type, `data:` holds its JSON.
#[derive(Debug, Serialize, ToSchema)]
pub struct SseEvent {
    /// The event type (query_received, recall, …; received, stage, indexed, … for uploads).
    pub event: String,
    /// The event as JSON text.
    pub data: String,
}

/// The events of one query, as one document.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueryEvents {
    /// The events, in order, ending with `done` or `error`.
    pub events: Vec<PipelineEvent>,
}

fn check_k(name: &'static str, v: Option<usize>, max: usize) -> Result<(), ApiError> {
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
    let max = state.config.limits.max_top_k;
    check_k("per_path_k", body.per_path_k, max)?;
    check_k("top_k", body.top_k, max)?;
    check_k("rerank_top_k", body.rerank_top_k, max)?;
    state.engine.check_query(&body.query)?;
    let kb_row = state.engine.kb(&caller.tenant, kb).await?;
    let mut params: RetrievalParams = kb_row.settings.retrieval.clone();
    if let Some(p) = body.paths {
        if p.is_empty() {
            return Err(ApiError::bad_request(
                "invalid_param",
                "paths must name at least one path",
            ));
        }
        params.paths = p;
    }
    if let Some(k) = body.per_path_k {
        params.per_path_k = k;
    }
    if let Some(k) = body.top_k {
        params.fusion.top_k = k;
    }
    if let Some(k) = body.rerank_top_k {
        params.rerank_top_k = k;
    }
    if let Some(k) = body.k {
        params.fusion.k = k;
    }
    if let Some(w) = body.weights {
        params.fusion.weights = w;
    }
    if body.lexical_interpolation.is_some() {
        params.fusion.lexical_interpolation = body.lexical_interpolation;
    }
    if let Some(r) = body.rerank {
        params.rerank = r;
    }
    params.validate().map_err(rag_core::CoreError::from)?;
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
        params: Some(params),
        filters,
        generate: may_generate && body.generate.unwrap_or(true),
        conversation_id: body.conversation_id,
    })
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
async fn query_stream(
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
    let events = state
        .engine
        .query_with(&caller.tenant, request, caller.query_options())
        .map(move |e| {
            let _held = &permit;
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
async fn query_json(
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
async fn retrieve(
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
        .collect()
        .await;
    if let Some(PipelineEvent::Error { code, message }) = events.last() {
        let status = if code == "unknown_kb" {
            StatusCode::NOT_FOUND
        } else {
            StatusCode::BAD_REQUEST
        };
        let code: &'static str = if code == "unknown_kb" {
            "unknown_kb"
        } else {
            "query_failed"
        };
        return Err(ApiError::new(status, code, message.clone()));
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
    let applied_lambda = events.iter().find_map(|e| match e {
        PipelineEvent::Fused {
            lexical_interpolation,
            ..
        } => *lexical_interpolation,
        _ => None,
    });
    let candidates_id = state.keep_candidates(CachedCandidates {
        tenant: caller.tenant.clone(),
        viewer: caller.viewer(),
        kb,
        lists,
        applied_lambda,
        created: std::time::Instant::now(),
    });
    Ok(Json(Retrieval {
        candidates_id,
        expires_in_s: CANDIDATES_TTL.as_secs(),
        events,
    }))
}

/// New fusion settings for cached candidates.
#[derive(Debug, Deserialize, ToSchema)]
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
async fn refuse(
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
    fusion.lexical_interpolation = body
        .lexical_interpolation
        .or(fusion.lexical_interpolation)
        .or(cached.applied_lambda);
    if let Some(t) = body.top_k {
        fusion.top_k = t;
    }
    fusion.validate().map_err(rag_core::CoreError::from)?;
    let fused = rag_core::Fuser::fuse(&rag_fusion::RrfFuser::new(fusion), &cached.lists);
    Ok(Json(Refused { fusion, fused }))
}

// ---------------------------------------------------------------- knowledge bases

/// A new knowledge base.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewKb {
    /// Name, unique in the tenant.
    pub name: String,
    /// Settings (defaults when absent).
    #[serde(default)]
    pub settings: Option<KbSettings>,
}

/// Knowledge bases of the caller's tenant.
#[utoipa::path(get, path = "/kbs", tag = "kbs", responses((status = 200, body = Vec<KnowledgeBase>), (status = 401, body = ErrorBody)))]
async fn list_kbs(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<Vec<KnowledgeBase>>, ApiError> {
    Ok(Json(state.engine.list_kbs(&caller.tenant).await?))
}

/// Creates a knowledge base.
#[utoipa::path(post, path = "/kbs", tag = "kbs", request_body = NewKb,
    responses((status = 201, body = KnowledgeBase), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 409, body = ErrorBody)))]
async fn create_kb(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<NewKb>,
) -> Result<impl IntoResponse, ApiError> {
    caller.require_write()?;
    let settings = body.settings.unwrap_or_default();
    settings
        .retrieval
        .validate()
        .map_err(rag_core::CoreError::from)?;
    let kb = state
        .engine
        .create_kb(&caller.tenant, &body.name, settings)
        .await?;
    Ok((StatusCode::CREATED, Json(kb)))
}

/// One knowledge base.
#[utoipa::path(get, path = "/kbs/{kb}", tag = "kbs", params(("kb" = String, Path)),
    responses((status = 200, body = KnowledgeBase), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn get_kb(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
) -> Result<Json<KnowledgeBase>, ApiError> {
    Ok(Json(state.engine.kb(&caller.tenant, &kb).await?))
}

/// Deletes a knowledge base and everything in it.
#[utoipa::path(delete, path = "/kbs/{kb}", tag = "kbs", params(("kb" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn delete_kb(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
) -> Result<StatusCode, ApiError> {
    caller.require_write()?;
    state.engine.delete_kb(&caller.tenant, &kb).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Replaces a knowledge base's settings.
#[utoipa::path(put, path = "/kbs/{kb}/settings", tag = "kbs", params(("kb" = String, Path)), request_body = KbSettings,
    responses((status = 200, body = KnowledgeBase), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn put_settings(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
    ApiJson(settings): ApiJson<KbSettings>,
) -> Result<Json<KnowledgeBase>, ApiError> {
    caller.require_write()?;
    Ok(Json(
        state
            .engine
            .update_kb_settings(&caller.tenant, &kb, settings)
            .await?,
    ))
}

// ---------------------------------------------------------------- documents

/// Document metadata.
#[derive(Debug, Serialize, ToSchema)]
pub struct DocumentSummary {
    /// Id.
    pub id: DocId,
    /// Title.
    pub title: String,
    /// Source (file name or URL).
    pub source: String,
    /// sha256 of the source bytes.
    pub content_hash: String,
    /// Number of chunks.
    pub chunks: usize,
    /// The owner it is restricted to, if any.
    pub owner: Option<String>,
}

impl From<DocumentInfo> for DocumentSummary {
    fn from(d: DocumentInfo) -> Self {
        DocumentSummary {
            id: d.id,
            title: d.title,
            source: d.source,
            content_hash: d.content_hash,
            chunks: d.chunks,
            owner: d.owner,
        }
    }
}

/// A document with its chunks.
#[derive(Debug, Serialize, ToSchema)]
pub struct DocumentWithChunks {
    /// The document with its extracted text.
    pub document: Document,
    /// Its chunks; offsets point into `document.text`.
    pub chunks: Vec<Chunk>,
}

fn parse_doc(id: &str) -> Result<DocId, ApiError> {
    DocId::parse(id).ok_or_else(|| ApiError::not_found(format!("document {id:?} not found")))
}

fn parse_faq(id: &str) -> Result<FaqId, ApiError> {
    FaqId::parse(id).ok_or_else(|| ApiError::not_found(format!("FAQ entry {id:?} not found")))
}

/// Documents of a knowledge base.
#[utoipa::path(get, path = "/kbs/{kb}/documents", tag = "documents", params(("kb" = String, Path)),
    responses((status = 200, body = Vec<DocumentSummary>), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn list_documents(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
) -> Result<Json<Vec<DocumentSummary>>, ApiError> {
    Ok(Json(
        state
            .engine
            .documents(&caller.tenant, &kb, &caller.viewer())
            .await?
            .into_iter()
            .map(Into::into)
            .collect(),
    ))
}

/// A document with its text and chunk boundaries.
#[utoipa::path(get, path = "/kbs/{kb}/documents/{id}", tag = "documents", params(("kb" = String, Path), ("id" = String, Path)),
    responses((status = 200, body = DocumentWithChunks), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn get_document(
    State(state): State<AppState>,
    caller: Caller,
    Path((kb, id)): Path<(String, String)>,
) -> Result<Json<DocumentWithChunks>, ApiError> {
    let (document, chunks) = state
        .engine
        .document(&caller.tenant, &kb, parse_doc(&id)?, &caller.viewer())
        .await?;
    Ok(Json(DocumentWithChunks { document, chunks }))
}

/// Deletes a document with its chunks, vectors and index entries.
#[utoipa::path(delete, path = "/kbs/{kb}/documents/{id}", tag = "documents", params(("kb" = String, Path), ("id" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn delete_document(
    State(state): State<AppState>,
    caller: Caller,
    Path((kb, id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    caller.require_write()?;
    state
        .engine
        .delete_document(&caller.tenant, &kb, parse_doc(&id)?, &caller.viewer())
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A progress event of an upload.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "stage", rename_all = "snake_case")]
pub enum UploadEvent {
    /// A file arrived.
    Received {
        /// File name.
        file: String,
        /// Size in bytes.
        bytes: usize,
    },
    /// A file passed a stage: extracted (format, encoding, characters),
    /// chunked (chunks, largest in tokens), embedded (vectors, cached,
    /// computed) or drafted (FAQ entries drafted by the LLM for a knowledge
    /// base with `drafts.auto`: added, replaced, dropped, or the error).
    Stage {
        /// File name.
        file: String,
        /// Stage name.
        step: String,
        /// The stage's figures.
        detail: serde_json::Value,
    },
    /// A file was indexed.
    Indexed {
        /// File name.
        file: String,
        /// Chunks stored (documents).
        chunks: usize,
        /// FAQ entries added (tables).
        faqs_added: usize,
    },
    /// Nothing to do for the file.
    Skipped {
        /// File name.
        file: String,
        /// Why.
        reason: String,
    },
    /// The file was rejected; nothing of it was stored.
    Failed {
        /// File name.
        file: String,
        /// Why.
        reason: String,
    },
    /// All files were processed.
    Summary {
        /// Files received.
        files: usize,
        /// Files indexed.
        indexed: usize,
        /// Files skipped.
        skipped: usize,
        /// Files that failed.
        failed: usize,
    },
}

/// Uploads files (multipart, field name `file`, several allowed) and streams
/// progress per file as Server-Sent Events; one bad file does not stop the others.
/// A text field `owner` restricts the documents to that owner; documents
/// uploaded with a key issued for an owner are always restricted to it.
#[utoipa::path(post, path = "/kbs/{kb}/documents", tag = "documents", params(("kb" = String, Path)),
    request_body(content_type = "multipart/form-data", content = String),
    responses((status = 200, description = "Progress events (`data` is an UploadEvent)", content_type = "text/event-stream", body = SseEvent),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 413, body = ErrorBody)))]
async fn upload(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
    mut multipart: Multipart,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    caller.require_write()?;
    state.engine.kb(&caller.tenant, &kb).await?;
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    let mut owner_field: Option<String> = None;
    loop {
        let field = multipart.next_field().await.map_err(|e| {
            let status = e.status();
            let code = if status == StatusCode::PAYLOAD_TOO_LARGE {
                "body_too_large"
            } else {
                "bad_multipart"
            };
            ApiError::new(status, code, e.body_text())
        })?;
        let Some(field) = field else { break };
        if field.name() == Some("owner") && field.file_name().is_none() {
            let text = field
                .text()
                .await
                .map_err(|e| ApiError::new(e.status(), "bad_multipart", e.body_text()))?;
            let text = text.trim().to_owned();
            if !text.is_empty() {
                owner_field = Some(text);
            }
            continue;
        }
        if files.len() >= state.config.limits.max_files_per_upload {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_many_files",
                format!(
                    "at most {} files per upload",
                    state.config.limits.max_files_per_upload
                ),
            ));
        }
        let name = field
            .file_name()
            .map(str::to_owned)
            .unwrap_or_else(|| format!("upload-{}", files.len() + 1));
        let bytes = field
            .bytes()
            .await
            .map_err(|e| ApiError::new(e.status(), "bad_multipart", e.body_text()))?;
        files.push((name, bytes.to_vec()));
    }
    if files.is_empty() {
        return Err(ApiError::bad_request(
            "no_files",
            "send at least one file in a multipart field",
        ));
    }
    let owner = crate::sources::owner_for(&caller, owner_field)?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<UploadEvent>();
    let (engine, tenant) = (state.engine.clone(), caller.tenant.clone());
    tokio::spawn(async move {
        let (mut indexed, mut skipped, mut failed) = (0, 0, 0);
        let n = files.len();
        for (file, bytes) in files {
            if tx
                .send(UploadEvent::Received {
                    file: file.clone(),
                    bytes: bytes.len(),
                })
                .is_err()
            {
                return;
            }
            let (stage_tx, stage_file) = (tx.clone(), file.clone());
            let mut progress = move |p: rag_engine::IngestProgress| {
                let detail = serde_json::to_value(&p).unwrap_or_default();
                let stage = detail
                    .get("stage")
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_owned();
                if matches!(
                    stage.as_str(),
                    "extracted" | "chunked" | "embedded" | "drafted"
                ) {
                    let _ = stage_tx.send(UploadEvent::Stage {
                        file: stage_file.clone(),
                        step: stage,
                        detail,
                    });
                }
            };
            let options = rag_engine::IngestOptions {
                owner: owner.clone(),
                ..Default::default()
            };
            let event = match engine
                .ingest_with(&tenant, &kb, &file, bytes, &options, &mut progress)
                .await
            {
                Ok(o) => match o.status {
                    rag_engine::IngestStatus::Document { chunks, .. } => {
                        indexed += 1;
                        UploadEvent::Indexed {
                            file,
                            chunks,
                            faqs_added: 0,
                        }
                    }
                    rag_engine::IngestStatus::Faqs { added, .. } => {
                        indexed += 1;
                        UploadEvent::Indexed {
                            file,
                            chunks: 0,
                            faqs_added: added,
                        }
                    }
                    rag_engine::IngestStatus::Skipped { reason } => {
                        skipped += 1;
                        UploadEvent::Skipped { file, reason }
                    }
                    rag_engine::IngestStatus::Failed { reason } => {
                        failed += 1;
                        UploadEvent::Failed { file, reason }
                    }
                },
                Err(e) => {
                    failed += 1;
                    tracing::warn!(error = %e, "upload: file failed");
                    UploadEvent::Failed {
                        file,
                        reason: crate::error::ApiError::from(e).message,
                    }
                }
            };
            if tx.send(event).is_err() {
                return;
            }
        }
        let _ = tx.send(UploadEvent::Summary {
            files: n,
            indexed,
            skipped,
            failed,
        });
    });
    let stream = tokio_stream::wrappers::UnboundedReceiverStream::new(rx).map(|e| {
        let kind = match &e {
            UploadEvent::Received { .. } => "received",
            UploadEvent::Stage { .. } => "stage",
            UploadEvent::Indexed { .. } => "indexed",
            UploadEvent::Skipped { .. } => "skipped",
            UploadEvent::Failed { .. } => "failed",
            UploadEvent::Summary { .. } => "summary",
        };
        Ok(Event::default()
            .event(kind)
            .data(serde_json::to_string(&e).unwrap_or_default()))
    });
    Ok(Sse::new(stream))
}

// ---------------------------------------------------------------- FAQ entries

/// FAQ entries of a knowledge base.
#[utoipa::path(get, path = "/kbs/{kb}/faqs", tag = "faqs", params(("kb" = String, Path)),
    responses((status = 200, body = Vec<FaqEntry>), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn list_faqs(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
) -> Result<Json<Vec<FaqEntry>>, ApiError> {
    Ok(Json(state.engine.faqs(&caller.tenant, &kb).await?))
}

/// A new FAQ entry.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewFaqBody {
    /// The question.
    pub question: String,
    /// The answer.
    pub answer: String,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Source link.
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
async fn create_faq(
    State(state): State<AppState>,
    caller: Caller,
    Path(kb): Path<String>,
    ApiJson(b): ApiJson<NewFaqBody>,
) -> Result<impl IntoResponse, ApiError> {
    caller.require_write()?;
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
async fn get_faq(
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
#[derive(Debug, Deserialize, ToSchema)]
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
    /// New source link ("" removes it).
    #[serde(default)]
    pub source_url: Option<String>,
}

/// Edits an FAQ entry (sets `edited`; re-embeds only when question or answer changed).
#[utoipa::path(patch, path = "/kbs/{kb}/faqs/{id}", tag = "faqs", params(("kb" = String, Path), ("id" = String, Path)), request_body = FaqPatchBody,
    responses((status = 200, body = FaqEntry), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn edit_faq(
    State(state): State<AppState>,
    caller: Caller,
    Path((kb, id)): Path<(String, String)>,
    ApiJson(b): ApiJson<FaqPatchBody>,
) -> Result<Json<FaqEntry>, ApiError> {
    caller.require_write()?;
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
async fn delete_faq(
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
async fn approve_faq(
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
async fn disable_faq(
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

// ---------------------------------------------------------------- lexicon

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
async fn get_lexicon(
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
async fn add_synonyms(
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
async fn add_dictionary(
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
#[derive(Debug, Deserialize, ToSchema)]
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
async fn put_facts(
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
async fn delete_fact(
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

// ---------------------------------------------------------------- tenants and keys

/// A tenant.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantBody {
    /// Name: 1–64 of a–z, 0–9, `-`, `_`.
    pub name: String,
}

/// All tenants (admin).
#[utoipa::path(get, path = "/tenants", tag = "admin",
    responses((status = 200, body = Vec<TenantBody>), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn list_tenants(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<Vec<TenantBody>>, ApiError> {
    caller.require_admin()?;
    Ok(Json(
        state
            .keys
            .tenants()
            .await?
            .into_iter()
            .map(|t| TenantBody { name: t.0 })
            .collect(),
    ))
}

/// Creates a tenant (admin).
#[utoipa::path(post, path = "/tenants", tag = "admin", request_body = TenantBody,
    responses((status = 201, body = TenantBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 409, body = ErrorBody)))]
async fn create_tenant(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(b): ApiJson<TenantBody>,
) -> Result<impl IntoResponse, ApiError> {
    caller.require_admin()?;
    let ok = !b.name.is_empty()
        && b.name.len() <= 64
        && b.name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !ok {
        return Err(ApiError::bad_request(
            "invalid_param",
            "a tenant name has 1 to 64 of a-z, 0-9, '-' and '_'",
        ));
    }
    if !state
        .keys
        .create_tenant(&TenantId(b.name.clone()), rag_core::now())
        .await?
    {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "tenant_exists",
            format!("tenant {:?} exists", b.name),
        ));
    }
    Ok((StatusCode::CREATED, Json(b)))
}

/// A new key.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewKeyBody {
    /// The tenant the key acts for (admin keys may name any; others only their own).
    #[serde(default)]
    pub tenant: Option<String>,
    /// Role: read_write or read_only (admin for admin keys).
    pub role: Role,
    /// Owner inside the tenant.
    #[serde(default)]
    pub owner: Option<String>,
    /// Scope the key to this one knowledge base (by name): it reaches
    /// `/kbs/{kb}/…` only. Use for the chat widget's public read-only key.
    #[serde(default)]
    pub kb: Option<String>,
    /// Label for people.
    #[serde(default)]
    pub label: Option<String>,
}

/// A key as created: the secret is shown this once.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedKey {
    /// The key; store it now, it cannot be shown again.
    pub key: String,
    /// Its record.
    pub info: ApiKeyInfo,
}

/// Keys of the caller's tenant (admin: of all tenants). Secrets are never returned.
#[utoipa::path(get, path = "/keys", tag = "admin",
    responses((status = 200, body = Vec<ApiKeyInfo>), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn list_keys(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<Vec<ApiKeyInfo>>, ApiError> {
    caller.require_admin()?;
    Ok(Json(state.keys.keys(None).await?))
}

/// Creates a tenant-scoped API key (admin).
#[utoipa::path(post, path = "/keys", tag = "admin", request_body = NewKeyBody,
    responses((status = 201, body = CreatedKey), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
async fn create_api_key(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(b): ApiJson<NewKeyBody>,
) -> Result<impl IntoResponse, ApiError> {
    caller.require_admin()?;
    let tenant = TenantId(b.tenant.unwrap_or_else(|| caller.tenant.0.clone()));
    if !state.keys.tenants().await?.contains(&tenant) {
        return Err(ApiError::not_found(format!(
            "tenant {:?} not found; create it first",
            tenant.0
        )));
    }
    if let Some(o) = &b.owner {
        if !rag_core::Viewer::valid_owner(o) {
            return Err(ApiError::bad_request(
                "invalid_param",
                "owner has 1 to 128 bytes, no control characters, and is not \"*\"",
            ));
        }
    }
    if let Some(kb) = &b.kb {
        // The knowledge base must exist in that tenant (its name is the scope).
        state.engine.kb(&tenant, kb).await?;
    }
    let (key, info) = create_key(
        state.keys.as_ref(),
        &tenant,
        b.role,
        b.owner,
        b.kb,
        b.label.as_deref().unwrap_or(""),
    )
    .await?;
    tracing::info!(key_id = %info.id, tenant = %info.tenant, role = info.role.as_str(), "API key created");
    Ok((StatusCode::CREATED, Json(CreatedKey { key, info })))
}

/// Revokes a key (admin).
#[utoipa::path(delete, path = "/keys/{id}", tag = "admin", params(("id" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)))]
async fn revoke_key(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    caller.require_admin()?;
    let all = state.keys.keys(None).await?;
    let key = all.iter().find(|k| k.id == id).cloned();
    if id == caller.key_id {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "own_key",
            "a key cannot revoke itself; use another admin key",
        ));
    }
    let live_admins = all
        .iter()
        .filter(|k| k.role == Role::Admin && !k.revoked)
        .count();
    if key
        .as_ref()
        .is_some_and(|k| k.role == Role::Admin && !k.revoked)
        && live_admins <= 1
    {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "last_admin_key",
            "the last admin key cannot be revoked",
        ));
    }
    match key {
        Some(k) if state.keys.revoke_key(&k.tenant, &id).await? => Ok(StatusCode::NO_CONTENT),
        _ => Err(ApiError::not_found(format!("key {id:?} not found"))),
    }
}
