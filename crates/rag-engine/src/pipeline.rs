//! The query pipeline as a stream of events.

use crate::engine::Engine;
use crate::lambda::suggest_lambda;
use crate::stages::{ms, Run};
use futures::Stream;
use rag_core::{
    AnalyzedQuery, CoreError, Fused, FusedHit, PathKind, PipelineEvent, QueryRequest, RankedList,
    RetrievalParams, StageTiming, TenantId, UserError,
};
use rag_text::normalize_for_match;
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

/// The stable code of an error, as carried by the `error` event.
pub fn error_code(e: &CoreError) -> &'static str {
    e.code()
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
    ) -> Result<(RetrievalParams, rag_core::Provenance), CoreError> {
        self.check_query(&request.query)?;
        let base = request.params.as_ref().unwrap_or(kb_params);
        let (params, provenance) = request.overrides.apply(base);
        params.validate()?;
        Ok((params, provenance))
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
        let kb = self.kb(tenant, &request.kb).await?;
        let (params, provenance) = self.validate(&request, &kb.settings.retrieval)?;
        let query_id = uuid_like();
        emit.emit(PipelineEvent::QueryReceived {
            query_id: query_id.clone(),
            kb: kb.name.clone(),
            query: request.query.clone(),
            paths: params.paths.clone(),
        })
        .await;

        let index = self.index(tenant, &kb).await?;
        let mut run = Run {
            tenant,
            request: &request,
            options: &options,
            kb,
            params,
            provenance,
            index,
            fetched: Default::default(),
            timings: vec![StageTiming {
                stage: "prepare".into(),
                ms: ms(started),
            }],
            warnings: Vec::new(),
        };
        let t = Instant::now();
        let rewrite = self.rewrite_stage(&mut run).await?;
        let search_query = rewrite
            .as_ref()
            .map_or_else(|| request.query.clone(), |r| r.0.clone());
        let (ix, raw) = (run.index.clone(), search_query.clone());
        let analyzed = tokio::task::spawn_blocking(move || ix.lexical.analyze_query(&raw))
            .await
            .map_err(|e| CoreError::Component {
                component: "analyzer".into(),
                message: e.to_string(),
            })?;
        let (lambda, reason) = suggest_lambda(
            &analyzed,
            run.index.lexical.language(),
            run.params.fusion.rule,
        );
        let elapsed = ms(t);
        run.timings.push(StageTiming {
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

        // An intent's webhook may answer instead of the knowledge base.
        let routed = self
            .route_stage(&mut run, &search_query, analyzed.language, emit)
            .await;
        let (lists, path_timings, fused, reranked, answer) = match routed {
            Some(answer) => (
                Vec::new(),
                Vec::new(),
                rag_core::Fused::default(),
                Vec::new(),
                Some(answer),
            ),
            None => {
                self.answer_from_kb(&mut run, &analyzed, (lambda, reason), emit)
                    .await?
            }
        };

        tracing::info!(
            kb = %run.kb.name,
            language = ?analyzed.language,
            paths = lists.len(),
            fused = fused.hits.len(),
            top = ?reranked.first().map(|h| h.id.to_string()),
            kb_miss = answer.as_ref().is_some_and(|a| a.kb_miss),
            warnings = run.warnings.len(),
            ms = ms(started),
            "query done"
        );
        let total_ms = ms(started);
        if options.log {
            let fired_synonyms = if lists.iter().any(|l| l.path == PathKind::Synonym) {
                run.index.lexical.fired_synonym_groups(&analyzed)
            } else {
                Vec::new()
            };
            let record = rag_core::QueryLogRecord {
                id: query_id,
                tenant: run.tenant.clone(),
                kb: run.kb.id,
                kb_name: run.kb.name.clone(),
                conversation_id: run.request.conversation_id.clone(),
                created_at: rag_core::now(),
                query: run.request.query.clone(),
                rewritten_query: rewrite.as_ref().map(|r| r.0.clone()),
                params: run.params.clone(),
                filters: run.request.filters.clone(),
                fused: fused
                    .hits
                    .iter()
                    .map(|h| rag_core::LoggedHit {
                        id: h.id,
                        title: run
                            .fetched
                            .get(&h.id)
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
                timings: run.timings.clone(),
                total_ms,
                usage: answer.as_ref().and_then(|a| a.usage),
                feedback: None,
                fired_synonyms,
                owner: run.options.viewer.row_owner(),
            };
            if let Err(e) = self.store().log_query(&record).await {
                tracing::error!(error = %e, "the query log could not be written");
                run.warnings.push(
                    "the query log could not be written; the details are in the server log".into(),
                );
            }
        }
        // Warnings quote components' errors: no credential in a URL goes out.
        let warnings = run
            .warnings
            .iter()
            .map(|w| rag_core::redact::redact_text(w))
            .collect();
        emit.emit(PipelineEvent::Done {
            timings: run.timings,
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

impl Engine {
    /// Recall, fusion, rerank, packing and (when asked for) the answer from
    /// the knowledge base.
    #[allow(clippy::type_complexity)]
    async fn answer_from_kb(
        &self,
        run: &mut crate::stages::Run<'_>,
        analyzed: &rag_core::AnalyzedQuery,
        suggestion: (f64, &'static str),
        emit: &mut crate::emit::EventSink<'_>,
    ) -> Result<
        (
            Vec<rag_core::RankedList>,
            Vec<StageTiming>,
            rag_core::Fused,
            Vec<rag_core::FusedHit>,
            Option<crate::answer::AnswerOutcome>,
        ),
        CoreError,
    > {
        let (lists, path_timings) = self.recall_stage(run, analyzed, emit).await?;
        let fused = self
            .fuse_stage(run, analyzed, suggestion, &lists, emit)
            .await;
        let reranked = self.rerank_stage(run, analyzed, &fused, emit).await?;
        let packed = self.pack_stage(run, &lists, &reranked, emit).await;
        let answer = if run.request.generate {
            let t = Instant::now();
            let out = self
                .answer(
                    &run.request.query,
                    analyzed,
                    &run.index,
                    &run.fetched,
                    &reranked,
                    &lists,
                    &packed.sources,
                    &run.kb.settings.answer,
                    &mut run.warnings,
                    emit,
                )
                .await?;
            run.timings.push(StageTiming {
                stage: "answered".into(),
                ms: ms(t),
            });
            Some(out)
        } else {
            None
        };
        Ok((lists, path_timings, fused, reranked, answer))
    }
}

/// A query id: a time-ordered UUID.
fn uuid_like() -> String {
    uuid::Uuid::now_v7().to_string()
}
