//! The query pipeline as a stream of events.

use crate::embed::CachedEmbedder;
use crate::engine::Engine;
use crate::engine::KbIndex;
use async_trait::async_trait;
use futures::Stream;
use rag_core::{
    AnalyzedQuery, CoreError, Fused, FusedHit, Fuser, Language, PathKind, PipelineEvent,
    QueryRequest, RankedList, RetrievalParams, Retriever, SearchCtx, StageTiming, TenantId,
    TokenKind, UserError,
};
use rag_fusion::RrfFuser;
use rag_lexical::Filter;
use rag_text::normalize_for_match;
use std::sync::Arc;
use std::time::Instant;

/// How much a run reports, and for whom it runs.
#[derive(Debug, Clone)]
pub struct QueryOptions {
    /// Attach passage texts with highlights to recall and context events.
    pub views: bool,
    /// Write a query-log row.
    pub log: bool,
    /// Whose owner-restricted documents the run may see (and whose the
    /// conversation's earlier turns and the log row are).
    pub viewer: rag_core::Viewer,
}

impl Default for QueryOptions {
    fn default() -> Self {
        QueryOptions {
            views: true,
            log: true,
            viewer: rag_core::Viewer::Public,
        }
    }
}

impl QueryOptions {
    /// Default options for a caller who sees what `viewer` sees.
    pub fn for_viewer(viewer: rag_core::Viewer) -> Self {
        QueryOptions {
            viewer,
            ..Default::default()
        }
    }
}

/// Everything a run produced, for callers that want results rather than events.
#[derive(Debug, Clone)]
pub struct PipelineOutput {
    /// The analysed query.
    pub analyzed: AnalyzedQuery,
    /// Each path's list.
    pub lists: Vec<RankedList>,
    /// Fusion.
    pub fused: Fused,
    /// After rerank.
    pub reranked: Vec<FusedHit>,
}

/// A lexical path of one index, as a [`Retriever`]. The work runs on a blocking thread.
struct LexicalRetriever {
    index: Arc<KbIndex>,
    path: PathKind,
    params: RetrievalParams,
}

/// The dense path: embeds the query (through the cache) and searches the
/// knowledge base's vectors on a blocking thread.
struct DenseRetriever {
    index: Arc<KbIndex>,
    embedder: CachedEmbedder,
}

/// Why the dense path has nothing to search yet.
const NO_VECTORS: &str = "this knowledge base has no vectors yet; run `ragscope reembed --kb NAME`";

fn dense_unavailable(reason: impl Into<String>) -> CoreError {
    UserError::PathUnavailable {
        path: "dense".into(),
        reason: reason.into(),
    }
    .into()
}

/// Refuses to search vectors of one model with a query embedded by another.
fn same_space(
    space: &rag_core::EmbeddingSpace,
    embedder: &CachedEmbedder,
) -> Result<(), CoreError> {
    let model = embedder.model().model_id();
    if space.model_id != model {
        return Err(UserError::EmbeddingSpaceMismatch {
            stored_model: space.model_id.clone(),
            stored_dims: space.dims,
            configured_model: model.to_owned(),
            configured_dims: embedder.model().dimensions(),
        }
        .into());
    }
    Ok(())
}

/// A path the store runs itself (PostgreSQL). The engine still analyses the
/// query, matches synonym groups and embeds the query; the store scores.
struct StoreRetriever {
    recall: Arc<dyn rag_core::StoreRecall>,
    tenant: TenantId,
    kb: rag_core::KbId,
    index: Arc<KbIndex>,
    path: PathKind,
    params: RetrievalParams,
    embedder: Option<CachedEmbedder>,
    hnsw_threshold: usize,
}

#[async_trait]
impl Retriever for StoreRetriever {
    fn path(&self) -> PathKind {
        self.path
    }

    async fn retrieve(
        &self,
        query: &AnalyzedQuery,
        k: usize,
        ctx: &SearchCtx,
    ) -> Result<RankedList, CoreError> {
        let expansions = if self.path == PathKind::Synonym {
            self.index.lexical.synonym_expansion(query)
        } else {
            None
        };
        let vector = if self.path == PathKind::Dense {
            let embedder = self
                .embedder
                .as_ref()
                .ok_or_else(|| dense_unavailable("no embedder is configured"))?;
            let space = self
                .index
                .space
                .as_ref()
                .ok_or_else(|| dense_unavailable(NO_VECTORS))?;
            same_space(space, embedder)?;
            Some(embedder.embed_query(&query.raw).await?)
        } else {
            None
        };
        let q = rag_core::StoreQuery {
            query,
            k,
            ctx,
            params: &self.params,
            expansions,
            vector: vector.as_deref(),
            dense_exact: self.index.vectors < self.hnsw_threshold,
        };
        self.recall
            .recall(&self.tenant, self.kb, self.path, q)
            .await
    }
}

#[async_trait]
impl Retriever for DenseRetriever {
    fn path(&self) -> PathKind {
        PathKind::Dense
    }

    async fn retrieve(
        &self,
        query: &AnalyzedQuery,
        k: usize,
        ctx: &SearchCtx,
    ) -> Result<RankedList, CoreError> {
        let dense = match &self.index.dense {
            None => return Err(dense_unavailable(NO_VECTORS)),
            Some(Err(e)) => {
                return Err(dense_unavailable(format!(
                    "its vectors could not be loaded: {e}"
                )))
            }
            Some(Ok(d)) => d,
        };
        same_space(dense.space(), &self.embedder)?;
        let vector = self.embedder.embed_query(&query.raw).await?;
        let (index, filter) = (
            self.index.clone(),
            Filter::new(&ctx.filters, ctx.now, &ctx.viewer),
        );
        tokio::task::spawn_blocking(move || {
            let dense = index
                .dense
                .as_ref()
                .and_then(|d| d.as_ref().ok())
                .expect("checked above");
            dense.search(&vector, k, &filter, &index.lexical)
        })
        .await
        .map_err(|e| CoreError::Component {
            component: "dense retriever".into(),
            message: e.to_string(),
        })?
        .map_err(|e| CoreError::Component {
            component: "dense retriever".into(),
            message: e.to_string(),
        })
    }
}

#[async_trait]
impl Retriever for LexicalRetriever {
    fn path(&self) -> PathKind {
        self.path
    }

    async fn retrieve(
        &self,
        query: &AnalyzedQuery,
        k: usize,
        ctx: &SearchCtx,
    ) -> Result<RankedList, CoreError> {
        let (index, path, params, query) = (
            self.index.clone(),
            self.path,
            self.params.clone(),
            query.clone(),
        );
        let filter = Filter::new(&ctx.filters, ctx.now, &ctx.viewer);
        tokio::task::spawn_blocking(move || {
            let index = &index.lexical;
            match path {
                PathKind::Bm25 => Ok(index.bm25(&query, k, &params.bm25, &filter)),
                PathKind::Substring => Ok(index.substring(&query, k, &filter)),
                PathKind::Fuzzy => {
                    Ok(index.fuzzy(&query, k, params.fuzzy_threshold, &params.bm25, &filter))
                }
                PathKind::Synonym => Ok(index.synonym(&query, k, &params.bm25, &filter)),
                PathKind::Fact => Ok(index.facts(&query, k)),
                PathKind::Dense => Err(UserError::PathUnavailable {
                    path: "dense".into(),
                    reason: "the dense path is not lexical".into(),
                }
                .into()),
            }
        })
        .await
        .map_err(|e| CoreError::Component {
            component: format!("{path} retriever"),
            message: e.to_string(),
        })?
    }
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

/// The stable code of an error, as carried by the `error` event.
pub fn error_code(e: &CoreError) -> &'static str {
    e.code()
}

/// Whether the question is in one of the two languages and the knowledge base in the other.
fn across_languages(q: &AnalyzedQuery, kb: Language) -> bool {
    matches!(
        (q.language, kb),
        (Language::Zh, Language::En) | (Language::En, Language::Zh)
    )
}

/// λ suggested for a query: a question in another language than the
/// knowledge base leans on vectors; identifiers and very short queries lean
/// lexical; otherwise an even split (best among 0.4–0.8 on XQuAD zh→zh and
/// en→en).
fn suggest_lambda(q: &AnalyzedQuery, kb: Language) -> (f64, &'static str) {
    if across_languages(q, kb) {
        (0.2, "the question and the knowledge base are in different languages: words rarely match across languages, meaning does")
    } else if q
        .tokens
        .iter()
        .any(|t| matches!(t.kind, TokenKind::Ident | TokenKind::Number))
    {
        (
            0.7,
            "the query names identifiers or numbers, which exact matching finds best",
        )
    } else if q.tokens.len() <= 2 {
        (0.6, "a short keyword query")
    } else {
        (0.5, "a balanced question")
    }
}

/// BM25's best score at least this fraction above its second best counts as
/// a confident lexical answer (chosen on XQuAD zh→zh, en→en and SciFact
/// train; see README).
const CLEAR_BM25_MARGIN: f64 = 0.4;
/// λ of a query whose BM25 list has a clear winner.
const CONFIDENT_LEXICAL_LAMBDA: f64 = 0.9;

/// The λ applied after recall: the suggestion, raised when BM25 has a clear
/// winner for a question in the knowledge base's language (in another
/// language, BM25 scores say little). Returns λ and why.
fn lambda_after_recall(
    suggested: (f64, &str),
    q: &AnalyzedQuery,
    kb: Language,
    lists: &[RankedList],
) -> (f64, String) {
    let (lambda, reason) = suggested;
    let bm25 = lists
        .iter()
        .find(|l| l.path == PathKind::Bm25)
        .map(|l| l.hits.as_slice())
        .unwrap_or_default();
    if across_languages(q, kb)
        || lambda >= CONFIDENT_LEXICAL_LAMBDA
        || bm25.len() < 2
        || bm25[0].score <= 0.0
    {
        return (lambda, reason.to_owned());
    }
    let margin = (bm25[0].score - bm25[1].score) / bm25[0].score;
    if margin >= CLEAR_BM25_MARGIN {
        (
            CONFIDENT_LEXICAL_LAMBDA,
            format!(
                "BM25's best passage scores {:.0} % above the next ({:.2} against {:.2}): exact matching is confident (suggested {lambda} before recall: {reason})",
                margin * 100.0,
                bm25[0].score,
                bm25[1].score
            ),
        )
    } else {
        (lambda, reason.to_owned())
    }
}

impl Engine {
    /// Runs a query and streams its events; the stream ends with `done` or `error`.
    /// Dropping the stream cancels the run at its next await point (work already
    /// handed to a blocking thread finishes, and its result is discarded).
    pub fn query(
        &self,
        tenant: &TenantId,
        request: QueryRequest,
    ) -> impl Stream<Item = PipelineEvent> + Send + 'static {
        self.query_with(tenant, request, QueryOptions::default())
    }

    /// [`Engine::query`] with options (e.g. no query-log row for read-only use).
    pub fn query_with(
        &self,
        tenant: &TenantId,
        request: QueryRequest,
        options: QueryOptions,
    ) -> impl Stream<Item = PipelineEvent> + Send + 'static {
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        let engine = self.clone();
        let tenant = tenant.clone();
        tokio::spawn(async move {
            // Sends wait for room: a slow reader slows the run, never loses events.
            let mut emit = crate::emit::EventSink::Channel(tx.clone());
            tokio::select! {
                result = engine.run_into(&tenant, request, options, &mut emit) => {
                    if let Err(e) = result {
                        if !e.is_user_error() {
                            tracing::error!(error = %e, "query failed");
                        }
                        let _ = tx.send(PipelineEvent::Error { code: e.code().into(), message: e.public_message() }).await;
                    }
                }
                _ = tx.closed() => tracing::debug!("query consumer went away; run cancelled"),
            }
        });
        tokio_stream::wrappers::ReceiverStream::new(rx)
    }

    /// Runs a query and returns all its events.
    pub async fn query_collect(
        &self,
        tenant: &TenantId,
        request: QueryRequest,
    ) -> Vec<PipelineEvent> {
        let mut events = Vec::new();
        let mut emit = crate::emit::EventSink::Collect(&mut events);
        let result = self
            .run_into(tenant, request, QueryOptions::default(), &mut emit)
            .await;
        drop(emit);
        if let Err(e) = result {
            if !e.is_user_error() {
                tracing::error!(error = %e, "query failed");
            }
            events.push(PipelineEvent::Error {
                code: e.code().into(),
                message: e.public_message(),
            });
        }
        events
    }

    /// Checks a query text against the limits (length, emptiness) before a run starts.
    pub fn check_query(&self, query: &str) -> Result<(), CoreError> {
        let limit = self.config().max_query_bytes;
        if query.len() > limit {
            return Err(UserError::QueryTooLong {
                len: query.len(),
                limit,
            }
            .into());
        }
        if normalize_for_match(query).is_empty() {
            return Err(UserError::EmptyQuery.into());
        }
        Ok(())
    }

    /// Validates a request and resolves its parameters against the knowledge base's settings.
    fn validate(
        &self,
        request: &QueryRequest,
        kb_params: &RetrievalParams,
    ) -> Result<RetrievalParams, CoreError> {
        self.check_query(&request.query)?;
        let params = request.params.clone().unwrap_or_else(|| kb_params.clone());
        params.validate()?;
        Ok(params)
    }

    /// The pipeline, handing each event to `emit` as its stage completes
    /// (for callers that consume events synchronously: evaluation, benchmarks).
    pub async fn run(
        &self,
        tenant: &TenantId,
        request: QueryRequest,
        options: QueryOptions,
        emit: &mut (dyn FnMut(PipelineEvent) + Send),
    ) -> Result<PipelineOutput, CoreError> {
        self.run_into(
            tenant,
            request,
            options,
            &mut crate::emit::EventSink::Callback(emit),
        )
        .await
    }

    /// The pipeline. `emit` receives each event as its stage completes.
    pub(crate) async fn run_into(
        &self,
        tenant: &TenantId,
        request: QueryRequest,
        options: QueryOptions,
        emit: &mut crate::emit::EventSink<'_>,
    ) -> Result<PipelineOutput, CoreError> {
        let started = Instant::now();
        let mut timings = Vec::new();
        let mut warnings = Vec::new();
        let kb = self.kb(tenant, &request.kb).await?;
        let params = self.validate(&request, &kb.settings.retrieval)?;
        let query_id = uuid_like();
        emit.emit(PipelineEvent::QueryReceived {
            query_id: query_id.clone(),
            kb: kb.name.clone(),
            query: request.query.clone(),
            paths: params.paths.clone(),
        })
        .await;

        let index = self.index(tenant, &kb).await?;
        timings.push(StageTiming {
            stage: "prepare".into(),
            ms: ms(started),
        });
        let t = Instant::now();
        // A follow-up in a conversation is rewritten into a standalone query
        // from the earlier turns in the query log.
        // (standalone query, how it was obtained)
        let mut rewrite: Option<(String, String)> = None;
        if let Some(conv) = &request.conversation_id {
            let filter = rag_core::LogFilter {
                conversation_id: Some(conv.clone()),
                limit: 4,
                viewer: options.viewer.clone(),
                ..Default::default()
            };
            let mut turns: Vec<rag_answer::Turn> = self
                .store()
                .query_log(tenant, kb.id, &filter)
                .await?
                .into_iter()
                .map(|r| rag_answer::Turn {
                    query: r.rewritten_query.unwrap_or(r.query),
                    answer: r.answer,
                })
                .collect();
            turns.reverse();
            if !turns.is_empty() {
                if let Some(generator) = self.inner.components.generator.clone() {
                    match crate::answer::llm_rewrite(generator.as_ref(), &turns, &request.query)
                        .await
                    {
                        Ok(Some(q)) => rewrite = Some((q, "llm".to_owned())),
                        Ok(None) => {}
                        Err(e) => warnings.push(format!(
                            "the LLM could not rewrite the follow-up, the heuristic did: {e}"
                        )),
                    }
                }
                if rewrite.is_none() {
                    let (engine, q) = (self.clone(), request.query.clone());
                    rewrite = tokio::task::spawn_blocking(move || {
                        rag_answer::rewrite_followup(&engine.inner.analyzer, &turns, &q)
                    })
                    .await
                    .map_err(|e| CoreError::Component {
                        component: "follow-up rewrite".into(),
                        message: e.to_string(),
                    })?
                    .map(|r| {
                        let method = serde_json::to_value(r.method)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_owned))
                            .unwrap_or_default();
                        (r.query, method)
                    });
                }
            }
        }
        let search_query = rewrite
            .as_ref()
            .map_or_else(|| request.query.clone(), |r| r.0.clone());
        let (ix, raw) = (index.clone(), search_query.clone());
        let analyzed = tokio::task::spawn_blocking(move || ix.lexical.analyze_query(&raw))
            .await
            .map_err(|e| CoreError::Component {
                component: "analyzer".into(),
                message: e.to_string(),
            })?;
        let (lambda, reason) = suggest_lambda(&analyzed, index.lexical.language());
        let elapsed = ms(t);
        timings.push(StageTiming {
            stage: "query_analyzed".into(),
            ms: elapsed,
        });
        emit.emit(PipelineEvent::QueryAnalyzed {
            normalized: analyzed.normalized.clone(),
            language: analyzed.language,
            tokens: analyzed.tokens.clone(),
            rewritten_from: rewrite.as_ref().map(|_| request.query.clone()),
            rewrite_method: rewrite.as_ref().map(|r| r.1.clone()),
            suggested_lexical_interpolation: lambda,
            suggestion_reason: reason.into(),
            elapsed_ms: elapsed,
        })
        .await;

        // Recall: every path in parallel.
        let ctx = SearchCtx {
            filters: request.filters.clone(),
            now: rag_core::now(),
            viewer: options.viewer.clone(),
        };
        let mut retrievers: Vec<Arc<dyn Retriever>> = Vec::new();
        let store_recall = self.store().store_recall();
        for p in &params.paths {
            if let Some(recall) = store_recall.as_ref().filter(|r| r.serves(*p)) {
                if *p == PathKind::Dense && self.embedder().is_none() {
                    let message =
                        "no embedder is configured; the dense path did not run".to_owned();
                    warnings.push(format!("dense path failed: {message}"));
                    emit.emit(PipelineEvent::RecallFailed {
                        path: PathKind::Dense,
                        message,
                    })
                    .await;
                    continue;
                }
                retrievers.push(Arc::new(StoreRetriever {
                    recall: recall.clone(),
                    tenant: tenant.clone(),
                    kb: kb.id,
                    index: index.clone(),
                    path: *p,
                    params: params.clone(),
                    embedder: self.embedder(),
                    hnsw_threshold: self.config().vectors.hnsw_threshold,
                }));
            } else if *p != PathKind::Dense {
                retrievers.push(Arc::new(LexicalRetriever {
                    index: index.clone(),
                    path: *p,
                    params: params.clone(),
                }));
            } else if let Some(embedder) = self.embedder() {
                retrievers.push(Arc::new(DenseRetriever {
                    index: index.clone(),
                    embedder,
                }));
            } else {
                // Never silently empty: the reader sees why the dense path did not run.
                let message = "no embedder is configured; the dense path did not run".to_owned();
                warnings.push(format!("dense path failed: {message}"));
                emit.emit(PipelineEvent::RecallFailed {
                    path: PathKind::Dense,
                    message,
                })
                .await;
            }
        }
        let runs = retrievers.iter().map(|r| {
            let (analyzed, ctx) = (&analyzed, &ctx);
            async move {
                let t = Instant::now();
                let result = r.retrieve(analyzed, params.per_path_k, ctx).await;
                (r.path(), result, ms(t))
            }
        });
        // Each path's event goes out as soon as that path finishes; the recall
        // phase as a whole is timed once (the paths overlap).
        let recall_started = Instant::now();
        let mut pending: futures::stream::FuturesUnordered<_> = runs.collect();
        let mut lists = Vec::new();
        let mut path_timings = Vec::new();
        while let Some((path, result, elapsed)) = futures::StreamExt::next(&mut pending).await {
            path_timings.push(StageTiming {
                stage: format!("recall:{path}"),
                ms: elapsed,
            });
            match result {
                Ok(list) => {
                    let passages = if options.views {
                        list.hits
                            .iter()
                            .filter_map(|h| index.lexical.view(h.id, &h.matched))
                            .collect()
                    } else {
                        Vec::new()
                    };
                    emit.emit(PipelineEvent::Recall {
                        list: list.clone(),
                        passages,
                        elapsed_ms: elapsed,
                    })
                    .await;
                    lists.push(list);
                }
                Err(e) => {
                    warnings.push(format!("{path} path failed: {e}"));
                    emit.emit(PipelineEvent::RecallFailed {
                        path,
                        message: e.to_string(),
                    })
                    .await;
                }
            }
        }

        drop(pending);
        timings.push(StageTiming {
            stage: "recall".into(),
            ms: ms(recall_started),
        });
        // Fusion sees the lists in the request's path order, whatever order they finished in.
        lists.sort_by_key(|l| params.paths.iter().position(|p| *p == l.path));

        let t = Instant::now();
        let mut fusion = params.fusion;
        let dense_took_part = lists
            .iter()
            .any(|l| l.path == PathKind::Dense && !l.hits.is_empty());
        let interpolation_reason = if fusion.lexical_interpolation.is_some() {
            Some("set by the request".to_owned())
        } else if fusion.auto_interpolation && dense_took_part {
            let (applied, why) = lambda_after_recall(
                (lambda, reason),
                &analyzed,
                index.lexical.language(),
                &lists,
            );
            fusion.lexical_interpolation = Some(applied);
            Some(why)
        } else {
            None
        };
        let fused = RrfFuser::new(fusion).fuse(&lists);
        let elapsed = ms(t);
        timings.push(StageTiming {
            stage: "fused".into(),
            ms: elapsed,
        });
        emit.emit(PipelineEvent::Fused {
            hits: fused.hits.clone(),
            dropped: fused.dropped.clone(),
            max_score: fused.max_score,
            k: fusion.k,
            lexical_interpolation: fusion.lexical_interpolation,
            interpolation_reason,
            elapsed_ms: elapsed,
        })
        .await;

        let t = Instant::now();
        let reranker: Arc<dyn rag_core::Reranker> = if params.rerank {
            self.inner.components.reranker.clone()
        } else {
            Arc::new(rag_core::IdentityReranker)
        };
        let candidates: Vec<rag_core::RerankCandidate> = fused
            .hits
            .iter()
            .map(|h| rag_core::RerankCandidate {
                hit: h.clone(),
                text: index
                    .lexical
                    .view(h.id, &[])
                    .map(|v| format!("{}\n{}", v.title, v.body))
                    .unwrap_or_default(),
            })
            .collect();
        let mut skipped = None;
        let mut moves = Vec::new();
        let reranked = if !params.rerank {
            skipped = Some("rerank skipped: turned off for this request".to_owned());
            fused
                .hits
                .iter()
                .take(params.rerank_top_k)
                .cloned()
                .collect()
        } else {
            match reranker
                .rerank(&analyzed, candidates, params.rerank_top_k)
                .await
            {
                Ok(r) => {
                    moves = r
                        .iter()
                        .enumerate()
                        .map(|(i, h)| rag_core::RerankMove {
                            id: h.hit.id,
                            from: h.hit.rank,
                            to: i as u32 + 1,
                            score: h.score,
                        })
                        .collect();
                    r.into_iter()
                        .enumerate()
                        .map(|(i, h)| FusedHit {
                            rank: i as u32 + 1,
                            ..h.hit
                        })
                        .collect::<Vec<_>>()
                }
                Err(e) => {
                    let reason = format!(
                        "rerank skipped: {} failed: {e}; the fused order is kept",
                        reranker.name()
                    );
                    warnings.push(reason.clone());
                    skipped = Some(reason);
                    fused
                        .hits
                        .iter()
                        .take(params.rerank_top_k)
                        .cloned()
                        .collect()
                }
            }
        };
        let elapsed = ms(t);
        timings.push(StageTiming {
            stage: "reranked".into(),
            ms: elapsed,
        });
        emit.emit(PipelineEvent::Reranked {
            reranker: reranker.name().into(),
            hits: reranked.clone(),
            skipped,
            moves,
            elapsed_ms: elapsed,
        })
        .await;

        // Context: numbered sources within the knowledge base's budget.
        let t = Instant::now();
        let packed = if options.views || request.generate {
            let candidates: Vec<rag_answer::PackCandidate> = reranked
                .iter()
                .filter_map(|h| {
                    let matched: Vec<String> = lists
                        .iter()
                        .flat_map(|l| {
                            l.hits
                                .iter()
                                .filter(|x| x.id == h.id)
                                .flat_map(|x| x.matched.iter().cloned())
                        })
                        .collect();
                    index
                        .lexical
                        .view(h.id, &matched)
                        .map(|passage| rag_answer::PackCandidate {
                            hit: h.clone(),
                            passage,
                        })
                })
                .collect();
            let profile = match kb.settings.answer.profile.as_str() {
                "auto" => {
                    let faq_like = candidates
                        .first()
                        .is_some_and(|c| c.passage.kind != rag_core::PassageKind::Chunk);
                    if faq_like {
                        rag_answer::PackProfile::faq()
                    } else {
                        rag_answer::PackProfile::document()
                    }
                }
                name => rag_answer::PackProfile::named(name).unwrap_or_default(),
            };
            rag_answer::pack(&candidates, &profile)
        } else {
            rag_answer::pack(&[], &rag_answer::PackProfile::default())
        };
        let elapsed = ms(t);
        timings.push(StageTiming {
            stage: "context_assembled".into(),
            ms: elapsed,
        });
        emit.emit(PipelineEvent::ContextAssembled {
            sources: packed.sources.clone(),
            profile: packed.profile.name.clone(),
            dropped: packed
                .dropped
                .iter()
                .map(|d| rag_core::ContextDropped {
                    id: d.id,
                    rank: d.rank,
                    reason: d.reason.to_string(),
                })
                .collect(),
            elapsed_ms: elapsed,
        })
        .await;

        let answer = if request.generate {
            let t = Instant::now();
            let out = self
                .answer(
                    &request.query,
                    &analyzed,
                    &index,
                    &reranked,
                    &lists,
                    &packed.sources,
                    &kb.settings.answer,
                    &mut warnings,
                    emit,
                )
                .await?;
            timings.push(StageTiming {
                stage: "answered".into(),
                ms: ms(t),
            });
            Some(out)
        } else {
            None
        };

        tracing::info!(
            kb = %kb.name,
            language = ?analyzed.language,
            paths = lists.len(),
            fused = fused.hits.len(),
            top = ?reranked.first().map(|h| h.id.to_string()),
            kb_miss = answer.as_ref().is_some_and(|a| a.kb_miss),
            warnings = warnings.len(),
            ms = ms(started),
            "query done"
        );
        let total_ms = ms(started);
        if options.log {
            let record = rag_core::QueryLogRecord {
                id: query_id,
                tenant: tenant.clone(),
                kb: kb.id,
                kb_name: kb.name.clone(),
                conversation_id: request.conversation_id.clone(),
                created_at: rag_core::now(),
                query: request.query.clone(),
                rewritten_query: rewrite.as_ref().map(|r| r.0.clone()),
                params: params.clone(),
                filters: request.filters.clone(),
                fused: fused
                    .hits
                    .iter()
                    .map(|h| rag_core::LoggedHit {
                        id: h.id,
                        title: index
                            .lexical
                            .passage(h.id)
                            .map(|p| p.title.clone())
                            .unwrap_or_default(),
                        rank: h.rank,
                        normalized: h.normalized,
                        path_ranks: h.contributions.iter().map(|c| (c.path, c.rank)).collect(),
                    })
                    .collect(),
                answer: answer.as_ref().map(|a| a.text.clone()),
                generator: answer.as_ref().map(|a| a.generator.clone()),
                model: answer.as_ref().and_then(|a| a.model.clone()),
                top1_cosine: lists
                    .iter()
                    .find(|l| l.path == PathKind::Dense)
                    .and_then(|l| l.hits.first())
                    .map(|h| h.score),
                top_fused_score: reranked.first().map(|h| h.normalized),
                cited: answer.as_ref().map(|a| a.cited.clone()).unwrap_or_default(),
                kb_miss: answer.as_ref().is_some_and(|a| a.kb_miss),
                timings: timings.clone(),
                total_ms,
                usage: answer.as_ref().and_then(|a| a.usage),
                feedback: None,
                fired_synonyms: fired_groups(&lists),
                owner: options.viewer.row_owner(),
            };
            if let Err(e) = self.store().log_query(&record).await {
                tracing::error!(error = %e, "the query log could not be written");
                warnings.push(
                    "the query log could not be written; the details are in the server log".into(),
                );
            }
        }
        // Warnings quote components' errors: no credential in a URL goes out.
        let warnings = warnings
            .iter()
            .map(|w| rag_core::redact::redact_text(w))
            .collect();
        emit.emit(PipelineEvent::Done {
            timings,
            paths: path_timings,
            total_ms,
            warnings,
        })
        .await;
        Ok(PipelineOutput {
            analyzed,
            lists,
            fused,
            reranked,
        })
    }
}

/// The synonym groups the synonym path fired, from its notes
/// ("said → other, other").
fn fired_groups(lists: &[RankedList]) -> Vec<Vec<String>> {
    lists
        .iter()
        .filter(|l| l.path == PathKind::Synonym)
        .flat_map(|l| l.notes.iter())
        .filter_map(|n| n.split_once(" → "))
        .map(|(said, others)| {
            std::iter::once(said.trim().to_owned())
                .chain(others.split(", ").map(|o| o.trim().to_owned()))
                .collect()
        })
        .collect()
}

/// A query id: a time-ordered UUID.
fn uuid_like() -> String {
    uuid::Uuid::now_v7().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rag_core::{FaqId, Hit, PassageId};

    fn query(language: Language) -> AnalyzedQuery {
        AnalyzedQuery {
            raw: String::new(),
            normalized: String::new(),
            language,
            tokens: Vec::new(),
            key_terms: Vec::new(),
        }
    }

    fn bm25(scores: &[f64]) -> Vec<RankedList> {
        let hits = scores
            .iter()
            .enumerate()
            .map(|(i, s)| Hit {
                id: PassageId::Faq(FaqId::generate()),
                rank: i as u32 + 1,
                score: *s,
                matched: vec![],
            })
            .collect();
        vec![RankedList {
            path: PathKind::Bm25,
            hits,
            notes: vec![],
        }]
    }

    #[test]
    fn a_clear_bm25_winner_leans_lexical_and_says_why() {
        let (lambda, why) = lambda_after_recall(
            (0.5, "a balanced question"),
            &query(Language::Zh),
            Language::Zh,
            &bm25(&[20.0, 10.0, 9.0]),
        );
        assert_eq!(lambda, CONFIDENT_LEXICAL_LAMBDA);
        assert!(
            why.contains("50 %") && why.contains("a balanced question"),
            "{why}"
        );
    }

    #[test]
    fn a_close_race_keeps_the_suggestion() {
        let (lambda, why) = lambda_after_recall(
            (0.5, "a balanced question"),
            &query(Language::En),
            Language::En,
            &bm25(&[20.0, 15.0]),
        );
        assert_eq!((lambda, why.as_str()), (0.5, "a balanced question"));
    }

    #[test]
    fn across_languages_and_without_a_runner_up_bm25_is_not_trusted() {
        let across = lambda_after_recall(
            (0.2, "across"),
            &query(Language::Zh),
            Language::En,
            &bm25(&[20.0, 1.0]),
        );
        assert_eq!(across.0, 0.2);
        let single = lambda_after_recall(
            (0.5, "one hit"),
            &query(Language::Zh),
            Language::Zh,
            &bm25(&[20.0]),
        );
        assert_eq!(single.0, 0.5);
        let none = lambda_after_recall((0.5, "no list"), &query(Language::Zh), Language::Zh, &[]);
        assert_eq!(none.0, 0.5);
    }
}
