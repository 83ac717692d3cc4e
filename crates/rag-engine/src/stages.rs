//! The stages of one query run, each a function over the run's context
//! ([`Run`]): the follow-up rewrite, recall on every path, fusion, rerank,
//! context packing and the query-log row. `Engine::run_into` calls them in
//! order; each emits its own event.

use crate::emit::EventSink;
use crate::engine::{Engine, KbIndex};
use crate::lambda::lambda_after_recall;
use crate::pipeline::QueryOptions;
use crate::retrievers::{DenseRetriever, LexicalRetriever};
use rag_core::{
    AnalyzedQuery, CoreError, Fused, FusedHit, Fuser, KnowledgeBase, PathKind, PipelineEvent,
    QueryRequest, RankedList, RetrievalParams, Retriever, SearchCtx, StageTiming, TenantId,
};
use rag_fusion::Fusion;
use std::sync::Arc;
use std::time::Instant;

/// What every stage of one run reads, and the timings and warnings they add to.
pub(crate) struct Run<'r> {
    pub(crate) tenant: &'r TenantId,
    pub(crate) request: &'r QueryRequest,
    pub(crate) options: &'r QueryOptions,
    pub(crate) kb: KnowledgeBase,
    pub(crate) params: RetrievalParams,
    /// Where λ came from.
    pub(crate) provenance: rag_core::Provenance,
    pub(crate) index: Arc<KbIndex>,
    /// The passages the query has read so far (`passages.rs`).
    pub(crate) fetched: crate::passages::Fetched,
    pub(crate) timings: Vec<StageTiming>,
    pub(crate) warnings: Vec<String>,
}

/// A follow-up's standalone query and how it was obtained (`llm`, or the
/// heuristic's method).
pub(crate) type Rewrite = Option<(String, String)>;

pub(crate) fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

impl Engine {
    /// A follow-up in a conversation, rewritten into a standalone query from
    /// the earlier turns in the query log.
    pub(crate) async fn rewrite_stage(&self, run: &mut Run<'_>) -> Result<Rewrite, CoreError> {
        // A follow-up in a conversation is rewritten into a standalone query
        // from the earlier turns in the query log.
        // (standalone query, how it was obtained)
        let mut rewrite: Option<(String, String)> = None;
        if let Some(conv) = &run.request.conversation_id {
            let filter = rag_core::LogFilter {
                conversation_id: Some(conv.clone()),
                limit: 4,
                viewer: run.options.viewer.clone(),
                ..Default::default()
            };
            let mut turns: Vec<rag_answer::Turn> = self
                .store()
                .query_log(run.tenant, run.kb.id, &filter)
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
                    match crate::answer::llm_rewrite(generator.as_ref(), &turns, &run.request.query)
                        .await
                    {
                        Ok(Some(q)) => rewrite = Some((q, "llm".to_owned())),
                        Ok(None) => {}
                        Err(e) => run.warnings.push(format!(
                            "the LLM could not rewrite the follow-up, the heuristic did: {e}"
                        )),
                    }
                }
                if rewrite.is_none() {
                    let (engine, q) = (self.clone(), run.request.query.clone());
                    rewrite = tokio::task::spawn_blocking(move || {
                        rag_answer::rewrite_followup(&engine.inner.analyzer, &turns, &q)
                    })
                    .await
                    .map_err(|e| CoreError::Component {
                        component: "follow-up rewrite".into(),
                        message: e.to_string(),
                    })?
                    .map(|r| (r.query, r.method.as_str().to_owned()));
                }
            }
        }
        Ok(rewrite)
    }

    /// Recall: every path in parallel, each path's event as soon as it
    /// finishes; the lists in the request's path order, and each path's time.
    pub(crate) async fn recall_stage(
        &self,
        run: &mut Run<'_>,
        analyzed: &AnalyzedQuery,
        emit: &mut EventSink<'_>,
    ) -> Result<(Vec<RankedList>, Vec<StageTiming>), CoreError> {
        // Recall: every path in parallel.
        let ctx = SearchCtx {
            filters: run.request.filters.clone(),
            now: rag_core::now(),
            viewer: run.options.viewer.clone(),
        };
        let mut retrievers: Vec<Arc<dyn Retriever>> = Vec::new();
        let store_recall = self.store().store_recall();
        for p in &run.params.paths {
            if *p == PathKind::SecondDense {
                // Scores what the others found, after them (`second.rs`).
                continue;
            }
            if let Some(recall) = store_recall.as_ref().filter(|r| r.serves(*p)) {
                if *p == PathKind::Dense && self.embedder().is_none() {
                    let message =
                        "no embedder is configured; the dense path did not run".to_owned();
                    run.warnings.push(format!("dense path failed: {message}"));
                    emit.emit(PipelineEvent::RecallFailed {
                        path: PathKind::Dense,
                        message,
                    })
                    .await;
                    continue;
                }
                retrievers.push(Arc::new(self.store_retriever(
                    recall.clone(),
                    (run.tenant, run.kb.id),
                    &run.index,
                    *p,
                    &run.params,
                )));
            } else if *p != PathKind::Dense {
                retrievers.push(Arc::new(LexicalRetriever {
                    index: run.index.clone(),
                    path: *p,
                    params: run.params.clone(),
                    dictionary: self.dictionary(),
                }));
            } else if let Some(embedder) = self.embedder() {
                retrievers.push(Arc::new(DenseRetriever {
                    index: run.index.clone(),
                    embedder,
                    sentences: self.stored_sentences(run.tenant, run.kb.id),
                }));
            } else {
                // Never silently empty: the reader sees why the dense path did not run.
                let message = "no embedder is configured; the dense path did not run".to_owned();
                run.warnings.push(format!("dense path failed: {message}"));
                emit.emit(PipelineEvent::RecallFailed {
                    path: PathKind::Dense,
                    message,
                })
                .await;
            }
        }
        // The second model embeds the question while the paths run.
        let second_query = self.start_second_query(run, analyzed);
        let k = run.params.per_path_k;
        // The convex rule normalises the dense scores against the one at rank
        // DEPTH, so that path goes at least that deep.
        let dense_k = dense_k(&run.params);
        let runs = retrievers.iter().map(|r| {
            let ctx = &ctx;
            let k = if r.path() == PathKind::Dense {
                dense_k
            } else {
                k
            };
            async move {
                let t = Instant::now();
                let result = r.retrieve(analyzed, k, ctx).await;
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
                    let passages = if run.options.views {
                        self.fetch_passages(
                            (run.tenant, run.kb.id),
                            &run.index,
                            list.hits.iter().map(|h| h.id),
                            &mut run.fetched,
                        )
                        .await?;
                        list.hits
                            .iter()
                            .filter_map(|h| {
                                let p = run.fetched.get(&h.id)?;
                                Some(run.index.lexical.view_of(p, &h.matched))
                            })
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
                    run.warnings.push(format!("{path} path failed: {e}"));
                    emit.emit(PipelineEvent::RecallFailed {
                        path,
                        message: e.to_string(),
                    })
                    .await;
                }
            }
        }

        drop(pending);
        run.timings.push(StageTiming {
            stage: "recall".into(),
            ms: ms(recall_started),
        });
        if let Some(list) = self.second_stage(run, &lists, second_query, emit).await? {
            lists.push(list);
        }
        // Fusion sees the lists in the request's path order, whatever order they finished in.
        lists.sort_by_key(|l| run.params.paths.iter().position(|p| *p == l.path));

        Ok((lists, path_timings))
    }

    /// Fusion, with λ applied (as the request or the knowledge base set it,
    /// or as suggested and checked against recall).
    pub(crate) async fn fuse_stage(
        &self,
        run: &mut Run<'_>,
        analyzed: &AnalyzedQuery,
        (lambda, reason): (f64, &'static str),
        lists: &[RankedList],
        emit: &mut EventSink<'_>,
    ) -> Fused {
        let t = Instant::now();
        let mut fusion = run.params.fusion;
        let dense_took_part = lists
            .iter()
            .any(|l| l.path == PathKind::Dense && !l.hits.is_empty());
        let mut second_weight_factor = None;
        let interpolation_reason = if fusion.lexical_interpolation.is_some() {
            Some(match run.provenance.lexical_interpolation {
                rag_core::Origin::Request => "set by the request".to_owned(),
                _ if run.request.params.is_some() => {
                    "set by the parameters the request supplied (a replay: the logged run's)"
                        .to_owned()
                }
                _ => "set in the knowledge base's settings".to_owned(),
            })
        } else if fusion.auto_interpolation
            && dense_took_part
            && fusion.rule == rag_core::FusionRule::Convex
        {
            // The convex rule reads each path's confidence from its scores;
            // the split changes only for FAQ matching and when the second
            // embedder scored the candidates (see crate::lambda).
            let (applied, why, factor) =
                crate::lambda::convex_after_recall((lambda, reason), lists);
            fusion.lexical_interpolation = Some(applied);
            fusion.weights.second_dense *= factor;
            second_weight_factor = (factor != 1.0).then_some(factor);
            Some(why)
        } else if fusion.auto_interpolation && dense_took_part {
            let (applied, why) = lambda_after_recall(
                (lambda, reason),
                analyzed,
                run.index.lexical.language(),
                lists,
            );
            fusion.lexical_interpolation = Some(applied);
            Some(why)
        } else {
            None
        };
        // The convex rule combines lexical and dense evidence; lexical paths
        // alone are fused by ranks, as lexical mode was tuned.
        let lexical_only = fusion.rule == rag_core::FusionRule::Convex && !dense_took_part;
        if lexical_only {
            fusion.rule = rag_core::FusionRule::Rrf;
        }
        let fused = Fusion::new(fusion).fuse(lists);
        let rule_reason = if lexical_only {
            "weighted reciprocal rank fusion: the convex rule combines lexical and dense scores, and the dense path returned nothing here, so the lexical paths are fused by their ranks (as lexical mode was tuned)".to_owned()
        } else {
            crate::fusion_rule::rule_reason(fusion.rule, run.provenance.fusion_rule)
        };
        let elapsed = ms(t);
        run.timings.push(StageTiming {
            stage: "fused".into(),
            ms: elapsed,
        });
        emit.emit(PipelineEvent::Fused {
            hits: fused.hits.clone(),
            dropped: fused.dropped.clone(),
            max_score: fused.max_score,
            k: fusion.k,
            rule: Some(fusion.rule),
            rule_reason: Some(rule_reason),
            lexical_interpolation: fusion.lexical_interpolation,
            interpolation_reason,
            second_weight_factor,
            elapsed_ms: elapsed,
        })
        .await;

        fused
    }

    /// Rerank (or the fused order when it is off or fails).
    pub(crate) async fn rerank_stage(
        &self,
        run: &mut Run<'_>,
        analyzed: &AnalyzedQuery,
        fused: &Fused,
        emit: &mut EventSink<'_>,
    ) -> Result<Vec<FusedHit>, CoreError> {
        let t = Instant::now();
        // The fused passages' texts: for the reranker, the context, the
        // answer and the log's titles.
        let opts = run.options;
        if run.params.rerank || opts.views || opts.log || run.request.generate {
            self.fetch_passages(
                (run.tenant, run.kb.id),
                &run.index,
                fused.hits.iter().map(|h| h.id),
                &mut run.fetched,
            )
            .await?;
        }
        let reranker: Arc<dyn rag_core::Reranker> = if run.params.rerank {
            self.inner.components.reranker.clone()
        } else {
            Arc::new(rag_core::IdentityReranker)
        };
        let candidates: Vec<rag_core::RerankCandidate> = fused
            .hits
            .iter()
            .map(|h| rag_core::RerankCandidate {
                hit: h.clone(),
                text: run
                    .fetched
                    .get(&h.id)
                    .map(|p| format!("{}\n{}", p.title, p.body))
                    .unwrap_or_default(),
            })
            .collect();
        let mut skipped = None;
        let mut moves = Vec::new();
        let reranked = if !run.params.rerank {
            skipped = Some("rerank skipped: turned off for this request".to_owned());
            fused
                .hits
                .iter()
                .take(run.params.rerank_top_k)
                .cloned()
                .collect()
        } else {
            match reranker
                .rerank(analyzed, candidates, run.params.rerank_top_k)
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
                    run.warnings.push(reason.clone());
                    skipped = Some(reason);
                    fused
                        .hits
                        .iter()
                        .take(run.params.rerank_top_k)
                        .cloned()
                        .collect()
                }
            }
        };
        let elapsed = ms(t);
        run.timings.push(StageTiming {
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

        Ok(reranked)
    }

    /// Context: numbered sources within the knowledge base's budget.
    pub(crate) async fn pack_stage(
        &self,
        run: &mut Run<'_>,
        lists: &[RankedList],
        reranked: &[FusedHit],
        emit: &mut EventSink<'_>,
    ) -> rag_answer::Packed {
        // Context: numbered sources within the knowledge base's budget.
        let t = Instant::now();
        let packed = if run.options.views || run.request.generate {
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
                    let p = run.fetched.get(&h.id)?;
                    Some(rag_answer::PackCandidate {
                        hit: h.clone(),
                        passage: run.index.lexical.view_of(p, &matched),
                    })
                })
                .collect();
            let profile = match run.kb.settings.answer.profile.as_str() {
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
        run.timings.push(StageTiming {
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

        packed
    }
}

/// How deep the dense path searches: the per-path k, and for the convex
/// rule at least the rank its scores are normalised against.
pub(crate) fn dense_k(params: &rag_core::RetrievalParams) -> usize {
    let k = params.per_path_k;
    match params.fusion.rule {
        rag_core::FusionRule::Convex => k.max(rag_fusion::convex::DEPTH),
        rag_core::FusionRule::Rrf => k,
    }
}
