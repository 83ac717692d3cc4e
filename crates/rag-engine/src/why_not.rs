//! "Why not this one?": where one expected entry fell in every recall path
//! of a query, in fusion, rerank and context packing.
//!
//! The query runs through the ordinary pipeline (no log row, no answer);
//! then each path that ran is scored again without its per-path cut, so
//! an entry beyond `k` reports its true rank. Scoring runs on a blocking
//! thread. An entry the caller may not see is reported exactly like one
//! that does not exist. When the store holds the text and runs the paths
//! (PostgreSQL), the store scores them again, to every passage.

use crate::engine::KbIndex;
use crate::pipeline::QueryOptions;
use crate::Engine;
use rag_core::{
    AnalyzedQuery, Contribution, CoreError, Filters, FusionRule, Passage, PassageId, PathKind,
    PipelineEvent, QueryRequest, RankedList, RetrievalParams, TenantId, Timestamp, UserError,
    Viewer,
};
use rag_lexical::Filter;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::sync::Arc;

/// Where the entry fell in one recall path.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PathVerdict {
    /// The path.
    pub path: PathKind,
    /// `returned` (in the path's list), `cut_by_k` (scored, ranked beyond
    /// the per-path k), `filtered` (a filter excluded it), `no_match` (it
    /// does not match the query on this path), `below_threshold` (fuzzy:
    /// no term within the typo threshold) or `not_scored` (the path could
    /// not be scored again, e.g. the dense path without vectors).
    pub status: String,
    /// Its true rank in the path (1 + number of visible passages scoring
    /// higher), when it scored at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// Its score in the path, when it scored at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// The path's per-path k.
    pub k: usize,
    /// Query terms the entry does not contain (lexical paths).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_terms: Vec<String>,
    /// The filter that excluded it: `status`, `validity`, `tags`,
    /// `created_after`, `created_before` or `owner`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// A human-readable explanation.
    pub reason: String,
}

/// The whole explanation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WhyNot {
    /// The entry (as query hits name it).
    pub id: PassageId,
    /// The entry's title.
    pub title: String,
    /// One verdict per path that ran, in the request's path order.
    pub paths: Vec<PathVerdict>,
    /// The fusion rule that ran.
    pub fusion_rule: Option<FusionRule>,
    /// Its rank after fusion, if fusion kept it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fused_rank: Option<u32>,
    /// Its fused score, if it was a fusion candidate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fused_score: Option<f64>,
    /// Per-path contributions to its fused score.
    pub contributions: Vec<Contribution>,
    /// Why fusion dropped it (top-k cut or score threshold), if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fusion_dropped: Option<String>,
    /// Whether rerank dropped it (it was fused but is not in the reranked list).
    pub rerank_dropped: bool,
    /// Its rank after rerank, if kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reranked_rank: Option<u32>,
    /// Its source number in the packed context, if packed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_source: Option<u32>,
    /// Why context packing left it out, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_dropped: Option<String>,
}

fn not_found(id: &str) -> CoreError {
    UserError::NotFound {
        what: "entry",
        id: id.to_owned(),
    }
    .into()
}

/// The first filter that excludes the passage, if any.
pub(crate) fn excluded_by(p: &Passage, filters: &Filters, now: Timestamp) -> Option<&'static str> {
    if !p.searchable {
        return Some("status");
    }
    if !p.valid_at(filters.as_of.unwrap_or(now)) {
        return Some("validity");
    }
    if filters.created_after.is_some_and(|t| p.created_at < t) {
        return Some("created_after");
    }
    if filters.created_before.is_some_and(|t| p.created_at > t) {
        return Some("created_before");
    }
    let want: Vec<String> = filters
        .tags
        .iter()
        .map(|t| t.trim().to_lowercase())
        .filter(|t| !t.is_empty())
        .collect();
    if !want
        .iter()
        .all(|w| p.tags.iter().any(|h| h.to_lowercase() == *w))
    {
        return Some("tags");
    }
    None
}

/// Every term of a passage's fields.
fn term_set(terms: &rag_lexical::PassageTerms) -> HashSet<&str> {
    terms
        .fields
        .iter()
        .flatten()
        .map(|(t, _)| t.as_str())
        .collect()
}

/// The query terms the passage does not contain, as the path reads them.
fn missing_terms(index: &KbIndex, q: &AnalyzedQuery, p: &Passage, path: PathKind) -> Vec<String> {
    let terms = rag_lexical::passage_terms(index.lexical.analyzer(), p);
    let mut seen = HashSet::new();
    if path == PathKind::Substring || path == PathKind::Fact {
        return q
            .key_terms
            .iter()
            .filter(|t| !terms.match_text.contains(t.as_str()) && seen.insert(t.to_string()))
            .cloned()
            .collect();
    }
    let have = term_set(&terms);
    // Stop words only score: one missing is not why a passage was not found.
    q.tokens
        .iter()
        .filter(|t| t.kind.retrieves())
        .filter(|t| !have.contains(t.text.as_str()) && seen.insert(t.text.clone()))
        .map(|t| t.text.clone())
        .collect()
}

/// The translations of the query's words that the passage does not contain.
fn missing_translations(
    index: &KbIndex,
    q: &AnalyzedQuery,
    p: &Passage,
    dict: &rag_text::Bilingual,
) -> Vec<String> {
    let terms = rag_lexical::passage_terms(index.lexical.analyzer(), p);
    let have = term_set(&terms);
    index
        .lexical
        .translated_terms(dict, q)
        .map(|(t, _)| t)
        .unwrap_or_default()
        .into_iter()
        .filter(|t| !have.contains(t.text.as_str()))
        .map(|t| t.text)
        .collect()
}

/// Why the translated path could not return a passage written in the
/// question's own language, or in both (`None` for one in the other
/// language).
fn other_language_only(index: &KbIndex, q: &AnalyzedQuery, p: &Passage) -> Option<String> {
    let wanted = rag_lexical::other_language(q.language);
    if wanted == rag_core::Language::Unknown {
        return None;
    }
    let terms = rag_lexical::passage_terms(index.lexical.analyzer(), p);
    let (han, latin) = rag_lexical::script_of(&terms.match_text);
    let written = rag_lexical::language_of_script(han.into(), latin.into());
    let name = |l: rag_core::Language| match l {
        rag_core::Language::Zh => "in Chinese",
        rag_core::Language::En => "in English",
        rag_core::Language::Mixed => "in both languages",
        rag_core::Language::Unknown => "in neither language",
    };
    (written != wanted).then(|| {
        format!(
            "the translated path reads only passages written {} (the other language); this one is written {}",
            name(wanted),
            name(written)
        )
    })
}

/// Scores one lexical path with no cut: every visible passage that scores.
fn full_list(
    index: &KbIndex,
    run: &RunFacts,
    path: PathKind,
    params: &RetrievalParams,
    filter: &Filter,
) -> Option<RankedList> {
    let q = &run.analyzed;
    let all = index.lexical.len().max(1);
    let lex = &index.lexical;
    Some(match path {
        PathKind::Bm25 => lex.bm25(q, all, &params.bm25, filter),
        PathKind::Substring => lex.substring(q, all, filter),
        PathKind::Fuzzy => lex.fuzzy(q, all, params.fuzzy_threshold, &params.bm25, filter),
        PathKind::Synonym => lex.synonym(q, all, &params.bm25, filter),
        PathKind::Fact => lex.facts(q, all),
        PathKind::Translated => {
            lex.translated(run.dictionary.as_deref()?, q, all, &params.bm25, filter)
        }
        PathKind::Dense | PathKind::SecondDense => return None,
    })
}

/// What the pipeline run produced that the explanation reads.
struct RunFacts {
    analyzed: AnalyzedQuery,
    lists: Vec<RankedList>,
    events: Vec<PipelineEvent>,
    /// The translated path's dictionary, when it ran with one.
    dictionary: Option<Arc<rag_text::Bilingual>>,
}

/// The per-path verdicts (CPU work: call on a blocking thread). `rescored`
/// holds the paths already scored again without a cut (the dense path; with
/// a store that runs them, every path it serves); the others are scored
/// here over the in-memory index.
#[allow(clippy::too_many_arguments)]
fn verdicts(
    index: &KbIndex,
    p: &Passage,
    run: &RunFacts,
    params: &RetrievalParams,
    filters: &Filters,
    viewer: &Viewer,
    now: Timestamp,
    rescored: &[RankedList],
) -> Vec<PathVerdict> {
    let filter = Filter::new(filters, now, viewer);
    let k = params.per_path_k;
    let mut out = Vec::new();
    for list in &run.lists {
        let path = list.path;
        let mut v = PathVerdict {
            path,
            status: String::new(),
            rank: None,
            score: None,
            k,
            missing_terms: Vec::new(),
            filter: None,
            reason: String::new(),
        };
        if let Some(hit) = list.hits.iter().find(|h| h.id == p.id) {
            v.status = "returned".into();
            v.rank = Some(hit.rank);
            v.score = Some(hit.score);
            v.reason = format!("returned at rank {} of the path's top {k}", hit.rank);
            out.push(v);
            continue;
        }
        if path == PathKind::SecondDense {
            v.status = "not_scored".into();
            v.reason = "the second embedder scores only what another path found, and only passages with its vectors (English ones)".into();
            out.push(v);
            continue;
        }
        let in_store = index.store_passages.is_some() && path != PathKind::Fact;
        let full = match rescored.iter().find(|l| l.path == path) {
            Some(list) => Some(list.clone()),
            None if path == PathKind::Dense || in_store => None,
            None => full_list(index, run, path, params, &filter),
        };
        let Some(full) = full else {
            v.status = "not_scored".into();
            v.reason = "the path could not be scored again".into();
            out.push(v);
            continue;
        };
        if let Some(hit) = full.hits.iter().find(|h| h.id == p.id) {
            v.status = "cut_by_k".into();
            v.rank = Some(hit.rank);
            v.score = Some(hit.score);
            v.reason = format!("scored, but ranked {} beyond the per-path k {k}", hit.rank);
            out.push(v);
            continue;
        }
        let filtered = if path == PathKind::Fact {
            None
        } else {
            excluded_by(p, filters, now)
        };
        if let Some(f) = filtered {
            v.status = "filtered".into();
            v.filter = Some(f.into());
            v.reason = format!("excluded by the {f} filter");
        } else if path == PathKind::Dense {
            v.status = "not_scored".into();
            v.reason = "the entry has no current vector".into();
        } else if let Some(reason) = (path == PathKind::Translated)
            .then(|| other_language_only(index, &run.analyzed, p))
            .flatten()
        {
            v.status = "no_match".into();
            v.reason = reason;
        } else {
            v.missing_terms = match (path, &run.dictionary) {
                (PathKind::Translated, Some(d)) => missing_translations(index, &run.analyzed, p, d),
                _ => missing_terms(index, &run.analyzed, p, path),
            };
            if path == PathKind::Fuzzy {
                v.status = "below_threshold".into();
                v.reason = format!(
                    "no query term reads as a typo of its terms (a word or two edits away among the vocabulary's words of trigram similarity at least {})",
                    params.fuzzy_threshold
                );
            } else {
                v.status = "no_match".into();
                v.reason = if v.missing_terms.is_empty() {
                    "it does not match the query on this path".into()
                } else {
                    format!("missing query terms: {}", v.missing_terms.join(", "))
                };
            }
        }
        out.push(v);
    }
    out
}

impl Engine {
    /// Explains where the entry `entry_id` (as query hits name it, e.g.
    /// `faq:…` or `chunk:…`) fell in a query's recall paths, fusion, rerank
    /// and context packing. An entry the viewer may not see is `not_found`,
    /// exactly like an id that does not exist, and nothing is computed for it.
    pub async fn why_not(
        &self,
        tenant: &TenantId,
        mut request: QueryRequest,
        viewer: Viewer,
        entry_id: &str,
    ) -> Result<WhyNot, CoreError> {
        let id = PassageId::parse(entry_id.trim()).ok_or_else(|| not_found(entry_id))?;
        let kb = self.kb(tenant, &request.kb).await?;
        let index = self.index(tenant, &kb).await?;
        let indexed = self
            .passages_by_id((tenant, kb.id), &index, [id])
            .await?
            .remove(&id)
            .filter(|p| viewer.sees(p.owner.as_deref()));
        self.check_query(&request.query)?;
        let base = request.params.as_ref().unwrap_or(&kb.settings.retrieval);
        let (params, _) = request.overrides.apply(base);
        params.validate()?;
        let passage = match (indexed, id) {
            (Some(p), _) => p,
            // FAQ entries are tenant-wide; one waiting for review or switched
            // off is kept out of every index, so no path could return it.
            (None, PassageId::Faq(fid)) => {
                let faq = self
                    .faq(tenant, &kb.name, fid)
                    .await
                    .map_err(|_| not_found(entry_id))?;
                return Ok(unsearchable_faq(faq, &params));
            }
            (None, _) => return Err(not_found(entry_id)),
        };
        request.generate = false;
        let filters = request.filters.clone();
        // Views on: context packing runs (as for a query with an answer),
        // so the explanation can say whether packing kept the entry.
        let options = QueryOptions {
            views: true,
            log: false,
            viewer: viewer.clone(),
        };
        let mut events = Vec::new();
        let mut emit = crate::emit::EventSink::Collect(&mut events);
        let output = self.run_into(tenant, request, options, &mut emit).await?;
        drop(emit);
        let now = rag_core::now();
        let dictionary = match self.dictionary() {
            Some(d) if output.lists.iter().any(|l| l.path == PathKind::Translated) => {
                tokio::task::spawn_blocking(move || d.get().ok().cloned())
                    .await
                    .ok()
                    .flatten()
            }
            _ => None,
        };
        let run = RunFacts {
            analyzed: output.analyzed,
            lists: output.lists,
            events,
            dictionary,
        };
        let rescored = if index.store_passages.is_some() {
            let ctx = rag_core::SearchCtx {
                filters: filters.clone(),
                now,
                viewer: viewer.clone(),
            };
            self.store_full((tenant, &kb), &params, &index, &run, &ctx, id)
                .await
        } else {
            let filter = Filter::new(&filters, now, &viewer);
            self.dense_full((tenant, kb.id), &params, &index, &run, filter)
                .await
                .into_iter()
                .collect()
        };
        let (ix, p, prm, vw) = (index.clone(), passage.clone(), params.clone(), viewer);
        let (paths, run) = tokio::task::spawn_blocking(move || {
            let v = verdicts(&ix, &p, &run, &prm, &filters, &vw, now, &rescored);
            (v, run)
        })
        .await
        .map_err(|e| CoreError::Component {
            component: "why-not".into(),
            message: e.to_string(),
        })?;
        Ok(assemble(passage, paths, &run.events))
    }

    /// Every path the store ran that did not return `id`, scored again by
    /// the store to every passage (as the path ran: synonym expansion,
    /// query embedding, FAQ feedback); a path that fails is left out.
    async fn store_full(
        &self,
        (tenant, kb): (&TenantId, &rag_core::KnowledgeBase),
        params: &RetrievalParams,
        index: &Arc<KbIndex>,
        run: &RunFacts,
        ctx: &rag_core::SearchCtx,
        id: PassageId,
    ) -> Vec<RankedList> {
        use rag_core::Retriever;
        let Some(recall) = self.store().store_recall() else {
            return Vec::new();
        };
        let all = index.text_passages().max(1);
        let mut out = Vec::new();
        for list in &run.lists {
            if !recall.serves(list.path) || list.hits.iter().any(|h| h.id == id) {
                continue;
            }
            let path =
                self.store_retriever(recall.clone(), (tenant, kb.id), index, list.path, params);
            match path.retrieve(&run.analyzed, all, ctx).await {
                Ok(full) => out.push(full),
                Err(e) => {
                    tracing::debug!(path = %list.path, error = %e, "why-not: the path could not be scored again")
                }
            }
        }
        out
    }

    /// The dense path scored with no cut, when it ran and can be scored again.
    async fn dense_full(
        &self,
        (tenant, kb): (&TenantId, rag_core::KbId),
        params: &RetrievalParams,
        index: &Arc<KbIndex>,
        run: &RunFacts,
        filter: Filter,
    ) -> Option<RankedList> {
        if !run.lists.iter().any(|l| l.path == PathKind::Dense) {
            return None;
        }
        let embedder = self.embedder()?;
        let all = index.dense.as_ref()?.as_ref().ok()?.len().max(1);
        // The same list the path made (FAQ feedback included), uncut.
        // Rescored by sentences to the depth the path ran at, as it was.
        let sentences = self.stored_sentences(tenant, kb);
        crate::retrievers::dense_list(
            index,
            &embedder,
            &run.analyzed.raw,
            all,
            filter,
            sentences
                .as_ref()
                .map(|s| (s, crate::stages::dense_k(params))),
        )
        .await
        .ok()
    }
}

/// An FAQ entry no index holds because of its review status: every path
/// that would run reports the status filter.
fn unsearchable_faq(faq: rag_core::FaqEntry, params: &RetrievalParams) -> WhyNot {
    let approved = faq.status == rag_core::FaqStatus::Approved;
    let reason = if approved {
        "the entry is not in the search index yet".to_owned()
    } else {
        let status = faq.status.as_str();
        format!("the entry is {status}; only approved entries are searched")
    };
    let paths = params
        .paths
        .iter()
        .map(|&path| PathVerdict {
            path,
            status: if approved { "not_scored" } else { "filtered" }.into(),
            rank: None,
            score: None,
            k: params.per_path_k,
            missing_terms: Vec::new(),
            filter: (!approved).then(|| "status".to_owned()),
            reason: reason.clone(),
        })
        .collect();
    WhyNot {
        id: PassageId::Faq(faq.id),
        title: faq.question,
        paths,
        fusion_rule: None,
        fused_rank: None,
        fused_score: None,
        contributions: Vec::new(),
        fusion_dropped: Some(reason),
        rerank_dropped: false,
        reranked_rank: None,
        context_source: None,
        context_dropped: None,
    }
}

/// Fusion, rerank and packing, read from the run's events.
fn assemble(p: Passage, paths: Vec<PathVerdict>, events: &[PipelineEvent]) -> WhyNot {
    let mut w = WhyNot {
        id: p.id,
        title: p.title,
        paths,
        fusion_rule: None,
        fused_rank: None,
        fused_score: None,
        contributions: Vec::new(),
        fusion_dropped: None,
        rerank_dropped: false,
        reranked_rank: None,
        context_source: None,
        context_dropped: None,
    };
    for e in events {
        match e {
            PipelineEvent::Fused {
                hits,
                dropped,
                rule,
                ..
            } => {
                w.fusion_rule = *rule;
                if let Some(h) = hits.iter().find(|h| h.id == w.id) {
                    w.fused_rank = Some(h.rank);
                    w.fused_score = Some(h.score);
                    w.contributions = h.contributions.clone();
                }
                if let Some(d) = dropped.iter().find(|d| d.id == w.id) {
                    w.fused_score = Some(d.score);
                    w.fusion_dropped = Some(match &d.reason {
                        rag_core::DropReason::TopK { rank, top_k } => {
                            format!("fused rank {rank} is beyond top_k {top_k}")
                        }
                        rag_core::DropReason::Threshold {
                            normalized,
                            min_score,
                        } => format!(
                            "normalised score {normalized:.3} is below min_score {min_score}"
                        ),
                    });
                }
            }
            PipelineEvent::Reranked { hits, .. } => {
                w.reranked_rank = hits.iter().find(|h| h.id == w.id).map(|h| h.rank);
                w.rerank_dropped = w.fused_rank.is_some() && w.reranked_rank.is_none();
            }
            PipelineEvent::ContextAssembled {
                sources, dropped, ..
            } => {
                w.context_source = sources.iter().find(|s| s.passage.id == w.id).map(|s| s.n);
                w.context_dropped = dropped
                    .iter()
                    .find(|d| d.id == w.id)
                    .map(|d| d.reason.clone());
            }
            _ => {}
        }
    }
    w
}
